//! Which cached extent a large block takes: among those that leave it the same bytes, the
//! one at the lowest address, not the one freed first.
//!
//! A program cycling blocks of a chunk or less then keeps reusing its lowest chunks, and
//! the chunks above them serve only the peaks of its live set. Taken oldest first, every
//! chunk took its turn, and each gathered the end pages of every size placed in it
//! (`large` peaked 5 MiB higher, docs/MEMORY.md).
//!
//! One test in this binary: it reads the process's one large cache.

use hakmem_core::{alloc, dealloc, stats};

const MIB: usize = 1 << 20;

#[test]
fn a_block_takes_the_lowest_of_equal_extents() {
    // Blocks of 3 MiB take a whole chunk each (more than half of one).
    let size = 3 * MIB;
    let mut blocks: Vec<*mut u8> = (0..5).map(|_| alloc(size, 16)).collect();
    assert!(blocks.iter().all(|p| !p.is_null()));
    blocks.sort();
    // Free the first, third and fifth by address, highest first, so the oldest extent is
    // the highest: the live second and fourth keep the three from merging.
    let freed = [blocks[4], blocks[2], blocks[0]];
    for &p in &freed {
        // SAFETY: a live block made with `(size, 16)`, freed once.
        unsafe { dealloc(p, size, 16) };
    }
    assert_eq!(stats().cached_large, 3 * 4 * MIB, "three one-chunk extents");

    let again: Vec<*mut u8> = (0..3).map(|_| alloc(size, 16)).collect();
    assert_eq!(
        again,
        [blocks[0], blocks[2], blocks[4]],
        "each block takes the lowest cached chunk"
    );
    for p in again.into_iter().chain([blocks[1], blocks[3]]) {
        // SAFETY: live blocks made with `(size, 16)`, each freed once.
        unsafe { dealloc(p, size, 16) };
    }
}
