//! The tables of `cargo xtask programs`, and its section of docs/BENCHMARKS.md.

use std::fmt::Write as _;

use anyhow::Result;

use super::list::PROGRAMS;
use super::{NoFigure, ProgramsArgs, Row};
use crate::shared::docs::{machine_line, write_marked};
use crate::shared::machine::{first_line, Machine};
use crate::shared::stats::median;
use crate::shared::table::{align, mib};
use crate::shared::{unique_or_all, Allocator, Paths};

/// The section's name: its markers are `<!-- programs:begin -->` and
/// `<!-- programs:end -->`.
const SECTION: &str = "programs";
const PAGE: &str = "docs/BENCHMARKS.md";

const METHOD: &str = "Method: each round runs every program once under each allocator in \
    turn, in an order that changes from round to round (so that no allocator always runs \
    right after the same one), after touching and freeing memory in huge pages (as \
    `cargo xtask bench` does); a run is timed from fork to exit, start-up and exit \
    included, with `LC_ALL=C`. Peak RSS is `ru_maxrss` from `wait4`: that of the run's \
    largest process (for `gcc`, `cc1`; for `g++`, `cc1plus`). A row fails if any of its runs printed other than what most runs of the \
    program printed. \"x fastest\" is a median over the fastest competitor's median \
    (the profile rows `hakmem-balanced` and `hakmem-lean` are not competitors), \
    \"x least\" the same for peak RSS; the geometric means are over the programs every \
    listed allocator ran.";

/// The figures of a row: median seconds, min and max, median peak RSS (KiB).
struct Figures {
    secs: f64,
    min: f64,
    max: f64,
    rss_kb: f64,
}

fn figures(row: &Row) -> Option<Figures> {
    let samples = row.samples.as_ref().ok().filter(|s| !s.is_empty())?;
    let secs: Vec<f64> = samples.iter().map(|s| s.secs).collect();
    let rss: Vec<f64> = samples.iter().map(|s| s.max_rss_kb as f64).collect();
    Some(Figures {
        secs: median(&secs)?,
        min: secs.iter().copied().fold(f64::INFINITY, f64::min),
        max: secs.iter().copied().fold(0.0, f64::max),
        rss_kb: median(&rss)?,
    })
}

/// The fastest competitor's median time and the least median peak RSS among `rows` (one
/// program's).
fn bests(rows: &[&Row]) -> Option<(f64, f64)> {
    let competing: Vec<Figures> = rows
        .iter()
        .filter(|r| r.allocator.is_competitor())
        .filter_map(|r| figures(r))
        .collect();
    let fastest = competing.iter().map(|f| f.secs).min_by(f64::total_cmp)?;
    let least = competing.iter().map(|f| f.rss_kb).min_by(f64::total_cmp)?;
    Some((fastest, least))
}

const HEADER: [&str; 7] = [
    "program",
    "allocator",
    "median s",
    "min..max",
    "x fastest",
    "peak RSS",
    "x least",
];

/// One line per program and allocator.
fn cells(rows: &[Row]) -> Vec<[String; 7]> {
    let mut out = Vec::new();
    for program in &PROGRAMS {
        let mine: Vec<&Row> = rows
            .iter()
            .filter(|r| r.program.name == program.name)
            .collect();
        let best = bests(&mine);
        for row in mine {
            let name = row.allocator.name().to_string();
            let line = match (figures(row), &row.samples, best) {
                (Some(f), _, Some((fastest, least))) => [
                    format!("{:.3}", f.secs),
                    format!("{:.3}..{:.3}", f.min, f.max),
                    format!("{:.2}", f.secs / fastest),
                    mib(f.rss_kb as u64),
                    format!("{:.2}", f.rss_kb / least),
                ],
                (_, Err(NoFigure::Skipped(why)), _) => no_figure(format!("skipped: {why}")),
                (_, Err(NoFigure::Failed(why)), _) => no_figure(format!("FAILED: {why}")),
                _ => no_figure("no figure".to_string()),
            };
            let [a, b, c, d, e] = line;
            out.push([program.name.to_string(), name, a, b, c, d, e]);
        }
    }
    out
}

fn no_figure(why: String) -> [String; 5] {
    [
        why,
        String::new(),
        String::new(),
        String::new(),
        String::new(),
    ]
}

/// Per allocator, the geometric means of "x fastest" and "x least" over the programs
/// that every allocator of the run has figures for.
fn means(rows: &[Row]) -> Vec<(Allocator, f64, f64, usize)> {
    let listed: Vec<Allocator> = rows.iter().map(|r| r.allocator).collect();
    let allocators = unique_or_all(&listed, &[]);
    let complete: Vec<Vec<&Row>> = PROGRAMS
        .iter()
        .map(|p| rows.iter().filter(|r| r.program.name == p.name).collect())
        .filter(|mine: &Vec<&Row>| !mine.is_empty() && mine.iter().all(|r| figures(r).is_some()))
        .collect();
    allocators
        .into_iter()
        .map(|a| {
            let (mut time, mut rss) = (0.0, 0.0);
            for mine in &complete {
                let (fastest, least) = bests(mine).expect("all have figures");
                let f = mine
                    .iter()
                    .find(|r| r.allocator == a)
                    .and_then(|r| figures(r))
                    .expect("all have figures");
                time += (f.secs / fastest).ln();
                rss += (f.rss_kb / least).ln();
            }
            let n = complete.len();
            let mean = |sum: f64| {
                if n == 0 {
                    f64::NAN
                } else {
                    (sum / n as f64).exp()
                }
            };
            (a, mean(time), mean(rss), n)
        })
        .collect()
}

fn means_cells(rows: &[Row]) -> Vec<[String; 4]> {
    let mut out = vec![["allocator", "x fastest", "x least RSS", "programs"].map(String::from)];
    for (a, time, rss, n) in means(rows) {
        out.push([
            a.name().to_string(),
            format!("{time:.3}"),
            format!("{rss:.3}"),
            n.to_string(),
        ]);
    }
    out
}

/// Both tables for the terminal.
pub fn terminal(rows: &[Row]) -> String {
    let mut table = vec![HEADER.map(String::from)];
    table.extend(cells(rows));
    format!(
        "{}\ngeometric means:\n{}",
        align(&table, 2),
        align(&means_cells(rows), 1)
    )
}

/// `cells` as a Markdown table.
fn markdown<const N: usize>(rows: &[[String; N]]) -> String {
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let _ = writeln!(out, "| {} |", row.join(" | "));
        if i == 0 {
            let _ = writeln!(out, "|{}", " --- |".repeat(N));
        }
    }
    out
}

pub fn write_docs(
    paths: &Paths,
    machine: &Machine,
    args: &ProgramsArgs,
    rows: &[Row],
) -> Result<()> {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!-- Written by `cargo xtask programs --write-docs`; the next such run replaces \
         everything between the markers. -->\n"
    );
    let _ = writeln!(
        out,
        "`cargo xtask {}` at commit `{}`, {} (UTC), {} rounds, {} MiB warmed before each \
         run.\n",
        machine.command, machine.git_commit, machine.started, args.runs, args.warm
    );
    let gcc = first_line("gcc", &["--version"]);
    let _ = writeln!(out, "{}\n", machine_line(machine, &[&gcc]));
    for p in &PROGRAMS {
        if rows.iter().any(|r| r.program.name == p.name) {
            let _ = writeln!(out, "- `{}`: {}.", p.name, p.what);
        }
    }
    let mut table = vec![HEADER.map(String::from)];
    table.extend(cells(rows));
    let _ = writeln!(out, "\n{}", markdown(&table));
    let _ = writeln!(out, "Geometric means:\n\n{}", markdown(&means_cells(rows)));
    let _ = writeln!(out, "{METHOD}");
    write_marked(paths, PAGE, SECTION, &out)?;
    println!("wrote the tables into {PAGE}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::measure::Sample;
    use super::*;

    fn row(program: usize, allocator: Allocator, secs: &[f64], rss: u64) -> Row {
        let samples = secs
            .iter()
            .map(|&secs| Sample {
                secs,
                max_rss_kb: rss,
                output: 0,
            })
            .collect();
        Row {
            program: &PROGRAMS[program],
            allocator,
            samples: Ok(samples),
        }
    }

    #[test]
    fn ratios_are_to_the_best_competitor_and_means_are_geometric() {
        let rows = vec![
            row(0, Allocator::Hakmem, &[2.0, 2.2, 1.0], 100),
            row(0, Allocator::System, &[1.0, 1.0, 3.0], 400),
            // A profile row is never the best, however fast.
            row(0, Allocator::HakmemLean, &[0.1], 50),
            row(1, Allocator::Hakmem, &[1.0], 100),
            row(1, Allocator::System, &[2.0], 100),
            row(1, Allocator::HakmemLean, &[1.0], 100),
        ];
        let c = cells(&rows);
        assert_eq!(c[0][4], "2.00"); // hakmem: median 2.0 over system's 1.0
        assert_eq!(c[1][4], "1.00");
        assert_eq!(c[2][4], "0.10");
        assert_eq!(c[2][6], "0.50"); // RSS of the lean row over hakmem's 100
        let m = means(&rows);
        let hakmem = m.iter().find(|x| x.0 == Allocator::Hakmem).unwrap();
        assert!((hakmem.1 - 2f64.sqrt()).abs() < 1e-9); // sqrt(2.0 * 1.0)
        assert_eq!(hakmem.3, 2);
    }

    #[test]
    fn markdown_has_a_rule_under_the_header() {
        let t = markdown(&[["a", "b"].map(String::from), ["1", "2"].map(String::from)]);
        assert_eq!(t, "| a | b |\n| --- | --- |\n| 1 | 2 |\n");
    }
}
