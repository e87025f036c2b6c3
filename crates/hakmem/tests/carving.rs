//! A thread carves fresh blocks in proportion to what it already carved: a working set
//! that grows a block at a time is not handed a cache's worth of never-used blocks above
//! its high mark (`Heap::carve_size` in hakmem-core).

#[global_allocator]
static GLOBAL: hakmem::HakMem = hakmem::HakMem;

/// A block size of its own class that nothing else in this binary asks for often.
const SIZE: usize = 3500;
/// Blocks the thread holds at its high mark.
const HELD: usize = 40;

/// The usage of the class holding `SIZE`, over all heaps.
fn usage() -> hakmem::ClassUsage {
    hakmem::class_usage()
        .into_iter()
        .filter(|u| u.block_size >= SIZE)
        .min_by_key(|u| u.block_size)
        .expect("a class holds the size")
}

/// Bytes carved into blocks of that class.
fn carved() -> usize {
    let u = usage();
    u.slabs - u.uncarved
}

#[test]
fn a_working_set_grown_a_block_at_a_time_carves_little_above_its_high_mark() {
    let before = carved();
    let during = std::thread::spawn(|| {
        let set: Vec<Vec<u8>> = (0..HELD).map(|_| vec![1u8; SIZE]).collect();
        let c = carved();
        drop(set);
        c
    })
    .join()
    .expect("worker");
    let block = usage().block_size;
    let blocks = (during - before) / block;
    // A sixteenth above the blocks held, and a page's worth: at most 45 blocks (40 are
    // carved). Carving what the cache asked each time (half its capacity) carved 54.
    let most = HELD + HELD / 16 + 4096usize.div_ceil(block) + 1;
    assert!(
        blocks >= HELD && blocks <= most,
        "carved {blocks} blocks of {block} B to hold {HELD} (at most {most})"
    );
}
