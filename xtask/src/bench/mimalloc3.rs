//! The C rows' mimalloc: the mimalloc 3 sources that the `libmimalloc-sys` crate of
//! Cargo.lock ships (the very ones the Rust rows' `mimalloc` crate compiles), built with
//! gcc into `target/bench/mimalloc3/libmimalloc.so`, so both sides measure one version.
//! The build is cached: it is redone only when the sources' directory or the flags change.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::shared::Paths;

/// Flags as the crate's build script gives them for a release build (`MI_DEBUG=0`,
/// `MI_BUILD_RELEASE`, `NDEBUG`, initial-exec TLS, cargo's `-O3`), plus what a shared
/// object that replaces `malloc` needs (`MI_MALLOC_OVERRIDE`, as mimalloc's own CMake
/// build sets it, and `-fPIC -shared`).
const FLAGS: &[&str] = &[
    "-O3",
    "-fPIC",
    "-shared",
    "-DNDEBUG",
    "-DMI_BUILD_RELEASE",
    "-DMI_DEBUG=0",
    "-DMI_MALLOC_OVERRIDE",
    "-ftls-model=initial-exec",
    "-fno-builtin-malloc",
];

/// The built library and where its sources are.
#[derive(Clone, Debug)]
pub struct Mimalloc3 {
    pub lib: PathBuf,
    pub sources: PathBuf,
}

/// The library, built if need be, or why there is none.
pub fn build(paths: &Paths) -> Result<Mimalloc3, String> {
    let sources = sources(paths)?;
    let dir = paths.bench().join("mimalloc3");
    let lib = dir.join("libmimalloc.so");
    let stamp = dir.join("built-from");
    let recipe = format!("{}\n{}\n", sources.display(), FLAGS.join(" "));
    let built = Mimalloc3 {
        lib: lib.clone(),
        sources: sources.clone(),
    };
    if lib.exists() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == recipe) {
        return Ok(built);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    eprintln!("building mimalloc 3 from {}", sources.display());
    let status = Command::new("gcc")
        .args(FLAGS)
        .arg("-I")
        .arg(sources.join("include"))
        .arg("-I")
        .arg(sources.join("src"))
        .arg(sources.join("src/static.c"))
        .arg("-o")
        .arg(&lib)
        .arg("-lpthread")
        .status()
        .map_err(|e| format!("gcc not found ({e}): sudo apt-get install -y gcc"))?;
    if !status.success() {
        return Err(format!("gcc failed on {}", sources.display()));
    }
    std::fs::write(&stamp, recipe).map_err(|e| format!("writing {}: {e}", stamp.display()))?;
    Ok(built)
}

/// `c_src/mimalloc/v3` of the `libmimalloc-sys` package that `cargo metadata` resolves
/// (from Cargo.lock), checked to be built without its `v2` feature.
fn sources(paths: &Paths) -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(&paths.root)
        .output()
        .map_err(|e| format!("running cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let metadata: Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("reading cargo metadata: {e}"))?;
    v3_sources(&metadata)
}

fn v3_sources(metadata: &Value) -> Result<PathBuf, String> {
    let package = metadata["packages"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == "libmimalloc-sys"))
        .ok_or("the workspace does not depend on libmimalloc-sys")?;
    let features = metadata["resolve"]["nodes"]
        .as_array()
        .and_then(|ns| ns.iter().find(|n| n["id"] == package["id"]))
        .map(|n| n["features"].clone())
        .unwrap_or_default();
    if features
        .as_array()
        .is_some_and(|fs| fs.iter().any(|f| f == "v2"))
    {
        return Err("libmimalloc-sys is built with its v2 feature, not mimalloc 3".into());
    }
    let manifest = Path::new(package["manifest_path"].as_str().unwrap_or_default());
    let dir = manifest
        .parent()
        .ok_or("no manifest path for libmimalloc-sys")?
        .join("c_src/mimalloc/v3");
    if dir.join("src/static.c").exists() {
        Ok(dir)
    } else {
        Err(format!("{} has no src/static.c", dir.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::v3_sources;
    use serde_json::json;

    #[test]
    fn v2_builds_are_refused() {
        let metadata = |features: &[&str]| {
            json!({
                "packages": [{"name": "libmimalloc-sys", "id": "m",
                              "manifest_path": "/nowhere/libmimalloc-sys/Cargo.toml"}],
                "resolve": {"nodes": [{"id": "m", "features": features}]}
            })
        };
        let v2 = v3_sources(&metadata(&["extended", "v2"])).unwrap_err();
        assert!(v2.contains("v2 feature"), "{v2}");
        let missing = v3_sources(&metadata(&["extended"])).unwrap_err();
        assert!(
            missing.contains("/nowhere/libmimalloc-sys/c_src/mimalloc/v3"),
            "{missing}"
        );
        let none = v3_sources(&json!({"packages": []})).unwrap_err();
        assert!(none.contains("does not depend"), "{none}");
    }
}
