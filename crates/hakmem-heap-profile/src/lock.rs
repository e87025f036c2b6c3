//! The profiler's one kind of lock: a flag spun on, with the guarded value reached only
//! inside [`Lock::with`]. It never allocates (the profiler runs inside the allocator),
//! and it can be held across `fork` ([`Lock::hold`], [`Lock::release`]).

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

/// A value and the flag that says a thread is using it. Invariant: `value` is reached
/// only by the thread that set `held` (inside [`Lock::with`]), or by none.
pub struct Lock<T> {
    held: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: one thread at a time reaches the value (the invariant above).
unsafe impl<T: Send> Sync for Lock<T> {}

impl<T> Lock<T> {
    pub const fn new(value: T) -> Self {
        Lock {
            held: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Wait for the flag, then set it.
    fn acquire(&self) {
        let mut tries = 0u32;
        while self.held.swap(true, Ordering::Acquire) {
            while self.held.load(Ordering::Relaxed) {
                tries += 1;
                if tries % 128 == 0 {
                    // SAFETY: no preconditions.
                    unsafe { libc::sched_yield() };
                } else {
                    core::hint::spin_loop();
                }
            }
        }
    }

    /// Run `f` on the value, alone.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        struct Unset<'a>(&'a AtomicBool);
        impl Drop for Unset<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        self.acquire();
        let _unset = Unset(&self.held);
        // SAFETY: this thread set `held`, so it alone reaches the value until `_unset`
        // drops, after `f` returned; the reference does not escape `f`.
        f(unsafe { &mut *self.value.get() })
    }

    /// Take the lock and keep it (before `fork`), until [`Lock::release`].
    pub fn hold(&self) {
        self.acquire();
    }

    /// Release what [`Lock::hold`] took.
    ///
    /// # Safety
    /// This thread (or, in a forked child, its parent's copy) called [`Lock::hold`].
    pub unsafe fn release(&self) {
        self.held.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::Lock;

    #[test]
    fn excludes() {
        static L: Lock<u64> = Lock::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..20_000 {
                        L.with(|v| {
                            let x = *v;
                            core::hint::black_box(());
                            *v = x + 1;
                        });
                    }
                });
            }
        });
        assert_eq!(L.with(|v| *v), 80_000);
    }
}
