//! Superslabs of small blocks get huge pages past their heap's first 8 MiB of superslabs
//! only where the program writes their pages densely: the newest superslab of small blocks
//! with 4 KiB pages shows how much of what was carved from it is resident. A test of its
//! own, in a process of its own: memory that another test's heap wrote and freed is
//! resident whatever this one writes of it.

use hakmem_core::{alloc, free};

mod advice;
use advice::{advice_visible, advised_huge};

const MIB: usize = 1 << 20;

/// 24 MiB of 8 KiB blocks from this thread's heap, each written in its first page only
/// (`sparse`) or whole: the last ones lie in a superslab the heap took once it owned
/// 8 MiB of superslabs.
fn blocks_of_two_pages(sparse: bool) -> Vec<*mut u8> {
    let n = 8192;
    (0..24 * MIB / n)
        .map(|_| {
            let p = alloc(n, 16);
            assert!(!p.is_null());
            let written = if sparse { 100 } else { n };
            // SAFETY: a live block of `n` bytes.
            unsafe { p.write_bytes(1, written) };
            p
        })
        .collect()
}

#[test]
fn superslabs_of_small_blocks_written_in_part_ask_for_no_huge_pages() {
    // The blocks written in part first: their heap's memory is fresh.
    for sparse in [true, false] {
        let blocks = blocks_of_two_pages(sparse);
        if advice_visible() {
            assert_eq!(
                advised_huge(*blocks.last().unwrap() as usize),
                !sparse,
                "a superslab of 8 KiB blocks written {} past 8 MiB: advised",
                if sparse {
                    "in their first page"
                } else {
                    "whole"
                },
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
