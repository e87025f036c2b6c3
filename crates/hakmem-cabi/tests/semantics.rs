//! The malloc family's semantics, one test each, checked by `tests/c/semantics.c` running
//! under `LD_PRELOAD=libhakmem.so`.

mod common;

use common::*;
use std::path::PathBuf;

fn program() -> PathBuf {
    build_c("semantics.c")
}

macro_rules! cases {
    ($($name:ident),+ $(,)?) => {
        $(
            #[test]
            fn $name() {
                run_case(&program(), stringify!($name));
            }
        )+
    };
}

cases! {
    malloc_zero,
    free_null,
    free_keeps_errno,
    out_of_memory,
    calloc_overflow_and_zero,
    reallocarray_overflow,
    posix_memalign_rules,
    posix_memalign_keeps_errno,
    aligned_alloc_rules,
    memalign_valloc_pvalloc,
    realloc_null_and_zero,
    usable_size_rules,
    sixteen_byte_alignment,
    libc_aliases,
    c23_sized_frees,
    trim_gives_memory_back,
    glibc_introspection,
}

/// Under the lean profile, frees decommit at once (`madvise`): errno must still survive.
#[test]
fn free_keeps_errno_when_lean() {
    let o = output(
        command(program(), true)
            .arg("free_keeps_errno")
            .env("HAKMEM_PROFILE", "lean"),
    );
    assert_success(&o, "free_keeps_errno under HAKMEM_PROFILE=lean");
}
