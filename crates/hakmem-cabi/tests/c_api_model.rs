//! The shadow model (`crates/hakmem/tests/shadow`) through the C API: `malloc`, `calloc`,
//! `realloc`, `reallocarray`, `posix_memalign`, `aligned_alloc`, `memalign`, `valloc`,
//! `pvalloc`, `free`, `free_sized`, `malloc_usable_size` (see `c_model/mod.rs`), over fixed
//! seeds, so that stable CI runs what the fuzz target `c_api` runs.
//!
//! This binary mounts the C ABI's sources and so exports `malloc` & co. itself: the test
//! harness and libc allocate through hakmem too, as any program linked with `-lhakmem`.
//! (The C ABI's own unit tests come with its sources and run here a second time.)
//! `HAKMEM_TEST_SCALE` multiplies the number of seeds.

#[path = "../src/lib.rs"]
#[allow(dead_code)]
mod cabi;
// The C ABI's modules refer to each other as `crate::malloc`, `crate::errno`, ...
#[allow(unused_imports)]
use cabi::*;

#[path = "../../hakmem/tests/common/mod.rs"]
mod common;
#[path = "../../hakmem/tests/shadow/mod.rs"]
mod shadow;

mod c_model;

use c_model::CApi;
use shadow::{ops_from_bytes, run_threads, run_with};
use std::process::Command;

/// Set in the child that runs the seeded tests in checked mode.
const EXPECT_CHECKED: &str = "HAKMEM_TEST_EXPECT_CHECKED";

fn ops(seed: u64, n: usize) -> Vec<shadow::Op> {
    ops_from_bytes(&common::Rng::new(seed).bytes(8 * n))
}

/// Fail unless the mode is the one this process was started for.
fn assert_mode() {
    let checked = std::env::var_os(EXPECT_CHECKED).is_some();
    // SAFETY: plain C calls on a block of our own.
    let usable = unsafe {
        let p = libc::malloc(24);
        let n = libc::malloc_usable_size(p);
        libc::free(p);
        n
    };
    // Checked mode keeps 8 bytes of a block for its canary.
    assert_eq!(
        usable == 24,
        checked,
        "malloc_usable_size(malloc(24)) = {usable}"
    );
}

#[test]
fn seeded_sequences() {
    assert_mode();
    for seed in 0..2 * common::scale() as u64 {
        let ops = ops(seed, 2000);
        let r = std::panic::catch_unwind(|| run_with(&ops, &CApi));
        assert!(r.is_ok(), "the C API failed with seed {seed}");
    }
}

#[test]
fn seeded_sequences_spread_over_threads() {
    assert_mode();
    for seed in 100..100 + common::scale() as u64 {
        let ops = ops(seed, 3000);
        let r = std::panic::catch_unwind(|| run_threads(&ops, &CApi, 3));
        assert!(r.is_ok(), "the C API on 3 threads failed with seed {seed}");
    }
}

/// The same sequences with `HAKMEM_CHECK=1`: this binary again, in a child, where every
/// allocation of the process (the harness's, libc's) is a checked one.
#[test]
fn seeded_sequences_in_checked_mode() {
    if std::env::var_os(EXPECT_CHECKED).is_some() {
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "seeded_sequences",
            "seeded_sequences_spread_over_threads",
        ])
        .env("HAKMEM_CHECK", "1")
        .env(EXPECT_CHECKED, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("2 passed"),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
