//! The one knob: a memory [`Profile`], and the [`Policy`] each profile stands for.
//!
//! - `Fast` (default): freed memory kept for reuse up to the recent peak in use, for 5 s,
//!   given back by later allocator calls.
//! - `Balanced`: fast's thread caches; freed memory kept for 1 s, given back by a
//!   background thread too, so an idle program returns it; free slabs of live superslabs
//!   decommitted with `MADV_FREE` once they stayed free.
//! - `Lean`: fast's thread caches; freed memory kept for 250 ms, background return; free
//!   slabs decommitted with `MADV_DONTNEED`, so their pages leave RSS at once.

use crate::os::Decommit;
use crate::sync::{AtomicU8, Ordering};

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[repr(u8)]
pub enum Profile {
    #[default]
    Fast = 0,
    Balanced = 1,
    Lean = 2,
}

impl Profile {
    /// Parse a profile name as written in `HAKMEM_PROFILE`.
    pub fn parse(name: &[u8]) -> Option<Profile> {
        match name {
            b"fast" => Some(Profile::Fast),
            b"balanced" => Some(Profile::Balanced),
            b"lean" => Some(Profile::Lean),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Profile::Fast => "fast",
            Profile::Balanced => "balanced",
            Profile::Lean => "lean",
        }
    }
}

/// What a profile decides.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    /// How free slabs inside a thread's superslabs give their pages back at upkeep, if at
    /// all.
    pub decommit: Option<Decommit>,
    /// Per-class thread cache budget in bytes (the capacity is this over the block size,
    /// clamped to `cache_min..=cache_max` blocks). A refill that takes a slab's whole free
    /// list raises a bin's capacity to hold it (`thread_cache::alloc_slow`), so a bin may
    /// hold one slab's blocks (64 KiB) past this.
    pub cache_bytes: usize,
    pub cache_min: u32,
    pub cache_max: u32,
    /// The most blocks a class that stays idle keeps room for (it shrinks to this, or to
    /// what fits in `cache_bytes`, at least one, when that is less): a class grows to its
    /// capacity only while the program uses it.
    pub cache_floor: u32,
    /// Freed memory kept mapped and committed for reuse (empty superslabs, large
    /// mappings; see [`crate::retain`]): at most `max(retain_floor, recent peak in use)`
    /// bytes, each piece for at most `retain_ms`.
    pub retain_floor: usize,
    pub retain_ms: u64,
    /// Whether a background thread gives back what was retained once `retain_ms` passed,
    /// while the program does not call the allocator (see [`crate::retain`]).
    pub background_return: bool,
    /// Freed large mappings kept, at most (also bounded by the bytes above).
    pub large_cache_entries: usize,
    /// The bytes of spans of wide blocks a heap must have carved before the superslabs of
    /// wide blocks it takes ask for huge pages (`superslab::wide_huge_pages_pay`).
    pub wide_huge_pages_from: usize,
}

const FAST: Policy = Policy {
    decommit: None,
    cache_bytes: 64 * 1024,
    // Room for 32 blocks of the classes over 1 KiB (one of a medium class). A program
    // that keeps many blocks of 1..64 KiB and replaces them at random frees and
    // allocates each class unevenly. Before the depot, a bin that ran dry was refilled
    // with blocks from its slabs, last touched long before (the program's first access
    // to each a cache miss), and a bin that overflowed sent blocks back to them, so that
    // over time every block of every slab was handed out and touched: with 32 blocks and
    // 1 MiB, 1.25x the time of 64 blocks on wide-churn, 1.32x on c-wide-churn (`cargo
    // xtask bench --allocator hakmem,baseline --baseline 66761c4 --runs 5`). Now what a
    // bin gives up waits in the depot and comes back at its next refill, still warm,
    // and a thread's surplus serves the others: with 16 threads of 256 blocks of
    // 16 B..4 KiB (c-many-threads), 64 / 32 / 16 blocks peaked at 21.7 / 17.4 / 16.6 MiB
    // in 0.0394 / 0.0390 / 0.0425 s, c-wide-churn 0.0421 / 0.0437 / 0.0458 s (14.5 MiB
    // each; 17.6 without the depot), c-mid-large 0.0203 / 0.0201 / 0.0218 s (7
    // alternated runs, warmed).
    cache_min: 32,
    cache_max: 512,
    cache_floor: 8,
    retain_floor: 64 << 20,
    retain_ms: 5_000,
    background_return: false,
    large_cache_entries: 64,
    // A thousand strings grown by appends to 64 KiB at once (`c-string-builders`) fault
    // in their first wide spans a page at a time: 5.5K faults and 1.12x mimalloc 3's time
    // from 32 MiB, 2.5K and 1.02x from 16 MiB, 1.5K and 0.98x from 8 MiB (one set of 7
    // alternated runs, warmed). The cost is the untouched bytes of huge pages: `c-wide-churn` (a
    // thousand slots of 16 B..32 KiB) peaked at 14.6, 19.8 and 24.9 MiB, against
    // tcmalloc's 19.5 in the full run at `4cbffa0` (the least of the field, whose 1.1x is
    // 21.4); `c-mid-large` at 5.5, 6.8 and 6.2.
    wide_huge_pages_from: 16 << 20,
};

static POLICIES: [Policy; 3] = [
    FAST,
    // Fast's thread caches (the fields not named here): with half of them, a batch freed
    // in random order flushes and refills twice as often, and balanced ran 5 % more
    // instructions than fast on batch-rand and c-batch-rand (callgrind, 400K operations;
    // the same count with these) and took 1.32x fast's time on batch-rand (1.00x with
    // these, 11 alternated runs), for 0.3 MiB less peak RSS on larson-2t and
    // random-mixed; with 128 KiB a class for blocks over 4 KiB, mid-large (8-32 KiB) took
    // 1.17x.
    Policy {
        decommit: Some(Decommit::Lazy),
        retain_floor: 16 << 20,
        retain_ms: 1_000,
        background_return: true,
        large_cache_entries: 32,
        ..FAST
    },
    // Fast's thread caches too. With half of them (32 KiB a class, at most 256 blocks), a
    // thread that only frees overflows its bins twice as often: lean took 1.51x and
    // 1.65x fast's time on producer-consumer (two sets of 15 alternated runs at
    // 292273c; 8.5 % more instructions, callgrind, most in `free_slow`), and 0.96x with
    // these, for 0.2 MiB more peak RSS on larson-2t and the same on random-mixed, tree
    // and thread-churn (5 alternated runs). What keeps lean lean is what it gives back:
    // free slabs decommitted with `MADV_DONTNEED`, at most 250 ms of retention, the
    // background return. (Before the depot lean's bins of big blocks were smaller than
    // fast's too; docs/MEMORY.md has what that cost.)
    Policy {
        decommit: Some(Decommit::Now),
        retain_floor: 4 << 20,
        retain_ms: 250,
        background_return: true,
        // Balanced's count: lean's bound is in bytes (`retain_floor`, `retain_ms`). With
        // 16, lean took 1.19x fast's time on realloc-xthread and 1.18x on
        // c-realloc-xthread, and peaked lower than fast by 3.6 and 1.6 MiB; with 32,
        // 0.94x and 1.02x, 2.7 and 2.8 MiB lower (7 and 9 alternated runs, warmed); large,
        // c-big-buffers and c-big-zeroed the same.
        large_cache_entries: 32,
        // Lean keeps the pages a program does not touch: `c-wide-churn` 14.6 MiB at
        // fast's 19.8 (see FAST).
        wide_huge_pages_from: 32 << 20,
        ..FAST
    },
];

static PROFILE: AtomicU8 = AtomicU8::new(Profile::Fast as u8);

/// Choose the profile (best before the first allocation; threads already running keep
/// the cache capacities of the classes they used).
pub fn set_profile(p: Profile) {
    PROFILE.store(p as u8, Ordering::Relaxed);
}

pub fn profile() -> Profile {
    match PROFILE.load(Ordering::Relaxed) {
        1 => Profile::Balanced,
        2 => Profile::Lean,
        _ => Profile::Fast,
    }
}

/// The policy of the current profile: a reference, so that a caller reading one field
/// does not copy the whole policy (the large free path read it three times a block).
#[inline]
pub fn current() -> &'static Policy {
    &POLICIES[profile() as usize]
}

/// Thread cache capacity of a class with blocks of `block` bytes: the profile's bytes over
/// the block size, clamped to its bounds (32 blocks of 56 KiB at most: 1.75 MiB); but a
/// medium block (a slab or more) what fits in [`MEDIUM_BIN_BYTES`], at least one, while
/// the class is the thread's last medium miss (`thread_cache::flush_medium`).
pub fn cache_capacity(policy: &Policy, block: usize) -> u32 {
    if block >= crate::size_class::SLAB_SIZE {
        return medium_capacity(MEDIUM_BIN_BYTES, block);
    }
    ((policy.cache_bytes / block) as u32).clamp(policy.cache_min, policy.cache_max)
}

/// Capacity of a medium bin that the thread's last medium miss was not of: what fits in
/// [`MEDIUM_SIDE_BIN_BYTES`], at least one.
pub const fn medium_side_capacity(block: usize) -> u32 {
    medium_capacity(MEDIUM_SIDE_BIN_BYTES, block)
}

const fn medium_capacity(bytes: usize, block: usize) -> u32 {
    let n = (bytes / block) as u32;
    if n > 1 {
        n
    } else {
        1
    }
}

/// Bytes the bin of a medium class may hold while it is the class of the thread's last
/// medium miss (16 blocks of 64 KiB, 4 of 256 KiB, one of 1 MiB), in every profile. A
/// medium miss gives back what every medium bin holds and lowers the others to
/// [`MEDIUM_SIDE_BIN_BYTES`] (`thread_cache::flush_medium`), so a thread holds at most
/// this plus that much of each other medium class, and a program that moves on to other
/// sizes finds their slabs free.
///
/// 64 buffers of 4..64 KiB replaced at random (`c-io-buffers`): the number of live
/// 64 KiB blocks wanders by more than 4 either way, and with 256 KiB a bin, 12.3K of
/// 300K replacements carved a span and as many released one (callgrind: 44.8M
/// instructions; 35.0M with this, 1,050 carves).
pub const MEDIUM_BIN_BYTES: usize = 1 << 20;

/// Bytes the bin of a medium class keeps once another medium class missed.
///
/// 64 buffers of 4..64 KiB replaced at random (4 KiB multiples; the same with
/// `posix_memalign(4096)`, I/O buffers): with one block a medium bin, every other
/// allocation or free of a 64 KiB block carved or released a span, 1,100 instructions
/// for the pair, and hakmem took 2.36x tcmalloc's time; 1.86x with 256 KiB (a held-out C
/// program, 5 alternated runs, warmed; mimalloc 3 3.4x). A miss still carves one span
/// (`Heap::refill_medium`). `c-large` (16 blocks of 64 KiB..4 MiB) took 1.011x, 1.021x
/// and 1.023x its time in three sets of 7 alternated runs, the same peak RSS;
/// `large-written` and `c-string-builders` the same.
pub const MEDIUM_SIDE_BIN_BYTES: usize = 256 << 10;

/// The smallest capacity a class of `block` bytes shrinks to (`cache_floor`).
pub fn min_capacity(policy: &Policy, block: usize) -> u32 {
    let fits = ((policy.cache_bytes / block) as u32).max(1);
    policy
        .cache_floor
        .min(fits)
        .min(cache_capacity(policy, block))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_names() {
        for p in [Profile::Fast, Profile::Balanced, Profile::Lean] {
            assert_eq!(Profile::parse(p.name().as_bytes()), Some(p));
        }
        assert_eq!(Profile::parse(b"turbo"), None);
    }

    #[test]
    fn lean_keeps_less() {
        let f = POLICIES[0];
        let l = POLICIES[2];
        assert!(l.retain_floor < f.retain_floor && l.retain_ms < f.retain_ms);
        assert!(l.background_return && !f.background_return);
        assert!(l.decommit.is_some() && f.decommit.is_none());
    }

    #[test]
    fn wide_classes_grow_to_many_blocks_and_shrink_to_few() {
        for p in POLICIES {
            for block in [4 << 10, 16 << 10, 32 << 10] {
                assert!(cache_capacity(&p, block) >= 32, "{block}");
                let idle = min_capacity(&p, block);
                assert!(idle <= p.cache_floor && idle as usize * block <= p.cache_bytes);
            }
            assert_eq!(min_capacity(&p, 64), p.cache_floor);
            assert_eq!(min_capacity(&p, 1 << 20), 1);
        }
    }
}
