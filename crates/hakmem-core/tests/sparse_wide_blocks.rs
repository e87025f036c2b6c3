//! Superslabs of wide blocks get huge pages for plain allocations, past their heap's
//! first 16 MiB of spans for wide blocks, only where the program writes their pages
//! densely: the newest superslab of wide blocks with 4 KiB pages shows how much of what
//! was carved from it is resident. A test of its own, in a process of its own
//! ([`sparse`]).

mod advice;
mod sparse;

const MIB: usize = 1 << 20;

/// 40 MiB of 256 KiB blocks (a span each): the last ones lie in superslabs the heap took
/// once it had carved 16 MiB of spans for wide blocks.
#[test]
fn superslabs_of_wide_blocks_written_in_part_ask_for_no_huge_pages() {
    sparse::last_advised_iff_written_whole(
        256 << 10,
        40 * MIB,
        "256 KiB buffers past 16 MiB of spans",
    );
}
