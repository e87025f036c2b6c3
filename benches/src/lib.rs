//! The benchmark workloads of `cargo xtask bench`, shared by one binary per allocator
//! (`bench-hakmem`, `bench-mimalloc`, `bench-jemalloc`, `bench-system`): the global
//! allocator is fixed per binary, so each binary is this library plus one
//! `#[global_allocator]`.
//!
//! A binary runs one workload and prints one line (its format: `report` below):
//!
//! ```text
//! bench-system --list                  # "workload NAME DEFAULT_OPS" per line
//! bench-system random-mixed [OPS]      # RESULT workload=random-mixed ops=... secs=... ...
//! ```
//!
//! or keeps one going for a while and reports it in epochs (`bench-system soak ...`, see
//! [`soak`]) for `cargo xtask soak`. The `RESULT` line's `secs`, `user_secs`, `sys_secs`
//! and `minor_faults` are those of the timed part alone (`usage.rs`), after an untimed
//! warm-up.
//!
//! `bench-hakmem WORKLOAD [OPS] --residency` adds a `RESIDENCY` line: where hakmem's
//! resident memory was (superslabs, large blocks, pair chunks, cached extents) at the
//! census with the most of it, taken every 2 ms through the run on a thread of its own
//! ([`Hooks::residency`]). That thread's work is in the run: the `RESULT` line of such a
//! run is not one to compare.
//!
//! `benches/c/workloads.c` runs the first workloads in C, under `LD_PRELOAD`, with the same
//! command line and output.

mod block;
mod procfs;
mod residency;
mod rng;
pub mod soak;
mod usage;
mod workloads;

use std::time::Instant;

pub use block::Block;
use procfs::peak_rss_kb;
pub use residency::Census;
use residency::Sampler;
pub use rng::Rng;
use usage::Usage;
pub use workloads::{Mark, Session, Setup, Workload, WORKLOADS};

/// What a binary's allocator offers beyond allocating.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hooks {
    /// Its OS-call counter (mmap, munmap, madvise, mremap).
    pub os_calls: Option<fn() -> usize>,
    /// Give cached free memory back to the OS now (`phases-trim`).
    pub trim: Option<fn()>,
    /// Bytes the allocator counts as handed out, blocks waiting in its caches included.
    pub in_use: Option<fn() -> usize>,
    /// A census of its resident memory.
    pub residency: Option<fn() -> Census>,
}

/// A warm-up of this fraction of the operations runs first, untimed, so caches are filled
/// and the OS calls counted are those of the steady state.
const WARM_UP_DIVISOR: u64 = 10;

/// The `main` of each binary.
pub fn main(hooks: Hooks) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["--list"] => list(),
        ["soak", ref rest @ ..] => soak::main(rest, hooks),
        [name] => run(name, None, hooks, false),
        [name, "--residency"] => run(name, None, hooks, true),
        [name, ops] => run(name, Some(parse_ops(ops)), hooks, false),
        [name, ops, "--residency"] => run(name, Some(parse_ops(ops)), hooks, true),
        _ => fail("usage: bench-ALLOCATOR --list | WORKLOAD [OPS] [--residency] | soak ..."),
    }
}

/// Say why on stderr and exit with status 2.
fn fail(why: &str) -> ! {
    eprintln!("{why}");
    std::process::exit(2);
}

fn list() {
    for w in WORKLOADS {
        if let Some(ops) = w.default_ops {
            println!("workload {} {ops}", w.name);
        }
    }
}

fn parse_ops(ops: &str) -> u64 {
    ops.parse().expect("OPS: a number")
}

fn run(name: &str, ops: Option<u64>, hooks: Hooks, residency: bool) {
    let os_calls = hooks.os_calls;
    let census = match (residency, hooks.residency) {
        (false, _) => None,
        (true, Some(census)) => Some(census),
        (true, None) => fail("--residency: this allocator has no census"),
    };
    let Some((w, default_ops)) = workloads::find(name).and_then(|w| Some((w, w.default_ops?)))
    else {
        fail(&format!("unknown workload {name:?}; --list shows them"));
    };
    let ops = ops.unwrap_or(default_ops);
    w.run_once((ops / WARM_UP_DIVISOR).max(1));
    let calls_before = os_calls.map(|f| f());
    let sampler = census.map(Sampler::start);
    let usage = Usage::now();
    let start = Instant::now();
    let done = w.run_once(ops);
    let secs = start.elapsed().as_secs_f64();
    let usage = Usage::now().since(usage);
    let calls = os_calls.zip(calls_before).map(|(f, before)| f() - before);
    report(w.name, done, secs, usage, calls);
    if let Some(sampler) = sampler {
        println!("{}", sampler.finish());
    }
}

/// Print the result line that `cargo xtask bench` reads.
fn report(name: &str, ops: u64, secs: f64, usage: Usage, os_calls: Option<usize>) {
    let mut line = format!(
        "RESULT workload={name} ops={ops} secs={secs:.9} peak_rss_kb={} user_secs={:.6} \
         sys_secs={:.6} minor_faults={}",
        peak_rss_kb(),
        usage.user.as_secs_f64(),
        usage.system.as_secs_f64(),
        usage.minor_faults
    );
    if let Some(calls) = os_calls {
        line += &format!(" os_calls={calls}");
    }
    println!("{line}");
}
