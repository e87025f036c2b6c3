//! Link flags of `libhakmem.so`.
use std::path::PathBuf;
use std::process::Command;

fn main() {
    // The versioned soname: programs linked with `-lhakmem` record `libhakmem.so.0`, which
    // `cargo xtask install` makes a link to `libhakmem.so.<version>`. The 0 changes when
    // the C ABI breaks.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libhakmem.so.0");
    // Never unload: blocks handed out must outlive any dlclose of the library.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    link_unwinder_statically();
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
}

/// Link libgcc's unwinder (`libgcc_eh.a`) into the library on GNU/Linux, so that it does
/// not need `libgcc_s.so.1`: every process started with hakmem preloaded loaded that
/// library for us alone (most C programs do not link it), and a process that only starts
/// and exits took 0.12 ms longer for it (docs/ARCHITECTURE.md, "Start-up"). Its symbols
/// there are hidden, and a cdylib exports only the C API, so the program's own unwinder,
/// if it has one, is untouched; ours serves the heap profiler's stack walks and `std`'s
/// panic message. Where the archive is not found the library links `libgcc_s` as before.
fn link_unwinder_statically() {
    let target = |key: &str| std::env::var(key).unwrap_or_default();
    if target("CARGO_CFG_TARGET_OS") != "linux" || target("CARGO_CFG_TARGET_ENV") != "gnu" {
        return;
    }
    // The linker cargo calls for the target ([target.<triple>] linker), which knows where
    // its libgcc lies.
    let cc = std::env::var("RUSTC_LINKER").unwrap_or_else(|_| "cc".into());
    let Ok(out) = Command::new(&cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
    else {
        return;
    };
    // Unknown files come back as the bare name.
    let archive = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let Some(dir) = archive
        .parent()
        .filter(|_| archive.is_absolute() && archive.exists())
    else {
        return;
    };
    println!("cargo:rustc-link-search=native={}", dir.display());
    // Whole: every `_Unwind_*` symbol is then defined before `std`'s `-lgcc_s`, which the
    // linker drops as not needed (`--as-needed`) whatever the order of the objects.
    println!("cargo:rustc-link-lib=static:+whole-archive=gcc_eh");
}
