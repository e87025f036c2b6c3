//! The profiler's per-thread state: the generator and the busy flag. The sampling
//! countdown, which every allocation takes, is not here but in hakmem-core's thread-cache
//! slot ([`count_down`]): the allocation fast path computes that slot's address anyway,
//! so the countdown costs a `sub` from memory and a branch, with no thread-local address
//! of its own.
//!
//! - By default a `std` thread-local with a constant initializer and no destructor.
//! - With the `initial-exec-tls` feature (which `libhakmem.so` turns on): an
//!   initial-exec slot declared in assembly, as hakmem-core's thread cache is, because in
//!   a shared object a `std` thread-local is reached through `__tls_get_addr`, which may
//!   allocate. Zero at thread start, which is the initial state.

use core::cell::Cell;

/// Subtract `size` from the calling thread's countdown; whether it went below zero.
#[inline(always)]
pub fn count_down(size: usize) -> bool {
    hakmem_core::sample_count_down(size)
}

/// Set the calling thread's countdown to `bytes`.
pub fn set_countdown(bytes: isize) {
    hakmem_core::set_sample_countdown(bytes);
}

/// A thread's state; all zero is the initial one.
#[repr(C)]
pub struct State {
    /// The thread's generator (xorshift64*); zero until the first draw.
    pub rng: Cell<u64>,
    /// Set while this thread samples or writes a profile: its allocations are plain.
    pub busy: Cell<bool>,
    /// Set when the countdown was last armed while sampling was off
    /// ([`crate::IDLE_COUNTDOWN`]), so its end is no draw's.
    pub idle: Cell<bool>,
    /// The walk ([`crate::unwind::Frames::walk`]) of this thread's last sample, and its
    /// stack's id in the table (`(0, _)` before the first).
    pub last_stack: Cell<(u64, u32)>,
    /// What the cached unwinder keeps from one stack walk of this thread to its next.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    pub walk: crate::cfi::ThreadWalk,
}

#[cfg(not(all(
    feature = "initial-exec-tls",
    target_arch = "x86_64",
    target_os = "linux"
)))]
mod imp {
    use super::State;
    use core::cell::Cell;

    thread_local! {
        static STATE: State = const {
            State {
                rng: Cell::new(0),
                busy: Cell::new(false),
                idle: Cell::new(false),
                last_stack: Cell::new((0, 0)),
                #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
                walk: crate::cfi::ThreadWalk::new(),
            }
        };
    }

    #[inline(always)]
    pub fn with<R>(f: impl FnOnce(&State) -> R) -> R {
        STATE.with(f)
    }
}

#[cfg(all(
    feature = "initial-exec-tls",
    target_arch = "x86_64",
    target_os = "linux"
))]
mod imp {
    use super::State;

    core::arch::global_asm!(
        ".pushsection .tbss,\"awT\",@nobits",
        ".p2align 3",
        ".globl hakmem_heap_profile_state",
        ".hidden hakmem_heap_profile_state",
        ".type hakmem_heap_profile_state,@object",
        ".size hakmem_heap_profile_state, {size}",
        "hakmem_heap_profile_state:",
        ".zero {size}",
        ".popsection",
        size = const core::mem::size_of::<State>(),
    );

    #[inline(always)]
    pub fn with<R>(f: impl FnOnce(&State) -> R) -> R {
        let p: *const State;
        // SAFETY: reads the thread pointer and the slot's offset; no memory is written.
        // The result is constant for the thread's life, hence `pure`.
        unsafe {
            core::arch::asm!(
                "mov {p}, qword ptr fs:[0]",
                "add {p}, qword ptr [rip + hakmem_heap_profile_state@GOTTPOFF]",
                p = out(reg) p,
                options(pure, readonly, nostack),
            );
        }
        // SAFETY: the calling thread's slot, zero-initialized (a valid `State`: cells of
        // plain integers and a bool), alive as long as the thread; only this thread
        // touches it, and the reference does not outlive `f`.
        f(unsafe { &*p })
    }
}

pub use imp::with;
