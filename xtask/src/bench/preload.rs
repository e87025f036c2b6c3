//! The `LD_PRELOAD` libraries of the C rows: `libhakmem.so` as built here, mimalloc and
//! jemalloc from their Debian packages, none for the system allocator. Each is checked
//! to really take over `malloc` before any row relies on it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::shared::Allocator;

/// The shared libraries of the Debian packages, and the packages.
const MIMALLOC: (&str, &str) = ("libmimalloc.so.2", "libmimalloc2.0");
const JEMALLOC: (&str, &str) = ("libjemalloc.so.2", "libjemalloc2");

/// The library to preload for `allocator` (`None`: run as is), or why there is none.
pub fn preload(
    allocator: Allocator,
    libhakmem: &Result<PathBuf, String>,
    c_program: &Path,
) -> Result<Option<PathBuf>, String> {
    let lib = match allocator {
        Allocator::System => return Ok(None),
        Allocator::Hakmem => libhakmem
            .clone()
            .map_err(|e| format!("no libhakmem.so: {e}"))?,
        Allocator::Mimalloc => debian_lib(MIMALLOC)?,
        Allocator::Jemalloc => debian_lib(JEMALLOC)?,
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
