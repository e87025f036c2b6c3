//! An empty superslab in the pool goes to a thread that wants the kind of blocks it held
//! before (small or wide), so that its resident pages serve the same kind again.
//!
//! The pool is process-wide, so this binary holds one test: nothing else in the process
//! allocates from hakmem while it runs (the harness uses the system allocator).

use hakmem_core::{alloc, dealloc, CHUNK_SIZE};

const SMALL: usize = 64;
const WIDE: usize = 20 << 10;

fn chunk(p: *mut u8) -> usize {
    assert!(!p.is_null());
    p as usize & !(CHUNK_SIZE - 1)
}

/// On a thread of its own (whose exit gives its superslabs back to the pool): allocate a
/// block of each size in `order`, free them, and return the chunk of each size (small,
/// wide).
fn chunks_on_a_new_thread(order: [usize; 2]) -> (usize, usize) {
    std::thread::spawn(move || {
        let blocks = order.map(|size| alloc(size, 16));
        let chunks = blocks.map(chunk);
        for (p, size) in blocks.into_iter().zip(order) {
            // SAFETY: allocated above with this size and alignment.
            unsafe { dealloc(p, size, 16) };
        }
        if order[0] == SMALL {
            (chunks[0], chunks[1])
        } else {
            (chunks[1], chunks[0])
        }
    })
    .join()
    .expect("worker")
}

#[test]
fn an_empty_superslab_serves_the_kind_it_held() {
    let first = chunks_on_a_new_thread([WIDE, SMALL]);
    assert_ne!(first.0, first.1, "small and wide blocks share no superslab");
    // The exiting thread gave both back in some order; a thread asking for one kind
    // first gets the superslab of that kind whichever is the newest, so one of these
    // two orders fails when the pool hands out the newest of any kind.
    for order in [[SMALL, WIDE], [WIDE, SMALL]] {
        assert_eq!(chunks_on_a_new_thread(order), first, "{order:?}");
    }
}
