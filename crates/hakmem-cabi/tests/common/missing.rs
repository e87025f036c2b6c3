//! Tests that run a real program (python3, perl, sqlite3, gcc, ...): where it is missing
//! they skip with a note on a developer's machine, and fail under `CI=true` (`.ci/run`
//! exports it and installs every such program), so a CI run never passes a test that did
//! not run.

use std::process::Command;

/// Whether `program` can be run (it answers `--version`).
pub fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether this is a CI run (`CI=true`), where a missing program is a failure.
pub fn in_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// True when `program` is missing (the caller then skips), after a note; under `CI=true`
/// a missing program fails the test instead.
#[track_caller]
pub fn skip_without(program: &str) -> bool {
    if have(program) {
        return false;
    }
    assert!(
        !in_ci(),
        "`{program}` is not installed, and under CI=true a test does not skip (.ci/run \
         installs it)"
    );
    eprintln!("note: `{program}` is not installed; skipping (.ci/run installs it)");
    true
}
