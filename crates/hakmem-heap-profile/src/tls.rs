//! The profiler's per-thread state: the sampling countdown, the generator, the busy flag.
//!
//! - By default a `std` thread-local with a constant initializer and no destructor: in an
//!   executable (a Rust program with the `heap-profile` feature) the countdown is then one
//!   `sub` from a `%fs`-relative address.
//! - With the `initial-exec-tls` feature (which `libhakmem.so` turns on): an
//!   initial-exec slot declared in assembly, as hakmem-core's thread cache is, because in
//!   a shared object a `std` thread-local is reached through `__tls_get_addr`, a call on
//!   every `malloc` while profiling. Zero at thread start, which is the initial state.

use core::cell::Cell;

/// `countdown` is the first field: the initial-exec `count_down` reaches it at offset 0.
#[repr(C)]
pub struct State {
    /// Bytes left before the next sample; zero at thread start, so the first allocation
    /// of a thread takes the slow path, which draws the first interval.
    pub countdown: Cell<isize>,
    /// The thread's generator (xorshift64*); zero until the first draw.
    pub rng: Cell<u64>,
    /// Set while this thread samples or writes a profile: its allocations are plain.
    pub busy: Cell<bool>,
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
                countdown: Cell::new(0),
                rng: Cell::new(0),
                busy: Cell::new(false),
            }
        };
    }

    #[inline(always)]
    pub fn with<R>(f: impl FnOnce(&State) -> R) -> R {
        STATE.with(f)
    }

    /// Subtract `size` from the countdown; whether it went below zero.
    #[inline(always)]
    pub fn count_down(size: usize) -> bool {
        with(|t| {
            let left = t.countdown.get().wrapping_sub(size as isize);
            t.countdown.set(left);
            left < 0
        })
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

    /// Subtract `size` from the countdown; whether it went below zero. Three instructions
    /// (the slot's offset, a subtraction from `fs`-relative memory, a branch on the sign)
    /// where going through [`with`] takes six: it runs on every `malloc`.
    #[inline(always)]
    pub fn count_down(size: usize) -> bool {
        // SAFETY: subtracts from the calling thread's countdown (the first field of its
        // `State`, at offset 0 of the slot), which only this thread touches, and no
        // reference to it is alive across the asm (`with`'s end before it returns).
        unsafe {
            core::arch::asm!(
                "mov {off}, qword ptr [rip + hakmem_heap_profile_state@GOTTPOFF]",
                "sub qword ptr fs:[{off}], {size}",
                "js {ran_out}",
                off = out(reg) _,
                size = in(reg) size,
                ran_out = label { return true; },
                options(nostack),
            );
        }
        false
    }
}

pub use imp::{count_down, with};
