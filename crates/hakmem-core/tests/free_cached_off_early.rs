//! `stop_free_cached` before the process's first allocation (as `libhakmem.so` does when
//! checked mode is decided at its first call): the slab map, reserved afterwards at
//! process set-up, stays closed, and every free is classified in full. Its own process:
//! nothing may allocate from hakmem before the switch.

use hakmem_core::{alloc, free_cached, free_or_else, stays_in_place, stop_free_cached};

#[test]
fn a_fast_path_stopped_before_set_up_stays_stopped() {
    stop_free_cached();
    let p = alloc(64, 16);
    assert!(!p.is_null());
    assert!(!stays_in_place(p, 64));
    // SAFETY: a live block, left alone by a fast path that is off.
    assert!(!unsafe { free_cached(p) });
    // SAFETY: the same live block, given up once.
    unsafe { free_or_else(p, |p, why| panic!("{p:?} not freed: {why:?}")) };
}
