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
//! - [`env`] and [`stats`]: `HAKMEM_VERBOSE`, `HAKMEM_STATS` (`HAKMEM_PROFILE` is read by
//!   hakmem-core), read by a constructor without allocating; the exit summary.
//! - [`mode`]: `HAKMEM_CHECK=1` (checked mode) and counting, one byte the fast paths test.
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
pub mod malloc;
pub mod mode;
pub mod prefixed;
pub mod stats;

/// The Rust standard library linked into `libhakmem.so` allocates through hakmem-core
/// directly (the same `GlobalAlloc` Rust programs use), so that it never goes through the
/// exported `malloc` and its C semantics.
#[global_allocator]
static GLOBAL: hakmem_rs::HakMem = hakmem_rs::HakMem;
