//! Out of memory under `LD_PRELOAD`: `tests/c/oom.c` runs with its address space limited
//! (`RLIMIT_AS`, as `ulimit -v` sets it, applied in the child before `exec`). Every
//! allocation function returns NULL with `errno` ENOMEM (`posix_memalign` returns ENOMEM),
//! the program keeps running with its blocks intact, and frees let it allocate again.
//!
//! That hakmem-core leaves its structures consistent when `mmap` fails midway through a
//! refill is proven in-process by `crates/hakmem-core/tests/map_failure.rs` (injected
//! failures); this is the same from outside, with the kernel refusing.

mod common;

use common::*;
use std::os::unix::process::CommandExt;
use std::process::Output;

/// Address space for the child: its own start-up takes about 13 MiB.
const LIMIT: u64 = 256 << 20;

fn run_limited(case: &str, check: bool) -> Output {
    let mut cmd = command(build_c("oom.c"), true);
    cmd.arg(case)
        .env("HAKMEM_CHECK", if check { "1" } else { "0" });
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: LIMIT,
                rlim_max: LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let o = output(&mut cmd);
    assert_success(&o, &format!("oom {case} (HAKMEM_CHECK={})", check as u8));
    assert!(text(&o.stdout).contains("ok"), "{}", text(&o.stdout));
    o
}

#[test]
fn allocation_fails_cleanly_and_recovers_under_an_address_space_limit() {
    run_limited("address_space_limit", false);
}

#[test]
fn checked_mode_fails_cleanly_and_recovers_too() {
    run_limited("address_space_limit", true);
}

/// Freed memory serves any size once the OS refuses more: hakmem gives back what its
/// caches hold and tries once more.
#[test]
fn freed_memory_serves_any_size_when_mmap_fails() {
    run_limited("freed_memory_serves_any_size", false);
}
