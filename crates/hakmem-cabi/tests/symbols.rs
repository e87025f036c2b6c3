//! What `libhakmem.so` exports (`nm -D --defined-only`): exactly the C ABI, nothing else;
//! its soname; and the libraries it needs: libc and the loader only.

mod common;

use common::*;
use std::collections::BTreeSet;
use std::process::Command;

/// Exported besides the prefixed API.
const EXPORTED: &[&str] = &[
    // The malloc family.
    "malloc",
    "free",
    "calloc",
    "realloc",
    "reallocarray",
    "malloc_usable_size",
    "cfree",
    "free_sized",
    "free_aligned_sized",
    "malloc_trim",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    // glibc's other names and introspection.
    "__libc_malloc",
    "__libc_free",
    "__libc_calloc",
    "__libc_realloc",
    "__libc_memalign",
    "__libc_valloc",
    "__libc_pvalloc",
    "__libc_mallinfo",
    "__libc_mallopt",
    "mallinfo",
    "mallinfo2",
    "mallopt",
    "malloc_stats",
    "malloc_info",
    // C++ operator new / delete.
    "_Znwm",
    "_Znam",
    "_ZnwmRKSt9nothrow_t",
    "_ZnamRKSt9nothrow_t",
    "_ZnwmSt11align_val_t",
    "_ZnamSt11align_val_t",
    "_ZnwmSt11align_val_tRKSt9nothrow_t",
    "_ZnamSt11align_val_tRKSt9nothrow_t",
    "_ZdlPv",
    "_ZdaPv",
    "_ZdlPvm",
    "_ZdaPvm",
    "_ZdlPvRKSt9nothrow_t",
    "_ZdaPvRKSt9nothrow_t",
    "_ZdlPvSt11align_val_t",
    "_ZdaPvSt11align_val_t",
    "_ZdlPvmSt11align_val_t",
    "_ZdaPvmSt11align_val_t",
    "_ZdlPvSt11align_val_tRKSt9nothrow_t",
    "_ZdaPvSt11align_val_tRKSt9nothrow_t",
];

#[test]
fn exports_exactly_the_c_abi() {
    if skip_without("nm") {
        return;
    }
    let o = Command::new("nm")
        .args(["-D", "--defined-only", "--format=posix"])
        .arg(lib())
        .output()
        .expect("nm");
    assert_success(&o, "nm -D");
    let found: BTreeSet<String> = text(&o.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(|name| name.split('@').next().unwrap().to_owned())
        .collect();
    let expected: BTreeSet<String> = EXPORTED
        .iter()
        .chain(PREFIXED_API)
        .map(|s| s.to_string())
        .collect();
    let extra: Vec<_> = found.difference(&expected).collect();
    let missing: Vec<_> = expected.difference(&found).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "exported but not expected: {extra:?}\nexpected but not exported: {missing:?}"
    );
}

#[test]
fn soname_is_libhakmem_so_0() {
    if skip_without("readelf") {
        return;
    }
    let out = dynamic_section();
    assert!(out.contains("Library soname: [libhakmem.so.0]"), "{out}");
}

/// Every library a process with hakmem preloaded loads for hakmem alone costs its start:
/// `libgcc_s` and `libm` took 0.17 ms of a 0.93 ms start of `/usr/bin/true`
/// (docs/ARCHITECTURE.md, "Start-up"). The unwinder is linked in (build.rs), and no libm
/// function is called.
#[test]
fn needs_only_libc_and_the_loader() {
    if skip_without("readelf") {
        return;
    }
    let out = dynamic_section();
    let needed: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next())
        .collect();
    assert!(needed.contains(&"libc.so.6"), "{out}");
    let other: Vec<_> = needed
        .iter()
        .filter(|n| **n != "libc.so.6" && !n.starts_with("ld-linux"))
        .collect();
    assert!(
        other.is_empty(),
        "needed besides libc and the loader: {other:?}"
    );
}

/// `readelf -d` of the library: its dynamic section.
fn dynamic_section() -> String {
    let o = Command::new("readelf")
        .arg("-d")
        .arg(lib())
        .output()
        .expect("readelf");
    assert_success(&o, "readelf -d");
    text(&o.stdout)
}
