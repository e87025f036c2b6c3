//! Process-wide set-up, done once and without allocating through ourselves: the profile
//! from `HAKMEM_PROFILE`, the thread-exit hook, and the `fork` handlers.
//!
//! Thread exit: a `pthread_key_create` key whose destructor flushes the thread's cache
//! and retires its heap. Creating the key allocates nothing; setting its value may (glibc
//! allocates key storage past the first 32 keys), so it is done after the thread is set
//! up, when a nested allocation simply takes the normal path. std's own thread-local
//! destructors would register through `__cxa_thread_atexit_impl`, which calls `calloc`:
//! we avoid them.
//!
//! Background return (`balanced`, `lean`): a thread that sleeps half the profile's
//! `retain_ms` at a time and gives back retained memory that outstayed it, and what the
//! heaps of threads that made no slow path and used no kept large block for a whole sleep
//! hold ([`heap::upkeep_idle_heaps`]: the depot, their free slabs, their kept large
//! blocks).
//! It is started when memory is retained or a slab is left free ([`crate::retain::want`],
//! [`crate::retain::wake_if_wanted`]) and ends once a sleep found nothing retained and no
//! thread active, so a program that allocates nothing more has no such thread. It never allocates; it takes the pool's, the large
//! cache's and the depot's locks, and a heap only when its thread is not in it.
//!
//! `fork`: a `pthread_atfork` prepare handler takes every heap (first: a thread in its
//! slow path may be waiting for a global lock) and every global lock (the depot's, heap
//! pool, superslab pool, large cache) so that nothing is held mid-update when the child
//! is created; both sides release them. The child's other threads are gone: their heaps'
//! superslabs stay owned by heaps no thread uses (their blocks leak in the child, nothing
//! is corrupted), and the forking thread carries on with its own. (A thread's kept large
//! blocks are used without its heap's lock, `kept::Keeper`: one caught in a use leaves
//! its use count odd in the child, and no visit takes them.)

use crate::config::{self, Profile};
use crate::sync::{AtomicU8, AtomicUsize, Ordering};
use crate::thread_cache::{self, ThreadHooks};
use crate::{heap, large, os, pool, retain};
use core::ffi::c_void;

const UNINIT: u8 = 0;
const RUNNING: u8 = 1;
const READY: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(UNINIT);
/// The pthread key (valid once READY).
static KEY: AtomicUsize = AtomicUsize::new(0);
/// Whether the profile was set in code (then the environment is not read).
static PROFILE_FROM_CODE: AtomicU8 = AtomicU8::new(0);

/// Choose the profile in code; takes precedence over `HAKMEM_PROFILE`.
pub fn set_profile(p: Profile) {
    PROFILE_FROM_CODE.store(1, Ordering::Relaxed);
    config::set_profile(p);
}

/// The thread running the set-up (its thread-cache address), while `STATE == RUNNING`.
static INITIALIZER: AtomicUsize = AtomicUsize::new(0);

/// Set the process up once. Another thread arriving meanwhile waits for it to finish (so
/// that it registers for thread exit and sizes its caches by the chosen profile);
/// re-entry from the thread doing the set-up (the set-up itself allocating) returns at
/// once: nothing in the allocator depends on it being done.
#[cold]
pub fn init() {
    if STATE.load(Ordering::Acquire) == READY {
        return;
    }
    let me = crate::tls::slot() as usize;
    if STATE
        .compare_exchange(UNINIT, RUNNING, Ordering::Acquire, Ordering::Acquire)
        .is_err()
    {
        if INITIALIZER.load(Ordering::Relaxed) != me {
            while STATE.load(Ordering::Acquire) != READY {
                os::yield_now();
            }
        }
        return;
    }
    INITIALIZER.store(me, Ordering::Relaxed);
    if PROFILE_FROM_CODE.load(Ordering::Relaxed) == 0 {
        read_profile_from_env();
    }
    if let Some(key) = os::thread_key_create(on_thread_exit) {
        KEY.store(key + 1, Ordering::Relaxed);
    }
    crate::retain::set_waker(start_returner);
    crate::slab_map::init();
    STATE.store(READY, Ordering::Release);
    // May allocate (glibc keeps the handlers in a growing array): done after READY.
    // The handlers only touch our locks.
    os::at_fork(fork_prepare, fork_parent, fork_child);
}

fn read_profile_from_env() {
    let Some(bytes) = os::getenv(c"HAKMEM_PROFILE") else {
        return;
    };
    match Profile::parse(bytes) {
        Some(p) => config::set_profile(p),
        None => {
            os::write_stderr(b"hakmem: unknown HAKMEM_PROFILE value (expected fast, balanced or lean); using fast\n");
        }
    }
}

/// The hooks the thread cache calls through when it sets a thread up (it lies below
/// this module, so it is handed them as a type parameter by the entry points).
pub struct Hooks;

impl ThreadHooks for Hooks {
    #[inline]
    fn process_init() {
        init();
    }

    #[inline]
    fn thread_started() {
        on_thread_start();
    }
}

/// Register the calling thread with the thread-exit hook.
fn on_thread_start() {
    let key = KEY.load(Ordering::Relaxed);
    if key == 0 {
        return; // no key: the thread's memory is left for adoption-less reuse
    }
    // Any non-null value makes the thread-exit hook run; the thread's slot is one.
    os::thread_key_set(key - 1, crate::tls::slot().cast());
}

extern "C" fn on_thread_exit(_heap: *mut c_void) {
    // SAFETY: key destructors run on the exiting thread, outside any allocator call.
    unsafe { thread_cache::teardown() };
}

const RETURNER_IDLE: u8 = 0;
const RETURNER_RUNNING: u8 = 1;

/// Whether the background return thread runs (`SeqCst`: see [`crate::retain::want`]).
static RETURNER: AtomicU8 = AtomicU8::new(RETURNER_IDLE);

/// Start the background return thread unless it runs (called outside every lock and
/// every heap, often: at the end of every slow path that left a slab free).
fn start_returner() {
    if RETURNER.load(Ordering::SeqCst) == RETURNER_RUNNING {
        return;
    }
    if RETURNER
        .compare_exchange(
            RETURNER_IDLE,
            RETURNER_RUNNING,
            Ordering::AcqRel,
            Ordering::Relaxed,
        )
        .is_err()
    {
        return;
    }
    let started = os::spawn_detached(returner);
    if !started {
        RETURNER.store(RETURNER_IDLE, Ordering::Release);
    }
}

extern "C" fn returner(_: *mut c_void) -> *mut c_void {
    // Here, off the program's threads (milliseconds once, in a process with threads): the
    // threads keep large blocks in this profile only once it is ready (`kept::Access`).
    os::ready_process_barrier();
    loop {
        os::sleep_ms((config::current().retain_ms / 2).max(50));
        retain::take_wanted();
        if os::process_barrier_ready() {
            // The slow side of `retain::want_once`'s pair: a thread that kept a large
            // block and read the flag still set (before the clear above) has its use
            // count seen by the visits below. One barrier a pass.
            os::process_barrier();
        }
        let active = heap::upkeep_idle_heaps();
        let now = os::now_ms();
        pool::expire(now);
        large::expire(now);
        if !active && !retain::wanted() && retain::retained() == 0 {
            RETURNER.store(RETURNER_IDLE, Ordering::SeqCst);
            // A wake between the check and the store found the thread running and did
            // not start one: carry on for it if nobody else did.
            let again = (retain::wanted() || retain::retained() > 0)
                && RETURNER
                    .compare_exchange(
                        RETURNER_IDLE,
                        RETURNER_RUNNING,
                        Ordering::AcqRel,
                        Ordering::Relaxed,
                    )
                    .is_ok();
            if !again {
                return core::ptr::null_mut();
            }
        }
    }
}

extern "C" fn fork_prepare() {
    // The heaps first: a thread holding its heap may be waiting for the others.
    crate::heap::lock_for_fork();
    crate::depot::lock_for_fork();
    pool::lock_all();
    large::lock_for_fork();
}

extern "C" fn fork_parent() {
    // SAFETY: `fork_prepare` took these locks in this thread.
    unsafe {
        large::unlock_after_fork();
        pool::unlock_all();
        crate::depot::unlock_after_fork();
        crate::heap::unlock_after_fork();
    }
}

extern "C" fn fork_child() {
    // The child has no background thread; the next retention starts one.
    RETURNER.store(RETURNER_IDLE, Ordering::Relaxed);
    // SAFETY: the child is a copy of the parent right after `fork_prepare`.
    unsafe {
        large::unlock_after_fork();
        pool::unlock_all();
        crate::depot::unlock_after_fork();
        crate::heap::unlock_after_fork();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every lock of the core is held from the prepare handler to the parent's (and the
    /// child's, which runs the same unlocks): a lock left out would be found held in a
    /// child whenever another thread held it at the `fork`, which a test that forks
    /// beside busy threads catches only by luck.
    #[test]
    fn fork_prepare_holds_every_lock() {
        fork_prepare();
        let held = [
            ("heaps", crate::heap::locked_for_fork()),
            ("depot", crate::depot::locked_for_fork()),
            ("pool", pool::all_locked()),
            ("large", large::locked_for_fork()),
        ];
        fork_parent();
        for (what, held) in held {
            assert!(held, "fork_prepare left a lock of the {what} free");
        }
    }
}
