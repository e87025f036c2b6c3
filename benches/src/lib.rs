//! The benchmark workloads of `cargo xtask bench`, shared by one binary per allocator
//! (`bench-hakmem`, `bench-mimalloc`, `bench-jemalloc`, `bench-system`): the global
//! allocator is fixed per binary, so each binary is this library plus one
//! `#[global_allocator]`.
//!
//! A binary runs one workload and prints one line (see [`report`]):
//!
//! ```text
//! bench-system --list                  # "workload NAME DEFAULT_OPS" per line
//! bench-system random-mixed [OPS]      # RESULT workload=random-mixed ops=... secs=... peak_rss_kb=...
//! ```
//!
//! `benches/c/workloads.c` runs the first workloads in C, under `LD_PRELOAD`, with the same
//! command line and output.

mod block;
mod rng;
mod workloads;

use std::time::Instant;

pub use block::Block;
pub use rng::Rng;
pub use workloads::{Workload, WORKLOADS};

/// A warm-up of this fraction of the operations runs first, untimed, so caches are filled
/// and the OS calls counted are those of the steady state.
const WARM_UP_DIVISOR: u64 = 10;

/// The `main` of each binary; `os_calls` reads the allocator's OS-call counter, if it has one.
pub fn main(os_calls: Option<fn() -> usize>) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["--list"] => list(),
        [name] => run(name, None, os_calls),
        [name, ops] => run(name, Some(ops.parse().expect("OPS: a number")), os_calls),
        _ => usage(),
    }
}

fn list() {
    for w in WORKLOADS {
        println!("workload {} {}", w.name, w.default_ops);
    }
}

fn usage() -> ! {
    eprintln!("usage: bench-ALLOCATOR --list | WORKLOAD [OPS]");
    std::process::exit(2);
}

fn run(name: &str, ops: Option<u64>, os_calls: Option<fn() -> usize>) {
    let Some(w) = workloads::find(name) else {
        eprintln!("unknown workload {name:?}; --list shows them");
        std::process::exit(2);
    };
    let ops = ops.unwrap_or(w.default_ops);
    (w.run)((ops / WARM_UP_DIVISOR).max(1));
    let calls_before = os_calls.map(|f| f());
    let start = Instant::now();
    let done = (w.run)(ops);
    let secs = start.elapsed().as_secs_f64();
    let calls = os_calls.zip(calls_before).map(|(f, before)| f() - before);
    report(w.name, done, secs, calls);
}

/// Print the result line that `cargo xtask bench` reads.
fn report(name: &str, ops: u64, secs: f64, os_calls: Option<usize>) {
    let mut line = format!(
        "RESULT workload={name} ops={ops} secs={secs:.9} peak_rss_kb={}",
        peak_rss_kb()
    );
    if let Some(calls) = os_calls {
        line += &format!(" os_calls={calls}");
    }
    println!("{line}");
}

/// `VmHWM` of this process, in KiB (0 if unreadable).
fn peak_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
