//! A thread whose first use of a small class is the free of another thread's block gives
//! that block back to its owner: its first allocation of the class is then a block of its
//! own, not one lying on a cache line its maker may still be writing (Hoard's
//! cache-scratch). The foreign blocks it frees after that join its cache as its own do.
//!
//! Its own process with one test: the thread's bins start empty.

use hakmem_core::{alloc, free};

#[test]
fn a_threads_first_free_of_a_class_gives_another_threads_block_back() {
    let given = alloc(8, 8) as usize;
    let next = alloc(8, 8) as usize;
    assert!(given != 0 && next != 0);
    std::thread::spawn(move || {
        // SAFETY: a live block that the other thread handed over.
        unsafe { free(given as *mut u8) };
        let own = alloc(8, 8);
        assert!(!own.is_null());
        assert_ne!(
            own as usize, given,
            "the first block of the class is the one given"
        );
        // SAFETY: as above.
        unsafe { free(next as *mut u8) };
        let again = alloc(8, 8);
        assert_eq!(
            again as usize, next,
            "a warm bin gave another thread's block back"
        );
        // SAFETY: live blocks, given up.
        unsafe {
            free(again);
            free(own);
        }
    })
    .join()
    .unwrap();
}
