//! `HAKMEM_CHECK=1`: the malloc family of `libhakmem.so` in checked mode
//! (`hakmem_core::Checked`, chosen before the first block is handed out, see
//! `src/mode.rs`). Misuse that the unchecked mode lets through (a double free of a block
//! that is not the newest free one, a write one byte past the usable size) or leaves
//! alone (free of a stack pointer) is reported, naming the pointer, the kind of misuse and,
//! for a small block, its size class; then the process aborts. Programs that use memory
//! correctly run as they do without checks.

mod common;

use common::*;
use std::os::unix::process::ExitStatusExt;
use std::process::Output;

const SIGABRT: i32 = 6;

/// Run a case of `checked.c` under `LD_PRELOAD`, with `HAKMEM_CHECK` set to `check`.
fn run(case: &str, check: &str) -> Output {
    output(
        command(build_c("checked.c"), true)
            .arg(case)
            .env("HAKMEM_CHECK", check),
    )
}

/// The case must abort with a report naming the pointer it announced and `kind`, and the
/// size class if `small`.
fn assert_reported(case: &str, kind: &str, small: bool) {
    let o = run(case, "1");
    let stderr = text(&o.stderr);
    assert_eq!(
        o.status.signal(),
        Some(SIGABRT),
        "{case}: expected an abort, got {}; stderr:\n{stderr}",
        o.status
    );
    let pointer = stderr
        .lines()
        .find_map(|l| l.strip_prefix("misusing pointer "))
        .unwrap_or_else(|| panic!("{case}: no pointer announced:\n{stderr}"));
    let report = stderr
        .lines()
        .find(|l| l.starts_with("hakmem: "))
        .unwrap_or_else(|| panic!("{case}: no report:\n{stderr}"));
    assert!(report.contains(kind), "{case}: not a {kind:?}: {report}");
    assert!(
        report.contains(&format!("pointer {pointer}")),
        "{case}: the report does not name {pointer}: {report}"
    );
    assert_eq!(
        report.contains("(size class "),
        small,
        "{case}: size class: {report}"
    );
}

/// Without `HAKMEM_CHECK` the case goes unnoticed (exit 3).
fn assert_unnoticed_without_checks(case: &str) {
    let o = run(case, "0");
    assert_eq!(o.status.code(), Some(3), "{case}: {}", text(&o.stderr));
}

#[test]
fn double_free_apart_is_reported() {
    assert_reported("double_free_apart", "double free", true);
    assert_unnoticed_without_checks("double_free_apart");
}

#[test]
fn realloc_after_free_is_reported() {
    assert_reported("realloc_after_free", "double free", true);
}

#[test]
fn interior_free_is_reported_with_its_size_class() {
    assert_reported("interior_free", "interior pointer", true);
}

#[test]
fn free_of_a_stack_pointer_is_reported() {
    assert_reported("stack_free", "never handed out", false);
    assert_unnoticed_without_checks("stack_free");
}

#[test]
fn write_past_the_usable_size_is_reported() {
    assert_reported("write_past_usable_size", "write past the end", true);
    assert_unnoticed_without_checks("write_past_usable_size");
}

#[test]
fn write_past_an_aligned_block_is_reported() {
    assert_reported("write_past_aligned_block", "write past the end", true);
}

/// The semantics cases (`semantics.c`) hold in checked mode too.
#[test]
fn malloc_semantics_hold_in_checked_mode() {
    for case in [
        "malloc_zero",
        "free_null",
        "free_keeps_errno",
        "out_of_memory",
        "calloc_overflow_and_zero",
        "reallocarray_overflow",
        "posix_memalign_rules",
        "posix_memalign_keeps_errno",
        "aligned_alloc_rules",
        "memalign_valloc_pvalloc",
        "realloc_null_and_zero",
        "usable_size_rules",
        "sixteen_byte_alignment",
        "libc_aliases",
        "c23_sized_frees",
        "glibc_introspection",
    ] {
        let o = output(
            command(build_c("semantics.c"), true)
                .arg(case)
                .env("HAKMEM_CHECK", "1"),
        );
        assert_success(&o, &format!("semantics {case} with HAKMEM_CHECK=1"));
    }
}

/// A real program prints the same with and without checks, and says checks are on.
#[test]
fn sort_runs_the_same_checked() {
    if skip_without("sort") {
        return;
    }
    let input = scratch("checked-sort").join("input");
    let lines: String = (0..20_000)
        .map(|i: u64| format!("{}\n", i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 100_000))
        .collect();
    std::fs::write(&input, lines).unwrap();
    let plain = output(command("sort", false).arg(&input));
    let checked = output(
        command("sort", true)
            .arg(&input)
            .env("HAKMEM_CHECK", "1")
            .env("HAKMEM_VERBOSE", "1"),
    );
    assert_success(&checked, "sort with HAKMEM_CHECK=1");
    assert!(checked.stdout == plain.stdout, "sort's output differs");
    assert!(
        text(&checked.stderr).contains("checks on"),
        "{}",
        text(&checked.stderr)
    );
}

/// An unknown value is warned about once and leaves checks off.
#[test]
fn unknown_value_warns_and_leaves_checks_off() {
    let o = run("double_free_apart", "yes");
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    let warnings = text(&o.stderr).matches("HAKMEM_CHECK=yes").count();
    assert_eq!(warnings, 1, "{}", text(&o.stderr));
}
