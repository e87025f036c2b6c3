//! Synchronisation primitives: the atomics every other module uses (one place to swap
//! them for a model checker) and [`SpinLock`], which guards the few global lists that
//! only slow paths touch (never the alloc or free fast path).

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
pub use core::sync::atomic::{
    AtomicBool, AtomicIsize, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

/// The atomics of the lock-free protocols, the cross-thread free's ([`crate::remote`])
/// and the kept large blocks' ([`crate::kept::Keeper`]): loom's under `--cfg loom`, so
/// that the same code is model-checked (`tests/loom.rs`, `tests/loom_kept.rs`).
pub mod protocol {
    #[cfg(not(loom))]
    pub use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
    #[cfg(loom)]
    pub use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};

    /// The fast side's fence of an asymmetric pair whose slow side calls
    /// [`crate::os::process_barrier`]: no instruction, only the compiler kept from moving
    /// memory accesses across it (the barrier orders them, running the fence on this
    /// thread's behalf). Under loom, a `SeqCst` fence: what the barrier amounts to.
    #[inline(always)]
    pub fn light_fence() {
        #[cfg(not(loom))]
        core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
        #[cfg(loom)]
        loom::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    }
}

/// A test-and-test-and-set lock that yields the CPU when contended. It never allocates,
/// so it is safe inside the allocator and across `fork` (see [`SpinLock::force_unlock`]).
pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands out `&mut T` to one thread at a time.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: moving the lock moves the value.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub const fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    pub fn lock(&self) -> SpinGuard<'_, T> {
        let mut spins = 0u32;
        loop {
            if !self.locked.load(Ordering::Relaxed)
                && self
                    .locked
                    .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return SpinGuard { lock: self };
            }
            spins += 1;
            if spins < 64 {
                core::hint::spin_loop();
            } else {
                crate::os::yield_now();
            }
        }
    }

    /// The lock if it is free now, without waiting.
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            .then_some(SpinGuard { lock: self })
    }

    /// Whether some thread holds the lock now (for tests of the `fork` handlers).
    #[cfg(test)]
    pub fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Relaxed)
    }

    /// Take the lock and keep it until [`SpinLock::force_unlock`] (for `fork`).
    pub fn lock_forever(&self) {
        core::mem::forget(self.lock());
    }

    /// Release a lock taken by [`SpinLock::lock_forever`].
    ///
    /// # Safety
    /// The caller took the lock with `lock_forever` (in this process, or in the parent of
    /// a forked child) and holds no reference into the value.
    pub unsafe fn force_unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }
}

pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, so this is the only reference.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_excludes() {
        static L: SpinLock<usize> = SpinLock::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        *L.lock() += 1;
                    }
                });
            }
        });
        assert_eq!(*L.lock(), 40_000);
    }
}
