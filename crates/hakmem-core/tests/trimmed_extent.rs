//! A cached extent that the retention budget cuts short keeps its chunk bit, so a block
//! later handed out whole from what is left of it is still hakmem's.
//!
//! Extents are any number of pages long (a block that `realloc` grew maps an eighth more
//! than it needs), and the budget cuts whole chunks off the end of the oldest one: the
//! cut then starts inside its first chunk, whose bit clearing the cut's chunks took with
//! them. The block later made from the rest had no chunk bit, and its `free` took it for
//! a foreign pointer.
//!
//! One test in this binary: it sets the profile and drives the retention clock.

use hakmem_core::testing::{expire_large, now_ms};
use hakmem_core::{alloc, dealloc, in_heap, realloc, set_profile, stats, Profile};

const MIB: usize = 1 << 20;

#[test]
fn a_block_from_a_cut_extent_is_still_hakmems() {
    // Lean: retained memory over the larger of 4 MiB and the recent peak in use (over
    // 250 ms) is cut, oldest first.
    set_profile(Profile::Lean);
    let retain_ms = 250;

    // A block grown by `realloc` past 4 MiB: its mapping is 5 MiB and a bit more.
    let p = alloc(5 * MIB / 2, 16);
    assert!(!p.is_null());
    // SAFETY: a live block made with `(5 MiB / 2, 16)`.
    let p = unsafe { realloc(p, 5 * MIB / 2, 16, 5 * MIB) };
    assert!(!p.is_null());
    // The recent peak in use is now; free the block a little later.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let freed_ms = now_ms();
    // SAFETY: a live block made with `(5 MiB, 16)`.
    unsafe { dealloc(p, 5 * MIB, 16) };
    // Past the peak's window, not past the extent's time: over budget, so the extent's
    // last 4 MiB are cut, and the rest stays cached (lean may have cut it at the free).
    expire_large(freed_ms + retain_ms - 5);
    let rest = stats().cached_large;
    assert!(
        rest > 0 && rest < 4 * MIB,
        "the extent of 5 MiB and more cut to less than a chunk: {rest}"
    );

    // A block that a resize makes large takes no half of a pair chunk: it takes the rest
    // of the extent whole.
    let q = alloc(100 << 10, 16);
    assert!(!q.is_null());
    // SAFETY: a live block made with `(100 KiB, 16)`.
    let q = unsafe { realloc(q, 100 << 10, 16, rest - 4096) };
    assert!(!q.is_null());
    assert_eq!(stats().cached_large, 0, "the rest handed out");
    assert!(
        in_heap(q),
        "a block from the cut extent without its chunk bit"
    );
    // SAFETY: a live block made with `(rest - 4096, 16)`.
    unsafe { dealloc(q, rest - 4096, 16) };
}
