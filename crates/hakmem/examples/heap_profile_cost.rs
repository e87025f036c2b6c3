//! What the heap profiler costs (docs/PROFILING.md has the figures):
//!
//! ```text
//! cargo run --release -p hakmem --features heap-profile --example heap_profile_cost -- pair N [INTERVAL [DEPTH]]
//! cargo run --release -p hakmem --features heap-profile --example heap_profile_cost -- rss N SIZE [INTERVAL]
//! ```
//!
//! - `pair`: N allocations and frees of 32 bytes, DEPTH calls deep; with INTERVAL, profiling
//!   is on at that interval (without, compiled in but off). Prints ns per pair and samples.
//! - `rss`: keep N blocks of SIZE bytes; prints the growth of RSS and the live samples
//!   (profiling on at INTERVAL, default 4096, when given; `0` keeps it off).
use std::alloc::{GlobalAlloc, Layout};

#[global_allocator]
static G: hakmem::HakMem = hakmem::HakMem;

fn arg(i: usize) -> Option<usize> {
    std::env::args()
        .nth(i)
        .map(|v| v.parse().expect("a number"))
}

fn start(interval: Option<usize>) {
    if let Some(interval) = interval.filter(|&i| i > 0) {
        hakmem::heap_profile::start(hakmem::heap_profile::Options { interval }).unwrap();
    }
}

fn samples() -> (u64, u64) {
    let s = hakmem::heap_profile::snapshot();
    let taken = s.stacks.iter().map(|s| s.samples).sum();
    let live = s.stacks.iter().map(|s| s.live_samples).sum();
    (taken, live)
}

/// The timed loop, `depth` calls deep; returns its time. Reports nothing itself, so that
/// callgrind's `--toggle-collect=heap_profile_cost::pairs` counts the loop and its
/// samples only.
#[inline(never)]
fn pairs(depth: usize, n: usize) -> std::time::Duration {
    if depth > 0 {
        let dt = pairs(std::hint::black_box(depth - 1), n);
        std::hint::black_box(depth);
        return dt;
    }
    let l = Layout::from_size_align(32, 8).unwrap();
    let t = std::time::Instant::now();
    for _ in 0..n {
        // SAFETY: a non-zero size, freed with the same layout.
        unsafe {
            let p = G.alloc(l);
            std::hint::black_box(p);
            G.dealloc(p, l);
        }
    }
    t.elapsed()
}

fn report_pairs(n: usize, dt: std::time::Duration) {
    println!(
        "{n} pairs: {:.1} ns/pair, {} samples",
        dt.as_nanos() as f64 / n as f64,
        samples().0
    );
}

fn rss_kb() -> usize {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap();
    s.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<usize>()
        .unwrap()
        * 4
}

fn rss(n: usize, size: usize) {
    let l = Layout::from_size_align(size, 8).unwrap();
    let mut keep: Vec<*mut u8> = Vec::with_capacity(n);
    let before = rss_kb();
    for _ in 0..n {
        // SAFETY: a non-zero size; the block is written within its size.
        unsafe {
            let p = G.alloc(l);
            p.write_bytes(1, size);
            keep.push(p);
        }
    }
    let grew = rss_kb() - before;
    println!(
        "{n} blocks of {size} B: RSS grew {grew} KiB, {} live samples",
        samples().1
    );
}

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("pair") => {
            start(arg(3));
            let n = arg(2).expect("N");
            report_pairs(n, pairs(arg(4).unwrap_or(0), n));
        }
        Some("rss") => {
            start(Some(arg(4).unwrap_or(4096)));
            rss(arg(2).expect("N"), arg(3).expect("SIZE"));
        }
        _ => {
            eprintln!("usage: heap_profile_cost pair N [INTERVAL [DEPTH]] | rss N SIZE [INTERVAL]")
        }
    }
}
