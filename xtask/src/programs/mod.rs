//! `cargo xtask programs`: programs hakmem's authors did not write (CPython, SQLite, Perl,
//! awk, sort, gcc), each run under every allocator's `LD_PRELOAD` library, in turn, round
//! after round. The workloads of `cargo xtask bench` can only show the shapes they
//! contain; these show what a user who preloads hakmem into a tool they already have
//! gets.
//!
//! A run is timed from spawn to exit; its peak RSS is `ru_maxrss` from `wait4` (the
//! largest process of the run: for `gcc`, `cc1`). Each program's output must be the same
//! under every allocator, so a broken run is a failure, not a fast row.

mod list;
mod measure;
mod report;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, Result};
use clap::Args;

use crate::bench::build::{build_libhakmem, compile_c, Built};
use crate::bench::{mimalloc3, preload, warm};
use crate::shared::machine::Machine;
use crate::shared::{unique_or_all, Allocator, Paths};
use list::Program;
use measure::Sample;

#[derive(Args, Debug)]
pub struct ProgramsArgs {
    /// Rounds: each program runs this many times under each allocator, interleaved.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Only these allocators (comma-separated; all competitors by default). The rows
    /// `hakmem-balanced` and `hakmem-lean` run hakmem in that profile.
    #[arg(long, value_delimiter = ',')]
    allocator: Vec<Allocator>,
    /// Only these programs (comma-separated): python-json, python-malloc, sqlite, perl,
    /// awk, sort, gcc.
    #[arg(long, value_delimiter = ',')]
    program: Vec<String>,
    /// MiB touched in huge pages and freed before each run, as `cargo xtask bench --warm`.
    #[arg(long, default_value_t = 512, value_name = "MIB")]
    warm: usize,
    /// Put the tables, with the commit, time and machine, between the
    /// `<!-- programs:begin -->` and `<!-- programs:end -->` markers of
    /// docs/BENCHMARKS.md.
    #[arg(long)]
    write_docs: bool,
}

/// What one program gave under one allocator: its samples, or why it has none.
pub struct Row {
    pub program: &'static Program,
    pub allocator: Allocator,
    pub samples: Result<Vec<Sample>, NoFigure>,
}

/// Why a row has no figure.
#[derive(Debug)]
pub enum NoFigure {
    /// The program or the allocator's library is missing: a note, not a failure.
    Skipped(String),
    Failed(String),
}

pub fn run(args: ProgramsArgs) -> Result<ExitCode> {
    let paths = Paths::new();
    let machine = Machine::now();
    let programs = list::select(&args.program)?;
    let allocators = unique_or_all(&args.allocator, &Allocator::ALL);
    let built = Built {
        rust_bins: paths.release(),
        c_program: compile_c(
            &paths,
            "benches/c/workloads.c",
            "c-workloads",
            &["-O2", "-pthread"],
            &["-lm"],
        ),
        libhakmem: build_libhakmem(&paths),
        mimalloc3: mimalloc3::build(&paths),
        musl: Err("not used".to_string()),
        baseline: None,
    };
    // Every library is checked to take over `malloc` (with the C workload program).
    let c_program = built.c_program.clone().map_err(|e| anyhow!(e))?;
    let preloads: Vec<(Allocator, Result<Option<PathBuf>, String>)> = allocators
        .iter()
        .map(|&a| (a, preload::preload(a, &built, &c_program)))
        .collect();
    let timed =
        compile_c(&paths, "benches/c/timed.c", "timed", &["-O2"], &[]).map_err(|e| anyhow!(e))?;
    let scratch = paths.bench().join("programs");
    let text = list::write_text(&scratch)?;
    let mut rows = Vec::new();
    for program in programs {
        rows.extend(run_program(
            program,
            &preloads,
            &Inputs {
                timed: &timed,
                root: &paths.root,
                text: &text,
                scratch: &scratch,
            },
            &args,
        ));
    }
    print!("\n{}", report::terminal(&rows));
    if args.write_docs {
        report::write_docs(&paths, &machine, args.runs, &rows)?;
    }
    let failed = rows
        .iter()
        .any(|r| matches!(r.samples, Err(NoFigure::Failed(_))));
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Where a run finds its inputs and leaves its output.
pub struct Inputs<'a> {
    /// benches/c/timed.c, built: what starts each run.
    pub timed: &'a Path,
    pub root: &'a Path,
    pub text: &'a Path,
    pub scratch: &'a Path,
}

/// `args.runs` rounds of `program` under each allocator in turn; a row per allocator.
fn run_program(
    program: &'static Program,
    preloads: &[(Allocator, Result<Option<PathBuf>, String>)],
    inputs: &Inputs,
    args: &ProgramsArgs,
) -> Vec<Row> {
    let executable = list::find_executable(program.executable);
    let mut samples: Vec<Result<Vec<Sample>, NoFigure>> = preloads
        .iter()
        .map(|(_, lib)| match (&executable, lib) {
            (Err(why), _) | (_, Err(why)) => Err(NoFigure::Skipped(why.clone())),
            _ => Ok(Vec::new()),
        })
        .collect();
    if let Ok(executable) = &executable {
        for round in 0..args.runs {
            eprintln!("{} round {}/{}", program.name, round + 1, args.runs);
            for ((allocator, lib), samples) in preloads.iter().zip(samples.iter_mut()) {
                let (Ok(lib), Ok(done)) = (lib, samples.as_mut()) else {
                    continue;
                };
                warm::warm(args.warm);
                let run = measure::once(executable, program, lib.as_deref(), *allocator, inputs);
                match run {
                    Ok(sample) => done.push(sample),
                    Err(why) => *samples = Err(NoFigure::Failed(why)),
                }
            }
        }
    }
    check_outputs(&mut samples);
    preloads
        .iter()
        .zip(samples)
        .map(|((allocator, _), samples)| Row {
            program,
            allocator: *allocator,
            samples,
        })
        .collect()
}

/// Every run of a program must print the same as the first: a run whose output differs
/// makes its allocator's row a failure.
fn check_outputs(rows: &mut [Result<Vec<Sample>, NoFigure>]) {
    let first = rows
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .find_map(|s| s.first())
        .map(|s| s.output);
    let Some(first) = first else { return };
    for row in rows.iter_mut() {
        if let Ok(samples) = row {
            if samples.iter().any(|s| s.output != first) {
                *row = Err(NoFigure::Failed(
                    "its output differs from the other runs'".to_string(),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(output: u64) -> Sample {
        Sample {
            secs: 1.0,
            max_rss_kb: 1,
            output,
        }
    }

    #[test]
    fn a_run_with_other_output_fails_its_row() {
        let mut rows = vec![
            Err(NoFigure::Skipped("none".to_string())),
            Ok(vec![sample(7), sample(7)]),
            Ok(vec![sample(7), sample(8)]),
        ];
        check_outputs(&mut rows);
        assert!(rows[0].is_err());
        assert!(rows[1].is_ok());
        assert!(matches!(rows[2], Err(NoFigure::Failed(_))));
    }
}
