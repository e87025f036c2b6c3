//! Where the calling thread's [`ThreadCache`] lives: one direct thread-local access.
//!
//! - With the `nightly` feature: a `#[thread_local]` static.
//! - Under Miri or loom (`cfg(miri)`, `cfg(loom)`), which run no inline assembly: std's
//!   `thread_local!` (a const-initialised cell with no destructor, so it stays valid while
//!   the thread-exit hook runs).
//! - Otherwise, on x86-64 and AArch64 Linux (glibc or musl): an *initial-exec* TLS slot
//!   declared in assembly. In an executable the linker relaxes it to
//!   `mov %fs:0,%rax; add $off,%rax` (AArch64: `mrs tpidr_el0` plus a constant); in a
//!   shared object (the C ABI cdylib) it stays one GOT load and one thread-pointer add,
//!   never a call to `__tls_get_addr` (which glibc forbids a malloc to need, and which
//!   may itself allocate). The price, as for every initial-exec library: `dlopen` of `libhakmem.so`
//!   into a running process can fail with "cannot allocate memory in static TLS block";
//!   `LD_PRELOAD` and linking at build time work.
//!
//! The slot is zero at thread start, which is a valid empty cache: every bin empty with
//! capacity 0, so the first allocation and the first free take the slow path, which sets
//! the thread up. The fast path never asks "initialised?".

use crate::thread_cache::ThreadCache;

#[cfg(feature = "nightly")]
mod imp {
    use super::ThreadCache;

    #[thread_local]
    static mut CACHE: ThreadCache = ThreadCache::EMPTY;

    #[inline(always)]
    pub fn cache() -> *mut ThreadCache {
        core::ptr::addr_of_mut!(CACHE)
    }
}

#[cfg(all(not(feature = "nightly"), any(miri, loom)))]
mod imp {
    extern crate std;

    use super::ThreadCache;
    use core::cell::UnsafeCell;

    std::thread_local! {
        static CACHE: UnsafeCell<ThreadCache> = const { UnsafeCell::new(ThreadCache::EMPTY) };
    }

    #[inline(always)]
    pub fn cache() -> *mut ThreadCache {
        CACHE.with(UnsafeCell::get)
    }
}

#[cfg(all(
    not(feature = "nightly"),
    not(any(miri, loom)),
    any(target_arch = "x86_64", target_arch = "aarch64"),
    target_os = "linux"
))]
mod imp {
    use super::ThreadCache;

    // The slot: `hakmem_thread_cache` in `.tbss` (zero at thread start), hidden, so a
    // shared object reaches it through its own GOT entry. Section and symbol types are
    // written with `%`, which both the x86-64 and the AArch64 assembler accept (`@`
    // starts a comment on some ARM assemblers).
    core::arch::global_asm!(
        ".pushsection .tbss,\"awT\",%nobits",
        ".p2align 6",
        ".globl hakmem_thread_cache",
        ".hidden hakmem_thread_cache",
        ".type hakmem_thread_cache,%object",
        ".size hakmem_thread_cache, {size}",
        "hakmem_thread_cache:",
        ".zero {size}",
        ".popsection",
        size = const core::mem::size_of::<ThreadCache>(),
    );

    #[inline(always)]
    pub fn cache() -> *mut ThreadCache {
        let p: *mut ThreadCache;
        // SAFETY: reads the thread pointer and the slot's offset from the GOT (the
        // initial-exec sequence, which an executable's linker relaxes to a constant); no
        // memory is written. The result is constant for the thread's life, hence `pure`.
        unsafe {
            #[cfg(target_arch = "x86_64")]
            core::arch::asm!(
                "mov {p}, qword ptr fs:[0]",
                "add {p}, qword ptr [rip + hakmem_thread_cache@GOTTPOFF]",
                p = out(reg) p,
                options(pure, readonly, nostack),
            );
            #[cfg(target_arch = "aarch64")]
            core::arch::asm!(
                "mrs {p}, tpidr_el0",
                "adrp {off}, :gottprel:hakmem_thread_cache",
                "ldr {off}, [{off}, #:gottprel_lo12:hakmem_thread_cache]",
                "add {p}, {p}, {off}",
                p = out(reg) p,
                off = out(reg) _,
                options(pure, readonly, nostack),
            );
        }
        p
    }
}

#[cfg(all(
    not(feature = "nightly"),
    not(all(
        any(target_arch = "x86_64", target_arch = "aarch64"),
        target_os = "linux"
    ))
))]
compile_error!(
    "hakmem-core needs Linux on x86-64 or AArch64, or the `nightly` feature for #[thread_local]"
);

pub use imp::cache;
