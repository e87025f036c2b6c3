//! The C ABI of hakmem: `libhakmem.so`, a drop-in `malloc` for `LD_PRELOAD` or for linking
//! with `-lhakmem`.
//!
//! - [`malloc`]: `malloc`, `free`, `calloc`, `realloc`, `reallocarray`,
//!   `malloc_usable_size`, `cfree`, `free_sized`, `free_aligned_sized`, `malloc_trim`.
//! - [`aligned`]: `posix_memalign`, `aligned_alloc`, `memalign`, `valloc`, `pvalloc`.
//! - [`aliases`]: the `__libc_*` names glibc also exports for these.
//! - [`cxx`]: C++ `operator new` / `operator delete`, with the sized fast path.
//! - [`glibc`]: `mallinfo`, `mallinfo2`, `mallopt`, `malloc_stats`.
//! - [`prefixed`]: `hakmem_malloc` & co., declared in `include/hakmem.h`.
//! - [`foreign`]: what to do with pointers hakmem never handed out.
//! - [`startup`]: the constructor that reads the environment ([`env`]) at load without
//!   allocating: `HAKMEM_VERBOSE`, `HAKMEM_STATS` ([`stats`], with the exit summary);
//!   `HAKMEM_PROFILE` is read by hakmem-core.
//! - [`mode`]: `HAKMEM_CHECK=1` (checked mode) and counting, one byte the fast paths test.
//! - [`heap_profile`]: `HAKMEM_HEAP_PROFILE` & co., the heap profiler's C interface.
//! - [`errno`], [`fmt`]: helpers that never allocate.
//!
//! Rules every entry point keeps: never allocate through anything but hakmem-core, never
//! panic across the FFI boundary (an `extern "C"` function that panicked would abort), and
//! keep the fast path free of initialisation checks (hakmem-core sets itself up on the
//! first slow path).
#![deny(unsafe_op_in_unsafe_fn)]

pub mod aliases;
pub mod aligned;
pub mod cxx;
pub mod env;
pub mod errno;
pub mod fmt;
pub mod foreign;
pub mod glibc;
pub mod heap_profile;
pub mod malloc;
pub mod mode;
pub mod prefixed;
pub mod startup;
pub mod stats;

use core::alloc::{GlobalAlloc, Layout};

/// The Rust standard library linked into `libhakmem.so` allocates through hakmem-core
/// directly, so that it never goes through the exported `malloc` (and its C semantics).
struct CoreAlloc;

// SAFETY: hakmem-core returns blocks of at least the layout's size and alignment (null on
// failure, never unwinding) and takes back exactly the `(size, align)` it handed out.
unsafe impl GlobalAlloc for CoreAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        hakmem_core::alloc(layout.size(), layout.align())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `GlobalAlloc` guarantees `ptr` came from `alloc` with this layout.
        unsafe { hakmem_core::dealloc(ptr, layout.size(), layout.align()) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        hakmem_core::alloc_zeroed(layout.size(), layout.align())
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`.
        unsafe { hakmem_core::realloc(ptr, layout.size(), layout.align(), new_size) }
    }
}

#[global_allocator]
static GLOBAL: CoreAlloc = CoreAlloc;
