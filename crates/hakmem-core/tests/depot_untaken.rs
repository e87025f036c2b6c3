//! What the depot holds of a class that only gave blocks back since it was last taken
//! from goes back to its slabs the first time a heap needs the process to map more
//! (`depot::untaken`): objects that grow from one size into the next (vectors grown by
//! `realloc`) empty one class after another, and each class's depot, drained while the
//! objects passed through and filled again as they left, kept its slabs from emptying.
//! The low-water mark (`depot::unused`) gives such batches back only a round later: the
//! drain set the mark to nothing.
//!
//! The counters are process-wide, so this binary holds one test: nothing else in the
//! process allocates from hakmem while it runs (the harness uses the system allocator).

mod usage;

use hakmem_core::{alloc, dealloc, stats};
use usage::cycle;

/// Blocks over 1 KiB go through the depot.
const SIZE: usize = 3000;
const N: usize = 400;
/// Medium blocks, each a span of its own, allocated until the process maps more.
const MEDIUM: usize = 1 << 20;

#[test]
fn a_class_that_only_gave_back_since_its_last_take_empties_its_depot_when_the_heap_grows() {
    std::thread::spawn(|| {
        // The second cycle drains the depot the first filled, then fills it again.
        cycle(SIZE, N);
        cycle(SIZE, N);
        let held = usage::of(SIZE).depot;
        assert!(held > 0, "the thread cache's overflow went to the depot");
        let mapped = stats().mapped;
        let mut medium = Vec::new();
        while stats().mapped == mapped {
            let p = alloc(MEDIUM, 16);
            assert!(!p.is_null());
            medium.push(p);
            assert!(medium.len() < 64, "the heap never grew");
        }
        assert_eq!(
            usage::of(SIZE).depot,
            0,
            "the {held} bytes put back since the class's last take stayed in the depot"
        );
        for p in medium {
            // SAFETY: live blocks of `MEDIUM`.
            unsafe { dealloc(p, MEDIUM, 16) };
        }
    })
    .join()
    .expect("the thread's checks");
}
