//! Misuse is reported and aborts: each case runs in a child process (this test binary
//! re-run with `HAKMEM_MISUSE=<case>`; `harness = false`, tests/harness), and the parent
//! checks the message and the abort.

mod common;
mod harness;

fn main() {
    let mut tests = harness::tests![
        double_free_is_caught_in_checked_mode,
        immediate_double_free_is_caught_without_checked_mode,
        foreign_pointer_is_caught,
        interior_pointer_is_caught,
        overflow_is_caught,
        wrong_layout_is_caught,
        large_interior_pointer_is_caught,
    ]
    .to_vec();
    if cfg!(feature = "checked") {
        tests.extend(harness::tests![global_alloc_is_checked_with_the_feature]);
    }
    harness::main("HAKMEM_MISUSE", run_case, &tests)
}

/// The misbehaving programs, run in the child.
fn run_case(case: &str) {
    use hakmem_core::Checked;
    // SAFETY: none; each case misuses the allocator on purpose, to be caught.
    unsafe {
        match case {
            "double-free-checked" => {
                let p = Checked::alloc(100, 16);
                let q = Checked::alloc(100, 16); // so `p` is not the cache head
                Checked::free(p);
                Checked::free(q);
                Checked::free(p);
            }
            "double-free-fast" => {
                let p = hakmem_core::alloc(48, 16);
                hakmem_core::free(p);
                hakmem_core::free(p);
            }
            "foreign" => {
                let mut on_stack = [0u8; 64];
                Checked::free(on_stack.as_mut_ptr());
            }
            "interior" => {
                let p = Checked::alloc(256, 16);
                Checked::free(p.add(16));
            }
            "overflow" => {
                let p = Checked::alloc(24, 16);
                let usable = Checked::usable_size(p);
                p.add(usable).write(0xAB);
                Checked::free(p);
            }
            "wrong-layout" => {
                let p = Checked::alloc(40, 16);
                Checked::dealloc(p, 4000, 16);
            }
            "large-interior" => {
                let p = Checked::alloc(1 << 20, 16);
                Checked::free(p.add(4096));
            }
            "global-alloc-double-free" => {
                use std::alloc::{GlobalAlloc, Layout};
                let layout = Layout::from_size_align(100, 8).unwrap();
                let p = hakmem::HakMem.alloc(layout);
                let q = hakmem::HakMem.alloc(layout); // so `p` is not the cache head
                hakmem::HakMem.dealloc(p, layout);
                hakmem::HakMem.dealloc(q, layout);
                hakmem::HakMem.dealloc(p, layout);
            }
            other => panic!("unknown case {other}"),
        }
    }
    // Returning (the child exits 0) means the misuse went unnoticed.
}

fn expect_abort(case: &str, message: &str) {
    let out = common::run_child("HAKMEM_MISUSE", case, None);
    common::assert_aborted(&out, case, message);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("pointer 0x"),
        "{case}: no pointer in {stderr}"
    );
}

fn double_free_is_caught_in_checked_mode() {
    expect_abort("double-free-checked", "double free");
}

fn immediate_double_free_is_caught_without_checked_mode() {
    expect_abort("double-free-fast", "double free");
}

fn foreign_pointer_is_caught() {
    expect_abort("foreign", "never handed out");
}

fn interior_pointer_is_caught() {
    expect_abort("interior", "interior pointer");
}

fn overflow_is_caught() {
    expect_abort("overflow", "write past the end");
}

fn wrong_layout_is_caught() {
    expect_abort("wrong-layout", "layout other than");
}

fn large_interior_pointer_is_caught() {
    expect_abort("large-interior", "not the start of a live block");
}

/// With the `checked` feature, `HakMem` itself is checked
/// (`cargo test -p hakmem --features checked`, which .ci/run runs).
fn global_alloc_is_checked_with_the_feature() {
    expect_abort("global-alloc-double-free", "double free");
}
