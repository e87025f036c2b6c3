//! The census of resident memory sorts hakmem's chunks by what they hold and counts the
//! pages the program wrote where it wrote them.
//!
//! The figures are process-wide, so this binary holds one test.

use hakmem_core::{alloc, dealloc, residency, trim, Residency};

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

#[test]
fn the_census_finds_each_kind_where_it_was_written() {
    trim();
    let before = residency();

    let small: Vec<*mut u8> = (0..1000).map(|_| written(1000)).collect();
    let large = written(3 * MIB);
    let halves = [written(3 * MIB / 2), written(3 * MIB / 2)];
    let cached = written(7 * MIB / 2);
    // SAFETY: made above with `(7 MiB / 2, 16)`; freed, it stays committed in the cache.
    unsafe { dealloc(cached, 7 * MIB / 2, 16) };

    let r = residency();
    let grew = |f: fn(&Residency) -> usize, by: usize| f(&r) >= f(&before) + by;
    assert!(
        grew(|r| r.superslabs.resident, 900 * 1000),
        "1000 blocks of 1000 bytes written: {before:?} -> {r:?}"
    );
    assert!(grew(|r| r.large.count, 1), "{before:?} -> {r:?}");
    assert!(grew(|r| r.large.mapped, 3 * MIB), "{before:?} -> {r:?}");
    assert!(grew(|r| r.large.resident, 3 * MIB), "{before:?} -> {r:?}");
    assert!(grew(|r| r.pairs.count, 1), "{before:?} -> {r:?}");
    assert!(
        grew(|r| r.pairs.resident, 2 * (3 * MIB / 2)),
        "{before:?} -> {r:?}"
    );
    assert!(grew(|r| r.cached_large.count, 1), "{before:?} -> {r:?}");
    assert!(
        grew(|r| r.cached_large.resident, 7 * MIB / 2),
        "{before:?} -> {r:?}"
    );
    // No page is counted twice, nor any the chunks do not hold.
    let total = r.total();
    assert!(total.resident <= total.mapped, "{r:?}");

    for p in small {
        // SAFETY: made above with `(1000, 16)`.
        unsafe { dealloc(p, 1000, 16) };
    }
    for p in halves {
        // SAFETY: made above with `(3 MiB / 2, 16)`.
        unsafe { dealloc(p, 3 * MIB / 2, 16) };
    }
    // SAFETY: made above with `(3 MiB, 16)`.
    unsafe { dealloc(large, 3 * MIB, 16) };
    trim();
    let after = residency();
    assert_eq!(
        (
            after.large.count,
            after.pairs.count,
            after.cached_large.count
        ),
        (0, 0, 0),
        "every large block freed and trimmed: {after:?}"
    );
}
