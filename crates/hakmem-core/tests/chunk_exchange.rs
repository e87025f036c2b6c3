//! Memory given back as one kind of block serves the other without a fresh mapping, where
//! the program writes its big buffers through (the last large block given fresh memory
//! is mostly resident): a large block of a chunk or less that no cached extent holds
//! takes the chunk of an empty superslab (`pool::take_empty_chunk`, once the thread gave
//! back the small blocks it caches), and a superslab wanted when the pool has none takes a
//! chunk of the cache of extents (`large::take_chunk`) if its heap wants huge pages (a
//! small heap's would keep a whole resident chunk for a few blocks). Where the program
//! touches its large blocks at their ends, neither: a chunk that changes kind keeps the
//! pages the other kind had resident.
//!
//! The pool, the cache and the evidence are process-wide: one test, its steps in turn.

use hakmem_core::{alloc, dealloc, owner, stats, trim, Owner, CHUNK_SIZE};
use std::collections::HashSet;

const MIB: usize = 1 << 20;
const SMALL: usize = 1000;

fn chunk(p: usize) -> usize {
    assert_ne!(p, 0);
    p & !(CHUNK_SIZE - 1)
}

/// A live block of `size` bytes, every byte written with ones (`through`), or its ends
/// only.
fn block(size: usize, through: bool) -> usize {
    let p = alloc(size, 16);
    assert!(!p.is_null());
    // SAFETY: a live block of `size` bytes.
    unsafe {
        if through {
            p.write_bytes(0xff, size);
        } else {
            p.write(0xff);
            p.add(size - 1).write(0xff);
        }
    }
    p as usize
}

fn free(p: usize, size: usize) {
    // SAFETY: the callers' live blocks, made with `(size, 16)`.
    unsafe { dealloc(p as *mut u8, size, 16) };
}

/// `n` small blocks, freed every other one first (so that blocks go back to their spans'
/// bitmaps one by one, which a header left as a large block wrote it would have set),
/// after `check` saw their chunks. Returns the chunks.
fn small_blocks(n: usize, check: impl FnOnce(&[usize])) -> HashSet<usize> {
    let blocks: Vec<usize> = (0..n).map(|_| block(SMALL, true)).collect();
    let chunks: Vec<usize> = blocks.iter().map(|&p| chunk(p)).collect();
    check(&chunks);
    for pass in 0..2 {
        for &p in blocks.iter().skip(pass).step_by(2) {
            // SAFETY: written above, still live.
            assert_eq!(unsafe { (p as *const u8).read() }, 0xff);
            free(p, SMALL);
        }
    }
    chunks.into_iter().collect()
}

/// [`small_blocks`] on a thread of its own, whose exit gives its empty superslabs to the
/// pool.
fn small_blocks_on_a_thread(
    n: usize,
    check: impl FnOnce(&[usize]) + Send + 'static,
) -> HashSet<usize> {
    std::thread::spawn(move || small_blocks(n, check))
        .join()
        .expect("the small blocks' thread")
}

/// Free `blocks` on a thread without a heap: large blocks go to the cache of extents
/// (a thread would keep some).
fn free_to_the_cache(blocks: Vec<(usize, usize)>) {
    std::thread::spawn(move || {
        for (p, size) in blocks {
            free(p, size);
        }
    })
    .join()
    .expect("the freeing thread");
}

/// `n` small blocks on a thread of their own, in no chunk of `cached` (chunks of cached
/// extents), which all stay in the cache.
fn none_serves_small_blocks(n: usize, cached: HashSet<usize>) {
    let bytes = stats().cached_large;
    small_blocks_on_a_thread(n, move |chunks| {
        assert!(
            !cached.iter().any(|c| chunks.contains(c)),
            "a cached chunk served a superslab"
        );
    });
    assert_eq!(stats().cached_large, bytes, "a chunk left the cache");
}

/// A fresh 3 MiB block written through (`through`) or at its ends: the evidence the
/// exchange goes by, until the next block given fresh memory.
fn evidence(through: bool) -> (usize, usize) {
    let mmaps = stats().mmap_calls;
    let p = block(3 * MIB, through);
    assert_eq!(stats().mmap_calls, mmaps + 1, "the evidence is not fresh");
    (p, 3 * MIB)
}

#[test]
fn freed_memory_serves_the_other_kind_of_block_where_big_buffers_are_written_through() {
    trim();
    let written = evidence(true);

    // Empty superslabs serve large blocks, plain or half of a pair chunk, with no mapping
    // made, while the pool keeps one.
    let emptied = small_blocks_on_a_thread(20_000, |_| {});
    assert!(emptied.len() >= 4, "{} superslabs", emptied.len());
    assert_eq!(stats().cached_superslabs, emptied.len());
    let mmaps = stats().mmap_calls;
    let sizes = [3 * MIB, 3 * MIB / 2];
    let large = sizes.map(|size| block(size, true));
    for (p, size) in large.into_iter().zip(sizes) {
        assert!(
            emptied.contains(&chunk(p)),
            "a large block in a fresh chunk while empty superslabs waited"
        );
        // The chunk's class map says large now, and a pointer into the block is none.
        assert!(matches!(owner(p as *const u8), Owner::Large { usable } if usable >= size));
        assert_eq!(owner((p + (64 << 10)) as *const u8), Owner::Invalid);
    }
    assert_eq!(stats().mmap_calls, mmaps, "no mapping made");

    // Freed to the cache, their chunks serve superslabs once the pool has none.
    let freed: HashSet<usize> = large.iter().map(|&p| chunk(p)).collect();
    free_to_the_cache(large.into_iter().zip(sizes).collect());
    let cached = stats().cached_large;
    assert!(cached >= 2 * CHUNK_SIZE, "{cached} bytes cached");
    small_blocks_on_a_thread(40_000, move |chunks| {
        assert!(
            freed.iter().any(|c| chunks.contains(c)),
            "small blocks in fresh chunks while cached chunks waited"
        );
    });
    assert!(stats().cached_large < cached, "no chunk left the cache");
    free_to_the_cache(vec![written]);

    // A small heap's superslab holds little and would keep a whole resident chunk: it
    // takes none from the cache.
    trim();
    let written = evidence(true);
    let large: Vec<(usize, usize)> = (0..3).map(|_| (block(3 * MIB, true), 3 * MIB)).collect();
    let freed: HashSet<usize> = large.iter().map(|&(p, _)| chunk(p)).collect();
    free_to_the_cache(large);
    assert_eq!(stats().cached_superslabs, 0);
    none_serves_small_blocks(100, freed);
    free_to_the_cache(vec![written]);

    // The small blocks a thread caches keep superslabs from emptying until a large block
    // wants fresh memory: then they go back, and their superslabs serve it.
    trim();
    let written = evidence(true);
    let mut emptied = small_blocks(20_000, |_| {});
    let mmaps = stats().mmap_calls;
    let mut large = Vec::new();
    while stats().mmap_calls == mmaps {
        let p = block(3 * MIB, true);
        large.push((p, 3 * MIB));
        emptied.remove(&chunk(p));
    }
    // Left: the one the heap keeps, and the one the pool keeps.
    assert!(
        emptied.len() <= 2,
        "{} superslabs of the thread's small blocks left when a chunk was mapped",
        emptied.len()
    );
    free_to_the_cache(large);
    free_to_the_cache(vec![written]);

    // Where the last large block given fresh memory was touched at its ends, neither.
    trim();
    let ends = evidence(false);
    let emptied = small_blocks_on_a_thread(20_000, |_| {});
    assert!(emptied.len() >= 4, "{} superslabs", emptied.len());
    let mmaps = stats().mmap_calls;
    let p = block(3 * MIB, false);
    assert!(!emptied.contains(&chunk(p)), "an empty superslab served it");
    assert_eq!(stats().mmap_calls, mmaps + 1);
    // Fresh, it is the evidence now, touched at its ends too.
    free_to_the_cache(vec![(p, 3 * MIB), ends]);
    trim();
    let large: Vec<(usize, usize)> = (0..4).map(|_| (block(3 * MIB, false), 3 * MIB)).collect();
    let freed: HashSet<usize> = large.iter().map(|&(p, _)| chunk(p)).collect();
    let last = large[3];
    free_to_the_cache(large[..3].to_vec());
    none_serves_small_blocks(40_000, freed);
    free_to_the_cache(vec![last]);
}
