//! `cargo xtask pair-count`: the instructions one allocation + free pair costs on each
//! allocator's fast path, counted by `valgrind --tool=callgrind` (deterministic, unlike
//! a clock). Each program runs at two loop counts; the difference of the two totals over
//! the difference of the counts is the cost of one more pair, start-up and exit cancelled.
//!
//! - C rows: `benches/c/pair.c` (`malloc(32)`, `free`) under each allocator's
//!   `LD_PRELOAD` library, as the C rows of `cargo xtask bench` use them; then the rest of
//!   the family the same way ([`C_PAIRS`]).
//! - C++ rows: the same program calling `operator new(32)` and sized `operator delete`,
//!   as a C++ program does: the preloaded library's where it defines them, else
//!   libstdc++'s, which call `malloc` and `free`.
//! - Rust rows: the `fixed-size` workload of `bench-hakmem` and `bench-mimalloc` (a
//!   256-byte block allocated, its ends written and read, freed).

mod callgrind;
mod report;

use std::path::Path;
use std::process::ExitCode;

use anyhow::{anyhow, Result};
use clap::Args;

use crate::bench::build::{build_libhakmem, compile_c, Built};
use crate::bench::{mimalloc3, preload};
use crate::shared::build::workload_programs;
use crate::shared::machine::{first_line, Machine};
use crate::shared::{Allocator, Paths};
use callgrind::Scratch;

#[derive(Args, Debug)]
pub struct PairCountArgs {
    /// Put the table, with the commit, time and machine, between the
    /// `<!-- paircount:begin -->` and `<!-- paircount:end -->` markers of
    /// docs/ARCHITECTURE.md.
    #[arg(long)]
    write_docs: bool,
}

const C_SOURCE: &str = "benches/c/pair.c";
/// The C program's two loop counts: small enough that every run takes a second or two
/// under callgrind, far enough apart that a refill every few hundred pairs averages out.
const C_LOOPS: (u64, u64) = (20_000, 220_000);
/// The `fixed-size` operation counts of the Rust rows; multiples of the warm-up divisor.
const RUST_OPS: (u64, u64) = (20_000, 220_000);
/// `WARM_UP_DIVISOR` of benches/src/lib.rs: a Rust run of N operations first does N / 10
/// untimed ones, so it does 1.1 N in all.
const WARM_UP_DIVISOR: u64 = 10;
/// The allocators with a Rust row.
const RUST_ALLOCATORS: [Allocator; 2] = [Allocator::Hakmem, Allocator::Mimalloc];

/// One line of the table.
pub struct Row {
    pub allocator: Allocator,
    pub what: &'static str,
    /// Instructions per pair (or operation), or why there is no figure.
    pub count: Result<f64, Outcome>,
}

/// Why a row has no figure.
pub enum Outcome {
    /// Its library is missing (or does not take over `malloc`): a note, not a failure.
    Skipped(String),
    Failed(String),
}

pub fn run(args: PairCountArgs) -> Result<ExitCode> {
    let paths = Paths::new();
    let valgrind = callgrind::version().map_err(|e| anyhow!(e))?;
    let machine = Machine::now();
    let built = Built {
        rust_bins: workload_programs(&paths)?,
        c_program: compile_c(
            &paths,
            C_SOURCE,
            "pair",
            &["-O2", "-fno-builtin-malloc"],
            &["-lstdc++"],
        ),
        libhakmem: build_libhakmem(&paths),
        mimalloc3: mimalloc3::build(&paths),
        musl: Err("not counted".to_string()),
        baseline: None,
    };
    let pair = built.c_program.clone().map_err(|e| anyhow!(e))?;
    let mut scratch = Scratch::new().map_err(|e| anyhow!(e))?;
    let mut rows = Vec::new();
    for (what, mode) in C_PAIRS {
        for allocator in Allocator::ALL {
            eprintln!("counting {} ({what})", allocator.name());
            let count = match preload::preload(allocator, &built, &pair) {
                Err(why) => Err(Outcome::Skipped(why)),
                Ok(lib) => {
                    c_pair(&mut scratch, &pair, mode, lib.as_deref()).map_err(Outcome::Failed)
                }
            };
            rows.push(Row {
                allocator,
                what,
                count,
            });
        }
    }
    for allocator in RUST_ALLOCATORS {
        eprintln!("counting {} (Rust op)", allocator.name());
        let program = built.rust_bins.join(format!("bench-{}", allocator.name()));
        rows.push(Row {
            allocator,
            what: "Rust fixed-size op (256 B)",
            count: rust_op(&mut scratch, &program).map_err(Outcome::Failed),
        });
    }
    print!("\n{}", report::table(&rows));
    println!("\n{}", report::METHOD);
    if args.write_docs {
        report::write_docs(&paths, &machine, &valgrind, &rows)?;
    }
    let failed = rows
        .iter()
        .any(|r| matches!(r.count, Err(Outcome::Failed(_))));
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The C program's pairs: the row's label, and the arguments before the loop count (a
/// mode of `benches/c/pair.c`). After the pair every C program makes, the rest of the
/// family on its fast path: the calls that zero, resize in place, align and ask a block's
/// size, and blocks of a class over 2 KiB and of one over 32 KiB, where some allocators'
/// thread caches end.
const C_PAIRS: [(&str, &[&str]); 9] = [
    ("C malloc(32) + free", &[]),
    ("C++ new(32) + sized delete", &["new"]),
    ("C calloc(1, 32) + free", &["calloc"]),
    ("C malloc(20) + realloc(28) + free", &["realloc"]),
    ("C aligned_alloc(64, 64) + free", &["aligned_alloc"]),
    ("C posix_memalign(32, 96) + free", &["posix_memalign"]),
    ("C malloc(40) + usable_size + free", &["usable_size"]),
    ("C malloc(3000) + free", &["malloc-3000"]),
    ("C malloc(40000) + free", &["malloc-40000"]),
];

/// Instructions per pair of the C program (`mode` its arguments before the count) under
/// `preload`.
fn c_pair(
    scratch: &mut Scratch,
    pair: &Path,
    mode: &[&str],
    preload: Option<&Path>,
) -> Result<f64, String> {
    let mut count = |n: u64| {
        let args: Vec<String> = mode
            .iter()
            .map(|a| a.to_string())
            .chain([n.to_string()])
            .collect();
        scratch.instructions(pair, &args, preload)
    };
    per_step(count(C_LOOPS.0)?, count(C_LOOPS.1)?, C_LOOPS.1 - C_LOOPS.0)
}

/// Instructions per `fixed-size` operation of a Rust workload binary, warm-up included.
fn rust_op(scratch: &mut Scratch, program: &Path) -> Result<f64, String> {
    let mut count = |n: u64| {
        let args = ["fixed-size".to_string(), n.to_string()];
        scratch.instructions(program, &args, None)
    };
    let ops = |n: u64| n + n / WARM_UP_DIVISOR;
    per_step(
        count(RUST_OPS.0)?,
        count(RUST_OPS.1)?,
        ops(RUST_OPS.1) - ops(RUST_OPS.0),
    )
}

/// (`big` - `small`) / `steps`: the cost of one step, if the bigger run cost more.
fn per_step(small: u64, big: u64, steps: u64) -> Result<f64, String> {
    match big.checked_sub(small) {
        Some(more) if more > 0 => Ok(more as f64 / steps as f64),
        _ => Err(format!(
            "the longer run counted {big} instructions, the shorter {small}"
        )),
    }
}

/// `gcc --version`'s first line, for the stamp.
fn gcc() -> String {
    first_line("gcc", &["--version"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_step_is_the_difference_over_the_steps() {
        assert_eq!(per_step(1_000, 3_000, 100), Ok(20.0));
        assert!(per_step(3_000, 1_000, 100).is_err());
        assert!(per_step(3_000, 3_000, 100).is_err());
        // The Rust counts are multiples of the divisor, so the warm-up adds exactly 10 %.
        for n in [RUST_OPS.0, RUST_OPS.1] {
            assert_eq!(n % WARM_UP_DIVISOR, 0);
        }
    }
}
