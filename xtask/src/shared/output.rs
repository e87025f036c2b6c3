//! A run's output directory: `BASE/<UTC start time>/`, with `BASE/latest` pointing at it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::machine::Machine;

/// Make the directory of the run that `machine` describes and point `base/latest` at it.
pub fn run_dir(base: &Path, machine: &Machine) -> Result<PathBuf> {
    let name = machine.dir_name();
    let dir = base.join(&name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let latest = base.join("latest");
    let _ = std::fs::remove_file(&latest);
    let _ = std::os::unix::fs::symlink(&name, &latest);
    Ok(dir)
}

/// Write `contents` to `dir/name`.
pub fn write(dir: &Path, name: &str, contents: impl AsRef<[u8]>) -> Result<()> {
    let path = dir.join(name);
    std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))
}

/// A CSV field: commas, quotes and line breaks become spaces.
pub fn csv_field(text: &str) -> String {
    text.replace([',', '"', '\n'], " ")
}
