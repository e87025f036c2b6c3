//! A thread keeps the large blocks of up to a chunk that it frees (`kept::KeptLarge`, in
//! its heap): its next request that such a block serves takes it
//! (the lowest address first) without the cache of extents; a fifth block freed while
//! four are kept sends the highest to the cache, as does a request that no kept block
//! serves; blocks over a chunk, blocks a resize made, and those freed by a thread that
//! has no heap, go to the cache; `trim`, the end of the thread and an upkeep that finds none taken since the one
//! before give the kept blocks to the cache.
//!
//! The cache's counters are process-wide: one test, its steps in turn.

use hakmem_core::{alloc, dealloc, realloc, stats, trim, usable_size, CHUNK_SIZE};

const MIB: usize = 1 << 20;

/// Set the calling thread's heap up (a small block's slow path): only a thread with a
/// heap keeps large blocks.
fn set_up_heap() {
    // SAFETY: a fresh block, freed with its request.
    unsafe { dealloc(alloc(64, 16), 64, 16) };
}

fn large(size: usize) -> *mut u8 {
    let p = alloc(size, 16);
    assert!(!p.is_null());
    // SAFETY: a fresh block of `size` bytes: its ends.
    unsafe {
        p.write(1);
        p.add(size - 1).write(1);
    }
    p
}

fn free(p: *mut u8, size: usize) {
    // SAFETY: the callers' live blocks, made with `(size, 16)`.
    unsafe { dealloc(p, size, 16) };
}

#[test]
fn a_thread_reuses_the_large_blocks_it_freed_and_gives_them_back() {
    set_up_heap();
    trim();

    // Kept: the next request it serves takes it, whatever its size within the chunk,
    // and the cache never sees it.
    let a = large(3 * MIB);
    let cached = stats().cached_large;
    free(a, 3 * MIB);
    assert_eq!(stats().cached_large, cached, "a kept block is not cached");
    let b = large(5 * MIB / 2);
    assert_eq!(b, a, "the kept block serves the next request");

    // A half of a pair chunk serves a half's request; a request that no kept block
    // serves gives the highest kept block to the cache.
    let h = large(3 * MIB / 2);
    free(h, 3 * MIB / 2);
    assert_eq!(
        large(5 * MIB / 4),
        h,
        "the kept half serves a half's request"
    );
    free(h, 5 * MIB / 4);
    // (Kept blocks count as allocated: the half leaves the count, the chunk enters it.)
    let allocated = stats().allocated;
    let whole = large(3 * MIB);
    assert!(
        usable_size(whole) >= 3 * MIB,
        "a half served a whole block's request"
    );
    assert_eq!(
        stats().allocated,
        allocated + CHUNK_SIZE - CHUNK_SIZE / 2,
        "the missed request gave the kept half to the cache"
    );
    free(whole, 3 * MIB);

    // The lowest address first.
    let c = large(3 * MIB);
    assert_eq!(c, whole, "the kept block serves the next request");
    let c = large(3 * MIB);
    let (lo, hi) = if b < c { (b, c) } else { (c, b) };
    free(hi, 3 * MIB);
    free(lo, 3 * MIB);
    assert_eq!(large(3 * MIB), lo, "the lowest kept block first");
    assert_eq!(large(3 * MIB), hi);

    // Four kept at most: of five freed, the highest goes to the cache.
    let mut five: Vec<*mut u8> = (0..3).map(|_| large(3 * MIB)).collect();
    five.extend([lo, hi]);
    five.sort();
    let highest = *five.last().unwrap();
    let cached = stats().cached_large;
    for &p in five.iter().rev() {
        free(p, 3 * MIB);
    }
    assert!(
        stats().cached_large >= cached + CHUNK_SIZE,
        "the fifth block went to the cache"
    );
    let again: Vec<*mut u8> = (0..4).map(|_| large(3 * MIB)).collect();
    assert_eq!(again, five[..4], "the four lowest were kept");
    assert!(!again.contains(&highest));
    free(whole, 3 * MIB);

    // Made by a resize (which may well grow on, in place where the cache holds the
    // extent after it): to the cache.
    let small = alloc(200 << 10, 16);
    assert!(!small.is_null());
    // SAFETY: a live block of 200 KiB, resized to a large one.
    let grown = unsafe { realloc(small, 200 << 10, 16, 3 * MIB) };
    assert!(!grown.is_null());
    let cached = stats().cached_large;
    free(grown, 3 * MIB);
    assert!(
        stats().cached_large >= cached + CHUNK_SIZE,
        "a block a resize made went to the cache"
    );

    // Over a chunk: to the cache.
    let big = large(6 * MIB);
    let cached = stats().cached_large;
    free(big, 6 * MIB);
    assert!(
        stats().cached_large >= cached + 6 * MIB,
        "a block over a chunk"
    );

    // `trim` gives what the thread keeps to the cache, which it empties.
    for &p in &again {
        free(p, 3 * MIB);
    }
    let before = stats();
    trim();
    let after = stats();
    assert_eq!(after.cached_large, 0);
    assert!(
        after.mapped + 4 * CHUNK_SIZE <= before.mapped,
        "trim unmapped the kept blocks: {before:?} -> {after:?}"
    );

    // A thread with no heap keeps nothing; one with a heap gives what it keeps to the
    // cache when it ends.
    for with_heap in [false, true] {
        let p = large(3 * MIB) as usize;
        let cached = stats().cached_large;
        std::thread::spawn(move || {
            if with_heap {
                set_up_heap();
            }
            free(p as *mut u8, 3 * MIB);
        })
        .join()
        .expect("the freeing thread");
        assert!(
            stats().cached_large >= cached + CHUNK_SIZE,
            "freed by a thread {} a heap",
            if with_heap {
                "that ended, with"
            } else {
                "without"
            }
        );
    }

    // An upkeep (every 512 slow paths) that finds no kept block taken since the one
    // before gives them to the cache. Batches of small blocks refill and flush their bin
    // again and again, thousands of slow paths; small batches, one first, so that the
    // superslabs the others take wait empty in the pool: a superslab wanted when none
    // does is taken from the cache's chunks.
    let small_batch = || {
        let batch: Vec<*mut u8> = (0..5_000).map(|_| alloc(1000, 16)).collect();
        for q in batch {
            free(q, 1000);
        }
    };
    small_batch();
    let p = large(3 * MIB);
    let cached = stats().cached_large;
    free(p, 3 * MIB);
    for _ in 0..40 {
        small_batch();
    }
    assert!(
        stats().cached_large >= cached + CHUNK_SIZE,
        "an idle kept block went to the cache at an upkeep"
    );
}
