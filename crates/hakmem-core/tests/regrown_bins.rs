//! A thread's bin shrinks while its class stays idle, and grows back when the thread
//! frees a batch of its own blocks of that class (`thread_cache::regrow_capacity`):
//! otherwise every overflow of the shrunk bin gives back a handful of blocks, and a
//! program that frees a batch of a class it stopped allocating a while ago pays a flush
//! every few frees.
//!
//! The counters are process-wide, so this binary holds one test: nothing else in the
//! process allocates from hakmem while it measures (the harness uses the system
//! allocator).

mod usage;

use hakmem_core::{alloc, dealloc};

const SIZE: usize = 48;
/// Another class, whose slow paths run the thread's upkeep while `SIZE` stays idle.
const OTHER: usize = 256;
const N: usize = 5_000;
/// Rounds of allocating and freeing 2000 blocks of `OTHER`: about 40 slow paths each,
/// so about 15 upkeeps (512 slow paths apart), where 7 take an idle bin from the largest
/// capacity (512) down to its floor (8).
const ROUNDS: usize = 200;

fn free_all(blocks: Vec<*mut u8>, size: usize) {
    for p in blocks {
        // SAFETY: live blocks of `size`, each freed once.
        unsafe { dealloc(p, size, 16) };
    }
}

fn alloc_all(n: usize, size: usize) -> Vec<*mut u8> {
    let blocks: Vec<*mut u8> = (0..n).map(|_| alloc(size, 16)).collect();
    assert!(blocks.iter().all(|p| !p.is_null()));
    blocks
}

#[test]
fn a_shrunk_bin_grows_back_when_its_own_blocks_overflow_it() {
    std::thread::spawn(|| {
        let blocks = alloc_all(N, SIZE);
        for _ in 0..ROUNDS {
            free_all(alloc_all(2000, OTHER), OTHER);
        }
        // The idle bin is at its floor (8 blocks) and holds no more.
        let u = usage::of(SIZE);
        assert!(u.thread_caches <= 8 * u.block_size, "{u:?}");
        free_all(blocks, SIZE);
        // Grown back to its initial capacity (128 blocks of 48 B), the bin keeps at least
        // half of it after a flush; at its floor it would hold 8 at most.
        let u = usage::of(SIZE);
        assert!(u.thread_caches >= 64 * u.block_size, "{u:?}");
    })
    .join()
    .expect("the thread's checks");
}
