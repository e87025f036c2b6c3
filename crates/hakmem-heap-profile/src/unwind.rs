//! Stack capture with libgcc's `_Unwind_Backtrace`: it walks the stack with the call frame
//! information of `.eh_frame`, which Rust release builds (no frame pointers) and
//! `gcc -O2` C programs both carry, and which every process that links `libgcc_s` (Rust's
//! `std` does) can use. It finds each module's `.eh_frame_hdr` with `dl_iterate_phdr`
//! and does not call `malloc` (see docs/PROFILING.md for the check). Should any unwinder
//! allocate, the caller is marked busy ([`crate::Busy`]), so that allocation is plain.
//!
//! The return addresses go to a fixed array on the caller's stack: nothing is allocated.

use core::ffi::{c_int, c_void};

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

/// Return addresses of a stack, innermost first.
pub struct Frames {
    ips: [u64; MAX_DEPTH],
    len: usize,
}

impl Default for Frames {
    fn default() -> Self {
        Self::new()
    }
}

impl Frames {
    pub const fn new() -> Self {
        Frames {
            ips: [0; MAX_DEPTH],
            len: 0,
        }
    }

    /// Capture the calling thread's stack, from the caller of this function outwards.
    #[inline(never)]
    pub fn capture(&mut self) {
        self.len = 0;
        extern "C" fn step(ctx: *mut UnwindContext, arg: *mut c_void) -> c_int {
            // SAFETY: `arg` is the `Frames` passed below, alive for the whole walk.
            let frames = unsafe { &mut *arg.cast::<Frames>() };
            // SAFETY: `ctx` is the context the unwinder passes to this callback.
            let ip = unsafe { _Unwind_GetIP(ctx) } as u64;
            if ip == 0 {
                return URC_END_OF_STACK;
            }
            frames.ips[frames.len] = ip;
            frames.len += 1;
            if frames.len == MAX_DEPTH {
                URC_END_OF_STACK
            } else {
                URC_NO_REASON
            }
        }
        // SAFETY: `step` matches the callback type; `self` outlives the call.
        unsafe { _Unwind_Backtrace(step, (self as *mut Frames).cast()) };
        // The first frame is this function itself.
        if self.len > 0 {
            self.ips.copy_within(1..self.len, 0);
            self.len -= 1;
        }
    }

    pub fn as_slice(&self) -> &[u64] {
        &self.ips[..self.len]
    }
}
