//! Running the plan: one child process per run, the allocators of a workload one after
//! another and rounds repeated (A B D C, B C A D, ...), so drift of the machine falls on
//! all allocators alike. Each round has its own order ([`round_order`]), so that no
//! allocator always goes first or always runs right after the same one.

use std::process::{Child, ExitStatus};
use std::time::Duration;

use serde::Serialize;
use wait_timeout::ChildExt;

use super::plan::{Invocation, Plan};
use crate::shared::child::{command, failure, fields, read_all};
use crate::shared::order::round_order;
use crate::shared::{progress, Profile};

/// What one run printed.
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    pub ops: u64,
    pub secs: f64,
    /// `VmHWM` of the child.
    pub peak_rss_kb: u64,
    /// OS calls after warm-up (hakmem's Rust binary only).
    pub os_calls: Option<u64>,
    /// CPU time of the timed part, in user space and in the kernel, and its minor page
    /// faults (absent from binaries built before they were printed: `--baseline`).
    pub user_secs: Option<f64>,
    pub sys_secs: Option<f64>,
    pub minor_faults: Option<u64>,
}

impl Sample {
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.secs.max(1e-9)
    }
}

/// All runs of one (workload, allocator) pair.
#[derive(Default)]
pub struct Outcome {
    pub samples: Vec<Sample>,
    pub failures: Vec<String>,
}

/// The outcomes, indexed like `plan.workloads[w].targets[t]`.
pub type Outcomes = Vec<Vec<Outcome>>;

/// What happens before each run: a pause, then a warm-up ([`super::warm`]).
#[derive(Clone, Copy)]
pub struct BeforeEach {
    pub pause: Duration,
    pub warm_mib: usize,
}

pub fn run_all(
    plan: &Plan,
    runs: usize,
    timeout: Duration,
    before: BeforeEach,
    profile: Option<Profile>,
) -> Outcomes {
    let mut outcomes: Outcomes = plan
        .workloads
        .iter()
        .map(|w| w.targets.iter().map(|_| Outcome::default()).collect())
        .collect();
    let runnable = |w: usize, t: usize| plan.workloads[w].targets[t].setup.as_ref().ok();
    let total: usize = (0..plan.workloads.len())
        .map(|w| {
            (0..plan.workloads[w].targets.len())
                .filter(|&t| runnable(w, t).is_some())
                .count()
        })
        .sum();
    let bar = progress::bar((total * runs) as u64, "{pos}/{len} runs");
    for round in 0..runs {
        for (w, workload) in plan.workloads.iter().enumerate() {
            let n = workload.targets.len();
            for t in round_order(n, round) {
                let Some(invocation) = runnable(w, t) else {
                    continue;
                };
                let allocator = workload.targets[t].allocator.name();
                bar.set_message(format!(
                    "round {}/{runs}: {} with {allocator}",
                    round + 1,
                    workload.name
                ));
                std::thread::sleep(before.pause);
                super::warm::warm(before.warm_mib);
                let outcome = &mut outcomes[w][t];
                let profile = workload.targets[t].allocator.profile().or(profile);
                match run_once(invocation, timeout, profile) {
                    Ok(sample) => outcome.samples.push(sample),
                    Err(e) => {
                        bar.println(format!("FAILED {} with {allocator}: {e}", workload.name));
                        outcome.failures.push(e);
                    }
                }
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    outcomes
}

/// Start the program, wait for it (killing it past `timeout`), and read its RESULT line.
fn run_once(
    inv: &Invocation,
    timeout: Duration,
    profile: Option<Profile>,
) -> Result<Sample, String> {
    let mut child = command(&inv.program, &inv.args, inv.preload.as_deref(), profile)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", inv.program.display()))?;
    let status = wait(&mut child, timeout)?;
    let (stdout, stderr) = (read_all(child.stdout.take()), read_all(child.stderr.take()));
    if !status.success() {
        return Err(failure(status, &stderr));
    }
    parse_result(&stdout).ok_or_else(|| format!("no RESULT line in output {stdout:?}"))
}

/// Wait for the child to exit, killing it past `timeout`. Its output is one short line,
/// far below a pipe's buffer, so it cannot block on writing while we wait.
fn wait(child: &mut Child, timeout: Duration) -> Result<ExitStatus, String> {
    match child.wait_timeout(timeout) {
        Ok(Some(status)) => Ok(status),
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(format!("killed after the {}s timeout", timeout.as_secs()))
        }
        Err(e) => Err(format!("waiting for the child: {e}")),
    }
}

/// `RESULT workload=NAME ops=N secs=S peak_rss_kb=K [user_secs=U sys_secs=Y
/// minor_faults=F] [os_calls=C]`.
fn parse_result(stdout: &str) -> Option<Sample> {
    let line = stdout.lines().find_map(|l| l.strip_prefix("RESULT "))?;
    let fields = fields(line);
    Some(Sample {
        ops: fields.get("ops")?.parse().ok()?,
        secs: fields.get("secs")?.parse().ok()?,
        peak_rss_kb: fields.get("peak_rss_kb")?.parse().ok()?,
        os_calls: fields.get("os_calls").and_then(|c| c.parse().ok()),
        user_secs: fields.get("user_secs").and_then(|c| c.parse().ok()),
        sys_secs: fields.get("sys_secs").and_then(|c| c.parse().ok()),
        minor_faults: fields.get("minor_faults").and_then(|c| c.parse().ok()),
    })
}

#[cfg(test)]
mod tests {
    use super::parse_result;

    #[test]
    fn reads_the_result_line() {
        let out = "warming up\nRESULT workload=x ops=1000 secs=0.5 peak_rss_kb=2048 \
                   user_secs=0.25 sys_secs=0.125 minor_faults=152 os_calls=3\n";
        let s = parse_result(out).expect("parsed");
        assert_eq!((s.ops, s.peak_rss_kb, s.os_calls), (1000, 2048, Some(3)));
        assert_eq!((s.user_secs, s.sys_secs), (Some(0.25), Some(0.125)));
        assert_eq!(s.minor_faults, Some(152));
        assert_eq!(s.ops_per_sec(), 2000.0);
        let without_calls =
            parse_result("RESULT workload=x ops=1 secs=1 peak_rss_kb=1").expect("parsed");
        assert_eq!(without_calls.os_calls, None);
        assert_eq!(
            (without_calls.sys_secs, without_calls.minor_faults),
            (None, None)
        );
        assert!(parse_result("RESULT workload=x ops=1").is_none());
    }
}
