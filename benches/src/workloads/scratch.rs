//! Hoard's cache-scratch, the test of allocator-induced *passive false sharing*: the main
//! thread allocates one small object for each of [`THREADS`] threads (neighbours in
//! memory, on one cache line: [`neighbours`]), each thread frees the one it was given,
//! then allocates an object of the same size, updates every byte of it [`ROUNDS`] times
//! and frees it, over and over. An allocator that hands a thread the block it just
//! freed, which lies on the line another thread's object lies on, makes the two threads'
//! caches fight over that line for as long as they keep reusing it. One operation is one
//! object allocated, updated and freed.

use crate::Block;

/// Threads, each given one of the main thread's objects.
const THREADS: usize = 2;
/// Bytes of each object.
const SIZE: usize = 8;
/// Times every byte of an object is updated before it is freed.
const ROUNDS: usize = 100;

pub fn run(ops: u64) -> u64 {
    scratch(ops, 0)
}

/// Objects of the size that each thread of `cache-scratch-warm` allocates and frees
/// before it frees the one it was given.
const WARM: usize = 16;

/// `cache-scratch` with warm threads: each first allocates [`WARM`] objects of the size
/// and frees them (a pool's worker that served requests before), so that its cache holds
/// blocks of its own when it frees the one it was given.
pub fn run_warm(ops: u64) -> u64 {
    scratch(ops, WARM)
}

/// Objects made at most while looking for [`THREADS`] in a row on one cache line.
const PROBE: usize = 64;
/// Bytes of a cache line.
const LINE: usize = 64;

/// The objects for the threads: the first [`THREADS`] made in a row that lie on one cache
/// line, out of at most [`PROBE`] (the ones before them freed), so that the threads share
/// a line wherever the blocks made before left the next ones (with the musl build's
/// allocations before, hakmem's first two straddled a line); the last ones made if no
/// such run comes (an allocator that spaces its objects apart escapes fairly).
fn neighbours() -> Vec<Block> {
    let mut made: Vec<Block> = Vec::with_capacity(PROBE);
    while made.len() < PROBE {
        made.push(Block::new(SIZE));
        if let Some(run) = made.last_chunk::<THREADS>() {
            if run.iter().all(|b| b.addr() / LINE == run[0].addr() / LINE) {
                break;
            }
        }
    }
    made.split_off(made.len() - THREADS)
}

fn scratch(ops: u64, warm: usize) -> u64 {
    let each = (ops / THREADS as u64).max(1);
    let given = neighbours();
    std::thread::scope(|s| {
        for first in given {
            s.spawn(move || {
                let own: Vec<Block> = (0..warm).map(|_| Block::new(SIZE)).collect();
                drop(own);
                drop(first);
                for _ in 0..each {
                    let mut b = Block::new(SIZE);
                    b.scribble(ROUNDS);
                }
            });
        }
    });
    each * THREADS as u64
}
