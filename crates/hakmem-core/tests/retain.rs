//! Freed memory is kept for reuse within the profile's budget, and given back once it
//! has been kept longer than the profile's time. One test: the counters are process-wide.

use hakmem_core::{alloc, dealloc, stats, Profile};
use std::time::Duration;

const MID: usize = 32 * 1024;
const LARGE: usize = 2 << 20;

#[test]
fn lean_keeps_within_budget_then_lets_go() {
    hakmem_core::set_profile(Profile::Lean);
    let blocks: Vec<*mut u8> = (0..2048).map(|_| alloc(MID, 16)).collect();
    assert!(blocks.iter().all(|p| !p.is_null()));
    for &p in &blocks {
        // SAFETY: a live block of MID bytes.
        unsafe { p.write_bytes(1, MID) };
    }
    let peak = stats();
    for p in blocks {
        // SAFETY: allocated above with this request.
        unsafe { dealloc(p, MID, 16) };
    }
    let freed = stats();
    // Lean's budget: max(4 MiB, a thirty-second of the recent peak in use) = 4 MiB here.
    let kept = freed.cached_superslabs * (4 << 20) + freed.cached_large;
    assert!(kept <= 4 << 20, "lean kept {kept} bytes: {freed:?}");
    assert!(
        freed.mapped + (48 << 20) <= peak.mapped,
        "{peak:?} -> {freed:?}"
    );

    // What is kept goes back once older than lean's 250 ms, at the next call that looks
    // (here the free of a large block).
    assert_eq!(freed.cached_superslabs, 1, "{freed:?}");
    std::thread::sleep(Duration::from_millis(400));
    let p = alloc(LARGE, 16);
    // SAFETY: a live large block.
    unsafe { dealloc(p, LARGE, 16) };
    let later = stats();
    assert_eq!(later.cached_superslabs, 0, "{later:?}");
    assert!(later.mapped < freed.mapped, "{freed:?} -> {later:?}");
}
