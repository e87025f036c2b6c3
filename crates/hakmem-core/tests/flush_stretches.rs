//! A thread cache's flush gives a chain back in stretches: consecutive blocks of one slab
//! go onto its free list together (`heap::Stretch`). Blocks freed in allocation order,
//! in reverse, every other one and at random, from several slabs, must leave every
//! slab's count of blocks in use right: the counts add up while blocks are live, and
//! every slab is released once all are freed and the cache is trimmed.
//!
//! The counters are process-wide, so this binary holds one test: nothing else in the
//! process allocates from hakmem while it measures (the harness uses the system
//! allocator).

mod usage;

use hakmem_core::{alloc, dealloc, trim};
use usage::assert_adds_up;

const SIZE: usize = 48;
/// About four slabs of 48-byte blocks (1365 to a 64 KiB slab).
const N: usize = 5_000;

fn usage() -> hakmem_core::ClassUsage {
    usage::of(SIZE)
}

fn free_all(blocks: impl IntoIterator<Item = *mut u8>) {
    for p in blocks {
        // SAFETY: live blocks of `SIZE`, each freed once.
        unsafe { dealloc(p, SIZE, 16) };
    }
}

#[test]
fn flushed_stretches_keep_every_slab_counted() {
    std::thread::spawn(|| {
        let orders: [fn(usize) -> Vec<usize>; 4] = [
            |n| (0..n).collect(),
            |n| (0..n).rev().collect(),
            |n| (0..n).step_by(2).chain((1..n).step_by(2)).collect(),
            |n| (0..n).map(|i| i * 7919 % n).collect(),
        ];
        for order in orders {
            let blocks: Vec<*mut u8> = (0..N).map(|_| alloc(SIZE, 16)).collect();
            assert!(blocks.iter().all(|p| !p.is_null()));
            let half = order(N);
            let (first, rest) = half.split_at(N / 2);
            free_all(first.iter().map(|&i| blocks[i]));
            let u = usage();
            assert_adds_up(&u);
            assert_eq!(u.live, (N - N / 2) * u.block_size, "{u:?}");
            free_all(rest.iter().map(|&i| blocks[i]));
            trim();
            let u = usage();
            assert_eq!((u.live, u.slabs), (0, 0), "{u:?}");
        }
    })
    .join()
    .expect("the thread's checks");
}
