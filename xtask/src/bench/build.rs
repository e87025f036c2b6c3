//! Building what the runs need: the Rust workload binaries (required), and for the C
//! rows the C workload program and `libhakmem.so` (optional: a failure becomes a note).

use std::path::PathBuf;
use std::process::Command;

use anyhow::Result;

use super::musl::{self, MuslBins};
use crate::shared::build::{cargo_build, workload_programs};
use crate::shared::{Allocator, Paths};

/// What was built; `Err` holds why an optional part is missing.
pub struct Built {
    /// `bench-hakmem`, `bench-mimalloc`, ... live here.
    pub rust_bins: PathBuf,
    pub c_program: Result<PathBuf, String>,
    pub libhakmem: Result<PathBuf, String>,
    /// The musl rows' programs.
    pub musl: Result<MuslBins, String>,
}

const C_SOURCE: &str = "benches/c/workloads.c";

pub fn build(
    paths: &Paths,
    want_c: bool,
    want_musl: bool,
    allocators: &[Allocator],
) -> Result<Built> {
    let rust_bins = workload_programs(paths)?;
    let not_selected = || Err("no C workload selected".to_string());
    let want_hakmem_so = allocators.contains(&Allocator::Hakmem);
    Ok(Built {
        rust_bins,
        c_program: if want_c {
            compile_c(paths)
        } else {
            not_selected()
        },
        libhakmem: if want_c && want_hakmem_so {
            build_libhakmem(paths)
        } else {
            not_selected()
        },
        musl: if want_musl {
            musl::build(paths, allocators)
        } else {
            Err("no musl workload selected".to_string())
        },
    })
}

fn build_libhakmem(paths: &Paths) -> Result<PathBuf, String> {
    cargo_build(paths, "hakmem-cabi").map_err(|e| format!("{e:#}"))?;
    existing(paths.release().join("libhakmem.so"))
}

/// `gcc -O2 -pthread` the C workloads into `target/bench/c-workloads`.
fn compile_c(paths: &Paths) -> Result<PathBuf, String> {
    let out = paths.bench().join("c-workloads");
    std::fs::create_dir_all(paths.bench()).map_err(|e| e.to_string())?;
    let status = Command::new("gcc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&out)
        .arg(paths.root.join(C_SOURCE))
        .status()
        .map_err(|e| format!("gcc not found ({e}): sudo apt-get install -y gcc"))?;
    if !status.success() {
        return Err(format!("gcc failed on {C_SOURCE}"));
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
