//! The `__libc_*` names glibc exports for its allocator. Some programs and libraries call
//! them directly (to reach "the real malloc" past a wrapper); under `LD_PRELOAD` they must
//! reach hakmem too, or glibc's allocator would see hakmem's blocks.

use crate::{aligned, glibc, malloc};
use core::ffi::{c_int, c_void};

/// `__libc_malloc`: `malloc`.
#[no_mangle]
pub extern "C" fn __libc_malloc(size: usize) -> *mut c_void {
    malloc::alloc(size, malloc::MIN_ALIGN)
}

/// `__libc_free`: `free`.
///
/// # Safety
/// As for `free`.
#[no_mangle]
pub unsafe extern "C" fn __libc_free(p: *mut c_void) {
    // SAFETY: by the caller.
    unsafe { malloc::free_block(p) }
}

/// `__libc_calloc`: `calloc`.
#[no_mangle]
pub extern "C" fn __libc_calloc(n: usize, size: usize) -> *mut c_void {
    malloc::alloc_array_zeroed(n, size)
}

/// `__libc_realloc`: `realloc`.
///
/// # Safety
/// As for `realloc`.
#[no_mangle]
pub unsafe extern "C" fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: by the caller.
    unsafe { malloc::realloc_block(p, size) }
}

/// `__libc_memalign`: `memalign`.
#[no_mangle]
pub extern "C" fn __libc_memalign(align: usize, size: usize) -> *mut c_void {
    aligned::memalign_impl(align, size)
}

/// `__libc_valloc`: `valloc`.
#[no_mangle]
pub extern "C" fn __libc_valloc(size: usize) -> *mut c_void {
    malloc::alloc(size, aligned::page_size())
}

/// `__libc_pvalloc`: `pvalloc`.
#[no_mangle]
pub extern "C" fn __libc_pvalloc(size: usize) -> *mut c_void {
    aligned::pvalloc_impl(size)
}

/// `__libc_mallinfo`: `mallinfo`.
#[no_mangle]
pub extern "C" fn __libc_mallinfo() -> glibc::Mallinfo {
    glibc::mallinfo_impl()
}

/// `__libc_mallopt`: `mallopt`.
#[no_mangle]
pub extern "C" fn __libc_mallopt(param: c_int, value: c_int) -> c_int {
    glibc::mallopt_impl(param, value)
}
