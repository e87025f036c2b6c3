//! `cargo xtask bench`: build the workload programs, run every (workload, allocator) pair
//! in its own child process, interleaved round by round, and report the medians as a
//! table, JSON, CSV and an SVG chart under `target/bench/`.

mod build;
mod chart;
mod meta;
mod plan;
mod preload;
mod report;
mod run;
mod summary;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{ensure, Result};
use clap::Args;

pub use plan::Allocator;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Workloads to run, comma-separated (default: all; `c-` ones are the C programs).
    #[arg(long, value_delimiter = ',')]
    workload: Vec<String>,
    /// Allocators to compare, comma-separated (default: all).
    #[arg(long, value_delimiter = ',', value_enum)]
    allocator: Vec<Allocator>,
    /// Runs per (workload, allocator) pair [default: 10, or 3 with --quick].
    #[arg(long)]
    runs: Option<usize>,
    /// Operations of random-mixed; every other workload's count is scaled alike
    /// (default: each workload's full count, 20M for random-mixed).
    #[arg(long)]
    ops: Option<u64>,
    /// 3 runs instead of 10.
    #[arg(long)]
    quick: bool,
    /// Seconds after which a run is killed and counted as failed.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
}

impl BenchArgs {
    fn runs(&self) -> usize {
        self.runs.unwrap_or(if self.quick { 3 } else { 10 }).max(1)
    }

    /// The selected allocators, each once, in the order given.
    fn allocators(&self) -> Vec<Allocator> {
        if self.allocator.is_empty() {
            return Allocator::ALL.to_vec();
        }
        let mut unique = Vec::new();
        for &a in &self.allocator {
            if !unique.contains(&a) {
                unique.push(a);
            }
        }
        unique
    }

    /// Whether any C workload could be selected.
    fn wants_c(&self) -> bool {
        self.workload.is_empty() || self.workload.iter().any(|w| w.starts_with("c-"))
    }
}

/// Where things are: the workspace and its target directory.
pub struct Paths {
    pub root: PathBuf,
    pub target: PathBuf,
}

impl Paths {
    fn new() -> Paths {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let root = root.canonicalize().unwrap_or(root);
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target"));
        Paths { root, target }
    }

    fn release(&self) -> PathBuf {
        self.target.join("release")
    }

    fn bench(&self) -> PathBuf {
        self.target.join("bench")
    }
}

pub fn run(args: BenchArgs) -> Result<ExitCode> {
    let paths = Paths::new();
    let allocators = args.allocators();
    let built = build::build(
        &paths,
        args.wants_c(),
        allocators.contains(&Allocator::Hakmem),
    )?;
    let plan = plan::plan(&args, &allocators, &built)?;
    ensure!(
        !plan.workloads.is_empty(),
        "nothing to run: {}",
        plan.notes.join("; ")
    );
    let started = meta::Meta::now(&args, &plan);
    let outcomes = run::run_all(&plan, args.runs(), Duration::from_secs(args.timeout));
    let summaries = summary::summarize(&plan, outcomes);
    report::print_table(&summaries, &plan.notes);
    let dir = report::write_all(&paths.bench(), &started, &summaries, &plan.notes)?;
    chart::write(&dir.join("chart.svg"), &summaries, &allocators)?;
    println!(
        "\nresults: {}/{{results.json,results.csv,chart.svg}}",
        dir.display()
    );
    let failed = summaries.iter().any(|s| !s.failures.is_empty());
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
