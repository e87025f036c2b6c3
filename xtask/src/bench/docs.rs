//! `cargo xtask bench --write-docs`: the run's table, stamped with the commit, the time
//! and the machine, replaces what stands between the markers in docs/BENCHMARKS.md, and
//! its chart replaces docs/bench-chart.svg. [`write_marked`] and [`machine_line`] serve
//! `cargo xtask pair-count --write-docs` too.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::meta::Meta;
use super::report;
use super::summary::Summary;
use crate::shared::machine::Machine;
use crate::shared::Paths;

pub const BEGIN: &str = "<!-- bench:begin -->";
pub const END: &str = "<!-- bench:end -->";
const PAGE: &str = "docs/BENCHMARKS.md";
const CHART: &str = "docs/bench-chart.svg";

pub fn write(
    paths: &Paths,
    meta: &Meta,
    summaries: &[Summary],
    notes: &[String],
    chart: &Path,
) -> Result<()> {
    let section = section(paths, meta, summaries, notes);
    write_marked(paths, PAGE, (BEGIN, END), &section)?;
    std::fs::copy(chart, paths.root.join(CHART)).with_context(|| format!("writing {CHART}"))?;
    println!("wrote the results into {PAGE} and {CHART}");
    Ok(())
}

/// Replace what stands between the `markers` (begin, end) in `page` (relative to the
/// workspace root) by `section`.
pub fn write_marked(paths: &Paths, page: &str, markers: (&str, &str), section: &str) -> Result<()> {
    let path = paths.root.join(page);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {page}"))?;
    let text = replace_section(&text, markers, section).with_context(|| page.to_string())?;
    std::fs::write(&path, text).with_context(|| format!("writing {page}"))
}

/// `text` with what lies between the `markers` (begin, end) replaced by `section`.
fn replace_section(
    text: &str,
    (begin_mark, end_mark): (&str, &str),
    section: &str,
) -> Result<String> {
    let (Some(begin), Some(end)) = (text.find(begin_mark), text.find(end_mark)) else {
        bail!("the markers {begin_mark} and {end_mark} are missing");
    };
    if end < begin {
        bail!("{end_mark} comes before {begin_mark}");
    }
    let before = &text[..begin + begin_mark.len()];
    Ok(format!("{before}\n{section}{}", &text[end..]))
}

/// "Machine: cores, CPU, memory, OS, kernel, compilers; load average at the start."
pub fn machine_line(m: &Machine, gcc: &str) -> String {
    format!(
        "Machine: {} cores of `{}`, {:.1} GiB, {}, kernel {}; {}, {}; load average at the \
         start: {}.",
        m.cores,
        m.cpu,
        m.memory_kb as f64 / (1024.0 * 1024.0),
        m.os,
        m.kernel,
        m.rustc,
        gcc,
        m.load
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    )
}

fn section(paths: &Paths, meta: &Meta, summaries: &[Summary], notes: &[String]) -> String {
    let m = &meta.machine;
    let root = format!("{}/", paths.root.display());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!-- Written by `cargo xtask bench --write-docs`; the next such run replaces \
         everything between the markers. -->\n"
    );
    let _ = writeln!(
        out,
        "`cargo xtask {}` at commit `{}`, started {} (UTC); runs per workload and \
         allocator, interleaved: {}; hakmem's profile: {}.\n",
        m.command, m.git_commit, m.started, meta.runs, meta.hakmem_profile
    );
    let _ = writeln!(out, "{}\n", machine_line(m, &meta.gcc));
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

/// `~/...` for a path under `$HOME`.
fn home_relative(path: &str) -> String {
    match std::env::var("HOME") {
        Ok(home) if !home.is_empty() && path.starts_with(&home) => {
            format!("~{}", &path[home.len()..])
        }
        _ => path.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_marked_section_is_replaced() {
        let page = format!("# Title\n\nbefore\n{BEGIN}\nold table\n{END}\nafter\n");
        let new = replace_section(&page, (BEGIN, END), "new table\n").unwrap();
        assert_eq!(
            new,
            format!("# Title\n\nbefore\n{BEGIN}\nnew table\n{END}\nafter\n")
        );
        // Writing twice gives the same page.
        assert_eq!(
            replace_section(&new, (BEGIN, END), "new table\n").unwrap(),
            new
        );
        assert!(replace_section("no markers", (BEGIN, END), "x").is_err());
        assert!(replace_section(&format!("{END} {BEGIN}"), (BEGIN, END), "x").is_err());
    }
}
