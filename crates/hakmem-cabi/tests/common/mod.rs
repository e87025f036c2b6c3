//! Shared by the integration tests: where `libhakmem.so` is, compiling the C programs
//! under `tests/c`, running commands with and without `LD_PRELOAD`.
#![allow(dead_code)] // each test binary uses its own subset

mod missing;
#[allow(unused_imports)] // as above
pub use missing::skip_without;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

/// The folder with `libhakmem.so`: the profile folder this test executable runs from
/// (`target/<profile>/deps/<test>`), where the library is built, once per test process,
/// by `cargo build -p hakmem-cabi` in the same profile. (`cargo test` does not build a
/// cdylib-only library for integration tests, which do not link it; cargo does not
/// hold the build folder's lock while tests run, and the build is a no-op when fresh.)
///
/// `HAKMEM_TEST_LIB_DIR=$PWD/target/release` (an absolute path: tests run in the crate
/// folder) tests a library built elsewhere instead
/// (`cargo build --release -p hakmem-cabi` first).
///
/// The folder also gets `libhakmem.so.0`, a link to `libhakmem.so`: the name (the
/// soname) that programs linked with `-lhakmem` look for when they start.
pub fn lib_dir() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = match std::env::var_os("HAKMEM_TEST_LIB_DIR") {
                Some(dir) => std::fs::canonicalize(&dir)
                    .expect("HAKMEM_TEST_LIB_DIR is an existing absolute path"),
                None => build_library(),
            };
            // Test processes run at once: another one may have made the link first.
            match std::os::unix::fs::symlink("libhakmem.so", dir.join("libhakmem.so.0")) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => panic!("link libhakmem.so.0 to libhakmem.so: {e}"),
            }
            dir
        })
        .clone()
}

fn build_library() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf();
    let target_dir = profile_dir.parent().expect("target folder");
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        Some(name) => name,
        None => panic!("unexpected test executable path {}", exe.display()),
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let o = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "-p",
            "hakmem-cabi",
            "--profile",
            profile,
        ])
        .arg("--target-dir")
        .arg(target_dir)
        .current_dir(crate_dir())
        .output()
        .expect("run cargo build -p hakmem-cabi");
    assert_success(&o, "cargo build -p hakmem-cabi");
    assert!(profile_dir.join("libhakmem.so").exists());
    profile_dir
}

/// The prefixed API: what include/hakmem.h declares and the library exports.
pub const PREFIXED_API: &[&str] = &[
    "hakmem_malloc",
    "hakmem_free",
    "hakmem_calloc",
    "hakmem_realloc",
    "hakmem_aligned_alloc",
    "hakmem_usable_size",
    "hakmem_trim",
    "hakmem_stats",
    "hakmem_stats_print",
    "hakmem_heap_profile_dump",
];

pub fn lib() -> PathBuf {
    lib_dir().join("libhakmem.so")
}

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh, empty scratch folder for `name`.
pub fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("hakmem-cabi")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir
}

/// Compile `tests/c/<name>` (a `.c` or `.cpp` file) into an executable with `compiler`
/// and `args`, once per test process; returns its path.
pub fn build(name: &str, compiler: &str, args: &[&str]) -> PathBuf {
    let stem = Path::new(name).file_stem().unwrap().to_str().unwrap();
    let tag = fxhash(&format!("{compiler} {}", args.join(" ")));
    compile(name, compiler, &format!("{stem}-{tag:x}"), args)
}

/// Compile a C test program (an executable) with gcc.
pub fn build_c(name: &str) -> PathBuf {
    build(name, "gcc", &[])
}

/// Compile `tests/c/<stem>.c` into the shared library `lib<stem>.so`; returns its path.
pub fn build_shared(name: &str) -> PathBuf {
    let stem = Path::new(name).file_stem().unwrap().to_str().unwrap();
    compile(name, "gcc", &format!("lib{stem}.so"), &["-shared", "-fPIC"])
}

/// The folder compiled test programs and libraries go to.
pub fn c_out_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hakmem-cabi-c")
}

fn compile(name: &str, compiler: &str, out_name: &str, args: &[&str]) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(p) = built.get(out_name) {
        return p.clone();
    }
    std::fs::create_dir_all(c_out_dir()).unwrap();
    let out = c_out_dir().join(out_name);
    // -fno-builtin: gcc would otherwise drop malloc/free pairs whose block is unused.
    let o = Command::new(compiler)
        .args(["-O1", "-fno-builtin", "-g", "-Wall", "-Werror", "-I"])
        .arg(crate_dir().join("tests/c"))
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg("-o")
        .arg(&out)
        .arg(crate_dir().join("tests/c").join(name))
        .args(args)
        .args(["-pthread", "-ldl"])
        .output()
        .expect("run the C compiler");
    assert!(
        o.status.success(),
        "compiling {name} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    built.insert(out_name.to_owned(), out.clone());
    out
}

fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// A command with no `HAKMEM_*` settings inherited, and `libhakmem.so` preloaded if
/// `preload`.
pub fn command(program: impl AsRef<std::ffi::OsStr>, preload: bool) -> Command {
    let mut cmd = Command::new(program);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("HAKMEM_") {
            cmd.env_remove(k);
        }
    }
    cmd.env_remove("LD_PRELOAD");
    if preload {
        cmd.env("LD_PRELOAD", lib());
    }
    cmd
}

/// Run and return the output (the command must start).
pub fn output(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Assert the command exited 0; show its output otherwise.
pub fn assert_success(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    );
}

/// Run a case of a C test program under `LD_PRELOAD`; it must exit 0 and print `ok`.
pub fn run_case(program: &Path, case: &str) -> Output {
    let o = output(command(program, true).arg(case));
    assert_success(&o, &format!("{} {case}", program.display()));
    assert!(
        text(&o.stdout).contains("ok"),
        "{case}: no `ok` in {}",
        text(&o.stdout)
    );
    o
}
