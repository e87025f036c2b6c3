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
//! [`crate::heap::Heap::maintain`] (balanced and lean, once per retention period), the
//! background return once every thread is idle ([`crate::heap::upkeep_idle_heaps`]) and
//! `trim` empty it into the slabs, so that its blocks do not keep slabs from being given
//! back. A thread's exit does not: emptying it there took the blocks other threads were
//! about to reuse (16 threads of 256 blocks of 16 B..4 KiB each, ending one by one:
//! 20.5 and 21.4 MiB peak against 16.5 and 19.8, two sets of 7 alternated runs). So
//! blocks in the depot keep an exited thread's superslabs abandoned rather than empty
//! until some thread takes them (in `balanced` and `lean`, the background return once
//! every thread is idle).

use crate::remote::Block;
use crate::size_class::{block_size, is_medium, Class, PerClass};
use crate::sync::SpinLock;
use core::ptr::null_mut;

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

/// One class's batches.
///
/// Invariant: `batches[..len]` are chains of free blocks of the class, handed to nobody
/// else, that no thread cache or slab list holds; `bytes` is their total size.
struct Stack {
    batches: [Batch; DEPTH],
    len: usize,
    bytes: usize,
}

// SAFETY: the blocks on a stack belong to whoever holds its lock.
unsafe impl Send for Stack {}

static STACKS: PerClass<SpinLock<Stack>> = PerClass(
    [const {
        SpinLock::new(Stack {
            batches: [NO_BATCH; DEPTH],
            len: 0,
            bytes: 0,
        })
    }; crate::size_class::NUM_CLASSES],
);

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
    let mut s = STACKS[c].lock();
    if s.len == DEPTH || s.bytes + bytes > MAX_BYTES {
        return false;
    }
    let i = s.len;
    s.batches[i] = batch;
    s.len += 1;
    s.bytes += bytes;
    true
}

/// The latest batch of class `c`, now the caller's, if there is one.
pub fn take(c: Class) -> Option<Batch> {
    let mut s = STACKS[c].lock();
    if s.len == 0 {
        return None;
    }
    s.len -= 1;
    let b = s.batches[s.len];
    s.bytes -= b.len as usize * block_size(c);
    Some(b)
}

/// Bytes the depot holds in class `c` (for statistics).
pub fn bytes(c: Class) -> usize {
    STACKS[c].lock().bytes
}

/// Lock every class's stack across `fork` (no other lock is taken while one is held).
pub(crate) fn lock_for_fork() {
    for (_, s) in STACKS.iter() {
        s.lock_forever();
    }
}

/// Whether every lock [`lock_for_fork`] takes is held.
#[cfg(test)]
pub(crate) fn locked_for_fork() -> bool {
    STACKS.iter().all(|(_, s)| s.is_locked())
}

/// # Safety
/// After [`lock_for_fork`].
pub(crate) unsafe fn unlock_after_fork() {
    for (_, s) in STACKS.iter() {
        // SAFETY: by the caller.
        unsafe { s.force_unlock() };
    }
}
