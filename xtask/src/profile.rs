//! `cargo xtask profile --out DIR -- PROGRAM [ARGS]`: run any program under
//! `LD_PRELOAD=libhakmem.so` with the heap profiler on, then print the top allocation
//! sites. The library writes, when the program exits, `DIR/heap.pb.gz` (pprof: in-use and
//! allocated objects and bytes), `DIR/heap.svg` (flame graph of bytes in use),
//! `DIR/heap.alloc.svg` (of bytes allocated) and `DIR/heap.txt` (the top stacks, printed
//! here).

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use anyhow::{ensure, Context, Result};
use clap::Args;

use crate::shared::{build::cargo_build, Paths};

#[derive(Args)]
pub struct ProfileArgs {
    /// Folder for heap.pb.gz, heap.svg, heap.alloc.svg and heap.txt (created if needed).
    #[arg(long)]
    out: PathBuf,
    /// Mean bytes between two samples (`HAKMEM_HEAP_PROFILE_INTERVAL`; default 512k).
    #[arg(long)]
    interval: Option<String>,
    /// Stacks to print per table.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

pub fn run(args: ProfileArgs) -> Result<ExitCode> {
    let paths = Paths::new();
    cargo_build(&paths, "hakmem-cabi")?;
    let lib = paths.release().join("libhakmem.so");
    ensure!(lib.exists(), "{} was not built", lib.display());
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let out = args.out.canonicalize()?;
    let prefix = out.join("heap");
    let pb = out.join("heap.pb.gz");
    let _ = std::fs::remove_file(&pb);
    let mut cmd = Command::new(&args.command[0]);
    cmd.args(&args.command[1..])
        .env("LD_PRELOAD", &lib)
        .env("HAKMEM_HEAP_PROFILE", &prefix);
    if let Some(i) = &args.interval {
        cmd.env("HAKMEM_HEAP_PROFILE_INTERVAL", i);
    }
    let status = cmd
        .status()
        .with_context(|| format!("running {}", args.command[0]))?;
    ensure!(
        pb.exists(),
        "no profile at {} (the program exited with {status}; a program that ends \
         with _exit or a signal writes none: use HAKMEM_HEAP_PROFILE_SIGNAL)",
        pb.display()
    );
    let report = std::fs::read_to_string(out.join("heap.txt"))?;
    println!();
    print_top(&report, args.top);
    println!(
        "\nprofile: {}\nflame graphs: {} (in use), {} (allocated)\nread with: go tool pprof -top {}",
        pb.display(),
        out.join("heap.svg").display(),
        out.join("heap.alloc.svg").display(),
        pb.display()
    );
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(c.clamp(1, 255) as u8),
        None => ExitCode::FAILURE,
    })
}

/// The report's header and each table's first `n` stacks.
fn print_top(report: &str, n: usize) {
    let mut rows = usize::MAX;
    for line in report.lines() {
        if line.contains("stack (innermost first)") {
            rows = 0;
            println!("{line}");
            continue;
        }
        if rows != usize::MAX && line.starts_with(' ') {
            if rows < n {
                println!("{line}");
            }
            rows += 1;
            continue;
        }
        println!("{line}");
    }
}
