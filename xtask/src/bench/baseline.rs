//! The `baseline` rows: hakmem as built at another git revision, run interleaved with the
//! current tree's build, so that "no row got slower" is a comparison within one run.
//!
//! The revision's sources are exported with `git archive` into
//! `target/baseline/src-REV` and built there with a target directory of their own
//! (`target/baseline/target-REV`): its `bench-hakmem` for the Rust rows and its
//! `libhakmem.so` for the C rows (musl rows have no baseline). One target directory per
//! revision: `git archive` gives the files the commit's time, older than another
//! revision's build outputs, so a shared one made cargo take the other revision's
//! programs as up to date (a `--baseline 9c07f6d` run measured `aa50812`'s).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{ensure, Context, Result};

use crate::shared::Paths;

/// The baseline's programs.
pub struct Baseline {
    /// The revision as given, and the commit it names.
    pub rev: String,
    pub commit: String,
    /// Its `bench-hakmem` (Rust rows).
    pub rust_program: PathBuf,
    /// Its `libhakmem.so` (C rows).
    pub lib: PathBuf,
}

/// Export `rev` and build its `bench-hakmem` and `libhakmem.so`.
pub fn build(paths: &Paths, rev: &str) -> Result<Baseline> {
    let commit = git(
        &paths.root,
        &["rev-parse", "--verify", &format!("{rev}^{{commit}}")],
    )
    .with_context(|| format!("--baseline {rev}: not a commit"))?;
    let dir = paths.target.join("baseline");
    let src = dir.join(format!("src-{}", &commit[..12]));
    if !src.join("Cargo.toml").exists() {
        export(&paths.root, &commit, &src)?;
    }
    let target = dir.join(format!("target-{}", &commit[..12]));
    for (package, extra) in [
        ("hakmem-benches", &["--bin", "bench-hakmem"][..]),
        ("hakmem-cabi", &[][..]),
    ] {
        eprintln!("building {package} (release) at {rev} ({})", &commit[..12]);
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--release", "--package", package])
            .args(extra)
            .env("CARGO_TARGET_DIR", &target)
            .current_dir(&src)
            .status()
            .context("running cargo")?;
        ensure!(status.success(), "building {package} at {rev} failed");
    }
    let release = target.join("release");
    Ok(Baseline {
        rev: rev.to_string(),
        commit,
        rust_program: release.join("bench-hakmem"),
        lib: release.join("libhakmem.so"),
    })
}

/// `git archive COMMIT | tar -x -C DIR`.
fn export(root: &Path, commit: &str, dir: &Path) -> Result<()> {
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial)?;
    let mut archive = Command::new("git")
        .args(["archive", "--format=tar", commit])
        .current_dir(root)
        .stdout(Stdio::piped())
        .spawn()
        .context("running git archive")?;
    let tar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(&partial)
        .stdin(archive.stdout.take().expect("piped"))
        .status()
        .context("running tar")?;
    ensure!(
        archive.wait()?.success() && tar.success(),
        "exporting {commit} failed"
    );
    std::fs::rename(&partial, dir)?;
    Ok(())
}

fn git(root: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git").args(args).current_dir(root).output()?;
    ensure!(
        out.status.success(),
        "git {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}
