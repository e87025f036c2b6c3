//! `cargo xtask bench`: build the workload programs, run every (workload, allocator) pair
//! in its own child process, interleaved round by round, and report the medians as a
//! table, JSON, CSV and an SVG chart under `target/bench/`.

mod baseline;
pub mod build;
mod chart;
mod confirm;
pub mod docs;
mod meta;
pub mod mimalloc3;
mod musl;
mod plan;
pub mod preload;
mod report;
mod run;
mod slow;
mod summary;
pub mod warm;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use clap::Args;

use crate::shared::{output, unique_or_all, Allocator, Paths, Profile};

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
    /// Seconds to wait before each run. On a virtual machine that hands free memory back
    /// to its host (free page reporting), a pause of a few seconds makes every run start
    /// on memory the host must back again: the first touch of a cold machine.
    #[arg(long, default_value_t = 0.0, value_name = "SECS")]
    pause: f64,
    /// MiB of memory touched in huge pages and freed right before each run (after the
    /// pause), so that the pages a run faults in are backed by the host; 0 for none (see
    /// `bench/warm.rs`). 512 covers the largest workload's peak.
    #[arg(long, default_value_t = 512, value_name = "MIB")]
    warm: usize,
    /// hakmem's memory profile in every run (sets HAKMEM_PROFILE for the children; without
    /// it they get the environment's HAKMEM_PROFILE, if any). The rows `hakmem-balanced`
    /// and `hakmem-lean` (`--allocator hakmem,hakmem-balanced,hakmem-lean`) run in their
    /// own profile whatever this says.
    #[arg(long, value_enum)]
    profile: Option<Profile>,
    /// Put the run's table, with the commit, time and machine, between the
    /// `<!-- bench:begin -->` and `<!-- bench:end -->` markers of docs/BENCHMARKS.md, and
    /// its chart into docs/bench-chart.svg; or, in a run with the rows `hakmem-balanced`
    /// or `hakmem-lean`, their times over fast's between the `<!-- profiles:begin -->`
    /// and `<!-- profiles:end -->` markers of docs/MEMORY.md.
    #[arg(long)]
    write_docs: bool,
    /// Also run hakmem as built at this git revision (rows `baseline`, Rust and C),
    /// interleaved with the others: before and after a change in one run. Not with
    /// `--write-docs`.
    #[arg(long, conflicts_with = "write_docs")]
    baseline: Option<String>,
    /// Then run this many more interleaved rounds of each workload where hakmem's median
    /// time is over 1.10x the best allocator's or over mimalloc's, with only hakmem, that
    /// best allocator and mimalloc, and report both measurements (`bench/confirm.rs`).
    #[arg(long, default_value_t = 0, value_name = "ROUNDS")]
    confirm: usize,
}

impl BenchArgs {
    fn runs(&self) -> usize {
        self.runs.unwrap_or(if self.quick { 3 } else { 10 }).max(1)
    }

    /// The selected allocators, each once, in the order given.
    fn allocators(&self) -> Vec<Allocator> {
        let mut all = unique_or_all(&self.allocator, &Allocator::ALL);
        all.retain(|&a| a != Allocator::Baseline);
        if self.baseline.is_some() {
            let at = all
                .iter()
                .position(|&a| a == Allocator::Hakmem)
                .map_or(0, |i| i + 1);
            all.insert(at, Allocator::Baseline);
        }
        all
    }

    /// Whether any C workload could be selected.
    fn wants_c(&self) -> bool {
        self.wants_prefix("c-")
    }

    /// Whether any musl workload could be selected.
    fn wants_musl(&self) -> bool {
        self.wants_prefix(musl::PREFIX)
    }

    fn wants_prefix(&self, prefix: &str) -> bool {
        self.workload.is_empty() || self.workload.iter().any(|w| w.starts_with(prefix))
    }
}

pub fn run(args: BenchArgs) -> Result<ExitCode> {
    let pause = Duration::try_from_secs_f64(args.pause).context("--pause")?;
    let paths = Paths::new();
    let allocators = args.allocators();
    let built = build::build(
        &paths,
        args.wants_c(),
        args.wants_musl(),
        &allocators,
        args.baseline.as_deref(),
    )?;
    let plan = plan::plan(&args, &allocators, &built)?;
    ensure!(
        !plan.workloads.is_empty(),
        "nothing to run: {}",
        plan.notes.join("; ")
    );
    let started = meta::Meta::now(&args, &plan, &built);
    let timeout = Duration::from_secs(args.timeout);
    let before = run::BeforeEach {
        pause,
        warm_mib: args.warm,
    };
    let outcomes = run::run_all(&plan, args.runs(), timeout, before, args.profile);
    let summaries = summary::summarize(&plan, outcomes);
    report::print_table(&summaries, &plan.notes);
    let again = (args.confirm > 0 && !report::has_profile_rows(&summaries)).then(|| {
        let recheck = confirm::plan(&plan, &confirm::over_target(&summaries));
        let outcomes = run::run_all(&recheck, args.confirm, timeout, before, args.profile);
        summary::summarize(&recheck, outcomes)
    });
    if let Some(again) = &again {
        println!(
            "\nmeasured again ({} rounds):\n{}",
            args.confirm,
            confirm::table(&summaries, again)
        );
    }
    let dir = output::run_dir(&paths.bench(), &started.machine)?;
    report::write_all(&dir, &started, &summaries, &plan.notes)?;
    if let Some(again) = &again {
        report::write_again(&dir, again)?;
    }
    chart::write(&dir.join("chart.svg"), &summaries, &allocators)?;
    if args.write_docs {
        let confirmed = confirm::section(args.confirm, &summaries, again.as_deref());
        docs::write(
            &paths,
            &started,
            &summaries,
            &plan.notes,
            &dir.join("chart.svg"),
            &confirmed,
        )?;
    }
    println!(
        "\nresults: {}/{{results.json,results.csv,chart.svg}}",
        dir.display()
    );
    let failed = summaries
        .iter()
        .chain(again.iter().flatten())
        .any(|s| !s.failures.is_empty());
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
