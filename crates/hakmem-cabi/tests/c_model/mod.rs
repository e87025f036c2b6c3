//! The C ABI's malloc family as the shadow model's [`Entries`]: the fuzz target `c_api`
//! and the test `c_api_model.rs` run [`crate::shadow`]'s sequences through it.
//!
//! Both mount the C ABI's sources (`src/lib.rs` as a module, its modules re-exported at
//! the crate root, where their `crate::` paths point), so the binary itself exports
//! `malloc` & co.: it is a program linked with hakmem, whose every allocation (the test
//! harness's, libFuzzer's, libc's own) goes through them. The calls below go through
//! those C symbols, as a C program's would. The ABI cannot be linked as a Rust library
//! (it is a cdylib named `hakmem`, like the `hakmem` crate's rlib), and `dlopen`ing the
//! built `libhakmem.so` instead would give the fuzzer no coverage of it and may fail for
//! lack of static TLS; mounting the sources has neither problem.
//!
//! Besides the model's checks (no overlap, alignment, contents kept, zeroing, every
//! usable byte writable), each call checks the C rules: `free` keeps `errno`, and every
//! op now and then also makes a request that must be refused (an overflowing `calloc` or
//! `reallocarray`, a bad or too large alignment, an impossible size) and checks the
//! result, `errno` and that nothing was touched.

use crate::shadow::{Entries, Resized};
use core::ffi::{c_int, c_void};

extern "C" {
    fn malloc(size: usize) -> *mut c_void;
    fn calloc(n: usize, size: usize) -> *mut c_void;
    fn realloc(p: *mut c_void, size: usize) -> *mut c_void;
    fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void;
    fn free(p: *mut c_void);
    fn free_sized(p: *mut c_void, size: usize);
    fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int;
    fn aligned_alloc(align: usize, size: usize) -> *mut c_void;
    fn memalign(align: usize, size: usize) -> *mut c_void;
    fn valloc(size: usize) -> *mut c_void;
    fn pvalloc(size: usize) -> *mut c_void;
    fn malloc_usable_size(p: *mut c_void) -> usize;
}

/// The C API, for [`crate::shadow::run_with`] and [`crate::shadow::run_threads`].
#[derive(Clone, Copy, Debug)]
pub struct CApi;

/// A value no call sets `errno` to.
const UNTOUCHED: c_int = 4242;
/// An alignment hakmem refuses (over 1 TiB, `hakmem_core::MAX_ALIGN`).
const TOO_ALIGNED: usize = 1 << 41;
const PAGE: usize = 4096;

fn errno() -> c_int {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() }
}

fn set_errno(v: c_int) {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = v };
}

/// `(n, m)` with `n * m == size`, chosen by `how`.
fn factors(size: usize, how: u8) -> (usize, usize) {
    match how % 4 {
        0 => (size, 1),
        1 if size % 2 == 0 => (2, size / 2),
        _ => (1, size),
    }
}

/// A request that must fail, picked by `how`; checks null, `errno` and (for
/// `posix_memalign`) that the output was not written.
fn refused_request(size: usize, how: u8) {
    let impossible = usize::MAX - size % PAGE;
    let mut out = 7usize as *mut c_void;
    set_errno(UNTOUCHED);
    // SAFETY: none of these requests can succeed; `out` is a valid place for a pointer.
    let (what, p, rc, want) = unsafe {
        match (how >> 5) % 8 {
            0 => ("malloc(huge)", malloc(impossible), 0, libc::ENOMEM),
            1 => (
                "calloc overflow",
                calloc(usize::MAX / 2 + 1 + size, 2),
                0,
                libc::ENOMEM,
            ),
            2 => ("calloc(1, huge)", calloc(1, impossible), 0, libc::ENOMEM),
            3 => {
                let rc = posix_memalign(&mut out, 24, size);
                ("posix_memalign(24)", out, rc, libc::EINVAL)
            }
            4 => {
                let rc = posix_memalign(&mut out, TOO_ALIGNED, size);
                ("posix_memalign(2 TiB)", out, rc, libc::ENOMEM)
            }
            5 => (
                "aligned_alloc(48)",
                aligned_alloc(48, size),
                0,
                libc::EINVAL,
            ),
            6 => (
                "memalign(SIZE_MAX / 2 + 2)",
                memalign(usize::MAX / 2 + 2, size),
                0,
                libc::EINVAL,
            ),
            _ => (
                "aligned_alloc(2 TiB)",
                aligned_alloc(TOO_ALIGNED, size),
                0,
                libc::ENOMEM,
            ),
        }
    };
    if what.starts_with("posix_memalign") {
        // posix_memalign reports by its result and leaves errno and `out` alone.
        assert_eq!(rc, want, "{what} of {size} bytes");
        assert_eq!(out as usize, 7, "{what} wrote its output");
        assert_eq!(errno(), UNTOUCHED, "{what} set errno");
    } else {
        assert!(p.is_null(), "{what} of {size} bytes gave {p:p}");
        assert_eq!(errno(), want, "{what} of {size} bytes: errno");
    }
}

/// A resize of the live block `p` that must fail and leave it alone (the model checks
/// its contents later).
///
/// # Safety
/// `p` is a live block.
unsafe fn refused_resize(p: *mut c_void, how: u8) {
    set_errno(UNTOUCHED);
    // SAFETY: `p` is live; both requests fail and leave it as it was.
    let q = unsafe {
        if how & 16 != 0 {
            reallocarray(p, usize::MAX / 2 + 1, 2)
        } else {
            realloc(p, usize::MAX - PAGE)
        }
    };
    assert!(q.is_null(), "an impossible realloc of {p:p} gave {q:p}");
    assert_eq!(errno(), libc::ENOMEM, "an impossible realloc: errno");
}

impl Entries for CApi {
    fn owns_usable(&self) -> bool {
        true
    }

    fn takes_null(&self) -> bool {
        true
    }

    fn alloc(&self, size: usize, align_log2: u8, zeroed: bool, how: u8) -> (*mut u8, usize) {
        if how % 32 == 31 {
            refused_request(size, how);
        }
        let align = 1usize << align_log2;
        // SAFETY: plain requests; `out` is a valid place for a pointer.
        let (p, promised) = unsafe {
            if zeroed {
                let (n, m) = factors(size, how);
                (calloc(n, m), 16)
            } else {
                match how % 8 {
                    0..=2 => (malloc(size), 16),
                    3 => {
                        let mut out = core::ptr::null_mut();
                        set_errno(UNTOUCHED);
                        let rc = posix_memalign(&mut out, align.max(8), size);
                        assert_eq!(rc, 0, "posix_memalign({align}, {size})");
                        assert_eq!(errno(), UNTOUCHED, "posix_memalign set errno");
                        (out, align.max(16))
                    }
                    4 => (aligned_alloc(align, size), align.max(16)),
                    5 => (memalign(align, size), align.max(16)),
                    6 if how & 8 != 0 => (pvalloc(size), PAGE),
                    6 => (valloc(size), PAGE),
                    _ => (realloc(core::ptr::null_mut(), size), 16),
                }
            }
        };
        (p.cast(), promised)
    }

    fn usable_size(&self, p: *mut u8) -> usize {
        // SAFETY: `p` is a live block.
        unsafe { malloc_usable_size(p.cast()) }
    }

    unsafe fn free(&self, p: *mut u8, size: usize, _align: usize, how: u8) {
        set_errno(UNTOUCHED);
        // SAFETY: by the caller, a live block of `size` bytes (or null).
        unsafe {
            if how % 8 == 7 {
                free_sized(p.cast(), size);
            } else {
                free(p.cast());
            }
        }
        assert_eq!(errno(), UNTOUCHED, "free({p:p}) changed errno");
    }

    unsafe fn realloc(
        &self,
        p: *mut u8,
        _size: usize,
        _align: usize,
        new_size: usize,
        how: u8,
    ) -> Resized {
        let p = p.cast::<c_void>();
        if !p.is_null() && how % 16 == 15 {
            // SAFETY: by the caller, `p` is live.
            unsafe { refused_resize(p, how) };
        }
        // SAFETY: by the caller, `p` is live or null.
        unsafe {
            if new_size == 0 && !p.is_null() {
                // glibc's rule: realloc(p, 0) frees p and returns null.
                let q = realloc(p, 0);
                assert!(q.is_null(), "realloc({p:p}, 0) gave {q:p}");
                return Resized::Freed;
            }
            let q = if how % 4 == 0 {
                let (n, m) = factors(new_size, how / 4);
                reallocarray(p, n, m)
            } else {
                realloc(p, new_size)
            };
            Resized::Block(q.cast(), 16)
        }
    }
}
