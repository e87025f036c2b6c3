//! glibc's allocator introspection, answered from hakmem's statistics so that programs
//! calling it neither crash nor read glibc's idle arena: `mallinfo`, `mallinfo2`,
//! `mallopt` (accepted, no effect), `malloc_stats` (the `HAKMEM_STATS` summary),
//! `malloc_info` (a one-element XML document).
//!
//! `mallinfo` fields: `arena` = bytes mapped, `uordblks` = bytes handed out (thread caches
//! included), `fordblks` = the difference, `keepcost` = cached large mappings; the rest 0.

use crate::fmt::Message;
use core::ffi::{c_int, c_void};

/// glibc's `struct mallinfo2`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mallinfo2 {
    pub arena: usize,
    pub ordblks: usize,
    pub smblks: usize,
    pub hblks: usize,
    pub hblkhd: usize,
    pub usmblks: usize,
    pub fsmblks: usize,
    pub uordblks: usize,
    pub fordblks: usize,
    pub keepcost: usize,
}

/// glibc's `struct mallinfo` (`int` fields: values are clamped).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mallinfo {
    pub arena: c_int,
    pub ordblks: c_int,
    pub smblks: c_int,
    pub hblks: c_int,
    pub hblkhd: c_int,
    pub usmblks: c_int,
    pub fsmblks: c_int,
    pub uordblks: c_int,
    pub fordblks: c_int,
    pub keepcost: c_int,
}

pub fn mallinfo2_impl() -> Mallinfo2 {
    let s = hakmem_core::stats();
    Mallinfo2 {
        arena: s.mapped,
        uordblks: s.allocated,
        fordblks: s.mapped.saturating_sub(s.allocated),
        keepcost: s.cached_large,
        ..Mallinfo2::default()
    }
}

pub fn mallinfo_impl() -> Mallinfo {
    let m = mallinfo2_impl();
    let clamp = |v: usize| v.min(c_int::MAX as usize) as c_int;
    Mallinfo {
        arena: clamp(m.arena),
        uordblks: clamp(m.uordblks),
        fordblks: clamp(m.fordblks),
        keepcost: clamp(m.keepcost),
        ..Mallinfo::default()
    }
}

/// Every parameter is accepted and has no effect (hakmem's one knob is `HAKMEM_PROFILE`).
pub fn mallopt_impl(_param: c_int, _value: c_int) -> c_int {
    1
}

/// `mallinfo2()`.
#[no_mangle]
pub extern "C" fn mallinfo2() -> Mallinfo2 {
    mallinfo2_impl()
}

/// `mallinfo()`.
#[no_mangle]
pub extern "C" fn mallinfo() -> Mallinfo {
    mallinfo_impl()
}

/// `mallopt(param, value)`: returns 1 (success).
#[no_mangle]
pub extern "C" fn mallopt(param: c_int, value: c_int) -> c_int {
    mallopt_impl(param, value)
}

/// `malloc_stats()`: the statistics summary on stderr.
#[no_mangle]
pub extern "C" fn malloc_stats() {
    crate::stats::print_summary();
}

/// `malloc_info(options, fp)`: `options` must be 0 (else `EINVAL`).
///
/// # Safety
/// `fp` is an open `FILE *`.
#[no_mangle]
pub unsafe extern "C" fn malloc_info(options: c_int, fp: *mut libc::FILE) -> c_int {
    if options != 0 {
        crate::errno::set(libc::EINVAL);
        return -1;
    }
    use core::fmt::Write;
    let m = mallinfo2_impl();
    let mut xml = Message::<256>::new();
    let _ = writeln!(
        xml,
        "<malloc version=\"hakmem-1\"><system type=\"current\" size=\"{}\"/><total type=\"allocated\" size=\"{}\"/></malloc>",
        m.arena, m.uordblks
    );
    let bytes = xml.as_bytes();
    // SAFETY: `fp` is open, by the caller; `bytes` is readable for its length.
    let written = unsafe { libc::fwrite(bytes.as_ptr() as *const c_void, 1, bytes.len(), fp) };
    if written == bytes.len() {
        0
    } else {
        -1
    }
}
