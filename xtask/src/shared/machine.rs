//! Where and when a run happened, stored with its results.

use std::process::Command;

use serde::Serialize;

#[derive(Serialize)]
pub struct Machine {
    /// UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub started: String,
    pub command: String,
    /// `git rev-parse --short HEAD`, with `-dirty` if tracked files have changes.
    pub git_commit: String,
    pub cpu: String,
    pub cores: usize,
    /// `MemTotal` of `/proc/meminfo`, in KiB.
    pub memory_kb: u64,
    /// `PRETTY_NAME` of `/etc/os-release`.
    pub os: String,
    pub kernel: String,
    pub rustc: String,
    /// `/proc/loadavg` at the start: how busy the machine was.
    pub load: String,
}

impl Machine {
    pub fn now() -> Machine {
        Machine {
            started: utc_timestamp(jiff::Timestamp::now()),
            command: std::env::args().skip(1).collect::<Vec<_>>().join(" "),
            git_commit: git_commit(),
            cpu: cpu_model(),
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            memory_kb: memory_kb(),
            os: os_name(),
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            rustc: first_line("rustc", &["--version"]),
            load: read_trimmed("/proc/loadavg"),
        }
    }

    /// The name of this run's output directory: the start time, safe in file names.
    pub fn dir_name(&self) -> String {
        self.started.replace(':', "-")
    }
}

/// A time as UTC `YYYY-MM-DDTHH:MM:SSZ`.
fn utc_timestamp(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The first line a program prints, or "unknown".
pub fn first_line(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_string)
        })
        .unwrap_or_else(|| "unknown".to_string())
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map_or_else(|_| "unknown".to_string(), |s| s.trim().to_string())
}

fn git_commit() -> String {
    let head = first_line("git", &["rev-parse", "--short", "HEAD"]);
    let changes = first_line("git", &["status", "--porcelain", "--untracked-files=no"]);
    match changes.as_str() {
        // No output at all: `first_line` has no line to give.
        "unknown" => head,
        _ => format!("{head}-dirty"),
    }
}

fn memory_kb() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    meminfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("MemTotal:")?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn os_name() -> String {
    let release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map_or_else(
            || "unknown".to_string(),
            |n| n.trim_matches('"').to_string(),
        )
}

fn cpu_model() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':'));
    model.map_or_else(|| "unknown".to_string(), |(_, m)| m.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::utc_timestamp;

    #[test]
    fn timestamps_are_utc_dates() {
        let at = |secs| utc_timestamp(jiff::Timestamp::from_second(secs).unwrap());
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_700_000_000), "2023-11-14T22:13:20Z");
    }
}
