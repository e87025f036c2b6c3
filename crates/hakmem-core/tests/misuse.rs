//! Misuse is reported, not let loose on the heap: `free` and `realloc_unsized` of a
//! pointer hakmem did not hand out print a message naming it and abort.
//!
//! Each case runs in a child process (this test binary again with `HAKMEM_MISUSE_CASE`
//! set; `harness = false`, crates/hakmem/tests/harness), so that the abort is observed
//! rather than suffered. A child that survives its misuse prints what became of the heap.

#[path = "../../hakmem/tests/common/mod.rs"]
mod common;
#[path = "../../hakmem/tests/harness/mod.rs"]
mod harness;

use hakmem_core::{alloc, dealloc, free, realloc_unsized};

const CASE_VAR: &str = "HAKMEM_MISUSE_CASE";

fn main() {
    harness::main(
        CASE_VAR,
        child,
        &harness::tests![
            free_of_a_foreign_pointer_aborts,
            realloc_of_a_foreign_pointer_aborts,
            free_inside_a_large_block_aborts,
            free_of_a_superslab_header_aborts,
            double_free_of_a_large_block_aborts,
            double_free_of_a_kept_large_block_aborts,
            double_free_of_a_pair_half_aborts,
            free_of_an_ended_pair_half_aborts,
            free_inside_a_small_block_aborts,
            double_free_of_a_scattered_small_block_aborts,
            double_free_through_the_stash_aborts,
        ],
    )
}

/// Run `case` in a child and require that it aborts with `message` on stderr.
#[track_caller]
fn expect_abort(case: &str, message: &str) {
    let out = common::run_child(CASE_VAR, case, None);
    common::assert_aborted(&out, case, message);
}

fn free_of_a_foreign_pointer_aborts() {
    expect_abort("foreign-free", "free of a pointer hakmem never handed out");
}

fn realloc_of_a_foreign_pointer_aborts() {
    expect_abort(
        "foreign-realloc",
        "realloc of a pointer hakmem never handed out",
    );
}

fn free_inside_a_large_block_aborts() {
    expect_abort("large-interior", "not the start of a live block");
}

fn free_of_a_superslab_header_aborts() {
    expect_abort("header", "not the start of a live block");
}

fn double_free_of_a_large_block_aborts() {
    expect_abort("large-double", "hakmem: ");
}

/// A large block freed twice by a thread that keeps it for its next request
/// (`thread_cache::keep_large`) between the two frees.
fn double_free_of_a_kept_large_block_aborts() {
    expect_abort("kept-double", "not the start of a live block");
}

/// The high half of a pair chunk (`large.rs`), freed twice while the low half lives.
fn double_free_of_a_pair_half_aborts() {
    expect_abort("pair-double", "not the start of a live block");
}

/// The same pointer once both halves were freed and the chunk went to the cache.
fn free_of_an_ended_pair_half_aborts() {
    expect_abort("pair-ended", "not the start of a live block");
}

/// `free` promises to report "a pointer hakmem did not hand out"; a pointer into the
/// middle of a small block is one.
fn free_inside_a_small_block_aborts() {
    expect_abort("small-interior", "not the start of a live block");
}

/// A small block freed twice, with another freed between (so not at the head of the
/// thread's bin, which `free` compares), both given back to the slab when the thread
/// exits: the slab's bitmap has the block's bit set already.
fn double_free_of_a_scattered_small_block_aborts() {
    expect_abort("small-double", "double free");
}

/// A small block freed twice in a row while its bin is full: the first free puts it in
/// the thread's stash, unwritten (`thread_cache.rs`, `Stash`), and so does the second
/// (one block near the stash's last is taken); when the stash goes back, at the
/// thread's exit, the second finds the block's bit set.
fn double_free_through_the_stash_aborts() {
    expect_abort("stash-double", "double free");
}

/// The child: the misuse of `case`.
fn child(case: &str) {
    let on_stack = [0u8; 64];
    // SAFETY: each case misuses the allocator on purpose; the parent expects the abort.
    unsafe {
        match case {
            "foreign-free" => free(on_stack.as_ptr() as *mut u8),
            "foreign-realloc" => {
                realloc_unsized(on_stack.as_ptr() as *mut u8, 100);
            }
            "large-interior" => free(alloc(1 << 20, 16).add(4096)),
            "header" => {
                let p = alloc(64, 16) as usize;
                free((p & !(hakmem_core::CHUNK_SIZE - 1)) as *mut u8);
            }
            "large-double" => {
                let p = alloc(1 << 20, 16);
                free(p);
                free(p);
            }
            "kept-double" => {
                // A small block first: a thread with a heap keeps what it frees.
                free(alloc(64, 16));
                let p = alloc(3 << 20, 16);
                free(p);
                free(p);
            }
            "pair-double" | "pair-ended" => {
                let size = 3 << 19; // 1.5 MiB: half a pair chunk each
                let (a, b) = (alloc(size, 16), alloc(size, 16));
                let hi = a.max(b);
                assert_eq!(hi as usize - a.min(b) as usize, hakmem_core::CHUNK_SIZE / 2);
                free(hi);
                if case == "pair-ended" {
                    free(a.min(b));
                }
                free(hi);
            }
            "small-interior" => small_interior(),
            "small-double" => std::thread::spawn(|| {
                // Far apart in one slab: no dense stretch, so each sets its bit.
                let blocks: Vec<usize> = (0..1000).map(|_| alloc(48, 16) as usize).collect();
                for i in [0, 500, 0, 999] {
                    free(blocks[i] as *mut u8);
                }
            })
            .join()
            .expect("the thread"),
            "stash-double" => std::thread::spawn(|| {
                let mut blocks: Vec<usize> = (0..20_000).map(|_| alloc(48, 16) as usize).collect();
                let twice = blocks.pop().expect("blocks");
                common::shuffle(&mut blocks);
                // Enough scattered frees to fill the bin and start the stash.
                for &p in &blocks {
                    free(p as *mut u8);
                }
                free(twice as *mut u8);
                free(twice as *mut u8);
            })
            .join()
            .expect("the thread"),
            _ => panic!("unknown case {case}"),
        }
    }
    println!("the child survived {case}");
}

/// Free a pointer 16 bytes into a live 64-byte block, then see what the heap hands out.
///
/// # Safety
/// None: this is the misuse under test, run in a child process.
unsafe fn small_interior() {
    let live = alloc(64, 16);
    // SAFETY: a fresh block of 64 bytes.
    unsafe { common::fill(live, 0, 64, 1) };
    // SAFETY: none; the misuse.
    unsafe { free(live.add(16)) };
    let next = alloc(64, 16);
    println!("live block {live:p}; the next 64-byte block is {next:p}");
    if next == live.wrapping_add(16) {
        // SAFETY: hakmem handed `next` out as a 64-byte block.
        unsafe { common::fill(next, 0, 64, 2) };
        // SAFETY: the live block is still ours.
        let lost = unsafe { common::mismatch(live, 0, 64, 1) };
        println!("it overlaps the live block, whose pattern is now lost at byte {lost:?}");
    }
    // SAFETY: both were handed out as 64-byte blocks.
    unsafe {
        dealloc(next, 64, 16);
        dealloc(live, 64, 16);
    }
}
