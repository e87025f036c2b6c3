//! The Rust `dealloc`'s test for a sampled block, with the free of one out of the
//! compiler's sight (x86-64): an `asm!` block that compares the address with the arena's
//! end (one compare and a branch for every block above it, which is all of hakmem's when
//! the arena got its low address, and every block before profiling starts) and, below
//! it, with the arena's start; for a sampled block it calls
//! [`free_sampled_saving_registers`].
//!
//! Why: with an ordinary call on that path (or any code that makes one), fat LTO stopped
//! inlining `__rust_dealloc` into its callers, which cost `random-mixed` 15 % more
//! instructions with the profiler compiled in but off (docs/PROFILING.md, "Costs"). LLVM's
//! inliner prices an `asm!` block as one instruction and sees no call in it. So that the
//! block needs no clobbers (which would make the compiler save registers on the path
//! taken by every free), the function it calls preserves every register the C ABI lets a
//! callee change: the integer ones, and the x87/SSE state with `fxsave` (the profiler's
//! free path is baseline x86-64 code and system calls, which leave the upper halves of
//! AVX registers alone).

use core::arch::{asm, naked_asm};

/// Free `p` if it is a sampled block; whether it was.
///
/// # Safety
/// `p` is a live block of hakmem's or a sampled one, which the caller gives up if this
/// returns true.
#[inline(always)]
pub unsafe fn free_if_sampled(p: *mut u8) -> bool {
    // SAFETY: reads the arena's end and base (statics) and, for an address inside the
    // arena (a live sampled block, by the caller), calls a function that frees it and
    // preserves every register but the flags. The stack is aligned for the call: the block
    // does not say `nostack`.
    unsafe {
        asm!(
            "cmp rdi, qword ptr [rip + {end}]",
            "jae 2f",
            "cmp rdi, qword ptr [rip + {base}]",
            "jb 2f",
            "call {free}",
            "jmp {freed}",
            "2:",
            in("rdi") p,
            end = sym crate::arena::END,
            base = sym crate::arena::BASE,
            free = sym free_sampled_saving_registers,
            freed = label { return true; },
        );
    }
    false
}

/// [`crate::free_sampled`] of the block in `rdi`, preserving every register but the
/// flags: called only from [`free_if_sampled`]'s `asm!`.
#[unsafe(naked)]
unsafe extern "C" fn free_sampled_saving_registers() {
    naked_asm!(
        "push rbp",
        "mov rbp, rsp",
        "push rax",
        "push rcx",
        "push rdx",
        "push rsi",
        "push rdi",
        "push r8",
        "push r9",
        "push r10",
        "push r11",
        "and rsp, -64",
        "sub rsp, 512",
        "fxsave [rsp]",
        "call {free}",
        "fxrstor [rsp]",
        "lea rsp, [rbp - 72]",
        "pop r11",
        "pop r10",
        "pop r9",
        "pop r8",
        "pop rdi",
        "pop rsi",
        "pop rdx",
        "pop rcx",
        "pop rax",
        "pop rbp",
        "ret",
        free = sym free_sampled_c,
    )
}

/// [`crate::free_sampled`] with the C calling convention.
///
/// # Safety
/// As for [`crate::free_sampled`].
unsafe extern "C" fn free_sampled_c(p: *mut u8) {
    // SAFETY: by the caller (`free_if_sampled` found `p` in the arena).
    unsafe { crate::free_sampled(p) }
}

#[cfg(test)]
mod tests {
    use super::free_if_sampled;
    use core::hint::black_box;

    /// A sampled block is freed (its slot comes back), a plain pointer is not, and values
    /// the compiler keeps in caller-saved registers across the block survive the free.
    #[test]
    fn frees_sampled_blocks_and_keeps_registers() {
        crate::table::init().unwrap();
        crate::arena::init().unwrap();
        let b = crate::arena::alloc(48, 16).unwrap();
        let ints: [u64; 6] = black_box([1, 2, 3, 4, 5, 6]);
        let floats: [f64; 6] = black_box([0.5, 1.5, 2.5, 3.5, 4.5, 5.5]);
        let (i0, i1, i2, i3, i4, i5) = (ints[0], ints[1], ints[2], ints[3], ints[4], ints[5]);
        let (f0, f1, f2, f3, f4, f5) = (
            floats[0], floats[1], floats[2], floats[3], floats[4], floats[5],
        );
        // SAFETY: a live sampled block, given up.
        assert!(unsafe { free_if_sampled(b.ptr) });
        assert_eq!([i0, i1, i2, i3, i4, i5], [1, 2, 3, 4, 5, 6]);
        assert_eq!([f0, f1, f2, f3, f4, f5], [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]);
        assert_eq!(
            crate::arena::alloc(48, 16).unwrap().ptr,
            b.ptr,
            "slot not freed"
        );
        let fresh = crate::mem::map(4096).unwrap();
        assert!(
            fresh as usize >= crate::arena::END.load(core::sync::atomic::Ordering::Relaxed),
            "the arena is not below new mappings: every dealloc takes the second compare"
        );
        let mut local = 0u64;
        // SAFETY: not in the arena, so not freed.
        assert!(!unsafe { free_if_sampled((&mut local as *mut u64).cast()) });
    }
}
