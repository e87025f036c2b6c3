//! Blocks written in part or whole, for the tests of the huge-page advice that goes by how
//! densely the program writes its blocks (tests/sparse_small_blocks.rs,
//! tests/sparse_wide_blocks.rs, tests/wide_habits.rs). Each runs in a process of its own:
//! memory that another test's heap wrote and freed is resident whatever this one writes
//! of it.

use crate::advice::{advice_visible, advised_huge};
use hakmem_core::{alloc, free};

/// `total` bytes of blocks of `size` bytes from this thread's heap, each written in its
/// first 100 bytes (`sparse`) or whole.
pub fn blocks(size: usize, total: usize, sparse: bool) -> Vec<*mut u8> {
    (0..total / size)
        .map(|_| {
            let p = alloc(size, 16);
            assert!(!p.is_null());
            let written = if sparse { 100 } else { size };
            // SAFETY: a live block of `size` bytes.
            unsafe { p.write_bytes(1, written) };
            p
        })
        .collect()
}

/// Allocate `total` bytes of blocks of `size` bytes written in part, then as many written
/// whole (the blocks written in part first, while the heap's memory is fresh), and check
/// that the superslab of the last block of each asks for huge pages iff its blocks were
/// written whole; `what` names the blocks and the threshold past which the last lies.
#[allow(dead_code)] // not every test that shares the module asks this
pub fn last_advised_iff_written_whole(size: usize, total: usize, what: &str) {
    for sparse in [true, false] {
        let blocks = blocks(size, total, sparse);
        if advice_visible() {
            let how = if sparse {
                "in their first 100 bytes"
            } else {
                "whole"
            };
            assert_eq!(
                advised_huge(*blocks.last().unwrap() as usize),
                !sparse,
                "a superslab of {what} written {how}: advised",
            );
        }
        // SAFETY: live blocks, given up.
        unsafe {
            for p in blocks {
                free(p);
            }
        }
    }
}
