//! The results as a table on the terminal and as JSON and CSV files.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use super::meta::Meta;
use super::summary::{Stats, Summary};
use crate::shared::output::{self, csv_field};
use crate::shared::table::{align, mib, si};

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
    println!("\n{}", align(&rows, 2));
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
    output::write(dir, "results.csv", csv(summaries))
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
            csv_field(s.skipped.as_deref().unwrap_or("")),
        ];
        out += &fields.join(",");
        out.push('\n');
    }
    out
}
