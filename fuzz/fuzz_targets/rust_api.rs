//! The Rust API against the shadow model (`crates/hakmem/tests/shadow`): the first byte
//! picks `GlobalAlloc` of `hakmem::HakMem` (sized frees, any alignment up to 64 KiB) or
//! hakmem-core's unsized entry points (`alloc`, `free`, `realloc_unsized`,
//! `usable_size`); the rest is a sequence of ops, 8 bytes each. hakmem is called directly,
//! not as the global allocator.
#![no_main]
#![deny(unsafe_op_in_unsafe_fn)]

#[path = "../../crates/hakmem/tests/common/mod.rs"]
mod common;
#[path = "../../crates/hakmem/tests/shadow/mod.rs"]
mod shadow;

use libfuzzer_sys::fuzz_target;
use shadow::Api;

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let api = if first % 2 == 0 { Api::Sized } else { Api::Unsized };
    shadow::run(&shadow::ops_from_bytes(rest), api);
});
