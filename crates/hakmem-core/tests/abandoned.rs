//! Memory of threads that exited: once every block they left behind has been freed (by
//! other threads), `trim` can give it back, even if no thread ever adopts it.
//!
//! The counters are process-wide, so this binary holds one test.

#[path = "../../hakmem/tests/common/mod.rs"]
mod common;

use hakmem_core::{alloc, dealloc, stats, trim};

const MIB: usize = 1 << 20;
const SIZE: usize = 1000;

#[test]
fn trim_returns_superslabs_of_exited_threads_once_their_blocks_are_freed() {
    // Set this thread up first, so that what it owns is not counted below.
    // SAFETY: a fresh block, freed as made.
    unsafe { dealloc(alloc(16, 16), 16, 16) };
    trim();
    let start = stats();
    // Four threads fill 32 MiB with blocks, hand them all over and exit.
    let workers: Vec<_> = (0..4u64)
        .map(|t| {
            std::thread::spawn(move || {
                (0..8000u64)
                    .map(|i| {
                        let p = alloc(SIZE, 16);
                        assert!(!p.is_null());
                        // SAFETY: a fresh block of SIZE bytes.
                        unsafe { common::fill(p, 0, SIZE, t << 32 | i) };
                        (p as usize, t << 32 | i)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    // `join` returns once each thread's exit hook has run.
    let blocks: Vec<(usize, u64)> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    let full = stats();
    assert!(full.mapped >= start.mapped + 30 * MIB, "{full:?}");
    for (p, id) in blocks {
        // SAFETY: live blocks of SIZE bytes, handed over by their threads.
        unsafe {
            common::check(p as *const u8, 0, SIZE, id, "after its thread exited");
            dealloc(p as *mut u8, SIZE, 16);
        }
    }
    trim();
    let trimmed = stats();
    assert!(
        trimmed.mapped < start.mapped + 8 * MIB,
        "every block is free and trim() ran, yet {} KiB stay mapped ({} KiB before the \
         threads): {trimmed:?}",
        trimmed.mapped >> 10,
        start.mapped >> 10
    );
}
