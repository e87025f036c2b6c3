//! The operating system: the one place hakmem calls `mmap`, `munmap`, `madvise` and
//! `mremap`. Every call is counted ([`OsCounters`]), and a test can make mappings fail
//! ([`inject_map_failures`]) to prove that callers leave their structures consistent.
//!
//! Contract for callers: every function returns null or `false` on failure and never
//! panics; a pointer passed in must be one this module returned (or a page-aligned range
//! inside it) that the caller owns.

use crate::sync::{AtomicIsize, AtomicUsize, Ordering::Relaxed};
use core::ptr::null_mut;

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

unsafe fn raw_mmap(addr: usize, size: usize, flags: libc::c_int) -> *mut u8 {
    if injected_failure() {
        return null_mut();
    }
    COUNTERS.mmap.fetch_add(1, Relaxed);
    // SAFETY: an anonymous private mapping touches no existing memory unless MAP_FIXED
    // is in `flags`, which callers pass only over a range they own.
    let p = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
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

/// Unmap `[ptr, ptr + size)`, a range this module mapped and the caller owns.
///
/// # Safety
/// Nothing may use the range afterwards.
pub unsafe fn unmap(ptr: *mut u8, size: usize) {
    if size == 0 {
        return;
    }
    COUNTERS.munmap.fetch_add(1, Relaxed);
    // SAFETY: the caller owns the range and gives it up.
    if unsafe { libc::munmap(ptr.cast(), size) } == 0 {
        COUNTERS.mapped_bytes.fetch_sub(size, Relaxed);
    }
}

/// Map `size` bytes (a multiple of the page size) aligned to `align` (a power of two,
/// at least the page size), zero-filled. Null on failure.
pub fn map_aligned(size: usize, align: usize) -> *mut u8 {
    let Some(span) = round_up(size, align) else {
        return null_mut();
    };
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
        unmap(p, head);
        unmap((start + size) as *mut u8, tail);
    }
    start as *mut u8
}

/// How [`decommit`] gives pages back.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Decommit {
    /// `MADV_FREE`: the kernel takes the pages when it needs them; they still count in RSS
    /// until then.
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
    COUNTERS.madvise.fetch_add(1, Relaxed);
    let advice = match how {
        Decommit::Lazy => libc::MADV_FREE,
        Decommit::Now => libc::MADV_DONTNEED,
    };
    // SAFETY: the caller owns the range and needs none of its contents.
    let ok = unsafe { libc::madvise(ptr.cast(), size, advice) } == 0;
    if !ok {
        COUNTERS.madvise_failed.fetch_add(1, Relaxed);
    }
    ok
}

/// Resize the mapping `[ptr, ptr + old)` to `new` bytes at an address aligned to `align`,
/// moving it without copying when it cannot grow in place. Null on failure, in which
/// case the old mapping is untouched.
///
/// # Safety
/// The range is a whole mapping of this module that the caller owns; on success the old
/// addresses (if different) must not be used.
pub unsafe fn remap_aligned(ptr: *mut u8, old: usize, new: usize, align: usize) -> *mut u8 {
    if injected_failure() {
        return null_mut();
    }
    COUNTERS.mremap.fetch_add(1, Relaxed);
    // SAFETY: without MREMAP_MAYMOVE the mapping stays where it is or the call fails.
    let p = unsafe { libc::mremap(ptr.cast(), old, new, 0) };
    if p != libc::MAP_FAILED {
        account_resize(old, new);
        return ptr;
    }
    // Reserve an aligned destination, then move the pages onto it.
    let dest = map_aligned(new, align);
    if dest.is_null() {
        return null_mut();
    }
    COUNTERS.mremap.fetch_add(1, Relaxed);
    // SAFETY: MREMAP_FIXED replaces `dest`, a mapping we own; the source is the caller's.
    let p = unsafe {
        libc::mremap(
            ptr.cast(),
            old,
            new,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            dest as *mut libc::c_void,
        )
    };
    if p == libc::MAP_FAILED {
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
/// no system call), for the age of retained memory.
pub fn now_ms() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut t) };
    t.tv_sec as u64 * 1000 + t.tv_nsec as u64 / 1_000_000
}

/// Write a message to stderr without allocating.
pub fn write_stderr(bytes: &[u8]) {
    let mut rest = bytes;
    while !rest.is_empty() {
        // SAFETY: `rest` is a valid readable slice.
        let n = unsafe { libc::write(2, rest.as_ptr().cast(), rest.len()) };
        if n <= 0 {
            return;
        }
        rest = &rest[n as usize..];
    }
}

/// Abort the process now, without unwinding or allocating.
pub fn abort() -> ! {
    // SAFETY: abort has no preconditions.
    unsafe { libc::abort() }
}

/// Read the resident set size of this process from `/proc/self/statm`, in bytes, without
/// allocating. `None` if it cannot be read.
pub fn resident_bytes() -> Option<usize> {
    let mut buf = [0u8; 128];
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
    if n <= 0 {
        return None;
    }
    let text = &buf[..n as usize];
    let mut fields = text.split(|&b| b == b' ');
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

    #[test]
    fn decimal() {
        assert_eq!(parse_decimal(b"1234 5"), Some(1234));
        assert_eq!(parse_decimal(b"x"), None);
    }
}
