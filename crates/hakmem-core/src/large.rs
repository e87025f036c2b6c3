//! Large blocks (over 1 MiB, blocks a resize made larger than
//! [`crate::block::GROW_LARGE_FROM`], or alignment the slabs cannot give): each is its own
//! mapping, starting on a chunk boundary with a [`LargeHeader`], the user's bytes at
//! `offset` from the start.
//!
//! ```text
//!  chunk base                        base + offset                     base + map_size
//!  | LargeHeader (class_map all LARGE) ... | user bytes ...                       |
//! ```
//!
//! `offset` is 128, or the alignment when larger (at most [`MAX_ALIGN`]), so the user
//! pointer always lies in the first chunk and `free` finds the header by masking.
//! `realloc` grows or moves the mapping with `mremap`, never copying.
//!
//! Freed mappings are kept committed in a cache of *extents* (within the budget of
//! [`crate::retain`]), so that a program cycling through large buffers does not pay
//! `mmap`, `munmap` and page faults every time: a freed mapping merges with cached
//! extents right before or after it in the address space, and a request takes the
//! smallest extent that holds it, split at a chunk boundary when the rest is a chunk or
//! more (so buffers freed together serve new buffers of any other sizes).
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

use crate::chunk_map::{self, ChunkHeader, CHUNK_SIZE, MAP_LARGE};
use crate::config;
use crate::os::{self, PAGE_SIZE};
use crate::retain;
use crate::sync::{AtomicUsize, Ordering, SpinLock};
use core::ptr::{null_mut, NonNull};

/// Largest alignment served (the user pointer must stay in the first chunk).
pub const MAX_ALIGN: usize = CHUNK_SIZE / 2;
const MIN_OFFSET: usize = 128;
const MAGIC: usize = 0x6861_6b6d_656d_4c47; // "hakmemLG"

/// Header of a large mapping.
///
/// Invariant: `magic == MAGIC ^ base` while the mapping is handed out (so a stale or
/// foreign pointer is told apart), `offset + usable <= map_size`.
#[repr(C)]
pub struct LargeHeader {
    header: ChunkHeader,
    magic: usize,
    map_size: usize,
    offset: usize,
    /// The size last asked for (by alloc or realloc).
    requested: usize,
}

const _: () = assert!(core::mem::size_of::<LargeHeader>() <= MIN_OFFSET);

/// Bytes handed out in large blocks (their whole mappings).
pub static LARGE_BYTES: AtomicUsize = AtomicUsize::new(0);

#[derive(Clone, Copy)]
struct Cached {
    base: usize,
    map_size: usize,
    /// When it was freed ([`os::now_ms`]).
    freed_ms: u64,
}

/// Most entries the cache can hold (profiles choose fewer).
const CACHE_SLOTS: usize = 64;

/// Freed mappings, oldest first.
struct Cache {
    entries: [Cached; CACHE_SLOTS],
    len: usize,
    bytes: usize,
}

static CACHE: SpinLock<Cache> = SpinLock::new(Cache {
    entries: [Cached {
        base: 0,
        map_size: 0,
        freed_ms: 0,
    }; CACHE_SLOTS],
    len: 0,
    bytes: 0,
});

fn offset_for(align: usize) -> usize {
    if align > MIN_OFFSET {
        align
    } else {
        MIN_OFFSET
    }
}

/// Mappings from this size (block and header), fresh or grown from a cached extent, are
/// advised huge whole, before the header is written: a buffer that big is mostly written
/// through, and its first and last 2 MiB then take a page fault each instead of up to
/// 512. A block that leaves its first 2 MiB untouched past its first bytes pays at most
/// half its size in RSS, and one whose tail stretch is partly past its end at most 2 MiB.
///
/// Measured with the benchmark's warm-up before each run (512 MiB touched in huge pages
/// and freed, as `cargo xtask bench` does), 3-5 alternated runs:
/// from 8 MiB (the first threshold) to 4 MiB, `c-big-zeroed` (5..25 MiB buffers) 0.041 ->
/// 0.034 s and 9,180 -> 2,620 page faults (mimalloc 3: 0.030 s, 346 faults); peak RSS of
/// `realloc-xthread` and `c-realloc-xthread` 45.7 -> 53.8 and 55.7 MiB (blocks grown to
/// 4-5 MiB and written at both ends; jemalloc 58.6, mimalloc 225), `large`,
/// `live-growth` and `realloc-growth` unchanged.
///
/// Smaller mappings are not advised at all. The one whole 2 MiB stretch such a block
/// can cover holds its header, written before any advice could come, so the fault path
/// never made it a huge page; but `khugepaged` collapses an advised stretch that has a
/// single page present (`max_ptes_none` is 511 by default), and a block touched at its
/// ends then held 2 MiB: 16 blocks of 3 MiB, written at both ends and kept while the
/// program slept 90 s, went from 4.4 to 37.2 MiB resident (`AnonHugePages` 2 to 34 MiB)
/// when those stretches were advised.
const WHOLE_MAPPING_HUGE_FROM: usize = 2 * os::HUGE_PAGE_SIZE;

/// A large block of at least `size` bytes aligned to `align`; `(ptr, dirty)`, where the
/// bytes from `ptr + dirty` on are known to be zero (0 for a fresh mapping; a cached
/// extent grown by `mremap` is zero past its old end), so `calloc` clears only the
/// first `dirty`. Null on failure.
pub fn alloc(size: usize, align: usize) -> (*mut u8, usize) {
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
    if need > isize::MAX as usize / 2 {
        return (null_mut(), 0);
    }
    let Some(Obtained {
        base,
        map_size,
        fresh,
        dirty,
    }) = obtain(need)
    else {
        return (null_mut(), 0);
    };
    retain::observe();
    // SAFETY: the mapping is ours and at least MIN_OFFSET bytes long.
    unsafe { write_header(base, map_size, offset, size, fresh) };
    if fresh {
        chunk_map::insert(base);
    }
    LARGE_BYTES.fetch_add(map_size, Ordering::Relaxed);
    ((base + offset) as *mut u8, dirty.saturating_sub(offset))
}

/// Write the header at `base`, and its class map when `class_map` (a mapping that has no
/// large header yet: the module's invariant spares the others 64 stores).
///
/// # Safety
/// `[base, base + MIN_OFFSET)` is ours to write.
unsafe fn write_header(
    base: usize,
    map_size: usize,
    offset: usize,
    requested: usize,
    class_map: bool,
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
    }
}

/// A live large block, named by its header.
///
/// A raw handle, not a reference: the header lies in the block's own mapping, which
/// [`free`] caches (and another thread may then hand out or unmap) and [`realloc`] may
/// move, and both write it. Every read and write goes through the raw pointer, so nothing
/// asserts the header unchanged or mapped past the call that uses it.
///
/// Invariant: the pointer is the base of a large mapping whose header passed
/// [`header_of`]'s check, and the block is live for as long as the handle is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Large(NonNull<LargeHeader>);

/// The large block whose user pointer is exactly `p`, if it is live.
///
/// # Safety
/// The chunk of `p` holds a hakmem header whose class map says LARGE.
pub unsafe fn header_of(p: *mut u8) -> Option<Large> {
    let base = chunk_map::chunk_base(p as usize);
    let h = base as *mut LargeHeader;
    // SAFETY: by the caller, a large header is mapped at `base`; raw reads, no reference.
    let (magic, offset) = unsafe { ((*h).magic, (*h).offset) };
    let live = magic == MAGIC ^ base && base.wrapping_add(offset) == p as usize;
    // `base` is not null: a chunk holds the mapped header.
    live.then(|| Large(NonNull::new(h).expect("a mapped header is not at address 0")))
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

    /// Bytes usable from the user pointer.
    pub fn usable(self) -> usize {
        self.map_size() - self.offset()
    }

    /// Alignment the block was created with (at least 16).
    pub fn offset(self) -> usize {
        // SAFETY: as in `map_size`.
        unsafe { (*self.ptr()).offset }
    }
}

/// Free the large block whose header is `h`, at `now` ([`os::now_ms`]).
///
/// # Safety
/// `h` came from [`header_of`] for a block the caller gives up.
pub unsafe fn free(h: Large, now: u64) {
    let (base, map_size) = (h.base(), h.map_size());
    // SAFETY: the header is ours until the mapping is cached or unmapped.
    unsafe { (*h.ptr()).magic = 0 };
    LARGE_BYTES.fetch_sub(map_size, Ordering::Relaxed);
    let c = Cached {
        base,
        map_size,
        freed_ms: now,
    };
    if let Some(rejected) = put_cached(c, config::current()) {
        // SAFETY: the mapping is ours and unused.
        unsafe { unmap(rejected) };
    }
    expire(now);
    retain::wake();
}

/// # Safety
/// The mapping is ours and unused.
unsafe fn unmap(c: Cached) {
    clear_chunk_bits(c.base, c.map_size);
    // SAFETY: by the caller.
    unsafe { os::unmap(c.base as *mut u8, c.map_size) };
}

/// Clear the chunk bits of every chunk of `[base, base + size)`.
fn clear_chunk_bits(base: usize, size: usize) {
    for k in (base..base + size).step_by(CHUNK_SIZE) {
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
    unsafe { write_header(base, 0, MIN_OFFSET, 0, true) };
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

/// The cached extent that holds `need` bytes best (the smallest), split so that the block
/// keeps whole chunks and the rest, a chunk or more, stays cached (same age); or else the
/// largest smaller extent, for the caller to grow. Entries stay in age order.
fn take_cached(need: usize) -> Option<Cached> {
    let mut cache = CACHE.lock();
    let n = cache.len;
    let entries = &cache.entries[..n];
    let fit = (0..n)
        .filter(|&i| entries[i].map_size >= need)
        .min_by_key(|&i| entries[i].map_size);
    let Some(i) = fit else {
        let smaller = (0..n).max_by_key(|&i| entries[i].map_size)?;
        return Some(cache.remove(smaller));
    };
    let c = cache.entries[i];
    let take = os::round_up(need, CHUNK_SIZE).unwrap_or(usize::MAX);
    if c.map_size < take.saturating_add(CHUNK_SIZE) {
        return Some(cache.remove(i));
    }
    let rest = &mut cache.entries[i];
    rest.base += take;
    rest.map_size -= take;
    let rest_base = rest.base;
    cache.bytes -= take;
    retain::sub(take);
    // SAFETY: the rest is a cached extent, ours.
    unsafe { write_free_header(rest_base) };
    Some(Cached {
        map_size: take,
        ..c
    })
}

impl Cache {
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

/// A mapping [`obtain`] found for a block.
struct Obtained {
    base: usize,
    map_size: usize,
    /// Fresh: zero throughout, not yet in the chunk map, and advised when it is
    /// [`WHOLE_MAPPING_HUGE_FROM`] or more.
    fresh: bool,
    /// The bytes from `base + dirty` on are known to be zero (never written): 0 for a
    /// fresh mapping, the old length for a cached extent grown by `mremap`, `map_size`
    /// for a cached extent used as it was.
    dirty: usize,
}

/// A mapping of at least `need` bytes: from the cache (grown with `mremap` when the
/// cached one is too small, which keeps its resident pages) or fresh.
fn obtain(need: usize) -> Option<Obtained> {
    if let Some(c) = take_cached(need) {
        if c.map_size >= need {
            // The block keeps the whole extent: its pages past `need` stay resident if
            // they were (less than two chunks: the extent was split otherwise).
            clear_inner_chunk_bits(c.base, c.map_size);
            return Some(Obtained {
                base: c.base,
                map_size: c.map_size,
                fresh: false,
                dirty: c.map_size,
            });
        }
        clear_chunk_bits(c.base, c.map_size);
        // Advised whole, it grows to a whole 2 MiB: grown to `need` exactly, the part past
        // the last 2 MiB boundary could never be a huge page (`c-big-zeroed` took 2,600
        // faults of 4 KiB there).
        let huge = need >= WHOLE_MAPPING_HUGE_FROM;
        let size = if huge {
            os::round_up(need, os::HUGE_PAGE_SIZE).unwrap_or(need)
        } else {
            need
        };
        // SAFETY: a cached mapping is ours and unused.
        let p = unsafe { remap(c.base, c.map_size, size) };
        if !p.is_null() {
            chunk_map::insert(p as usize);
            if huge {
                // The grown part is fresh and advised like a fresh mapping this size.
                // SAFETY: the mapping is ours; the advice changes no byte.
                unsafe { os::advise_huge_pages(p, size, true) };
            }
            return Some(Obtained {
                base: p as usize,
                map_size: size,
                fresh: false,
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
    if !p.is_null() && need >= WHOLE_MAPPING_HUGE_FROM {
        // Before the caller writes the header, so its stretch can be a huge page too.
        // SAFETY: the fresh mapping is ours; the advice changes no byte.
        unsafe { os::advise_huge_pages(p, size, true) };
    }
    (!p.is_null()).then_some(Obtained {
        base: p as usize,
        map_size: size,
        fresh: true,
        dirty: 0,
    })
}

/// Resize the mapping `[base, base + old)` to `new` bytes with `mremap`, in place or
/// moved ([`os::remap_aligned`]); null on failure, the mapping untouched.
///
/// `mremap` takes one kernel mapping only, and an extent merged from differently advised
/// neighbours (a mapping of [`WHOLE_MAPPING_HUGE_FROM`] or more beside a smaller one) is
/// several. When the first try fails, the whole range is advised alike, as a mapping of
/// `new` bytes would be (huge from [`WHOLE_MAPPING_HUGE_FROM`], else not), which makes it
/// one kernel mapping again, and the move is tried once more: the alternative is a copy
/// into fresh pages.
///
/// # Safety
/// The range is a whole large mapping (or cached extent) the caller owns and does not
/// use meanwhile; on success the old addresses (if different) are not used again.
unsafe fn remap(base: usize, old: usize, new: usize) -> *mut u8 {
    // SAFETY: by the caller.
    let p = unsafe { os::remap_aligned(base as *mut u8, old, new, CHUNK_SIZE) };
    if !p.is_null() {
        return p;
    }
    let huge = new >= WHOLE_MAPPING_HUGE_FROM;
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

/// Unmap the cached mappings over the retention budget or kept too long at `now`
/// ([`os::now_ms`]), oldest first.
pub fn expire(now: u64) {
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
/// the mapping (no copy). Null on failure, the block untouched.
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
    if need > isize::MAX as usize / 2 {
        return null_mut();
    }
    let shrinking = new_size < h.requested();
    // SAFETY: our header.
    unsafe { (*h.ptr()).requested = new_size };
    if need <= old_map {
        // Give the tail back only when the block shrinks (not when a block that got a
        // roomy cached mapping grows into it).
        if shrinking && need < old_map / 2 {
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
    // The chunk bit goes before the move: once the old range is free, another thread may
    // map a chunk there and set its bit, which we must not clear.
    chunk_map::remove(base);
    // SAFETY: the whole mapping is ours.
    let moved = unsafe { remap(base, old_map, target) };
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
    (new_base + offset) as *mut u8
}

/// Unmap every cached mapping (for `trim`).
pub fn trim() {
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
    CACHE.lock().bytes
}

pub(crate) fn lock_for_fork() {
    CACHE.lock_forever();
}

/// # Safety
/// After [`lock_for_fork`].
pub(crate) unsafe fn unlock_after_fork() {
    // SAFETY: by the caller.
    unsafe { CACHE.force_unlock() };
}
