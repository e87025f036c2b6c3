//! Statistics, gathered without allocating: what the OS gave us, what is handed out, per
//! size class where the bytes of its slabs are, and per kind of chunk which of its pages
//! are resident (the census, [`residency`]).

use crate::chunk_map::{self, CHUNK_SIZE, MAP_HEADER};
use crate::heap::{ClassCounts, Heap};
use crate::os::{self, COUNTERS, PAGE_SIZE};
use crate::size_class::{block_size, Class, NUM_CLASSES};
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
    let small: usize = usage().iter().map(|u| u.live + u.thread_caches).sum();
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

/// Where the bytes of one size class's slabs are, in bytes.
///
/// Every heap counts what it moves on its slow paths (refill, flush, remote collection,
/// carving and releasing slabs), and this adds the counts of all heaps up; at rest the
/// fields after `slabs` add up to it. While other threads run, the sums are a moment's
/// reading of counters that move. `thread_caches` counts the calling thread's cache
/// exactly and every other thread's as it was at that thread's last slow path for the
/// class (an exited thread's cache is empty); the difference shows in `live`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassUsage {
    /// The class's block size.
    pub block_size: usize,
    /// The slabs carved for the class: whole spans, whether their pages are resident or not.
    pub slabs: usize,
    /// Blocks the program holds.
    pub live: usize,
    /// Free blocks in threads' caches.
    pub thread_caches: usize,
    /// Free blocks in the depot, the batches that thread caches pass on to each other.
    pub depot: usize,
    /// Blocks freed by a thread other than their slab's owner, waiting on the slab's
    /// remote list for the owner to collect them.
    pub remote: usize,
    /// Free blocks back in their slabs, on the slabs' free lists.
    pub free_in_slabs: usize,
    /// The rest of the slabs: not carved into blocks yet, or a tail too small for a block.
    /// hakmem never wrote these bytes, so their pages are resident only if something
    /// else brought them in (a huge page, a slab used before for another class).
    pub uncarved: usize,
}

/// One class's counters summed over all heaps.
#[derive(Clone, Copy, Default)]
struct Sums {
    taken: isize,
    remote: isize,
    slabs: isize,
    carved: isize,
    cached: isize,
}

impl Sums {
    fn add(&mut self, k: &ClassCounts) {
        self.taken = self.taken.wrapping_add(k.taken.load(Relaxed));
        self.remote = self.remote.wrapping_add(k.remote.load(Relaxed));
        self.slabs = self.slabs.wrapping_add(k.slabs.load(Relaxed));
        self.carved = self.carved.wrapping_add(k.carved.load(Relaxed));
        self.cached = self.cached.wrapping_add(k.cached.load(Relaxed));
    }

    /// The states, each clamped into what the others leave (the sums of a moment's
    /// reading of moving counters need not be consistent).
    fn usage(&self, c: Class, depot: usize) -> ClassUsage {
        let at_least_0 = |v: isize| v.max(0) as usize;
        let (taken, remote) = (at_least_0(self.taken), at_least_0(self.remote));
        let (slabs, carved) = (at_least_0(self.slabs), at_least_0(self.carved));
        let thread_caches = at_least_0(self.cached).min(taken);
        // Blocks out of their slabs: handed out or cached, on remote lists, in the depot.
        let out = taken + remote + depot;
        ClassUsage {
            block_size: block_size(c),
            slabs,
            live: taken - thread_caches,
            thread_caches,
            depot,
            remote,
            free_in_slabs: carved.saturating_sub(out),
            uncarved: slabs.saturating_sub(carved.max(out)),
        }
    }
}

/// Where the bytes of each class's slabs are; index `i` is class `i` (its `block_size`
/// says which sizes it serves). Takes the heap list's lock; never allocates.
pub fn usage() -> [ClassUsage; NUM_CLASSES] {
    let mut sums = [Sums::default(); NUM_CLASSES];
    crate::thread_cache::note_cached_now();
    Heap::for_each_counts(|counts| {
        for (c, k) in counts.iter() {
            sums[c.index()].add(k);
        }
    });
    core::array::from_fn(|i| {
        let c = Class::new(i);
        sums[i].usage(c, crate::depot::bytes(c))
    })
}

/// Mapped and resident bytes of one kind of chunk ([`crate::Residency`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resident {
    /// Mappings (superslabs, blocks, pair chunks or cached extents) counted.
    pub count: usize,
    pub mapped: usize,
    pub resident: usize,
}

/// Where hakmem's resident memory is, by what its chunks hold ([`crate::residency`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Residency {
    /// Superslabs: the slabs of small and medium blocks, owned, abandoned or empty.
    pub superslabs: Resident,
    /// Mappings of large blocks, live or kept by the thread that freed them for its next
    /// request (a chunk or more each; kept blocks count as allocated too).
    pub large: Resident,
    /// Pair chunks: two blocks of 1..2 MiB to a chunk, one or both live.
    pub pairs: Resident,
    /// Freed large extents kept committed for reuse.
    pub cached_large: Resident,
}

impl Residency {
    /// Everything counted.
    pub fn total(&self) -> Resident {
        let all = [self.superslabs, self.large, self.pairs, self.cached_large];
        all.iter().fold(Resident::default(), |t, r| Resident {
            count: t.count + r.count,
            mapped: t.mapped + r.mapped,
            resident: t.resident + r.resident,
        })
    }
}

impl Resident {
    /// Count `[base, base + len)` if it is mapped now.
    fn add(&mut self, base: usize, len: usize) {
        if let Some(pages) = os::resident_pages(base, len) {
            self.count += 1;
            self.mapped += len;
            self.resident += pages * PAGE_SIZE;
        }
    }
}

/// Walk hakmem's chunks and ask the OS which of their pages are resident (`mincore`): a
/// census for finding where memory goes, not for a hot path (it reads the chunk map from
/// the lowest to the highest chunk ever mapped, and makes a few system calls per chunk).
///
/// Exact while no other thread allocates or frees. Otherwise safe but approximate: headers
/// are read through the kernel ([`os::MemoryReader`]), so a chunk unmapped meanwhile is
/// left out rather than read, and a block that moves or leaves the cache during the walk
/// may be counted at both places or at neither. Never allocates. All zero where no pipe
/// can be had (and under the model platform, which has none).
pub fn residency() -> Residency {
    let mut r = Residency::default();
    let Some(reader) = os::MemoryReader::new() else {
        return r;
    };
    // The cache first, and chunks inside a cached extent skipped below: a block handed
    // out from the cache meanwhile is counted once.
    let (cached, n) = large::cached_extents();
    let cached = &cached[..n];
    for &(base, len) in cached {
        r.cached_large.add(base, len);
    }
    chunk_map::for_each_base(|base| {
        if cached.iter().any(|&(b, len)| base >= b && base - b < len) {
            return;
        }
        let mut header = [0u8; large::HEADER_BYTES];
        // The bit again, just before the read: the word was loaded a while ago.
        if !chunk_map::contains(base) || !reader.read(base, &mut header) {
            return;
        }
        if header[0] == MAP_HEADER {
            r.superslabs.add(base, CHUNK_SIZE);
            return;
        }
        match large::census_of(base, &header) {
            Some(large::Census::Pair) => r.pairs.add(base, CHUNK_SIZE),
            Some(large::Census::Block { map_size }) => r.large.add(base, map_size),
            None => {}
        }
    });
    r
}
