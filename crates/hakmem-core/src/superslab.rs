//! Superslabs and the slabs they are carved into.
//!
//! ```text
//!  chunk base (4 MiB aligned)                                      + 4 MiB
//!  | slab 0: header          | slab 1 | slab 2 ... slab 5 | ...   | slab 63 |
//!  | class_map | fields | SlabMeta x 64 |        |  one span of 4 slabs   |         |
//! ```
//!
//! A superslab is a 4 MiB chunk divided into 64 slabs of 64 KiB. Slab 0 holds the header
//! (only its first two pages are ever touched); any other slab, or a run of 2 to 16 slabs
//! (a *span*, starting at a multiple of its length rounded up to a power of two, or at
//! any slab for a medium span, whose one block starts it: [`span_align_slabs`]), serves
//! one size class at a time, whatever the class: all classes share one pool of
//! superslabs. The metadata of a span lives in the [`SlabMeta`] of its first slab.
//!
//! From a block's address: `chunk_base(p)` is its superslab, `(p >> SLAB_SHIFT) & 63` its
//! slab, `class_map` of that slab its class, and the span's first slab is that index
//! rounded down to the class's span alignment (a medium block's own slab). No search
//! anywhere. A medium span's slabs past its first hold [`MAP_TAIL`], not its class.
//!
//! Ownership: each superslab is owned by one thread's heap (its `owner`, an opaque
//! [`OwnerId`] this layer only stores and compares), or by nobody while it sits in the
//! shared [`pool`](crate::pool). Only the owner touches the `Cell` fields of the
//! superslab and its slabs ("the owner" is whoever acts for the owning heap: the heap
//! layer serializes its thread and the background return with the heap's lock). Other threads read `class_map` (stable while they hold a
//! block of that slab), push onto a slab's `remote` list and set its bit in
//! `remote_pending`.

use crate::chunk_map::{
    ChunkHeader, CHUNK_SHIFT, CHUNK_SIZE, MAP_FREE, MAP_HEADER, MAP_TAIL, SLABS,
};
use crate::misuse::{self, Misuse};
use crate::os;
use crate::remote::{Block, RemoteFreeList};
use crate::size_class::{
    block_size, reciprocal, span_align_slabs, span_slabs, starting_slabs, Class, PerClass,
    BLOCK_SIZE, MIN_ALIGN, NUM_CLASSES, SLAB_SHIFT, SLAB_SIZE,
};
use crate::slab_map;
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use core::cell::Cell;
use core::ptr::null_mut;

/// Bits of the slabs that can serve blocks (all but slab 0).
pub const USABLE_SLABS: u64 = !1;

/// Metadata of one slab (or of a span: then it is the first slab's).
///
/// Invariant (owner's view): `used` = blocks handed out of this slab to thread caches or
/// users, *including* blocks sitting on `remote` (they are counted back only when the
/// owner takes them); `capacity - used` = blocks on `free` (`free_len` of them) + blocks
/// whose bit is set in the span's bitmap (`bits_len` of them, all below `bump`) + blocks
/// never carved (`(end - bump) / block_size`). So `used == 0` means every block is home
/// and no other thread can still touch the slab. Only the owner touches the `Cell` fields.
///
/// The metadata of a slab that is not the first of a span in use is read only through a
/// stale pending bit (`Heap::collect_pending`, which then finds an empty list):
/// [`SuperSlab::carve_slab`] sets every field of a span's first slab before use, its
/// `remote` list is empty whenever the slab is not in use (a span is released only at
/// `used == 0`), and its `class` is always a class (set by a carve, or zero). So
/// [`SuperSlab::init`] leaves the metadata of a recycled superslab as it was.
///
/// # The remote-free protocol
///
/// A thread that holds blocks of a slab it does not own gives them back in two steps,
/// both in [`SuperSlab::push_remote`], in this order:
///
/// 1. set the slab's bit in its superslab's `remote_pending` (`Release`), so that the
///    owner's slow path finds the slab without scanning;
/// 2. push the chain on `remote` with one compare-and-swap (`Release`: the chain's links
///    are visible to whoever takes the list), its length added in the same word.
///
/// The owner ([`SlabMeta::collect_remote`]) takes the whole list (`Acquire`) and lowers
/// `used` by the length that came with it. Why this is safe:
///
/// - The compare-and-swap is a pusher's last touch of the slab, and until it the pusher's
///   blocks count in `used`: the slab cannot look empty, and the owner cannot give the span
///   (or the superslab) back, while a pusher still writes to it.
/// - A list's length is exact, since it changes with the list in one atomic word: `used`
///   drops by exactly the blocks that came home.
/// - The owner clears a slab's pending bit before draining and sets it again when the
///   drain found nothing ([`SuperSlab::take_pending`] / [`SuperSlab::restore_pending`]):
///   a pusher may be between its step 1 and its step 2.
/// - Only the owner removes from `remote`, all at once, so the list has no ABA problem
///   (see [`RemoteFreeList`]).
///
/// Before both steps, the process's first push sets [`REMOTE_FREES`], which tells owners
/// that pending bits may exist at all: a hint for where to look, no part of the above.
#[repr(C)]
pub struct SlabMeta {
    /// Blocks given back by the owner in dense stretches ([`SlabMeta::put_stretch`]) and
    /// blocks collected from `remote` (owner only).
    free: Cell<*mut Block>,
    /// Next never-used block (owner only); blocks are carved lazily so untouched pages
    /// stay out of RSS.
    bump: Cell<usize>,
    /// End of the last whole block of the span.
    end: Cell<usize>,
    used: Cell<u32>,
    /// Length of `free` (owner only): it lets a refill take the whole list without
    /// walking it.
    free_len: Cell<u32>,
    class: Cell<Class>,
    /// Links of the owner's partial list.
    pub next: Cell<*mut SlabMeta>,
    pub prev: Cell<*mut SlabMeta>,
    /// Blocks given back by other threads, with their count (the remote-free protocol,
    /// above), named from the superslab's base ([`SlabMeta::chunk_base`]).
    remote: RemoteFreeList,
    /// Whether the slab is on its owner's partial list for its class.
    in_partial: Cell<bool>,
    /// Blocks given back by the owner, as set bits of the span's bitmap (owner only;
    /// [`SuperSlab`]'s `free_bits`): how many bits are set.
    bits_len: Cell<u32>,
}

/// Who owns a superslab: an opaque id chosen by the layer above (a heap's address), or
/// [`OwnerId::NONE`]. This layer only stores and compares it, so it never calls up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnerId(usize);

impl OwnerId {
    /// Owned by nobody (in the pool).
    pub const NONE: OwnerId = OwnerId(0);

    /// The id of the owner at address `addr` (not 0).
    #[inline(always)]
    pub fn of_addr(addr: usize) -> OwnerId {
        debug_assert_ne!(addr, 0);
        OwnerId(addr)
    }
}

/// How a superslab has room for a class ([`SuperSlab::fit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fit {
    /// Among the free slabs of a superslab of the class's kind, or of an empty one.
    Kind,
    /// Among the free slabs of a superslab of small blocks, for a wide class, as
    /// [`Borrow`] allows ([`SuperSlab::fit`]).
    OtherKind,
}

/// Which free slabs of a superslab of small blocks a wide class may take
/// ([`SuperSlab::fit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Borrow {
    /// Those whose pages may still be resident.
    Resident,
    /// Any: the OS refuses memory.
    Any,
}

/// Header of a superslab, at the start of its chunk. What a heap's walks over its
/// superslabs read of each (`owner`, `free_slabs`, `dirty`, the links, `wide`) shares
/// the line after the class map: the headers lie 4 MiB apart, so in one set of the CPU's
/// caches, where a walk over a few dozen misses on every line it reads. What other
/// threads write (`remote_pending`) lies on the next.
#[repr(C)]
pub struct SuperSlab {
    pub header: ChunkHeader,
    /// Who owns this superslab; [`OwnerId::NONE`] while it is in the pool.
    owner: AtomicUsize,
    /// Bit `i` set iff slab `i` serves no class (owner only). Slab 0 is never free.
    free_slabs: Cell<u64>,
    /// Bit `i` set: slab `i` is free and its pages may still be resident (owner only).
    /// A subset of `free_slabs`.
    dirty: Cell<u64>,
    /// Links of the owner's list of superslabs, or of a pool list.
    pub next: Cell<*mut SuperSlab>,
    pub prev: Cell<*mut SuperSlab>,
    /// Links of the owner's superslabs in order of address (owner only; the heap's
    /// `owned_lowest`).
    pub lower: Cell<*mut SuperSlab>,
    pub higher: Cell<*mut SuperSlab>,
    /// Whether it holds *wide* blocks ([`is_wide_class`]) until it is empty again (owner
    /// only; then the pool's, which gives it to a thread wanting the same kind first):
    /// decided by the first carve after it was empty. Small blocks (up to 8 KiB, whose
    /// slabs fill up densely) and wide ones (often touched sparsely, as a buffer grown by
    /// `realloc` is) take the free slabs of their own kind of superslab, so that the
    /// first can have huge pages early and the second not pay for them; wide blocks take
    /// a small superslab's free slabs when no superslab of their kind has room, and only
    /// resident ones where it asks for huge pages ([`SuperSlab::fit`]).
    wide: Cell<bool>,
    /// The huge-page advice the chunk's mapping carries ([`Advice`]); kept by
    /// [`SuperSlab::init`], since it belongs to the mapping, not to the layout.
    advice: Cell<Advice>,
    /// Bit `i` set: slab `i`'s remote list may be non-empty (the remote-free protocol,
    /// on [`SlabMeta`]).
    remote_pending: AtomicU64,
    /// Dirty slabs that were already dirty at the previous decommit pass (owner only).
    aging: Cell<u64>,
    /// When it went back to the pool empty ([`crate::os::now_ms`]; the pool's only).
    pub released_ms: Cell<u64>,
    slabs: [SlabMeta; SLABS],
    /// The free bitmap of the span that starts at each slab (owner only): bit `i` set
    /// iff block `i` of the span was given back by its owner as a scattered block
    /// ([`SlabMeta::put_stretch`]) and not taken since. Every word of a slab that starts
    /// no span in use is zero: a fresh mapping's are, a take clears the bits it takes,
    /// and [`SuperSlab::release_slab`] those that are left. So [`SuperSlab::init`] leaves
    /// the bitmaps of a recycled superslab as they are, and a slab's words are touched
    /// only once its blocks are given back scattered.
    free_bits: [[Cell<u64>; BITMAP_WORDS]; SLABS],
}

/// Words of a span's free bitmap: a bit for each block of the span with the most, a slab
/// of 16-byte blocks.
const BITMAP_WORDS: usize = SLAB_SIZE / MIN_ALIGN / 64;

/// The superslabs a heap owns, in bytes, from which it asks for huge pages for those of
/// small blocks it carves (in every profile; lean's decommit of a free slab splits the
/// page it lies in): below it, a 2 MiB page made resident by a few small blocks would be
/// much of the heap's memory; above it, a heap that large gains one page fault and one
/// TLB entry per 2 MiB instead of 512, and a superslab advised before it fills costs at
/// most 4 MiB beside the 8 the heap holds.
///
/// Counted per heap, not over the process: with all of hakmem's mappings counted against
/// 32 MiB (before `aed662e`), a program past that in all gave huge pages to the sparse
/// superslabs of each of its threads. 16 threads each churning 256 blocks of 16 B..33 KiB
/// of their own (a C program, 250K replacements a thread) peaked at 62 MiB, 51 of them in
/// huge pages (`AnonHugePages` of `/proc/self/smaps_rollup` with all threads live;
/// tcmalloc 15 MiB, jemalloc 4.6); 23 MiB with this rule. Per heap, 32 MiB was too late
/// for two threads of 50 MB each: `c-batch-xthread` took 15K page faults against 4.6K
/// under the process rule, 3.5K with 8 MiB (`perf stat -e page-faults`, one run each;
/// `c-batch-fwd` 8.1K, 6.6K, 2.5K; `c-live-growth` 9.6K, 8.1K, 3.6K), peak RSS within
/// 0.5 MiB.
pub const HUGE_PAGES_FROM: usize = 8 << 20;

/// Whether a heap that owns `owned` superslabs asks for huge pages for the superslabs of
/// small blocks it carves ([`HUGE_PAGES_FROM`]), where their pages are written densely
/// (`Heap::small_blocks_dense`).
pub fn huge_pages_pay(owned: usize) -> bool {
    owned.saturating_mul(CHUNK_SIZE) >= HUGE_PAGES_FROM
}

/// Whether the pages of small blocks that a superslab without huge pages shows
/// `resident` of the `carved` it has carved blocks from ([`SuperSlab::carved_residency`])
/// are written densely enough for huge pages to cost little memory: at least 15/16 of
/// them resident, out of at least 1 MiB carved.
///
/// A carve writes each block's link at its start, so only blocks over a page can leave
/// carved pages untouched: buffers of 2, 4 and 8 KiB each holding a message of
/// 100..600 B (`c-conn-buffers-small`) show 0.70 of them resident, and every other
/// workload of ours at least 0.99 where it is sampled.
pub fn dense_enough(resident: usize, carved: usize) -> bool {
    carved >= (1 << 20) / os::PAGE_SIZE && resident * 16 >= carved * 15
}

/// Whether blocks of class `c` (written at their start at least: a carve writes each
/// block's link there) may leave over 1/16 of the pages they lie in untouched: those over
/// 16/15 of a page, where `1 - 4096 / size` of the pages hold no block's start.
pub fn may_be_sparse(c: Class) -> bool {
    block_size(c) * 15 > os::PAGE_SIZE * 16
}

/// Whether a heap whose spans of wide blocks ([`is_wide_class`]) hold `wide_spans` bytes
/// asks for huge pages for the superslabs of wide blocks it takes next (for blocks the
/// program writes densely only: `Heap::huge_pages_for`, `Heap::wide_blocks_dense`): from
/// the profile's `wide_huge_pages_from` on (16 MiB, 32 in lean; `config.rs` has what each
/// costs and gives).
///
/// Counted in spans, not in superslabs: a heap of wide blocks may own many superslabs
/// that few of them hold (`c-wide-churn`, a thousand slots of 16 B..32 KiB, owns 32 MiB
/// of which 15 are resident, and huge pages from its first 32 MiB of superslabs made
/// its peak 16.0 MiB against 14.6). A thousand strings grown to 64 KiB at once by
/// appends (`c-string-builders`) fault in 62 MiB of wide blocks a page at a time
/// without them: 18.5K faults and 1.39x the time with huge pages from the heap's first
/// 32 MiB of superslabs on (2.0K faults), 5.5K faults counted in spans from 32 MiB (5
/// alternated runs each). What huge pages cost is the bytes of a span a program never
/// touches: counted in superslabs, `c-live-growth`, whose blocks of up to 64 KiB are
/// written at both ends only, peaked at 234 MiB against 220.
pub fn wide_huge_pages_pay(wide_spans: usize) -> bool {
    wide_spans >= crate::config::current().wide_huge_pages_from
}

/// Transparent huge pages asked for a superslab's mapping ([`crate::os::advise_huge_pages`]).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Advice {
    /// Never advised: the kernel's default. Read from a fresh mapping's zeroes, never
    /// written.
    #[allow(dead_code)]
    Default = 0,
    Huge = 1,
    NoHuge = 2,
    /// Huge, asked for once its first spans were carved with 4 KiB pages and written
    /// densely ([`SuperSlab::advise_huge_late`]): those still show how the program writes,
    /// until it is carved again from empty (then `Huge`).
    LateHuge = 3,
}

const _: () = assert!(core::mem::size_of::<SuperSlab>() <= SLAB_SIZE);
// The fields a walk over a heap's superslabs reads share one line ([`SuperSlab`]).
const _: () = assert!(
    core::mem::offset_of!(SuperSlab, owner) >= 64
        && core::mem::offset_of!(SuperSlab, wide) < 128
        && core::mem::offset_of!(SuperSlab, remote_pending) >= 128
);
const _: () = assert!(core::mem::size_of::<SlabMeta>() == 72);
// Every span's blocks have a bit: the classes of more than a slab's worth of blocks in a
// span are the 16-byte class's.
const _: () = {
    let mut c = 0;
    while c < NUM_CLASSES {
        let cl = Class::new(c);
        assert!(span_slabs(cl) * SLAB_SIZE / BLOCK_SIZE[c] as usize <= BITMAP_WORDS * 64);
        c += 1;
    }
};

/// A table of `f` over the classes, built at compile time.
macro_rules! per_class {
    ($f:ident) => {{
        let mut t = [0u8; NUM_CLASSES];
        let mut c = 0;
        while c < NUM_CLASSES {
            t[c] = $f(Class::new(c)) as u8;
            c += 1;
        }
        PerClass(t)
    }};
}

/// Span length of each class ([`span_slabs`]), as a table.
static SPAN: PerClass<u8> = per_class!(span_slabs);

/// Span alignment of each class ([`span_align_slabs`]), as a table for the free path.
static SPAN_ALIGN: PerClass<u8> = per_class!(span_align_slabs);

/// Where a span of class `c` may start: at a multiple of this many slabs
/// ([`span_align_slabs`]).
#[inline]
pub fn span_align(c: Class) -> usize {
    SPAN_ALIGN[c] as usize
}

/// Whether blocks of class `c` are *wide*: over 8 KiB, a slab of 2 to 7 of them (up to
/// 32 KiB) or a span of several slabs. They have superslabs of their own
/// ([`SuperSlab::holds_wide`]), and take another's slabs only as [`SuperSlab::fit`] says.
#[inline]
pub fn is_wide_class(c: Class) -> bool {
    block_size(c) > SLAB_SIZE / 8
}

/// Where the blocks of one class lie in their spans, read from the class tables once by a
/// caller that gives back many blocks of the class (a flush). `c-list-rebuild`, whose
/// flushes give back lone blocks, took 68.2M instructions with the tables read for each
/// block, and 65.4M with them read once per flush (callgrind, 300K operations).
#[derive(Clone, Copy)]
pub struct SpanGeometry {
    class: Class,
    /// [`SuperSlab::span_align_bytes`].
    align: usize,
    size: usize,
    /// [`reciprocal`] of the block size.
    recip: u64,
}

impl SpanGeometry {
    #[inline(always)]
    pub fn of(c: Class) -> SpanGeometry {
        SpanGeometry {
            class: c,
            align: SuperSlab::span_align_bytes(c),
            size: block_size(c),
            recip: reciprocal(c),
        }
    }

    /// Whether the blocks at `a` and `b` lie in one span.
    #[inline(always)]
    pub fn same_span(&self, a: usize, b: usize) -> bool {
        (a ^ b) < self.align
    }

    /// How many steps of `step` bytes (a wrapping difference: negative steps go down)
    /// lead from `addr` to addresses in its span, at most. `step` is the distance between
    /// two blocks of one span, so shorter than a span; 0 (a block linked to itself, which
    /// only a program writing into a freed block makes) gives 0.
    #[inline(always)]
    pub fn steps_within(&self, addr: usize, step: usize) -> usize {
        let start = self.start(addr);
        let (room, stride) = if (step as isize) < 0 {
            (addr - start, step.wrapping_neg())
        } else {
            (start + self.align - 1 - addr, step)
        };
        debug_assert!(stride < self.align);
        // A span is at most a superslab, so both fit 32 bits, whose division is faster.
        (room as u32).checked_div(stride as u32).unwrap_or(0) as usize
    }

    /// The start of the span holding the block at `addr`: spans start at a multiple of
    /// their alignment and never cross a superslab; a span of several blocks is aligned
    /// to a power of two at least its length, and a medium span, aligned to a slab,
    /// starts at its one block.
    #[inline(always)]
    fn start(&self, addr: usize) -> usize {
        addr & !(self.align - 1)
    }

    /// The index of the block at `addr` in the span starting at `start`: its offset over
    /// the block size, with no division.
    #[inline(always)]
    fn index(&self, addr: usize, start: usize) -> usize {
        (((addr - start) as u128 * self.recip as u128) >> 64) as usize
    }
}

impl SuperSlab {
    /// The superslab holding `addr` (which must lie in a superslab).
    #[inline(always)]
    pub fn of(addr: usize) -> *mut SuperSlab {
        (addr & !(CHUNK_SIZE - 1)) as *mut SuperSlab
    }

    #[inline(always)]
    pub fn base(&self) -> usize {
        self as *const _ as usize
    }

    /// Zero the bytes of `chunk` that a superslab's header takes, so that
    /// [`SuperSlab::init`] finds them as in a fresh mapping: the chunk was a large block's
    /// (a cached extent's, `pool::acquire`), whose bytes are anything. Its huge-page advice
    /// then reads as never given, so the caller says which it gave ([`SuperSlab::init`]).
    ///
    /// # Safety
    /// `chunk` is a chunk-aligned mapping of `CHUNK_SIZE` bytes that nobody else uses.
    pub unsafe fn clear_header(chunk: *mut u8) {
        // SAFETY: by the caller, the header's bytes are ours to write.
        unsafe { core::ptr::write_bytes(chunk, 0, core::mem::size_of::<SuperSlab>()) };
    }

    /// Lay out a fresh or recycled chunk as an empty superslab owned by nobody;
    /// `advised_huge`: the caller just asked for huge pages for the fresh mapping.
    ///
    /// The header fields before the slabs' metadata are cleared; the metadata is zero in
    /// a fresh mapping and left as it was in a recycled superslab (the invariant on
    /// [`SlabMeta`]): clearing its 4.6 KiB cost a thread cycling medium blocks, which
    /// empties a superslab and takes one back from the pool on one medium allocation in
    /// ten, 9.6M of its 102M instructions (`bench-hakmem large 100000` under callgrind).
    ///
    /// # Safety
    /// `chunk` is a chunk-aligned mapping of `CHUNK_SIZE` bytes that nobody else uses,
    /// fresh or an empty superslab's.
    pub unsafe fn init(chunk: *mut u8, advised_huge: bool) -> *mut SuperSlab {
        let ss = chunk as *mut SuperSlab;
        // SAFETY: the chunk is ours and large enough for the header (checked above); all
        // header fields are valid when zero (a fresh mapping reads as zero, so `advice` is
        // `Default` there), then the class map and the mapping's advice are set.
        unsafe {
            let advice = (*ss).advice.get();
            core::ptr::write_bytes(chunk, 0, core::mem::offset_of!(SuperSlab, slabs));
            let s = &*ss;
            s.advice
                .set(if advised_huge { Advice::Huge } else { advice });
            for e in s.header.class_map.iter() {
                e.store(MAP_FREE, Ordering::Relaxed);
            }
            s.header.class_map[0].store(MAP_HEADER, Ordering::Relaxed);
            s.free_slabs.set(USABLE_SLABS);
            // What `SlabMeta`'s invariant promises of metadata left as it was (a chunk
            // that held anything else was cleared first: `clear_header`).
            debug_assert!(s
                .slabs
                .iter()
                .all(|m| m.remote.is_empty() && m.class.get().index() < NUM_CLASSES));
        }
        debug_assert_eq!(ss as usize >> CHUNK_SHIFT << CHUNK_SHIFT, ss as usize);
        ss
    }

    /// Who owns this superslab now. A thread that is not the owner may see a stale
    /// answer, but never its own id unless it is the owner (only an owner stores its id).
    #[inline(always)]
    pub fn owner(&self) -> OwnerId {
        OwnerId(self.owner.load(Ordering::Relaxed))
    }

    /// Hand the superslab to `id` (or to nobody). The caller holds it alone: it is the
    /// owner giving it up, or it just took it from the pool. Release, so that the next
    /// owner that reads the id with Acquire sees this one's writes.
    pub fn set_owner(&self, id: OwnerId) {
        self.owner.store(id.0, Ordering::Release);
    }

    /// Whether no slab serves a class.
    pub fn is_empty(&self) -> bool {
        self.free_slabs.get() == USABLE_SLABS
    }

    /// Whether it holds wide blocks ([`is_wide_class`], decided by
    /// [`SuperSlab::carve_slab`]); for its owner, or for the pool while nobody owns it.
    pub fn holds_wide(&self) -> bool {
        self.wide.get()
    }

    /// Ask for huge pages for the whole superslab (`huge`), or for none where they were
    /// asked for before; no system call when the mapping already carries the advice.
    fn advise(&self, huge: bool) {
        let want = match (huge, self.advice.get()) {
            (true, Advice::Huge) | (false, Advice::Default | Advice::NoHuge) => return,
            (true, Advice::LateHuge) => {
                // Carved again from empty with the advice it has: what it holds resident
                // shows the blocks it served before, not how the next ones are written.
                self.advice.set(Advice::Huge);
                return;
            }
            (true, _) => Advice::Huge,
            (false, Advice::Huge | Advice::LateHuge) => Advice::NoHuge,
        };
        // SAFETY: the superslab's own chunk, a mapping of `os`.
        unsafe { os::advise_huge_pages(self.base() as *mut u8, CHUNK_SIZE, want == Advice::Huge) };
        self.advice.set(want);
    }

    /// How [`SuperSlab::carve_slab`] would give a span for class `c` at a multiple of
    /// `align_slabs` slabs, taking what `borrow` allows of a superslab of the other kind,
    /// if it would (owner only).
    pub fn fit(&self, c: Class, align_slabs: usize, borrow: Borrow) -> Option<Fit> {
        self.room_for(c, align_slabs, borrow).map(|(_, fit)| fit)
    }

    /// The first slab of the span [`SuperSlab::carve_slab`] would carve for class `c`,
    /// and how it fits.
    ///
    /// A wide class may take the free slabs of a superslab of small blocks
    /// ([`SuperSlab::holds_wide`]): only those whose pages may still be resident
    /// (`dirty`, [`Borrow::Resident`]), which cost no page fault and no huge page that
    /// wide blocks would touch sparsely, and would otherwise stay resident unused. A
    /// thousand strings grown at once by appends (`c-string-builders`) left the
    /// superslabs of their small sizes with a few slabs each in use, held by the blocks
    /// the thread cache keeps of every class; without this, the strings' wide sizes
    /// mapped fresh superslabs beside them. Any free slab while the superslab has no
    /// huge pages (small heaps) mixed the kinds: `c-wide-churn` peaked at 16.8 MiB
    /// against 14.6 (5 alternated runs). Any free slab at all only when the OS refuses
    /// memory ([`Borrow::Any`]): 1 MiB blocks filled again after `trim` under an
    /// address-space limit (`hakmem-cabi/oom`) otherwise left the given-back slabs of the
    /// superslabs that wide blocks kept from emptying unused: 130 blocks where the first
    /// fill had 138.
    fn room_for(&self, c: Class, align_slabs: usize, borrow: Borrow) -> Option<(usize, Fit)> {
        let (slabs, fit) = if self.is_empty() || self.wide.get() == is_wide_class(c) {
            (self.free_slabs.get(), Fit::Kind)
        } else if !is_wide_class(c) {
            return None;
        } else if borrow == Borrow::Any {
            (self.free_slabs.get(), Fit::OtherKind)
        } else {
            (self.dirty.get(), Fit::OtherKind)
        };
        debug_assert!(
            align_slabs % span_align(c) == 0,
            "an alignment the class's spans lack"
        );
        let first = find_span(slabs, SPAN[c] as usize, align_slabs)?;
        Some((first, fit))
    }

    /// Carve a span for class `c` at a multiple of `align_slabs` slabs (a power of two, a
    /// multiple of [`span_align`]) out of the free slabs ([`SuperSlab::fit`] says how);
    /// null if there is no room. An empty superslab takes the kind of `c`, and asks for
    /// huge pages when `huge` says so (the carving heap's choice, [`huge_pages_pay`] and
    /// [`wide_huge_pages_pay`]), for none otherwise.
    ///
    /// # Safety
    /// The caller owns this superslab (or holds it alone, fresh from the pool).
    pub unsafe fn carve_slab(
        &self,
        c: Class,
        align_slabs: usize,
        huge: bool,
        borrow: Borrow,
    ) -> *mut SlabMeta {
        let Some((first, _)) = self.room_for(c, align_slabs, borrow) else {
            return null_mut();
        };
        let n = SPAN[c] as usize;
        if self.is_empty() {
            let wide = is_wide_class(c);
            self.wide.set(wide);
            self.advise(huge);
        }
        let mask = span_mask(first, n);
        self.free_slabs.set(self.free_slabs.get() & !mask);
        self.dirty.set(self.dirty.get() & !mask);
        self.aging.set(self.aging.get() & !mask);
        let starting = starting_slabs(c);
        for i in first..first + n {
            let e = if i < first + starting {
                c.map_entry()
            } else {
                MAP_TAIL
            };
            self.header.class_map[i].store(e, Ordering::Relaxed);
        }
        slab_map::set_span(self.slab_start(first), starting, c);
        let meta = &self.slabs[first];
        let size = block_size(c);
        let start = self.base() + first * SLAB_SIZE;
        let capacity = n * SLAB_SIZE / size;
        meta.free.set(null_mut());
        meta.free_len.set(0);
        meta.bits_len.set(0);
        meta.bump.set(start);
        meta.end.set(start + capacity * size);
        meta.used.set(0);
        meta.class.set(c);
        meta.in_partial.set(false);
        meta.next.set(null_mut());
        meta.prev.set(null_mut());
        debug_assert!(meta.remote.is_empty());
        meta as *const SlabMeta as *mut SlabMeta
    }

    /// Give the span of `meta` (empty: `used == 0`) back to the free slabs; returns the
    /// span's address range.
    ///
    /// # Safety
    /// The caller owns this superslab, and `meta` is one of its spans.
    pub unsafe fn release_slab(&self, meta: &SlabMeta) -> (usize, usize) {
        debug_assert_eq!(meta.used.get(), 0);
        let first = self.index_of(meta);
        let n = SPAN[meta.class()] as usize;
        if meta.bits_len.get() != 0 {
            // The bitmap of a span not in use is zero (`free_bits`), and every block of
            // this one is free: its set bits go.
            let blocks = (meta.end.get() - self.slab_start(first)) / block_size(meta.class());
            for w in &self.free_bits[first][..blocks.div_ceil(64)] {
                w.set(0);
            }
            meta.bits_len.set(0);
        }
        slab_map::clear_span(self.slab_start(first), n);
        for i in first..first + n {
            self.header.class_map[i].store(MAP_FREE, Ordering::Relaxed);
        }
        let mask = span_mask(first, n);
        self.free_slabs.set(self.free_slabs.get() | mask);
        self.dirty.set(self.dirty.get() | mask);
        (self.slab_start(first), n * SLAB_SIZE)
    }

    /// Give the pages of free slabs back to the OS: those free since the previous call
    /// (`only_aged`), or all of them. Returns the bytes decommitted.
    ///
    /// A superslab advised for huge pages is advised no longer once pages were given
    /// back (until it is empty and carved again): `khugepaged` collapses an advised 2 MiB
    /// stretch that has a single page present (`max_ptes_none` is 511 by default), which
    /// would make the given-back slabs resident again, zero-filled. A program that kept
    /// one 64-byte block in 2 MiB of 200 MiB and called `malloc_trim` in `lean` went from
    /// 233 to 40 MiB resident, and was back at 196 MiB after sleeping 120 s.
    ///
    /// # Safety
    /// The caller owns this superslab.
    pub unsafe fn decommit_free(&self, how: os::Decommit, only_aged: bool) -> usize {
        let dirty = self.dirty.get();
        let target = if only_aged {
            dirty & self.aging.get()
        } else {
            dirty
        };
        self.aging.set(dirty & !target);
        let mut m = target;
        let mut bytes = 0;
        while m != 0 {
            // One madvise per run of consecutive slabs.
            let first = m.trailing_zeros() as usize;
            let run = (!(m >> first)).trailing_zeros() as usize;
            let (start, len) = (self.slab_start(first), run * SLAB_SIZE);
            // SAFETY: free slabs of our own superslab hold nothing anyone needs.
            if unsafe { os::decommit(start as *mut u8, len, how) } {
                self.dirty.set(self.dirty.get() & !span_mask(first, run));
                bytes += len;
            }
            m &= !span_mask(first, run);
        }
        if bytes > 0 {
            self.advise(false);
        }
        bytes
    }

    /// Whether what it has carved shows how densely the program writes its blocks
    /// ([`SuperSlab::carved_residency`]): it was carved with 4 KiB pages, at least at
    /// first (a huge page is resident whole from its first write).
    pub fn shows_writes(&self) -> bool {
        self.advice.get() != Advice::Huge
    }

    /// Whether it never had huge pages since it was mapped: a superslab advised against
    /// them again ([`Advice::NoHuge`]) keeps the huge pages its blocks in use were faulted
    /// in with, resident whole whatever the program wrote of them.
    pub fn never_huge(&self) -> bool {
        self.advice.get() == Advice::Default
    }

    /// Whether it was carved with 4 KiB pages so far and is not advised against huge pages
    /// ([`SuperSlab::advise_huge_late`] may advise it).
    pub fn may_advise_huge_late(&self) -> bool {
        self.advice.get() == Advice::Default
    }

    /// Ask for huge pages for a superslab carved so far with 4 KiB pages: the stretches of
    /// 2 MiB not yet touched fault in as huge pages, and those that were are collapsed into
    /// huge pages now ([`os::collapse_huge_pages`]). It counts as showing how the program
    /// writes still ([`SuperSlab::shows_writes`]): it did when it was advised.
    pub fn advise_huge_late(&self) {
        debug_assert!(self.may_advise_huge_late());
        // SAFETY: the superslab's own chunk, a mapping of `os`.
        unsafe {
            os::advise_huge_pages(self.base() as *mut u8, CHUNK_SIZE, true);
            // A stretch with no page resident is refused (and has nothing to collapse).
            for half in [0, CHUNK_SIZE / 2] {
                os::collapse_huge_pages((self.base() + half) as *mut u8, CHUNK_SIZE / 2);
            }
        }
        self.advice.set(Advice::LateHuge);
    }

    /// Slabs serving a class.
    pub fn slabs_in_use(&self) -> u32 {
        (USABLE_SLABS & !self.free_slabs.get()).count_ones()
    }

    /// `(resident, carved)`: of the pages its spans in use have carved blocks from (below
    /// each span's carving point), how many are resident now (one `mincore`); `None`
    /// where the OS cannot say. A carve writes each block's link at its start, so a
    /// carved block's first page is always resident: the pages that are not are those of
    /// blocks longer than a page that the program never wrote past their start (owner
    /// only).
    pub fn carved_residency(&self) -> Option<(usize, usize)> {
        const PAGES: usize = CHUNK_SIZE / os::PAGE_SIZE;
        let mut map = [0u8; PAGES];
        if !os::residency(self.base(), &mut map) {
            return None;
        }
        let free = self.free_slabs.get();
        let (mut resident, mut carved) = (0, 0);
        let mut i = 1;
        while i < SLABS {
            if free & (1 << i) != 0 {
                i += 1;
                continue;
            }
            // A slab in use after a free one or after a span is the first of a span.
            let meta = &self.slabs[i];
            let first = (self.slab_start(i) - self.base()) / os::PAGE_SIZE;
            let end = (meta.bump.get() - self.base()).div_ceil(os::PAGE_SIZE);
            let pages = &map[first..end];
            resident += pages.iter().filter(|&&b| os::is_resident(b)).count();
            carved += pages.len();
            i += SPAN[meta.class()] as usize;
        }
        Some((resident, carved))
    }

    fn index_of(&self, meta: &SlabMeta) -> usize {
        (meta as *const SlabMeta as usize - self.slabs.as_ptr() as usize)
            / core::mem::size_of::<SlabMeta>()
    }

    /// Address of the first byte of slab `i`.
    pub fn slab_start(&self, i: usize) -> usize {
        self.base() + i * SLAB_SIZE
    }

    /// Metadata of the span holding `addr`, a block of `g`'s class in this superslab.
    #[inline(always)]
    pub fn meta_of(&self, addr: usize, g: &SpanGeometry) -> &SlabMeta {
        &self.slabs[slab_index(g.start(addr))]
    }

    /// The alignment of the spans of class `c`, in bytes: a power of two, so that two
    /// blocks `a` and `b` of the class lie in the same span iff `a ^ b` is below it
    /// (spans start at a multiple of it and never cross a superslab; a medium span
    /// aligned to a slab alone holds one block, at its start, so two of its class lie a
    /// slab or more apart).
    #[inline(always)]
    pub fn span_align_bytes(c: Class) -> usize {
        span_align(c) * SLAB_SIZE
    }

    /// Give back `p`, one handed-out block of class `g` in a span of this superslab that
    /// the caller owns, to its span's bitmap ([`SlabMeta::put_stretch`], for a stretch of
    /// one); returns the span's metadata. The span's slab index is found once, for its
    /// metadata and its bitmap alike: `c-list-rebuild`, whose flushes give back lone
    /// blocks, took 57.5M instructions at `230846a`, against 58.1M through `put_stretch`,
    /// which finds the bitmap from the metadata's address (callgrind, 300K operations), at
    /// the same speed (9 alternated runs).
    ///
    /// # Safety
    /// The caller owns the span holding `p`, a handed-out block of it, which it gives up.
    #[inline(always)]
    pub unsafe fn put_lone(&self, g: &SpanGeometry, p: *mut Block) -> &SlabMeta {
        let start = g.start(p as usize);
        let slab = slab_index(start);
        let meta = &self.slabs[slab];
        debug_assert!(g.class == meta.class(), "a geometry of another class");
        set_free_bit(&self.free_bits[slab], g, p, start);
        meta.bits_len.set(meta.bits_len.get() + 1);
        meta.used.set(meta.used.get() - 1);
        meta
    }

    /// Metadata of the span starting at slab `i`.
    pub fn meta(&self, i: usize) -> &SlabMeta {
        &self.slabs[i]
    }

    /// Give a chain of blocks of `meta`'s slab back from a thread that does not own it:
    /// flag, then push (steps 1 and 2 of the remote-free protocol on [`SlabMeta`]).
    ///
    /// # Safety
    /// `meta` is a slab of this superslab; `first` .. `last` is a chain of `n` of its
    /// handed-out blocks, linked through their first words, which the caller gives up.
    #[inline]
    pub unsafe fn push_remote(&self, meta: &SlabMeta, first: *mut Block, last: *mut Block, n: u32) {
        if !REMOTE_FREES.load(Ordering::Relaxed) {
            REMOTE_FREES.store(true, Ordering::Relaxed);
        }
        let bit = 1u64 << self.index_of(meta);
        if self.remote_pending.load(Ordering::Relaxed) & bit == 0 {
            self.remote_pending.fetch_or(bit, Ordering::Release);
        }
        // SAFETY: by the caller, the chain is linked and ours to give, and its blocks lie
        // in this superslab, past its header: within `REACH` of its base.
        unsafe { meta.remote.push_chain(meta.chunk_base(), first, last, n) };
    }

    /// Whether any superslab may have a pending bit: whether any thread ever gave a block
    /// back to a slab it does not own ([`REMOTE_FREES`]).
    pub fn any_pending() -> bool {
        REMOTE_FREES.load(Ordering::Relaxed)
    }

    /// Set the pending bits `bits` again (see the remote-free protocol on [`SlabMeta`]).
    ///
    /// # Safety
    /// The caller owns this superslab.
    pub unsafe fn restore_pending(&self, bits: u64) {
        if bits != 0 {
            self.remote_pending.fetch_or(bits, Ordering::Relaxed);
        }
    }

    /// Clear and return the pending bits, before draining the lists.
    ///
    /// # Safety
    /// The caller owns this superslab.
    pub unsafe fn take_pending(&self) -> u64 {
        if self.remote_pending.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        self.remote_pending.swap(0, Ordering::Acquire)
    }
}

/// Set by the first [`SuperSlab::push_remote`] in the process, never cleared: until then
/// no superslab has a pending bit, so an owner has no block of another thread's to look
/// for ([`SuperSlab::any_pending`]). A heap whose refill finds no partial slab looks
/// through every superslab it owns for such blocks before it carves a new slab (the
/// headers' lines, one per superslab); a single-threaded program never needs to. Without
/// the flag: 2.3 % more instructions in `c-batch-fwd`, 1.7 % in `c-live-growth`, 1.1 % in
/// `c-batch-rand`, 0.6 % in `c-half-freed` (callgrind, 300K operations). Relaxed: an owner
/// that reads it clear while the first push is under way looks later, as it would had
/// the push come a moment later.
static REMOTE_FREES: AtomicBool = AtomicBool::new(false);

/// The index in its superslab of the slab starting at `start` (any address in the slab
/// will do), in bounds of the slab tables.
#[inline(always)]
fn slab_index(start: usize) -> usize {
    (start >> SLAB_SHIFT) & (SLABS - 1)
}

/// Set the bit of `p`, a block of class `g` in the span starting at `start`, in the span's
/// free bitmap `bits`; a bit set already is a double free, reported. The test compares the
/// word with the bit set to the word before, which LLVM makes one `bts` with no mask to
/// build, and it comes after the store (which then wrote the word unchanged), so that the
/// word's address is not needed past the branch: `c-list-rebuild`, whose flushes set one
/// bit a block, takes 55.53M instructions, against 56.20M with the store after the test
/// and 0.65M more again with the bit tested apart (callgrind, 300K operations).
#[inline(always)]
fn set_free_bit(bits: &[Cell<u64>; BITMAP_WORDS], g: &SpanGeometry, p: *mut Block, start: usize) {
    let i = g.index(p as usize, start);
    let cell = &bits[(i / 64) % BITMAP_WORDS];
    let word = cell.get();
    let set = word | 1 << (i % 64);
    cell.set(set);
    if set == word {
        // Free already: given back twice without being handed out between.
        misuse::report_misuse(p.cast(), Misuse::DoubleFree, Some(g.class));
    }
}

/// How many block sizes apart the ends of a dense stretch of `len` blocks may lie
/// ([`SlabMeta::put_stretch`]): two a block, as when every other block was freed, and two
/// more for the blocks a thread's stash took out of the run (`thread_cache.rs`, `Stash`:
/// two in a row at most). Without those two, a stash that took two blocks of
/// `c-half-freed`'s every other one made the next flush's stretch set its bits one by
/// one: 173.4M instructions against 160.5M with them (callgrind, 1.5M operations).
#[inline(always)]
fn dense_reach(len: u32) -> usize {
    2 * len as usize + 2
}

fn span_mask(first: usize, n: usize) -> u64 {
    (if n >= 64 { !0 } else { (1u64 << n) - 1 }) << first
}

/// First index of `n` (at most 32) free slabs starting at a multiple of `align` (a power
/// of two, at most 32; 1: anywhere), in O(log n).
fn find_span(free: u64, n: usize, align: usize) -> Option<usize> {
    debug_assert!(align.is_power_of_two() && n >= 1);
    debug_assert!(align <= 32 && n <= 32);
    let mut m = free;
    // Fold: after each step, bit i says slabs i..i+width are all free (shifting brings
    // zeros in from the top, so no run passes the superslab's end).
    let mut width = 1;
    while width < n {
        let step = width.min(n - width);
        m &= m >> step;
        width += step;
    }
    let aligned = match align {
        1 => !0u64,
        2 => 0x5555_5555_5555_5555,
        4 => 0x1111_1111_1111_1111,
        8 => 0x0101_0101_0101_0101,
        16 => 0x0001_0001_0001_0001,
        _ => 0x0000_0001_0000_0001,
    };
    let m = m & aligned;
    (m != 0).then(|| m.trailing_zeros() as usize)
}

impl SlabMeta {
    /// The class the slab serves (set when carved, while the slab is not free).
    #[inline]
    pub fn class(&self) -> Class {
        self.class.get()
    }

    #[inline]
    pub fn used(&self) -> u32 {
        self.used.get()
    }

    /// Where fresh carving goes on: every block below it was handed out at least once.
    #[inline]
    pub fn carved_to(&self) -> usize {
        self.bump.get()
    }

    #[inline]
    pub fn in_partial(&self) -> bool {
        self.in_partial.get()
    }

    /// Note whether the slab is on its owner's partial list.
    ///
    /// # Safety
    /// The caller owns the slab.
    #[inline]
    pub unsafe fn set_in_partial(&self, v: bool) {
        self.in_partial.set(v)
    }

    /// Whether a block can be taken without looking at the remote list.
    #[inline]
    pub fn has_free(&self) -> bool {
        self.has_freed() || self.bump.get() < self.end.get()
    }

    /// Whether a block freed here, or collected from the remote list, waits on the free
    /// list or in the bitmap, leaving the uncarved end aside.
    #[inline]
    pub fn has_freed(&self) -> bool {
        !self.free.get().is_null() || self.bits_len.get() != 0
    }

    /// The span's start and its free bitmap (`SuperSlab::free_bits`): the start is the
    /// span's last block's end (inside the span) rounded down to the span's alignment.
    #[inline(always)]
    fn span_bits(&self) -> (usize, &[Cell<u64>; BITMAP_WORDS]) {
        let start = SpanGeometry::of(self.class()).start(self.end.get() - 1);
        (start, self.bits_at(start))
    }

    /// The free bitmap of this span, which starts at `start`: that of the slab that is
    /// what is left of the start's offset in the chunk, with no division by the
    /// metadata's size.
    #[inline(always)]
    fn bits_at(&self, start: usize) -> &[Cell<u64>; BITMAP_WORDS] {
        // SAFETY: a `SlabMeta` lies in the header of the superslab at its chunk's base,
        // mapped while the slab is in use (its owner calls here).
        let ss = unsafe { &*(self.chunk_base() as *const SuperSlab) };
        &ss.free_bits[slab_index(start)]
    }

    /// The start of the superslab this slab lies in: its metadata sits in the header.
    #[inline]
    fn chunk_base(&self) -> *mut u8 {
        ((self as *const SlabMeta as usize) & !(CHUNK_SIZE - 1)) as *mut u8
    }

    /// Take blocks: up to `want` (>= 1) of those whose bits are set in the span's bitmap,
    /// lowest addresses first ([`SlabMeta::put_stretch`] says why); else the whole free
    /// list when there is one, without walking it (a list freed by another thread is a
    /// chain of cache misses, which the caller's pops then overlap with its own work;
    /// cutting `want` blocks off a list freed in random order waited on each of them in
    /// turn, three quarters of `Heap::refill`'s time in `c-batch-rand`, before such
    /// blocks went to the bitmap); otherwise up to `want` carved fresh from the slab's
    /// untouched end. Returns `(first, count)`, the chain null-terminated; count 0 when
    /// the slab has none. A whole list is at most one span: 4,096 blocks of 16 B, one
    /// 64 KiB slab for the classes up to 32 KiB, 2 to 6 blocks for the larger ones.
    ///
    /// # Safety
    /// The caller owns the slab.
    pub unsafe fn take(&self, want: usize) -> (*mut Block, usize) {
        let in_bits = self.bits_len.get() as usize;
        if in_bits > 0 {
            // SAFETY: by the caller; `1 <= k <= bits_len`.
            return unsafe { self.take_bits(want.clamp(1, in_bits)) };
        }
        let len = self.free_len.get() as usize;
        let first = self.free.get();
        if len > 0 {
            self.free.set(null_mut());
            self.free_len.set(0);
            self.used.set(self.used.get() + len as u32);
            return (first, len);
        }
        let size = block_size(self.class());
        let bump = self.bump.get();
        let k = ((self.end.get() - bump) / size).min(want);
        if k == 0 {
            return (null_mut(), 0);
        }
        let mut q = bump;
        for _ in 1..k {
            // SAFETY: [bump, bump + k * size) lies in this slab, never handed out.
            unsafe { (*(q as *mut Block)).next = (q + size) as *mut Block };
            q += size;
        }
        // SAFETY: as above; `q` is the last block carved.
        unsafe { (*(q as *mut Block)).next = null_mut() };
        self.bump.set(bump + k * size);
        self.used.set(self.used.get() + k as u32);
        (bump as *mut Block, k)
    }

    /// Take the `k` blocks of lowest address whose bits are set, linked in address order
    /// and null-terminated, clearing their bits.
    ///
    /// # Safety
    /// The caller owns the slab, and `1 <= k <= bits_len`.
    unsafe fn take_bits(&self, k: usize) -> (*mut Block, usize) {
        let (start, bits) = self.span_bits();
        let size = block_size(self.class());
        let mut first: *mut Block = null_mut();
        let mut tail: *mut *mut Block = &raw mut first;
        let mut left = k;
        let mut w = 0;
        while left > 0 {
            // `bits_len` bits are set, so `k` are found before the last word.
            let cell = &bits[w % BITMAP_WORDS];
            let mut word = cell.get();
            while word != 0 && left > 0 {
                let p = (start + (w * 64 + word.trailing_zeros() as usize) * size) as *mut Block;
                word &= word - 1;
                // SAFETY: `tail` is `first` or the link of the block taken before; `p` is a
                // free block of this span (its bit was set), ours to link.
                unsafe {
                    *tail = p;
                    tail = &raw mut (*p).next;
                }
                left -= 1;
            }
            cell.set(word);
            w += 1;
        }
        // SAFETY: `tail` is the last block's link (`k >= 1`).
        unsafe { *tail = null_mut() };
        self.bits_len.set(self.bits_len.get() - k as u32);
        self.used.set(self.used.get() + k as u32);
        (first, k)
    }

    /// Give back a stretch of `len` (>= 1) blocks of this span that the owner holds,
    /// linked from `first` to `last`: a dense stretch (its ends at most
    /// [`dense_reach`]`(len)` block sizes apart) goes in front of the free list as it is;
    /// the blocks of any other set their bits in the span's bitmap.
    ///
    /// A lone block, or a few scattered over the span, is what a batch freed in random
    /// order gives back, and their bits are what makes [`SlabMeta::take`] hand them out
    /// again in address order: a program that frees a structure at random and builds the
    /// next one gets the new one laid out in order. `list-rebuild` (a list of 100K
    /// records freed at random, built again and walked) took 0.30x the time it took with
    /// free lists alone (7 alternated runs of `bench-hakmem list-rebuild`; mimalloc 3
    /// 0.25x); of 1M blocks of 32 B allocated after a shuffled free, 99.9 % lay right
    /// after the one before, where 55 % and 2.7 % did in the second and third rounds.
    /// A dense stretch was freed in the order it was allocated, or in reverse, or every
    /// other block so, and is in order already: one update splices it whole. Setting the
    /// bits of every stretch cost `c-half-freed` 10.9 % more instructions than free lists
    /// alone (33.3M against 30.0M, callgrind, 300K operations); with dense stretches
    /// spliced, 2.9 %.
    ///
    /// A block whose bit is set already was given back twice without being handed out
    /// between: a double free, reported (naming the block) before it could be handed
    /// out twice.
    ///
    /// # Safety
    /// The caller owns the slab, `g` is its class's, and the chain's blocks are blocks of it,
    /// handed out.
    #[inline]
    pub unsafe fn put_stretch(
        &self,
        g: &SpanGeometry,
        first: *mut Block,
        last: *mut Block,
        len: u32,
    ) {
        debug_assert!(g.class == self.class(), "a geometry of another class");
        if len > 1 && (last as usize).abs_diff(first as usize) <= dense_reach(len) * g.size {
            // SAFETY: by the caller.
            return unsafe { self.put_chain(first, last, len) };
        }
        let start = g.start(first as usize);
        let bits = self.bits_at(start);
        let mut p = first;
        let mut left = len;
        loop {
            set_free_bit(bits, g, p, start);
            left -= 1;
            if left == 0 {
                break;
            }
            // SAFETY: one of the stretch's `len` blocks, not the last, so linked to the next.
            p = unsafe { (*p).next };
        }
        self.bits_len.set(self.bits_len.get() + len);
        self.used.set(self.used.get() - len);
    }

    /// Put back a chain of `len` blocks that the owner holds, linked from `first` to
    /// `last`, in front of the free list.
    ///
    /// # Safety
    /// The caller owns the slab, and the chain's blocks are blocks of it, handed out.
    #[inline]
    pub unsafe fn put_chain(&self, first: *mut Block, last: *mut Block, len: u32) {
        // SAFETY: the chain is the caller's to give up.
        unsafe { (*last).next = self.free.get() };
        self.free.set(first);
        self.free_len.set(self.free_len.get() + len);
        self.used.set(self.used.get() - len);
    }

    /// Move the remote list onto the free list (the owner's side of the remote-free
    /// protocol), in front of what is there: the list comes with its last block and its
    /// length, so nothing is walked. Returns how many blocks came home (`used` fell by
    /// as many).
    ///
    /// # Safety
    /// The caller owns the slab.
    pub unsafe fn collect_remote(&self) -> u32 {
        let chain = self.remote.take_all(self.chunk_base());
        if chain.len == 0 {
            return 0;
        }
        // SAFETY: the caller owns the slab; the taken chain is ours, its blocks counted in
        // `used` (pushers linked it before publishing).
        unsafe { self.put_chain(chain.first, chain.last, chain.len) };
        chain.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::size_class::class_of_size;

    #[test]
    fn spans_are_found_aligned() {
        for n in [1, 2, 4, 8, 16, 32] {
            assert_eq!(find_span(USABLE_SLABS, n, n), Some(n), "{n}");
        }
        assert_eq!(find_span(0b1111_0110, 4, 4), Some(4));
        assert_eq!(find_span(0b0111_1110, 4, 4), None);
        assert_eq!(find_span(0, 1, 1), None);
        assert_eq!(find_span(!0, 8, 8), Some(0));
        assert_eq!(find_span(USABLE_SLABS & !(1 << 40), 32, 32), None);
        // Lengths that are no power of two start at a multiple of the next one.
        assert_eq!(find_span(USABLE_SLABS, 3, 4), Some(4));
        assert_eq!(find_span(0b0111_0000, 3, 4), Some(4));
        assert_eq!(find_span(0b1110_0000, 3, 4), None);
        assert_eq!(find_span(0xff00_0ff0, 12, 16), None);
        assert_eq!(find_span(0xfff0_0ff0, 12, 16), None);
        assert_eq!(find_span(0x0fff_0000, 12, 16), Some(16));
        assert_eq!(find_span(0x7fff_0000_0000_0000, 15, 16), Some(48));
        assert_eq!(find_span(0x3fff_0000_0000_0000, 15, 16), None);
        assert_eq!(find_span(USABLE_SLABS, 5, 8), Some(8));
        // Anywhere (a medium span): the lowest whole run.
        assert_eq!(find_span(USABLE_SLABS, 5, 1), Some(1));
        assert_eq!(find_span(0b1110_1100, 3, 1), Some(5));
        assert_eq!(find_span(0b1110_1100, 4, 1), None);
        assert_eq!(find_span(0x7ffe_0000_0000_0000, 14, 1), Some(49));
        // Only whole runs: the top slab is the last.
        assert_eq!(find_span(0x8000_0000_0000_0000, 2, 2), None);
    }

    #[test]
    fn steps_stay_within_the_span() {
        let c = class_of_size(48).unwrap();
        assert_eq!(block_size(c), 48);
        let g = SpanGeometry::of(c);
        let align = SuperSlab::span_align_bytes(c);
        let start = 7 * align;
        let blocks = align / 48;
        let last = start + (blocks - 1) * 48;
        // Up from the first block: to the last one, and to the 16 bytes past it (which
        // hold no block, so no link ever points there).
        assert_eq!(g.steps_within(start, 48), (align - 1) / 48);
        // Down from the last block, by one block a step and by two.
        assert_eq!(g.steps_within(last, 48usize.wrapping_neg()), blocks - 1);
        assert_eq!(
            g.steps_within(last, 96usize.wrapping_neg()),
            (blocks - 1) / 2
        );
        // None out of the span's ends.
        assert_eq!(g.steps_within(start, 48usize.wrapping_neg()), 0);
        assert_eq!(g.steps_within(start + align - 48, 48), 0);
        // A block linked to itself has no step to take.
        assert_eq!(g.steps_within(start + 480, 0), 0);
    }

    #[test]
    fn span_table_matches_size_class() {
        for (c, &n) in SPAN.iter() {
            assert_eq!(n as usize, span_slabs(c));
            assert_eq!(SPAN_ALIGN[c] as usize, span_align_slabs(c));
        }
    }

    /// A wide class takes only the resident free slabs of a small superslab, unless the
    /// OS refuses memory.
    #[test]
    fn a_wide_class_takes_only_resident_slabs_of_a_small_superslab() {
        let chunk = crate::os::map_aligned(CHUNK_SIZE, CHUNK_SIZE);
        assert!(!chunk.is_null());
        let small = crate::size_class::class_of_size(48).unwrap();
        let wide = crate::size_class::class_of_size(40_000).unwrap();
        let other_small = crate::size_class::class_of_size(4096).unwrap();
        assert!(is_wide_class(wide) && !is_wide_class(small));
        // SAFETY: a fresh chunk that only this test uses.
        unsafe {
            let ss = &*SuperSlab::init(chunk, false);
            assert_eq!(
                ss.fit(wide, span_align(wide), Borrow::Resident),
                Some(Fit::Kind),
                "an empty superslab takes any kind"
            );
            let metas: [&SlabMeta; 3] = core::array::from_fn(|_| {
                &*ss.carve_slab(small, span_align(small), true, Borrow::Resident)
            });
            assert_eq!(
                ss.fit(wide, span_align(wide), Borrow::Resident),
                None,
                "never-used slabs"
            );
            assert_eq!(
                ss.fit(other_small, span_align(other_small), Borrow::Resident),
                Some(Fit::Kind)
            );
            // Two adjacent slabs, aligned for a span of two, given back: resident.
            let _ = ss.release_slab(metas[1]);
            let _ = ss.release_slab(metas[2]);
            assert_eq!(
                ss.fit(wide, span_align(wide), Borrow::Resident),
                Some(Fit::OtherKind)
            );
            let span = &*ss.carve_slab(wide, span_align(wide), false, Borrow::Resident);
            assert_eq!(ss.index_of(span), 2);
            assert_eq!(ss.fit(wide, span_align(wide), Borrow::Resident), None);
            assert!(!ss.holds_wide(), "the superslab keeps its kind");
            // Given back, the slabs are not resident: taken only when the OS refuses
            // memory.
            let _ = ss.release_slab(span);
            assert_eq!(ss.decommit_free(os::Decommit::Now, false), 2 * SLAB_SIZE);
            assert_eq!(ss.fit(wide, span_align(wide), Borrow::Resident), None);
            assert_eq!(
                ss.fit(wide, span_align(wide), Borrow::Any),
                Some(Fit::OtherKind)
            );
            let span = &*ss.carve_slab(wide, span_align(wide), false, Borrow::Any);
            assert_eq!(ss.index_of(span), 2);
            assert_eq!(
                ss.fit(small, span_align(small), Borrow::Any),
                Some(Fit::Kind)
            );
            crate::os::unmap(chunk, CHUNK_SIZE);
        }
    }

    #[test]
    fn carve_take_put_release() {
        let chunk = crate::os::map_aligned(CHUNK_SIZE, CHUNK_SIZE);
        assert!(!chunk.is_null());
        // SAFETY: a fresh chunk that only this test uses.
        unsafe {
            let ss = &*SuperSlab::init(chunk, false);
            assert!(ss.is_empty());
            let c = crate::size_class::class_of_size(48).unwrap();
            let g = SpanGeometry::of(c);
            let meta = &*ss.carve_slab(c, span_align(c), false, Borrow::Resident);
            let cap = SLAB_SIZE / 48;
            let (first, n) = meta.take(10);
            assert_eq!(n, 10);
            assert_eq!(meta.used(), 10);
            assert_eq!(ss.header.entry(first as usize), c.map_entry());
            assert!(core::ptr::eq(ss.meta_of(first as usize, &g), meta));
            // The ten in scattered order: they come back lowest address first.
            let blocks: [*mut Block; 10] = core::array::from_fn(|i| first.byte_add(i * 48));
            for i in [7, 2, 9, 0, 4, 1, 8, 3, 6, 5] {
                meta.put_stretch(&g, blocks[i], blocks[i], 1);
            }
            assert_eq!((meta.used(), meta.bits_len.get()), (0, 10));
            let (list, n) = meta.take(3);
            assert_eq!((n, meta.used()), (3, 3));
            assert_eq!(list, blocks[0]);
            assert_eq!((*list).next, blocks[1]);
            assert_eq!((*(*list).next).next, blocks[2]);
            assert!((*blocks[2]).next.is_null());
            let (rest, n) = meta.take(usize::MAX);
            assert_eq!((rest, n, meta.used()), (blocks[3], 7, 10));
            // With no bit set and no list, up to `want` are carved where carving stopped.
            let (carved, n) = meta.take(5);
            assert_eq!((n, meta.used()), (5, 15));
            assert_eq!(carved as usize, first as usize + 10 * 48);
            // A dense stretch goes on the free list whole, and a refill takes it whole,
            // however few it wants.
            meta.put_stretch(&g, list, blocks[2], 3);
            assert_eq!((meta.used(), meta.bits_len.get()), (12, 0));
            assert_eq!(meta.take(1), (list, 3));
            // Three blocks far apart are no dense stretch: their bits are set.
            let far = [blocks[0], blocks[9], carved.byte_add(4 * 48)];
            (*far[0]).next = far[1];
            (*far[1]).next = far[2];
            meta.put_stretch(&g, far[0], far[2], 3);
            assert_eq!((meta.used(), meta.bits_len.get()), (12, 3));
            let (got, n) = meta.take(usize::MAX);
            assert_eq!((got, n), (blocks[0], 3));
            assert_eq!(((*got).next, (*(*got).next).next), (blocks[9], far[2]));
            // All fifteen handed out, back alone.
            for p in (0..15).map(|i| first.byte_add(i * 48)) {
                meta.put_stretch(&g, p, p, 1);
            }
            assert_eq!((meta.used(), meta.bits_len.get()), (0, 15));
            let (_, listed) = meta.take(usize::MAX);
            let (_, rest) = meta.take(usize::MAX);
            assert_eq!((listed, listed + rest), (15, cap));
            assert!(!meta.has_free());
            assert_eq!(meta.take(1).1, 0);
            // A remote push comes back through collect_remote.
            let b = (ss.slab_start(1) + 48) as *mut Block;
            ss.push_remote(meta, b, b, 1);
            assert_eq!(ss.take_pending(), 1 << 1);
            assert_eq!(meta.collect_remote(), 1);
            assert_eq!(meta.used() as usize, cap - 1);
            // The remote block joined the free list, which is taken whole.
            assert_eq!(meta.take(5), (b, 1));
            assert_eq!(meta.used() as usize, cap);
            // A span released with bits set is carved again with none: its blocks are
            // carved from its start.
            let other = &*ss.carve_slab(c, span_align(c), false, Borrow::Resident);
            let (b, n) = other.take(4);
            assert_eq!(n, 4);
            let mut p = b;
            while !p.is_null() {
                let next = (*p).next;
                other.put_stretch(&g, p, p, 1);
                p = next;
            }
            assert_eq!((other.used(), other.bits_len.get()), (0, 4));
            let _ = ss.release_slab(other);
            let again = &*ss.carve_slab(c, span_align(c), false, Borrow::Resident);
            assert!(core::ptr::eq(again, other));
            assert_eq!(again.take(usize::MAX), (b, cap));
            let words = &ss.free_bits[ss.index_of(again)];
            assert!(words.iter().all(|w| w.get() == 0));
            // All of them back at once, in order: a dense stretch.
            again.put_stretch(&g, b, b.byte_add((cap - 1) * 48), cap as u32);
            assert_eq!((again.used(), again.bits_len.get()), (0, 0));
            // Release a slab: it becomes dirty, then decommitted once aged.
            let _ = ss.release_slab(again);
            assert_eq!(ss.decommit_free(os::Decommit::Now, true), 0);
            assert_eq!(ss.decommit_free(os::Decommit::Now, true), SLAB_SIZE);
            assert_eq!(ss.decommit_free(os::Decommit::Now, false), 0);
            crate::os::unmap(chunk, CHUNK_SIZE);
        }
    }

    #[test]
    fn medium_spans_start_at_any_slab_unless_asked_otherwise() {
        let chunk = crate::os::map_aligned(CHUNK_SIZE, CHUNK_SIZE);
        assert!(!chunk.is_null());
        let one = crate::size_class::class_of_size(SLAB_SIZE).unwrap();
        let mib = crate::size_class::class_of_size(16 * SLAB_SIZE).unwrap();
        // SAFETY: a fresh chunk that only this test uses.
        unsafe {
            let ss = &*SuperSlab::init(chunk, false);
            let first = &*ss.carve_slab(one, span_align(one), false, Borrow::Resident);
            assert_eq!(ss.index_of(first), 1);
            // A 1 MiB span right after it, where a span at a multiple of its length
            // would leave slabs 2..16 to smaller ones.
            let plain = &*ss.carve_slab(mib, span_align(mib), false, Borrow::Resident);
            assert_eq!(ss.index_of(plain), 2);
            // One asked at a multiple of 1 MiB takes the next such place.
            let aligned = &*ss.carve_slab(mib, 16, false, Borrow::Resident);
            assert_eq!(ss.index_of(aligned), 32);
            assert_eq!(ss.slab_start(32) % (1 << 20), 0);
            let again = &*ss.carve_slab(mib, 16, false, Borrow::Resident);
            assert_eq!(ss.index_of(again), 48);
            // Slabs 18..32 are free: room for 14 slabs anywhere, none for 16.
            let fourteen = crate::size_class::class_of_size(14 * SLAB_SIZE).unwrap();
            assert_eq!(span_slabs(fourteen), 14);
            assert_eq!(ss.fit(mib, span_align(mib), Borrow::Resident), None);
            assert_eq!(
                ss.fit(fourteen, span_align(fourteen), Borrow::Resident),
                Some(Fit::Kind)
            );
            crate::os::unmap(chunk, CHUNK_SIZE);
        }
    }
}
