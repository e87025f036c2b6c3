//! A request of more than 128 KiB (`block::GROW_LARGE_FROM`) whose medium class has no
//! cached block takes a cached block of the next medium class, up to a quarter larger,
//! without the heap, and none of a class further up; a sized free of it (`dealloc`, which states the smaller request) finds
//! the block's own class by lookup and gives it back to that class's bin.
//!
//! Its own process with one test: the thread's cache holds only what this test freed.

use hakmem_core::{alloc, dealloc, usable_size};

const KIB: usize = 1024;

#[test]
fn a_request_takes_a_larger_cached_block_whose_sized_free_finds_its_class() {
    // Class 320 KiB.
    let big = alloc(300 * KIB, 16);
    assert!(!big.is_null());
    let own = usable_size(big);
    // SAFETY: a live block, given up with its request.
    unsafe { dealloc(big, 300 * KIB, 16) };

    // Class 256 KiB, whose bin is empty: the cached 320 KiB block, whole.
    let p = alloc(250 * KIB, 16);
    assert_eq!(
        p, big,
        "the cached block of a larger class was not handed out"
    );
    assert_eq!(usable_size(p), own);
    // SAFETY: a live block, given up with its request.
    unsafe {
        core::ptr::write_bytes(p, 1, 250 * KIB);
        dealloc(p, 250 * KIB, 16);
    }

    // The free put it back in the bin of 320 KiB, not in that of the stated 256 KiB.
    let q = alloc(300 * KIB, 16);
    assert_eq!(
        q, big,
        "the sized free put the block in the stated class's bin"
    );
    // SAFETY: a live block, given up with its request.
    unsafe { dealloc(q, 300 * KIB, 16) };
    // Class 224 KiB, two below the cached 320 KiB block: a block of its own class (its
    // miss may carve where the cached block was, once that is given back).
    let far = alloc(200 * KIB, 16);
    assert_eq!(
        usable_size(far),
        224 * KIB,
        "a request took a block two classes larger"
    );
    // A block of class 128 KiB in the cache, the next above 112 KiB.
    let near = alloc(120 * KIB, 16);
    // SAFETY: live blocks, given up with their requests.
    unsafe {
        dealloc(far, 200 * KIB, 16);
        dealloc(near, 120 * KIB, 16);
    }

    // Class 112 KiB: at most `GROW_LARGE_FROM`, whose sized free takes the stated class
    // without a lookup, so it never gets a larger block (its miss may carve where a
    // cached block was, once that is given back: its usable size tells).
    let small = alloc(100 * KIB, 16);
    assert_eq!(
        usable_size(small),
        112 * KIB,
        "a request of 100 KiB took a larger block"
    );
    // SAFETY: as above.
    unsafe { dealloc(small, 100 * KIB, 16) };
}
