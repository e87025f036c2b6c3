//! Project tasks, run as `cargo xtask <task>` (an alias in `.cargo/config.toml`).

mod checks;
mod fuzz;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        ["fuzz"] => fuzz::run(60),
        ["fuzz", "--time", secs] => secs
            .parse()
            .map_err(|_| format!("--time {secs}: expected whole seconds"))
            .and_then(fuzz::run),
        [task] if checks::is_check(task) => checks::run(task),
        _ => {
            eprintln!("xtask: not yet");
            return ExitCode::FAILURE;
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
