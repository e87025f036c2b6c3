//! The one path of every block: allocate, free, resize, measure, classify. Each function
//! takes `CHECKED`, a constant: with `false` it is the plain allocator, with `true` the
//! same path also takes the steps of [`crate::checks`] (canary, freed marker, layout),
//! so a fix to the path holds in both modes.
//!
//! Free without a size ([`free_or_else`], C's `free`) classifies a pointer once: the
//! slab map's byte of its slab ([`crate::slab_map`]) and an offset that starts a block
//! make it a small block; everything else goes to [`free_classified`], which reads the
//! chunk map bit and the class-map byte of its slab (see [`crate::chunk_map`]): the
//! `MAP_LARGE` byte sends it to the large header's validation, and anything that is no
//! block is handed to the caller's `not_freed`: the core reports it, the C ABI gives
//! foreign pointers to their own allocator first.

use crate::checks;
use crate::chunk_map::{self, MAP_LARGE};
use crate::large;
use crate::misuse::{report_misuse, Misuse};
use crate::os;
use crate::pool;
use crate::process::Hooks;
use crate::retain;
use crate::size_class::{
    self, block_size, class_for, class_for_cached, Class, MapByte, MIN_ALIGN, SLAB_SIZE, TABLE_MAX,
};
use crate::slab_map;
use crate::thread_cache::{self, Fill, KeepErrno};

/// What a pointer is, to hakmem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// A block of a size class (`usable` bytes).
    Small { class: Class, usable: usize },
    /// A large mapping (`usable` bytes).
    Large { usable: usize },
    /// Not a pointer hakmem handed out: outside every chunk hakmem mapped.
    Foreign,
    /// Inside hakmem's memory but not the start of a live block.
    Invalid,
}

/// Why [`crate::free_or_else`] did not free a pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotFreed {
    /// Outside every chunk hakmem mapped: someone else's pointer.
    Foreign,
    /// Inside hakmem's memory, but not the start of a live block.
    Invalid,
}

/// A block that a resize makes larger than this becomes a large mapping (plain mode),
/// even where a size class would hold it: a buffer that keeps growing (a `Vec`, a string
/// built by appends, C's doubling `realloc`) then grows in place inside its mapping, or
/// by `mremap`, instead of being copied into the next class each time (a `Vec` doubled
/// from 8 bytes to 2 MiB copied about 2 MiB on the way; now about twice this size). The
/// one rule that keeps the sized paths sound: a large block is never stated
/// smaller than this, so [`crate::dealloc`] and [`crate::realloc`] look the block up only
/// for stated sizes above it (blocks so large that one lookup is nothing beside their
/// cost), and a resize to this size or less moves a large block back into a class.
///
/// 128 KiB, glibc's default `mmap` threshold too: at 64, 128 and 256 KiB realloc-growth
/// ran 0.108, 0.111 and 0.117 s against glibc's 0.113 s, and realloc-xthread peaked at
/// 37.5, 46.0 and 49.1 MiB (83 MiB before); below, more small buffers would each hold a
/// mapping of their own.
pub const GROW_LARGE_FROM: usize = 128 << 10;

/// Whether a plain resize to `new_size` gives a large block ([`GROW_LARGE_FROM`]).
#[inline]
fn resized_is_large(new_size: usize, align: usize) -> bool {
    new_size > GROW_LARGE_FROM || class_for(new_size, align).is_none()
}

/// Whether `p`, a live block stated to be more than [`GROW_LARGE_FROM`] bytes, is a
/// large mapping rather than a block of a class.
#[inline]
fn is_large_block(p: *mut u8) -> bool {
    chunk_map::entry_of(p as usize) == Some(MAP_LARGE)
}

/// [`alloc_cached`] for any alignment (a power of two): a block of the class that serves
/// `(size, align)` from the thread's cache; null when the cache has none, the request is
/// not small, or it is aligned to more than a slab (the slow path finds it a block that
/// lies there). An alignment of 16 or less is [`alloc_cached`]'s request.
#[inline(always)]
pub fn alloc_cached_aligned(size: usize, align: usize) -> *mut u8 {
    if align <= MIN_ALIGN {
        return alloc_cached(size);
    }
    match class_for_cached(size, align) {
        Some(c) => thread_cache::pop(c),
        None => core::ptr::null_mut(),
    }
}

/// Allocate `size` bytes aligned to `align`; null on failure.
#[inline(always)]
pub fn alloc<const CHECKED: bool>(size: usize, align: usize) -> *mut u8 {
    alloc_filled::<CHECKED>(size, align, Fill::Unknown)
}

/// [`alloc`] of a block that the caller will write as `fill` says ([`Fill`]).
#[inline(always)]
fn alloc_filled<const CHECKED: bool>(size: usize, align: usize, fill: Fill) -> *mut u8 {
    match checks::request_class::<CHECKED>(size, align) {
        Some(c) => alloc_small::<CHECKED>(c, align, fill),
        None => alloc_large(size, align).0,
    }
}

/// A block of class `c` for a request aligned to `align`, armed when checked.
///
/// Plain, a request of more than [`GROW_LARGE_FROM`] bytes with no alignment over
/// [`MIN_ALIGN`] may get a block of a larger medium class when its own bin is empty
/// ([`thread_cache::alloc`]): a sized free of such a request finds the block's class by
/// lookup ([`stated_class`], [`dealloc_big`]), as C's `free` does. A checked block keeps
/// the canary of the class it was asked for. A request aligned to more than a slab, whose
/// medium class's blocks start at any slab, gets one that lies at its alignment.
#[inline(always)]
fn alloc_small<const CHECKED: bool>(c: Class, align: usize, fill: Fill) -> *mut u8 {
    let p = if align > SLAB_SIZE {
        thread_cache::alloc_aligned::<Hooks>(c, align, fill)
    } else {
        let wider_from = if CHECKED || align > MIN_ALIGN {
            usize::MAX
        } else {
            GROW_LARGE_FROM
        };
        thread_cache::alloc::<Hooks>(c, fill, wider_from)
    };
    if CHECKED && !p.is_null() {
        // SAFETY: a fresh block of class `c`.
        unsafe { checks::arm(p, c) };
    }
    p
}

/// [`alloc_cached`] of a request of at most [`TABLE_MAX`] bytes, for a front end that
/// has tested the size already (C's `malloc` compares it with a bound that also says
/// whether its mode lets it take the fast path).
///
/// # Safety
/// `size <= TABLE_MAX`.
#[inline(always)]
pub unsafe fn alloc_cached_table(size: usize) -> *mut u8 {
    // SAFETY: by the caller.
    unsafe { core::hint::assert_unchecked(size <= TABLE_MAX) };
    thread_cache::pop_mapped(size_class::map_byte_of_table_size(size))
}

/// [`alloc_cached_table`] with the first `size` bytes zeroed: C's `calloc` past the
/// multiplication and its mode's compare. The pair of `calloc(1, 32)` and `free` takes
/// 73 instructions this way, 83 through [`crate::alloc_zeroed`] (`pair.c` under
/// callgrind, as `cargo xtask pair-count` runs it; mimalloc 3 82.1).
///
/// # Safety
/// `size <= TABLE_MAX`.
#[inline(always)]
pub unsafe fn alloc_cached_table_zeroed(size: usize) -> *mut u8 {
    // SAFETY: by the caller.
    let p = unsafe { alloc_cached_table(size) };
    if !p.is_null() {
        // SAFETY: a block of the thread cache, of at least `size` bytes (no canary in
        // plain mode, the only one whose front end reaches the cache this way).
        unsafe { zero_fresh(p, size) };
    }
    p
}

/// The fast path alone, for a front end that wants its own slow path as a tail call (C's
/// `malloc`; plain mode): a block of at least `size` bytes, 16-byte aligned, from the
/// thread's cache; null when the cache has none or the request is not small.
/// [`alloc`](crate::alloc) then does the rest.
#[inline(always)]
pub fn alloc_cached(size: usize) -> *mut u8 {
    if size <= TABLE_MAX {
        // Its own pop, so that the sizes of the table reach it without a jump.
        // SAFETY: just tested.
        return unsafe { alloc_cached_table(size) };
    }
    alloc_cached_wide(size)
}

/// [`alloc_cached`] without the test for the class table's reach, for a front end that
/// has made it ([`alloc_cached_table`]): any size, but meant for those over
/// [`TABLE_MAX`] (the block comes without the prefetch of the bin's next one).
#[inline(always)]
pub fn alloc_cached_wide(size: usize) -> *mut u8 {
    match size_class::class_of_size(size) {
        Some(c) => thread_cache::pop_wide(c),
        None => core::ptr::null_mut(),
    }
}

/// As [`alloc`], with the first `size` bytes zeroed (fresh large mappings are not
/// cleared again).
#[inline]
pub fn alloc_zeroed<const CHECKED: bool>(size: usize, align: usize) -> *mut u8 {
    let (p, dirty) = match checks::request_class::<CHECKED>(size, align) {
        Some(c) => {
            let p = alloc_small::<CHECKED>(c, align, Fill::Dense);
            if !CHECKED && !p.is_null() {
                // SAFETY: a fresh block of class `c`, which no canary follows (plain).
                unsafe { zero_fresh(p, size) };
                return p;
            }
            (p, size)
        }
        None => {
            let (p, dirty) = alloc_large(size, align);
            if !p.is_null() {
                // SAFETY: a large block just handed out, of at least `size` bytes.
                unsafe { large::zero(p, size.min(dirty)) };
            }
            return p;
        }
    };
    if !p.is_null() {
        // SAFETY: the block holds at least `size` bytes (the canary lies after them).
        unsafe { core::ptr::write_bytes(p, 0, size.min(dirty)) };
    }
    p
}

/// Zero the first `size` bytes of a fresh block of a class: with stores of its own up to
/// [`ZERO_INLINE`] bytes, else with `memset`.
///
/// # Safety
/// `p` is a block of a class of at least `size` bytes, 16-byte aligned, with no canary
/// after them: every block size is a multiple of 16, so `size` rounded up to 16 lies in it.
#[inline(always)]
unsafe fn zero_fresh(p: *mut u8, size: usize) {
    if size <= ZERO_INLINE {
        // SAFETY: by the caller, `size` rounded up to 16 lies in the block.
        unsafe { zero_small(p, size) };
    } else {
        // SAFETY: by the caller.
        unsafe { core::ptr::write_bytes(p, 0, size) };
    }
}

/// The largest request [`alloc_zeroed`] zeroes with stores of its own rather than
/// `memset`, which costs a call and the set-up of its vector registers.
const ZERO_INLINE: usize = 64;

/// Zero the first `size` bytes of `p` (`size <= ZERO_INLINE`) rounded up to 16, with two
/// or four 16-byte stores (overlapping where the length is not 32 or 64). When `calloc`
/// took the full path, the pair of `calloc(1, 32)` and `free` took 79 instructions with
/// these, 82 through `memset` (`cargo xtask pair-count`; mimalloc 3 82.1), and a loop of
/// them ran 0.96x the time (7 alternated runs on a busy host, medians 8.18 and 8.51 ns a
/// pair; 48 bytes: 0.98x, within the runs' spread).
///
/// # Safety
/// `p` is 16-byte aligned and valid for writes of `size` rounded up to 16 bytes.
#[inline(always)]
unsafe fn zero_small(p: *mut u8, size: usize) {
    debug_assert!(size <= ZERO_INLINE && p as usize % MIN_ALIGN == 0);
    // The offset of the 16 bytes that hold the last byte (0 for a request of 0 bytes).
    let last = size.saturating_sub(1) & !(MIN_ALIGN - 1);
    let at = |off: usize| p.wrapping_add(off).cast::<[u64; 2]>();
    // SAFETY: every store lies in the first `last + 16` bytes, `size` rounded up to 16
    // (at least 16): at 0 and `last`, and, past 32 bytes, at 16 and `last - 16`.
    unsafe {
        at(0).write([0; 2]);
        at(last).write([0; 2]);
        if size > 2 * MIN_ALIGN {
            at(MIN_ALIGN).write([0; 2]);
            at(last - MIN_ALIGN).write([0; 2]);
        }
    }
}

/// A large block, after giving cached memory back to the OS once if the OS refused.
/// Returns the block and how many of its first bytes may be non-zero
/// ([`large::alloc`]).
#[cold]
fn alloc_large(size: usize, align: usize) -> (*mut u8, usize) {
    large_block(size, align, false)
}

/// [`alloc_large`] of a block a resize makes ([`large::alloc`]'s `resized`).
fn resized_large(size: usize, align: usize) -> *mut u8 {
    large_block(size, align, true).0
}

fn large_block(size: usize, align: usize, resized: bool) -> (*mut u8, usize) {
    if let Some(got) = thread_cache::reuse_large(size, align, resized) {
        return got;
    }
    // A miss gave the highest kept block to the cache, which wants the background return.
    retain::wake_if_wanted();
    let got = large::alloc(size, align, resized, spare_chunk);
    if !got.0.is_null() {
        return got;
    }
    thread_cache::trim::<Hooks>();
    large::alloc(size, align, resized, spare_chunk)
}

/// [`large::Spare`]: an empty superslab's chunk, once the thread gave back the small
/// blocks it caches, which may have kept superslabs from emptying
/// ([`thread_cache::give_back_small`]).
fn spare_chunk() -> Option<usize> {
    pool::take_empty_chunk().or_else(|| {
        thread_cache::give_back_small::<Hooks>();
        pool::take_empty_chunk()
    })
}

/// Free a block whose request `(size, align)` the caller still knows: the class comes
/// from the request, with no lookup (checked: the block is classified and inspected, and
/// a layout of another class is reported).
///
/// # Safety
/// `p` came from this module's allocation with `CHECKED`, this `size` and `align`, and
/// is not used afterwards.
#[inline(always)]
pub unsafe fn dealloc<const CHECKED: bool>(p: *mut u8, size: usize, align: usize) {
    let class = if CHECKED {
        checks::request_class::<CHECKED>(size, align)
    } else {
        stated_class(size, align)
    };
    if CHECKED {
        let found = inspect(p);
        if found != class {
            report_misuse(p, Misuse::WrongLayout, found);
        }
    }
    match class {
        // SAFETY: by the caller, `p` is a block of class `c`.
        Some(c) => unsafe { free_small::<CHECKED>(p, c) },
        // SAFETY: by the caller, `p` is a large block.
        None if CHECKED => unsafe { free_large(p) },
        // SAFETY: by the caller.
        None => unsafe { dealloc_big(p, size, align) },
    }
}

/// The class a plain [`dealloc`] takes from a stated request, with no lookup: that of
/// [`class_for`] up to [`GROW_LARGE_FROM`] bytes, `None` above (the block may be large:
/// [`dealloc_big`] looks). Small requests answer from the table before any other test.
#[inline(always)]
fn stated_class(size: usize, align: usize) -> Option<Class> {
    if align <= MIN_ALIGN {
        size_class::class_of_size_upto(size, GROW_LARGE_FROM)
    } else if size > GROW_LARGE_FROM {
        None
    } else {
        class_for(size, align)
    }
}

/// [`dealloc`] (plain) of a block stated to be more than [`GROW_LARGE_FROM`] bytes:
/// large if the request is, else as C's `free` finds it: large if a resize made it so,
/// or of the class the slab map says, which may be larger than the request's
/// ([`alloc_small`]).
///
/// # Safety
/// As for [`dealloc`].
#[cold]
#[inline(never)]
unsafe fn dealloc_big(p: *mut u8, size: usize, align: usize) {
    if class_for(size, align).is_none() {
        // SAFETY: by the caller, `p` is a large block.
        return unsafe { free_large(p) };
    }
    // SAFETY: by the caller, a live block.
    unsafe { free_or_else::<false, _>(p, |p, why| report_not_freed::<false>(p, why)) }
}

/// Give a small block of class `c` back (marked freed when checked).
///
/// # Safety
/// `p` is a live block of class `c` that the caller gives up.
#[inline(always)]
unsafe fn free_small<const CHECKED: bool>(p: *mut u8, c: Class) {
    // SAFETY: by the caller.
    unsafe {
        if CHECKED {
            checks::mark_freed(p);
        }
        thread_cache::free::<Hooks>(p, c);
    }
}

/// Free a large block; a pointer that is not one is reported.
///
/// # Safety
/// `p` is a live large block that the caller gives up (or a misuse to report).
#[cold]
unsafe fn free_large(p: *mut u8) {
    let _errno = KeepErrno::new();
    // SAFETY: by the caller, a live large block.
    match unsafe { large::header_of(p) } {
        // SAFETY: the header is the block's.
        Some(h) => unsafe { release_large(h) },
        None => report_misuse(p, Misuse::InvalidFree, None),
    }
}

/// Keep the large block of header `h` for the thread's next large request
/// ([`thread_cache::keep_large`]) or give it to the cache of extents; when one goes to the
/// cache, give back the cached large mappings and empty superslabs that are over the
/// budget or kept too long, when a pass may find any ([`retain::sweep_due`]).
///
/// # Safety
/// `h` came from [`large::header_of`] or [`large::over_aligned_header`] for a block the
/// caller gives up.
unsafe fn release_large(h: large::Large) {
    // SAFETY: by the caller.
    let Some(k) = thread_cache::keep_large(unsafe { large::retire(h) }) else {
        // Kept: in balanced and lean the background return gives it back if the thread
        // goes idle, so it must be running (it may have ended while nothing was kept, or
        // not have been started for what another path wanted).
        retain::want_once();
        retain::wake_if_wanted();
        return;
    };
    let now = os::now_ms();
    large::release(k, now);
    if retain::sweep_due(now) {
        large::expire(now);
        pool::expire(now);
    }
    retain::wake_if_wanted();
}

/// Free `p` without knowing its size (C's `free`), classifying it once; null is ignored.
/// A pointer that is not a live block is not freed but handed to `not_freed` with the
/// reason. `errno` is kept.
///
/// Unchecked, the slab map ([`crate::slab_map`]) finds the class of most blocks with one
/// load; what it does not know goes to [`free_classified`].
///
/// # Safety
/// `p` is null, a live block of this allocator (allocated with `CHECKED`) that the
/// caller gives up, or a pointer that `not_freed` deals with.
#[inline(always)]
pub unsafe fn free_or_else<const CHECKED: bool, F: FnOnce(*mut u8, NotFreed)>(
    p: *mut u8,
    not_freed: F,
) {
    // SAFETY: by the caller.
    if !CHECKED && unsafe { free_cached(p) } {
        return;
    }
    // SAFETY: by the caller.
    unsafe { free_classified::<CHECKED, F>(p, not_freed) }
}

/// The fast path of [`crate::free_or_else`] alone, for a front end with its own slow
/// path (C's `free`): when the slab map knows `p` as the start of a small block, the
/// block goes to the thread's cache and this returns true; false for anything else, `p`
/// untouched (null, a large block, a pointer hakmem never handed out, misuse; and every
/// pointer once [`crate::stop_free_cached`] ran), which `free_or_else` then classifies
/// in full.
///
/// # Safety
/// `p` is null, a live block of this allocator (allocated unchecked) that the caller
/// gives up, or any other pointer, which is left alone.
#[inline(always)]
pub unsafe fn free_cached(p: *mut u8) -> bool {
    let Some(b) = slab_map::block_start_byte(p as usize) else {
        return false;
    };
    // SAFETY: `p` starts a block of `b`'s class in a carved span (the slab map's
    // invariant), a live block by the caller; plain mode, so `free_small` would add
    // nothing.
    unsafe { thread_cache::free_mapped::<Hooks>(p, b) };
    true
}

/// [`free_or_else`] by the chunk map and the chunk header: every block when `CHECKED`,
/// and what the slab map did not know otherwise (large blocks, null, misuse, pointers
/// hakmem never handed out, and small blocks only where the map is missing).
///
/// # Safety
/// As for [`free_or_else`].
#[inline(never)]
pub(crate) unsafe fn free_classified<const CHECKED: bool, F: FnOnce(*mut u8, NotFreed)>(
    p: *mut u8,
    not_freed: F,
) {
    let addr = p as usize;
    let entry = chunk_map::entry_of(addr);
    if let Some(c) = entry.and_then(|e| size_class::block_start_class(addr, e)) {
        if CHECKED {
            // SAFETY: `p` starts a block of class `c` in a live slab.
            unsafe { checks::check_live(p, c) };
        }
        // SAFETY: a live block of class `c`, by the caller.
        return unsafe { free_small::<CHECKED>(p, c) };
    }
    // SAFETY: by the caller.
    unsafe { free_not_small(p, entry, not_freed) }
}

/// [`free_or_else`] of anything but a small block: `entry` is the class-map byte of
/// `p`'s chunk, if the chunk is hakmem's.
///
/// # Safety
/// As for [`free_or_else`].
#[cold]
#[inline(never)]
unsafe fn free_not_small<F: FnOnce(*mut u8, NotFreed)>(
    p: *mut u8,
    entry: Option<u8>,
    not_freed: F,
) {
    let header = match entry {
        None if p.is_null() => return,
        // A chunk with no bit of its own holds an over-aligned block's user bytes.
        None => large::over_aligned_header(p),
        // SAFETY: the chunk holds a large header; `header_of` validates it.
        Some(MAP_LARGE) => unsafe { large::header_of(p) },
        Some(_) => None,
    };
    match header {
        Some(h) => {
            let _errno = KeepErrno::new();
            // SAFETY: the header of a live large block, which the caller gives up.
            unsafe { release_large(h) }
        }
        None if entry.is_none() => not_freed(p, NotFreed::Foreign),
        None => not_freed(p, NotFreed::Invalid),
    }
}

/// What the core does with a pointer [`free_or_else`] did not free: report it and abort
/// (with checks, an interior pointer names its slab's class).
pub fn report_not_freed<const CHECKED: bool>(p: *mut u8, why: NotFreed) -> ! {
    match why {
        NotFreed::Foreign => report_misuse(p, Misuse::ForeignFree, None),
        NotFreed::Invalid => match checks::slab_class(p) {
            Some(c) if CHECKED => report_misuse(p, Misuse::InteriorFree, Some(c)),
            _ => report_misuse(p, Misuse::InvalidFree, None),
        },
    }
}

/// Classify `p`; never faults for any `p`.
pub fn owner(p: *const u8) -> Owner {
    let addr = p as usize;
    let Some(entry) = chunk_map::entry_of(addr) else {
        return match large::over_aligned_header(p as *mut u8) {
            Some(h) => Owner::Large { usable: h.usable() },
            None => Owner::Foreign,
        };
    };
    if let Some(class) = size_class::block_start_class(addr, entry) {
        return Owner::Small {
            class,
            usable: block_size(class),
        };
    }
    if entry != MAP_LARGE {
        // Free or header slabs, an interior pointer of a small block, a stray marker.
        return Owner::Invalid;
    }
    // SAFETY: a large header is mapped at the chunk base; `header_of` validates it.
    match unsafe { large::header_of(p as *mut u8) } {
        Some(h) => Owner::Large { usable: h.usable() },
        None => Owner::Invalid,
    }
}

/// Classify a block about to be freed or resized with checks: its class (inspected:
/// canary, freed marker), `None` for a valid large block; anything else is reported.
fn inspect(p: *mut u8) -> Option<Class> {
    match owner(p) {
        Owner::Small { class, .. } => {
            // SAFETY: `owner` found that `p` starts a block of `class` in a live slab.
            unsafe { checks::check_live(p, class) };
            Some(class)
        }
        Owner::Large { .. } => None,
        Owner::Foreign => report_misuse(p, Misuse::ForeignFree, None),
        Owner::Invalid => report_not_freed::<true>(p, NotFreed::Invalid),
    }
}

/// Bytes usable in the block at `p` (0 for null or a pointer that is not a live block).
pub fn usable_size<const CHECKED: bool>(p: *const u8) -> usize {
    match owner(p) {
        Owner::Small { usable, .. } => checks::usable::<CHECKED>(usable),
        Owner::Large { usable } => usable,
        _ => 0,
    }
}

/// Resize a block whose request `(old_size, align)` the caller knows. Plain: the block
/// stays in place when the new size falls in the same class, a block grown past
/// [`GROW_LARGE_FROM`] moves into a large mapping, and large blocks grow in place or with
/// `mremap`. Checked: always moves (a stale pointer then points at a freed block).
/// Null on failure, the old block untouched.
///
/// # Safety
/// As for [`dealloc`]; on success the old pointer is not used afterwards.
pub unsafe fn realloc<const CHECKED: bool>(
    p: *mut u8,
    old_size: usize,
    align: usize,
    new_size: usize,
) -> *mut u8 {
    if CHECKED {
        // SAFETY: by the caller.
        return unsafe { move_block::<CHECKED>(p, old_size, align, new_size) };
    }
    let old_class = class_for(old_size, align);
    let old_large = match old_class {
        None => true,
        Some(_) => old_size > GROW_LARGE_FROM && is_large_block(p),
    };
    if !old_large {
        if class_for(new_size, align) == old_class {
            return p;
        }
        if resized_is_large(new_size, align) {
            // SAFETY: by the caller.
            return unsafe { move_to_large(p, old_size, align, new_size) };
        }
    } else if resized_is_large(new_size, align) {
        // SAFETY: by the caller, a live large block.
        match unsafe { large::header_of(p) } {
            // Only resize in place when the alignment is the block's own; `mremap` may
            // refuse (a reused extent may span several kernel mappings), and a half of
            // a pair chunk does not grow past its half (`large::Pair`): then move.
            Some(h) if h.offset() == align.max(128) => {
                // SAFETY: the header is the block's.
                let q = unsafe { large::realloc(h, new_size) };
                if !q.is_null() {
                    return q;
                }
                if new_size < old_size {
                    // SAFETY: by the caller.
                    let q = unsafe { move_block::<CHECKED>(p, old_size, align, new_size) };
                    fit_shrunk(q);
                    return q;
                }
            }
            _ => {}
        }
    }
    // SAFETY: by the caller.
    unsafe { move_block::<CHECKED>(p, old_size, align, new_size) }
}

/// After a large block that shrank moved into `q` (null: the move failed), where
/// [`large::realloc`] leaves it to the caller (the program wrote the tail, which the old
/// mapping keeps resident in the cache): `q`, if large too, gives back its pages past its
/// end ([`large::give_back_past_end`]), which it may have from a cached extent.
fn fit_shrunk(q: *mut u8) {
    if q.is_null() || !is_large_block(q) {
        return;
    }
    // SAFETY: the chunk's class map says LARGE, so a large header is mapped at its base.
    if let Some(h) = unsafe { large::header_of(q) } {
        // SAFETY: `q` is the live block the caller just moved into.
        unsafe { large::give_back_past_end(h) };
    }
}

/// Move a block that a resize makes large ([`GROW_LARGE_FROM`]) into a large mapping.
///
/// # Safety
/// As for [`realloc`] (plain).
unsafe fn move_to_large(p: *mut u8, old_size: usize, align: usize, new_size: usize) -> *mut u8 {
    let q = resized_large(new_size, align);
    // SAFETY: by the caller; `q` is fresh.
    unsafe { move_into::<false>(p, q, old_size, align, new_size) }
}

/// Allocate anew, copy, free the old block.
///
/// # Safety
/// As for [`realloc`].
unsafe fn move_block<const CHECKED: bool>(
    p: *mut u8,
    old_size: usize,
    align: usize,
    new_size: usize,
) -> *mut u8 {
    let fill = Fill::of_resize(old_size, new_size);
    let q = alloc_filled::<CHECKED>(new_size, align, fill);
    // SAFETY: by the caller; `q` is fresh.
    unsafe { move_into::<CHECKED>(p, q, old_size, align, new_size) }
}

/// Copy `p`'s bytes into `q` (null: the allocation failed, `p` is left alone) and free
/// `p`; returns `q`.
///
/// # Safety
/// As for [`realloc`]; `q` is null or a fresh block of at least `new_size` bytes.
unsafe fn move_into<const CHECKED: bool>(
    p: *mut u8,
    q: *mut u8,
    old_size: usize,
    align: usize,
    new_size: usize,
) -> *mut u8 {
    if !q.is_null() {
        // SAFETY: both blocks hold at least the bytes copied and do not overlap.
        unsafe {
            core::ptr::copy_nonoverlapping(p, q, old_size.min(new_size));
            dealloc::<CHECKED>(p, old_size, align);
        }
    }
    q
}

/// The usable bytes of `p` when the slab map knows it as the start of a small block (the
/// class's block size), found with its one load as `free` finds a block; `None` for
/// anything else (null, a large block, a pointer hakmem never handed out, misuse; and
/// every pointer once [`crate::stop_free_cached`] ran), which [`crate::usable_size`]
/// classifies in full.
///
/// Programs that keep their own count of the bytes they hold ask for the usable size at
/// every allocation and free (Redis's `zmalloc`; a vector that grows only when
/// `malloc_usable_size` says it is full). Classified in full each time, by the chunk map
/// and the chunk header, it took 60 instructions a call against mimalloc 3's 15
/// (callgrind, 3.6M calls); with this, 18.
#[inline(always)]
pub fn usable_size_cached(p: *const u8) -> Option<usize> {
    slab_map::block_start_byte(p as usize).map(MapByte::block_size)
}

/// Whether resizing `p` to `new_size` bytes (C's `realloc`, alignment 16) leaves the
/// block where it is with nothing to do: `p` starts a small block of the class that
/// `new_size` takes. Found with the slab map's one load, as `free` finds a block; false
/// for anything else (null, a large block, a pointer hakmem never handed out), which
/// `realloc_unsized` classifies in full.
///
/// A string grown by appends, each to exactly its new length, stays in its class for
/// most of them; classifying it by the chunk map and the chunk header, once to tell a
/// foreign pointer and once more to resize, was 22 % of `c-string-builders`'s samples
/// (`perf record`: `block::owner` 12.6 %, `realloc_block` 9.1 %); with this,
/// `realloc_block` is 10.2 % and `owner` 0.6 %.
#[inline(always)]
pub fn stays_in_place(p: *const u8, new_size: usize) -> bool {
    match slab_map::block_start_class(p as usize) {
        Some(c) => class_for(new_size, MIN_ALIGN) == Some(c),
        None => false,
    }
}

/// [`crate::realloc_unsized`] (plain) of a small block the slab map knows, found with its
/// one load as `free` finds a block: `p` itself when `new_size` takes the block's class,
/// else a new block (small, or large past [`GROW_LARGE_FROM`]) with the old one's bytes,
/// the old one freed, or null when memory is exhausted (the old block untouched).
/// `None` for anything else (null, a large block, a pointer hakmem never handed out, an
/// interior pointer; and every pointer once [`crate::stop_free_cached`] ran), which
/// [`crate::realloc_unsized`] classifies in full. A block freed already still starts a
/// block in the slab map: resizing it is the caller's misuse, as for `realloc_unsized`.
///
/// A vector grown by doubling moves into the next class at each growth: classified in
/// full twice (C's `realloc` told a foreign pointer apart, then `realloc_unsized` found
/// the class again), each such move took the chunk map's and the chunk header's loads
/// two more times than this: `c-usable-growth`, 600K operations, 52.1M instructions
/// against 49.2M (callgrind).
///
/// # Safety
/// `p` is a live block of this allocator (allocated unchecked), or any other pointer,
/// which is left alone when this returns `None`; on `Some` of a new block `p` is not used
/// afterwards.
#[inline]
pub unsafe fn realloc_cached(p: *mut u8, new_size: usize) -> Option<*mut u8> {
    let c = slab_map::block_start_class(p as usize)?;
    if class_for(new_size, MIN_ALIGN) == Some(c) {
        return Some(p);
    }
    let q = if resized_is_large(new_size, MIN_ALIGN) {
        resized_large(new_size, MIN_ALIGN)
    } else {
        let fill = Fill::of_resize(block_size(c), new_size);
        alloc_filled::<false>(new_size, MIN_ALIGN, fill)
    };
    if !q.is_null() {
        // SAFETY: `p` starts a block of class `c` (the slab map's invariant), live and the
        // caller's, so `block_size(c)` bytes are readable; `q` is a fresh block of
        // `new_size` bytes, handed out while `p` is live, so the two do not overlap.
        unsafe {
            core::ptr::copy_nonoverlapping(p, q, block_size(c).min(new_size));
            free_small::<false>(p, c);
        }
    }
    Some(q)
}

/// Resize a block without knowing its size (C's `realloc`, alignment 16). `p` null
/// allocates. Plain: in place within a class, into a large mapping past
/// [`GROW_LARGE_FROM`], in place or `mremap` for large blocks; checked: always
/// moves, after inspecting the block. Null on failure, the old block untouched.
///
/// # Safety
/// `p` is null or a live block from this allocator; on success it is not used afterwards.
pub unsafe fn realloc_unsized<const CHECKED: bool>(p: *mut u8, new_size: usize) -> *mut u8 {
    if p.is_null() {
        return alloc::<CHECKED>(new_size, MIN_ALIGN);
    }
    if !CHECKED {
        // SAFETY: by the caller.
        if let Some(q) = unsafe { realloc_cached(p, new_size) } {
            return q;
        }
    }
    // The old block's usable bytes, and its class (small) or header (large).
    let (old, block) = match owner(p) {
        Owner::Small { class, usable } => {
            if CHECKED {
                // SAFETY: `owner` found that `p` starts a block of `class`.
                unsafe { checks::check_live(p, class) };
            } else if class_for(new_size, MIN_ALIGN) == Some(class) {
                return p;
            }
            (checks::usable::<CHECKED>(usable), Ok(class))
        }
        Owner::Large { usable } => {
            // SAFETY: `owner` validated the header.
            let h = unsafe { large::header_of(p) }.expect("validated");
            if !CHECKED && resized_is_large(new_size, MIN_ALIGN) {
                // SAFETY: the header is the block's.
                let q = unsafe { large::realloc(h, new_size) };
                if !q.is_null() {
                    return q;
                }
                // `mremap` cannot move the mapping, or the block outgrew its half of a
                // pair chunk (`large::Pair`): copy below instead.
            }
            (usable, Err(h))
        }
        Owner::Foreign => report_misuse(p, Misuse::ForeignRealloc, None),
        Owner::Invalid => report_not_freed::<CHECKED>(p, NotFreed::Invalid),
    };
    let q = if !CHECKED && resized_is_large(new_size, MIN_ALIGN) && new_size > old {
        resized_large(new_size, MIN_ALIGN)
    } else {
        alloc_filled::<CHECKED>(new_size, MIN_ALIGN, Fill::of_resize(old, new_size))
    };
    if !q.is_null() {
        // SAFETY: both blocks hold the bytes copied; `p` is the caller's, a block of
        // `class` or the large block of `h`, as classified above.
        unsafe {
            core::ptr::copy_nonoverlapping(p, q, old.min(new_size));
            match block {
                Ok(class) => free_small::<CHECKED>(p, class),
                Err(h) => release_large(h),
            }
        }
        if !CHECKED && block.is_err() && new_size < old {
            fit_shrunk(q);
        }
    }
    q
}

/// Give cached free memory back to the OS now: the calling thread's cached blocks and the
/// depot's, empty superslabs in the pool, cached large mappings. Other threads keep their
/// caches.
pub fn trim() {
    thread_cache::trim::<Hooks>();
}
