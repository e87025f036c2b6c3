//! What the heap profiler costs (docs/PROFILING.md has the figures):
//!
//! ```text
//! cargo run --release -p hakmem --features heap-profile --example heap_profile_cost -- pair N [INTERVAL [DEPTH]]
//! cargo run --release -p hakmem --features heap-profile --example heap_profile_cost -- rss N SIZE [INTERVAL]
//! cargo run --release -p hakmem --features heap-profile --example heap_profile_cost -- churn N ROUNDS [INTERVAL [SLOTS MIN MAX]]
//! ```
//!
//! - `pair`: N allocations and frees of 32 bytes, DEPTH calls deep; with INTERVAL, profiling
//!   is on at that interval (without, compiled in but off). Prints ns per pair and samples.
//! - `rss`: keep N blocks of SIZE bytes; prints the growth of RSS and the live samples
//!   (profiling on at INTERVAL, default 4096, when given; `0` keeps it off).
//! - `churn`: the loop of the benchmark's `random-mixed` (SLOTS 400, blocks of MIN 16 to
//!   MAX 1024 bytes; `larson-1t` is 1000 10 1000): N operations, each freeing a random
//!   slot's block and allocating one of random size there, its first and last bytes
//!   written and read back. ROUNDS times, in one process, with profiling off and then on
//!   at INTERVAL (default 512 KiB; the order alternates between rounds), so that both
//!   run over the same memory: the machine's run-to-run spread (whole runs land in one
//!   of two speeds on this VM) is not mistaken for the profiler's cost. Prints the median
//!   time of each and the median ratio of the rounds, with its spread.
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

/// `n` operations of slot churn; returns their time.
#[inline(never)]
fn churn(
    slots: &mut [(usize, *mut u8)],
    rng: &mut u64,
    n: usize,
    (lo, hi): (usize, usize),
) -> std::time::Duration {
    let mut next = || {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *rng as usize
    };
    let t = std::time::Instant::now();
    for _ in 0..n {
        let slot = &mut slots[next() % slots.len()];
        // SAFETY: a slot holds null or a block of its size, written at both ends; the new
        // block has a non-zero size and is freed with the same layout.
        unsafe {
            if !slot.1.is_null() {
                let l = Layout::from_size_align_unchecked(slot.0, 8);
                std::hint::black_box(*slot.1 ^ *slot.1.add(slot.0 - 1));
                G.dealloc(slot.1, l);
            }
            let size = lo + next() % (hi - lo + 1);
            let p = G.alloc(Layout::from_size_align_unchecked(size, 8));
            assert!(!p.is_null());
            p.write(size as u8);
            p.add(size - 1).write(1);
            *slot = (size, p);
        }
    }
    t.elapsed()
}

fn churn_rounds(n: usize, rounds: usize, interval: usize, shape: (usize, usize, usize)) {
    let (count, lo, hi) = shape;
    let mut slots = vec![(0usize, std::ptr::null_mut::<u8>()); count];
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    churn(&mut slots, &mut rng, n, (lo, hi)); // warm-up
    let mut off = Vec::new();
    let mut on = Vec::new();
    for r in 0..rounds {
        for profiled in [r % 2 == 1, r % 2 == 0] {
            if profiled {
                start(Some(interval));
                on.push(churn(&mut slots, &mut rng, n, (lo, hi)).as_secs_f64());
                hakmem::heap_profile::stop();
            } else {
                off.push(churn(&mut slots, &mut rng, n, (lo, hi)).as_secs_f64());
            }
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut ratios: Vec<f64> = on.iter().zip(&off).map(|(a, b)| a / b).collect();
    let (m_on, m_off) = (median(&mut on.clone()), median(&mut off.clone()));
    let m_ratio = median(&mut ratios);
    println!(
        "churn {count} slots {lo}..{hi} B, {rounds} rounds of {n} ops: off {:.2} ns/op, on {:.2} ns/op (interval {interval}); on/off per round: median {m_ratio:.3}, quartiles {:.3}..{:.3}, {} samples",
        m_off * 1e9 / n as f64,
        m_on * 1e9 / n as f64,
        ratios[rounds / 4],
        ratios[3 * rounds / 4],
        samples().0
    );
}

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("pair") => {
            start(arg(3));
            let n = arg(2).expect("N");
            report_pairs(n, pairs(arg(4).unwrap_or(0), n));
        }
        Some("churn") => churn_rounds(
            arg(2).expect("N"),
            arg(3).expect("ROUNDS"),
            arg(4).unwrap_or(hakmem::heap_profile::DEFAULT_INTERVAL),
            (
                arg(5).unwrap_or(400),
                arg(6).unwrap_or(16),
                arg(7).unwrap_or(1024),
            ),
        ),
        Some("rss") => {
            start(Some(arg(4).unwrap_or(4096)));
            rss(arg(2).expect("N"), arg(3).expect("SIZE"));
        }
        _ => {
            eprintln!(
                "usage: heap_profile_cost pair N [INTERVAL [DEPTH]] | rss N SIZE [INTERVAL] \
                 | churn N ROUNDS [INTERVAL [SLOTS MIN MAX]]"
            )
        }
    }
}
