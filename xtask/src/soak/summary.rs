//! From a run's epochs and marks to its figures: RSS drift, epoch throughput (median,
//! percentiles, CV), OS calls per operation, and for `phases` how long RSS took to fall
//! under a tenth of its peak after each free.

use serde::Serialize;

use super::plan::Series;
use super::run::{Epoch, Trace};
use crate::shared::stats::{cv, percentile};

/// RSS has come back when it is under this fraction of the phase's peak.
pub const RETURNED: f64 = 0.1;

#[derive(Serialize)]
pub struct Summary {
    pub series: Series,
    pub failure: Option<String>,
    /// The workload ran at a steady state (it marked no moments, as `phases` does): only
    /// then do drift and the spread of epoch throughput mean something.
    pub steady: bool,
    /// `None` when no epoch came after the warm-up.
    pub stats: Option<Stats>,
    /// One per free of `phases`.
    pub returns: Vec<Return>,
}

#[derive(Serialize)]
pub struct Stats {
    pub epochs: usize,
    pub warm_up_epochs: usize,
    /// The highest RSS read (epochs and marks).
    pub peak_rss_kb: u64,
    /// RSS at the end of the first epoch after the warm-up, and of the last.
    pub first_rss_kb: u64,
    pub last_rss_kb: u64,
    /// `last / first - 1`.
    pub drift: f64,
    /// Epoch throughput after the warm-up: median, 1st and 99th percentiles, spread.
    pub p50_ops_per_sec: f64,
    pub p1_ops_per_sec: f64,
    pub p99_ops_per_sec: f64,
    pub cv: f64,
    /// hakmem's OS calls over operations, after the warm-up.
    pub os_calls_per_op: Option<f64>,
}

/// What RSS did after one free of `phases`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Return {
    pub block: u64,
    /// When the free ended (seconds since the start).
    pub freed_at: f64,
    /// The highest RSS since the phase's fill began.
    pub peak_rss_kb: u64,
    /// RSS right after the free, and after the trim (`phases-trim`).
    pub freed_rss_kb: u64,
    pub trimmed_rss_kb: Option<u64>,
    /// Seconds from the end of the free to the first reading under a tenth of the peak;
    /// `None` if no reading before the next fill (or the end) was that low.
    pub secs_to_tenth: Option<f64>,
    /// How long after the free RSS was watched: until the next fill or the end.
    pub watched_secs: f64,
}

pub fn summarize(series: &[Series], traces: &[Trace], warm_up_epochs: usize) -> Vec<Summary> {
    series
        .iter()
        .zip(traces)
        .map(|(series, trace)| Summary {
            series: series.clone(),
            failure: trace.failure.clone(),
            steady: trace.marks.is_empty(),
            stats: stats(trace, warm_up_epochs),
            returns: returns(trace),
        })
        .collect()
}

fn stats(trace: &Trace, warm_up_epochs: usize) -> Option<Stats> {
    let all = &trace.epochs;
    // Keep at least one epoch after the warm-up.
    let warm = warm_up_epochs.min(all.len().saturating_sub(1));
    let after = &all[warm..];
    let (first, last) = (after.first()?, after.last()?);
    let rates: Vec<f64> = after.iter().map(Epoch::ops_per_sec).collect();
    let ops: u64 = after.iter().map(|e| e.ops).sum();
    let calls: Option<u64> = after.iter().map(|e| e.os_calls).sum();
    Some(Stats {
        epochs: all.len(),
        warm_up_epochs: warm,
        peak_rss_kb: trace.rss().iter().map(|r| r.1).max().unwrap_or(0),
        first_rss_kb: first.rss_kb,
        last_rss_kb: last.rss_kb,
        drift: last.rss_kb as f64 / first.rss_kb.max(1) as f64 - 1.0,
        p50_ops_per_sec: percentile(&rates, 50.0)?,
        p1_ops_per_sec: percentile(&rates, 1.0)?,
        p99_ops_per_sec: percentile(&rates, 99.0)?,
        cv: cv(&rates),
        os_calls_per_op: calls.map(|c| c as f64 / ops.max(1) as f64),
    })
}

/// For each `freed` mark: the phase's peak, and the first reading after the free (before
/// the next `fill`) under a tenth of it.
fn returns(trace: &Trace) -> Vec<Return> {
    let rss = trace.rss();
    let marks = &trace.marks;
    let mut out = Vec::new();
    for (i, freed) in marks.iter().enumerate().filter(|(_, m)| m.what == "freed") {
        let fill_start = marks[..i]
            .iter()
            .rev()
            .find(|m| m.what == "fill")
            .map_or(0.0, |m| m.t);
        let next_fill = marks[i..].iter().find(|m| m.what == "fill").map(|m| m.t);
        let end = next_fill.unwrap_or_else(|| rss.last().map_or(freed.t, |r| r.0));
        let peak = rss
            .iter()
            .filter(|r| r.0 >= fill_start && r.0 <= freed.t)
            .map(|r| r.1)
            .max()
            .unwrap_or(freed.rss_kb);
        let watched = rss.iter().filter(|r| r.0 >= freed.t && r.0 < end);
        let back = watched
            .clone()
            .find(|r| (r.1 as f64) < peak as f64 * RETURNED);
        let trimmed = marks[i..]
            .iter()
            .take_while(|m| m.what != "fill")
            .find(|m| m.what == "trimmed");
        out.push(Return {
            block: freed.block,
            freed_at: freed.t,
            peak_rss_kb: peak,
            freed_rss_kb: freed.rss_kb,
            trimmed_rss_kb: trimmed.map(|m| m.rss_kb),
            secs_to_tenth: back.map(|r| r.0 - freed.t),
            watched_secs: end - freed.t,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::soak::run::Mark;

    fn epoch(t: f64, ops: u64, rss_kb: u64) -> Epoch {
        Epoch {
            t,
            secs: 1.0,
            ops,
            rss_kb,
            os_calls: Some(ops / 100),
            in_use_kb: None,
        }
    }

    fn mark(t: f64, what: &str, rss_kb: u64) -> Mark {
        Mark {
            t,
            what: what.into(),
            block: 64,
            rss_kb,
            in_use_kb: None,
        }
    }

    #[test]
    fn drift_and_throughput_leave_out_the_warm_up() {
        let trace = Trace {
            epochs: vec![
                epoch(1.0, 10, 500),
                epoch(2.0, 100, 1000),
                epoch(3.0, 300, 1100),
                epoch(4.0, 200, 1200),
            ],
            ..Trace::default()
        };
        let s = stats(&trace, 1).expect("epochs after warm-up");
        assert_eq!((s.epochs, s.warm_up_epochs), (4, 1));
        assert_eq!(
            (s.first_rss_kb, s.last_rss_kb, s.peak_rss_kb),
            (1000, 1200, 1200)
        );
        assert!((s.drift - 0.2).abs() < 1e-12);
        assert_eq!(s.p50_ops_per_sec, 200.0);
        assert_eq!(s.os_calls_per_op, Some(6.0 / 600.0));
        // A warm-up longer than the run still leaves the last epoch.
        assert_eq!(stats(&trace, 60).expect("one epoch").warm_up_epochs, 3);
        assert!(stats(&Trace::default(), 1).is_none());
    }

    #[test]
    fn return_time_is_the_first_reading_under_a_tenth_of_the_peak() {
        let trace = Trace {
            epochs: vec![epoch(1.0, 1, 600), epoch(2.0, 1, 150), epoch(3.0, 1, 90)],
            marks: vec![
                mark(0.0, "fill", 10),
                mark(1.2, "filled", 1000),
                mark(1.5, "freed", 400),
                mark(3.5, "fill", 90),
                mark(3.8, "filled", 1000),
                mark(3.9, "freed", 200),
            ],
            failure: None,
        };
        let r = returns(&trace);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].peak_rss_kb, 1000);
        assert_eq!(r[0].freed_rss_kb, 400);
        assert!((r[0].secs_to_tenth.expect("came back") - 1.5).abs() < 1e-9);
        assert!((r[0].watched_secs - 2.0).abs() < 1e-9);
        // The second free never came under 100 KiB before the end.
        assert_eq!(r[1].secs_to_tenth, None);
        assert_eq!(r[1].trimmed_rss_kb, None);
    }
}
