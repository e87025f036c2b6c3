//! Runs that took more than twice their row's fastest, with where their time went: a run
//! that spent its extra time in the kernel with its usual page faults waited on the memory
//! it faulted in (on a virtual machine, memory its host had taken back), not on the
//! allocator's code. The reading of such a row starts here, not from its median alone.

use super::run::Sample;
use super::summary::Summary;
use crate::shared::table::align;

/// How many times its row's fastest a run must take to be listed...
const SLOW: f64 = 2.0;
/// ...and how many seconds more, so that a short run's jitter (`--quick`'s runs of a
/// millisecond) is not listed.
const SLOWER_BY: f64 = 0.01;

const HEADER: [&str; 6] = [
    "workload",
    "allocator",
    "run",
    "secs (fastest)",
    "kernel secs (fastest's)",
    "minor faults (fastest's)",
];

/// The slow runs of every row, as a table; empty when there are none.
pub fn table(summaries: &[Summary]) -> String {
    let mut rows = vec![HEADER.map(String::from)];
    for s in summaries {
        let Some(fastest) = s.samples.iter().min_by(|a, b| a.secs.total_cmp(&b.secs)) else {
            continue;
        };
        for (i, run) in s.samples.iter().enumerate() {
            if run.secs > SLOW * fastest.secs && run.secs - fastest.secs >= SLOWER_BY {
                rows.push(row(s, i, run, fastest));
            }
        }
    }
    if rows.len() == 1 {
        return String::new();
    }
    align(&rows, 2)
}

fn row(s: &Summary, i: usize, run: &Sample, fastest: &Sample) -> [String; 6] {
    let secs = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.3}"));
    let faults = |x: Option<u64>| x.map_or("-".into(), |v| v.to_string());
    [
        s.workload.clone(),
        s.allocator.name().to_string(),
        format!("{} of {}", i + 1, s.samples.len()),
        format!("{:.3} ({:.3})", run.secs, fastest.secs),
        format!("{} ({})", secs(run.sys_secs), secs(fastest.sys_secs)),
        format!(
            "{} ({})",
            faults(run.minor_faults),
            faults(fastest.minor_faults)
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::Allocator;

    fn sample(secs: f64, sys_secs: Option<f64>) -> Sample {
        Sample {
            ops: 64,
            secs,
            peak_rss_kb: 1,
            os_calls: None,
            user_secs: None,
            sys_secs,
            minor_faults: sys_secs.map(|_| 152),
        }
    }

    fn summary(samples: Vec<Sample>) -> Summary {
        Summary {
            workload: "c-big-zeroed".into(),
            allocator: Allocator::Hakmem,
            ops: 64,
            skipped: None,
            failures: Vec::new(),
            stats: None,
            samples,
        }
    }

    #[test]
    fn lists_the_runs_over_twice_the_fastest() {
        let runs = vec![
            sample(0.095, Some(0.032)),
            sample(3.775, Some(3.639)),
            sample(0.180, Some(0.1)),
        ];
        let t = table(&[summary(runs)]);
        assert_eq!(t.lines().count(), 2, "{t}");
        let row = t.lines().nth(1).unwrap();
        assert!(row.contains("2 of 3"), "{row}");
        assert!(row.contains("3.775 (0.095)"), "{row}");
        assert!(row.contains("3.639 (0.032)"), "{row}");
        assert!(row.contains("152 (152)"), "{row}");
    }

    #[test]
    fn nothing_when_no_run_is_slow_and_dashes_for_missing_fields() {
        assert_eq!(
            table(&[summary(vec![sample(0.1, None), sample(0.15, None)])]),
            ""
        );
        assert_eq!(table(&[summary(Vec::new())]), "");
        let old = table(&[summary(vec![sample(0.1, None), sample(0.5, None)])]);
        assert!(old.lines().nth(1).unwrap().contains("- (-)"), "{old}");
    }
}
