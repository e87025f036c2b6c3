//! The per-thread cache: for each class, a singly linked stack of free blocks with a
//! count and a capacity. This is the fast path of both allocation and free:
//!
//! - alloc: pop the head of the class's bin; if empty, refill a batch from the heap.
//! - free: push on the bin (a small block of another thread's, under the bin's newest
//!   block of ours: below); if the bin is full, the block joins the stash when it lies
//!   far from the last one there (a batch freed in scattered order: [`Stash`]), else it
//!   is pushed and the newest blocks go back to the heap: half the capacity, or 64
//!   blocks when that is less (classes over 1 KiB hand them to the depot as one batch
//!   when it has room, [`crate::depot`]).
//!
//! Blocks freed by a thread that does not own their slab join this thread's cache too;
//! only when flushed to their slab do they travel back to its remote list.
//!
//! The price is *passive false sharing* (`cache-scratch`, Hoard's test): the thread's
//! next allocation of the class gets back the block another thread made, whose
//! neighbours on its cache line that thread may still be writing. Two threads that each
//! freed one of two neighbouring 8-byte objects the main thread made and then kept
//! allocating, updating and freeing their own took 4.11x jemalloc's time in Rust and
//! 2.89x mimalloc 2.0.9's in C (tcmalloc, whose caches do the same, 2.92x; `cargo xtask
//! bench --workload cache-scratch,c-cache-scratch --runs 5`, an AMD EPYC). So a bin has
//! no capacity until its class's first use on the thread, and when that use is the free
//! of another thread's block, the block goes back to its owner ([`start_capacity`]): the
//! thread's first block of the class is one of its own slabs, and hakmem took the least
//! time of the field on the three rows (`--workload
//! cache-scratch,c-cache-scratch,musl-cache-scratch --runs 5`; 1.00x-1.05x the best in
//! the full run of docs/BENCHMARKS.md at `aee5504`). A thread whose bin was warm took
//! such a block back (`cache-scratch-warm`, whose threads first allocate and free 16
//! objects of the size: 5.34x mimalloc 3's time in Rust, 4.09x in C, jemalloc 5.01x
//! and 3.97x, in that run), until the test of the bin's newest block below. Two
//! throwaway builds of `845f545`'s allocator tested the block's owner in the fast path (the superslab's `owner` against the thread's heap: 5
//! instructions more a free, the C pair 61.0 against 56.0) and kept a foreign block
//! apart: given back at once, the shape ran as fast as mimalloc 3, but
//! `c-producer-consumer` took 3.08x its time and `c-batch-xthread` 2.34x; given back 32
//! a class at a time, `c-producer-consumer` 1.68x (mimalloc 3 2.64x), `c-larson-8t`
//! 1.36x (1.68x), `c-realloc-xthread` 1.29x (0.93x), `c-thread-pool` 1.18x (1.16x) (5
//! alternated runs each under `LD_PRELOAD`). The reuse of foreign blocks is as much of
//! the cross-thread rows' lead as the batching.
//!
//! A third throwaway build, of `f677bc5`, made the test as cheap as found and kept the
//! reuse: the slab map held, beside each slab's class byte, a byte naming the owner's
//! heap (one of 255, written when a heap takes a superslab), each bin the thread's, and a
//! free whose two differed put the block under the bin's newest instead of on top. Three
//! instructions more a free (callgrind of `c-workloads c-random-mixed 200000`, 23.22M
//! against 23.88M; the C pair about 59, an estimate, against mimalloc 3's 59.1), and the
//! warm row as fast as mimalloc 3 (0.24x-0.37x the time of `f677bc5`'s build). But rows
//! whose threads free only their own blocks lost more than the count says:
//! `c-random-mixed` 1.07x-1.19x its time, `c-many-threads` 1.10x-1.19x (three sets of
//! 5-7 alternated runs), and the cross-thread ones more:
//! `c-producer-consumer` 1.29x, `c-thread-pool` 1.23x (peak 6.1 MiB against 4.9),
//! `c-batch-xthread` 1.45x (its runs spread 35-64 ms), `c-larson-8t` 0.97x. With the
//! bytes in a map of their own, 2 GiB below the classes, `c-fixed-size` took 1.15x-1.35x
//! its time, 1.02x beside the class byte. The bins' new layout alone (a 16-bit capacity
//! and the byte) took 1.00x and 0.98x: the price is the load and the branch.
//!
//! What the fast path does now loads nothing more: a free tests whether the block lies
//! in the same 4 MiB superslab as its bin's newest block (`(p ^ head) >> 22` against a
//! mask in the bin, five instructions, [`push`]), and only when it does not, leaves for
//! [`free_aside`], which reads the owners of both superslabs ([`push_under`]): a block
//! of another heap's goes under a newest block of ours. `c-cache-scratch-warm` then took
//! 0.32x the time of the build before (5 alternated runs under `LD_PRELOAD`, 47.9 ms
//! against 150.0), `cache-scratch-warm` 0.24x (5 alternated runs of `bench-hakmem`),
//! as fast as mimalloc 3. It costs the instructions: callgrind of every C row, 100K
//! operations each, counted 0.99x-1.037x the instructions of the build before
//! (`c-io-buffers` the most, whose blocks over 1 KiB pay the test and none of
//! `malloc`'s savings), and `random-mixed` in Rust, whose sized free gained the five
//! and nothing else, 1.054x (300K operations). Three things keep it from costing more,
//! each found by a build without it (alternated runs under `LD_PRELOAD`, medians):
//!
//! - The mask is set only in the bins of classes of at most 1 KiB. With every class
//!   tested, `c-many-threads` (16 threads churning 16 B..4 KiB) took 1.19x-1.23x its
//!   time (three sets of 7 runs), with 9 % of its samples in `free_aside` (`perf
//!   record`): blocks over 1 KiB pass between threads through the depot, so their bins
//!   mix superslabs; and `c-thread-pool` peaked at 6.0 MiB against 4.9, with the
//!   foreign blocks over 1 KiB kept under the newest.
//! - A false alarm (a block of ours, or a newest block that is not) clears the mask
//!   until the bin's next refill ([`arm_aside`]). Without that, `c-larson-2t` took 1.49x
//!   its time and `c-wide-churn` 1.54x (5 runs): the bins of a heap of several
//!   superslabs, or of blocks two threads made, fail the test at random, and each
//!   failure is a mispredicted branch.
//! - C's `malloc` and `free` gave back four instructions first (the commit before): one
//!   compare for the mode and the class table's reach (`mode::table_below` in the C ABI
//!   crate), and the bin's address with one `lea` from the slab map's byte, from a TLS
//!   label 16 bytes before the cache ([`tls::slot_less_16`]). The C pair went from 56.0
//!   instructions to 52.0, and with the test to 57.0 (mimalloc 3 59.1).
//!
//! Compared with a word of the cache instead of the newest block (the superslab of the
//! thread's last refill, three instructions), the test sent away the thread's own
//! blocks of its other superslabs too, and `__rust_dealloc` grew past what LLVM inlines
//! (`bench-hakmem` called it from 443 places against 199), which a way out shared with
//! the full bin's ([`free_aside`]) undid.
//!
//! A block of one of the thread's own slabs joins the bin too, where mimalloc's free puts
//! it on its page's list: the next allocation of the class then gets back the block just
//! freed, still in the CPU's cache. Four builds measured otherwise (on an AMD EPYC;
//! `c-workloads --phases c-list-rebuild` and the rows alternated under `LD_PRELOAD`, 5 to 9
//! runs each):
//!
//! - Such blocks pushed on their slab's free list: a batch freed in random order went
//!   faster, its slabs emptied and carved again in address order (`c-list-rebuild` 59.0 ms
//!   against 78.1, its free phase 16.7 against 28.4; mimalloc 3 62.4), but the C pair took
//!   95.7 instructions (55.0 this way), each block going back through a refill.
//! - The same, but blocks of the slab the last refill came from kept in the bin: the pair
//!   65.0, yet `c-larson-1t` took 1.64x its time (mimalloc 3 1.38x), its `free` 24 % of
//!   the samples of `perf record` against 12 %: the bin hands out blocks just freed, a
//!   slab's list older ones.
//! - A class's frees sent to their slabs only once it flushed twice with no refill between
//!   (a batch being freed; each free then took the slow path): the pair and larson as they
//!   are, `c-list-rebuild` 67.3 ms against 74.5 (mimalloc 2.0.9 59.5), but `c-batch-rev`
//!   took 1.29x its time, `c-half-freed` 1.22x and `c-batch-fwd` 1.17x: their flushes give
//!   back dense stretches whole.
//! - The third, entered only when also 6 of the 7 neighbouring pairs among the bin's
//!   newest 8 blocks lay in different spans, and with the slow path made lean: the class's
//!   bin set aside for the batch and the heap's turn kept across it, so that such a free
//!   took neither the turn nor `errno`, only the block's return to its span's bitmap.
//!   `c-list-rebuild`'s free phase took 43.6 ms against 36.2 (mimalloc 3 14.6; 5
//!   alternated runs). One block given back on its own costs more than its share of a
//!   flush.
//!
//! What the flush to the spans' bitmaps buys: a build whose bins never flushed (a bin's
//! limit raised to 2^20 at its first overflow) took 27.6 ms in `c-list-rebuild`'s free
//! phase against 44.3 (mimalloc 2.0.9 17.5, mimalloc 3 14.7), but 413 ms in its walks
//! against 24.1: the next list came from the bin in the order the last one was freed,
//! scattered over the heap, where a refill from a bitmap hands blocks out in address order
//! (`--phases`, 7 alternated runs, medians). In `perf record` of the phases, both
//! allocators' `free` samples pile up right after the store into the freed block (61 % of
//! hakmem's, 36 % of mimalloc 2.0.9's); hakmem's flush adds 14 % of all samples.
//!
//! Within the flush, neither the walk nor the bitmaps account for its share alone.
//! Measured again at `d3be6b6` (`c-workloads --phases c-list-rebuild 1000000`, free
//! phase, medians of 7 alternated runs, each set against hakmem and mimalloc 3):
//!
//! | build | free phase | hakmem | mimalloc 3 |
//! | --- | --- | --- | --- |
//! | bins that never flush (above) | 4.56 ms | 8.34 | 3.75 |
//! | the flush walks its blocks, the lone ones given back nowhere (leaked) | 7.96 | 8.80 | 3.72 |
//! | the newest 64 freed pointers kept in a ring, flushed from it with no walk | 8.13 | 7.04 | 3.23 |
//! | the same ring kept, the flush walking as before | 8.08 | 7.04 | 3.23 |
//! | a first pass over the 64 that prefetched each block's bitmap word and metadata | 11.55 | 8.80 | 3.72 |
//! | the ring kept, the flush only cutting the 64 off the bin (leaked, no walk) | 8.57 | 6.36 | 3.15 |
//! | the same set: the ring kept, the flush as before | 8.11 | 6.36 | 3.15 |
//! | the same set: bins that never flush | 3.24 | 6.36 | 3.15 |
//! | the heap's turn not taken by the flush (no `lock cmpxchg`; unsound with threads) | 7.55 | 8.07 | 3.46 |
//!
//! So giving the blocks back (bitmap, metadata, partial list) is about a tenth of the
//! phase, the walk next to nothing (the ring's upkeep on every free cost more than it
//! saved), and a flush that does nothing with its blocks costs as much as one that gives
//! them back: the flush's share is not in its work per block. The one locked instruction
//! of each flush, the turn's, is about 6 % of the phase. `perf annotate` of the flush
//! (`perf record` of `--phases c-list-rebuild 8000000`) puts 46 % of its samples on the
//! instruction right after the load of the bitmap word and 8 % after the load of the
//! link. Hardware counters, which could say what the core waits for, are not available
//! on this host.
//!
//! A bin that is an array of pointers, as tcmalloc's caches are, writes nothing into
//! the freed block and needs no walk to flush. A throwaway build at `a15a2da` (each
//! class an array of 1024 slots; a free stores the pointer, a flush gives the newest 64
//! back from the array, each to its span's bitmap; a refill copies the heap's chain
//! into the array) took 7.29 ms in the free phase against 9.65 (mimalloc 3 4.57), but
//! 8.27 ms in the build against 5.05 (6.53), so the row was no faster (0.0213 s against
//! 0.0205, mimalloc 3 0.0181), and `c-larson-1t` took 1.31x its time, `c-random-mixed`
//! 1.17x (5 alternated runs each; `--phases c-list-rebuild 1000000`, 7). In `perf
//! record` of that build the flush's loop, now a pointer load, the span's bitmap word
//! and two counters of its metadata per block, took 4.5 ns a block (an estimate: its
//! 13.8 % of the samples over the blocks it gave back), most of its samples again right
//! after the bitmap word's load, where mimalloc 3's whole free takes 3.7-5.1 ns (its
//! free phase over 0.9M frees here, over 1.9M in `--phases c-list-rebuild 2000000`). So
//! a free without a store into the block still pays the give-back per block, which the
//! bitmap (and the double free it catches there) makes dearer than a push on a slab's
//! list. Arrays of 128 slots, where 1024 put each class's top in a page of its own,
//! brought `c-larson-1t` to 1.01x and `c-random-mixed` to 1.06x (7 alternated runs),
//! but not the row: free phase 6.78 ms against 8.14, build 6.88 against 4.69 (mimalloc
//! 3 3.46 and 6.04), the row 0.0239 s against 0.0222 (mimalloc 2.0.9 0.0180). Without
//! the prefetch of the next slot's block, the 1024-slot build took 1.01x and 1.04x the
//! time of the one with it.
//!
//! Fewer instructions in the flush did not make it faster either. On an Intel Xeon
//! (`c-workloads --phases c-list-rebuild 2000000`, 15 alternated runs, medians) the free
//! phase took 11.86 ms against mimalloc 2.0.9's 8.61. A throwaway build with a free bitmap
//! of a bit per 16 bytes of the superslab (no division by the block size, no span start)
//! and metadata of one cache line each (found by a shift of the address; the bitmap's
//! count folded into one that a give-back leaves alone) took the flush's loop from 38 to
//! 30 instructions a block and the row from 55.8M to 53.1M (callgrind, 300K operations):
//! 11.97 ms. The metadata alone (34 instructions, 54.6M): 11.97 ms. The heap's turn taken
//! with a plain store (unsound with the background return): the row 0.97x its time, eight
//! others within their noise (9 alternated runs each). In `perf record` of the phases (8M
//! operations), 42 % of the samples of `free`'s fast path land on the instruction after
//! its store into the freed block, 23 % of the flush's after its load of a bitmap word;
//! mimalloc 2.0.9's free has 0.8 % after its store into the block and half of its
//! samples on its page's fields. What the free phase waits for is memory, which counting
//! instructions does not show.
//!
//! Such pushes also write the slab's owner-only state without the heap's turn, which the
//! background return takes to bring remote frees home.
//!
//! Free-list sharding without the turn (mimalloc's page-local free list), a throwaway
//! build at `4e8ca0e`, avoids that: each span got a second list that only its heap's
//! thread writes, with or without the turn, and the background return never touches
//! (its blocks counted in `used` until the thread moves them to the free list, under
//! the turn, at its next refill or every 256 KiB). A free into a full bin of one of the
//! thread's own blocks of up to 1 KiB went there instead of the stash: 45 instructions
//! in `free_full`, where the stash takes 22 and its flush about 32 more, and
//! `c-list-rebuild 300000` ran 52.9M instructions against 59.5M (callgrind).
//! `c-workloads --phases c-list-rebuild`, 5 alternated runs on an AMD EPYC: the free
//! phase 21.6-23.6 ms against 23.0-36.5 (a busy host), but the walks 121-173 ms against
//! 21.5-23.4. The bin holds blocks of every slab, so no slab emptied, and the next list
//! came off the free lists in the order the last one was freed; mimalloc, with no bins,
//! empties its pages and carves them again in address order. The lists moved into the
//! bitmaps instead (walked at the fold, every 32 KiB, so that their blocks were still
//! cached): the free phase 38.1-43.8 ms against 24.1-28.2, the walks 29.9-30.6 against
//! 21.4-21.9.
//!
//! Where the frees come between loads that do not wait on each other, the whole of the
//! free shows. A chained hash table torn down chain by chain (`hash-teardown`: the link
//! read, then the value and the entry freed) ran 1.4x-1.5x mimalloc 3's time. Its free
//! phase, in a throwaway probe of one class (1M entries of 48 B, one round, 11 alternated
//! runs on an Intel Xeon, medians), with `free` cut short at each step in throwaway
//! builds: the walk with no `free` 20.3 ms; a `free` that returns at once 24.0; that
//! returns after the slab map's test 26.1; after reaching [`free_full`] 31.1; with the
//! stash but its blocks never given back 38.3; as built 45.0; mimalloc 3 26.6 (its whole
//! free costs what the slab map's test does here). So no one step holds the difference.
//!
//! What does is the count of instructions, not misses. The table's chains are short
//! (under one entry a bucket), so the next bucket's entry seldom waits on this one's, and
//! the CPU runs ahead to its load as far as the instructions of the frees between leave
//! room in its window: the fewer a free takes, the more of the walk's misses are under way
//! at once. `c-workloads --phases c-hash-teardown` (4M operations, 11 alternated runs,
//! medians): the teardown 203.8 ms under hakmem, 92.6 under mimalloc 3, whose `free`
//! takes 21.5 instructions there against hakmem's 82.8 (callgrind `--toggle-collect=free`
//! of `c-workloads c-hash-teardown 600000`; a full bin's free goes by the stash, about 80,
//! or by the bin's flush of 64, about 65). A throwaway copy of the program with an empty
//! loop of 24 instructions after each free took mimalloc 3's teardown to 128.4 ms: 0.2 ns
//! an instruction, so the 61 instructions between the two allocators account for about 90
//! of the 111 ms between them. Throwaway builds that saved or added instructions
//! (callgrind of `c-hash-teardown 600000`; the teardown in sets of 9 to 11 runs of the
//! phases alternated with the build as it is, whose runs spread by a third on this host):
//!
//! | build | instructions in `free` | teardown, three sets |
//! | --- | --- | --- |
//! | as built | 109.3M | 1.00x |
//! | no stash: every full bin flushes its newest 64 | 98.0M | 0.79x-0.90x |
//! | the stash's admission without its tests of order and owner (unsound) | 98.0M | 0.75x-1.07x |
//! | a stash for each of four classes (index modulo 4, each class of the table its own) | 121.8M | 0.83x-1.18x |
//! | each stashed block's bitmap word and metadata prefetched eight blocks ahead | 129.4M | 0.96x-1.09x |
//! | huge pages from the heap's first superslab on | 109.3M | 0.86x-1.08x |
//!
//! The four stashes took the fast path's test of a full bin from 278K mispredictions over
//! 1.2M frees to 6K (cachegrind's `--branch-sim`, a model of a predictor), and no set
//! found the teardown faster for it. The heap's first 8 MiB of superslabs keep 4 KiB pages
//! ([`crate::superslab::HUGE_PAGES_FROM`]), as the table's first superslab does here:
//! when [`Heap::advise_huge_late`]'s look came it had carved 248 pages, all resident, short
//! of the 256 that [`crate::superslab::dense_enough`] judges by, and no look comes again. A
//! build that looked again at later carves collapsed it into huge pages, and the peaks
//! rose: `c-hash-teardown` 22.2 MiB against 21.8 (mimalloc 3 20.0, so over the issue's
//! 1.1x), `c-aligned` 5.1 against 4.3 (3 alternated runs of every C row). Without the
//! stash, `c-list-rebuild` took 1.38x its time
//! (9 alternated runs; its free phase 36.8 ms against 28.9 in 5): its records are freed
//! from an array without being read, and a push writes into each, a miss the stash's
//! array of pointers avoids, where the table's entries were just read. So the least a
//! full bin's free was brought to, about 74 instructions, is 3.4x mimalloc's: the way to
//! finding the bin full (22, the slab map's test of the pointer among them) and the
//! bitmap's give-back that catches a double free (about 31 a block) are more than
//! mimalloc's whole free, which pushes on its page's list and looks for a double free only
//! in its secure and debug builds.

use crate::chunk_map::CHUNK_SHIFT;
use crate::config;
pub use crate::heap::Fill;
use crate::heap::Heap;
use crate::large::{self, Retired};
use crate::misuse::{self, Misuse};
use crate::os;
use crate::remote::Block;
use crate::retain;
use crate::size_class::{
    block_size, is_medium, medium_classes, Class, MapByte, PerClass, BLOCK_SIZE, NUM_CLASSES,
};
use crate::sync::SpinGuard;
use crate::tls;
use core::ptr::null_mut;

/// One class's stack of free blocks.
///
/// Invariant: `room == limit - (length of the list at head)`; it goes below 0 only for
/// the moment between the push that overflows the bin ([`overflow`]) and its flush.
/// `limit` is 0 until the class's first use on the thread, which sends its first free to
/// the slow path ([`start_capacity`]), and, for a medium class, until the thread
/// allocates the class or frees one of its own blocks of it. A `limit` above 0 is given
/// with the thread's heap held and taken back to 0 before the heap goes ([`teardown`]),
/// so a bin with a capacity is one of a thread whose heap is live.
///
/// `aside` is a mask, `u16::MAX` or 0: set in the bins of classes of at most 1 KiB
/// ([`STASHED_CLASSES`]) at each refill ([`arm_aside`]) and cleared by a false alarm
/// ([`push_under`]), 0 in the other bins. Where it is set, the free of a block from
/// another superslab than the bin's newest leaves the fast path ([`Bin::sends_aside`]).
#[repr(C)]
pub struct Bin {
    pub head: *mut Block,
    room: i32,
    /// The capacity: at most a slab's blocks (4096, the assertion below) or a profile's
    /// `cache_max` (512), held in 16 bits to leave room for `aside`.
    limit: u16,
    aside: u16,
}

const _: () =
    assert!(crate::size_class::SLAB_SIZE / crate::size_class::MIN_ALIGN <= u16::MAX as usize);

impl Bin {
    /// The capacity.
    fn limit(&self) -> u32 {
        self.limit as u32
    }

    /// Blocks on the list.
    fn count(&self) -> u32 {
        (self.limit() as i32 - self.room) as u32
    }

    fn set_count(&mut self, n: u32) {
        self.room = self.limit() as i32 - n as i32;
    }

    /// Whether the free of `b` leaves the fast path for [`free_aside`] with room in the
    /// bin: the mask is set and `b` lies in another superslab than the newest block (or
    /// the bin is empty). Superslabs whose indices differ only from their 17th bit on
    /// (256 GiB apart) pass for one: a hint, and a missed one costs no more than before.
    #[inline(always)]
    fn sends_aside(&self, b: *mut Block) -> bool {
        ((b as usize ^ self.head as usize) >> CHUNK_SHIFT) as u16 & self.aside != 0
    }

    /// Change the capacity, keeping the blocks.
    fn set_limit(&mut self, limit: u32) {
        debug_assert!(limit <= u16::MAX as u32);
        let n = self.count();
        self.limit = limit.min(u16::MAX as u32) as u16;
        self.set_count(n);
    }
}

/// What the layers above do when a thread first needs its heap, which this layer cannot
/// name: the entry points pass it down as a type parameter (no cost at run time), so the
/// thread cache never calls up.
pub trait ThreadHooks {
    /// Set the process up; cheap once done, and safe to re-enter from the set-up itself.
    fn process_init();
    /// The calling thread was just set up: arrange for [`teardown`] to run at its exit.
    fn thread_started();
}

/// The calling thread's cache, laid over its TLS slot.
#[inline(always)]
fn cache() -> *mut ThreadCache {
    tls::slot().cast()
}

const _: () = assert!(
    core::mem::size_of::<ThreadCache>() <= tls::SLOT_BYTES
        && core::mem::align_of::<ThreadCache>() <= tls::SLOT_ALIGN
);

/// A thread's cache; all zero is the valid initial state (see [`crate::tls`]).
#[repr(C, align(64))]
pub struct ThreadCache {
    pub bins: PerClass<Bin>,
    /// The thread's heap, or null before the first slow path and after thread exit.
    pub heap: *mut Heap,
    /// Slow-path visits since the last upkeep.
    ticks: u32,
    /// Bit `c` set: class `c` took the slow path since the last upkeep.
    active: u64,
    /// The heap profiler's sampling countdown ([`count_down`]), kept here so that the
    /// allocation fast path reaches it from the slot address it computes anyway. This
    /// layer never reads it; zero at thread start.
    countdown: isize,
    /// Blocks freed into full bins in scattered order, on their way back to their spans.
    stash: Stash,
}

const _: () = assert!(NUM_CLASSES <= 64);

/// Slow-path visits between two upkeeps (capacity adaptation, decommit).
const UPKEEP_EVERY: u32 = 512;

/// The bin of class `c` in the cache at `tc` (no bounds check: a `Class` is in range).
///
/// # Safety
/// `tc` is the calling thread's cache, and no other reference to the bin lives while the
/// returned one is used.
#[inline(always)]
unsafe fn bin_of<'a>(tc: *mut ThreadCache, c: Class) -> &'a mut Bin {
    // SAFETY: by the caller; the array is indexed in place, not through a reference to
    // the whole cache.
    unsafe { &mut *in_register(&raw mut (*tc).bins.0[c.index()]) }
}

/// `bin` as it is, but computed into a register that the compiler cannot fold into the
/// addresses of the bin's fields: the fast paths then load and store them as `[reg]` and
/// `[reg + 8]`, not as `[cache + index]`.
///
/// A loop that frees a block and allocates its class again (`c-fixed-size`) has each
/// `malloc` load the bin head that the `free` before it stored, at an address the `free`
/// computes from the slab map's byte. On the Intel Xeon we measure on, the core can hand
/// the stored value to the load before either address is known (it pairs them by a
/// prediction), but here it did so only with the address in a register (plus a
/// displacement), not with an index register added to it: a loop of
/// pops from a bin took 2.87 ns a pop with the head addressed as base plus index, and
/// 1.74-1.97 ns as `[reg]` (hand-written assembly of the two forms). With this,
/// `c-fixed-size` took 0.76x its time (7 alternated runs of the preloaded builds; tcmalloc,
/// the fastest before, 0.85x), 400 allocations of 32 B in a row 0.61x (1.93 against
/// 3.16 ns each), `c-list-rebuild` 0.94x and `list-rebuild` 0.92x.
///
/// The pairing is a guess, and where frees and allocations alternate between classes
/// at random it is wrong more often: `c-random-mixed` took 1.07x its time and
/// `c-larson-1t` 1.05x (9 alternated runs), `random-mixed` 1.05x and `larson-1t` 1.04x.
/// The same hand-written pops and pushes over 40 classes at random took 1.065x as long
/// in the register form. Programs did not lose: SQLite 0.96x, jq and CPython (with
/// `PYTHONMALLOC=malloc`) 0.99x (the scripts `cargo xtask programs` runs, 7 alternated
/// runs).
#[inline(always)]
// The pointer goes through an empty block, which reads nothing behind it: `nomem` holds.
#[allow(clippy::pointers_in_nomem_asm_block)]
fn in_register(bin: *mut Bin) -> *mut Bin {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        let mut p = bin;
        // SAFETY: the block is a comment: it reads and writes no memory, and leaves the
        // register (the same pointer, whose provenance it passes on) as it found it.
        unsafe {
            core::arch::asm!(
                "/* {p} */",
                p = inout(reg) p,
                options(pure, nomem, nostack, preserves_flags)
            )
        };
        p
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    bin
}

/// Subtract `bytes` from the calling thread's countdown; whether it went below zero.
/// Inlined into an allocation that then takes the cache, a `sub` from memory and a branch.
#[inline(always)]
pub fn count_down(bytes: usize) -> bool {
    let tc = cache();
    // SAFETY: the thread's own cache, reached in place (no reference to it is made).
    unsafe {
        let left = (*tc).countdown.wrapping_sub(bytes as isize);
        (*tc).countdown = left;
        left < 0
    }
}

/// Set the calling thread's countdown to `bytes`.
pub fn set_countdown(bytes: isize) {
    // SAFETY: the thread's own cache, reached in place.
    unsafe { (*cache()).countdown = bytes };
}

/// Allocate a block of class `c`, which the caller will write as `fill` says (it
/// matters only when the heap takes memory: [`Fill`]), or, when the bin of `c` is empty
/// and its blocks are over `wider_from` bytes, of a larger medium class
/// ([`pop_larger`]; `usize::MAX`: never). Null when memory is exhausted.
#[inline(always)]
pub fn alloc<H: ThreadHooks>(c: Class, fill: Fill, wider_from: usize) -> *mut u8 {
    let b = pop(c);
    if !b.is_null() {
        return b;
    }
    alloc_slow::<H>(c, fill, wider_from)
}

/// A block of class `c` from the cache, or null when the bin is empty (the caller then
/// takes [`alloc`], which refills it).
#[inline(always)]
pub fn pop(c: Class) -> *mut u8 {
    pop_with::<true>(c)
}

/// [`pop`] without the prefetch of the bin's next block, for the classes over 1 KiB
/// (C's `malloc` tells them apart on its way to the class, so this costs no instruction):
/// a program replacing such blocks at random waited longer with the prefetch than
/// without (c-mid-large, 7 alternated runs of builds with and without it: 0.0309 against
/// 0.0272 s; c-wide-churn 0.0484 against 0.0470). Blocks that large start at the same few
/// offsets of their pages, so the prefetched line likely pushes out of the L1 cache
/// lines the program still uses (a guess; not measured).
#[inline(always)]
pub fn pop_wide(c: Class) -> *mut u8 {
    pop_with::<false>(c)
}

/// [`pop`] of a class that comes as the slab map keeps it ([`bin_of_mapped`]).
#[inline(always)]
pub fn pop_mapped(b: MapByte) -> *mut u8 {
    // SAFETY: the thread's own bin, which no other reference reaches meanwhile.
    unsafe { pop_from::<true>(&mut *bin_of_mapped(b)) }
}

#[inline(always)]
fn pop_with<const PREFETCH: bool>(c: Class) -> *mut u8 {
    // SAFETY: the thread's own cache, which no other reference reaches meanwhile.
    pop_from::<PREFETCH>(unsafe { bin_of(cache(), c) })
}

#[inline(always)]
fn pop_from<const PREFETCH: bool>(bin: &mut Bin) -> *mut u8 {
    let b = bin.head;
    if !b.is_null() {
        // SAFETY: blocks in a bin are free and linked.
        let next = unsafe { (*b).next };
        if PREFETCH {
            prefetch(next);
        }
        bin.head = next;
        bin.room += 1;
    }
    b.cast()
}

/// Start loading the line of `b`, the bin's next block, while the caller works with the
/// block just popped. A bin's blocks are linked in the order they were freed: in a
/// program that frees its objects in random order and allocates again, each one's line is
/// cold, and without this every allocation waits for the miss of the one before it
/// (c-batch-rand: 93 % of `malloc`'s samples on that load, `perf annotate`).
#[inline(always)]
fn prefetch(b: *mut Block) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads no byte and faults on no address, null included.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(b.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = b;
}

/// Free a block of class `c`.
///
/// # Safety
/// `p` is a handed-out block of class `c`, which the caller gives up.
#[inline(always)]
pub unsafe fn free<H: ThreadHooks>(p: *mut u8, c: Class) {
    // SAFETY: the thread's own bin; `p` by the caller.
    unsafe { push::<H>(p, bin_of(cache(), c)) }
}

/// [`free`] of a block whose class comes as the slab map keeps it: the bin's address is
/// the byte times 8 past the cache's start, less one bin, with no shift between the
/// byte's load and the push ([`MapByte`] says why that counts).
///
/// # Safety
/// As for [`free`], `p` a block of `b`'s class.
#[inline(always)]
pub unsafe fn free_mapped<H: ThreadHooks>(p: *mut u8, b: MapByte) {
    // SAFETY: the thread's own bin; `p` by the caller.
    unsafe { push::<H>(p, bin_of_mapped(b)) }
}

/// The calling thread's bin of `b`'s class: `b.times_eight()` is the class's index plus
/// one times 16, the offset of its bin from 16 bytes before the cache (bins of 16 bytes
/// from the cache's start, which the assertion checks), an address of its own in the
/// thread's TLS ([`tls::slot_less_16`]), so the bin's address is one scaled index from
/// it, computed into a register ([`in_register`]) by one `lea`.
#[inline(always)]
fn bin_of_mapped(b: MapByte) -> *mut Bin {
    const _: () =
        assert!(core::mem::size_of::<Bin>() == 16 && core::mem::offset_of!(ThreadCache, bins) == 0);
    in_register(
        tls::slot_less_16()
            .wrapping_add(b.times_eight())
            .cast::<Bin>(),
    )
}

/// Push the freed block `p` on `bin`; a full bin, or a block from another superslab than
/// the bin's newest where the bin's `aside` mask is set, sends it to [`free_aside`]
/// before anything is written into it (the module doc says why).
///
/// The full bin is told by a compare of `room` ahead of the stores, which costs the C
/// pair one instruction. Two other forms took `fixed-size` (a block of 256 B allocated
/// and freed, over and over) 1.14x its time (11 alternated runs): `room` decremented in
/// memory before the stores (`dec` and `js`, one instruction less), and loaded,
/// decremented in a register and stored after them (one more). `io-buffers` (4..64 KiB
/// blocks) takes 1.04x-1.05x the time of the build before with each form tried (11 to 15
/// alternated runs; callgrind counts the same instructions), `c-io-buffers` 0.91x.
///
/// A raw pointer, not a reference: a reference argument would be asserted live for the
/// whole call, and the flush reaches the bin again through the whole cache.
///
/// # Safety
/// `bin` is the calling thread's bin of `p`'s class; `p` a handed-out block the caller
/// gives up.
#[inline(always)]
unsafe fn push<H: ThreadHooks>(p: *mut u8, bin: *mut Bin) {
    // SAFETY: by the caller, the thread's own bin, which no other reference reaches until
    // the flush (which takes the raw pointer).
    let bin = unsafe { &mut *bin };
    let b = p as *mut Block;
    if b == bin.head {
        // The block is already the newest in this cache: a double free, caught for the
        // price of one compare.
        return double_free(p, bin);
    }
    if bin.room <= 0 || bin.sends_aside(b) {
        // The bin is full, or the block may be another thread's: before anything is
        // written into it.
        // SAFETY: as above.
        return unsafe { free_aside::<H>(p, bin) };
    }
    // SAFETY: the block is the caller's to give up.
    unsafe { (*b).next = bin.head };
    bin.head = b;
    bin.room -= 1;
}

/// [`push`]'s way out: a full bin's free ([`free_full`]), or a block from another
/// superslab than the bin's newest ([`push_under`]).
///
/// # Safety
/// As for [`push`].
#[cold]
#[inline(never)]
unsafe fn free_aside<H: ThreadHooks>(p: *mut u8, bin: *mut Bin) {
    // SAFETY: by the caller.
    unsafe {
        if (*bin).room <= 0 {
            return free_full::<H>(p, bin);
        }
        push_under(p.cast(), &mut *bin)
    }
}

/// Push `b`, a block from another superslab than `bin`'s newest, on `bin`: second, under
/// the newest, when `b` is another heap's and the newest is ours, else on top. Another
/// thread made `b`, and may still be writing its neighbours on their cache line: the
/// thread's next allocation of the class then gets back the block it had, not this one.
///
/// # Safety
/// As for [`push`], the bin with room.
#[inline(always)]
unsafe fn push_under(b: *mut Block, bin: &mut Bin) {
    let head = bin.head;
    // SAFETY: the thread's own cache, reached in place.
    let h = unsafe { (*cache()).heap };
    // A bin with room has a capacity, so its thread's heap is live ([`Bin`]).
    debug_assert!(!h.is_null());
    // SAFETY: the thread's heap, live while it is (heaps are never unmapped); `b` is a
    // handed-out block and `head` a block of the thread's bin, so both superslabs are live.
    let under = !head.is_null() && unsafe { !(*h).owns(b) && (*h).owns(head) };
    if under {
        // SAFETY: the head is a free block of the bin; `b` the caller's.
        unsafe {
            (*b).next = (*head).next;
            (*head).next = b;
        }
    } else {
        // SAFETY: the block is the caller's to give up.
        unsafe { (*b).next = head };
        bin.head = b;
        // A false alarm: the bin mixes superslabs (a heap of several, or blocks of
        // several threads), so its frees leave the fast path until its next refill.
        bin.aside = 0;
    }
    bin.room -= 1;
}

/// The class of `bin`, one of the calling thread's bins. The cold paths of [`free`] take
/// the bin and find the class here, so that the fast path needs only the bin's address
/// (C's `free` computes it from the slab map's byte without the class's index).
fn class_of_bin(bin: *const Bin) -> Class {
    Class::new(bin_index(cache(), bin))
}

/// The index of the class of `bin`, one of the bins of `tc` (for a caller that holds the
/// cache's address already).
#[inline(always)]
fn bin_index(tc: *const ThreadCache, bin: *const Bin) -> usize {
    (bin as usize - tc as usize) / core::mem::size_of::<Bin>()
}

/// Report the double free of `p`, which is already the head of `bin`, and abort.
///
/// It never returns, but the compiler is not told (`black_box`): a call it knows never
/// returns is not a tail call, and the fast path of [`free`] would set up a stack frame
/// for it (a `push` and a `pop` on every free) instead of jumping here.
#[cold]
#[inline(never)]
fn double_free(p: *mut u8, bin: &Bin) {
    if core::hint::black_box(true) {
        misuse::report_misuse(p, Misuse::DoubleFree, Some(class_of_bin(bin)));
    }
}

/// The thread's heap, setting the thread up on first use; null if memory is exhausted.
#[inline]
fn heap<H: ThreadHooks>(tc: *mut ThreadCache) -> *mut Heap {
    // SAFETY: the thread's own cache.
    let h = unsafe { (*tc).heap };
    if !h.is_null() {
        return h;
    }
    // SAFETY: as above.
    unsafe { setup_thread::<H>(tc) }
}

#[cold]
#[inline(never)]
unsafe fn setup_thread<H: ThreadHooks>(tc: *mut ThreadCache) -> *mut Heap {
    H::process_init();
    let h = Heap::acquire();
    if h.is_null() {
        return null_mut();
    }
    // Every bin starts with no room ([`start_capacity`]).
    // SAFETY: the thread's own cache.
    unsafe { (*tc).heap = h };
    // Last: registering may allocate (glibc's pthread_setspecific for high keys), which
    // now finds the thread set up.
    H::thread_started();
    h
}

/// Give the bin of class `c`, at its class's first use on this thread (its `limit` 0),
/// the capacity a small class starts with ([`initial_capacity`]); a medium bin stays
/// without room. Every bin starts with none when the thread is set up.
///
/// A medium class gets its room when the thread first allocates there (a miss,
/// [`grow_capacity`]) or frees one of its own blocks (an overflow, [`regrow_capacity`]).
/// A thread that frees the medium blocks another allocates (a pipeline's consumer of big
/// buffers) kept, in bins it never allocates from, what fits in a quarter of a medium
/// bin's bytes, at least one block, in each of the 17 medium classes: up to 6.8 MiB
/// that no thread used until the consumer's next upkeep. With no room, each such free
/// gives the block straight back to its owner's span, as the flush of a full bin does.
/// A producer writing blocks of 64 KiB..1 MiB through for a consumer that frees them,
/// handed over 64 at a time (a held-out C program under `LD_PRELOAD`, 5 alternated runs):
/// peak 57.1 MiB against 64.9, and no slower (jemalloc 53.2, tcmalloc 51.0).
/// `c-realloc-xthread`, whose threads free each other's medium blocks, ran the same
/// instructions (46.84M against 46.76M, callgrind, 300K operations).
///
/// A small class gets its room at its first use, but when that use is the free of
/// another thread's block, the block goes back to its owner ([`free_first`]): it is not
/// the thread's first allocation of the class.
///
/// Returns whether this was the class's first use (the bin got its capacity now).
fn start_capacity(bin: &mut Bin, c: Class) -> bool {
    let first = bin.limit() == 0 && !is_medium(c);
    if first {
        bin.set_limit(initial_capacity(config::current(), c));
    }
    first
}

/// Let the frees into `bin` (of class `c`) of blocks from another superslab than its
/// newest leave the fast path, if `c` is small enough (at most 1 KiB) for blocks to share
/// cache lines ([`push_under`]).
fn arm_aside(bin: &mut Bin, c: Class) {
    if c.index() < STASHED_CLASSES {
        bin.aside = u16::MAX;
    }
}

/// Capacity a class starts with: a quarter of its maximum; it grows when the class misses.
fn initial_capacity(policy: &config::Policy, c: Class) -> u32 {
    let b = block_size(c);
    (config::cache_capacity(policy, b) / 4).max(config::min_capacity(policy, b))
}

/// Count a slow-path visit of class `c`; every [`UPKEEP_EVERY`] visits, shrink the
/// capacity of classes that stayed idle (flushing what they no longer may hold) and let
/// the heap give free pages back.
///
/// # Safety
/// `tc` is the calling thread's cache and `h` its heap.
unsafe fn note_slow_path(tc: *mut ThreadCache, h: *mut Heap, c: Class) {
    // SAFETY: by the caller.
    let t = unsafe { &mut *tc };
    t.active |= 1 << c.index();
    t.ticks += 1;
    if t.ticks < UPKEEP_EVERY {
        return;
    }
    // SAFETY: by the caller.
    unsafe { upkeep(tc, h) };
}

/// The periodic upkeep of [`note_slow_path`]: empty the stash, shrink the capacity of
/// classes that stayed idle since the last one (flushing what they no longer may hold)
/// and let the heap give free pages back.
///
/// # Safety
/// `tc` is the calling thread's cache and `h` its heap, held.
unsafe fn upkeep(tc: *mut ThreadCache, h: *mut Heap) {
    // SAFETY: by the caller.
    unsafe {
        (*tc).ticks = 0;
        (*h).kept_large().release(true, os::now_ms);
        empty_stash(tc, h);
        shrink_idle(tc, h, !0);
        (*h).maintain();
    }
    let now = crate::os::now_ms();
    crate::pool::expire(now);
    crate::large::expire(now);
}

/// The classes whose bins [`refill_bin`] shrinks when the heap took a superslab: those
/// over 1 KiB, whose bins hold at least 32 blocks ([`config::Policy::cache_min`]), up to
/// 1.8 MiB of 56 KiB blocks, where a bin of a smaller class holds at most 64 KiB.
fn big_bins() -> u64 {
    Class::all()
        .filter(|&c| block_size(c) > 1024)
        .fold(0, |mask, c| mask | 1 << c.index())
}

/// Halve the capacity of the classes of `classes` that made no slow path since this was
/// last done for them, flushing what their bins no longer may hold, and start counting
/// their activity anew.
///
/// # Safety
/// `tc` is the calling thread's cache and `h` its heap, held.
unsafe fn shrink_idle(tc: *mut ThreadCache, h: *mut Heap, classes: u64) {
    // SAFETY: by the caller.
    let t = unsafe { &mut *tc };
    let idle = !t.active & classes;
    t.active &= !classes;
    let policy = config::current();
    for (k, bin) in t.bins.iter_mut() {
        let min = config::min_capacity(policy, block_size(k));
        if idle & (1 << k.index()) == 0 || bin.limit() <= min {
            continue;
        }
        bin.set_limit((bin.limit() / 2).max(min));
        if bin.room < 0 {
            // SAFETY: the bin's blocks are ours; `h` is our heap.
            unsafe { flush_newest(bin, h, k, bin.limit(), Heap::flush) };
        }
    }
}

/// Give the blocks in the bins of the medium classes back to their spans, so that the
/// slabs of each block, alone in its span, serve the next carve whatever its size; and
/// lower the capacity of every medium class but `missed` to
/// [`config::medium_side_capacity`].
///
/// The bin of the class that missed grows to [`config::MEDIUM_BIN_BYTES`] as it keeps
/// missing ([`grow_capacity`]): a program that frees and allocates a size again takes it
/// back without a slow path, and one that moves on to other sizes finds what it freed in
/// the free slabs at its next miss, instead of in 16 bins of one size each. 16 slots of
/// 64 KiB..4 MiB, every page written (`large-written`): with bins of 2 MiB a class the
/// superslabs of medium blocks held 32 MiB for about three live blocks
/// (`/proc/self/pagemap` per chunk at the end of a C replica, 300K operations), 15.5 MiB
/// with empty bins.
///
/// # Safety
/// `tc` is the calling thread's cache and `h` its heap, held.
unsafe fn flush_medium(tc: *mut ThreadCache, h: *mut Heap, missed: Class) {
    // SAFETY: by the caller.
    let t = unsafe { &mut *tc };
    for k in medium_classes() {
        let bin = &mut t.bins[k];
        if !bin.head.is_null() {
            // SAFETY: the bin's blocks are ours; `h` is our heap.
            unsafe { flush_newest(bin, h, k, 0, Heap::flush) };
        }
        let side = SIDE_CAPACITY[k.index()];
        if k != missed && bin.limit() > side {
            bin.set_limit(side);
        }
    }
}

/// [`config::medium_side_capacity`] of every class, computed at build time:
/// [`flush_medium`] runs at every medium miss and divided once a medium class there.
static SIDE_CAPACITY: [u32; NUM_CLASSES] = {
    let mut side = [0; NUM_CLASSES];
    let mut i = 0;
    while i < NUM_CLASSES {
        side[i] = config::medium_side_capacity(BLOCK_SIZE[i] as usize);
        i += 1;
    }
    side
};

/// A bin that overflows with the thread's own blocks while upkeep had shrunk it below
/// its initial capacity ([`shrink_idle`]) gets twice the capacity, up to that initial
/// one (`initial`), and keeps the block that overflowed it: the class is in use again,
/// by frees. Programs often free a batch of a class they stopped allocating a while
/// ago. The last phase of `c-half-freed` frees 48-byte blocks allocated before a refill
/// of other classes, which left the 48-byte bin at 16: each overflow gave back 8
/// blocks, and the phase's 1M frees made 63.4K flushes, where they make 15.4K now
/// (callgrind of a copy that counts the phase alone: 56.5M -> 47.7M instructions). A bin of other threads' blocks does not grow here: a
/// consumer's bins stay small ([`flush_quantum`]); grown back without that test,
/// `producer-consumer` took 1.75x its time (7 alternated runs).
fn regrow_capacity(bin: &mut Bin, initial: u32) {
    bin.set_limit((bin.limit() * 2).clamp(1, initial));
}

/// A class that missed gets a larger capacity, up to its profile's maximum.
fn grow_capacity(bin: &mut Bin, c: Class) {
    let max = config::cache_capacity(config::current(), block_size(c));
    if bin.limit() < max {
        bin.set_limit((bin.limit() * 2).clamp(1, max));
    }
}

/// A cached block of the medium class next above `c` (up to a quarter larger: four
/// classes a doubling); null if it has none, or `c` is the largest. The caller gets a
/// block of that class, whose frees find its class by lookup, as C's `free` does.
///
/// A block of 64 KiB..1 MiB is a span of its own: a program that replaces such blocks by
/// others of random sizes finds the bin of the size it wants empty at nearly every
/// allocation, while what it freed lies in the bins of other sizes. Each such miss took
/// the heap, gave those blocks back to their spans and carved a span for the one it
/// wanted (1,432 instructions a call in `c-large`, whose slots of 64 KiB..4 MiB hold a
/// medium block a quarter of the time). `c-large` took 1.07x the time of `709a854`,
/// whose every such block was a cached mapping of its own, and takes 1.02x this way
/// (9 alternated runs of `c-workloads c-large` under `LD_PRELOAD`); with blocks up to four
/// times the size 1.01x, but `c-large-written` then peaked at 79.8 MiB against 77.3 (7
/// runs). The block's pages past the request were written by its last user, so resident
/// already, or are never touched; but the block stays that large while it lives, and
/// is freed to serve again requests smaller than it: in a ring of buffers of 64 KiB..1
/// MiB (`c-buffer-ring`), blocks up to twice the size drifted to the largest classes,
/// and the ring peaked at 62.8 MiB, 58.8 with the next class alone (9 alternated runs;
/// jemalloc 53.5), at 1.03x the time (2,348 instructions an operation against 1,980,
/// callgrind, 20K operations); `c-large` 1.07x (noisy: 49.8-85.5 ms against 47.5-57.2),
/// `c-large-written` 1.02x, 77.8 MiB against 76.9.
#[cold]
#[inline(never)]
fn pop_larger(c: Class) -> *mut u8 {
    match c.index() + 1 {
        NUM_CLASSES => null_mut(),
        next => pop_wide(Class::new(next)),
    }
}

/// A block of medium class `c` at a multiple of `align` bytes (a power of two over a slab,
/// at most the block's size: [`crate::size_class::class_for`]), which the caller will
/// write as `fill` says: the first in the bin of `c` that lies there, else one the heap
/// carves there ([`carve_aligned`]). Null when memory is exhausted.
///
/// A medium block starts at any slab, so that the spans of 1 MiB blocks have more than
/// 4 places in a superslab; a bin of a medium class holds a few blocks at most
/// ([`config::MEDIUM_BIN_BYTES`]), a short walk.
#[cold]
#[inline(never)]
pub fn alloc_aligned<H: ThreadHooks>(c: Class, align: usize, fill: Fill) -> *mut u8 {
    let b = take_aligned(c, align);
    if !b.is_null() {
        return b;
    }
    let b = carve_aligned::<H>(c, align, fill);
    // Outside the heap's turn: it may start a thread, which allocates.
    retain::wake_if_wanted();
    b
}

/// [`alloc_aligned`]'s miss, with the heap held: what the bins of medium classes hold
/// goes back to its spans first, as at any medium miss ([`flush_medium`]), then the
/// heap carves a span at the alignment ([`Heap::refill_aligned`]).
fn carve_aligned<H: ThreadHooks>(c: Class, align: usize, fill: Fill) -> *mut u8 {
    let Some((tc, h, turn)) = enter_heap::<H>(c) else {
        return null_mut();
    };
    // SAFETY: `tc` and `h` are this thread's, the heap held.
    let b = unsafe {
        flush_medium(tc, h, c);
        (*h).refill_aligned(c, align, fill)
    };
    if !b.is_null() {
        return b.cast();
    }
    // The OS refused memory: give back what the caches hold, and try once more.
    drop(turn);
    trim::<H>();
    // SAFETY: this thread's heap; heaps are never unmapped.
    let _turn = unsafe { (*h).enter() };
    // SAFETY: this thread's heap, held.
    unsafe { (*h).refill_aligned(c, align, fill) }.cast()
}

/// The first block in the bin of `c` at a multiple of `align`, unlinked; null if none.
/// The walk stops at the bin's count, so a list a double free made cyclic ends it too.
fn take_aligned(c: Class, align: usize) -> *mut u8 {
    // SAFETY: the thread's own cache, which no other reference reaches meanwhile.
    let bin = unsafe { bin_of(cache(), c) };
    let count = bin.count();
    let mut link: *mut *mut Block = &raw mut bin.head;
    for _ in 0..count {
        // SAFETY: `link` is the bin's head or the link word of a block in it, free and
        // the cache's alone.
        let b = unsafe { *link };
        if b.is_null() {
            return null_mut();
        }
        if b as usize % align == 0 {
            // SAFETY: as above; `b` is linked in the bin.
            unsafe { *link = (*b).next };
            bin.room += 1;
            return b.cast();
        }
        // SAFETY: `b` is a free block of the bin, linked through its first word.
        link = unsafe { &raw mut (*b).next };
    }
    null_mut()
}

#[cold]
#[inline(never)]
fn alloc_slow<H: ThreadHooks>(c: Class, fill: Fill, wider_from: usize) -> *mut u8 {
    if is_medium(c) && block_size(c) > wider_from {
        let b = pop_larger(c);
        if !b.is_null() {
            return b;
        }
    }
    let b = refill_bin::<H>(c, fill);
    retain::wake_if_wanted();
    b
}

/// This thread's cache and heap (set up if need be), the heap held and the slow-path
/// visit of class `c` counted ([`note_slow_path`]); `None` when no heap can be had.
fn enter_heap<H: ThreadHooks>(
    c: Class,
) -> Option<(*mut ThreadCache, *mut Heap, SpinGuard<'static, ()>)> {
    let tc = cache();
    let h = heap::<H>(tc);
    if h.is_null() {
        return None;
    }
    // SAFETY: this thread's heap; heaps are never unmapped.
    let turn = unsafe { &*h }.enter();
    // SAFETY: `tc` and `h` are this thread's.
    unsafe { note_slow_path(tc, h, c) };
    Some((tc, h, turn))
}

/// [`alloc_slow`] with the heap held: refill the bin of class `c` and take a block.
fn refill_bin<H: ThreadHooks>(c: Class, fill: Fill) -> *mut u8 {
    let Some((tc, h, turn)) = enter_heap::<H>(c) else {
        return null_mut();
    };
    // SAFETY: the thread's own cache.
    let bin = unsafe { bin_of(tc, c) };
    if !bin.head.is_null() {
        // Setting up the thread allocated through us and left blocks here.
        let b = bin.head;
        // SAFETY: blocks in a bin are free and linked.
        bin.head = unsafe { (*b).next };
        bin.room += 1;
        return b.cast();
    }
    if is_medium(c) {
        // SAFETY: `tc` and `h` are this thread's.
        unsafe { flush_medium(tc, h, c) };
    }
    // SAFETY: the thread's own cache (taken anew: the flush went through the bins).
    let bin = unsafe { bin_of(tc, c) };
    start_capacity(bin, c);
    arm_aside(bin, c);
    grow_capacity(bin, c);
    let want = (bin.limit() as usize / 2).max(1);
    // SAFETY: `h` is this thread's heap.
    let growths = unsafe { (*h).growths() };
    // SAFETY: `h` is this thread's heap.
    let (mut first, mut n) = unsafe { (*h).refill(c, want, fill) };
    // SAFETY: as above.
    if unsafe { (*h).growths() } != growths {
        // The process mapped memory for the heap: what the bins of big blocks hold of
        // classes the thread stopped using goes back, so that their slabs serve the
        // classes it uses now. A thousand strings grown to 64 KiB at once by appends
        // (`c-string-builders`) left up to 1.2 MiB in the bins of each size they had
        // passed: 97.2 MiB peak without this, 89.2 with it (5 and 9 alternated runs).
        // Shrinking every idle class then, small ones too, cost `half-freed` 1.12x its
        // time (11 alternated runs): their bins refilled and overflowed more often.
        // SAFETY: `tc` and `h` are this thread's, `h` held.
        unsafe { shrink_idle(tc, h, big_bins()) };
    }
    let _turn = if n == 0 {
        // The OS refused memory: give back what the caches hold (`trim` takes the heap
        // itself), and try once more.
        drop(turn);
        trim::<H>();
        // SAFETY: as above.
        let turn = unsafe { (*h).enter() };
        // SAFETY: as above.
        (first, n) = unsafe { (*h).refill(c, want, fill) };
        if n == 0 {
            return null_mut();
        }
        turn
    } else {
        turn
    };
    // SAFETY: the thread's own cache (taken anew: `trim` flushed the bins); the refill
    // chain holds `n` linked blocks.
    unsafe {
        let bin = bin_of(tc, c);
        // A slab's whole free list may pass the capacity (the classes under 128 B have
        // more blocks to a slab than `cache_max`; a bin that missed lately has less
        // than its maximum): the capacity rises to hold it, or the next free would
        // flush it again. Idle bins shrink back (`note_slow_path`).
        if n as u32 > bin.limit() {
            bin.set_limit(n as u32);
        }
        bin.head = (*first).next;
        bin.set_count((n - 1) as u32);
        (*h).note_cached(c, bin.count());
    }
    first.cast()
}

/// Keeps the thread's `errno` across a slow path, which may make system calls: `free`
/// must not change `errno`, and the fast path never touches it.
pub(crate) struct KeepErrno(i32);

impl KeepErrno {
    pub(crate) fn new() -> Self {
        KeepErrno(crate::os::errno())
    }
}

impl Drop for KeepErrno {
    fn drop(&mut self) {
        crate::os::set_errno(self.0);
    }
}

/// The blocks a thread freed into full bins in scattered order, on their way back to
/// their spans' bitmaps: kept by address, [`STASH`] at most, all of one class.
///
/// A free that finds its bin full used to push the block and flush the bin's newest 64
/// back to their spans. Where a program frees a batch in random order, that pushed
/// block's line was cold (a miss to write the link), and the flush walked the 64 links
/// one after another, each step waiting for the last. A block that joins the stash is
/// not written at all, and its flush reads addresses out of an array. `c-list-rebuild`
/// (a list of 100K records of 32 B freed in random order, round after round), its free
/// phase (`c-workloads --phases c-list-rebuild 2000000`, 9 alternated runs, medians):
/// 9.66 ms against 11.56 before, mimalloc 2.0.9 7.84, mimalloc 3 9.01; the row 16.94 ms
/// against 18.76, mimalloc 2.0.9 16.44, mimalloc 3 17.14 (Intel Xeon, 2 cores, KVM).
///
/// Blocks freed in address order, or in its reverse, keep the bin's way: their flush
/// gives back runs of neighbours a span at a time, cheaper than a block at a time, and
/// their lines are no misses. So the second block in a row to lie within [`NEAR`] bytes
/// of the stash's last one overflows the bin instead ([`Stash::continued_by`]): a stash
/// that took them had `c-batch-fwd` take 1.15x its time. A stash of all classes, each
/// flush finding each block's class again, had `c-batch-rand` (mixed sizes) take 1.11x:
/// one class at a time, the classes the stash does not hold overflow their bins (7
/// alternated runs each, throwaway builds).
///
/// Invariant: `bin` is the thread's bin of one class while `len > 0`, null while it is
/// 0; `blocks[..len]` are blocks of that class, of at most [`STASH_MAX_BLOCK`] bytes,
/// that the thread gave up (one given up twice, a double free, is reported when its
/// bitmap bit is found set); each lies in a superslab its heap owns (a superslab holding
/// a handed-out block stays with its heap until the heap is retired, and [`teardown`]
/// empties the stash first). `len <= STASH`; all zero is the empty stash.
#[repr(C)]
struct Stash {
    len: u32,
    /// Whether the last block offered lay near the one before it ([`Stash::continued_by`]).
    near: bool,
    /// The bin of the stash's class (its class: [`class_of_bin`]): a free into a full bin
    /// finds whether its block may join the stash with one compare of its bin's address.
    bin: *mut Bin,
    blocks: [*mut Block; STASH],
}

/// The most blocks the stash holds, given back at once.
const STASH: usize = 64;

/// Keep the large block `k`, which the calling thread frees, for its next large request
/// (in its heap's [`crate::kept::KeptLarge`]); returns the block to give to the cache
/// ([`large::release`]): `k` itself, or a block kept before that it displaced.
pub fn keep_large(k: Retired) -> Option<Retired> {
    // A thread with no heap has not started, or has ended: its `teardown` gave back what
    // it kept, and nothing may be kept after it.
    with_kept_large(k, |kept, k| kept.keep(k)).unwrap_or_else(Some)
}

/// `f(kept, arg)` of the calling thread's kept large blocks, or `Err(arg)` when it has no
/// heap, keeps none ([`crate::kept::Access::Off`]) or the background return claims them
/// now ([`crate::kept::Keeper`]; the access noted in the heap first,
/// [`Heap::set_kept_access`], when it changed since the last use).
fn with_kept_large<T, R>(
    arg: T,
    f: impl FnOnce(&mut crate::kept::KeptLarge, T) -> R,
) -> Result<R, T> {
    // SAFETY: the thread's own cache.
    let h = unsafe { (*cache()).heap };
    if h.is_null() {
        return Err(arg);
    }
    // SAFETY: the thread's heap, ours until its `teardown`.
    let h = unsafe { &*h };
    let access = crate::kept::Access::wanted();
    if h.keeper().access() != access {
        h.set_kept_access(access);
    }
    // SAFETY: the heap's thread, outside its slow paths (no `turn`, no other use); `f`
    // cannot reach the blocks again.
    unsafe { h.keeper().with_blocks(arg, f) }
}

/// A large block for a request of `size` bytes aligned to `align` ([`large::alloc`]'s
/// arguments) from those the thread keeps ([`crate::kept::KeptLarge::reuse`]): `(ptr,
/// dirty)` as [`large::alloc`] returns, or `None` when none serves it.
pub fn reuse_large(size: usize, align: usize, resized: bool) -> Option<(*mut u8, usize)> {
    let want = large::want(size, align, resized)?;
    with_kept_large((), |kept, ()| kept.reuse(want, size)).ok()?
}

/// Blocks this close to the stash's last one overflow their bin instead ([`Stash`]).
const NEAR: usize = 2048;

/// The largest block the stash takes: larger ones overflow to the depot
/// ([`crate::depot::served`]) as a batch linked through them.
const STASH_MAX_BLOCK: usize = 1024;

/// The number of classes whose blocks may join the stash (those of at most
/// [`STASH_MAX_BLOCK`] bytes): they come first, in order of size, so the test on the
/// free's cold path compares the class's index with this.
const STASHED_CLASSES: usize = {
    let mut k = 0;
    while k < NUM_CLASSES && crate::size_class::BLOCK_SIZE[k] as usize <= STASH_MAX_BLOCK {
        k += 1;
    }
    k
};
const _: () = assert!(STASHED_CLASSES > 0 && STASHED_CLASSES < NUM_CLASSES);

/// Whether `a` and `b` lie within [`NEAR`] bytes of each other.
#[inline(always)]
fn near(a: *mut u8, b: *mut Block) -> bool {
    (a as usize).wrapping_sub(b as usize).wrapping_add(NEAR) < 2 * NEAR
}

impl Stash {
    /// Whether `p`, a block whose bin is `bin`, continues the stash: the stash
    /// holds that class and has blocks and room, and `p` is not the second block in a row
    /// to lie near the stash's last one (address order). One near block alone is taken:
    /// in a batch freed at random, one in a few hundred lies near the block before it,
    /// and each of them sent the bin's next 64 frees the bin's way.
    #[inline(always)]
    fn continued_by(&mut self, bin: *mut Bin, p: *mut u8) -> bool {
        let n = self.len as usize;
        // The stash holds blocks of the bin's class (`n >= 1`, by the invariant).
        if self.bin != bin || n >= STASH {
            return false;
        }
        // SAFETY: `1 <= n < STASH`.
        let near = near(p, unsafe { *self.blocks.get_unchecked(n - 1) });
        let in_order = near && self.near;
        self.near = near;
        !in_order
    }

    /// Whether a block whose bin is `bin` may start the stash anew: the stash is empty, or
    /// full of blocks of its class (it is flushed first).
    fn restarted_by(&self, bin: *mut Bin) -> bool {
        let n = self.len as usize;
        n == 0 || (n == STASH && self.bin == bin)
    }

    /// Add `p`, a block of the stash's class, to a stash that has room
    /// ([`Stash::continued_by`] said so).
    #[inline(always)]
    fn add(&mut self, p: *mut u8) {
        let n = self.len as usize;
        debug_assert!(n < STASH);
        // SAFETY: `n < STASH`, by the caller.
        unsafe { *self.blocks.get_unchecked_mut(n) = p.cast() };
        self.len = n as u32 + 1;
    }
}

/// The free of `p` into its full `bin` (its `room` 0): onto the stash when `p` continues
/// it, else [`free_overflow`]. Small and without calls but its tail call, so that it
/// saves no register.
///
/// # Safety
/// As for [`push`].
#[cold]
#[inline(never)]
unsafe fn free_full<H: ThreadHooks>(p: *mut u8, bin: *mut Bin) {
    let tc = cache();
    // SAFETY: the thread's own cache, reached in place; no other reference to it lives.
    let s = unsafe { &mut (*tc).stash };
    // A stash with blocks was started with the heap set up (`free_overflow`), so the heap
    // is there to ask.
    // SAFETY: `p` is a handed-out block (by the caller), the heap live while its thread is.
    if s.continued_by(bin, p) && unsafe { (*(*tc).heap).owns(p.cast()) } {
        s.add(p);
        return;
    }
    if bin_index(tc, bin) >= STASHED_CLASSES {
        // SAFETY: by the caller; the bin overflows as it always did.
        return unsafe { overflow::<H>(p, bin) };
    }
    // SAFETY: by the caller; the bin's class is one the stash takes.
    unsafe { free_overflow::<H>(p, bin) }
}

/// [`free_full`] for a block of a class the stash may take that does not continue the
/// stash: it starts the stash anew (flushing a full one first) when it may, else it
/// joins its bin, which overflows.
///
/// # Safety
/// As for [`push`]; `bin`'s class is below [`STASHED_CLASSES`].
#[inline(never)]
unsafe fn free_overflow<H: ThreadHooks>(p: *mut u8, bin: *mut Bin) {
    let tc = cache();
    // SAFETY: the thread's own cache.
    let h = unsafe { (*tc).heap };
    // SAFETY: the thread's own cache, reached in place.
    let s = unsafe { &mut (*tc).stash };
    // A bin with no capacity yet goes its own way: the class's first free ([`flush_bin`]).
    // SAFETY: the thread's own bin, reached in place.
    let started = unsafe { (*bin).limit() } > 0;
    // SAFETY: `p` is a handed-out block; a bin with a capacity is a live heap's (`Bin`).
    if started && s.restarted_by(bin) && unsafe { (*h).owns(p.cast()) } {
        if s.len > 0 {
            // SAFETY: `h` is this thread's heap.
            unsafe { flush_stash::<H>(tc, h) };
        }
        // SAFETY: as above (the flush went through the cache).
        let s = unsafe { &mut (*tc).stash };
        s.bin = bin;
        s.near = false;
        s.add(p);
        return;
    }
    // SAFETY: by the caller.
    unsafe { overflow::<H>(p, bin) }
}

/// Push `p` on its full `bin` as [`push`] would have, and flush the bin.
///
/// # Safety
/// As for [`push`], the bin full.
#[inline(always)]
unsafe fn overflow<H: ThreadHooks>(p: *mut u8, bin: *mut Bin) {
    // SAFETY: the thread's bin, and `p` the caller's to give up.
    unsafe {
        (*p.cast::<Block>()).next = (*bin).head;
        (*bin).head = p.cast();
        (*bin).room -= 1;
        free_slow::<H>(bin);
    }
}

/// Give the stash's blocks back to their spans, taking the heap's turn.
///
/// # Safety
/// `tc` is the calling thread's cache and `h` its heap, not held.
#[cold]
#[inline(never)]
unsafe fn flush_stash<H: ThreadHooks>(tc: *mut ThreadCache, h: *mut Heap) {
    let _errno = KeepErrno::new();
    // SAFETY: this thread's heap.
    let turn = unsafe { (*h).enter() };
    // SAFETY: the thread's own cache and heap, the heap held. The stash holds blocks, so
    // its bin is one of the thread's.
    unsafe { note_slow_path(tc, h, class_of_bin((*tc).stash.bin)) };
    // SAFETY: as above.
    unsafe { empty_stash(tc, h) };
    drop(turn);
    retain::wake_if_wanted();
}

/// Give the stash's blocks (if any) back to their spans.
///
/// # Safety
/// `tc` is the calling thread's cache and `h` its heap, held.
unsafe fn empty_stash(tc: *mut ThreadCache, h: *mut Heap) {
    // SAFETY: the thread's own cache.
    let s = unsafe { &mut (*tc).stash };
    let n = s.len as usize;
    if n == 0 {
        return;
    }
    let c = class_of_bin(s.bin);
    s.len = 0;
    s.bin = null_mut();
    // SAFETY: by the stash's invariant, blocks of class `c` of our superslabs that we
    // gave up; `h` is held.
    unsafe { (*h).give_back_scattered(c, &s.blocks[..n]) };
}

/// The free of a block that overflowed its bin.
///
/// # Safety
/// `bin` is a bin of the calling thread's cache, its list well formed.
#[cold]
#[inline(never)]
unsafe fn free_slow<H: ThreadHooks>(bin: *mut Bin) {
    let _errno = KeepErrno::new();
    // SAFETY: by the caller.
    unsafe { flush_bin::<H>(bin) };
    retain::wake_if_wanted();
}

/// [`free_slow`] with the heap held: flush the overflowing `bin`.
///
/// # Safety
/// As for [`free_slow`].
unsafe fn flush_bin<H: ThreadHooks>(bin: *mut Bin) {
    let c = class_of_bin(bin);
    let tc = cache();
    let h = heap::<H>(tc);
    if h.is_null() {
        return; // keep the blocks cached; nothing is lost
    }
    // SAFETY: this thread's heap.
    let _turn = unsafe { (*h).enter() };
    // SAFETY: `tc` and `h` are this thread's.
    unsafe { note_slow_path(tc, h, c) };
    // SAFETY: the thread's own cache.
    let bin = unsafe { bin_of(tc, c) };
    if bin.room >= 0 {
        return; // setting the thread up allocated the block just freed again
    }
    if start_capacity(bin, c) {
        // SAFETY: `h` is our heap, held; the bin is ours, its head the block just freed.
        unsafe { free_first(bin, h, c) };
        if bin.room >= 0 {
            return;
        }
        // More blocks than the capacity: frees while the heap could not be set up.
    }
    let initial = initial_capacity(config::current(), c);
    // SAFETY: `h` is our heap; the bin's head is a block just freed, in a live slab.
    if bin.limit() < initial && unsafe { (*h).owns(bin.head) } {
        regrow_capacity(bin, initial);
        if bin.room >= 0 {
            // Room for the block now: nothing to give back. The statistics hear of the
            // bin's count as from a flush.
            // SAFETY: `h` is our heap.
            unsafe { (*h).note_cached(c, bin.count()) };
            return;
        }
    }
    // A medium bin with no room yet (`start_capacity`) keeps none.
    let keep = bin.limit().saturating_sub(flush_quantum(bin.limit()));
    // SAFETY: `h` is our heap, the bin is ours.
    unsafe { flush_newest(bin, h, c, keep, Heap::give_back) };
}

/// The first free of small class `c` on this thread, whose block heads `bin`, which just
/// got its room ([`start_capacity`]): the bin keeps the block when the thread's heap
/// owns it; another thread's block goes back to its slab ([`Heap::flush`]: its owner's
/// remote list), not to the depot, whose next batch this thread's first miss would take.
///
/// # Safety
/// `bin` is the calling thread's bin of `c`, its head the block just freed; `h` is the
/// thread's heap, held.
unsafe fn free_first(bin: &mut Bin, h: *mut Heap, c: Class) {
    // SAFETY: `h` is our heap; the bin's head is a block just freed, in a live slab.
    if unsafe { (*h).owns(bin.head) } {
        // SAFETY: `h` is our heap.
        unsafe { (*h).note_cached(c, bin.count()) };
        return;
    }
    let keep = bin.count() - 1;
    // SAFETY: the bin's head is ours to give back; `h` is our heap.
    unsafe { flush_newest(bin, h, c, keep, Heap::flush) };
}

/// How many blocks an overflowing bin of capacity `limit` gives back: half, or at most
/// [`FLUSH_MAX`], and at least one.
///
/// The flush walks the blocks it gives back, newest first, and each step of that walk
/// reads the block it reaches. Half of a bin of 512 was freed over the last thousands of
/// the thread's frees (all classes together, when a program frees a batch in random
/// order); by then its lines have left the CPU's caches and every step waits on
/// memory: in batch-rand that wait was a fifth of the run (`perf record`). The newest
/// 64 are still cached. Small bins keep flushing half, so a thread that only frees (a
/// consumer, whose bins never grow) does not come here more often.
fn flush_quantum(limit: u32) -> u32 {
    (limit / 2).clamp(1, FLUSH_MAX)
}

/// The most blocks one overflow flushes; see [`flush_quantum`].
const FLUSH_MAX: u32 = 64;

/// How a flush gives blocks back: [`Heap::flush`] (to their slabs) or
/// [`Heap::give_back`] (to the depot when it takes them).
type GiveBack = unsafe fn(&Heap, Class, *mut Block, usize) -> *mut Block;

/// Flush the newest blocks of `bin` (class `c`) with `how` until `keep` remain. The newest
/// are the ones just freed, still in the CPU's cache, and cutting them off the head needs
/// no walk beyond the blocks given back; the older blocks stay for the next allocations.
///
/// # Safety
/// The bin is the calling thread's, its list well formed, and `h` the thread's heap.
unsafe fn flush_newest(bin: &mut Bin, h: *mut Heap, c: Class, keep: u32, how: GiveBack) {
    let n = bin.count().saturating_sub(keep);
    // SAFETY: the bin holds `count() >= n` blocks, ours to give back; `h` by the caller.
    unsafe {
        bin.head = how(&*h, c, bin.head, n as usize);
        bin.set_count(bin.count() - n);
        (*h).note_cached(c, bin.count());
    }
}

/// Tell the calling thread's heap how many blocks its cache holds in each class now, in
/// its bins and its stash (the heap's counts otherwise hold what the last slow path saw
/// of the bins), so that statistics read this thread exactly.
pub fn note_cached_now() {
    let tc = cache();
    // SAFETY: the thread's own cache.
    let h = unsafe { (*tc).heap };
    if h.is_null() {
        return;
    }
    // SAFETY: the thread's own cache.
    let (stashed, stash_bin) = unsafe { ((*tc).stash.len, (*tc).stash.bin) };
    for c in Class::all() {
        // SAFETY: the thread's own cache.
        let bin = unsafe { bin_of(tc, c) };
        let mut n = bin.count();
        if core::ptr::eq(bin, stash_bin) {
            n += stashed;
        }
        // SAFETY: the thread's own heap.
        unsafe { (*h).note_cached(c, n) };
    }
}

/// Flush every bin of the calling thread and retire its heap (thread exit). The cache is
/// left in its initial state, so a later allocation on this thread sets it up again.
///
/// # Safety
/// Called on the thread whose cache it is, outside any allocator call.
pub unsafe fn teardown() {
    let tc = cache();
    // SAFETY: the thread's own cache.
    let h = unsafe { (*tc).heap };
    if h.is_null() {
        return;
    }
    // SAFETY: this thread's heap; held until the heap is retired.
    let turn = unsafe { (*h).enter() };
    // SAFETY: the thread's own cache and heap, held (no other reference to the kept
    // blocks lives).
    unsafe {
        (*h).kept_large().release(false, os::now_ms);
        empty_stash(tc, h);
    }
    for c in Class::all() {
        // SAFETY: the thread's own cache.
        let bin = unsafe { bin_of(tc, c) };
        // SAFETY: the bin's blocks are ours to give back.
        unsafe { flush_newest(bin, h, c, 0, Heap::flush) };
        bin.set_limit(0);
    }
    // SAFETY: the thread's own cache; the heap is given up last.
    unsafe {
        (*tc).heap = null_mut();
        (*h).retire();
    }
    drop(turn);
    retain::wake_if_wanted();
}

/// Give cached free memory back to the OS now: the calling thread's cached blocks, the
/// depot's, the superslabs of exited threads, free slabs, empty superslabs in the pool,
/// cached large mappings. Other threads keep their caches.
pub fn trim<H: ThreadHooks>() {
    flush_all::<H>();
    crate::pool::trim();
    crate::large::trim();
}

/// Give the calling thread's cached blocks and the depot's back to their slabs, adopt the
/// superslabs of exited threads, bring home the blocks other threads freed into ours, and
/// give the pages of free slabs back to the OS.
fn flush_all<H: ThreadHooks>() {
    let tc = cache();
    let h = heap::<H>(tc);
    if h.is_null() {
        return;
    }
    // SAFETY: our heap.
    let turn = unsafe { (*h).enter() };
    // SAFETY: our cache and heap, held (no other reference to the kept blocks lives).
    unsafe {
        (*h).kept_large().release(false, os::now_ms);
        (*h).adopt_all();
        give_back_bins(tc, h, |_| true);
        (*h).collect_remote();
        (*h).decommit_all();
    }
    drop(turn);
    retain::wake_if_wanted();
}

/// Where a large block would take fresh memory with no empty superslab to take instead:
/// give back the blocks of small classes that the thread caches (its bins, its stash, the
/// depot) to their slabs, so that the superslabs they kept from emptying go to the pool.
///
/// A program in a phase of big buffers, whose small objects of the phase before were
/// freed, has its thread's bins full of them, spread over superslabs that then stay out
/// of reach; the bins of medium blocks, which a program mixing them with large ones
/// cycles, stay as they are.
pub fn give_back_small<H: ThreadHooks>() {
    let tc = cache();
    let h = heap::<H>(tc);
    if h.is_null() {
        return;
    }
    // SAFETY: our heap.
    let turn = unsafe { (*h).enter() };
    // SAFETY: our cache and heap, held.
    unsafe { give_back_bins(tc, h, |c| !is_medium(c)) };
    drop(turn);
}

/// Give the stash, the depot and the bins of the classes `which` picks back to their
/// slabs.
///
/// # Safety
/// `tc` is the calling thread's cache and `h` its heap, held.
unsafe fn give_back_bins(tc: *mut ThreadCache, h: *mut Heap, which: impl Fn(Class) -> bool) {
    // SAFETY: by the caller.
    unsafe {
        empty_stash(tc, h);
        (*h).empty_depot();
    }
    for c in Class::all().filter(|&c| which(c)) {
        // SAFETY: the thread's own cache and heap.
        unsafe { flush_newest(bin_of(tc, c), h, c, 0, Heap::flush) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slab_maps_byte_reaches_the_bin_of_its_class() {
        let tc = cache();
        for c in Class::all() {
            // SAFETY: the thread's cache; only addresses are compared.
            let bin: *mut Bin = unsafe { bin_of(tc, c) };
            assert_eq!(bin_of_mapped(MapByte::of(c)), bin, "{c:?}");
        }
    }

    #[test]
    fn the_stash_takes_the_classes_below_its_index_bound() {
        for c in Class::all() {
            let stashed = block_size(c) <= STASH_MAX_BLOCK;
            assert_eq!(c.index() < STASHED_CLASSES, stashed, "{c:?}");
        }
    }

    #[test]
    fn a_flush_gives_back_half_a_small_bin_and_at_most_the_newest_64() {
        assert_eq!(flush_quantum(1), 1);
        assert_eq!(flush_quantum(8), 4);
        assert_eq!(flush_quantum(128), 64);
        assert_eq!(flush_quantum(512), FLUSH_MAX);
        for limit in 1..=1024 {
            let n = flush_quantum(limit);
            assert!(
                n >= 1 && n <= limit.div_ceil(2) && n <= FLUSH_MAX,
                "{limit}"
            );
        }
    }
}
