//! One thread allocates, another frees: every free is a cross-thread free. Blocks travel
//! in batches over a bounded channel.

use std::sync::mpsc::sync_channel;

use crate::{Block, Rng};

const BATCH: u64 = 64;
/// Batches in flight at most.
const DEPTH: usize = 16;

pub fn run(ops: u64) -> u64 {
    let batches = (ops / BATCH).max(1);
    let (tx, rx) = sync_channel::<Vec<Block>>(DEPTH);
    std::thread::scope(|s| {
        s.spawn(move || rx.into_iter().for_each(drop));
        let mut rng = Rng::new(1);
        for _ in 0..batches {
            let batch = (0..BATCH).map(|_| Block::new(rng.between((16, 1024))));
            tx.send(batch.collect()).expect("consumer alive");
        }
        drop(tx);
    });
    batches * BATCH
}
