//! The results as a table on the terminal (also what `--write-docs` puts in
//! docs/BENCHMARKS.md) and as JSON and CSV files.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use super::meta::Meta;
use super::summary::{self, Stats, Summary};
use crate::shared::output::{self, opt, row};
use crate::shared::table::{align, mib, si};
use crate::shared::Allocator;

const HEADER: [&str; 9] = [
    "workload",
    "allocator",
    "ops/s",
    "min..max",
    "CV",
    "vs mimalloc",
    "time/best",
    "peak RSS",
    "OS calls/op",
];

pub fn print_table(summaries: &[Summary], notes: &[String]) {
    println!("\n{}", table(summaries));
    println!("hakmem's median time / the best allocator's, per workload:");
    println!("{}", hakmem_vs_best(summaries));
    if has_profile_rows(summaries) {
        println!("hakmem's median time in a profile / in fast (the `hakmem` row), per workload:");
        println!("{}", profiles_vs_fast(summaries));
    }
    if summaries.iter().any(|s| s.allocator == Allocator::Baseline) {
        println!("hakmem's median time / the baseline's (hakmem at --baseline), per workload:");
        println!("{}", hakmem_vs_baseline(summaries));
    }
    let slow = super::slow::table(summaries);
    if !slow.is_empty() {
        println!("runs over twice their row's fastest, and where their time went:");
        println!("{slow}");
    }
    for note in notes {
        println!("note: {note}");
    }
    for s in summaries.iter().filter(|s| !s.failures.is_empty()) {
        println!(
            "failed: {} with {}: {}",
            s.workload,
            s.allocator.name(),
            s.failures[0]
        );
    }
}

/// One row per (workload, allocator), the workload named on its first row only.
pub fn table(summaries: &[Summary]) -> String {
    let mut rows = vec![HEADER.map(String::from)];
    let mut last_workload = "";
    for s in summaries {
        let workload = if s.workload == last_workload {
            ""
        } else {
            &s.workload
        };
        last_workload = &s.workload;
        rows.push(row(workload, s));
    }
    align(&rows, 2)
}

/// Per workload, hakmem's `time/best` and the best allocator: `c-batch-fwd  1.35x  tcmalloc`.
pub fn hakmem_vs_best(summaries: &[Summary]) -> String {
    let mut rows = vec![["workload", "hakmem", "best"].map(String::from)];
    for workload in summaries.chunk_by(|a, b| a.workload == b.workload) {
        let hakmem = workload
            .iter()
            .find(|s| s.allocator == Allocator::Hakmem)
            .and_then(|s| s.stats.as_ref());
        let (Some(hakmem), Some(best)) = (hakmem, summary::best(workload)) else {
            continue;
        };
        rows.push([
            workload[0].workload.clone(),
            format!("{:.2}x", hakmem.time_vs_best),
            best.allocator.name().to_string(),
        ]);
    }
    align(&rows, 1)
}

/// Whether the run has the profile rows (`hakmem-balanced`, `hakmem-lean`).
pub fn has_profile_rows(summaries: &[Summary]) -> bool {
    summaries.iter().any(|s| s.allocator.profile().is_some())
}

/// Per workload, the median time of each profile row (`hakmem-balanced`, `hakmem-lean`)
/// over the `hakmem` row's, measured in the same interleaved run.
pub fn profiles_vs_fast(summaries: &[Summary]) -> String {
    const PROFILES: [Allocator; 2] = [Allocator::HakmemBalanced, Allocator::HakmemLean];
    let mut rows = vec![[
        "workload".to_string(),
        format!("{} / hakmem", PROFILES[0].name()),
        format!("{} / hakmem", PROFILES[1].name()),
    ]];
    let secs = |w: &[Summary], a: Allocator| {
        w.iter()
            .find(|s| s.allocator == a)
            .and_then(|s| s.stats.as_ref())
            .map(|st| st.median_secs)
    };
    for workload in summaries.chunk_by(|a, b| a.workload == b.workload) {
        let Some(fast) = secs(workload, Allocator::Hakmem) else {
            continue;
        };
        let ratio = |p: Allocator| {
            secs(workload, p).map_or("-".to_string(), |t| format!("{:.2}x", t / fast.max(1e-9)))
        };
        rows.push([
            workload[0].workload.clone(),
            ratio(PROFILES[0]),
            ratio(PROFILES[1]),
        ]);
    }
    align(&rows, 1)
}

/// Per workload, hakmem's median time over the baseline's, with both ranges (min..max
/// seconds), so a difference can be read against the noise.
pub fn hakmem_vs_baseline(summaries: &[Summary]) -> String {
    let mut rows = vec![["workload", "now/baseline", "now (s)", "baseline (s)"].map(String::from)];
    let stats = |w: &[Summary], a: Allocator| {
        w.iter()
            .find(|s| s.allocator == a)
            .and_then(|s| s.stats.clone())
    };
    let range = |s: &Stats| median_and_range(s, 3);
    for workload in summaries.chunk_by(|a, b| a.workload == b.workload) {
        let (Some(now), Some(base)) = (
            stats(workload, Allocator::Hakmem),
            stats(workload, Allocator::Baseline),
        ) else {
            continue;
        };
        rows.push([
            workload[0].workload.clone(),
            format!("{:.3}x", now.median_secs / base.median_secs.max(1e-9)),
            range(&now),
            range(&base),
        ]);
    }
    align(&rows, 1)
}

/// `0.012 (0.011..0.015)`: the median run time and the fastest and slowest runs', in
/// seconds with `digits` decimals.
pub fn median_and_range(s: &Stats, digits: usize) -> String {
    let ops = s.median_ops_per_sec * s.median_secs;
    format!(
        "{:.digits$} ({:.digits$}..{:.digits$})",
        s.median_secs,
        ops / s.max_ops_per_sec,
        ops / s.min_ops_per_sec
    )
}

fn row(workload: &str, s: &Summary) -> [String; 9] {
    let cells = match (&s.stats, &s.skipped) {
        (Some(st), _) => stat_cells(st, s.failures.len()),
        (None, Some(_)) => only_first("skipped (see notes)"),
        (None, None) => only_first("FAILED"),
    };
    let [a, b, c, d, e, f, g] = cells;
    [
        workload.into(),
        s.allocator.name().into(),
        a,
        b,
        c,
        d,
        e,
        f,
        g,
    ]
}

fn only_first(text: &str) -> [String; 7] {
    let mut cells = <[String; 7]>::default();
    cells[0] = text.to_string();
    cells
}

fn stat_cells(st: &Stats, failures: usize) -> [String; 7] {
    let failed = if failures > 0 {
        format!(" ({failures} failed)")
    } else {
        String::new()
    };
    [
        format!("{}{failed}", si(st.median_ops_per_sec)),
        format!("{}..{}", si(st.min_ops_per_sec), si(st.max_ops_per_sec)),
        format!("{:.1}%", st.cv * 100.0),
        st.vs_mimalloc.map_or("-".into(), |r| format!("{r:.2}x")),
        match st.time_vs_best {
            1.0 => "best".into(),
            r => format!("{r:.2}x"),
        },
        mib(st.peak_rss_kb),
        st.os_calls_per_op.map_or("-".into(), calls_per_op),
    ]
}

fn calls_per_op(c: f64) -> String {
    match c {
        0.0 => "0".into(),
        c => format!("{c:.2e}"),
    }
}

#[derive(Serialize)]
struct Results<'a> {
    meta: &'a Meta,
    notes: &'a [String],
    results: &'a [Summary],
}

/// Write `results.json` and `results.csv` into the run's directory.
pub fn write_all(dir: &Path, meta: &Meta, summaries: &[Summary], notes: &[String]) -> Result<()> {
    let json = serde_json::to_string_pretty(&Results {
        meta,
        notes,
        results: summaries,
    })?;
    output::write(dir, "results.json", json + "\n")?;
    output::write(dir, "results.csv", csv(summaries)?)
}

/// Write `again.csv`: the summaries of `--confirm`'s second measurement, in the columns
/// of `results.csv`.
pub fn write_again(dir: &Path, again: &[Summary]) -> Result<()> {
    output::write(dir, "again.csv", csv(again)?)
}

fn csv(summaries: &[Summary]) -> Result<String> {
    const HEADER: [&str; 15] = [
        "workload",
        "allocator",
        "ops",
        "runs",
        "failures",
        "median_ops_per_sec",
        "min_ops_per_sec",
        "max_ops_per_sec",
        "cv",
        "vs_mimalloc",
        "median_secs",
        "time_vs_best",
        "peak_rss_kb",
        "os_calls_per_op",
        "skipped",
    ];
    output::csv(
        &HEADER,
        summaries.iter().map(|s| {
            let st = s.stats.as_ref();
            let stat = |f: fn(&Stats) -> f64| opt(st.map(f));
            row![
                s.workload,
                s.allocator.name(),
                s.ops,
                s.samples.len(),
                s.failures.len(),
                stat(|st| st.median_ops_per_sec),
                stat(|st| st.min_ops_per_sec),
                stat(|st| st.max_ops_per_sec),
                stat(|st| st.cv),
                opt(st.and_then(|st| st.vs_mimalloc)),
                stat(|st| st.median_secs),
                stat(|st| st.time_vs_best),
                stat(|st| st.peak_rss_kb as f64),
                opt(st.and_then(|st| st.os_calls_per_op)),
                s.skipped.as_deref().unwrap_or(""),
            ]
        }),
    )
}
