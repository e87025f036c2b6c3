//! Larson's server simulation: each thread replaces random blocks of 10..1000 bytes in its
//! array, then hands the array on to the next thread, so blocks are freed by threads other
//! than the one that allocated them.

use std::sync::{Barrier, Mutex};

use super::churn::{churn, empty_slots};
use super::on_threads;
use crate::Rng;

const SLOTS: usize = 1000;
/// Replacements a thread makes in an array before passing it on.
const ROUND: u64 = 10_000;

pub fn one_thread(ops: u64) -> u64 {
    larson(ops, 1)
}

pub fn two_threads(ops: u64) -> u64 {
    larson(ops, 2)
}

fn larson(ops: u64, threads: usize) -> u64 {
    let round = (ops / threads as u64).clamp(1, ROUND);
    let rounds = (ops / (threads as u64 * round)).max(1);
    let arrays: Vec<Mutex<_>> = (0..threads)
        .map(|_| Mutex::new(empty_slots(SLOTS)))
        .collect();
    let barrier = Barrier::new(threads);
    on_threads(threads, |t| {
        let mut rng = Rng::new(t as u64);
        for r in 0..rounds as usize {
            // In round r thread t works on array t + r: the arrays move one thread on.
            let mut array = arrays[(t + r) % threads].lock().unwrap();
            churn(&mut array, &mut rng, round, (10, 1000));
            drop(array);
            barrier.wait();
        }
    });
    rounds * round * threads as u64
}
