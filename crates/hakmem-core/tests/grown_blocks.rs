//! Blocks that `realloc` grows past `GROW_LARGE_FROM` become large mappings, so that
//! further growth happens in place; a stated size at or below it always names a block
//! of a class, so the sized free needs no lookup there. Its own process: the large
//! cache starts empty, and no other test takes the extents these blocks grow into.

use hakmem_core::{alloc, dealloc, free, owner, realloc, realloc_unsized, Owner, GROW_LARGE_FROM};

const KIB: usize = 1024;

fn is_large(p: *const u8) -> bool {
    matches!(owner(p), Owner::Large { .. })
}

fn is_small(p: *const u8) -> bool {
    matches!(owner(p), Owner::Small { .. })
}

/// Write `n` bytes of a pattern that depends on the offset.
///
/// # Safety
/// `[p, p + n)` is writable.
unsafe fn fill(p: *mut u8, n: usize) {
    for i in (0..n).step_by(509) {
        // SAFETY: by the caller.
        unsafe { *p.add(i) = i as u8 ^ 0x5a };
    }
}

/// Whether [`fill`]'s pattern is still in the first `n` bytes.
///
/// # Safety
/// `[p, p + n)` is readable.
unsafe fn filled(p: *const u8, n: usize) -> bool {
    // SAFETY: by the caller.
    (0..n)
        .step_by(509)
        .all(|i| unsafe { *p.add(i) } == i as u8 ^ 0x5a)
}

#[test]
fn a_block_grown_past_the_limit_becomes_large_grows_in_place_and_shrinks_back_into_a_class() {
    let start = 96 * KIB;
    let p = alloc(start, 8);
    assert!(is_small(p), "{start} bytes is a size class");
    // SAFETY: a live block of `start` bytes.
    unsafe { fill(p, start) };

    let grown = GROW_LARGE_FROM + 1;
    // SAFETY: `p` is live, allocated with (start, 8).
    let q = unsafe { realloc(p, start, 8, grown) };
    assert!(
        is_large(q),
        "grown past the limit, a block is a large mapping"
    );
    // SAFETY: the first `start` bytes moved with the block.
    unsafe { assert!(filled(q, start)) };

    // The mapping is whole chunks: growing through the rest of the size classes and past
    // them needs no move.
    for size in [512 * KIB, 1024 * KIB, 3 * 1024 * KIB] {
        // SAFETY: `q` is live, last stated as (grown, 8) and then the previous size.
        let r = unsafe { realloc(q, grown, 8, size) };
        assert_eq!(r, q, "growth to {size} bytes stays in place");
    }
    // SAFETY: as above; the content is intact.
    unsafe { assert!(filled(q, start)) };

    // Shrunk to the limit, the block moves back into a class, as its stated size says.
    // SAFETY: `q` is live, stated as 3 MiB.
    let s = unsafe { realloc(q, 3 * 1024 * KIB, 8, GROW_LARGE_FROM) };
    assert!(is_small(s));
    // SAFETY: the first `start` bytes moved with the block.
    unsafe { assert!(filled(s, start)) };
    // SAFETY: `s` is live, stated as (GROW_LARGE_FROM, 8).
    unsafe { dealloc(s, GROW_LARGE_FROM, 8) };
}

#[test]
fn the_sized_free_of_a_grown_block_gives_back_its_mapping_not_a_class_block() {
    let p = alloc(100, 16);
    let size = GROW_LARGE_FROM + 4 * KIB;
    // SAFETY: `p` is live, allocated with (100, 16).
    let q = unsafe { realloc(p, 100, 16, size) };
    assert!(is_large(q));
    // SAFETY: `q` is live, stated as (size, 16).
    unsafe { dealloc(q, size, 16) };
    assert!(!is_large(q), "the mapping went back to the large cache");
    // Freed as if it were a block of its size's class, it would be the next block of
    // that class handed out.
    let r = alloc(size, 16);
    assert!(is_small(r));
    assert_ne!(r, q);
    // A block of that class, stated with the same size, is freed into its class.
    // SAFETY: `r` is live, allocated with (size, 16).
    unsafe { dealloc(r, size, 16) };
    assert_eq!(
        alloc(size, 16),
        r,
        "the class block came back through its cache"
    );
}

#[test]
fn c_realloc_grows_a_block_into_a_mapping_and_grows_it_in_place() {
    let p = alloc(4 * KIB, 16);
    // SAFETY: a live block of 4 KiB.
    unsafe { fill(p, 4 * KIB) };
    // SAFETY: `p` is live.
    let q = unsafe { realloc_unsized(p, 200 * KIB) };
    assert!(is_large(q));
    // SAFETY: `q` is live.
    let r = unsafe { realloc_unsized(q, 2 * 1024 * KIB) };
    assert_eq!(r, q);
    // SAFETY: the first 4 KiB moved with the block.
    unsafe {
        assert!(filled(r, 4 * KIB));
        free(r);
    }
}
