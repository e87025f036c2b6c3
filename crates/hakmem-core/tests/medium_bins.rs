//! A thread cache keeps up to `config::MEDIUM_BIN_BYTES` (1 MiB) of the medium class the
//! thread last missed: 16 blocks of 64 KiB. Once another medium class misses, the bin
//! keeps no more than `config::MEDIUM_SIDE_BIN_BYTES` (256 KiB): 4 blocks of 64 KiB.
//! With 256 KiB a bin, a program replacing 64 buffers of 4..64 KiB at random carved a
//! span at one in 25 allocations and released one as often (`c-io-buffers`).
//!
//! The counters are process-wide, so this binary holds one test: nothing else in the
//! process allocates from hakmem while it measures (the harness uses the system
//! allocator).

mod usage;

use hakmem_core::{alloc, dealloc};

const SIZE: usize = 64 << 10;
const OTHER: usize = 128 << 10;

fn alloc_n(size: usize, n: usize) -> Vec<*mut u8> {
    let blocks: Vec<*mut u8> = (0..n).map(|_| alloc(size, 16)).collect();
    assert!(blocks.iter().all(|p| !p.is_null()));
    blocks
}

fn free_all(blocks: &[*mut u8], size: usize) {
    for &p in blocks {
        // SAFETY: live blocks of `size`, each freed once.
        unsafe { dealloc(p, size, 16) };
    }
}

#[test]
fn a_medium_bin_keeps_a_mebibyte_until_another_medium_class_misses() {
    std::thread::spawn(|| {
        // Each allocation misses (the bin is empty) and doubles the bin's capacity, up
        // to its maximum.
        let blocks = alloc_n(SIZE, 32);
        free_all(&blocks[..16], SIZE);
        let u = usage::of(SIZE);
        assert_eq!(u.thread_caches, 16 * u.block_size, "{u:?}");
        // They come back from the cache, the last freed first.
        let again = alloc_n(SIZE, 16);
        let freed: Vec<*mut u8> = blocks[..16].iter().rev().copied().collect();
        assert_eq!(again, freed);

        // A miss of another medium class gives the bin's blocks back and lowers its
        // capacity: of 16 blocks freed, no more than 4 stay cached.
        let other = alloc_n(OTHER, 1);
        assert_eq!(usage::of(SIZE).thread_caches, 0);
        free_all(&again, SIZE);
        let u = usage::of(SIZE);
        assert!(u.thread_caches > 0, "{u:?}");
        assert!(u.thread_caches <= 4 * u.block_size, "{u:?}");

        free_all(&blocks[16..], SIZE);
        free_all(&other, OTHER);
    })
    .join()
    .expect("the thread's checks");
}
