//! Model check of the kept large blocks' protocol (`kept::Keeper`) with loom: the heap's
//! thread using its blocks, marked but unlocked, against two visits of the background
//! return, each holding the heap's `turn` (a mutex here); the process barrier is a
//! `SeqCst` fence on each side under loom (`sync::protocol::light_fence`, `os/model.rs`).
//! The blocks stand in a loom `UnsafeCell` that both sides write, so loom reports any
//! interleaving where a use and a visit's taking are not ordered.
//!
//! Run with `cargo xtask check-loom`. Broken on purpose, and caught here:
//! `RUSTFLAGS='--cfg loom --cfg hakmem_broken="kept_no_reread"' cargo test -p hakmem-core
//! --test loom_kept --release --target-dir target/loom-broken` (a visit that takes the
//! blocks without reading the use count again after the barrier), and
//! `hakmem_broken="kept_no_fence"` (a use without its fence).
#![cfg(loom)]

use hakmem_core::testing::{Access, Keeper};
#[path = "loom_model/mod.rs"]
mod loom_model;
use loom::cell::UnsafeCell;
use loom::sync::{Arc, Mutex};
use loom::thread;
use loom_model::model;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// A heap's keeper, reached by two threads as a heap is (by address; `Keeper` is not
/// `Sync`, its protocol is what shares it).
struct Shared {
    keeper: Keeper,
    /// Stands for the heap's `turn`.
    turn: Mutex<()>,
    /// Stands for the kept blocks: each side adds to it while it holds them.
    blocks: UnsafeCell<u32>,
}

// SAFETY: the keeper is used as its protocol says (its thread's uses from the main
// thread only, the visits under `turn`); `blocks` is written only while held, which is
// what loom checks.
unsafe impl Sync for Shared {}
// SAFETY: as above.
unsafe impl Send for Shared {}

/// Executions in which a visit took the blocks, and in which the use backed off from a
/// claim (std's atomics: counts across executions, outside the model).
static TAKEN: AtomicUsize = AtomicUsize::new(0);
static BACKED_OFF: AtomicUsize = AtomicUsize::new(0);

#[test]
fn a_use_and_a_visit_never_hold_the_blocks_together() {
    model(|| {
        let shared = Arc::new(Shared {
            keeper: Keeper::new(),
            turn: Mutex::new(()),
            blocks: UnsafeCell::new(0),
        });
        {
            let _turn = shared.turn.lock().unwrap();
            // SAFETY: the heap's thread (this one), holding `turn`.
            unsafe { shared.keeper.set_access(Access::Fenced) };
        }
        let visits = {
            let shared = shared.clone();
            thread::spawn(move || {
                // The first notes the use count, the second claims if it did not move.
                for _ in 0..2 {
                    let _turn = shared.turn.lock().unwrap();
                    // SAFETY: holding `turn`; `blocks` written while the visit holds
                    // them (loom checks that nothing else does meanwhile).
                    unsafe {
                        shared
                            .keeper
                            .visit(true, |_| shared.blocks.with_mut(|b| *b += 1))
                    };
                }
            })
        };
        // SAFETY: the heap's thread, not holding `turn`, in no other use; `blocks`
        // written while the use holds them (loom checks that nothing else does).
        let used = unsafe {
            shared
                .keeper
                .with_blocks((), |_, ()| shared.blocks.with_mut(|b| *b += 10))
        };
        visits.join().unwrap();
        // The use held the blocks unless it backed off (and the visits at most once).
        // SAFETY: both sides are done (joined).
        let total = shared.blocks.with_mut(|b| unsafe { *b });
        assert_eq!(used.is_ok(), total >= 10, "{total}");
        assert!(total % 10 <= 1, "{total}");
        if total % 10 == 1 {
            TAKEN.fetch_add(1, Relaxed);
        }
        if used.is_err() {
            BACKED_OFF.fetch_add(1, Relaxed);
        }
    });
    // The model reached both outcomes of a race: a visit that claimed and took, a use
    // that met the claim.
    let (taken, backed_off) = (TAKEN.load(Relaxed), BACKED_OFF.load(Relaxed));
    assert!(
        taken > 0 && backed_off > 0,
        "taken in {taken}, backed off in {backed_off}"
    );
}
