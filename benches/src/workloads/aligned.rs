//! Aligned churn: blocks asked for with an alignment over 16 bytes, as SIMD vectors,
//! cache-line-padded counters and queues (`#[repr(align(64))]`, C++'s `alignas`), and
//! page-aligned I/O buffers are.
//!
//! One thread, 1000 slots: each operation frees a random slot and allocates in its place
//! a block of 16..1024 bytes aligned to 32, 64 or 128 bytes, or, one time in sixteen, a
//! buffer of 4..16 KiB aligned to a page; each block is written at both ends.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

use crate::Rng;

const SLOTS: usize = 1000;
const PAGE: usize = 4096;

pub fn aligned(ops: u64) -> u64 {
    let mut slots: Vec<Option<Aligned>> = (0..SLOTS).map(|_| None).collect();
    let mut rng = Rng::new(0);
    for _ in 0..ops {
        let slot = &mut slots[rng.below(SLOTS)];
        drop(slot.take());
        let layout = if rng.below(16) == 0 {
            Layout::from_size_align(rng.between((PAGE, 4 * PAGE)), PAGE)
        } else {
            Layout::from_size_align(rng.between((16, 1024)), 32 << rng.below(3))
        };
        *slot = Some(Aligned::new(layout.expect("aligned layout")));
    }
    ops
}

/// A block allocated with its own alignment, written at both ends, freed on drop.
struct Aligned {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl Aligned {
    fn new(layout: Layout) -> Aligned {
        // SAFETY: the layout has a non-zero size.
        let ptr =
            NonNull::new(unsafe { alloc(layout) }).unwrap_or_else(|| handle_alloc_error(layout));
        assert_eq!(
            ptr.as_ptr() as usize % layout.align(),
            0,
            "misaligned block"
        );
        // SAFETY: both offsets are inside the block's `layout.size()` bytes (at least 16).
        unsafe {
            ptr.as_ptr().write(1);
            ptr.as_ptr().add(layout.size() - 1).write(1);
        }
        Aligned { ptr, layout }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: `ptr` holds a block from `alloc` with this layout, freed once.
        unsafe {
            std::hint::black_box(self.ptr.as_ptr().read());
            dealloc(self.ptr.as_ptr(), self.layout);
        }
    }
}
