//! `HAKMEM_STATS=1`: counts of calls and of bytes in use, and a summary on stderr at exit.
//!
//! Counting costs one load and a predicted branch per allocating call while it is off
//! (the default; the same load serves checked mode, see [`crate::mode`]), and nothing on
//! `free`, whose fast path counting closes when it starts.
//! While on, every allocation and free also looks up the block's usable size and updates
//! a few shared counters: slower, and meant for looking, not for production.
//!
//! Bytes in use are the usable sizes of the blocks the program holds, counted from the
//! moment the constructor enabled counting (the few allocations the dynamic loader and
//! libc make before it are not seen; frees of those can make the count dip, so it is
//! clamped at zero). The exit summary runs from `.fini_array`, which `exit` reaches after
//! the program's own `atexit` handlers and destructors, and never allocates. By then some
//! programs have closed stderr (GNU coreutils close it in an `atexit` handler), so
//! enabling takes a private duplicate of it, used at exit if it still is the same file.
//! A program that leaves with `_exit` (dash, for one) runs no exit hooks: no summary.

use crate::fmt::Message;
use core::fmt::Write;
use core::sync::atomic::{AtomicI32, AtomicIsize, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Allocation and free calls seen (a `realloc` counts as both).
static CALLS: AtomicUsize = AtomicUsize::new(0);
/// Usable bytes of live blocks (may dip below zero, see the module docs).
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK_LIVE: AtomicUsize = AtomicUsize::new(0);
/// Largest `mapped` seen after an allocation.
static PEAK_MAPPED: AtomicUsize = AtomicUsize::new(0);

/// A duplicate of stderr taken when counting started, and the `(device, inode)` it
/// referred to (-1: none).
static SUMMARY_FD: AtomicI32 = AtomicI32::new(-1);
static SUMMARY_FILE: AtomicU64 = AtomicU64::new(0);

/// Start counting (the constructor, for `HAKMEM_STATS=1`).
pub fn enable() {
    crate::mode::count();
    // High, so that programs which assume low descriptors are free do not meet it.
    // SAFETY: fcntl on a descriptor number has no memory effects.
    let fd = unsafe { libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 100) };
    if let (true, Some(id)) = (fd >= 0, file_id(fd)) {
        SUMMARY_FD.store(fd, Relaxed);
        SUMMARY_FILE.store(id, Relaxed);
    }
}

/// Identify the file `fd` refers to (a hash of device and inode).
fn file_id(fd: i32) -> Option<u64> {
    // SAFETY: `st` is written by fstat before it is read, and only on success.
    let st = unsafe {
        let mut st = core::mem::MaybeUninit::<libc::stat>::uninit();
        if libc::fstat(fd, st.as_mut_ptr()) != 0 {
            return None;
        }
        st.assume_init()
    };
    Some((st.st_dev as u64).rotate_left(32) ^ st.st_ino as u64)
}

/// Where the exit summary goes: the duplicate if it still is the same file, else fd 2.
fn summary_fd() -> i32 {
    let fd = SUMMARY_FD.load(Relaxed);
    if fd >= 0 && file_id(fd) == Some(SUMMARY_FILE.load(Relaxed)) {
        fd
    } else {
        2
    }
}

#[inline(always)]
pub fn enabled() -> bool {
    crate::mode::counted()
}

/// Note that `p` (non-null) was just handed to the program.
#[inline(always)]
pub fn on_alloc(p: *mut u8) {
    if enabled() {
        record_alloc(p);
    }
}

/// Note that `p` (a live block) is about to be freed.
#[inline(always)]
pub fn on_free(p: *mut u8) {
    if enabled() {
        record_free(p);
    }
}

#[cold]
#[inline(never)]
fn record_alloc(p: *mut u8) {
    CALLS.fetch_add(1, Relaxed);
    let size = hakmem_core::usable_size(p) as isize;
    let live = LIVE.fetch_add(size, Relaxed) + size;
    PEAK_LIVE.fetch_max(live.max(0) as usize, Relaxed);
    PEAK_MAPPED.fetch_max(hakmem_core::mapped_bytes(), Relaxed);
}

#[cold]
#[inline(never)]
fn record_free(p: *mut u8) {
    CALLS.fetch_add(1, Relaxed);
    LIVE.fetch_sub(hakmem_core::usable_size(p) as isize, Relaxed);
}

/// The counts kept here (zero unless enabled).
#[derive(Clone, Copy, Debug)]
pub struct Counts {
    /// Usable bytes of the blocks the program holds (clamped at zero).
    pub in_use: usize,
    pub peak_in_use: usize,
    /// Allocation and free calls.
    pub calls: usize,
    /// The most hakmem had mapped after an allocation (at least `core.mapped`).
    pub peak_mapped: usize,
}

/// The counts now, beside hakmem-core's statistics `core`.
pub fn counts(core: &hakmem_core::Stats) -> Counts {
    Counts {
        in_use: LIVE.load(Relaxed).max(0) as usize,
        peak_in_use: PEAK_LIVE.load(Relaxed),
        calls: CALLS.load(Relaxed),
        peak_mapped: PEAK_MAPPED.load(Relaxed).max(core.mapped),
    }
}

/// Write the summary to stderr.
pub fn print_summary() {
    print_summary_to(2);
}

fn print_summary_to(fd: i32) {
    let s = hakmem_core::stats();
    let mut m = Message::<1024>::new();
    // Writing into a `Message` cannot fail (it truncates).
    let _ = write_summary(&mut m, &counts(&s), &s);
    m.emit_to(fd);
    let mut m = Message::<256>::new();
    let _ = write_residency(&mut m, &hakmem_core::residency());
    m.emit_to(fd);
    let usage = hakmem_core::class_usage();
    for u in usage.iter().filter(|u| u.slabs > 0) {
        let mut m = Message::<256>::new();
        let _ = write_class(&mut m, u);
        m.emit_to(fd);
    }
}

/// The census's line: resident and mapped KiB of each kind of chunk
/// ([`hakmem_core::residency`]).
fn write_residency(m: &mut impl Write, r: &hakmem_core::Residency) -> core::fmt::Result {
    let kib = |b: usize| b.div_ceil(1024);
    writeln!(
        m,
        "hakmem:   resident   superslabs {} of {} KiB, large blocks {} of {}, pair chunks {} of {}, cached extents {} of {} (resident of mapped)",
        kib(r.superslabs.resident),
        kib(r.superslabs.mapped),
        kib(r.large.resident),
        kib(r.large.mapped),
        kib(r.pairs.resident),
        kib(r.pairs.mapped),
        kib(r.cached_large.resident),
        kib(r.cached_large.mapped)
    )
}

/// One class's line: where the bytes of its slabs are, in KiB.
fn write_class(m: &mut impl Write, u: &hakmem_core::ClassUsage) -> core::fmt::Result {
    let kib = |b: usize| b.div_ceil(1024);
    writeln!(
        m,
        "hakmem:   {:>7} B blocks: {} KiB live, {} in thread caches, {} in the depot, {} on remote lists, {} free, {} uncarved, of {} KiB in slabs",
        u.block_size,
        kib(u.live),
        kib(u.thread_caches),
        kib(u.depot),
        kib(u.remote),
        kib(u.free_in_slabs),
        kib(u.uncarved),
        kib(u.slabs)
    )
}

fn write_summary(m: &mut impl Write, c: &Counts, s: &hakmem_core::Stats) -> core::fmt::Result {
    let profile = hakmem_core::profile().name();
    writeln!(m, "hakmem: statistics (profile {profile})")?;
    writeln!(
        m,
        "hakmem:   in use     {} bytes now, {} bytes at peak (usable sizes of live blocks)",
        c.in_use, c.peak_in_use
    )?;
    writeln!(
        m,
        "hakmem:   handed out {} bytes (blocks taken from slabs, thread caches included)",
        s.allocated
    )?;
    writeln!(
        m,
        "hakmem:   mapped     {} bytes now, {} bytes at peak; process resident {} bytes",
        s.mapped, c.peak_mapped, s.resident
    )?;
    writeln!(
        m,
        "hakmem:   os calls   mmap {}, munmap {}, madvise {} ({} failed), mremap {}",
        s.mmap_calls, s.munmap_calls, s.madvise_calls, s.madvise_failures, s.mremap_calls
    )?;
    let os = s.mmap_calls + s.munmap_calls + s.madvise_calls + s.mremap_calls;
    let (whole, millionths) = per_call(os, c.calls);
    writeln!(
        m,
        "hakmem:   calls      {} allocations and frees, {whole}.{millionths:06} os calls per call",
        c.calls
    )
}

/// `os / calls` as a whole part and millionths (0 when there were no calls).
fn per_call(os: usize, calls: usize) -> (u128, u128) {
    if calls == 0 {
        return (0, 0);
    }
    let scaled = os as u128 * 1_000_000 / calls as u128;
    (scaled / 1_000_000, scaled % 1_000_000)
}

/// The exit hook: `.fini_array` rather than `atexit`, which may allocate.
extern "C" fn at_exit() {
    if enabled() {
        print_summary_to(summary_fd());
    }
}

#[used]
#[link_section = ".fini_array"]
static AT_EXIT: extern "C" fn() = at_exit;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_has_six_decimals() {
        assert_eq!(per_call(3, 1_000_000), (0, 3));
        assert_eq!(per_call(5, 2), (2, 500_000));
        assert_eq!(per_call(5, 0), (0, 0));
    }

    #[test]
    fn summary_names_every_counter() {
        let mut m = Message::<1024>::new();
        let s = hakmem_core::stats();
        write_summary(&mut m, &counts(&s), &s).unwrap();
        let text = core::str::from_utf8(m.as_bytes()).unwrap();
        for word in [
            "in use", "peak", "mapped", "mmap", "munmap", "madvise", "per call",
        ] {
            assert!(text.contains(word), "{word} missing from {text}");
        }
    }

    #[test]
    fn class_line_says_where_the_bytes_are() {
        let u = hakmem_core::ClassUsage {
            block_size: 112,
            slabs: 64 * 1024,
            live: 40 * 1024,
            thread_caches: 8 * 1024,
            depot: 2 * 1024,
            remote: 1024,
            free_in_slabs: 5 * 1024,
            uncarved: 10 * 1024,
        };
        let mut m = Message::<256>::new();
        write_class(&mut m, &u).unwrap();
        let text = core::str::from_utf8(m.as_bytes()).unwrap();
        assert_eq!(
            text,
            "hakmem:       112 B blocks: 40 KiB live, 8 in thread caches, 2 in the depot, 1 on remote lists, 5 free, 10 uncarved, of 64 KiB in slabs\n"
        );
    }
}
