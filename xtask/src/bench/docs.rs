//! `cargo xtask bench --write-docs`: the run's table, stamped with the commit, the time
//! and the machine, replaces what stands between the markers in docs/BENCHMARKS.md, and
//! its chart replaces docs/bench-chart.svg; what `--confirm` measured again (or that it
//! did not run) replaces the `confirm` section of the same page. A run with the profile rows
//! (`hakmem-balanced`, `hakmem-lean`) writes their ratios over fast into
//! docs/MEMORY.md instead.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

use super::meta::Meta;
use super::report;
use super::summary::Summary;
use crate::shared::docs::{machine_line, write_marked};
use crate::shared::Paths;

/// The section's name: its markers are `<!-- bench:begin -->` and `<!-- bench:end -->`.
const SECTION: &str = "bench";
const PAGE: &str = "docs/BENCHMARKS.md";
/// The rows measured again (`--confirm`): `<!-- confirm:begin -->` ... in the same page.
const CONFIRM_SECTION: &str = "confirm";
const CHART: &str = "docs/bench-chart.svg";
/// The profile rows' section: `<!-- profiles:begin -->` ... in docs/MEMORY.md.
const PROFILES_SECTION: &str = "profiles";
const PROFILES_PAGE: &str = "docs/MEMORY.md";

pub fn write(
    paths: &Paths,
    meta: &Meta,
    summaries: &[Summary],
    notes: &[String],
    chart: &Path,
    confirmed: &str,
) -> Result<()> {
    if report::has_profile_rows(summaries) {
        write_marked(
            paths,
            PROFILES_PAGE,
            PROFILES_SECTION,
            &profiles(meta, summaries),
        )?;
        println!("wrote the profiles' ratios into {PROFILES_PAGE}");
        return Ok(());
    }
    let section = section(paths, meta, summaries, notes);
    write_marked(paths, PAGE, SECTION, &section)?;
    write_marked(paths, PAGE, CONFIRM_SECTION, confirmed)?;
    std::fs::copy(chart, paths.root.join(CHART)).with_context(|| format!("writing {CHART}"))?;
    println!("wrote the results into {PAGE} and {CHART}");
    Ok(())
}

fn section(paths: &Paths, meta: &Meta, summaries: &[Summary], notes: &[String]) -> String {
    let root = format!("{}/", paths.root.display());
    let mut out = stamp(meta);
    let _ = writeln!(out, "C rows' `LD_PRELOAD` libraries:\n");
    for (allocator, lib) in &meta.preloads {
        let _ = write!(out, "- {allocator}: `{}`", lib.replace(&root, ""));
        match &meta.mimalloc3_sources {
            Some(sources) if allocator == "mimalloc" => {
                let _ = writeln!(out, ", built from `{}`", home_relative(sources));
            }
            _ => out.push('\n'),
        }
    }
    let _ = writeln!(out, "\n```text\n{}```\n", report::table(summaries));
    let _ = writeln!(
        out,
        "hakmem's median time over the best allocator's median time (`time/best`), per \
         workload:\n\n```text\n{}```\n",
        report::hakmem_vs_best(summaries)
    );
    for note in notes {
        let _ = writeln!(out, "Note: {note}\n");
    }
    let _ = writeln!(
        out,
        "Chart (ops/s relative to mimalloc, and peak RSS, per workload): \
         [bench-chart.svg](bench-chart.svg)."
    );
    out
}

/// The section's head: who wrote it, the command, commit, time and machine.
fn stamp(meta: &Meta) -> String {
    let m = &meta.machine;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!-- Written by `cargo xtask bench --write-docs`; the next such run replaces \
         everything between the markers. -->\n"
    );
    let _ = writeln!(
        out,
        "`cargo xtask {}` at commit `{}`, started {} (UTC); runs per workload and \
         allocator, interleaved: {}; memory warmed before each run: {} MiB; hakmem's \
         profile: {}.\n",
        m.command, m.git_commit, m.started, meta.runs, meta.warm_mib, meta.hakmem_profile
    );
    let _ = writeln!(out, "{}\n", machine_line(m, &[&meta.gcc]));
    out
}

/// The profiles' section: the stamp and each profile row's median time over fast's.
fn profiles(meta: &Meta, summaries: &[Summary]) -> String {
    let mut out = stamp(meta);
    let _ = writeln!(
        out,
        "Median time in each profile over the median time of the `hakmem` row (fast), \
         per workload:\n\n```text\n{}```",
        report::profiles_vs_fast(summaries)
    );
    out
}

/// `~/...` for a path under `$HOME`.
fn home_relative(path: &str) -> String {
    match std::env::var("HOME") {
        Ok(home) if !home.is_empty() && path.starts_with(&home) => {
            format!("~{}", &path[home.len()..])
        }
        _ => path.to_string(),
    }
}
