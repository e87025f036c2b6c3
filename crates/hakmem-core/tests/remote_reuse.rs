//! Blocks another thread freed come back to their owner before it carves fresh ones: a
//! thread that allocates while its blocks wait on remote lists takes them from there,
//! from the slab it is carving and from its others, instead of touching new pages and
//! leaving the freed blocks to sit.
//!
//! The counters are process-wide, so this binary holds one test (the harness uses the
//! system allocator).

mod usage;

use hakmem_core::testing::SLAB_SIZE;
use hakmem_core::{alloc, dealloc, ClassUsage};
use std::collections::HashSet;
use std::sync::mpsc;

/// A class whose spans are one slab each.
const SIZE: usize = 256;
/// Blocks over several slabs of the class, the last one half carved.
const N: usize = 1_920;

fn usage_of_class() -> ClassUsage {
    usage::of(SIZE)
}

/// The first block of each slab, kept so that no slab empties (an empty slab is released
/// and carved anew, which is no touch of new pages but reads like one here), and the
/// rest, given away.
fn one_a_slab(blocks: Vec<usize>) -> (Vec<usize>, Vec<usize>) {
    let mut seen = HashSet::new();
    blocks
        .into_iter()
        .partition(|&p| seen.insert(p / SLAB_SIZE))
}

#[test]
fn blocks_freed_by_another_thread_are_reused_before_fresh_ones_are_carved() {
    let (give, take) = mpsc::channel::<Vec<usize>>();
    let (freed, wait) = mpsc::channel::<()>();
    let (report, result) = mpsc::channel::<(ClassUsage, ClassUsage)>();
    let owner = std::thread::spawn(move || {
        let first: Vec<usize> = (0..N).map(|_| alloc(SIZE, 16) as usize).collect();
        assert!(first.iter().all(|&p| p != 0));
        let (kept, given) = one_a_slab(first);
        let n = given.len();
        give.send(given).unwrap();
        wait.recv().unwrap();
        let before = usage_of_class();
        // The state after each allocation, the one with the fewest bytes uncarved.
        let mut after = before;
        let second: Vec<usize> = (0..n)
            .map(|_| {
                let p = alloc(SIZE, 16) as usize;
                let now = usage_of_class();
                if now.uncarved < after.uncarved {
                    after = now;
                }
                p
            })
            .collect();
        for &p in second.iter().chain(&kept) {
            // SAFETY: live blocks of `SIZE`, allocated here.
            unsafe { dealloc(p as *mut u8, SIZE, 16) };
        }
        report.send((before, after)).unwrap();
    });
    let blocks = take.recv().unwrap();
    let n = blocks.len();
    // Freed on a thread that then exits: its cache goes back, onto the owner's remote
    // lists.
    std::thread::spawn(move || {
        for &p in &blocks {
            // SAFETY: live blocks of `SIZE`, handed to this thread.
            unsafe { dealloc(p as *mut u8, SIZE, 16) };
        }
    })
    .join()
    .unwrap();
    freed.send(()).unwrap();
    let (before, after) = result.recv().unwrap();
    owner.join().unwrap();
    assert!(before.remote >= n * before.block_size, "{before:?}");
    assert!(before.uncarved > 0, "a slab has room to carve: {before:?}");
    assert_eq!(
        after.uncarved, before.uncarved,
        "the owner carved fresh blocks while its freed ones waited: {before:?} then {after:?}"
    );
}
