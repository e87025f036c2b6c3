//! Pointers hakmem never handed out, passed to `free` or `realloc`.
//!
//! Under `LD_PRELOAD` such pointers are rare but real: memory the dynamic loader's own
//! start-up allocator handed out, a block from another allocator reached through
//! `dlsym(RTLD_NEXT, "malloc")`, a program's own `operator new` whose sized `delete`
//! resolves to ours. hakmem-core recognises them with one bitmap load (no hakmem chunk
//! holds them) and never touches their memory. What the C ABI does with them:
//!
//! - `free`: nothing. The block is left to whoever owns it (leaked, if nobody does).
//!   Handing it to glibc's `free` would crash when it did not come from glibc either, and
//!   aborting would break programs that work with glibc alone.
//! - `realloc(p, n)`: a new block of `n` bytes, filled from `p` with as many of the first
//!   `n` bytes as can be read, then the same as `free(p)`. The old size is unknown, so
//!   this may copy bytes past the old block: harmless (realloc leaves bytes past the old
//!   size unspecified) as long as every byte copied is readable, which the copy makes sure
//!   of with `process_vm_readv` on our own process (it stops at the first unreadable page
//!   instead of faulting), or, where that system call is forbidden (seccomp), by asking
//!   `mincore` which pages are mapped.
//!
//! With `HAKMEM_VERBOSE=1` the first of each kind is reported on stderr.
//!
//! Pointers *inside* hakmem's memory that are not the start of a live block are a
//! different matter (a double or interior free): hakmem-core reports them and aborts.

use crate::{env, errno};
use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, Ordering::Relaxed};

static WARNED_FREE: AtomicBool = AtomicBool::new(false);
static WARNED_REALLOC: AtomicBool = AtomicBool::new(false);

/// `free` of a pointer hakmem never handed out: leave it alone.
#[cold]
pub fn free(p: *mut u8) {
    warn_once(&WARNED_FREE, b"free", p);
}

/// `realloc(p, new_size)` (`new_size > 0`) of a pointer hakmem never handed out, into
/// `q`, the new hakmem block of `new_size` bytes the caller allocated (null: nothing is
/// copied). Returns `q`.
///
/// # Safety
/// `p` points to memory the caller may read (as much of it as is mapped readable); `q`
/// is null or holds `new_size` bytes.
#[cold]
pub unsafe fn realloc_into(p: *mut u8, new_size: usize, q: *mut c_void) -> *mut c_void {
    warn_once(&WARNED_REALLOC, b"realloc", p);
    if !q.is_null() {
        let _errno = errno::Preserve::new();
        // SAFETY: `q` holds `new_size` bytes; `copy_readable` reads only readable pages.
        unsafe { copy_readable(q.cast(), p, new_size) };
    }
    q
}

fn warn_once(flag: &AtomicBool, what: &[u8], p: *mut u8) {
    if !env::verbose() || flag.swap(true, Relaxed) {
        return;
    }
    use core::fmt::Write;
    let mut m = crate::fmt::Message::<256>::new();
    m.put(b"hakmem: ").put(what);
    let _ = writeln!(
        m,
        " of {p:p}, which hakmem never handed out: left alone (further ones are not reported)"
    );
    m.emit();
}

const PAGE: usize = 4096;
/// Pages per `process_vm_readv` call.
const BATCH: usize = 64;

/// Copy up to `n` bytes from `src` to `dst`, stopping at the first unreadable page;
/// returns how many were copied.
///
/// # Safety
/// `dst` is writable for `n` bytes and does not overlap `src`.
pub unsafe fn copy_readable(dst: *mut u8, src: *const u8, n: usize) -> usize {
    let mut done = 0;
    while done < n {
        // SAFETY: `dst + done` is writable for `n - done` bytes.
        match unsafe { read_batch(dst.add(done), src.wrapping_add(done), n - done) } {
            Ok((copied, asked)) => {
                done += copied;
                if copied < asked {
                    break; // reached an unreadable page
                }
            }
            Err(libc::EFAULT) => break,
            Err(_) => {
                // The system call is not allowed here: fall back to mapped pages.
                // SAFETY: as above.
                done += unsafe { copy_mapped(dst.add(done), src.wrapping_add(done), n - done) };
                break;
            }
        }
    }
    done
}

/// One `process_vm_readv` of up to [`BATCH`] pages from `src` (each page its own iovec, so
/// that the kernel stops exactly at the first page it cannot read). Returns the bytes
/// copied and the bytes asked for, or the errno.
///
/// # Safety
/// `dst` is writable for `len` bytes.
unsafe fn read_batch(dst: *mut u8, src: *const u8, len: usize) -> Result<(usize, usize), i32> {
    let empty = libc::iovec {
        iov_base: core::ptr::null_mut(),
        iov_len: 0,
    };
    let mut remote = [empty; BATCH];
    let (mut k, mut asked) = (0, 0);
    while k < BATCH && asked < len {
        let at = src as usize + asked;
        let piece = (PAGE - at % PAGE).min(len - asked);
        remote[k] = libc::iovec {
            iov_base: at as *mut c_void,
            iov_len: piece,
        };
        k += 1;
        asked += piece;
    }
    let local = libc::iovec {
        iov_base: dst.cast(),
        iov_len: asked,
    };
    // SAFETY: the kernel writes at most `asked` bytes to `local`, which the caller made
    // writable, and reads the remote ranges without faulting (it reports EFAULT).
    let r =
        unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, remote.as_ptr(), k as _, 0) };
    if r < 0 {
        return Err(errno::get());
    }
    Ok((r as usize, asked))
}

/// Copy page by page while `mincore` says the page is mapped.
///
/// # Safety
/// As for [`copy_readable`]; mapped pages of `src` are readable (a mapped `PROT_NONE`
/// page in the way would fault: the fallback's limit).
unsafe fn copy_mapped(dst: *mut u8, src: *const u8, n: usize) -> usize {
    let mut done = 0;
    while done < n {
        let at = src as usize + done;
        let page = at & !(PAGE - 1);
        let mut resident = 0u8;
        // SAFETY: mincore writes one byte for one page into `resident`.
        if unsafe { libc::mincore(page as *mut c_void, PAGE, &mut resident) } != 0 {
            break;
        }
        let piece = (page + PAGE - at).min(n - done);
        // SAFETY: the page is mapped (by mincore); `dst` has room, by the caller.
        unsafe { core::ptr::copy_nonoverlapping(at as *const u8, dst.add(done), piece) };
        done += piece;
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two pages mapped, the second unmapped again: a copy from near the end of the first
    /// must stop at the boundary.
    #[test]
    fn copies_up_to_the_first_unreadable_page() {
        // SAFETY: a fresh private mapping of two pages, then the second unmapped.
        let base = unsafe {
            let m = libc::mmap(
                core::ptr::null_mut(),
                2 * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(m, libc::MAP_FAILED);
            libc::munmap((m as usize + PAGE) as *mut c_void, PAGE);
            m as *mut u8
        };
        let src = base.wrapping_add(PAGE - 100);
        // SAFETY: the last 100 bytes of the mapped page.
        unsafe { core::ptr::write_bytes(src, 7, 100) };
        let mut dst = vec![0u8; 10_000];
        // SAFETY: `dst` has 10,000 bytes.
        let n = unsafe { copy_readable(dst.as_mut_ptr(), src, dst.len()) };
        assert_eq!(n, 100);
        assert!(dst[..100].iter().all(|&b| b == 7));
        // SAFETY: as above; the fallback alone.
        let n = unsafe { copy_mapped(dst.as_mut_ptr(), src, dst.len()) };
        assert_eq!(n, 100);
        // SAFETY: our page.
        unsafe { libc::munmap(base.cast(), PAGE) };
    }

    #[test]
    fn copies_everything_readable() {
        let src: Vec<u8> = (0..50_000u32).map(|i| i as u8).collect();
        let mut dst = vec![0u8; 50_000];
        // SAFETY: both buffers hold 50,000 bytes.
        let n = unsafe { copy_readable(dst.as_mut_ptr(), src.as_ptr(), 50_000) };
        assert_eq!(n, 50_000);
        assert_eq!(src, dst);
    }
}
