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
//! callee change: the integer ones and `xmm0`-`xmm15`, saved with `movaps`. That is
//! enough because of what the free path runs: Rust code built for baseline x86-64 (SSE2
//! without VEX encoding, which leaves the upper halves of AVX registers and `zmm16`-31
//! alone, and never touches the x87 stack or MXCSR) and system calls (`madvise`,
//! `sched_yield`), and no libm or string function, which may be AVX code that zeroes
//! those upper halves (the weight of a sample is computed without `expm1` for this
//! reason: `crate::sample_weight`). A test checks the `ymm` registers.

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

/// Save the vector registers the free path may change, below `rsp` (16-byte aligned
/// after, ready for a call), for `restore_vector_registers!`: built for baseline x86-64,
/// that code is SSE without VEX encoding and touches only the low 128 bits of
/// `xmm0`-`xmm15`.
#[cfg(not(target_feature = "avx"))]
macro_rules! save_vector_registers {
    () => {
        concat!(
            "and rsp, -16\n",
            "sub rsp, 256\n",
            "movaps [rsp + 0], xmm0\n",
            "movaps [rsp + 16], xmm1\n",
            "movaps [rsp + 32], xmm2\n",
            "movaps [rsp + 48], xmm3\n",
            "movaps [rsp + 64], xmm4\n",
            "movaps [rsp + 80], xmm5\n",
            "movaps [rsp + 96], xmm6\n",
            "movaps [rsp + 112], xmm7\n",
            "movaps [rsp + 128], xmm8\n",
            "movaps [rsp + 144], xmm9\n",
            "movaps [rsp + 160], xmm10\n",
            "movaps [rsp + 176], xmm11\n",
            "movaps [rsp + 192], xmm12\n",
            "movaps [rsp + 208], xmm13\n",
            "movaps [rsp + 224], xmm14\n",
            "movaps [rsp + 240], xmm15\n",
        )
    };
}

#[cfg(not(target_feature = "avx"))]
macro_rules! restore_vector_registers {
    () => {
        concat!(
            "movaps xmm0, [rsp + 0]\n",
            "movaps xmm1, [rsp + 16]\n",
            "movaps xmm2, [rsp + 32]\n",
            "movaps xmm3, [rsp + 48]\n",
            "movaps xmm4, [rsp + 64]\n",
            "movaps xmm5, [rsp + 80]\n",
            "movaps xmm6, [rsp + 96]\n",
            "movaps xmm7, [rsp + 112]\n",
            "movaps xmm8, [rsp + 128]\n",
            "movaps xmm9, [rsp + 144]\n",
            "movaps xmm10, [rsp + 160]\n",
            "movaps xmm11, [rsp + 176]\n",
            "movaps xmm12, [rsp + 192]\n",
            "movaps xmm13, [rsp + 208]\n",
            "movaps xmm14, [rsp + 224]\n",
            "movaps xmm15, [rsp + 240]\n",
        )
    };
}

/// Built with AVX (or AVX-512), the free path's code is VEX (or EVEX) encoded and may
/// change whole `ymm`/`zmm` registers and the mask registers: `xsave` the x87, SSE, AVX,
/// opmask and AVX-512 state components (mask `0xe7`; the standard layout of those ends
/// at byte 2,688), its header zeroed first as `xrstor` requires.
#[cfg(target_feature = "avx")]
macro_rules! save_vector_registers {
    () => {
        concat!(
            "and rsp, -64\n",
            "sub rsp, 2688\n",
            "xor eax, eax\n",
            "mov [rsp + 512], rax\n",
            "mov [rsp + 520], rax\n",
            "mov [rsp + 528], rax\n",
            "mov [rsp + 536], rax\n",
            "mov [rsp + 544], rax\n",
            "mov [rsp + 552], rax\n",
            "mov [rsp + 560], rax\n",
            "mov [rsp + 568], rax\n",
            "xor edx, edx\n",
            "mov eax, 0xe7\n",
            "xsave [rsp]\n",
        )
    };
}

#[cfg(target_feature = "avx")]
macro_rules! restore_vector_registers {
    () => {
        concat!("xor edx, edx\n", "mov eax, 0xe7\n", "xrstor [rsp]\n")
    };
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
        save_vector_registers!(),
        "call {free}",
        restore_vector_registers!(),
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
    use super::{free_if_sampled, free_sampled_saving_registers};
    use core::hint::black_box;

    /// All sixteen `ymm` registers, upper halves included, hold what they held before
    /// the free of a sampled block (a sample's weight computed by libm's `expm1`, an FMA
    /// routine, zeroed upper halves here).
    #[test]
    fn keeps_the_vector_registers_whole() {
        assert!(
            std::arch::is_x86_feature_detected!("avx"),
            "this check needs AVX (every x86-64 CPU of the last decade has it)"
        );
        crate::table::init().unwrap();
        crate::arena::init().unwrap();
        let b = crate::arena::alloc(300, 16).unwrap();
        crate::arena::set_tag(b.ptr, 0);
        let before: [u8; 512] = core::array::from_fn(|i| (i * 7 + 1) as u8);
        let mut after = [0u8; 512];
        // SAFETY: loads the ymm registers from `before`, frees the live sampled block
        // `b.ptr` as `free_if_sampled` does (the callee keeps every register), and stores
        // them to `after`; the C ABI's caller-saved registers are declared clobbered, and
        // the stack is aligned for the call (no `nostack`).
        unsafe {
            core::arch::asm!(
                "vmovdqu ymm0, [{src}]",
                "vmovdqu ymm1, [{src} + 32]",
                "vmovdqu ymm2, [{src} + 64]",
                "vmovdqu ymm3, [{src} + 96]",
                "vmovdqu ymm4, [{src} + 128]",
                "vmovdqu ymm5, [{src} + 160]",
                "vmovdqu ymm6, [{src} + 192]",
                "vmovdqu ymm7, [{src} + 224]",
                "vmovdqu ymm8, [{src} + 256]",
                "vmovdqu ymm9, [{src} + 288]",
                "vmovdqu ymm10, [{src} + 320]",
                "vmovdqu ymm11, [{src} + 352]",
                "vmovdqu ymm12, [{src} + 384]",
                "vmovdqu ymm13, [{src} + 416]",
                "vmovdqu ymm14, [{src} + 448]",
                "vmovdqu ymm15, [{src} + 480]",
                "call {free}",
                "vmovdqu [{dst}], ymm0",
                "vmovdqu [{dst} + 32], ymm1",
                "vmovdqu [{dst} + 64], ymm2",
                "vmovdqu [{dst} + 96], ymm3",
                "vmovdqu [{dst} + 128], ymm4",
                "vmovdqu [{dst} + 160], ymm5",
                "vmovdqu [{dst} + 192], ymm6",
                "vmovdqu [{dst} + 224], ymm7",
                "vmovdqu [{dst} + 256], ymm8",
                "vmovdqu [{dst} + 288], ymm9",
                "vmovdqu [{dst} + 320], ymm10",
                "vmovdqu [{dst} + 352], ymm11",
                "vmovdqu [{dst} + 384], ymm12",
                "vmovdqu [{dst} + 416], ymm13",
                "vmovdqu [{dst} + 448], ymm14",
                "vmovdqu [{dst} + 480], ymm15",
                "vzeroupper",
                src = in(reg) before.as_ptr(),
                dst = in(reg) after.as_mut_ptr(),
                in("rdi") b.ptr,
                free = sym free_sampled_saving_registers,
                clobber_abi("C"),
            );
        }
        assert!(before == after, "vector registers changed across the free");
        assert_eq!(
            crate::arena::alloc(300, 16).unwrap().ptr,
            b.ptr,
            "slot not freed"
        );
    }

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
