//! The superslab that brings a heap to 8 MiB (`HUGE_PAGES_FROM`; its second, a chunk being
//! 4 MiB) is advised before its header is written, so that its first 2 MiB can fault in
//! as one huge page: advised at its first carve, after the header's 4 KiB page was in,
//! every slab of that stretch faulted in a page at a time (`c-usable-growth`, 497 faults
//! there). A test of its own, in a process of its own: a superslab another test's heap
//! left (adopted, or cached) has pages resident already, and serves this heap's second
//! superslab in 4 KiB pages whatever the order (2 runs in 150 of tests/huge_pages.rs).
//! Needs the kernel to find a free huge page (it compacts memory for an advised mapping).

use hakmem_core::{alloc, free, CHUNK_SIZE};

mod advice;
use advice::{advice_visible, advised_huge, smaps_field};

const MIB: usize = 1 << 20;

/// The bytes of the mapping that holds `addr` resident in transparent huge pages
/// (`AnonHugePages`).
fn huge_resident(addr: usize) -> usize {
    let kb = smaps_field(addr, "AnonHugePages:");
    let kb = kb.trim().trim_end_matches("kB").trim();
    kb.parse::<usize>().expect("AnonHugePages in kB") * 1024
}

#[test]
fn the_superslab_that_makes_a_heap_large_has_its_first_2_mib_in_a_huge_page() {
    let chunk = |p: *mut u8| p as usize & !(CHUNK_SIZE - 1);
    let mut small = vec![alloc(64, 16)];
    let first = chunk(small[0]);
    // 64-byte blocks, each written (a carve writes its link), up to the middle of the
    // heap's second superslab: its first stretch of 2 MiB, past its header, carved.
    loop {
        let p = alloc(64, 16);
        assert!(!p.is_null());
        small.push(p);
        if chunk(p) != first && p as usize - chunk(p) >= 2 * MIB - 64 * 1024 {
            break;
        }
    }
    let second = chunk(*small.last().unwrap());
    if advice_visible() {
        assert!(
            advised_huge(second),
            "the heap's second superslab is not advised"
        );
        assert!(
            huge_resident(second) >= 2 * MIB,
            "the first 2 MiB of the heap's second superslab are not a huge page"
        );
    }
    // SAFETY: live blocks, given up.
    unsafe {
        for p in small {
            free(p);
        }
    }
}
