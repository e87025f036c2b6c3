//! A thread's heap: the superslabs it owns and, per class, the list of its slabs that
//! have free blocks (*partial* slabs). The thread cache ([`crate::thread_cache`]) refills
//! from here and flushes back to here, in batches; this is the slow path.
//!
//! Refill order for a class: a batch from the depot (classes over 1 KiB,
//! [`crate::depot`]); the first partial slab (the blocks freed here, then those other
//! threads gave back to it, then fresh carving); then remote frees pending anywhere in
//! the heap's superslabs; then a new slab carved from an owned superslab; then a
//! superslab abandoned by an exited thread; then one from the shared pool, and before it
//! maps one, the depot's unused batches go back to their slabs, then those put since their
//! class was last taken from, the carve tried again after each
//! ([`Heap::carve_from_depot`]).
//!
//! Heaps are never unmapped: a heap whose thread exited goes back to a free list for the
//! next thread, and the list of all heaps lets statistics add up their counters and the
//! background return visit heaps whose threads went idle ([`upkeep_idle_heaps`]).

use crate::chunk_map::{MAP_FREE, SLABS};
use crate::config;
use crate::depot;
use crate::kept::{Access, Keeper, KeptLarge};
use crate::os;
use crate::pool;
use crate::remote::Block;
use crate::retain;
use crate::size_class::{block_size, is_medium, Class, PerClass, NUM_CLASSES, SLAB_SIZE};
use crate::superslab::{
    is_wide_class, span_align, Borrow, Fit, OwnerId, SlabMeta, SpanGeometry, SuperSlab,
};
use crate::sync::{AtomicIsize, AtomicPtr, Ordering, SpinGuard, SpinLock};
use core::cell::Cell;
use core::ptr::null_mut;

/// What the caller of an allocation will write of its block at once, which decides
/// whether the memory for it is worth huge pages ([`Heap::huge_pages_for`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Fill {
    /// Nothing known: a plain allocation, which a program may write only in part.
    Unknown,
    /// At least half of it: a zero-filled block, or one a resize copies at least half of
    /// its bytes into ([`Fill::of_resize`]).
    Dense,
}

impl Fill {
    /// The fill of the block of `new` bytes that a resize of a block of `old` bytes moves
    /// into: the copy writes `min(old, new)` of its bytes.
    pub fn of_resize(old: usize, new: usize) -> Fill {
        if old >= new / 2 {
            Fill::Dense
        } else {
            Fill::Unknown
        }
    }
}

/// Slabs in use from which [`Heap::advise_huge_late`] looks at a superslab: 1.5 MiB of
/// its 4, enough to carve the 1 MiB that [`crate::superslab::dense_enough`] asks for.
const LATE_ADVICE_SLABS: u32 = 24;

/// Per-thread slab management.
///
/// Invariants: only the holder of `turn` uses the `Cell` fields (but `next_free`, the heap
/// pool's, under its lock) and `kept` (as [`Keeper`] says), and the owner-only state
/// of the superslabs on `owned` (their slabs, lists and free-slab masks); a slab is on
/// `partial[c]` iff its `in_partial` flag is set, it serves class `c`, and its superslab
/// is on `owned`; every superslab on `owned` has `owner == self`.
pub struct Heap {
    /// Taken by the heap's thread on each of its slow paths ([`Heap::enter`]), and by the
    /// background return when it gives back what the heap of an idle thread holds
    /// ([`upkeep_idle_heaps`]); the thread's fast paths touch only its thread cache.
    turn: SpinLock<()>,
    /// The thread's slow paths so far (wrapping), and their count at the background
    /// return's last visit: equal at the next, the thread made no slow path in between.
    visits: Cell<u32>,
    seen_visits: Cell<u32>,
    /// Set while the background return gives back for the idle thread: a superslab left
    /// empty then goes to the pool with its pages given back too.
    idle: Cell<bool>,
    partial: PerClass<Cell<*mut SlabMeta>>,
    /// Owned superslabs, doubly linked through their `next` / `prev`, newest first.
    owned: Cell<*mut SuperSlab>,
    /// The same superslabs in order of address, doubly linked through their `lower` /
    /// `higher`: the lowest, or null when none is owned.
    owned_lowest: Cell<*mut SuperSlab>,
    owned_count: Cell<usize>,
    /// The superslab [`Heap::advise_huge_late`] looked at last (compared, never followed).
    late_probed: Cell<*mut SuperSlab>,
    /// What [`Heap::wide_blocks_dense`] found last.
    wide_sampled: Cell<Sampled>,
    /// When `maintain` last gave free slabs back ([`os::now_ms`]).
    last_decommit_ms: Cell<u64>,
    /// How many times the heap took a superslab when the pool had none to give
    /// ([`Heap::growths`]).
    mapped_fresh: Cell<u32>,
    /// Link in the pool of unused heaps.
    next_free: Cell<*mut Heap>,
    /// Link in the list of all heaps (set once).
    next_all: *mut Heap,
    /// What this heap moved, per class, for [`mod@crate::stats`].
    counts: PerClass<ClassCounts>,
    /// The large blocks the thread freed and keeps ([`Heap::kept_large`]); none while the
    /// heap has no thread.
    kept: Keeper,
}

/// What [`Heap::wide_blocks_dense`] found when it last looked at a superslab's pages, and
/// how many more times it gives that answer before it looks again; `probing`: the last
/// ask was answered "not dense" so that the superslab it took has 4 KiB pages for the next
/// look.
#[derive(Clone, Copy)]
struct Sampled {
    dense: bool,
    asks_left: u8,
    probing: bool,
}

impl Sampled {
    /// Nothing found yet: the next ask looks.
    const NONE: Sampled = Sampled {
        dense: false,
        asks_left: 0,
        probing: false,
    };

    /// Asks answered from one look: a ring of 64 buffers of 64 KiB..1 MiB, every page
    /// written (`c-buffer-ring`, 55,000 buffers with the warm-up), empties a superslab of
    /// wide blocks and carves it again over a thousand times: a look at each ask made
    /// 1,106 `mincore` calls (a superslab taken from the pool was asked for twice then),
    /// one look in 16 asks 33 (`strace -c`).
    const ASKS: u8 = 16;
}

/// What one heap moved for one class, in bytes. Only the heap's holder writes them
/// (`cached` only its thread), with a load and a store, never a locked
/// read-modify-write, so the slow path pays nothing shared; [`mod@crate::stats`] reads
/// them from any thread. A heap may give back what another took, and adopt slabs another carved, so only sums over all heaps mean
/// something: the sum of `taken` is what the program and the thread caches hold, that of
/// `remote` what waits on remote lists, that of `slabs` what the class's slabs span.
pub struct ClassCounts {
    /// Blocks taken out of slabs or the depot, minus blocks given back (to their slab, its
    /// remote list or the depot).
    pub taken: AtomicIsize,
    /// Blocks pushed on remote lists, minus blocks collected from them.
    pub remote: AtomicIsize,
    /// Slabs carved for the class, minus slabs released (whole spans).
    pub slabs: AtomicIsize,
    /// Of those slabs, the bytes carved into blocks so far ([`SlabMeta::carved_to`]).
    pub carved: AtomicIsize,
    /// Blocks in this heap's thread cache, as of the thread's last slow path for the class
    /// (set, not added).
    pub cached: AtomicIsize,
}

impl ClassCounts {
    fn new() -> Self {
        ClassCounts {
            taken: AtomicIsize::new(0),
            remote: AtomicIsize::new(0),
            slabs: AtomicIsize::new(0),
            carved: AtomicIsize::new(0),
            cached: AtomicIsize::new(0),
        }
    }
}

/// Bytes a slab of class `c` spans.
fn slab_bytes(c: Class) -> usize {
    crate::size_class::span_slabs(c) * SLAB_SIZE
}

/// What a fresh carve takes at least, in bytes (see [`Heap::carve_size`]).
const FIRST_CARVE_BYTES: usize = 4096;

/// Add `bytes` to a counter that only the calling thread writes (the heap's holder).
#[inline]
fn add(counter: &AtomicIsize, bytes: isize) {
    let v = counter.load(Ordering::Relaxed);
    counter.store(v.wrapping_add(bytes), Ordering::Relaxed);
}

// SAFETY: a heap is used by one thread at a time: its thread or the background return,
// whichever holds its `turn` (handing it to a new thread goes through the heap pool's
// lock too). Both reach it by address; without the turn, only `turn`, `next_all` (fixed
// once made), the atomic counts and, by the heap's thread, the kept blocks (as
// [`Keeper`]'s protocol lets it) are used.
unsafe impl Send for Heap {}

struct HeapPool {
    free: *mut Heap,
    all: *mut Heap,
    /// Unused tail of the last mapping heaps are carved from.
    carve: usize,
    carve_end: usize,
}

// SAFETY: heaps in the pool belong to the lock holder.
unsafe impl Send for HeapPool {}

static HEAPS: SpinLock<HeapPool> = SpinLock::new(HeapPool {
    free: null_mut(),
    all: null_mut(),
    carve: 0,
    carve_end: 0,
});

const HEAP_CHUNK: usize = 64 * 1024;

/// Owned superslabs whose remote lists a refill drains before it carves fresh blocks
/// (the latest linked, 16 MiB): the walk is paid on every carve, so it stays short for a
/// heap of any size; a thread whose blocks another frees in cycles keeps a few
/// superslabs, all within it.
const LOOK_BEFORE_CARVING: usize = 4;

impl Heap {
    /// A heap for the calling thread, from the pool or new; null if the OS refuses memory.
    pub fn acquire() -> *mut Heap {
        let mut pool = HEAPS.lock();
        if !pool.free.is_null() {
            let h = pool.free;
            // SAFETY: heaps on the free list are valid and unused.
            pool.free = unsafe { (*h).next_free.get() };
            return h;
        }
        let size = core::mem::size_of::<Heap>().next_multiple_of(64);
        if pool.carve + size > pool.carve_end {
            let p = os::map_aligned(HEAP_CHUNK, os::PAGE_SIZE);
            if p.is_null() {
                return null_mut();
            }
            pool.carve = p as usize;
            pool.carve_end = p as usize + HEAP_CHUNK;
        }
        let h = pool.carve as *mut Heap;
        pool.carve += size;
        // SAFETY: fresh, zeroed, suitably aligned memory that only we hold.
        unsafe {
            h.write(Heap {
                turn: SpinLock::new(()),
                visits: Cell::new(0),
                seen_visits: Cell::new(0),
                idle: Cell::new(false),
                partial: PerClass([const { Cell::new(null_mut()) }; NUM_CLASSES]),
                owned: Cell::new(null_mut()),
                owned_lowest: Cell::new(null_mut()),
                owned_count: Cell::new(0),
                late_probed: Cell::new(null_mut()),
                wide_sampled: Cell::new(Sampled::NONE),
                last_decommit_ms: Cell::new(0),
                mapped_fresh: Cell::new(0),
                next_free: Cell::new(null_mut()),
                next_all: pool.all,
                counts: PerClass(core::array::from_fn(|_| ClassCounts::new())),
                kept: Keeper::new(),
            });
        }
        pool.all = h;
        h
    }

    /// Take the heap for a slow path of its thread (waiting while the background return
    /// holds it); it is the caller's until the guard drops.
    pub fn enter(&self) -> SpinGuard<'_, ()> {
        let turn = self.turn.lock();
        self.visits.set(self.visits.get().wrapping_add(1));
        turn
    }

    /// The large blocks the heap's thread keeps for its next large requests, for a holder
    /// of `turn`: in the heap, not the thread cache, so that the background return's visit
    /// to an idle thread's heap can give them back ([`upkeep_idle_heaps`]).
    ///
    /// # Safety
    /// The caller is the heap's thread holding `turn` (a slow path or [`Heap::enter`]);
    /// no other reference this returned lives.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn kept_large(&self) -> &mut KeptLarge {
        // SAFETY: by the caller, as `Keeper::blocks` asks.
        unsafe { self.kept.blocks() }
    }

    /// The kept blocks and their protocol, for the heap's thread's uses without `turn`
    /// ([`Keeper::with_blocks`]).
    pub fn keeper(&self) -> &Keeper {
        &self.kept
    }

    /// Set how the heap's thread and the visits share the kept blocks ([`Access`]), by
    /// the heap's thread when [`Access::wanted`] changed since its last use of them. Under
    /// `turn`, which the visits hold while they read it.
    pub fn set_kept_access(&self, access: Access) {
        let _turn = self.turn.lock();
        // SAFETY: the heap's thread (the caller), holding `turn`.
        unsafe { self.kept.set_access(access) };
    }

    /// Call `f` with the counts of every heap there is.
    pub fn for_each_counts(mut f: impl FnMut(&PerClass<ClassCounts>)) {
        // The counts are atomics, read from any thread.
        for_each_heap(|h| f(&h.counts));
    }

    /// Note that `n` blocks of class `c` left slabs (negative: came back).
    #[inline]
    fn add_taken(&self, c: Class, n: isize) {
        add(&self.counts[c].taken, n * block_size(c) as isize);
    }

    /// Note that a slab of class `c` was carved (`n` 1) or released (-1).
    fn add_slab(&self, c: Class, n: isize) {
        add(&self.counts[c].slabs, n * slab_bytes(c) as isize);
    }

    /// Note that this heap's thread cache holds `n` blocks of class `c` now.
    #[inline]
    pub fn note_cached(&self, c: Class, n: u32) {
        let bytes = n as usize * block_size(c);
        self.counts[c]
            .cached
            .store(bytes as isize, Ordering::Relaxed);
    }

    /// Blocks of class `c`, linked and null-terminated: `(first, count)`, count 0 when
    /// memory is exhausted: up to `want` (>= 1) of a slab's blocks freed scattered, its
    /// whole free list, or up to `want` carved fresh (see [`SlabMeta::take`],
    /// [`Heap::carve_size`]) once no remote list nearby holds a block. `fill` is what the
    /// caller will write of the block it wants ([`Heap::huge_pages_for`]).
    pub fn refill(&self, c: Class, want: usize, fill: Fill) -> (*mut Block, usize) {
        if is_medium(c) {
            return self.refill_medium(c, span_align(c), fill);
        }
        if let Some(got) = self.take_from_depot(c) {
            return got;
        }
        let mut pending_tried = false;
        loop {
            let meta = self.partial[c].get();
            if !meta.is_null() {
                // Blocks other threads gave back come before fresh ones: carving touches
                // new pages while freed ones wait on remote lists, this slab's or others'.
                // SAFETY: slabs on our partial lists are ours, in our superslabs.
                let dry = unsafe { self.collect_if_dry(&*meta) };
                if dry && !pending_tried {
                    pending_tried = true;
                    if self.collect_pending(LOOK_BEFORE_CARVING) {
                        continue; // the slab may be released; the list's head may differ
                    }
                }
                // SAFETY: as above; still on the list, since no block came home.
                let m = unsafe { &*meta };
                // SAFETY: we own the slab.
                let (first, n) = unsafe { self.take_counted(c, m, self.carve_size(c, want)) };
                if n > 0 {
                    return (first, n);
                }
                self.unlink_partial(c, m);
                continue;
            }
            if self.collect_pending(usize::MAX) && !self.partial[c].get().is_null() {
                continue;
            }
            let meta = self.new_slab(c, span_align(c), fill);
            if meta.is_null() {
                return (null_mut(), 0);
            }
            // SAFETY: a slab just carved from our superslab.
            self.push_partial(c, unsafe { &*meta });
        }
    }

    /// [`Heap::refill`] of a medium class, whose spans hold one block each and so are
    /// never partial: a fresh span at a multiple of `align_slabs` slabs, carved once the
    /// blocks other threads gave back to our latest superslabs came home (freeing their
    /// spans), from our free slabs, else, once the rest of the given-back blocks came
    /// home, as [`Heap::new_slab`] finds one.
    ///
    /// `align_slabs` is the class's own ([`span_align`]: any slab) but for a request
    /// aligned to more than a slab ([`Heap::refill_aligned`]).
    fn refill_medium(&self, c: Class, align_slabs: usize, fill: Fill) -> (*mut Block, usize) {
        self.collect_pending(LOOK_BEFORE_CARVING);
        let mut meta = self.carve_owned(c, align_slabs, Borrow::Resident, fill);
        if meta.is_null() {
            self.collect_pending(usize::MAX);
            meta = self.new_slab(c, align_slabs, fill);
        }
        if meta.is_null() {
            return (null_mut(), 0);
        }
        // SAFETY: a span of ours, of class `c`, on no partial list.
        unsafe { self.take_counted(c, &*meta, 1) }
    }

    /// A fresh block of medium class `c` at a multiple of `align` bytes, a power of two
    /// over a slab and at most the block's size (1 MiB at most), for a request aligned to
    /// that: carved as [`Heap::refill`] carves one, from a span placed there. Null when
    /// memory is exhausted.
    pub fn refill_aligned(&self, c: Class, align: usize, fill: Fill) -> *mut Block {
        debug_assert!(is_medium(c) && align.is_power_of_two() && align > SLAB_SIZE);
        let (b, _) = self.refill_medium(c, align / SLAB_SIZE, fill);
        b
    }

    /// [`SlabMeta::take`] of up to `want` blocks of class `c` from `m`, counted.
    ///
    /// # Safety
    /// We own the slab `m`, of class `c`.
    unsafe fn take_counted(&self, c: Class, m: &SlabMeta, want: usize) -> (*mut Block, usize) {
        let carved = m.carved_to();
        // SAFETY: by the caller.
        let (first, n) = unsafe { m.take(want) };
        add(&self.counts[c].carved, (m.carved_to() - carved) as isize);
        self.add_taken(c, n as isize);
        (first, n)
    }

    /// How many blocks a refill that asks for `want` carves fresh when it must: no more
    /// than a sixteenth of what this heap has carved of the class so far, or
    /// [`FIRST_CARVE_BYTES`] of blocks when that is more, and at least one.
    ///
    /// A thread that churns a working set carves only when a class's live count reaches
    /// a new high, and what it carves beyond that stays in its cache and slabs, touched
    /// and of no use to any other thread. Carving what the cache asks (half its capacity:
    /// 32 blocks of 4 KiB) left every thread of `c-many-threads` (16 threads, 256 blocks
    /// of 16 B..4 KiB each) about a megabyte of such blocks: 28.1 MiB peak RSS against
    /// 21.8 this way (9 alternated runs, before the depot). A thread that allocates a
    /// batch carves again and again, so what it carves grows geometrically to what the
    /// cache asks; the steps cost a few more refills (callgrind, `bench-hakmem batch-fwd
    /// 300000`: 44.02M instructions against 43.28M, `live-growth 200000` 36.49M against
    /// 36.09M). A flat 4 KiB cost batch-fwd 1.2x its time (5 interleaved runs).
    fn carve_size(&self, c: Class, want: usize) -> usize {
        let carved = self.counts[c].carved.load(Ordering::Relaxed).max(0) as usize;
        let size = block_size(c);
        want.min((carved / 16).max(FIRST_CARVE_BYTES) / size).max(1)
    }

    /// A batch of class `c` from the depot, now this heap's to hand out, if it holds one.
    fn take_from_depot(&self, c: Class) -> Option<(*mut Block, usize)> {
        if !depot::served(c) {
            return None;
        }
        let b = depot::take(c)?;
        self.add_taken(c, b.len as isize);
        Some((b.first, b.len as usize))
    }

    /// [`Heap::flush`], but to the depot when it takes the blocks as one batch (classes it
    /// serves): the blocks are cut off the chain, not walked back to their slabs.
    ///
    /// # Safety
    /// As for [`Heap::flush`].
    pub unsafe fn give_back(&self, c: Class, first: *mut Block, n: usize) -> *mut Block {
        if depot::served(c) && n > 0 {
            let mut last = first;
            for _ in 1..n {
                // SAFETY: the chain has at least `n` blocks.
                last = unsafe { (*last).next };
            }
            // SAFETY: `last` is the chain's `n`-th block.
            let rest = unsafe { (*last).next };
            // SAFETY: as above; the first `n` blocks become a chain of their own.
            unsafe { (*last).next = null_mut() };
            let batch = depot::Batch {
                first,
                len: n as u32,
            };
            // SAFETY: a chain of `n` free blocks of class `c`, which the caller gives up.
            if unsafe { depot::put(c, batch) } {
                self.add_taken(c, -(n as isize));
                // The depot gives it back if every thread goes idle (`upkeep_idle_heaps`).
                retain::want();
                return rest;
            }
            // SAFETY: as above; the chain is whole again.
            unsafe { (*last).next = rest };
        }
        // SAFETY: by the caller.
        unsafe { self.flush(c, first, n) }
    }

    /// Give back `blocks`, of class `c`, to their spans' bitmaps one by one: what a
    /// thread's stash gathered of a batch freed in scattered order
    /// ([`crate::thread_cache`]), where [`Heap::flush`] would find no two neighbours to
    /// give back together. Their addresses come from an array, not from links in the
    /// blocks, so no block is read.
    ///
    /// # Safety
    /// `blocks` are handed-out blocks of class `c` in superslabs this heap owns, which the
    /// caller gives up (one that appears twice, a double free, is reported when its bit
    /// is found set); the caller holds the heap.
    pub unsafe fn give_back_scattered(&self, c: Class, blocks: &[*mut Block]) {
        let g = SpanGeometry::of(c);
        for &p in blocks {
            // SAFETY: a handed-out block lies in a live superslab, ours by the caller.
            let ss = unsafe { &*SuperSlab::of(p as usize) };
            // SAFETY: we own the slab, and the block is handed out.
            let meta = unsafe { ss.put_lone(&g, p) };
            // Most blocks land in a slab that has blocks out and is on its partial list
            // already: two tests, no call.
            if meta.used() == 0 || !meta.in_partial() {
                // A superslab given back here holds none of the other blocks.
                let _ = self.after_return(ss, meta);
            }
        }
        self.add_taken(c, -(blocks.len() as isize));
    }

    /// Give the depot's blocks back to their slabs (ours to our free lists, others' to
    /// their remote lists): as many batches a class as it holds at most, so that threads
    /// putting batches meanwhile do not keep this one here.
    pub fn empty_depot(&self) {
        self.flush_from_depot(depot::take, depot::DEPTH);
    }

    /// Give back to their slabs the batches `next` takes out of the depot, at most `most`
    /// a class; whether any went back.
    fn flush_from_depot(&self, next: fn(Class) -> Option<depot::Batch>, most: usize) -> bool {
        let mut flushed = false;
        for c in Class::all().filter(|&c| depot::served(c)) {
            for _ in 0..most {
                let Some(b) = next(c) else {
                    break;
                };
                self.add_taken(c, b.len as isize);
                // SAFETY: the batch is ours: a chain of `b.len` free blocks of class `c`.
                unsafe { self.flush(c, b.first, b.len as usize) };
                flushed = true;
            }
        }
        flushed
    }

    /// A span of class `c` carved from what the depot gives back, or null: first its
    /// batches that no thread took since the previous round ([`depot::unused`]), then
    /// those put since their class was last taken from ([`depot::untaken`]), the carve
    /// tried after each. Called when the heap finds no room for a new slab in its
    /// superslabs and the pool has none to give, before the process maps more: the memory
    /// a class gave up and stopped taking back serves the classes that need more, instead
    /// of new superslabs. A program that frees a batch and allocates the next one later,
    /// without needing more memory meanwhile, finds it in the depot still.
    ///
    /// A thousand strings grown at once by appends (`c-string-builders`) pass through
    /// every class from 1 KiB to 64 KiB in step, and each class's 2 MiB stayed in the depot
    /// when the strings moved on, with the slabs its blocks kept from emptying. Released
    /// at every upkeep of a thread cache instead, whether the heap needed memory or not,
    /// the depot cost `batch-rev` (200K objects freed together, then allocated again)
    /// 1.07x its time (11 alternated runs); at every superslab taken from the pool,
    /// `large` (medium blocks cycled through one cached superslab) 1.05x (9 runs).
    fn carve_from_depot(&self, c: Class, align_slabs: usize, fill: Fill) -> *mut SlabMeta {
        // `unused` says none once the round is over, which starts the next one.
        let releases: [fn(Class) -> Option<depot::Batch>; 2] = [depot::unused, depot::untaken];
        for next in releases {
            if self.flush_from_depot(next, usize::MAX) {
                let meta = self.carve_owned(c, align_slabs, Borrow::Resident, fill);
                if !meta.is_null() {
                    return meta;
                }
            }
        }
        null_mut()
    }

    /// Give back the first `n` blocks of the chain of class `c` starting at `first`:
    /// blocks of our own slabs to their slabs ([`SlabMeta::put_stretch`]), others on their
    /// slab's remote list (one push per run of blocks of the same slab). Returns the rest
    /// of the chain (the block after the `n`-th), which stays the caller's.
    ///
    /// # Safety
    /// The chain has at least `n` blocks, each a handed-out block of class `c`; the caller
    /// gives up the first `n`.
    pub unsafe fn flush(&self, c: Class, first: *mut Block, n: usize) -> *mut Block {
        let me = self.id();
        let mut run = RemoteRun::EMPTY;
        let g = SpanGeometry::of(c);
        let mut p = first;
        let mut left = n;
        // `left` counts the blocks from `p` on that are among the first `n`. The last one,
        // which has no next among them to compare with, is given back after the loop, so
        // the loop's own test (`left > 1`) also says that `p`'s next is among them.
        while left > 1 {
            // A stretch: the blocks from `p` on that lie in its span ([`Stretch`]).
            let head = p;
            // SAFETY: `p` is one of the first `n` blocks, ours until given away.
            p = unsafe { (*head).next };
            left -= 1;
            if !g.same_span(p as usize, head as usize) {
                // A lone block, what a batch freed in random order gives back, takes a
                // path of its own, where the stretch's length is known to be one:
                // `c-list-rebuild` took 59.4M instructions against 65.4M through the
                // loop below (callgrind, 300K operations).
                // SAFETY: the block is ours to give back.
                unsafe { self.give_lone(&g, head, me, &mut run) };
                continue;
            }
            let before = left + 1;
            // SAFETY: `p` is one of the first `n`, `left` of them from it on.
            let (last, after) = unsafe { stretch_end(&g, head, p, left) };
            // SAFETY: `last` is one of the first `n`, so linked to the rest of the chain.
            p = unsafe { (*last).next };
            left = after - 1;
            // Its length is counted from `left` afterwards, one instruction less a block.
            let stretch = Stretch {
                first: head,
                last,
                len: (before - left) as u32,
            };
            // SAFETY: the stretch's blocks are ours to give back.
            unsafe { self.give_stretch(&g, &stretch, me, &mut run) };
        }
        if left == 1 {
            let last = p;
            // SAFETY: as above.
            p = unsafe { (*last).next };
            // SAFETY: as above.
            unsafe { self.give_lone(&g, last, me, &mut run) };
        }
        // SAFETY: the run's blocks are ours to give away.
        unsafe { run.push() };
        self.add_taken(c, -(n as isize));
        add(
            &self.counts[c].remote,
            (run.pushed * block_size(c)) as isize,
        );
        p
    }

    /// Give back a stretch of a flushed chain of class `g`'s ([`Stretch`]): to its slab when
    /// the slab is ours ([`SlabMeta::put_stretch`]; then release the slab if that emptied
    /// it), else into `run`, for the slab's remote list.
    ///
    /// # Safety
    /// The stretch is a chain of blocks of one slab, handed out, that the caller gives up.
    #[inline(always)]
    unsafe fn give_stretch(&self, g: &SpanGeometry, s: &Stretch, me: OwnerId, run: &mut RemoteRun) {
        // SAFETY: a handed-out block lies in a live superslab.
        let ss = unsafe { &*SuperSlab::of(s.first as usize) };
        let meta = ss.meta_of(s.first as usize, g);
        if ss.owner() == me {
            // SAFETY: we own the slab, and the chain's blocks are handed out.
            unsafe { meta.put_stretch(g, s.first, s.last, s.len) };
            // A superslab given back here has no block left in the chain.
            let _ = self.after_return(ss, meta);
        } else {
            // SAFETY: the chain is ours to give away, and of `meta`'s slab.
            unsafe { run.add(meta, s.first, s.last, s.len) };
        }
    }

    /// [`Heap::give_stretch`] for a stretch of one block, `p`, whose span's slab index
    /// [`SuperSlab::put_lone`] finds once for its metadata and its bitmap. A function of
    /// its own: a `give_stretch` that called `put_lone` when the length was one took
    /// 57.86M instructions for `c-list-rebuild`, against 57.50M with this (callgrind, 300K
    /// operations), the compiler keeping the class's reciprocal on the stack there.
    ///
    /// # Safety
    /// `p` is a handed-out block of `g`'s class that the caller gives up.
    #[inline(always)]
    unsafe fn give_lone(&self, g: &SpanGeometry, p: *mut Block, me: OwnerId, run: &mut RemoteRun) {
        // SAFETY: a handed-out block lies in a live superslab.
        let ss = unsafe { &*SuperSlab::of(p as usize) };
        if ss.owner() != me {
            // SAFETY: the block is ours to give away, and of its slab.
            return unsafe { run.add(ss.meta_of(p as usize, g), p, p, 1) };
        }
        // SAFETY: we own the slab, and the block is handed out.
        let meta = unsafe { ss.put_lone(g, p) };
        // A superslab given back here has no block left in the chain.
        let _ = self.after_return(ss, meta);
    }

    /// After blocks came back to `meta`: release it when empty, else make it findable.
    /// True when that gave the whole superslab back to the pool.
    ///
    /// Raw pointers, not references: releasing the slab may give the superslab to the
    /// pool, which may unmap it before this returns, and a reference argument would be
    /// asserted live for the whole call.
    fn after_return(&self, ss: *const SuperSlab, meta: *const SlabMeta) -> bool {
        // SAFETY: our live slab; the reference ends before the slab can be released.
        let m = unsafe { &*meta };
        if m.used() == 0 {
            return self.release_slab(ss, meta);
        }
        let meta = m;
        if !meta.in_partial() {
            self.push_partial(meta.class(), meta);
        }
        false
    }

    /// When `meta` has no freed block, join its remote list to its free list; whether it
    /// still has none (the slab can only carve).
    ///
    /// # Safety
    /// We own the slab.
    unsafe fn collect_if_dry(&self, meta: &SlabMeta) -> bool {
        if meta.has_freed() {
            return false;
        }
        // SAFETY: by the caller.
        unsafe { self.collect(meta) };
        !meta.has_freed()
    }

    /// Drain the remote lists flagged in our superslabs, the first `most` of them (the
    /// latest linked); true if any block came home. None is flagged until a thread first
    /// gives a block back to a slab it does not own ([`SuperSlab::any_pending`]).
    fn collect_pending(&self, most: usize) -> bool {
        if !SuperSlab::any_pending() {
            return false;
        }
        let mut found = false;
        let mut ss = self.owned.get();
        for _ in 0..most {
            if ss.is_null() {
                break;
            }
            // SAFETY: owned superslabs are live; we own them.
            let s = unsafe { &*ss };
            let next = s.next.get();
            // SAFETY: an owned superslab.
            let mut bits = unsafe { s.take_pending() };
            let mut empty = 0u64;
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if s.header.class_map[i].load(Ordering::Relaxed) == MAP_FREE {
                    continue; // stale bit of a slab released since
                }
                let meta = s.meta(i);
                // SAFETY: we own the slab.
                if unsafe { self.collect(meta) } {
                    found = true;
                    if self.after_return(s, meta) {
                        break; // the superslab went back to the pool: it is not ours now
                    }
                } else {
                    empty |= 1 << i; // a pusher may be between its flag and its push
                }
            }
            if bits == 0 {
                // SAFETY: as above.
                unsafe { s.restore_pending(empty) };
            }
            ss = next;
        }
        found
    }

    /// A new slab of class `c`, at a multiple of `align_slabs` slabs: carved from an owned
    /// superslab, else from an adopted or pooled one. Null when the OS refuses memory.
    fn new_slab(&self, c: Class, align_slabs: usize, fill: Fill) -> *mut SlabMeta {
        let meta = self.carve_owned(c, align_slabs, Borrow::Resident, fill);
        if !meta.is_null() {
            return meta;
        }
        loop {
            let adopted = pool::adopt(is_wide_class(c));
            if adopted.is_null() {
                break;
            }
            self.take_over(adopted);
            // SAFETY: we own it now.
            let meta = unsafe { self.carve(&*adopted, c, align_slabs, Borrow::Resident, fill) };
            if !meta.is_null() {
                return meta;
            }
            if !self.partial[c].get().is_null() {
                // The adopted superslab had partial slabs of our class: use one (never a
                // medium span, which holds one block, so never one to place).
                debug_assert!(!is_medium(c));
                let m = self.partial[c].get();
                // SAFETY: on our partial list.
                self.unlink_partial(c, unsafe { &*m });
                return m;
            }
        }
        let grows = pool::would_map();
        if grows {
            let meta = self.carve_from_depot(c, align_slabs, fill);
            if !meta.is_null() {
                return meta;
            }
        }
        // Decided before the header's first write, counting the superslab taken (as `carve`
        // will, once it is owned): advised after, its first 2 MiB could not be a huge page.
        let huge = self.huge_pages_for(c, fill, self.owned_count.get() + 1);
        let fresh = pool::acquire(is_wide_class(c), huge);
        if fresh.is_null() {
            // The OS refuses memory: whatever free slabs we have.
            return self.carve_owned(c, align_slabs, Borrow::Any, fill);
        }
        if grows {
            self.mapped_fresh
                .set(self.mapped_fresh.get().wrapping_add(1));
        }
        self.link_owned(fresh);
        // SAFETY: an empty superslab we own.
        unsafe { self.carve_advised(&*fresh, c, align_slabs, Borrow::Resident, huge) }
    }

    /// A span for class `c` carved from the free slabs of the first of our superslabs
    /// that has room, or, for a medium class, of the one at the lowest address that has;
    /// null if none has. A superslab of the class's kind comes first; failing one, one of
    /// the other kind, what `borrow` allows of it ([`SuperSlab::fit`]).
    ///
    /// A medium block is a span of its own and is freed back to the free slabs, so where
    /// the next one goes decides which pages a program that cycles them keeps touching:
    /// always the lowest superslab with room (with the pool's lowest, [`pool::acquire`])
    /// keeps them in as few superslabs as the live ones need, where the newest first let
    /// them wander over every superslab the heap ever took. 16 slots of 64 KiB..4 MiB
    /// touched at their ends (a replica of `large`, 300K replacements, resident pages from
    /// `/proc/self/pagemap` per chunk at the end, one run each): the superslabs of the
    /// medium blocks 12.8 -> 9.6 MiB with the pool's lowest, 7.5 with both. The walk
    /// goes up in order of address and stops at the first that fits
    /// ([`Heap::lowest_fitting`]).
    fn carve_owned(
        &self,
        c: Class,
        align_slabs: usize,
        borrow: Borrow,
        fill: Fill,
    ) -> *mut SlabMeta {
        let fits = move |ss: *mut SuperSlab, want: Fit| {
            // SAFETY: we own every superslab on the list.
            unsafe { &*ss }.fit(c, align_slabs, borrow) == Some(want)
        };
        let fitting = |want: Fit| self.owned_superslabs().filter(move |&ss| fits(ss, want));
        let ss = if is_medium(c) {
            self.lowest_fitting(|ss| fits(ss, Fit::Kind))
        } else {
            fitting(Fit::Kind).next()
        }
        .or_else(|| fitting(Fit::OtherKind).next());
        let Some(ss) = ss else {
            return null_mut();
        };
        // SAFETY: we own it, and it has room for `c`.
        unsafe { self.carve(&*ss, c, align_slabs, borrow, fill) }
    }

    /// The owned superslab at the lowest address for which `fits` holds: the first, in
    /// order of address ([`Heap::owned_lowest`]). Taking the least of all that fit asked
    /// each one, a search of its free slabs; and the walk reads each header, 4 MiB apart,
    /// so in one set of the CPU's caches. Over the 15 superslabs of `c-buffer-ring`,
    /// where most allocations carve, that walk took 12.4 % of the run's samples (`perf
    /// record`, 200K operations), 9.7 % from the oldest asking only those below the
    /// lowest found, and 4.1 % this way (callgrind, 20K operations: 45.9M instructions
    /// against 42.8M), the row at the same peak.
    fn lowest_fitting(&self, fits: impl Fn(*mut SuperSlab) -> bool) -> Option<*mut SuperSlab> {
        let lowest = self.owned_lowest.get();
        core::iter::successors((!lowest.is_null()).then_some(lowest), |&ss| {
            // SAFETY: owned superslabs are live.
            let higher = unsafe { &*ss }.higher.get();
            (!higher.is_null()).then_some(higher)
        })
        .find(|&ss| fits(ss))
    }

    /// A count that moves when the heap takes a superslab while the pool has none to
    /// give, so that the process maps memory: the thread cache compares it across a
    /// refill, and gives back what its bins keep of classes it stopped using when it
    /// moved.
    pub fn growths(&self) -> u32 {
        self.mapped_fresh.get()
    }

    /// Our superslabs, newest first (the list must not change while this is walked).
    fn owned_superslabs(&self) -> impl Iterator<Item = *mut SuperSlab> + '_ {
        let head = self.owned.get();
        core::iter::successors((!head.is_null()).then_some(head), |&ss| {
            // SAFETY: owned superslabs are live.
            let next = unsafe { &*ss }.next.get();
            (!next.is_null()).then_some(next)
        })
    }

    /// Whether the superslab this heap takes for a block of class `c` that the caller
    /// will write as `fill` says asks for huge pages: one of small blocks once the heap
    /// owns enough superslabs, `owned` with that one ([`crate::superslab::huge_pages_pay`]),
    /// one of wide blocks once the heap has carved enough spans of wide blocks
    /// ([`crate::superslab::wide_huge_pages_pay`]) when the block is known to be written
    /// densely ([`Fill::Dense`]) or the heap's wide blocks show that they are
    /// ([`Heap::wide_blocks_dense`]).
    ///
    /// A huge page is resident whole from its first write. Small blocks fill their slabs
    /// densely, wide ones only as the program writes them: a server's receive buffers of
    /// 16..64 KiB, each holding a message of 200..4000 B (`c-conn-buffers`), peaked at
    /// 180.6 MiB with huge pages for every wide superslab past the heap's first 16 MiB of
    /// spans, 29.6 with them for dense blocks only (tcmalloc 38.2, mimalloc 2.0.9 29.1;
    /// 7 alternated runs under `LD_PRELOAD`), in 1.15x the time (46.2 ms against 40.0,
    /// the 4 KiB pages' faults; tcmalloc 47.2). A block that a `realloc` copied half of
    /// its bytes into, or a zero-filled one, is written densely: a thousand strings grown
    /// by appends (`c-string-builders`), whose wide blocks all come from `realloc`, took
    /// 1.25x their time with no huge pages for wide blocks at all (7 runs), 1.00x this way.
    fn huge_pages_for(&self, c: Class, fill: Fill, owned: usize) -> bool {
        if !is_wide_class(c) {
            return crate::superslab::huge_pages_pay(owned) && self.small_blocks_dense();
        }
        let wide = Class::all()
            .filter(|&k| is_wide_class(k))
            .map(|k| self.counts[k].slabs.load(Ordering::Relaxed).max(0) as usize)
            .sum();
        if !crate::superslab::wide_huge_pages_pay(wide) {
            // Back under the threshold (or not past it yet), the heap's wide blocks may be
            // written another way past it: look again there.
            self.wide_sampled.set(Sampled::NONE);
            return false;
        }
        fill == Fill::Dense || self.wide_blocks_dense()
    }

    /// Whether the program writes the pages of the heap's wide blocks densely enough for
    /// huge pages to cost little memory, as the newest of its superslabs of wide blocks
    /// whose carved pages show what the program wrote says
    /// ([`crate::superslab::dense_enough`]); not dense while it has none in use, or where
    /// the OS cannot say. One look answers [`Sampled::ASKS`] asks. A heap that takes only
    /// superslabs with huge pages would go on finding the superslab it sampled, whose
    /// blocks may be older than the program's habits: when a "dense" expires, the next
    /// superslab takes 4 KiB pages, and the ask after it looks at that one (where it is
    /// fresh: one that had huge pages shows none of this, [`SuperSlab::never_huge`]). A
    /// heap whose spans of wide blocks fall under the threshold looks again past it.
    ///
    /// A program that writes every page of its plain `malloc` buffers shows it: a ring of
    /// 250 buffers of 64 KiB..1 MiB (`c-buffer-ring 250`) faulted them in a 4 KiB page at
    /// a time, 8,123 faults and 2.3x mimalloc 3's time (14.2 ms against 6.2; it maps huge
    /// pages for everything, at 1.75x the peak), and 1,384 faults and 0.92x its time this
    /// way, at 1.04x the peak (7 alternated runs under `LD_PRELOAD`). Buffers of 16..64 KiB
    /// each holding a message of 200..4000 B (`c-conn-buffers`) do not, and keep their
    /// 4 KiB pages.
    fn wide_blocks_dense(&self) -> bool {
        let last = self.wide_sampled.get();
        let next = if last.asks_left > 0 {
            Sampled {
                asks_left: last.asks_left - 1,
                ..last
            }
        } else if last.dense && !last.probing {
            Sampled {
                dense: false,
                asks_left: 0,
                probing: true,
            }
        } else {
            Sampled {
                dense: self.sample_wide_blocks(),
                asks_left: Sampled::ASKS - 1,
                probing: false,
            }
        };
        self.wide_sampled.set(next);
        next.dense
    }

    /// [`Heap::wide_blocks_dense`]'s look at the pages of the newest superslab of wide
    /// blocks that never had huge pages: one `mincore`.
    fn sample_wide_blocks(&self) -> bool {
        let sample = self.owned_superslabs().find(|&ss| {
            // SAFETY: we own it.
            let s = unsafe { &*ss };
            s.holds_wide() && s.never_huge() && !s.is_empty()
        });
        let Some(ss) = sample else {
            return false;
        };
        // SAFETY: we own it.
        match unsafe { &*ss }.carved_residency() {
            Some((resident, carved)) => crate::superslab::dense_enough(resident, carved),
            None => false,
        }
    }

    /// Whether the program writes the pages of the heap's small blocks densely enough for
    /// huge pages to cost little memory (at most 1/16 of their pages untouched). A carve
    /// writes each block's link at its start, so only blocks that may leave pages with no
    /// block's start hold untouched pages ([`crate::superslab::may_be_sparse`]): dense
    /// while they hold under 1/16 of the bytes carved for small blocks (and for a heap
    /// that carved none yet). Otherwise as the newest of its superslabs of small blocks
    /// whose carved pages show what the program wrote says
    /// ([`crate::superslab::dense_enough`]), and not dense while it has none in use, so
    /// that the next one has 4 KiB pages and can say ([`Heap::advise_huge_late`]); dense
    /// where the OS cannot say. The answer stays that of the superslab sampled while the
    /// heap takes only superslabs with huge pages.
    ///
    /// Buffers of 2, 4 and 8 KiB each holding a message of 100..600 B
    /// (`c-conn-buffers-small`) peaked at 97.8 MiB with huge pages for every superslab of
    /// small blocks past the heap's first 8 MiB of superslabs, and 78.2 with them for
    /// dense ones only (jemalloc 78.7), in 1.32x the time (26.3 ms against 19.9,
    /// tcmalloc 27.8; the 4 KiB pages' faults, 19.4K against 0.6K; 7 alternated runs
    /// under `LD_PRELOAD`). Every other workload of ours shows at least 0.99 of its
    /// carved pages resident where it is sampled; `c-pages`, whose blocks of a page and a
    /// header are over a page by at most 64 B, is never sampled (1,318 page faults
    /// against 1,320).
    fn small_blocks_dense(&self) -> bool {
        let (mut carved, mut sparse) = (0, 0);
        for k in Class::all().filter(|&k| !is_wide_class(k)) {
            let bytes = self.counts[k].carved.load(Ordering::Relaxed).max(0) as usize;
            carved += bytes;
            if crate::superslab::may_be_sparse(k) {
                sparse += bytes;
            }
        }
        if sparse * 16 < carved.max(1) {
            return true;
        }
        let sample = self.owned_superslabs().find(|&ss| {
            // SAFETY: we own it.
            let s = unsafe { &*ss };
            !s.holds_wide() && s.shows_writes() && !s.is_empty()
        });
        let Some(ss) = sample else {
            return false;
        };
        // SAFETY: we own it.
        match unsafe { &*ss }.carved_residency() {
            Some((resident, carved)) => crate::superslab::dense_enough(resident, carved),
            None => true,
        }
    }

    /// [`SuperSlab::carve_slab`], counted.
    ///
    /// # Safety
    /// We own `s`.
    unsafe fn carve(
        &self,
        s: &SuperSlab,
        c: Class,
        align_slabs: usize,
        borrow: Borrow,
        fill: Fill,
    ) -> *mut SlabMeta {
        let huge = s.is_empty() && self.huge_pages_for(c, fill, self.owned_count.get());
        // SAFETY: by the caller.
        unsafe { self.carve_advised(s, c, align_slabs, borrow, huge) }
    }

    /// [`Heap::carve`] with the huge-page advice for an empty `s` decided by the caller:
    /// [`Heap::new_slab`] decides it before it takes the superslab, and asking
    /// [`Heap::huge_pages_for`] again would count a second ask of
    /// [`Heap::wide_blocks_dense`] for it.
    ///
    /// # Safety
    /// We own `s`.
    unsafe fn carve_advised(
        &self,
        s: &SuperSlab,
        c: Class,
        align_slabs: usize,
        borrow: Borrow,
        huge: bool,
    ) -> *mut SlabMeta {
        let empty = s.is_empty();
        // SAFETY: by the caller.
        let meta = unsafe { s.carve_slab(c, align_slabs, huge, borrow) };
        if !meta.is_null() {
            self.add_slab(c, 1);
            if !empty {
                self.advise_huge_late(s);
            }
        }
        meta
    }

    /// Ask for huge pages for `s`, a superslab of small blocks this heap took with 4 KiB
    /// pages, once [`LATE_ADVICE_SLABS`] of its slabs serve blocks and what it carved for
    /// them is written densely ([`crate::superslab::dense_enough`]); looked at once per
    /// superslab ([`SuperSlab::advise_huge_late`] makes the 4 KiB pages it has huge ones
    /// too).
    ///
    /// A heap that takes a superslab to see how its small blocks are written
    /// ([`Heap::small_blocks_dense`]) would otherwise keep it on 4 KiB pages:
    /// `c-usable-growth`, vectors grown by doubling up to 10 KiB, took 1,641 page faults
    /// against 618 with huge pages for every superslab past 8 MiB; 1,132 advised late
    /// without collapsing its 4 KiB pages, in 1.04x the time (15 alternated runs under
    /// `LD_PRELOAD`); 961 this way, in 0.99x. A heap's first superslabs, taken before it
    /// owned 8 MiB, get huge pages this way too: `pages` 1,093 faults against 1,784,
    /// `list-rebuild` 603 against 1,106 (`perf stat -e page-faults`), at 7.2 MiB peak
    /// against 6.4 (the full run in docs/BENCHMARKS.md).
    fn advise_huge_late(&self, s: &SuperSlab) {
        let at = s as *const SuperSlab as *mut SuperSlab;
        if s.holds_wide()
            || !s.may_advise_huge_late()
            || s.slabs_in_use() < LATE_ADVICE_SLABS
            || self.late_probed.get() == at
        {
            return;
        }
        self.late_probed.set(at);
        if crate::superslab::huge_pages_pay(self.owned_count.get())
            && s.carved_residency()
                .is_some_and(|(resident, carved)| crate::superslab::dense_enough(resident, carved))
        {
            s.advise_huge_late();
        }
    }

    /// [`SuperSlab::release_slab`], counted.
    ///
    /// # Safety
    /// We own `s`, and `meta` is one of its spans, empty.
    unsafe fn release(&self, s: &SuperSlab, meta: &SlabMeta) {
        let (c, carved_to) = (meta.class(), meta.carved_to());
        // SAFETY: by the caller.
        let (start, _) = unsafe { s.release_slab(meta) };
        self.add_slab(c, -1);
        add(&self.counts[c].carved, -((carved_to - start) as isize));
        // Its pages may be given back if the thread goes idle (`upkeep_idle_heaps`).
        retain::want();
    }

    /// [`SlabMeta::collect_remote`], counted; whether any block came home.
    ///
    /// # Safety
    /// We own the slab.
    unsafe fn collect(&self, meta: &SlabMeta) -> bool {
        // SAFETY: by the caller.
        let got = unsafe { meta.collect_remote() };
        let bytes = got as usize * block_size(meta.class());
        add(&self.counts[meta.class()].remote, -(bytes as isize));
        got > 0
    }

    /// Adopt every abandoned superslab: blocks other threads gave back come home, and the
    /// superslabs left empty go to the pool (for `trim`, which then unmaps them).
    pub fn adopt_all(&self) {
        loop {
            let ss = pool::adopt_any();
            if ss.is_null() {
                return;
            }
            self.take_over(ss);
            // SAFETY: we own it now.
            let s = unsafe { &*ss };
            if s.is_empty() && self.owned_count.get() > 1 {
                self.unlink_owned(s);
                // SAFETY: empty, and every remote list was drained by `take_over`.
                unsafe { pool::release_empty(ss) };
            }
        }
    }

    /// Whether the block `b` lies in one of our superslabs.
    ///
    /// # Safety
    /// `b` is a block of a live slab (handed out, or in the caller's cache).
    pub unsafe fn owns(&self, b: *const Block) -> bool {
        // SAFETY: by the caller, the block's superslab is live; of it only the atomic
        // owner is read (its other fields another thread may write are cells).
        unsafe { (*SuperSlab::of(b as usize)).owner() == self.id() }
    }

    /// This heap's id as the owner of its superslabs.
    #[inline(always)]
    fn id(&self) -> OwnerId {
        OwnerId::of_addr(self as *const Heap as usize)
    }

    /// Become the owner of an abandoned superslab and sort its slabs into our lists.
    fn take_over(&self, ss: *mut SuperSlab) {
        self.link_owned(ss);
        // SAFETY: adopted, so ours alone.
        let s = unsafe { &*ss };
        // SAFETY: adopted, so ours.
        for (c, meta) in unsafe { self.collect_all_remote(s) } {
            if meta.has_free() {
                self.push_partial(c, meta);
            }
        }
    }

    fn link_owned(&self, ss: *mut SuperSlab) {
        // SAFETY: `ss` is ours alone.
        let s = unsafe { &*ss };
        s.set_owner(self.id());
        let head = self.owned.get();
        s.prev.set(null_mut());
        s.next.set(head);
        if !head.is_null() {
            // SAFETY: owned superslabs are live.
            unsafe { (*head).prev.set(ss) };
        }
        self.owned.set(ss);
        self.owned_count.set(self.owned_count.get() + 1);
        self.link_by_address(s);
    }

    fn unlink_owned(&self, s: &SuperSlab) {
        unlink(&self.owned, s, |s| (&s.prev, &s.next));
        unlink(&self.owned_lowest, s, |s| (&s.lower, &s.higher));
        self.owned_count.set(self.owned_count.get() - 1);
    }

    /// Link `s`, just owned, into the list in order of address: a walk from the lowest,
    /// once for each superslab the heap takes.
    fn link_by_address(&self, s: &SuperSlab) {
        let ss = s as *const SuperSlab as *mut SuperSlab;
        let (mut lower, mut higher) = (null_mut::<SuperSlab>(), self.owned_lowest.get());
        while !higher.is_null() && higher < ss {
            lower = higher;
            // SAFETY: owned superslabs are live.
            higher = unsafe { &*higher }.higher.get();
        }
        debug_assert!(higher.is_null() || higher > ss, "a superslab owned twice");
        s.lower.set(lower);
        s.higher.set(higher);
        if lower.is_null() {
            self.owned_lowest.set(ss);
        } else {
            // SAFETY: as above.
            unsafe { (*lower).higher.set(ss) };
        }
        if !higher.is_null() {
            // SAFETY: as above.
            unsafe { (*higher).lower.set(ss) };
        }
        #[cfg(debug_assertions)]
        self.check_by_address();
    }

    /// Both lists hold the same superslabs, the second in ascending order (debug builds).
    #[cfg(debug_assertions)]
    fn check_by_address(&self) {
        let mut n = 0;
        let (mut lower, mut ss) = (null_mut::<SuperSlab>(), self.owned_lowest.get());
        while !ss.is_null() {
            // SAFETY: owned superslabs are live.
            let s = unsafe { &*ss };
            assert!(ss > lower && s.lower.get() == lower && s.owner() == self.id());
            (lower, ss, n) = (ss, s.higher.get(), n + 1);
        }
        assert_eq!(
            n,
            self.owned_count.get(),
            "the lists of owned superslabs differ"
        );
    }

    /// An empty slab goes back to its superslab; a superslab left empty goes back to the
    /// pool, unless it is the only one we own (then true is returned).
    ///
    /// Raw pointers for the reason given at [`Heap::after_return`].
    ///
    /// Out of line: a slab empties once in many frees, and inlined it made `after_return`
    /// too big to inline into `flush`'s loop over every block (`bench-hakmem batch-rand
    /// 300000` under callgrind: 59.07M instructions against 51.56M; 50.78M out of line).
    #[cold]
    #[inline(never)]
    fn release_slab(&self, ss: *const SuperSlab, meta: *const SlabMeta) -> bool {
        // SAFETY: our live superslab and slab; the references are not used once the
        // superslab may go to the pool.
        let (s, m) = unsafe { (&*ss, &*meta) };
        if m.in_partial() {
            self.unlink_partial(m.class(), m);
        }
        // SAFETY: by the caller, `ss` is ours and `meta` one of its spans.
        unsafe { self.release(s, m) };
        if s.is_empty() && self.owned_count.get() > 1 {
            self.unlink_owned(s);
            if self.idle.get() {
                // SAFETY: ours until released below.
                unsafe { s.decommit_free(os::Decommit::Now, false) };
            }
            // The pool's pointer is made from the superslab's address, as every pointer
            // to a chunk is (`SuperSlab::of`), not from a shared reference: the pool
            // writes through it (`SuperSlab::init` when the chunk is reused).
            // SAFETY: empty (every slab's `used` was 0, so no remote push is pending).
            unsafe { pool::release_empty(SuperSlab::of(ss as usize)) };
            return true;
        }
        false
    }

    fn push_partial(&self, c: Class, meta: &SlabMeta) {
        let m = meta as *const SlabMeta as *mut SlabMeta;
        let head = self.partial[c].get();
        meta.prev.set(null_mut());
        meta.next.set(head);
        if !head.is_null() {
            // SAFETY: slabs on our lists are live.
            unsafe { (*head).prev.set(m) };
        }
        self.partial[c].set(m);
        // SAFETY: our slab (it goes on our partial list).
        unsafe { meta.set_in_partial(true) };
    }

    fn unlink_partial(&self, c: Class, meta: &SlabMeta) {
        let (prev, next) = (meta.prev.get(), meta.next.get());
        if prev.is_null() {
            self.partial[c].set(next);
        } else {
            // SAFETY: slabs on our lists are live.
            unsafe { (*prev).next.set(next) };
        }
        if !next.is_null() {
            // SAFETY: as above.
            unsafe { (*next).prev.set(prev) };
        }
        // SAFETY: our slab (it was on our partial list).
        unsafe { meta.set_in_partial(false) };
    }

    /// Periodic upkeep from the slow path: at most once per `retain_ms`, give back the
    /// pages of slabs that stayed free since the previous pass (`balanced` with
    /// `MADV_FREE`, `lean` with `MADV_DONTNEED`), so a slab is given back after between one
    /// and two `retain_ms` of being free, and a program freeing and allocating in quick
    /// cycles reuses its slabs without faulting them in again.
    pub fn maintain(&self) {
        let policy = crate::config::current();
        let Some(how) = policy.decommit else {
            return;
        };
        let now = os::now_ms();
        if now.saturating_sub(self.last_decommit_ms.get()) < policy.retain_ms {
            return;
        }
        self.last_decommit_ms.set(now);
        self.empty_depot();
        let mut ss = self.owned.get();
        while !ss.is_null() {
            // SAFETY: owned superslabs are live and ours.
            let s = unsafe { &*ss };
            // SAFETY: as above.
            unsafe { s.decommit_free(how, true) };
            ss = s.next.get();
        }
    }

    /// With `turn` held, for the background return: whether the thread made a slow path
    /// or used its kept large blocks since the last [`Heap::visit`].
    fn was_active(&self) -> bool {
        // SAFETY: `turn` held (this method's condition).
        self.visits.get() != self.seen_visits.get() || unsafe { self.kept.used_since_visit() }
    }

    /// With `turn` held, for the background return: whether the thread made no slow path
    /// since the previous visit; this one is noted.
    fn visit(&self) -> bool {
        let visits = self.visits.get();
        let idle = visits == self.seen_visits.get();
        self.seen_visits.set(visits);
        idle
    }

    /// Run `f` with `idle` set: superslabs it leaves empty go to the pool with their pages
    /// given back.
    fn as_idle(&self, f: impl FnOnce(&Self)) {
        self.idle.set(true);
        f(self);
        self.idle.set(false);
    }

    /// With `turn` held, for the background return, when the thread is idle: give back
    /// what the heap holds for it as `trim` would, but for the blocks in its thread cache
    /// (which only the thread touches): blocks other threads freed into its slabs brought
    /// home, and every free slab's pages given back with `MADV_DONTNEED` in every profile
    /// (a thread that stopped allocating does not reuse them soon, and `MADV_FREE`'s pages
    /// stay resident until the system runs short).
    fn give_back_idle(&self) {
        self.as_idle(Heap::collect_remote);
        self.last_decommit_ms.set(os::now_ms());
        self.decommit_all();
    }

    /// For the background return (with `turn` held), when every thread is idle: take each
    /// superslab of an exited thread in turn, bring home the blocks freed into it, give
    /// back its free slabs, and leave it as it was found, abandoned for whichever thread
    /// adopts it next, or in the pool when it is empty now. (Adopting them for good would
    /// tie them to a heap whose thread may never allocate again.)
    fn tidy_abandoned(&self) {
        // The ones to leave abandoned again, linked through `next` while ours, so that
        // each is taken once.
        let mut again: *mut SuperSlab = null_mut();
        loop {
            let ss = pool::adopt_any();
            if ss.is_null() {
                break;
            }
            // SAFETY: adopted, so ours until given back below.
            let s = unsafe { &*ss };
            s.set_owner(self.id());
            // SAFETY: ours; what the walk yields are its slabs still in use, left
            // off any list, as an abandoned superslab's are.
            unsafe { self.collect_all_remote(s) }.for_each(drop);
            // SAFETY: ours; its free slabs hold nothing.
            unsafe { s.decommit_free(os::Decommit::Now, false) };
            if s.is_empty() {
                // SAFETY: empty, its remote lists drained above; ours to give.
                unsafe { pool::release_empty(ss) };
            } else {
                s.next.set(again);
                again = ss;
            }
        }
        while !again.is_null() {
            // SAFETY: one of ours from above, still live.
            let next = unsafe { (*again).next.get() };
            // SAFETY: ours to give; its next adopter rebuilds its lists.
            unsafe { pool::abandon(again) };
            again = next;
        }
    }

    /// Bring home the blocks other threads freed into our slabs, releasing the slabs (and
    /// superslabs) left empty (for `trim` and the background return).
    pub fn collect_remote(&self) {
        self.collect_pending(usize::MAX);
    }

    /// Give the pages of every free slab back now (for `trim`).
    pub fn decommit_all(&self) {
        let mut ss = self.owned.get();
        while !ss.is_null() {
            // SAFETY: owned superslabs are live and ours.
            let s = unsafe { &*ss };
            // SAFETY: as above.
            unsafe { s.decommit_free(os::Decommit::Now, false) };
            ss = s.next.get();
        }
    }

    /// The thread is gone: give every superslab back (empty ones to the pool's cache,
    /// others abandoned for adoption) and put the heap back in the heap pool. The thread's
    /// cached blocks must have been flushed first.
    ///
    /// # Safety
    /// Called once by the owning thread, holding its turn, which does not use the heap
    /// afterwards.
    pub unsafe fn retire(&self) {
        // Bring every remote block home so that empty slabs are seen as empty.
        let mut ss = self.owned.get();
        while !ss.is_null() {
            // SAFETY: owned superslabs are live.
            let s = unsafe { &*ss };
            let next = s.next.get();
            // SAFETY: ours until retired.
            unsafe { self.collect_all_remote(s) }.for_each(drop);
            if s.is_empty() {
                // SAFETY: empty, and ours to give.
                unsafe { pool::release_empty(ss) };
            } else {
                // SAFETY: ours to give; the adopter rebuilds its lists.
                unsafe { pool::abandon(ss) };
            }
            ss = next;
        }
        self.owned.set(null_mut());
        self.owned_lowest.set(null_mut());
        self.owned_count.set(0);
        self.wide_sampled.set(Sampled::NONE);
        for (_, p) in self.partial.iter() {
            p.set(null_mut());
        }
        let mut pool = HEAPS.lock();
        self.next_free.set(pool.free);
        pool.free = self as *const Heap as *mut Heap;
    }

    /// Bring home the remote blocks of every slab of `s` (whose owner is the caller, which
    /// rebuilds its lists), release the slabs left empty, and yield the others with their
    /// class, taken off any partial list.
    ///
    /// # Safety
    /// We own `s` while the iterator is used.
    unsafe fn collect_all_remote<'a>(
        &'a self,
        s: &'a SuperSlab,
    ) -> impl Iterator<Item = (Class, &'a SlabMeta)> {
        // SAFETY: by the caller.
        unsafe { s.take_pending() };
        let mut i = 1;
        core::iter::from_fn(move || {
            while i < SLABS {
                let e = s.header.class_map[i].load(Ordering::Relaxed);
                if e == MAP_FREE {
                    i += 1;
                    continue;
                }
                let meta = s.meta(i);
                // A used slab's byte is its class (`MAP_HEADER` is never at `i >= 1`).
                let Some(c) = Class::from_map_entry(e) else {
                    i += 1;
                    continue;
                };
                i += crate::size_class::span_slabs(c);
                // SAFETY: the caller owns the superslab, so its slabs and their lists.
                unsafe {
                    meta.set_in_partial(false);
                    self.collect(meta);
                }
                if meta.used() == 0 {
                    // SAFETY: as above; `meta` is one of `s`'s spans.
                    unsafe { self.release(s, meta) };
                } else {
                    return Some((c, meta));
                }
            }
            None
        })
    }
}

/// Take `s` off a doubly linked list of our superslabs that starts at `first`, linked
/// through the two cells `links` picks of each: the one towards `first`, the other away.
fn unlink(
    first: &Cell<*mut SuperSlab>,
    s: &SuperSlab,
    links: impl Fn(&SuperSlab) -> (&Cell<*mut SuperSlab>, &Cell<*mut SuperSlab>),
) {
    let (back, on) = links(s);
    let (back, on) = (back.get(), on.get());
    if back.is_null() {
        first.set(on);
    } else {
        // SAFETY: neighbours on our lists are live.
        links(unsafe { &*back }).1.set(on);
    }
    if !on.is_null() {
        // SAFETY: as above.
        links(unsafe { &*on }).0.set(back);
    }
}

/// The last block of the stretch that `head` starts in a chain being flushed
/// ([`Heap::flush`]), and how many of the blocks to give back are left from it on: the
/// chain goes on at `p`, the block after `head`, in `head`'s span, with `left` blocks to
/// give back from `p` on (`p` included).
///
/// Blocks freed in address order (a batch freed forwards or backwards, every other one)
/// lie a fixed step apart on the chain. Following the links makes each load wait for the
/// one before: in `perf record` of ten runs of `c-workloads c-half-freed` under
/// `LD_PRELOAD` with `302d99b`'s build, which only followed them, 68 % of `Heap::flush`'s
/// samples sat right after that load (`perf annotate`). Once two steps in a row are the
/// same, the walk checks each link against the address the step predicts
/// ([`follow_steps`]), so that the next load's address does not wait on this one and the
/// loads overlap.
///
/// # Safety
/// `p` and the `left - 1` blocks after it on the chain are blocks the caller gives back.
#[inline(always)]
unsafe fn stretch_end(
    g: &SpanGeometry,
    head: *mut Block,
    mut p: *mut Block,
    mut left: usize,
) -> (*mut Block, usize) {
    let mut step = (p as usize).wrapping_sub(head as usize);
    while left > 1 {
        // SAFETY: `p` is one of the blocks to give back and not the last, so linked to
        // the next of them.
        let next = unsafe { (*p).next };
        if !g.same_span(next as usize, head as usize) {
            break;
        }
        let was = step;
        step = (next as usize).wrapping_sub(p as usize);
        p = next;
        left -= 1;
        if step == was {
            let most = g.steps_within(p as usize, step).min(left - 1);
            // SAFETY: by the caller, `left - 1` blocks to give back follow `p`.
            let (end, k) = unsafe { follow_steps(p, step, most) };
            p = end;
            left -= k;
        }
    }
    (p, left)
}

/// Follow the chain from `p` while each link is `step` bytes on from its block, at most
/// `most` links: the block reached and the links followed. Each link read is that of a
/// block already found on the chain; its address comes from the step, not from the load
/// before, which is only compared with it.
///
/// # Safety
/// `p` is followed on the chain by at least `most` blocks the caller holds.
#[inline(always)]
unsafe fn follow_steps(mut p: *mut Block, step: usize, most: usize) -> (*mut Block, usize) {
    let mut k = 0;
    while k < most {
        let guess = p.wrapping_byte_add(step);
        // SAFETY: `p` is on the chain with a block after it (`k < most`).
        if unsafe { (*p).next } != guess {
            break;
        }
        p = guess;
        k += 1;
    }
    (p, k)
}

/// Consecutive blocks of a chain being flushed that lie in one span: linked to each other
/// already, so they go back with one look at their slab, and a dense one with one update
/// of its free list ([`SlabMeta::put_stretch`]). A batch freed in the order it
/// was allocated keeps long stretches of one slab (`c-half-freed`: 36.9M instructions
/// against 30.9M with stretches, callgrind, 300K operations; mimalloc 3 31.1M;
/// `c-batch-fwd` and `c-batch-rev` 100K, 18.1M against 16.2M); a batch freed in random
/// order has stretches of one block (`c-batch-rand` 100K: 21.4M against 21.0M).
struct Stretch {
    first: *mut Block,
    last: *mut Block,
    len: u32,
}

/// Consecutive blocks of one foreign slab, linked, waiting to be pushed together; and
/// how many blocks the runs before it pushed.
struct RemoteRun {
    meta: *const SlabMeta,
    first: *mut Block,
    last: *mut Block,
    len: u32,
    pushed: usize,
}

impl RemoteRun {
    const EMPTY: RemoteRun = RemoteRun {
        meta: core::ptr::null(),
        first: null_mut(),
        last: null_mut(),
        len: 0,
        pushed: 0,
    };

    /// Add the chain of `len` blocks of `meta`'s slab from `first` to `last`, pushing the
    /// run first if it is another slab's.
    ///
    /// Not inlined: in `Heap::flush`, the run's fields then stay in memory instead of
    /// taking registers from the loop over our own blocks (callgrind, 300K operations:
    /// `c-list-rebuild` 58.1M instructions against 59.4M, `c-batch-rand` 69.1M against
    /// 70.2M; `c-batch-xthread`, whose blocks are all another thread's, 47.33M against
    /// 47.21-47.29M). A thread that only frees others' blocks pays the call:
    /// `producer-consumer`'s flushes took 46.7M
    /// instructions against 44.4M before the lone block's path (`bench-hakmem
    /// producer-consumer 2000000`); inlining only the same-slab case made it 48.5M.
    ///
    /// # Safety
    /// The caller gives the chain up; the run's blocks are the caller's.
    #[inline(never)]
    unsafe fn add(&mut self, meta: &SlabMeta, first: *mut Block, last: *mut Block, len: u32) {
        if !core::ptr::eq(self.meta, meta) {
            // SAFETY: by the caller.
            unsafe { self.push() };
            self.meta = meta;
            self.last = last;
        }
        // SAFETY: the chain is ours; link it at the head of the run.
        unsafe { (*last).next = self.first };
        self.first = first;
        self.len += len;
    }

    /// Give the run to its slab (`SuperSlab::push_remote`; nothing if the run is empty).
    ///
    /// # Safety
    /// The run's blocks are the caller's to give up.
    unsafe fn push(&mut self) {
        if self.meta.is_null() {
            return;
        }
        // SAFETY: the superslab is live while its blocks are counted in `used`; the
        // run is a linked chain of `len` blocks of `meta`'s slab, the caller's to give.
        unsafe {
            (*SuperSlab::of(self.first as usize)).push_remote(
                &*self.meta,
                self.first,
                self.last,
                self.len,
            );
        }
        *self = RemoteRun {
            pushed: self.pushed + self.len as usize,
            ..RemoteRun::EMPTY
        };
    }
}

/// Held by the background return while it visits heaps, and across `fork`.
static UPKEEP: SpinLock<()> = SpinLock::new(());

/// The background return's visit: give back what the heaps of threads that made no slow
/// path since the previous visit hold ([`Heap::give_back_idle`]), and, when every thread
/// was idle, first empty the depot and tidy the superslabs of exited threads
/// ([`Heap::tidy_abandoned`]; the depot serves all threads: emptying it while some thread
/// is active would take the batches it is about to reuse). A heap whose thread is
/// in a slow path now is left alone. Returns whether some thread was active since the
/// previous visit (or is now), so that another visit is worth making.
pub fn upkeep_idle_heaps() -> bool {
    let _upkeep = UPKEEP.lock();
    let mut active = false;
    for_each_heap(|h| active |= h.turn.try_lock().is_none_or(|_turn| h.was_active()));
    let mut depot_done = active;
    for_each_heap(|h| {
        let Some(_turn) = h.turn.try_lock() else {
            return;
        };
        let idle = h.visit();
        if !depot_done && idle {
            // Its blocks go home through this heap: ours to its slabs, others' to their
            // remote lists, which the heaps' own visits below bring home. Then what was
            // freed into the superslabs of exited threads (nobody else would while
            // every thread is idle).
            h.as_idle(Heap::empty_depot);
            h.tidy_abandoned();
            depot_done = true;
        }
        // As freed when the thread went idle (at the latest, a visit's sleep ago): they
        // then outstay `retain_ms` as soon as they would have in the cache.
        let since = || os::now_ms().saturating_sub(config::current().retain_ms / 2);
        // SAFETY: `turn` held.
        unsafe { h.kept.visit(idle, |kept| kept.release(false, since)) };
        if idle {
            h.give_back_idle();
        }
    });
    active
}

/// Call `f` with every heap created so far ([`heaps_from`] the newest).
fn for_each_heap(f: impl FnMut(&Heap)) {
    let newest = HEAPS.lock().all;
    heaps_from(newest, null_mut(), f);
}

/// Call `f` with the heap `newest` and every heap made before it down to `stop`
/// (excluded; null: all), without holding the heap pool's lock: a heap and its link are
/// never freed or changed once made (what `f` may touch of a heap other threads use is
/// up to it).
fn heaps_from(newest: *mut Heap, stop: *mut Heap, mut f: impl FnMut(&Heap)) {
    let mut h = newest;
    while !h.is_null() && h != stop {
        // SAFETY: heaps are never freed; `next_all` was set before the heap was published
        // under the pool's lock, which the caller's thread took since.
        unsafe {
            f(&*h);
            h = (*h).next_all;
        }
    }
}

/// The newest heap when `fork` locked them: exactly those are unlocked after.
static FORK_NEWEST: AtomicPtr<Heap> = AtomicPtr::new(null_mut());

/// Lock the heaps (every one, so that none is mid-update in the child, and first: a
/// thread holding its heap may be waiting for the global locks) and the heap pool across
/// `fork`.
pub(crate) fn lock_for_fork() {
    UPKEEP.lock_forever();
    // Heaps made while we wait for others are locked in the next round; the pool's lock
    // is kept once no heap was made since the round began.
    let mut locked: *mut Heap = null_mut();
    loop {
        let newest = HEAPS.lock().all;
        heaps_from(newest, locked, |h| h.turn.lock_forever());
        locked = newest;
        let pool = HEAPS.lock();
        if pool.all == newest {
            core::mem::forget(pool);
            break;
        }
    }
    FORK_NEWEST.store(locked, Ordering::Relaxed);
}

/// Whether every lock [`lock_for_fork`] takes is held: the upkeep's, the heap pool's and
/// every heap's.
#[cfg(test)]
pub(crate) fn locked_for_fork() -> bool {
    let mut all = UPKEEP.is_locked() && HEAPS.is_locked();
    heaps_from(FORK_NEWEST.load(Ordering::Relaxed), null_mut(), |h| {
        all &= h.turn.is_locked()
    });
    all
}

/// # Safety
/// After [`lock_for_fork`].
pub(crate) unsafe fn unlock_after_fork() {
    // SAFETY: by the caller.
    unsafe {
        HEAPS.force_unlock();
        heaps_from(FORK_NEWEST.load(Ordering::Relaxed), null_mut(), |h| {
            h.turn.force_unlock()
        });
        UPKEEP.force_unlock();
    }
}
