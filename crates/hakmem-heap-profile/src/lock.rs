//! The profiler's one kind of lock: hakmem-core's [`SpinLock`] (which never allocates, so
//! the profiler can take it inside the allocator), with the guarded value reached only
//! inside [`Lock::with`], and held across `fork` with [`Lock::hold`] and
//! [`Lock::release`].

use hakmem_core::SpinLock;

/// A value and the lock that guards it.
pub struct Lock<T>(SpinLock<T>);

impl<T> Lock<T> {
    pub const fn new(value: T) -> Self {
        Lock(SpinLock::new(value))
    }

    /// Run `f` on the value, alone.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.0.lock())
    }

    /// Take the lock and keep it (before `fork`), until [`Lock::release`].
    pub fn hold(&self) {
        self.0.lock_forever();
    }

    /// Release what [`Lock::hold`] took.
    ///
    /// # Safety
    /// This thread (or, in a forked child, its parent's copy) called [`Lock::hold`], and
    /// holds no reference into the value.
    pub unsafe fn release(&self) {
        // SAFETY: by the caller.
        unsafe { self.0.force_unlock() };
    }
}
