//! `cargo xtask programs`: programs hakmem's authors did not write (CPython, SQLite, Perl,
//! awk, jq, sort, gcc, g++, Tcl, a shell script), each run under every allocator's `LD_PRELOAD` library, in
//! turn, round after round, each round in its own order. The workloads of `cargo xtask
//! bench` can only show the shapes they contain; these show what a user who preloads
//! hakmem into a tool they already have gets.
//!
//! Each run is started by `benches/c/timed.c`, which times it from fork to exit and
//! takes its peak RSS, `ru_maxrss` from `wait4` (the largest process of the run: for
//! `gcc`, `cc1`; for `g++`, `cc1plus`). Each program's output must be the same under every
//! allocator, so a broken run is a failure, not a fast row.

mod list;
mod measure;
mod report;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, Result};
use clap::Args;

use crate::bench::build::{build_libhakmem, c_workloads, compile_c, Built};
use crate::bench::{mimalloc3, preload, warm};
use crate::shared::machine::Machine;
use crate::shared::order::round_order;
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
    /// awk, jq, sort, gcc, g++, tcl, sh.
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
    let preloads = libraries(&paths, &allocators)?;
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
        report::write_docs(&paths, &machine, &args, &rows)?;
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

/// An allocator's `LD_PRELOAD` library (`None`: the system allocator), or why it has none.
type Preload = Result<Option<PathBuf>, String>;

/// Each allocator's library, checked to take over `malloc` (with the C workload program).
fn libraries(paths: &Paths, allocators: &[Allocator]) -> Result<Vec<(Allocator, Preload)>> {
    let built = Built {
        rust_bins: paths.release(),
        c_program: c_workloads(paths),
        libhakmem: build_libhakmem(paths),
        mimalloc3: mimalloc3::build(paths),
        musl: Err("not used".to_string()),
        baseline: None,
    };
    let c_program = built.c_program.clone().map_err(|e| anyhow!(e))?;
    Ok(allocators
        .iter()
        .map(|&a| (a, preload::preload(a, &built, &c_program)))
        .collect())
}

/// Where a run finds its inputs and leaves its output.
pub struct Inputs<'a> {
    /// benches/c/timed.c, built: what starts each run.
    pub timed: &'a Path,
    pub root: &'a Path,
    pub text: &'a Path,
    pub scratch: &'a Path,
}

/// `args.runs` rounds of `program` under each allocator in turn, each round in its own order
/// ([`round_order`]); a row per allocator.
fn run_program(
    program: &'static Program,
    preloads: &[(Allocator, Preload)],
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
            for a in round_order(preloads.len(), round) {
                let ((allocator, lib), samples) = (&preloads[a], &mut samples[a]);
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

/// Every run of a program must print the same: the output most runs printed is taken as
/// right, and a row with a run that printed anything else fails.
fn check_outputs(rows: &mut [Result<Vec<Sample>, NoFigure>]) {
    let mut counts: Vec<(u64, usize)> = Vec::new();
    for sample in rows.iter().flatten().flatten() {
        match counts
            .iter_mut()
            .find(|(digest, _)| *digest == sample.output)
        {
            Some((_, n)) => *n += 1,
            None => counts.push((sample.output, 1)),
        }
    }
    let Some(&(right, _)) = counts.iter().max_by_key(|(_, n)| *n) else {
        return;
    };
    for row in rows.iter_mut() {
        if let Ok(samples) = row {
            if samples.iter().any(|s| s.output != right) {
                *row = Err(NoFigure::Failed(
                    "its output differs from most runs'".to_string(),
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
        // The odd one out fails, even when it comes first.
        let mut rows = vec![
            Ok(vec![sample(8), sample(7)]),
            Err(NoFigure::Skipped("none".to_string())),
            Ok(vec![sample(7), sample(7)]),
            Ok(vec![sample(7)]),
        ];
        check_outputs(&mut rows);
        assert!(matches!(rows[0], Err(NoFigure::Failed(_))));
        assert!(matches!(rows[1], Err(NoFigure::Skipped(_))));
        assert!(rows[2].is_ok() && rows[3].is_ok());
    }
}
