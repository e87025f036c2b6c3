//! The platform layer on Linux: libc system calls. Each function keeps the contract written
//! on its counterpart in [`crate::os`]; the system calls are counted in
//! [`super::COUNTERS`].

use super::{Decommit, COUNTERS};
use core::ffi::{c_char, c_void};
use core::ptr::null_mut;
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Hint for the next aligned mapping, so that most aligned mappings take one `mmap`.
/// The hinted range is [1 TiB, 2 TiB): far from the executable, the brk heap and the
/// kernel's top-down mappings, and inside the application range ThreadSanitizer allows
/// (its shadow memory starts at 16 TiB). Past it, the kernel places mappings.
static HINT: AtomicUsize = AtomicUsize::new(0x0100_0000_0000);
const HINT_END: usize = 0x0200_0000_0000;

/// Reserve `[start, start + span)` of the hint range, `start` aligned to `align`; 0 when
/// the range is used up.
fn next_hint(span: usize, align: usize) -> usize {
    let mut cur = HINT.load(Relaxed);
    loop {
        let start = (cur + align - 1) & !(align - 1);
        let end = match start.checked_add(span) {
            Some(e) if e <= HINT_END => e,
            _ => return 0,
        };
        match HINT.compare_exchange_weak(cur, end, Relaxed, Relaxed) {
            Ok(_) => return start,
            Err(now) => cur = now,
        }
    }
}

/// # Safety
/// With `MAP_FIXED*` in `flags`, the range at `addr` is the caller's.
unsafe fn raw_mmap(addr: usize, size: usize, flags: libc::c_int) -> *mut u8 {
    COUNTERS.mmap.fetch_add(1, Relaxed);
    // SAFETY: an anonymous private mapping touches no existing memory unless MAP_FIXED
    // is in `flags`, which callers pass only over a range they own.
    let p = unsafe {
        libc::mmap(
            addr as *mut c_void,
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return null_mut();
    }
    COUNTERS.mapped_bytes.fetch_add(size, Relaxed);
    p.cast()
}

/// See [`super::reserve_readonly`].
pub fn reserve_readonly(size: usize) -> *mut u8 {
    // SAFETY: a fresh anonymous mapping at an address of the kernel's choosing.
    let p = unsafe {
        libc::mmap(
            null_mut(),
            size,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return null_mut();
    }
    p.cast()
}

/// See [`super::make_writable`].
///
/// # Safety
/// As there.
pub unsafe fn make_writable(ptr: *mut u8, size: usize) -> bool {
    // SAFETY: the range is part of a reservation that nothing else uses.
    unsafe { libc::mprotect(ptr.cast(), size, libc::PROT_READ | libc::PROT_WRITE) == 0 }
}

/// See [`super::unmap`].
///
/// # Safety
/// As there.
pub unsafe fn unmap(ptr: *mut u8, size: usize) {
    COUNTERS.munmap.fetch_add(1, Relaxed);
    // SAFETY: the caller owns the range and gives it up.
    if unsafe { libc::munmap(ptr.cast(), size) } == 0 {
        COUNTERS.mapped_bytes.fetch_sub(size, Relaxed);
    }
}

/// See [`super::map_aligned`]; `span` is `size` rounded up to `align`.
pub fn map_aligned(size: usize, span: usize, align: usize) -> *mut u8 {
    // First try at the hint: one system call when the range is free.
    let hint = next_hint(span, align);
    if hint != 0 {
        // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping.
        let p = unsafe { raw_mmap(hint, size, libc::MAP_FIXED_NOREPLACE) };
        if !p.is_null() {
            if p as usize == hint {
                return p;
            }
            // An old kernel ignored the flag and put it elsewhere.
            // SAFETY: we just mapped it and nobody has seen it.
            unsafe { unmap(p, size) };
        }
    }
    // Over-map and trim to the alignment.
    let Some(over) = size.checked_add(align) else {
        return null_mut();
    };
    // SAFETY: a fresh mapping at an address of the kernel's choosing.
    let p = unsafe { raw_mmap(0, over, 0) };
    if p.is_null() {
        return null_mut();
    }
    let start = (p as usize + align - 1) & !(align - 1);
    let head = start - p as usize;
    let tail = over - head - size;
    // SAFETY: head and tail are parts of the mapping we just made and do not overlap
    // the part we keep.
    unsafe {
        if head > 0 {
            unmap(p, head);
        }
        if tail > 0 {
            unmap((start + size) as *mut u8, tail);
        }
    }
    start as *mut u8
}

/// See [`super::advise_huge_pages`].
///
/// # Safety
/// As there.
pub unsafe fn advise_huge_pages(ptr: *mut u8, size: usize, huge: bool) {
    COUNTERS.madvise.fetch_add(1, Relaxed);
    let advice = if huge {
        libc::MADV_HUGEPAGE
    } else {
        libc::MADV_NOHUGEPAGE
    };
    // SAFETY: advice about pages of a mapping of ours; it changes no contents.
    unsafe { libc::madvise(ptr.cast(), size, advice) };
}

/// See [`super::collapse_huge_pages`].
///
/// # Safety
/// As there.
pub unsafe fn collapse_huge_pages(ptr: *mut u8, size: usize) {
    /// `MADV_COLLAPSE` (Linux 6.1), which the `libc` crate does not name.
    const MADV_COLLAPSE: libc::c_int = 25;
    COUNTERS.madvise.fetch_add(1, Relaxed);
    // SAFETY: advice about pages of a mapping of ours; it changes no contents (a page
    // not present reads as zero before and after).
    unsafe { libc::madvise(ptr.cast(), size, MADV_COLLAPSE) };
}

/// See [`super::decommit`].
///
/// # Safety
/// As there.
pub unsafe fn decommit(ptr: *mut u8, size: usize, how: Decommit) -> bool {
    COUNTERS.madvise.fetch_add(1, Relaxed);
    let advice = match how {
        Decommit::Lazy => libc::MADV_FREE,
        Decommit::Now => libc::MADV_DONTNEED,
    };
    // SAFETY: the caller owns the range and needs none of its contents.
    unsafe { libc::madvise(ptr.cast(), size, advice) == 0 }
}

/// Resize the mapping `[ptr, ptr + old)` to `new` bytes where it is; false when it cannot.
///
/// # Safety
/// As for [`super::remap_aligned`].
pub unsafe fn resize_in_place(ptr: *mut u8, old: usize, new: usize) -> bool {
    COUNTERS.mremap.fetch_add(1, Relaxed);
    // SAFETY: without MREMAP_MAYMOVE the mapping stays where it is or the call fails.
    unsafe { libc::mremap(ptr.cast(), old, new, 0) != libc::MAP_FAILED }
}

/// Move the pages of `[ptr, ptr + old)` onto `dest` (a mapping of `new` bytes of this
/// layer, which they replace), resized to `new`; false (both untouched) when it cannot.
///
/// # Safety
/// As for [`super::remap_aligned`]; `dest` is the caller's and unused.
pub unsafe fn move_onto(ptr: *mut u8, old: usize, new: usize, dest: *mut u8) -> bool {
    COUNTERS.mremap.fetch_add(1, Relaxed);
    // SAFETY: MREMAP_FIXED replaces `dest`, a mapping the caller owns; the source is the
    // caller's.
    let p = unsafe {
        libc::mremap(
            ptr.cast(),
            old,
            new,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            dest as *mut c_void,
        )
    };
    p != libc::MAP_FAILED
}

/// See [`super::now_ms`].
pub fn now_ms() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut t) };
    t.tv_sec as u64 * 1000 + t.tv_nsec as u64 / 1_000_000
}

/// See [`super::sleep_ms`].
pub fn sleep_ms(ms: u64) {
    let t = libc::timespec {
        tv_sec: (ms / 1000) as _,
        tv_nsec: ((ms % 1000) * 1_000_000) as _,
    };
    // SAFETY: a valid timespec; an interrupted sleep just wakes early.
    unsafe { libc::nanosleep(&t, null_mut()) };
}

/// One `write(2)` to stderr; bytes written, or `None` on failure.
pub fn write_stderr_once(bytes: &[u8]) -> Option<usize> {
    // SAFETY: `bytes` is a valid readable slice.
    let n = unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
    (n > 0).then_some(n as usize)
}

/// See [`super::abort`].
pub fn abort() -> ! {
    // SAFETY: abort has no preconditions.
    unsafe { libc::abort() }
}

/// `membarrier(2)` commands (linux/membarrier.h).
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

/// See [`super::ready_process_barrier`].
pub fn register_barrier() -> bool {
    // SAFETY: a system call on no memory; an unknown one fails with ENOSYS.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
            0 as libc::c_long,
            0 as libc::c_long,
        )
    };
    rc == 0
}

/// See [`super::process_barrier`].
pub fn barrier() -> bool {
    // SAFETY: a system call on no memory.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            MEMBARRIER_CMD_PRIVATE_EXPEDITED,
            0 as libc::c_long,
            0 as libc::c_long,
        )
    };
    rc == 0
}

/// See [`super::yield_now`].
#[inline]
pub fn yield_now() {
    // SAFETY: sched_yield has no preconditions.
    unsafe { libc::sched_yield() };
}

/// See [`super::errno`].
#[inline]
pub fn errno() -> i32 {
    // SAFETY: `__errno_location` returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() }
}

/// See [`super::set_errno`].
#[inline]
pub fn set_errno(e: i32) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = e };
}

/// See [`super::getenv`].
pub fn getenv(name: &core::ffi::CStr) -> Option<&'static [u8]> {
    // SAFETY: getenv does not allocate; the name is NUL terminated.
    let v: *const c_char = unsafe { libc::getenv(name.as_ptr()) };
    if v.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated C string from the environment, which hakmem never changes.
    Some(unsafe { core::ffi::CStr::from_ptr(v) }.to_bytes())
}

/// See [`super::thread_key_create`].
pub fn thread_key_create(on_exit: extern "C" fn(*mut c_void)) -> Option<usize> {
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: `key` is a valid out-pointer and the destructor has the right signature.
    (unsafe { libc::pthread_key_create(&mut key, Some(on_exit)) } == 0).then_some(key as usize)
}

/// See [`super::thread_key_set`].
pub fn thread_key_set(key: usize, value: *mut c_void) {
    // SAFETY: a key from `thread_key_create`; the value is only compared against null.
    unsafe { libc::pthread_setspecific(key as libc::pthread_key_t, value) };
}

/// See [`super::at_fork`].
pub fn at_fork(prepare: extern "C" fn(), parent: extern "C" fn(), child: extern "C" fn()) {
    // SAFETY: the handlers are plain `extern "C" fn()`.
    unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
}

/// See [`super::spawn_detached`].
pub fn spawn_detached(f: extern "C" fn(*mut c_void) -> *mut c_void) -> bool {
    // SAFETY: plain pthread calls on local, initialised storage; the thread function has
    // the right signature and takes no argument.
    unsafe {
        let mut attr: libc::pthread_attr_t = core::mem::zeroed();
        // (An integer on glibc, a pointer on musl: all zero is a valid placeholder.)
        let mut tid: libc::pthread_t = core::mem::zeroed();
        libc::pthread_attr_init(&mut attr);
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        libc::pthread_attr_setstacksize(&mut attr, 64 * 1024);
        let rc = libc::pthread_create(&mut tid, &attr, f, null_mut());
        libc::pthread_attr_destroy(&mut attr);
        rc == 0
    }
}

/// The pipe of [`super::MemoryReader`]: its read and write ends, closed on drop.
pub struct Pipe {
    read: libc::c_int,
    write: libc::c_int,
}

impl Pipe {
    pub fn new() -> Option<Pipe> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` has room for the two descriptors.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) };
        (rc == 0).then_some(Pipe {
            read: fds[0],
            write: fds[1],
        })
    }

    /// Copy `buf.len()` bytes (at most a page: a pipe holds more) from `addr` into `buf`
    /// through the pipe, which is empty before and after.
    pub fn copy(&self, addr: usize, buf: &mut [u8]) -> bool {
        // SAFETY: the kernel reads `[addr, addr + len)` with fault handling: a byte not
        // mapped or not readable fails the write (`EFAULT`) or shortens it.
        let wrote = unsafe { libc::write(self.write, addr as *const c_void, buf.len()) };
        if wrote <= 0 {
            return false;
        }
        // SAFETY: `buf` is writable for its length; the pipe holds `wrote` bytes.
        let got = unsafe { libc::read(self.read, buf.as_mut_ptr().cast(), wrote as usize) };
        got == wrote && wrote as usize == buf.len()
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        // SAFETY: both descriptors are this pipe's, closed once.
        unsafe {
            libc::close(self.read);
            libc::close(self.write);
        }
    }
}

/// [`super::residency`]: `mincore`.
pub fn residency(addr: usize, map: &mut [u8]) -> bool {
    // SAFETY: `map` holds a byte for each of the pages asked about; the kernel checks that
    // they are mapped (ENOMEM otherwise) and reads nothing of them.
    unsafe {
        libc::mincore(
            addr as *mut c_void,
            map.len() * super::PAGE_SIZE,
            map.as_mut_ptr(),
        ) == 0
    }
}

/// Read `/proc/self/statm` into `buf` (for [`super::resident_bytes`]); the bytes read.
pub fn read_statm(buf: &mut [u8; 128]) -> Option<usize> {
    // SAFETY: a NUL-terminated path; the returned descriptor is closed below.
    let fd = unsafe {
        libc::open(
            c"/proc/self/statm".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: `buf` is writable for its length.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: `fd` is ours.
    unsafe { libc::close(fd) };
    (n > 0).then_some(n as usize)
}
