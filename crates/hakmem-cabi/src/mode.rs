//! What the malloc family does besides allocating: checks (`HAKMEM_CHECK=1`) and counting
//! (`HAKMEM_STATS=1`), in one byte, so that the allocating fast paths pay one load and
//! one predictable branch for both ([`plain`]: the byte is zero); `malloc` compares the
//! size with a bound that follows the byte instead, one compare for the mode and the
//! class table's reach ([`table_below`]). `free`'s fast path pays nothing: turning
//! either on turns it off for good ([`hakmem_core::stop_free_cached`]), before the byte
//! says so, and what it leaves tests the byte.
//!
//! Checked mode ([`hakmem_core::Checked`]) lays blocks out differently (a canary at the
//! end of each small block, a freed marker in its second word), so a block must be freed
//! in the mode it was allocated in. The mode is therefore fixed before the first block is
//! handed out, by whichever comes first: the first call of the malloc family (any of
//! them: each one that is not on the fast path asks [`checked`], and the fast path is
//! only taken once the mode is decided), or the constructor in [`crate::env`]. Deciding
//! reads `HAKMEM_CHECK` with `getenv`, which does not allocate, and the byte changes with
//! one compare-and-swap, so two threads deciding at once agree. Counting may start later:
//! its bit is set by the constructor.

use core::sync::atomic::{
    AtomicU8, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release, SeqCst},
};

/// `HAKMEM_CHECK` has not been read yet.
const UNDECIDED: u8 = 1;
/// Blocks are allocated and freed by `hakmem_core::Checked`.
const CHECKED: u8 = 2;
/// Calls and bytes are counted ([`crate::stats`]).
const COUNTED: u8 = 4;
/// Allocations are counted down for the heap profiler ([`crate::heap_profile`]); set
/// once and never cleared, since sampled blocks may be freed at any time later. Frees
/// ignore it ([`plain_free`]): a sampled block is never a block start, so `free`'s fast
/// path misses it anyway. `malloc` does not ([`plain_alloc`]): it counts down only while
/// the bit is set.
const PROFILED: u8 = 8;

static MODE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// The bound [`table_below`] compares with. Invariant: `TABLE_MAX + 1` or 0, and, once
/// every change of [`MODE`] has run [`follow_mode`], `TABLE_MAX + 1` exactly when the
/// mode byte is 0. It is never `TABLE_MAX + 1` while checks are on: they are chosen
/// only from [`UNDECIDED`], before any store here found the byte 0.
static TABLE_BELOW: AtomicUsize = AtomicUsize::new(0);

/// Whether `malloc`'s fast path is open to a request of `size` bytes: `size` is below
/// [`TABLE_BELOW`], `TABLE_MAX + 1` while [`plain_alloc`] holds, else 0. So `malloc`
/// tests its mode and the class table's reach in one compare with memory, where the
/// mode byte's `test` and the size's compare took two instructions each (the compiler
/// would load the bound into a register first: hence the `cmp` with memory written out,
/// as [`none_of`]'s `test`). A program whose mode changes while it allocates (counting
/// or heap profiling turned on) may have a few allocations take the fast path after the
/// change, as with the byte read `Relaxed`.
#[inline(always)]
pub fn table_below(size: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: reads the bound, a static; writes nothing but the flags.
        unsafe {
            core::arch::asm!(
                "cmp {size}, qword ptr [rip + {below}]",
                "jae {beyond}",
                size = in(reg) size,
                below = sym TABLE_BELOW,
                beyond = label { return false; },
                options(nostack, readonly),
            );
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        size < TABLE_BELOW.load(Relaxed)
    }
}

/// Set [`TABLE_BELOW`] from the mode byte, after a change of it. Each writer reads the
/// byte again after its store and goes round if it changed, so the store last in the
/// order of all (`SeqCst`) is from the byte as it stands: a writer whose store of an
/// older byte's bound lands after another's sees the newer byte and writes again.
fn follow_mode() {
    loop {
        let m = MODE.load(SeqCst);
        let below = if m == 0 {
            hakmem_core::TABLE_MAX + 1
        } else {
            0
        };
        TABLE_BELOW.store(below, SeqCst);
        if MODE.load(SeqCst) == m {
            return;
        }
    }
}

/// The mode is decided, unchecked, and nothing is counted: take the fast path.
#[inline(always)]
pub fn plain() -> bool {
    MODE.load(Relaxed) == 0
}

/// The fast path of `malloc` may be taken: the mode is decided, unchecked, uncounted,
/// and the heap profiler is off (while it is on, `malloc` takes its countdown on a path
/// of its own, `malloc_profiled`).
#[inline(always)]
pub fn plain_alloc() -> bool {
    none_of::<0xFF>()
}

/// `free` may take the plain path: the mode is decided, unchecked, uncounted (heap
/// profiling or not).
#[inline(always)]
pub fn plain_free() -> bool {
    none_of::<{ !PROFILED }>()
}

/// No bit of `MASK` is set in the mode byte: on x86-64 one `test` of the byte in memory
/// and a branch, where the compiler loads the byte first (a load, a `test`, a branch),
/// on every `malloc` and `free`.
#[inline(always)]
fn none_of<const MASK: u8>() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: reads the mode byte, a static; writes nothing but the flags.
        unsafe {
            core::arch::asm!(
                "test byte ptr [rip + {mode}], {mask}",
                "jnz {set}",
                mode = sym MODE,
                mask = const MASK,
                set = label { return false; },
                options(nostack, readonly),
            );
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        MODE.load(Relaxed) & MASK == 0
    }
}

/// Whether allocations are counted down for the heap profiler.
#[inline(always)]
pub fn profiled() -> bool {
    MODE.load(Relaxed) & PROFILED != 0
}

/// Heap profiling is the only thing on (decided, unchecked, uncounted).
#[inline(always)]
pub fn profiled_only() -> bool {
    MODE.load(Relaxed) == PROFILED
}

/// Send every allocation through [`crate::heap_profile`]'s countdown from now on.
pub fn profile() {
    MODE.fetch_or(PROFILED, Relaxed);
    follow_mode();
}

/// Whether blocks are checked; decides the mode if no call did yet. Acquire: a thread
/// that sees checks on also sees `free`'s fast path closed ([`decide`]), and so does any
/// thread it hands a checked block to.
#[inline]
pub fn checked() -> bool {
    let m = MODE.load(Acquire);
    let m = if m & UNDECIDED == 0 { m } else { decide() };
    m & CHECKED != 0
}

/// Whether calls are counted.
#[inline(always)]
pub fn counted() -> bool {
    MODE.load(Relaxed) & COUNTED != 0
}

/// Start counting: `free`'s fast path closes first, and the bit is set with Release after
/// it (see [`decide`]).
pub fn count() {
    hakmem_core::stop_free_cached();
    MODE.fetch_or(COUNTED, Release);
    follow_mode();
}

/// Read `HAKMEM_CHECK` and fix the mode, unless another call did first; returns the mode.
/// Checked, `free`'s fast path is closed before the mode is stored with Release, so that
/// a thread that reads checks on with Acquire finds it closed.
#[cold]
#[inline(never)]
pub fn decide() -> u8 {
    let m = MODE.load(Acquire);
    if m & UNDECIDED == 0 {
        return m;
    }
    let check = if crate::env::flag(c"HAKMEM_CHECK") {
        // Before any block is handed out checked, `free` stops taking them for plain.
        hakmem_core::stop_free_cached();
        CHECKED
    } else {
        0
    };
    let fixed = |m: u8| (m & !UNDECIDED) | check;
    let m = match MODE.fetch_update(Release, Acquire, |m| (m & UNDECIDED != 0).then(|| fixed(m))) {
        Ok(before) => fixed(before),
        Err(decided) => decided,
    };
    follow_mode();
    m
}
