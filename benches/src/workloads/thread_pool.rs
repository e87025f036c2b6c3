//! A thread pool serving requests, as a server built on a pool of workers runs: one thread
//! accepts requests of 64..2047 B and queues them (256 at most); [`WORKERS`] workers take
//! them from the queue, the receiver shared under a mutex, and each builds a response of
//! 128..8191 B with [`TEMPORARIES`] temporaries of 16..127 B, then drops the temporaries,
//! the request (a free of another thread's block) and the response. One operation is one
//! request served.

use std::sync::mpsc::sync_channel;
use std::sync::Mutex;

use crate::{Block, Rng};

const WORKERS: usize = 4;
/// Requests queued at most.
const QUEUE: usize = 256;
/// Temporaries a response is built with.
const TEMPORARIES: usize = 4;

pub fn run(ops: u64) -> u64 {
    let requests = ops.max(1);
    let (tx, rx) = sync_channel::<Block>(QUEUE);
    let rx = Mutex::new(rx);
    std::thread::scope(|s| {
        for w in 1..=WORKERS {
            let rx = &rx;
            s.spawn(move || {
                let mut rng = Rng::new(w as u64);
                loop {
                    // The lock is held while the worker waits, as in a pool that shares
                    // one receiver, and dropped at the end of the statement.
                    let next = rx.lock().unwrap().recv();
                    let Ok(request) = next else { return };
                    serve(request, &mut rng);
                }
            });
        }
        let mut rng = Rng::new(0);
        for _ in 0..requests {
            let request = Block::new(rng.between((64, 2047)));
            tx.send(request).expect("workers alive");
        }
        drop(tx);
    });
    requests
}

/// Build a response to `request`, then drop it all.
fn serve(request: Block, rng: &mut Rng) {
    let response = Block::new(rng.between((128, 8191)));
    let temporaries: [Block; TEMPORARIES] =
        std::array::from_fn(|_| Block::new(rng.between((16, 127))));
    drop(temporaries);
    drop(request);
    drop(response);
}
