//! The heap profiler of hakmem: which stacks allocated the memory a program holds, and
//! how much they allocated in total, at a cost low enough to leave on.
//!
//! # Sampling
//!
//! Allocated bytes form a Poisson process: each thread counts down a random number of
//! bytes drawn from an exponential distribution of mean `interval` (default 512 KiB), and
//! the allocation that takes the count below zero is sampled ([`should_sample`]: one
//! subtraction and one branch on the allocation path). An allocation of `size` bytes is
//! therefore sampled with probability `p = 1 - exp(-size / interval)`, and a sample stands
//! for `1 / p` allocations and `size / p` bytes: the totals per stack are unbiased
//! estimates, for small and large blocks alike (tcmalloc and jemalloc sample the same way).
//!
//! # Sampled blocks
//!
//! A sampled block is not a hakmem block: it lives in the profiler's own arena, one
//! address reservation split into a region per size class ([`arena`]). So a free knows a
//! sampled block by its address ([`is_sampled`]: one subtraction and one compare), needs
//! no header, and a live sample costs its class's rounding and 8 bytes of metadata.
//!
//! - C's `free` needs no new test on its fast path: an arena block is not in a hakmem
//!   chunk, so the fast path misses and the slow path asks [`is_sampled`] first.
//! - Rust's `dealloc` (and C++ sized `delete`) tests [`is_sampled`] before anything else.
//!
//! # Stacks
//!
//! Captured in the allocating thread from `.eh_frame` (present in default Rust release
//! builds and in `gcc -O2` C): on x86-64 Linux by a cached DWARF CFI unwinder (`cfi`:
//! each return address's rule computed once with `gimli`, then a hash probe per frame),
//! elsewhere and for frames it does not follow by libgcc's `_Unwind_Backtrace`
//! ([`unwind`]). Neither allocates; a thread-local flag makes any allocation made while
//! sampling, or while writing a profile, plain (never sampled, never recursing). Stacks
//! are interned in a fixed table mapped with `mmap` ([`table`]), which keeps per stack
//! the estimated allocated and in-use objects and bytes.
//!
//! # Output
//!
//! Written outside the allocation path by [`dump`] / [`write_pprof`] (pprof protobuf,
//! gzipped, symbolized in process), [`write_flamegraph`] (SVG) and [`report`] (the top
//! stacks as text: at exit, the leak report).
#![deny(unsafe_op_in_unsafe_fn)]

pub mod arena;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod cfi;
pub mod decode;
mod flame;
#[cfg(target_arch = "x86_64")]
mod free_asm;
mod lock;
mod math;
mod mem;
mod pprof;
mod symbols;
pub mod table;
mod tls;
pub mod unwind;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

pub use flame::Measure;
pub use symbols::{Frame, Snapshot, StackStat};

/// The mean number of bytes between two samples unless told otherwise.
pub const DEFAULT_INTERVAL: usize = 512 * 1024;

/// Whether allocations are being sampled.
static RUNNING: AtomicBool = AtomicBool::new(false);
/// Every interval sampling has run with (0: an unused entry), and the index of the current
/// one (the mean sampling interval is `INTERVALS[INTERVAL_INDEX]`, [`DEFAULT_INTERVAL`]
/// before the first [`start`]). A sampled block carries its interval's index beside its
/// stack id ([`tag`]), so that its free subtracts the weight it was
/// added with, whatever the interval is by then. Past 256 distinct intervals the last
/// entry is reused, and blocks sampled with the one it held are weighted with the new.
static INTERVALS: [AtomicUsize; 256] = [const { AtomicUsize::new(0) }; 256];
static INTERVAL_INDEX: AtomicUsize = AtomicUsize::new(0);
const _: () = assert!(table::MAX_STACKS <= 1 << 16 && 16 + 8 <= arena::TAG_BITS);

/// Options of [`start`].
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Mean bytes allocated between two samples (at least 1).
    pub interval: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            interval: DEFAULT_INTERVAL,
        }
    }
}

/// Start sampling (again): allocations from now on are sampled every `interval` bytes on
/// average: at once on the calling thread, and on every other thread from its first
/// countdown that runs out after this, which is within [`IDLE_COUNTDOWN`] bytes of its
/// allocations. Fails only if the stack table or the arena cannot be mapped.
pub fn start(options: Options) -> io::Result<()> {
    let _busy = Busy::enter();
    table::init()?;
    arena::init()?;
    register_fork_handlers();
    let interval = options.interval.max(1);
    INTERVAL_INDEX.store(interval_index(interval), Relaxed);
    RUNNING.store(true, Relaxed);
    // This thread's next allocation draws its first interval.
    tls::set_countdown(0);
    Ok(())
}

/// A sampled block's arena tag: its stack id (16 bits) and its interval's index (8).
fn tag(stack: u32, index: usize) -> u32 {
    stack | (index as u32) << 16
}

/// The stack id and interval index of a [`tag`].
fn untag(tag: u32) -> (u32, usize) {
    (tag & 0xffff, (tag >> 16) as usize & 0xff)
}

/// The index of `interval` in [`INTERVALS`], entered there if it is new.
fn interval_index(interval: usize) -> usize {
    let last = INTERVALS.len() - 1;
    for (i, e) in INTERVALS.iter().enumerate() {
        match e.compare_exchange(0, interval, Relaxed, Relaxed) {
            Ok(_) => return i,
            Err(v) if v == interval => return i,
            Err(_) => {}
        }
    }
    INTERVALS[last].store(interval, Relaxed);
    last
}

/// Stop sampling. What was recorded stays (for [`dump`], [`snapshot`]); frees of blocks
/// sampled before are still noticed.
pub fn stop() {
    RUNNING.store(false, Relaxed);
}

/// Whether allocations are being sampled.
pub fn is_running() -> bool {
    RUNNING.load(Relaxed)
}

/// The mean sampling interval in bytes.
pub fn interval() -> usize {
    match INTERVALS[INTERVAL_INDEX.load(Relaxed)].load(Relaxed) {
        0 => DEFAULT_INTERVAL,
        i => i,
    }
}

/// A random 64-bit secret with its top bit set (never zero).
fn secret() -> u64 {
    let mut v = 0u64;
    // SAFETY: writes at most 8 bytes into `v`; getrandom does not allocate.
    let n = unsafe { libc::getrandom((&mut v as *mut u64).cast(), 8, libc::GRND_NONBLOCK) };
    if n != 8 {
        v = (&v as *const u64 as u64) ^ now_nanos().rotate_left(17) ^ 0x9E37_79B9_7F4A_7C15;
    }
    v | 1 << 63
}

fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Count `size` bytes against the thread's countdown; true when the caller must take the
/// slow path ([`alloc_slow`]), which decides whether to sample. Two instructions when
/// inlined into an executable (a subtraction from a thread-local and a branch).
#[inline(always)]
pub fn should_sample(size: usize) -> bool {
    tls::count_down(size)
}

/// The next pseudo-random 64-bit number of this thread.
fn next_random() -> u64 {
    let mut x = tls::with(|t| t.rng.get());
    if x == 0 {
        x = secret() ^ (&x as *const u64 as u64);
    }
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    tls::with(|t| t.rng.set(x));
    x.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// An exponentially distributed number of bytes with mean [`interval`].
fn draw_interval() -> isize {
    // Uniform in (0, 1]: never zero, so the logarithm is finite.
    let u = ((next_random() >> 11) + 1) as f64 / (1u64 << 53) as f64;
    let bytes = -math::ln(u) * interval() as f64;
    bytes.min((isize::MAX / 2) as f64) as isize
}

/// The countdown a thread re-arms with while sampling is off: long, so that a program
/// that never samples rarely leaves the allocation fast path, and drawn from no
/// distribution, since nothing is sampled. c-mid-large (8..32 KiB blocks) spent 4.5 % of
/// its time drawing intervals that sampled nothing with 512 KiB here (`perf record`).
pub const IDLE_COUNTDOWN: isize = 4 << 20;

/// After [`should_sample`] said so: re-arm the countdown and say whether this allocation
/// of `size` bytes is sampled.
#[cold]
#[inline(never)]
fn decide(size: usize) -> bool {
    if !RUNNING.load(Relaxed) {
        tls::with(|t| t.idle.set(true));
        tls::set_countdown(IDLE_COUNTDOWN);
        return false;
    }
    if tls::with(|t| t.rng.get() == 0 || t.idle.replace(false)) {
        // The thread's first slow path since sampling started: the countdown that ran
        // out was no draw, so draw one from here.
        let left = draw_interval().saturating_sub(size as isize);
        tls::set_countdown(left);
        if left >= 0 {
            return false;
        }
    }
    let next = draw_interval();
    tls::set_countdown(next);
    !is_busy()
}

/// The weight of a sample of `size` bytes at `interval`: the inverse of its probability,
/// `1 / (1 - e^(-size / interval))`, in plain arithmetic
/// ([`math::inverse_one_minus_exp_neg`]).
fn sample_weight(size: usize, interval: usize) -> f64 {
    let w = math::inverse_one_minus_exp_neg(size.max(1) as f64, interval.max(1) as f64);
    w.min(1.0 / f64::MIN_POSITIVE)
}

/// Marks the thread busy for the guard's life (re-entrant).
pub struct Busy(bool);

impl Busy {
    pub fn enter() -> Busy {
        Busy(tls::with(|t| t.busy.replace(true)))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let was = self.0;
        tls::with(|t| t.busy.set(was));
    }
}

/// Whether this thread is sampling or writing a profile.
pub fn is_busy() -> bool {
    tls::with(|t| t.busy.get())
}

/// The slow path of an allocation after [`should_sample`]: a sampled block, or
/// `plain(size, align)` (also when memory for a sampled block is refused).
#[cold]
#[inline(never)]
pub fn alloc_slow(
    size: usize,
    align: usize,
    zeroed: bool,
    plain: impl FnOnce(usize, usize) -> *mut u8,
) -> *mut u8 {
    if decide(size) {
        let p = alloc_sampled(size, align, zeroed);
        if !p.is_null() {
            return p;
        }
    }
    plain(size, align)
}

/// A sampled block of `size` bytes aligned to `align`, its stack recorded; null when the
/// arena has no slot for it (over 17.5 GiB, or its class full): then the caller allocates a
/// plain block.
fn alloc_sampled(size: usize, align: usize, zeroed: bool) -> *mut u8 {
    let _busy = Busy::enter();
    let Some(block) = arena::alloc(size, align) else {
        return core::ptr::null_mut();
    };
    if zeroed && !block.zero {
        // SAFETY: the slot holds at least `size` bytes and is ours.
        unsafe { block.ptr.write_bytes(0, size) };
    }
    let mut frames = unwind::Frames::new();
    frames.capture();
    let index = INTERVAL_INDEX.load(Relaxed);
    let w = sample_weight(size, INTERVALS[index].load(Relaxed));
    let stack = record_stack(&frames, w, size as f64 * w);
    arena::set_tag(block.ptr, tag(stack, index));
    block.ptr
}

/// Note a sample at `frames` in the stack table; its stack's id. A thread that samples
/// from the stack of its last sample again (its unwinder recalled the same walk) reuses
/// that stack's id, without hashing the frames and looking them up in the table.
fn record_stack(frames: &unwind::Frames, objects: f64, bytes: f64) -> u32 {
    let last = tls::with(|t| t.last_stack.get());
    match frames.walk() {
        Some(walk) if walk == last.0 => {
            table::record_alloc_at(last.1, objects, bytes);
            last.1
        }
        walk => {
            let id = table::record_alloc(frames.as_slice(), objects, bytes);
            if let Some(walk) = walk {
                tls::with(|t| t.last_stack.set((walk, id)));
            }
            id
        }
    }
}

/// Whether the block `p` is a sampled block: whether it lies in the profiler's arena.
/// Any pointer may be asked (nothing is read); false for every pointer until the first
/// [`start`].
#[inline(always)]
pub fn is_sampled(p: *const u8) -> bool {
    arena::contains(p)
}

/// Free `p` if it is a sampled block; whether it was. On x86-64 with no call the
/// compiler sees (see `free_asm.rs`), so that the Rust `dealloc` stays small enough for
/// LTO to inline.
///
/// # Safety
/// `p` is a live block of hakmem's or a sampled one, which the caller gives up if this
/// returns true.
#[inline(always)]
pub unsafe fn free_if_sampled(p: *mut u8) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: by the caller.
        unsafe { free_asm::free_if_sampled(p) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        if !is_sampled(p) {
            return false;
        }
        // SAFETY: by the caller, a live sampled block it gives up.
        unsafe { free_sampled(p) };
        true
    }
}

/// Free a sampled block, noting it in its stack's in-use figures.
///
/// # Safety
/// `p` is a live sampled block ([`is_sampled`]) the caller gives up.
#[cold]
#[inline(never)]
pub unsafe fn free_sampled(p: *mut u8) {
    let (size, tag) = arena::free(p);
    let (stack, index) = untag(tag);
    let w = sample_weight(size, INTERVALS[index].load(Relaxed));
    table::record_free(stack, w, size as f64 * w);
}

/// The bytes usable at a sampled block (its size class, for the block's whole life).
///
/// # Safety
/// `p` is a live sampled block.
pub unsafe fn usable_size_sampled(p: *mut u8) -> usize {
    arena::usable_size(p)
}

/// The size a sampled block was requested with.
///
/// # Safety
/// `p` is a live sampled block.
pub unsafe fn requested_size(p: *mut u8) -> usize {
    arena::info(p).0
}

/// Install fork handlers once: the stack table's lock is taken before `fork` and released
/// on both sides, so a child never inherits it held.
fn register_fork_handlers() {
    static DONE: AtomicBool = AtomicBool::new(false);
    if DONE.swap(true, Relaxed) {
        return;
    }
    // No code holds one of these locks while taking another, so any order is free of
    // deadlock.
    extern "C" fn prepare() {
        unwind::LOADER.hold();
        table::lock_for_fork();
        arena::hold_for_fork();
    }
    extern "C" fn release() {
        // SAFETY: `prepare` took the three locks in this thread (or its parent copy),
        // and holds no reference into what they guard.
        unsafe {
            arena::release_after_fork();
            table::unlock_after_fork();
            unwind::LOADER.release();
        }
    }
    // SAFETY: the handlers only take and release the loader guard's, the table's and the
    // arena's locks.
    unsafe { libc::pthread_atfork(Some(prepare), Some(release), Some(release)) };
}

/// The recorded stacks, symbolized: estimated allocated and in-use objects and bytes per
/// stack, largest in-use first.
pub fn snapshot() -> Snapshot {
    let _busy = Busy::enter();
    symbols::snapshot()
}

/// Write the pprof profile (gzipped protobuf; sample types `alloc_objects`,
/// `alloc_space`, `inuse_objects`, `inuse_space`) of `snap` to `out`.
pub fn write_pprof(snap: &Snapshot, out: impl io::Write) -> io::Result<()> {
    let _busy = Busy::enter();
    pprof::write(snap, interval(), out)
}

/// Write a flame graph (SVG) of `snap`'s in-use or allocated bytes to `out`.
pub fn write_flamegraph(snap: &Snapshot, measure: Measure, out: impl io::Write) -> io::Result<()> {
    let _busy = Busy::enter();
    flame::write(snap, measure, out)
}

/// The top `n` stacks by in-use bytes, as text (at exit: the leak report), then the top
/// `n` by allocated bytes.
pub fn report(snap: &Snapshot, n: usize) -> String {
    let _busy = Busy::enter();
    symbols::report(snap, n)
}

/// The files [`dump`] writes for `prefix`: `prefix.pb.gz`, `prefix.svg` (in-use bytes),
/// `prefix.alloc.svg` (allocated bytes) and `prefix.txt` ([`report`]).
pub fn output_paths(prefix: &Path) -> [PathBuf; 4] {
    let s = prefix.as_os_str().to_string_lossy();
    let base = s.strip_suffix(".pb.gz").unwrap_or(&s).to_string();
    [".pb.gz", ".svg", ".alloc.svg", ".txt"].map(|ext| PathBuf::from(format!("{base}{ext}")))
}

/// Take a snapshot and write it as every file of [`output_paths`]; returns the paths.
/// `prefix` may end in `.pb.gz`.
///
/// `%p` in `prefix` stands for the process id. Each file is written under a temporary
/// name and renamed, so that processes sharing a prefix (a shell script's children, say)
/// never leave a torn file: the last to finish wins.
pub fn dump(prefix: impl AsRef<Path>) -> io::Result<[PathBuf; 4]> {
    let _busy = Busy::enter();
    let pid = std::process::id();
    let prefix = prefix
        .as_ref()
        .to_string_lossy()
        .replace("%p", &pid.to_string());
    let paths = output_paths(Path::new(&prefix));
    let snap = snapshot();
    let write = |path: &PathBuf,
                 f: &dyn Fn(&mut io::BufWriter<std::fs::File>) -> io::Result<()>| {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".tmp{pid}"));
        let mut w = io::BufWriter::new(std::fs::File::create(&tmp)?);
        f(&mut w)?;
        io::Write::flush(&mut w)?;
        drop(w);
        std::fs::rename(&tmp, path)
    };
    write(&paths[0], &|w| write_pprof(&snap, w))?;
    write(&paths[1], &|w| write_flamegraph(&snap, Measure::InUse, w))?;
    write(&paths[2], &|w| {
        write_flamegraph(&snap, Measure::Allocated, w)
    })?;
    write(&paths[3], &|w| {
        io::Write::write_all(w, report(&snap, 20).as_bytes())
    })?;
    Ok(paths)
}

/// Forget every recorded figure (stacks stay interned). Blocks sampled before and freed
/// afterwards then count negative in-use; meant for tests and benchmarks between phases.
pub fn reset() {
    table::reset();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sampling off, a countdown that runs out re-arms for [`IDLE_COUNTDOWN`] bytes and
    /// draws nothing; sampling on again, the first countdown to run out starts a fresh
    /// draw instead of sampling at the idle countdown's end. No other test of this crate
    /// takes [`decide`] or sets [`RUNNING`].
    #[test]
    fn sampling_off_rearms_long_without_a_draw_and_on_again_draws_afresh() {
        std::thread::spawn(|| {
            RUNNING.store(true, Relaxed);
            assert!(
                !decide(1),
                "a thread's first slow path draws, it does not sample"
            );
            let rng = tls::with(|t| t.rng.get());
            assert_ne!(rng, 0);

            RUNNING.store(false, Relaxed);
            assert!(!decide(1 << 30));
            assert_eq!(tls::with(|t| t.rng.get()), rng, "no interval was drawn");
            assert!(!should_sample(IDLE_COUNTDOWN as usize - 1));
            assert!(should_sample(2));

            RUNNING.store(true, Relaxed);
            assert!(
                !decide(1),
                "the end of an idle countdown is no sample point"
            );
            assert!(!tls::with(|t| t.idle.get()));
            RUNNING.store(false, Relaxed);
        })
        .join()
        .unwrap();
    }
}
