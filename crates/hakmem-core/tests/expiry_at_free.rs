//! In the fast profile, which runs no background return, a free of a large block is what
//! gives back the cached mappings kept longer than the profile's time. A free makes that
//! pass at most once a millisecond when the cache is within its budget
//! (`retain::sweep_due`); this checks that a free after the time has passed still makes
//! it. One test: the counters are process-wide.

use hakmem_core::{alloc, dealloc, stats, Profile};
use std::time::Duration;

const MIB: usize = 1 << 20;
/// Kept: four mappings of 3 MiB (no half of a pair chunk, well within fast's budget).
const KEPT: usize = 3 * MIB;
/// The block whose free comes once the kept ones have outstayed fast's 5 s.
const LATER: usize = 5 * MIB;

#[test]
fn a_free_after_the_time_gives_back_what_was_kept_longer() {
    hakmem_core::set_profile(Profile::Fast);
    let later = alloc(LATER, 16);
    // Live throughout, between the two: a freed mapping merges with the cached extents
    // beside it and takes its own time, and so would `later`'s with the kept ones.
    let fence = alloc(KEPT, 16);
    let kept: Vec<*mut u8> = (0..4).map(|_| alloc(KEPT, 16)).collect();
    assert!(kept.iter().all(|p| !p.is_null()) && !later.is_null() && !fence.is_null());
    for p in kept {
        // SAFETY: allocated above with this request.
        unsafe { dealloc(p, KEPT, 16) };
    }
    let cached = stats().cached_large;
    assert!(cached >= 4 * KEPT, "kept: {cached} bytes cached");

    std::thread::sleep(Duration::from_millis(5_200));
    // SAFETY: as above.
    unsafe { dealloc(later, LATER, 16) };
    let s = stats();
    // What is cached now is the block just freed: the four kept mappings went back.
    assert!(
        s.cached_large >= LATER && s.cached_large < LATER + 4 * KEPT,
        "{s:?}"
    );
    // SAFETY: as above.
    unsafe { dealloc(fence, KEPT, 16) };
}
