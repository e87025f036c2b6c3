//! The fast path alone: allocate and free one 256-byte block, over and over.

use crate::Block;

pub fn fixed_size(ops: u64) -> u64 {
    for _ in 0..ops {
        std::hint::black_box(Block::new(256));
    }
    ops
}
