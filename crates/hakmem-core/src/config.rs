//! The one knob: a memory [`Profile`], and the [`Policy`] each profile stands for.
//!
//! - `Fast` (default): empty superslabs kept in a bounded cache, returned lazily.
//! - `Balanced`: empty superslabs and cached large mappings decommitted with
//!   `MADV_FREE` when they become empty.
//! - `Lean`: small caches, `MADV_DONTNEED` at once, almost nothing kept.

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
    /// Empty superslabs kept mapped for reuse.
    pub superslab_cache: usize,
    /// How empty superslabs and cached large mappings give their pages back, if at all.
    pub decommit: Option<Decommit>,
    /// Per-class thread cache budget in bytes (the capacity is this over the block size,
    /// clamped to `cache_min..=cache_max` blocks).
    pub cache_bytes: usize,
    pub cache_min: u32,
    pub cache_max: u32,
    /// Large mappings kept for reuse after free: how many, and how many bytes in all.
    pub large_cache_entries: usize,
    pub large_cache_bytes: usize,
}

const POLICIES: [Policy; 3] = [
    Policy {
        superslab_cache: 8,
        decommit: None,
        cache_bytes: 64 * 1024,
        cache_min: 4,
        cache_max: 512,
        large_cache_entries: 16,
        large_cache_bytes: 64 << 20,
    },
    Policy {
        superslab_cache: 8,
        decommit: Some(Decommit::Lazy),
        cache_bytes: 32 * 1024,
        cache_min: 4,
        cache_max: 256,
        large_cache_entries: 8,
        large_cache_bytes: 32 << 20,
    },
    Policy {
        superslab_cache: 1,
        decommit: Some(Decommit::Now),
        cache_bytes: 8 * 1024,
        cache_min: 2,
        cache_max: 64,
        large_cache_entries: 0,
        large_cache_bytes: 0,
    },
];

static PROFILE: AtomicU8 = AtomicU8::new(Profile::Fast as u8);

/// Choose the profile (best before the first allocation; threads already running keep
/// their cache capacities).
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

/// The policy of the current profile.
#[inline]
pub fn current() -> Policy {
    POLICIES[profile() as usize]
}

/// Thread cache capacity of a class with blocks of `block` bytes.
pub fn cache_capacity(policy: &Policy, block: usize) -> u32 {
    ((policy.cache_bytes / block) as u32).clamp(policy.cache_min, policy.cache_max)
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
        assert!(l.superslab_cache < f.superslab_cache);
        assert!(cache_capacity(&l, 64) < cache_capacity(&f, 64));
    }
}
