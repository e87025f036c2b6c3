//! The shared pool of superslabs that no thread owns: empty ones kept for reuse (a
//! bounded cache, so that a busy program almost never calls `mmap` or `munmap`), and
//! *abandoned* ones, left with live blocks by threads that exited, for a live thread to
//! adopt. Both lists sit behind spin locks that only slow paths take.

use crate::chunk_map::{self, CHUNK_SIZE};
use crate::config;
use crate::os;
use crate::superslab::SuperSlab;
use crate::sync::{Ordering, SpinLock};
use core::ptr::null_mut;

/// A singly linked stack of superslabs through their `next` field.
struct Stack {
    head: *mut SuperSlab,
    len: usize,
}

// SAFETY: the superslabs on a stack are owned by nobody but the stack's lock holder.
unsafe impl Send for Stack {}

impl Stack {
    const fn new() -> Self {
        Stack {
            head: null_mut(),
            len: 0,
        }
    }

    /// # Safety
    /// `ss` is a superslab nobody else uses.
    unsafe fn push(&mut self, ss: *mut SuperSlab) {
        // SAFETY: by the caller, `ss` is ours to link.
        unsafe { (*ss).next.set(self.head) };
        self.head = ss;
        self.len += 1;
    }

    fn pop(&mut self) -> *mut SuperSlab {
        let ss = self.head;
        if !ss.is_null() {
            // SAFETY: superslabs on the stack are valid and ours while locked.
            self.head = unsafe { (*ss).next.get() };
            self.len -= 1;
        }
        ss
    }
}

/// Empty superslabs; `decommitted` ones have had their pages given back.
static EMPTY: SpinLock<Stack> = SpinLock::new(Stack::new());
static ABANDONED: SpinLock<Stack> = SpinLock::new(Stack::new());

/// An empty superslab owned by nobody, from the cache or freshly mapped; null when the
/// OS refuses.
pub fn acquire() -> *mut SuperSlab {
    let cached = EMPTY.lock().pop();
    let chunk = if cached.is_null() {
        let p = os::map_aligned(CHUNK_SIZE, CHUNK_SIZE);
        if p.is_null() {
            return null_mut();
        }
        chunk_map::insert(p as usize);
        p
    } else {
        cached.cast()
    };
    // SAFETY: the chunk is mapped, chunk aligned, and ours alone.
    unsafe { SuperSlab::init(chunk) }
}

/// Take back an empty superslab: cache it, or unmap it when the cache is full.
///
/// # Safety
/// `ss` is empty (no slab in use, no remote block pending) and the caller gives it up.
pub unsafe fn release_empty(ss: *mut SuperSlab) {
    // SAFETY: the caller gives us `ss`.
    unsafe { (*ss).owner.store(null_mut(), Ordering::Relaxed) };
    let policy = config::current();
    {
        let mut empty = EMPTY.lock();
        if empty.len < policy.superslab_cache {
            if let Some(how) = policy.decommit {
                // Keep the header page; the rest holds nothing we need.
                let start =
                    os::round_up(SuperSlab::HEADER_BYTES, os::PAGE_SIZE).unwrap_or(CHUNK_SIZE);
                // SAFETY: the range is inside our own empty superslab.
                unsafe { os::decommit((ss as *mut u8).add(start), CHUNK_SIZE - start, how) };
            }
            // SAFETY: nobody else holds `ss`.
            unsafe { empty.push(ss) };
            return;
        }
    }
    chunk_map::remove(ss as usize);
    // SAFETY: nothing refers to the superslab any more.
    unsafe { os::unmap(ss.cast(), CHUNK_SIZE) };
}

/// Unmap every cached empty superslab (for `trim`).
pub fn trim() {
    loop {
        let ss = EMPTY.lock().pop();
        if ss.is_null() {
            return;
        }
        chunk_map::remove(ss as usize);
        // SAFETY: cached superslabs are unused.
        unsafe { os::unmap(ss.cast(), CHUNK_SIZE) };
    }
}

/// Leave `ss`, which still has live blocks, for another thread to adopt.
///
/// # Safety
/// The caller owns `ss` and gives it up.
pub unsafe fn abandon(ss: *mut SuperSlab) {
    // SAFETY: the caller gives us `ss`.
    unsafe {
        (*ss).owner.store(null_mut(), Ordering::Release);
        ABANDONED.lock().push(ss);
    }
}

/// Take an abandoned superslab, if any; the caller becomes its owner.
pub fn adopt() -> *mut SuperSlab {
    let s = ABANDONED.lock().pop();
    if !s.is_null() {
        core::sync::atomic::fence(Ordering::Acquire);
    }
    s
}

/// Number of cached empty superslabs and of abandoned ones.
pub fn counts() -> (usize, usize) {
    (EMPTY.lock().len, ABANDONED.lock().len)
}

/// Hold the pool's locks across `fork` ([`crate::fork`]).
pub(crate) fn lock_all() {
    EMPTY.lock_forever();
    ABANDONED.lock_forever();
}

/// # Safety
/// After [`lock_all`], in the parent or the child of `fork`.
pub(crate) unsafe fn unlock_all() {
    // SAFETY: by the caller, we hold both locks.
    unsafe {
        ABANDONED.force_unlock();
        EMPTY.force_unlock();
    }
}
