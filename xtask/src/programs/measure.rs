//! One run of a program: started by `timed` with the allocator's preload, timed to its
//! exit, its peak RSS and a digest of its output taken.

use std::fs::File;
use std::hash::Hasher;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

use super::list::{Arg, Program};
use super::Inputs;
use crate::shared::child::{fields, last_lines};
use crate::shared::{Allocator, Profile};

#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Wall-clock seconds from fork to exit, as `timed` took them.
    pub secs: f64,
    /// `ru_maxrss` of the run: the peak RSS of its largest process, in KiB.
    pub max_rss_kb: u64,
    /// A digest of what it wrote to stdout.
    pub output: u64,
}

/// Run `program` once under `preload` (none: the system allocator), through `timed`
/// (benches/c/timed.c), which times it and takes its peak RSS.
pub fn once(
    executable: &Path,
    program: &Program,
    preload: Option<&Path>,
    allocator: Allocator,
    inputs: &Inputs,
) -> Result<Sample, String> {
    let out_path = inputs.scratch.join("stdout");
    let err_path = inputs.scratch.join("stderr");
    let result_path = inputs.scratch.join("result");
    // A run that writes no result must not be read as the previous one.
    let _ = std::fs::remove_file(&result_path);
    let mut cmd = command(&result_path, executable, program, inputs)?;
    if let Some(lib) = preload {
        cmd.env("TIMED_PRELOAD", lib);
    }
    if let Some(p) = allocator.profile() {
        cmd.env(Profile::ENV, p.name());
    }
    cmd.stdout(create(&out_path)?).stderr(create(&err_path)?);
    let status = cmd
        .status()
        .map_err(|e| format!("starting {}: {e}", inputs.timed.display()))?;
    let result = std::fs::read_to_string(&result_path).unwrap_or_default();
    let fields = fields(&result);
    let wait_status = fields.get("status").and_then(|s| s.parse::<i32>().ok());
    let ran = status.success()
        && wait_status.is_some_and(|w| libc::WIFEXITED(w) && libc::WEXITSTATUS(w) == 0);
    let (Some(secs), Some(max_rss_kb), true) = (
        fields.get("secs").and_then(|s| s.parse().ok()),
        fields.get("max_rss_kb").and_then(|s| s.parse().ok()),
        ran,
    ) else {
        let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
        return Err(format!(
            "{} under {}: {}; stderr: {}",
            program.name,
            allocator.name(),
            result.trim(),
            last_lines(&stderr, 3)
        ));
    };
    Ok(Sample {
        secs,
        max_rss_kb,
        output: digest(&out_path)?,
    })
}

/// `timed RESULT EXECUTABLE ARGS...` with the inputs in place, `LC_ALL=C` and the
/// program's environment; no `LD_PRELOAD` of its own (`timed` sets the program's).
fn command(
    result: &Path,
    executable: &Path,
    program: &Program,
    inputs: &Inputs,
) -> Result<Command, String> {
    let mut cmd = Command::new(inputs.timed);
    cmd.arg(result).arg(executable);
    for arg in program.args {
        match arg {
            Arg::Literal(s) => cmd.arg(s),
            Arg::Repo(path) => cmd.arg(inputs.root.join(path)),
            Arg::Text => cmd.arg(inputs.text),
        };
    }
    cmd.current_dir(inputs.scratch)
        .env_remove("LD_PRELOAD")
        .env_remove("TIMED_PRELOAD")
        .env("LC_ALL", "C")
        .envs(program.env.iter().copied());
    cmd.stdin(match program.stdin {
        Some(path) => Stdio::from(
            File::open(inputs.root.join(path)).map_err(|e| format!("opening {path}: {e}"))?,
        ),
        None => Stdio::null(),
    });
    Ok(cmd)
}

fn create(path: &Path) -> Result<File, String> {
    File::create(path).map_err(|e| format!("creating {}: {e}", path.display()))
}

/// A digest of the file's bytes (the same in every run of this process).
fn digest(path: &Path) -> Result<u64, String> {
    let mut file = File::open(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let mut hasher = std::hash::DefaultHasher::new();
    let mut buf = vec![0; 1 << 16];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Ok(hasher.finish()),
            Ok(n) => hasher.write(&buf[..n]),
            Err(e) => return Err(format!("reading {}: {e}", path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::build::compile_c;
    use crate::bench::warm::warm;
    use crate::shared::Paths;

    static SH: Program = Program {
        name: "sh",
        what: "a shell line",
        executable: "sh",
        args: &[Arg::Literal("-c"), Arg::Literal("echo hi")],
        stdin: None,
        env: &[],
    };
    static SH_OTHER: Program = Program {
        args: &[Arg::Literal("-c"), Arg::Literal("echo ho")],
        ..SH
    };
    static SH_FAILS: Program = Program {
        args: &[Arg::Literal("-c"), Arg::Literal("exit 3")],
        ..SH
    };

    /// The peak RSS reported is the program's, not that of the harness, which has
    /// touched 256 MiB here (as its warm-up does before every run): a program spawned
    /// directly from this process would report at least that.
    #[test]
    fn a_run_reports_its_own_peak_rss_and_output() {
        let paths = Paths::new();
        let timed = compile_c(&paths, "benches/c/timed.c", "timed", &["-O2"], &[]).unwrap();
        let scratch = paths.bench().join("programs-test");
        std::fs::create_dir_all(&scratch).unwrap();
        let inputs = Inputs {
            timed: &timed,
            root: &paths.root,
            text: Path::new("/dev/null"),
            scratch: &scratch,
        };
        let sh = super::super::list::find_executable("sh").unwrap();
        let run = |p: &Program| once(&sh, p, None, Allocator::System, &inputs);
        warm(256);
        let a = run(&SH).unwrap();
        assert!(a.max_rss_kb > 0 && a.max_rss_kb < 64 << 10, "{a:?}");
        assert!(a.secs > 0.0);
        assert_eq!(a.output, run(&SH).unwrap().output);
        assert_ne!(a.output, run(&SH_OTHER).unwrap().output);
        let failed = run(&SH_FAILS).unwrap_err();
        assert!(failed.contains("sh under system"), "{failed}");
    }
}
