//! Batches: allocate many objects of mixed sizes, then free them all, in allocation
//! order, in reverse or in random order; or on two threads, each freeing the batch the
//! other allocated, in its order or in random order. One operation is one object
//! allocated and freed.

use std::sync::{Barrier, Mutex};

use super::on_threads;
use crate::{Block, Rng};

/// The batch sizes, in turn: mostly 10^5 objects, some 10^4 and 2 * 10^5. (10^6 objects
/// of these sizes would hold about 500 MB at once.)
const BATCHES: [u64; 4] = [100_000, 10_000, 100_000, 200_000];

/// A size mostly of 16..512 B (90 %), some of 512 B..4 KiB (9.9 %) and a few up to
/// 64 KiB (0.1 %): about 500 B on average.
pub fn mixed_size(rng: &mut Rng) -> usize {
    match rng.below(1000) {
        0 => rng.between((4097, 64 << 10)),
        1..=99 => rng.between((513, 4096)),
        _ => rng.between((16, 512)),
    }
}

/// The order a batch is freed in.
#[derive(Clone, Copy)]
enum Order {
    Forward,
    Reverse,
    Random,
}

pub fn forward(ops: u64) -> u64 {
    batches(ops, Order::Forward)
}

pub fn reverse(ops: u64) -> u64 {
    batches(ops, Order::Reverse)
}

pub fn random(ops: u64) -> u64 {
    batches(ops, Order::Random)
}

/// The batch sizes for `ops` objects in all: [`BATCHES`] in turn, the last one cut short.
fn schedule(ops: u64) -> impl Iterator<Item = usize> {
    let mut left = ops;
    BATCHES.iter().cycle().map_while(move |&n| {
        let n = n.min(left);
        left -= n;
        (n > 0).then_some(n as usize)
    })
}

fn batches(ops: u64, order: Order) -> u64 {
    let mut rng = Rng::new(11);
    // One array for all batches, as the C version has.
    let mut batch = Vec::new();
    for n in schedule(ops) {
        allocate(&mut batch, &mut rng, n);
        free_all(&mut batch, order, &mut rng);
    }
    ops
}

/// Free every block of `batch` in `order` (a random order is drawn from `rng`).
fn free_all(batch: &mut Vec<Block>, order: Order, rng: &mut Rng) {
    match order {
        Order::Forward => batch.drain(..).for_each(drop),
        Order::Reverse => batch.drain(..).rev().for_each(drop),
        Order::Random => {
            shuffle(batch, rng);
            batch.drain(..).for_each(drop);
        }
    }
}

/// Append `n` new blocks to `batch`.
fn allocate(batch: &mut Vec<Block>, rng: &mut Rng, n: usize) {
    batch.extend((0..n).map(|_| Block::new(mixed_size(rng))));
}

/// Fisher-Yates.
pub(super) fn shuffle<T>(items: &mut [T], rng: &mut Rng) {
    for i in (1..items.len()).rev() {
        items.swap(i, rng.below(i + 1));
    }
}

/// Two threads, each allocating a batch of half the objects and then freeing the batch
/// the other one allocated (in its allocation order).
pub fn cross_thread(ops: u64) -> u64 {
    swapped_batches(ops, Order::Forward)
}

/// [`cross_thread`], each thread freeing the other's batch in random order: tasks that
/// finish out of order.
pub fn cross_thread_random(ops: u64) -> u64 {
    swapped_batches(ops, Order::Random)
}

/// Two threads, each allocating a batch of half the objects and then freeing the batch
/// the other one allocated, in `order`.
fn swapped_batches(ops: u64, order: Order) -> u64 {
    let halves: Vec<usize> = schedule(ops).map(|n| n.div_ceil(2)).collect();
    let swap: [Mutex<Vec<Block>>; 2] = Default::default();
    let barrier = Barrier::new(2);
    on_threads(2, |t| {
        let mut rng = Rng::new(12 + t as u64);
        for &n in &halves {
            allocate(&mut swap[t].lock().unwrap(), &mut rng, n);
            barrier.wait();
            free_all(&mut swap[1 - t].lock().unwrap(), order, &mut rng);
            // Both have taken their batch before either puts the next one in its place.
            barrier.wait();
        }
    });
    halves.iter().map(|&n| 2 * n as u64).sum()
}

/// Objects of 48 bytes allocated in order, every other one freed, the holes refilled with
/// objects of 64..256 B, then all freed: a cache that evicts half its entries and fills up
/// again with others. Two thirds of the operations are the first objects (a million by
/// default); one operation is one object allocated (and, in the end, freed).
pub fn half_freed(ops: u64) -> u64 {
    let first = (ops as usize * 2 / 3).max(2);
    let mut rng = Rng::new(25);
    let mut objects: Vec<Option<Block>> = (0..first).map(|_| Some(Block::new(48))).collect();
    for slot in objects.iter_mut().step_by(2) {
        *slot = None;
    }
    for slot in objects.iter_mut().step_by(2) {
        *slot = Some(Block::new(rng.between((64, 256))));
    }
    drop(objects);
    (first + first.div_ceil(2)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_add_up_to_the_operations() {
        assert_eq!(
            schedule(250_000).collect::<Vec<_>>(),
            [100_000, 10_000, 100_000, 40_000]
        );
        assert_eq!(schedule(0).count(), 0);
        assert_eq!(cross_thread(3_001), 3_002);
        assert_eq!(cross_thread_random(3_001), 3_002);
        assert_eq!(random(5_000), 5_000);
    }

    #[test]
    fn sizes_stay_in_range() {
        let mut rng = Rng::new(0);
        let sizes: Vec<usize> = (0..100_000).map(|_| mixed_size(&mut rng)).collect();
        assert!(sizes.iter().all(|&s| (16..=64 << 10).contains(&s)));
        let small = sizes.iter().filter(|&&s| s <= 512).count();
        assert!((88_000..92_000).contains(&small), "{small}");
        assert!(sizes.iter().any(|&s| s > 4096));
    }
}
