//! Project tasks, run as `cargo xtask <task>` (an alias in `.cargo/config.toml`).

mod bench;
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
    /// Run workloads for a while; RSS and throughput epoch by epoch, drift, memory return.
    Soak(soak::SoakArgs),
}

fn main() -> ExitCode {
    let result = match Cli::parse().task {
        Task::Bench(args) => bench::run(args),
        Task::Soak(args) => soak::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
