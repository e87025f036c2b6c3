//! Which 4 MiB chunks of the address space hold a hakmem header: one bit per chunk of the
//! 47-bit user address space (4 MiB of zero-initialised static memory, of which only the
//! pages covering addresses in use become resident).
//!
//! Invariant: the bit of chunk `k` is set iff a superslab or the first chunk of a large
//! mapping starts at `k << CHUNK_SHIFT` and is mapped. Set right after mapping, cleared
//! right before unmapping. This is what lets `free` recognise a pointer hakmem never
//! handed out with one load.

use crate::sync::{AtomicU64, Ordering};

/// log2 of the chunk size; superslabs and large mappings start on chunk boundaries.
pub const CHUNK_SHIFT: usize = 22;
/// 4 MiB.
pub const CHUNK_SIZE: usize = 1 << CHUNK_SHIFT;
const ADDRESS_BITS: usize = 47;
const WORDS: usize = 1 << (ADDRESS_BITS - CHUNK_SHIFT - 6);

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
static MAP: [AtomicU64; WORDS] = [ZERO; WORDS];

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
        MAP[w].fetch_or(bit, Ordering::Release);
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
