//! A large block that `realloc` shrinks to less than half its mapping. Where the program
//! wrote the tail, the block moves into one of its new size and its old mapping stays
//! cached with its pages resident, for the next buffer (`shrunk-buffers`); the block it
//! moved into keeps no resident pages past its end that its own huge page (or, in a half
//! of a pair chunk, its own page) does not hold. Where the tail was never written, the
//! block stays where it is and its tail is unmapped. Its own process: the large cache
//! starts empty, and no other test takes its extents.

use hakmem_core::{alloc, free, realloc, realloc_unsized, trim};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
/// What the first bytes of a large block's mapping hold before its user bytes.
const HEADER: usize = 128;

/// Whether the page at `addr` is resident; `None` where it is not mapped.
fn resident(addr: usize) -> Option<bool> {
    let mut v = 0u8;
    // SAFETY: `mincore` writes one byte for the one page asked about, and only reads
    // the page tables.
    let r = unsafe { libc::mincore((addr & !4095) as *mut libc::c_void, 4096, &mut v) };
    (r == 0).then_some(v & 1 == 1)
}

/// A block of `n` bytes with a byte written in every page (the page's index).
fn written_block(n: usize) -> *mut u8 {
    let p = alloc(n, 16);
    assert!(!p.is_null());
    for k in (0..n).step_by(4096) {
        // SAFETY: inside the live block.
        unsafe { *p.add(k) = (k / 4096) as u8 };
    }
    p
}

/// Whether the first `n` bytes of `q` hold what [`written_block`] wrote.
fn holds_pages(q: *mut u8, n: usize) -> bool {
    // SAFETY: `q` is a live block of at least `n` bytes.
    (0..n)
        .step_by(4096)
        .all(|k| unsafe { *q.add(k) } == (k / 4096) as u8)
}

/// An extent of `n` bytes' block, every page written, then freed: cached, resident.
fn resident_extent(n: usize) -> usize {
    let p = written_block(n);
    // SAFETY: a live block, given up.
    unsafe { free(p) };
    p as usize - HEADER
}

#[test]
fn a_shrunk_block_keeps_its_written_tail_cached_and_gives_back_an_unwritten_one() {
    // Written through, shrunk (sized) into a half of a pair chunk: the pair comes from the
    // first chunk of the cached extent, whose pages were all written (freed after `p` was
    // allocated: the thread keeps the large block it freed last for the next of its size).
    let p = written_block(12 * MIB);
    let spare = resident_extent(12 * MIB);
    let small = 1536 * KIB;
    // SAFETY: a live block of 12 MiB, given up for the smaller one.
    let q = unsafe { realloc(p, 12 * MIB, 16, small) };
    assert!(!q.is_null());
    assert_ne!(q, p, "a block shrunk with its tail written stayed in place");
    assert!(holds_pages(q, small), "the moved block lost its bytes");
    let in_spare = (spare..spare + 12 * MIB).contains(&(q as usize));
    assert!(in_spare, "the half did not come from the cached extent");
    let past_end = q as usize + small + 4096;
    assert_eq!(
        resident(past_end),
        Some(false),
        "the half kept pages past its end"
    );
    // The old mapping is cached, resident, and the next block of its size gets it.
    let old_middle = p as usize + 8 * MIB;
    assert_eq!(
        resident(old_middle),
        Some(true),
        "the old tail was given back"
    );
    let again = alloc(12 * MIB, 16);
    assert_eq!(
        again, p,
        "the old mapping did not serve a block of its size"
    );
    // SAFETY: live blocks, given up.
    unsafe {
        free(again);
        free(q);
    }

    // Written through, shrunk (unsized, as C's `realloc`) to 5 MiB: a block of two chunks
    // of a cached extent, which keeps the huge page that holds its end and no more.
    trim();
    let p = written_block(14 * MIB);
    let spare = resident_extent(12 * MIB);
    // SAFETY: a live block, given up for the smaller one.
    let q = unsafe { realloc_unsized(p, 5 * MIB) };
    assert!(
        !q.is_null() && q != p,
        "a block shrunk with its tail written stayed"
    );
    assert!(holds_pages(q, 5 * MIB), "the moved block lost its bytes");
    let base = q as usize - HEADER;
    assert_eq!(base, spare, "the block did not come from the cached extent");
    assert_eq!(resident(base + 5 * MIB + 64 * KIB), Some(true));
    assert_eq!(
        resident(base + 7 * MIB),
        Some(false),
        "the block kept pages past the huge page that holds its end"
    );
    // SAFETY: a live block, given up.
    unsafe { free(q) };

    // Touched at its ends only, shrunk: it stays, and its tail is unmapped.
    trim();
    let p = alloc(12 * MIB, 16);
    assert!(!p.is_null());
    // SAFETY: both ends of the live block.
    unsafe {
        *p = 1;
        *p.add(12 * MIB - 1) = 1;
    }
    // SAFETY: a live block of 12 MiB, given up for the smaller one.
    let q = unsafe { realloc(p, 12 * MIB, 16, small) };
    assert_eq!(q, p, "a block whose tail was never written moved");
    assert_eq!(
        resident(p as usize + 8 * MIB),
        None,
        "the tail was not unmapped"
    );
    // SAFETY: a live block, given up.
    unsafe { free(q) };
}
