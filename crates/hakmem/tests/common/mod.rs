//! Helpers shared by the integration tests of `hakmem` and `hakmem-core` (the core's tests
//! include this file with `#[path]`): fill patterns, a seeded generator, test scale,
//! child processes that are expected to abort.
//!
//! Only `std` and `libc`: no allocator is named here, so each test binary decides who
//! serves `Vec`.
#![allow(dead_code)]

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Output};

/// The pattern word at word index `w` of block `id`; never the same for two ids at one
/// index, so a block handed out twice, or a stray write, shows as a mismatch.
#[inline]
pub fn word(id: u64, w: usize) -> u64 {
    let x = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (w as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    x ^ (x >> 29) ^ 0x5A5A_5A5A_5A5A_5A5A
}

/// The pattern byte at offset `k` of block `id`: byte `k % 8` of [`word`], little endian.
#[inline]
pub fn byte(id: u64, k: usize) -> u8 {
    (word(id, k / 8) >> (8 * (k % 8))) as u8
}

/// Bytes at the start of each 4 KiB that the patterns cover under Miri (see
/// [`next_sampled`]).
const MIRI_SAMPLE: usize = 64;

/// The first offset from `k` on that the pattern helpers touch: every offset, except
/// under Miri, which interprets each access, where only the first [`MIRI_SAMPLE`] bytes
/// of each 4 KiB of a block are written and checked (the same offsets for every range,
/// so a fill and a later check agree): every page a block spans is still touched, at a
/// sixty-fourth of the cost.
#[inline]
fn next_sampled(k: usize) -> usize {
    if cfg!(miri) && k % 4096 >= MIRI_SAMPLE {
        (k | 4095) + 1
    } else {
        k
    }
}

/// Write the pattern of block `id` over bytes `from..to` of `p`.
///
/// Whole words are written with plain aligned stores when `p` is 8-aligned (every hakmem
/// block is): `read_unaligned` / `write_unaligned` carry costly checks in debug builds.
///
/// # Safety
/// `p + from .. p + to` is writable.
pub unsafe fn fill(p: *mut u8, from: usize, to: usize, id: u64) {
    let words = p as usize % 8 == 0;
    let mut k = from;
    loop {
        k = next_sampled(k);
        if k >= to {
            break;
        }
        if words && k % 8 == 0 && k + 8 <= to {
            // SAFETY: an aligned word inside `from..to`, writable by the caller.
            unsafe { *(p.add(k) as *mut u64) = word(id, k / 8).to_le() };
            k += 8;
        } else {
            // SAFETY: inside `from..to`.
            unsafe { *p.add(k) = byte(id, k) };
            k += 1;
        }
    }
}

/// The first offset in `from..to` where `p` does not hold the pattern of block `id`.
///
/// # Safety
/// `p + from .. p + to` is readable.
pub unsafe fn mismatch(p: *const u8, from: usize, to: usize, id: u64) -> Option<usize> {
    let words = p as usize % 8 == 0;
    let mut k = from;
    loop {
        k = next_sampled(k);
        if k >= to {
            break;
        }
        if words && k % 8 == 0 && k + 8 <= to {
            // SAFETY: an aligned word inside `from..to`, readable by the caller.
            if unsafe { *(p.add(k) as *const u64) } == word(id, k / 8).to_le() {
                k += 8;
                continue;
            }
        }
        // SAFETY: inside `from..to`.
        if unsafe { *p.add(k) } != byte(id, k) {
            return Some(k);
        }
        k += 1;
    }
    None
}

/// Panic unless bytes `from..to` of `p` hold the pattern of block `id`.
///
/// # Safety
/// As for [`mismatch`].
#[track_caller]
pub unsafe fn check(p: *const u8, from: usize, to: usize, id: u64, what: &str) {
    // SAFETY: by the caller.
    if let Some(k) = unsafe { mismatch(p, from, to, id) } {
        // SAFETY: `k` is in `from..to`.
        let got = unsafe { *p.add(k) };
        panic!(
            "{what}: block {id} at {p:p} lost its pattern at byte {k} of {from}..{to}: \
             0x{got:02x}, expected 0x{:02x}",
            byte(id, k)
        );
    }
}

/// The first non-zero offset in `0..len` of `p`.
///
/// # Safety
/// `p .. p + len` is readable.
pub unsafe fn nonzero(p: *const u8, len: usize) -> Option<usize> {
    let words = p as usize % 8 == 0;
    let mut k = 0;
    loop {
        k = next_sampled(k);
        if k >= len {
            break;
        }
        // SAFETY: an aligned word inside `0..len`.
        if words && k % 8 == 0 && k + 8 <= len && unsafe { *(p.add(k) as *const u64) } == 0 {
            k += 8;
            continue;
        }
        // SAFETY: inside `0..len`.
        if unsafe { *p.add(k) } != 0 {
            return Some(k);
        }
        k += 1;
    }
    None
}

/// Fill a byte slice with the pattern of `id`.
pub fn fill_slice(s: &mut [u8], id: u64) {
    // SAFETY: the slice is writable for its length.
    unsafe { fill(s.as_mut_ptr(), 0, s.len(), id) }
}

/// Panic unless a byte slice holds the pattern of `id`.
#[track_caller]
pub fn check_slice(s: &[u8], id: u64, what: &str) {
    // SAFETY: the slice is readable for its length.
    unsafe { check(s.as_ptr(), 0, s.len(), id, what) }
}

/// SplitMix64: a tiny seeded generator, so a failing run is named by its seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x2545_F491_4F6C_DD1D)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }

    /// A request size: mostly small (0..=1 KiB), often mid (up to 64 KiB), sometimes
    /// large (up to `max_large`).
    pub fn size(&mut self, max_large: usize) -> usize {
        match self.below(100) {
            0..=69 => self.range(0, 1024),
            70..=96 => self.range(1025, 64 * 1024),
            _ => self.range(64 * 1024 + 1, max_large),
        }
    }
}

/// Fisher-Yates with a fixed xorshift, so every run gives the same order.
pub fn shuffle<T>(v: &mut [T]) {
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
}

/// `HAKMEM_TEST_SCALE` (default 1): multiply iteration counts by it for a longer soak.
pub fn scale() -> usize {
    std::env::var("HAKMEM_TEST_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(1)
}

/// A `u64` from the environment variable `name`, else `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A block from the global allocator (whichever the test binary installs) holding the
/// pattern of its id; dropping it checks the pattern and frees it, on whatever thread
/// drops it.
pub struct Block {
    ptr: *mut u8,
    layout: std::alloc::Layout,
    id: u64,
}

// SAFETY: the block is plain memory owned by this value alone.
unsafe impl Send for Block {}

impl Block {
    /// A block of `size` bytes (at least 1) aligned to `align`, filled with `id`'s pattern.
    pub fn new(size: usize, align: usize, id: u64) -> Block {
        let layout = std::alloc::Layout::from_size_align(size.max(1), align).expect("layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        assert!(!ptr.is_null(), "alloc({size}, {align}) failed");
        assert_eq!(ptr as usize % align, 0, "alloc({size}, {align}) misaligned");
        // SAFETY: a fresh block of `layout.size()` bytes.
        unsafe { fill(ptr, 0, layout.size(), id) };
        Block { ptr, layout, id }
    }

    /// A block of a random size (see [`Rng::size`]) and, one time in eight, a random
    /// alignment up to 4 KiB.
    pub fn random(rng: &mut Rng, max_large: usize, id: u64) -> Block {
        let size = rng.size(max_large);
        let align = if rng.below(8) == 0 {
            1 << rng.range(0, 12)
        } else {
            8
        };
        Block::new(size, align, id)
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn size(&self) -> usize {
        self.layout.size()
    }

    /// Panic unless the block still holds its pattern.
    #[track_caller]
    pub fn check(&self, what: &str) {
        // SAFETY: the block is ours for its whole size.
        unsafe { check(self.ptr, 0, self.layout.size(), self.id, what) }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        self.check("before free");
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

/// `HAKMEM_TEST_RUNNER`: the emulator that runs this test binary when it is built for
/// another architecture (`qemu-aarch64 -L /usr/aarch64-linux-gnu` in `.ci/run`). Cargo
/// starts the test binary with it (its `runner` setting); a child the test starts needs
/// it too, since without binfmt_misc the kernel cannot run a foreign binary.
pub const RUNNER_VAR: &str = "HAKMEM_TEST_RUNNER";

/// A command that runs this test binary again (a `harness = false` binary whose `main`,
/// tests/harness, turns into the child when the caller sets the child's variable); under
/// the emulator of [`RUNNER_VAR`] if one is set.
pub fn this_test_binary() -> Command {
    let exe = std::env::current_exe().expect("test binary");
    let runner = std::env::var(RUNNER_VAR).unwrap_or_default();
    let mut words = runner.split_whitespace();
    match words.next() {
        Some(emulator) => {
            let mut cmd = Command::new(emulator);
            cmd.args(words).arg(exe);
            cmd
        }
        None => Command::new(exe),
    }
}

/// Run this test binary again as the child of `var` (tests/harness), with `var=case`, no
/// core dumps, and at most `address_space` bytes of address space if given (`RLIMIT_AS`,
/// as `ulimit -v` sets it).
pub fn run_child(var: &str, case: &str, address_space: Option<u64>) -> Output {
    let mut cmd = this_test_binary();
    cmd.env(var, case);
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(move || {
            let limit = |n| libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            let mut ok = libc::setrlimit(libc::RLIMIT_CORE, &limit(0)) == 0;
            if let Some(bytes) = address_space {
                ok &= libc::setrlimit(libc::RLIMIT_AS, &limit(bytes)) == 0;
            }
            if ok {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    cmd.output().expect("run the child")
}

/// Panic unless the child of `case` aborted (SIGABRT) with `message` on its stderr.
#[track_caller]
pub fn assert_aborted(out: &Output, case: &str, message: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "{case}: expected an abort, got {:?}\nstdout:\n{}\nstderr:\n{stderr}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr.contains(message),
        "{case}: stderr lacks {message:?}:\n{stderr}"
    );
}
