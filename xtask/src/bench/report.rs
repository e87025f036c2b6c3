//! The results as a table on the terminal and as JSON and CSV files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use super::meta::Meta;
use super::summary::{Stats, Summary};

const HEADER: [&str; 8] = [
    "workload",
    "allocator",
    "ops/s",
    "min..max",
    "CV",
    "vs mimalloc",
    "peak RSS",
    "OS calls/op",
];

pub fn print_table(summaries: &[Summary], notes: &[String]) {
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
    println!("\n{}", align(&rows));
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

fn row(workload: &str, s: &Summary) -> [String; 8] {
    let cells = match (&s.stats, &s.skipped) {
        (Some(st), _) => stat_cells(st, s.failures.len()),
        (None, Some(_)) => only_first("skipped (see notes)"),
        (None, None) => only_first("FAILED"),
    };
    let [a, b, c, d, e, f] = cells;
    [workload.into(), s.allocator.name().into(), a, b, c, d, e, f]
}

fn only_first(text: &str) -> [String; 6] {
    let mut cells = <[String; 6]>::default();
    cells[0] = text.to_string();
    cells
}

fn stat_cells(st: &Stats, failures: usize) -> [String; 6] {
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
        format!("{:.1} MiB", st.peak_rss_kb as f64 / 1024.0),
        st.os_calls_per_op.map_or("-".into(), calls_per_op),
    ]
}

fn calls_per_op(c: f64) -> String {
    match c {
        0.0 => "0".into(),
        c => format!("{c:.2e}"),
    }
}

/// `123.4M`-style numbers.
fn si(v: f64) -> String {
    match v {
        v if v >= 1e9 => format!("{:.2}G", v / 1e9),
        v if v >= 1e6 => format!("{:.1}M", v / 1e6),
        v if v >= 1e3 => format!("{:.1}k", v / 1e3),
        v => format!("{v:.0}"),
    }
}

/// Columns padded to their widest cell: text left-aligned, the rest right-aligned.
fn align<const N: usize>(rows: &[[String; N]]) -> String {
    let widths: Vec<usize> = (0..N)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        for (c, cell) in row.iter().enumerate() {
            let w = widths[c];
            let _ = match c {
                0 | 1 => write!(out, "{cell:<w$}  "),
                _ => write!(out, "{cell:>w$}  "),
            };
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    }
    out
}

#[derive(Serialize)]
struct Results<'a> {
    meta: &'a Meta,
    notes: &'a [String],
    results: &'a [Summary],
}

/// Write `results.json` and `results.csv` into a new directory for this run under `base`
/// (and point `base/latest` at it); the directory.
pub fn write_all(
    base: &Path,
    meta: &Meta,
    summaries: &[Summary],
    notes: &[String],
) -> Result<PathBuf> {
    let dir = base.join(meta.dir_name());
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = serde_json::to_string_pretty(&Results {
        meta,
        notes,
        results: summaries,
    })?;
    std::fs::write(dir.join("results.json"), json + "\n")?;
    std::fs::write(dir.join("results.csv"), csv(summaries))?;
    let latest = base.join("latest");
    let _ = std::fs::remove_file(&latest);
    let _ = std::os::unix::fs::symlink(meta.dir_name(), &latest);
    Ok(dir)
}

fn csv(summaries: &[Summary]) -> String {
    let mut out = String::from(
        "workload,allocator,ops,runs,failures,median_ops_per_sec,min_ops_per_sec,max_ops_per_sec,\
         cv,vs_mimalloc,peak_rss_kb,os_calls_per_op,skipped\n",
    );
    for s in summaries {
        let st = s.stats.as_ref();
        let num = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
        let stat = |f: fn(&Stats) -> f64| num(st.map(f));
        let fields = [
            s.workload.clone(),
            s.allocator.name().to_string(),
            s.ops.to_string(),
            s.samples.len().to_string(),
            s.failures.len().to_string(),
            stat(|st| st.median_ops_per_sec),
            stat(|st| st.min_ops_per_sec),
            stat(|st| st.max_ops_per_sec),
            stat(|st| st.cv),
            num(st.and_then(|st| st.vs_mimalloc)),
            stat(|st| st.peak_rss_kb as f64),
            num(st.and_then(|st| st.os_calls_per_op)),
            s.skipped
                .as_deref()
                .unwrap_or("")
                .replace([',', '"', '\n'], " "),
        ];
        out += &fields.join(",");
        out.push('\n');
    }
    out
}
