//! C++ programs (compiled with g++) through hakmem's `operator new` / `delete`.

mod common;

use common::*;

/// Compile `tests/c/cxx.cpp`, or `None` (with a note) without g++.
fn program() -> Option<std::path::PathBuf> {
    if skip_without("g++") {
        return None;
    }
    Some(build("cxx.cpp", "g++", &["-std=c++17"]))
}

/// Containers, polymorphic objects (sized delete), over-aligned objects and threads print
/// the same with and without hakmem.
#[test]
fn workload_matches_the_system_allocator() {
    let Some(p) = program() else { return };
    let with = output(command(&p, true).arg("workload"));
    let without = output(command(&p, false).arg("workload"));
    assert_success(&with, "cxx workload under hakmem");
    assert_success(&without, "cxx workload");
    assert_eq!(text(&with.stdout), text(&without.stdout));
    assert!(with.stderr.is_empty(), "{}", text(&with.stderr));
}

macro_rules! cases {
    ($($name:ident),+ $(,)?) => {
        $(
            #[test]
            fn $name() {
                let Some(p) = program() else { return };
                run_case(&p, stringify!($name));
            }
        )+
    };
}

cases! {
    hakmem_serves_new,
    nothrow_returns_null,
    throws_bad_alloc,
    new_handler_is_called,
}
