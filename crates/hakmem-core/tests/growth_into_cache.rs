//! A large block that `realloc` grows takes the cached extent right after its mapping
//! (`large::take_next_extent`): in place, with no system call, keeping the pages that
//! extent had resident. A vector that doubles to a big buffer, is dropped and is built
//! again then grows into the buffer freed before it; moved by `mremap` instead, it took
//! fresh pages every time (a page fault for each 4 KiB of it, every round).
//!
//! One test in this binary: it reads the process's one large cache and its counts of
//! system calls.

use hakmem_core::{alloc, dealloc, realloc, stats, trim};

const MIB: usize = 1 << 20;

/// Write a byte that depends on the offset into each 4 KiB of `[p, p + n)`.
///
/// # Safety
/// `[p, p + n)` is writable.
unsafe fn fill(p: *mut u8, n: usize) {
    for i in (0..n).step_by(4096) {
        // SAFETY: by the caller.
        unsafe { *p.add(i) = (i >> 12) as u8 ^ 0x5a };
    }
}

/// Whether [`fill`]'s bytes are still in `[p, p + n)`.
///
/// # Safety
/// `[p, p + n)` is readable.
unsafe fn filled(p: *const u8, n: usize) -> bool {
    // SAFETY: by the caller.
    (0..n)
        .step_by(4096)
        .all(|i| unsafe { *p.add(i) } == (i >> 12) as u8 ^ 0x5a)
}

/// The system calls that map, unmap or move memory, made so far.
fn mapping_calls() -> [usize; 3] {
    let s = stats();
    [s.mmap_calls, s.munmap_calls, s.mremap_calls]
}

#[test]
fn a_growing_block_takes_the_cached_extent_after_it() {
    // A freed buffer of ten chunks (4 MiB each) stays cached as one extent.
    let big = 40 * MIB - 4096;
    let p = alloc(big, 16);
    assert!(!p.is_null());
    // SAFETY: a live block of `big` bytes, freed once.
    unsafe {
        fill(p, big);
        dealloc(p, big, 16);
    }
    assert_eq!(stats().cached_large, 40 * MIB, "the buffer's ten chunks");

    // A block of one chunk takes the extent's lowest chunk; the rest stays cached, right
    // after it.
    let mut size = 3 * MIB;
    let q = alloc(size, 16);
    assert_eq!(q, p, "the lowest chunk of the extent");
    // SAFETY: a live block of `size` bytes.
    unsafe { fill(q, size) };

    let before = mapping_calls();
    for new_size in [6 * MIB, 12 * MIB, 24 * MIB, 36 * MIB] {
        // SAFETY: `q` is live, made with `(size, 16)`.
        let r = unsafe { realloc(q, size, 16, new_size) };
        assert_eq!(
            r, q,
            "grown to {new_size} bytes in place, into the cached extent"
        );
        size = new_size;
    }
    assert_eq!(
        mapping_calls(),
        before,
        "growing into the cached extent maps, unmaps and moves nothing"
    );
    assert_eq!(stats().cached_large, 0, "the block took the whole extent");
    // SAFETY: the block holds `size` bytes, the first 3 MiB written above.
    unsafe { assert!(filled(q, 3 * MIB)) };

    // Past the extent, the block grows by `mremap` (in place or moved) with its bytes.
    let grown = 60 * MIB;
    // SAFETY: `q` is live, made with `(size, 16)`.
    let r = unsafe { realloc(q, size, 16, grown) };
    assert!(!r.is_null());
    // SAFETY: the first 3 MiB moved with the block, which holds `grown` bytes.
    unsafe {
        assert!(filled(r, 3 * MIB));
        dealloc(r, grown, 16);
    }
    trim();
    assert_eq!(stats().cached_large, 0, "trim empties the cache");
}
