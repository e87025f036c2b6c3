//! Building with cargo: the workload programs above all.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{ensure, Context, Result};

use super::Paths;

/// Build the Rust workload programs (`bench-hakmem`, `bench-mimalloc`, ...); their directory.
pub fn workload_programs(paths: &Paths) -> Result<PathBuf> {
    cargo_build(paths, "hakmem-benches").context("building the workload binaries")?;
    Ok(paths.release())
}

/// `cargo build --release -p PACKAGE`, its output shown as it goes.
pub fn cargo_build(paths: &Paths, package: &str) -> Result<()> {
    cargo_build_with(paths, package, &[])
}

/// `cargo build --release -p PACKAGE EXTRA...`, its output shown as it goes.
pub fn cargo_build_with(paths: &Paths, package: &str, extra: &[&str]) -> Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let shown = extra.join(" ");
    eprintln!("building {package} (release) {shown}");
    let status = Command::new(cargo)
        .args(["build", "--release", "--package", package])
        .args(extra)
        .current_dir(&paths.root)
        .status()
        .context("running cargo")?;
    ensure!(
        status.success(),
        "`cargo build --release -p {package} {shown}` failed"
    );
    Ok(())
}
