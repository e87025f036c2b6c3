//! The steps checked mode adds to the one allocation path ([`crate::block`] with
//! `CHECKED = true`): a canary after each small block's usable bytes, a freed marker in
//! its second word, the request's class widened to hold the canary. None of them
//! allocates; what they find is reported through [`crate::misuse`].
//!
//! | misuse | how it is seen |
//! |---|---|
//! | free of a pointer hakmem never handed out | the chunk map has no bit for it |
//! | free of a pointer inside hakmem's memory that is no block start | class map says free/header, or the offset in the span is not a multiple of the block size (then reported as interior, with the slab's class) |
//! | double free | the freed marker is in the block's second word |
//! | write past the end of a small block | the canary at the end of the block changed |
//! | `dealloc` with another layout than the allocation's | the class of the layout is not the block's |
//!
//! Blocks allocated with checks must be freed with checks: the layout differs.

use crate::chunk_map;
use crate::misuse::{report_misuse, Misuse};
use crate::size_class::{block_size, class_for, Class};

/// Bytes at the end of each small block taken by the canary.
pub const CANARY_BYTES: usize = 8;
const CANARY: usize = 0x5afe_c0de_5afe_c0de;
const FREED: usize = 0xdead_f4ee_dead_f4ee;

/// The class of a request `(size, align)`: with checks, room for the canary too.
#[inline(always)]
pub fn request_class<const CHECKED: bool>(size: usize, align: usize) -> Option<Class> {
    if CHECKED {
        class_for(size.checked_add(CANARY_BYTES)?, align)
    } else {
        class_for(size, align)
    }
}

/// Bytes of a small block of `block` bytes that are the program's.
#[inline(always)]
pub const fn usable<const CHECKED: bool>(block: usize) -> usize {
    if CHECKED {
        block - CANARY_BYTES
    } else {
        block
    }
}

/// Write the canary of a fresh block of class `c` and clear its freed marker.
///
/// # Safety
/// `p` is a block of class `c` that the caller holds.
pub unsafe fn arm(p: *mut u8, c: Class) {
    let b = block_size(c);
    // SAFETY: the block holds `b >= 16` bytes; both words lie inside it.
    unsafe {
        if b > 16 {
            (p.add(8) as *mut usize).write(0);
        }
        (p.add(b - CANARY_BYTES) as *mut usize).write_unaligned(CANARY ^ p as usize);
    }
}

/// Report a double free (freed marker present) or an overflow (canary changed) of the
/// block `p` of class `c` about to be freed or resized.
///
/// # Safety
/// `p` starts a block of class `c` in a live slab.
pub unsafe fn check_live(p: *mut u8, c: Class) {
    let b = block_size(c);
    // SAFETY: by the caller, `p` starts a block of `b >= 16` bytes in a live slab.
    let (second, canary) = unsafe {
        (
            (p.add(8) as *const usize).read(),
            (p.add(b - CANARY_BYTES) as *const usize).read_unaligned(),
        )
    };
    if second == FREED ^ p as usize {
        report_misuse(p, Misuse::DoubleFree, Some(c));
    }
    if canary != CANARY ^ p as usize {
        report_misuse(p, Misuse::Overflow, Some(c));
    }
}

/// Mark the block `p` freed (its second word), just before it goes back.
///
/// # Safety
/// `p` is a live block of at least 16 bytes that the caller gives up.
pub unsafe fn mark_freed(p: *mut u8) {
    // SAFETY: by the caller; the marker word lies inside the block.
    unsafe { (p.add(8) as *mut usize).write(FREED ^ p as usize) };
}

/// The size class of the span `p` lies in, if it lies in one that serves a class (to
/// name the class of an interior pointer): its slab's, or, in a medium span's slabs past
/// its first, the first's.
pub fn slab_class(p: *const u8) -> Option<Class> {
    let mut addr = p as usize;
    loop {
        match chunk_map::entry_of(addr)? {
            // A tail follows its span's first slab in the same chunk.
            chunk_map::MAP_TAIL => addr -= crate::size_class::SLAB_SIZE,
            e => return Class::from_map_entry(e),
        }
    }
}
