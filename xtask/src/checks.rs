//! `cargo xtask check-tsan`, `check-loom`, `check-miri`: the model checker and the dynamic
//! checkers of docs/RELIABILITY.md, with the exact commands documented there. Each builds
//! into its own target folder (`target/tsan`, `target/loom`, `target/miri`) so that the
//! ordinary build is not rebuilt afterwards.

use std::process::Command;

/// A check: the cargo commands it runs, one after the other, with which extra environment.
struct Check {
    name: &'static str,
    env: &'static [(&'static str, &'static str)],
    runs: &'static [&'static [&'static str]],
}

/// ThreadSanitizer's cargo arguments before the test selection.
macro_rules! tsan_test {
    ($($rest:literal),* $(,)?) => {
        &[
            "+nightly",
            "test",
            "-Zbuild-std",
            "--target",
            "x86_64-unknown-linux-gnu",
            "--target-dir",
            "target/tsan",
            "-p",
            "hakmem",
            $($rest),*
        ]
    };
}

const CHECKS: [Check; 3] = [
    // ThreadSanitizer over the multi-threaded tests; std is rebuilt with it. Then the
    // shadow model spread over threads (hakmem called directly from three threads).
    Check {
        name: "check-tsan",
        env: &[("RUSTFLAGS", "-Zsanitizer=thread")],
        runs: &[
            tsan_test!("--test", "threads", "--test", "global_workload"),
            tsan_test!("--test", "shadow_model", "--", "spread_over_threads"),
        ],
    },
    // loom explores the interleavings of the remote-free list (crates/hakmem-core/tests/loom.rs),
    // of the whole cross-thread free protocol: collection, slab release, adoption
    // (tests/loom_protocol.rs), and of the kept large blocks' (tests/loom_kept.rs).
    Check {
        name: "check-loom",
        env: &[("RUSTFLAGS", "--cfg loom")],
        runs: &[&[
            "test",
            "-p",
            "hakmem-core",
            "--test",
            "loom",
            "--test",
            "loom_protocol",
            "--test",
            "loom_kept",
            "--release",
            "--target-dir",
            "target/loom",
        ]],
    },
    // Miri over the pure-logic unit tests, then the real allocator on the model platform
    // layer (os/model.rs): a large block's whole life, the per-class counts read across
    // threads (class_usage), and the shadow model's short
    // sequences on one thread and spread over two (thread cache, heap, superslab,
    // remote frees, large blocks). Hakmem's pointers pass through integers (chunk bases,
    // block links), hence permissive provenance; the thread caches of exited threads
    // and the pool's memory stay mapped at exit, hence ignore-leaks.
    Check {
        name: "check-miri",
        env: &[(
            "MIRIFLAGS",
            "-Zmiri-permissive-provenance -Zmiri-ignore-leaks",
        )],
        runs: &[
            &[
                "+nightly",
                "miri",
                "test",
                "-p",
                "hakmem-core",
                "--lib",
                "--target-dir",
                "target/miri",
                "--",
                "size_class",
                "remote::",
                "sync::",
                "config::",
                "depot::",
                "superslab::tests::spans",
                "superslab::tests::span_table",
                "chunk_map",
                "slab_map",
            ],
            &[
                "+nightly",
                "miri",
                "test",
                "-p",
                "hakmem-core",
                "--test",
                "large_blocks",
                "--test",
                "pair_chunks",
                "--test",
                "class_usage",
                "--test",
                "growth_into_cache",
                "--target-dir",
                "target/miri",
            ],
            &[
                "+nightly",
                "miri",
                "test",
                "-p",
                "hakmem",
                "--test",
                "shadow_model",
                "--target-dir",
                "target/miri",
                "--",
                "short_sequences",
            ],
        ],
    },
];

/// Run the check `task` (`check-tsan`, `check-loom` or `check-miri`) from the workspace root.
pub fn run(task: &str) -> Result<(), String> {
    let check = CHECKS
        .iter()
        .find(|c| c.name == task)
        .ok_or_else(|| format!("unknown check {task}"))?;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root");
    for args in check.runs {
        let mut cmd = Command::new("cargo");
        cmd.args(*args).current_dir(root);
        for (k, v) in check.env {
            cmd.env(k, v);
        }
        let shown: Vec<String> = check
            .env
            .iter()
            .map(|(k, v)| format!("{k}={v:?} "))
            .collect();
        eprintln!("xtask {task}: {}cargo {}", shown.concat(), args.join(" "));
        let status = cmd.status().map_err(|e| format!("cannot run cargo: {e}"))?;
        if !status.success() {
            return Err(format!("{task} failed ({status})"));
        }
    }
    Ok(())
}
