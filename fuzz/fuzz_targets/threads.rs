//! One sequence of ops dealt out to two or three threads that hand blocks to each other
//! (`shadow::run_threads`): frees and reallocs cross threads, the overlap check spans all
//! threads, blocks outlive the threads that allocated them, and every input starts and
//! ends its threads (thread set-up and exit). The first byte picks the thread count and
//! the Rust API (`GlobalAlloc` or hakmem-core's unsized entry points).
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
    let threads = 2 + (first / 2 % 2) as usize;
    shadow::run_threads(&shadow::ops_from_bytes(rest), &api, threads);
});
