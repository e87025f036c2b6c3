//! A shadow model of the allocator: run a sequence of [`Op`]s against hakmem and check,
//! against a model of what is live, that
//!
//! - every block is non-null, aligned, and owned by hakmem (`owner`, `usable_size`),
//! - no two live blocks overlap (the model keeps their ranges in a `BTreeMap`),
//! - a block keeps the pattern written into it (checked on free and across realloc up to
//!   the bytes realloc must preserve),
//! - `alloc_zeroed` memory reads as zero.
//!
//! A library, not a test: the proptest in `shadow_model.rs`, its seeded runs and a fuzz
//! target (`#[path]` to this file and to `tests/common/mod.rs`, mounted as `crate::common`,
//! feeding [`ops_from_bytes`]) all call [`run`].
//!
//! The model calls hakmem directly, never as the global allocator, so its own `Vec` and
//! `BTreeMap` allocations do not disturb what it watches.

use std::alloc::{GlobalAlloc, Layout};
use std::collections::BTreeMap;

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

/// One step of a sequence. `pick` chooses a live block (modulo their number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Alloc {
        size: usize,
        align_log2: u8,
        zeroed: bool,
    },
    Free {
        pick: usize,
    },
    Realloc {
        pick: usize,
        new_size: usize,
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
    /// Bytes a fuzzer (or proptest) hands over, as an op: `[tag, kind, align, pick, raw x4]`.
    pub fn decode(b: [u8; 8]) -> Op {
        let raw = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        let size = size_from(b[1], raw);
        match b[0] % 16 {
            0..=6 => Op::Alloc {
                size,
                align_log2: align_log2_from(b[2]),
                zeroed: b[0] / 16 % 4 == 0,
            },
            7..=11 => Op::Free {
                pick: b[3] as usize,
            },
            _ => Op::Realloc {
                pick: b[3] as usize,
                new_size: size,
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

/// Which entry points the model drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// `GlobalAlloc` of `hakmem::HakMem`: sized frees, alignment kept across realloc.
    /// The model owns exactly the bytes it asked for.
    Sized,
    /// The C-style entry points: `hakmem_core::alloc(size, 16)`, `free`,
    /// `realloc_unsized`, `usable_size`. The model owns all `usable_size` bytes.
    Unsized,
}

#[derive(Clone, Copy, Debug)]
struct Live {
    ptr: *mut u8,
    size: usize,
    align: usize,
    /// Bytes the model writes and checks: `size`, or `usable_size` for [`Api::Unsized`].
    extent: usize,
    id: u64,
}

struct Model {
    api: Api,
    live: Vec<Live>,
    /// Start of each live block's usable range -> (end, id).
    ranges: BTreeMap<usize, (usize, u64)>,
    live_bytes: usize,
    next_id: u64,
}

/// Run `ops` against hakmem, panicking at the first broken property; every block still
/// live at the end is checked and freed.
pub fn run(ops: &[Op], api: Api) {
    let mut m = Model {
        api,
        live: Vec::new(),
        ranges: BTreeMap::new(),
        live_bytes: 0,
        next_id: 0,
    };
    for (step, op) in ops.iter().enumerate() {
        m.step(step, *op);
    }
    while let Some(b) = m.live.pop() {
        m.release(b, "at the end");
    }
    assert!(m.ranges.is_empty());
}

impl Model {
    fn step(&mut self, step: usize, op: Op) {
        match op {
            Op::Alloc {
                size,
                align_log2,
                zeroed,
            } => {
                let align = match self.api {
                    Api::Sized => 1usize << align_log2.min(MAX_ALIGN_LOG2),
                    Api::Unsized => 16,
                };
                if self.live_bytes + size > LIVE_CAP {
                    return;
                }
                let p = self.alloc(size, align, zeroed);
                assert!(!p.is_null(), "step {step}: alloc({size}, {align}) failed");
                if zeroed {
                    // SAFETY: a fresh block of at least `size` bytes.
                    if let Some(k) = unsafe { common::nonzero(p, size) } {
                        panic!(
                            "step {step}: alloc_zeroed({size}, {align}) = {p:p}: byte {k} not zero"
                        );
                    }
                }
                let b = self.admit(step, p, size, align, None);
                // SAFETY: the model owns `extent` bytes of the block.
                unsafe { common::fill(p, 0, b.extent, b.id) };
            }
            Op::Free { pick } => {
                if self.live.is_empty() {
                    if self.api == Api::Unsized {
                        // SAFETY: free(null) is a no-op.
                        unsafe { hakmem_core::free(std::ptr::null_mut()) };
                    }
                    return;
                }
                let b = self.live.swap_remove(pick % self.live.len());
                self.release(b, &format!("step {step}: free"));
            }
            Op::Realloc { pick, new_size } => {
                if self.live.is_empty() {
                    if self.api == Api::Unsized && new_size <= LIVE_CAP {
                        // SAFETY: realloc(null, n) is malloc(n).
                        let p =
                            unsafe { hakmem_core::realloc_unsized(std::ptr::null_mut(), new_size) };
                        assert!(
                            !p.is_null(),
                            "step {step}: realloc(null, {new_size}) failed"
                        );
                        let b = self.admit(step, p, new_size, 16, None);
                        // SAFETY: the model owns `extent` bytes of the block.
                        unsafe { common::fill(p, 0, b.extent, b.id) };
                    }
                    return;
                }
                let i = pick % self.live.len();
                let old = self.live[i];
                if self.live_bytes - old.size + new_size > LIVE_CAP {
                    return;
                }
                self.live.swap_remove(i);
                self.realloc(step, old, new_size);
            }
        }
    }

    fn alloc(&mut self, size: usize, align: usize, zeroed: bool) -> *mut u8 {
        match self.api {
            Api::Sized => {
                let layout = Layout::from_size_align(size, align).expect("valid layout");
                // SAFETY: hakmem serves every layout, size 0 included (its `alloc` gives a
                // real block), so the zero-size rule of `GlobalAlloc` is not needed here.
                unsafe {
                    if zeroed {
                        hakmem::HakMem.alloc_zeroed(layout)
                    } else {
                        hakmem::HakMem.alloc(layout)
                    }
                }
            }
            Api::Unsized if zeroed => hakmem_core::alloc_zeroed(size, align),
            Api::Unsized => hakmem_core::alloc(size, align),
        }
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
        let usable = match hakmem_core::owner(p) {
            Owner::Small { usable, .. } | Owner::Large { usable } => usable,
            o => panic!("step {step}: fresh block {p:p} of {size} bytes is {o:?}"),
        };
        assert_eq!(hakmem_core::usable_size(p), usable);
        assert!(
            usable >= size,
            "step {step}: block {p:p}: usable_size {usable} < requested {size}"
        );
        let start = p as usize;
        let end = start + usable.max(1);
        if let Some((&s, &(e, id))) = self.ranges.range(..end).next_back() {
            assert!(
                e <= start,
                "step {step}: new block {start:#x}..{end:#x} ({size} bytes, align {align}) \
                 overlaps live block {id} at {s:#x}..{e:#x}"
            );
        }
        let id = id.unwrap_or_else(|| {
            self.next_id += 1;
            self.next_id
        });
        self.ranges.insert(start, (end, id));
        self.live_bytes += size;
        let extent = match self.api {
            Api::Sized => size,
            Api::Unsized => usable,
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

    fn forget(&mut self, b: &Live) {
        let r = self.ranges.remove(&(b.ptr as usize));
        assert_eq!(r.map(|(_, id)| id), Some(b.id), "model lost block {}", b.id);
        self.live_bytes -= b.size;
    }

    /// Check the block's pattern, then free it.
    fn release(&mut self, b: Live, what: &str) {
        // SAFETY: the model owns `extent` bytes of the live block.
        unsafe { common::check(b.ptr, 0, b.extent, b.id, what) };
        self.forget(&b);
        // SAFETY: a live block, given with the request it was made with.
        unsafe {
            match self.api {
                Api::Sized => hakmem::HakMem
                    .dealloc(b.ptr, Layout::from_size_align_unchecked(b.size, b.align)),
                Api::Unsized => hakmem_core::free(b.ptr),
            }
        }
    }

    fn realloc(&mut self, step: usize, old: Live, new_size: usize) {
        let what = format!("step {step}: realloc {} -> {new_size}", old.size);
        // SAFETY: the model owns `extent` bytes of the live block.
        unsafe { common::check(old.ptr, 0, old.extent, old.id, &what) };
        // SAFETY: a live block with its request; the model uses `old.ptr` no more.
        let q = unsafe {
            match self.api {
                Api::Sized => hakmem::HakMem.realloc(
                    old.ptr,
                    Layout::from_size_align_unchecked(old.size, old.align),
                    new_size,
                ),
                Api::Unsized => hakmem_core::realloc_unsized(old.ptr, new_size),
            }
        };
        assert!(!q.is_null(), "{what}: failed");
        self.forget(&old);
        let b = self.admit(step, q, new_size, old.align, Some(old.id));
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
