//! The statistics move with what the program does, and `trim` gives memory back.
//!
//! The counters are process-wide, so this binary holds one test: nothing else in the
//! process allocates from hakmem while it measures (the harness uses the system
//! allocator).

#[path = "../../hakmem/tests/common/mod.rs"]
mod common;

use hakmem_core::{alloc, dealloc, realloc, stats, trim};

const MIB: usize = 1 << 20;

#[test]
fn counters_move_and_trim_returns_memory() {
    // Set the thread up (its heap, its first superslab) before measuring.
    // SAFETY: a fresh block, freed as made.
    unsafe { dealloc(alloc(16, 16), 16, 16) };
    trim();
    let start = stats();
    assert!(start.resident > 0, "RSS not readable");

    // A fresh large block: one mapping, counted as allocated and mapped.
    let mut size = 8 * MIB;
    let mut p = alloc(size, 16);
    assert!(!p.is_null());
    // SAFETY: a fresh block of `size` bytes.
    unsafe { common::fill(p, 0, size, 1) };
    let one = stats();
    assert!(one.mmap_calls > start.mmap_calls);
    assert!(one.mapped >= start.mapped + size);
    assert!(one.allocated >= start.allocated + size);
    assert!(
        one.resident >= start.resident + size / 2,
        "8 MiB written, RSS {start:?} -> {one:?}"
    );

    // Growing it goes through mremap; the content stays.
    // SAFETY: a live block made with `(size, 16)`.
    p = unsafe { realloc(p, size, 16, 40 * MIB) };
    assert!(!p.is_null());
    // SAFETY: the first `size` bytes moved with the block.
    unsafe { common::check(p, 0, size, 1, "after mremap") };
    size = 40 * MIB;
    let grown = stats();
    assert!(grown.mremap_calls > one.mremap_calls);
    assert!(grown.mapped >= one.mapped + 32 * MIB);
    assert!(grown.allocated >= one.allocated + 32 * MIB);

    // Freed, it is kept for reuse (within the budget of the default profile: up to the
    // recent peak in use), still mapped, no longer allocated; `trim` gives it back.
    // SAFETY: a live block made with `(size, 16)`.
    unsafe { dealloc(p, size, 16) };
    let kept = stats();
    assert_eq!(kept.munmap_calls, grown.munmap_calls, "{kept:?}");
    assert!(kept.cached_large >= size, "{kept:?}");
    assert!(kept.allocated + size <= grown.allocated);
    trim();
    let freed = stats();
    assert!(freed.munmap_calls > kept.munmap_calls);
    assert!(freed.mapped + size <= grown.mapped);

    // A big heap of mid-size blocks and cacheable large blocks.
    let mids: Vec<*mut u8> = (0..2048).map(|_| alloc(32 * 1024, 16)).collect();
    let larges: Vec<*mut u8> = (0..8).map(|_| alloc(2 * MIB, 16)).collect();
    assert!(mids.iter().chain(&larges).all(|p| !p.is_null()));
    for &p in &mids {
        // SAFETY: a live block of 32 KiB; touching it makes it resident.
        unsafe { common::fill(p, 0, 32 * 1024, 2) };
    }
    let peak = stats();
    assert!(peak.allocated >= freed.allocated + 80 * MIB);
    assert!(peak.mapped >= freed.mapped + 80 * MIB);
    for p in mids {
        // SAFETY: live blocks with their requests.
        unsafe { dealloc(p, 32 * 1024, 16) };
    }
    // Freed by a thread with no heap, which keeps none of them for itself (a thread that
    // keeps a block counts it as allocated still, as blocks in thread caches are).
    let larges: Vec<usize> = larges.into_iter().map(|p| p as usize).collect();
    std::thread::spawn(move || {
        for p in larges {
            // SAFETY: as above.
            unsafe { dealloc(p as *mut u8, 2 * MIB, 16) };
        }
    })
    .join()
    .expect("the freeing thread");
    let emptied = stats();
    assert!(
        emptied.allocated + 78 * MIB <= peak.allocated,
        "{peak:?} -> {emptied:?}"
    );
    if hakmem_core::testing::large_cache_entries() > 0 {
        assert!(
            emptied.cached_large >= 2 * MIB,
            "freed large blocks are cached: {emptied:?}"
        );
    }

    trim();
    let trimmed = stats();
    assert_eq!(trimmed.cached_large, 0, "{trimmed:?}");
    assert_eq!(trimmed.cached_superslabs, 0, "{trimmed:?}");
    assert!(trimmed.munmap_calls > emptied.munmap_calls);
    // What is left: what was there before (the thread's heap and the superslab it keeps).
    assert!(
        trimmed.mapped <= start.mapped,
        "mapped {} KiB before, {} KiB at the peak, {} KiB after trim",
        start.mapped >> 10,
        peak.mapped >> 10,
        trimmed.mapped >> 10
    );
    assert!(
        trimmed.allocated <= start.allocated + MIB,
        "{start:?} -> {trimmed:?}"
    );
    assert!(
        trimmed.resident + 48 * MIB <= peak.resident,
        "RSS {} KiB at the peak, {} KiB after trim",
        peak.resident >> 10,
        trimmed.resident >> 10
    );
    assert!(trimmed.os_calls() > start.os_calls());
}
