//! The soak's results: a table on the terminal; `summary.csv`, `epochs.csv`, `marks.csv`,
//! `returns.csv` and `results.json` in the run's directory.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use super::plan::{Plan, Series};
use super::run::Trace;
use super::summary::{Return, Stats, Summary, RETURNED};
use super::Meta;
use crate::shared::docs::machine_line;
use crate::shared::output::{self, opt, row};
use crate::shared::table::{align, markdown, mib, si};

const HEADER: [&str; 9] = [
    "workload",
    "allocator",
    "peak RSS",
    "RSS after warm-up -> end",
    "drift",
    "ops/s p50",
    "p1..p99",
    "CV",
    "OS calls/op",
];

pub fn print_table(summaries: &[Summary], notes: &[String]) {
    let (main, returns) = tables(summaries);
    println!("\n{}", align(&main, 2));
    if !returns.is_empty() {
        println!("{}", align(&returns, 3));
    }
    for line in remarks(summaries, notes) {
        println!("{line}");
    }
}

/// The run's section of the docs (`--write-docs NAME`): how and where it ran, its tables
/// in Markdown and the remarks of the terminal's.
pub fn docs_section(meta: &Meta, summaries: &[Summary], notes: &[String]) -> String {
    let m = &meta.machine;
    let mut out = format!(
        "<!-- Written by `cargo xtask soak ... --write-docs`; the next such run replaces \
         everything between the markers. -->\n\n\
         `cargo xtask {}` at commit `{}`, started {} (UTC); {}; warm-up: the first {} \
         epochs of {} s; hakmem's profile without --profile: {}.\n\n{}\n\n",
        m.command,
        m.git_commit,
        m.started,
        meta.order,
        meta.warm_up_epochs,
        meta.epoch_secs,
        meta.hakmem_profile,
        machine_line(m, &[]),
    );
    let (main, returns) = tables(summaries);
    out.push_str(&markdown(&main));
    if !returns.is_empty() {
        out.push('\n');
        out.push_str(&markdown(&returns));
    }
    let remarks = remarks(summaries, notes);
    if !remarks.is_empty() {
        out.push('\n');
        for line in remarks {
            out.push_str(&format!("- {line}\n"));
        }
    }
    out
}

/// The table of every run, and that of memory returns (empty when no run freed in
/// phases); each with its header row.
fn tables(summaries: &[Summary]) -> (Vec<[String; 9]>, Vec<[String; 3]>) {
    let mut main = vec![HEADER.map(String::from)];
    main.extend(summaries.iter().map(row));
    let returns: Vec<[String; 3]> = summaries
        .iter()
        .filter(|s| !s.returns.is_empty())
        .map(|s| {
            [
                s.series.name(),
                returns_cell(&s.returns),
                trims_cell(&s.returns),
            ]
        })
        .collect();
    if returns.is_empty() {
        return (main, returns);
    }
    let title = format!(
        "RSS under {}% of the phase's peak after each free",
        RETURNED * 100.0
    );
    let mut with_header = vec![["run".to_string(), title, "RSS after trim".to_string()]];
    with_header.extend(returns);
    (main, with_header)
}

/// The notes below the tables: what is left out, the plan's notes, the failed runs.
fn remarks(summaries: &[Summary], notes: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    if summaries.iter().any(|s| !s.steady) {
        out.push("note: phases idles on purpose: drift and epoch throughput are left out above (they are in summary.csv)".to_string());
    }
    out.extend(notes.iter().map(|note| format!("note: {note}")));
    out.extend(summaries.iter().filter_map(|s| {
        Some(format!(
            "failed: {}: {}",
            s.series.name(),
            s.failure.as_ref()?
        ))
    }));
    out
}

fn row(s: &Summary) -> [String; 9] {
    let mut cells = [s.series.workload.clone(), s.series.label()]
        .into_iter()
        .chain(match &s.stats {
            Some(st) => stat_cells(st, s.steady),
            None => ["FAILED".to_string()]
                .into_iter()
                .chain(vec![String::new(); 6])
                .collect(),
        });
    std::array::from_fn(|_| cells.next().unwrap_or_default())
}

/// The figures of a run; drift and throughput only for a steady one.
fn stat_cells(st: &Stats, steady: bool) -> Vec<String> {
    let if_steady = |cell: String| if steady { cell } else { "-".into() };
    vec![
        mib(st.peak_rss_kb),
        format!("{} -> {}", mib(st.first_rss_kb), mib(st.last_rss_kb)),
        if_steady(format!("{:+.1}%", st.drift * 100.0)),
        if_steady(si(st.p50_ops_per_sec)),
        if_steady(format!(
            "{}..{}",
            si(st.p1_ops_per_sec),
            si(st.p99_ops_per_sec)
        )),
        if_steady(format!("{:.1}%", st.cv * 100.0)),
        st.os_calls_per_op
            .map_or("-".into(), |c| format!("{c:.2e}")),
    ]
}

/// `all 3 within 0.12s`, `none of 3 (watched up to 1.0s)` or `2 of 3, in 0.50s at most`.
fn returns_cell(returns: &[Return]) -> String {
    let n = returns.len();
    let back: Vec<f64> = returns.iter().filter_map(|r| r.secs_to_tenth).collect();
    let slowest = back.iter().copied().fold(0.0, f64::max);
    let watched = returns.iter().map(|r| r.watched_secs).fold(0.0, f64::max);
    match back.len() {
        0 => format!("none of {n} (watched up to {watched:.1}s)"),
        k if k == n => format!("all {n} within {slowest:.2}s"),
        k => format!("{k} of {n}, in {slowest:.2}s at most"),
    }
}

/// The highest RSS right after a trim, if the run trimmed.
fn trims_cell(returns: &[Return]) -> String {
    let highest = returns.iter().filter_map(|r| r.trimmed_rss_kb).max();
    highest.map_or("-".into(), |kb| format!("{} at most", mib(kb)))
}

#[derive(Serialize)]
struct Results<'a> {
    meta: &'a Meta,
    notes: &'a [String],
    results: &'a [Summary],
}

pub fn write_all(
    dir: &Path,
    meta: &Meta,
    plan: &Plan,
    traces: &[Trace],
    summaries: &[Summary],
) -> Result<()> {
    let json = serde_json::to_string_pretty(&Results {
        meta,
        notes: &plan.notes,
        results: summaries,
    })?;
    output::write(dir, "results.json", json + "\n")?;
    output::write(dir, "summary.csv", summary_csv(summaries)?)?;
    let pairs = || plan.series.iter().zip(traces);
    let epochs = per_series(
        &[
            "t",
            "secs",
            "ops",
            "ops_per_sec",
            "rss_kb",
            "in_use_kb",
            "os_calls",
        ],
        pairs().map(|(s, t)| {
            let rows = t.epochs.iter().map(|e| {
                row![
                    e.t,
                    e.secs,
                    e.ops,
                    e.ops_per_sec(),
                    e.rss_kb,
                    opt(e.in_use_kb),
                    opt(e.os_calls)
                ]
            });
            (s, rows.collect())
        }),
    )?;
    output::write(dir, "epochs.csv", epochs)?;
    let marks = per_series(
        &["t", "what", "block", "rss_kb", "in_use_kb"],
        pairs().map(|(s, t)| {
            let rows = t
                .marks
                .iter()
                .map(|m| row![m.t, m.what, m.block, m.rss_kb, opt(m.in_use_kb)]);
            (s, rows.collect())
        }),
    )?;
    output::write(dir, "marks.csv", marks)?;
    let returns = per_series(
        &[
            "block",
            "freed_at",
            "peak_rss_kb",
            "freed_rss_kb",
            "trimmed_rss_kb",
            "secs_to_tenth",
            "watched_secs",
        ],
        summaries.iter().map(|s| {
            let rows = s.returns.iter().map(|r| {
                row![
                    r.block,
                    r.freed_at,
                    r.peak_rss_kb,
                    r.freed_rss_kb,
                    opt(r.trimmed_rss_kb),
                    opt(r.secs_to_tenth),
                    r.watched_secs
                ]
            });
            (&s.series, rows.collect())
        }),
    )?;
    output::write(dir, "returns.csv", returns)
}

/// A CSV whose rows start with the series (workload, allocator, profile).
fn per_series<'a>(
    columns: &[&str],
    series: impl Iterator<Item = (&'a Series, Vec<Vec<String>>)>,
) -> Result<String> {
    let header: Vec<&str> = ["workload", "allocator", "profile"]
        .into_iter()
        .chain(columns.iter().copied())
        .collect();
    let rows = series.flat_map(|(s, rows)| {
        let profile = s.profile.map_or("", |p| p.name());
        rows.into_iter().map(move |row| {
            row![s.workload, s.allocator.name(), profile]
                .into_iter()
                .chain(row)
                .collect()
        })
    });
    output::csv(&header, rows)
}

fn summary_csv(summaries: &[Summary]) -> Result<String> {
    let columns = [
        "epochs",
        "warm_up_epochs",
        "peak_rss_kb",
        "first_rss_kb",
        "last_rss_kb",
        "drift",
        "p50_ops_per_sec",
        "p1_ops_per_sec",
        "p99_ops_per_sec",
        "cv",
        "os_calls_per_op",
        "frees",
        "frees_back_under_tenth",
        "max_secs_to_tenth",
        "failure",
    ];
    per_series(
        &columns,
        summaries.iter().map(|s| {
            let stats = s.stats.as_ref().map_or(vec![String::new(); 11], |st| {
                row![
                    st.epochs,
                    st.warm_up_epochs,
                    st.peak_rss_kb,
                    st.first_rss_kb,
                    st.last_rss_kb,
                    st.drift,
                    st.p50_ops_per_sec,
                    st.p1_ops_per_sec,
                    st.p99_ops_per_sec,
                    st.cv,
                    opt(st.os_calls_per_op)
                ]
            });
            let back: Vec<f64> = s.returns.iter().filter_map(|r| r.secs_to_tenth).collect();
            let max = back.iter().copied().reduce(f64::max);
            let failure = s.failure.as_deref().unwrap_or("");
            let row = stats
                .into_iter()
                .chain(row![s.returns.len(), back.len(), opt(max), failure])
                .collect();
            (&s.series, vec![row])
        }),
    )
}
