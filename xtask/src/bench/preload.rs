//! The `LD_PRELOAD` libraries of the C rows: `libhakmem.so` and mimalloc 3 as built
//! here, mimalloc 2, jemalloc and tcmalloc from their Debian packages, none for the system
//! allocator. Each is checked to really take over `malloc` before any row relies on it.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::build::Built;
use crate::shared::Allocator;

/// The shared libraries of the Debian packages, and the packages.
const MIMALLOC2: (&str, &str) = ("libmimalloc.so.2", "libmimalloc2.0");
const JEMALLOC: (&str, &str) = ("libjemalloc.so.2", "libjemalloc2");
const TCMALLOC: (&str, &str) = ("libtcmalloc_minimal.so.4", "libtcmalloc-minimal4");

/// The library to preload for `allocator` (`None`: run as is), or why there is none.
pub fn preload(
    allocator: Allocator,
    built: &Built,
    c_program: &Path,
) -> Result<Option<PathBuf>, String> {
    let lib = match allocator.program() {
        Allocator::System => return Ok(None),
        Allocator::Hakmem => built
            .libhakmem
            .clone()
            .map_err(|e| format!("no libhakmem.so: {e}"))?,
        Allocator::Mimalloc => built
            .mimalloc3
            .as_ref()
            .map(|m| m.lib.clone())
            .map_err(|e| format!("no mimalloc 3 library: {e}"))?,
        Allocator::Mimalloc2 => debian_lib(MIMALLOC2)?,
        Allocator::Jemalloc => debian_lib(JEMALLOC)?,
        Allocator::Tcmalloc => debian_lib(TCMALLOC)?,
        Allocator::Baseline => built
            .baseline
            .as_ref()
            .map(|b| b.lib.clone())
            .ok_or("no --baseline given")?,
        Allocator::HakmemBalanced | Allocator::HakmemLean => unreachable!("program() is hakmem"),
    };
    check_interposes(c_program, &lib)?;
    Ok(Some(lib))
}

/// Where Debian (or another distribution) keeps `file`.
fn debian_lib((file, package): (&str, &str)) -> Result<PathBuf, String> {
    let multiarch = format!("/usr/lib/{}-linux-gnu", std::env::consts::ARCH);
    [
        multiarch.as_str(),
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/lib",
    ]
    .iter()
    .map(|dir| Path::new(dir).join(file))
    .find(|p| p.exists())
    .ok_or_else(|| format!("{file} not found: sudo apt-get install -y {package}"))
}

/// Run the C program's `--which-malloc` under the preload: `malloc` must come from `lib`.
fn check_interposes(c_program: &Path, lib: &Path) -> Result<(), String> {
    let out = Command::new(c_program)
        .arg("--which-malloc")
        .env("LD_PRELOAD", lib)
        .output()
        .map_err(|e| format!("running {}: {e}", c_program.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let from = stdout.trim().strip_prefix("malloc_from=").unwrap_or("");
    if out.status.success() && same_file(Path::new(from), lib) {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(match out.status.success() {
        true => format!(
            "{} does not export malloc (malloc came from {from})",
            lib.display()
        ),
        false => format!(
            "the C program fails under {}: {} {}",
            lib.display(),
            out.status,
            stderr.trim()
        ),
    })
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
