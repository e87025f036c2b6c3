//! When the OS refuses memory (`os::inject_map_failures`), every allocation path returns
//! null, nothing already handed out is disturbed, freed memory is still reused, and
//! allocation works again once mappings succeed.
//!
//! The failure switch is process-wide, so this binary holds a single test.

#[path = "../../hakmem/tests/common/mod.rs"]
mod common;

use hakmem_core::testing::inject_map_failures;
use hakmem_core::{alloc, alloc_zeroed, dealloc, owner, realloc, realloc_unsized, stats, trim};

const MIB: usize = 1 << 20;

/// A live block and the request it was made with.
struct Live {
    p: *mut u8,
    size: usize,
    align: usize,
    id: u64,
}

struct Blocks {
    live: Vec<Live>,
    next_id: u64,
}

impl Blocks {
    /// Allocate, fill with a fresh id and keep; false if hakmem returned null.
    fn add(&mut self, size: usize, align: usize) -> bool {
        let p = alloc(size, align);
        if p.is_null() {
            return false;
        }
        assert_eq!(p as usize % align, 0);
        self.next_id += 1;
        // SAFETY: a fresh block of `size` bytes.
        unsafe { common::fill(p, 0, size, self.next_id) };
        self.live.push(Live {
            p,
            size,
            align,
            id: self.next_id,
        });
        true
    }

    /// Allocate `(size, align)` blocks until hakmem returns null; how many it gave.
    fn exhaust(&mut self, size: usize, align: usize) -> usize {
        let mut n = 0;
        while self.add(size, align) {
            n += 1;
            assert!(n < 1_000_000, "({size}, {align}) never fails");
        }
        n
    }

    fn check_all(&self, what: &str) {
        for b in &self.live {
            assert!(!matches!(owner(b.p), hakmem_core::Owner::Foreign));
            // SAFETY: a live block of `size` bytes.
            unsafe { common::check(b.p, 0, b.size, b.id, what) };
        }
    }

    /// Check and free the blocks `pred` picks; how many.
    fn free_where(&mut self, pred: impl FnMut(&Live) -> bool) -> usize {
        let (gone, kept) = std::mem::take(&mut self.live).into_iter().partition(pred);
        self.live = kept;
        let gone: Vec<Live> = gone;
        for b in &gone {
            // SAFETY: a live block made with `(size, align)`.
            unsafe {
                common::check(b.p, 0, b.size, b.id, "before free");
                dealloc(b.p, b.size, b.align);
            }
        }
        gone.len()
    }
}

/// Requests that exhaust a heap class by class: medium and mid first (few blocks fill a
/// superslab), then smaller ones, which still find free slabs between their spans.
// Superslabs carved into spans of slabs serve no single slab (and back), so the room
// left in them is used up by the smallest span class asked for: 20,000 B, which the
// resizes below grow to.
const REQUESTS: [(usize, usize); 7] = [
    (200_000, 16),
    (40_000, 16),
    (20_000, 16),
    (3000, 16),
    (100, 4096),
    (48, 16),
    (0, 1),
];
const LARGE: usize = 2 * MIB;

#[test]
fn allocation_fails_cleanly_and_recovers() {
    let mut blocks = Blocks {
        live: Vec::new(),
        next_id: 0,
    };
    for &(size, align) in REQUESTS.iter().chain(&[(LARGE, 16), (3 * MIB, 64 * 1024)]) {
        for _ in 0..10 {
            assert!(blocks.add(size, align));
        }
    }
    for successes in [0, 1, 3] {
        trim(); // no cached large mapping may serve the large requests below
                // Blocks to resize while mappings fail.
        assert!(blocks.add(48, 16) && blocks.add(LARGE, 16));
        let (small, large) = (blocks.live.len() - 2, blocks.live.len() - 1);
        inject_map_failures(Some(successes));
        let mut given = Vec::new();
        for &(size, align) in &REQUESTS {
            given.push(blocks.exhaust(size, align));
        }
        let mapped = stats().mapped;
        // Every path is out of memory now, and says so with null.
        for &(size, align) in &REQUESTS {
            assert!(alloc(size, align).is_null(), "alloc({size}, {align})");
            assert!(
                alloc_zeroed(size, align).is_null(),
                "alloc_zeroed({size}, {align})"
            );
        }
        for size in [MAX_SMALL + 1, LARGE, 3 * MIB] {
            assert!(alloc(size, 16).is_null(), "large alloc({size})");
            assert!(
                alloc_zeroed(size, 16).is_null(),
                "large alloc_zeroed({size})"
            );
        }
        // Resizing fails and leaves the block as it was.
        let (small, large) = (&blocks.live[small], &blocks.live[large]);
        // SAFETY: live blocks with their requests; on failure they stay ours.
        unsafe {
            assert!(realloc(small.p, 48, 16, 20_000).is_null());
            assert!(realloc(large.p, LARGE, 16, 64 * MIB).is_null());
            assert!(realloc_unsized(small.p, 20_000).is_null());
            assert!(realloc_unsized(large.p, 64 * MIB).is_null());
        }
        blocks.check_all(&format!("with mappings failing after {successes}"));
        assert_eq!(
            stats().mapped,
            mapped,
            "a failed mapping changed the mapped bytes"
        );

        // A new thread cannot set up without memory either, but does not crash.
        std::thread::spawn(|| {
            let p = alloc(48, 16);
            if !p.is_null() {
                // SAFETY: a fresh block of 48 bytes, freed as made.
                unsafe {
                    common::fill(p, 0, 48, 1);
                    dealloc(p, 48, 16);
                }
            }
        })
        .join()
        .unwrap();

        // Freed blocks are reused without a new mapping.
        let freed = blocks.free_where(|b| b.size == 3000);
        assert!(freed > 0);
        assert_eq!(
            blocks.exhaust(3000, 16),
            freed,
            "freed blocks are all reused"
        );
        blocks.check_all("after reuse");

        inject_map_failures(None);
        for &(size, align) in REQUESTS.iter().chain(&[(LARGE, 16), (3 * MIB, 16)]) {
            assert!(blocks.add(size, align), "({size}, {align}) after recovery");
        }
        blocks.check_all("after recovery");
        eprintln!("after {successes} successes, blocks given per request: {given:?}");
        // Keep a few of each for the next round, free the rest.
        let mut k = 0;
        blocks.free_where(|_| {
            k += 1;
            k % 16 != 0
        });
    }
    // A resize that needs two steps (reserve an aligned destination, move the pages onto
    // it), failing at each: the block is whole whether the resize happened or not.
    for successes in 0..3 {
        let i = blocks.live.len();
        // The second block sits right after the first, so the first cannot grow in place.
        assert!(blocks.add(300_000, 16) && blocks.add(300_000, 16));
        inject_map_failures(Some(successes));
        let b = &mut blocks.live[i];
        // SAFETY: a live block with its request; on failure it stays ours.
        let q = unsafe { realloc(b.p, b.size, 16, 48 * MIB) };
        inject_map_failures(None);
        if !q.is_null() {
            // SAFETY: `q` holds 48 MiB, the first `b.size` bytes moved from `b.p`.
            unsafe {
                common::check(q, 0, b.size, b.id, "moved by mremap");
                common::fill(q, b.size, 48 * MIB, b.id);
            }
            (b.p, b.size) = (q, 48 * MIB);
        }
        eprintln!(
            "resize with {successes} mappings left: moved {}",
            !q.is_null()
        );
        blocks.check_all(&format!("resize with {successes} mappings left"));
    }
    blocks.free_where(|_| true);
}

const MAX_SMALL: usize = hakmem_core::MAX_SMALL_SIZE;
