//! Model check of the cross-thread free protocol with loom: run with
//! `RUSTFLAGS="--cfg loom" cargo test -p hakmem-core --test loom --release`.
//!
//! Pushers give chains of blocks back while the owner drains; every interleaving loom
//! explores must deliver every block exactly once, with its links intact.
#![cfg(loom)]

use hakmem_core::testing::{Block, RemoteFreeList};
use loom::sync::Arc;
use loom::thread;
use std::ptr::null_mut;

fn blocks(n: usize) -> Vec<usize> {
    (0..n)
        .map(|_| Box::into_raw(Box::new(Block { next: null_mut() })) as usize)
        .collect()
}

fn drain(list: &RemoteFreeList, seen: &mut Vec<usize>) {
    let mut p = list.take_all();
    while !p.is_null() {
        seen.push(p as usize);
        // SAFETY: taken blocks are the owner's.
        p = unsafe { (*p).next };
    }
}

#[test]
fn pushes_and_drains_deliver_every_block_once() {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    loom::model(|| {
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let list = Arc::new(RemoteFreeList::new());
        let a = blocks(2);
        let b = blocks(1);
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
                    // SAFETY: a chain of the thread's own blocks.
                    unsafe { list.push_chain(first, last) };
                })
            })
            .collect();
        let mut seen = Vec::new();
        drain(&list, &mut seen);
        for p in pushers {
            p.join().unwrap();
        }
        drain(&list, &mut seen);
        seen.sort();
        all.sort();
        assert_eq!(seen, all);
        for p in all {
            // SAFETY: made by `blocks`.
            drop(unsafe { Box::from_raw(p as *mut Block) });
        }
    });
    eprintln!(
        "loom explored {} executions",
        RUNS.load(std::sync::atomic::Ordering::Relaxed)
    );
}
