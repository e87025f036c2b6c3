//! Memory straight from the kernel, for the profiler's own tables and arena (never
//! through an allocator: the profiler runs inside one).

use std::io;

/// A new anonymous private mapping of `bytes`, readable and writable, not reserved
/// against the commit limit: its pages become resident when first written.
pub fn map(bytes: usize) -> io::Result<*mut u8> {
    map_near(0, bytes)
}

/// [`map`], placed at `hint` if that range is free (the kernel's choice otherwise).
pub fn map_near(hint: usize, bytes: usize) -> io::Result<*mut u8> {
    // SAFETY: a new anonymous private mapping, without MAP_FIXED, so nothing mapped is
    // replaced; no memory of ours is touched.
    let p = unsafe {
        libc::mmap(
            hint as *mut libc::c_void,
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
