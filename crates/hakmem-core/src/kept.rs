//! The large blocks a thread freed and keeps for its next large requests ([`KeptLarge`]),
//! held in its heap ([`crate::heap::Heap::kept_large`]), under the heap's `turn` in the
//! profiles whose background return visits it.

use crate::chunk_map::CHUNK_SIZE;
use crate::large::{self, Retired, Want};
use crate::os;

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
/// the profiles whose background return visits the heap, one: the heap's `turn`,
/// [`crate::heap::Heap::set_kept_visited`]). 16 slots of 64 KiB..4 MiB written at both
/// ends (`large`, the Rust workload, whose sized free is otherwise light) took 1.3x-1.4x
/// the time of `709a854` through the cache and 0.93x this way, `c-large` (its C replica)
/// 1.01x and about 0.7x (9 alternated runs); balanced and lean, with `turn`, took 1.2x
/// fast's time on both (5 rounds).
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
/// heap, under its `turn`, and not in the thread cache).
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
