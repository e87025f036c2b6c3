//! Building what the runs need: the Rust workload binaries (required), and for the C
//! rows the C workload program, `libhakmem.so` and mimalloc 3's shared object (optional:
//! a failure becomes a note).

use std::path::PathBuf;
use std::process::Command;

use anyhow::Result;

use super::baseline::{self, Baseline};
use super::mimalloc3;
use super::musl::{self, MuslBins};
use crate::shared::build::{cargo_build, workload_programs};
use crate::shared::{Allocator, Paths};

/// What was built; `Err` holds why an optional part is missing.
pub struct Built {
    /// `bench-hakmem`, `bench-mimalloc`, ... live here.
    pub rust_bins: PathBuf,
    pub c_program: Result<PathBuf, String>,
    pub libhakmem: Result<PathBuf, String>,
    /// The C rows' mimalloc (see [`mimalloc3`]).
    pub mimalloc3: Result<mimalloc3::Mimalloc3, String>,
    /// The musl rows' programs.
    pub musl: Result<MuslBins, String>,
    /// hakmem at `--baseline REV`, if asked for.
    pub baseline: Option<Baseline>,
}

const C_SOURCE: &str = "benches/c/workloads.c";

pub fn build(
    paths: &Paths,
    want_c: bool,
    want_musl: bool,
    allocators: &[Allocator],
    baseline_rev: Option<&str>,
) -> Result<Built> {
    let rust_bins = workload_programs(paths)?;
    let wanted = |a: Allocator| want_c && allocators.iter().any(|b| b.program() == a);
    fn not_selected<T>() -> Result<T, String> {
        Err("no C workload selected".to_string())
    }
    Ok(Built {
        rust_bins,
        c_program: if want_c {
            c_workloads(paths)
        } else {
            not_selected()
        },
        libhakmem: if wanted(Allocator::Hakmem) {
            build_libhakmem(paths)
        } else {
            not_selected()
        },
        mimalloc3: if wanted(Allocator::Mimalloc) {
            mimalloc3::build(paths)
        } else {
            not_selected()
        },
        musl: if want_musl {
            musl::build(paths, allocators)
        } else {
            Err("no musl workload selected".to_string())
        },
        baseline: baseline_rev
            .map(|rev| baseline::build(paths, rev))
            .transpose()?,
    })
}

/// The C workload program (`target/bench/c-workloads`), or why there is none; its
/// `--which-malloc` is what [`super::preload`] checks each library with.
pub fn c_workloads(paths: &Paths) -> Result<PathBuf, String> {
    compile_c(
        paths,
        C_SOURCE,
        "c-workloads",
        &["-O2", "-pthread"],
        &["-lm"],
    )
}

/// `cargo build --release -p hakmem-cabi`: `libhakmem.so`, or why there is none.
pub fn build_libhakmem(paths: &Paths) -> Result<PathBuf, String> {
    cargo_build(paths, "hakmem-cabi").map_err(|e| format!("{e:#}"))?;
    existing(paths.release().join("libhakmem.so"))
}

/// `gcc FLAGS -o target/bench/NAME SOURCE LIBS`; the program, or why there is none.
pub fn compile_c(
    paths: &Paths,
    source: &str,
    name: &str,
    flags: &[&str],
    libs: &[&str],
) -> Result<PathBuf, String> {
    let out = paths.bench().join(name);
    std::fs::create_dir_all(paths.bench()).map_err(|e| e.to_string())?;
    let status = Command::new("gcc")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(paths.root.join(source))
        .args(libs)
        .status()
        .map_err(|e| format!("gcc not found ({e}): sudo apt-get install -y gcc"))?;
    if !status.success() {
        return Err(format!("gcc failed on {source}"));
    }
    existing(out)
}

fn existing(path: PathBuf) -> Result<PathBuf, String> {
    if path.exists() {
        Ok(path)
    } else {
        Err(format!("{} was not produced", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `c-workloads --phases ROW OPS` runs the row's rounds with each phase timed apart;
    /// the readings quote it, so its line must come out whole: every phase measured, over
    /// every round but the first (`OPS` is three of the row's rounds, so two).
    fn assert_phases(row: &str, ops: &str, phases: &[&str]) {
        let program = c_workloads(&Paths::new()).expect("gcc builds the C workloads");
        let out = Command::new(program)
            .args(["--phases", row, ops])
            .output()
            .expect("the C workloads run");
        assert!(out.status.success());
        let line = String::from_utf8(out.stdout).expect("text");
        assert!(
            line.starts_with(&format!("PHASES workload={row} rounds=2 ")),
            "{line}"
        );
        for phase in phases {
            let ms: f64 = line
                .split_whitespace()
                .find_map(|kv| kv.strip_prefix(phase)?.strip_prefix('='))
                .unwrap_or_else(|| panic!("no {phase} in {line}"))
                .parse()
                .expect("a number");
            assert!(ms > 0.0, "{phase} not measured: {line}");
        }
    }

    /// One test for both rows: each builds the program, and two builds at once would
    /// write the same file.
    #[test]
    fn the_c_program_times_the_phases_of_its_two_rows() {
        let phases = ["build_ms", "walks_ms", "shuffle_ms", "free_ms"];
        assert_phases("c-list-rebuild", "300000", &phases);
        assert_phases("c-hash-teardown", "600000", &["build_ms", "free_ms"]);
    }
}
