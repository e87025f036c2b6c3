//! The platform layer under Miri and loom (`cfg(miri)` or `cfg(loom)`): no system call,
//! so that the interpreter and the model checker run the real allocator code above it.
//! Each function keeps the contract written on its counterpart in [`crate::os`].
//!
//! - Mappings are allocations of std's system allocator (Miri's own memory, so Miri checks
//!   every access to them), aligned as asked and zeroed. The kernel can unmap part of a
//!   mapping and the allocator cannot free part of an allocation, so a table of regions
//!   counts the bytes of each allocation still mapped and frees it when none are left.
//! - `decommit` with [`Decommit::Now`] zeroes the range (the pages read back as zero);
//!   [`Decommit::Lazy`] keeps it.
//! - Resizing grows nothing in place and moves only a range that is one whole region,
//!   as `mremap` moves only one kernel mapping.
//! - Thread-exit keys: a `thread_local!` whose destructor calls the key's function;
//!   `fork` hooks are never called (no `fork` here); the environment is empty; no
//!   background thread is started; errno is a thread-local cell.

extern crate std;

use super::{Decommit, COUNTERS};
use core::sync::atomic::Ordering::Relaxed;
use std::sync::{Mutex, MutexGuard};

/// `os` lies below `sync` (whose spin lock yields through `os`), so the model locks with
/// std's mutex. No loom operation happens while one is held, so loom never switches
/// threads inside it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
use core::cell::Cell;
use core::ffi::c_void;
use core::ptr::null_mut;
use std::alloc::{GlobalAlloc, Layout, System};

/// An allocation standing for a mapping: `[base, base + size)`, of which `mapped` bytes
/// are not unmapped yet.
#[derive(Clone, Copy)]
struct Region {
    base: usize,
    size: usize,
    align: usize,
    mapped: usize,
}

const REGIONS: usize = 512;

static TABLE: Mutex<[Region; REGIONS]> = Mutex::new(
    [Region {
        base: 0,
        size: 0,
        align: 0,
        mapped: 0,
    }; REGIONS],
);

fn record(r: Region) -> bool {
    let mut t = lock(&TABLE);
    match t.iter_mut().find(|e| e.size == 0) {
        Some(slot) => {
            *slot = r;
            true
        }
        None => false,
    }
}

/// See [`super::map_aligned`].
pub fn map_aligned(size: usize, _span: usize, align: usize) -> *mut u8 {
    let Ok(layout) = Layout::from_size_align(size, align) else {
        return null_mut();
    };
    COUNTERS.mmap.fetch_add(1, Relaxed);
    // SAFETY: `size` is not zero (callers map whole pages).
    let p = unsafe { System.alloc_zeroed(layout) };
    if p.is_null() {
        return null_mut();
    }
    let r = Region {
        base: p as usize,
        size,
        align,
        mapped: size,
    };
    if !record(r) {
        // SAFETY: just allocated with this layout.
        unsafe { System.dealloc(p, layout) };
        return null_mut();
    }
    COUNTERS.mapped_bytes.fetch_add(size, Relaxed);
    p
}

/// See [`super::reserve_readonly`]: never, here (a reservation of gigabytes does not fit
/// an interpreter).
pub fn reserve_readonly(_size: usize) -> *mut u8 {
    null_mut()
}

/// See [`super::make_writable`]; unreachable, as nothing is reserved.
///
/// # Safety
/// As there.
pub unsafe fn make_writable(_ptr: *mut u8, _size: usize) -> bool {
    false
}

/// See [`super::unmap`].
///
/// # Safety
/// As there.
pub unsafe fn unmap(ptr: *mut u8, size: usize) {
    COUNTERS.munmap.fetch_add(1, Relaxed);
    COUNTERS.mapped_bytes.fetch_sub(size, Relaxed);
    let (start, end) = (ptr as usize, ptr as usize + size);
    let mut freed = [None; 8];
    let mut n = 0;
    {
        let mut t = lock(&TABLE);
        for r in t.iter_mut().filter(|r| r.size != 0) {
            let lo = start.max(r.base);
            let hi = end.min(r.base + r.size);
            if lo >= hi {
                continue;
            }
            r.mapped -= hi - lo;
            if r.mapped == 0 {
                if n < freed.len() {
                    freed[n] = Some(*r);
                    n += 1;
                }
                r.size = 0;
            }
        }
    }
    for r in freed.iter().flatten() {
        let layout = Layout::from_size_align(r.size, r.align).expect("recorded layout");
        // SAFETY: the region was allocated with this layout and none of it is mapped.
        unsafe { System.dealloc(r.base as *mut u8, layout) };
    }
}

/// See [`super::collapse_huge_pages`]: nothing to collapse.
///
/// # Safety
/// As there.
pub unsafe fn collapse_huge_pages(_ptr: *mut u8, _size: usize) {}

/// See [`super::advise_huge_pages`]: nothing to advise.
///
/// # Safety
/// As there.
pub unsafe fn advise_huge_pages(_ptr: *mut u8, _size: usize, _huge: bool) {}

/// See [`super::decommit`].
///
/// # Safety
/// As there.
pub unsafe fn decommit(ptr: *mut u8, size: usize, how: Decommit) -> bool {
    COUNTERS.madvise.fetch_add(1, Relaxed);
    if how == Decommit::Now {
        // SAFETY: by the caller, the range is mapped, the caller's and unused.
        unsafe { core::ptr::write_bytes(ptr, 0, size) };
    }
    true
}

/// Never in place: the model's mappings do not grow.
///
/// # Safety
/// As for [`super::remap_aligned`].
pub unsafe fn resize_in_place(ptr: *mut u8, old: usize, new: usize) -> bool {
    let _ = (ptr, old, new);
    false
}

/// Copy `[ptr, ptr + old)` (one whole region) to `dest` and unmap it; false when it is
/// not one whole region.
///
/// # Safety
/// As for [`super::remap_aligned`]; `dest` is the caller's and unused.
pub unsafe fn move_onto(ptr: *mut u8, old: usize, new: usize, dest: *mut u8) -> bool {
    COUNTERS.mremap.fetch_add(1, Relaxed);
    let whole = lock(&TABLE)
        .iter()
        .any(|r| r.size != 0 && r.base == ptr as usize && r.mapped == old && r.size == old);
    if !whole {
        return false;
    }
    // SAFETY: both ranges are the caller's, mapped, and distinct allocations.
    unsafe { core::ptr::copy_nonoverlapping(ptr, dest, old.min(new)) };
    // SAFETY: the caller gives the old range up.
    unsafe { unmap(ptr, old) };
    // `dest`'s bytes were counted when it was mapped; the move itself maps nothing.
    COUNTERS.mapped_bytes.fetch_add(old, Relaxed);
    true
}

/// A clock that advances one millisecond per reading: retained memory ages as the
/// program calls the allocator.
pub fn now_ms() -> u64 {
    static NOW: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);
    NOW.fetch_add(1, Relaxed)
}

/// Never called: the model starts no background thread.
pub fn sleep_ms(_ms: u64) {}

/// Through std's stderr (Miri prints it).
pub fn write_stderr_once(bytes: &[u8]) -> Option<usize> {
    use std::io::Write;
    std::io::stderr().write(bytes).ok().filter(|&n| n > 0)
}

/// See [`super::abort`].
pub fn abort() -> ! {
    std::process::abort()
}

/// See [`super::yield_now`].
#[inline]
pub fn yield_now() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

std::thread_local!(static ERRNO: Cell<i32> = const { Cell::new(0) });

/// See [`super::errno`].
pub fn errno() -> i32 {
    ERRNO.with(Cell::get)
}

/// See [`super::set_errno`].
pub fn set_errno(e: i32) {
    ERRNO.with(|c| c.set(e));
}

/// The model's environment is empty.
pub fn getenv(_name: &core::ffi::CStr) -> Option<&'static [u8]> {
    None
}

/// The one key's exit function (the core creates one key).
static ON_EXIT: Mutex<Option<extern "C" fn(*mut c_void)>> = Mutex::new(None);

/// Calls the key's exit function with the thread's value when the thread ends.
struct KeyValue(Cell<*mut c_void>);

impl Drop for KeyValue {
    fn drop(&mut self) {
        let v = self.0.get();
        let f = *lock(&ON_EXIT);
        if let (false, Some(f)) = (v.is_null(), f) {
            f(v);
        }
    }
}

std::thread_local!(static VALUE: KeyValue = const { KeyValue(Cell::new(null_mut())) });

/// See [`super::thread_key_create`]: one key, 0.
pub fn thread_key_create(on_exit: extern "C" fn(*mut c_void)) -> Option<usize> {
    *lock(&ON_EXIT) = Some(on_exit);
    Some(0)
}

/// See [`super::thread_key_set`].
pub fn thread_key_set(_key: usize, value: *mut c_void) {
    // A thread already past its thread-locals' destruction keeps no value.
    let _ = VALUE.try_with(|v| v.0.set(value));
}

/// No `fork` in the model: nothing to register.
pub fn at_fork(_prepare: extern "C" fn(), _parent: extern "C" fn(), _child: extern "C" fn()) {}

/// Under Miri the model has no process barrier: what would need one is left off. Under
/// loom it has one (tests/loom_kept.rs), a `SeqCst` fence here and on the other side
/// (`sync::protocol::light_fence`).
pub fn register_barrier() -> bool {
    cfg!(loom)
}

/// See [`register_barrier`].
pub fn barrier() -> bool {
    #[cfg(loom)]
    loom::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    cfg!(loom)
}

/// No background thread in the model (the program's own calls return retained memory).
pub fn spawn_detached(_f: extern "C" fn(*mut c_void) -> *mut c_void) -> bool {
    false
}

/// The model does not read memory behind the program's back: it has no pipe.
pub struct Pipe;

impl Pipe {
    pub fn new() -> Option<Pipe> {
        None
    }

    pub fn copy(&self, _addr: usize, _buf: &mut [u8]) -> bool {
        false
    }
}

/// The model does not know which pages are resident.
pub fn residency(_addr: usize, _map: &mut [u8]) -> bool {
    false
}

/// No `/proc` in the model.
pub fn read_statm(_buf: &mut [u8; 128]) -> Option<usize> {
    None
}
