//! Freed memory is kept for reuse, and given back once it has been kept longer than the
//! profile's time: in `lean`, by the background return even if the program never calls
//! the allocator again. One test: the counters are process-wide.

use hakmem_core::{alloc, dealloc, stats, Profile};
use std::time::{Duration, Instant};

const MID: usize = 32 * 1024;
const LARGE: usize = 2 << 20;

#[test]
fn lean_keeps_for_reuse_then_lets_go_while_idle() {
    hakmem_core::set_profile(Profile::Lean);
    let blocks: Vec<*mut u8> = (0..2048).map(|_| alloc(MID, 16)).collect();
    let larges: Vec<*mut u8> = (0..4).map(|_| alloc(LARGE, 16)).collect();
    assert!(blocks.iter().chain(&larges).all(|p| !p.is_null()));
    for &p in &blocks {
        // SAFETY: a live block of MID bytes.
        unsafe { p.write_bytes(1, MID) };
    }
    let peak = stats();
    for p in blocks {
        // SAFETY: allocated above with this request.
        unsafe { dealloc(p, MID, 16) };
    }
    // Freed by a thread with no heap, which keeps none of them for its next requests: to
    // the cache.
    let larges: Vec<usize> = larges.into_iter().map(|p| p as usize).collect();
    std::thread::spawn(move || {
        for p in larges {
            // SAFETY: as above.
            unsafe { dealloc(p as *mut u8, LARGE, 16) };
        }
    })
    .join()
    .expect("the freeing thread");
    let freed = stats();
    // Kept for reuse (the recent peak is the budget): nothing unmapped yet.
    assert!(freed.cached_superslabs >= 8, "{freed:?}");
    assert!(freed.cached_large >= 4 * LARGE, "{freed:?}");
    assert!(
        freed.mapped + (8 << 20) >= peak.mapped,
        "{peak:?} -> {freed:?}"
    );

    // No allocator call from here on: the background return gives everything back once
    // older than lean's 250 ms (it wakes every 125 ms).
    let start = Instant::now();
    let later = loop {
        let s = stats();
        if s.cached_superslabs == 0 && s.cached_large == 0 {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "still kept after 5 s: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        later.mapped + (48 << 20) <= peak.mapped,
        "{peak:?} -> {later:?}"
    );
    eprintln!("lean gave everything back in {:?}", start.elapsed());
}
