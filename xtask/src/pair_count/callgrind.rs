//! Running a program under `valgrind --tool=callgrind` and reading how many instructions
//! it executed (the `totals:` line of callgrind's output file).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Debian package that ships `valgrind`.
const PACKAGE: &str = "valgrind";

/// `valgrind --version`, or an error naming the package to install.
pub fn version() -> Result<String, String> {
    let out = Command::new("valgrind")
        .arg("--version")
        .output()
        .map_err(|e| format!("valgrind not found ({e}): sudo apt-get install -y {PACKAGE}"))?;
    if !out.status.success() {
        return Err(format!("`valgrind --version` failed: {}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A directory for callgrind's output files, removed when dropped.
pub struct Scratch {
    dir: PathBuf,
    runs: usize,
}

impl Scratch {
    pub fn new() -> Result<Scratch, String> {
        let dir = std::env::temp_dir().join(format!("hakmem-pair-count-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        Ok(Scratch { dir, runs: 0 })
    }

    /// Instructions `program args` executes under callgrind, with `preload` as its
    /// `LD_PRELOAD` (callgrind replaces no `malloc`, so the preloaded one is counted).
    pub fn instructions(
        &mut self,
        program: &Path,
        args: &[String],
        preload: Option<&Path>,
    ) -> Result<u64, String> {
        self.runs += 1;
        let out_file = self.dir.join(format!("callgrind.out.{}", self.runs));
        let mut command = Command::new("valgrind");
        command
            .arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", out_file.display()))
            .arg(program)
            .args(args);
        if let Some(lib) = preload {
            command.env("LD_PRELOAD", lib);
        }
        let out = command
            .output()
            .map_err(|e| format!("running valgrind: {e}"))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
            return Err(format!(
                "{} {} under callgrind: {}: {}",
                program.display(),
                args.join(" "),
                out.status,
                tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
            ));
        }
        let text = std::fs::read_to_string(&out_file)
            .map_err(|e| format!("reading {}: {e}", out_file.display()))?;
        totals(&text).ok_or_else(|| format!("no `totals:` line in {}", out_file.display()))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The first event count (instructions, `Ir`, callgrind's default and only event here) of
/// the `totals:` line, or of the `summary:` line that older versions write instead.
fn totals(callgrind_out: &str) -> Option<u64> {
    let line = |key: &str| {
        callgrind_out
            .lines()
            .find_map(|l| l.strip_prefix(key))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    line("totals:").or_else(|| line("summary:"))
}

#[cfg(test)]
mod tests {
    use super::totals;

    #[test]
    fn the_total_is_read_from_the_output_file() {
        let file = "events: Ir\nsummary: 13928106\n\nfn=(1) main\n3 2\n\ntotals: 13928106\n";
        assert_eq!(totals(file), Some(13_928_106));
        assert_eq!(totals("summary: 42 7\n"), Some(42));
        assert_eq!(totals("events: Ir\n"), None);
    }
}
