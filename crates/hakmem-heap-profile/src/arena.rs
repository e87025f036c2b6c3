//! Where sampled blocks live: one address reservation of [`ARENA_SIZE`] bytes, split into
//! a 512 MiB region per size class and an area for bigger blocks, so that "is this block
//! sampled?" is one subtraction and one compare ([`contains`]) and needs no header, and a
//! sampled block costs its class's rounding and 8 bytes of metadata beside it, nothing in
//! front.
//!
//! - Classes: 16-byte steps to 128 bytes, four per doubling to 4 KiB, then powers of two
//!   to 512 MiB ([`class_of`]). Requests aligned above 16 take the power-of-two class at
//!   least as large as the alignment: a slot `i` of a power-of-two class `s` starts at
//!   `region + i * s`, and regions are 512 MiB aligned, so the slot is `s`-aligned.
//! - Blocks over 512 MiB (a program's biggest, which a profile must not miss: one is
//!   sampled almost surely) take whole 512 MiB units of the *huge area* that follows the
//!   class regions, first fit, up to `HUGE_UNITS` units (17.5 GiB); a free gives their
//!   written pages back at once. Only requests bigger than that are not sampled.
//! - Size: 40 GiB of address space, which valgrind still maps (so that programs run
//!   under it can be profiled and measured with callgrind).
//! - Memory: the reservation is mapped with `MAP_NORESERVE`; a page becomes resident when
//!   a sampled block is first written there. Freed slots are reused newest first. Slots
//!   of whole pages (8 KiB and up) are given back with `madvise(MADV_DONTNEED)` once a
//!   class holds more than [`PURGE_BYTES`] of freed, still resident slots, in one batch
//!   (so the system call is not paid on every free), and come back zeroed.
//! - Metadata, beside the slots in a mapping of its own: one word per slot (`META`),
//!   the requested size and the caller's tag while the slot is live, the link of its
//!   class's free list while it is free. A sample and the free of a sampled block each
//!   touch the one word of their slot, not a word of a separate free list as well: the
//!   loop between two samples has long since evicted both.
//!
//! Nothing here allocates through an allocator, and one lock (`crate::lock::Lock`) guards
//! the free lists (taken once per sample and once per free of a sampled block).

use crate::lock::Lock;
use crate::mem::{map, map_near};
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::io;

/// Bytes of address space reserved for sampled blocks: a region of 512 MiB per class,
/// then the huge area.
pub const ARENA_SIZE: usize = (CLASSES + HUGE_UNITS) << REGION_SHIFT;
const REGION_SHIFT: u32 = 29;
const REGION: usize = 1 << REGION_SHIFT;
/// Size classes, region `c` holding class `c`.
const CLASSES: usize = 45;
/// Units of [`REGION`] bytes in the huge area (regions `CLASSES..`), for blocks over
/// 512 MiB; fewer than 64 (one bit each in [`Huge::used`]).
const HUGE_UNITS: usize = 35;
const _: () = assert!(HUGE_UNITS < 64);
/// Most live sampled blocks per class; a sample over that is not taken.
const MAX_SLOTS: usize = 1 << 18;
/// Freed, resident bytes a class of whole-page slots keeps before giving them back.
pub const PURGE_BYTES: usize = 4 << 20;
const PAGE: usize = 4096;

/// The reservation's start; until it is mapped, the top [`ARENA_SIZE`] bytes of the
/// address space, which no user pointer reaches, so [`contains`] needs no other test.
pub(crate) static BASE: AtomicUsize = AtomicUsize::new(NO_BASE);
const NO_BASE: usize = usize::MAX - ARENA_SIZE + 1;
/// The reservation's end; 0 until it is mapped. The Rust `dealloc` (`free_asm`) first
/// compares a pointer with this one word (a compare and a branch, on or off) and looks
/// further only below it: the arena is reserved at [`LOW`], under where the kernel places
/// mappings (top-down from below the stack) and position-independent programs, so
/// hakmem's own blocks lie above it.
pub(crate) static END: AtomicUsize = AtomicUsize::new(0);
/// Where the arena is asked for (a hint; elsewhere when that range is taken, and then
/// only the Rust `dealloc` of blocks below the arena's end pays a second compare).
const LOW: usize = 1 << 44;

/// The bytes of a slot of class `c`.
const fn class_size(c: usize) -> usize {
    if c < 8 {
        16 * (c + 1)
    } else if c < 28 {
        let base = 128 << ((c - 8) / 4);
        base + ((c - 8) % 4 + 1) * (base / 4)
    } else {
        1 << (13 + c - 28)
    }
}

/// The class of a request of `size` bytes aligned to `align` (a power of two); `None`
/// over 512 MiB.
pub fn class_of(size: usize, align: usize) -> Option<usize> {
    let mut s = size.max(16);
    if align > 16 {
        s = s.max(align).checked_next_power_of_two()?;
    }
    if s <= 128 {
        return Some(s.div_ceil(16) - 1);
    }
    if s <= 4096 {
        let group = (usize::BITS - 1 - (s - 1).leading_zeros()) as usize - 7;
        let base = 128 << group;
        return Some(8 + 4 * group + (s - base - 1) / (base / 4));
    }
    let lg = (usize::BITS - (s - 1).leading_zeros()) as usize;
    (lg <= REGION_SHIFT as usize).then(|| 28 + lg - 13)
}

/// Whether `p` points into the arena: whether a block is a sampled one.
#[inline(always)]
pub fn contains(p: *const u8) -> bool {
    (p as usize).wrapping_sub(BASE.load(Relaxed)) < ARENA_SIZE
}

/// The free slots of one class: a list through their [`META`] words, newest first. Its
/// first `dirty` slots are resident; the rest were given back to the system (and read as
/// zero), for a free pushes in front, a sample pops in front and a purge gives back the
/// whole resident run.
#[derive(Clone, Copy)]
struct Class {
    /// Slots `0..bump` were handed out at least once; the others were never touched.
    bump: u32,
    /// The first free slot plus one; 0 when none is free.
    head: u32,
    dirty: u32,
}

/// The huge area's units: which are taken, and how many a block starting at each holds.
#[derive(Clone, Copy)]
struct Huge {
    used: u64,
    units: [u8; HUGE_UNITS],
}

struct Arena {
    classes: [Class; CLASSES],
    huge: Huge,
}

static ARENA: Lock<Arena> = Lock::new(Arena {
    classes: [Class {
        bump: 0,
        head: 0,
        dirty: 0,
    }; CLASSES],
    huge: Huge {
        used: 0,
        units: [0; HUGE_UNITS],
    },
});

/// Per slot (`c * MAX_SLOTS + i`), then per unit of the huge area (a block's first unit
/// standing for the block): `LIVE | size << TAG_BITS | tag` of its block while live;
/// without [`LIVE`] while free (so a second free of a block is told apart): zero for a
/// huge unit and a slot never handed out, `CLEAN | next` for a slot on its class's free
/// list (`next`: the next free slot plus one, 0 at the end; [`CLEAN`] if given back).
/// Written under the arena's lock, except a live block's by the thread that owns it.
static META: AtomicUsize = AtomicUsize::new(0);
const LIVE: u64 = 1 << 63;
const CLEAN: u64 = 1 << 62;
/// The link bits of a free slot's word.
const NEXT: u64 = (1 << 32) - 1;
/// Bits of the tag a sampled block carries ([`set_tag`]); the requested size has the 39
/// bits above them (up to 512 GiB, more than the arena holds).
pub const TAG_BITS: u32 = 24;

/// Reserve the arena and its metadata, once (under the lock, so two first starts map once).
pub fn init() -> io::Result<()> {
    ARENA.with(|_| {
        if META.load(Relaxed) != 0 {
            return Ok(());
        }
        let raw = map_near(LOW, ARENA_SIZE + REGION)? as usize;
        let base = raw.next_multiple_of(REGION);
        // SAFETY: both ranges lie inside the mapping just made, outside the part kept.
        unsafe {
            if base > raw {
                libc::munmap(raw as *mut _, base - raw);
            }
            libc::munmap((base + ARENA_SIZE) as *mut _, raw + REGION - base);
        }
        let meta = map(META_WORDS * 8)?;
        META.store(meta as usize, Relaxed);
        BASE.store(base, Relaxed);
        END.store(base + ARENA_SIZE, Relaxed);
        Ok(())
    })
}

/// Words of [`META`]: one per slot of each class, one per huge unit.
const META_WORDS: usize = CLASSES * MAX_SLOTS + HUGE_UNITS;

/// The metadata word of slot `i` of class `c`, or of the huge block starting at unit
/// `c - CLASSES` (then `i` is 0).
fn meta(c: usize, i: usize) -> &'static AtomicU64 {
    let k = if c < CLASSES {
        c * MAX_SLOTS + i
    } else {
        CLASSES * MAX_SLOTS + (c - CLASSES)
    };
    debug_assert!(k < META_WORDS && (c < CLASSES || i == 0));
    // SAFETY: `k < META_WORDS` (`c` is a class with `i < MAX_SLOTS`, or a unit of the
    // huge area): inside the metadata mapping, which lives for the process and is only
    // reached as atomics.
    unsafe { &*(META.load(Relaxed) as *const AtomicU64).add(k) }
}

/// The slots of class `c` that fit its region (at most [`MAX_SLOTS`]).
fn slots(c: usize) -> usize {
    (REGION / class_size(c)).min(MAX_SLOTS)
}

/// A slot handed out by [`alloc`].
pub struct Block {
    pub ptr: *mut u8,
    /// Whether its bytes are known to be zero (never used, or given back since).
    pub zero: bool,
}

/// A slot for `size` bytes aligned to `align`, recorded as sampled at `stack` (see
/// [`set_tag`]); `None` when the arena is not reserved, the class is full, or the
/// request is over 512 MiB and the huge area has no room for it.
pub fn alloc(size: usize, align: usize) -> Option<Block> {
    let base = BASE.load(Relaxed);
    if base == NO_BASE {
        return None;
    }
    let Some(c) = class_of(size, align) else {
        return alloc_huge(size, align);
    };
    let live = LIVE | (size as u64) << TAG_BITS;
    let (i, zero) = ARENA.with(|a| {
        let k = &mut a.classes[c];
        let (i, zero) = if k.head > 0 {
            let i = k.head as usize - 1;
            let m = meta(c, i).load(Relaxed);
            k.head = (m & NEXT) as u32;
            k.dirty = k.dirty.saturating_sub(1);
            (i, m & CLEAN != 0)
        } else if (k.bump as usize) < slots(c) {
            k.bump += 1;
            (k.bump as usize - 1, true)
        } else {
            return None;
        };
        meta(c, i).store(live, Relaxed);
        Some((i, zero))
    })?;
    let ptr = (base + (c << REGION_SHIFT) + i * class_size(c)) as *mut u8;
    Some(Block { ptr, zero })
}

/// Units of the huge area for `size` bytes aligned to `align`, first fit; `None` when
/// no run of free units is long enough (or the alignment is over a unit's).
fn alloc_huge(size: usize, align: usize) -> Option<Block> {
    if align > REGION {
        return None;
    }
    let n = size.div_ceil(REGION);
    if n > HUGE_UNITS {
        return None;
    }
    let run = units(n);
    let first = ARENA.with(|a| {
        let h = &mut a.huge;
        let u = (0..=HUGE_UNITS - n).find(|&u| h.used & run << u == 0)?;
        h.used |= run << u;
        h.units[u] = n as u8;
        Some(u)
    })?;
    let c = CLASSES + first;
    meta(c, 0).store(LIVE | (size as u64) << TAG_BITS, Relaxed);
    let ptr = (BASE.load(Relaxed) + (c << REGION_SHIFT)) as *mut u8;
    // A freed huge block's pages were given back: its units read as zero.
    Some(Block { ptr, zero: true })
}

/// The class (or huge unit, from `CLASSES` on) and slot of a block in the arena.
fn locate(p: *const u8) -> (usize, usize) {
    let off = p as usize - BASE.load(Relaxed);
    let c = off >> REGION_SHIFT;
    if c >= CLASSES {
        return (c, 0);
    }
    let (at, size) = in_region(off, c);
    (c, (at / size) as usize)
}

/// Give the live block `p` (from [`alloc`]) its tag, [`TAG_BITS`] bits of the caller's.
/// A load and a store, not an atomic read-modify-write: only the thread that owns a live
/// block writes its word.
pub fn set_tag(p: *const u8, tag: u32) {
    let (c, i) = locate(p);
    let m = meta(c, i);
    m.store(
        m.load(Relaxed) | tag as u64 & ((1 << TAG_BITS) - 1),
        Relaxed,
    );
}

/// `(requested size, tag)` of the live block `p`.
pub fn info(p: *const u8) -> (usize, u32) {
    let (c, i) = locate(p);
    unpack(meta(c, i).load(Relaxed))
}

fn unpack(m: u64) -> (usize, u32) {
    (
        ((m & !LIVE) >> TAG_BITS) as usize,
        (m & ((1 << TAG_BITS) - 1)) as u32,
    )
}

/// The offset of arena offset `off` inside its region, and the size of class `c`, both
/// as `u32` (a region is 512 MiB): a 32-bit division is several times quicker than a
/// 64-bit one, and each free of a sampled block divides twice.
fn in_region(off: usize, c: usize) -> (u32, u32) {
    ((off & (REGION - 1)) as u32, class_size(c) as u32)
}

/// The class and slot of `p`, a pointer into the arena, if it is the start of a slot
/// handed out (live or freed) or of a huge unit; `None` for any other address of the
/// arena.
fn slot_of(p: *const u8) -> Option<(usize, usize)> {
    let off = (p as usize).wrapping_sub(BASE.load(Relaxed));
    let c = off >> REGION_SHIFT;
    if c >= CLASSES {
        return (c < CLASSES + HUGE_UNITS && off & (REGION - 1) == 0).then_some((c, 0));
    }
    let (at, size) = in_region(off, c);
    if at % size != 0 {
        return None;
    }
    let i = (at / size) as usize;
    (i < slots(c)).then_some((c, i))
}

/// Report a free of `p` that is not the start of a live sampled block, and abort.
#[cold]
fn misuse(p: *const u8) -> ! {
    let mut msg = *b"hakmem: double free, or free of a pointer that is not the start of a live \
sampled block (heap profiler arena): pointer 0x0000000000000000\n";
    let digits = msg.len() - 17;
    for k in 0..16 {
        msg[digits + k] = b"0123456789abcdef"[(p as usize >> (60 - 4 * k)) & 0xf];
    }
    // SAFETY: writes our buffer to stderr; then the process ends.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
        libc::abort()
    }
}

/// The bytes usable at the live block `p`: its class's size (a huge block's: its
/// requested size in whole pages).
pub fn usable_size(p: *const u8) -> usize {
    let (c, _) = locate(p);
    if c >= CLASSES {
        return info(p).0.next_multiple_of(PAGE);
    }
    class_size(c)
}

/// Give the slot of the live block `p` back; returns what [`info`] said of it.
///
/// A pointer of the arena that is not the start of a live block (a second free, an
/// interior pointer) is reported on stderr and the process aborts.
pub fn free(p: *const u8) -> (usize, u32) {
    let Some((c, i)) = slot_of(p) else { misuse(p) };
    if c >= CLASSES {
        let m = meta(c, i).swap(0, Relaxed);
        if m & LIVE == 0 {
            misuse(p);
        }
        let info = unpack(m);
        free_huge(p, c - CLASSES, info.0);
        return info;
    }
    let base = BASE.load(Relaxed);
    ARENA.with(|a| {
        let m = meta(c, i).load(Relaxed);
        if m & LIVE == 0 {
            misuse(p);
        }
        let k = &mut a.classes[c];
        meta(c, i).store(k.head as u64, Relaxed);
        k.head = i as u32 + 1;
        k.dirty += 1;
        let size = class_size(c);
        if size >= 2 * PAGE && k.dirty as usize * size > PURGE_BYTES {
            purge(k, c, base + (c << REGION_SHIFT), size);
        }
        unpack(m)
    })
}

/// Give the resident free slots of class `c` (the first `dirty` of its list; whole pages
/// of `size` bytes each from `region`) back to the system, and mark them clean.
fn purge(k: &mut Class, c: usize, region: usize, size: usize) {
    let mut next = k.head;
    for _ in 0..k.dirty {
        let slot = next as usize - 1;
        // SAFETY: a free slot of whole pages inside the arena: nobody holds it, and its
        // bytes may be dropped.
        unsafe { libc::madvise((region + slot * size) as *mut _, size, libc::MADV_DONTNEED) };
        let m = meta(c, slot);
        next = (m.load(Relaxed) & NEXT) as u32;
        m.store(CLEAN | next as u64, Relaxed);
    }
    k.dirty = 0;
}

/// The mask of `n` units (`n < 64`: at most [`HUGE_UNITS`]) from unit 0 of [`Huge::used`].
fn units(n: usize) -> u64 {
    (1u64 << n) - 1
}

/// Give the huge block at `p` (starting at unit `u`, `size` bytes requested) back: its
/// written pages (at most `size` rounded up to a page) to the kernel, then its units.
fn free_huge(p: *const u8, u: usize, size: usize) {
    // SAFETY: the block's own pages, which nobody holds any more (its metadata word was
    // just cleared), and whose bytes may be dropped.
    unsafe {
        libc::madvise(
            p as *mut _,
            size.next_multiple_of(PAGE),
            libc::MADV_DONTNEED,
        )
    };
    ARENA.with(|a| {
        let h = &mut a.huge;
        let n = h.units[u] as usize;
        let run = units(n);
        h.used &= !(run << u);
        h.units[u] = 0;
    });
}

/// Take the lock before `fork`.
pub fn hold_for_fork() {
    ARENA.hold();
}

/// # Safety
/// [`hold_for_fork`] took the lock in this thread (or in the parent of this child).
pub unsafe fn release_after_fork() {
    // SAFETY: by the caller.
    unsafe { ARENA.release() };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_fit_and_align() {
        for size in (1..70_000).chain([1 << 20, (1 << 20) + 1, 1 << 29]) {
            for lg in 0..14 {
                let align = 1usize << lg;
                let c = class_of(size, align).unwrap();
                let s = class_size(c);
                assert!(s >= size, "{size} {align}: class {c} of {s}");
                if align > 16 {
                    assert_eq!(s % align, 0, "{size} {align}");
                    assert!(s.is_power_of_two());
                }
                assert!(c == 0 || class_size(c - 1) < size.max(16) || align > 16);
            }
        }
        assert_eq!(class_of((1 << 29) + 1, 16), None);
        assert_eq!(class_size(CLASSES - 1), REGION);
        assert!(!contains(core::ptr::null()));
        assert!(!contains(16 as *const u8));
    }

    #[test]
    fn only_live_slot_starts_are_freed() {
        init().unwrap();
        let b = alloc(100, 16).unwrap(); // class 112
        assert!(slot_of(b.ptr).is_some());
        assert_eq!(slot_of(b.ptr.wrapping_add(16)), None, "interior pointer");
        let (c, i) = slot_of(b.ptr).unwrap();
        assert!(meta(c, i).load(Relaxed) & LIVE != 0);
        free(b.ptr);
        assert_eq!(
            meta(c, i).load(Relaxed) & LIVE,
            0,
            "a second free would be caught"
        );
        let past = (BASE.load(Relaxed) + ARENA_SIZE) as *const u8;
        assert!(!contains(past), "past the arena");
        let unit = (BASE.load(Relaxed) + CLASSES * REGION + REGION / 2) as *const u8;
        assert!(
            contains(unit) && slot_of(unit).is_none(),
            "inside a huge unit"
        );
    }

    #[test]
    fn blocks_are_recognised_reused_and_zero() {
        init().unwrap();
        let b = alloc(1000, 16).unwrap();
        assert!(b.zero && contains(b.ptr));
        set_tag(b.ptr, 7);
        assert_eq!(info(b.ptr), (1000, 7));
        assert_eq!(usable_size(b.ptr), 1024);
        // SAFETY: the block holds 1000 bytes.
        unsafe { b.ptr.write_bytes(0xab, 1000) };
        assert_eq!(free(b.ptr), (1000, 7));
        let again = alloc(1000, 16).unwrap();
        assert_eq!(again.ptr, b.ptr);
        assert!(!again.zero);
        free(again.ptr);
        let big = alloc(64 << 10, 4096).unwrap();
        assert_eq!(big.ptr as usize % (64 << 10), 0);
        free(big.ptr);
    }

    /// Freed slots of whole pages stay resident up to [`PURGE_BYTES`], then go back to the
    /// system all at once, and come back zero, newest first.
    #[test]
    fn purged_slots_come_back_zero() {
        init().unwrap();
        const SIZE: usize = 8192;
        let n = PURGE_BYTES / SIZE + 100;
        let blocks: Vec<_> = (0..n).map(|_| alloc(SIZE, 16).unwrap()).collect();
        for b in &blocks {
            // SAFETY: each block holds `SIZE` bytes.
            unsafe { b.ptr.write_bytes(0xab, SIZE) };
        }
        for b in blocks.iter().rev() {
            free(b.ptr);
        }
        // The purge came at the free that took the class over the bound; the 99 freed
        // after it are resident, in front.
        let again: Vec<_> = (0..n).map(|_| alloc(SIZE, 16).unwrap()).collect();
        let dirty = again.iter().take_while(|b| !b.zero).count();
        assert_eq!(dirty, n - PURGE_BYTES / SIZE - 1);
        for b in &again[dirty..] {
            assert!(b.zero);
            // SAFETY: each block holds `SIZE` bytes.
            let ends = unsafe { (b.ptr.read(), b.ptr.add(SIZE - 1).read()) };
            assert_eq!(ends, (0, 0));
        }
        for b in &again {
            free(b.ptr);
        }
    }

    #[test]
    fn huge_blocks_take_whole_units() {
        init().unwrap();
        let size = (1 << 29) + 1;
        let a = alloc(size, 16).unwrap();
        assert!(a.zero && contains(a.ptr));
        assert_eq!((a.ptr as usize - BASE.load(Relaxed)) % REGION, 0);
        set_tag(a.ptr, 0xab_cdef);
        assert_eq!(info(a.ptr), (size, 0xab_cdef));
        assert_eq!(usable_size(a.ptr), size.next_multiple_of(PAGE));
        // SAFETY: the block holds `size` bytes: its last page is written.
        unsafe { a.ptr.add(size - 1).write(7) };
        let b = alloc(3 << 29, 4096).unwrap();
        assert!(
            b.ptr as usize >= a.ptr as usize + 2 * REGION,
            "after a's two units"
        );
        assert_eq!(
            slot_of(a.ptr.wrapping_add(REGION)),
            Some((locate(a.ptr).0 + 1, 0))
        );
        assert_eq!(
            meta(locate(a.ptr).0 + 1, 0).load(Relaxed) & LIVE,
            0,
            "not a block's start"
        );
        assert_eq!(free(a.ptr), (size, 0xab_cdef));
        assert_eq!(
            meta(locate(a.ptr).0, 0).load(Relaxed),
            0,
            "a second free would be caught"
        );
        let again = alloc(size, 16).unwrap();
        assert_eq!(again.ptr, a.ptr, "first fit reuses the freed units");
        // SAFETY: given back with MADV_DONTNEED: the page reads as zero again.
        assert_eq!(unsafe { again.ptr.add(size - 1).read() }, 0);
        free(again.ptr);
        free(b.ptr);
        assert!(
            alloc((HUGE_UNITS << REGION_SHIFT) + 1, 16).is_none(),
            "bigger than the area"
        );
        assert!(alloc(1 << 30, 1 << 30).is_none(), "aligned over a unit");
    }
}
