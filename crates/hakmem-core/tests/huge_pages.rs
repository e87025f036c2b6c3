//! Transparent huge pages, which hakmem asks for in every profile (these tests run in the
//! default, `fast`): over the whole mapping of a large block only after a block the
//! program wrote through (never over an alignment's padding), over that of a block
//! `realloc` grows to 4 MiB or more, over superslabs of
//! small blocks once their heap owns 8 MiB of superslabs (where it writes them densely:
//! tests/sparse_small_blocks.rs; before their header is written:
//! tests/huge_first_stretch.rs), and over those of wide blocks taken for a block known to
//! be written densely (zero-filled, or grown by `realloc`; a plain one where the heap's
//! wide blocks show it: tests/sparse_wide_blocks.rs) once the heap has carved the
//! profile's `wide_huge_pages_from` of spans for them (16 MiB; 32 in lean), however much
//! the process maps. The kernel shows the advice as the `hg` flag of the mapping in
//! `/proc/self/smaps`.
//!
//! A block that the program touches at its ends only would hold 2 MiB for each end in
//! huge pages, so the advice waits for evidence: the last block given fresh memory mostly
//! resident.

use hakmem_core::{alloc, alloc_zeroed, free, realloc, set_profile, trim, Profile};
use std::sync::Mutex;

mod advice;
use advice::{advice_visible, advised_huge, vm_flags};

const MIB: usize = 1 << 20;

/// Run `test` alone, each starting with the large cache and the pool of empty superslabs
/// empty, on a thread of its own that has exited (its heap given back) before the next
/// one starts. A block reused from an extent another test freed carries that extent's
/// advice. A test run on the harness's thread gave its superslabs back when that thread
/// exited, beside the next test: an empty superslab then served that test's first block,
/// which, memory changing kind, is no evidence of what the program writes, and the advice
/// went by an older block's (6 runs of this file in 30 failed, and CI once).
fn alone(test: impl FnOnce() + Send + 'static) {
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    trim();
    if let Err(panic) = std::thread::spawn(test).join() {
        std::panic::resume_unwind(panic);
    }
}

/// A fresh block of `n` bytes aligned to `align`.
fn fresh_block(n: usize, align: usize) -> *mut u8 {
    let p = alloc(n, align);
    assert!(!p.is_null());
    p
}

/// A block of `n` bytes touched at its ends only, freed when dropped: while it lives, the
/// next block mapped fresh is not advised (the evidence it goes
/// by is the last one mapped fresh).
struct TouchedAtItsEnds(*mut u8, usize);

impl TouchedAtItsEnds {
    fn new(n: usize) -> TouchedAtItsEnds {
        let p = fresh_block(n, 16);
        // SAFETY: inside the live block.
        unsafe {
            p.write_volatile(1);
            p.add(n - 1).write_volatile(1);
        }
        TouchedAtItsEnds(p, n)
    }

    /// Write the block through, every page.
    fn write_through(&self) {
        for at in (0..self.1).step_by(4096) {
            // SAFETY: inside the live block.
            unsafe { self.0.add(at).write_volatile(1) };
        }
    }
}

impl Drop for TouchedAtItsEnds {
    fn drop(&mut self) {
        // SAFETY: a live block, given up.
        unsafe { free(self.0) };
    }
}

/// A fresh 3 MiB block not advised huge, and the block whose evidence made it so.
fn unadvised_block_under_4_mib() -> ((*mut u8, usize), TouchedAtItsEnds) {
    let ends = TouchedAtItsEnds::new(3 * MIB);
    ((fresh_block(3 * MIB, 16), 3 * MIB), ends)
}

/// Whether the stretches of the block `[p, p + n)` (its first and its last byte) are
/// advised: `None` where the advice cannot be seen.
fn advice_of(p: *mut u8, n: usize) -> Option<(bool, bool)> {
    let base = p as usize;
    advice_visible().then(|| (advised_huge(base), advised_huge(base + n - 1)))
}

/// A fresh block of `n` bytes, after a fresh one of `first_n` that the program wrote
/// through or touched at its ends (`through`): the advice of the second block's stretches.
fn advice_after_a_block(first_n: usize, n: usize, through: bool) -> Option<(bool, bool)> {
    // Both fresh: a cached extent would serve them, and blocks it serves are not evidence.
    trim();
    let first = TouchedAtItsEnds::new(first_n);
    if through {
        first.write_through();
    }
    let second = fresh_block(n, 16);
    let advice = advice_of(second, n);
    // SAFETY: a live block, given up.
    unsafe { free(second) };
    advice
}

#[test]
fn blocks_a_resize_makes_ask_for_no_huge_pages_under_4_mib() {
    alone(|| {
        let first = TouchedAtItsEnds::new(3 * MIB);
        first.write_through();
        // Grown past 128 KiB (`GROW_LARGE_FROM`), a small block moves into a fresh mapping.
        let p = alloc(64 * 1024, 16);
        assert!(!p.is_null());
        // SAFETY: a live block, given up for the larger one.
        let q = unsafe { realloc(p, 64 * 1024, 16, 3 * MIB) };
        assert!(!q.is_null());
        if let Some((head, tail)) = advice_of(q, 3 * MIB) {
            assert!(!head && !tail, "a block a resize made is advised");
        }
        // SAFETY: a live block, given up.
        unsafe { free(q) };
    });
}

/// Pairs of sizes: plain blocks (a chunk of their own, or several), and the low half of a
/// new pair chunk after a plain block and before one.
const SIZES: [(usize, usize); 5] = [
    (3 * MIB, 3 * MIB),
    (3 * MIB, 3 * MIB / 2),
    (3 * MIB / 2, 3 * MIB),
    (3 * MIB, 9 * MIB),
    (9 * MIB, 9 * MIB),
];

#[test]
fn blocks_after_blocks_touched_at_their_ends_ask_for_no_huge_pages() {
    alone(|| {
        for (first_n, n) in SIZES {
            if let Some((head, tail)) = advice_after_a_block(first_n, n, false) {
                assert!(!head, "the first stretch of {n} bytes is advised");
                assert!(!tail, "the tail of {n} bytes is advised");
            }
        }
    });
}

#[test]
fn blocks_after_blocks_written_through_ask_for_huge_pages() {
    alone(|| {
        for (first_n, n) in SIZES {
            if let Some((head, tail)) = advice_after_a_block(first_n, n, true) {
                assert!(head, "the first stretch of {n} bytes is not advised");
                assert!(tail, "the tail of {n} bytes is not advised");
            }
        }
    });
}

/// After a block written through, a big block asks for huge pages over its whole
/// mapping, its header's stretch too; a block aligned to 2 MiB or more asks for none over
/// its padding (the stretches before its user bytes), and one of a class's size none at
/// all.
#[test]
fn big_blocks_ask_for_huge_pages_over_their_whole_mapping_but_an_alignments_padding() {
    alone(|| {
        let chunk = |p: *mut u8| p as usize & !(hakmem_core::CHUNK_SIZE - 1);
        for (n, align, header, tail) in [
            (9 * MIB, 16, true, true),
            (9 * MIB, 2 * MIB, false, true),
            (9 * MIB, 8 * MIB, false, true),
            (64 * 1024, 2 * MIB, false, false),
        ] {
            trim();
            let first = TouchedAtItsEnds::new(3 * MIB);
            first.write_through();
            let p = fresh_block(n, align);
            // An over-aligned block's header lies a chunk below its start.
            let base = chunk(p.wrapping_sub(1));
            if advice_visible() {
                assert_eq!(
                    advised_huge(base),
                    header,
                    "({n}, {align}): header's stretch"
                );
                let last = p as usize + n - 1;
                assert_eq!(advised_huge(last), tail, "({n}, {align}): tail");
            }
            // SAFETY: a live block, given up.
            unsafe { free(p) };
        }
    });
}

/// 16 MiB of 64-byte blocks from this thread's heap: the last ones lie in a superslab it
/// took once it owned 8 MiB of superslabs (`HUGE_PAGES_FROM`).
fn a_large_heap() -> Vec<*mut u8> {
    let small: Vec<*mut u8> = (0..16 * MIB / 64).map(|_| alloc(64, 16)).collect();
    assert!(small.iter().all(|p| !p.is_null()));
    small
}

#[test]
fn superslabs_of_single_slabs_ask_for_huge_pages_once_the_heap_is_large() {
    alone(|| {
        let small = a_large_heap();
        // 8 MiB of 40,000-byte blocks (spans of slabs): the last ones in a superslab of spans.
        let spans: Vec<*mut u8> = (0..200).map(|_| alloc(40_000, 16)).collect();
        assert!(spans.iter().all(|p| !p.is_null()));
        if advice_visible() {
            assert!(
                advised_huge(*small.last().unwrap() as usize),
                "a superslab of single slabs past 8 MiB is not advised"
            );
            assert!(
                !advised_huge(*spans.last().unwrap() as usize),
                "a superslab of spans is advised"
            );
        }
        // SAFETY: live blocks, given up.
        unsafe {
            for p in small.into_iter().chain(spans) {
                free(p);
            }
        }
    });
}

/// How a test gets its wide blocks: what decides whether their superslabs are worth huge
/// pages.
#[derive(Clone, Copy)]
enum Wide {
    /// `alloc`: nothing known of what the program writes of them.
    Plain,
    /// `alloc_zeroed`: written whole.
    Zeroed,
    /// Grown by `realloc` from blocks half their size, which the copy writes half of.
    Grown,
}

/// A wide block of 40,000 bytes got as `how` says.
fn wide_block(how: Wide) -> usize {
    let p = match how {
        Wide::Plain => alloc(40_000, 16),
        Wide::Zeroed => alloc_zeroed(40_000, 16),
        Wide::Grown => {
            let small = alloc(20_000, 16);
            assert!(!small.is_null());
            // SAFETY: a live block of 20,000 bytes, given up.
            unsafe { realloc(small, 20_000, 16, 40_000) }
        }
    };
    assert!(!p.is_null());
    p as usize
}

/// Superslabs of wide blocks ask for huge pages for blocks known to be written densely
/// (zero-filled, or grown by `realloc`), once their heap has carved the profile's
/// `wide_huge_pages_from` of spans for wide blocks (16 MiB; 32 in lean), not before; for
/// plain allocations only where the heap's wide blocks show they are written densely
/// (tests/sparse_wide_blocks.rs; these are not written at all).
#[test]
fn superslabs_of_spans_ask_for_huge_pages_for_dense_blocks_once_the_heap_holds_enough_spans() {
    alone(|| {
        let visible = advice_visible();
        // Blocks of 40,000 bytes, three to a span of 128 KiB: 1 MiB of spans for 24 blocks.
        // The advice of the first and of the last block's superslab, where visible.
        let spans_of = |mib: usize, how: Wide| {
            std::thread::spawn(move || {
                let spans: Vec<usize> = (0..mib * 24).map(|_| wide_block(how)).collect();
                let advised = visible.then(|| {
                    let last = *spans.last().unwrap();
                    (advised_huge(spans[0]), advised_huge(last))
                });
                // SAFETY: live blocks, given up.
                unsafe {
                    for p in spans {
                        free(p as *mut u8);
                    }
                }
                trim(); // no superslab advised here goes on to the next heap
                advised
            })
            .join()
            .expect("the thread's checks")
        };
        let fast = [Wide::Plain, Wide::Zeroed, Wide::Grown].map(|how| spans_of(24, how));
        let lean = {
            /// Back to the default profile for the other tests, even if the thread panics.
            struct Restore;
            impl Drop for Restore {
                fn drop(&mut self) {
                    set_profile(Profile::Fast);
                }
            }
            let _restore = Restore;
            set_profile(Profile::Lean);
            spans_of(24, Wide::Zeroed)
        };
        assert_eq!(
            fast,
            [(false, false), (false, true), (false, true)].map(|a| visible.then_some(a)),
            "fast: plain blocks get no advice; zero-filled and grown ones past 16 MiB of spans do"
        );
        assert_eq!(
            lean,
            visible.then_some((false, false)),
            "lean: none below 32 MiB of spans"
        );
    });
}

/// A small heap asks for no huge pages however much the process maps: counted over all of
/// hakmem's mappings (before `aed662e`), a program past 32 MiB gave a huge page to the
/// first slabs of each of its threads.
#[test]
fn a_small_heap_asks_for_no_huge_pages_in_a_large_process() {
    alone(|| {
        let big = alloc(40 * MIB, 16);
        assert!(!big.is_null());
        std::thread::spawn(|| {
            let blocks: Vec<*mut u8> = (0..1000).map(|_| alloc(64, 16)).collect();
            assert!(blocks.iter().all(|p| !p.is_null()));
            if advice_visible() {
                for p in [blocks[0], blocks[999]] {
                    assert!(
                        !advised_huge(p as usize),
                        "a small heap's superslab is advised"
                    );
                }
            }
            // SAFETY: live blocks, given up.
            unsafe {
                for p in blocks {
                    free(p);
                }
            }
        })
        .join()
        .expect("the thread's checks");
        // SAFETY: a live block, given up.
        unsafe { free(big) };
    });
}

/// A superslab whose free slabs were given back asks for huge pages no longer:
/// `khugepaged` would make an advised 2 MiB stretch with one page present resident
/// whole again.
#[test]
fn a_superslab_whose_free_slabs_were_given_back_asks_for_huge_pages_no_longer() {
    alone(|| {
        let small = a_large_heap();
        let (&last, rest) = small.split_last().unwrap();
        if advice_visible() {
            assert!(
                advised_huge(last as usize),
                "the superslab was never advised"
            );
        }
        // SAFETY: live blocks, given up (all but the last).
        unsafe {
            for &p in rest {
                free(p);
            }
        }
        // Gives the free slabs of this thread's superslabs back (`decommit_all`).
        trim();
        if advice_visible() {
            assert!(
                !advised_huge(last as usize),
                "a superslab with slabs given back is still advised"
            );
        }
        // SAFETY: a live block, given up.
        unsafe { free(last) };
    });
}

/// Whether the page holding `addr` is resident (`mincore`).
fn resident(addr: usize) -> bool {
    let page = addr & !4095;
    let mut v = 0u8;
    // SAFETY: one page of a live mapping of ours; `v` receives one byte.
    let r = unsafe { libc::mincore(page as *mut libc::c_void, 4096, &mut v) };
    assert_eq!(r, 0, "mincore");
    v & 1 == 1
}

/// Advise the first `len` bytes of the mapping of the large block `p` for huge pages, as
/// an extent merged from a mapping of 4 MiB or more and a smaller one is: the block's
/// range is two kernel mappings then, and `mremap` takes one only.
fn split_mapping(p: *mut u8, len: usize) {
    let base = p as usize & !(hakmem_core::CHUNK_SIZE - 1);
    // SAFETY: advice about pages of a live block's mapping; it changes no contents.
    let r = unsafe { libc::madvise(base as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
    // Where the advice cannot be seen (no THP, qemu-user), nothing is split either.
    assert!(r == 0 || !advice_visible(), "madvise");
}

/// Write a word into every page of `[p, p + n)` but the one at `hole`.
fn write_all_but(p: *mut u8, n: usize, hole: usize) {
    let base = p as usize;
    for page in (base..base + n).step_by(4096) {
        if page & !4095 != hole {
            // SAFETY: inside the live block.
            unsafe { *(page as *mut u64) = page as u64 };
        }
    }
}

/// Resize `p` (`n` bytes, every page but `hole` written by [`write_all_but`]) to
/// `new_n`, check it kept every written word and did not copy (the page it never wrote
/// is still absent: a copy would have written it), and return the new block.
fn grow_without_a_copy(p: *mut u8, n: usize, hole: usize, new_n: usize) -> *mut u8 {
    let base = p as usize;
    assert!(!resident(hole));
    // SAFETY: a live block of `n` bytes, given up for the new one.
    let q = unsafe { realloc(p, n, 16, new_n) };
    assert!(!q.is_null());
    let moved = q as usize;
    for page in (base..base + n).step_by(4096) {
        if page & !4095 != hole {
            // SAFETY: inside the live block, which kept its first `n` bytes.
            let v = unsafe { *((moved + (page - base)) as *const u64) };
            assert_eq!(v, page as u64, "the block lost its content");
        }
    }
    assert!(
        !resident(moved + (hole - base)),
        "the block was copied, not moved: the page it never wrote is resident"
    );
    q
}

/// A block whose mapping is two kernel mappings still grows by moving its pages with
/// `mremap`: hakmem advises the whole range alike first, as huge as a fresh mapping of
/// the new size would be.
#[test]
fn a_split_block_grows_without_a_copy_and_advised_as_its_new_size() {
    alone(|| {
        let ((p, n), _ends) = unadvised_block_under_4_mib();
        split_mapping(p, 2 * MIB);
        let hole = (p as usize + 2 * MIB + 256 * 1024) & !4095;
        write_all_but(p, n, hole);
        if advice_visible() {
            assert!(advised_huge(p as usize) && !advised_huge(hole), "no split");
        }
        // To 9 MiB, past the 4 MiB chunk the block was given: a move, advised huge.
        let q = grow_without_a_copy(p, n, hole, 3 * n);
        if advice_visible() {
            assert!(
                advised_huge(q as usize),
                "a block grown to 9 MiB is not advised"
            );
        }
        // SAFETY: a live block, given up.
        unsafe { free(q) };
        // A fresh block shrunk to 600 KiB (its tail given back), split, grown to 1.5 MiB: a
        // move advised not huge (`nh`), the same for the whole range.
        trim();
        let ((p, n), _ends) = unadvised_block_under_4_mib();
        let small = 600 * 1024;
        // SAFETY: the live block, given up for the smaller one.
        let r = unsafe { realloc(p, n, 16, small) };
        assert_eq!(r, p, "a shrink moved the block");
        split_mapping(r, 256 * 1024);
        let hole = (r as usize + 400 * 1024) & !4095;
        write_all_but(r, small, hole);
        let s = grow_without_a_copy(r, small, hole, 3 * MIB / 2);
        if advice_visible() {
            let flags = vm_flags(s as usize);
            assert!(
                flags.split_whitespace().any(|f| f == "nh") && !advised_huge(s as usize),
                "a block grown to 1.5 MiB is advised huge: {flags}"
            );
            assert_eq!(vm_flags(s as usize + MIB), flags, "still split");
        }
        // SAFETY: a live block, given up.
        unsafe { free(s) };
    });
}
