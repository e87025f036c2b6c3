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
    // Blocks of 768 KiB: 12 slabs each, at slabs 1, 13, 25, 37 and 49 of one superslab
    // (a medium span starts at any slab), which leaves 2 slabs free.
    let blocks = [0; 5].map(|_| alloc(700 * KIB, 16));
    assert!(blocks.iter().all(|b| !b.is_null()));
    // All in one superslab: spans placed at multiples of 16 slabs fitted 3.
    let chunk = |p: *mut u8| p as usize >> 22;
    assert!(
        blocks.iter().all(|&p| chunk(p) == chunk(blocks[0])),
        "medium spans left room unused: {blocks:?}"
    );
    let b = blocks[1];
    // SAFETY: a live block, given up.
    unsafe { free(b) };
    // The same size again takes it back from the thread cache.
    let again = alloc(700 * KIB, 16);
    assert_eq!(again, b, "the cached block was not handed out again");
    // SAFETY: as above.
    unsafe { free(again) };
    // A block of 640 KiB (10 slabs) fits only where `b` was, once `b`'s slabs are free:
    // the miss gives the cached block back to its span first.
    let d = alloc(600 * KIB, 16);
    assert_eq!(
        d, b,
        "the freed block's slabs were not reused for another size"
    );
    // SAFETY: live blocks, given up.
    unsafe {
        core::ptr::write_bytes(d, 1, 600 * KIB);
        free(d);
        for p in blocks.iter().filter(|&&p| p != b) {
            free(*p);
        }
    }
}
