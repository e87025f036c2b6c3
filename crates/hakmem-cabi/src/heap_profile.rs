//! The heap profiler for C programs ([`hakmem_heap_profile`] does the work), set up from
//! the environment by the constructor in [`crate::env`]:
//!
//! - `HAKMEM_HEAP_PROFILE=PREFIX`: sample allocations; at exit write `PREFIX.pb.gz` (pprof),
//!   `PREFIX.svg` (flame graph of bytes in use), `PREFIX.alloc.svg` (of bytes allocated)
//!   and `PREFIX.txt` (the top stacks: in use at exit, the leak report, then allocated).
//!   `PREFIX` may end in `.pb.gz`.
//! - `HAKMEM_HEAP_PROFILE_INTERVAL=BYTES`: the mean sampling interval (default 512 KiB;
//!   `k`, `m` suffixes accepted).
//! - `HAKMEM_HEAP_PROFILE_SIGNAL=SIG` (a number or `USR1`, `USR2`): each time the process
//!   receives the signal, write the same files as `PREFIX.N.*` (N = 1, 2, ...) without
//!   stopping it. The handler only writes a byte to a pipe; a thread started at set-up
//!   writes the profile, outside any allocation.
//!
//! Names apart from `HAKMEM_PROFILE`, which chooses the memory profile. Not with
//! `HAKMEM_CHECK=1` (checked blocks have their own layout): then a warning, no profile.

use crate::fmt::Message;
use crate::{env, mode};
use core::ffi::{c_char, c_int, CStr};
use core::sync::atomic::{AtomicI32, AtomicUsize, Ordering::Relaxed};
use hakmem_heap_profile as hp;
use std::path::PathBuf;
use std::sync::OnceLock;

/// Where the profile at exit goes.
static PREFIX: OnceLock<PathBuf> = OnceLock::new();
/// The write end of the signal pipe (-1 when none).
static PIPE: AtomicI32 = AtomicI32::new(-1);
/// The process that started profiling: a forked child that exits writes no profile over
/// its parent's.
static OWNER_PID: AtomicI32 = AtomicI32::new(0);
/// Dumps made on signal so far.
static DUMPS: AtomicUsize = AtomicUsize::new(0);

/// Read the environment and start profiling if asked (called once, by the constructor).
pub fn init_from_env() {
    let Some(prefix) = env::get(c"HAKMEM_HEAP_PROFILE").filter(|v| !v.is_empty()) else {
        return;
    };
    if mode::checked() {
        Message::<256>::new()
            .put(b"hakmem: HAKMEM_HEAP_PROFILE is ignored with HAKMEM_CHECK=1\n")
            .emit();
        return;
    }
    let _busy = hp::Busy::enter();
    let interval = match env::get(c"HAKMEM_HEAP_PROFILE_INTERVAL") {
        None => hp::DEFAULT_INTERVAL,
        Some(v) => parse_size(v).unwrap_or_else(|| {
            env::warn_unknown(
                c"HAKMEM_HEAP_PROFILE_INTERVAL",
                v,
                b"a size in bytes, like 524288 or 512k",
            );
            hp::DEFAULT_INTERVAL
        }),
    };
    let prefix = PathBuf::from(String::from_utf8_lossy(prefix).into_owned());
    if let Err(e) = hp::start(hp::Options { interval }) {
        Message::<256>::new()
            .put(b"hakmem: heap profiling not started: ")
            .put(e.to_string().as_bytes())
            .put(b"\n")
            .emit();
        return;
    }
    let _ = PREFIX.set(prefix);
    // SAFETY: getpid has no preconditions.
    OWNER_PID.store(unsafe { libc::getpid() }, Relaxed);
    mode::profile();
    // SAFETY: `at_exit` is an `extern "C" fn()` that never unwinds.
    unsafe { libc::atexit(at_exit) };
    if let Some(v) = env::get(c"HAKMEM_HEAP_PROFILE_SIGNAL") {
        match parse_signal(v) {
            Some(sig) => watch_signal(sig),
            None => env::warn_unknown(
                c"HAKMEM_HEAP_PROFILE_SIGNAL",
                v,
                b"a signal number, USR1 or USR2",
            ),
        }
    }
}

/// `123`, `512k`, `4m`, `1g`.
pub fn parse_size(v: &[u8]) -> Option<usize> {
    let s = core::str::from_utf8(v).ok()?.trim();
    let (digits, mult) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1 << 10),
        b'm' | b'M' => (&s[..s.len() - 1], 1 << 20),
        b'g' | b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits
        .parse::<usize>()
        .ok()?
        .checked_mul(mult)
        .filter(|&n| n > 0)
}

/// A signal number, or `USR1` / `USR2` (with or without `SIG`).
pub fn parse_signal(v: &[u8]) -> Option<c_int> {
    let s = core::str::from_utf8(v).ok()?.trim();
    let name = s.strip_prefix("SIG").unwrap_or(s);
    match name {
        "USR1" => Some(libc::SIGUSR1),
        "USR2" => Some(libc::SIGUSR2),
        _ => s.parse().ok().filter(|&n: &c_int| (1..=64).contains(&n)),
    }
}

extern "C" fn on_signal(_: c_int) {
    let fd = PIPE.load(Relaxed);
    let byte = 1u8;
    // SAFETY: write(2) is async-signal-safe; a full pipe only drops this request.
    unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
}

/// Start the thread that writes a profile each time `sig` arrives.
fn watch_signal(sig: c_int) {
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` holds two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return;
    }
    let read_fd = fds[0];
    // Blocking reads for the writer thread; the write end stays non-blocking.
    // SAFETY: a descriptor we own.
    unsafe { libc::fcntl(read_fd, libc::F_SETFL, 0) };
    PIPE.store(fds[1], Relaxed);
    let spawned = std::thread::Builder::new()
        .name("hakmem-heap-profile".into())
        .spawn(move || {
            let _busy = hp::Busy::enter();
            loop {
                let mut b = 0u8;
                // SAFETY: reads one byte into `b`.
                let n = unsafe { libc::read(read_fd, (&mut b as *mut u8).cast(), 1) };
                if n == 1 {
                    let k = DUMPS.fetch_add(1, Relaxed) + 1;
                    if let Some(prefix) = PREFIX.get() {
                        let mut p = prefix.as_os_str().to_owned();
                        p.push(format!(".{k}"));
                        let p = strip_pb_gz(PathBuf::from(p));
                        report_dump(&p, hp::dump(&p));
                    }
                } else if n == 0 {
                    return;
                }
            }
        });
    if spawned.is_err() {
        return;
    }
    // SAFETY: a zeroed sigaction with a handler that only calls write(2).
    unsafe {
        let mut sa: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, core::ptr::null_mut());
    }
}

/// `x.pb.gz.3` -> `x.3` (the numbered prefix of a prefix given with its extension).
fn strip_pb_gz(p: PathBuf) -> PathBuf {
    let s = p.to_string_lossy().into_owned();
    match s.rsplit_once('.') {
        Some((head, n)) if head.ends_with(".pb.gz") => {
            PathBuf::from(format!("{}.{n}", head.trim_end_matches(".pb.gz")))
        }
        _ => p,
    }
}

fn report_dump(prefix: &std::path::Path, r: std::io::Result<[PathBuf; 4]>) {
    let msg = match r {
        Ok(paths) => format!("hakmem: heap profile written to {}\n", paths[0].display()),
        Err(e) => format!("hakmem: heap profile {}: {e}\n", prefix.display()),
    };
    Message::<512>::new().put(msg.as_bytes()).emit();
}

extern "C" fn at_exit() {
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } != OWNER_PID.load(Relaxed) {
        return;
    }
    let _busy = hp::Busy::enter();
    hp::stop();
    if let Some(prefix) = PREFIX.get() {
        report_dump(prefix, hp::dump(prefix));
    }
}

/// Write the heap profile files for `prefix` (see the module docs); 0 on success, -1 if
/// profiling was never started or a file could not be written.
///
/// # Safety
/// `prefix` is a NUL-terminated string.
pub unsafe fn dump_to(prefix: *const c_char) -> c_int {
    if prefix.is_null() || hp::table::len() == 0 {
        return -1;
    }
    let _busy = hp::Busy::enter();
    // SAFETY: by the caller.
    let s = unsafe { CStr::from_ptr(prefix) }
        .to_string_lossy()
        .into_owned();
    match hp::dump(s) {
        Ok(_) => 0,
        Err(_) => -1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_signals() {
        assert_eq!(parse_size(b"524288"), Some(524288));
        assert_eq!(parse_size(b"512k"), Some(512 << 10));
        assert_eq!(parse_size(b"4M"), Some(4 << 20));
        assert_eq!(parse_size(b"0"), None);
        assert_eq!(parse_size(b"x"), None);
        assert_eq!(parse_signal(b"USR2"), Some(libc::SIGUSR2));
        assert_eq!(parse_signal(b"SIGUSR1"), Some(libc::SIGUSR1));
        assert_eq!(parse_signal(b"12"), Some(12));
        assert_eq!(parse_signal(b"99"), None);
        assert_eq!(
            strip_pb_gz(PathBuf::from("out/heap.pb.gz.2")),
            PathBuf::from("out/heap.2")
        );
    }
}
