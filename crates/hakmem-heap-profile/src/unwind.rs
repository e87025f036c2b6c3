//! Stack capture from the call frame information of `.eh_frame`, which Rust release builds
//! (no frame pointers) and `gcc -O2` C programs both carry: on x86-64 Linux by the cached
//! unwinder of `cfi.rs`, elsewhere, and for stacks with frames that one does not
//! follow, by libgcc's `_Unwind_Backtrace`, which does not call `malloc` (see
//! docs/PROFILING.md for the check): `libgcc_s`'s in a Rust program (its `std` links it),
//! in `libhakmem.so` on GNU/Linux a copy of its own, linked in from `libgcc_eh.a`
//! (hakmem-cabi's build.rs), so that preloading hakmem does not load `libgcc_s`. Should
//! any unwinder allocate, the caller is marked busy ([`crate::Busy`]), so that
//! allocation is plain.
//!
//! The return addresses go to a fixed array on the caller's stack: nothing is allocated.

use core::ffi::{c_int, c_void};
use core::mem::MaybeUninit;

/// Held around every call of the profiler's that takes the dynamic loader's lock
/// (`dl_iterate_phdr`, libgcc's unwinder, which calls it), and by the fork handlers
/// (`crate::register_fork_handlers`): so no thread of ours is inside the loader when
/// another thread forks. glibc does not reset that lock in a child, and a child forked
/// while a sampling thread held it waited for it forever at its own first sample.
pub static LOADER: crate::lock::Lock<()> = crate::lock::Lock::new(());

/// Deepest stack kept (innermost frames first); deeper stacks are cut at the root end.
pub const MAX_DEPTH: usize = 128;

#[repr(C)]
struct UnwindContext {
    _private: [u8; 0],
}

const URC_NO_REASON: c_int = 0;
const URC_END_OF_STACK: c_int = 5;

type TraceFn = extern "C" fn(*mut UnwindContext, *mut c_void) -> c_int;

extern "C" {
    fn _Unwind_Backtrace(trace: TraceFn, arg: *mut c_void) -> c_int;
    fn _Unwind_GetIP(ctx: *mut UnwindContext) -> usize;
}

/// Return addresses of a stack, innermost first: `ips[..len]` written, the rest not
/// (a sample does not pay for clearing 1 KiB it mostly does not use).
pub struct Frames {
    ips: [MaybeUninit<u64>; MAX_DEPTH],
    len: usize,
    /// Which of the thread's walks found these frames ([`Frames::walk`]), 0 if unknown.
    walk: u64,
}

impl Default for Frames {
    fn default() -> Self {
        Self::new()
    }
}

impl Frames {
    pub const fn new() -> Self {
        Frames {
            ips: [const { MaybeUninit::uninit() }; MAX_DEPTH],
            len: 0,
            walk: 0,
        }
    }

    /// Capture the calling thread's stack, from the caller of this function outwards:
    /// with the cached unwinder (`cfi.rs`) on x86-64 Linux, with libgcc where that
    /// one cannot follow a frame (and on other targets).
    #[inline(never)]
    pub fn capture(&mut self) {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        if let Some((len, walk)) = crate::cfi::walk(crate::cfi::Regs::here(), &mut self.ips) {
            self.len = len;
            self.walk = walk;
            return;
        }
        self.capture_libgcc();
    }

    /// [`Frames::capture`] with libgcc's `_Unwind_Backtrace`. Inlined, so that the first
    /// frame it reports is `capture`'s, which it drops.
    #[inline(always)]
    pub fn capture_libgcc(&mut self) {
        self.len = 0;
        self.walk = 0;
        extern "C" fn step(ctx: *mut UnwindContext, arg: *mut c_void) -> c_int {
            // SAFETY: `arg` is the `Frames` passed below, alive for the whole walk.
            let frames = unsafe { &mut *arg.cast::<Frames>() };
            // SAFETY: `ctx` is the context the unwinder passes to this callback.
            let ip = unsafe { _Unwind_GetIP(ctx) } as u64;
            if ip == 0 {
                return URC_END_OF_STACK;
            }
            frames.ips[frames.len].write(ip);
            frames.len += 1;
            if frames.len == MAX_DEPTH {
                URC_END_OF_STACK
            } else {
                URC_NO_REASON
            }
        }
        // Held and released around the call, not through a closure: a frame more here
        // would be reported as the caller's.
        LOADER.hold();
        // SAFETY: `step` matches the callback type; `self` outlives the call.
        unsafe { _Unwind_Backtrace(step, (self as *mut Frames).cast()) };
        // SAFETY: held just above, by this thread, and no reference into its `()` lives.
        unsafe { LOADER.release() };
        // The first frame is `capture` itself.
        if self.len > 0 {
            self.ips.copy_within(1..self.len, 0);
            self.len -= 1;
        }
    }

    /// A number such that two captures of one thread with the same number found the same
    /// frames (the cached unwinder recalled the first walk for the second); `None` when
    /// not known.
    pub fn walk(&self) -> Option<u64> {
        (self.walk != 0).then_some(self.walk)
    }

    pub fn as_slice(&self) -> &[u64] {
        // SAFETY: `ips[..len]` are written (the type's invariant); `MaybeUninit<u64>`
        // has the layout of `u64`.
        unsafe { core::slice::from_raw_parts(self.ips.as_ptr().cast(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::Frames;

    #[inline(never)]
    fn nest(depth: usize, f: &mut dyn FnMut()) {
        if depth == 0 {
            f();
        } else {
            nest(core::hint::black_box(depth - 1), f);
        }
        core::hint::black_box(depth);
    }

    #[inline(never)]
    fn libgcc(frames: &mut Frames) {
        frames.capture_libgcc();
    }

    /// The cached unwinder follows every frame of a test thread's stack and finds the
    /// same return addresses as libgcc, the first time and from the cache.
    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn cached_unwinder_agrees_with_libgcc() {
        let _one = crate::cfi::tests::WALKS.lock().unwrap();
        for _ in 0..2 {
            let (mut ours, mut theirs) = (Frames::new(), Frames::new());
            let mut followed = None;
            nest(6, &mut || {
                let mut ips = [core::mem::MaybeUninit::uninit(); super::MAX_DEPTH];
                followed = crate::cfi::walk(crate::cfi::Regs::here(), &mut ips).map(|(n, _)| n);
                ours.capture();
                libgcc(&mut theirs);
                // Not a tail call: the closure's frame stays on both stacks.
                core::hint::black_box(&mut theirs);
            });
            assert!(followed.is_some_and(|n| n >= 8), "{followed:?}");
            let (o, t) = (ours.as_slice(), theirs.as_slice());
            // The first return address is into the closure, from two different calls.
            assert!(o.len() >= 8, "{o:x?}");
            assert_eq!(o[1..], t[1..]);
        }
    }
}
