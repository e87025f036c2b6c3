//! Aligned allocation: `posix_memalign`, `aligned_alloc`, `memalign`, `valloc`, `pvalloc`,
//! with glibc's rules for odd arguments.
//!
//! - `posix_memalign`: the alignment must be a power of two and a multiple of
//!   `sizeof(void *)`, else `EINVAL` with the output untouched; `ENOMEM` on failure.
//!   `errno` is left alone either way.
//! - `aligned_alloc`: any power-of-two alignment, any size (C17 dropped "a multiple of
//!   the alignment"); otherwise null with `EINVAL` (glibc 2.38's rule).
//! - `memalign`: an alignment of 16 or less is `malloc`'s; one that is not a power of two
//!   is rounded up to the next; beyond `SIZE_MAX / 2 + 1` it is `EINVAL`.
//! - `valloc` / `pvalloc`: page aligned; `pvalloc` rounds the size up to whole pages.
//!
//! hakmem serves alignments up to 1 TiB (`hakmem_core::MAX_ALIGN`); larger ones fail with
//! `ENOMEM`.

use crate::malloc::{self, MIN_ALIGN};
use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);

/// The system page size (`sysconf`, once).
pub fn page_size() -> usize {
    let p = PAGE_SIZE.load(Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: sysconf has no preconditions and does not allocate.
    let p = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => 4096,
    };
    PAGE_SIZE.store(p, Relaxed);
    p
}

/// `memalign`'s treatment of the alignment: `None` is `EINVAL`.
pub fn memalign_alignment(align: usize) -> Option<usize> {
    if align <= MIN_ALIGN {
        return Some(MIN_ALIGN);
    }
    if align > usize::MAX / 2 + 1 {
        return None;
    }
    Some(align.next_power_of_two())
}

/// `memalign(align, size)`.
pub fn memalign_impl(align: usize, size: usize) -> *mut c_void {
    match memalign_alignment(align) {
        Some(a) => alloc_aligned(size, a),
        None => invalid(),
    }
}

/// A block of `size` bytes aligned to `align` (a power of two), `ENOMEM` on failure: from
/// the thread's cache when it has one of the class, as `malloc`'s fast path (up to a
/// slab's alignment: `hakmem_core::alloc_cached_aligned`).
#[inline(always)]
fn alloc_aligned(size: usize, align: usize) -> *mut c_void {
    let p = malloc::cached(size, align);
    if !p.is_null() {
        return p;
    }
    malloc::alloc(size, align)
}

/// `pvalloc(size)`: whole pages.
pub fn pvalloc_impl(size: usize) -> *mut c_void {
    let page = page_size();
    match size.max(1).checked_next_multiple_of(page) {
        Some(rounded) => malloc::alloc(rounded, page),
        None => malloc::out_of_memory(),
    }
}

#[cold]
fn invalid() -> *mut c_void {
    crate::errno::set(libc::EINVAL);
    core::ptr::null_mut()
}

/// `aligned_alloc(align, size)`.
pub fn aligned_alloc_impl(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        return invalid();
    }
    alloc_aligned(size, align)
}

/// `posix_memalign(out, align, size)`.
///
/// # Safety
/// `out` is valid for a write of a pointer.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    // A power of two that is a multiple of a pointer's size (`is_power_of_two` costs
    // a dozen instructions where `popcnt` is not assumed).
    if align < core::mem::size_of::<*mut c_void>() || align & (align - 1) != 0 {
        return libc::EINVAL;
    }
    let mut p = malloc::cached(size, align);
    if p.is_null() {
        p = posix_memalign_slow(size, align);
        if p.is_null() {
            return libc::ENOMEM;
        }
    }
    // SAFETY: by the caller.
    unsafe { *out = p };
    0
}

/// [`posix_memalign`] past the thread's cache, `errno` kept.
#[inline(never)]
fn posix_memalign_slow(size: usize, align: usize) -> *mut c_void {
    // hakmem-core's system calls may set errno on the way to success (an `mmap` at the
    // address hint that finds the range taken: EEXIST).
    let _errno = crate::errno::Preserve::new();
    malloc::alloc_or_null(size, align)
}

/// `aligned_alloc(align, size)`.
#[no_mangle]
pub extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    aligned_alloc_impl(align, size)
}

/// `memalign(align, size)`.
#[no_mangle]
pub extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    memalign_impl(align, size)
}

/// `valloc(size)`: page aligned.
#[no_mangle]
pub extern "C" fn valloc(size: usize) -> *mut c_void {
    malloc::alloc(size, page_size())
}

/// `pvalloc(size)`: page aligned, the size rounded up to whole pages.
#[no_mangle]
pub extern "C" fn pvalloc(size: usize) -> *mut c_void {
    pvalloc_impl(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memalign_rounds_like_glibc() {
        assert_eq!(memalign_alignment(0), Some(16));
        assert_eq!(memalign_alignment(8), Some(16));
        assert_eq!(memalign_alignment(24), Some(32));
        assert_eq!(memalign_alignment(4096), Some(4096));
        assert_eq!(
            memalign_alignment(usize::MAX / 2 + 1),
            Some(usize::MAX / 2 + 1)
        );
        assert_eq!(memalign_alignment(usize::MAX / 2 + 2), None);
    }

    #[test]
    fn page_size_is_a_power_of_two() {
        assert!(page_size().is_power_of_two());
    }
}
