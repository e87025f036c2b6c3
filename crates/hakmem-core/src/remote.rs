//! The lock-free list on which threads that do not own a slab give its blocks back.
//!
//! Any thread pushes a chain of blocks with one compare-and-swap; only the slab's owner
//! takes the whole list, with one swap, and so never races another popper: there is no
//! ABA problem because nothing but the owner ever removes a node, and it removes all of
//! them at once.
//!
//! The list is one 64-bit word holding its first block, its last block and its length,
//! so what the owner takes is a chain it can count and append to without walking it (each
//! link is a line another core wrote last, a cache miss apiece). Blocks are named by
//! their distance from a base address the caller gives (its superslab's start), in units
//! of [`MIN_ALIGN`]: 22 bits each for the first and the last block, 20 for the length.
//! Offset 0 names no block (the base is a superslab's header), so the empty list is 0.
//!
//! Ordering: a pusher writes the chain's links, then publishes the word with `Release`;
//! the owner's `Acquire` swap makes those links visible before it walks them.

use crate::size_class::MIN_ALIGN;
use crate::sync::protocol::AtomicU64;
use crate::sync::Ordering;
use core::ptr::null_mut;

/// A free block: while it is free, its first word links it to the next one.
#[repr(C)]
pub struct Block {
    pub next: *mut Block,
}

/// Bits of the word for each block's offset from the base (in units of [`MIN_ALIGN`]).
const OFFSET_BITS: u32 = 22;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
/// Where the length starts in the word; it takes the 20 bits left.
const LEN_SHIFT: u32 = 2 * OFFSET_BITS;
const LEN_MASK: u64 = (1 << (64 - LEN_SHIFT)) - 1;
const UNIT_SHIFT: u32 = MIN_ALIGN.trailing_zeros();

/// How far past the base a block may lie.
pub const REACH: usize = 1 << (OFFSET_BITS + UNIT_SHIFT);
const _: () = assert!(crate::chunk_map::CHUNK_SIZE <= REACH);

/// A chain taken off the list: `first ..= last`, `len` blocks linked through `next`, the
/// last one's link null. `first` and `last` are null when the list was empty.
pub struct Chain {
    pub first: *mut Block,
    pub last: *mut Block,
    pub len: u32,
}

/// A Treiber stack of blocks that knows its last block and its length, pushed by any
/// thread, drained whole by one.
///
/// Invariant: every block on the list lies in `(base, base + REACH)` for the base its
/// pushers and its taker give, aligned to [`MIN_ALIGN`].
pub struct RemoteFreeList {
    word: AtomicU64,
}

fn offset(base: *mut u8, p: *mut Block) -> u64 {
    let off = (p as usize).wrapping_sub(base as usize);
    debug_assert!(off != 0 && off < REACH && off % MIN_ALIGN == 0);
    (off >> UNIT_SHIFT) as u64
}

fn block_at(base: *mut u8, off: u64) -> *mut Block {
    if off == 0 {
        null_mut()
    } else {
        base.wrapping_add((off as usize) << UNIT_SHIFT).cast()
    }
}

impl RemoteFreeList {
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        RemoteFreeList {
            word: AtomicU64::new(0),
        }
    }

    #[cfg(loom)]
    pub fn new() -> Self {
        RemoteFreeList {
            word: AtomicU64::new(0),
        }
    }

    /// Push the chain `first ..= last` of `len` blocks (already linked through `next`).
    ///
    /// # Safety
    /// The chain's blocks belong to the caller, which gives them up; `last` is reachable
    /// from `first` in `len` links; each lies in `(base, base + REACH)`, aligned to
    /// [`MIN_ALIGN`], `base` being the one every user of this list gives.
    #[inline]
    pub unsafe fn push_chain(&self, base: *mut u8, first: *mut Block, last: *mut Block, len: u32) {
        let (f, l) = (offset(base, first), offset(base, last));
        let mut old = self.word.load(Ordering::Relaxed);
        loop {
            let head = old & OFFSET_MASK;
            // The list's last block stays its last; an empty list's is ours.
            let tail = if head == 0 {
                l
            } else {
                (old >> OFFSET_BITS) & OFFSET_MASK
            };
            let n = ((old >> LEN_SHIFT) + len as u64) & LEN_MASK;
            // SAFETY: `last` is the caller's until the CAS publishes it.
            unsafe { (*last).next = block_at(base, head) };
            let new = f | (tail << OFFSET_BITS) | (n << LEN_SHIFT);
            match self
                .word
                .compare_exchange_weak(old, new, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => old = now,
            }
        }
    }

    /// Take every block pushed so far; only the owner calls this, with the pushers' base.
    #[inline]
    pub fn take_all(&self, base: *mut u8) -> Chain {
        if self.word.load(Ordering::Relaxed) == 0 {
            return Chain {
                first: null_mut(),
                last: null_mut(),
                len: 0,
            };
        }
        #[cfg(hakmem_broken = "nonatomic_take")]
        let word = {
            // Deliberately broken (tests/loom_protocol.rs must catch it): a push between
            // the load and the store is lost.
            let word = self.word.load(Ordering::Acquire);
            self.word.store(0, Ordering::Relaxed);
            word
        };
        #[cfg(not(hakmem_broken = "nonatomic_take"))]
        let word = self.word.swap(0, Ordering::Acquire);
        Chain {
            first: block_at(base, word & OFFSET_MASK),
            last: block_at(base, (word >> OFFSET_BITS) & OFFSET_MASK),
            len: (word >> LEN_SHIFT) as u32,
        }
    }

    /// Whether the list is empty right now (a hint; it may change at once).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.word.load(Ordering::Relaxed) == 0
    }
}

impl Default for RemoteFreeList {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// Room for one block, aligned as blocks are.
    #[repr(C, align(16))]
    struct Slot(Block);

    /// An arena of `n` slots and its base: slot `i` is block `i + 1` past the base (the
    /// base itself, slot 0, is never a block).
    fn arena(n: usize) -> Vec<Slot> {
        (0..=n).map(|_| Slot(Block { next: null_mut() })).collect()
    }

    /// An arena's base, shared with the pushing threads.
    #[derive(Clone, Copy)]
    struct Base(*mut u8);
    // SAFETY: the threads write only blocks of the arena they were dealt.
    unsafe impl Send for Base {}
    // SAFETY: as above.
    unsafe impl Sync for Base {}

    impl Base {
        fn ptr(self) -> *mut u8 {
            self.0
        }

        /// Block `i` of the arena (slot `i + 1`).
        fn block(self, i: usize) -> *mut Block {
            self.0.wrapping_add((i + 1) * MIN_ALIGN).cast()
        }
    }

    /// Walk a taken chain: its blocks, checking that it ends where the word said.
    fn walk(c: &Chain) -> Vec<usize> {
        let mut seen = Vec::new();
        let mut p = c.first;
        let mut last = null_mut();
        while !p.is_null() {
            seen.push(p as usize);
            last = p;
            // SAFETY: taken blocks are ours now.
            p = unsafe { (*p).next };
        }
        assert_eq!(seen.len(), c.len as usize, "the length is the chain's");
        assert_eq!(last, c.last, "the last block is the chain's");
        seen
    }

    #[test]
    fn concurrent_pushes_are_all_taken_with_their_length_and_end() {
        const PER: usize = if cfg!(miri) { 60 } else { 12_000 };
        let mut slots = arena(4 * PER);
        let base = Base(slots.as_mut_ptr().cast());
        let list = RemoteFreeList::new();
        let mut seen = Vec::new();
        std::thread::scope(|s| {
            for t in 0..4 {
                let list = &list;
                s.spawn(move || {
                    // Chains of 1, 2 and 3 blocks, linked here and pushed whole.
                    let mut i = t * PER;
                    for k in (0..PER / 6).flat_map(|_| [1, 2, 3]) {
                        let chain: Vec<*mut Block> = (i..i + k).map(|j| base.block(j)).collect();
                        for w in chain.windows(2) {
                            // SAFETY: the thread's own blocks.
                            unsafe { (*w[0]).next = w[1] };
                        }
                        // SAFETY: a chain of `k` of the thread's blocks, in the arena.
                        unsafe { list.push_chain(base.ptr(), chain[0], chain[k - 1], k as u32) };
                        i += k;
                    }
                });
            }
            for _ in 0..if cfg!(miri) { 10 } else { 1000 } {
                seen.extend(walk(&list.take_all(base.ptr())));
            }
        });
        seen.extend(walk(&list.take_all(base.ptr())));
        assert!(list.is_empty());
        seen.sort();
        let all: Vec<usize> = (0..4 * PER).map(|i| base.block(i) as usize).collect();
        assert_eq!(seen, all, "every block taken once");
    }

    #[test]
    fn an_empty_list_takes_as_nothing() {
        let mut slots = arena(1);
        let list = RemoteFreeList::new();
        let c = list.take_all(slots.as_mut_ptr().cast());
        assert!(c.first.is_null() && c.last.is_null() && c.len == 0);
    }
}
