//! What the per-class statistics say of one class, for the tests that follow blocks
//! through it (each such binary holds one test: the counters are process-wide).
#![allow(dead_code)]

use hakmem_core::{alloc, class_for, class_usage, dealloc, ClassUsage};

/// The statistics of the class that serves `size` bytes at alignment 16.
pub fn of(size: usize) -> ClassUsage {
    class_usage()[class_for(size, 16).unwrap().index()]
}

/// The fields after `slabs` add up to it (nothing runs meanwhile).
pub fn assert_adds_up(u: &ClassUsage) {
    assert_eq!(
        u.live + u.thread_caches + u.depot + u.remote + u.free_in_slabs + u.uncarved,
        u.slabs,
        "{u:?}"
    );
}

/// Allocate `n` blocks of `size` and free them, in that order (a batch through the
/// thread cache, whose overflow goes to the depot for classes over 1 KiB).
pub fn cycle(size: usize, n: usize) {
    let blocks: Vec<*mut u8> = (0..n).map(|_| alloc(size, 16)).collect();
    assert!(blocks.iter().all(|p| !p.is_null()));
    for p in blocks {
        // SAFETY: live blocks of `size`.
        unsafe { dealloc(p, size, 16) };
    }
}
