//! The musl rows: the Rust workloads built for `x86_64-unknown-linux-musl` (static
//! binaries), with musl's own malloc (`system`), hakmem and the `mimalloc` crate, shown as
//! `musl-<workload>`. musl's malloc serializes threads; this is where a Rust program that
//! ships as a static musl binary gains most from another allocator.
//!
//! Optional like the C rows: without the rustup target the musl rows are skipped with a
//! note; mimalloc's build needs `musl-gcc` (Debian package musl-tools), and without it
//! only its row is skipped. jemalloc is not built for musl (its configure-and-make build
//! would double the time of the musl build, and the comparison asked for is musl's malloc
//! against hakmem and mimalloc).

use std::path::PathBuf;
use std::process::Command;

use crate::shared::build::cargo_build_with;
use crate::shared::{Allocator, Paths};

pub const TARGET: &str = "x86_64-unknown-linux-musl";
/// Workload names of the musl rows start with this.
pub const PREFIX: &str = "musl-";

/// The musl workload binaries that were built: each allocator's program, or why not.
pub struct MuslBins {
    pub programs: Vec<(Allocator, Result<PathBuf, String>)>,
}

impl MuslBins {
    pub fn program(&self, a: Allocator) -> Result<PathBuf, String> {
        self.programs
            .iter()
            .find(|(p, _)| *p == a)
            .map_or_else(|| Err("not selected".to_string()), |(_, r)| r.clone())
    }
}

/// Build the musl workload binaries of the selected allocators; `Err` when there can be
/// no musl rows at all.
pub fn build(paths: &Paths, allocators: &[Allocator]) -> Result<MuslBins, String> {
    if std::env::consts::ARCH != "x86_64" {
        return Err(format!("{TARGET} rows are built on x86-64 only"));
    }
    target_installed()?;
    let dir = paths.target.join(TARGET).join("release");
    // hakmem and musl's malloc need no C compiler: one build, both required.
    let base = ["--target", TARGET, "--no-default-features"];
    cargo_build_with(paths, "hakmem-benches", &base)
        .map_err(|e| format!("building the musl workloads: {e:#}"))?;
    let program = |a: Allocator| dir.join(format!("bench-{}", a.program().name()));
    let mut programs = Vec::new();
    for &a in allocators {
        let result = match a {
            Allocator::Hakmem
            | Allocator::HakmemBalanced
            | Allocator::HakmemLean
            | Allocator::System => Ok(program(a)),
            Allocator::Mimalloc => {
                let extra = [
                    &base[..],
                    &["--features", "mimalloc", "--bin", "bench-mimalloc"],
                ];
                cargo_build_with(paths, "hakmem-benches", &extra.concat())
                    .map(|()| program(a))
                    .map_err(|e| {
                        format!("{e:#} (the mimalloc crate builds C for musl with musl-gcc: sudo apt-get install -y musl-tools)")
                    })
            }
            Allocator::Jemalloc => Err("jemalloc is not built for musl".to_string()),
            Allocator::Mimalloc2 | Allocator::Tcmalloc => {
                Err(format!("{} has C rows only", a.name()))
            }
            Allocator::Baseline => Err("the baseline has no musl rows".to_string()),
        };
        programs.push((a, result));
    }
    Ok(MuslBins { programs })
}

/// Whether rustup (or the toolchain) has the musl standard library.
fn target_installed() -> Result<(), String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc)
        .args(["--print", "target-libdir", "--target", TARGET])
        .output()
        .map_err(|e| format!("running rustc: {e}"))?;
    let libdir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let has_std = std::fs::read_dir(&libdir).is_ok_and(|entries| {
        entries
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().starts_with("libstd-"))
    });
    if out.status.success() && has_std {
        Ok(())
    } else {
        Err(format!(
            "the {TARGET} target is not installed: rustup target add {TARGET}"
        ))
    }
}
