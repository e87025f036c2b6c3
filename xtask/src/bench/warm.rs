//! Warming the machine's free memory before each run, so that every allocator's fresh
//! pages cost what they cost on a machine of its own.
//!
//! On a virtual machine whose host takes free memory back (free page reporting, as on
//! the machines this project is measured on), a page the guest has not used for a few
//! seconds is no longer backed by the host, and the first touch of it waits for the host
//! too. Which pages a run gets is then a lottery: the same binary of `big-buffers` took
//! 0.005 s or 0.11 s (mimalloc), and a huge page (what mimalloc and hakmem ask for on big
//! buffers) drew a cold one more often than a small one (what glibc and tcmalloc take), so
//! the draw, not the allocator, decided the rows that touch fresh memory. Touching and
//! freeing this much memory in huge pages right before each run leaves that many backed
//! 2 MiB blocks at the head of the kernel's free lists, where the run's page faults take
//! theirs. `cargo xtask bench --warm 0` measures without it.

use std::ptr::null_mut;

const HUGE_PAGE: usize = 2 << 20;
const PAGE: usize = 4096;

/// Map `mib` MiB (2 MiB aligned), ask for huge pages, write a byte per page, unmap.
/// Nothing happens for 0; a refused mapping is skipped (the run is then only colder).
pub fn warm(mib: usize) {
    let bytes = mib << 20;
    if bytes == 0 {
        return;
    }
    let len = bytes + HUGE_PAGE;
    // SAFETY: a fresh anonymous mapping; no existing memory is named.
    let p = unsafe {
        libc::mmap(
            null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return;
    }
    let start = (p as usize).next_multiple_of(HUGE_PAGE);
    // SAFETY: [start, start + bytes) lies in the mapping (it has HUGE_PAGE to spare); the
    // advice changes no byte. Its failure (THP off) leaves small pages, still warmed.
    unsafe { libc::madvise(start as *mut libc::c_void, bytes, libc::MADV_HUGEPAGE) };
    for off in (0..bytes).step_by(PAGE) {
        // SAFETY: inside the mapping, which nothing else uses.
        unsafe { std::ptr::write_volatile((start + off) as *mut u8, 1) };
    }
    // SAFETY: the whole mapping made above, no longer used.
    unsafe { libc::munmap(p, len) };
}
