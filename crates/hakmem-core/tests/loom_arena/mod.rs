//! Blocks for the loom models, in one allocation as a superslab's are, so that a
//! `RemoteFreeList` can name them from its start (shared by `loom.rs` and
//! `loom_protocol.rs`).

use hakmem_core::testing::Block;
use std::ptr::null_mut;

/// Room for one block, aligned as blocks are.
#[repr(C, align(16))]
struct Slot(#[allow(dead_code)] Block);

/// The blocks of a slab in one allocation, as a superslab's are: the remote list names
/// them from its start (slot 0, never a block, as a superslab's header is not).
pub struct Arena {
    slots: Vec<Slot>,
    base: usize,
}

impl Arena {
    pub fn new(blocks: usize) -> Arena {
        let mut slots: Vec<Slot> = (0..=blocks)
            .map(|_| Slot(Block { next: null_mut() }))
            .collect();
        let base = slots.as_mut_ptr() as usize;
        Arena { slots, base }
    }

    pub fn base(&self) -> usize {
        self.base
    }

    /// The blocks' addresses.
    pub fn blocks(&self) -> Vec<usize> {
        (1..self.slots.len())
            .map(|i| self.base + i * std::mem::size_of::<Slot>())
            .collect()
    }
}
