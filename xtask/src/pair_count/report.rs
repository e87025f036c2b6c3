//! The table of `cargo xtask pair-count`, and its section of docs/ARCHITECTURE.md.

use std::fmt::Write as _;

use anyhow::Result;

use super::{gcc, Outcome, Row, C_LOOPS, RUST_OPS};
use crate::shared::docs::{machine_line, write_marked};
use crate::shared::machine::Machine;
use crate::shared::table::align;
use crate::shared::Paths;

/// The section's name: its markers are `<!-- paircount:begin -->` and
/// `<!-- paircount:end -->`.
const SECTION: &str = "paircount";
const PAGE: &str = "docs/ARCHITECTURE.md";

/// How the figures are made, for the terminal and the docs.
pub const METHOD: &str = "Method: instructions counted by `valgrind --tool=callgrind`, \
    which are deterministic (the same binaries give the same counts on every run). Each \
    program runs at two loop counts; a row is the difference of the two totals over the \
    difference of the pairs (or operations), so start-up and exit cancel out while the \
    loop's own instructions stay in: in the C and C++ rows the loop's counter, compare and \
    branch, and each call with its PLT jump (three calls in the `realloc` and \
    `usable_size` rows, two in the others). The C++ rows call `operator new` and sized `operator delete` as a C++ program \
    does: the preloaded library's where it defines them, else libstdc++'s, which call \
    `malloc` and `free`. In the Rust rows the workload's writes and reads of the block's \
    first and last bytes are counted, and the warm-up of a tenth of the count is counted \
    as operations too.";

/// The rows lined up: allocator, what one step is, instructions per step.
pub fn table(rows: &[Row]) -> String {
    let mut cells = vec![["allocator", "pair / op", "instructions"].map(String::from)];
    for row in rows {
        let count = match &row.count {
            Ok(n) => format!("{n:.1}"),
            Err(Outcome::Skipped(why)) => format!("skipped: {why}"),
            Err(Outcome::Failed(why)) => format!("FAILED: {why}"),
        };
        cells.push([
            row.allocator.name().to_string(),
            row.what.to_string(),
            count,
        ]);
    }
    align(&cells, 2)
}

pub fn write_docs(paths: &Paths, machine: &Machine, valgrind: &str, rows: &[Row]) -> Result<()> {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!-- Written by `cargo xtask pair-count --write-docs`; the next such run replaces \
         everything between the markers. -->\n"
    );
    let _ = writeln!(
        out,
        "`cargo xtask {}` at commit `{}`, {} (UTC), {valgrind}. C loop counts {} and {}; \
         Rust `fixed-size` operation counts {} and {}.\n",
        machine.command,
        machine.git_commit,
        machine.started,
        C_LOOPS.0,
        C_LOOPS.1,
        RUST_OPS.0,
        RUST_OPS.1
    );
    let _ = writeln!(out, "{}\n", machine_line(machine, &[&gcc()]));
    let _ = writeln!(out, "```text\n{}```\n", table(rows));
    let _ = writeln!(out, "{METHOD}");
    write_marked(paths, PAGE, SECTION, &out)?;
    println!("wrote the table into {PAGE}");
    Ok(())
}
