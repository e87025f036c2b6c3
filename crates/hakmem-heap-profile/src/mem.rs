//! Memory straight from the kernel, for the profiler's own tables and arena (never
//! through an allocator: the profiler runs inside one).

use std::io;

/// A new anonymous private mapping of `bytes`, readable and writable, not reserved
/// against the commit limit: its pages become resident when first written.
pub fn map(bytes: usize) -> io::Result<*mut u8> {
    // SAFETY: a new anonymous private mapping; no memory of ours is touched.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}
