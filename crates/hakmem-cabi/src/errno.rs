//! `errno`, cheaply: `free` must leave it alone (POSIX 2024, glibc 2.33+), yet hakmem-core
//! may call `madvise` or `munmap` on its slow paths, which set it when they fail. So
//! `free` saves it and puts it back ([`Preserve`]).
//!
//! Finding `errno` is a call to `__errno_location` through the PLT, a noticeable part of a
//! fast `free`. glibc's `errno` lives in libc's *static* TLS block, at the same offset from
//! the thread pointer in every thread (that is what initial-exec TLS means), so the first
//! call's answer, minus the thread pointer, serves every later lookup on every thread:
//! one `%fs` load and an add.

use core::ffi::c_int;
#[cfg(target_arch = "x86_64")]
use core::sync::atomic::{AtomicIsize, Ordering::Relaxed};

/// `&errno - thread pointer`, or 0 before the first lookup (errno is never at the thread
/// pointer itself: the TCB is there). Other targets call `__errno_location` each time.
#[cfg(target_arch = "x86_64")]
static TP_OFFSET: AtomicIsize = AtomicIsize::new(0);

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn thread_pointer() -> isize {
    let tp: isize;
    // SAFETY: reads the TCB's self pointer at %fs:0, which glibc sets for every thread;
    // writes no memory.
    unsafe {
        core::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp,
            options(pure, readonly, nostack, preserves_flags));
    }
    tp
}

/// The calling thread's `errno`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn location() -> *mut c_int {
    let off = TP_OFFSET.load(Relaxed);
    if off != 0 {
        return (thread_pointer() + off) as *mut c_int;
    }
    first_location()
}

#[cfg(target_arch = "x86_64")]
#[cold]
fn first_location() -> *mut c_int {
    // SAFETY: `__errno_location` has no preconditions.
    let p = unsafe { libc::__errno_location() };
    TP_OFFSET.store(p as isize - thread_pointer(), Relaxed);
    p
}

/// The calling thread's `errno`.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub fn location() -> *mut c_int {
    // SAFETY: `__errno_location` has no preconditions.
    unsafe { libc::__errno_location() }
}

/// Set `errno`.
#[inline]
pub fn set(value: c_int) {
    // SAFETY: the calling thread's errno, valid for its lifetime.
    unsafe { *location() = value };
}

/// Read `errno`.
#[inline]
pub fn get() -> c_int {
    // SAFETY: as for `set`.
    unsafe { *location() }
}

/// Saves `errno` when made and restores it when dropped.
pub struct Preserve {
    at: *mut c_int,
    saved: c_int,
}

impl Preserve {
    #[inline(always)]
    pub fn new() -> Preserve {
        let at = location();
        // SAFETY: the calling thread's errno.
        let saved = unsafe { *at };
        Preserve { at, saved }
    }
}

impl Default for Preserve {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Preserve {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: still the calling thread's errno (the guard never leaves its thread:
        // raw pointers make it !Send).
        unsafe { *self.at = self.saved };
    }
}
