//! Large blocks (over 1 MiB, blocks a resize made larger than
//! [`crate::block::GROW_LARGE_FROM`], or alignment the slabs cannot give): each is its own
//! mapping (or half a pair chunk, below), starting on a chunk boundary with a
//! [`LargeHeader`], the user's bytes at `offset` from the start.
//!
//! ```text
//!  chunk base                        base + offset                     base + map_size
//!  | LargeHeader (class_map all LARGE) ... | user bytes ...                       |
//! ```
//!
//! `offset` is 128, or the alignment when larger, so the user pointer lies in the first
//! chunk and `free` finds the header by masking. A block aligned to more than a chunk
//! (*over-aligned*, up to [`MAX_ALIGN`]) has `offset` [`CHUNK_SIZE`]: its mapping is
//! placed so that the user pointer, which starts a chunk, lies one chunk past the header,
//! and `free` finds the header a chunk below a pointer that starts one
//! ([`over_aligned_header`]). No other block's user pointer starts a chunk.
//! `realloc` grows into the cached extent that starts where the mapping ends, or grows or
//! moves the mapping with `mremap`, never copying (but for halves). A block shrunk to less
//! than half its mapping gives its tail back in place, unless the program wrote the tail:
//! then the caller copies it into a block of its new size and the whole old mapping goes
//! to the cache, resident, for the next buffer ([`realloc`]).
//!
//! Blocks of 1..2 MiB (header included, offset 128) take half a chunk instead: a *pair
//! chunk* ([`Pair`]) holds two, the high one with its header at `base + CHUNK_SIZE / 2`,
//! which `free` finds by masking too, once the base header's `pair` flag says so. A half
//! is resized in place while it fits and moved (copied) past it. Blocks a resize makes
//! never take a half: they tend to grow on.
//!
//! ```text
//!  chunk base (pair flag set)             base + CHUNK_SIZE / 2
//!  | LargeHeader | low block ...          | LargeHeader | high block ...          |
//! ```
//!
//! Freed mappings are kept committed in a cache of *extents* (within the budget of
//! [`crate::retain`]), so that a program cycling through large buffers does not pay
//! `mmap`, `munmap` and page faults every time: a freed mapping merges with cached
//! extents right before or after it in the address space, and a request takes the
//! lowest chunk that leaves it one chunk when it fits in one, else the shortest extent
//! that holds it ([`take_cached`]), split at a chunk boundary when the rest is a chunk or
//! more (so buffers freed together serve new buffers of any other sizes).
//!
//! Where the program writes its large blocks through ([`LastFresh`]), memory changes
//! kind: a block of a chunk or less that no cached extent holds takes an empty
//! superslab's chunk before a fresh mapping ([`Spare`]), and a superslab that the pool
//! cannot serve takes a cached chunk ([`take_chunk`]).
//!
//! Chunk bits ([`chunk_map`]): a live block has the bit of its first chunk only (its other
//! chunks hold user bytes, which must never be read as a header). In a cached extent, a
//! chunk may have its bit set only if it holds a header with `magic == 0` (left by a
//! block freed there, or written when the extent was split there), so a stale pointer
//! into it is told apart as no live block; handing a block out clears the bits of its
//! other chunks first.
//!
//! The base of every cached extent holds a header whose class map is all `MAP_LARGE`
//! (that of the block freed there, or one written where the extent was split), and
//! `mremap` moves it with the mapping: only a fresh mapping's class map is written when a
//! block is handed out.
//!
//! The `pair` flag of a header at a chunk base is nonzero only while that chunk is a pair
//! chunk in the table: every plain block's header and every header written for a cached
//! extent has it zero, and a pair's is cleared before its chunk goes to the cache. So
//! [`header_of`] reads a header at `base + CHUNK_SIZE / 2` only in a pair chunk, where
//! one is mapped and is never user bytes.

use crate::chunk_map::{self, ChunkHeader, CHUNK_SIZE, MAP_LARGE};
use crate::config;
use crate::os::{self, PAGE_SIZE};
use crate::retain;
use crate::sync::{AtomicU64, AtomicUsize, Ordering, SpinLock};
use core::num::NonZeroUsize;
use core::ptr::{null_mut, NonNull};

/// Largest alignment served: past a chunk, the block's mapping is placed for it, and
/// the address space that takes for a moment is `align` more than the block's.
pub const MAX_ALIGN: usize = 1 << 40;
const MIN_OFFSET: usize = 128;
/// Most bytes a large mapping may need (header included): larger requests are refused,
/// so a header whose length is over it is no header of ours.
const MAX_NEED: usize = isize::MAX as usize / 2;
const MAGIC: usize = 0x6861_6b6d_656d_4c47; // "hakmemLG"

/// Header of a large block: at the base of its mapping, or of its half of a pair chunk.
///
/// Invariant: `magic == MAGIC ^ base` (the header's own address) while the block is
/// handed out (so a stale or foreign pointer is told apart), `offset + usable <=
/// map_size` (for a half, `map_size` is the half's size).
#[repr(C)]
pub struct LargeHeader {
    header: ChunkHeader,
    magic: usize,
    map_size: usize,
    offset: usize,
    /// The size last asked for (by alloc or realloc).
    requested: usize,
    /// Read in two places only: in a header at a chunk base, nonzero exactly while the
    /// chunk is a pair chunk (the module's invariant, [`header_of`]); in the header of a
    /// live block, nonzero iff the block is half of a pair chunk ([`Large::is_pair`]).
    /// Elsewhere (a freed high half's header) it is left as it was.
    pair: AtomicUsize,
    /// Nonzero when a resize made the block or resized it last ([`alloc`]'s `resized`,
    /// [`realloc`]): its thread does not keep it when it is freed ([`Retired::resized`]).
    resized: usize,
}

const _: () = assert!(core::mem::size_of::<LargeHeader>() <= MIN_OFFSET);

/// Bytes handed out in large blocks (their whole mappings, or halves).
pub static LARGE_BYTES: AtomicUsize = AtomicUsize::new(0);

#[derive(Clone, Copy)]
struct Cached {
    base: usize,
    map_size: usize,
    /// When it was freed ([`os::now_ms`]).
    freed_ms: u64,
}

/// Most entries the cache can hold (profiles choose fewer).
pub const CACHE_SLOTS: usize = 64;

/// Freed mappings, oldest first, and the pair chunks.
struct Cache {
    entries: [Cached; CACHE_SLOTS],
    len: usize,
    bytes: usize,
    pairs: [Pair; PAIR_SLOTS],
    pairs_len: usize,
    /// Bytes of the free halves counted as retained ([`Pair::counts`]).
    free_half_bytes: usize,
}

static CACHE: SpinLock<Cache> = SpinLock::new(Cache {
    entries: [Cached {
        base: 0,
        map_size: 0,
        freed_ms: 0,
    }; CACHE_SLOTS],
    len: 0,
    bytes: 0,
    pairs: [Pair {
        base: 0,
        live: 0,
        dirty: [0; 2],
        freed_ms: [0; 2],
    }; PAIR_SLOTS],
    pairs_len: 0,
    free_half_bytes: 0,
});

/// Half a chunk: a pair chunk holds two blocks of at most this, header included.
const HALF: usize = CHUNK_SIZE / 2;
/// Blocks that need more than this and at most [`HALF`] (with the plain offset) take half
/// a pair chunk; smaller ones are large only when a resize made them so, and grow.
const PAIR_FROM: usize = HALF / 2;
/// Most pair chunks at once; past them, blocks take whole chunks as others do.
const PAIR_SLOTS: usize = 64;

/// A *pair chunk*: a chunk (an extent of exactly [`CHUNK_SIZE`], chunk aligned) that
/// holds two blocks, one per half, each with its header at its half's start and its user
/// bytes at [`MIN_OFFSET`] past it. The chunk's base header is the low half's, and its
/// `pair` flag tells [`header_of`] that a pointer in the high half has its header at
/// `base + HALF`.
///
/// Why: blocks of 1..2 MiB each had a chunk to themselves, and a program cycling blocks
/// of many sizes touched, over time, every page of every chunk past its first block's
/// end. Two to a chunk, they need fewer chunks.
///
/// Invariants (the table's entries, under the cache's lock):
/// - the base header's `pair` flag is nonzero exactly while the pair is in the table
///   (set before it enters, cleared once it left, before the chunk is a cached extent);
/// - a block in the low half ends before `base + HALF` (its need is at most `HALF`), so
///   the high half's header is never user bytes;
/// - a half whose `live` bit is clear is not handed out, and its header's magic is 0;
///   a set bit is a block handed out or a decommit in flight ([`expire_pairs`]);
/// - the bytes of half `h` past `dirty[h]` (from the half's start) are zero: a half
///   handed out is counted dirty whole, and a decommit lowers it only when the OS did it
///   (`MADV_DONTNEED`: pages given back read as zero; a lazy `MADV_FREE` would not do);
/// - a free half of a pair in the table with `dirty > PAGE_SIZE` counts `HALF` bytes
///   as retained ([`crate::retain`]) and in [`cached_bytes`] ([`Pair::counts`]).
#[derive(Clone, Copy)]
struct Pair {
    base: usize,
    /// Bit `h`: half `h` is handed out, or being decommitted.
    live: u8,
    dirty: [usize; 2],
    /// When each half was last freed ([`os::now_ms`]).
    freed_ms: [u64; 2],
}

impl Pair {
    fn half_base(&self, h: usize) -> usize {
        self.base + h * HALF
    }

    /// Whether half `h` is free with pages to give back: counted as retained.
    fn counts(&self, h: usize) -> bool {
        self.live & (1 << h) == 0 && self.dirty[h] > PAGE_SIZE
    }
}

/// No free half of a pair in use with pages to give back was freed before this
/// ([`os::now_ms`]; `u64::MAX`: there is none), so [`expire_pairs`] has nothing to do
/// until `retain_ms` after it (or the budget is exceeded). Written under the cache's
/// lock, read without it (a free of a large block looks at it and goes on).
static HALVES_DUE_MS: AtomicU64 = AtomicU64::new(u64::MAX);

/// Lower [`HALVES_DUE_MS`] to `ms` (under the cache's lock).
fn half_due(ms: u64) {
    HALVES_DUE_MS.fetch_min(ms, Ordering::Relaxed);
}

/// Where the user bytes start in a block's mapping: 128, or the alignment when larger,
/// at most a chunk (an over-aligned block's mapping is placed for the rest).
fn offset_for(align: usize) -> usize {
    align.clamp(MIN_OFFSET, CHUNK_SIZE)
}

/// A mapping that [`realloc`] grows by `mremap` to this size or more (block and header) is
/// advised huge whole: a buffer grown that far was written as it grew (`buffer-doubling`).
///
/// A block's first mapping took the same advice from this size through `c32c783`, whatever
/// the program did with it, and a block touched at its ends held 2 MiB for each end: the
/// fault path makes each advised stretch a huge page at its first touch, and `khugepaged`
/// collapses an advised stretch that has a single page present (`max_ptes_none` is 511 by
/// default). 32 live blocks of 4 KiB..8 MiB replaced 5,000 times, each written in its
/// first 8 KiB and its last byte (a buffer sized for the largest message; a throwaway
/// probe under `LD_PRELOAD`), peaked at 230.6 MiB, where jemalloc took 19.1, mimalloc
/// 2.0.9 25.0, glibc 31.0, tcmalloc 38.7 (mimalloc 3 261.8): over the cycles the cached
/// extents' every stretch was touched by some block. Now that advice, as a smaller
/// block's, goes by what the program did with its last block ([`Huge::IfWrittenThrough`]),
/// and the probe peaks at 22.8 MiB in 0.011-0.043 s against 0.06-0.55 (3 alternated runs).
/// The rows of big buffers lost nothing (`c-workloads` under `LD_PRELOAD`, 7 alternated
/// runs, medians, against `c32c783`): `c-big-zeroed` 0.88x the time, `c-big-buffers`
/// 0.94x, `c-phase-change` 0.98x, `c-large-written` 1.02x, `c-buffer-doubling` and
/// `c-large` 1.00x, `c-realloc-xthread` 0.98x at a peak of 40.3 MiB against 49.1 (its
/// blocks grown to 4-5 MiB and written at both ends).
const WHOLE_MAPPING_HUGE_FROM: usize = 2 * os::HUGE_PAGE_SIZE;

/// How [`obtain`] advises what it maps fresh or grows: whether for huge pages, and from
/// where.
#[derive(Clone, Copy)]
struct Advice {
    huge: Huge,
    /// The bytes at the start of the mapping that hold no user byte, whole huge pages:
    /// the padding before a block aligned to 2 MiB or more ([`offset_for`]), never
    /// advised. Such a block takes no spare chunk (whose pages may be huge already).
    ///
    /// Advised whole, 32 live blocks of 4..64 KiB aligned to 2 MiB, each written through,
    /// held 141 MiB resident against jemalloc's 8.4 (`posix_memalign` under `LD_PRELOAD`,
    /// 20K replacements): the header's 2 MiB stretch and the block's each a huge page.
    skip: usize,
}

impl Advice {
    /// The advice for a block of `size` bytes at `offset` in its mapping: as for a block
    /// of its user bytes alone, so that an alignment's padding makes no block huge (a
    /// padded block of at most [`crate::size_class::MAX_SMALL_SIZE`], which would have
    /// been a block of a class, takes none).
    fn of(size: usize, offset: usize, resized: bool) -> Advice {
        let skip = offset & !(os::HUGE_PAGE_SIZE - 1);
        let huge = if resized || (skip > 0 && size <= crate::size_class::MAX_SMALL_SIZE) {
            Huge::Never
        } else {
            Huge::IfWrittenThrough
        };
        Advice { huge, skip }
    }

    /// Advise `[base + skip, base + size)` for huge pages if `huge`.
    ///
    /// # Safety
    /// `[base, base + size)` is a mapping of [`os`] that the caller owns.
    unsafe fn apply(self, base: *mut u8, size: usize, huge: bool) {
        if huge && size > self.skip {
            // SAFETY: by the caller, a part of its mapping; the advice changes no byte.
            unsafe { os::advise_huge_pages(base.wrapping_add(self.skip), size - self.skip, true) };
        }
    }
}

/// Whether [`obtain`] advises what it maps fresh or grows for huge pages.
#[derive(Clone, Copy)]
enum Huge {
    /// Never: a block a resize makes (its bytes are copied or moved in, whatever the
    /// program writes: no evidence either way, and it may grow on by `mremap`, advised
    /// then as [`WHOLE_MAPPING_HUGE_FROM`] says), or a padded block of a class's size.
    Never,
    /// When the program wrote the last block it was given fresh memory for through
    /// ([`LastFresh::written_through`]).
    IfWrittenThrough,
}

impl Huge {
    fn wanted(self) -> bool {
        match self {
            Huge::Never => false,
            Huge::IfWrittenThrough => LAST_FRESH.written_through(),
        }
    }
}

/// The user bytes of the last block handed out in fresh memory (a fresh or grown mapping,
/// or the low half of a new pair chunk), the evidence [`Huge::IfWrittenThrough`] goes by:
/// a program that writes its big buffers through (a reader's or a codec's) pays a page
/// fault per 4 KiB of every fresh one, where huge pages pay one per 2 MiB; one that
/// touches its blocks at their ends (a table sized ahead, a ring) would hold 2 MiB for
/// each end (see [`WHOLE_MAPPING_HUGE_FROM`]). Which kind of program runs shows in
/// the blocks it had. Blocks a resize makes are no evidence (their bytes are copied or
/// moved in) and take no advice until `realloc` grows them ([`Huge::Never`]).
///
/// Fresh memory is taken rarely (a cached extent serves a block when one fits: `c-large`
/// makes 41 `mmap` calls in all for 300K blocks, `strace -c`), so the look costs one
/// `mincore` of the middle MiB of the last block ([`LastFresh::WINDOW`]) where a fresh
/// mapping costs an `mmap` and a fault per page written. Measured when the advice came,
/// before memory changed kind by the same evidence ([`take_chunk`]; `c-workloads` under
/// `LD_PRELOAD`, after the harness's warm-up, 7-9 alternated runs against the build
/// before): `c-phase-change` 0.90x the time (16,319 page faults in its 6 rounds down to
/// 1,534; peak 106.4 MiB against 102.9, blocks rounded up to whole huge pages),
/// `c-large-written` 0.90x-0.92x at the same peak, `c-large` and `c-realloc-xthread`
/// unchanged (their blocks are touched at their ends or made by resizes).
///
/// Only a guess: the two words are stored and loaded apart and the block may be freed,
/// reused or unmapped meanwhile. Sound whatever they hold, as `mincore` reads no byte of
/// the range it is asked about (an unmapped page makes it refuse: no evidence).
struct LastFresh {
    start: AtomicUsize,
    len: AtomicUsize,
}

static LAST_FRESH: LastFresh = LastFresh {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
};

impl LastFresh {
    /// Note the user bytes `[start, start + len)` of a block handed out in fresh memory.
    fn note(&self, start: usize, len: usize) {
        self.start.store(start, Ordering::Relaxed);
        self.len.store(len, Ordering::Relaxed);
    }

    /// Whether the last block noted is mostly resident in its middle ([`middle_resident`];
    /// `mincore` refuses a range no longer mapped: no evidence).
    fn written_through(&self) -> bool {
        middle_resident(
            self.start.load(Ordering::Relaxed),
            self.len.load(Ordering::Relaxed),
        )
    }

    /// Pages to look at in the middle of a block: 1 MiB, one `mincore` call however big
    /// the block (a 25 MiB buffer took 25), and in the middle, where a block touched at
    /// its ends or written from its start only in part has none resident.
    const WINDOW: usize = 256 * PAGE_SIZE;

    /// The whole pages, [`LastFresh::WINDOW`] at most, in the middle of the block
    /// `[start, start + len)`: `(first, bytes)`.
    fn window(start: usize, len: usize) -> (usize, usize) {
        let bytes = len.min(Self::WINDOW) & !(PAGE_SIZE - 1);
        let first = start.saturating_add((len - bytes) / 2) & !(PAGE_SIZE - 1);
        (first, bytes)
    }
}

/// Whether at least half the pages in the middle of `[start, start + len)`
/// ([`LastFresh::window`]) are resident now; false where `mincore` refuses the range (not
/// all mapped). Leaves `errno` as it was: an allocation that succeeds changes none.
fn middle_resident(start: usize, len: usize) -> bool {
    let (start, len) = LastFresh::window(start, len);
    let pages = len / PAGE_SIZE;
    let errno = os::errno();
    let resident = os::resident_pages(start, len);
    os::set_errno(errno);
    pages != 0 && resident.is_some_and(|r| 2 * r >= pages)
}

/// Zero `[p, p + len)`, the bytes of a large block just handed out that may have been
/// written (`calloc`'s). Where the program does not write its blocks through
/// ([`LastFresh`]), the whole pages among them of [`ZERO_BY_DECOMMIT_FROM`] or more are
/// given back instead (`MADV_DONTNEED`): they read as zero, and only those the program
/// touches come back, one fault each. Where it does, `memset` keeps them resident and
/// spares it a fault per page (`big-zeroed`: zero-filled buffers written through).
///
/// A 64 MiB buffer from `calloc`, 16 of its pages written and freed, 200 times over (a
/// throwaway probe under `LD_PRELOAD`, 3 alternated runs): hakmem took 0.55-0.58 s with
/// `memset` and peaked at 67.6 MiB, where jemalloc (which gives back freed extents over
/// 8 MiB at once) took 0.013 s and 3.7 MiB and glibc (a mapping of its own each time)
/// 0.015 s and 1.3 MiB; this way 0.0125-0.0135 s and 2.1 MiB (`sparse-zeroed` is the
/// shape).
///
/// # Safety
/// `[p, p + len)` lies in a large block handed out to the caller, past its header.
pub unsafe fn zero(p: *mut u8, len: usize) {
    let (start, end) = (p as usize, p as usize + len);
    let (first, last) = (start.next_multiple_of(PAGE_SIZE), end & !(PAGE_SIZE - 1));
    if last >= first + ZERO_BY_DECOMMIT_FROM && !LAST_FRESH.written_through() {
        // An allocation that succeeds changes no `errno`.
        let errno = os::errno();
        // SAFETY: whole pages of the caller's block, whose bytes it gives up for zeros.
        let done = unsafe { os::decommit(first as *mut u8, last - first, os::Decommit::Now) };
        os::set_errno(errno);
        if done {
            // SAFETY: the parts of the caller's range before and after those pages.
            unsafe {
                core::ptr::write_bytes(p, 0, first - start);
                core::ptr::write_bytes(last as *mut u8, 0, end - last);
            }
            return;
        }
    }
    // SAFETY: by the caller.
    unsafe { core::ptr::write_bytes(p, 0, len) };
}

/// The least a large block's zeroing gives back by `MADV_DONTNEED` rather than `memset`
/// ([`zero`]): below it the call costs about what the `memset` does (an estimate).
const ZERO_BY_DECOMMIT_FROM: usize = 256 * 1024;

/// A large block of at least `size` bytes aligned to `align`; `(ptr, dirty)`, where the
/// bytes from `ptr + dirty` on are known to be zero (0 for a fresh mapping; a cached
/// extent grown by `mremap` is zero past its old end), so `calloc` clears only the
/// first `dirty`. Null on failure. `resized`: the block is made by a resize, and takes
/// no half of a pair chunk (it may well grow on, which a half cannot do in place).
pub fn alloc(size: usize, align: usize, resized: bool, spare: Spare) -> (*mut u8, usize) {
    if align > MAX_ALIGN {
        return (null_mut(), 0);
    }
    let offset = offset_for(align);
    let Some(need) = size
        .checked_add(offset)
        .and_then(|n| os::round_up(n, PAGE_SIZE))
    else {
        return (null_mut(), 0);
    };
    if need > MAX_NEED {
        return (null_mut(), 0);
    }
    if takes_half(need, offset, resized) {
        if let Some(got) = alloc_half(size, spare) {
            return got;
        }
    }
    let advice = Advice::of(size, offset, resized);
    let got = if align > CHUNK_SIZE {
        obtain_placed(need, align, advice)
    } else {
        obtain(need, advice, spare)
    };
    let Some(Obtained {
        base,
        map_size,
        fresh,
        class_map,
        dirty,
    }) = got
    else {
        return (null_mut(), 0);
    };
    if dirty < map_size && !resized {
        LAST_FRESH.note(base + offset, size);
    }
    // The counter before the header: a locked instruction waits for every store before
    // it to complete, and the header's line is cold (the extent was freed a while ago).
    // Written last, the header's store completes beside the program's first writes to
    // the block, where it made the counter wait for it alone. With the split below that
    // finds its header written (`Cache::take_front`), 9 alternated runs: `large` 0.96x
    // the time, `c-large` 0.98x, `c-large-written` 0.98x.
    LARGE_BYTES.fetch_add(map_size, Ordering::Relaxed);
    retain::observe();
    // SAFETY: the mapping is ours and at least MIN_OFFSET bytes long.
    unsafe { write_header(base, map_size, offset, size, class_map, false, resized) };
    if fresh {
        chunk_map::insert(base);
    }
    ((base + offset) as *mut u8, dirty.saturating_sub(offset))
}

/// [`alloc`] of a block that takes half a pair chunk ([`Pair`]): a free half of the
/// pair at the lowest address, else the low half of a new pair. `None` when the table of
/// pairs is full or no mapping can be had (the caller then takes the usual path).
fn alloc_half(size: usize, spare: Spare) -> Option<(*mut u8, usize)> {
    let (half, dirty) = match take_half() {
        Some(got) => got,
        None => {
            let got = new_pair(spare)?;
            LAST_FRESH.note(got.0 + MIN_OFFSET, size);
            got
        }
    };
    // The counter before the header, as in `alloc`.
    LARGE_BYTES.fetch_add(HALF, Ordering::Relaxed);
    retain::observe();
    // SAFETY: the half is ours (its `live` bit is ours), its header page mapped.
    unsafe { write_header(half, HALF, MIN_OFFSET, size, false, true, false) };
    Some((
        (half + MIN_OFFSET) as *mut u8,
        dirty.saturating_sub(MIN_OFFSET),
    ))
}

/// A free half of the pair at the lowest address, now marked live; `(half's start,
/// dirty)` ([`Pair::dirty`]).
fn take_half() -> Option<(usize, usize)> {
    let mut cache = CACHE.lock();
    let n = cache.pairs_len;
    let i = (0..n)
        .filter(|&i| cache.pairs[i].live != 0b11)
        .min_by_key(|&i| cache.pairs[i].base)?;
    let pair = cache.pairs[i];
    let h = (pair.live & 1) as usize;
    if pair.counts(h) {
        cache.uncount_half();
    }
    let pair = &mut cache.pairs[i];
    pair.live |= 1 << h;
    let dirty = core::mem::replace(&mut pair.dirty[h], HALF);
    Some((pair.half_base(h), dirty))
}

/// A new pair chunk, with its low half marked live; `(low half's start, dirty)`. `None`
/// when the table is full or no mapping can be had.
fn new_pair(spare: Spare) -> Option<(usize, usize)> {
    if CACHE.lock().pairs_len == PAIR_SLOTS {
        return None;
    }
    // Each half is one 2 MiB stretch, a huge page when the program writes its blocks
    // through (an extent reused as it was keeps its advice, as for a plain block).
    let advice = Advice {
        huge: Huge::IfWrittenThrough,
        skip: 0,
    };
    let got = obtain(CHUNK_SIZE, advice, spare)?;
    let base = got.base;
    if got.map_size > CHUNK_SIZE {
        // The chunks past the first (their bits already clear) would lie unused.
        // SAFETY: the extent is ours, no byte of the tail in use.
        unsafe { os::shrink(base as *mut u8, got.map_size, CHUNK_SIZE) };
    }
    if got.class_map {
        // SAFETY: the mapping is ours.
        unsafe { write_free_header(base) };
    }
    // SAFETY: the extent is ours and a whole chunk, so both headers are mapped. The high
    // half's magic is 0 before the flag is set (a stale pointer there is no block); in
    // bytes known to be zero it is already.
    unsafe {
        if got.dirty > HALF {
            (*((base + HALF) as *mut LargeHeader)).magic = 0;
        }
        (*(base as *const LargeHeader))
            .pair
            .store(1, Ordering::Relaxed);
    }
    // What the old contents leave dirty in each half; a header is written in each.
    let dirty = |h: usize| got.dirty.saturating_sub(h * HALF).clamp(MIN_OFFSET, HALF);
    let now = os::now_ms();
    let pair = Pair {
        base,
        live: 0b01,
        dirty: [HALF, dirty(1)],
        freed_ms: [now, now],
    };
    let mut cache = CACHE.lock();
    if cache.pairs_len == PAIR_SLOTS {
        drop(cache);
        // SAFETY: ours alone, no half handed out.
        unsafe { end_pair(base) };
        cache_extent(Cached {
            base,
            map_size: CHUNK_SIZE,
            freed_ms: now,
        });
        return None;
    }
    let n = cache.pairs_len;
    cache.pairs[n] = pair;
    cache.pairs_len += 1;
    if pair.counts(1) {
        cache.count_half();
        half_due(now);
    }
    Some((base, dirty(0)))
}

/// Clear the pair flag of the chunk at `base`: its extent is a plain one again.
///
/// # Safety
/// The extent is ours alone, out of the table, no half handed out.
unsafe fn end_pair(base: usize) {
    // SAFETY: by the caller; the base header is mapped.
    unsafe {
        (*(base as *const LargeHeader))
            .pair
            .store(0, Ordering::Relaxed)
    };
}

/// Put the extent `c`, ours and unused, in the cache (or unmap what it rejects).
fn cache_extent(c: Cached) {
    if let Some(rejected) = put_cached(c, config::current()) {
        // SAFETY: ours and unused.
        unsafe { unmap(rejected) };
    }
}

/// Clear half `h`'s `live` bit in the pair at `chunk`, at `now`, with its new
/// [`Pair::dirty`] when `dirty` says one; when the other half is free too, the pair ends
/// and its chunk goes to the cache.
///
/// Kept as pairs when empty instead (for blocks of their sizes to reuse, so that a chunk
/// serving only halves would keep resident the ends of blocks of 1..2 MiB and one
/// serving whole blocks those of 2..4 MiB), `large` peaked higher for more chunks in all
/// (57.0 MiB at 1.3x the time, 5 alternated rounds; `large-written` 97.3 against 77.6),
/// and with such pairs taken whole by blocks no cached extent held, at 59.8 MiB.
fn release_half(chunk: usize, h: usize, now: u64, dirty: Option<usize>) {
    {
        let mut cache = CACHE.lock();
        let n = cache.pairs_len;
        let i = cache.pair_index(chunk);
        let pair = &mut cache.pairs[i];
        if let Some(d) = dirty {
            pair.dirty[h] = d;
        }
        pair.live &= !(1 << h);
        pair.freed_ms[h] = now;
        let pair = *pair;
        if pair.live != 0 {
            if pair.counts(h) {
                cache.count_half();
                half_due(now);
            }
            return;
        }
        if pair.counts(1 - h) {
            cache.uncount_half();
        }
        cache.pairs.copy_within(i + 1..n, i);
        cache.pairs_len -= 1;
    }
    // SAFETY: out of the table with both halves free: ours alone.
    unsafe { end_pair(chunk) };
    cache_extent(Cached {
        base: chunk,
        map_size: CHUNK_SIZE,
        freed_ms: now,
    });
}

/// Give back the pages of the free halves of pairs in use (past each half's header
/// page): those free since `retain_ms` at `now`, all of them while the retention budget
/// is exceeded, or all of them anyway (`all`). One at a time, with the lock released while
/// the OS works and the half's `live` bit held meanwhile; stops at a refusal (the half
/// keeps its bytes, and is tried again later).
fn expire_pairs(now: u64, all: bool) {
    while let Some((chunk, half)) = half_to_decommit(now, all) {
        let start = chunk + half * HALF + PAGE_SIZE;
        // SAFETY: the half is free and its `live` bit is ours: nobody uses its bytes
        // meanwhile.
        let done = unsafe { os::decommit(start as *mut u8, HALF - PAGE_SIZE, os::Decommit::Now) };
        // Only pages given back read as zero (`Pair`'s invariant).
        release_half(chunk, half, now, done.then_some(PAGE_SIZE));
        if !done {
            return;
        }
    }
}

/// A free half due for [`expire_pairs`], its `live` bit now taken: `(chunk, half)`.
fn half_to_decommit(now: u64, all: bool) -> Option<(usize, usize)> {
    let due = HALVES_DUE_MS.load(Ordering::Relaxed);
    if due == u64::MAX {
        return None;
    }
    let policy = config::current();
    let expired = |since: u64| retain::expired_under(policy, since, now);
    // Under the floor, the budget is never exceeded: no need to work it out.
    let over = retain::retained() > policy.retain_floor && retain::excess(now) > 0;
    if !(all || over || expired(due)) {
        return None;
    }
    let mut cache = CACHE.lock();
    let n = cache.pairs_len;
    let mut earliest = u64::MAX;
    for i in 0..n {
        let pair = cache.pairs[i];
        for half in 0..2 {
            if !pair.counts(half) {
                continue;
            }
            if all || over || expired(pair.freed_ms[half]) {
                cache.uncount_half();
                cache.pairs[i].live |= 1 << half;
                return Some((pair.base, half));
            }
            earliest = earliest.min(pair.freed_ms[half]);
        }
    }
    HALVES_DUE_MS.store(earliest, Ordering::Relaxed);
    None
}

/// Write the header at `base`, and its class map when `class_map` (a mapping that has no
/// large header yet: the module's invariant spares the others 64 stores); `pair`: the
/// block is half of a pair chunk.
///
/// # Safety
/// `[base, base + MIN_OFFSET)` is ours to write.
unsafe fn write_header(
    base: usize,
    map_size: usize,
    offset: usize,
    requested: usize,
    class_map: bool,
    pair: bool,
    resized: bool,
) {
    let h = base as *mut LargeHeader;
    // SAFETY: by the caller.
    unsafe {
        if class_map {
            for e in (*h).header.class_map.iter() {
                e.store(MAP_LARGE, Ordering::Relaxed);
            }
        }
        (*h).magic = MAGIC ^ base;
        (*h).map_size = map_size;
        (*h).offset = offset;
        (*h).requested = requested;
        (*h).pair.store(pair as usize, Ordering::Relaxed);
        (*h).resized = resized as usize;
    }
}

/// A live large block, named by its header.
///
/// A raw handle, not a reference: the header lies in the block's own mapping, which
/// [`release`] caches (and another thread may then hand out or unmap) and [`realloc`] may
/// move, and both write it. Every read and write goes through the raw pointer, so nothing
/// asserts the header unchanged or mapped past the call that uses it.
///
/// Invariant: the pointer is the header of a large block (the base of its mapping or of
/// its half of a pair chunk) that passed the check of [`header_of`] or
/// [`over_aligned_header`], and the block is live for as long as the handle is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Large(NonNull<LargeHeader>);

/// The large block whose user pointer is exactly `p`, if it is live.
///
/// # Safety
/// The chunk of `p` holds a hakmem header whose class map says LARGE.
pub unsafe fn header_of(p: *mut u8) -> Option<Large> {
    let mut base = chunk_map::chunk_base(p as usize);
    if base == p as usize {
        // Only an over-aligned block's user pointer starts a chunk.
        return over_aligned_header(p);
    }
    // SAFETY: by the caller, a large header is mapped at `base`; an atomic read.
    let paired = unsafe { (*(base as *const LargeHeader)).pair.load(Ordering::Relaxed) } != 0;
    if paired && p as usize - base >= HALF {
        // A pair chunk's high half (`Pair`'s invariant: its header is mapped).
        base += HALF;
    }
    // SAFETY: a large header is mapped at `base`, as above.
    unsafe { live_header(base, p) }
}

/// The header at `base` if it is that of a live block whose user pointer is `p`.
///
/// # Safety
/// A large header is mapped at `base` (not null: a chunk holds it).
unsafe fn live_header(base: usize, p: *mut u8) -> Option<Large> {
    let h = base as *mut LargeHeader;
    // SAFETY: by the caller; raw reads, no reference.
    let (magic, offset) = unsafe { ((*h).magic, (*h).offset) };
    let live = magic == MAGIC ^ base && base.wrapping_add(offset) == p as usize;
    live.then(|| Large(NonNull::new(h).expect("a mapped header is not at address 0")))
}

/// The over-aligned block whose user pointer is exactly `p`, if it is live: its header
/// lies a chunk below `p`, which starts a chunk of no bit of its own (user bytes).
/// Any `p` may be asked about; never faults.
pub fn over_aligned_header(p: *mut u8) -> Option<Large> {
    let addr = p as usize;
    if addr % CHUNK_SIZE != 0 || addr < CHUNK_SIZE {
        return None;
    }
    let base = addr - CHUNK_SIZE;
    if chunk_map::entry_of(base) != Some(MAP_LARGE) {
        return None;
    }
    // SAFETY: the chunk's bit is set and its class map says LARGE, so a large header
    // (a block's, a pair's or a cached extent's) is mapped at `base`. A pair's offsets
    // are 128, so its header never passes the test of `p`.
    unsafe { live_header(base, p) }
}

impl Large {
    fn ptr(self) -> *mut LargeHeader {
        self.0.as_ptr()
    }

    fn base(self) -> usize {
        self.ptr() as usize
    }

    fn map_size(self) -> usize {
        // SAFETY: the handle's invariant: a live block's header.
        unsafe { (*self.ptr()).map_size }
    }

    fn requested(self) -> usize {
        // SAFETY: as in `map_size`.
        unsafe { (*self.ptr()).requested }
    }

    /// Note a resize of the block in place to `new_size` bytes asked for.
    ///
    /// # Safety
    /// The caller owns the block.
    unsafe fn note_resize(self, new_size: usize) {
        // SAFETY: by the caller, the header is ours to write.
        unsafe {
            (*self.ptr()).requested = new_size;
            (*self.ptr()).resized = 1;
        }
    }

    /// Whether a resize made the block or resized it last.
    fn resized(self) -> bool {
        // SAFETY: as in `map_size`.
        unsafe { (*self.ptr()).resized != 0 }
    }

    /// Bytes usable from the user pointer.
    pub fn usable(self) -> usize {
        self.map_size() - self.offset()
    }

    /// Whether the block is half of a pair chunk.
    fn is_pair(self) -> bool {
        // SAFETY: as in `map_size`.
        unsafe { (*self.ptr()).pair.load(Ordering::Relaxed) != 0 }
    }

    /// Alignment the block was created with (at least 16).
    pub fn offset(self) -> usize {
        // SAFETY: as in `map_size`.
        unsafe { (*self.ptr()).offset }
    }
}

/// A large block freed by the program and not yet in the cache: kept by the thread that
/// freed it, for its next request that the block serves (`kept::KeptLarge`, [`reuse`]),
/// or on its way to the cache ([`release`]).
///
/// Invariant: `base` is the header of a large block that was live until [`retire`] made
/// this, and nothing has been done with it since; so its magic is 0 (a pointer into it is
/// no live block: a second free of it is reported), it keeps what a live block has (the
/// chunk bit of its first chunk only; for a half, its `live` bit in the pair table, so no
/// other request takes it and no decommit touches it), and it still counts in
/// [`LARGE_BYTES`], as the blocks in thread caches count as allocated. Nobody else holds
/// it, so it is not `Copy`: [`reuse`] or [`release`] consumes it.
///
/// Whether the block is a half is bit 0 of `tagged`, whether it was resized bit 1, the
/// rest is `base` (a page boundary, never 0): a `bool` field would be the niche of
/// `Option<Retired>` instead, and zero bytes would not be `None` (`kept` relies on them
/// being so).
#[derive(Debug)]
pub struct Retired {
    tagged: NonZeroUsize,
    map_size: usize,
}

impl Retired {
    /// Where the block starts (its header).
    pub fn base(&self) -> usize {
        self.tagged.get() & !(PAGE_SIZE - 1)
    }

    /// Whether the block is half of a pair chunk.
    fn half(&self) -> bool {
        self.tagged.get() & 1 != 0
    }

    /// Bytes of the block's mapping (or of its half).
    pub fn map_size(&self) -> usize {
        self.map_size
    }

    /// Whether a resize made the block or resized it last ([`LargeHeader`]'s `resized`).
    pub fn resized(&self) -> bool {
        self.tagged.get() & 2 != 0
    }

    /// Whether the block can serve a request of shape `want`: a half serves a half's
    /// request; a whole mapping serves a request that it holds and would not leave a chunk
    /// or more unused (as [`take_cached`] splits what is longer).
    pub fn serves(&self, want: Want) -> bool {
        if self.half() || want.half {
            return self.half() == want.half;
        }
        self.map_size >= want.need && self.map_size - want.need < CHUNK_SIZE
    }
}

/// The shape of a large request, for [`Retired::serves`].
#[derive(Clone, Copy, Debug)]
pub struct Want {
    need: usize,
    half: bool,
    resized: bool,
}

/// The shape of a request of `size` bytes aligned to `align` ([`alloc`]'s arguments) that
/// a retired block may serve: `None` when none may (an alignment over the plain offset, or
/// a size no mapping holds).
pub fn want(size: usize, align: usize, resized: bool) -> Option<Want> {
    if offset_for(align) != MIN_OFFSET {
        return None;
    }
    let need = os::round_up(size.checked_add(MIN_OFFSET)?, PAGE_SIZE)?;
    Some(Want {
        need,
        half: takes_half(need, MIN_OFFSET, resized),
        resized,
    })
}

/// Whether a block that needs `need` bytes at `offset` takes half a pair chunk.
fn takes_half(need: usize, offset: usize, resized: bool) -> bool {
    !resized && offset == MIN_OFFSET && need > PAIR_FROM && need <= HALF
}

/// Hand the retired block `k` out again for a request of `size` bytes that it serves
/// ([`Retired::serves`] of [`want`]'s shape): `(ptr, dirty)` as [`alloc`] returns.
pub fn reuse(k: Retired, want: Want, size: usize) -> (*mut u8, usize) {
    let base = k.base();
    // SAFETY: a retired block is ours alone, its header mapped (`Retired`'s invariant);
    // its class map is written already, and a half's `pair` flag stays set.
    unsafe {
        write_header(
            base,
            k.map_size,
            MIN_OFFSET,
            size,
            false,
            k.half(),
            want.resized,
        )
    };
    ((base + MIN_OFFSET) as *mut u8, k.map_size - MIN_OFFSET)
}

/// Stop the block of `h` being live (a pointer into it is no block from now on).
///
/// # Safety
/// `h` came from [`header_of`] for a block the caller gives up.
pub unsafe fn retire(h: Large) -> Retired {
    let k = Retired {
        tagged: h.0.addr() | h.is_pair() as usize | (h.resized() as usize) << 1,
        map_size: h.map_size(),
    };
    // SAFETY: the header is ours until the block is cached or unmapped.
    unsafe { (*h.ptr()).magic = 0 };
    k
}

/// Put the retired block `k` in the cache, at `now` ([`os::now_ms`]), and note it for the
/// background return ([`retain::want`]): the caller starts it ([`retain::wake_if_wanted`])
/// once it holds no heap and no lock. The caller then gives back what is over the budget
/// or kept too long, when due ([`expire`], [`retain::sweep_due`]).
pub fn release(k: Retired, now: u64) {
    LARGE_BYTES.fetch_sub(k.map_size, Ordering::Relaxed);
    let base = k.base();
    if k.half() {
        let chunk = chunk_map::chunk_base(base);
        release_half(chunk, (base - chunk) / HALF, now, None);
    } else {
        cache_extent(Cached {
            base,
            map_size: k.map_size,
            freed_ms: now,
        });
    }
    retain::want();
}

/// # Safety
/// The mapping is ours and unused.
unsafe fn unmap(c: Cached) {
    clear_chunk_bits(c.base, c.map_size);
    // SAFETY: by the caller.
    unsafe { os::unmap(c.base as *mut u8, c.map_size) };
}

/// Clear the chunk bits of every chunk that starts in `[base, base + size)`.
///
/// `base` need not be a chunk boundary: [`Cache::trim_oldest`] cuts whole chunks off the
/// end of an extent whose length may be any number of pages (a mapping grown by
/// `mremap` to its need), and the chunk holding the cut's start is the kept extent's.
/// Stepping from `base` itself cleared that chunk's bit, so a block later handed out
/// whole from the kept extent had none, and its `free` took it for a foreign pointer.
fn clear_chunk_bits(base: usize, size: usize) {
    let Some(first) = os::round_up(base, CHUNK_SIZE) else {
        return;
    };
    for k in (first..base + size).step_by(CHUNK_SIZE) {
        chunk_map::remove(k);
    }
}

/// Bits of the chunks after the first in `[base, base + size)`, cleared before the range
/// becomes one block whose bytes are the user's.
fn clear_inner_chunk_bits(base: usize, size: usize) {
    if size > CHUNK_SIZE {
        clear_chunk_bits(base + CHUNK_SIZE, size - CHUNK_SIZE);
    }
}

/// Mark `base`, the first chunk of a cached extent, as no live block: a header with
/// `magic == 0` and its chunk bit set.
///
/// # Safety
/// The first page of the extent is ours to write.
unsafe fn write_free_header(base: usize) {
    // SAFETY: by the caller.
    unsafe { write_header(base, 0, MIN_OFFSET, 0, true, false, false) };
    // SAFETY: as above; a zero magic matches no base.
    unsafe { (*(base as *mut LargeHeader)).magic = 0 };
    chunk_map::insert(base);
}

/// Most bytes a large block may map for a request that needs `need` (with its header):
/// a reused extent is split only when a chunk or more is left, so a block keeps its whole
/// chunks plus less than one more.
pub fn max_mapping(need: usize) -> usize {
    os::round_up(need, CHUNK_SIZE)
        .unwrap_or(usize::MAX)
        .saturating_add(CHUNK_SIZE)
}

/// The cached extent that holds `need` bytes best, split so that the block keeps whole
/// chunks and the rest, a chunk or more, stays cached (same age); or else the largest
/// smaller extent, for the caller to grow. Entries stay in age order.
///
/// Best, for a block of one chunk or less, is the lowest chunk of any extent that leaves
/// it one chunk (one of a chunk, or the first of a split), where it was the oldest of the
/// shortest extents. A program cycling such blocks then keeps reusing the chunks at the
/// bottom, and those above them serve only the peaks of its live set, so they gather
/// fewer resident pages (a block's end is the page it touches that its chunk may not have
/// had; `large` peaks at 52.5 MiB instead of 57.6, docs/MEMORY.md). The shortest alone
/// left `large` as it was, since freed neighbours merge, and the single chunks left
/// between live blocks lie anywhere. An extent a little longer than a chunk, which a
/// block would take whole, comes after those (`realloc-xthread` peaked 5-9 MiB higher
/// when the lowest of every extent came first).
///
/// Best for a longer block is still the shortest extent (the lowest among equals): it
/// needs a run of chunks, and taking a piece of a longer run when a shorter one holds it
/// cut the runs that a program cycling big buffers finds again (`c-big-buffers` in
/// `balanced`, 5 alternated runs: 1.2x the time and 110.1 MiB against 98.1 when a longer
/// block, too, took the lowest of the extents that leave it the fewest bytes).
fn take_cached(need: usize, smaller: bool) -> Option<Cached> {
    let take = os::round_up(need, CHUNK_SIZE).unwrap_or(usize::MAX);
    let mut cache = CACHE.lock();
    let n = cache.len;
    let entries = &cache.entries[..n];
    let fit = (0..n)
        .filter(|&i| entries[i].map_size >= need)
        .min_by_key(|&i| {
            let e = entries[i];
            if take == CHUNK_SIZE {
                // What the block would keep: one chunk, or the whole extent.
                let keeps = if splits(e.map_size, take) {
                    take
                } else {
                    e.map_size
                };
                (keeps, e.base)
            } else {
                (e.map_size, e.base)
            }
        });
    let Some(i) = fit else {
        if !smaller {
            return None;
        }
        let longest = (0..n).max_by_key(|&i| entries[i].map_size)?;
        return Some(cache.remove(longest));
    };
    Some(cache.take_front(i, take))
}

/// A chunk of the cache of extents for a superslab (`pool::acquire`), where the program
/// writes its large blocks through ([`LastFresh::written_through`]), so that memory big
/// buffers gave back serves small and medium blocks before a fresh mapping does, and while
/// the cache holds two chunks or more: the highest chunk (the last of the highest extent
/// that ends on a chunk boundary), which requests of a chunk or less, taking the lowest,
/// reuse least. Its chunk bit may be set or not; its bytes are anything.
///
/// Not where blocks are touched at their ends: a chunk that changes kind keeps the pages
/// the other kind had resident besides those its new use touches (`c-large`, 16 slots of
/// 64 KiB..4 MiB, peaked at 56.7 MiB against 54.7 with chunks going both ways).
pub fn take_chunk() -> Option<usize> {
    if !LAST_FRESH.written_through() {
        return None;
    }
    let mut cache = CACHE.lock();
    if cache.bytes < 2 * CHUNK_SIZE {
        return None;
    }
    let entries = &cache.entries[..cache.len];
    let i = (0..entries.len())
        .filter(|&i| {
            let e = entries[i];
            e.map_size >= CHUNK_SIZE && (e.base + e.map_size) % CHUNK_SIZE == 0
        })
        .max_by_key(|&i| entries[i].base)?;
    Some(cache.take_back_chunk(i))
}

/// Take the front of the cached extent that starts at `end` (the end of a live block's
/// mapping) for that block to grow into: `want` bytes rounded up to whole chunks, or the
/// whole extent when less than a chunk would be left. Returns the bytes taken, their
/// chunk bits cleared (they are the block's user bytes now).
///
/// No system call, and the pages keep what they had resident: a buffer that grows again
/// where a freed one lay (a vector doubling, round after round) takes no page faults and
/// no `mremap`, where moving the mapping gave it fresh pages every time. An extent too
/// short is taken whole all the same, and moves with the block if `mremap` must move it.
fn take_next_extent(end: usize, want: usize) -> Option<usize> {
    let mut cache = CACHE.lock();
    let i = (0..cache.len).find(|&i| cache.entries[i].base == end)?;
    let take = os::round_up(want, CHUNK_SIZE).unwrap_or(usize::MAX);
    let taken = cache.take_front(i, take).map_size;
    // Under the lock still: nothing else hands these chunks out meanwhile.
    clear_chunk_bits(end, taken);
    Some(taken)
}

/// Whether a cached extent of `map_size` bytes is split to give `take` (whole chunks):
/// when a chunk or more would be left.
fn splits(map_size: usize, take: usize) -> bool {
    map_size >= take.saturating_add(CHUNK_SIZE)
}

impl Cache {
    /// Index of the pair at `chunk`, which is in the table.
    fn pair_index(&self, chunk: usize) -> usize {
        (0..self.pairs_len)
            .find(|&i| self.pairs[i].base == chunk)
            .expect("a pair with a live bit stays in the table")
    }

    /// A free half starts counting as retained ([`Pair::counts`]).
    fn count_half(&mut self) {
        self.free_half_bytes += HALF;
        retain::add(HALF);
    }

    /// A free half stops counting as retained.
    fn uncount_half(&mut self) {
        self.free_half_bytes -= HALF;
        retain::sub(HALF);
    }

    /// Take `excess` bytes (rounded up to chunks) off the end of the oldest extent, or the
    /// whole extent when it is not larger; returns what to unmap.
    fn trim_oldest(&mut self, excess: usize) -> Cached {
        let cut = os::round_up(excess, CHUNK_SIZE).unwrap_or(usize::MAX);
        let old = &mut self.entries[0];
        if old.map_size <= cut {
            return self.remove(0);
        }
        old.map_size -= cut;
        let tail = Cached {
            base: old.base + old.map_size,
            map_size: cut,
            freed_ms: old.freed_ms,
        };
        self.bytes -= cut;
        retain::sub(cut);
        tail
    }

    /// Take the first `take` bytes (whole chunks) of entry `i` when a chunk or more would
    /// be left, else the whole entry. The rest stays cached, as old as it was, with a free
    /// header at its new base: one written there, unless the chunk's bit is set, which in
    /// a cached extent says a header with `magic == 0` is there already (the module's
    /// invariant), and its class map all `MAP_LARGE` and `pair` zero (it is a large
    /// block's header or one written for a cached extent, and a pair's was cleared
    /// before its chunk was cached): a split where a block was freed writes nothing, so
    /// no cold line waits on the locked instructions that follow.
    fn take_front(&mut self, i: usize, take: usize) -> Cached {
        let c = self.entries[i];
        if !splits(c.map_size, take) {
            return self.remove(i);
        }
        let rest = &mut self.entries[i];
        rest.base += take;
        rest.map_size -= take;
        let rest_base = rest.base;
        self.bytes -= take;
        retain::sub(take);
        if !chunk_map::contains(rest_base) {
            // SAFETY: the rest is a cached extent, ours.
            unsafe { write_free_header(rest_base) };
        }
        Cached {
            map_size: take,
            ..c
        }
    }

    /// Take the last chunk of entry `i` (which ends on a chunk boundary), or the whole
    /// entry when it is one chunk; the rest stays cached as it was.
    fn take_back_chunk(&mut self, i: usize) -> usize {
        let e = &mut self.entries[i];
        if e.map_size == CHUNK_SIZE {
            return self.remove(i).base;
        }
        e.map_size -= CHUNK_SIZE;
        let base = e.base + e.map_size;
        self.bytes -= CHUNK_SIZE;
        retain::sub(CHUNK_SIZE);
        base
    }

    /// Take entry `i` out, keeping the others in age order.
    fn remove(&mut self, i: usize) -> Cached {
        let c = self.entries[i];
        self.entries.copy_within(i + 1..self.len, i);
        self.len -= 1;
        self.bytes -= c.map_size;
        retain::sub(c.map_size);
        c
    }
}

/// Where a large block that no cached extent holds may take a whole chunk before a fresh
/// mapping, when the program writes its large blocks through ([`obtain`]): the chunk of an
/// empty superslab (`pool::take_empty_chunk`, a layer above this one), its chunk bit set
/// and its spans' slab-map bytes clear, its pages as they were (resident ones stay).
pub type Spare = fn() -> Option<usize>;

/// A mapping [`obtain`] found for a block.
struct Obtained {
    base: usize,
    map_size: usize,
    /// Fresh: zero throughout, not yet in the chunk map, and advised when [`obtain`] was
    /// asked to (`huge`).
    fresh: bool,
    /// Its class map is not all `MAP_LARGE` (a fresh mapping's, or a superslab's chunk
    /// from [`Spare`]), so the header written first writes it.
    class_map: bool,
    /// The bytes from `base + dirty` on are known to be zero (never written): 0 for a
    /// fresh mapping, the old length for a cached extent grown by `mremap`, `map_size`
    /// for a cached extent used as it was.
    dirty: usize,
}

/// A mapping of at least `need` bytes: from the cache (grown with `mremap` when the
/// cached one is too small, which keeps its resident pages) or fresh; what is grown or
/// fresh is advised for huge pages as `advice` says.
fn obtain(need: usize, advice: Advice, spare: Spare) -> Option<Obtained> {
    let mut cached = take_cached(need, need > CHUNK_SIZE);
    if let Some(c) = cached.filter(|c| c.map_size >= need) {
        // The block keeps the whole extent: its pages past `need` stay resident if they
        // were (less than two chunks: the extent was split otherwise).
        clear_inner_chunk_bits(c.base, c.map_size);
        return Some(Obtained {
            base: c.base,
            map_size: c.map_size,
            fresh: false,
            class_map: false,
            dirty: c.map_size,
        });
    }
    let huge = advice.huge.wanted();
    if cached.is_none() && need <= CHUNK_SIZE && advice.skip == 0 {
        // Written through, a block uses the superslab's resident pages as they are.
        if let Some(base) = huge.then_some(spare).and_then(|spare| spare()) {
            return Some(Obtained {
                base,
                map_size: CHUNK_SIZE,
                fresh: false,
                class_map: true,
                dirty: CHUNK_SIZE,
            });
        }
        cached = take_cached(need, true);
    }
    if let Some(c) = cached {
        clear_chunk_bits(c.base, c.map_size);
        // Advised whole, it grows to a whole 2 MiB: grown to `need` exactly, the part past
        // the last 2 MiB boundary could never be a huge page (`c-big-zeroed` took 2,600
        // faults of 4 KiB there).
        let size = if huge {
            os::round_up(need, os::HUGE_PAGE_SIZE).unwrap_or(need)
        } else {
            need
        };
        // SAFETY: a cached mapping is ours and unused.
        let p = unsafe { remap(c.base, c.map_size, size, huge && advice.skip == 0) };
        if !p.is_null() {
            chunk_map::insert(p as usize);
            // The grown part is fresh and advised like a fresh mapping this size.
            // SAFETY: the mapping just grown is ours.
            unsafe { advice.apply(p, size, huge) };
            return Some(Obtained {
                base: p as usize,
                map_size: size,
                fresh: false,
                class_map: false,
                dirty: c.map_size,
            });
        }
        // SAFETY: still ours and unused; its chunk bit is already cleared.
        unsafe { os::unmap(c.base as *mut u8, c.map_size) };
    }
    // Whole chunks, so that the mappings of neighbouring blocks adjoin and merge into one
    // extent when freed (the pages past `need` are never touched unless used).
    let size = os::round_up(need, CHUNK_SIZE)?;
    let p = os::map_aligned(size, CHUNK_SIZE);
    if p.is_null() {
        return None;
    }
    // Before the caller writes the header, so its stretch can be a huge page too.
    // SAFETY: the fresh mapping is ours.
    unsafe { advice.apply(p, size, huge) };
    Some(fresh(p as usize, size))
}

/// A fresh mapping of `size` bytes at `base`, as [`obtain`] hands it on.
fn fresh(base: usize, size: usize) -> Obtained {
    Obtained {
        base,
        map_size: size,
        fresh: true,
        class_map: true,
        dirty: 0,
    }
}

/// A fresh mapping of at least `need` bytes for an over-aligned block (`align` over a
/// chunk, the block's `offset` a chunk): placed so that its second chunk starts at a
/// multiple of `align`. Mapped `align` longer than it needs, at a chunk boundary, then
/// trimmed at both ends. No cached extent serves it: its place is what it needs.
fn obtain_placed(need: usize, align: usize, advice: Advice) -> Option<Obtained> {
    debug_assert!(align > CHUNK_SIZE && align.is_power_of_two());
    let size = os::round_up(need, CHUNK_SIZE)?;
    let over = size.checked_add(align - CHUNK_SIZE)?;
    let p = os::map_aligned(over, CHUNK_SIZE);
    if p.is_null() {
        return None;
    }
    let start = p as usize;
    // The first multiple of `align` past the first chunk, within `align - CHUNK_SIZE` of
    // it: the mapping's second chunk.
    let base = ((start + CHUNK_SIZE).next_multiple_of(align)) - CHUNK_SIZE;
    // SAFETY: both ends lie in the mapping just made, outside `[base, base + size)`, and
    // nobody has seen them.
    unsafe {
        os::unmap(p, base - start);
        os::unmap((base + size) as *mut u8, start + over - (base + size));
    }
    // SAFETY: what is left of the fresh mapping is ours.
    unsafe { advice.apply(base as *mut u8, size, advice.huge.wanted()) };
    Some(fresh(base, size))
}

/// Resize the mapping `[base, base + old)` to `new` bytes with `mremap`, in place or
/// moved ([`os::remap_aligned`]); null on failure, the mapping untouched.
///
/// `mremap` takes one kernel mapping only, and an extent merged from differently advised
/// neighbours (an advised mapping beside one that is not) is several. When the first
/// try fails, the whole range is advised alike, as a mapping of `new` bytes would be
/// (`huge`), which makes it
/// one kernel mapping again, and the move is tried once more: the alternative is a copy
/// into fresh pages.
///
/// # Safety
/// The range is a whole large mapping (or cached extent) the caller owns and does not
/// use meanwhile; on success the old addresses (if different) are not used again.
unsafe fn remap(base: usize, old: usize, new: usize, huge: bool) -> *mut u8 {
    // SAFETY: by the caller.
    let p = unsafe { os::remap_aligned(base as *mut u8, old, new, CHUNK_SIZE) };
    if !p.is_null() {
        return p;
    }
    // SAFETY: the caller's mapping; the advice changes no byte of it.
    unsafe { os::advise_huge_pages(base as *mut u8, old, huge) };
    // SAFETY: by the caller, as above.
    unsafe { os::remap_aligned(base as *mut u8, old, new, CHUNK_SIZE) }
}

/// Cache `c` (the newest entry), evicting the oldest when the cache is full; returns
/// what must be unmapped (outside the lock): `c` itself when it cannot be cached.
fn put_cached(c: Cached, policy: &config::Policy) -> Option<Cached> {
    let max = policy.large_cache_entries.min(CACHE_SLOTS);
    if max == 0 {
        return Some(c);
    }
    let mut c = c;
    let mut cache = CACHE.lock();
    // Merge with the extents right before and after it: their headers stay (magic 0).
    while let Some(i) = (0..cache.len).find(|&i| {
        let e = cache.entries[i];
        e.base + e.map_size == c.base || c.base + c.map_size == e.base
    }) {
        let e = cache.remove(i);
        c = Cached {
            base: e.base.min(c.base),
            map_size: e.map_size + c.map_size,
            freed_ms: c.freed_ms,
        };
    }
    let evicted = (cache.len >= max).then(|| cache.remove(0));
    let n = cache.len;
    cache.entries[n] = c;
    cache.len += 1;
    cache.bytes += c.map_size;
    retain::add(c.map_size);
    evicted
}

/// Give back the pages of the block of `h` past the huge page that holds its last
/// requested byte (in a half of a pair chunk, past that byte's page), keeping its
/// mapping: the block a shrink moved into ([`realloc`]) may have taken a cached extent
/// whose pages were all written, and it will not grow. `c-shrunk-buffers` (throwaway
/// builds, 5-7 alternated runs): with none given back, 174-212 ms at 274.9 MiB
/// (tcmalloc's 241.2 the least of the field); every page past the end, 260-275 ms at
/// 235.6 MiB (the next block there faults them back); whole huge pages only, 186-219 ms
/// at 270.8; and halves by the page too, as here, 224 ms at 260.7 (tcmalloc 247 in that set).
/// The price is page faults, where the next block there finds those pages gone: the row
/// at `8f31557` against a build without the give-back (3 alternated runs of `c-workloads
/// c-shrunk-buffers` after 512 MiB warmed) took 0.181-0.187 s and 10.5K faults at 266.9
/// MiB against 0.155-0.163 s and 3.7K at 281.5 (mimalloc 3 0.165-0.192 s, 81 faults in
/// huge pages, at 301.1). On this virtual machine a fault costs about 4 µs (an estimate:
/// 6.9K more faults, about 25 ms more); the memory is what the issue's bound on peak RSS
/// (1.1x the least of mimalloc 3, jemalloc and tcmalloc) asks for here.
///
/// # Safety
/// `h` is the header of a live block the caller owns.
pub unsafe fn give_back_past_end(h: Large) {
    let end = h.base() + h.offset() + h.requested();
    let grain = if h.is_pair() {
        PAGE_SIZE
    } else {
        os::HUGE_PAGE_SIZE
    };
    let (first, map_end) = (end.next_multiple_of(grain), h.base() + h.map_size());
    if first < map_end {
        let errno = os::errno();
        // SAFETY: whole pages of the block past its requested bytes, which it does not need.
        unsafe { os::decommit(first as *mut u8, map_end - first, os::Decommit::Now) };
        os::set_errno(errno);
    }
}

/// Unmap the cached mappings over the retention budget or kept too long at `now`
/// ([`os::now_ms`]), oldest first.
pub fn expire(now: u64) {
    expire_pairs(now, false);
    loop {
        let oldest = {
            let mut cache = CACHE.lock();
            if cache.len == 0 {
                return;
            }
            let old = cache.entries[0];
            let excess = retain::excess(now);
            if retain::expired(old.freed_ms, now) {
                cache.remove(0)
            } else if excess == 0 {
                return;
            } else {
                cache.trim_oldest(excess)
            }
        };
        // SAFETY: evicted mappings are unused.
        unsafe { unmap(oldest) };
    }
}

/// Resize the large block with header `h` to hold `new_size` bytes, in place or by moving
/// the mapping (no copy). Null on failure, for a half of a pair chunk that the size
/// outgrows or leaves below a half's sizes, and for a block that shrinks to less than half
/// its mapping with the middle of its tail mostly resident: the block untouched, for the
/// caller to move (and then to fit, [`give_back_past_end`]).
///
/// Such a tail was written, so the program's next buffer would find its pages resident
/// in the cache, where given back in place (as a tail never written still is) they came
/// back one fault each. A program that fills buffers of 1..16 MiB sized for the largest
/// input and shrinks each to the 1/32..1/2 it holds (`c-shrunk-buffers`, 64 live,
/// under `LD_PRELOAD`, 5 alternated runs after 512 MiB warmed) took 1,073 ms at a peak of
/// 187.4 MiB in place, 193 ms at 260.7 MiB this way (tcmalloc 216 ms at 241.2,
/// mimalloc 3 176 ms at 294.0, jemalloc 1,574 ms at 309.9). Keeping the block in place
/// and caching only the chunks past its last one (throwaway builds): 1.5-1.7 s at 388
/// MiB (493 MB mapped at the peak), the pieces too small for the next buffer;
/// moving only blocks that a class or a half takes: 488 ms at 222.0 MiB.
/// `c-realloc-xthread`, whose blocks grow and shrink at random, kept its time (1.00x, 7
/// runs) and peaked at 45.5 MiB against 38.5 (jemalloc 58-60).
///
/// # Safety
/// `h` came from [`header_of`] for a block the caller owns.
pub unsafe fn realloc(h: Large, new_size: usize) -> *mut u8 {
    let base = h.base();
    let (offset, old_map) = (h.offset(), h.map_size());
    let Some(need) = new_size
        .checked_add(offset)
        .and_then(|n| os::round_up(n, PAGE_SIZE))
    else {
        return null_mut();
    };
    if need > MAX_NEED {
        return null_mut();
    }
    if h.is_pair() {
        // A half neither shrinks nor grows its mapping: in place while it fits and is a
        // half's size, else the caller moves the block (a block shrunk this far would
        // hold the whole half).
        if need > old_map || need <= PAIR_FROM {
            return null_mut();
        }
        // SAFETY: our header.
        unsafe { h.note_resize(new_size) };
        return (base + offset) as *mut u8;
    }
    // A block shrinks when it keeps less than half its mapping (not when one that got a
    // roomy cached mapping grows into it, or gives back little).
    let shrinking = new_size < h.requested() && need < old_map / 2;
    let tail_written = shrinking && middle_resident(base + need, old_map - need);
    if tail_written {
        return null_mut();
    }
    // SAFETY: our header.
    unsafe {
        (*h.ptr()).requested = new_size;
        (*h.ptr()).resized = 1;
    }
    if need <= old_map {
        if shrinking {
            // SAFETY: the tail past `need` holds nothing the block still needs.
            unsafe { os::shrink(base as *mut u8, old_map, need) };
            // SAFETY: our header.
            unsafe { (*h.ptr()).map_size = need };
            LARGE_BYTES.fetch_sub(old_map - need, Ordering::Relaxed);
        }
        return (base + offset) as *mut u8;
    }
    // Grow a little more than asked, so that repeated growth does not remap every time.
    let target = os::round_up(need + need / 8, PAGE_SIZE).unwrap_or(need);
    // The cached extent right after the mapping first, resident pages and all; moved by
    // `mremap`, a block takes fresh pages for all it grows by.
    let mut old_map = old_map;
    if let Some(taken) = take_next_extent(base + old_map, target - old_map) {
        old_map += taken;
        // SAFETY: our header; the chunks taken are the block's now.
        unsafe { (*h.ptr()).map_size = old_map };
        LARGE_BYTES.fetch_add(taken, Ordering::Relaxed);
        if need <= old_map {
            retain::observe();
            return (base + offset) as *mut u8;
        }
    }
    // The chunk bit goes before the move: once the old range is free, another thread may
    // map a chunk there and set its bit, which we must not clear.
    chunk_map::remove(base);
    // SAFETY: the whole mapping is ours.
    let moved = unsafe { remap(base, old_map, target, target >= WHOLE_MAPPING_HUGE_FROM) };
    if moved.is_null() {
        chunk_map::insert(base);
        return null_mut();
    }
    let new_base = moved as usize;
    chunk_map::insert(new_base);
    // SAFETY: the header moved with the mapping.
    unsafe {
        (*(new_base as *mut LargeHeader)).requested = new_size;
        (*(new_base as *mut LargeHeader)).map_size = target;
        (*(new_base as *mut LargeHeader)).magic = MAGIC ^ new_base;
    }
    LARGE_BYTES.fetch_add(target - old_map, Ordering::Relaxed);
    // The recent peak in use counts growth too: when only allocations were counted, a
    // buffer grown to 72 MiB and freed lost 12 MiB to the budget's 64 MiB floor (`munmap`
    // at each free, `c-buffer-doubling` under `strace`), which the next one grown as far
    // took afresh.
    retain::observe();
    (new_base + offset) as *mut u8
}

/// Unmap every cached mapping, and give back the pages of pairs' free halves (for
/// `trim`).
pub fn trim() {
    expire_pairs(os::now_ms(), true);
    loop {
        let c = {
            let mut cache = CACHE.lock();
            if cache.len == 0 {
                return;
            }
            let last = cache.len - 1;
            cache.remove(last)
        };
        // SAFETY: cached mappings are unused.
        unsafe { unmap(c) };
    }
}

/// Bytes held in the cache of freed mappings.
pub fn cached_bytes() -> usize {
    let cache = CACHE.lock();
    cache.bytes + cache.free_half_bytes
}

/// What a chunk of large blocks holds, for [`crate::stats::residency`].
pub enum Census {
    /// A pair chunk, one or both halves handed out.
    Pair,
    /// A live block whose mapping is `map_size` bytes, or one its thread keeps
    /// ([`Retired`]: a header with magic 0 and its length, outside the cached extents).
    Block { map_size: usize },
}

/// Bytes of a large header, the class map first: what [`census_of`] reads.
pub const HEADER_BYTES: usize = core::mem::size_of::<LargeHeader>();

/// What the chunk at `base`, which lies in no cached extent, holds, given a copy of its
/// first [`HEADER_BYTES`] (taken while other threads may write them): a pair chunk, a
/// live or kept block, or `None` for bytes that are no large header (a class map not all
/// `MAP_LARGE`, a length no mapping has, the free header of a chunk that was just cached).
pub fn census_of(base: usize, h: &[u8; HEADER_BYTES]) -> Option<Census> {
    if h[..chunk_map::SLABS].iter().any(|&e| e != MAP_LARGE) {
        return None;
    }
    let word = |at: usize| {
        let bytes = h[at..at + core::mem::size_of::<usize>()].try_into();
        bytes.map_or(0, usize::from_ne_bytes)
    };
    if word(core::mem::offset_of!(LargeHeader, pair)) != 0 {
        return Some(Census::Pair);
    }
    let map_size = word(core::mem::offset_of!(LargeHeader, map_size));
    let sane = map_size > 0 && map_size % PAGE_SIZE == 0 && map_size <= MAX_NEED;
    let magic = word(core::mem::offset_of!(LargeHeader, magic));
    (sane && (magic == MAGIC ^ base || magic == 0)).then_some(Census::Block { map_size })
}

/// The extents in the cache now, as `(base, map_size)`: the first `n` of the array.
pub fn cached_extents() -> ([(usize, usize); CACHE_SLOTS], usize) {
    let cache = CACHE.lock();
    let mut out = [(0, 0); CACHE_SLOTS];
    for (o, c) in out.iter_mut().zip(&cache.entries[..cache.len]) {
        *o = (c.base, c.map_size);
    }
    (out, cache.len)
}

pub(crate) fn lock_for_fork() {
    CACHE.lock_forever();
}

/// Whether the lock [`lock_for_fork`] takes is held.
#[cfg(test)]
pub(crate) fn locked_for_fork() -> bool {
    CACHE.is_locked()
}

/// # Safety
/// After [`lock_for_fork`].
pub(crate) unsafe fn unlock_after_fork() {
    // SAFETY: by the caller.
    unsafe { CACHE.force_unlock() };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An alignment's padding, whole huge pages at a mapping's start, is never advised,
    /// and makes no block huge: the advice is that of the user bytes alone.
    #[test]
    fn padding_takes_no_huge_page_advice() {
        const MIB: usize = 1 << 20;
        let advice = |size: usize, align: usize| {
            let a = Advice::of(size, offset_for(align), false);
            (a.skip, matches!(a.huge, Huge::Never))
        };
        // (skip, never)
        assert_eq!(advice(4096, 16), (0, false));
        assert_eq!(advice(5 * MIB, 16), (0, false));
        assert_eq!(advice(3 * MIB, MIB), (0, false));
        assert_eq!(advice(4096, 2 * MIB), (2 * MIB, true));
        assert_eq!(advice(MIB, 2 * MIB), (2 * MIB, true));
        assert_eq!(advice(3 * MIB, 2 * MIB), (2 * MIB, false));
        assert_eq!(advice(4096, 8 * MIB), (CHUNK_SIZE, true));
        assert_eq!(advice(5 * MIB, 8 * MIB), (CHUNK_SIZE, false));
        assert!(matches!(Advice::of(5 * MIB, 128, true).huge, Huge::Never));
    }

    /// A heap's kept blocks may be zero bytes (as a fresh heap's are), which must read as
    /// no block.
    #[test]
    fn zero_bytes_are_no_retired_block() {
        let zero = [0u8; core::mem::size_of::<Option<Retired>>()];
        // SAFETY: `Option<Retired>` has its size; which value the bytes are is what is
        // tested (`Retired::tagged` being the only niche makes them `None`).
        let none: Option<Retired> = unsafe { core::mem::transmute(zero) };
        assert!(none.is_none());
    }

    /// A cut that starts inside a chunk leaves that chunk's bit (the kept extent's base)
    /// and clears those of the chunks that start in it.
    #[test]
    fn clearing_bits_spares_the_chunk_a_cut_starts_in() {
        // Addresses never mapped: the chunk map is a bitmap, nothing is read there.
        let base = 0x5000_0000_0000usize;
        for k in 0..3 {
            chunk_map::insert(base + k * CHUNK_SIZE);
        }
        // An extent of 2 chunks + 2 MiB at `base` cut to 2 MiB: the cut is its last
        // 2 chunks, from `base + 2 MiB`.
        clear_chunk_bits(base + CHUNK_SIZE / 2, 2 * CHUNK_SIZE);
        assert!(chunk_map::contains(base), "the kept extent's bit");
        assert!(!chunk_map::contains(base + CHUNK_SIZE));
        assert!(!chunk_map::contains(base + 2 * CHUNK_SIZE));
        chunk_map::remove(base);
        // From a chunk boundary, as every other caller clears: every chunk of the range.
        chunk_map::insert(base);
        chunk_map::insert(base + CHUNK_SIZE);
        clear_chunk_bits(base, 2 * CHUNK_SIZE);
        assert!(!chunk_map::contains(base) && !chunk_map::contains(base + CHUNK_SIZE));
    }
}
