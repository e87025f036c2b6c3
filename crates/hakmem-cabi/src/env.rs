//! Settings from the environment, read once by a constructor (`.init_array`) with `getenv`,
//! which does not allocate.
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
//! and is ignored. The constructor runs after libc's and before the program's, so every
//! allocation the program makes sees the settings.

use crate::fmt::Message;
use crate::{mode, stats};
use core::ffi::CStr;
use core::sync::atomic::{AtomicBool, Ordering::Relaxed};

static VERBOSE: AtomicBool = AtomicBool::new(false);

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

extern "C" fn init() {
    // Fix the mode now if no allocation did yet (and warn about a bad value).
    mode::decide();
    let verbose = flag(c"HAKMEM_VERBOSE");
    VERBOSE.store(verbose, Relaxed);
    if flag(c"HAKMEM_STATS") {
        stats::enable();
    }
    // Let hakmem-core read HAKMEM_PROFILE now (and warn about a bad value) if no
    // allocation did so yet, so that the profile is known before the program starts.
    hakmem_core::init();
    crate::heap_profile::init_from_env();
    if verbose {
        announce();
    }
}

fn announce() {
    use core::fmt::Write;
    let mut m = Message::<256>::new();
    let _ = writeln!(
        m,
        "hakmem: loaded (profile {}, statistics {}, checks {})",
        hakmem_core::profile().name(),
        if stats::enabled() { "on" } else { "off" },
        if mode::checked() { "on" } else { "off" }
    );
    m.emit();
}

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

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
