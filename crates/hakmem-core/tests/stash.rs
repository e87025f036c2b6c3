//! A batch a thread frees in scattered order, once the class's bin is full, waits in the
//! thread's stash of addresses (`thread_cache.rs`, `Stash`) and goes back to the spans'
//! bitmaps from there: those frees write nothing into the blocks, which is what keeps
//! them from missing the cache on every block. Blocks freed in address order keep the
//! bin's way, linked through their first word. Both kinds come back whole.
//!
//! The class statistics are process-wide, so this binary holds one test.

#[path = "../../hakmem/tests/common/mod.rs"]
mod common;
mod usage;

use hakmem_core::{alloc, dealloc, trim};
use usage::assert_adds_up;

const SIZE: usize = 32;
const BLOCKS: usize = 20_000;

/// A word no link can be: odd.
fn mark(i: usize) -> u64 {
    (i as u64) << 1 | 1
}

/// Allocate `BLOCKS` blocks, each marked with [`mark`].
fn marked_blocks() -> Vec<*mut u8> {
    let blocks: Vec<*mut u8> = (0..BLOCKS).map(|_| alloc(SIZE, 16)).collect();
    assert!(blocks.iter().all(|p| !p.is_null()));
    for (i, &p) in blocks.iter().enumerate() {
        // SAFETY: a fresh block of `SIZE`, 16-aligned.
        unsafe { (p as *mut u64).write(mark(i)) };
    }
    blocks
}

/// Free `blocks` in `order` (indexes), and count those whose first word still holds
/// their mark right after their own free.
fn free_counting_unwritten(blocks: &[*mut u8], order: &[usize]) -> usize {
    let mut unwritten = 0;
    for &i in order {
        // SAFETY: a live block of `SIZE`, freed once.
        unsafe { dealloc(blocks[i], SIZE, 16) };
        // SAFETY: the block's superslab stays mapped (the caller keeps a block of it
        // live); the word is read from memory hakmem owns and nothing writes meanwhile.
        let first = unsafe { core::ptr::read_volatile(blocks[i] as *const u64) };
        unwritten += usize::from(first == mark(i));
    }
    unwritten
}

/// After a trim, the class holds nothing in the thread's cache and only `live` more
/// bytes live than at `start`.
fn assert_back(start: &hakmem_core::ClassUsage, live: usize) {
    trim();
    let now = usage::of(SIZE);
    assert_adds_up(&now);
    assert_eq!(now.thread_caches, 0, "{now:?}");
    assert_eq!(now.live, start.live + live, "{now:?}");
}

#[test]
fn scattered_frees_leave_blocks_unwritten_and_ordered_ones_link_them() {
    std::thread::spawn(|| {
        let start = usage::of(SIZE);
        let keep = alloc(SIZE, 16); // keeps the superslab mapped
        let bs = usage::of(SIZE).live - start.live;

        let blocks = marked_blocks();
        let mut order: Vec<usize> = (0..BLOCKS).collect();
        common::shuffle(&mut order);
        let unwritten = free_counting_unwritten(&blocks, &order);
        // All but the frees that filled the bin (its capacity, a few hundred blocks) and
        // the few next to the stash's last block twice in a row.
        assert!(unwritten > BLOCKS * 9 / 10, "{unwritten} of {BLOCKS}");
        assert_back(&start, bs);

        let blocks = marked_blocks();
        let order: Vec<usize> = (0..BLOCKS).collect();
        let unwritten = free_counting_unwritten(&blocks, &order);
        // The stash takes no second block in a row near its last one: two in each 66
        // (the one far from the stash's last, 65 blocks back, and its neighbour), then
        // the bin overflows and has room for 64.
        assert!(unwritten < BLOCKS / 20, "{unwritten} of {BLOCKS}");
        assert_back(&start, bs);

        // SAFETY: a live block of `SIZE`.
        unsafe { dealloc(keep, SIZE, 16) };
    })
    .join()
    .expect("the thread's checks");
}
