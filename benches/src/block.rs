//! A heap block obtained from the global allocator and touched like real data.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

/// The alignment of every block: what `malloc` guarantees for small objects.
const ALIGN: usize = 8;

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
        let layout = Layout::from_size_align(size.max(1), ALIGN).expect("block size");
        // SAFETY: the layout has a non-zero size.
        let ptr =
            NonNull::new(unsafe { alloc(layout) }).unwrap_or_else(|| handle_alloc_error(layout));
        // SAFETY: both offsets are inside the `layout.size()` bytes just allocated.
        unsafe {
            ptr.as_ptr().write(size as u8);
            ptr.as_ptr().add(layout.size() - 1).write(1);
        }
        Block {
            ptr,
            size: layout.size(),
        }
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
