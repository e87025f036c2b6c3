//! Slot churn: each operation frees a random slot of a working set and allocates a block
//! of random size in its place.

use super::{on_threads, Session, Setup};
use crate::{Block, Rng};

/// Sizes in bytes, both ends included.
type Sizes = (usize, usize);

/// One thread, 400 slots of 16..1024 bytes.
pub fn random_mixed(_: &Setup) -> Box<dyn Session> {
    Box::new(Churn {
        slots: empty_slots(400),
        rng: Rng::new(0),
        sizes: (16, 1024),
    })
}

/// A working set churned on the caller's thread; it keeps its blocks between steps.
struct Churn {
    slots: Vec<Option<Block>>,
    rng: Rng,
    sizes: Sizes,
}

impl Session for Churn {
    fn step(&mut self, ops: u64) -> u64 {
        churn(&mut self.slots, &mut self.rng, ops, self.sizes);
        ops
    }
}

pub fn mid_large(ops: u64) -> u64 {
    churn_threads(ops, 2, 64, (8 << 10, 32 << 10))
}

/// One thread, 1000 slots of 16 B..32 KiB: a cache of objects and buffers of all sizes,
/// whose every class is freed and allocated unevenly.
pub fn wide(ops: u64) -> u64 {
    churn_threads(ops, 1, 1000, (16, 32 << 10))
}

pub fn large(ops: u64) -> u64 {
    churn_threads(ops, 1, 16, (64 << 10, 4 << 20))
}

/// One thread, 64 slots of power-of-two buffers of 4..64 KiB, as an I/O layer or a
/// network stack holds them (a page, a TLS record of 16 KiB, a read of 64 KiB). Blocks
/// that large start at the same few offsets of a 64 KiB stretch, and those of 64 KiB
/// are spans of their own.
pub fn io_buffers(ops: u64) -> u64 {
    churn_sized(ops, 64, |rng| 4096 << rng.below(5))
}

/// One thread, a server's 5000 connections, each with a receive buffer of 16, 32 or
/// 64 KiB sized for the largest message it may get, of which one message of 200..4000 B
/// is written from the start; at each operation one connection closes and another opens
/// (the first 5000 operations open them). Most of each buffer is never touched, so
/// memory the allocator makes resident beyond the pages written is waste.
pub fn conn_buffers(ops: u64) -> u64 {
    connections(ops, 5000, 16 << 10, (200, 4000))
}

/// [`conn_buffers`] with small buffers: 20,000 connections, each with a buffer of 2, 4 or
/// 8 KiB holding a message of 100..600 B (a request's headers in a buffer sized for the
/// longest).
pub fn conn_buffers_small(ops: u64) -> u64 {
    connections(ops, 20_000, 2 << 10, (100, 600))
}

/// `n` connections, each with a buffer of `smallest` bytes, twice or four times that,
/// holding a message of `message` bytes (inclusive) written from its start; one
/// connection replaced at each operation once all are open.
fn connections(ops: u64, n: usize, smallest: usize, message: (usize, usize)) -> u64 {
    let mut slots = empty_slots(n);
    let mut rng = Rng::new(0);
    for i in 0..ops {
        let k = if i < n as u64 {
            i as usize
        } else {
            rng.below(n)
        };
        let size = smallest << rng.below(3);
        drop(slots[k].take());
        slots[k] = Some(Block::new_front(size, rng.between(message)));
    }
    ops
}

/// One thread, 4000 slots of pages with a header, as a database's page cache or an I/O
/// layer's buffers ask for them (SQLite's pages are 4096 + 8 bytes): a power of two from
/// 1 to 8 KiB ([`page_size`]) plus 8, 16, 32 or 64 bytes.
pub fn pages(ops: u64) -> u64 {
    churn_sized(ops, 4000, page_size)
}

/// One thread, a ring of 250K slots of 16..512 bytes taken in turn: each operation frees
/// the oldest block and allocates a new one in its place. A queue or a sliding window
/// (messages waiting to be sent, the entries of an LRU cache evicted in the order they
/// came): each block freed was allocated long before and is cold.
pub fn fifo(ops: u64) -> u64 {
    const RING: usize = 250_000;
    let mut ring = empty_slots(RING);
    let mut rng = Rng::new(0);
    for i in 0..ops {
        let slot = &mut ring[(i % RING as u64) as usize];
        drop(slot.take());
        *slot = Some(Block::new(rng.between((16, 512))));
    }
    ops
}

/// One thread, a table of 250K short strings (2..42 B), one replaced at random at each
/// operation: a symbol table, a cache keyed by name, an interpreter's heap of small
/// objects. The live set (11-18 MiB of peak RSS under the allocators we compare, the
/// table included) outgrows the per-core caches, and the block freed is anywhere in it,
/// so each free meets a cold block.
pub fn table(ops: u64) -> u64 {
    churn_sized(ops, 250_000, |rng| rng.between((2, 42)))
}

/// One thread, `n` slots: free a random one, allocate a block of `size(rng)` bytes there.
fn churn_sized(ops: u64, n: usize, mut size: impl FnMut(&mut Rng) -> usize) -> u64 {
    let mut slots = empty_slots(n);
    let mut rng = Rng::new(0);
    for _ in 0..ops {
        let slot = &mut slots[rng.below(n)];
        drop(slot.take());
        *slot = Some(Block::new(size(&mut rng)));
    }
    ops
}

/// 4 KiB half the time, 1 KiB a quarter, 2 and 8 KiB an eighth each; a header of 8, 16,
/// 32 or 64 bytes on top.
fn page_size(rng: &mut Rng) -> usize {
    const PAGES: [usize; 8] = [4096, 4096, 4096, 4096, 1024, 1024, 2048, 8192];
    const HEADERS: [usize; 4] = [8, 16, 32, 64];
    PAGES[rng.below(PAGES.len())] + HEADERS[rng.below(HEADERS.len())]
}

/// Sixteen threads at once (a pool of workers), each churning 256 slots of 16 B..4 KiB
/// of its own: what each thread costs beside the blocks it holds.
pub fn many_threads(ops: u64) -> u64 {
    churn_threads(ops, 16, 256, (16, 4096))
}

/// Many short-lived threads: two at a time, each doing this many operations.
pub fn thread_churn(ops: u64) -> u64 {
    const THREAD_OPS: u64 = 1000;
    let batches = (ops / (2 * THREAD_OPS)).max(1);
    (0..batches)
        .map(|_| churn_threads(2 * THREAD_OPS, 2, 64, (16, 1024)))
        .sum()
}

/// `threads` threads, each churning its own working set of `slots` blocks.
fn churn_threads(ops: u64, threads: usize, slots: usize, sizes: Sizes) -> u64 {
    let per_thread = (ops / threads as u64).max(1);
    on_threads(threads, |t| {
        let mut set = empty_slots(slots);
        churn(&mut set, &mut Rng::new(t as u64), per_thread, sizes);
    });
    per_thread * threads as u64
}

pub fn empty_slots(n: usize) -> Vec<Option<Block>> {
    (0..n).map(|_| None).collect()
}

/// `ops` times: free a random slot (if occupied), then allocate a new block there.
pub fn churn(slots: &mut [Option<Block>], rng: &mut Rng, ops: u64, sizes: Sizes) {
    for _ in 0..ops {
        let slot = &mut slots[rng.below(slots.len())];
        drop(slot.take());
        *slot = Some(Block::new(rng.between(sizes)));
    }
}
