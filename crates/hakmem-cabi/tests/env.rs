//! Configuration from the environment: `HAKMEM_VERBOSE`, `HAKMEM_STATS`,
//! `HAKMEM_PROFILE` (`HAKMEM_CHECK`: tests/checked.rs); unknown values get a one-line
//! warning, never a crash.

mod common;

use common::*;

#[test]
fn verbose_announces_the_profile() {
    let o = output(
        command("true", true)
            .env("HAKMEM_VERBOSE", "1")
            .env("HAKMEM_PROFILE", "lean"),
    );
    assert_success(&o, "true");
    assert_eq!(
        text(&o.stderr),
        "hakmem: loaded (profile lean, statistics off, checks off)\n"
    );
}

#[test]
fn quiet_by_default() {
    let o = output(&mut command("true", true));
    assert_success(&o, "true");
    assert!(o.stderr.is_empty(), "{}", text(&o.stderr));
    let o = output(command("true", true).env("HAKMEM_STATS", "0"));
    assert!(o.stderr.is_empty(), "{}", text(&o.stderr));
}

#[test]
fn stats_summary_at_exit() {
    let with = output(command("ls", true).arg("/").env("HAKMEM_STATS", "1"));
    let without = output(command("ls", false).arg("/"));
    assert_success(&with, "ls / with HAKMEM_STATS=1");
    assert_eq!(with.stdout, without.stdout);
    let err = text(&with.stderr);
    for needle in [
        "hakmem: statistics (profile fast)",
        "bytes at peak",
        "mapped",
        "mmap ",
        "munmap ",
        "madvise ",
        "os calls per call",
    ] {
        assert!(err.contains(needle), "{needle:?} missing from:\n{err}");
    }
    assert!(summary_number(&err, "calls      ") > 0, "{err}");
    // The census: `ls` made small blocks, so a superslab is mapped and partly resident.
    let superslabs: Vec<usize> = err
        .lines()
        .find_map(|l| l.split("resident   superslabs ").nth(1))
        .map(|rest| {
            rest.split_whitespace()
                .filter_map(|w| w.parse().ok())
                .take(2)
                .collect()
        })
        .expect("the census line");
    assert!(
        superslabs.len() == 2 && 0 < superslabs[0] && superslabs[0] <= superslabs[1],
        "{err}"
    );
}

/// The number after `label` on the summary line that has it.
fn summary_number(err: &str, label: &str) -> usize {
    err.lines()
        .find_map(|l| l.split(label).nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {label:?} in:\n{err}"))
}

/// Counting sees every free, those `free`'s fast path would take too: turning counting
/// on turns that path off (`hakmem_core::stop_free_cached`). Were the 10000 frees of
/// 64-byte blocks not seen, 640000 bytes would still be in use at exit.
#[test]
fn stats_count_every_free() {
    let o = output(command(build_c("counted.c"), true).env("HAKMEM_STATS", "1"));
    assert_success(&o, "counted with HAKMEM_STATS=1");
    let err = text(&o.stderr);
    assert!(summary_number(&err, "calls      ") >= 20_000, "{err}");
    assert!(summary_number(&err, "in use     ") < 64 * 1000, "{err}");
}

#[test]
fn unknown_values_warn_once_each() {
    let o = output(
        command("ls", true)
            .arg("/")
            .env("HAKMEM_STATS", "yes")
            .env("HAKMEM_VERBOSE", "2")
            .env("HAKMEM_PROFILE", "turbo"),
    );
    assert_success(&o, "ls / with bad settings");
    assert_eq!(o.stdout, output(command("ls", false).arg("/")).stdout);
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 3, "{err}");
    assert!(err.contains("HAKMEM_STATS=yes: unknown value"), "{err}");
    assert!(err.contains("HAKMEM_VERBOSE=2: unknown value"), "{err}");
    assert!(err.contains("unknown HAKMEM_PROFILE value"), "{err}");
}

/// Each profile runs the threaded workload (the profiles change caching and decommit).
#[test]
fn every_profile_runs_threads() {
    let p = build_c("threads.c");
    for profile in ["fast", "balanced", "lean"] {
        let o = output(
            command(&p, true)
                .arg("cross_thread_free")
                .env("HAKMEM_PROFILE", profile),
        );
        assert_success(&o, &format!("cross_thread_free, profile {profile}"));
    }
}
