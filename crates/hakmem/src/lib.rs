//! hakmem: a fast, memory-lean memory allocator.
//!
//! ```no_run
//! #[global_allocator]
//! static GLOBAL: hakmem::HakMem = hakmem::HakMem;
//! # fn main() {}
//! ```
//!
//! To choose the memory profile in code rather than with `HAKMEM_PROFILE`, use
//! [`HakMemWith`]: `static GLOBAL: hakmem::HakMemWith = hakmem::HakMemWith::new(hakmem::Profile::Lean);`
#![deny(unsafe_op_in_unsafe_fn)]

use core::alloc::{GlobalAlloc, Layout};

/// The core entry points `HakMem` forwards to: checked ones with the `checked` feature.
#[cfg(not(feature = "checked"))]
mod entry {
    pub use hakmem_core::{alloc, alloc_zeroed, dealloc, realloc};
}
#[cfg(feature = "checked")]
mod entry {
    pub use hakmem_core::checked::{alloc, alloc_zeroed, dealloc, realloc};
}

pub use hakmem_core::{Profile, Stats};

/// The hakmem global allocator, with the profile from `HAKMEM_PROFILE` (default `fast`).
#[derive(Clone, Copy, Debug, Default)]
pub struct HakMem;

// SAFETY: every method forwards to hakmem-core, which returns blocks of at least the
// layout's size and alignment (null on failure, never unwinding) and accepts back exactly
// the `(size, align)` it was given, as `GlobalAlloc` requires.
unsafe impl GlobalAlloc for HakMem {
    #[inline(always)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        entry::alloc(layout.size(), layout.align())
    }

    #[inline(always)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `GlobalAlloc` guarantees `ptr` came from us with this layout.
        unsafe { entry::dealloc(ptr, layout.size(), layout.align()) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        entry::alloc_zeroed(layout.size(), layout.align())
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `GlobalAlloc` guarantees `ptr` came from us with this layout.
        unsafe { entry::realloc(ptr, layout.size(), layout.align(), new_size) }
    }
}

/// The hakmem global allocator with a profile fixed in code; the profile is applied on
/// the first allocation and takes precedence over `HAKMEM_PROFILE`.
#[derive(Clone, Copy, Debug)]
pub struct HakMemWith {
    profile: Profile,
}

impl HakMemWith {
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

/// Give cached free memory back to the OS now (like `malloc_trim(0)`).
pub fn trim() {
    hakmem_core::trim()
}
