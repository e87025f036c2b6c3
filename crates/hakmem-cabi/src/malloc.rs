//! The malloc family with glibc's semantics, and the internal entry points every other
//! module forwards to.
//!
//! - Every block is at least 16-byte aligned; `malloc(0)` returns a unique 16-byte block.
//! - Failure returns null with `errno = ENOMEM`; so do `calloc` and `reallocarray` when
//!   the size overflows.
//! - `free` (and `free_sized`, `free_aligned_sized`, `cfree`) leaves `errno` alone.
//! - `realloc(NULL, n)` is `malloc(n)`; `realloc(p, 0)` frees `p` and returns null, as
//!   glibc does.
//! - `malloc_usable_size(p)` is the block's size: at least the request, all of it usable,
//!   the same for the block's whole life (0 for null or a pointer hakmem did not hand out).
//! - A pointer hakmem never handed out goes to [`crate::foreign`]; a pointer inside
//!   hakmem's memory that is not a live block is reported and the process aborts.
//! - With `HAKMEM_CHECK=1` ([`crate::mode`]) every block is allocated, freed, resized and
//!   measured by [`hakmem_core::Checked`] (the same path with its checks on): double frees, interior pointers, writes past
//!   the usable size and (unlike the unchecked mode) pointers hakmem never handed out are
//!   reported and the process aborts. Every allocating entry point takes its fast path
//!   only when [`mode::plain`] says that neither checks nor counting are on; `free`
//!   needs no such test, since turning either on turns its fast path off
//!   ([`hakmem_core::stop_free_cached`]).
//! - `free` is [`hakmem_core::free_cached`], the slab map's one load and the push on the
//!   thread's cache; anything else goes to `free_missed`, and in plain mode to
//!   [`hakmem_core::free_classified_or_else`], which classifies the pointer by the chunk
//!   map and frees it. Only what that hands back (a foreign pointer, a sampled block, a
//!   misuse) is dealt with here.

use crate::{errno, foreign, mode, stats};
use core::ffi::{c_int, c_void};
use core::ptr::null_mut;
use hakmem_core::{Checked, Misuse, NotFreed, Owner};
use hakmem_heap_profile as heap_profile;

/// The alignment of every block `malloc` hands out.
pub const MIN_ALIGN: usize = hakmem_core::MIN_ALIGN;

/// The fast path alone, for the front ends other than `malloc` (`posix_memalign` & co.,
/// `operator new`): in plain mode, a block of `size` bytes aligned to `align` from the
/// thread's cache; null otherwise, or when the cache has none.
#[inline(always)]
pub fn cached(size: usize, align: usize) -> *mut c_void {
    if mode::plain_alloc() {
        return hakmem_core::alloc_cached_aligned(size, align).cast();
    }
    null_mut()
}

/// Allocate, without touching `errno` (null on failure).
#[inline(always)]
pub fn alloc_or_null(size: usize, align: usize) -> *mut c_void {
    if mode::plain() {
        return hakmem_core::alloc(size, align).cast();
    }
    alloc_not_plain(size, align, false)
}

/// Allocate when the mode is not plain: heap profiling alone (the countdown, then the
/// allocation inlined here: the common case while profiling, so not cold), or anything
/// else through [`alloc_in_mode`].
#[inline(never)]
fn alloc_not_plain(size: usize, align: usize, zeroed: bool) -> *mut c_void {
    if mode::profiled_only() {
        if heap_profile::should_sample(size) {
            return heap_profile::alloc_slow(size, align, zeroed, |size, align| {
                core_alloc(size, align, zeroed)
            })
            .cast();
        }
        return core_alloc(size, align, zeroed).cast();
    }
    alloc_in_mode(size, align, zeroed)
}

/// Allocate (zeroed if `zeroed`) in checked mode and / or counting, deciding the mode
/// first if this is the first call.
#[cold]
#[inline(never)]
fn alloc_in_mode(size: usize, align: usize, zeroed: bool) -> *mut c_void {
    let p = match (mode::checked(), zeroed) {
        (false, _) if mode::profiled() && heap_profile::should_sample(size) => {
            heap_profile::alloc_slow(size, align, zeroed, |size, align| {
                core_alloc(size, align, zeroed)
            })
        }
        (false, zeroed) => core_alloc(size, align, zeroed),
        (true, false) => Checked::alloc(size, align),
        (true, true) => Checked::alloc_zeroed(size, align),
    };
    if !p.is_null() {
        stats::on_alloc(p);
    }
    p.cast()
}

#[inline(always)]
fn core_alloc(size: usize, align: usize, zeroed: bool) -> *mut u8 {
    if zeroed {
        hakmem_core::alloc_zeroed(size, align)
    } else {
        hakmem_core::alloc(size, align)
    }
}

/// Allocate; on failure set `errno = ENOMEM` and return null.
#[inline(always)]
pub fn alloc(size: usize, align: usize) -> *mut c_void {
    let p = alloc_or_null(size, align);
    if p.is_null() {
        return out_of_memory();
    }
    p
}

/// Set `errno = ENOMEM`, return null.
#[cold]
pub fn out_of_memory() -> *mut c_void {
    errno::set(libc::ENOMEM);
    null_mut()
}

/// `calloc`: `n * size` zeroed bytes, `ENOMEM` when the product overflows.
#[inline]
pub fn alloc_array_zeroed(n: usize, size: usize) -> *mut c_void {
    let Some(total) = n.checked_mul(size) else {
        return out_of_memory();
    };
    let p = if mode::plain() {
        hakmem_core::alloc_zeroed(total, MIN_ALIGN).cast()
    } else {
        alloc_not_plain(total, MIN_ALIGN, true)
    };
    if p.is_null() {
        return out_of_memory();
    }
    p
}

/// `free`: null ignored, `errno` preserved.
///
/// # Safety
/// `p` is null, a live block from hakmem that the caller gives up, or a pointer hakmem
/// never handed out (see [`crate::foreign`]).
#[inline(always)]
pub unsafe fn free_block(p: *mut c_void) {
    let p = p.cast::<u8>();
    // The fast path, in plain mode only: checks and counting close it before they start
    // (`mode::decide`, `mode::count`), so no checked block reaches it.
    // SAFETY: by the caller, `p` is a live block or a pointer the slow path deals with.
    if unsafe { hakmem_core::free_cached(p) } {
        return;
    }
    // SAFETY: by the caller.
    unsafe { free_missed(p) }
}

/// [`free_block`] for what its fast path left: in plain mode the full classification
/// (large blocks, null, foreign pointers, misuse); with checks or counting on (or the
/// mode undecided) every pointer, counted, and freed by [`Checked`] in checked mode.
///
/// # Safety
/// As for [`free_block`].
#[cold]
#[inline(never)]
unsafe fn free_missed(p: *mut u8) {
    if mode::plain_free() {
        // No checks, no statistics. hakmem-core keeps `errno` on every path of its free
        // that may make a system call.
        // SAFETY: by the caller; what is no live block comes back to `not_freed`.
        return unsafe { hakmem_core::free_classified_or_else(p, not_freed) };
    }
    if p.is_null() {
        return;
    }
    let _errno = errno::Preserve::new();
    stats::on_free(p);
    if mode::checked() {
        // SAFETY: by the caller; misuse, foreign pointers included, is reported.
        return unsafe { Checked::free(p) };
    }
    // SAFETY: by the caller.
    unsafe { hakmem_core::free_classified_or_else(p, not_freed) }
}

/// What `free` does with a pointer hakmem-core did not free: a sampled block goes to the
/// heap profiler (its arena lies outside hakmem's chunks), a foreign one to its own
/// allocator, anything else is reported.
#[cold]
#[inline(never)]
fn not_freed(p: *mut u8, why: NotFreed) {
    let _errno = errno::Preserve::new();
    match why {
        NotFreed::Foreign if heap_profile::is_sampled(p) => {
            // SAFETY: a live sampled block (it lies in the profiler's arena, which checks
            // it), which the caller of `free` gives up.
            unsafe { heap_profile::free_sampled(p) }
        }
        NotFreed::Foreign => foreign::free(p),
        NotFreed::Invalid => hakmem_core::report_misuse(p, Misuse::InvalidFree, None),
    }
}

/// `free` for a block whose request `(size, align)` the caller states (C++ sized
/// `delete`, C23's `free_sized`).
///
/// Plain, this is [`free_block`]'s fast path: the slab map's one load finds the class as
/// surely as the size would, after the check that keeps foreign pointers out that the
/// size could not spare (C++ new + sized delete of 32 bytes, callgrind: 59 instructions
/// with the loop, against 67 by the stated class, when this was chosen; 55 at `235f868`,
/// docs/ARCHITECTURE.md). Checked mode checks the stated size
/// against the block; debug builds do in plain mode too.
///
/// # Safety
/// As for [`free_block`]; a hakmem block was allocated with this `size` and `align`.
#[inline(always)]
pub unsafe fn free_sized_block(p: *mut c_void, size: usize, align: usize) {
    #[cfg(debug_assertions)]
    if mode::plain_free() && hakmem_core::in_heap(p.cast()) {
        check_stated_size(p.cast(), size, align);
    }
    // As in `free_block`.
    // SAFETY: by the caller, `p` is a live block or a pointer the slow path deals with.
    if unsafe { hakmem_core::free_cached(p.cast()) } {
        return;
    }
    // SAFETY: by the caller.
    unsafe { free_sized_missed(p, size, align) }
}

/// [`free_sized_block`] for what its fast path left, as [`free_missed`]; with checks on,
/// the stated size is checked against the block.
///
/// # Safety
/// As for [`free_sized_block`].
#[cold]
#[inline(never)]
unsafe fn free_sized_missed(p: *mut c_void, size: usize, align: usize) {
    if mode::plain_free() {
        // SAFETY: by the caller; what is no live block comes back to `not_freed`.
        return unsafe { hakmem_core::free_classified_or_else(p.cast(), not_freed) };
    }
    if p.is_null() {
        return;
    }
    let p = p.cast::<u8>();
    // One load of a static bitmap keeps foreign pointers (a program's own `operator new`
    // that did not replace sized `delete`, say) out of hakmem's lists.
    if !hakmem_core::in_heap(p) {
        // SAFETY: by the caller.
        return unsafe { free_not_in_chunk(p) };
    }
    let _errno = errno::Preserve::new();
    stats::on_free(p);
    if mode::checked() {
        // SAFETY: by the caller; misuse, a stated size included, is reported.
        return unsafe { Checked::dealloc(p, size, align) };
    }
    #[cfg(debug_assertions)]
    check_stated_size(p, size, align);
    // SAFETY: by the caller, a hakmem block allocated with `(size, align)`.
    unsafe { hakmem_core::dealloc(p, size, align) }
}

/// [`free_sized_block`] of a block outside hakmem's chunks: a sampled block (in the heap
/// profiler's arena) or a foreign one.
///
/// # Safety
/// As for [`free_sized_block`].
#[cold]
#[inline(never)]
unsafe fn free_not_in_chunk(p: *mut u8) {
    if heap_profile::is_sampled(p) {
        let _errno = errno::Preserve::new();
        stats::on_free(p);
        // SAFETY: by the caller, a live block; in the arena, so a sampled one.
        return unsafe { heap_profile::free_sampled(p) };
    }
    foreign::free(p)
}

/// Debug builds: abort when a stated size does not match the block's class.
#[cfg(debug_assertions)]
fn check_stated_size(p: *mut u8, size: usize, align: usize) {
    let ok = match hakmem_core::owner(p) {
        Owner::Small { class, .. } => hakmem_core::class_for(size, align) == Some(class),
        Owner::Large { .. } => hakmem_core::class_for(size, align).is_none(),
        _ => false,
    };
    if !ok {
        hakmem_core::write_stderr(
            b"hakmem: sized delete with a size or alignment the block was not allocated with\n",
        );
        hakmem_core::report_misuse(p, Misuse::InvalidFree, None);
    }
}

/// `realloc` with glibc's semantics (see the module docs).
///
/// # Safety
/// `p` is null, a live block from hakmem, or a pointer hakmem never handed out; on
/// success (or when `new_size` is 0) the caller no longer uses `p`.
pub unsafe fn realloc_block(p: *mut c_void, new_size: usize) -> *mut c_void {
    if p.is_null() {
        return alloc(new_size, MIN_ALIGN);
    }
    if new_size == 0 {
        // SAFETY: by the caller.
        unsafe { free_block(p) };
        return null_mut();
    }
    let p = p.cast::<u8>();
    if mode::plain_alloc() {
        // Nothing to count, check or sample: a small block the slab map knows stays or
        // moves without being classified again.
        // SAFETY: by the caller.
        if let Some(q) = unsafe { hakmem_core::realloc_cached(p, new_size) } {
            return if q.is_null() {
                out_of_memory()
            } else {
                q.cast()
            };
        }
    }
    let checked = mode::checked();
    let sampled = heap_profile::is_sampled(p);
    if sampled || (mode::profiled() && !checked && heap_profile::should_sample(new_size)) {
        // SAFETY: by the caller.
        return unsafe { realloc_moving(p, new_size, sampled) };
    }
    match hakmem_core::owner(p) {
        Owner::Foreign if checked => hakmem_core::report_misuse(p, Misuse::ForeignRealloc, None),
        Owner::Foreign => {
            let q = alloc(new_size, MIN_ALIGN);
            // SAFETY: `p` is the caller's and readable, by the caller; `q` is null or
            // holds `new_size` bytes.
            unsafe { foreign::realloc_into(p, new_size, q) }
        }
        Owner::Invalid if !checked => hakmem_core::report_misuse(p, Misuse::InvalidFree, None),
        // A block, or in checked mode anything for `checked` to report.
        _ => {
            stats::on_free(p);
            // SAFETY: a live hakmem block, by the caller (checked mode inspects it).
            let q = unsafe {
                if checked {
                    Checked::realloc_unsized(p, new_size)
                } else {
                    hakmem_core::realloc_unsized(p, new_size)
                }
            };
            if q.is_null() {
                stats::on_alloc(p); // still the caller's
                return out_of_memory();
            }
            stats::on_alloc(q);
            q.cast()
        }
    }
}

/// `realloc` by moving, when the old block is sampled or the new one may be.
///
/// # Safety
/// As for [`realloc_block`], `p` not null and `new_size` not 0; `sampled` says whether
/// `p` is a sampled block.
#[cold]
#[inline(never)]
unsafe fn realloc_moving(p: *mut u8, new_size: usize, sampled: bool) -> *mut c_void {
    let old = if sampled {
        // SAFETY: a live sampled block.
        unsafe { heap_profile::usable_size_sampled(p) }
    } else {
        match hakmem_core::owner(p) {
            Owner::Small { usable, .. } | Owner::Large { usable } => usable,
            Owner::Foreign => {
                let q = alloc(new_size, MIN_ALIGN);
                // SAFETY: `p` is the caller's and readable, by the caller; `q` is null or
                // holds `new_size` bytes.
                return unsafe { foreign::realloc_into(p, new_size, q) };
            }
            Owner::Invalid => hakmem_core::report_misuse(p, Misuse::InvalidFree, None),
        }
    };
    let q = if mode::profiled() {
        heap_profile::alloc_slow(new_size, MIN_ALIGN, false, |size, align| {
            core_alloc(size, align, false)
        })
    } else {
        hakmem_core::alloc(new_size, MIN_ALIGN)
    };
    if q.is_null() {
        return out_of_memory();
    }
    stats::on_alloc(q);
    // SAFETY: both blocks hold the bytes copied and are distinct; the old one is the
    // caller's to give up.
    unsafe {
        core::ptr::copy_nonoverlapping(p, q, old.min(new_size));
        free_block(p.cast());
    }
    q.cast()
}

/// `reallocarray`: `realloc(p, n * size)`, `ENOMEM` (and `p` untouched) on overflow.
///
/// # Safety
/// As for [`realloc_block`].
pub unsafe fn realloc_array(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        // SAFETY: by the caller.
        Some(total) => unsafe { realloc_block(p, total) },
        None => out_of_memory(),
    }
}

/// Usable bytes of the block at `p`; 0 for null and for pointers that are not blocks.
#[inline(always)]
pub fn usable_size(p: *const c_void) -> usize {
    // Closed (`None` for every pointer) once checks or counting are on.
    match hakmem_core::usable_size_cached(p.cast()) {
        Some(n) => n,
        None => usable_size_missed(p),
    }
}

/// [`usable_size`] of what the slab map did not know: null, large blocks, sampled blocks,
/// pointers that are not blocks, and every block once checks or counting are on (both
/// close the slab map).
#[cold]
#[inline(never)]
fn usable_size_missed(p: *const c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    if mode::checked() {
        // The canary's bytes are not the program's.
        return Checked::usable_size(p.cast());
    }
    if heap_profile::is_sampled(p.cast()) {
        // SAFETY: a block in the profiler's arena: a sampled one, live by the caller.
        return unsafe { heap_profile::usable_size_sampled(p as *mut u8) };
    }
    hakmem_core::usable_size(p.cast())
}

/// Give cached free memory back to the OS; whether any mapping shrank.
pub fn trim() -> bool {
    let before = hakmem_core::mapped_bytes();
    hakmem_core::trim();
    hakmem_core::mapped_bytes() < before
}

/// `malloc(size)`.
#[no_mangle]
pub extern "C" fn malloc(size: usize) -> *mut c_void {
    // The fast path pops the thread cache; everything else (a miss, a block over the class
    // table's reach, heap profiling, checked mode, counting, errno) is one tail call. One
    // compare tells both the mode and the table's reach ([`mode::table_below`]).
    if mode::table_below(size) {
        // SAFETY: the bound is at most `TABLE_MAX + 1` (its invariant).
        return cached_or_else(unsafe { hakmem_core::alloc_cached_table(size) }, size);
    }
    malloc_beyond_table(size)
}

/// `p`, a block from the thread cache, or, where the cache had none (`p` null), the
/// rest of `malloc` for `size` bytes as a tail call.
#[inline(always)]
fn cached_or_else(p: *mut u8, size: usize) -> *mut c_void {
    if !p.is_null() {
        return p.cast();
    }
    malloc_counted_down(size)
}

/// `malloc` of what [`malloc`]'s compare let by: in plain mode, a request over the class
/// table's reach (inlined: it pays the bound's compare and the mode byte's test, as it
/// paid the byte's test and the table's compare before the bound took both), else any.
#[inline(always)]
fn malloc_beyond_table(size: usize) -> *mut c_void {
    if mode::plain_alloc() {
        return cached_or_else(hakmem_core::alloc_cached_wide(size), size);
    }
    malloc_not_plain(size)
}

/// `malloc` when the mode is not plain: while heap profiling is the only thing on, the
/// profiler's countdown and then the fast path (the common case while profiling, so
/// not cold); anything else through [`malloc_slow`].
#[inline(never)]
fn malloc_not_plain(size: usize) -> *mut c_void {
    if mode::profiled_only() {
        if heap_profile::should_sample(size) {
            return malloc_sampled(size);
        }
        return cached_or_else(hakmem_core::alloc_cached(size), size);
    }
    malloc_slow(size)
}

/// `malloc` when the countdown ran out on its fast path: a sampled block if profiling is
/// on, else (and if the arena has no room) a plain one.
#[cold]
#[inline(never)]
fn malloc_sampled(size: usize) -> *mut c_void {
    or_enomem(heap_profile::alloc_slow(
        size,
        MIN_ALIGN,
        false,
        |size, align| core_alloc(size, align, false),
    ))
}

/// `malloc` after its fast path missed the thread cache (having taken the profiler's
/// countdown if it is on, so not again).
#[cold]
#[inline(never)]
fn malloc_counted_down(size: usize) -> *mut c_void {
    or_enomem(hakmem_core::alloc(size, MIN_ALIGN))
}

/// `p`, or null with `errno = ENOMEM` when `p` is null.
#[inline(always)]
fn or_enomem(p: *mut u8) -> *mut c_void {
    if p.is_null() {
        return out_of_memory();
    }
    p.cast()
}

#[cold]
#[inline(never)]
fn malloc_slow(size: usize) -> *mut c_void {
    alloc(size, MIN_ALIGN)
}

/// `free(p)`.
///
/// # Safety
/// `p` is null or was returned by this library's allocation functions and not freed.
#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    // SAFETY: by the caller.
    unsafe { free_block(p) }
}

/// `calloc(n, size)`.
#[no_mangle]
pub extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    // As `malloc`: the thread cache's block zeroed, or the rest as a tail call. A product
    // that overflows takes the tail too, which answers it.
    if let Some(total) = n.checked_mul(size) {
        if mode::table_below(total) {
            // SAFETY: the bound is at most `TABLE_MAX + 1` (its invariant).
            let p = unsafe { hakmem_core::alloc_cached_table_zeroed(total) };
            if !p.is_null() {
                return p.cast();
            }
        }
    }
    calloc_missed(n, size)
}

/// `calloc` past its fast path: a miss of the thread cache, a product over the class
/// table's reach or over `usize`, or a mode that is not plain.
#[cold]
#[inline(never)]
fn calloc_missed(n: usize, size: usize) -> *mut c_void {
    alloc_array_zeroed(n, size)
}

/// `realloc(p, size)`.
///
/// # Safety
/// As for [`free`]; the old pointer is not used after a successful call.
#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: by the caller.
    unsafe { realloc_block(p, size) }
}

/// `reallocarray(p, n, size)`.
///
/// # Safety
/// As for [`realloc`].
#[no_mangle]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    // SAFETY: by the caller.
    unsafe { realloc_array(p, n, size) }
}

/// `malloc_usable_size(p)`.
#[no_mangle]
pub extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    usable_size(p)
}

/// `cfree(p)`: the old name of `free`.
///
/// # Safety
/// As for [`free`].
#[no_mangle]
pub unsafe extern "C" fn cfree(p: *mut c_void) {
    // SAFETY: by the caller.
    unsafe { free_block(p) }
}

/// C23 `free_sized(p, size)`. The size is not needed: one lookup finds the block's class,
/// and trusting it would turn a wrong size (undefined in C23) into heap corruption.
///
/// # Safety
/// As for [`free`].
#[no_mangle]
pub unsafe extern "C" fn free_sized(p: *mut c_void, _size: usize) {
    // SAFETY: by the caller.
    unsafe { free_block(p) }
}

/// C23 `free_aligned_sized(p, alignment, size)`, as [`free_sized`].
///
/// # Safety
/// As for [`free`].
#[no_mangle]
pub unsafe extern "C" fn free_aligned_sized(p: *mut c_void, _alignment: usize, _size: usize) {
    // SAFETY: by the caller.
    unsafe { free_block(p) }
}

/// `malloc_trim(pad)`: give cached free memory back now (the calling thread's cache,
/// empty superslabs, cached large mappings). Returns 1 if memory was released.
#[no_mangle]
pub extern "C" fn malloc_trim(_pad: usize) -> c_int {
    trim() as c_int
}
