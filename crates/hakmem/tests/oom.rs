//! Out of memory with hakmem as the global allocator: under an address-space limit
//! (`RLIMIT_AS`, as `ulimit -v` sets it, applied in the child before `exec`), a Rust
//! program whose allocation cannot be met reaches `handle_alloc_error`, whose default
//! prints "memory allocation of N bytes failed" and aborts, instead of crashing inside
//! the allocator. Each case runs in a child: this test binary again with `HAKMEM_OOM_CASE`
//! set (`harness = false`, tests/harness).

#[path = "common/mod.rs"]
mod common;
mod harness;

#[global_allocator]
static GLOBAL: hakmem::HakMem = hakmem::HakMem;

const CASE_VAR: &str = "HAKMEM_OOM_CASE";
/// Address space for the child.
const LIMIT: u64 = 256 << 20;

fn main() {
    harness::main(
        CASE_VAR,
        child,
        &harness::tests![
            large_allocations_reach_handle_alloc_error,
            small_allocations_reach_handle_alloc_error,
        ],
    )
}

/// Run `case` in a child under the limit; it must abort with `message` on stderr.
#[track_caller]
fn expect_alloc_error(case: &str, message: &str) {
    let out = common::run_child(CASE_VAR, case, Some(LIMIT));
    common::assert_aborted(&out, case, message);
}

fn large_allocations_reach_handle_alloc_error() {
    expect_alloc_error("large", "memory allocation of 16777216 bytes failed");
}

fn small_allocations_reach_handle_alloc_error() {
    expect_alloc_error("small", "memory allocation of 64 bytes failed");
}

/// The child: allocate until an allocation fails.
fn child(case: &str) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let vm = status
        .lines()
        .find(|l| l.starts_with("VmSize"))
        .unwrap_or("");
    println!("{vm}");
    match case {
        // Vectors of 16 MiB (large mappings), kept until one cannot be had.
        "large" => {
            let mut kept = Vec::with_capacity(1000);
            for i in 0.. {
                let mut v = Vec::<u8>::with_capacity(16 << 20);
                v.push(i as u8);
                kept.push(v);
            }
        }
        // Boxes of 64 bytes (slab refills), leaked until one cannot be had.
        "small" => loop {
            let b = Box::leak(Box::new([7u64; 8]));
            std::hint::black_box(b);
        },
        _ => panic!("unknown case {case}"),
    }
    println!("the child survived {case}");
}
