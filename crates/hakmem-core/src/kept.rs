//! The large blocks a thread freed and keeps for its next large requests ([`KeptLarge`]),
//! held in its heap with what lets the background return give them back while the thread
//! uses them without a lock ([`Keeper`]).

use crate::chunk_map::CHUNK_SIZE;
use crate::config;
use crate::large::{self, Retired, Want};
use crate::os;
use crate::sync::protocol::{light_fence, AtomicBool, AtomicUsize};
use crate::sync::{AtomicU8, Ordering};
use core::cell::{Cell, UnsafeCell};

/// The most large blocks a thread keeps, in every profile.
pub const KEPT_LARGE: usize = 4;

/// Large blocks of at most this (a chunk) are kept, so a thread keeps at most 16 MiB.
/// Blocks a resize made or resized are not kept either (see [`KeptLarge`]).
const KEPT_LARGE_MAX: usize = CHUNK_SIZE;

/// Large blocks a thread freed ([`large::Retired`]), each for the next large request of
/// the thread that it serves ([`Retired::serves`]), which takes it without the cache of
/// extents.
///
/// Why: a program writes a large block (its ends at least) before it frees it, and those
/// writes are to cold lines, so a locked instruction after them waits until they are
/// done; the cache of extents takes a lock and updates shared counters at each free and
/// each allocation (four locked instructions or more), where a kept block costs none (in
/// the profiles whose background return visits the heap too: [`Keeper`]). 16 slots of 64 KiB..4 MiB written at both
/// ends (`large`, the Rust workload, whose sized free is otherwise light) took 1.3x-1.4x
/// the time of `709a854` through the cache and 0.93x this way, `c-large` (its C replica)
/// 1.01x and about 0.7x (9 alternated runs); balanced and lean, with `turn`, took 1.2x
/// fast's time on both (5 rounds) when they took the heap's lock for each use.
///
/// Not kept: blocks over a chunk, and blocks a resize made or resized last (they tend to
/// grow on, and are freed by programs that resize, not by ones that cycle buffers):
/// kept, 2 % of 8..512 B blocks grown to 0.8 KiB..5 MiB on two threads
/// (`realloc-xthread`) peaked at 63.0 MiB against 53.1 (7 alternated runs).
///
/// Which block: the lowest address that serves the request; and when all slots are full,
/// the block at the highest address of those kept and the one freed goes to the cache. So
/// the blocks at the bottom keep being reused, as [`large`]'s cache does (a block's end
/// lands on pages its chunk may not have had, so wandering blocks gather resident pages):
/// with 8 slots `large` peaked at 54.2 MiB as through the cache (54.0), where keeping the
/// newest peaked at 60.1 with 2 slots and 65.1 with 4.
///
/// A large request that no kept block serves gives the highest one to the cache (where
/// it may serve that request or the next): kept blocks of a shape the program stopped
/// asking for would otherwise stay out of use while requests took other memory.
/// `c-large-written` (the same blocks, every page written) peaked at 89.2 MiB with 8
/// slots, 84.8 with 4, 81.2 with 2, against 77.3 through the cache; 77.3 with this, with 8
/// slots or 4, where `large` peaked at 58.0 and 55.1 (7 alternated runs each, under
/// `LD_PRELOAD` for the C rows; the blocks then kept in the thread cache). Four, then:
/// `large` took 0.83x the time of `709a854` either way, and a thread keeps at most
/// 16 MiB.
///
/// Given back (to the cache) besides: at an upkeep of the thread that finds none taken
/// since the one before, when the thread ends, at `trim`, and, in the profiles with a
/// background return, when its visit finds the thread idle (why the blocks are in the
/// heap, and not in the thread cache).
///
/// Invariant: every block is a retired block of the heap's ([`Retired`]'s invariant), of
/// at most [`KEPT_LARGE_MAX`] bytes.
pub struct KeptLarge {
    blocks: [Option<Retired>; KEPT_LARGE],
    /// A request took a block since the last [`KeptLarge::release`] with `idle`.
    taken: bool,
}

impl KeptLarge {
    pub const EMPTY: KeptLarge = KeptLarge {
        blocks: [const { None }; KEPT_LARGE],
        taken: false,
    };

    /// Keep the retired block `k`; returns the block to give to the cache
    /// ([`large::release`]): `k` itself, or a block kept before that it displaced.
    pub fn keep(&mut self, k: Retired) -> Option<Retired> {
        if k.map_size() > KEPT_LARGE_MAX || k.resized() {
            return Some(k);
        }
        if let Some(free) = self.blocks.iter_mut().find(|b| b.is_none()) {
            *free = Some(k);
            return None;
        }
        let highest = self.highest();
        if highest.as_ref().is_some_and(|h| h.base() > k.base()) {
            return highest.replace(k);
        }
        Some(k)
    }

    /// The lowest kept block that serves a request of shape `want` for `size` bytes,
    /// handed out: `(ptr, dirty)` as [`large::alloc`] returns. `None` when none serves
    /// it; then the highest kept block goes to the cache.
    pub fn reuse(&mut self, want: Want, size: usize) -> Option<(*mut u8, usize)> {
        let serving = self
            .blocks
            .iter_mut()
            .filter(|b| b.as_ref().is_some_and(|k| k.serves(want)))
            .min_by_key(|b| b.as_ref().map_or(usize::MAX, Retired::base));
        if let Some(k) = serving.and_then(Option::take) {
            self.taken = true;
            return Some(large::reuse(k, want, size));
        }
        if let Some(k) = self.highest().take() {
            large::release(k, os::now_ms());
        }
        None
    }

    /// The slot of the kept block at the highest address (an empty slot when none is kept).
    fn highest(&mut self) -> &mut Option<Retired> {
        let slots = self.blocks.iter_mut();
        let highest = slots.max_by_key(|b| b.as_ref().map_or(0, Retired::base));
        highest.expect("the slots are never none")
    }

    /// Give the kept blocks to the cache as freed at `freed_ms` ([`os::now_ms`], asked for
    /// only if a block is kept): all of them, or (`idle`) only if no request took one
    /// since the last such call. The background return is only wanted
    /// ([`crate::retain::want`]): the caller holds the heap.
    pub fn release(&mut self, idle: bool, freed_ms: impl Fn() -> u64) {
        let taken = core::mem::replace(&mut self.taken, false);
        if idle && taken {
            return;
        }
        let mut at = None;
        for slot in self.blocks.iter_mut() {
            if let Some(k) = slot.take() {
                large::release(k, *at.get_or_insert_with(&freed_ms));
            }
        }
    }
}

/// How the heap's thread and the background return's visits share the kept blocks
/// ([`Keeper`]), chosen by the thread ([`Access::wanted`]).
// Re-exported, hidden, for the loom model (`testing`); the docs link to private items.
#[allow(rustdoc::private_intra_doc_links)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Access {
    /// No visits (the profile has no background return): the thread uses the blocks
    /// alone.
    Alone = 0,
    /// The visits give the blocks of an idle thread back: the thread marks each use, a
    /// visit claims them and then fences the process ([`os::process_barrier`]).
    Fenced = 1,
    /// Visits, but no process barrier (the kernel or a sandbox refuses it, or the thread
    /// that readies it has not yet run): nothing is kept.
    Off = 2,
}

impl Access {
    /// The access the profile and the process barrier allow now.
    pub fn wanted() -> Access {
        if !config::current().background_return {
            Access::Alone
        } else if os::process_barrier_ready() {
            Access::Fenced
        } else {
            Access::Off
        }
    }

    fn from_u8(a: u8) -> Access {
        match a {
            0 => Access::Alone,
            1 => Access::Fenced,
            _ => Access::Off,
        }
    }
}

/// A heap's kept blocks ([`KeptLarge`]) and what lets the background return's visit give
/// them back while the heap's thread uses them without a lock.
///
/// Why no lock: a locked instruction after the program's writes to a large block waits
/// for them (see [`KeptLarge`]); with the heap's `turn` taken at each use, balanced and
/// lean took 1.2x fast's time on `large` and `c-large`.
///
/// The protocol, in [`Access::Fenced`] (an asymmetric Dekker: a store then a load on each
/// side, the fence on the rare side only):
/// - the thread, to use the blocks, makes `uses` odd, then (a compiler fence between)
///   reads `claimed`: if set it backs off (makes `uses` even, keeps or takes nothing);
///   else it uses them and makes `uses` even again (release);
/// - a visit (holding the heap's `turn`), finding `uses` even and as it was at the
///   visit before, sets `claimed`, fences every running thread of the process
///   ([`os::process_barrier`]) and reads `uses` again: unchanged, no use began before
///   the fence, and every use after it sees `claimed` and backs off, so the blocks are
///   the visit's until it clears `claimed` (release).
///
/// Model-checked with loom (tests/loom_kept.rs, the barrier a `SeqCst` fence on each
/// side), and run on real threads against the real barrier (`tests` below).
///
/// Invariants: `access` is written only by the heap's thread, holding `turn`; `uses` only
/// by the heap's thread; `claimed`, `seen` and `emptied` only by a visit, holding `turn`.
/// The blocks are used by the heap's thread holding `turn`, or in a use marked as above
/// (in [`Access::Alone`], unmarked), or by a visit holding `turn` and (in
/// [`Access::Fenced`]) its claim; in [`Access::Off`] none is kept.
// Re-exported, hidden, for the loom model (`testing`); the docs link to private items.
#[allow(rustdoc::private_intra_doc_links)]
pub struct Keeper {
    blocks: UnsafeCell<KeptLarge>,
    access: AtomicU8,
    /// The thread's uses of the blocks, twice over: odd during one.
    uses: AtomicUsize,
    /// Set by a visit while it may take the blocks.
    claimed: AtomicBool,
    /// `uses` at the last visit, and whether that visit left no block kept.
    seen: Cell<usize>,
    emptied: Cell<bool>,
}

// As on the type: the methods' docs link to private items too.
#[allow(rustdoc::private_intra_doc_links)]
impl Keeper {
    // Not `const`: loom's atomics are not.
    pub fn new() -> Keeper {
        Keeper {
            blocks: UnsafeCell::new(KeptLarge::EMPTY),
            access: AtomicU8::new(Access::Alone as u8),
            uses: AtomicUsize::new(0),
            claimed: AtomicBool::new(false),
            seen: Cell::new(0),
            emptied: Cell::new(true),
        }
    }

    /// The kept blocks.
    ///
    /// # Safety
    /// The caller is alone with them, as [`Keeper`]'s invariant says: the heap's thread
    /// holding `turn` or in a use [`Keeper::with_blocks`] marked, or a visit holding
    /// `turn` and its claim; no other reference this returned lives.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn blocks(&self) -> &mut KeptLarge {
        // SAFETY: by the caller, under the type's invariant: alone with the blocks.
        unsafe { &mut *self.blocks.get() }
    }

    pub fn access(&self) -> Access {
        Access::from_u8(self.access.load(Ordering::Relaxed))
    }

    /// Set the access to `access`; into [`Access::Off`], the kept blocks go to the cache.
    ///
    /// # Safety
    /// The heap's thread, holding `turn` (which the visits hold while they read it).
    pub unsafe fn set_access(&self, access: Access) {
        self.access.store(access as u8, Ordering::Relaxed);
        // A use, for the visits: blocks kept before (alone) are not known empty.
        let uses = self.uses.load(Ordering::Relaxed);
        self.uses.store(uses.wrapping_add(2), Ordering::Relaxed);
        if access == Access::Off {
            // SAFETY: by the caller.
            unsafe { self.blocks() }.release(false, os::now_ms);
        }
    }

    /// `f(blocks, arg)` for the heap's thread, without `turn`, or `Err(arg)` when the
    /// access keeps nothing or a visit claims the blocks.
    ///
    /// # Safety
    /// The heap's thread, not holding `turn` and not inside another use; `f` does not
    /// reach the blocks by another way.
    pub unsafe fn with_blocks<T, R>(
        &self,
        arg: T,
        f: impl FnOnce(&mut KeptLarge, T) -> R,
    ) -> Result<R, T> {
        match self.access() {
            Access::Off => Err(arg),
            // SAFETY: no visit touches the blocks; the caller's use is the only one.
            Access::Alone => Ok(f(unsafe { self.blocks() }, arg)),
            Access::Fenced => {
                let begun = self.uses.load(Ordering::Relaxed).wrapping_add(1);
                self.uses.store(begun, Ordering::Relaxed);
                // The store before the load: the visit's process barrier orders them.
                #[cfg(not(hakmem_broken = "kept_no_fence"))]
                light_fence();
                let claimed = self.claimed.load(Ordering::Acquire);
                let r = if claimed {
                    Err(arg)
                } else {
                    // SAFETY: a use marked before `claimed` read clear (the protocol).
                    Ok(f(unsafe { self.blocks() }, arg))
                };
                self.uses.store(begun.wrapping_add(1), Ordering::Release);
                r
            }
        }
    }

    /// Whether the thread used the blocks since the last [`Keeper::visit`].
    ///
    /// # Safety
    /// The caller holds the heap's `turn` (`seen` is the visits').
    pub unsafe fn used_since_visit(&self) -> bool {
        self.uses.load(Ordering::Relaxed) != self.seen.get()
    }

    /// A visit of the background return: when the thread is `idle` (no slow path since
    /// the last visit) and used no block either, `give_back(blocks)` (which empties
    /// them: [`KeptLarge::release`]).
    ///
    /// # Safety
    /// The caller holds the heap's `turn`.
    pub unsafe fn visit(&self, idle: bool, give_back: impl FnOnce(&mut KeptLarge)) {
        if self.access() != Access::Fenced {
            // Alone: nothing to do with a visit; Off: nothing kept.
            return;
        }
        let uses = self.uses.load(Ordering::Acquire);
        if uses != self.seen.replace(uses) {
            self.emptied.set(false);
            return;
        }
        if !idle || uses % 2 == 1 || self.emptied.get() {
            return;
        }
        self.claimed.store(true, Ordering::Relaxed);
        // The store before the barrier and the load after it: the barrier is a full fence
        // here too.
        let fenced = os::process_barrier();
        #[cfg(not(hakmem_broken = "kept_no_reread"))]
        let still = self.uses.load(Ordering::Acquire) == uses;
        // Broken on purpose (tests/loom_kept.rs must catch it): no second look at `uses`.
        #[cfg(hakmem_broken = "kept_no_reread")]
        let still = true;
        if fenced && still {
            // SAFETY: `turn` held (no slow path of the thread) and the claim (no use).
            give_back(unsafe { self.blocks() });
            self.emptied.set(true);
        }
        self.claimed.store(false, Ordering::Release);
    }
}

impl Default for Keeper {
    fn default() -> Keeper {
        Keeper::new()
    }
}

#[cfg(all(test, not(miri), not(loom)))]
mod tests {
    use super::*;
    use core::sync::atomic::AtomicBool as Flag;
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    /// The protocol itself, with a mutex for the heap's `turn`: a thread that marks uses
    /// in short bursts against a visit claiming in a loop. Neither may be inside while
    /// the other is; both the visit's taking and the thread's backing off must happen.
    /// It runs until they have (at least 400 ms), 10 s at most: counts, not times, are
    /// what it asserts.
    #[test]
    fn a_visit_and_a_marked_use_never_overlap() {
        assert!(os::ready_process_barrier(), "membarrier is refused here");
        let keeper: &'static Keeper = Box::leak(Box::new(Keeper::new()));
        let turn: &'static Mutex<()> = Box::leak(Box::new(Mutex::new(())));
        static USING: Flag = Flag::new(false);
        static TAKING: Flag = Flag::new(false);
        static DONE: Flag = Flag::new(false);
        static TAKEN: AtomicUsize = AtomicUsize::new(0);
        {
            let _turn = turn.lock().unwrap();
            // SAFETY: the keeper's one user thread (this one, until the spawn), holding
            // the stand-in `turn`.
            unsafe { keeper.set_access(Access::Fenced) };
        }
        let start = Instant::now();
        let (least, most) = (Duration::from_millis(400), Duration::from_secs(10));
        // By address, as threads reach a heap (`Keeper` is not `Sync`: its protocol is).
        let at = keeper as *const Keeper as usize;
        let user = std::thread::spawn(move || {
            // SAFETY: leaked, so valid for the test; shared as the protocol lets it.
            let keeper = unsafe { &*(at as *const Keeper) };
            let (mut used, mut backed_off) = (0u32, 0u32);
            let mut spin = 1u32;
            let enough = |used, backed_off| {
                used >= 20 && backed_off > 0 && TAKEN.load(Ordering::Relaxed) >= 5
            };
            while start.elapsed() < least || (!enough(used, backed_off) && start.elapsed() < most) {
                // Uses and gaps of 0..~50 µs: some uses outlast a visit's barrier, and
                // visits find the count still in some gaps.
                spin = spin.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                let (length, gap) = ((spin >> 8) % 40_000, (spin >> 16) % 40_000);
                // SAFETY: the keeper's thread, not holding `turn`, in no other use.
                let r = unsafe {
                    keeper.with_blocks((), |_, ()| {
                        USING.store(true, Ordering::SeqCst);
                        for _ in 0..length {
                            assert!(!TAKING.load(Ordering::Relaxed), "a use while a visit takes");
                        }
                        USING.store(false, Ordering::SeqCst);
                    })
                };
                match r {
                    Ok(()) => used += 1,
                    Err(()) => backed_off += 1,
                }
                for _ in 0..gap {
                    core::hint::spin_loop();
                }
            }
            DONE.store(true, Ordering::SeqCst);
            (used, backed_off)
        });
        // (Bounded in time as well: a failed assertion ends the other thread.)
        while !DONE.load(Ordering::SeqCst) && start.elapsed() < most {
            let _turn = turn.lock().unwrap();
            // SAFETY: holding the stand-in `turn`.
            unsafe {
                keeper.visit(true, |_| {
                    TAKING.store(true, Ordering::SeqCst);
                    for _ in 0..200 {
                        assert!(!USING.load(Ordering::Relaxed), "a visit takes during a use");
                    }
                    TAKING.store(false, Ordering::SeqCst);
                    TAKEN.fetch_add(1, Ordering::Relaxed);
                })
            };
        }
        let (used, backed_off) = user.join().expect("the user thread");
        let taken = TAKEN.load(Ordering::Relaxed);
        assert!(used >= 20 && taken >= 5, "{used} uses, {taken} visits took");
        assert!(
            backed_off > 0,
            "no use met a claim ({used} uses, {taken} taken)"
        );
    }
}
