//! Memory goes back to the OS: a large heap of small objects is freed and the process's
//! RSS (from /proc/self/statm) falls, in each profile. Each profile runs in a child process
//! (the profile is process-wide): this test binary re-run with `HAKMEM_RETURN_CASE`.

mod common;

use std::alloc::{GlobalAlloc, Layout};

#[global_allocator]
static GLOBAL: hakmem::HakMem = hakmem::HakMem;

const HEAP_BYTES: usize = 512 << 20;
const OBJECT: usize = 1024;

fn rss() -> usize {
    hakmem::stats().resident
}

/// Fill a heap, free it, report RSS at peak, after the free, and after trim, as
/// "peak freed trimmed" on stdout.
fn run_case(profile: &str) {
    let p = hakmem_core::Profile::parse(profile.as_bytes()).expect("profile");
    hakmem_core::set_profile(p);
    let layout = Layout::from_size_align(OBJECT, 16).unwrap();
    let mut blocks = Vec::with_capacity(HEAP_BYTES / OBJECT);
    for i in 0..HEAP_BYTES / OBJECT {
        // SAFETY: a valid layout; the block is written within its size and freed below.
        unsafe {
            let b = GLOBAL.alloc(layout);
            assert!(!b.is_null());
            b.write_bytes(i as u8, OBJECT);
            blocks.push(b);
        }
    }
    let peak = rss();
    for b in blocks.drain(..) {
        // SAFETY: allocated above with this layout.
        unsafe { GLOBAL.dealloc(b, layout) };
    }
    let freed = rss();
    hakmem::trim();
    let trimmed = rss();
    println!("\nFIGURES {peak} {freed} {trimmed}");
}

#[test]
fn child() {
    if let Ok(profile) = std::env::var("HAKMEM_RETURN_CASE") {
        run_case(&profile);
    }
}

fn measure(profile: &str) -> (usize, usize, usize) {
    let out = common::this_test_binary("child")
        .env("HAKMEM_RETURN_CASE", profile)
        .output()
        .unwrap();
    assert!(out.status.success(), "{profile}: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("FIGURES "))
        .unwrap_or_else(|| panic!("no figures in {text}"));
    let v: Vec<usize> = line.split(' ').map(|w| w.parse().unwrap()).collect();
    eprintln!(
        "{profile}: peak {} MiB, after free {} MiB, after trim {} MiB",
        v[0] >> 20,
        v[1] >> 20,
        v[2] >> 20
    );
    assert!(
        v[0] >= HEAP_BYTES,
        "{profile}: the heap was not resident at peak"
    );
    (v[0], v[1], v[2])
}

#[test]
fn fast_returns_memory_on_trim() {
    let (peak, freed, trimmed) = measure("fast");
    // The bounded superslab cache keeps at most a few dozen MiB after the free.
    assert!(freed < peak / 4, "fast kept {freed} of {peak}");
    assert!(
        trimmed < peak / 10,
        "fast after trim kept {trimmed} of {peak}"
    );
}

#[test]
fn balanced_returns_memory_on_free() {
    let (peak, freed, _) = measure("balanced");
    assert!(freed < peak / 4, "balanced kept {freed} of {peak}");
}

#[test]
fn lean_returns_memory_on_free() {
    let (peak, freed, _) = measure("lean");
    assert!(freed < peak / 10, "lean kept {freed} of {peak}");
}
