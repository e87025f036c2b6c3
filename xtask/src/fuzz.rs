//! `cargo xtask fuzz --time SECS`: run every cargo-fuzz target in `fuzz/` for `SECS`
//! seconds each, one after the other, and print how many inputs each one ran.
//!
//! Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). The targets
//! are built without a sanitizer (`-s none`: hakmem's memory is its own mappings, which
//! AddressSanitizer does not watch, and the `c_api` target replaces `malloc`, which it
//! would too) and without compare tracing (it made the shadow model's pattern checks,
//! not hakmem, take most of the time), with debug assertions and overflow checks
//! (cargo-fuzz's default), on inputs of up to 256 ops. The oracle is the shadow model's
//! panics. A crash leaves its input in `fuzz/artifacts/<target>/`; the corpus grows in
//! `fuzz/corpus/<target>/`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The targets, in the order they run.
pub const TARGETS: [&str; 3] = ["rust_api", "c_api", "threads"];

/// The outcome of one target.
struct Run {
    target: &'static str,
    executions: Option<u64>,
    ok: bool,
}

/// Run each target for `time_secs` seconds; an error names the targets that failed.
pub fn run(time_secs: u64) -> Result<(), String> {
    let fuzz_dir = fuzz_dir();
    let version = Command::new("cargo")
        .args(["+nightly", "fuzz", "--version"])
        .output();
    if !version.is_ok_and(|o| o.status.success()) {
        return Err(
            "cargo fuzz on the nightly toolchain is needed: `rustup toolchain install nightly` \
             and `cargo install cargo-fuzz`"
                .into(),
        );
    }
    let mut runs = Vec::new();
    for target in TARGETS {
        eprintln!("xtask fuzz: {target} for {time_secs} s");
        runs.push(run_target(&fuzz_dir, target, time_secs)?);
    }
    eprintln!("\nxtask fuzz: {time_secs} s per target");
    for r in &runs {
        let executions = r
            .executions
            .map_or_else(|| "?".to_owned(), |n| n.to_string());
        let verdict = if r.ok {
            "no failure".to_owned()
        } else {
            format!("FAILED, see fuzz/artifacts/{}/", r.target)
        };
        eprintln!("  {:<10} {executions:>10} executions  {verdict}", r.target);
    }
    let failed: Vec<&str> = runs.iter().filter(|r| !r.ok).map(|r| r.target).collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("fuzz targets failed: {}", failed.join(", ")))
    }
}

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root")
        .join("fuzz")
}

/// Run one target, passing its output through, and read libFuzzer's final statistics.
fn run_target(fuzz_dir: &Path, target: &'static str, time_secs: u64) -> Result<Run, String> {
    let mut child = Command::new("cargo")
        .args([
            "+nightly",
            "fuzz",
            "run",
            "-s",
            "none",
            "--no-trace-compares",
            target,
        ])
        .arg("--")
        .arg(format!("-max_total_time={time_secs}"))
        // Sequences of up to 256 ops from the start: libFuzzer's slow length growth left
        // a 60 s run at 8 ops, with two thirds of the coverage features.
        .args(["-max_len=2048", "-len_control=0"])
        .arg("-print_final_stats=1")
        .current_dir(fuzz_dir)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run cargo fuzz: {e}"))?;
    let mut executions = None;
    let stderr = child.stderr.take().expect("piped");
    for line in BufReader::new(stderr).lines() {
        let line = line.map_err(|e| format!("reading cargo fuzz's output: {e}"))?;
        if let Some(n) = line.strip_prefix("stat::number_of_executed_units:") {
            executions = n.trim().parse().ok();
        }
        eprintln!("{line}");
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for cargo fuzz: {e}"))?;
    Ok(Run {
        target,
        executions,
        ok: status.success(),
    })
}
