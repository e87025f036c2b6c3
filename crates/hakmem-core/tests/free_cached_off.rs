//! `stop_free_cached` turns `free`'s fast path off for good: `free_cached` then frees
//! nothing and `stays_in_place`, `realloc_cached` and `usable_size_cached` say no, while
//! `free_or_else` still frees every block by the chunk map. Its own process: the switch
//! cannot be turned back.

use hakmem_core::{alloc, free_cached, free_or_else, stays_in_place, stop_free_cached};
use hakmem_core::{block_size, class_for, realloc_cached, usable_size_cached};

const SIZE: usize = 64;

fn block() -> *mut u8 {
    let p = alloc(SIZE, 16);
    assert!(!p.is_null());
    p
}

#[test]
fn a_stopped_fast_path_frees_nothing_and_the_full_one_frees_all() {
    let p = block();
    assert!(stays_in_place(p, SIZE), "the slab map knows a fresh block");
    let usable = block_size(class_for(SIZE, 16).unwrap());
    assert_eq!(usable_size_cached(p), Some(usable));
    // SAFETY: a live block, resized within its class (it stays).
    assert_eq!(unsafe { realloc_cached(p, SIZE) }, Some(p));
    // SAFETY: a live block, given up here.
    assert!(unsafe { free_cached(p) }, "the fast path frees it");

    stop_free_cached();
    let q = block();
    assert!(!stays_in_place(q, SIZE));
    assert_eq!(usable_size_cached(q), None);
    // SAFETY: a live block, left alone by a fast path that is off.
    assert_eq!(unsafe { realloc_cached(q, 4 * SIZE) }, None);
    // SAFETY: a live block, left alone by a fast path that is off.
    assert!(!unsafe { free_cached(q) });
    // SAFETY: the same live block, given up once.
    unsafe { free_or_else(q, |p, why| panic!("{p:?} not freed: {why:?}")) };
    let r = block();
    assert_eq!(r, q, "the block went back to the thread's cache");
    // SAFETY: a live block, given up once.
    unsafe { free_or_else(r, |p, why| panic!("{p:?} not freed: {why:?}")) };
}
