//! What the depot holds of a class that no thread takes from any more goes back to its
//! slabs when a heap needs the process to map more (`depot::unused`, the low-water mark),
//! not only at `trim` or when every thread goes idle: a program whose blocks pass from one
//! size to the next (strings grown by appends) otherwise left 2 MiB in each size it
//! passed. A heap that needs no more memory leaves it there. So do the thread's bins of
//! big blocks of classes it stopped using.
//!
//! The counters are process-wide, so this binary holds one test: nothing else in the
//! process allocates from hakmem while it runs (the harness uses the system allocator).

mod usage;

use hakmem_core::{alloc, block_size, class_for, dealloc};
use usage::cycle;

/// Blocks over 1 KiB go through the depot.
const SIZE: usize = 3000;
const N: usize = 400;
/// Small blocks, cycled to drive the thread cache's slow path.
const OTHER: usize = 64;
/// Medium blocks, each a span of its own: 24 of them map several superslabs in a few
/// slow paths, too few for the thread cache's periodic upkeep (every 512).
const MEDIUM: usize = 1 << 20;

fn depot_bytes(size: usize) -> usize {
    usage::of(size).depot
}

fn cached_bytes(size: usize) -> usize {
    usage::of(size).thread_caches
}

#[test]
fn a_class_no_thread_takes_from_gives_its_depot_back_when_the_heap_grows() {
    std::thread::spawn(|| {
        let block = block_size(class_for(SIZE, 16).unwrap());
        cycle(SIZE, N);
        let held = depot_bytes(SIZE);
        let cached = cached_bytes(SIZE);
        assert!(held > 0, "the thread cache's overflow went to the depot");
        assert!(cached > 8 * block, "{cached} bytes in the bin");
        let medium: Vec<*mut u8> = (0..24).map(|_| alloc(MEDIUM, 16)).collect();
        assert!(medium.iter().all(|p| !p.is_null()));
        assert_eq!(
            depot_bytes(SIZE),
            0,
            "the {held} bytes of a class left alone stayed in the depot"
        );
        let left = cached_bytes(SIZE);
        assert!(
            left <= 8 * block,
            "{left} of {cached} bytes stayed in the bin"
        );
        for p in medium {
            // SAFETY: live blocks of `MEDIUM`.
            unsafe { dealloc(p, MEDIUM, 16) };
        }
        // Thousands of slow paths, in superslabs the pool holds: nothing is mapped, and
        // the depot keeps what it holds.
        cycle(SIZE, N);
        let held = depot_bytes(SIZE);
        assert!(held > 0);
        for _ in 0..4 {
            cycle(OTHER, 100_000);
        }
        assert_eq!(
            depot_bytes(SIZE),
            held,
            "the depot gave back without growing"
        );
    })
    .join()
    .expect("the thread's checks");
}
