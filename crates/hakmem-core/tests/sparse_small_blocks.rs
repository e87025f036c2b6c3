//! Superslabs of small blocks get huge pages past their heap's first 8 MiB of superslabs
//! only where the program writes their pages densely: the newest superslab of small blocks
//! with 4 KiB pages shows how much of what was carved from it is resident. A test of its
//! own, in a process of its own ([`sparse`]).

mod advice;
mod sparse;

const MIB: usize = 1 << 20;

/// 24 MiB of 8 KiB blocks: the last ones lie in a superslab the heap took once it owned
/// 8 MiB of superslabs.
#[test]
fn superslabs_of_small_blocks_written_in_part_ask_for_no_huge_pages() {
    sparse::last_advised_iff_written_whole(8192, 24 * MIB, "8 KiB blocks past 8 MiB");
}
