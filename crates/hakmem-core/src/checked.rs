//! Checked mode: the same allocator, with the program's misuse caught and reported.
//!
//! Selected by the `checked` cargo feature of `hakmem` (Rust) or `HAKMEM_CHECK=1`
//! (`libhakmem.so`). Each small block is taken one class larger when needed so that its
//! last 8 bytes hold a canary; a freed block's second word holds a freed marker. On every
//! free:
//!
//! | misuse | how it is seen |
//! |---|---|
//! | free of a pointer hakmem never handed out | the chunk map has no bit for it |
//! | free of a pointer inside hakmem's memory that is no block start | class map says free/header, or the offset in the span is not a multiple of the block size (then reported as interior, with the slab's class) |
//! | double free | the freed marker is in the block's second word |
//! | write past the end of a small block | the canary at the end of the block changed |
//! | `dealloc` with another layout than the allocation's | the class of the layout is not the block's |
//!
//! Each is reported on stderr without allocating (pointer, kind, size class) and the
//! process aborts. Blocks from checked mode must be freed in checked mode.

use crate::size_class::{block_size, class_for, Class, MIN_ALIGN, NUM_CLASSES};
use crate::chunk_map::ChunkHeader;
use crate::process::Hooks;
use crate::{chunk_map, large};
use crate::{owner, report_misuse, thread_cache, Misuse, Owner};

/// Bytes at the end of each small block taken by the canary.
const CANARY_BYTES: usize = 8;
const CANARY: usize = 0x5afe_c0de_5afe_c0de;
const FREED: usize = 0xdead_f4ee_dead_f4ee;

/// The class a checked request uses (room for the canary), or `None` for large.
fn checked_class(size: usize, align: usize) -> Option<Class> {
    class_for(size.checked_add(CANARY_BYTES)?, align)
}

/// As [`crate::alloc`], with a canary after the usable bytes.
pub fn alloc(size: usize, align: usize) -> *mut u8 {
    match checked_class(size, align) {
        Some(c) => {
            // SAFETY: `checked_class` returns classes in range.
            let p = unsafe { thread_cache::alloc::<Hooks>(c) };
            if !p.is_null() {
                // SAFETY: a fresh block of class `c`.
                unsafe { arm(p, c) };
            }
            p
        }
        None if size > usize::MAX - CANARY_BYTES => core::ptr::null_mut(),
        None => large::alloc(size, align).0,
    }
}

/// As [`crate::alloc_zeroed`], checked.
pub fn alloc_zeroed(size: usize, align: usize) -> *mut u8 {
    let p = alloc(size, align);
    if !p.is_null() {
        // SAFETY: the block holds at least `size` bytes.
        unsafe { core::ptr::write_bytes(p, 0, size) };
    }
    p
}

/// Write the canary of a block of class `c` and clear its freed marker.
///
/// # Safety
/// `p` is a block of class `c` that the caller holds.
unsafe fn arm(p: *mut u8, c: Class) {
    let b = block_size(c);
    // SAFETY: the block holds `b >= 16` bytes; both words lie inside it.
    unsafe {
        if b > 16 {
            (p.add(8) as *mut usize).write(0);
        }
        (p.add(b - CANARY_BYTES) as *mut usize).write_unaligned(CANARY ^ p as usize);
    }
}

/// The size class of the slab `p` lies in, if it lies in one that serves a class.
fn slab_class(p: *mut u8) -> Option<Class> {
    let addr = p as usize;
    if !chunk_map::contains(addr) {
        return None;
    }
    // SAFETY: the chunk map says a header is mapped at the chunk base.
    let entry = unsafe { (*ChunkHeader::of(addr)).entry(addr) };
    ((entry as usize) < NUM_CLASSES).then_some(entry as Class)
}

/// Check a block about to be freed; report and abort on misuse. Returns its class, or
/// `None` for a valid large block.
fn inspect(p: *mut u8) -> Option<Class> {
    match owner(p) {
        Owner::Foreign => report_misuse(p, Misuse::ForeignFree, None),
        // Inside a slab of some class but not at a block start: an interior pointer.
        Owner::Invalid => match slab_class(p) {
            Some(c) => report_misuse(p, Misuse::InteriorFree, Some(c)),
            None => report_misuse(p, Misuse::InvalidFree, None),
        },
        Owner::Large { .. } => None,
        Owner::Small { class, .. } => {
            // `owner` checked that `p` starts a block.
            let b = block_size(class);
            // SAFETY: `p` starts a block of `b >= 16` bytes in a live slab.
            let (second, canary) = unsafe {
                (
                    (p.add(8) as *const usize).read(),
                    (p.add(b - CANARY_BYTES) as *const usize).read_unaligned(),
                )
            };
            if second == FREED ^ p as usize {
                report_misuse(p, Misuse::DoubleFree, Some(class));
            }
            if canary != CANARY ^ p as usize {
                report_misuse(p, Misuse::Overflow, Some(class));
            }
            Some(class)
        }
    }
}

/// Free a small block after [`inspect`]: mark it freed, then the normal path.
///
/// # Safety
/// `p` is a live block of class `c` that the caller gives up.
unsafe fn release(p: *mut u8, c: Class) {
    // SAFETY: by the caller; the marker word lies inside the block.
    unsafe {
        (p.add(8) as *mut usize).write(FREED ^ p as usize);
        thread_cache::free::<Hooks>(p, c);
    }
}

/// As [`crate::free`], checked.
///
/// # Safety
/// As for [`crate::free`], except that misuse is reported instead of undefined.
pub unsafe fn free(p: *mut u8) {
    if p.is_null() {
        return;
    }
    match inspect(p) {
        // SAFETY: inspected: a live block of class `c`.
        Some(c) => unsafe { release(p, c) },
        // SAFETY: `owner` validated the large header.
        None => unsafe { large::free(large::header_of(p).expect("validated")) },
    }
}

/// As [`crate::dealloc`], checked; also reports a layout that is not the allocation's.
///
/// # Safety
/// As for [`free`].
pub unsafe fn dealloc(p: *mut u8, size: usize, align: usize) {
    let found = inspect(p);
    if found != checked_class(size, align) {
        report_misuse(p, Misuse::WrongLayout, found);
    }
    // SAFETY: inspected.
    unsafe { free_inspected(p, found) }
}

/// # Safety
/// `p` passed [`inspect`], which returned `found`.
unsafe fn free_inspected(p: *mut u8, found: Option<Class>) {
    match found {
        // SAFETY: by the caller.
        Some(c) => unsafe { release(p, c) },
        // SAFETY: by the caller, a validated large block.
        None => unsafe { large::free(large::header_of(p).expect("validated")) },
    }
}

/// Bytes usable in a checked block (the canary excluded).
pub fn usable_size(p: *const u8) -> usize {
    match owner(p) {
        Owner::Small { usable, .. } => usable - CANARY_BYTES,
        Owner::Large { usable } => usable,
        _ => 0,
    }
}

/// As [`crate::realloc_unsized`], checked: always moves (speed is not the point here).
///
/// # Safety
/// As for [`free`].
pub unsafe fn realloc_unsized(p: *mut u8, new_size: usize) -> *mut u8 {
    if p.is_null() {
        return alloc(new_size, MIN_ALIGN);
    }
    let found = inspect(p);
    let old = usable_size(p);
    let q = alloc(new_size, MIN_ALIGN);
    if !q.is_null() {
        // SAFETY: both blocks hold the bytes copied; `p` passed inspection.
        unsafe {
            core::ptr::copy_nonoverlapping(p, q, old.min(new_size));
            free_inspected(p, found);
        }
    }
    q
}

/// As [`crate::realloc`], checked: always moves.
///
/// # Safety
/// As for [`dealloc`].
pub unsafe fn realloc(p: *mut u8, old_size: usize, align: usize, new_size: usize) -> *mut u8 {
    let q = alloc(new_size, align);
    if !q.is_null() {
        // SAFETY: both blocks hold the bytes copied; `dealloc` inspects `p`.
        unsafe {
            core::ptr::copy_nonoverlapping(p, q, old_size.min(new_size));
            dealloc(p, old_size, align);
        }
    }
    q
}
