//! hakmem-core: the allocator, without `std`.
//!
//! Layers, each using only the ones above it:
//!
//! 1. [`os`]: `mmap` / `munmap` / `madvise` / `mremap`, counted; [`sync`]: atomics, spin lock.
//! 2. [`chunk_map`]: which 4 MiB chunks are ours. [`size_class`]: sizes to classes.
//! 3. [`superslab`] and [`remote`]: 4 MiB superslabs carved into slabs; lock-free remote
//!    frees. [`large`]: one mapping per large block.
//! 4. [`pool`]: superslabs nobody owns (empty cache, abandoned).
//! 5. [`heap`]: a thread's slabs and superslabs; batch refill and flush.
//! 6. [`thread_cache`] (in [`tls`]): per-class free stacks, the fast path.
//! 7. This module: the entry points, `alloc` / `dealloc` / `realloc` / `free` / ...;
//!    [`process`]: one-time set-up, thread exit, fork.
//!
//! See docs/ARCHITECTURE.md for the path of an allocation and of a free.
#![cfg_attr(not(test), no_std)]
#![cfg_attr(feature = "nightly", feature(thread_local))]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod checked;
pub mod chunk_map;
pub mod config;
pub mod heap;
pub mod large;
mod misuse;
pub mod os;
pub mod pool;
pub mod process;
pub mod remote;
pub mod retain;
pub mod size_class;
pub mod stats;
pub mod superslab;
pub mod sync;
pub mod thread_cache;
pub mod tls;

pub use config::Profile;
pub use misuse::{report_misuse, Misuse};
pub use stats::Stats;

use process::Hooks;
use size_class::{block_size, class_for, Class, MIN_ALIGN};
use chunk_map::{ChunkHeader, MAP_LARGE};

/// Allocate `size` bytes aligned to `align` (a power of two). Null when memory is
/// exhausted or the request cannot be met (alignment over [`large::MAX_ALIGN`], size near
/// `isize::MAX`).
#[inline(always)]
pub fn alloc(size: usize, align: usize) -> *mut u8 {
    match class_for(size, align) {
        // SAFETY: `class_for` returns classes in range.
        Some(c) => unsafe { thread_cache::alloc::<Hooks>(c) },
        None => alloc_large(size, align).0,
    }
}

/// The fast path alone, for a front end that wants its own slow path as a tail call (C's
/// `malloc`): a block of at least `size` bytes, 16-byte aligned, from the thread's cache;
/// null when the cache has none or the request is not small. [`alloc`] then does the rest.
#[inline(always)]
pub fn alloc_cached(size: usize) -> *mut u8 {
    match size_class::class_of_size(size) {
        // SAFETY: `class_of_size` returns classes in range.
        Some(c) => unsafe { thread_cache::pop(c) },
        None => core::ptr::null_mut(),
    }
}

/// As [`alloc`], with the bytes zeroed. Fresh large mappings are not cleared again.
#[inline]
pub fn alloc_zeroed(size: usize, align: usize) -> *mut u8 {
    match class_for(size, align) {
        Some(c) => {
            // SAFETY: `class_for` returns classes in range.
            let p = unsafe { thread_cache::alloc::<Hooks>(c) };
            if !p.is_null() {
                // SAFETY: the block holds at least `size` bytes.
                unsafe { core::ptr::write_bytes(p, 0, size) };
            }
            p
        }
        None => {
            let (p, zeroed) = alloc_large(size, align);
            if !p.is_null() && !zeroed {
                // SAFETY: the block holds at least `size` bytes.
                unsafe { core::ptr::write_bytes(p, 0, size) };
            }
            p
        }
    }
}

/// Free a block whose request `(size, align)` the caller still knows (Rust's `dealloc`):
/// the class comes from the size, with no lookup.
///
/// # Safety
/// `p` came from [`alloc`] / [`alloc_zeroed`] / [`realloc`] with this `size` and `align`
/// and is not used afterwards.
#[inline(always)]
pub unsafe fn dealloc(p: *mut u8, size: usize, align: usize) {
    match class_for(size, align) {
        // SAFETY: by the caller, `p` is a block of class `c`.
        Some(c) => unsafe { thread_cache::free::<Hooks>(p, c) },
        // SAFETY: by the caller, `p` is a large block.
        None => unsafe { free_large(p) },
    }
}

#[cold]
unsafe fn free_large(p: *mut u8) {
    // SAFETY: by the caller, a live large block.
    match unsafe { large::header_of(p) } {
        // SAFETY: the header is the block's.
        Some(h) => unsafe { large::free(h) },
        None => report_misuse(p, Misuse::InvalidFree, None),
    }
    pool::expire();
}

/// Resize a block whose request `(old_size, align)` the caller knows. The block stays in
/// place when the new size falls in the same class, and large blocks grow with `mremap`.
/// Null on failure, the old block untouched.
///
/// # Safety
/// As for [`dealloc`]; on success the old pointer is not used afterwards.
pub unsafe fn realloc(p: *mut u8, old_size: usize, align: usize, new_size: usize) -> *mut u8 {
    let old = class_for(old_size, align);
    let new = class_for(new_size, align);
    match (old, new) {
        (Some(a), Some(b)) if a == b => p,
        (None, None) => {
            // SAFETY: by the caller, a live large block.
            match unsafe { large::header_of(p) } {
                // Only move in place when the alignment is the block's own.
                // SAFETY: the header is the block's.
                Some(h) if h.offset() == large_offset(align) => unsafe {
                    match large::realloc(h, new_size) {
                        // `mremap` cannot move the mapping (a reused extent may span
                        // several kernel mappings): copy instead.
                        q if q.is_null() => move_block(p, old_size, align, new_size),
                        q => q,
                    }
                },
                // SAFETY: by the caller.
                _ => unsafe { move_block(p, old_size, align, new_size) },
            }
        }
        // SAFETY: by the caller.
        _ => unsafe { move_block(p, old_size, align, new_size) },
    }
}

fn large_offset(align: usize) -> usize {
    align.max(128)
}

/// Allocate anew, copy, free the old block.
///
/// # Safety
/// As for [`realloc`].
unsafe fn move_block(p: *mut u8, old_size: usize, align: usize, new_size: usize) -> *mut u8 {
    let q = alloc(new_size, align);
    if !q.is_null() {
        // SAFETY: both blocks hold at least the bytes copied and do not overlap.
        unsafe {
            core::ptr::copy_nonoverlapping(p, q, old_size.min(new_size));
            dealloc(p, old_size, align);
        }
    }
    q
}

/// What a pointer is, to hakmem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// A block of a size class (`usable` bytes).
    Small { class: Class, usable: usize },
    /// A large mapping (`usable` bytes).
    Large { usable: usize },
    /// Not a pointer hakmem handed out: outside every chunk hakmem mapped.
    Foreign,
    /// Inside hakmem's memory but not the start of a live block.
    Invalid,
}

/// The class of `p` if it is a live small block's start, with one bitmap load, one
/// header load and a multiply (the fast path of C's `free`); `None` for anything else,
/// which [`owner`] then sorts out.
#[inline(always)]
pub fn small_class_of(p: *const u8) -> Option<Class> {
    let addr = p as usize;
    if !chunk_map::contains(addr) {
        return None;
    }
    // SAFETY: the chunk map says a header is mapped at the chunk base.
    let e = unsafe { (*ChunkHeader::of(addr)).entry(addr) };
    size_class::is_block_start(addr, e).then_some(e as Class)
}

/// Classify `p`; never faults for any `p`.
pub fn owner(p: *const u8) -> Owner {
    if let Some(class) = small_class_of(p) {
        return Owner::Small {
            class,
            usable: block_size(class),
        };
    }
    let addr = p as usize;
    if !chunk_map::contains(addr) {
        return Owner::Foreign;
    }
    // SAFETY: the chunk map says a header is mapped at the chunk base.
    match unsafe { (*ChunkHeader::of(addr)).entry(addr) } {
        // SAFETY: a large header is mapped at the chunk base.
        MAP_LARGE => match unsafe { large::header_of(p as *mut u8) } {
            Some(h) => Owner::Large { usable: h.usable() },
            None => Owner::Invalid,
        },
        // Free or header slabs, an interior pointer of a small block, a stray marker.
        _ => Owner::Invalid,
    }
}

/// Free a block without knowing its size (C's `free`). A null pointer is ignored; a
/// pointer hakmem did not hand out is reported on stderr and the process aborts.
///
/// # Safety
/// `p` is null or a live block from this allocator that the caller gives up.
#[inline]
pub unsafe fn free(p: *mut u8) {
    match small_class_of(p) {
        // SAFETY: a live block of class `c`, by the caller.
        Some(c) => unsafe { thread_cache::free::<Hooks>(p, c) },
        // SAFETY: by the caller.
        None => unsafe { free_not_small(p) },
    }
}

/// [`free`] of anything but a small block.
///
/// # Safety
/// As for [`free`].
#[cold]
unsafe fn free_not_small(p: *mut u8) {
    match owner(p) {
        _ if p.is_null() => {}
        // SAFETY: `owner` validated the header.
        Owner::Large { .. } => unsafe { free_large(p) },
        Owner::Foreign => report_misuse(p, Misuse::ForeignFree, None),
        _ => report_misuse(p, Misuse::InvalidFree, None),
    }
}

/// Bytes usable in the block at `p` (0 for null or a pointer that is not a live block).
pub fn usable_size(p: *const u8) -> usize {
    match owner(p) {
        Owner::Small { usable, .. } | Owner::Large { usable } => usable,
        _ => 0,
    }
}

/// Resize a block without knowing its size (C's `realloc`, alignment 16). `p` null
/// allocates. Null on failure, the old block untouched.
///
/// # Safety
/// `p` is null or a live block from this allocator; on success it is not used afterwards.
pub unsafe fn realloc_unsized(p: *mut u8, new_size: usize) -> *mut u8 {
    if p.is_null() {
        return alloc(new_size, MIN_ALIGN);
    }
    match owner(p) {
        Owner::Small { class, usable } => {
            if class_for(new_size, MIN_ALIGN) == Some(class) {
                return p;
            }
            let q = alloc(new_size, MIN_ALIGN);
            if !q.is_null() {
                // SAFETY: both blocks hold the bytes copied; `p` is the caller's.
                unsafe {
                    core::ptr::copy_nonoverlapping(p, q, usable.min(new_size));
                    thread_cache::free::<Hooks>(p, class);
                }
            }
            q
        }
        Owner::Large { usable } => {
            // SAFETY: `owner` validated the header.
            let h = unsafe { large::header_of(p) }.expect("validated");
            if class_for(new_size, MIN_ALIGN).is_none() {
                // SAFETY: the header is the block's.
                let q = unsafe { large::realloc(h, new_size) };
                if !q.is_null() {
                    return q;
                }
                // `mremap` cannot move the mapping: copy below instead.
            }
            let q = alloc(new_size, MIN_ALIGN);
            if !q.is_null() {
                // SAFETY: both blocks hold the bytes copied.
                unsafe {
                    core::ptr::copy_nonoverlapping(p, q, usable.min(new_size));
                    large::free(h);
                }
            }
            q
        }
        Owner::Foreign => report_misuse(p, Misuse::ForeignRealloc, None),
        Owner::Invalid => report_misuse(p, Misuse::InvalidFree, None),
    }
}

/// Give cached free memory back to the OS now: the calling thread's cached blocks, empty
/// superslabs in the pool, cached large mappings. Other threads keep their caches.
pub fn trim() {
    thread_cache::trim::<Hooks>();
}

/// A large block, after giving cached memory back to the OS once if the OS refused.
#[cold]
fn alloc_large(size: usize, align: usize) -> (*mut u8, bool) {
    let got = large::alloc(size, align);
    if !got.0.is_null() {
        return got;
    }
    thread_cache::trim::<Hooks>();
    large::alloc(size, align)
}

/// A snapshot of the statistics.
pub fn stats() -> Stats {
    stats::snapshot()
}

/// Choose the memory profile (before the first allocation, ideally).
pub fn set_profile(p: Profile) {
    process::set_profile(p);
}
