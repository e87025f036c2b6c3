//! Memory goes back to the OS: a large heap of small objects is freed and the process's
//! RSS (from /proc/self/statm) falls, in each profile. Each profile runs in a child process
//! (the profile is process-wide): this test binary re-run with `HAKMEM_RETURN_CASE`
//! (`harness = false`, tests/harness).

mod common;
mod harness;

use std::alloc::{GlobalAlloc, Layout};

#[global_allocator]
static GLOBAL: hakmem::HakMem = hakmem::HakMem;

/// A heap to fill and free.
struct Shape {
    name: &'static str,
    /// Bytes of each block, bytes in all.
    object: usize,
    bytes: usize,
    /// Freed in random order rather than in allocation order.
    scattered: bool,
    /// Freed by another thread, which then ends.
    remote: bool,
    /// Allocated by another thread, which then ends (its superslabs left for adoption).
    orphaned: bool,
}

/// 512 MiB of 1 KiB blocks, freed in order: superslabs empty one after another.
const IN_ORDER: Shape = Shape {
    name: "in-order",
    object: 1024,
    bytes: 512 << 20,
    scattered: false,
    remote: false,
    orphaned: false,
};

/// 128 MiB of 4 KiB blocks (a class the depot serves), freed in random order: the blocks
/// still held in the thread cache and the depot at the end lie anywhere, so that no
/// superslab is empty until they are given back, and the slabs freed around them must
/// be given back one by one.
const SCATTERED: Shape = Shape {
    name: "scattered",
    object: 4096,
    bytes: 128 << 20,
    scattered: true,
    remote: false,
    orphaned: false,
};

/// As [`SCATTERED`], freed by another thread: the blocks wait on the remote lists of the
/// allocating thread's slabs, which must be brought home before the slabs are free.
const REMOTE: Shape = Shape {
    name: "remote",
    remote: true,
    ..SCATTERED
};

/// As [`SCATTERED`], allocated by a thread that ends before the blocks are freed: they go
/// back to superslabs nobody owns, until one is adopted.
const ORPHANED: Shape = Shape {
    name: "orphaned",
    orphaned: true,
    ..SCATTERED
};

/// 16 large blocks of 3 MiB, written through, freed in order: the thread keeps the last
/// four it freed for its next large requests (in its heap), which the background return's
/// visit gives back once the thread is idle; the others wait in the cache of extents.
const LARGE: Shape = Shape {
    name: "large",
    object: 3 << 20,
    bytes: 48 << 20,
    ..IN_ORDER
};

const SHAPES: [Shape; 5] = [IN_ORDER, SCATTERED, REMOTE, ORPHANED, LARGE];

fn rss() -> usize {
    hakmem::stats().resident
}

/// Fill a heap of the shape named in `case` ("profile shape"), free it, report RSS at
/// peak, after the free, after idling and after trim, as "peak freed idled trimmed" on
/// stdout.
fn run_case(case: &str) {
    let (profile, shape) = case.split_once(' ').expect("profile and shape");
    let shape = SHAPES.iter().find(|s| s.name == shape).expect("shape");
    let p = hakmem_core::Profile::parse(profile.as_bytes()).expect("profile");
    hakmem_core::set_profile(p);
    let before = rss();
    let layout = Layout::from_size_align(shape.object, 16).unwrap();
    let (object, n) = (shape.object, shape.bytes / shape.object);
    let fill = move || {
        let mut blocks = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: a valid layout; the block is written within its size and freed below.
            unsafe {
                let b = GLOBAL.alloc(layout);
                assert!(!b.is_null());
                b.write_bytes(i as u8, object);
                blocks.push(Block(b));
            }
        }
        blocks
    };
    let mut blocks = if shape.orphaned {
        std::thread::spawn(fill).join().unwrap()
    } else {
        fill()
    };
    let peak = rss();
    if shape.scattered {
        common::shuffle(&mut blocks);
    }
    let free_all = move || {
        for b in blocks {
            // SAFETY: allocated above with this layout.
            unsafe { GLOBAL.dealloc(b.0, layout) };
        }
    };
    if shape.remote {
        std::thread::spawn(free_all).join().unwrap();
    } else {
        free_all();
    }
    let freed = rss();
    // Idle, without calling the allocator: what a background return gives back.
    std::thread::sleep(std::time::Duration::from_millis(2000));
    let idled = rss();
    hakmem::trim();
    let trimmed = rss();
    println!("\nFIGURES {before} {peak} {freed} {idled} {trimmed}");
}

/// A block's address, sent to the thread that frees it.
struct Block(*mut u8);

// SAFETY: the block is handed over whole; only the receiving thread uses it.
unsafe impl Send for Block {}

fn main() {
    harness::main(
        "HAKMEM_RETURN_CASE",
        run_case,
        &harness::tests![
            fast_returns_memory_on_trim,
            fast_returns_remote_frees_on_trim,
            balanced_returns_memory_when_idle,
            lean_returns_memory_when_idle,
            balanced_returns_scattered_frees_when_idle,
            lean_returns_scattered_frees_when_idle,
            lean_returns_remote_frees_when_idle,
            balanced_returns_remote_frees_when_idle,
            lean_returns_orphaned_frees_when_idle,
            balanced_returns_large_blocks_when_idle,
            lean_returns_large_blocks_when_idle,
        ],
    )
}

/// RSS at the peak, right after the free, after 2 s of idling, after trim: each above
/// the RSS before the heap was filled (under qemu-user, the resident set is the
/// emulator's, some 30 MiB before the program allocates anything).
fn measure(profile: &str, shape: &Shape) -> (usize, usize, usize, usize) {
    let case = format!("{profile} {}", shape.name);
    let out = common::this_test_binary()
        .env("HAKMEM_RETURN_CASE", &case)
        .output()
        .unwrap();
    assert!(out.status.success(), "{profile}: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("FIGURES "))
        .unwrap_or_else(|| panic!("no figures in {text}"));
    let v: Vec<usize> = line.split(' ').map(|w| w.parse().unwrap()).collect();
    eprintln!(
        "{case}: before {} MiB, peak {} MiB, after free {} MiB, idle 2 s {} MiB, after trim {} MiB",
        v[0] >> 20,
        v[1] >> 20,
        v[2] >> 20,
        v[3] >> 20,
        v[4] >> 20
    );
    let v: Vec<usize> = v[1..].iter().map(|x| x.saturating_sub(v[0])).collect();
    assert!(
        v[0] >= shape.bytes,
        "{case}: the heap was not resident at peak"
    );
    (v[0], v[1], v[2], v[3])
}

fn fast_returns_memory_on_trim() {
    let (peak, freed, _, trimmed) = measure("fast", &IN_ORDER);
    // Fast keeps what was freed for reuse (up to the recent peak in use, for 5 s, given
    // back by later calls only), and gives it back at once on trim.
    assert!(freed <= peak + (8 << 20), "fast kept {freed} of {peak}");
    assert!(
        trimmed < peak / 10,
        "fast after trim kept {trimmed} of {peak}"
    );
}

fn fast_returns_remote_frees_on_trim() {
    // The blocks another thread freed wait on the remote lists of our slabs: trim brings
    // them home first, or those slabs never look free (it kept all 134 MiB).
    let (peak, _, _, trimmed) = measure("fast", &REMOTE);
    assert!(
        trimmed < peak / 10,
        "fast after trim kept {trimmed} of {peak}"
    );
}

/// After 2 s of idling, `profile` holds under a tenth of what a heap of `shape` peaked at.
fn returns_when_idle(profile: &str, shape: &Shape) {
    let (peak, _, idled, _) = measure(profile, shape);
    assert!(
        idled < peak / 10,
        "{profile} {}: kept {idled} of {peak} after idling",
        shape.name
    );
}

fn balanced_returns_memory_when_idle() {
    // Kept for reuse right after the free; the background return gives it back within
    // 1.5 s of retain time (1 s) while the program calls nothing.
    returns_when_idle("balanced", &IN_ORDER);
}

fn lean_returns_memory_when_idle() {
    returns_when_idle("lean", &IN_ORDER);
}

// A program that frees most of its heap in any order, on any thread, and then stops
// calling the allocator gets it back: the background return visits the heap of a thread
// that made no slow path for a whole sleep, brings home what other threads freed into
// its slabs and gives back every free slab, and once every thread is idle empties the
// depot and tidies exited threads' superslabs (without these the profiles kept all they
// peaked at: 134 MiB of 134).

fn balanced_returns_scattered_frees_when_idle() {
    returns_when_idle("balanced", &SCATTERED);
}

fn lean_returns_scattered_frees_when_idle() {
    returns_when_idle("lean", &SCATTERED);
}

fn lean_returns_remote_frees_when_idle() {
    returns_when_idle("lean", &REMOTE);
}

fn balanced_returns_remote_frees_when_idle() {
    returns_when_idle("balanced", &REMOTE);
}

fn lean_returns_orphaned_frees_when_idle() {
    returns_when_idle("lean", &ORPHANED);
}

// Large blocks: a tenth of the peak is 4.8 MiB, under what the thread keeps (four blocks,
// 12 MiB written), so the visit to the idle thread's heap must give those back.

fn balanced_returns_large_blocks_when_idle() {
    returns_when_idle("balanced", &LARGE);
}

fn lean_returns_large_blocks_when_idle() {
    returns_when_idle("lean", &LARGE);
}
