//! The lock-free list on which threads that do not own a slab give its blocks back.
//!
//! Any thread pushes a chain of blocks with one compare-and-swap; only the slab's owner
//! takes the whole list, with one swap, and so never races another popper: there is no
//! ABA problem because nothing but the owner ever removes a node, and it removes all of
//! them at once.
//!
//! Ordering: a pusher writes the chain's links, then publishes the head with `Release`;
//! the owner's `Acquire` swap makes those links visible before it walks them.

use crate::sync::protocol::AtomicPtr;
use crate::sync::Ordering;
use core::ptr::null_mut;

/// A free block: while it is free, its first word links it to the next one.
#[repr(C)]
pub struct Block {
    pub next: *mut Block,
}

/// A Treiber stack of blocks, pushed by any thread, drained whole by one.
pub struct RemoteFreeList {
    head: AtomicPtr<Block>,
}

impl RemoteFreeList {
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        RemoteFreeList {
            head: AtomicPtr::new(null_mut()),
        }
    }

    #[cfg(loom)]
    pub fn new() -> Self {
        RemoteFreeList {
            head: AtomicPtr::new(null_mut()),
        }
    }

    /// Push the chain `first ..= last` (already linked through `next`).
    ///
    /// # Safety
    /// The chain's blocks belong to the caller, which gives them up, and `last` is
    /// reachable from `first`.
    #[inline]
    pub unsafe fn push_chain(&self, first: *mut Block, last: *mut Block) {
        let mut old = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: `last` is the caller's until the CAS publishes it.
            unsafe { (*last).next = old };
            match self
                .head
                .compare_exchange_weak(old, first, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => old = now,
            }
        }
    }

    /// Take every block pushed so far; only the owner calls this.
    #[inline]
    pub fn take_all(&self) -> *mut Block {
        if self.head.load(Ordering::Relaxed).is_null() {
            return null_mut();
        }
        #[cfg(hakmem_broken = "nonatomic_take")]
        {
            // Deliberately broken (tests/loom_protocol.rs must catch it): a push between
            // the load and the store is lost.
            let head = self.head.load(Ordering::Acquire);
            self.head.store(null_mut(), Ordering::Relaxed);
            head
        }
        #[cfg(not(hakmem_broken = "nonatomic_take"))]
        self.head.swap(null_mut(), Ordering::Acquire)
    }

    /// Whether the list is empty right now (a hint; it may change at once).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head.load(Ordering::Relaxed).is_null()
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
    use std::boxed::Box;
    use std::vec::Vec;

    #[test]
    fn concurrent_pushes_are_all_taken() {
        let list = RemoteFreeList::new();
        const PER: usize = if cfg!(miri) { 100 } else { 10_000 };
        let blocks: Vec<Vec<usize>> = (0..4)
            .map(|_| {
                (0..PER)
                    .map(|_| Box::into_raw(Box::new(Block { next: null_mut() })) as usize)
                    .collect()
            })
            .collect();
        let mut seen = 0usize;
        std::thread::scope(|s| {
            for mine in &blocks {
                let list = &list;
                s.spawn(move || {
                    for &b in mine {
                        let b = b as *mut Block;
                        // SAFETY: each block is pushed once, by its thread.
                        unsafe { list.push_chain(b, b) };
                    }
                });
            }
            for _ in 0..if cfg!(miri) { 10 } else { 1000 } {
                let mut p = list.take_all();
                while !p.is_null() {
                    seen += 1;
                    // SAFETY: taken blocks are ours now.
                    p = unsafe { (*p).next };
                }
            }
        });
        let mut p = list.take_all();
        while !p.is_null() {
            seen += 1;
            // SAFETY: as above.
            p = unsafe { (*p).next };
        }
        assert_eq!(seen, 4 * PER);
        for mine in blocks {
            for b in mine {
                // SAFETY: allocated above with Box.
                drop(unsafe { Box::from_raw(b as *mut Block) });
            }
        }
    }
}
