//! The census of resident memory sorts hakmem's chunks by what they hold, counts each
//! mapping once with its whole length, and the pages the program wrote where it wrote
//! them.
//!
//! The figures are process-wide, so this binary holds one test.

use hakmem_core::{alloc, dealloc, residency, stats, trim, Residency, CHUNK_SIZE};

const MIB: usize = 1 << 20;

/// Write a byte in every page of `[p, p + len)`.
///
/// # Safety
/// The range is a block of the caller's.
unsafe fn write_pages(p: *mut u8, len: usize) {
    for at in (0..len).step_by(4096) {
        // SAFETY: by the caller.
        unsafe { p.add(at).write(1) };
    }
}

/// A block of `size` bytes, written through.
fn written(size: usize) -> *mut u8 {
    let p = alloc(size, 16);
    assert!(!p.is_null());
    // SAFETY: a fresh block of `size` bytes.
    unsafe { write_pages(p, size) };
    p
}

/// How many live large blocks, pair chunks and cached extents the census counted.
fn large_kinds(r: &Residency) -> [usize; 3] {
    [r.large.count, r.pairs.count, r.cached_large.count]
}

#[test]
fn the_census_finds_each_kind_where_it_was_written() {
    trim();
    let before = residency();
    assert_eq!(
        large_kinds(&before),
        [0, 0, 0],
        "nothing large yet: {before:?}"
    );

    let small: Vec<*mut u8> = (0..1000).map(|_| written(1000)).collect();
    // One chunk, and three (its need rounded up to whole chunks).
    let large = [(written(3 * MIB), 3 * MIB), (written(9 * MIB), 9 * MIB)];
    let halves = [written(3 * MIB / 2), written(3 * MIB / 2)];
    let cached = written(7 * MIB / 2) as usize;
    let kept = written(3 * MIB);
    // Freed by a thread with no heap, which keeps no block: it stays committed in the
    // cache.
    std::thread::spawn(move || {
        // SAFETY: made above with `(7 MiB / 2, 16)`.
        unsafe { dealloc(cached as *mut u8, 7 * MIB / 2, 16) }
    })
    .join()
    .expect("the freeing thread");
    // Freed here, a block this thread keeps counts as large still.
    // SAFETY: made above with `(3 MiB, 16)`.
    unsafe { dealloc(kept, 3 * MIB, 16) };

    let r = residency();
    let rss = stats().resident;
    let grew = |f: fn(&Residency) -> usize| f(&r) - f(&before);
    assert!(
        grew(|r| r.superslabs.resident) >= 900 * 1000,
        "1000 blocks of 1000 bytes written: {before:?} -> {r:?}"
    );
    let (large_count, large_mapped) = (r.large.count, r.large.mapped);
    assert_eq!(
        (large_count, large_mapped),
        (3, CHUNK_SIZE + 3 * CHUNK_SIZE + CHUNK_SIZE),
        "{r:?}"
    );
    assert!(r.large.resident >= 15 * MIB, "{r:?}");
    assert_eq!((r.pairs.count, r.pairs.mapped), (1, CHUNK_SIZE), "{r:?}");
    assert!(r.pairs.resident >= 3 * MIB, "{r:?}");
    assert_eq!(
        (r.cached_large.count, r.cached_large.mapped),
        (1, CHUNK_SIZE),
        "{r:?}"
    );
    assert!(r.cached_large.resident >= 7 * MIB / 2, "{r:?}");
    // Counted once each, the pages are a part of the process's resident set.
    assert!(r.total().resident <= rss, "{r:?} against RSS {rss}");

    for p in small {
        // SAFETY: made above with `(1000, 16)`.
        unsafe { dealloc(p, 1000, 16) };
    }
    for p in halves {
        // SAFETY: made above with `(3 MiB / 2, 16)`.
        unsafe { dealloc(p, 3 * MIB / 2, 16) };
    }
    for (p, size) in large {
        // SAFETY: made above with `(size, 16)`.
        unsafe { dealloc(p, size, 16) };
    }
    trim();
    let after = residency();
    assert_eq!(
        large_kinds(&after),
        [0, 0, 0],
        "every large block freed and trimmed: {after:?}"
    );
}
