//! The platform layer: the one place hakmem calls the operating system and libc
//! (mappings, `madvise`, `mremap`, the clock, thread-exit keys, `fork` hooks, `errno`,
//! stderr, the environment, a background thread, a barrier on the process's threads).
//! Two implementations keep one contract: `os/linux.rs` (libc) and, under `cfg(miri)` or
//! `cfg(loom)`, `os/model.rs` (memory from std's allocator, no system call), so that Miri
//! and loom run the real allocator code.
//! Every call compiles to the libc call in a release build: the functions here are small
//! and `#[inline]`.
//!
//! Every mapping call is counted ([`OsCounters`]), and a test can make mappings fail
//! ([`inject_map_failures`]) to prove that callers leave their structures consistent.
//!
//! Contract, for every function: it never panics and never allocates through hakmem;
//! failure is a null pointer, `false` or `None`, with the state it promises on failure
//! (what was passed in untouched); a pointer passed in is one this module returned (or a
//! page-aligned range inside it) that the caller owns.

use core::ffi::{c_void, CStr};
use core::ptr::null_mut;
use core::sync::atomic::{
    fence, AtomicIsize, AtomicU8, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst,
};

#[cfg(not(any(miri, loom)))]
#[path = "os/linux.rs"]
mod sys;
#[cfg(any(miri, loom))]
#[path = "os/model.rs"]
mod sys;

/// Page size assumed for alignment of mappings and decommit ranges.
pub const PAGE_SIZE: usize = 4096;

/// Counts of system calls made and bytes currently mapped.
pub struct OsCounters {
    pub mmap: AtomicUsize,
    pub munmap: AtomicUsize,
    pub madvise: AtomicUsize,
    pub madvise_failed: AtomicUsize,
    pub mremap: AtomicUsize,
    pub mapped_bytes: AtomicUsize,
}

/// The process-wide counters.
pub static COUNTERS: OsCounters = OsCounters {
    mmap: AtomicUsize::new(0),
    munmap: AtomicUsize::new(0),
    madvise: AtomicUsize::new(0),
    madvise_failed: AtomicUsize::new(0),
    mremap: AtomicUsize::new(0),
    mapped_bytes: AtomicUsize::new(0),
};

/// Mappings left before injected failures start; negative means never fail.
static FAIL_AFTER: AtomicIsize = AtomicIsize::new(-1);

/// Test hook: after `successes` more successful mappings, every mapping fails until
/// `inject_map_failures(None)`.
pub fn inject_map_failures(successes: Option<usize>) {
    FAIL_AFTER.store(successes.map_or(-1, |n| n as isize), Relaxed);
}

#[inline]
fn injected_failure() -> bool {
    let left = FAIL_AFTER.load(Relaxed);
    if left < 0 {
        return false;
    }
    if left == 0 {
        return true;
    }
    FAIL_AFTER.store(left - 1, Relaxed);
    false
}

/// Round `n` up to a multiple of `align` (a power of two); `None` on overflow.
#[inline]
pub fn round_up(n: usize, align: usize) -> Option<usize> {
    Some(n.checked_add(align - 1)? & !(align - 1))
}

/// Unmap `[ptr, ptr + size)`, a range this module mapped and the caller owns. A failure
/// (which the kernel reports only for a range that is not a mapping) leaves it mapped.
///
/// # Safety
/// Nothing may use the range afterwards.
#[inline]
pub unsafe fn unmap(ptr: *mut u8, size: usize) {
    if size == 0 {
        return;
    }
    // SAFETY: by the caller.
    unsafe { sys::unmap(ptr, size) }
}

/// Map `size` bytes (a multiple of the page size) aligned to `align` (a power of two,
/// at least the page size), readable, writable and zero-filled. Null on failure (or an
/// injected failure).
pub fn map_aligned(size: usize, align: usize) -> *mut u8 {
    let Some(span) = round_up(size, align) else {
        return null_mut();
    };
    if injected_failure() {
        return null_mut();
    }
    sys::map_aligned(size, span, align)
}

/// Reserve `size` bytes (a multiple of the page size) of address space that read as
/// zero and cannot be written: `PROT_READ`, `MAP_NORESERVE`, so no memory and no commit
/// charge until [`make_writable`] opens a part of it. Null on failure, and always under
/// Miri and loom, where callers do without. Not counted in [`COUNTERS`]: it holds no
/// block, and it is made once.
pub fn reserve_readonly(size: usize) -> *mut u8 {
    sys::reserve_readonly(size)
}

/// Make `[ptr, ptr + size)`, page-aligned pages of a [`reserve_readonly`] reservation,
/// readable and writable (`mprotect`); false on failure, when they stay read-only. The
/// bytes keep their values (zero where never written).
///
/// # Safety
/// The range lies in a reservation of [`reserve_readonly`], which is never unmapped.
pub unsafe fn make_writable(ptr: *mut u8, size: usize) -> bool {
    // SAFETY: by the caller.
    unsafe { sys::make_writable(ptr, size) }
}

/// The size of a transparent huge page (x86-64 and AArch64 with 4 KiB pages).
pub const HUGE_PAGE_SIZE: usize = 2 << 20;

/// Ask the kernel to back `[ptr, ptr + size)` with transparent huge pages, or no longer
/// to (`MADV_HUGEPAGE` / `MADV_NOHUGEPAGE`; asking is needed where THP is in `madvise`
/// mode, Debian's default). A hint: a kernel without THP refuses it, which changes
/// nothing else, so the answer is ignored. A range of any size takes the advice (the
/// kernel keeps it as a flag of the mapping, which it splits at the range's ends), so
/// advising a range alike also joins its kernel mappings again.
///
/// # Safety
/// The range lies in a mapping of this module.
pub unsafe fn advise_huge_pages(ptr: *mut u8, size: usize, huge: bool) {
    // SAFETY: by the caller.
    unsafe { sys::advise_huge_pages(ptr, size, huge) }
}

/// Make the pages of `[ptr, ptr + size)` huge pages now, where 4 KiB ones are resident
/// (`MADV_COLLAPSE`, Linux 6.1 on): those missing are filled with zeros. A hint: a kernel
/// that cannot refuses it, and the answer is ignored.
///
/// # Safety
/// The range lies in a mapping of this module, and its contents may move (the kernel
/// copies them into the huge page; no other thread may rely on a page's frame).
pub unsafe fn collapse_huge_pages(ptr: *mut u8, size: usize) {
    // SAFETY: by the caller.
    unsafe { sys::collapse_huge_pages(ptr, size) }
}

/// How [`decommit`] gives pages back.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Decommit {
    /// `MADV_FREE`: the kernel takes the pages when it needs them; they still count in RSS
    /// until then, and read back as before or as zero.
    Lazy,
    /// `MADV_DONTNEED`: the pages leave RSS now and read back as zero.
    Now,
}

/// Give the physical pages of `[ptr, ptr + size)` back to the OS, keeping the addresses.
/// Returns false (and counts it) when the kernel refused; the memory stays valid then.
///
/// # Safety
/// The range lies in a mapping of this module and holds nothing the caller still needs.
pub unsafe fn decommit(ptr: *mut u8, size: usize, how: Decommit) -> bool {
    if size == 0 {
        return true;
    }
    // SAFETY: by the caller.
    let ok = unsafe { sys::decommit(ptr, size, how) };
    if !ok {
        COUNTERS.madvise_failed.fetch_add(1, Relaxed);
    }
    ok
}

/// Resize the mapping `[ptr, ptr + old)` to `new` bytes at an address aligned to `align`,
/// moving it without copying when it cannot grow in place. Null on failure, in which
/// case the old mapping is untouched (also when `[ptr, ptr + old)` is not one mapping).
///
/// # Safety
/// The range is a whole mapping of this module that the caller owns; on success the old
/// addresses (if different) must not be used.
pub unsafe fn remap_aligned(ptr: *mut u8, old: usize, new: usize, align: usize) -> *mut u8 {
    if injected_failure() {
        return null_mut();
    }
    // SAFETY: by the caller.
    if unsafe { sys::resize_in_place(ptr, old, new) } {
        account_resize(old, new);
        return ptr;
    }
    // Reserve an aligned destination, then move the pages onto it.
    let dest = map_aligned(new, align);
    if dest.is_null() {
        return null_mut();
    }
    // SAFETY: `dest` is our reservation; the source is the caller's.
    if !unsafe { sys::move_onto(ptr, old, new, dest) } {
        // SAFETY: `dest` is our reservation, unused.
        unsafe { unmap(dest, new) };
        return null_mut();
    }
    // The reservation was replaced (its bytes counted once in `mapped_bytes`) and the old
    // mapping is gone.
    COUNTERS.mapped_bytes.fetch_sub(old, Relaxed);
    dest
}

fn account_resize(old: usize, new: usize) {
    if new >= old {
        COUNTERS.mapped_bytes.fetch_add(new - old, Relaxed);
    } else {
        COUNTERS.mapped_bytes.fetch_sub(old - new, Relaxed);
    }
}

/// Shrink the mapping `[ptr, ptr + old)` to its first `new` bytes (both page multiples).
///
/// # Safety
/// The caller owns the mapping and needs nothing past `new`.
pub unsafe fn shrink(ptr: *mut u8, old: usize, new: usize) {
    // SAFETY: the tail is part of the caller's mapping.
    unsafe { unmap(ptr.add(new), old - new) };
}

/// Milliseconds on a monotonic clock of coarse resolution (a few ms; read from the vDSO,
/// no system call), for the age of retained memory. Never goes back.
#[inline]
pub fn now_ms() -> u64 {
    sys::now_ms()
}

/// Sleep about `ms` milliseconds (less when interrupted).
pub fn sleep_ms(ms: u64) {
    sys::sleep_ms(ms)
}

/// [`process_barrier`]'s state: not yet asked for, usable, or not (an old kernel, a
/// sandbox that refuses the call, the model under Miri).
static BARRIER: AtomicU8 = AtomicU8::new(BARRIER_UNKNOWN);
const BARRIER_UNKNOWN: u8 = 0;
const BARRIER_READY: u8 = 1;
const BARRIER_ABSENT: u8 = 2;

/// Make [`process_barrier`] usable, once per process (the children of `fork` inherit it);
/// whether it is. Registering takes milliseconds in a process with several threads (7-12
/// ms measured here, against 2 µs with one: the kernel waits for a grace period), so it
/// is for a background thread, not a program's path.
pub fn ready_process_barrier() -> bool {
    if BARRIER.load(Relaxed) == BARRIER_UNKNOWN {
        let state = if sys::register_barrier() {
            BARRIER_READY
        } else {
            BARRIER_ABSENT
        };
        BARRIER.store(state, Relaxed);
    }
    process_barrier_ready()
}

/// Whether [`ready_process_barrier`] made [`process_barrier`] usable.
#[inline]
pub fn process_barrier_ready() -> bool {
    BARRIER.load(Relaxed) == BARRIER_READY
}

/// A full memory barrier on every running thread of the process (`membarrier(2)`'s
/// private expedited command): when it returns, each has passed a point where its memory
/// accesses are ordered as in its program. So a thread that stores, then (a compiler
/// fence between, no fence instruction) loads, is ordered against the caller's store
/// before this and load after it: one of the two sees the other's store. About 14 µs
/// with three threads running on two cores. `false` when it failed (not made usable by
/// [`ready_process_barrier`], or refused since): then it is no longer ready.
pub fn process_barrier() -> bool {
    // The system call is a full fence on the calling thread too; these say so to the
    // compiler, so the caller's accesses before and after stay where they are.
    fence(SeqCst);
    let done = sys::barrier();
    fence(SeqCst);
    if !done {
        BARRIER.store(BARRIER_ABSENT, Relaxed);
    }
    done
}

/// Write a message to stderr without allocating; gives up silently on an error.
pub fn write_stderr(bytes: &[u8]) {
    let mut rest = bytes;
    while !rest.is_empty() {
        let Some(n) = sys::write_stderr_once(rest) else {
            return;
        };
        rest = &rest[n..];
    }
}

/// Abort the process now, without unwinding or allocating.
pub fn abort() -> ! {
    sys::abort()
}

/// Give the CPU to another thread (spin loops that wait for another thread).
#[inline]
pub fn yield_now() {
    sys::yield_now()
}

/// The calling thread's `errno`.
#[inline]
pub fn errno() -> i32 {
    sys::errno()
}

/// Set the calling thread's `errno`.
#[inline]
pub fn set_errno(e: i32) {
    sys::set_errno(e)
}

/// The value of the environment variable `name`, without allocating; `None` when unset.
/// The bytes stay valid as long as nobody changes the environment (hakmem never does).
pub fn getenv(name: &CStr) -> Option<&'static [u8]> {
    sys::getenv(name)
}

/// A thread-exit key: `on_exit` runs on each exiting thread whose value is not null, with
/// that value. `None` when no key can be created (then threads are not told of their
/// exit).
pub fn thread_key_create(on_exit: extern "C" fn(*mut c_void)) -> Option<usize> {
    sys::thread_key_create(on_exit)
}

/// Set the calling thread's value of `key` (from [`thread_key_create`]). May allocate
/// (glibc, past 32 keys); a failure leaves the value unset.
pub fn thread_key_set(key: usize, value: *mut c_void) {
    sys::thread_key_set(key, value)
}

/// Register `fork` handlers: `prepare` runs in the forking thread before the fork,
/// `parent` and `child` after it on each side. May allocate.
pub fn at_fork(prepare: extern "C" fn(), parent: extern "C" fn(), child: extern "C" fn()) {
    sys::at_fork(prepare, parent, child)
}

/// Start a detached thread running `f(null)` on a small stack; false when it cannot.
pub fn spawn_detached(f: extern "C" fn(*mut c_void) -> *mut c_void) -> bool {
    sys::spawn_detached(f)
}

/// Reads memory that another thread may unmap meanwhile, for statistics: the kernel copies
/// it (through a pipe: `write` from the address, `read` back), so an unmapped byte is a
/// refusal (`EFAULT`), never a fault. A pipe rather than `process_vm_readv`, which
/// sandboxes that filter system calls tend to refuse, some by killing the process.
pub struct MemoryReader(sys::Pipe);

impl MemoryReader {
    /// `None` where no pipe can be had (or under the model platform).
    pub fn new() -> Option<MemoryReader> {
        sys::Pipe::new().map(MemoryReader)
    }

    /// Copy the bytes at `addr` into `buf` (at most [`PAGE_SIZE`] of them) if all of them
    /// are mapped and readable now; false otherwise.
    pub fn read(&self, addr: usize, buf: &mut [u8]) -> bool {
        buf.len() <= PAGE_SIZE && self.0.copy(addr, buf)
    }
}

/// Pages of `[addr, addr + len)` (`addr` page aligned) resident now; `None` when some page
/// of it is not mapped (or the OS cannot say).
pub fn resident_pages(addr: usize, len: usize) -> Option<usize> {
    const STRETCH: usize = 256;
    let mut map = [0u8; STRETCH];
    let end = addr.checked_add(len)?;
    let mut resident = 0;
    let mut at = addr;
    while at < end {
        let pages = (end - at).div_ceil(PAGE_SIZE).min(STRETCH);
        if !residency(at, &mut map[..pages]) {
            return None;
        }
        resident += map[..pages].iter().filter(|&&b| is_resident(b)).count();
        at += pages * PAGE_SIZE;
    }
    Some(resident)
}

/// Fill `map` with a byte for each page from `addr` (page aligned) on, whose lowest bit
/// says whether the page is resident ([`is_resident`]); false when some page of them is
/// not mapped (or the OS cannot say).
pub fn residency(addr: usize, map: &mut [u8]) -> bool {
    sys::residency(addr, map)
}

/// Whether a byte of [`residency`]'s map says its page is resident.
#[inline]
pub fn is_resident(b: u8) -> bool {
    b & 1 != 0
}

/// The resident set size of this process, in bytes, without allocating; `None` if it
/// cannot be read.
pub fn resident_bytes() -> Option<usize> {
    let mut buf = [0u8; 128];
    let n = sys::read_statm(&mut buf)?;
    let mut fields = buf[..n].split(|&b| b == b' ');
    fields.next()?;
    let pages = parse_decimal(fields.next()?)?;
    Some(pages * PAGE_SIZE)
}

fn parse_decimal(s: &[u8]) -> Option<usize> {
    let mut v: usize = 0;
    let mut any = false;
    for &b in s {
        if !b.is_ascii_digit() {
            break;
        }
        v = v.checked_mul(10)?.checked_add((b - b'0') as usize)?;
        any = true;
    }
    any.then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_mappings_are_aligned_and_zero() {
        for align in [PAGE_SIZE, 1 << 16, 1 << 22] {
            let p = map_aligned(1 << 20, align);
            assert!(!p.is_null());
            assert_eq!(p as usize % align, 0);
            // SAFETY: fresh mapping of 1 MiB.
            unsafe {
                assert_eq!(*p.add(12345), 0);
                *p.add(12345) = 7;
                unmap(p, 1 << 20);
            }
        }
    }

    #[test]
    fn resident_is_readable() {
        assert!(resident_bytes().unwrap() > 0);
    }

    /// The census's two reads: pages resident where written and nowhere else (any
    /// length), and memory read through the kernel until it is unmapped.
    #[test]
    fn resident_pages_and_reads_through_the_kernel() {
        let p = map_aligned(1 << 20, PAGE_SIZE);
        assert!(!p.is_null());
        // SAFETY: a fresh mapping of 1 MiB, ours.
        unsafe {
            *p = 1;
            *p.add(5 * PAGE_SIZE) = 2;
            *p.add((1 << 20) - 1) = 3;
        }
        let at = p as usize;
        assert_eq!(resident_pages(at, 1 << 20), Some(3));
        assert_eq!(resident_pages(at, PAGE_SIZE + 1), Some(1));
        assert_eq!(resident_pages(at + 5 * PAGE_SIZE, 10), Some(1));
        let reader = MemoryReader::new().expect("a pipe");
        let mut buf = [0u8; 2];
        assert!(reader.read(at + 5 * PAGE_SIZE - 1, &mut buf));
        assert_eq!(buf, [0, 2]);
        // SAFETY: ours, unused from here on.
        unsafe { unmap(p, 1 << 20) };
        assert!(!reader.read(at, &mut buf), "an unmapped page is a refusal");
        assert!(
            !reader.read(at - 1, &mut buf),
            "and one unmapped byte of two"
        );
        assert_eq!(resident_pages(at, PAGE_SIZE), None);
    }

    #[test]
    fn decimal() {
        assert_eq!(parse_decimal(b"1234 5"), Some(1234));
        assert_eq!(parse_decimal(b"x"), None);
    }
}
