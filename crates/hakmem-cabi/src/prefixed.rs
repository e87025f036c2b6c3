//! The prefixed API, declared in `include/hakmem.h` (generated from this file by
//! cbindgen; the test `header` fails when the header is stale). Same semantics as the
//! unprefixed functions, for programs that link hakmem without replacing `malloc`.

use crate::{aligned, malloc, stats};
use core::ffi::c_void;

/// A snapshot of hakmem's statistics (`hakmem_stats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HakmemStats {
    /// Usable bytes of the blocks the program holds, counted only with `HAKMEM_STATS=1`.
    pub in_use: usize,
    /// The most `in_use` has been (only with `HAKMEM_STATS=1`).
    pub peak_in_use: usize,
    /// Allocation and free calls (only with `HAKMEM_STATS=1`; a realloc counts twice).
    pub calls: usize,
    /// Bytes of blocks taken out of hakmem's slabs and large mappings, thread caches
    /// included.
    pub allocated: usize,
    /// Bytes of address space hakmem has mapped.
    pub mapped: usize,
    /// The most `mapped` has been (tracked only with `HAKMEM_STATS=1`; otherwise `mapped`).
    pub peak_mapped: usize,
    /// Resident set size of the whole process.
    pub resident: usize,
    /// Empty superslabs (4 MiB) kept for reuse.
    pub cached_superslabs: usize,
    /// Superslabs left by exited threads, waiting for a new owner.
    pub abandoned_superslabs: usize,
    /// Bytes of freed large mappings kept for reuse.
    pub cached_large: usize,
    /// System calls made so far.
    pub mmap_calls: usize,
    pub munmap_calls: usize,
    pub madvise_calls: usize,
    pub madvise_failures: usize,
    pub mremap_calls: usize,
}

/// Allocate `size` bytes, 16-byte aligned; NULL with errno ENOMEM on failure.
#[no_mangle]
pub extern "C" fn hakmem_malloc(size: usize) -> *mut c_void {
    malloc::alloc(size, malloc::MIN_ALIGN)
}

/// Free a block from any hakmem allocation function; NULL is ignored, errno preserved.
///
/// # Safety
/// `p` is NULL or a live block from hakmem that is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn hakmem_free(p: *mut c_void) {
    // SAFETY: by the caller.
    unsafe { malloc::free_block(p) }
}

/// Allocate `n * size` zeroed bytes; NULL with errno ENOMEM on failure or overflow.
#[no_mangle]
pub extern "C" fn hakmem_calloc(n: usize, size: usize) -> *mut c_void {
    malloc::alloc_array_zeroed(n, size)
}

/// Resize a block as `realloc` does: NULL `p` allocates, size 0 frees and returns NULL,
/// failure returns NULL with errno ENOMEM and leaves `p` alone.
///
/// # Safety
/// `p` is NULL or a live block from hakmem; after success it is not used.
#[no_mangle]
pub unsafe extern "C" fn hakmem_realloc(p: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: by the caller.
    unsafe { malloc::realloc_block(p, size) }
}

/// Allocate `size` bytes aligned to `alignment` (a power of two, at most 1 TiB); NULL with
/// errno EINVAL for a bad alignment, ENOMEM on failure.
#[no_mangle]
pub extern "C" fn hakmem_aligned_alloc(alignment: usize, size: usize) -> *mut c_void {
    aligned::aligned_alloc_impl(alignment, size)
}

/// Usable bytes of the block `p` (at least what was asked for); 0 for NULL.
#[no_mangle]
pub extern "C" fn hakmem_usable_size(p: *const c_void) -> usize {
    malloc::usable_size(p)
}

/// Give cached free memory back to the operating system now.
#[no_mangle]
pub extern "C" fn hakmem_trim() {
    malloc::trim();
}

/// A snapshot of the statistics.
#[no_mangle]
pub extern "C" fn hakmem_stats() -> HakmemStats {
    let s = hakmem_core::stats();
    let c = stats::counts(&s);
    HakmemStats {
        in_use: c.in_use,
        peak_in_use: c.peak_in_use,
        calls: c.calls,
        allocated: s.allocated,
        mapped: s.mapped,
        peak_mapped: c.peak_mapped,
        resident: s.resident,
        cached_superslabs: s.cached_superslabs,
        abandoned_superslabs: s.abandoned_superslabs,
        cached_large: s.cached_large,
        mmap_calls: s.mmap_calls,
        munmap_calls: s.munmap_calls,
        madvise_calls: s.madvise_calls,
        madvise_failures: s.madvise_failures,
        mremap_calls: s.mremap_calls,
    }
}

/// Print the statistics summary (the one `HAKMEM_STATS=1` prints at exit) on stderr.
#[no_mangle]
pub extern "C" fn hakmem_stats_print() {
    stats::print_summary();
}

/// Write a heap profile of the running process: `prefix.pb.gz` (pprof), `prefix.svg`
/// (flame graph of bytes in use), `prefix.alloc.svg` (of bytes allocated), `prefix.txt`
/// (top stacks). Profiling must have been started with `HAKMEM_HEAP_PROFILE`. Returns 0,
/// or -1 when profiling is off or a file could not be written.
///
/// # Safety
/// `prefix` is a NUL-terminated path.
#[no_mangle]
pub unsafe extern "C" fn hakmem_heap_profile_dump(
    prefix: *const core::ffi::c_char,
) -> core::ffi::c_int {
    // SAFETY: by the caller.
    unsafe { crate::heap_profile::dump_to(prefix) }
}
