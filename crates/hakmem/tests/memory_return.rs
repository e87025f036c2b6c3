//! Memory goes back to the OS: a large heap of small objects is freed and the process's
//! RSS (from /proc/self/statm) falls, in each profile. Each profile runs in a child process
//! (the profile is process-wide): this test binary re-run with `HAKMEM_RETURN_CASE`
//! (`harness = false`, tests/harness).

mod common;
mod harness;

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
    // Idle, without calling the allocator: what a background return gives back.
    std::thread::sleep(std::time::Duration::from_millis(2000));
    let idled = rss();
    hakmem::trim();
    let trimmed = rss();
    println!("\nFIGURES {peak} {freed} {idled} {trimmed}");
}

fn main() {
    harness::main(
        "HAKMEM_RETURN_CASE",
        run_case,
        &harness::tests![
            fast_returns_memory_on_trim,
            balanced_returns_memory_when_idle,
            lean_returns_memory_when_idle,
        ],
    )
}

/// RSS at the peak, right after the free, after 2 s of idling, after trim.
fn measure(profile: &str) -> (usize, usize, usize, usize) {
    let out = common::this_test_binary()
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
        "{profile}: peak {} MiB, after free {} MiB, idle 2 s {} MiB, after trim {} MiB",
        v[0] >> 20,
        v[1] >> 20,
        v[2] >> 20,
        v[3] >> 20
    );
    assert!(
        v[0] >= HEAP_BYTES,
        "{profile}: the heap was not resident at peak"
    );
    (v[0], v[1], v[2], v[3])
}

fn fast_returns_memory_on_trim() {
    let (peak, freed, _, trimmed) = measure("fast");
    // Fast keeps what was freed for reuse (up to the recent peak in use, for 5 s, given
    // back by later calls only), and gives it back at once on trim.
    assert!(freed <= peak + (8 << 20), "fast kept {freed} of {peak}");
    assert!(
        trimmed < peak / 10,
        "fast after trim kept {trimmed} of {peak}"
    );
}

fn balanced_returns_memory_when_idle() {
    // Kept for reuse right after the free; the background return gives it back within
    // 1.5 s of retain time (1 s) while the program calls nothing.
    let (peak, _, idled, _) = measure("balanced");
    assert!(
        idled < peak / 10,
        "balanced kept {idled} of {peak} after idling"
    );
}

fn lean_returns_memory_when_idle() {
    let (peak, _, idled, _) = measure("lean");
    assert!(
        idled < peak / 10,
        "lean kept {idled} of {peak} after idling"
    );
}
