//! Size classes: the map from a request `(size, align)` to a class, and each class's
//! block size and slab span.
//!
//! Classes are multiples of 16 bytes: 16..=128 in steps of 16 (8 classes), then four
//! classes per doubling up to [`MAX_SMALL_SIZE`] (1 MiB), and one more at the start of
//! each doubling from 1 KiB to 8 KiB for a power of two plus a header (1040, 2080, 4160,
//! 8256, [`PLUS`]); 64 classes in all. From 4 to 64 KiB, the three between two powers of
//! two are 64 bytes more than the quarter steps (5184 for 5 KiB, 10304 for 10 KiB,
//! [`COLOUR`]), so that their blocks' first lines do not all share a few cache sets.
//! Blocks of
//! 64 KiB and more (*medium*, with no colour: each is alone in its span) come from spans
//! of superslabs like the others, so a program cycling blocks of 64 KiB to 1 MiB makes
//! no system call and takes no new page fault.
//!
//! Worst-case internal waste (block size minus request, over block size):
//! - up to 128 B: at most 15 bytes (a 17 B request in a 32 B block is the worst ratio, 47 %);
//! - above 128 B: under 20 % up to 4 KiB (a 129 B request in a 160 B block wastes
//!   31/160 = 19.4 %, a 1281 B request in 1536 B wastes 255/1536 = 16.6 %, the bound is
//!   (step - 1) / block with step = block / 5 at the first quarter class of each
//!   doubling), and
//!   under 21 % over it, where blocks carry [`COLOUR`] (a 16385 B request in 20544 B
//!   wastes 4159/20544 = 20.2 %); a request of a power of two plus up to [`PLUS`]'s
//!   header room from 1 KiB to 8 KiB wastes under 2 % (a 4097 B one in 4160 B, 1.5 %).
//!
//! Every power of two from 16 to 1 MiB is a class, and a block sits at a multiple of its
//! size inside its slab span (spans are 64 KiB aligned), which is how alignments above 16
//! and up to a slab are served; a request aligned to more gets a medium block placed for
//! it (see [`class_for`]).

/// Largest size served from slabs; anything larger is a large mapping.
pub const MAX_SMALL_SIZE: usize = 1024 * 1024;
/// Largest request of the classes whose bins C's `malloc` pops with a prefetch of the
/// next block ([`alloc_cached_table`](crate::alloc_cached_table)), and of those the
/// table of aligned requests answers for (`ALIGNED_TABLE`).
pub const TABLE_MAX: usize = 1024;
/// Number of size classes.
pub const NUM_CLASSES: usize = 64;
/// Minimum alignment of every block.
pub const MIN_ALIGN: usize = 16;
/// log2 of [`SLAB_SIZE`].
pub const SLAB_SHIFT: usize = 16;
/// A slab: the unit a superslab is carved into; spans are 1 to [`MAX_SPAN_SLABS`] of
/// them, aligned to their length rounded up to a power of two, or, a medium span, to a
/// slab ([`span_align_slabs`]).
pub const SLAB_SIZE: usize = 1 << SLAB_SHIFT;

/// A size class. Invariant: its index is below [`NUM_CLASSES`] (held in a `usize`, so
/// that the fast paths index with it as they did with a bare index, no widening); only this module makes
/// one, from the tables and functions below, so any `Class` indexes a per-class table
/// (`PerClass`) with no check, and the fast paths that take one need no `unsafe`
/// contract for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct Class(usize);

impl Class {
    /// The class of index `i` (panics, at compile time in a constant, if `i` is no class).
    pub const fn new(i: usize) -> Class {
        assert!(i < NUM_CLASSES);
        Class(i)
    }

    /// Every class, smallest first.
    pub fn all() -> impl Iterator<Item = Class> {
        (0..NUM_CLASSES).map(Class)
    }

    /// The class whose class-map byte is `e`, if `e` is a class (no `MAP_*` marker).
    #[inline(always)]
    pub fn from_map_entry(e: u8) -> Option<Class> {
        ((e as usize) < NUM_CLASSES).then_some(Class(e as usize))
    }

    /// Its index in per-class tables, below [`NUM_CLASSES`].
    #[inline(always)]
    pub const fn index(self) -> usize {
        // SAFETY: the type's invariant.
        unsafe { core::hint::assert_unchecked(self.0 < NUM_CLASSES) };
        self.0
    }

    /// Its byte in a chunk's class map.
    #[inline(always)]
    pub const fn map_entry(self) -> u8 {
        self.0 as u8
    }
}

impl core::fmt::Display for Class {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.fmt(f)
    }
}

/// One `T` per size class, indexed by [`Class`] without a bounds check.
#[repr(transparent)]
pub struct PerClass<T>(pub [T; NUM_CLASSES]);

impl<T> PerClass<T> {
    /// Each class with its entry.
    pub fn iter(&self) -> impl Iterator<Item = (Class, &T)> {
        Class::all().zip(self.0.iter())
    }

    /// Each class with its entry, mutable.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (Class, &mut T)> {
        Class::all().zip(self.0.iter_mut())
    }
}

impl<T> core::ops::Index<Class> for PerClass<T> {
    type Output = T;

    #[inline(always)]
    fn index(&self, c: Class) -> &T {
        &self.0[c.index()]
    }
}

impl<T> core::ops::IndexMut<Class> for PerClass<T> {
    #[inline(always)]
    fn index_mut(&mut self, c: Class) -> &mut T {
        &mut self.0[c.index()]
    }
}

/// Bytes added to every quarter-step class over 4 KiB that is not a power of two
/// ([`BLOCK_SIZE`]; the plus classes, [`PLUS`], have their own room).
///
/// Without them those classes are multiples of 4 KiB (6, 12, 20, 24, 28 KiB) or of 1 or
/// 2 KiB, so the blocks of a slab all start at the same one, two or four offsets in a page,
/// and their first cache lines, where the free-list link and most programs' headers
/// lie, fall in one to four of the L1 cache's 64 sets (an L1 of 8 or 12 ways, 32 or 48
/// KiB, keeps 8 to 48 of them). With 64 bytes more, consecutive blocks start one line
/// further along the page, every set in turn. `c-mid-large` (two threads, 64 live blocks
/// of 8..32 KiB each), `LD_PRELOAD=... target/bench/c-workloads c-mid-large`, 9
/// alternated runs:
/// 0.0301 s before, 0.0223 s after (tcmalloc 0.0274 s); simulated L1 misses
/// (`valgrind --tool=cachegrind --cache-sim=yes`, 200,000 operations) 541,535 before,
/// 447,893 after. Adding them to the classes from 1 KiB up as well changed nothing
/// measurable (849,471 misses on `c-wide-churn` against 852,416). The power-of-two
/// classes keep their sizes: their blocks are aligned to them ([`class_for`]).
///
/// What it costs: a slab's last block ends up to `blocks * 64` bytes further on, often in
/// the slab's last page, which a program that writes its blocks' ends then makes
/// resident: peak RSS of `wide-churn` 16.6 -> 18.3 MiB and `c-wide-churn` 16.3 -> 18.1
/// MiB (5 alternated runs; jemalloc and tcmalloc peak at 33.7 and 19.5).
///
/// Medium blocks (64 KiB and more) carry none: each is alone in its span
/// ([`span_slabs`]), with no next block to move along, and 64 bytes more would cost a
/// slab more for the classes of a whole number of slabs (192 KiB + 64 B needs four).
const COLOUR: u32 = 64;

/// The doublings that start with a *plus* class, a power of two `2^k` plus
/// `min(2^k / 64, 64)` bytes: `2^k` from 1 KiB to 8 KiB, so 1040, 2080, 4160 and 8256.
///
/// Programs often ask for a power of two and a few bytes of header: a page plus its
/// bookkeeping, a buffer plus its length. SQLite's page cache asks for 4104 B (a 4 KiB
/// page and an 8-byte prefix) and its allocations of 1032 B are as common (26,353 and
/// 36,408 of 565,441 calls in the `sqlite` row of `cargo xtask programs`, counted with
/// the shim in docs/BENCHMARKS.md); with four classes per doubling they took 5184 and
/// 1280 B blocks, a fifth of each wasted. Up to 8 KiB, where pages and I/O buffers are;
/// one class per doubling more, each with its own slabs, costs a program that touches
/// it up to a slab of RSS. Four doublings: 60 classes and these 4 are the most the
/// thread cache's mask of classes allows ([`NUM_CLASSES`] is 64).
///
/// (`min(2^k / 64, 64)` keeps them multiples of 16, and 4160 and 8256 are an odd number
/// of lines, so their blocks start on every line of a page, as [`COLOUR`] arranges for
/// the others.)
pub const PLUS: core::ops::RangeInclusive<u32> = 10..=13;

/// The plus class of the doubling that starts at `base` (a power of two in [`PLUS`]).
const fn plus_size(base: u32) -> u32 {
    let room = base / 64;
    base + if room < 64 { room } else { 64 }
}

/// Whether the doubling that starts at `2^shift` has a plus class ([`PLUS`]).
const fn has_plus(shift: u32) -> bool {
    shift >= *PLUS.start() && shift <= *PLUS.end()
}

/// Whether `block` is a plus class's size.
const fn is_plus(block: u32) -> bool {
    let base = block.next_power_of_two() / 2;
    has_plus(base.trailing_zeros()) && block == plus_size(base)
}

const fn compute_block_sizes() -> [u32; NUM_CLASSES] {
    let mut out = [0u32; NUM_CLASSES];
    let mut i = 0;
    while i < 8 {
        out[i] = (16 * (i + 1)) as u32;
        i += 1;
    }
    let mut base = 128u32;
    while i < NUM_CLASSES {
        if has_plus(base.trailing_zeros()) {
            out[i] = plus_size(base);
            i += 1;
        }
        let step = base / 4;
        let mut k = 1;
        while k <= 4 && i < NUM_CLASSES {
            out[i] = base + step * k;
            if k < 4 && base >= 4096 && (base as usize) < SLAB_SIZE {
                out[i] += COLOUR;
            }
            i += 1;
            k += 1;
        }
        base *= 2;
    }
    out
}

/// Block size of each class, in bytes.
pub static BLOCK_SIZE: [u32; NUM_CLASSES] = compute_block_sizes();

/// Largest size whose class is one load from [`CLASS_TABLE`]; past it the class is
/// arithmetic ([`class_past_table`]), which needs every doubling to have the same four
/// classes: so at least the last plus class (8256 B, [`PLUS`]).
pub const CLASS_TABLE_MAX: usize = 64 << 10;
const _: () = assert!(CLASS_TABLE_MAX >= plus_size(1 << *PLUS.end()) as usize);
// The table's last slot is `CLASS_TABLE_MAX / 16`: a size up to it must not round past it.
const _: () = assert!(CLASS_TABLE_MAX % 16 == 0);

/// The largest request a block of `block` bytes is the class for: its size less its
/// [`COLOUR`], which is there to move the next block along, not to be asked for.
const fn nominal_size(block: u32) -> u32 {
    if block > 4096 && (block as usize) < SLAB_SIZE && !block.is_power_of_two() && !is_plus(block) {
        block - COLOUR
    } else {
        block
    }
}

const fn compute_table() -> [u8; CLASS_TABLE_MAX / 16 + 1] {
    let mut out = [0u8; CLASS_TABLE_MAX / 16 + 1];
    let mut slot = 0;
    let sizes = compute_block_sizes();
    while slot <= CLASS_TABLE_MAX / 16 {
        let size = if slot == 0 { 1 } else { slot * 16 };
        let mut c = 0;
        while (nominal_size(sizes[c]) as usize) < size {
            c += 1;
        }
        out[slot] = c as u8;
        slot += 1;
    }
    out
}

/// `CLASS_TABLE[(size + 15) / 16]` is the class of `size` for `size <= CLASS_TABLE_MAX`:
/// 4097 bytes, of which the sizes up to [`TABLE_MAX`] use the first 65.
///
/// Why a table: with the plus classes, some doublings have five classes, so arithmetic
/// alone no longer gives the class; a table of doublings read on the way (a load, then
/// arithmetic on it, at `8a524ff`) took `mid-large` (8..32 KiB) 1.13-1.20x the time of
/// the arithmetic before the plus classes. One load from this table is shorter than
/// either: `bench-hakmem WORKLOAD 5000000`, 9 alternated rounds (pages 7), this table
/// against `8a524ff` and `7f1e74a` (no plus classes): `mid-large` 0.0185 s against 0.0252
/// and 0.0210, `wide-churn` 0.0560 against 0.0702 and 0.0689, `pages` 0.0542 against
/// 0.0672; callgrind, 1M operations, `mid-large` 103.1M instructions against 136.1M and
/// 120.7M.
///
/// Why to 64 KiB: the test that picks table or arithmetic is a branch, which goes either
/// way at random for a program whose sizes spread over both sides of it. At 8256 B it
/// cost `wide-churn` (16 B..32 KiB) 0.0776 s against 0.0702; at 32 KiB it cost the
/// programs that cycle I/O buffers of 4..64 KiB, a power of two each (`io-buffers`),
/// their lead: `c-io-buffers` took 1.12-1.19x tcmalloc's time, and 64 KiB in the table
/// took it to 0.99x (10M operations, 9 alternated runs: 0.0799 s against 0.0995 and
/// tcmalloc's 0.0809), and `io-buffers` 0.69x its time (7 runs: 0.0382 s against 0.0554).
/// Past 64 KiB each block has a span of its own and sizes spread over megabytes, where a
/// table would grow by a byte for each 16 bytes.
static CLASS_TABLE: [u8; CLASS_TABLE_MAX / 16 + 1] = compute_table();

/// The class of a request of `size` bytes with alignment at most [`MIN_ALIGN`], or `None`
/// when it is too large for slabs.
#[inline(always)]
pub fn class_of_size(size: usize) -> Option<Class> {
    class_of_size_upto(size, MAX_SMALL_SIZE)
}

/// [`class_of_size`] for sizes up to `limit` (from [`CLASS_TABLE_MAX`] to
/// [`MAX_SMALL_SIZE`]), `None` above: the limit is tested only where the table does not
/// answer.
#[inline(always)]
pub fn class_of_size_upto(size: usize, limit: usize) -> Option<Class> {
    debug_assert!((CLASS_TABLE_MAX..=MAX_SMALL_SIZE).contains(&limit));
    if size <= CLASS_TABLE_MAX {
        Some(table_class(size))
    } else if size <= limit {
        Some(class_past_table(size))
    } else {
        None
    }
}

/// [`CLASS_TABLE`]'s first slots, those of the sizes up to [`TABLE_MAX`], as the slab
/// map's bytes ([`MapByte`]): C's `malloc` goes from the byte to its bin with one `lea`,
/// where the class's index took a shift and an add.
static TABLE_BYTES: [u8; TABLE_MAX / 16 + 1] = {
    let mut out = [0u8; TABLE_MAX / 16 + 1];
    let mut slot = 0;
    while slot <= TABLE_MAX / 16 {
        out[slot] = MapByte::of(Class(CLASS_TABLE[slot] as usize)).0 as u8;
        slot += 1;
    }
    out
};

/// The class of `size`, at most [`TABLE_MAX`], as the slab map's byte: one load from a
/// table.
#[inline(always)]
pub fn map_byte_of_table_size(size: usize) -> MapByte {
    debug_assert!(size <= TABLE_MAX);
    MapByte(TABLE_BYTES[(size + 15) >> 4] as usize)
}

/// The class of `size <= CLASS_TABLE_MAX` (a bounds check past it).
#[inline(always)]
fn table_class(size: usize) -> Class {
    Class(CLASS_TABLE[(size + 15) >> 4] as usize)
}

/// The doubling `(2^msb, 2^(msb+1)]` that `size` (over 4 bytes) lies in, and which quarter
/// of it: `(msb, quarter)`.
#[inline(always)]
const fn doubling_and_quarter(size: usize) -> (usize, usize) {
    let s = size - 1;
    let msb = (usize::BITS - 1 - s.leading_zeros()) as usize;
    (msb, (s >> (msb - 2)) & 3)
}

/// The class of the first quarter of the doubling `(2^msb, 2^(msb+1)]` is
/// `PAST_TABLE_BASE + 4 * msb` (wrapping: the base is below zero) for the doublings past
/// [`CLASS_TABLE_MAX`]. Taken from the block sizes, so that the layout is written once:
/// the class of the first size past the table, which is in the first quarter of its
/// doubling.
const PAST_TABLE_BASE: usize = {
    let sizes = compute_block_sizes();
    let first = CLASS_TABLE_MAX + 1;
    let mut c = 0;
    while (nominal_size(sizes[c]) as usize) < first {
        c += 1;
    }
    let (msb, quarter) = doubling_and_quarter(first);
    assert!(quarter == 0);
    c.wrapping_sub(4 * msb)
};

/// Class for `CLASS_TABLE_MAX < size <= MAX_SMALL_SIZE`: four classes per doubling,
/// arithmetic alone.
#[inline(always)]
fn class_past_table(size: usize) -> Class {
    debug_assert!(size > CLASS_TABLE_MAX && size <= MAX_SMALL_SIZE);
    let (msb, quarter) = doubling_and_quarter(size);
    // At most 63 for sizes up to 1 MiB (msb 19).
    Class(PAST_TABLE_BASE.wrapping_add(4 * msb + quarter))
}

/// The class of a request `(size, align)`, or `None` when it must be a large mapping.
///
/// For `align <= 16` this is [`class_of_size`]. For a larger alignment it is the smallest
/// class of at least `max(size, align)` bytes whose blocks are all aligned: a block lies
/// at a multiple of its size from the start of its span, and spans start on a slab, so
/// up to a slab (64 KiB) a block size that is a multiple of `align` will do (for 64 bytes,
/// 192 and 320 as well as 256; the power of two of each doubling always qualifies).
/// Above a slab, the class of `max(size, align)`, a medium class, whose blocks start at
/// any slab: the allocation takes one that lies at the alignment, from the thread's cache
/// or carved there (a block of 320 KiB for 300 KiB aligned to 128 KiB, where a span
/// aligned to its length took the power of two, 512 KiB).
#[inline(always)]
pub fn class_for(size: usize, align: usize) -> Option<Class> {
    class_where::<false>(size, align)
}

/// [`class_for`] where every block of the class serves the request: `None` also for an
/// alignment over a slab, which only some blocks of its medium class meet. A cache's pop
/// takes this: the test of the alignment is then the one the class table's path makes
/// already, where a test after [`class_for`] (`posix_memalign`'s cached path) cost
/// `posix_memalign(32, 96)` + `free` 84 instructions against 78 and `aligned_alloc(64,
/// 64)` + `free` 78 against 74 (`cargo xtask pair-count`).
#[inline(always)]
pub fn class_for_cached(size: usize, align: usize) -> Option<Class> {
    class_where::<true>(size, align)
}

/// [`class_for`], or [`class_for_cached`] with `EVERY_BLOCK`.
#[inline(always)]
fn class_where<const EVERY_BLOCK: bool>(size: usize, align: usize) -> Option<Class> {
    if align <= MIN_ALIGN {
        class_of_size(size)
    } else {
        class_for_aligned::<EVERY_BLOCK>(size, align)
    }
}

#[inline(always)]
fn class_for_aligned<const EVERY_BLOCK: bool>(size: usize, align: usize) -> Option<Class> {
    debug_assert!(align.is_power_of_two() && align > MIN_ALIGN);
    if EVERY_BLOCK && align > SLAB_SIZE {
        return None;
    }
    let shift = align.trailing_zeros() as usize;
    // Past the test above, `shift <= SLAB_SHIFT` holds: the pop's path tests the size alone.
    if size <= TABLE_MAX && (EVERY_BLOCK || shift <= SLAB_SHIFT) {
        // One load, as for `malloc`'s sizes: every step of the way to a class is another
        // load the block waits for.
        return Some(Class(ALIGNED_TABLE[aligned_slot(shift, size)] as usize));
    }
    class_for_aligned_mid(size, align, shift)
}

/// [`class_for_aligned`] past [`TABLE_MAX`] bytes or [`SLAB_SIZE`] alignment (`align` is
/// `2^shift`).
#[inline]
fn class_for_aligned_mid(size: usize, align: usize, shift: usize) -> Option<Class> {
    let s = if size > align { size } else { align };
    if s > MAX_SMALL_SIZE {
        return None;
    }
    if align > SLAB_SIZE {
        return class_of_size(s);
    }
    let c = class_of_size(s)?;
    Some(Class(ALIGNED_CLASS[c.index()][shift] as usize))
}

/// Row length of [`ALIGNED_TABLE`]: the slots of the sizes up to [`TABLE_MAX`] in
/// `CLASS_TABLE`, rounded up to a power of two so that a row starts at a shift.
const ALIGNED_ROW: usize = (TABLE_MAX / 16 + 1).next_power_of_two();
/// Rows of [`ALIGNED_TABLE`], one per alignment shift (those up to 4 and over
/// [`SLAB_SHIFT`] unused), a power of two so that a mask bounds the index.
const ALIGNED_ROWS: usize = (SLAB_SHIFT + 1).next_power_of_two();

/// The index in [`ALIGNED_TABLE`] of `(size, 2^shift)`, `size <= TABLE_MAX`, in bounds
/// whatever the arguments.
#[inline(always)]
fn aligned_slot(shift: usize, size: usize) -> usize {
    (shift * ALIGNED_ROW + ((size + 15) >> 4)) & (ALIGNED_ROWS * ALIGNED_ROW - 1)
}

/// `ALIGNED_CLASS[c][shift]`, `shift <= SLAB_SHIFT`: the first class from `c` on whose
/// block size is a multiple of `2^shift`. It exists for every class at least as large as
/// the alignment: the power of two that ends its doubling qualifies.
static ALIGNED_CLASS: [[u8; SLAB_SHIFT + 1]; NUM_CLASSES] = {
    let sizes = compute_block_sizes();
    let mut t = [[0u8; SLAB_SHIFT + 1]; NUM_CLASSES];
    let mut c = 0;
    while c < NUM_CLASSES {
        let mut shift = 0;
        while shift <= SLAB_SHIFT {
            let mut d = c;
            while d < NUM_CLASSES - 1 && sizes[d] % (1u32 << shift) != 0 {
                d += 1;
            }
            t[c][shift] = d as u8;
            shift += 1;
        }
        c += 1;
    }
    t
};

/// `ALIGNED_TABLE[aligned_slot(shift, size)]`: the class of `(size, 2^shift)` for `size <=
/// TABLE_MAX` and `shift <= SLAB_SHIFT`, [`ALIGNED_CLASS`] of the class of `max(size,
/// align)`.
static ALIGNED_TABLE: [u8; ALIGNED_ROWS * ALIGNED_ROW] = {
    let sizes = compute_block_sizes();
    let mut t = [0u8; ALIGNED_ROWS * ALIGNED_ROW];
    let mut shift = 0;
    while shift <= SLAB_SHIFT {
        let align = 1usize << shift;
        let mut slot = 0;
        while slot <= TABLE_MAX / 16 {
            let size = if slot * 16 > align { slot * 16 } else { align };
            let mut c = 0;
            while c < NUM_CLASSES - 1 && (sizes[c] as usize) < size {
                c += 1;
            }
            t[shift * ALIGNED_ROW + slot] = ALIGNED_CLASS[c][shift];
            slot += 1;
        }
        shift += 1;
    }
    t
};

/// In `start`, per class's index plus one (a [`MapByte`] over two; a class-map entry plus
/// one, wrapping, [`block_start_class`]): for a class, the mask that gives an
/// address's offset from its span's start (spans of several blocks start at a multiple
/// of [`span_align_slabs`]; a medium span holds one block, and its slabs past the first
/// hold no class, [`starting_slabs`], so the offset in a slab will do), and
/// `ceil(2^64 / block size)`, with which `offset * m < m` (wrapping) holds iff the block
/// size divides the offset (Lemire's divisibility test, exact for offsets below 2^32),
/// so no division is needed. Bytes that are no class (0, and the `MAP_*` markers plus
/// one) have `m = 0`, which no offset passes, so the free path needs no separate range
/// check. In `size`, per map byte, the block size ([`ByIndex`]).
static BLOCK_START: ByIndex = {
    let mut t = [(0usize, 0u64); 256];
    let mut size = [0u32; 256];
    let sizes = compute_block_sizes();
    let mut c = 0;
    while c < NUM_CLASSES {
        // A medium block starts its span's first slab, the one slab that holds its class
        // (`starting_slabs`): its offset in that slab is 0.
        let starts = if is_medium(Class::new(c)) {
            SLAB_SIZE
        } else {
            span_align_slabs(Class::new(c)) * SLAB_SIZE
        };
        t[c + 1] = (starts - 1, u64::MAX / sizes[c] as u64 + 1);
        size[MapByte::of(Class::new(c)).0] = sizes[c];
        c += 1;
    }
    ByIndex { start: t, size }
};

/// [`BLOCK_START`]'s entries and, after them in one static, each class's block size at
/// its [`MapByte`] (0 at every other byte): `malloc_usable_size` reads the size at the
/// byte it tested, from the base address it already holds, as `byte * 4` (one scaled
/// index, no shift, no second address): 14 instructions where two tables took 16.
#[repr(C)]
struct ByIndex {
    start: [(usize, u64); 256],
    size: [u32; 256],
}

/// The class of the block starting at `addr`, inside a span of the class whose index plus
/// one is `i`; `None` if `addr` starts no block (always for an `i` that is no class's).
#[inline(always)]
pub fn block_start(addr: usize, i: usize) -> Option<Class> {
    starts_block(addr, i).then(|| Class(i.wrapping_sub(1)))
}

/// Whether `addr` starts a block of the class whose index plus one is `i` (false for an `i`
/// that is no class's: its `m` is 0).
#[inline(always)]
fn starts_block(addr: usize, i: usize) -> bool {
    let (mask, m) = BLOCK_START.start[i];
    ((addr & mask) as u64).wrapping_mul(m) < m
}

/// A class as the slab map keeps it ([`crate::slab_map`]): twice its index plus two, an
/// even byte from 2 to 128 (0, no class, is not a `MapByte`). Times 8 it is the class's
/// index plus one times 16: the offset of its [`BLOCK_START`] entry, and the end of its
/// bin in the thread cache, whose bins are 16 bytes. x86 scales an index by 8 within the
/// address, so C's `free` goes from the byte it loads to both with no shift: the next
/// allocation of the class loads what the free stored in the bin, and each instruction
/// between the byte and the bin's address was a cycle of every `malloc` + `free` pair in
/// a loop (`c-fixed-size`, see `slab_map::lookup`; the bin's address is now taken into a
/// register, which ends that wait: `thread_cache::in_register`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MapByte(usize);

impl MapByte {
    /// The byte of class `c`.
    pub const fn of(c: Class) -> MapByte {
        MapByte(2 * (c.0 + 1))
    }

    /// The class.
    #[inline(always)]
    pub fn class(self) -> Class {
        Class(self.0 / 2 - 1)
    }

    /// The byte, as the slab map stores it.
    pub fn byte(self) -> u8 {
        self.0 as u8
    }

    /// The block size of the class, read at the byte itself ([`ByIndex`]).
    #[inline(always)]
    pub fn block_size(self) -> usize {
        BLOCK_START.size[self.0] as usize
    }

    /// The class's index plus one, times 16: `byte * 8`, one scaled index.
    #[inline(always)]
    pub fn times_eight(self) -> usize {
        self.0 * 8
    }
}

/// The class of the block starting at `addr`, inside a span whose slab-map byte is
/// `byte`; `None` if `addr` starts no block (always for a byte that is no [`MapByte`]: 0,
/// or any odd byte, which the map never holds).
#[inline(always)]
pub fn block_start_mapped(addr: usize, byte: usize) -> Option<MapByte> {
    // Where the caller has told the compiler that the byte is even (`slab_map::lookup`),
    // the test of the low bit takes no instruction.
    (byte % 2 == 0 && starts_block(addr, byte / 2)).then_some(MapByte(byte))
}

/// `ceil(2^64 / block size)` of class `c` (the `m` of [`block_start`]): the high word of
/// an offset that is a multiple of the block size times it is that multiple, the
/// block's index, with no division.
#[inline(always)]
pub fn reciprocal(c: Class) -> u64 {
    BLOCK_START.start[c.index() + 1].1
}

/// The class of the block starting at `addr`, inside a span whose class-map byte is
/// `entry`; `None` if `addr` starts no block (always for a byte that is not a class).
#[inline(always)]
pub fn block_start_class(addr: usize, entry: u8) -> Option<Class> {
    block_start(addr, entry.wrapping_add(1) as usize)
}

/// Block size of class `c`.
#[inline(always)]
pub fn block_size(c: Class) -> usize {
    BLOCK_SIZE[c.index()] as usize
}

/// Longest span, in slabs: the 1 MiB class's (one block, [`span_slabs`]).
// Rust 1.85 (the declared rust-version, which CI builds) does not count the assertion
// below as a use and warns; later versions do.
#[allow(dead_code)]
pub const MAX_SPAN_SLABS: usize = MAX_SMALL_SIZE / SLAB_SIZE;
const _: () = assert!(span_slabs(Class(NUM_CLASSES - 1)) == MAX_SPAN_SLABS);

/// How many slabs (of [`SLAB_SIZE`]) one slab of class `c` spans. Below a slab's size,
/// the smallest power of two that holds 2 blocks: the classes up to 32 KiB take one
/// slab (2 to 4096 blocks), those of 40..56 KiB two (2 or 3 blocks). From 64 KiB up
/// (*medium*) a span holds one block and is just long enough for it (1 to 16 slabs,
/// placed at a multiple of [`span_align_slabs`]).
///
/// Few blocks per span, so that spans empty out and go back to the superslab's free
/// slabs, where any class of their kind takes them, and so that no class needs an
/// aligned run of free slabs that spans of other sizes have cut up: with at least 8
/// blocks per span, each 8..32 KiB class sat in its own 2..4-slab spans. Peak RSS
/// against that, `target/release/bench-hakmem W` (and `LD_PRELOAD=... c-workloads W`)
/// alternated with the old build, 11 and 7 rounds: mid-large 13.7 -> 11.2 MiB (it is
/// bimodal: 11.5 or 13.8 before, 8.5 or 11.3 after; jemalloc 9.1), c-mid-large 13.3 ->
/// 8.2 (jemalloc 9.5), large 77.1 -> 75.8, batch-rand 107.6 -> 108.3, at the same speed.
/// What it costs: a slab that held one class and is carved for another has blocks
/// starting on other pages, so a program that writes only the first bytes of its 8..32
/// KiB blocks touches more pages of it.
///
/// A medium block is a span of its own for the same reason, taken to its end: one freed
/// block gives its slabs back to every size at once, as an extent does in jemalloc or a
/// span of slices in mimalloc, where a span of two such blocks waits for both.
#[inline]
pub const fn span_slabs(c: Class) -> usize {
    let size = BLOCK_SIZE[c.index()] as usize;
    if is_medium(c) {
        return size.div_ceil(SLAB_SIZE);
    }
    let mut n = 1;
    while n * SLAB_SIZE < size * 2 {
        n *= 2;
    }
    n
}

/// Whether `c` is a *medium* class: blocks of a slab or more (64 KiB..1 MiB), each a span
/// of its own ([`span_slabs`]).
#[inline]
pub const fn is_medium(c: Class) -> bool {
    BLOCK_SIZE[c.index()] as usize >= SLAB_SIZE
}

/// Index of the first medium class: the classes are in order of size, so the medium ones
/// are the last.
const FIRST_MEDIUM: usize = {
    let sizes = compute_block_sizes();
    let mut i = 0;
    while (sizes[i] as usize) < SLAB_SIZE {
        i += 1;
    }
    i
};

/// The medium classes ([`is_medium`]), smallest first.
pub fn medium_classes() -> impl Iterator<Item = Class> {
    (FIRST_MEDIUM..NUM_CLASSES).map(Class)
}

/// Where a span of class `c` may start: at a multiple of this many slabs, a power of two.
/// A span of several blocks: [`span_slabs`] rounded up, so that the slab index of any
/// block in it, rounded down to this, is the span's first slab, with no search. A medium
/// span, whose one block starts it: any slab (1); a request aligned to more than a slab
/// has its span placed for it ([`class_for`]).
///
/// A medium span at a multiple of its length rounded up left the slabs to the next
/// multiple to spans that fit there, and only 3 places in a superslab to the spans of
/// 9 to 16 slabs: a ring of 64 buffers of 64 KiB..1 MiB, every page written, each freed
/// as the next is allocated (`c-buffer-ring`), peaked at 68.4 MiB, and at 62.7 MiB
/// with any slab for the lengths that are no power of two, at the same speed (9
/// alternated runs of `c-workloads c-buffer-ring` under `LD_PRELOAD`; jemalloc 53.5 MiB,
/// mimalloc 2.0.9 65.9); `c-large` and `c-large-written` peaked the same (54.6 and 76.8
/// MiB against 54.7 and 77.3). The powers of two kept theirs while requests aligned to
/// more than a slab took them: a 1 MiB span had 4 places in a superslab, 512 KiB 8.
/// With any slab for those too (and a request aligned to more than a slab given a block
/// placed for it), the ring peaked at 57.6 MiB against 59.8, in 1.00x the time; the
/// Rust rows `buffer-ring` 58.0 against 62.2 and `buffer-pipeline` 54.6 against 58.5
/// (jemalloc 53.4, 53.8 and 51.1; 9 alternated runs of each).
#[inline]
pub const fn span_align_slabs(c: Class) -> usize {
    let n = span_slabs(c);
    if is_medium(c) {
        1
    } else {
        n.next_power_of_two()
    }
}

/// How many slabs of a span of class `c`, from its first, blocks start in: every one of
/// a span of several blocks, the first alone of a medium span (one block). The others
/// of a medium span are marked as no class's in the chunk's class map
/// ([`crate::chunk_map::MAP_TAIL`]) and the slab map (0), so a pointer to one is no
/// block's start wherever the span lies.
#[inline]
pub const fn starting_slabs(c: Class) -> usize {
    if is_medium(c) {
        1
    } else {
        span_slabs(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_byte_is_even_and_scales_to_its_class() {
        // A span of every class may start here: 32 slabs, 2 MiB, aligned.
        let start = 0x7a_0000_0000usize;
        for c in Class::all() {
            let b = MapByte::of(c);
            assert_eq!(b.byte() % 2, 0, "{c:?}");
            assert_eq!(b.class(), c);
            assert_eq!(b.times_eight(), (c.index() + 1) * 16);
            let byte = b.byte() as usize;
            assert_eq!(block_start_mapped(start, byte), Some(b));
            // The next block: in the span, or, one block to a span, the next span's.
            let next = if is_medium(c) {
                span_slabs(c) * SLAB_SIZE
            } else {
                block_size(c)
            };
            assert_eq!(block_start_mapped(start + next, byte), Some(b));
            assert_eq!(block_start_mapped(start + 8, byte), None, "interior");
            assert_eq!(block_start_mapped(start, byte + 1), None, "odd");
        }
        assert_eq!(block_start_mapped(start, 0), None);
    }

    #[test]
    fn block_sizes_are_increasing_multiples_of_16() {
        assert_eq!(BLOCK_SIZE[0], 16);
        assert_eq!(BLOCK_SIZE[NUM_CLASSES - 1] as usize, MAX_SMALL_SIZE);
        for w in BLOCK_SIZE.windows(2) {
            assert!(w[0] < w[1]);
        }
        for &b in BLOCK_SIZE.iter() {
            assert_eq!(b % 16, 0);
        }
    }

    #[test]
    fn every_size_maps_to_the_smallest_fitting_class() {
        // A class's size without its colour: the largest request it is meant for (written
        // out here, not taken from `nominal_size`, which builds the table under test).
        let nominal = |c: Class| {
            let b = block_size(c);
            if b > 4096
                && b < 65536
                && !b.is_power_of_two()
                && ![1040, 2080, 4160, 8256].contains(&b)
            {
                b - 64
            } else {
                b
            }
        };
        let step = if cfg!(miri) { 7 } else { 1 };
        for size in (0..=MAX_SMALL_SIZE).step_by(step) {
            let c = class_of_size(size).unwrap();
            assert!(nominal(c) >= size, "size {size} class {c}");
            if c.index() > 0 {
                let smaller = Class::new(c.index() - 1);
                assert!(nominal(smaller) < size.max(1), "size {size} not smallest");
            }
        }
        assert_eq!(class_of_size(MAX_SMALL_SIZE + 1), None);
    }

    #[test]
    fn waste_is_bounded() {
        let step = if cfg!(miri) { 13 } else { 1 };
        for size in (129..=MAX_SMALL_SIZE).step_by(step) {
            let b = block_size(class_of_size(size).unwrap());
            if size <= 4096 {
                assert!((b - size) * 5 < b, "size {size} block {b}");
            } else {
                assert!((b - size) * 100 < b * 21, "size {size} block {b}");
            }
        }
        for size in 1..=128 {
            let b = block_size(class_of_size(size).unwrap());
            assert!(b - size < 16);
        }
    }

    #[test]
    fn blocks_over_4k_start_on_every_line_of_a_page() {
        for c in Class::all() {
            let b = block_size(c);
            // Medium blocks are alone in their spans ([`span_slabs`]): no next block.
            if b <= 4096 || b.is_power_of_two() || b >= SLAB_SIZE {
                continue;
            }
            // The line (of 64) in its page at which each of a slab's first 64 blocks starts.
            let mut seen = [false; 64];
            for i in 0..64 {
                seen[(i * b) % 4096 / 64] = true;
            }
            assert!(seen.iter().all(|&s| s), "class {c} ({b} B)");
        }
    }

    /// What `crate::dealloc`'s contract rests on: a sized free names the class by the
    /// request, and the block size of a class with colour is a request of the next one.
    #[test]
    fn a_coloured_block_size_is_a_request_of_the_next_class() {
        let c = class_of_size(5 << 10).unwrap();
        assert_eq!(block_size(c), (5 << 10) + COLOUR as usize);
        assert_eq!(class_of_size(block_size(c)), Some(Class(c.index() + 1)));
        for c in Class::all() {
            assert_eq!(
                class_of_size(nominal_size(block_size(c) as u32) as usize),
                Some(c)
            );
        }
    }

    #[test]
    fn a_power_of_two_and_a_header_take_the_plus_class_up_to_8k() {
        let block = |size| block_size(class_of_size(size).unwrap());
        // SQLite's page (4096 B and an 8-byte prefix) and its 1032-byte blocks.
        for (size, b) in [(1032, 1040), (2056, 2080), (4104, 4160), (8200, 8256)] {
            assert_eq!(block(size), b, "{size}");
            assert_eq!(block(b), b, "{b}");
            assert_eq!(block(b.next_power_of_two() / 2 + 1), b, "{b}");
        }
        // Past the header room, the first quarter step; from 16 KiB on, no plus class.
        assert_eq!(block(1041), 1280);
        assert_eq!(block(4161), 5184);
        assert_eq!(block(8257), 10304);
        assert_eq!(block(16400), 20544);
    }

    #[test]
    fn powers_of_two_are_classes() {
        let mut p = 16;
        while p <= MAX_SMALL_SIZE {
            assert_eq!(block_size(class_of_size(p).unwrap()), p);
            p *= 2;
        }
    }

    #[test]
    fn aligned_requests_get_the_smallest_class_of_aligned_blocks() {
        let step = if cfg!(miri) { 65521 } else { 61 };
        for shift in 5..=21 {
            let align = 1usize << shift;
            for size in (1..MAX_SMALL_SIZE + 2)
                .step_by(step)
                .chain([align, align + 1])
            {
                let cached = class_for_cached(size, align);
                let Some(c) = class_for(size, align) else {
                    assert!(size.max(align) > MAX_SMALL_SIZE, "{size} {align}");
                    assert_eq!(cached, None, "{size} {align}");
                    continue;
                };
                // A cached block of the class serves the request wherever it lies only up
                // to a slab's alignment.
                let every_block = align <= SLAB_SIZE;
                assert_eq!(cached, every_block.then_some(c), "{size} {align}");
                let b = block_size(c);
                assert!(b >= size.max(align), "{size} {align}");
                if align > SLAB_SIZE {
                    // A medium block, placed at a multiple of `align` when asked so: the
                    // class of `max(size, align)`, whatever its length.
                    assert!(is_medium(c), "{size} {align}");
                    assert_eq!(Some(c), class_of_size(size.max(align)), "{size} {align}");
                    continue;
                }
                assert_eq!(b % align, 0, "{size} {align}");
                // Every block start, a multiple of `b` from a span that starts on a slab,
                // is aligned; no class from the one of `max(size, align)` up to it would
                // have done.
                let first = class_of_size(size.max(align)).unwrap().index();
                for &smaller in &BLOCK_SIZE[first..c.index()] {
                    assert_ne!(smaller as usize % align, 0, "{size} {align}");
                }
            }
        }
    }

    #[test]
    fn block_starts_are_recognised_without_division() {
        let step = if cfg!(miri) { 97 } else { 1 };
        for c in Class::all() {
            let span = span_slabs(c) * SLAB_SIZE;
            // A span at an aligned address in some superslab, as carved.
            let base = (7 << 22) + span_align_slabs(c) * SLAB_SIZE * 3;
            // Only the slabs that hold the class are looked up with its entry.
            for off in (0..starting_slabs(c) * SLAB_SIZE).step_by(step) {
                assert_eq!(
                    block_start_class(base + off, c.map_entry()),
                    (off % block_size(c) == 0).then_some(c),
                    "class {c} offset {off}"
                );
            }
            assert!(starting_slabs(c) == span_slabs(c) || block_size(c) > span - SLAB_SIZE);
            // A medium span may start at any slab: its block starts it, wherever that is.
            if is_medium(c) {
                let at = (7 << 22) + 5 * SLAB_SIZE;
                assert_eq!(block_start_class(at, c.map_entry()), Some(c), "class {c}");
                assert_eq!(block_start_class(at + 16, c.map_entry()), None, "class {c}");
            }
        }
        // Bytes that are no class (free, header and large markers) start no block.
        for e in NUM_CLASSES..=255 {
            assert_eq!(block_start_class(7 << 22, e as u8), None, "byte {e}");
        }
    }

    #[test]
    fn spans_are_the_fewest_slabs_that_hold_two_blocks_or_one_medium_block() {
        for c in Class::all() {
            let (n, b) = (span_slabs(c), block_size(c));
            let blocks = n * SLAB_SIZE / b;
            assert!((1..=MAX_SPAN_SLABS).contains(&n), "class {c}");
            let align = span_align_slabs(c);
            if b >= SLAB_SIZE {
                assert_eq!(align, 1, "class {c}");
            } else {
                assert!(
                    align.is_power_of_two() && align >= n && align < 2 * n,
                    "class {c}"
                );
            }
            if b >= SLAB_SIZE {
                // One block, and no slab more than it needs.
                assert_eq!(blocks, 1, "class {c}");
                assert!((n - 1) * SLAB_SIZE < b, "class {c}");
                continue;
            }
            // (The tail past the last whole block, up to a quarter of the span, is
            // address space only: never carved, so never touched.)
            assert!(n.is_power_of_two(), "class {c}");
            assert!(blocks >= 2, "class {c}: {blocks} blocks");
            assert!(n == 1 || (n / 2) * SLAB_SIZE / b < 2, "class {c}");
            assert_eq!(n == 1, b <= 32 << 10, "class {c}");
        }
    }

    #[test]
    fn medium_classes_are_the_classes_of_a_slab_or_more() {
        let listed: Vec<Class> = medium_classes().collect();
        let medium: Vec<Class> = Class::all().filter(|&c| is_medium(c)).collect();
        assert!(!listed.is_empty());
        assert_eq!(listed, medium);
    }

    #[test]
    fn medium_blocks_fill_their_slabs() {
        // No colour past a slab: a medium block is alone in its span, so 64 bytes more
        // would only cost a slab (192 KiB + 64 needs four).
        for c in Class::all().filter(|&c| block_size(c) >= SLAB_SIZE) {
            assert_eq!(block_size(c) % (16 << 10), 0, "class {c}");
        }
    }
}
