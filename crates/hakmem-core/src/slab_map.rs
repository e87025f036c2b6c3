//! Which class each 64 KiB slab of the address space serves: one byte per slab of the
//! 47-bit user address space, the class's [`MapByte`] (twice its index plus two: even, so
//! that `free` reaches the class's bin from it with no shift), or 0. C's `free` has no size,
//! so it finds a block's class here with one load from the block's address (and the
//! class's block-start test, [`size_class::block_start`]); a 0 sends it to the slow
//! path, which classifies with the chunk map and the chunk header as every other caller
//! does. A pointer hakmem never handed out reads 0.
//!
//! The map is 2 GiB of address space reserved read-only at process set-up
//! ([`os::reserve_readonly`]: no memory, no commit charge); a page of it is made
//! writable the first time a span in the 256 MiB it covers is carved, so a process
//! with a few GiB of slabs in one place writes a few pages of it. Where the reservation
//! fails (an address-space limit, Miri), every lookup misses and `free` takes the slow
//! path: slower, never wrong. A front end that must see every free closes the map to
//! lookups for good ([`close`]): `libhakmem.so` in checked mode or counting, which so
//! needs no test of its mode on `free`'s fast path.
//!
//! Invariant: the byte of slab `i` is 0 or a [`MapByte`], even; it is nonzero only while
//! slab `i` lies in a span carved for its class in a mapped superslab, and is one that
//! blocks start in ([`size_class::starting_slabs`]); the byte is a
//! mirror of the slab's `class_map` entry in its chunk header
//! ([`crate::chunk_map::ChunkHeader`]), set right after the entry when the span is carved
//! and cleared right before the entry when the span is released ([`set_span`],
//! [`clear_span`]), and cleared for a whole chunk before it is unmapped
//! ([`clear_chunk`]). So, like the entry, it stays the class while any block of the span
//! is handed out. A byte that could not be set (its page could not be made writable, or
//! the map was not ready) stays 0, which only costs the slow path.

use crate::os;
use crate::size_class::{self, Class, MapByte, SLAB_SHIFT};
use crate::sync::{AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// Slabs of the 47-bit address space: bytes of the map.
const SLABS: usize = 1 << (47 - SLAB_SHIFT);
/// Slabs whose bytes share one page of the map.
const PER_PAGE: usize = os::PAGE_SIZE;
const PAGES: usize = SLABS / PER_PAGE;

/// A zero word, never written: the map's byte 0 before the map is reserved, which the
/// portable lookup reads for a slab outside the map. Atomic only so that it lies in
/// writable memory under its own name (a constant zero is merged into a nameless pool).
static ZERO: AtomicU64 = AtomicU64::new(0);
/// The map's base address once reserved, [`ZERO`]'s before (so that byte 0 of the map is
/// always readable, and 0); written before [`RESERVED`] and [`LIMIT`].
static MAP: AtomicPtr<u8> = AtomicPtr::new(core::ptr::addr_of!(ZERO).cast::<u8>().cast_mut());
/// How many slabs the map covers: 0 until the map is reserved, then [`SLABS`]; what
/// [`set_span`] and [`clear_span`] may write. Read before [`MAP`] and with Acquire.
static RESERVED: AtomicUsize = AtomicUsize::new(0);
/// How many slabs a lookup may read: [`RESERVED`]'s value while the map is open, 0 once
/// [`close`]d (and 0 until reserved). Read before [`MAP`] and with Acquire, so that a
/// lookup that sees it nonzero sees the map.
static LIMIT: AtomicUsize = AtomicUsize::new(0);
/// Set for good by [`close`].
static CLOSED: AtomicU8 = AtomicU8::new(0);
/// Whether the reservation was tried (by one caller of [`init`]).
static TRIED: AtomicU8 = AtomicU8::new(0);
/// One bit per page of the map: made writable.
#[allow(clippy::declare_interior_mutable_const)]
const NONE_WRITABLE: AtomicU64 = AtomicU64::new(0);
static WRITABLE: [AtomicU64; PAGES / 64] = [NONE_WRITABLE; PAGES / 64];

/// Reserve the map, once per process (later calls return at once). Called at process
/// set-up, before the first span is carved; a span carved before the map is ready keeps
/// a 0 byte.
pub fn init() {
    if TRIED.swap(1, Ordering::Relaxed) != 0 {
        return;
    }
    let errno = os::errno();
    let base = os::reserve_readonly(SLABS);
    os::set_errno(errno);
    if base.is_null() {
        return;
    }
    MAP.store(base, Ordering::Relaxed);
    RESERVED.store(SLABS, Ordering::Release);
    LIMIT.store(SLABS, Ordering::SeqCst);
    if CLOSED.load(Ordering::SeqCst) != 0 {
        LIMIT.store(0, Ordering::SeqCst);
    }
}

/// Make every later lookup miss, for good, as if the map could not be reserved: `free`
/// and `realloc` then classify every pointer by the chunk map, for a front end that must
/// see every free (checked mode, counting). The bytes are still kept, unread.
///
/// Whatever order this and [`init`] run in, [`LIMIT`] ends at 0: `init` stores the
/// limit before it reads [`CLOSED`], this stores the flag before the limit, all four
/// sequentially consistent. A lookup that runs while both do may still read the map.
pub fn close() {
    CLOSED.store(1, Ordering::SeqCst);
    LIMIT.store(0, Ordering::SeqCst);
}

/// The class of the block that starts at `addr`, if the map knows the slab of `addr` and
/// `addr` starts one of its blocks; `None` for everything else (an interior pointer, a
/// free or header slab, a large block, a pointer hakmem never handed out, a slab the map
/// does not know). One compare, one load of the map, one of the class's table entry.
#[inline(always)]
pub fn block_start_class(addr: usize) -> Option<Class> {
    block_start_byte(addr).map(MapByte::class)
}

/// [`block_start_class`], with the class as the map holds it: what C's `free` takes to the
/// class's bin ([`MapByte`]).
#[inline(always)]
pub fn block_start_byte(addr: usize) -> Option<MapByte> {
    size_class::block_start_mapped(addr, lookup(addr >> SLAB_SHIFT))
}

/// The byte of slab `i` (zero where never written), or 0 when [`LIMIT`] does not cover
/// slab `i` (the map not reserved, or [`close`]d). Even, by the map's invariant, which the
/// compiler is told.
///
/// On x86-64 (outside Miri, which runs no `asm!`) five instructions in one `asm!` block: a
/// zeroing `xor` of the result, a `cmp` of `i` with the limit in memory, a `jae` past the
/// rest, the load of [`MAP`], a `movzx` of the byte (the compiler would load the atomics
/// into registers first). In one block the load of [`MAP`] stays after that of [`LIMIT`],
/// x86 keeps loads in order, and [`init`] writes the map before the limit.
///
/// The test of the limit is a branch, not a `cmov` of the index: the branch is
/// predicted, so the byte's address waits for nothing but `i`, where the `cmov` waited
/// for the compare. In a loop that frees a block and allocates its class again, the
/// allocation loads the bin the free stored to, whose address comes from this byte:
/// the loop is as fast as that chain. `c-fixed-size` took 0.90x the time with the
/// branch alone, and 0.79x with the bin reached from the byte with no shift as well
/// ([`MapByte`]), against the `cmov` and a shift (one set of 7 alternated runs on an
/// Intel Xeon, tcmalloc 0.70x; the build as committed, in another set, 0.82x).
#[inline(always)]
fn lookup(i: usize) -> usize {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        let byte: usize;
        // SAFETY: reads two statics, and one byte of the map only when `i` is below the
        // limit read first, so of the reservation that `MAP` then holds (a byte that is
        // atomic to load); the map holds 0 or a `MapByte` (the invariant above), so the
        // byte is even.
        unsafe {
            core::arch::asm!(
                "xor {byte:e}, {byte:e}",
                "cmp {i}, qword ptr [rip + {limit}]",
                "jae 2f",
                "mov {map}, qword ptr [rip + {base}]",
                "movzx {byte:e}, byte ptr [{map} + {i}]",
                "2:",
                i = in(reg) i,
                map = out(reg) _,
                byte = out(reg) byte,
                limit = sym LIMIT,
                base = sym MAP,
                options(nostack, readonly, pure),
            );
            // `movzx` of a byte of the map, which holds even bytes only, or 0.
            core::hint::assert_unchecked(byte < 256);
            core::hint::assert_unchecked(byte % 2 == 0);
        }
        byte
    }
    #[cfg(any(not(target_arch = "x86_64"), miri))]
    {
        let i = if i < LIMIT.load(Ordering::Acquire) {
            i
        } else {
            0
        };
        // SAFETY: as above; every access to the map's bytes is atomic.
        unsafe {
            (*MAP.load(Ordering::Relaxed).cast::<AtomicU8>().add(i)).load(Ordering::Relaxed)
                as usize
        }
    }
}

/// The bytes of the `n` slabs from slab `i`, or `None` where the map does not cover them
/// all (not reserved).
#[inline]
fn bytes(i: usize, n: usize) -> Option<&'static [AtomicU8]> {
    if i + n > RESERVED.load(Ordering::Acquire) {
        return None;
    }
    // SAFETY: as in `block_start_class`: the map covers them, lives as long as the
    // process, and every access to its bytes is atomic.
    Some(unsafe {
        core::slice::from_raw_parts(MAP.load(Ordering::Relaxed).cast::<AtomicU8>().add(i), n)
    })
}

/// Make the page holding the byte of slab `i` writable, if it is not yet; whether it is.
fn writable(i: usize) -> bool {
    let page = i / PER_PAGE;
    let (word, bit) = (&WRITABLE[page / 64], 1u64 << (page % 64));
    if word.load(Ordering::Acquire) & bit != 0 {
        return true;
    }
    let at = MAP.load(Ordering::Relaxed) as usize + page * os::PAGE_SIZE;
    let errno = os::errno();
    // SAFETY: a page of the reservation (`i` is below `RESERVED`); two callers making it
    // writable at once both succeed.
    let ok = unsafe { os::make_writable(at as *mut u8, os::PAGE_SIZE) };
    os::set_errno(errno);
    if ok {
        word.fetch_or(bit, Ordering::Release);
    }
    ok
}

/// Record that the `n` slabs from `start` (a slab-aligned address), those of a span just
/// carved for class `c` that blocks start in, serve it; called right after their
/// `class_map` entries are set. A span lies in one chunk, so its bytes share one page of
/// the map.
pub fn set_span(start: usize, n: usize, c: Class) {
    let i = start >> SLAB_SHIFT;
    let Some(span) = bytes(i, n) else { return };
    if !writable(i) {
        return;
    }
    for b in span {
        b.store(MapByte::of(c).byte(), Ordering::Relaxed);
    }
}

/// Clear the bytes of the `n` slabs from `start` (a slab-aligned address): the span is
/// about to be released, or the chunk unmapped. Writes only bytes that are set (whose
/// pages are writable); a pointer into the span reads 0 from here on.
pub fn clear_span(start: usize, n: usize) {
    let Some(span) = bytes(start >> SLAB_SHIFT, n) else {
        return;
    };
    for b in span.iter().filter(|b| b.load(Ordering::Relaxed) != 0) {
        b.store(0, Ordering::Relaxed);
    }
}

/// Clear the bytes of every slab of the chunk of `chunk_size` bytes at `base`, before it
/// is unmapped.
pub fn clear_chunk(base: usize, chunk_size: usize) {
    clear_span(base, chunk_size >> SLAB_SHIFT);
}

/// Whether the map is reserved, for tests.
#[cfg(test)]
fn reserved() -> bool {
    RESERVED.load(Ordering::Acquire) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_and_clear_a_span() {
        init();
        if cfg!(any(miri, loom)) {
            // Nothing is reserved there: every lookup misses.
            assert!(!reserved());
            set_span(0x7a_0000_0000, 1, Class::new(3));
            assert_eq!(block_start_class(0x7a_0000_0000), None);
            return;
        }
        assert!(reserved(), "the reservation failed");
        let c = Class::new(3);
        let size = size_class::block_size(c);
        let start = 0x7a_0000_0000usize;
        assert_eq!(block_start_class(start), None);
        set_span(start, 2, c);
        assert_eq!(block_start_class(start), Some(c));
        assert_eq!(block_start_class(start + size), Some(c));
        assert_eq!(block_start_class(start + size + 8), None, "interior");
        assert_eq!(
            block_start_class(start + 2 * (1 << SLAB_SHIFT)),
            None,
            "past the span"
        );
        clear_span(start, 2);
        assert_eq!(block_start_class(start), None);
        assert_eq!(block_start_class(usize::MAX - 15), None);
    }
}
