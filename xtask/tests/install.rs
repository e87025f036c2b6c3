//! `cargo xtask install --prefix DIR` into a fresh temporary prefix: a C program built with
//! `pkg-config --cflags --libs hakmem` links the installed library by its versioned soname
//! and runs; another runs under `LD_PRELOAD` of the installed library, whose `malloc`
//! takes over.
//!
//! Needs gcc and pkg-config (`.ci/run` installs them): without them the test skips with a
//! note, and fails under `CI=true`.

#[path = "../../crates/hakmem-cabi/tests/common/missing.rs"]
mod missing;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Uses the prefixed API (declared by the installed header) and plain malloc.
const LINKED: &str = r#"
#include <hakmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    char *a = hakmem_malloc(100);
    char *b = malloc(5000);
    if (!a || !b) return 1;
    memset(a, 1, 100);
    memset(b, 2, 5000);
    if (hakmem_usable_size(b) < 5000) return 2; /* malloc is hakmem's too */
    HakmemStats s = hakmem_stats();
    if (s.mapped == 0) return 3;
    free(b);
    hakmem_free(a);
    puts("linked ok");
    return 0;
}
"#;

/// Knows nothing of hakmem: prints the file `malloc` resolves into.
const PLAIN: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    void *p = malloc(64);
    Dl_info info;
    if (!p || !dladdr(dlsym(RTLD_DEFAULT, "malloc"), &info)) return 1;
    free(p);
    printf("malloc_from=%s\n", info.dli_fname);
    return 0;
}
"#;

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Whether every program is here; under CI=true a missing one fails the test.
fn have_all(programs: &[&str]) -> bool {
    // Not `all`, which would stop at the first missing one: every one gets its note.
    programs.iter().filter(|p| missing::skip_without(p)).count() == 0
}

fn compile(source: &str, exe: &Path, flags: &[String]) {
    let c = exe.with_extension("c");
    std::fs::write(&c, source).expect("write the C source");
    run(Command::new("gcc")
        .args(["-std=c11", "-Wall", "-Werror", "-o"])
        .arg(exe)
        .arg(&c)
        .args(flags)
        .arg("-ldl"));
}

#[test]
fn install_then_build_with_pkg_config_and_preload() {
    if !have_all(&["gcc", "pkg-config", "readelf"]) {
        return;
    }
    let prefix: PathBuf =
        std::env::temp_dir().join(format!("hakmem-install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&prefix);
    run(Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["install", "--prefix"])
        .arg(&prefix));
    let lib = prefix.join("lib");

    // The soname, and the links that lead to the real file.
    let version = env!("CARGO_PKG_VERSION");
    let dynamic = run(Command::new("readelf")
        .arg("-d")
        .arg(lib.join(format!("libhakmem.so.{version}"))));
    assert!(stdout(&dynamic).contains("Library soname: [libhakmem.so.0]"));
    let real = format!("libhakmem.so.{version}");
    for (name, to) in [
        ("libhakmem.so", "libhakmem.so.0"),
        ("libhakmem.so.0", &real),
    ] {
        let target = std::fs::read_link(lib.join(name)).expect("a symbolic link");
        assert_eq!(target, Path::new(to), "{name}");
    }

    // pkg-config gives the flags; the program records the soname and finds it by rpath.
    let flags = run(Command::new("pkg-config")
        .args(["--cflags", "--libs", "hakmem"])
        .env("PKG_CONFIG_PATH", lib.join("pkgconfig")));
    let flags = stdout(&flags);
    assert!(
        flags.contains(&format!("-I{}", prefix.join("include").display())),
        "{flags}"
    );
    assert!(flags.contains("-lhakmem"), "{flags}");
    let mut args: Vec<String> = flags.split_whitespace().map(String::from).collect();
    args.push(format!("-Wl,-rpath,{}", lib.display()));
    let linked = prefix.join("linked");
    compile(LINKED, &linked, &args);
    let needed = run(Command::new("readelf").arg("-d").arg(&linked));
    assert!(stdout(&needed).contains("Shared library: [libhakmem.so.0]"));
    assert_eq!(stdout(&run(&mut Command::new(&linked))), "linked ok");

    // LD_PRELOAD of the installed library replaces malloc in a program that never heard of it.
    let plain = prefix.join("plain");
    compile(PLAIN, &plain, &[]);
    let before = stdout(&run(&mut Command::new(&plain)));
    assert!(!before.contains("hakmem"), "{before}");
    let preload = lib.join("libhakmem.so.0");
    let after = stdout(&run(Command::new(&plain).env("LD_PRELOAD", &preload)));
    assert_eq!(after, format!("malloc_from={}", preload.display()));

    std::fs::remove_dir_all(&prefix).expect("remove the prefix");
}
