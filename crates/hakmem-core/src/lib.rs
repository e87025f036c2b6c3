//! hakmem-core: the allocator, without `std`. Its modules are private; this page is the
//! whole surface, and `hakmem` (the Rust `GlobalAlloc`), `hakmem-cabi` (the C ABI) and
//! `hakmem-heap-profile` use nothing else.
//!
//! | what | entry points |
//! |---|---|
//! | allocate | [`alloc`], [`alloc_zeroed`], [`alloc_cached`], [`alloc_cached_aligned`] (the fast path alone, for a front end with its own slow path) |
//! | free with the request known (Rust) | [`dealloc`] |
//! | free without a size (C) | [`free`] (misuse reported), [`free_or_else`] (classifies once; what is no live block goes to the caller's callback), [`free_cached`] (the fast path alone; [`stop_free_cached`] turns it off for good) and [`free_classified_or_else`] (the rest) |
//! | resize | [`realloc`] (request known), [`realloc_unsized`] (C), [`realloc_cached`] (C, small blocks the slab map knows), [`stays_in_place`] |
//! | usable size, classify | [`usable_size`], [`usable_size_cached`] (the slab map's lookup alone), [`owner`] / [`Owner`], [`in_heap`]; size classes: [`class_for`], [`class_of_size`], [`block_size`], [`Class`], [`NUM_CLASSES`], [`MIN_ALIGN`], [`MAX_SMALL_SIZE`], [`MAX_ALIGN`], [`CHUNK_SIZE`] |
//! | trim | [`trim`] |
//! | stats | [`stats()`] / [`Stats`], [`mapped_bytes`], [`class_usage()`] / [`ClassUsage`], [`residency()`] / [`Residency`] |
//! | profile | [`set_profile`], [`profile`], [`Profile`] |
//! | checked switch | [`Core`]`<CHECKED>` / [`Checked`]: the same entry points with the checks of checked mode on |
//! | misuse | [`report_misuse`], [`Misuse`], [`NotFreed`]; [`write_stderr`], [`abort`] (never allocate) |
//! | thread-exit and `fork` hooks | registered by the core itself at its first slow path, or now with [`init`] |
//! | for the heap profiler | [`sample_count_down`], [`set_sample_countdown`] (its per-thread countdown, in the thread cache's slot); [`SpinLock`] (a lock that never allocates) |
//!
//! Layers, lowest first; a module uses only its own layer and those before it, with no
//! cycle (written once more in `tests/layers.rs`, which checks the sources, and in
//! docs/ARCHITECTURE.md):
//!
//! 1. `sync`: atomics (loom's under `--cfg loom`), spin lock.
//! 2. `os`: `mmap` / `munmap` / `madvise` / `mremap`, counted; stderr, abort.
//! 3. `size_class` (sizes to classes, the slab size), `chunk_map` (which 4 MiB chunks
//!    are ours, and the chunk header each starts with), `slab_map` (the class of each
//!    64 KiB slab, for `free`'s fast path), `config` (profiles), `misuse`.
//! 4. `retain`: the budget of freed memory kept for reuse.
//! 5. `remote` (lock-free remote free lists), `superslab` (4 MiB superslabs carved into
//!    slabs, owned by an opaque `OwnerId`), `large` (one mapping per large block).
//! 6. `pool`: superslabs nobody owns (empty cache, abandoned); `depot`: batches of free
//!    blocks the thread caches pass on to each other.
//! 7. `kept` (the large blocks a thread freed and keeps for its next requests), `heap`
//!    (a thread's slabs and superslabs, and its kept large blocks; batch refill and
//!    flush).
//! 8. `tls` (the thread's slot), `thread_cache` (per-class free stacks, the fast path;
//!    its slow paths get the set-up hooks of the layer above as a type parameter).
//! 9. `checks` (the steps of checked mode), `process` (one-time set-up, thread exit,
//!    fork), `stats`.
//! 10. `block`: the one path of every block, with `CHECKED` a constant.
//! 11. This page.
//!
//! See docs/ARCHITECTURE.md for the path of an allocation and of a free.
#![cfg_attr(not(test), no_std)]
#![cfg_attr(feature = "nightly", feature(thread_local))]
#![deny(unsafe_op_in_unsafe_fn)]

mod block;
mod checks;
mod chunk_map;
mod config;
mod depot;
mod heap;
mod kept;
mod large;
mod misuse;
mod os;
mod pool;
mod process;
mod remote;
mod retain;
mod size_class;
mod slab_map;
mod stats;
mod superslab;
mod sync;
mod thread_cache;
mod tls;

pub use block::{
    alloc_cached, alloc_cached_aligned, alloc_cached_table, alloc_cached_table_zeroed,
    alloc_cached_wide, free_cached, owner, realloc_cached, stays_in_place, trim,
    usable_size_cached, NotFreed, Owner, GROW_LARGE_FROM,
};
pub use chunk_map::CHUNK_SIZE;
pub use config::Profile;
pub use large::MAX_ALIGN;
pub use misuse::{report_misuse, Misuse};
pub use os::{abort, write_stderr};
pub use size_class::{
    block_size, class_for, class_of_size, Class, MAX_SMALL_SIZE, MIN_ALIGN, NUM_CLASSES, TABLE_MAX,
};
pub use stats::{ClassUsage, Residency, Resident, Stats};
pub use sync::SpinLock;

/// Subtract `bytes` from the calling thread's sampling countdown; whether it went below
/// zero. The countdown is one word of the thread cache's slot that the core never reads,
/// kept for the heap profiler: an allocation that takes it and then the thread cache
/// computes the thread-local address once. Zero at thread start.
#[inline(always)]
pub fn sample_count_down(bytes: usize) -> bool {
    thread_cache::count_down(bytes)
}

/// Set the calling thread's sampling countdown (see [`sample_count_down`]).
pub fn set_sample_countdown(bytes: isize) {
    thread_cache::set_countdown(bytes);
}

/// Allocate `size` bytes aligned to `align` (a power of two). Null when memory is
/// exhausted or the request cannot be met (alignment over [`MAX_ALIGN`], size near
/// `isize::MAX`).
#[inline(always)]
pub fn alloc(size: usize, align: usize) -> *mut u8 {
    block::alloc::<false>(size, align)
}

/// As [`alloc`], with the bytes zeroed. Fresh large mappings are not cleared again.
#[inline]
pub fn alloc_zeroed(size: usize, align: usize) -> *mut u8 {
    block::alloc_zeroed::<false>(size, align)
}

/// Free a block whose request `(size, align)` the caller still knows (Rust's `dealloc`):
/// the class comes from the size, with no lookup. The size must be the request's, not
/// the block's: the block size of a class with colour (5184 for 5 KiB,
/// `size_class::COLOUR`) is a request of the next class, and a block freed with it would
/// go to that class's bin and be handed out as a bigger block.
///
/// # Safety
/// `p` came from [`alloc`] / [`alloc_zeroed`] / [`realloc`] with this `size` and `align`
/// and is not used afterwards.
#[inline(always)]
pub unsafe fn dealloc(p: *mut u8, size: usize, align: usize) {
    // SAFETY: by the caller.
    unsafe { block::dealloc::<false>(p, size, align) }
}

/// Resize a block whose request `(old_size, align)` the caller knows. The block stays in
/// place when the new size falls in the same class, and large blocks grow with `mremap`.
/// Null on failure, the old block untouched.
///
/// # Safety
/// As for [`dealloc`]; on success the old pointer is not used afterwards.
pub unsafe fn realloc(p: *mut u8, old_size: usize, align: usize, new_size: usize) -> *mut u8 {
    // SAFETY: by the caller.
    unsafe { block::realloc::<false>(p, old_size, align, new_size) }
}

/// Free a block without knowing its size (C's `free`). A null pointer is ignored; a
/// pointer hakmem did not hand out is reported on stderr and the process aborts.
///
/// # Safety
/// `p` is null or a live block from this allocator that the caller gives up.
#[inline]
pub unsafe fn free(p: *mut u8) {
    // SAFETY: by the caller.
    unsafe { free_or_else(p, |p, why| block::report_not_freed::<false>(p, why)) }
}

/// Free `p` without knowing its size, classifying it once (the whole of C's `free`): a
/// small block goes to the thread cache, a large one is validated and unmapped or
/// cached, null is ignored, and anything else is handed to `not_freed` with the reason
/// (a foreign pointer, or one in hakmem's memory that starts no live block).
///
/// # Safety
/// `p` is null, a live block from this allocator that the caller gives up, or a pointer
/// for `not_freed`.
#[inline(always)]
pub unsafe fn free_or_else<F: FnOnce(*mut u8, NotFreed)>(p: *mut u8, not_freed: F) {
    // SAFETY: by the caller.
    unsafe { block::free_or_else::<false, F>(p, not_freed) }
}

/// [`free_or_else`] for a pointer that [`free_cached`] did not free: the classification
/// by the chunk map and the chunk header alone, without the slab map's lookup again (the
/// slow path of a front end that takes [`free_cached`] first).
///
/// # Safety
/// As for [`free_or_else`].
#[inline(always)]
pub unsafe fn free_classified_or_else<F: FnOnce(*mut u8, NotFreed)>(p: *mut u8, not_freed: F) {
    // SAFETY: by the caller.
    unsafe { block::free_classified::<false, F>(p, not_freed) }
}

/// From now on, for the life of the process, [`free_cached`] frees nothing and
/// [`stays_in_place`], [`realloc_cached`] and [`usable_size_cached`] say no: every free
/// is classified in full, for a front end that must see each one (checked mode,
/// counting). A free that runs while this does may still take the fast path.
pub fn stop_free_cached() {
    slab_map::close();
}

/// Bytes usable in the block at `p` (0 for null or a pointer that is not a live block).
pub fn usable_size(p: *const u8) -> usize {
    block::usable_size::<false>(p)
}

/// Resize a block without knowing its size (C's `realloc`, alignment 16). `p` null
/// allocates. Null on failure, the old block untouched.
///
/// # Safety
/// `p` is null or a live block from this allocator; on success it is not used afterwards.
pub unsafe fn realloc_unsized(p: *mut u8, new_size: usize) -> *mut u8 {
    // SAFETY: by the caller.
    unsafe { block::realloc_unsized::<false>(p, new_size) }
}

/// The entry points with the checks of checked mode on (`Core<true>`, see
/// `checks.rs`) or off (`Core<false>`, the functions above): the same path,
/// configured by a constant. A block must be freed in the mode it was allocated in.
///
/// Checked mode catches, reports (pointer, kind, size class) and aborts on: a free of a
/// pointer hakmem never handed out or that starts no block (an interior pointer names its
/// slab's class), a double free, a write past the end of a small block (canary), and a
/// `dealloc` with another layout than the allocation's. Resizing always moves.
pub struct Core<const CHECKED: bool>;

/// [`Core`] with the checks on.
pub type Checked = Core<true>;

impl<const CHECKED: bool> Core<CHECKED> {
    /// As [`crate::alloc`].
    #[inline(always)]
    pub fn alloc(size: usize, align: usize) -> *mut u8 {
        block::alloc::<CHECKED>(size, align)
    }

    /// As [`crate::alloc_zeroed`].
    #[inline]
    pub fn alloc_zeroed(size: usize, align: usize) -> *mut u8 {
        block::alloc_zeroed::<CHECKED>(size, align)
    }

    /// As [`crate::dealloc`]; checked, a layout of another class is reported.
    ///
    /// # Safety
    /// As for [`crate::dealloc`], with blocks of this mode.
    #[inline(always)]
    pub unsafe fn dealloc(p: *mut u8, size: usize, align: usize) {
        // SAFETY: by the caller.
        unsafe { block::dealloc::<CHECKED>(p, size, align) }
    }

    /// As [`crate::realloc`]; checked, always moves.
    ///
    /// # Safety
    /// As for [`crate::realloc`], with blocks of this mode.
    pub unsafe fn realloc(p: *mut u8, old_size: usize, align: usize, new_size: usize) -> *mut u8 {
        // SAFETY: by the caller.
        unsafe { block::realloc::<CHECKED>(p, old_size, align, new_size) }
    }

    /// As [`crate::free`].
    ///
    /// # Safety
    /// As for [`crate::free`], with blocks of this mode.
    #[inline]
    pub unsafe fn free(p: *mut u8) {
        // SAFETY: by the caller.
        unsafe { Self::free_or_else(p, |p, why| block::report_not_freed::<CHECKED>(p, why)) }
    }

    /// As [`crate::free_or_else`].
    ///
    /// # Safety
    /// As for [`crate::free_or_else`], with blocks of this mode.
    #[inline(always)]
    pub unsafe fn free_or_else<F: FnOnce(*mut u8, NotFreed)>(p: *mut u8, not_freed: F) {
        // SAFETY: by the caller.
        unsafe { block::free_or_else::<CHECKED, F>(p, not_freed) }
    }

    /// As [`crate::usable_size`]; checked, the canary's bytes excluded.
    pub fn usable_size(p: *const u8) -> usize {
        block::usable_size::<CHECKED>(p)
    }

    /// As [`crate::realloc_unsized`]; checked, always moves.
    ///
    /// # Safety
    /// As for [`crate::realloc_unsized`], with blocks of this mode.
    pub unsafe fn realloc_unsized(p: *mut u8, new_size: usize) -> *mut u8 {
        // SAFETY: by the caller.
        unsafe { block::realloc_unsized::<CHECKED>(p, new_size) }
    }
}

/// Whether `p` lies in a chunk hakmem mapped (one load of a static bitmap; never
/// faults), or starts a block aligned to more than a chunk (whose user bytes lie past
/// its mapping's first chunk, the only one in the bitmap: a pointer that starts a chunk
/// not in it takes the chunk below's bit and header too). Every block hakmem hands out
/// does; a pointer that does not is foreign.
#[inline(always)]
pub fn in_heap(p: *const u8) -> bool {
    chunk_map::contains(p as usize) || large::over_aligned_header(p as *mut u8).is_some()
}

/// Bytes hakmem has mapped now (address space, not all of it resident): one load, for
/// front ends that watch it on every call (the C ABI's counting mode, `malloc_trim`).
#[inline]
pub fn mapped_bytes() -> usize {
    os::COUNTERS.mapped_bytes.load(sync::Ordering::Relaxed)
}

/// Set the process up now (profile from `HAKMEM_PROFILE`, thread-exit key, `fork`
/// handlers) rather than at the first slow path; idempotent. The core registers its
/// thread-exit and `fork` hooks itself here: nothing above it needs to.
pub fn init() {
    process::init();
}

/// The memory profile in force.
pub fn profile() -> Profile {
    config::profile()
}

/// A snapshot of the statistics.
pub fn stats() -> Stats {
    stats::snapshot()
}

/// Where the bytes of each size class's slabs are (live, in thread caches, in the depot,
/// on remote lists, free in the slabs, not carved yet); index `i` is class `i`. Never
/// allocates.
pub fn class_usage() -> [ClassUsage; NUM_CLASSES] {
    stats::usage()
}

/// Where hakmem's resident memory is, by what its chunks hold (superslabs, large blocks,
/// pair chunks, cached extents): a census that asks the OS which pages are resident
/// (`mincore`). Slow (a few system calls per chunk); exact while no other thread
/// allocates, safe but approximate while they do (a block moved during the walk may be
/// counted twice). Never allocates.
pub fn residency() -> Residency {
    stats::residency()
}

/// Choose the memory profile (before the first allocation, ideally).
pub fn set_profile(p: Profile) {
    process::set_profile(p);
}

/// Hooks for hakmem's own tests (fault injection, internal limits, the remote-free list
/// for the loom model): not part of the surface, and free to change.
#[doc(hidden)]
pub mod testing {
    /// The kept large blocks' protocol, for its loom model (tests/loom_kept.rs).
    #[doc(hidden)]
    pub use crate::kept::{Access, Keeper};
    pub use crate::large::max_mapping;
    pub use crate::os::inject_map_failures;
    pub use crate::remote::{Block, RemoteFreeList};

    /// The size and alignment of a slab.
    pub const SLAB_SIZE: usize = crate::size_class::SLAB_SIZE;

    /// Give back the cached large mappings over the retention budget or kept too long,
    /// as the background return or a large free would at `now` ([`now_ms`]'s clock):
    /// tests choose the time.
    pub fn expire_large(now: u64) {
        crate::large::expire(now)
    }

    /// The clock of the retention policy, in milliseconds.
    pub fn now_ms() -> u64 {
        crate::os::now_ms()
    }

    /// How many freed large mappings the profile in force may keep.
    pub fn large_cache_entries() -> usize {
        crate::config::current().large_cache_entries
    }
}
