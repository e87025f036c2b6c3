//! The stack table: every distinct sampled stack once, with its estimated allocated and
//! in-use objects and bytes. Fixed arrays mapped with `mmap` (never through an allocator)
//! when profiling first starts; only the pages used become resident. One spin lock,
//! taken once per sample and once per free of a sampled block.
//!
//! Stack 0 stands for "the table is full": its samples still count, under an empty stack.

use crate::lock::Lock;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::io;

/// Most distinct stacks (ids fit the 16 bits the arena keeps per block).
pub const MAX_STACKS: usize = 1 << 16;
/// Slots of the hash index (a power of two, twice [`MAX_STACKS`]).
const INDEX_SLOTS: usize = MAX_STACKS * 2;
/// Frames of all stacks together.
const MAX_FRAMES: usize = 1 << 21;

/// One distinct stack and its figures (estimates: each sample weighted by the inverse of
/// its probability).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct Entry {
    pub hash: u64,
    /// Where its frames start in the frame pool, and how many.
    pub first: u32,
    pub depth: u32,
    pub alloc_objects: f64,
    pub alloc_bytes: f64,
    pub inuse_objects: f64,
    pub inuse_bytes: f64,
    /// Samples taken at this stack, and those still live (exact counts).
    pub samples: u64,
    pub live: u64,
}

struct Table {
    /// `MAX_STACKS` entries; entries `0..len` are in use.
    entries: *mut Entry,
    /// `INDEX_SLOTS` stack ids, 0 for an empty slot (stack 0 is never indexed).
    index: *mut u32,
    /// `MAX_FRAMES` return addresses; `0..frames_used` written.
    frames: *mut u64,
    frames_used: usize,
}

// SAFETY: the pointers are to process-wide mappings, only used under the lock.
unsafe impl Send for Table {}

static TABLE: Lock<Table> = Lock::new(Table {
    entries: core::ptr::null_mut(),
    index: core::ptr::null_mut(),
    frames: core::ptr::null_mut(),
    frames_used: 0,
});

/// Entries in use (mirrors the table's length, readable without the lock).
static LEN: AtomicU32 = AtomicU32::new(0);

fn map<T>(count: usize) -> io::Result<*mut T> {
    crate::mem::map(count * core::mem::size_of::<T>()).map(|p| p.cast())
}

/// Map the table if not yet done.
pub fn init() -> io::Result<()> {
    TABLE.with(|t| {
        if !t.entries.is_null() {
            return Ok(());
        }
        t.entries = map::<Entry>(MAX_STACKS)?;
        t.index = map::<u32>(INDEX_SLOTS)?;
        t.frames = map::<u64>(MAX_FRAMES)?;
        // Entry 0: the overflow stack, zero frames (the mapping is zeroed).
        LEN.store(1, Relaxed);
        Ok(())
    })
}

fn hash(frames: &[u64]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ frames.len() as u64;
    for &f in frames {
        h = (h ^ f).wrapping_mul(0x0000_0100_0000_01b3);
        h ^= h >> 29;
    }
    h
}

impl Table {
    /// The id of `frames`, interned if new; 0 when the table is full.
    fn intern(&mut self, frames: &[u64]) -> u32 {
        let h = hash(frames);
        let len = LEN.load(Relaxed) as usize;
        let mut slot = h as usize & (INDEX_SLOTS - 1);
        loop {
            // SAFETY: `slot < INDEX_SLOTS`; the index is mapped.
            let id = unsafe { *self.index.add(slot) };
            if id == 0 {
                break;
            }
            // SAFETY: indexed ids are below `len`.
            let e = unsafe { &*self.entries.add(id as usize) };
            if e.hash == h && self.frames_of(e) == frames {
                return id;
            }
            slot = (slot + 1) & (INDEX_SLOTS - 1);
        }
        if len >= MAX_STACKS || self.frames_used + frames.len() > MAX_FRAMES {
            return 0;
        }
        // SAFETY: `frames_used + frames.len() <= MAX_FRAMES`, `len < MAX_STACKS`, `slot`
        // is an empty slot.
        unsafe {
            let dst = self.frames.add(self.frames_used);
            core::ptr::copy_nonoverlapping(frames.as_ptr(), dst, frames.len());
            self.entries.add(len).write(Entry {
                hash: h,
                first: self.frames_used as u32,
                depth: frames.len() as u32,
                ..Entry::default()
            });
            *self.index.add(slot) = len as u32;
        }
        self.frames_used += frames.len();
        LEN.store(len as u32 + 1, Relaxed);
        len as u32
    }

    fn frames_of(&self, e: &Entry) -> &[u64] {
        // SAFETY: an entry's frames were written before it was published.
        unsafe { core::slice::from_raw_parts(self.frames.add(e.first as usize), e.depth as usize) }
    }

    fn entry(&mut self, id: u32) -> &mut Entry {
        // SAFETY: ids handed out are below the length, inside the mapping.
        unsafe { &mut *self.entries.add(id as usize) }
    }
}

/// Note a sample at `frames` standing for `objects` allocations of `bytes` bytes in all;
/// returns the stack's id.
pub fn record_alloc(frames: &[u64], objects: f64, bytes: f64) -> u32 {
    TABLE.with(|t| {
        if t.entries.is_null() {
            return 0; // never: sampling starts after `init`
        }
        let id = t.intern(frames);
        t.entry(id).add_sample(objects, bytes);
        id
    })
}

/// [`record_alloc`] for a stack whose id the caller has (an id [`record_alloc`] returned:
/// ids stay valid for the process's life).
pub fn record_alloc_at(id: u32, objects: f64, bytes: f64) {
    TABLE.with(|t| {
        if !t.entries.is_null() && id < LEN.load(Relaxed) {
            t.entry(id).add_sample(objects, bytes);
        }
    })
}

impl Entry {
    fn add_sample(&mut self, objects: f64, bytes: f64) {
        self.alloc_objects += objects;
        self.alloc_bytes += bytes;
        self.inuse_objects += objects;
        self.inuse_bytes += bytes;
        self.samples += 1;
        self.live += 1;
    }
}

/// Note the free of a block sampled at stack `id` with these weights.
pub fn record_free(id: u32, objects: f64, bytes: f64) {
    TABLE.with(|t| {
        if t.entries.is_null() {
            return;
        }
        let e = t.entry(id);
        e.inuse_objects -= objects;
        e.inuse_bytes -= bytes;
        e.live = e.live.saturating_sub(1);
    })
}

/// Copy every stack (`frames`, figures) out, calling `f` for each while holding the lock:
/// `f` must not allocate through hakmem's sampled path (the caller is marked busy) and
/// should only copy.
pub fn for_each(mut f: impl FnMut(&[u64], &Entry)) {
    TABLE.with(|t| {
        if t.entries.is_null() {
            return;
        }
        for id in 0..LEN.load(Relaxed) as usize {
            // SAFETY: ids below the length are written entries.
            let e = unsafe { &*t.entries.add(id) };
            f(t.frames_of(e), e);
        }
    })
}

/// Entries in use (an upper bound for [`for_each`] callers reserving space).
pub fn len() -> usize {
    LEN.load(Relaxed) as usize
}

/// Total frames stored (for callers reserving space).
pub fn frames_used() -> usize {
    TABLE.with(|t| t.frames_used)
}

/// Zero every figure.
pub fn reset() {
    TABLE.with(|t| {
        if t.entries.is_null() {
            return;
        }
        for id in 0..LEN.load(Relaxed) {
            let e = t.entry(id);
            *e = Entry {
                hash: e.hash,
                first: e.first,
                depth: e.depth,
                ..Entry::default()
            };
        }
    })
}

pub fn lock_for_fork() {
    TABLE.hold();
}

/// # Safety
/// [`lock_for_fork`] took the lock in this thread (or, in a child, in its parent).
pub unsafe fn unlock_after_fork() {
    // SAFETY: by the caller.
    unsafe { TABLE.release() };
}
