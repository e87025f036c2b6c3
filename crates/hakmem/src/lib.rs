//! hakmem: a fast, memory-lean memory allocator for Rust programs, in pure Rust (no C
//! toolchain needed, so it builds for static musl binaries as for glibc).
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: hakmem::HakMem = hakmem::HakMem;
//! # fn main() {
//! #     let v: Vec<u64> = (0..1000).collect();
//! #     assert_eq!(v.iter().sum::<u64>(), 499_500);
//! #     assert!(hakmem::stats().allocated > 0);
//! # }
//! ```
//!
//! # Profiles
//!
//! One knob, the memory [`Profile`]: how much free memory hakmem keeps for reuse and how
//! soon it gives it back to the OS.
//!
//! - `Fast` (default): empty superslabs (hakmem's 4 MiB spans of small blocks) and freed
//!   large mappings are kept for reuse, up to the recent peak in use (at least 64 MiB),
//!   for 5 s, and given back by later allocator calls; thread caches hold up to 64 KiB
//!   per size class.
//! - `Balanced`: fast's thread caches; what is kept (at least 16 MiB) stays 1 s and a
//!   background thread gives it back while the program idles; free slabs of live
//!   superslabs give their pages back with `MADV_FREE`.
//! - `Lean`: fast's thread caches; what is kept (at least 4 MiB) stays 250 ms,
//!   with the background return; free slabs give their pages back with `MADV_DONTNEED`
//!   at once.
//!
//! The profile comes from the `HAKMEM_PROFILE` environment variable, or is fixed in code
//! with [`HakMemWith`], which wins over the variable:
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: hakmem::HakMemWith = hakmem::HakMemWith::new(hakmem::Profile::Lean);
//! # fn main() { let _ = vec![0u8; 100]; }
//! ```
//!
//! # Statistics
//!
//! [`stats()`] returns a [`Stats`] snapshot: bytes handed out, bytes mapped, the resident
//! set of the process, cached superslabs and large mappings, and how many `mmap`,
//! `munmap`, `madvise` and `mremap` calls hakmem made. [`class_usage()`] says, per size
//! class, where the bytes of its slabs are: held by the program, in thread caches, in
//! the depot that passes them between threads, on remote lists, free in the slabs, not
//! carved yet. [`residency()`] asks the OS which pages of hakmem's chunks are resident,
//! by what the chunks hold (superslabs, large blocks, pair chunks, cached extents): slower,
//! a few system calls per chunk. None of them allocates.
//!
//! ```
//! # #[global_allocator]
//! # static GLOBAL: hakmem::HakMem = hakmem::HakMem;
//! # fn main() {
//! let s = hakmem::stats();
//! println!("{} bytes in use, {} mapped, {} OS calls", s.allocated, s.mapped, s.os_calls());
//! let held: Vec<Box<[u8; 100]>> = (0..1000).map(|_| Box::new([0; 100])).collect();
//! for u in hakmem::class_usage().iter().filter(|u| u.slabs > 0) {
//!     println!(
//!         "{:>6} B blocks: {} live, {} cached, {} remote, {} free of {} in slabs",
//!         u.block_size, u.live, u.thread_caches, u.remote, u.free_in_slabs, u.slabs
//!     );
//! }
//! assert!(hakmem::class_usage().iter().any(|u| u.block_size >= 100 && u.live >= 100_000));
//! let r = hakmem::residency();
//! println!("{} of {} bytes of superslabs resident", r.superslabs.resident, r.superslabs.mapped);
//! # drop(held);
//! # }
//! ```
//!
//! # Trim
//!
//! [`trim()`] gives cached free memory back to the OS now (like glibc's `malloc_trim(0)`):
//! the calling thread's cached blocks, empty superslabs and cached large mappings. Call it
//! after a phase that freed a lot; other threads keep their caches.
//!
//! # Features
//!
//! - `checked`: every block carries a canary and a freed marker; a double free, a free of
//!   a pointer hakmem did not hand out, an interior pointer, a write past the block's end
//!   or a layout mismatch is reported on stderr and the process aborts. Slower, and 8
//!   bytes more per small block.
//! - `nightly` (nightly compiler): the thread cache lives in a `#[thread_local]` static.
//!   Without it, it lives in an initial-exec TLS slot declared in assembly, which stable
//!   Rust supports on x86-64 and AArch64 Linux (glibc and musl); other targets need this
//!   feature.
//!
//! # Environment variables
//!
//! - `HAKMEM_PROFILE`: `fast`, `balanced` or `lean`, read once at the first allocation
//!   (without allocating). An unknown value gets a one-line warning on stderr and `fast`.
//!   A profile fixed with [`HakMemWith`] wins.
//!
//! The C library (`libhakmem.so`, built from the repository's `hakmem-cabi` crate) also
//! reads `HAKMEM_STATS`, `HAKMEM_VERBOSE` and `HAKMEM_CHECK`; see the repository's README.
#![deny(unsafe_op_in_unsafe_fn)]

use core::alloc::{GlobalAlloc, Layout};

/// The core entry points `HakMem` forwards to: with the `checked` feature, the same path
/// with the checks of checked mode on.
type Entry = hakmem_core::Core<{ cfg!(feature = "checked") }>;

/// The entry points `HakMem` calls: [`Entry`]'s, with allocations counted for sampling and
/// sampled blocks sorted out on free when the `heap-profile` feature is on.
#[cfg(not(all(feature = "heap-profile", not(feature = "checked"))))]
mod front {
    use super::Entry;

    #[inline(always)]
    pub fn alloc(size: usize, align: usize) -> *mut u8 {
        Entry::alloc(size, align)
    }

    #[inline]
    pub fn alloc_zeroed(size: usize, align: usize) -> *mut u8 {
        Entry::alloc_zeroed(size, align)
    }

    /// # Safety
    /// As for [`hakmem_core::dealloc`].
    #[inline(always)]
    pub unsafe fn dealloc(p: *mut u8, size: usize, align: usize) {
        // SAFETY: by the caller.
        unsafe { Entry::dealloc(p, size, align) }
    }

    /// # Safety
    /// As for [`hakmem_core::realloc`].
    pub unsafe fn realloc(p: *mut u8, size: usize, align: usize, new_size: usize) -> *mut u8 {
        // SAFETY: by the caller.
        unsafe { Entry::realloc(p, size, align, new_size) }
    }
}

/// With the heap profiler: [`hakmem_heap_profile::should_sample`] on allocation (a
/// countdown and a branch), [`hakmem_heap_profile::free_if_sampled`] on free (a compare
/// with the end of the profiler's arena, where sampled blocks live, and a branch; the free
/// of a sampled block out of the inliner's sight). Checked mode is not profiled: its blocks
/// have their own layout.
#[cfg(all(feature = "heap-profile", not(feature = "checked")))]
mod front {
    use super::Entry;
    use hakmem_heap_profile as hp;

    #[inline(always)]
    pub fn alloc(size: usize, align: usize) -> *mut u8 {
        if hp::should_sample(size) {
            return hp::alloc_slow(size, align, false, Entry::alloc);
        }
        Entry::alloc(size, align)
    }

    #[inline]
    pub fn alloc_zeroed(size: usize, align: usize) -> *mut u8 {
        if hp::should_sample(size) {
            return hp::alloc_slow(size, align, true, Entry::alloc_zeroed);
        }
        Entry::alloc_zeroed(size, align)
    }

    /// # Safety
    /// As for [`hakmem_core::dealloc`].
    #[inline(always)]
    pub unsafe fn dealloc(p: *mut u8, size: usize, align: usize) {
        // SAFETY: by the caller, a live block it gives up.
        if unsafe { hp::free_if_sampled(p) } {
            return;
        }
        // SAFETY: by the caller.
        unsafe { Entry::dealloc(p, size, align) }
    }

    /// # Safety
    /// As for [`hakmem_core::realloc`].
    #[inline]
    pub unsafe fn realloc(p: *mut u8, size: usize, align: usize, new_size: usize) -> *mut u8 {
        let count = hp::should_sample(new_size);
        if count || hp::is_sampled(p) {
            // SAFETY: by the caller.
            return unsafe { realloc_moving(p, size, align, new_size, count) };
        }
        // SAFETY: by the caller.
        unsafe { Entry::realloc(p, size, align, new_size) }
    }

    /// Resize by moving: the new block may be sampled (when `count`), the old one may be.
    ///
    /// # Safety
    /// As for [`hakmem_core::realloc`].
    #[cold]
    unsafe fn realloc_moving(
        p: *mut u8,
        size: usize,
        align: usize,
        new_size: usize,
        count: bool,
    ) -> *mut u8 {
        let q = if count {
            hp::alloc_slow(new_size, align, false, Entry::alloc)
        } else {
            Entry::alloc(new_size, align)
        };
        if !q.is_null() {
            // SAFETY: both blocks hold the bytes copied and are distinct; `p` is the
            // caller's to give up.
            unsafe {
                core::ptr::copy_nonoverlapping(p, q, size.min(new_size));
                dealloc(p, size, align);
            }
        }
        q
    }
}

pub use hakmem_core::{ClassUsage, Profile, Residency, Resident, Stats};

/// The heap profiler (feature `heap-profile`): [`heap_profile::start`],
/// [`heap_profile::stop`], [`heap_profile::dump`], [`heap_profile::snapshot`]. See
/// docs/PROFILING.md.
///
/// ```no_run
/// # #[cfg(feature = "heap-profile")] {
/// hakmem::heap_profile::start(Default::default()).unwrap();
/// // ... work ...
/// let files = hakmem::heap_profile::dump("heap").unwrap(); // heap.pb.gz, heap.svg, ...
/// let top = hakmem::heap_profile::snapshot();
/// # }
/// ```
#[cfg(feature = "heap-profile")]
pub use hakmem_heap_profile as heap_profile;

/// The hakmem global allocator, with the profile from `HAKMEM_PROFILE` (default `fast`).
#[derive(Clone, Copy, Debug, Default)]
pub struct HakMem;

// SAFETY: every method forwards to hakmem-core, which returns blocks of at least the
// layout's size and alignment (null on failure, never unwinding) and accepts back exactly
// the `(size, align)` it was given, as `GlobalAlloc` requires.
unsafe impl GlobalAlloc for HakMem {
    #[inline(always)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        front::alloc(layout.size(), layout.align())
    }

    #[inline(always)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `GlobalAlloc` guarantees `ptr` came from us with this layout.
        unsafe { front::dealloc(ptr, layout.size(), layout.align()) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        front::alloc_zeroed(layout.size(), layout.align())
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `GlobalAlloc` guarantees `ptr` came from us with this layout.
        unsafe { front::realloc(ptr, layout.size(), layout.align(), new_size) }
    }
}

/// The hakmem global allocator with a profile fixed in code; the profile is applied on
/// the first allocation and takes precedence over `HAKMEM_PROFILE`.
#[derive(Clone, Copy, Debug)]
pub struct HakMemWith {
    profile: Profile,
}

impl HakMemWith {
    /// The allocator with `profile`, applied at its first allocation.
    pub const fn new(profile: Profile) -> Self {
        HakMemWith { profile }
    }

    #[inline(always)]
    fn ensure_applied(&self) {
        if !APPLIED.load(core::sync::atomic::Ordering::Relaxed) {
            self.apply();
        }
    }

    #[cold]
    fn apply(&self) {
        APPLIED.store(true, core::sync::atomic::Ordering::Relaxed);
        hakmem_core::set_profile(self.profile);
    }
}

static APPLIED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

// SAFETY: forwards to `HakMem`; the profile only changes policy, never the block contract.
unsafe impl GlobalAlloc for HakMemWith {
    #[inline(always)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.ensure_applied();
        // SAFETY: the caller's contract is `HakMem`'s.
        unsafe { HakMem.alloc(layout) }
    }

    #[inline(always)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { HakMem.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.ensure_applied();
        // SAFETY: as above.
        unsafe { HakMem.alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above.
        unsafe { HakMem.realloc(ptr, layout, new_size) }
    }
}

/// A snapshot of hakmem's statistics; never allocates.
pub fn stats() -> Stats {
    hakmem_core::stats()
}

/// Where the bytes of each size class's slabs are: held by the program, in thread caches,
/// in the depot (batches that thread caches of the classes over 1 KiB pass on to each
/// other), on remote lists (freed by another thread, not yet collected), free in the
/// slabs, not carved yet. Index `i` is class `i`; [`ClassUsage::block_size`] says which.
/// Other threads' caches are counted as their last refill or flush left them. Never
/// allocates.
pub fn class_usage() -> [ClassUsage; hakmem_core::NUM_CLASSES] {
    hakmem_core::class_usage()
}

/// Where hakmem's resident memory is: mapped and resident bytes of its superslabs (small
/// and medium blocks), of live large blocks, of pair chunks (two blocks of 1..2 MiB to a
/// chunk) and of freed large extents kept for reuse. A census that asks the OS which
/// pages are resident (`mincore`), a few system calls per chunk, for finding where memory
/// goes. Exact while no other thread allocates; safe while they do, but then a block
/// moved or reused during the walk may be counted twice or not at all. Never allocates.
pub fn residency() -> Residency {
    hakmem_core::residency()
}

/// Give cached free memory back to the OS now (like `malloc_trim(0)`).
pub fn trim() {
    hakmem_core::trim()
}
