//! Which cached extent a large block takes (`large::take_cached`): a block of one chunk
//! or less the lowest chunk, not the one freed first; a longer block the shortest extent
//! that holds it, not a piece of a lower, longer one.
//!
//! A program cycling blocks of a chunk or less then keeps reusing its lowest chunks, and
//! the chunks above them serve only the peaks of its live set. Taken oldest first, every
//! chunk took its turn, and each gathered the end pages of every size placed in it
//! (`large` peaked 5 MiB higher, docs/MEMORY.md). A longer block needs a run of chunks,
//! and one cut from a longer run leaves the next long block without one.
//!
//! One test in this binary: it reads the process's one large cache.

use hakmem_core::{alloc, dealloc, stats, trim};

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
    trim();
    assert_eq!(stats().cached_large, 0, "trim empties the cache");
    a_long_block_takes_the_shortest_extent();
}

/// A block of two chunks, offered a cached run of three chunks at a lower address and one
/// of two at a higher, takes the run of two.
fn a_long_block_takes_the_shortest_extent() {
    let (long, short, gap) = (9 * MIB, 5 * MIB, 3 * MIB);
    // In turn, with a live block of one chunk after each so that none merge when freed.
    let sizes = [long, gap, short, gap, long, gap, short, gap];
    let blocks: Vec<*mut u8> = sizes.iter().map(|&n| alloc(n, 16)).collect();
    assert!(blocks.iter().all(|p| !p.is_null()));
    let lowest_long = *[blocks[0], blocks[4]].iter().min().unwrap();
    let highest_short = *[blocks[2], blocks[6]].iter().max().unwrap();
    assert!(
        lowest_long < highest_short,
        "the layout this test needs: a run of three chunks below one of two"
    );
    // SAFETY: live blocks made with those sizes, each freed once.
    unsafe {
        dealloc(lowest_long, long, 16);
        dealloc(highest_short, short, 16);
    }
    assert_eq!(
        stats().cached_large,
        5 * 4 * MIB,
        "runs of three chunks and two"
    );

    let p = alloc(short, 16);
    assert_eq!(p, highest_short, "the shortest extent that holds the block");
    assert_eq!(
        stats().cached_large,
        3 * 4 * MIB,
        "the run of three stays whole"
    );
    // SAFETY: live blocks made with those sizes (`p` in place of `highest_short`), each
    // freed once.
    unsafe {
        dealloc(p, short, 16);
        for (&q, &n) in blocks.iter().zip(&sizes) {
            if q != lowest_long && q != highest_short {
                dealloc(q, n, 16);
            }
        }
    }
}
