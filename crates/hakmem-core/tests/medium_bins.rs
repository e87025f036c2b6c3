//! A thread cache keeps up to `config::MEDIUM_BIN_BYTES` (256 KiB) of a medium class that
//! the thread allocates again and again: 4 blocks of 64 KiB. With one block a medium
//! bin, a program replacing a few 64 KiB buffers at random carved or released a span at
//! every other allocation or free.
//!
//! The counters are process-wide, so this binary holds one test: nothing else in the
//! process allocates from hakmem while it measures (the harness uses the system
//! allocator).

mod usage;

use hakmem_core::{alloc, dealloc};

const SIZE: usize = 64 << 10;

#[test]
fn a_medium_bin_keeps_four_blocks_of_64_kib() {
    std::thread::spawn(|| {
        // Each allocation misses (the bin is empty) and doubles the bin's capacity, up
        // to its maximum.
        let blocks: Vec<*mut u8> = (0..8).map(|_| alloc(SIZE, 16)).collect();
        assert!(blocks.iter().all(|p| !p.is_null()));
        for &p in &blocks[..4] {
            // SAFETY: live blocks of `SIZE`, each freed once.
            unsafe { dealloc(p, SIZE, 16) };
        }
        let u = usage::of(SIZE);
        assert_eq!(u.thread_caches, 4 * u.block_size, "{u:?}");
        // They come back from the cache, the last freed first.
        let again: Vec<*mut u8> = (0..4).map(|_| alloc(SIZE, 16)).collect();
        let freed: Vec<*mut u8> = blocks[..4].iter().rev().copied().collect();
        assert_eq!(again, freed);
        for p in again.into_iter().chain(blocks[4..].iter().copied()) {
            // SAFETY: as above.
            unsafe { dealloc(p, SIZE, 16) };
        }
    })
    .join()
    .expect("the thread's checks");
}
