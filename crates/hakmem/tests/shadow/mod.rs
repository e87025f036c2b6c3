//! A shadow model of the allocator: run a sequence of [`Op`]s against hakmem and check,
//! against a model of what is live, that
//!
//! - every block is non-null, aligned, and owned by hakmem (`owner`, `usable_size`),
//! - no two live blocks overlap (the model keeps their ranges in a `BTreeMap`),
//! - a block keeps the pattern written into it (checked on free and across realloc up to
//!   the bytes realloc must preserve),
//! - `alloc_zeroed` memory reads as zero.
//!
//! A library, not a test: the proptest in `shadow_model.rs`, its seeded runs and the fuzz
//! targets (`#[path]` to this file and to `tests/common/mod.rs`, mounted as `crate::common`,
//! feeding [`ops_from_bytes`]) all call [`run`], [`run_with`] or [`run_threads`].
//!
//! The entry points are an [`Entries`]: the Rust API ([`Api`]) here, the C ABI's malloc
//! family in `crates/hakmem-cabi/tests/c_model`. [`run_threads`] deals one sequence out
//! to several threads that share the record of live ranges (so the overlap check spans
//! threads) and hand blocks to each other, so that frees and reallocs cross threads.
//!
//! [`Api`] calls hakmem directly, never as the global allocator, so the model's own `Vec`
//! and `BTreeMap` allocations do not disturb what it watches.
#![allow(dead_code)] // each user takes a subset (`Resized::Freed`: only C's realloc)

use std::alloc::{GlobalAlloc, Layout};
use std::collections::BTreeMap;
use std::ptr::null_mut;
use std::sync::{Mutex, MutexGuard};

use hakmem_core::Owner;

use crate::common;

/// Largest request the model makes (4 MiB).
pub const MAX_SIZE: usize = 4 << 20;
/// Largest alignment the model asks for (64 KiB, the largest served by slabs).
pub const MAX_ALIGN_LOG2: u8 = 16;
/// The model stops allocating while this many bytes are live, so that no sequence needs
/// more than a modest amount of memory.
pub const LIVE_CAP: usize = 64 << 20;

/// Sizes at the edges of classes and of the slab / large split.
const EDGE_SIZES: [usize; 16] = [
    0,
    1,
    15,
    16,
    17,
    128,
    129,
    1024,
    1025,
    4096,
    32 * 1024 + 1,
    64 * 1024 - 1,
    64 * 1024,
    64 * 1024 + 1,
    (1 << 20) - 128,
    MAX_SIZE,
];

/// One step of a sequence. `pick` chooses a live block (modulo their number). `how` is a
/// byte the entry points may use to choose among calls that do the same thing (which C
/// function allocates, say); the Rust API ignores it. In [`run_threads`] a free whose
/// `how` is 192 or more hands the block to another thread instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Alloc {
        size: usize,
        align_log2: u8,
        zeroed: bool,
        how: u8,
    },
    Free {
        pick: usize,
        how: u8,
    },
    Realloc {
        pick: usize,
        new_size: usize,
        how: u8,
    },
}

/// A request size from a selector byte and 32 random bits: 0..=1 KiB (9 in 16), mid
/// sizes up to 64 KiB (4 in 16), large sizes up to [`MAX_SIZE`], log-uniform (1 in 16),
/// and sizes at class edges (2 in 16).
pub fn size_from(kind: u8, raw: u32) -> usize {
    let raw = raw as usize;
    match kind % 16 {
        0..=8 => raw % 1025,
        9..=12 => 1025 + raw % (64 * 1024 - 1024),
        13 => {
            let shift = 16 + raw % 7; // 64 KiB .. 4 MiB
            ((1usize << shift) + (raw >> 3) % (1 << shift)).min(MAX_SIZE)
        }
        _ => EDGE_SIZES[raw % EDGE_SIZES.len()],
    }
}

/// An alignment's log2 from a byte: 1..=16 bytes mostly, up to 4 KiB often, up to
/// 64 KiB sometimes.
pub fn align_log2_from(raw: u8) -> u8 {
    match raw % 32 {
        r @ 0..=19 => r % 5,
        r @ 20..=28 => 5 + (r - 20),
        r => 14 + (r - 29),
    }
}

impl Op {
    /// Bytes a fuzzer (or proptest) hands over, as an op: `[tag, kind, align, pick, raw x4]`
    /// (an allocation takes `how` from the `pick` byte, the others from the `align` byte).
    pub fn decode(b: [u8; 8]) -> Op {
        let raw = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        let size = size_from(b[1], raw);
        match b[0] % 16 {
            0..=6 => Op::Alloc {
                size,
                align_log2: align_log2_from(b[2]),
                zeroed: b[0] / 16 % 4 == 0,
                how: b[3],
            },
            7..=11 => Op::Free {
                pick: b[3] as usize,
                how: b[2],
            },
            _ => Op::Realloc {
                pick: b[3] as usize,
                new_size: size,
                how: b[2],
            },
        }
    }
}

/// A whole sequence from arbitrary bytes (8 per op; a short tail is dropped).
pub fn ops_from_bytes(data: &[u8]) -> Vec<Op> {
    data.chunks_exact(8)
        .map(|c| Op::decode(c.try_into().expect("chunks of 8")))
        .collect()
}

/// The entry points a model drives, and what they promise.
pub trait Entries: Sync {
    /// Whether the caller owns a block's whole usable size (C) or only its request (Rust).
    fn owns_usable(&self) -> bool;
    /// Whether `free(NULL)` and `realloc(NULL, n)` exist (the model calls them when no
    /// block is live).
    fn takes_null(&self) -> bool;
    /// Allocate `size` bytes (reading as zero if `zeroed`) aligned to at least
    /// `2^align_log2` where the API lets the caller ask for it. Returns the block (null
    /// on failure) and the alignment the API promises for it.
    fn alloc(&self, size: usize, align_log2: u8, zeroed: bool, how: u8) -> (*mut u8, usize);
    /// The usable size the API reports for a live block.
    fn usable_size(&self, p: *mut u8) -> usize;
    /// Free a live block allocated as `(size, align)` (or null, if [`Self::takes_null`]).
    ///
    /// # Safety
    /// `p` is such a block and is not used afterwards.
    unsafe fn free(&self, p: *mut u8, size: usize, align: usize, how: u8);
    /// Resize a live block allocated as `(size, align)` (or null with size 0, if
    /// [`Self::takes_null`]).
    ///
    /// # Safety
    /// As for [`Self::free`]; `p` is not used afterwards unless the result is null.
    unsafe fn realloc(
        &self,
        p: *mut u8,
        size: usize,
        align: usize,
        new_size: usize,
        how: u8,
    ) -> Resized;
}

/// What a realloc did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resized {
    /// The resized block (null on failure) and the alignment the API promises for it.
    Block(*mut u8, usize),
    /// The call freed the block and returned no new one (C's `realloc(p, 0)`).
    Freed,
}

/// Which Rust entry points the model drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// `GlobalAlloc` of `hakmem::HakMem`: sized frees, alignment kept across realloc.
    /// The model owns exactly the bytes it asked for.
    Sized,
    /// The C-style entry points: `hakmem_core::alloc(size, 16)`, `free`,
    /// `realloc_unsized`, `usable_size`. The model owns all `usable_size` bytes.
    Unsized,
}

impl Entries for Api {
    fn owns_usable(&self) -> bool {
        *self == Api::Unsized
    }

    fn takes_null(&self) -> bool {
        *self == Api::Unsized
    }

    fn alloc(&self, size: usize, align_log2: u8, zeroed: bool, _how: u8) -> (*mut u8, usize) {
        match self {
            Api::Sized => {
                let align = 1usize << align_log2.min(MAX_ALIGN_LOG2);
                let layout = Layout::from_size_align(size, align).expect("valid layout");
                // SAFETY: hakmem serves every layout, size 0 included (its `alloc` gives a
                // real block), so the zero-size rule of `GlobalAlloc` is not needed here.
                let p = unsafe {
                    if zeroed {
                        hakmem::HakMem.alloc_zeroed(layout)
                    } else {
                        hakmem::HakMem.alloc(layout)
                    }
                };
                (p, align)
            }
            Api::Unsized if zeroed => (hakmem_core::alloc_zeroed(size, 16), 16),
            Api::Unsized => (hakmem_core::alloc(size, 16), 16),
        }
    }

    fn usable_size(&self, p: *mut u8) -> usize {
        sampled_usable(p).unwrap_or_else(|| hakmem_core::usable_size(p))
    }

    unsafe fn free(&self, p: *mut u8, size: usize, align: usize, _how: u8) {
        // SAFETY: by the caller, a live block with the request it was made with.
        unsafe {
            match self {
                Api::Sized => {
                    hakmem::HakMem.dealloc(p, Layout::from_size_align_unchecked(size, align))
                }
                Api::Unsized => hakmem_core::free(p),
            }
        }
    }

    unsafe fn realloc(
        &self,
        p: *mut u8,
        size: usize,
        align: usize,
        new_size: usize,
        _how: u8,
    ) -> Resized {
        // SAFETY: by the caller, a live block with its request (or null for `Unsized`).
        let q = unsafe {
            match self {
                Api::Sized => hakmem::HakMem.realloc(
                    p,
                    Layout::from_size_align_unchecked(size, align),
                    new_size,
                ),
                Api::Unsized => hakmem_core::realloc_unsized(p, new_size),
            }
        };
        Resized::Block(q, align)
    }
}

#[derive(Clone, Copy, Debug)]
struct Live {
    ptr: *mut u8,
    size: usize,
    align: usize,
    /// Bytes the model writes and checks: `size`, or the usable size when the API gives
    /// the caller all of it.
    extent: usize,
    id: u64,
}

// SAFETY: a live block is plain memory that only the model holding its `Live` touches;
// handing the `Live` to another thread hands over the block.
unsafe impl Send for Live {}

/// Start of each live block's range -> (end, id), shared by the models of all threads.
type Ranges = Mutex<BTreeMap<usize, (usize, u64)>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

struct Model<'a, E> {
    entries: &'a E,
    live: Vec<Live>,
    ranges: &'a Ranges,
    live_bytes: usize,
    next_id: u64,
}

/// Run `ops` against the Rust API `api` (see [`run_with`]).
pub fn run(ops: &[Op], api: Api) {
    run_with(ops, &api);
}

/// Run `ops` against `entries`, panicking at the first broken property; every block still
/// live at the end is checked and freed.
pub fn run_with<E: Entries>(ops: &[Op], entries: &E) {
    let ranges = Ranges::default();
    let mut m = Model::new(entries, &ranges, 0);
    for (step, op) in ops.iter().enumerate() {
        m.step(step, *op);
    }
    m.finish();
    assert!(lock(&ranges).is_empty());
}

/// Run `ops` on `threads` threads, thread `t` taking ops `t`, `t + threads`, ... A free
/// whose `how` is 192 or more hands the block to the next thread instead, which frees or
/// reallocs it later; blocks still in a thread's mailbox when every thread is done are
/// freed by the calling thread, after their allocating threads exited. Step numbers in
/// messages are indexes into `ops`.
pub fn run_threads<E: Entries>(ops: &[Op], entries: &E, threads: usize) {
    let ranges = Ranges::default();
    let mailboxes: Vec<Mutex<Vec<Live>>> = (0..threads).map(|_| Mutex::default()).collect();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (ranges, mailboxes) = (&ranges, &mailboxes);
            s.spawn(move || {
                let mut m = Model::new(entries, ranges, t);
                for (step, op) in ops.iter().enumerate().skip(t).step_by(threads) {
                    m.take_mail(&mailboxes[t]);
                    match *op {
                        Op::Free { pick, how } if how >= 192 && !m.live.is_empty() => {
                            let b = m.live.swap_remove(pick % m.live.len());
                            m.live_bytes -= b.size;
                            lock(&mailboxes[(t + 1) % threads]).push(b);
                        }
                        op => m.step(step, op),
                    }
                }
                m.take_mail(&mailboxes[t]);
                m.finish();
            });
        }
    });
    let mut m = Model::new(entries, &ranges, threads);
    for mailbox in &mailboxes {
        m.take_mail(mailbox);
    }
    m.finish();
    assert!(lock(&ranges).is_empty());
}

impl<'a, E: Entries> Model<'a, E> {
    /// The model of thread `t` (block ids carry `t` in their high bits).
    fn new(entries: &'a E, ranges: &'a Ranges, t: usize) -> Self {
        Model {
            entries,
            live: Vec::new(),
            ranges,
            live_bytes: 0,
            next_id: (t as u64) << 40,
        }
    }

    fn take_mail(&mut self, mailbox: &Mutex<Vec<Live>>) {
        for b in lock(mailbox).drain(..) {
            self.live_bytes += b.size;
            self.live.push(b);
        }
    }

    /// Check and free every block still live.
    fn finish(mut self) {
        while let Some(b) = self.live.pop() {
            self.release(b, 0, "at the end");
        }
    }

    fn step(&mut self, step: usize, op: Op) {
        match op {
            Op::Alloc {
                size,
                align_log2,
                zeroed,
                how,
            } => {
                if self.live_bytes + size > LIVE_CAP {
                    return;
                }
                let (p, align) = self.entries.alloc(size, align_log2, zeroed, how);
                assert!(
                    !p.is_null(),
                    "step {step}: alloc({size}, 2^{align_log2}) failed"
                );
                if zeroed {
                    // SAFETY: a fresh block of at least `size` bytes.
                    if let Some(k) = unsafe { common::nonzero(p, size) } {
                        panic!(
                            "step {step}: zeroed alloc({size}, 2^{align_log2}) = {p:p}: byte {k} not zero"
                        );
                    }
                }
                self.admit_fresh(step, p, size, align);
            }
            Op::Free { pick, how } => {
                if self.live.is_empty() {
                    if self.entries.takes_null() {
                        // SAFETY: free(null) is a no-op.
                        unsafe { self.entries.free(null_mut(), 0, 16, how) };
                    }
                    return;
                }
                let b = self.live.swap_remove(pick % self.live.len());
                self.release(b, how, &format!("step {step}: free"));
            }
            Op::Realloc {
                pick,
                new_size,
                how,
            } => {
                if self.live.is_empty() {
                    if self.entries.takes_null() && new_size <= LIVE_CAP {
                        // SAFETY: realloc(null, n) is malloc(n).
                        let r = unsafe { self.entries.realloc(null_mut(), 0, 16, new_size, how) };
                        let Resized::Block(p, align) = r else {
                            panic!("step {step}: realloc(null, {new_size}) returned no block");
                        };
                        assert!(
                            !p.is_null(),
                            "step {step}: realloc(null, {new_size}) failed"
                        );
                        self.admit_fresh(step, p, new_size, align);
                    }
                    return;
                }
                let i = pick % self.live.len();
                let old = self.live[i];
                if self.live_bytes - old.size + new_size > LIVE_CAP {
                    return;
                }
                self.live.swap_remove(i);
                self.realloc(step, old, new_size, how);
            }
        }
    }

    /// Record a new block under a new id and fill it with its pattern.
    #[track_caller]
    fn admit_fresh(&mut self, step: usize, p: *mut u8, size: usize, align: usize) {
        let b = self.admit(step, p, size, align, None);
        // SAFETY: the model owns `extent` bytes of the block.
        unsafe { common::fill(p, 0, b.extent, b.id) };
    }

    /// Check a fresh block against the model and record it, under a new id unless it is
    /// the result of a realloc (which keeps the old block's id and pattern).
    #[track_caller]
    fn admit(
        &mut self,
        step: usize,
        p: *mut u8,
        size: usize,
        align: usize,
        id: Option<u64>,
    ) -> Live {
        assert_eq!(
            p as usize % align,
            0,
            "step {step}: block {p:p} of {size} bytes not aligned to {align}"
        );
        let block = match hakmem_core::owner(p) {
            _ if sampled_usable(p).is_some() => sampled_usable(p).unwrap(),
            Owner::Small { usable, .. } | Owner::Large { usable } => usable,
            o => panic!("step {step}: fresh block {p:p} of {size} bytes is {o:?}"),
        };
        let usable = self.entries.usable_size(p);
        assert!(
            size <= usable && usable <= block,
            "step {step}: block {p:p}: usable size {usable} not in {size}..={block} \
             (requested..=the block's)"
        );
        let start = p as usize;
        let end = start + block.max(1);
        let id = id.unwrap_or_else(|| {
            self.next_id += 1;
            self.next_id
        });
        {
            let mut ranges = lock(self.ranges);
            if let Some((&s, &(e, other))) = ranges.range(..end).next_back() {
                assert!(
                    e <= start,
                    "step {step}: new block {start:#x}..{end:#x} ({size} bytes, align {align}) \
                     overlaps live block {other} at {s:#x}..{e:#x}"
                );
            }
            ranges.insert(start, (end, id));
        }
        self.live_bytes += size;
        let extent = if self.entries.owns_usable() {
            usable
        } else {
            size
        };
        let b = Live {
            ptr: p,
            size,
            align,
            extent,
            id,
        };
        self.live.push(b);
        b
    }

    /// Drop a block from the record of live ranges: before it is freed, since from then
    /// on its memory may go to another thread.
    fn forget(&mut self, b: &Live) {
        let r = lock(self.ranges).remove(&(b.ptr as usize));
        assert_eq!(r.map(|(_, id)| id), Some(b.id), "model lost block {}", b.id);
        self.live_bytes -= b.size;
    }

    /// Check the block's pattern, then free it.
    fn release(&mut self, b: Live, how: u8, what: &str) {
        // SAFETY: the model owns `extent` bytes of the live block.
        unsafe { common::check(b.ptr, 0, b.extent, b.id, what) };
        self.forget(&b);
        // SAFETY: a live block, given with the request it was made with.
        unsafe { self.entries.free(b.ptr, b.size, b.align, how) };
    }

    fn realloc(&mut self, step: usize, old: Live, new_size: usize, how: u8) {
        let what = format!("step {step}: realloc {} -> {new_size}", old.size);
        // SAFETY: the model owns `extent` bytes of the live block.
        unsafe { common::check(old.ptr, 0, old.extent, old.id, &what) };
        self.forget(&old);
        // SAFETY: a live block with its request; the model uses `old.ptr` no more.
        let r = unsafe {
            self.entries
                .realloc(old.ptr, old.size, old.align, new_size, how)
        };
        let Resized::Block(q, align) = r else {
            return; // freed, as the API says it may be
        };
        assert!(!q.is_null(), "{what}: failed");
        let b = self.admit(step, q, new_size, align, Some(old.id));
        // Realloc keeps the old contents up to the new size; the C-style realloc copies
        // the whole usable part of the old block.
        let kept = old.extent.min(new_size);
        // SAFETY: the block holds at least `extent >= kept` bytes.
        unsafe {
            common::check(q, 0, kept, b.id, &format!("{what} (moved to {q:p})"));
            common::fill(q, kept, b.extent, b.id);
        }
    }
}

/// The usable size of a block the heap profiler sampled (in the profiler's arena, outside
/// hakmem's chunks, so `owner` calls it foreign); `None` for any other block. (The C
/// API's model mounts this file too, in a crate without the feature.)
#[allow(unexpected_cfgs)]
fn sampled_usable(p: *mut u8) -> Option<usize> {
    #[cfg(feature = "heap-profile")]
    if hakmem::heap_profile::is_sampled(p) {
        // SAFETY: a live sampled block.
        return Some(unsafe { hakmem::heap_profile::usable_size_sampled(p) });
    }
    let _ = p;
    None
}
