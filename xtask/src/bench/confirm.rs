//! `--confirm N`: the rows a run leaves over the speed targets, measured again. A row is
//! *over* when hakmem's median time is more than [`TIME_TARGET`] times the best
//! allocator's, or more than mimalloc's. Each such workload runs `N` more interleaved
//! rounds of hakmem, the allocator that was best there and mimalloc, and nothing else, so
//! that a row whose first figure was the host's noise (a CV of 20-40 % is common on this
//! machine) is told apart from one that is really behind. Both figures are reported: the
//! run's table stays as it was, and the second measurement stands beside it.

use std::fmt::Write as _;

use super::plan::{Plan, WorkloadPlan};
use super::report;
use super::summary::{self, Stats, Summary};
use crate::shared::table::align;
use crate::shared::Allocator;

/// hakmem's median time over the best allocator's that a row may reach (issue 10's
/// target: "at most 1.10x the best allocator's and at most mimalloc's").
pub const TIME_TARGET: f64 = 1.10;

/// A workload to measure again, with the allocators to run: hakmem, the best one and
/// mimalloc (each once).
#[derive(Debug, PartialEq)]
pub struct Recheck {
    pub workload: String,
    pub allocators: Vec<Allocator>,
}

/// The workloads of `summaries` where hakmem is over a target ([`TIME_TARGET`], or
/// slower than mimalloc), in the run's order.
pub fn over_target(summaries: &[Summary]) -> Vec<Recheck> {
    let mut out = Vec::new();
    for workload in summaries.chunk_by(|a, b| a.workload == b.workload) {
        let Some((hakmem, best, mimalloc)) = figures(workload) else {
            continue;
        };
        if !is_over(hakmem, stats(best), mimalloc) {
            continue;
        }
        let mut allocators = vec![Allocator::Hakmem];
        for a in [best.allocator, Allocator::Mimalloc] {
            if !allocators.contains(&a) && workload.iter().any(|s| s.allocator == a) {
                allocators.push(a);
            }
        }
        out.push(Recheck {
            workload: workload[0].workload.clone(),
            allocators,
        });
    }
    out
}

/// Whether hakmem's figures are over a target against the best allocator's and
/// mimalloc's (if it ran).
fn is_over(hakmem: &Stats, best: &Stats, mimalloc: Option<&Stats>) -> bool {
    hakmem.median_secs > best.median_secs * TIME_TARGET
        || mimalloc.is_some_and(|m| hakmem.median_secs > m.median_secs)
}

/// The figures of a summary [`summary::best`] chose, which has them.
fn stats(best: &Summary) -> &Stats {
    best.stats.as_ref().expect("the best allocator has figures")
}

/// One workload's figures: hakmem's, the best allocator's summary, mimalloc's (if it ran);
/// `None` without hakmem's or a best one.
fn figures(workload: &[Summary]) -> Option<(&Stats, &Summary, Option<&Stats>)> {
    Some((
        stats_of(workload, Allocator::Hakmem)?,
        summary::best(workload)?,
        stats_of(workload, Allocator::Mimalloc),
    ))
}

fn stats_of(workload: &[Summary], a: Allocator) -> Option<&Stats> {
    workload
        .iter()
        .find(|s| s.allocator == a)
        .and_then(|s| s.stats.as_ref())
}

/// `plan` cut down to the workloads and allocators of `rechecks`.
pub fn plan(plan: &Plan, rechecks: &[Recheck]) -> Plan {
    let workloads = rechecks
        .iter()
        .filter_map(|r| {
            let w = plan.workloads.iter().find(|w| w.name == r.workload)?;
            Some(WorkloadPlan {
                name: w.name.clone(),
                ops: w.ops,
                targets: w
                    .targets
                    .iter()
                    .filter(|t| r.allocators.contains(&t.allocator))
                    .cloned()
                    .collect(),
            })
        })
        .collect();
    Plan {
        workloads,
        notes: Vec::new(),
        preloads: Vec::new(),
    }
}

/// Per workload measured again: the first run's ratio and allocator, then the second
/// measurement's hakmem over the best of it, hakmem over mimalloc, each allocator's
/// median and range, and whether the row is still over a target.
pub fn table(first: &[Summary], again: &[Summary]) -> String {
    let mut rows = vec![[
        "workload",
        "first run",
        "again: hakmem/best",
        "hakmem/mimalloc",
        "medians and ranges (s)",
        "still over",
    ]
    .map(String::from)];
    for workload in again.chunk_by(|a, b| a.workload == b.workload) {
        let name = &workload[0].workload;
        let first_cell = first
            .chunk_by(|a, b| a.workload == b.workload)
            .find(|w| &w[0].workload == name)
            .and_then(figures)
            .map_or("-".to_string(), |(h, b, _)| over_best(h, b));
        let Some((hakmem, best, mimalloc)) = figures(workload) else {
            continue;
        };
        let ranges = workload
            .iter()
            .filter_map(|s| s.stats.as_ref().map(|st| (s.allocator, st)))
            .map(|(a, st)| format!("{} {}", a.name(), report::median_and_range(st, 4)))
            .collect::<Vec<_>>()
            .join("; ");
        rows.push([
            name.clone(),
            first_cell,
            over_best(hakmem, best),
            mimalloc.map_or("-".to_string(), |m| {
                format!("{:.2}x", hakmem.median_secs / m.median_secs.max(1e-9))
            }),
            ranges,
            if is_over(hakmem, stats(best), mimalloc) {
                "yes"
            } else {
                "no"
            }
            .to_string(),
        ]);
    }
    align(&rows, 1)
}

/// `1.23x tcmalloc`: hakmem's median time over the best allocator's, and which that is.
fn over_best(hakmem: &Stats, best: &Summary) -> String {
    format!(
        "{:.2}x {}",
        hakmem.median_secs / stats(best).median_secs.max(1e-9),
        best.allocator.name()
    )
}

/// The docs' section for a run: the rounds, then the table, or why there is none.
pub fn section(rounds: usize, first: &[Summary], again: Option<&[Summary]>) -> String {
    let mut out = String::new();
    match again {
        None if rounds == 0 => {
            let _ = writeln!(
                out,
                "Not measured again: the run above was made without `--confirm`.\n"
            );
        }
        None | Some([]) => {
            let _ = writeln!(
                out,
                "No row of the run above is over a target, so none was measured again.\n"
            );
        }
        Some(again) => {
            let _ = writeln!(
                out,
                "The rows of the run above where hakmem's median time is over {TIME_TARGET:.2}x \
                 the best allocator's or over mimalloc's, measured again right after it with \
                 the same binaries: {rounds} more interleaved rounds of hakmem, the allocator \
                 that was best and mimalloc (`--confirm {rounds}`). The table above keeps the \
                 first figures.\n\n```text\n{}```\n",
                table(first, again)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(workload: &str, allocator: Allocator, secs: f64) -> Summary {
        Summary {
            workload: workload.into(),
            allocator,
            ops: 1000,
            skipped: None,
            failures: Vec::new(),
            stats: Some(Stats {
                runs: 1,
                median_ops_per_sec: 1000.0 / secs,
                min_ops_per_sec: 1000.0 / secs,
                max_ops_per_sec: 1000.0 / secs,
                cv: 0.0,
                vs_mimalloc: None,
                median_secs: secs,
                time_vs_best: 1.0,
                peak_rss_kb: 0,
                os_calls_per_op: None,
            }),
            samples: Vec::new(),
        }
    }

    #[test]
    fn picks_rows_over_the_best_or_mimalloc() {
        let s = [
            // Within 1.10x of jemalloc and faster than mimalloc: fine.
            summary("a", Allocator::Hakmem, 1.05),
            summary("a", Allocator::Mimalloc, 1.2),
            summary("a", Allocator::Jemalloc, 1.0),
            // Over 1.10x the system allocator's.
            summary("b", Allocator::Hakmem, 1.2),
            summary("b", Allocator::Mimalloc, 1.3),
            summary("b", Allocator::System, 1.0),
            // Within 1.10x, but slower than mimalloc, the best.
            summary("c", Allocator::Hakmem, 1.05),
            summary("c", Allocator::Mimalloc, 1.0),
            // The fastest.
            summary("d", Allocator::Hakmem, 1.0),
            summary("d", Allocator::Mimalloc, 2.0),
        ];
        let over = over_target(&s);
        assert_eq!(
            over,
            vec![
                Recheck {
                    workload: "b".into(),
                    allocators: vec![Allocator::Hakmem, Allocator::System, Allocator::Mimalloc],
                },
                Recheck {
                    workload: "c".into(),
                    allocators: vec![Allocator::Hakmem, Allocator::Mimalloc],
                },
            ]
        );
    }

    #[test]
    fn the_baseline_is_not_a_competitor() {
        let s = [
            summary("a", Allocator::Hakmem, 1.5),
            summary("a", Allocator::Baseline, 1.0),
            summary("a", Allocator::Mimalloc, 1.6),
        ];
        assert!(over_target(&s).is_empty());
    }

    #[test]
    fn the_table_says_which_rows_stay_over() {
        let first = [
            summary("b", Allocator::Hakmem, 1.2),
            summary("b", Allocator::System, 1.0),
        ];
        let again = [
            summary("b", Allocator::Hakmem, 1.0),
            summary("b", Allocator::System, 1.05),
        ];
        let table = table(&first, &again);
        let row = table.lines().nth(1).expect("a row");
        assert!(row.starts_with("b "), "{table}");
        assert!(row.trim_end().ends_with("no"), "{table}");
    }
}
