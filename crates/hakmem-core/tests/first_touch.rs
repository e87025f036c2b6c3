//! A thread that makes its first allocation while another thread is still inside the
//! process's one-time set-up must still be registered for the thread-exit hook, or its
//! heap is never retired: its cached blocks and its superslab stay with a thread that is
//! gone.
//!
//! To meet inside the set-up on purpose, this binary interposes `getenv` (which the
//! set-up calls for `HAKMEM_PROFILE`) and, once armed, makes that one lookup slow. Set-up
//! happens once per process, so the scenario runs in a child process (this binary again
//! with `HAKMEM_FIRST_TOUCH_CHILD` set; `harness = false`, crates/hakmem/tests/harness).

#[path = "../../hakmem/tests/common/mod.rs"]
mod common;
#[path = "../../hakmem/tests/harness/mod.rs"]
mod harness;

use hakmem_core::CHUNK_SIZE;
use hakmem_core::{alloc, dealloc, stats};
use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const CHILD_VAR: &str = "HAKMEM_FIRST_TOUCH_CHILD";

fn main() {
    harness::main(
        CHILD_VAR,
        child,
        &harness::tests![a_thread_arriving_during_set_up_is_registered],
    )
}

/// Whether the lookup of `HAKMEM_PROFILE` is slowed down.
static SLOW_PROFILE_LOOKUP: AtomicBool = AtomicBool::new(false);

/// `getenv` for the whole process: libc's, but 50 ms slow for `HAKMEM_PROFILE` once armed.
/// Allocates nothing.
///
/// # Safety
/// As libc's `getenv`.
#[no_mangle]
pub unsafe extern "C" fn getenv(name: *const c_char) -> *mut c_char {
    type Getenv = unsafe extern "C" fn(*const c_char) -> *mut c_char;
    // SAFETY: a NUL-terminated symbol name; the next `getenv` is libc's, of this type.
    let real: Getenv = unsafe {
        let f = libc::dlsym(libc::RTLD_NEXT, c"getenv".as_ptr());
        assert!(!f.is_null(), "no libc getenv");
        std::mem::transmute::<*mut libc::c_void, Getenv>(f)
    };
    let armed = SLOW_PROFILE_LOOKUP.load(Ordering::SeqCst);
    // SAFETY: the caller passes a C string.
    if armed && unsafe { CStr::from_ptr(name) }.to_bytes() == b"HAKMEM_PROFILE" {
        // SAFETY: usleep has no preconditions.
        unsafe { libc::usleep(50_000) };
    }
    // SAFETY: as the caller's.
    unsafe { real(name) }
}

fn a_thread_arriving_during_set_up_is_registered() {
    let out = common::this_test_binary()
        .env(CHILD_VAR, "1")
        .output()
        .expect("run the child");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The child: thread A makes the process's first allocation and so runs the set-up (50 ms
/// with the slow lookup); thread B makes its first allocation meanwhile. Once both have
/// exited, every superslab must be back in the pool.
fn child(_: &str) {
    let first = || {
        let p = alloc(48, 16);
        assert!(!p.is_null());
        // SAFETY: a fresh block, freed as made.
        unsafe { dealloc(p, 48, 16) };
    };
    SLOW_PROFILE_LOOKUP.store(true, Ordering::SeqCst);
    let a = std::thread::spawn(first);
    std::thread::sleep(Duration::from_millis(10));
    let b = std::thread::spawn(first);
    // `join` (unlike the end of `thread::scope`) returns once the thread's exit hooks ran.
    b.join().unwrap();
    a.join().unwrap();
    SLOW_PROFILE_LOOKUP.store(false, Ordering::SeqCst);
    let st = stats();
    let pooled = st.cached_superslabs + st.abandoned_superslabs;
    // Besides pooled superslabs, only the heaps' own small mapping may remain.
    assert!(
        st.mapped < (pooled + 1) * CHUNK_SIZE,
        "both threads exited, yet {} KiB are mapped and only {pooled} superslabs pooled \
         ({} bytes still allocated): a thread's heap was never retired. {st:?}",
        st.mapped >> 10,
        st.allocated
    );
}
