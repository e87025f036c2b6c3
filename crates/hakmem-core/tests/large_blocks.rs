//! Large blocks through their whole life: allocated, written, grown by realloc (the
//! mapping moves), shrunk in place, freed into the cache, reused and freed through the
//! C-style entry points. Small enough for Miri (`cargo xtask check-miri`), which checks
//! that `large.rs` reads and writes a block's header only through pointers allowed to
//! (a write through a pointer made from a shared reference, or a reference to a header
//! that `free` gives up, is undefined behaviour that Miri reports).

use hakmem_core::{alloc, dealloc, free, realloc, realloc_unsized, usable_size};

const KIB: usize = 1024;

/// Write `byte` over `[p, p + n)`.
///
/// # Safety
/// The range is writable.
unsafe fn fill(p: *mut u8, n: usize, byte: u8) {
    // SAFETY: by the caller.
    unsafe { core::ptr::write_bytes(p, byte, n) };
}

/// Whether the first, middle and last byte of `[p, p + n)` hold `byte`.
///
/// # Safety
/// The range is readable.
unsafe fn holds(p: *const u8, n: usize, byte: u8) -> bool {
    // SAFETY: by the caller.
    [0, n / 2, n - 1]
        .iter()
        .all(|&k| unsafe { *p.add(k) } == byte)
}

#[test]
fn large_blocks_grow_shrink_and_free_keeping_content() {
    let n = 2560 * KIB; // past the largest size class (1 MiB) and half a chunk
    let p = alloc(n, 16);
    assert!(!p.is_null());
    assert!(usable_size(p) >= n);
    // SAFETY: a live block of `n` bytes.
    unsafe { fill(p, n, 0x5a) };
    // Grow past the first chunk: the mapping moves.
    let big = 9 * 1024 * KIB;
    // SAFETY: `p` is a live block of `n` bytes, alignment 16.
    let q = unsafe { realloc(p, n, 16, big) };
    assert!(!q.is_null());
    assert!(usable_size(q) >= big);
    // SAFETY: the first `n` bytes moved with the block; the rest is the block's.
    unsafe {
        assert!(holds(q, n, 0x5a));
        *q.add(big - 1) = 1;
    }
    // Shrink: the block stays, its tail is given back.
    let small = 3 * 1024 * KIB;
    // SAFETY: `q` is a live block of `big` bytes.
    let r = unsafe { realloc(q, big, 16, small) };
    assert_eq!(r, q);
    // SAFETY: `r` keeps its first `small` bytes.
    unsafe { assert!(holds(r, n, 0x5a)) };
    assert!(usable_size(r) >= small);
    // SAFETY: a live block of `small` bytes.
    unsafe { dealloc(r, small, 16) };

    // Reused from the cache, through the unsized API.
    let s = alloc(3 * 1024 * KIB, 16);
    assert!(!s.is_null());
    // SAFETY: a live block.
    unsafe { fill(s, 3 * 1024 * KIB, 0xa5) };
    // SAFETY: `s` is live; on success it is not used again.
    let t = unsafe { realloc_unsized(s, 6 * 1024 * KIB) };
    assert!(!t.is_null());
    // SAFETY: `t` keeps the first 3 MiB.
    unsafe {
        assert!(holds(t, 3 * 1024 * KIB, 0xa5));
        free(t);
    }
    assert_eq!(usable_size(t), 0, "a freed large block is no block");
}
