//! Where the calling thread's cache lives: one direct thread-local access to a zeroed,
//! 64-byte aligned slot of [`SLOT_BYTES`] bytes, which [`crate::thread_cache`] lays its
//! `ThreadCache` over (this module knows only the slot, so it needs nothing above it),
//! and the same access to the address 16 bytes before the slot ([`slot_less_16`]),
//! from which the slab map's byte of a class, times 8, reaches its bin.
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

/// Bytes of the slot (the thread cache asserts that it fits): 64 bins of 16 bytes, the
/// stash's 64 pointers and 8 bytes, and 32 bytes for the rest.
pub const SLOT_BYTES: usize = 1600;
/// Alignment of the slot (a cache line).
pub const SLOT_ALIGN: usize = 64;

/// The slot's type where Rust declares it.
#[cfg_attr(not(any(feature = "nightly", miri, loom)), allow(dead_code))]
#[repr(C, align(64))]
struct Slot([u8; SLOT_BYTES]);
const _: () = assert!(core::mem::align_of::<Slot>() == SLOT_ALIGN);

#[cfg(feature = "nightly")]
mod imp {
    use super::{Slot, SLOT_BYTES};

    #[thread_local]
    static mut SLOT: Slot = Slot([0; SLOT_BYTES]);

    /// The calling thread's slot.
    #[inline(always)]
    pub fn slot() -> *mut u8 {
        core::ptr::addr_of_mut!(SLOT).cast()
    }

    /// The calling thread's slot address less 16 (a constant offset here, folded).
    #[inline(always)]
    pub fn slot_less_16() -> *mut u8 {
        slot().wrapping_sub(16)
    }
}

#[cfg(all(not(feature = "nightly"), any(miri, loom)))]
mod imp {
    extern crate std;

    use super::{Slot, SLOT_BYTES};
    use core::cell::UnsafeCell;

    std::thread_local! {
        static SLOT: UnsafeCell<Slot> = const { UnsafeCell::new(Slot([0; SLOT_BYTES])) };
    }

    /// The calling thread's slot.
    #[inline(always)]
    pub fn slot() -> *mut u8 {
        SLOT.with(UnsafeCell::get).cast()
    }

    /// The calling thread's slot address less 16.
    #[inline(always)]
    pub fn slot_less_16() -> *mut u8 {
        slot().wrapping_sub(16)
    }
}

#[cfg(all(
    not(feature = "nightly"),
    not(any(miri, loom)),
    any(target_arch = "x86_64", target_arch = "aarch64"),
    target_os = "linux"
))]
mod imp {
    use super::{SLOT_ALIGN, SLOT_BYTES};

    // The slot: `hakmem_thread_cache` in `.tbss` (zero at thread start), hidden, so a
    // shared object reaches it through its own GOT entry. Section and symbol types are
    // written with `%`, which both the x86-64 and the AArch64 assembler accept (`@`
    // starts a comment on some ARM assemblers).
    //
    // 16 bytes before it, `hakmem_thread_cache_less_16` ([`slot_less_16`]), after padding
    // that keeps the slot aligned.
    core::arch::global_asm!(
        ".pushsection .tbss,\"awT\",%nobits",
        ".p2align {align_log2}",
        ".zero {pad}",
        ".globl hakmem_thread_cache_less_16",
        ".hidden hakmem_thread_cache_less_16",
        ".type hakmem_thread_cache_less_16,%object",
        ".size hakmem_thread_cache_less_16, 16",
        "hakmem_thread_cache_less_16:",
        ".zero 16",
        ".globl hakmem_thread_cache",
        ".hidden hakmem_thread_cache",
        ".type hakmem_thread_cache,%object",
        ".size hakmem_thread_cache, {size}",
        "hakmem_thread_cache:",
        ".zero {size}",
        ".popsection",
        size = const SLOT_BYTES,
        align_log2 = const SLOT_ALIGN.trailing_zeros(),
        pad = const SLOT_ALIGN - 16,
    );

    /// The address of the TLS symbol `$sym` for the calling thread.
    macro_rules! tls_address {
        ($sym:literal) => {{
            let p: *mut u8;
            // SAFETY: reads the thread pointer and the symbol's offset from the GOT (the
            // initial-exec sequence, which an executable's linker relaxes to a constant); no
            // memory is written. `pure, nomem` tells the compiler it may reuse one result for
            // every call in a function body, as it does for a `#[thread_local]` address: the
            // thread pointer is fixed for the thread's life, the GOT entry is filled by the
            // loader before any code runs and is read-only after relocation, and one
            // invocation of a function runs on one thread (an `async` body that moves between
            // threads does so only by returning from `poll`). Without `nomem`, every opaque
            // memory access between two calls (a `black_box`, a write through a raw pointer)
            // forced the sequence to be run again.
            unsafe {
                #[cfg(target_arch = "x86_64")]
                core::arch::asm!(
                    "mov {p}, qword ptr fs:[0]",
                    concat!("add {p}, qword ptr [rip + ", $sym, "@GOTTPOFF]"),
                    p = out(reg) p,
                    options(pure, nomem, nostack),
                );
                #[cfg(target_arch = "aarch64")]
                core::arch::asm!(
                    "mrs {p}, tpidr_el0",
                    concat!("adrp {off}, :gottprel:", $sym),
                    concat!("ldr {off}, [{off}, #:gottprel_lo12:", $sym, "]"),
                    "add {p}, {p}, {off}",
                    p = out(reg) p,
                    off = out(reg) _,
                    options(pure, nomem, nostack),
                );
            }
            p
        }};
    }

    /// The calling thread's slot.
    #[inline(always)]
    pub fn slot() -> *mut u8 {
        tls_address!("hakmem_thread_cache")
    }

    /// The calling thread's slot address less 16, from a label of its own: a caller that
    /// adds at least 16 to it (`thread_cache::bin_of_mapped`) pays no instruction for the
    /// difference, where `slot()` less 16 would be a `sub` (the sequence is opaque to the
    /// compiler).
    #[inline(always)]
    pub fn slot_less_16() -> *mut u8 {
        tls_address!("hakmem_thread_cache_less_16")
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

pub use imp::{slot, slot_less_16};
