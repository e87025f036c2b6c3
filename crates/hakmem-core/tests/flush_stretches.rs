//! A thread cache's flush gives a chain back in stretches: consecutive blocks of one slab
//! go onto its free list together (`heap::Stretch`). Blocks freed in allocation order,
//! in reverse, every other one, at random, in runs and in swapped pairs, from several
//! slabs, must leave every slab's count of blocks in use right: the counts add up while
//! blocks are live, and every slab is released once all are freed and the cache is
//! trimmed.
//!
//! The counters are process-wide, so this binary holds one test: nothing else in the
//! process allocates from hakmem while it measures (the harness uses the system
//! allocator).

mod usage;

use hakmem_core::{alloc, dealloc, trim};
use usage::assert_adds_up;

/// The block sizes: 48 bytes leave 16 bytes at the end of a 64 KiB slab, so a run of
/// blocks in address order takes a longer step from one slab to the next; 64 bytes fill
/// their slabs, and the next slab carved may go on right after the last block.
const SIZES: [usize; 2] = [48, 64];
/// Four or five slabs of either (1365 or 1024 to a 64 KiB slab).
const N: usize = 5_000;

fn free_all(blocks: impl IntoIterator<Item = *mut u8>, size: usize) {
    for p in blocks {
        // SAFETY: live blocks of `size`, each freed once.
        unsafe { dealloc(p, size, 16) };
    }
}

#[test]
fn flushed_stretches_keep_every_slab_counted() {
    std::thread::spawn(|| {
        let orders: [fn(usize) -> Vec<usize>; 6] = [
            |n| (0..n).collect(),
            |n| (0..n).rev().collect(),
            |n| (0..n).step_by(2).chain((1..n).step_by(2)).collect(),
            |n| (0..n).map(|i| i * 7919 % n).collect(),
            // Runs of one step broken every seventh block: the walk that predicts each
            // link from the step (`heap::follow_steps`) starts and stops again and again.
            |n| {
                (0..n)
                    .filter(|i| i % 7 != 3)
                    .chain((3..n).step_by(7))
                    .collect()
            },
            // Neighbours swapped: the step changes at every block (`n` is even).
            |n| (0..n).map(|i| i ^ 1).collect(),
        ];
        for (size, order) in SIZES.into_iter().flat_map(|s| orders.map(|o| (s, o))) {
            let blocks: Vec<*mut u8> = (0..N).map(|_| alloc(size, 16)).collect();
            assert!(blocks.iter().all(|p| !p.is_null()));
            let half = order(N);
            let (first, rest) = half.split_at(N / 2);
            free_all(first.iter().map(|&i| blocks[i]), size);
            let u = usage::of(size);
            assert_adds_up(&u);
            assert_eq!(u.live, (N - N / 2) * u.block_size, "{u:?}");
            free_all(rest.iter().map(|&i| blocks[i]), size);
            trim();
            let u = usage::of(size);
            assert_eq!((u.live, u.slabs), (0, 0), "{size} B: {u:?}");
        }
    })
    .join()
    .expect("the thread's checks");
}
