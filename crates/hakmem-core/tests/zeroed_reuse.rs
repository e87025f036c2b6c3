//! `alloc_zeroed` (C's `calloc`) on memory the large cache hands back: a fresh mapping is
//! zero already and is not cleared again, a cached extent is cleared as far as it was
//! ever written, and one that `mremap` grows is cleared over its old length only (the
//! added pages are fresh). Its own process: the large cache starts empty, and no other
//! test takes the extent.

use hakmem_core::{alloc, alloc_zeroed, free, stats};

const MIB: usize = 1 << 20;

/// The offset of the first non-zero byte of `[p, p + n)`.
///
/// # Safety
/// The range is readable.
unsafe fn first_nonzero(p: *const u8, n: usize) -> Option<usize> {
    // SAFETY: by the caller.
    (0..n).find(|&k| unsafe { *p.add(k) } != 0)
}

/// A block of `n` bytes with every byte set, freed: its extent is cached dirty.
fn dirty_extent(n: usize) -> *mut u8 {
    let p = alloc(n, 16);
    assert!(!p.is_null());
    // SAFETY: a live block of `n` bytes, then given up.
    unsafe {
        core::ptr::write_bytes(p, 0xff, n);
        free(p);
    }
    p
}

#[test]
fn zeroed_large_blocks_from_cached_extents_are_zero() {
    // 6 MiB and its header take a mapping of 8 MiB (two chunks), cached when freed.
    let old = dirty_extent(6 * MIB);
    let reused = alloc_zeroed(5 * MIB, 16);
    assert_eq!(reused, old, "the cached extent was not reused as it was");
    // SAFETY: a live block of 5 MiB.
    assert_eq!(unsafe { first_nonzero(reused, 5 * MIB) }, None);
    // SAFETY: given up.
    unsafe { free(reused) };

    // 10 MiB does not fit the 8 MiB extent: `mremap` grows it; its first 6 MiB were
    // written, the rest is fresh.
    let old = dirty_extent(6 * MIB);
    let remaps = stats().mremap_calls;
    let grown = alloc_zeroed(10 * MIB, 16);
    assert!(!grown.is_null());
    assert!(
        stats().mremap_calls > remaps,
        "the extent was not grown (at {old:p}, now {grown:p})"
    );
    // SAFETY: a live block of 10 MiB.
    assert_eq!(unsafe { first_nonzero(grown, 10 * MIB) }, None);
    // SAFETY: given up.
    unsafe { free(grown) };
}
