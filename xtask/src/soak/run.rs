//! Running the series one after another, each as a child `bench-ALLOCATOR soak ...` whose
//! `EPOCH` and `MARK` lines are read as they come (they move the progress bar).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use serde::Serialize;

use super::plan::{Plan, Series};
use super::SoakArgs;
use crate::shared::child::{command, failure, fields, read_all};
use crate::shared::progress;
use crate::shared::table::{mib, si};

/// One epoch as the child reported it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Epoch {
    /// Seconds since the start, at the end of the epoch.
    pub t: f64,
    /// The epoch's length in seconds.
    pub secs: f64,
    pub ops: u64,
    pub rss_kb: u64,
    /// hakmem's OS calls in the epoch.
    pub os_calls: Option<u64>,
    /// What hakmem counts as handed out (thread caches included) at the end of the epoch.
    pub in_use_kb: Option<u64>,
}

impl Epoch {
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.secs.max(1e-9)
    }
}

/// A moment the workload marked (e.g. `freed`), with the RSS then.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Mark {
    pub t: f64,
    pub what: String,
    pub block: u64,
    pub rss_kb: u64,
    pub in_use_kb: Option<u64>,
}

/// What one run reported.
#[derive(Debug, Default)]
pub struct Trace {
    pub epochs: Vec<Epoch>,
    pub marks: Vec<Mark>,
    pub failure: Option<String>,
}

impl Trace {
    /// Every RSS reading, epochs and marks together, in time order: `(t, rss_kb)`.
    pub fn rss(&self) -> Vec<(f64, u64)> {
        let epochs = self.epochs.iter().map(|e| (e.t, e.rss_kb));
        let mut all: Vec<_> = epochs
            .chain(self.marks.iter().map(|m| (m.t, m.rss_kb)))
            .collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        all
    }
}

/// The traces, indexed like `plan.series`.
pub fn run_all(plan: &Plan, args: &SoakArgs, programs: &Path) -> Vec<Trace> {
    let per_run = args.duration.as_millis() as u64;
    let bar = progress::bar(per_run * plan.series.len() as u64, "{prefix}");
    let traces = plan
        .series
        .iter()
        .enumerate()
        .map(|(k, series)| {
            bar.set_prefix(format!("run {}/{}", k + 1, plan.series.len()));
            bar.set_position(per_run * k as u64);
            let trace = run_one(series, args, programs, &bar);
            if let Some(why) = &trace.failure {
                bar.println(format!("FAILED {}: {why}", series.name()));
            }
            trace
        })
        .collect();
    bar.finish_and_clear();
    traces
}

fn run_one(series: &Series, args: &SoakArgs, programs: &Path, bar: &ProgressBar) -> Trace {
    let program = programs.join(format!("bench-{}", series.allocator.name()));
    let child_args: Vec<String> = [
        "soak",
        &series.workload,
        &args.duration.as_millis().to_string(),
        &args.epoch.as_millis().to_string(),
        "--phases-bytes",
        &args.phases_bytes.to_string(),
        "--phases-idle-ms",
        &args.phases_idle.as_millis().to_string(),
    ]
    .map(String::from)
    .into();
    let mut trace = Trace::default();
    let mut child = match command(&program, &child_args, None, series.profile).spawn() {
        Ok(child) => child,
        Err(e) => {
            trace.failure = Some(format!("cannot start {}: {e}", program.display()));
            return trace;
        }
    };
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let (lines, received) = channel();
    std::thread::spawn(move || {
        for line in stdout
            .map(BufReader::new)
            .into_iter()
            .flat_map(|r| r.lines())
        {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let stderr = std::thread::spawn(move || read_all(stderr));
    let start = bar.position();
    let deadline = Instant::now() + args.duration + Duration::from_secs(args.timeout);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match received.recv_timeout(left) {
            Ok(line) => match parse_line(&line) {
                Some(Line::Epoch(e)) => {
                    bar.set_position(start + (e.t * 1000.0) as u64);
                    let rate = si(e.ops_per_sec());
                    let rss = mib(e.rss_kb);
                    bar.set_message(format!("{}: {rss}, {rate} ops/s", series.name()));
                    trace.epochs.push(e);
                }
                Some(Line::Mark(m)) => trace.marks.push(m),
                None => {}
            },
            Err(RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let limit = (args.duration + Duration::from_secs(args.timeout)).as_secs();
                trace.failure = Some(format!("killed after {limit}s"));
                break;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = child.wait();
    let stderr = stderr.join().unwrap_or_default();
    if trace.failure.is_none() {
        trace.failure = match status {
            Ok(s) if !s.success() => Some(failure(s, &stderr)),
            Err(e) => Some(format!("waiting for the child: {e}")),
            Ok(_) if trace.epochs.is_empty() => Some("no EPOCH line".to_string()),
            Ok(_) => None,
        };
    }
    trace
}

enum Line {
    Epoch(Epoch),
    Mark(Mark),
}

/// `EPOCH t=.. secs=.. ops=.. rss_kb=.. [in_use_kb=..] [os_calls=..]` or
/// `MARK t=.. what=.. block=.. rss_kb=.. [in_use_kb=..]`.
fn parse_line(line: &str) -> Option<Line> {
    let (kind, rest) = line.split_once(' ')?;
    let fields = fields(rest);
    let t = fields.get("t")?.parse().ok()?;
    let rss_kb = fields.get("rss_kb")?.parse().ok()?;
    let in_use_kb = fields.get("in_use_kb").and_then(|v| v.parse().ok());
    match kind {
        "EPOCH" => Some(Line::Epoch(Epoch {
            t,
            secs: fields.get("secs")?.parse().ok()?,
            ops: fields.get("ops")?.parse().ok()?,
            rss_kb,
            os_calls: fields.get("os_calls").and_then(|c| c.parse().ok()),
            in_use_kb,
        })),
        "MARK" => Some(Line::Mark(Mark {
            t,
            what: fields.get("what")?.to_string(),
            block: fields.get("block")?.parse().ok()?,
            rss_kb,
            in_use_kb,
        })),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_epoch_and_mark_lines() {
        let Some(Line::Epoch(e)) =
            parse_line("EPOCH t=2.0 secs=0.5 ops=1000 rss_kb=2048 in_use_kb=7 os_calls=3")
        else {
            panic!("not an epoch");
        };
        assert_eq!((e.ops, e.rss_kb, e.os_calls), (1000, 2048, Some(3)));
        assert_eq!(e.in_use_kb, Some(7));
        assert_eq!(e.ops_per_sec(), 2000.0);
        let Some(Line::Mark(m)) = parse_line("MARK t=1.5 what=freed block=64 rss_kb=10") else {
            panic!("not a mark");
        };
        assert_eq!((m.what.as_str(), m.block, m.t), ("freed", 64, 1.5));
        assert!(parse_line("EPOCH t=1 ops=1").is_none());
        assert!(parse_line("RESULT t=1 rss_kb=1").is_none());
    }

    #[test]
    fn rss_readings_are_merged_in_time_order() {
        let epoch = |t, rss_kb| Epoch {
            t,
            secs: 1.0,
            ops: 0,
            rss_kb,
            os_calls: None,
            in_use_kb: None,
        };
        let trace = Trace {
            epochs: vec![epoch(1.0, 10), epoch(2.0, 30)],
            marks: vec![Mark {
                t: 1.5,
                what: "filled".into(),
                block: 64,
                rss_kb: 20,
                in_use_kb: None,
            }],
            failure: None,
        };
        assert_eq!(trace.rss(), [(1.0, 10), (1.5, 20), (2.0, 30)]);
    }
}
