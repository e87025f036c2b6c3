//! Starting a workload program and saying how it ended.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};

use super::Profile;

/// The command of a workload program: stdin closed, stdout and stderr piped, `LD_PRELOAD`
/// only if `preload` is given (never inherited), `HAKMEM_PROFILE` set if `profile` is
/// (otherwise the environment's, if any, reaches the child).
pub fn command(
    program: &Path,
    args: &[String],
    preload: Option<&Path>,
    profile: Option<Profile>,
) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(lib) = preload {
        cmd.env("LD_PRELOAD", lib);
    }
    if let Some(p) = profile {
        cmd.env(Profile::ENV, p.name());
    }
    cmd
}

/// Everything left on a child's pipe.
pub fn read_all(pipe: Option<impl Read>) -> String {
    let mut text = String::new();
    if let Some(mut pipe) = pipe {
        let _ = pipe.read_to_string(&mut text);
    }
    text
}

/// The `key=value` fields of a line a workload program printed.
pub fn fields(line: &str) -> HashMap<&str, &str> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .collect()
}

/// How the child ended, and the last lines of its stderr: a failure's description.
pub fn failure(status: ExitStatus, stderr: &str) -> String {
    format!("{}; stderr: {}", describe(status), last_lines(stderr, 3))
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (_, Some(signal)) => format!("killed by signal {signal}{}", signal_name(signal)),
        (Some(code), _) => format!("exit code {code}"),
        _ => status.to_string(),
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        4 => " (SIGILL)",
        6 => " (SIGABRT)",
        7 => " (SIGBUS)",
        9 => " (SIGKILL)",
        11 => " (SIGSEGV)",
        _ => "",
    }
}

pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_name_the_signal_and_the_last_lines() {
        let status = ExitStatus::from_raw(11);
        let text = failure(status, "a\nb\nc\nd\n");
        assert_eq!(text, "killed by signal 11 (SIGSEGV); stderr: b | c | d");
        assert_eq!(
            failure(ExitStatus::from_raw(2 << 8), ""),
            "exit code 2; stderr: "
        );
    }
}
