//! C++ `operator new` and `operator delete` (the Itanium C++ ABI's mangled names), so that
//! C++ programs under `LD_PRELOAD` skip libstdc++'s wrappers and take hakmem's paths:
//!
//! - `new` / `new[]` (plain and `std::align_val_t`): hakmem's allocation. On failure they
//!   do what the standard asks: call the installed `std::new_handler` and retry, or, with
//!   none, throw `std::bad_alloc`. Rust cannot throw a C++ exception, so hakmem looks up
//!   libstdc++'s `std::__throw_bad_alloc()` with `dlsym` (only then, on the failure path)
//!   and calls it through an `extern "C-unwind"` pointer; these functions are
//!   `extern "C-unwind"` too, so the exception travels through them to the caller's
//!   `catch`. Without libstdc++ in the process the message goes to stderr and the process
//!   aborts. (This needs the library built with `panic = "unwind"`, the default: with
//!   `"abort"`, a foreign exception reaching Rust frames aborts.)
//! - `nothrow` variants return null on failure (without calling the new-handler: it might
//!   throw, and these functions must not).
//! - Sized `delete` (`_ZdlPvm` & co.) takes `free`'s fast path
//!   ([`crate::malloc::free_sized_block`]): the slab map finds the class with one load,
//!   which is fewer instructions than the stated size once pointers hakmem never handed
//!   out (a program's own `operator new` whose sized `delete` resolves here) must be sent
//!   to [`crate::foreign`] anyway. Checked mode, and debug builds, check the size against
//!   the block and abort on a mismatch.
//! - Unsized `delete` is `free`.

use crate::malloc::{self, free_block, free_sized_block, MIN_ALIGN};
use core::ffi::{c_void, CStr};

/// The `std::new_handler` type.
type NewHandler = unsafe extern "C-unwind" fn();

/// Allocate for a throwing `operator new`: `malloc`'s fast path (a pop from the thread's
/// cache, `align` a constant in each caller), then everything else out of line.
#[inline(always)]
fn new_impl(size: usize, align: usize) -> *mut c_void {
    let p = malloc::cached(size, align);
    if !p.is_null() {
        return p;
    }
    new_slow(size, align)
}

/// [`new_impl`] past the thread's cache.
#[inline(never)]
fn new_slow(size: usize, align: usize) -> *mut c_void {
    let p = malloc::alloc_or_null(size, align);
    if !p.is_null() {
        return p;
    }
    new_failed(size, align)
}

/// The standard's loop: call the new-handler and retry while there is one, else throw.
#[cold]
#[inline(never)]
fn new_failed(size: usize, align: usize) -> *mut c_void {
    loop {
        match new_handler() {
            // SAFETY: a handler installed with std::set_new_handler; it may throw, which
            // unwinds through the "C-unwind" frames up to the caller.
            Some(handler) => unsafe { handler() },
            None => throw_bad_alloc(),
        }
        let p = malloc::alloc_or_null(size, align);
        if !p.is_null() {
            return p;
        }
    }
}

fn lookup(name: &CStr) -> *mut c_void {
    // SAFETY: a NUL-terminated name; RTLD_DEFAULT searches the global scope.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
}

/// `std::get_new_handler()`, if libstdc++ is loaded and a handler is installed.
fn new_handler() -> Option<NewHandler> {
    let f = lookup(c"_ZSt15get_new_handlerv");
    if f.is_null() {
        return None;
    }
    // SAFETY: `std::get_new_handler` is `new_handler get_new_handler() noexcept`; a
    // function pointer is returned as a nullable pointer.
    let get: extern "C" fn() -> Option<NewHandler> = unsafe { core::mem::transmute(f) };
    get()
}

/// Throw `std::bad_alloc` through libstdc++, or abort with a message.
fn throw_bad_alloc() -> ! {
    let f = lookup(c"_ZSt17__throw_bad_allocv");
    if !f.is_null() {
        // SAFETY: libstdc++'s `[[noreturn]] void std::__throw_bad_alloc()`, which throws.
        let throw: unsafe extern "C-unwind" fn() -> ! = unsafe { core::mem::transmute(f) };
        // SAFETY: it takes no arguments; the exception unwinds through "C-unwind" frames.
        unsafe { throw() }
    }
    hakmem_core::write_stderr(
        b"hakmem: operator new: out of memory, and std::bad_alloc cannot be thrown without libstdc++\n",
    );
    hakmem_core::abort()
}

/// Export the same body under several names (`new` and `new[]` behave alike).
macro_rules! new_fns {
    ($abi:literal fn $params:tt $body:block as $($(#[$doc:meta])* $name:ident),+ $(,)?) => {
        $(
            $(#[$doc])*
            #[no_mangle]
            pub extern $abi fn $name $params -> *mut c_void $body
        )+
    };
}

/// Export the same `delete` body under several names.
macro_rules! delete_fns {
    (fn $params:tt $body:block as $($(#[$doc:meta])* $name:ident),+ $(,)?) => {
        $(
            $(#[$doc])*
            ///
            /// # Safety
            /// `p` is null or a live block from the matching `operator new`.
            #[no_mangle]
            pub unsafe extern "C" fn $name $params $body
        )+
    };
}

new_fns! {
    "C-unwind" fn(size: usize) { new_impl(size, MIN_ALIGN) } as
    /// `operator new(std::size_t)`.
    _Znwm,
    /// `operator new[](std::size_t)`.
    _Znam,
}

new_fns! {
    "C-unwind" fn(size: usize, align: usize) { new_impl(size, align) } as
    /// `operator new(std::size_t, std::align_val_t)`.
    _ZnwmSt11align_val_t,
    /// `operator new[](std::size_t, std::align_val_t)`.
    _ZnamSt11align_val_t,
}

new_fns! {
    "C" fn(size: usize, _nothrow: *const c_void) { malloc::alloc_or_null(size, MIN_ALIGN) } as
    /// `operator new(std::size_t, const std::nothrow_t &)`.
    _ZnwmRKSt9nothrow_t,
    /// `operator new[](std::size_t, const std::nothrow_t &)`.
    _ZnamRKSt9nothrow_t,
}

new_fns! {
    "C" fn(size: usize, align: usize, _nothrow: *const c_void) {
        malloc::alloc_or_null(size, align)
    } as
    /// `operator new(std::size_t, std::align_val_t, const std::nothrow_t &)`.
    _ZnwmSt11align_val_tRKSt9nothrow_t,
    /// `operator new[](std::size_t, std::align_val_t, const std::nothrow_t &)`.
    _ZnamSt11align_val_tRKSt9nothrow_t,
}

delete_fns! {
    fn(p: *mut c_void) {
        // SAFETY: by the caller.
        unsafe { free_block(p) }
    } as
    /// `operator delete(void *)`.
    _ZdlPv,
    /// `operator delete[](void *)`.
    _ZdaPv,
}

delete_fns! {
    fn(p: *mut c_void, _nothrow: *const c_void) {
        // SAFETY: by the caller.
        unsafe { free_block(p) }
    } as
    /// `operator delete(void *, const std::nothrow_t &)`.
    _ZdlPvRKSt9nothrow_t,
    /// `operator delete[](void *, const std::nothrow_t &)`.
    _ZdaPvRKSt9nothrow_t,
}

delete_fns! {
    fn(p: *mut c_void, _align: usize) {
        // SAFETY: by the caller.
        unsafe { free_block(p) }
    } as
    /// `operator delete(void *, std::align_val_t)`.
    _ZdlPvSt11align_val_t,
    /// `operator delete[](void *, std::align_val_t)`.
    _ZdaPvSt11align_val_t,
}

delete_fns! {
    fn(p: *mut c_void, _align: usize, _nothrow: *const c_void) {
        // SAFETY: by the caller.
        unsafe { free_block(p) }
    } as
    /// `operator delete(void *, std::align_val_t, const std::nothrow_t &)`.
    _ZdlPvSt11align_val_tRKSt9nothrow_t,
    /// `operator delete[](void *, std::align_val_t, const std::nothrow_t &)`.
    _ZdaPvSt11align_val_tRKSt9nothrow_t,
}

delete_fns! {
    fn(p: *mut c_void, size: usize) {
        // SAFETY: by the caller, `p` came from `new(size)`.
        unsafe { free_sized_block(p, size, MIN_ALIGN) }
    } as
    /// `operator delete(void *, std::size_t)`: the sized fast path.
    _ZdlPvm,
    /// `operator delete[](void *, std::size_t)`: the sized fast path.
    _ZdaPvm,
}

delete_fns! {
    fn(p: *mut c_void, size: usize, align: usize) {
        // SAFETY: by the caller, `p` came from `new(size, align)`.
        unsafe { free_sized_block(p, size, align) }
    } as
    /// `operator delete(void *, std::size_t, std::align_val_t)`: the sized fast path.
    _ZdlPvmSt11align_val_t,
    /// `operator delete[](void *, std::size_t, std::align_val_t)`: the sized fast path.
    _ZdaPvmSt11align_val_t,
}
