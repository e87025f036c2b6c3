//! Blocks of 1..2 MiB two to a chunk (`large.rs`'s pair chunks): the second such block
//! takes the high half of the first one's chunk, each keeps its bytes while the other is
//! written, resized and freed, a resize that outgrows the half moves the block, `calloc`
//! of a reused half is zero (cleared, or given back by `trim` while free), and a chunk
//! whose halves are both free goes to the cache of freed mappings. One test, so that no other test of this process takes a half meanwhile.
//!
//! The blocks whose way to the cache is checked are freed by a thread of their own, which
//! makes no small allocation and so has no heap: it keeps no block for itself
//! (`thread_cache::keep_large`), and its frees go to the cache.

use hakmem_core::{alloc, alloc_zeroed, dealloc, realloc, stats, usable_size, CHUNK_SIZE};

const MIB: usize = 1 << 20;
const SIZE: usize = 3 * MIB / 2;

/// Write `byte` over `[p, p + n)`.
///
/// # Safety
/// The range is writable.
unsafe fn fill(p: *mut u8, n: usize, byte: u8) {
    // SAFETY: by the caller.
    unsafe { core::ptr::write_bytes(p, byte, n) };
}

/// Free `p` (of `size` bytes, alignment 16) on a thread of its own, which keeps nothing.
fn free_elsewhere(p: *mut u8, size: usize) {
    let p = p as usize;
    // SAFETY: by the callers, a live block of `size` bytes that they give up.
    std::thread::spawn(move || unsafe { dealloc(p as *mut u8, size, 16) })
        .join()
        .expect("the freeing thread");
}

/// Whether every 4096th byte of `[p, p + n)`, and the last, hold `byte`.
///
/// # Safety
/// The range is readable.
unsafe fn holds(p: *const u8, n: usize, byte: u8) -> bool {
    // SAFETY: by the caller.
    (0..n)
        .step_by(4096)
        .chain([n - 1])
        .all(|k| unsafe { *p.add(k) } == byte)
}

fn chunk_of(p: *const u8) -> usize {
    p as usize & !(CHUNK_SIZE - 1)
}

#[test]
fn blocks_of_one_to_two_mib_share_a_chunk_two_by_two() {
    let a = alloc(SIZE, 16);
    let b = alloc(SIZE, 16);
    assert!(!a.is_null() && !b.is_null());
    assert_eq!(
        chunk_of(a),
        chunk_of(b),
        "the second block takes the other half"
    );
    assert_eq!((a as usize).abs_diff(b as usize), CHUNK_SIZE / 2);
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    assert!(usable_size(lo) >= SIZE && usable_size(hi) >= SIZE);
    assert!(
        usable_size(lo) <= CHUNK_SIZE / 2,
        "a half holds at most half a chunk"
    );
    // SAFETY: both are live blocks of at least their usable sizes.
    unsafe {
        fill(lo, usable_size(lo), 0x11);
        fill(hi, usable_size(hi), 0x22);
        assert!(holds(lo, usable_size(lo), 0x11));
    }

    // Resized within its half, a block stays; past it, it moves with its bytes.
    // SAFETY: `hi` is live, of SIZE bytes, alignment 16.
    let grown = unsafe { realloc(hi, SIZE, 16, usable_size(hi)) };
    assert_eq!(grown, hi);
    // SAFETY: as above, now of its usable size.
    let moved = unsafe { realloc(hi, usable_size(hi), 16, 3 * MIB) };
    assert!(!moved.is_null() && moved != hi);
    // SAFETY: the block's first SIZE bytes moved with it; `lo` was not touched.
    unsafe {
        assert!(holds(moved, SIZE, 0x22));
        assert!(holds(lo, usable_size(lo), 0x11));
    }

    // The freed high half serves the next block, zeroed when asked: cleared, or given
    // back to the OS by `trim` while free (the free half counts as cached meanwhile).
    let z = alloc_zeroed(SIZE, 16);
    assert_eq!(z, hi, "the free half is reused");
    // SAFETY: a live zeroed block of SIZE bytes.
    unsafe {
        assert!(holds(z, SIZE, 0));
        fill(z, SIZE, 0x33);
    }
    let before = stats().cached_large;
    free_elsewhere(z, SIZE);
    assert!(stats().cached_large >= before + CHUNK_SIZE / 2);
    hakmem_core::trim();
    let z = alloc_zeroed(SIZE, 16);
    assert_eq!(z, hi, "the given-back half is reused");
    // SAFETY: a live zeroed block of SIZE bytes.
    unsafe { assert!(holds(z, SIZE, 0)) };

    // Both halves free: the chunk is a cached extent (the free half counted before, the
    // whole chunk after).
    free_elsewhere(moved, 3 * MIB);
    free_elsewhere(z, SIZE);
    let with_one_half = stats().cached_large;
    free_elsewhere(lo, SIZE);
    assert!(
        stats().cached_large >= with_one_half + CHUNK_SIZE / 2,
        "an ended pair's chunk is cached ({with_one_half} -> {})",
        stats().cached_large
    );
}
