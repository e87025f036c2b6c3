//! Per-class statistics: where a class's bytes are (live, in thread caches, on remote
//! lists, free in slabs) follows what the program does, block for block.
//!
//! The counters are process-wide, so this binary holds one test: nothing else in the
//! process allocates from hakmem while it measures (the harness uses the system
//! allocator).

mod usage;

use hakmem_core::{alloc, dealloc, trim, ClassUsage};
use std::sync::mpsc;
use usage::assert_adds_up;

const SIZE: usize = 100;
const N: usize = 10_000;

fn usage_of_class() -> ClassUsage {
    usage::of(SIZE)
}

#[test]
fn class_usage_follows_blocks_through_their_states() {
    let start = usage_of_class();
    assert_adds_up(&start);
    let bs = start.block_size;
    assert!(bs >= SIZE);

    // Live: exactly the blocks the program holds, though the cache refilled in batches.
    let held: Vec<usize> = (0..N).map(|_| alloc(SIZE, 16) as usize).collect();
    assert!(held.iter().all(|&p| p != 0));
    let full = usage_of_class();
    assert_eq!(full.live, start.live + N * bs, "{full:?}");
    assert!(full.slabs >= N * bs);
    assert_adds_up(&full);

    // Every other block freed and flushed: back on their slabs' free lists, which stay
    // (each slab still has live blocks).
    for &p in held.iter().step_by(2) {
        // SAFETY: live blocks of `SIZE`.
        unsafe { dealloc(p as *mut u8, SIZE, 16) };
    }
    trim();
    let half = usage_of_class();
    assert_eq!(half.live, start.live + N / 2 * bs, "{half:?}");
    assert_eq!(half.thread_caches, 0, "{half:?}");
    assert!(half.free_in_slabs >= N / 2 * bs, "{half:?}");
    assert_eq!(half.slabs, full.slabs, "{half:?}");
    assert_adds_up(&half);

    // Freed by this thread: in its cache or back in the slabs, none live.
    for &p in held.iter().skip(1).step_by(2) {
        // SAFETY: live blocks of `SIZE`.
        unsafe { dealloc(p as *mut u8, SIZE, 16) };
    }
    let freed = usage_of_class();
    assert_eq!(freed.live, start.live, "{freed:?}");
    assert!(
        freed.thread_caches > 0,
        "the last frees stay cached: {freed:?}"
    );
    assert_eq!(freed.remote, 0, "{freed:?}");
    assert_adds_up(&freed);
    trim();
    let trimmed = usage_of_class();
    assert_eq!(trimmed.thread_caches, 0, "{trimmed:?}");
    assert!(
        trimmed.slabs < full.slabs,
        "empty slabs are released: {trimmed:?}"
    );
    assert_eq!(trimmed.live, start.live, "{trimmed:?}");

    // Remote: another thread's blocks, freed here and flushed, wait on its remote lists
    // while it sleeps, and come home when it exits.
    let (give, take) = mpsc::channel::<Vec<usize>>();
    let (done, wait) = mpsc::channel::<()>();
    let owner = std::thread::spawn(move || {
        let blocks: Vec<usize> = (0..N).map(|_| alloc(SIZE, 16) as usize).collect();
        give.send(blocks).unwrap();
        wait.recv().unwrap();
    });
    let blocks = take.recv().unwrap();
    assert!(blocks.iter().all(|&p| p != 0));
    // The other thread's cache is read as its last refill left it, so some of its
    // blocks may count as cached rather than live.
    let theirs = usage_of_class();
    assert!(theirs.live <= trimmed.live + N * bs, "{theirs:?}");
    assert!(
        theirs.live + theirs.thread_caches >= trimmed.live + N * bs,
        "{theirs:?}"
    );
    for &p in &blocks {
        // SAFETY: live blocks of `SIZE`, handed to this thread.
        unsafe { dealloc(p as *mut u8, SIZE, 16) };
    }
    trim();
    let pending = usage_of_class();
    assert_eq!(pending.remote, N * bs, "{pending:?}");
    assert_eq!(pending.live, trimmed.live, "{pending:?}");
    assert_adds_up(&pending);
    done.send(()).unwrap();
    owner.join().unwrap();
    let home = usage_of_class();
    assert_eq!(home.remote, 0, "{home:?}");
    assert_eq!(
        home.thread_caches, 0,
        "an exited thread's cache is empty: {home:?}"
    );
    assert_eq!(home.live, trimmed.live, "{home:?}");
    assert_adds_up(&home);
}
