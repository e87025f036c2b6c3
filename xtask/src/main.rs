//! Project tasks, run as `cargo xtask <task>` (an alias in `.cargo/config.toml`).

mod bench;
mod checks;
mod disasm;
mod fuzz;
mod install;
mod pair_count;
mod profile;
mod programs;
mod shared;
mod soak;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "hakmem project tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Compare hakmem with mimalloc, jemalloc and the system allocator.
    Bench(bench::BenchArgs),
    /// Programs we did not write (CPython, SQLite, Perl, awk, jq, sort, gcc, g++, Tcl)
    /// under each allocator's LD_PRELOAD library: time and peak RSS.
    Programs(programs::ProgramsArgs),
    /// Instructions of one malloc + free pair per allocator, counted by callgrind.
    PairCount(pair_count::PairCountArgs),
    /// Install libhakmem.so (versioned soname), hakmem.h and hakmem.pc under a prefix.
    Install {
        /// Where to install: PREFIX/lib, PREFIX/include, PREFIX/lib/pkgconfig.
        #[arg(long)]
        prefix: std::path::PathBuf,
    },
    /// Run workloads for a while; RSS and throughput epoch by epoch, drift, memory return.
    Soak(soak::SoakArgs),
    /// Run a program under LD_PRELOAD with the heap profiler on; print the top allocation
    /// sites, write DIR/heap.pb.gz (pprof) and DIR/heap.svg (flame graph of bytes in use).
    Profile(profile::ProfileArgs),
    /// Run every cargo-fuzz target (nightly) for a while each.
    Fuzz {
        /// Seconds per target.
        #[arg(long, default_value_t = 60)]
        time: u64,
    },
    /// The multi-thread tests under ThreadSanitizer (nightly, -Zbuild-std).
    CheckTsan,
    /// The cross-thread free protocol and the kept large blocks' under loom.
    CheckLoom,
    /// The pure-logic unit tests under Miri (nightly).
    CheckMiri,
    /// The fast paths as compiled (objdump of the release build with the pinned
    /// toolchain: `__rust_alloc`, `__rust_dealloc`, `malloc`, `free`), normalized.
    Disasm {
        /// Put the listing between the `disasm` markers of docs/ARCHITECTURE.md.
        #[arg(long)]
        write_docs: bool,
    },
    /// Fail when docs/ARCHITECTURE.md's listing differs from a fresh `disasm`.
    CheckDisasm,
}

/// A task's outcome as an exit code, reporting the error if there is one.
fn finish<E: std::fmt::Display>(result: Result<ExitCode, E>) -> ExitCode {
    result.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        ExitCode::FAILURE
    })
}

fn main() -> ExitCode {
    let ok = |r: Result<(), String>| finish(r.map(|()| ExitCode::SUCCESS));
    match Cli::parse().task {
        Task::Bench(args) => finish(bench::run(args)),
        Task::PairCount(args) => finish(pair_count::run(args)),
        Task::Programs(args) => finish(programs::run(args)),
        Task::Soak(args) => finish(soak::run(args)),
        Task::Install { prefix } => finish(install::run(&prefix).map(|()| ExitCode::SUCCESS)),
        Task::Profile(args) => finish(profile::run(args)),
        Task::Fuzz { time } => ok(fuzz::run(time)),
        Task::CheckTsan => ok(checks::run("check-tsan")),
        Task::CheckLoom => ok(checks::run("check-loom")),
        Task::CheckMiri => ok(checks::run("check-miri")),
        Task::Disasm { write_docs } => finish(disasm::run(write_docs)),
        Task::CheckDisasm => finish(disasm::check()),
    }
}
