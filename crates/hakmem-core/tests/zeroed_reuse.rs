//! `alloc_zeroed` (C's `calloc`) on memory the large cache hands back: a fresh mapping is
//! zero already and is not cleared again, a cached extent is cleared as far as it was
//! ever written (with `memset` where the program writes its blocks through, else by
//! giving its whole pages back), and one that `mremap` grows is cleared over its old
//! length only (the added pages are fresh). Its own process: the large cache starts
//! empty, and no other test takes the extent.

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

/// Whether the page holding the middle of `[p, p + n)` is resident.
fn middle_resident(p: *mut u8, n: usize) -> bool {
    let page = (p as usize + n / 2) & !4095;
    let mut v = 0u8;
    // SAFETY: `mincore` writes one byte for the one page asked about.
    let r = unsafe { libc::mincore(page as *mut libc::c_void, 4096, &mut v) };
    assert_eq!(r, 0, "mincore");
    v & 1 == 1
}

#[test]
fn zeroed_large_blocks_from_cached_extents_are_zero() {
    // 6 MiB and its header take a mapping of 8 MiB (two chunks), cached when freed.
    let old = dirty_extent(6 * MIB);
    let reused = alloc_zeroed(5 * MIB, 16);
    assert_eq!(reused, old, "the cached extent was not reused as it was");
    // SAFETY: a live block of 5 MiB.
    assert_eq!(unsafe { first_nonzero(reused, 5 * MIB) }, None);
    // The block given fresh memory last was written through: cleared by `memset`.
    assert!(
        middle_resident(reused, 5 * MIB),
        "the pages were given back"
    );
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
    // In this order: what the test below leaves cached would serve the blocks above.
    zeroed_large_blocks_of_a_program_that_writes_little_are_given_back();
}

/// Where the block given fresh memory last was touched at its ends only, a cached
/// extent's whole pages are given back rather than cleared: not resident, and zero.
fn zeroed_large_blocks_of_a_program_that_writes_little_are_given_back() {
    let dirty = alloc(6 * MIB, 16);
    assert!(!dirty.is_null());
    // SAFETY: a live block of 6 MiB.
    unsafe { core::ptr::write_bytes(dirty, 0xff, 6 * MIB) };
    // Larger than any cached extent: fresh memory, touched at its ends.
    let sparse = alloc(40 * MIB, 16);
    assert!(!sparse.is_null());
    // SAFETY: both blocks live; `dirty` given up.
    unsafe {
        sparse.write_volatile(1);
        sparse.add(40 * MIB - 1).write_volatile(1);
        free(dirty);
    }
    let z = alloc_zeroed(5 * MIB, 16);
    assert_eq!(z, dirty, "the cached extent was not reused as it was");
    // Before the check reads them in as the zero page.
    assert!(
        !middle_resident(z, 5 * MIB),
        "the pages were cleared, not given back"
    );
    // SAFETY: a live block of 5 MiB.
    assert_eq!(unsafe { first_nonzero(z, 5 * MIB) }, None);
    // SAFETY: both live, given up.
    unsafe {
        free(z);
        free(sparse);
    }
}
