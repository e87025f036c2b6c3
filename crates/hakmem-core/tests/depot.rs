//! The depot passes free blocks between threads: what one thread freed beyond its cache
//! serves another thread's allocations while the first still runs (without it, each
//! thread allocates only from its own slabs), and `trim` empties it.
//!
//! The counters are process-wide, so this binary holds one test: nothing else in the
//! process allocates from hakmem while it runs (the harness uses the system allocator).

mod usage;

use hakmem_core::{alloc, dealloc, trim};
use std::collections::HashSet;
use std::sync::mpsc;

/// Blocks over 1 KiB go through the depot.
const SIZE: usize = 3000;
const N: usize = 200;

/// The depot's blocks are counted once: the fields after `slabs` add up to it (nothing
/// runs meanwhile).
fn depot_bytes() -> usize {
    let u = usage::of(SIZE);
    usage::assert_adds_up(&u);
    u.depot
}

#[test]
fn blocks_one_thread_freed_serve_another_while_it_runs() {
    let (freed_tx, freed) = mpsc::channel::<Vec<usize>>();
    let (done, wait) = mpsc::channel::<()>();
    let first = std::thread::spawn(move || {
        let blocks: Vec<usize> = (0..N).map(|_| alloc(SIZE, 16) as usize).collect();
        assert!(blocks.iter().all(|&p| p != 0));
        for &p in &blocks {
            // SAFETY: live blocks of `SIZE`.
            unsafe { dealloc(p as *mut u8, SIZE, 16) };
        }
        freed_tx.send(blocks).unwrap();
        wait.recv().unwrap(); // still running while the other thread allocates
    });
    let theirs: HashSet<usize> = freed.recv().unwrap().into_iter().collect();
    assert!(
        depot_bytes() > 0,
        "a thread cache that overflowed passed blocks on"
    );

    let mine: Vec<usize> = (0..N / 2).map(|_| alloc(SIZE, 16) as usize).collect();
    let reused = mine.iter().filter(|p| theirs.contains(p)).count();
    assert!(
        reused >= N / 4,
        "{reused} of {} blocks came from the other thread's frees",
        mine.len()
    );
    for &p in &mine {
        // SAFETY: live blocks of `SIZE`.
        unsafe { dealloc(p as *mut u8, SIZE, 16) };
    }
    done.send(()).unwrap();
    first.join().unwrap();
    trim();
    assert_eq!(depot_bytes(), 0, "trim empties the depot");
}
