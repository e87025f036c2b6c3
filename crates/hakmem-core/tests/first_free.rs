//! A thread whose first use of a small class is the free of another thread's block gives
//! that block back to its owner: its first allocation of the class is then a block of its
//! own, not one lying on a cache line its maker may still be writing (Hoard's
//! cache-scratch). The foreign blocks it frees after that join its cache: over 1 KiB as
//! its own do, up to 1 KiB under its newest block of its own, so that its next allocation
//! still gets its own block (the same test, with a warm bin: `cache-scratch-warm`).
//!
//! Its own process: the blocks the main thread hands over come from a heap and a depot
//! that no other test touches.

use hakmem_core::{alloc, dealloc, free};

/// On a new thread, which first allocates and frees a block of `warm_up` bytes when
/// asked (its heap then set up before the free), free one of two blocks of `size` bytes
/// the main thread made, allocate that size, then free the other and allocate again.
fn first_free(size: usize, warm_up: Option<usize>) {
    let given = alloc(size, 8) as usize;
    let next = alloc(size, 8) as usize;
    assert!(given != 0 && next != 0);
    std::thread::spawn(move || {
        if let Some(other) = warm_up {
            let p = alloc(other, 8);
            assert!(!p.is_null());
            // SAFETY: a live block of `(other, 8)`, given up.
            unsafe { dealloc(p, other, 8) };
        }
        // SAFETY: a live block that the other thread handed over.
        unsafe { free(given as *mut u8) };
        let own = alloc(size, 8);
        assert!(!own.is_null());
        assert_ne!(
            own as usize, given,
            "{size} B: the first block is the one given"
        );
        // SAFETY: as above.
        unsafe { free(next as *mut u8) };
        let again = alloc(size, 8);
        if size <= 1024 {
            assert_ne!(
                again as usize, next,
                "{size} B: a warm bin handed the foreign block out first"
            );
            let then = alloc(size, 8);
            assert_eq!(
                then as usize, next,
                "{size} B: the foreign block is not second in the warm bin"
            );
            // SAFETY: a live block, given up.
            unsafe { free(then) };
        } else {
            assert_eq!(
                again as usize, next,
                "{size} B: a warm bin gave a foreign block back"
            );
        }
        // SAFETY: live blocks, given up.
        unsafe {
            free(again);
            free(own);
        }
    })
    .join()
    .unwrap();
}

#[test]
fn a_threads_first_free_of_a_class_gives_another_threads_block_back() {
    // The thread's first call: the free sets it up.
    first_free(8, None);
    // A class whose flushes go to the depot (over 1 KiB): the block must not wait there
    // for the thread's first miss.
    first_free(2048, None);
    // The heap set up by another class first: the bin alone is new.
    first_free(8, Some(256));
    first_free(2048, Some(256));
}
