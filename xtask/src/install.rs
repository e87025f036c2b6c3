//! `cargo xtask install --prefix DIR`: the C library as a system would have it.
//!
//! ```text
//! DIR/lib/libhakmem.so.<version>          the release build of hakmem-cabi
//! DIR/lib/libhakmem.so.0 -> libhakmem.so.<version>   the soname (build.rs sets it)
//! DIR/lib/libhakmem.so -> libhakmem.so.0             for `-lhakmem` at link time
//! DIR/include/hakmem.h                    the prefixed API
//! DIR/lib/pkgconfig/hakmem.pc             `pkg-config --cflags --libs hakmem`
//! ```

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::shared::build::cargo_build;
use crate::shared::Paths;

/// The library's version: the workspace's (xtask inherits it).
const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The soname `crates/hakmem-cabi/build.rs` gives the library.
const SONAME: &str = "libhakmem.so.0";

pub fn run(prefix: &Path) -> Result<()> {
    let paths = Paths::new();
    cargo_build(&paths, "hakmem-cabi")?;
    fs::create_dir_all(prefix).with_context(|| format!("creating {}", prefix.display()))?;
    let prefix = prefix.canonicalize()?;
    let lib = prefix.join("lib");
    let include = prefix.join("include");
    let pkgconfig = lib.join("pkgconfig");
    for dir in [&lib, &include, &pkgconfig] {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }

    let real = format!("libhakmem.so.{VERSION}");
    copy(&paths.release().join("libhakmem.so"), &lib.join(&real))?;
    link(&real, &lib.join(SONAME))?;
    link(SONAME, &lib.join("libhakmem.so"))?;
    let header = paths.root.join("crates/hakmem-cabi/include/hakmem.h");
    copy(&header, &include.join("hakmem.h"))?;
    let pc = pkg_config(&prefix);
    fs::write(pkgconfig.join("hakmem.pc"), pc).context("writing hakmem.pc")?;

    println!("installed into {}:", prefix.display());
    for path in [
        lib.join(&real),
        lib.join(SONAME),
        lib.join("libhakmem.so"),
        include.join("hakmem.h"),
        pkgconfig.join("hakmem.pc"),
    ] {
        println!("  {}", path.display());
    }
    println!(
        "use: PKG_CONFIG_PATH={} pkg-config --cflags --libs hakmem\n  or: LD_PRELOAD={} PROGRAM",
        pkgconfig.display(),
        lib.join(SONAME).display()
    );
    Ok(())
}

/// The pkg-config file for an installation under `prefix`.
fn pkg_config(prefix: &Path) -> String {
    format!(
        "prefix={}\n\
         libdir=${{prefix}}/lib\n\
         includedir=${{prefix}}/include\n\
         \n\
         Name: hakmem\n\
         Description: A fast, memory-lean malloc (LD_PRELOAD or -lhakmem) and the hakmem_* API\n\
         Version: {VERSION}\n\
         Libs: -L${{libdir}} -lhakmem\n\
         Cflags: -I${{includedir}}\n",
        prefix.display()
    )
}

/// Copy `from` to `to`, replacing what is there (by a new file: a program may be running
/// the old library, which must not change under it).
fn copy(from: &Path, to: &Path) -> Result<()> {
    let tmp = PathBuf::from(format!("{}.tmp", to.display()));
    fs::copy(from, &tmp)
        .with_context(|| format!("copying {} to {}", from.display(), tmp.display()))?;
    fs::rename(&tmp, to).with_context(|| format!("moving {} into place", to.display()))
}

/// Make `at` a symbolic link to `target`, replacing what is there.
fn link(target: &str, at: &Path) -> Result<()> {
    if fs::symlink_metadata(at).is_ok() {
        fs::remove_file(at).with_context(|| format!("removing {}", at.display()))?;
    }
    std::os::unix::fs::symlink(target, at)
        .with_context(|| format!("linking {} to {target}", at.display()))
}
