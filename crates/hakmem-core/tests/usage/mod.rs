//! What the per-class statistics say of one class, for the tests that follow blocks
//! through it (each such binary holds one test: the counters are process-wide).
#![allow(dead_code)]

use hakmem_core::{class_for, class_usage, ClassUsage};

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
