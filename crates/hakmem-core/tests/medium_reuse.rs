//! Medium blocks (64 KiB..1 MiB) are spans of their own, and a thread cache keeps a few
//! of each class (one of these), until the thread's next medium allocation that misses:
//! the slabs of a freed medium block then serve the next medium block, whatever its size.
//!
//! Its own process with one test: one thread allocates from hakmem (the harness uses the
//! system allocator), so its heap holds one superslab of medium blocks laid out as below.

use hakmem_core::{alloc, free};

const KIB: usize = 1024;

#[test]
fn a_freed_medium_block_serves_the_next_size() {
    // Blocks of 768 KiB: 12 slabs each, at slabs 16, 32 and 48 of one superslab.
    let [a, b, c] = [0; 3].map(|_| alloc(700 * KIB, 16));
    assert!(!a.is_null() && !b.is_null() && !c.is_null());
    // SAFETY: a live block, given up.
    unsafe { free(b) };
    // The same size again takes it back from the thread cache.
    let again = alloc(700 * KIB, 16);
    assert_eq!(again, b, "the cached block was not handed out again");
    // SAFETY: as above.
    unsafe { free(again) };
    // A block of 896 KiB (14 slabs) fits only where `b` was, once `b`'s slabs are free:
    // the miss gives the cached block back to its span first.
    let d = alloc(850 * KIB, 16);
    assert_eq!(
        d, b,
        "the freed block's slabs were not reused for another size"
    );
    // SAFETY: live blocks, given up.
    unsafe {
        core::ptr::write_bytes(d, 1, 850 * KIB);
        free(d);
        free(a);
        free(c);
    }
}
