//! From samples to the figures reported per (workload, allocator): median ops/s, range,
//! coefficient of variation, ratio to mimalloc, median time against the best allocator's,
//! peak RSS, OS calls per operation.

use serde::Serialize;

use super::plan::Plan;
use super::run::{Outcomes, Sample};
use crate::shared::stats::{cv, median};
use crate::shared::Allocator;

#[derive(Serialize)]
pub struct Summary {
    pub workload: String,
    pub allocator: Allocator,
    /// Operations asked of each run.
    pub ops: u64,
    /// Why the pair was not run, if it was not.
    pub skipped: Option<String>,
    pub failures: Vec<String>,
    /// `None` when no run succeeded.
    pub stats: Option<Stats>,
    pub samples: Vec<Sample>,
}

#[derive(Clone, Serialize)]
pub struct Stats {
    pub runs: usize,
    pub median_ops_per_sec: f64,
    pub min_ops_per_sec: f64,
    pub max_ops_per_sec: f64,
    /// Standard deviation over mean of ops/s.
    pub cv: f64,
    /// Median ops/s over mimalloc's median on the same workload.
    pub vs_mimalloc: Option<f64>,
    /// Median seconds of a run.
    pub median_secs: f64,
    /// Median seconds over the best (lowest) median seconds of any allocator on the same
    /// workload: 1 for the best, 1.25 for one that takes a quarter longer.
    pub time_vs_best: f64,
    /// Median over runs of the child's `VmHWM`.
    pub peak_rss_kb: u64,
    /// Median over runs of OS calls after warm-up per operation (hakmem, Rust only).
    pub os_calls_per_op: Option<f64>,
}

pub fn summarize(plan: &Plan, outcomes: Outcomes) -> Vec<Summary> {
    let mut summaries = Vec::new();
    for (workload, outcomes) in plan.workloads.iter().zip(outcomes) {
        let first = summaries.len();
        for (target, outcome) in workload.targets.iter().zip(outcomes) {
            summaries.push(Summary {
                workload: workload.name.clone(),
                allocator: target.allocator,
                ops: workload.ops,
                skipped: target.setup.as_ref().err().cloned(),
                failures: outcome.failures,
                stats: stats(&outcome.samples),
                samples: outcome.samples,
            });
        }
        set_ratios(&mut summaries[first..]);
    }
    summaries
}

fn set_ratios(workload: &mut [Summary]) {
    let mimalloc = workload
        .iter()
        .find(|s| s.allocator == Allocator::Mimalloc)
        .and_then(|s| s.stats.as_ref())
        .map(|s| s.median_ops_per_sec);
    let best = best(workload).map(|s| s.stats.as_ref().expect("has stats").median_secs);
    for stats in workload.iter_mut().filter_map(|s| s.stats.as_mut()) {
        stats.vs_mimalloc = mimalloc.map(|m| stats.median_ops_per_sec / m);
        stats.time_vs_best = best.map_or(1.0, |b| stats.median_secs / b.max(1e-9));
    }
}

/// The allocator with the lowest median time among the summaries of one workload (hakmem
/// at another revision or in another profile is not a competitor).
pub fn best(workload: &[Summary]) -> Option<&Summary> {
    workload
        .iter()
        .filter(|s| s.stats.is_some() && s.allocator.is_competitor())
        .min_by(|a, b| {
            let secs = |s: &Summary| s.stats.as_ref().map_or(f64::INFINITY, |st| st.median_secs);
            secs(a).total_cmp(&secs(b))
        })
}

fn stats(samples: &[Sample]) -> Option<Stats> {
    let rates: Vec<f64> = samples.iter().map(Sample::ops_per_sec).collect();
    let rss: Vec<f64> = samples.iter().map(|s| s.peak_rss_kb as f64).collect();
    let secs: Vec<f64> = samples.iter().map(|s| s.secs).collect();
    let calls: Vec<f64> = samples
        .iter()
        .filter_map(|s| s.os_calls.map(|c| c as f64 / s.ops.max(1) as f64))
        .collect();
    Some(Stats {
        runs: samples.len(),
        median_ops_per_sec: median(&rates)?,
        min_ops_per_sec: rates.iter().copied().fold(f64::INFINITY, f64::min),
        max_ops_per_sec: rates.iter().copied().fold(0.0, f64::max),
        cv: cv(&rates),
        vs_mimalloc: None,
        median_secs: median(&secs)?,
        time_vs_best: 1.0,
        peak_rss_kb: median(&rss)? as u64,
        os_calls_per_op: median(&calls),
    })
}
