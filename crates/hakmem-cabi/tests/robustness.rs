//! Robustness under `LD_PRELOAD`: threads, thread exit, fork, allocations from awkward
//! places at start-up, shared libraries, pointers hakmem never handed out, misuse.

mod common;

use common::*;
use std::os::unix::process::ExitStatusExt;
use std::process::Output;

const SIGABRT: i32 = 6;

fn threads() -> std::path::PathBuf {
    build_c("threads.c")
}

#[test]
fn cross_thread_free() {
    run_case(&threads(), "cross_thread_free");
}

#[test]
fn thread_exit_returns_memory() {
    run_case(&threads(), "thread_exit_returns_memory");
}

#[test]
fn key_destructor_allocates_after_thread_exit_hook() {
    run_case(&threads(), "key_destructor_allocates");
}

#[test]
fn fork_from_a_multithreaded_program() {
    run_case(&threads(), "fork_with_threads");
}

#[test]
fn start_up_allocations_from_a_constructor_and_dlsym() {
    run_case(&build_c("startup.c"), "constructor_allocates");
}

#[test]
fn first_allocation_inside_tls_get_addr() {
    let lib = build_shared("tls_lib.c");
    let o = output(
        command(build_c("startup.c"), true)
            .arg("dynamic_tls")
            .env("TEST_LIB_DIR", lib.parent().unwrap()),
    );
    assert_success(&o, "startup dynamic_tls");
}

/// The loader binds every symbol at start-up (its allocations then come first).
#[test]
fn bind_now_and_trivial_programs() {
    for program in ["true", "env", "ls"] {
        let o = output(command(program, true).env("LD_BIND_NOW", "1"));
        assert_success(&o, program);
        assert!(o.stderr.is_empty(), "{program}: {}", text(&o.stderr));
    }
}

fn crosslib() -> std::path::PathBuf {
    let side = build_shared("side.c");
    let dir = side.parent().unwrap().to_str().unwrap().to_owned();
    build(
        "crosslib.c",
        "gcc",
        &["-L", &dir, "-lside", &format!("-Wl,-rpath,{dir}")],
    )
}

#[test]
fn shared_library_allocates_program_frees() {
    run_case(&crosslib(), "library_and_program");
}

#[test]
fn libc_internal_allocations_freed_by_the_program() {
    run_case(&crosslib(), "libc_internal_allocations");
}

/// Run a case of foreign.c, which must pass and say nothing (hakmem warns only when
/// verbose).
fn foreign_case_passes_silently(case: &str) {
    let o = run_case(&build_c("foreign.c"), case);
    assert!(
        o.stderr.is_empty(),
        "silent unless verbose: {}",
        text(&o.stderr)
    );
}

#[test]
fn foreign_free_is_ignored() {
    foreign_case_passes_silently("free_is_ignored");
}

#[test]
fn foreign_sized_free_is_ignored() {
    foreign_case_passes_silently("sized_free_is_ignored");
}

#[test]
fn foreign_free_warns_once_when_verbose() {
    let o = output(
        command(build_c("foreign.c"), true)
            .arg("free_is_ignored")
            .env("HAKMEM_VERBOSE", "1"),
    );
    assert_success(&o, "foreign free_is_ignored, verbose");
    let warnings = text(&o.stderr)
        .lines()
        .filter(|l| l.starts_with("hakmem: free of"))
        .count();
    assert_eq!(warnings, 1, "{}", text(&o.stderr));
}

#[test]
fn foreign_realloc_copies() {
    run_case(&build_c("foreign.c"), "realloc_copies");
}

#[test]
fn foreign_realloc_stops_at_unreadable_memory() {
    run_case(&build_c("foreign.c"), "realloc_stops_at_unmapped_memory");
}

/// Run a misuse case of `invalid.c`: it must be reported and abort.
fn assert_aborts(case: &str) -> Output {
    let o = output(command(build_c("invalid.c"), true).arg(case));
    assert_eq!(
        o.status.signal(),
        Some(SIGABRT),
        "{case}: expected abort, got {}; stderr:\n{}",
        o.status,
        text(&o.stderr)
    );
    assert!(
        text(&o.stderr).contains("hakmem: "),
        "{case}: no report: {}",
        text(&o.stderr)
    );
    o
}

#[test]
fn interior_free_of_a_large_block_aborts() {
    assert_aborts("interior_free_large");
}

#[test]
fn interior_realloc_of_a_large_block_aborts() {
    assert_aborts("interior_realloc_large");
}

#[test]
fn double_free_of_a_large_block_aborts() {
    assert_aborts("double_free_large");
}

/// `free(p + 16)` of a 64-byte block is reported (owner() checks that a small pointer
/// starts a block) instead of putting an interior pointer on a free list.
#[test]
fn interior_free_of_a_small_block_aborts() {
    assert_aborts("interior_free_small");
}

/// A small block freed twice in a row is caught by the cheap check on the free fast path
/// (the block is already at the head of its bin). Double frees further apart need
/// `HAKMEM_CHECK=1`.
#[test]
fn double_free_of_a_small_block_aborts() {
    assert_aborts("double_free_small");
}
