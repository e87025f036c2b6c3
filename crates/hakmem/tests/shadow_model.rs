//! The shadow model (tests/shadow/mod.rs) over random sequences: proptest finds and
//! shrinks a failing sequence; the seeded runs go deeper (longer sequences, more live
//! blocks) and name a failure by its seed.
//!
//! hakmem is called directly, not installed as the global allocator, so the model and
//! proptest allocate from the system allocator. `PROPTEST_CASES` sets the number of
//! proptest cases, `HAKMEM_TEST_SCALE` multiplies the seeded runs, `HAKMEM_SHADOW_SEED`
//! replays one seed.

mod common;
mod shadow;

use proptest::prelude::*;
use shadow::{ops_from_bytes, run, run_threads, Api, Op};

/// Proptest cases per property unless `PROPTEST_CASES` says otherwise.
const CASES: u32 = 48;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CASES);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

fn ops(max_len: usize) -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(any::<[u8; 8]>().prop_map(Op::decode), 0..max_len)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn global_alloc_api_keeps_blocks_apart_aligned_and_intact(ops in ops(300)) {
        run(&ops, Api::Sized);
    }

    #[test]
    fn c_style_api_keeps_usable_bytes_apart_and_intact(ops in ops(300)) {
        run(&ops, Api::Unsized);
    }
}

/// Long sequences from seeds: 2,000 ops each, so that hundreds of blocks are live at once
/// and slabs fill, empty and get reused.
fn seeded(api: Api) {
    if let Ok(seed) = std::env::var("HAKMEM_SHADOW_SEED") {
        let seed = seed.parse().expect("HAKMEM_SHADOW_SEED is a number");
        run(
            &ops_from_bytes(&common::Rng::new(seed).bytes(8 * 2000)),
            api,
        );
        return;
    }
    for seed in 0..4 * common::scale() as u64 {
        let ops = ops_from_bytes(&common::Rng::new(seed).bytes(8 * 2000));
        let r = std::panic::catch_unwind(|| run(&ops, api));
        assert!(r.is_ok(), "{api:?} failed with HAKMEM_SHADOW_SEED={seed}");
    }
}

#[test]
fn seeded_global_alloc_api() {
    seeded(Api::Sized);
}

#[test]
fn seeded_c_style_api() {
    seeded(Api::Unsized);
}

/// Two models at once on two threads: a block handed to both threads, or written by the
/// wrong one, breaks a pattern.
#[test]
fn seeded_models_on_two_threads() {
    std::thread::scope(|s| {
        for (t, api) in [(0u64, Api::Sized), (1, Api::Unsized)] {
            s.spawn(move || {
                for seed in (1000 + t..1000 + 4 * common::scale() as u64).step_by(2) {
                    let ops = ops_from_bytes(&common::Rng::new(seed).bytes(8 * 2000));
                    let r = std::panic::catch_unwind(|| run(&ops, api));
                    assert!(r.is_ok(), "{api:?} failed with HAKMEM_SHADOW_SEED={seed}");
                }
            });
        }
    });
}

/// One sequence dealt out to three threads that hand blocks to each other: frees and
/// reallocs of blocks another thread allocated, the overlap check across all threads, and
/// blocks freed after the threads that allocated them exited.
#[test]
fn seeded_sequences_spread_over_threads() {
    for seed in 2000..2000 + 2 * common::scale() as u64 {
        for api in [Api::Sized, Api::Unsized] {
            let ops = ops_from_bytes(&common::Rng::new(seed).bytes(8 * 3000));
            let handed_over = ops
                .iter()
                .filter(|op| matches!(op, Op::Free { how, .. } if *how >= 192))
                .count();
            assert!(
                handed_over > 100,
                "seed {seed}: only {handed_over} hand-overs"
            );
            let r = std::panic::catch_unwind(|| run_threads(&ops, &api, 3));
            assert!(r.is_ok(), "{api:?} on 3 threads failed with seed {seed}");
        }
    }
}

/// Ops in each of the short sequences below (`HAKMEM_SHORT_OPS` sets another number).
const SHORT_OPS: u64 = 24;

/// Short sequences: what Miri runs (`cargo xtask check-miri`), where each op is
/// interpreted, to check the real thread cache, heap, superslab, remote-free and large
/// code for undefined behaviour under the model platform layer (`os/model.rs`). Seeds
/// are chosen so that between them the sequences make small, mid-size and large blocks,
/// grow a large block with realloc (a moved mapping) and free some of each.
fn short_sequence(seed: u64) -> Vec<Op> {
    let n = common::env_u64("HAKMEM_SHORT_OPS", SHORT_OPS) as usize;
    ops_from_bytes(&common::Rng::new(seed).bytes(8 * n))
}

/// Seeds of the short runs.
const SHORT_SEEDS: [u64; 2] = [3000, 3001];

#[test]
fn short_sequences_on_one_thread() {
    for seed in SHORT_SEEDS {
        for api in [Api::Sized, Api::Unsized] {
            run(&short_sequence(seed), api);
        }
    }
}

/// Two threads that hand blocks to each other: remote frees, the owner's collection of
/// them, and blocks freed after their thread exited (abandoned superslabs).
#[test]
fn short_sequences_spread_over_threads() {
    for seed in SHORT_SEEDS {
        for api in [Api::Sized, Api::Unsized] {
            run_threads(&short_sequence(seed), &api, 2);
        }
    }
}

/// The short sequences make every kind of block the Miri run must see.
#[test]
fn short_sequences_cover_small_mid_and_large_blocks() {
    let ops: Vec<Op> = SHORT_SEEDS
        .iter()
        .flat_map(|&s| short_sequence(s))
        .collect();
    let sizes = |f: fn(usize) -> bool| {
        ops.iter().any(|op| {
            matches!(*op, Op::Alloc { size, .. } | Op::Realloc { new_size: size, .. } if f(size))
        })
    };
    assert!(sizes(|s| s <= 1024), "no small block");
    assert!(
        sizes(|s| (1025..=64 * 1024).contains(&s)),
        "no mid-size block"
    );
    assert!(sizes(|s| s > 64 * 1024), "no large block");
    assert!(ops.iter().any(|op| matches!(op, Op::Realloc { .. })));
    assert!(ops
        .iter()
        .any(|op| matches!(op, Op::Free { how, .. } if *how >= 192)));
}

#[test]
fn decoding_covers_every_kind_of_request() {
    let ops = ops_from_bytes(&common::Rng::new(7).bytes(8 * 20_000));
    let sizes: Vec<usize> = ops
        .iter()
        .filter_map(|op| match *op {
            Op::Alloc { size, .. } | Op::Realloc { new_size: size, .. } => Some(size),
            Op::Free { .. } => None,
        })
        .collect();
    assert!(sizes.contains(&0));
    assert!(sizes.iter().any(|&s| (1025..=64 * 1024).contains(&s)));
    assert!(sizes.iter().any(|&s| s > 64 * 1024));
    assert!(sizes.contains(&shadow::MAX_SIZE));
    assert!(sizes.iter().all(|&s| s <= shadow::MAX_SIZE));
    let small = sizes.iter().filter(|&&s| s <= 1024).count();
    assert!(small * 2 > sizes.len(), "small sizes should dominate");
    for log2 in 0..=shadow::MAX_ALIGN_LOG2 {
        assert!(
            ops.iter()
                .any(|op| matches!(*op, Op::Alloc { align_log2, .. } if align_log2 == log2)),
            "alignment 2^{log2} never asked"
        );
    }
    assert!(ops
        .iter()
        .any(|op| matches!(op, Op::Alloc { zeroed: true, .. })));
    assert!(ops.iter().any(|op| matches!(op, Op::Realloc { .. })));
    assert!(ops.iter().any(|op| matches!(op, Op::Free { .. })));
}

/// The oracle itself: a changed byte anywhere, at any alignment, is found where it is.
#[test]
fn pattern_checks_find_every_changed_byte() {
    let mut buf = vec![0u64; 40];
    let bytes = buf.as_mut_ptr() as *mut u8;
    for (from, to) in [(0, 320), (3, 317), (8, 9), (5, 13)] {
        // SAFETY: every offset used lies inside the 320-byte buffer.
        unsafe {
            common::fill(bytes, from, to, 42);
            assert_eq!(common::mismatch(bytes, from, to, 42), None);
            assert_eq!(
                common::mismatch(bytes.add(1), from, to - 1, 42).is_some(),
                to - from > 1
            );
            for k in from..to {
                *bytes.add(k) ^= 0x10;
                assert_eq!(common::mismatch(bytes, from, to, 42), Some(k));
                assert!(common::mismatch(bytes, from, to, 43).is_some());
                *bytes.add(k) ^= 0x10;
            }
        }
    }
    buf.fill(0);
    let bytes = buf.as_mut_ptr() as *mut u8;
    for k in [0, 7, 8, 100, 319] {
        // SAFETY: inside the buffer.
        unsafe {
            *bytes.add(k) = 1;
            assert_eq!(common::nonzero(bytes, 320), Some(k));
            *bytes.add(k) = 0;
        }
    }
    // SAFETY: the whole buffer.
    assert_eq!(unsafe { common::nonzero(bytes, 320) }, None);
}
