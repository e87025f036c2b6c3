//! A thread that frees medium blocks another thread allocated, and allocates none of
//! their class itself (a pipeline's consumer of big buffers), keeps none of them: each
//! goes back to its owner's span at once, where the owner's next block of the class
//! finds it while the consumer still runs.
//!
//! Its own process with one test: the owner's heap holds only this test's blocks.

use hakmem_core::{alloc, free};
use std::sync::mpsc;

const KIB: usize = 1024;

#[test]
fn a_thread_that_only_frees_medium_blocks_keeps_none() {
    let p = alloc(700 * KIB, 16) as usize;
    assert_ne!(p, 0);
    let (freed_tx, freed) = mpsc::channel::<()>();
    let (done, wait) = mpsc::channel::<()>();
    let consumer = std::thread::spawn(move || {
        // SAFETY: a live block that the other thread handed over.
        unsafe { free(p as *mut u8) };
        freed_tx.send(()).unwrap();
        // Still running, its cache whole, while the owner allocates.
        wait.recv().unwrap();
    });
    freed.recv().unwrap();
    // The span came home and is free: the owner's next block of the class lies there.
    let q = alloc(700 * KIB, 16);
    assert_eq!(q as usize, p, "the consumer kept the block in its cache");
    done.send(()).unwrap();
    consumer.join().unwrap();
    // SAFETY: a live block, given up.
    unsafe { free(q) };
}
