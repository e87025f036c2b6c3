//! Model check of the whole cross-thread free protocol with loom: a non-owner's free
//! racing the owner's collection, the release of a slab whose last block comes home, and
//! the adoption of an abandoned superslab, with the counters that keep a slab alive.
//! Run with `cargo xtask check-loom` (`RUSTFLAGS="--cfg loom" cargo test -p hakmem-core
//! --test loom_protocol --release`).
//!
//! The remote list is hakmem's own [`RemoteFreeList`] (loom's atomics under `cfg(loom)`).
//! The steps around it are those of `superslab.rs` and `heap.rs`, written here over
//! loom's atomics with the same orderings (the real ones live in a superslab laid out in
//! a mapping, which loom's atomics cannot be): each function below names the function it
//! follows. The owner's own state (`used`, the blocks home, whether the slab is on a
//! partial list or released) is in a loom `UnsafeCell`, so loom also reports an owner
//! change (abandon, adopt) that does not order the old owner's writes before the new
//! owner's reads.
//!
//! Broken variants, each caught here (docs/RELIABILITY.md shows the commands):
//! `--cfg hakmem_broken="nonatomic_take"` (in `remote.rs`: the owner takes the list with a
//! load and a store), `"flag_after_push"` (a pusher flags the slab pending after pushing
//! its blocks), `"pending_cleared_early"` (the owner clears a slab's pending flag and does
//! not set it again when its drain found nothing).
#![cfg(loom)]

use hakmem_core::testing::{Block, RemoteFreeList};

#[path = "loom_arena/mod.rs"]
mod loom_arena;
#[path = "loom_model/mod.rs"]
mod loom_model;
use loom::cell::UnsafeCell;
use loom::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;
use loom_arena::Arena;
use loom_model::model;

/// The slab's bit in its superslab's `remote_pending` (slab 1).
const BIT: u64 = 1 << 1;
/// What a released slab's superslab has in `remote_pending` (its memory unmapped or
/// reused): a pusher that flags the slab after the release sees it.
const POISON: u64 = 1 << 63;

/// What only the slab's owner touches (`SlabMeta`'s `Cell`s).
#[derive(Default)]
struct Local {
    /// Blocks handed out, those on `remote` included (`SlabMeta::used`).
    used: u32,
    /// Blocks back on the owner's free list.
    home: Vec<usize>,
    /// On its owner's partial list (`SlabMeta::in_partial`).
    in_partial: bool,
    released: bool,
}

/// One slab and the fields of its superslab the protocol uses.
struct Slab {
    remote: RemoteFreeList,
    /// The superslab's start, which the remote list names its blocks from: the
    /// [`Arena`] the blocks are dealt from.
    base: usize,
    /// `SuperSlab::remote_pending`.
    pending: AtomicU64,
    /// `SuperSlab::owner`: a heap id, 0 while abandoned.
    owner: AtomicUsize,
    local: UnsafeCell<Local>,
}

impl Slab {
    /// A slab owned by heap 1 with `used` blocks out, those of `arena`.
    fn new(used: u32, arena: &Arena) -> Slab {
        Slab {
            remote: RemoteFreeList::new(),
            base: arena.base(),
            pending: AtomicU64::new(0),
            owner: AtomicUsize::new(1),
            local: UnsafeCell::new(Local {
                used,
                ..Local::default()
            }),
        }
    }

    /// A non-owner gives block `b` back (`heap.rs` `RemoteRun::push`, which calls
    /// `SuperSlab::push_remote`: flag, then push).
    fn remote_free(&self, b: usize) {
        let b = b as *mut Block;
        if cfg!(hakmem_broken = "flag_after_push") {
            // SAFETY: the block is this thread's to give up, and in the arena.
            unsafe { self.remote.push_chain(self.base as *mut u8, b, b, 1) };
            self.flag();
        } else {
            self.flag();
            // SAFETY: as above.
            unsafe { self.remote.push_chain(self.base as *mut u8, b, b, 1) };
        }
    }

    /// `SuperSlab::push_remote`'s flag, and the check that the slab is still alive.
    fn flag(&self) {
        let now = self.pending.load(Ordering::Relaxed);
        assert!(now & POISON == 0, "a pusher flagged a released slab");
        if now & BIT == 0 {
            let before = self.pending.fetch_or(BIT, Ordering::Release);
            assert!(before & POISON == 0, "a pusher flagged a released slab");
        }
    }

    /// `SlabMeta::collect_remote` (owner only): true if any block came home.
    fn collect_remote(&self, l: &mut Local) -> bool {
        let chain = self.remote.take_all(self.base as *mut u8);
        l.used -= chain.len;
        let mut p = chain.first;
        let mut last = std::ptr::null_mut();
        while !p.is_null() {
            l.home.push(p as usize);
            last = p;
            // SAFETY: the taken chain is the owner's; pushers linked it before publishing.
            p = unsafe { (*p).next };
        }
        assert_eq!(last, chain.last, "the list's last block is not its end");
        chain.len > 0
    }

    /// `Heap::after_return`: release the slab when every block is home, else put it on
    /// the partial list.
    fn after_return(&self, l: &mut Local) {
        if l.used == 0 {
            // The slab's memory may now serve another class, or its superslab be
            // unmapped: a late pusher would write into it.
            self.pending.fetch_or(POISON, Ordering::Relaxed);
            l.released = true;
        } else {
            l.in_partial = true;
        }
    }

    /// One pass of `Heap::collect_pending` over this slab (owner only).
    fn collect_pending(&self, l: &mut Local) {
        if l.released {
            return; // nothing of it is the owner's any more (and `pending` is poisoned)
        }
        // SuperSlab::take_pending
        let bits = if self.pending.load(Ordering::Relaxed) == 0 {
            0
        } else {
            self.pending.swap(0, Ordering::Acquire)
        };
        if bits & BIT == 0 {
            return;
        }
        if self.collect_remote(l) {
            self.after_return(l);
        } else if !cfg!(hakmem_broken = "pending_cleared_early") {
            // SuperSlab::restore_pending: a pusher may be between its flag and its push.
            self.pending.fetch_or(BIT, Ordering::Relaxed);
        }
    }

    /// What the owner does with the slab later on: a pass of `collect_pending`, and a
    /// refill's `collect_remote` if the slab is on a partial list (`Heap::refill`).
    fn settle(&self, l: &mut Local) {
        self.collect_pending(l);
        if l.in_partial && !l.released && self.collect_remote(l) {
            self.after_return(l);
        }
    }

    /// The owner's state, for the owner.
    fn with_local<R>(&self, f: impl FnOnce(&mut Local) -> R) -> R {
        // SAFETY: only the slab's current owner calls this; loom checks that owner
        // changes order the accesses.
        self.local.with_mut(|l| f(unsafe { &mut *l }))
    }

    /// Every pushed block came home exactly once, every count was taken, and nothing
    /// reached the slab after its release.
    fn check(&self, blocks: &[usize]) {
        self.with_local(|l| {
            let mut home = l.home.clone();
            home.sort();
            let mut all = blocks.to_vec();
            all.sort();
            assert_eq!(home, all, "blocks lost or delivered twice");
            assert_eq!(
                l.used, 0,
                "a block came home uncounted, or a count was lost"
            );
            assert!(l.released, "the empty slab was not released");
            assert!(
                self.remote.is_empty(),
                "a block was pushed on a released slab"
            );
        });
    }
}

/// The owner's `rounds` passes of `collect_pending`, on a thread of its own (so that
/// loom also runs them before the pusher's steps); joined before returning, after which
/// the calling thread acts as the owner.
fn owner_rounds(slab: &Arc<Slab>, rounds: usize) {
    let slab = slab.clone();
    thread::spawn(move || {
        for _ in 0..rounds {
            slab.with_local(|l| slab.collect_pending(l));
        }
    })
    .join()
    .unwrap();
}

/// A thread that frees `n` blocks of an owner's slab, one push each, while the owner
/// makes `rounds` passes of `collect_pending`; then the owner settles the slab.
fn pusher_races_owner(n: usize, rounds: usize) {
    model(move || {
        let arena = Arena::new(n);
        let slab = Arc::new(Slab::new(n as u32, &arena));
        let bs = arena.blocks();
        let pusher = {
            let (slab, bs) = (slab.clone(), bs.clone());
            thread::spawn(move || {
                for b in bs {
                    slab.remote_free(b);
                }
            })
        };
        owner_rounds(&slab, rounds);
        pusher.join().unwrap();
        slab.with_local(|l| slab.settle(l));
        slab.check(&bs);
    });
}

/// Two frees from another thread, two separate pushes, while the owner collects: the
/// owner's take must not lose a block pushed between its look and its take.
#[test]
fn remote_frees_race_the_owners_collection() {
    pusher_races_owner(2, 1);
}

/// The last block comes home from another thread while the owner collects and releases
/// the slab when it is empty: the pusher must be done with the slab by then.
#[test]
fn a_slab_is_released_only_after_its_last_pusher_is_done() {
    pusher_races_owner(1, 2);
}

/// A full slab (on no partial list) whose one block comes back from another thread: only
/// its pending flag brings the owner back to it, so the flag must survive a drain that
/// ran between the pusher's flag and its push.
#[test]
fn a_pending_flag_outlives_a_drain_that_found_nothing() {
    pusher_races_owner(1, 1);
}

/// The owner frees one block itself and abandons the superslab (`pool::abandon`: owner
/// null with `Release`, onto the abandoned list); another thread frees the other block
/// remotely; a third adopts the superslab (`pool::adopt`: off the list, `Acquire`
/// fence; `Heap::take_over`: owner set, every remote list collected) and finishes.
#[test]
fn an_abandoned_superslab_is_adopted_while_remote_frees_arrive() {
    model(|| {
        let arena = Arena::new(2);
        let slab = Arc::new(Slab::new(2, &arena));
        let abandoned: Arc<Mutex<Option<Arc<Slab>>>> = Arc::new(Mutex::new(None));
        let bs = arena.blocks();
        let owner = {
            let (slab, abandoned, mine) = (slab.clone(), abandoned.clone(), bs[0]);
            thread::spawn(move || {
                slab.with_local(|l| {
                    // SlabMeta::put: a block freed by its owner goes home directly.
                    l.home.push(mine);
                    l.used -= 1;
                    l.in_partial = true;
                });
                slab.owner.store(0, Ordering::Release);
                *abandoned.lock().unwrap() = Some(slab);
            })
        };
        let pusher = {
            let (slab, b) = (slab.clone(), bs[1]);
            thread::spawn(move || {
                // heap.rs `flush`: the owner is not this thread's heap (2), whoever it
                // is now, so a remote free.
                assert_ne!(slab.owner.load(Ordering::Relaxed), 2);
                slab.remote_free(b);
            })
        };
        // The adopter (heap 3) looks for abandoned superslabs until it finds this one.
        let adopted = loop {
            if let Some(s) = abandoned.lock().unwrap().take() {
                fence(Ordering::Acquire);
                break s;
            }
            thread::yield_now();
        };
        adopted.owner.store(3, Ordering::Release);
        adopted.with_local(|l| {
            // collect_all_remote
            l.in_partial = false;
            if adopted.collect_remote(l) || l.used == 0 {
                adopted.after_return(l);
            } else {
                l.in_partial = true;
            }
        });
        owner.join().unwrap();
        pusher.join().unwrap();
        adopted.with_local(|l| adopted.settle(l));
        adopted.check(&bs);
    });
}
