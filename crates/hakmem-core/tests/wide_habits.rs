//! A heap whose wide blocks were written densely, and that then allocates wide blocks
//! it writes in part only, goes back to 4 KiB pages for them: the superslab that showed
//! "dense" still lives, but an expired answer sends the next superslab to 4 KiB pages,
//! and the look after it sees the new blocks. A test of its own, in a process of its
//! own: memory that another test's heap wrote and freed is resident whatever this one
//! writes of it.

use hakmem_core::{alloc, free};

mod advice;
use advice::{advice_visible, advised_huge};

const MIB: usize = 1 << 20;
const BUFFER: usize = 256 << 10;

/// `total` bytes of 256 KiB buffers from this thread's heap, each written whole or in its
/// first 100 bytes.
fn buffers(total: usize, whole: bool) -> Vec<*mut u8> {
    (0..total / BUFFER)
        .map(|_| {
            let p = alloc(BUFFER, 16);
            assert!(!p.is_null());
            // SAFETY: a live block of `BUFFER` bytes.
            unsafe { p.write_bytes(1, if whole { BUFFER } else { 100 }) };
            p
        })
        .collect()
}

#[test]
fn wide_blocks_written_in_part_after_dense_ones_go_back_to_4_kib_pages() {
    // 24 MiB written whole, kept: past 16 MiB of spans their superslabs ask for huge pages.
    let dense = buffers(24 * MIB, true);
    // Then 96 MiB written in part: the answer "dense" lasts 16 superslabs at most.
    let sparse = buffers(96 * MIB, false);
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
