//! A heap whose wide blocks were written densely, and that then allocates wide blocks
//! it writes in part only, goes back to 4 KiB pages for them: the superslab that showed
//! "dense" still lives, but an expired answer sends the next superslab to 4 KiB pages,
//! and the look after it sees the new blocks. A test of its own, in a process of its
//! own: memory that another test's heap wrote and freed is resident whatever this one
//! writes of it.

use hakmem_core::free;

mod advice;
mod sparse;
use advice::{advice_visible, advised_huge};
use sparse::blocks;

const MIB: usize = 1 << 20;
const BUFFER: usize = 256 << 10;

#[test]
fn wide_blocks_written_in_part_after_dense_ones_go_back_to_4_kib_pages() {
    // 24 MiB written whole, kept: past 16 MiB of spans their superslabs ask for huge pages.
    let dense = blocks(BUFFER, 24 * MIB, false);
    // Then 96 MiB written in part: the answer "dense" lasts 16 superslabs at most.
    let sparse = blocks(BUFFER, 96 * MIB, true);
    if advice_visible() {
        assert!(
            advised_huge(*dense.last().unwrap() as usize),
            "the last buffer written whole: its superslab advised"
        );
        assert!(
            !advised_huge(*sparse.last().unwrap() as usize),
            "the last buffer written in part: its superslab not advised"
        );
    }
    // SAFETY: live blocks, given up.
    unsafe {
        for p in dense.into_iter().chain(sparse) {
            free(p);
        }
    }
}
