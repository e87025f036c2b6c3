//! The C API (`malloc`, `calloc`, `realloc`, `reallocarray`, `posix_memalign`,
//! `aligned_alloc`, `memalign`, `valloc`, `pvalloc`, `free`, `free_sized`,
//! `malloc_usable_size`) against the shadow model, through
//! `crates/hakmem-cabi/tests/c_model`.
//!
//! The C ABI's sources are mounted here (it is a cdylib, not a Rust library), so this
//! binary exports `malloc` & co. itself: everything in it, libFuzzer included, allocates
//! through hakmem, and the fuzzer sees coverage of the C ABI and of hakmem-core. Build it
//! without a sanitizer (`-s none`): AddressSanitizer would replace `malloc` too.
//! `HAKMEM_CHECK=1` in the environment runs it in checked mode.
#![no_main]
#![deny(unsafe_op_in_unsafe_fn)]

#[path = "../../crates/hakmem-cabi/src/lib.rs"]
#[allow(dead_code)]
mod cabi;
// The C ABI's modules refer to each other as `crate::malloc`, `crate::errno`, ...
#[allow(unused_imports)]
use cabi::*;

#[path = "../../crates/hakmem/tests/common/mod.rs"]
mod common;
#[path = "../../crates/hakmem/tests/shadow/mod.rs"]
mod shadow;
#[path = "../../crates/hakmem-cabi/tests/c_model/mod.rs"]
mod c_model;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    shadow::run_with(&shadow::ops_from_bytes(data), &c_model::CApi);
});
