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

/// A CSV file's text: the `header` row, then `rows`; fields quoted where CSV needs it.
pub fn csv(header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> Result<String> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer.write_record(header)?;
    for row in rows {
        writer.write_record(&row)?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|e| anyhow::anyhow!("writing CSV: {}", e.error()))?;
    Ok(String::from_utf8(bytes)?)
}

/// A CSV row: each value as text.
macro_rules! row {
    ($($value:expr),* $(,)?) => {
        vec![$($value.to_string()),*]
    };
}
pub(crate) use row;

/// A CSV field that may be empty.
pub fn opt(v: Option<impl ToString>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_where_csv_needs_it() {
        let text = csv(
            &["name", "note"],
            [
                row!["a", "plain"],
                row!["b", "x, \"y\"\nz"],
                row![3, opt(None::<u8>)],
            ],
        )
        .unwrap();
        assert_eq!(text, "name,note\na,plain\nb,\"x, \"\"y\"\"\nz\"\n3,\n");
    }
}
