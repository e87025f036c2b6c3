//! Model check of the cross-thread free protocol with loom: run with
//! `RUSTFLAGS="--cfg loom" cargo test -p hakmem-core --test loom --release`.
//!
//! Pushers give chains of blocks back while the owner drains; every interleaving loom
//! explores must deliver every block exactly once, with its links intact, and each taken
//! chain must end at the last block and have the length the list's word gives.
#![cfg(loom)]

use hakmem_core::testing::{Block, RemoteFreeList};

#[path = "loom_arena/mod.rs"]
mod loom_arena;
use loom::sync::Arc;
use loom::thread;
use loom_arena::Arena;
use std::ptr::null_mut;

fn drain(list: &RemoteFreeList, base: usize, seen: &mut Vec<usize>) {
    let chain = list.take_all(base as *mut u8);
    let mut p = chain.first;
    let mut last = null_mut();
    let mut n = 0;
    while !p.is_null() {
        seen.push(p as usize);
        last = p;
        n += 1;
        // SAFETY: taken blocks are the owner's.
        p = unsafe { (*p).next };
    }
    assert_eq!(last, chain.last, "the chain ends at its last block");
    assert_eq!(n, chain.len, "the chain has its length");
}

#[test]
fn pushes_and_drains_deliver_every_block_once() {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    loom::model(|| {
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let list = Arc::new(RemoteFreeList::new());
        let arena = Arena::new(3);
        let base = arena.base();
        let blocks = arena.blocks();
        let a = vec![blocks[0], blocks[1]];
        let b = vec![blocks[2]];
        let mut all: Vec<usize> = a.iter().chain(b.iter()).copied().collect();
        let pushers: Vec<_> = [a, b]
            .into_iter()
            .map(|mine| {
                let list = list.clone();
                thread::spawn(move || {
                    // Link the thread's blocks into one chain and push it.
                    for w in mine.windows(2) {
                        // SAFETY: the blocks are this thread's.
                        unsafe { (*(w[0] as *mut Block)).next = w[1] as *mut Block };
                    }
                    let first = mine[0] as *mut Block;
                    let last = *mine.last().unwrap() as *mut Block;
                    // SAFETY: a chain of the thread's own blocks, in the arena.
                    unsafe { list.push_chain(base as *mut u8, first, last, mine.len() as u32) };
                })
            })
            .collect();
        let mut seen = Vec::new();
        drain(&list, base, &mut seen);
        for p in pushers {
            p.join().unwrap();
        }
        drain(&list, base, &mut seen);
        seen.sort();
        all.sort();
        assert_eq!(seen, all);
    });
    eprintln!(
        "loom explored {} executions",
        RUNS.load(std::sync::atomic::Ordering::Relaxed)
    );
}
