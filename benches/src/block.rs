//! A heap block obtained from the global allocator and touched like real data.

use std::alloc::{alloc, alloc_zeroed, dealloc, handle_alloc_error, realloc, Layout};
use std::ptr::NonNull;

/// The alignment of every block: what `malloc` guarantees for small objects.
const ALIGN: usize = 8;
/// The page size the big-buffer workloads touch their buffers by.
const PAGE: usize = 4096;

/// `size` bytes from the global allocator, freed on drop. Its first and last bytes are
/// written when it is made and read when it is freed, so the memory is really used.
pub struct Block {
    ptr: NonNull<u8>,
    size: usize,
}

// SAFETY: a `Block` owns its memory alone; the global allocator accepts frees from any thread.
unsafe impl Send for Block {}

impl Block {
    /// Allocate `size` (at least 1) bytes and write a byte at each end.
    pub fn new(size: usize) -> Block {
        let layout = layout(size);
        // SAFETY: the layout has a non-zero size.
        let block = Block::own(unsafe { alloc(layout) }, layout);
        block.write_ends();
        block
    }

    /// Allocate `size` (at least 1) zero-filled bytes (`calloc`), check that the bytes at
    /// both ends are zero and write a byte at each end.
    pub fn new_zeroed(size: usize) -> Block {
        let layout = layout(size);
        // SAFETY: the layout has a non-zero size.
        let block = Block::own(unsafe { alloc_zeroed(layout) }, layout);
        // SAFETY: both offsets are inside the block's `size` (at least 1) bytes.
        let ends = unsafe {
            [
                block.ptr.as_ptr().read(),
                block.ptr.as_ptr().add(block.size - 1).read(),
            ]
        };
        assert_eq!(ends, [0, 0], "alloc_zeroed gave memory that is not zero");
        block.write_ends();
        block
    }

    /// Allocate `size` (at least 1) bytes and write the first `written` of them (1 up to
    /// `size`), as a buffer sized for the largest message holds a shorter one; the rest
    /// of the block is never touched.
    pub fn new_front(size: usize, written: usize) -> Block {
        let layout = layout(size);
        // SAFETY: the layout has a non-zero size.
        let block = Block::own(unsafe { alloc(layout) }, layout);
        let written = written.clamp(1, block.size);
        // SAFETY: the first `written` bytes are inside the block.
        unsafe { block.ptr.as_ptr().write_bytes(written as u8, written) };
        block
    }

    /// Take ownership of what `alloc` returned for `layout`, failing if it is null.
    fn own(ptr: *mut u8, layout: Layout) -> Block {
        let ptr = NonNull::new(ptr).unwrap_or_else(|| handle_alloc_error(layout));
        Block {
            ptr,
            size: layout.size(),
        }
    }

    fn write_ends(&self) {
        // SAFETY: both offsets are inside the block's `size` (at least 1) bytes.
        unsafe {
            self.ptr.as_ptr().write(self.size as u8);
            self.ptr.as_ptr().add(self.size - 1).write(1);
        }
    }

    /// Write one byte in every 4 KiB of the block, so that every page is really used.
    pub fn write_pages(&mut self) {
        self.write_pages_from(0);
    }

    /// [`Block::write_pages`] from byte `start` on (the part a resize added).
    pub fn write_pages_from(&mut self, start: usize) {
        for offset in (start..self.size).step_by(PAGE) {
            // SAFETY: `offset` is inside the block's `size` bytes.
            unsafe { self.ptr.as_ptr().add(offset).write(offset as u8) };
        }
    }

    /// Write `value` at `offset` after checking that the byte there is zero (a block from
    /// `alloc_zeroed` written at a few places, as a table sized ahead fills).
    pub fn set_zero_byte(&mut self, offset: usize, value: u8) {
        assert!(offset < self.size, "offset {offset} past the block");
        // SAFETY: `offset` is inside the block's `size` bytes.
        let b = unsafe { self.ptr.as_ptr().add(offset) };
        // SAFETY: as above.
        let old = unsafe { b.read() };
        assert_eq!(old, 0, "alloc_zeroed gave memory that is not zero");
        // SAFETY: as above.
        unsafe { b.write(value) };
    }

    /// The block's address, to see where the allocator put it.
    pub fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// Add one to every byte of the block, `rounds` times over, each byte read and written
    /// through memory (a counter or a small struct the thread keeps updating).
    pub fn scribble(&mut self, rounds: usize) {
        for _ in 0..rounds {
            for offset in 0..self.size {
                // SAFETY: `offset` is inside the block's `size` bytes.
                unsafe {
                    let b = self.ptr.as_ptr().add(offset);
                    b.write_volatile(b.read_volatile().wrapping_add(1));
                }
            }
        }
    }

    /// Grow or shrink the block to `size` (at least 1) bytes with `realloc`, then write a
    /// byte at each end.
    pub fn resize(&mut self, size: usize) {
        let new = layout(size);
        // SAFETY: `ptr` holds `self.size` bytes from the global allocator with this
        // alignment, and the new size is non-zero; on success the old pointer is dead.
        let ptr = unsafe { realloc(self.ptr.as_ptr(), layout(self.size), new.size()) };
        self.ptr = NonNull::new(ptr).unwrap_or_else(|| handle_alloc_error(new));
        self.size = new.size();
        self.write_ends();
    }

    /// Its size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The block's memory, no longer freed on drop: its address and size.
    pub fn into_raw(self) -> (NonNull<u8>, usize) {
        let raw = (self.ptr, self.size);
        std::mem::forget(self);
        raw
    }

    /// Take back a block given up by [`Block::into_raw`].
    ///
    /// # Safety
    /// `ptr` and `size` come from one `into_raw`, and the block is taken back once. Its
    /// bytes may have been changed meanwhile.
    pub unsafe fn from_raw(ptr: NonNull<u8>, size: usize) -> Block {
        Block { ptr, size }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: `ptr` holds `size` bytes from `alloc` with this layout, and is freed once.
        unsafe {
            std::hint::black_box(self.ptr.as_ptr().read());
            dealloc(
                self.ptr.as_ptr(),
                Layout::from_size_align_unchecked(self.size, ALIGN),
            );
        }
    }
}

/// The layout of a block of `size` bytes (at least 1).
fn layout(size: usize) -> Layout {
    Layout::from_size_align(size.max(1), ALIGN).expect("block size")
}
