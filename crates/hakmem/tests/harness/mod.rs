//! The `main` of test binaries that re-run themselves in a child role (`harness = false`
//! in Cargo.toml, run by libtest-mimic): the child is a mode of the binary, chosen by an
//! environment variable before any test runs, so it never shows up as a test that passes
//! in a normal run. Used by hakmem's and hakmem-core's misuse, OOM, memory-return and
//! first-touch tests (`#[path]` from hakmem-core).

use libtest_mimic::{Arguments, Trial};

/// A test of the binary: its name (what `cargo test NAME` and `--skip` match) and body;
/// it fails by panicking.
pub type Test = (&'static str, fn());

/// The tests of a binary, each named as its function: `harness::tests![a, b]`.
macro_rules! tests {
    ($($test:ident),* $(,)?) => {
        [$((stringify!($test), $test as fn())),*]
    };
}
pub(crate) use tests;

/// When `var` is set, be the child: run `child` with its value and exit 0 (a child that
/// aborts or panics exits otherwise, which its parent checks). Otherwise run `tests` as
/// libtest does, with libtest's command line (filters, `--skip`, `--list`,
/// `--test-threads`, `--nocapture`), and exit with its verdict.
pub fn main(var: &str, child: fn(&str), tests: &[Test]) -> ! {
    if let Some(case) = std::env::var_os(var) {
        child(&case.to_string_lossy());
        std::process::exit(0);
    }
    let trials = tests
        .iter()
        .map(|&(name, body)| {
            Trial::test(name, move || {
                body();
                Ok(())
            })
        })
        .collect();
    libtest_mimic::run(&Arguments::from_args(), trials).exit()
}
