//! The depot: per size class, a small shared stack of batches of free blocks, between the
//! thread caches and the slabs (tcmalloc's transfer cache is the model).
//!
//! A thread whose bin of a [`served`] class overflows hands the blocks it flushes to the
//! depot as one batch, without walking them back to their slabs; a thread whose bin runs
//! dry takes a batch from it before it carves fresh blocks. So the blocks one thread
//! freed serve another thread's next allocations instead of waiting in slabs that only
//! their owner allocates from: a program of many threads holds about the blocks it uses
//! plus one shared margin per class, not a margin per thread. A block keeps its slab's
//! owner while it is in the depot; whoever allocates it and frees it later gives it back
//! as any block of another thread's slab.
//!
//! The depot holds at most [`DEPTH`] batches and [`MAX_BYTES`] a class (it serves 27
//! classes: at most 54 MiB in all); what does not fit goes back to its slabs as before.
//! Before a heap has the process map more, the batches of a class that no thread took
//! from over a round ([`unused`]) and those put since the class was last taken from
//! ([`untaken`]) go back to their slabs, so that the slabs they kept from emptying serve
//! the classes in use.
//! [`crate::heap::Heap::maintain`] (balanced and lean, once per retention period), the
//! background return once every thread is idle ([`crate::heap::upkeep_idle_heaps`]) and
//! `trim` empty it into the slabs, so that its blocks do not keep slabs from being given
//! back. A thread's exit does not: emptying it there took the blocks other threads were
//! about to reuse (16 threads of 256 blocks of 16 B..4 KiB each, ending one by one:
//! 20.5 and 21.4 MiB peak against 16.5 and 19.8, two sets of 7 alternated runs). So
//! blocks in the depot keep an exited thread's superslabs abandoned rather than empty
//! until some thread takes them (in `balanced` and `lean`, the background return once
//! every thread is idle).
//!
//! What the margin costs where a program's objects move from one size to the next (2000
//! vectors grown by `realloc`, `c-usable-growth`): the class they leave still allocates
//! for the ones that come late, so its batches stay here, one or a few blocks a slab, and
//! keep its slabs from emptying while the next class carves. That class's slabs then come
//! from memory last touched a round before, where mimalloc 3 reuses the pages just left:
//! `cachegrind --cache-sim=yes --D1=49152,12,64 --LL=16777216,16,64` of `c-workloads
//! c-usable-growth 2000000` counts 632K write misses against mimalloc 3's 328K, for the
//! same instructions and peak RSS. Giving the [`untaken`] batches back at every new slab
//! (a throwaway build, 2026-12-02) cut the misses with an 8 MiB last level from 998K to
//! 939K, and made `c-wide-churn`, whose classes take and put between carves, peak at
//! 24.6 MiB against 20.6.

use crate::remote::Block;
use crate::size_class::{block_size, is_medium, Class, PerClass};
use crate::sync::SpinLock;
use core::cell::UnsafeCell;
use core::ptr::null_mut;
use core::sync::atomic::{AtomicU64, Ordering};

/// Batches a class holds at most.
pub const DEPTH: usize = 16;
/// Bytes a class holds at most.
const MAX_BYTES: usize = 2 << 20;

/// A null-terminated chain of `len` free blocks of one class.
#[derive(Clone, Copy)]
pub struct Batch {
    pub first: *mut Block,
    pub len: u32,
}

/// What an unused place of a stack holds.
const NO_BATCH: Batch = Batch {
    first: null_mut(),
    len: 0,
};

/// One class's batches, oldest first.
///
/// Invariant: `batches[..len]` are chains of free blocks of the class, handed to nobody
/// else, that no thread cache or slab list holds; `bytes` is their total size; `low <=
/// len`, and no batch below `low` was taken since the last [`unused`]; `fresh <= len`, and
/// the top `fresh` batches were put since the last [`take`].
struct Stack {
    batches: [Batch; DEPTH],
    len: usize,
    bytes: usize,
    low: usize,
    /// How many batches on top are fresh (see the invariant above).
    fresh: usize,
}

/// Each class's stack, its lock kept apart in [`LOCKS`].
///
/// Invariant: `STACKS.0[c]` is read and written only by the thread that holds
/// `LOCKS[c]` ([`with_stack`] is the one way in).
struct Stacks(PerClass<UnsafeCell<Stack>>);

// SAFETY: by the invariant, one thread at a time reaches a stack, through its lock; the
// blocks on a stack belong to whoever holds that lock.
unsafe impl Sync for Stacks {}

static STACKS: Stacks = Stacks(PerClass(
    [const {
        UnsafeCell::new(Stack {
            batches: [NO_BATCH; DEPTH],
            len: 0,
            bytes: 0,
            low: 0,
            fresh: 0,
        })
    }; crate::size_class::NUM_CLASSES],
));

/// The stacks' locks, side by side: the `fork` handlers take and release them all, and
/// each page they write is one the parent and the child each copy at every `fork`. Inside
/// the stacks, 18.9 KiB apart, they were five pages: a C program forking 2000 times, each
/// child allocating a block, freeing it and calling `_exit`, took 26-27 page faults a
/// child (`getrusage(RUSAGE_CHILDREN)`), 21-22 with the locks apart (glibc 16-18).
static LOCKS: PerClass<SpinLock<()>> =
    PerClass([const { SpinLock::new(()) }; crate::size_class::NUM_CLASSES]);

/// Bit `c` set: class `c`'s stack holds a batch (changed under the class's lock, read
/// without it). A heap about to map memory looks at every served class's stack first
/// ([`unused`]); this way the first allocations of a process, with nothing in the depot,
/// do not touch the stacks' pages (six page faults of each process that allocates).
static HOLDING: AtomicU64 = AtomicU64::new(0);

const _: () = assert!(crate::size_class::NUM_CLASSES <= 64);

/// Run `f` on the stack of class `c`, holding its lock.
fn with_stack<R>(c: Class, f: impl FnOnce(&mut Stack) -> R) -> R {
    let _held = LOCKS[c].lock();
    // SAFETY: we hold `LOCKS[c]` (the invariant on `Stacks`), and `f` is given the only
    // reference to the stack until it returns.
    let s = unsafe { &mut *STACKS.0[c].get() };
    let was_empty = s.len == 0;
    let r = f(s);
    let bit = 1u64 << c.index();
    if was_empty != (s.len == 0) {
        if s.len == 0 {
            HOLDING.fetch_and(!bit, Ordering::Relaxed);
        } else {
            HOLDING.fetch_or(bit, Ordering::Relaxed);
        }
    }
    r
}

/// Whether class `c` goes through the depot: blocks over 1 KiB, of which a thread cache
/// holds few (`config::Policy::cache_min`), so that a thread's bin runs dry and
/// overflows often and what it keeps beyond its use costs the most; but not the medium
/// ones, alone in their spans, whose slabs serve every size once the block is back.
#[inline]
pub fn served(c: Class) -> bool {
    block_size(c) > 1024 && !is_medium(c)
}

/// Keep `batch` (of class `c`); false, and the batch still the caller's, when the
/// class's stack is full.
///
/// # Safety
/// `batch` is a well-formed chain of free blocks of class `c`, which the caller gives up
/// (on success).
pub unsafe fn put(c: Class, batch: Batch) -> bool {
    let bytes = batch.len as usize * block_size(c);
    with_stack(c, |s| {
        if s.len == DEPTH || s.bytes + bytes > MAX_BYTES {
            return false;
        }
        s.push(batch);
        s.bytes += bytes;
        true
    })
}

/// The latest batch of class `c`, now the caller's, if there is one.
pub fn take(c: Class) -> Option<Batch> {
    remove(c, Stack::take_latest)
}

/// The latest batch of class `c` put since the class's last [`take`] (emptying the depot,
/// `Heap::empty_depot`, takes too), now the caller's to give back to its slabs: a class
/// that only gives blocks back (its objects grew into other sizes, or the program moved
/// on) keeps no margin it will not use.
///
/// 2000 vectors grown by `realloc` to twice their length pass through classes of 1280
/// and 3072 bytes on their way to 7232: each class's depot, drained as the vectors came
/// in (which set [`unused`]'s low-water mark to nothing) and filled again as they left,
/// kept 2.3 and 4.5 MiB of slabs from emptying while the vectors needed 14 MiB of the
/// next class: `c-usable-growth` peaked at 26.2 MiB, 22.2 with this (mimalloc 3 21.9;
/// 7 alternated runs, 0.945x the time). A class in use takes from its stack between
/// two puts, so a program that frees a batch and allocates it again keeps it:
/// `c-batch-rand` 1.010x, `c-batch-fwd` 1.017x (7 and 11 runs), `batch-rand` 0.994x.
pub fn untaken(c: Class) -> Option<Batch> {
    remove(c, Stack::take_untaken)
}

/// The oldest batch of class `c` that no thread took since the last call, now the
/// caller's to give back to its slabs: called until it says none, it takes what stayed
/// unused over the whole period since the last round, the class's *low-water mark*
/// (tcmalloc plunders its transfer caches so). A class no thread allocates any more
/// gives its blocks back within two rounds, and their slabs, emptied, serve every
/// class; a class in use keeps the margin it dipped into.
pub fn unused(c: Class) -> Option<Batch> {
    remove(c, Stack::take_unused)
}

/// The batch of class `c` that `how` removes from its stack, now the caller's, with the
/// stack's byte count lowered by its size.
///
/// A stack that holds no batch is not looked at ([`HOLDING`]): there is nothing to
/// remove, and the round [`unused`] would start there starts at no batch, where it is.
fn remove(c: Class, how: fn(&mut Stack) -> Option<Batch>) -> Option<Batch> {
    if HOLDING.load(Ordering::Relaxed) & 1 << c.index() == 0 {
        return None;
    }
    with_stack(c, |s| {
        let b = how(s)?;
        s.bytes -= b.len as usize * block_size(c);
        Some(b)
    })
}

impl Stack {
    /// Put `batch` on top (there is room); the caller raises `bytes`.
    fn push(&mut self, batch: Batch) {
        self.batches[self.len] = batch;
        self.len += 1;
        self.fresh += 1;
    }

    /// The newest batch, for [`take`]: the class is in use, nothing on the stack is
    /// fresh any more. [`remove`] lowers `bytes`.
    fn take_latest(&mut self) -> Option<Batch> {
        let b = self.pop()?;
        self.fresh = 0;
        Some(b)
    }

    /// The newest batch put since the last [`take`] (for [`untaken`]); [`remove`] lowers
    /// `bytes`.
    fn take_untaken(&mut self) -> Option<Batch> {
        if self.fresh == 0 {
            return None;
        }
        self.fresh -= 1;
        self.pop()
    }

    /// The newest batch; its caller's caller ([`remove`]) lowers `bytes`.
    fn pop(&mut self) -> Option<Batch> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        self.low = self.low.min(self.len);
        Some(self.batches[self.len])
    }

    /// The oldest batch below the low-water mark (for [`unused`]); none when the mark is
    /// reached, and then the next round's mark starts at what is left. [`remove`] lowers
    /// `bytes`.
    fn take_unused(&mut self) -> Option<Batch> {
        if self.low == 0 {
            self.low = self.len;
            return None;
        }
        let b = self.batches[0];
        let len = self.len;
        self.batches.copy_within(1..len, 0);
        self.len -= 1;
        self.low -= 1;
        self.fresh = self.fresh.min(self.len);
        Some(b)
    }
}

/// Bytes the depot holds in class `c` (for statistics).
pub fn bytes(c: Class) -> usize {
    with_stack(c, |s| s.bytes)
}

/// Lock every class's stack across `fork` (no other lock is taken while one is held).
pub(crate) fn lock_for_fork() {
    for (_, lock) in LOCKS.iter() {
        lock.lock_forever();
    }
}

/// Whether every lock [`lock_for_fork`] takes is held.
#[cfg(test)]
pub(crate) fn locked_for_fork() -> bool {
    LOCKS.iter().all(|(_, lock)| lock.is_locked())
}

/// # Safety
/// After [`lock_for_fork`].
pub(crate) unsafe fn unlock_after_fork() {
    for (_, lock) in LOCKS.iter() {
        // SAFETY: by the caller.
        unsafe { lock.force_unlock() };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack_of(lens: &[u32]) -> Stack {
        let mut s = Stack {
            batches: [NO_BATCH; DEPTH],
            len: 0,
            bytes: 0,
            low: 0,
            fresh: 0,
        };
        for &len in lens {
            s.batches[s.len] = Batch {
                first: null_mut(),
                len,
            };
            s.len += 1;
        }
        s
    }

    fn unused_lens(s: &mut Stack) -> [u32; DEPTH] {
        let mut got = [0; DEPTH];
        let mut i = 0;
        while let Some(b) = s.take_unused() {
            got[i] = b.len;
            i += 1;
        }
        got
    }

    /// `untaken` gives back, newest first, the batches put since the last `take`.
    #[test]
    fn untaken_gives_back_what_was_put_since_the_last_take() {
        let batch = |len| Batch {
            first: null_mut(),
            len,
        };
        let mut s = stack_of(&[]);
        s.push(batch(1));
        s.push(batch(2));
        assert_eq!(s.take_latest().map(|b| b.len), Some(2));
        assert!(s.take_untaken().is_none(), "taken from: nothing is fresh");
        s.push(batch(3));
        s.push(batch(4));
        assert_eq!(s.take_untaken().map(|b| b.len), Some(4));
        assert_eq!(s.take_untaken().map(|b| b.len), Some(3));
        assert!(
            s.take_untaken().is_none(),
            "the batch from before the take stays"
        );
        assert_eq!((s.len, s.batches[0].len), (1, 1));
    }

    /// A round gives back, oldest first, the batches that stayed below the lowest the
    /// stack went since the round before; batches put since wait for the next round.
    #[test]
    fn a_round_takes_what_stayed_unused_since_the_last() {
        let mut s = stack_of(&[1, 2, 3]);
        assert_eq!(
            unused_lens(&mut s)[0],
            0,
            "the first round only sets the mark"
        );
        assert_eq!(s.len, 3);
        assert_eq!(s.pop().map(|b| b.len), Some(3));
        s.batches[2] = Batch {
            first: null_mut(),
            len: 4,
        };
        s.len = 3; // a batch put back since
        assert_eq!(&unused_lens(&mut s)[..3], &[1, 2, 0]);
        assert_eq!((s.len, s.batches[0].len), (1, 4));
        // Taken from meanwhile: nothing stayed unused.
        assert_eq!(s.pop().map(|b| b.len), Some(4));
        assert_eq!(unused_lens(&mut s)[0], 0);
        assert_eq!(s.len, 0);
    }
}
