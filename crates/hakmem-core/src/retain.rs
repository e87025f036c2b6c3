//! The budget of freed memory kept for reuse: empty superslabs (in [`crate::pool`]) and
//! freed large mappings (in [`crate::large`]'s cache). Reusing them costs no system call
//! and no page fault; keeping them costs resident memory. The profile bounds it two ways:
//!
//! - bytes: at most `max(floor, recent peak in use)`, where bytes in use are those mapped
//!   minus those retained, and the recent peak is the highest seen within the last
//!   `retain_ms` (so a program that frees a batch and allocates it again, or cycles
//!   buffers, finds them; one that shrank for good keeps at most its old peak, for at
//!   most `retain_ms`);
//! - time: a piece retained longer than `retain_ms` is given back the next time its cache
//!   is used (by a free of a large block, in the first one of each millisecond:
//!   [`sweep_due`]) or a thread does its upkeep, and, in the profiles that ask for it
//!   (`balanced`, `lean`), by a background thread that runs while anything is retained or
//!   some thread is active ([`crate::process`] starts it through [`wake_if_wanted`]), so
//!   that a program that stops calling the allocator still gets its memory back within
//!   about `retain_ms`.
//!
//! Each cache evicts its own oldest pieces while [`excess`] says the total is over budget.

use crate::config;
use crate::os::{self, COUNTERS};
use crate::sync::{
    AtomicBool, AtomicU64, AtomicUsize,
    Ordering::{Relaxed, SeqCst},
};

/// Bytes retained by both caches.
static RETAINED: AtomicUsize = AtomicUsize::new(0);
/// The recent peak of bytes in use, and when it was set (ms, [`os::now_ms`]). Updated
/// with plain loads and stores: a lost update only makes the budget a little off.
static PEAK: AtomicUsize = AtomicUsize::new(0);
static PEAK_MS: AtomicU64 = AtomicU64::new(0);
/// The millisecond ([`os::now_ms`]) of the last pass over the caches that [`sweep_due`]
/// allowed. Plain loads and stores: two threads may both pass in one millisecond.
static SWEPT_MS: AtomicU64 = AtomicU64::new(u64::MAX);

/// What [`wake_if_wanted`] calls: set once by [`crate::process`] (a function above this
/// layer, so it is passed down rather than called up).
static WAKER: AtomicUsize = AtomicUsize::new(0);

/// Set by [`want`], cleared by the background return at the start of each pass
/// ([`take_wanted`]): something may have come to give back that the pass did not see.
/// `SeqCst` on every store of it and on the returner's running flag: a thread that
/// wanted stores this then reads that flag, the ending returner stores the flag then
/// reads this, so one of the two sees the other's store (and a pass that cleared it
/// after a slow path stored it finds that heap active, so it does not end).
static WANTED: AtomicBool = AtomicBool::new(false);

/// Register the function that starts the background return.
pub fn set_waker(f: fn()) {
    WAKER.store(f as usize, Relaxed);
}

/// Something may be given back later (memory retained, a slab left free): note it for the
/// background return. Only a flag, so any code may call it, under any lock; what starts
/// the thread is [`wake_if_wanted`], outside them.
pub fn want() {
    if config::current().background_return {
        WANTED.store(true, SeqCst);
    }
}

/// [`want`], unless the profile has no background return or it was wanted since the
/// return's last pass: for a path that runs often and leaves something for the return
/// to give back while the thread is idle (a kept large block, whose use count the thread
/// stored just before), which then stores (a locked instruction) once a pass.
///
/// The load of the flag after the thread's store of its use count is the fast side of
/// an asymmetric pair: the returner clears the flag at the start of a pass and then runs
/// the process barrier before it reads the use counts (`crate::process`), so either the
/// thread sees the flag cleared and wants, or the pass sees the use.
pub fn want_once() {
    if !config::current().background_return {
        return;
    }
    crate::sync::protocol::light_fence();
    if !WANTED.load(Relaxed) {
        WANTED.store(true, SeqCst);
    }
}

/// For the background return, at the start of a pass: whether [`want`] was called since
/// the previous one; clears it.
pub fn take_wanted() -> bool {
    WANTED.swap(false, SeqCst)
}

/// Whether [`want`] was called since the background return's last pass.
pub fn wanted() -> bool {
    WANTED.load(SeqCst)
}

/// Start the background return, if the profile wants it and it is not running, when
/// [`want`] was called since its last pass (after a free that retained memory, at the end
/// of a slow path, which may have left slabs free; one load when nothing was). Called
/// outside every lock and outside a heap's slow path (it may create a thread, which may
/// allocate).
pub fn wake_if_wanted() {
    if WANTED.load(Relaxed) {
        start();
    }
}

fn start() {
    let f = WAKER.load(Relaxed);
    if f != 0 && config::current().background_return {
        // SAFETY: only `set_waker` stores here, and it stores a `fn()`.
        let f: fn() = unsafe { core::mem::transmute::<usize, fn()>(f) };
        f();
    }
}

/// A cache took `bytes` in.
pub fn add(bytes: usize) {
    RETAINED.fetch_add(bytes, Relaxed);
}

/// A cache gave `bytes` out (reused or returned to the OS).
pub fn sub(bytes: usize) {
    RETAINED.fetch_sub(bytes, Relaxed);
}

/// Bytes retained now.
pub fn retained() -> usize {
    RETAINED.load(Relaxed)
}

/// Bytes retained over the budget at `now` ([`os::now_ms`]; 0 when within it).
pub fn excess(now: u64) -> usize {
    let retained = RETAINED.load(Relaxed);
    let policy = config::current();
    let in_use = COUNTERS.mapped_bytes.load(Relaxed).saturating_sub(retained);
    // The recent peak is at least `in_use`: it is reset to it whenever it is reached.
    let budget = recent_peak(in_use, policy.retain_ms, now).max(policy.retain_floor);
    retained.saturating_sub(budget)
}

/// Whether a free's pass over the caches ([`crate::large::expire`],
/// [`crate::pool::expire`]) at `now` may find anything to give back: the bytes retained
/// are over the budget, or no pass has run in this millisecond. A pass gives back every
/// piece kept `retain_ms` by `now`, and a piece cached since holds a time no earlier
/// than the pass's, so none outstays its time before the clock moves on (unless the
/// profile keeps pieces for no time at all). A free of a large block made three passes
/// under three locks, and each locked instruction waits for the stores before it: 300K
/// replacements of 64 KiB..4 MiB blocks written at both ends (`c-large`) took 1.18x-1.22x
/// the time of `709a854` (the commit issue #10 was filed at) with the passes at every
/// free, 1.05x-1.09x with this, 1.04x-1.06x with none at all (sets of 9 alternated runs
/// under `LD_PRELOAD`).
pub fn sweep_due(now: u64) -> bool {
    if excess(now) > 0 || config::current().retain_ms == 0 {
        return true;
    }
    if SWEPT_MS.load(Relaxed) == now {
        return false;
    }
    SWEPT_MS.store(now, Relaxed);
    true
}

/// Note the bytes in use now, for the recent peak (called when memory is taken).
pub fn observe() {
    let in_use = COUNTERS
        .mapped_bytes
        .load(Relaxed)
        .saturating_sub(RETAINED.load(Relaxed));
    if in_use > PEAK.load(Relaxed) {
        recent_peak(in_use, config::current().retain_ms, os::now_ms());
    }
}

/// Whether a piece retained since `since_ms` has outstayed the profile's time.
pub fn expired(since_ms: u64, now_ms: u64) -> bool {
    expired_under(config::current(), since_ms, now_ms)
}

/// [`expired`] under `policy` (for a caller that holds it already).
pub fn expired_under(policy: &config::Policy, since_ms: u64, now_ms: u64) -> bool {
    now_ms.saturating_sub(since_ms) >= policy.retain_ms
}

fn recent_peak(in_use: usize, window_ms: u64, now: u64) -> usize {
    let peak = PEAK.load(Relaxed);
    if in_use >= peak || now.saturating_sub(PEAK_MS.load(Relaxed)) > window_ms {
        PEAK.store(in_use, Relaxed);
        PEAK_MS.store(now, Relaxed);
        return in_use;
    }
    peak
}
