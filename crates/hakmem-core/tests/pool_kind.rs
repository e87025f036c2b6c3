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
/// block of each size in `order`, free them, and return the chunks they were in.
fn chunks_on_a_new_thread(order: [usize; 2]) -> [usize; 2] {
    std::thread::spawn(move || {
        let blocks = order.map(|size| alloc(size, 16));
        let chunks = blocks.map(chunk);
        for (p, size) in blocks.into_iter().zip(order) {
            // SAFETY: allocated above with this size and alignment.
            unsafe { dealloc(p, size, 16) };
        }
        chunks
    })
    .join()
    .expect("worker")
}

#[test]
fn an_empty_superslab_serves_the_kind_it_held() {
    // Wide first, then small: the thread's exit gives them back in the other order, so
    // the newest empty superslab is the one that held wide blocks.
    let [wide, small] = chunks_on_a_new_thread([WIDE, SMALL]);
    assert_ne!(wide, small, "small and wide blocks share no superslab");
    // A new thread that wants small blocks first gets the superslab that held small
    // ones, not the newest, and its wide blocks go where wide ones were.
    let [small_again, wide_again] = chunks_on_a_new_thread([SMALL, WIDE]);
    assert_eq!(small_again, small);
    assert_eq!(wide_again, wide);
}
