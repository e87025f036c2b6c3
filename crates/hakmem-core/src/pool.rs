//! The shared pool of superslabs that no thread owns: empty ones kept for reuse, still
//! committed (so that a busy program almost never calls `mmap` or `munmap` or faults
//! pages in again), within the budget of [`crate::retain`]; and *abandoned* ones, left
//! with live blocks by threads that exited, for a live thread to adopt. Both lists sit
//! behind spin locks that only slow paths take. Where the program writes its big buffers
//! through, an empty superslab's chunk may serve a large block ([`take_empty_chunk`]),
//! and a superslab may take a chunk of the cache of large extents ([`acquire`]).

use crate::chunk_map::{self, CHUNK_SIZE};
use crate::large;
use crate::os;
use crate::retain;
use crate::slab_map;
use crate::superslab::{OwnerId, SuperSlab};
use crate::sync::{Ordering, SpinLock};
use core::ptr::null_mut;

/// A list of superslabs through their `next` / `prev` fields, newest at the head.
struct Stack {
    head: *mut SuperSlab,
    tail: *mut SuperSlab,
    len: usize,
}

// SAFETY: the superslabs on a stack are owned by nobody but the stack's lock holder.
unsafe impl Send for Stack {}

impl Stack {
    const fn new() -> Self {
        Stack {
            head: null_mut(),
            tail: null_mut(),
            len: 0,
        }
    }

    /// # Safety
    /// `ss` is a superslab nobody else uses.
    unsafe fn push(&mut self, ss: *mut SuperSlab) {
        // SAFETY: by the caller, `ss` is ours to link; the head is on the list.
        unsafe {
            (*ss).next.set(self.head);
            (*ss).prev.set(null_mut());
            if self.head.is_null() {
                self.tail = ss;
            } else {
                (*self.head).prev.set(ss);
            }
        }
        self.head = ss;
        self.len += 1;
    }

    /// The newest superslab.
    fn pop(&mut self) -> *mut SuperSlab {
        let ss = self.head;
        if !ss.is_null() {
            // SAFETY: superslabs on the list are valid and ours while locked.
            unsafe { self.unlink(ss) };
        }
        ss
    }

    /// The superslab at the lowest address that `pick` (given it) chooses, if any.
    fn pop_lowest_where(&mut self, pick: impl Fn(&SuperSlab) -> bool) -> *mut SuperSlab {
        let mut lowest: *mut SuperSlab = null_mut();
        let mut ss = self.head;
        while !ss.is_null() {
            // SAFETY: superslabs on the list are valid and ours while locked.
            let s = unsafe { &*ss };
            if pick(s) && (lowest.is_null() || ss < lowest) {
                lowest = ss;
            }
            ss = s.next.get();
        }
        if !lowest.is_null() {
            // SAFETY: as above; `lowest` is on the list.
            unsafe { self.unlink(lowest) };
        }
        lowest
    }

    /// The oldest superslab, if `pick` (given it) says so.
    fn pop_oldest_if(&mut self, pick: impl FnOnce(&SuperSlab) -> bool) -> *mut SuperSlab {
        let ss = self.tail;
        // SAFETY: superslabs on the list are valid and ours while locked.
        if ss.is_null() || !pick(unsafe { &*ss }) {
            return null_mut();
        }
        // SAFETY: as above.
        unsafe { self.unlink(ss) };
        ss
    }

    /// # Safety
    /// `ss` is on this list.
    unsafe fn unlink(&mut self, ss: *mut SuperSlab) {
        // SAFETY: by the caller; its neighbours are on the list too.
        unsafe {
            let (prev, next) = ((*ss).prev.get(), (*ss).next.get());
            if prev.is_null() {
                self.head = next;
            } else {
                (*prev).next.set(next);
            }
            if next.is_null() {
                self.tail = prev;
            } else {
                (*next).prev.set(prev);
            }
        }
        self.len -= 1;
    }
}

/// Empty superslabs, committed, each stamped with the time it came back.
static EMPTY: SpinLock<Stack> = SpinLock::new(Stack::new());
/// Superslabs whose owner exited with blocks still live in them, by what they are carved
/// into ([`SuperSlab::holds_wide`]): small blocks, then wide ones. A thread looking for
/// room for a class adopts only superslabs that can give it.
static ABANDONED: [SpinLock<Stack>; 2] = [SpinLock::new(Stack::new()), SpinLock::new(Stack::new())];

/// An empty superslab owned by nobody, from the cache, from a chunk of the cache of large
/// extents ([`large::take_chunk`]: where big buffers are written through, for a heap that
/// wants huge pages), or freshly mapped; null when the OS refuses. `wide`: what it is
/// wanted for ([`SuperSlab::holds_wide`]).
///
/// A small heap (one that wants no huge pages yet) takes no cached chunk: its superslab
/// holds little, and would keep the big buffer's resident pages (`c-big-buffers` in
/// `balanced`, whose few small blocks took one: 110.1 MiB against 100.1, 1.25x the time
/// as the cached extents the buffers needed were cut, 7 alternated runs).
///
/// From the cache, the one at the lowest address that held the same kind before, if any:
/// its resident pages are where the new owner will carve the same kind of slabs, and
/// taking the lowest (not the newest, as before) keeps a heap that cycles medium blocks on
/// the same few superslabs (`Heap::carve_owned` says by how much). Taking any kind, a
/// thread started after others exited took for its first small blocks a
/// superslab that had held wide ones, and carved its wide blocks into the untouched
/// slabs of another (the benchmark's warm-up round is such a pair of threads): peak RSS
/// of `c-mid-large` 13.6 MiB without this choice, 8.2 with it (medians of 7 and 5
/// alternated runs of `LD_PRELOAD=target/release/libhakmem.so target/bench/c-workloads
/// c-mid-large`).
///
/// A fresh mapping the caller wants huge pages for (`huge`, the heap's choice:
/// [`crate::superslab::huge_pages_pay`], [`crate::superslab::wide_huge_pages_pay`]) is
/// advised for them before its header is written, so that its first 2 MiB can be one
/// too.
pub fn acquire(wide: bool, huge: bool) -> *mut SuperSlab {
    let cached = {
        let mut empty = EMPTY.lock();
        let same = empty.pop_lowest_where(|s| s.holds_wide() == wide);
        if same.is_null() {
            empty.pop()
        } else {
            same
        }
    };
    let (chunk, advised) = if !cached.is_null() {
        retain::sub(CHUNK_SIZE);
        (cached.cast(), false)
    } else if let Some(base) = huge.then(large::take_chunk).flatten() {
        let p = base as *mut u8;
        // SAFETY: the cached extent's chunk is ours alone, none of its bytes needed; the
        // advice changes no byte. Its pages stay as the big buffer left them (resident,
        // in huge pages where they were).
        unsafe {
            SuperSlab::clear_header(p);
            os::advise_huge_pages(p, CHUNK_SIZE, true);
        }
        // After the header is cleared: a chunk's bit says a header is there.
        chunk_map::insert(base);
        (p, true)
    } else {
        let p = os::map_aligned(CHUNK_SIZE, CHUNK_SIZE);
        if p.is_null() {
            return null_mut();
        }
        chunk_map::insert(p as usize);
        if huge {
            // SAFETY: the fresh chunk is ours.
            unsafe { os::advise_huge_pages(p, CHUNK_SIZE, true) };
        }
        (p, huge)
    };
    retain::observe();
    // SAFETY: the chunk is mapped, chunk aligned, and ours alone.
    unsafe { SuperSlab::init(chunk, advised) }
}

/// An empty superslab's chunk for a large block (`large::alloc`'s spare, [`large::Spare`]),
/// the lowest, while the pool holds another: memory that small and medium blocks gave
/// back, resident, serves a big buffer before a fresh mapping does. Its chunk bit stays
/// set, its class map is the caller's to write.
pub fn take_empty_chunk() -> Option<usize> {
    let ss = {
        let mut empty = EMPTY.lock();
        if empty.len < 2 {
            return None;
        }
        empty.pop_lowest_where(|_| true)
    };
    if ss.is_null() {
        return None;
    }
    retain::sub(CHUNK_SIZE);
    // SAFETY: taken off the list, unused, mapped.
    let base = unsafe { (*ss).base() };
    // Already clear (an empty superslab released every span); cleared again, as in
    // `unmap`, since the chunk's bytes are a large block's now.
    slab_map::clear_chunk(base, CHUNK_SIZE);
    Some(base)
}

/// Take back an empty superslab: keep it for reuse, then give back the oldest kept ones
/// beyond the retention budget or time.
///
/// # Safety
/// `ss` is empty (no slab in use, no remote block pending) and the caller gives it up.
pub unsafe fn release_empty(ss: *mut SuperSlab) {
    let now = os::now_ms();
    // SAFETY: the caller gives us `ss`.
    unsafe {
        (*ss).set_owner(OwnerId::NONE);
        (*ss).released_ms.set(now);
        EMPTY.lock().push(ss);
    }
    retain::add(CHUNK_SIZE);
    expire(now);
    // Only noted: the caller holds a heap (its thread in a slow path, which wakes the
    // background return after, or the background return itself).
    retain::want();
}

/// Give back (unmap) the kept superslabs that are over the retention budget or have been
/// kept too long at `now` ([`os::now_ms`]), oldest first.
pub fn expire(now: u64) {
    loop {
        let over = retain::excess(now) > 0;
        let ss = EMPTY
            .lock()
            .pop_oldest_if(|s| over || retain::expired(s.released_ms.get(), now));
        if ss.is_null() {
            return;
        }
        retain::sub(CHUNK_SIZE);
        // SAFETY: taken off the list, unused.
        unsafe { unmap(ss) };
    }
}

/// # Safety
/// Nothing refers to `ss` any more.
unsafe fn unmap(ss: *mut SuperSlab) {
    // Already clear (an empty superslab released every span); cleared again here, where
    // a stale byte would outlive the mapping.
    slab_map::clear_chunk(ss as usize, CHUNK_SIZE);
    chunk_map::remove(ss as usize);
    // SAFETY: by the caller.
    unsafe { os::unmap(ss.cast(), CHUNK_SIZE) };
}

/// Unmap every cached empty superslab (for `trim`).
pub fn trim() {
    loop {
        let ss = EMPTY.lock().pop();
        if ss.is_null() {
            return;
        }
        retain::sub(CHUNK_SIZE);
        // SAFETY: cached superslabs are unused.
        unsafe { unmap(ss) };
    }
}

/// Leave `ss`, which still has live blocks, for another thread to adopt.
///
/// # Safety
/// The caller owns `ss` and gives it up.
pub unsafe fn abandon(ss: *mut SuperSlab) {
    // SAFETY: the caller gives us `ss`.
    unsafe {
        (*ss).set_owner(OwnerId::NONE);
        ABANDONED[(*ss).holds_wide() as usize].lock().push(ss);
    }
}

/// Take an abandoned superslab that holds wide blocks (`wide`) or small ones, if any; the
/// caller becomes its owner.
pub fn adopt(wide: bool) -> *mut SuperSlab {
    let s = ABANDONED[wide as usize].lock().pop();
    if !s.is_null() {
        core::sync::atomic::fence(Ordering::Acquire);
    }
    s
}

/// Take an abandoned superslab of either kind, if any; the caller becomes its owner.
pub fn adopt_any() -> *mut SuperSlab {
    let s = adopt(false);
    if s.is_null() {
        adopt(true)
    } else {
        s
    }
}

/// Whether [`acquire`] would map a fresh superslab now: the pool holds no empty one.
pub fn would_map() -> bool {
    EMPTY.lock().len == 0
}

/// Number of cached empty superslabs and of abandoned ones.
pub fn counts() -> (usize, usize) {
    let abandoned = ABANDONED.iter().map(|a| a.lock().len).sum();
    (EMPTY.lock().len, abandoned)
}

/// Hold the pool's locks across `fork` ([`fork_prepare`](crate::process)).
pub(crate) fn lock_all() {
    EMPTY.lock_forever();
    for a in &ABANDONED {
        a.lock_forever();
    }
}

/// Whether every lock [`lock_all`] takes is held.
#[cfg(test)]
pub(crate) fn all_locked() -> bool {
    EMPTY.is_locked() && ABANDONED.iter().all(SpinLock::is_locked)
}

/// # Safety
/// After [`lock_all`], in the parent or the child of `fork`.
pub(crate) unsafe fn unlock_all() {
    // SAFETY: by the caller, we hold both locks.
    unsafe {
        for a in ABANDONED.iter().rev() {
            a.force_unlock();
        }
        EMPTY.force_unlock();
    }
}
