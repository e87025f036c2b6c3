//! Which 4 MiB chunks of the address space hold a hakmem header: one bit per chunk of the
//! 47-bit user address space (4 MiB of zero-initialised static memory, of which only the
//! pages covering addresses in use become resident).
//!
//! Invariant: the bit of chunk `k` is set iff a superslab or the first chunk of a large
//! mapping starts at `k << CHUNK_SHIFT` and is mapped. Set right after mapping, cleared
//! right before unmapping. This is what lets `free` recognise a pointer hakmem never
//! handed out with one load.

use crate::size_class::{SLAB_SHIFT, SLAB_SIZE};
use crate::sync::{AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// log2 of the chunk size; superslabs and large mappings start on chunk boundaries.
pub const CHUNK_SHIFT: usize = 22;
/// 4 MiB.
pub const CHUNK_SIZE: usize = 1 << CHUNK_SHIFT;
/// Slabs per chunk: entries of a [`ChunkHeader`]'s class map.
pub const SLABS: usize = CHUNK_SIZE / SLAB_SIZE;

/// `class_map` value of a slab that serves no class.
pub const MAP_FREE: u8 = 0xFF;
/// `class_map` value of slab 0 of a superslab (its header).
pub const MAP_HEADER: u8 = 0xFE;
/// `class_map` value of every entry of a large mapping's header.
pub const MAP_LARGE: u8 = 0xFD;
/// `class_map` value of each slab of a medium span past its first, which holds the class
/// ([`crate::size_class::starting_slabs`]): no block starts there.
pub const MAP_TAIL: u8 = 0xFC;

/// The first bytes of every chunk whose bit is set, superslab or large mapping: the class
/// of each 64 KiB slab of the chunk, or one of the `MAP_*` markers. Readable by any thread
/// while the bit is set; an entry that is a class stays that class while any block of its
/// span is handed out.
#[repr(C)]
pub struct ChunkHeader {
    pub class_map: [AtomicU8; SLABS],
}

impl ChunkHeader {
    /// The header of the chunk that holds `addr`.
    #[inline(always)]
    pub fn of(addr: usize) -> *const ChunkHeader {
        chunk_base(addr) as *const ChunkHeader
    }

    /// The `class_map` entry for `addr`.
    #[inline(always)]
    pub fn entry(&self, addr: usize) -> u8 {
        self.class_map[(addr >> SLAB_SHIFT) & (SLABS - 1)].load(Ordering::Relaxed)
    }
}

/// The class-map entry of `addr` if its chunk is hakmem's (one bitmap load, one header
/// load); `None` for every other address. Never faults.
#[inline(always)]
pub fn entry_of(addr: usize) -> Option<u8> {
    if !contains(addr) {
        return None;
    }
    // SAFETY: the bit is set, so a header is mapped at the chunk base (the invariant above).
    Some(unsafe { (*ChunkHeader::of(addr)).entry(addr) })
}

const ADDRESS_BITS: usize = 47;
const WORDS: usize = 1 << (ADDRESS_BITS - CHUNK_SHIFT - 6);

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
static MAP: [AtomicU64; WORDS] = [ZERO; WORDS];

/// The lowest and highest words of [`MAP`] a bit was ever set in (`WORDS` and 0 before
/// any): [`for_each_base`] reads those and the words between, not the whole map.
static FIRST_WORD: AtomicUsize = AtomicUsize::new(WORDS);
static LAST_WORD: AtomicUsize = AtomicUsize::new(0);

#[inline(always)]
fn slot(addr: usize) -> Option<(usize, u64)> {
    if addr >> ADDRESS_BITS != 0 {
        return None;
    }
    let chunk = addr >> CHUNK_SHIFT;
    Some((chunk >> 6, 1u64 << (chunk & 63)))
}

/// Base of the chunk holding `addr`.
#[inline(always)]
pub fn chunk_base(addr: usize) -> usize {
    addr & !(CHUNK_SIZE - 1)
}

/// Whether the chunk holding `addr` starts with a hakmem header.
#[inline(always)]
pub fn contains(addr: usize) -> bool {
    match slot(addr) {
        Some((w, bit)) => MAP[w].load(Ordering::Acquire) & bit != 0,
        None => false,
    }
}

/// Mark the chunk at `base` (chunk aligned, below 2^47) as holding a header.
pub fn insert(base: usize) {
    if let Some((w, bit)) = slot(base) {
        // Loads first: the bounds rarely move, and a read-modify-write would take the
        // line for writing every time.
        if w < FIRST_WORD.load(Ordering::Relaxed) {
            FIRST_WORD.fetch_min(w, Ordering::Relaxed);
        }
        if w > LAST_WORD.load(Ordering::Relaxed) {
            LAST_WORD.fetch_max(w, Ordering::Relaxed);
        }
        MAP[w].fetch_or(bit, Ordering::Release);
    }
}

/// Call `f` with the base of every chunk whose bit is set now (a snapshot word by word:
/// chunks mapped or unmapped meanwhile may or may not be seen). For statistics: it reads
/// every word between the lowest and the highest chunk ever mapped.
pub fn for_each_base(mut f: impl FnMut(usize)) {
    let (first, last) = (
        FIRST_WORD.load(Ordering::Relaxed),
        LAST_WORD.load(Ordering::Relaxed),
    );
    for (w, word) in MAP.iter().enumerate().take(last + 1).skip(first) {
        let mut bits = word.load(Ordering::Acquire);
        while bits != 0 {
            let chunk = (w << 6) | bits.trailing_zeros() as usize;
            bits &= bits - 1;
            f(chunk << CHUNK_SHIFT);
        }
    }
}

/// Unmark the chunk at `base`.
pub fn remove(base: usize) {
    if let Some((w, bit)) = slot(base) {
        MAP[w].fetch_and(!bit, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_contains_remove() {
        let base = 0x1234usize << CHUNK_SHIFT;
        assert!(!contains(base + 100));
        insert(base);
        assert!(contains(base + 100));
        assert!(contains(base + CHUNK_SIZE - 1));
        assert!(!contains(base + CHUNK_SIZE));
        assert!(!contains(base - 1));
        remove(base);
        assert!(!contains(base + 100));
        assert!(!contains(usize::MAX));
    }
}
