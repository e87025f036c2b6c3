//! Settings from the environment, read with `getenv`, which does not allocate (once, by
//! the constructor in [`crate::startup`], and by the first call that needs one).
//!
//! - `HAKMEM_VERBOSE=1`: a line at start-up, one-time warnings (pointers hakmem never
//!   handed out, see [`crate::foreign`]).
//! - `HAKMEM_STATS=1`: count calls and bytes, print a summary at exit ([`crate::stats`]).
//! - `HAKMEM_CHECK=1`: checked mode, misuse reported ([`crate::mode`]); read by the first
//!   call of the malloc family if that comes before this constructor.
//! - `HAKMEM_PROFILE=fast|balanced|lean`: read by hakmem-core when it sets itself up.
//! - `HAKMEM_HEAP_PROFILE`, `HAKMEM_HEAP_PROFILE_INTERVAL`, `HAKMEM_HEAP_PROFILE_SIGNAL`:
//!   the heap profiler ([`crate::heap_profile`]).
//!
//! `0` or an empty value turns a flag off; anything else gets a one-line warning on stderr
//! and is ignored.

use crate::fmt::Message;
use core::ffi::CStr;
use core::sync::atomic::{AtomicBool, Ordering::Relaxed};

static VERBOSE: AtomicBool = AtomicBool::new(false);

/// Note whether `HAKMEM_VERBOSE=1` (the constructor).
pub fn set_verbose(on: bool) {
    VERBOSE.store(on, Relaxed);
}

/// Whether `HAKMEM_VERBOSE=1`.
#[inline]
pub fn verbose() -> bool {
    VERBOSE.load(Relaxed)
}

/// The value of an environment variable, if set.
pub fn get(name: &CStr) -> Option<&'static [u8]> {
    // SAFETY: `name` is NUL terminated; getenv neither allocates nor keeps the pointer.
    let v = unsafe { libc::getenv(name.as_ptr()) };
    if v.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated string in the environment block, which the program does
    // not free while it runs (we read it once, at start-up).
    Some(unsafe { CStr::from_ptr(v) }.to_bytes())
}

/// A flag's value: `1` on; `0` or empty off; anything else unknown.
pub fn parse_flag(value: &[u8]) -> Option<bool> {
    match value {
        b"1" => Some(true),
        b"0" | b"" => Some(false),
        _ => None,
    }
}

/// Read a flag, warning about an unknown value (then off).
pub fn flag(name: &CStr) -> bool {
    let Some(value) = get(name) else {
        return false;
    };
    parse_flag(value).unwrap_or_else(|| {
        warn_unknown(name, value, b"0 or 1");
        false
    })
}

/// `hakmem: NAME=value: unknown value (expected ...); ignored`.
pub fn warn_unknown(name: &CStr, value: &[u8], expected: &[u8]) {
    let mut m = Message::<256>::new();
    m.put(b"hakmem: ")
        .put(name.to_bytes())
        .put(b"=")
        .put(&value[..value.len().min(64)])
        .put(b": unknown value (expected ")
        .put(expected)
        .put(b"); ignored\n");
    m.emit();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags() {
        assert_eq!(parse_flag(b"1"), Some(true));
        assert_eq!(parse_flag(b"0"), Some(false));
        assert_eq!(parse_flag(b""), Some(false));
        assert_eq!(parse_flag(b"yes"), None);
    }
}
