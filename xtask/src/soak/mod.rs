//! `cargo xtask soak`: keep a workload going in one process per allocator (and per hakmem
//! profile) for a while, record ops/s and RSS epoch by epoch, and report drift, throughput
//! spread, OS calls and how fast memory goes back after a free, as a table, CSV, JSON and
//! an SVG plot under `target/soak/`; with `--write-docs NAME`, its tables into a marked
//! section of docs/MEMORY.md.
//!
//! The runs go one after another, never two at once: on a small machine concurrent runs
//! would measure each other.

mod chart;
mod plan;
mod report;
mod run;
mod summary;
mod units;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{ensure, Result};
use clap::Args;
use serde::Serialize;

use crate::shared::{build, docs, output, unique_or_all, Allocator, Paths, Profile};

/// The page `--write-docs` writes into.
const DOCS_PAGE: &str = "docs/MEMORY.md";

#[derive(Args, Debug)]
pub struct SoakArgs {
    /// How long each run lasts (e.g. 500ms, 60s, 10m).
    #[arg(long, default_value = "60s", value_parser = units::duration)]
    duration: Duration,
    /// The length of an epoch: one row of the CSV, one point of the plot.
    #[arg(long, default_value = "1s", value_parser = units::duration)]
    epoch: Duration,
    /// The warm-up, rounded up to whole epochs: left out of the drift and throughput
    /// figures [default: a tenth of the duration, at least one epoch].
    #[arg(long, value_parser = units::duration)]
    warm_up: Option<Duration>,
    /// Workloads, comma-separated: random-mixed, larson-1t, larson-2t, larson-8t,
    /// realloc-xthread, phases, phases-trim.
    #[arg(long, value_delimiter = ',', default_value = "random-mixed")]
    workload: Vec<String>,
    /// Allocators, comma-separated (default: all that have a Rust program: hakmem,
    /// mimalloc, jemalloc, system).
    #[arg(long, value_delimiter = ',', value_enum)]
    allocator: Vec<Allocator>,
    /// hakmem's profiles, comma-separated: one hakmem run per profile (default: one run
    /// with the environment's HAKMEM_PROFILE, if any).
    #[arg(long, value_delimiter = ',', value_enum)]
    profile: Vec<Profile>,
    /// Bytes of blocks `phases` allocates in each phase (e.g. 64MiB, 1GiB).
    #[arg(long, default_value = "1GiB", value_parser = units::bytes)]
    phases_bytes: u64,
    /// How long `phases` idles after each free.
    #[arg(long, default_value = "1s", value_parser = units::duration)]
    phases_idle: Duration,
    /// Seconds past the duration after which a run is killed and counted as failed.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Put the run's tables, with the commit, time and machine, between the
    /// `<!-- NAME:begin -->` and `<!-- NAME:end -->` markers of docs/MEMORY.md.
    #[arg(long, value_name = "NAME")]
    write_docs: Option<String>,
}

impl SoakArgs {
    /// Epochs of warm-up.
    fn warm_up_epochs(&self) -> usize {
        let warm_up = self.warm_up.unwrap_or((self.duration / 10).max(self.epoch));
        (warm_up.as_secs_f64() / self.epoch.as_secs_f64()).ceil() as usize
    }

    /// The selected allocators, each once, in the order given (default: those with a
    /// Rust workload program, the only ones that soak).
    fn allocators(&self) -> Vec<Allocator> {
        let rust: Vec<Allocator> = Allocator::ALL
            .into_iter()
            .filter(|a| a.has_rust_program())
            .collect();
        unique_or_all(&self.allocator, &rust)
    }

    /// hakmem's profiles, each once; `[None]` (the environment's) when none is given.
    fn profiles(&self) -> Vec<Option<Profile>> {
        let given: Vec<Option<Profile>> = self.profile.iter().copied().map(Some).collect();
        unique_or_all(&given, &[None])
    }

    fn workloads(&self) -> Vec<String> {
        unique_or_all(
            &self.workload.iter().map(String::as_str).collect::<Vec<_>>(),
            &[],
        )
        .into_iter()
        .map(String::from)
        .collect()
    }
}

/// How the soak ran, stored with its results.
#[derive(Serialize)]
pub struct Meta {
    #[serde(flatten)]
    machine: crate::shared::machine::Machine,
    duration_secs: f64,
    epoch_secs: f64,
    warm_up_epochs: usize,
    phases_bytes: u64,
    phases_idle_secs: f64,
    /// hakmem's profile when no --profile is given.
    hakmem_profile: String,
    order: &'static str,
}

pub fn run(args: SoakArgs) -> Result<ExitCode> {
    ensure!(
        !args.epoch.is_zero() && args.epoch <= args.duration,
        "--epoch must be at least 1ms and at most --duration"
    );
    let paths = Paths::new();
    let programs = build::workload_programs(&paths)?;
    let plan = plan::plan(&args, &programs)?;
    ensure!(
        !plan.series.is_empty(),
        "nothing to run: {}",
        plan.notes.join("; ")
    );
    let meta = Meta {
        machine: crate::shared::machine::Machine::now(),
        duration_secs: args.duration.as_secs_f64(),
        epoch_secs: args.epoch.as_secs_f64(),
        warm_up_epochs: args.warm_up_epochs(),
        phases_bytes: args.phases_bytes,
        phases_idle_secs: args.phases_idle.as_secs_f64(),
        hakmem_profile: Profile::describe(None),
        order: "sequential: one run at a time",
    };
    let traces = run::run_all(&plan, &args, &programs);
    let summaries = summary::summarize(&plan.series, &traces, args.warm_up_epochs());
    report::print_table(&summaries, &plan.notes);
    let dir = output::run_dir(&paths.soak(), &meta.machine)?;
    report::write_all(&dir, &meta, &plan, &traces, &summaries)?;
    chart::write(&dir.join("chart.svg"), &plan.series, &traces)?;
    if let Some(name) = &args.write_docs {
        let section = report::docs_section(&meta, &summaries, &plan.notes);
        docs::write_marked(&paths, DOCS_PAGE, name, &section)?;
        println!("wrote the tables into {DOCS_PAGE} (section {name})");
    }
    println!(
        "\nresults: {}/{{summary.csv,epochs.csv,marks.csv,returns.csv,results.json,chart.svg}}",
        dir.display()
    );
    let failed = traces.iter().any(|t| t.failure.is_some());
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
