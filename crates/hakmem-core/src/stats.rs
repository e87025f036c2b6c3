//! Statistics, gathered without allocating: what the OS gave us, what is handed out.

use crate::heap::Heap;
use crate::os::COUNTERS;
use crate::sync::Ordering::Relaxed;
use crate::{large, pool};

/// A snapshot of the allocator's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Bytes handed out: small and mid blocks taken out of slabs (including blocks
    /// sitting in thread caches) plus whole large mappings in use.
    pub allocated: usize,
    /// Bytes currently mapped by hakmem (address space, not all of it resident).
    pub mapped: usize,
    /// Resident set size of the whole process, from `/proc/self/statm` (0 if unreadable).
    pub resident: usize,
    /// Empty superslabs kept for reuse, and superslabs abandoned by exited threads.
    pub cached_superslabs: usize,
    pub abandoned_superslabs: usize,
    /// Bytes of freed large mappings kept for reuse.
    pub cached_large: usize,
    pub mmap_calls: usize,
    pub munmap_calls: usize,
    pub madvise_calls: usize,
    pub madvise_failures: usize,
    pub mremap_calls: usize,
}

/// Read the counters now.
pub fn snapshot() -> Stats {
    let small = Heap::total_out_bytes().max(0) as usize;
    let (cached, abandoned) = pool::counts();
    Stats {
        allocated: small + large::LARGE_BYTES.load(Relaxed),
        mapped: COUNTERS.mapped_bytes.load(Relaxed),
        resident: crate::os::resident_bytes().unwrap_or(0),
        cached_superslabs: cached,
        abandoned_superslabs: abandoned,
        cached_large: large::cached_bytes(),
        mmap_calls: COUNTERS.mmap.load(Relaxed),
        munmap_calls: COUNTERS.munmap.load(Relaxed),
        madvise_calls: COUNTERS.madvise.load(Relaxed),
        madvise_failures: COUNTERS.madvise_failed.load(Relaxed),
        mremap_calls: COUNTERS.mremap.load(Relaxed),
    }
}

impl Stats {
    /// All OS calls counted (mmap, munmap, madvise, mremap).
    pub fn os_calls(&self) -> usize {
        self.mmap_calls + self.munmap_calls + self.madvise_calls + self.mremap_calls
    }
}
