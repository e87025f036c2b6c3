//! Slot churn: each operation frees a random slot of a working set and allocates a block
//! of random size in its place.

use super::on_threads;
use crate::{Block, Rng};

/// Sizes in bytes, both ends included.
type Sizes = (usize, usize);

pub fn random_mixed(ops: u64) -> u64 {
    churn_threads(ops, 1, 400, (16, 1024))
}

pub fn mid_large(ops: u64) -> u64 {
    churn_threads(ops, 2, 64, (8 << 10, 32 << 10))
}

pub fn large(ops: u64) -> u64 {
    churn_threads(ops, 1, 16, (64 << 10, 4 << 20))
}

/// Many short-lived threads: two at a time, each doing this many operations.
pub fn thread_churn(ops: u64) -> u64 {
    const THREAD_OPS: u64 = 1000;
    let batches = (ops / (2 * THREAD_OPS)).max(1);
    (0..batches)
        .map(|_| churn_threads(2 * THREAD_OPS, 2, 64, (16, 1024)))
        .sum()
}

/// `threads` threads, each churning its own working set of `slots` blocks.
fn churn_threads(ops: u64, threads: usize, slots: usize, sizes: Sizes) -> u64 {
    let per_thread = (ops / threads as u64).max(1);
    on_threads(threads, |t| {
        let mut set = empty_slots(slots);
        churn(&mut set, &mut Rng::new(t as u64), per_thread, sizes);
    });
    per_thread * threads as u64
}

pub fn empty_slots(n: usize) -> Vec<Option<Block>> {
    (0..n).map(|_| None).collect()
}

/// `ops` times: free a random slot (if occupied), then allocate a new block there.
pub fn churn(slots: &mut [Option<Block>], rng: &mut Rng, ops: u64, sizes: Sizes) {
    for _ in 0..ops {
        let slot = &mut slots[rng.below(slots.len())];
        drop(slot.take());
        *slot = Some(Block::new(rng.between(sizes)));
    }
}
