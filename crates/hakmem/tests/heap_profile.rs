//! The heap profiler through the Rust API (feature `heap-profile`): a program with known
//! allocation sites gets a pprof profile whose per-function figures are within 10 % of the
//! truth, and profiling stays safe under threads, thread exit and fork.
//!
//! The interval is 16 KiB, not the default 512 KiB: the estimates' relative standard error
//! is about `sqrt(interval / bytes)`, and at 16 KiB it is under 2 % for every figure
//! checked here (10 % is then more than five standard errors), so the test is not flaky.

mod common;
mod shadow;

use hakmem::heap_profile::{self, decode, Options};
use hakmem::HakMem;
use std::alloc::{alloc, dealloc, Layout};
use std::sync::Mutex;

#[global_allocator]
static GLOBAL: HakMem = HakMem;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// The tests of this file share the one profiler: run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn start() {
    heap_profile::start(Options { interval: 16 * KIB }).unwrap();
}

/// Site A: 200 MiB in 1 KiB blocks, keeping every fourth (50 MiB).
#[inline(never)]
fn site_a(kept: &mut Vec<(*mut u8, Layout)>) {
    let l = Layout::from_size_align(KIB, 8).unwrap();
    for i in 0..(200 * MIB / KIB) {
        // SAFETY: a non-zero size.
        let p = unsafe { alloc(l) };
        assert!(!p.is_null());
        // SAFETY: `p` holds `l.size()` bytes.
        unsafe { p.write_bytes(i as u8, l.size()) };
        if i % 4 == 0 {
            kept.push((p, l));
        } else {
            // SAFETY: allocated above with `l`.
            unsafe { dealloc(p, l) };
        }
    }
}

/// Site B: 20 MiB in 64 KiB blocks, keeping half (10 MiB).
#[inline(never)]
fn site_b(kept: &mut Vec<(*mut u8, Layout)>) {
    let l = Layout::from_size_align(64 * KIB, 16).unwrap();
    for i in 0..(20 * MIB / (64 * KIB)) {
        // SAFETY: a non-zero size.
        let p = unsafe { alloc(l) };
        assert!(!p.is_null());
        if i % 2 == 0 {
            kept.push((p, l));
        } else {
            // SAFETY: allocated above with `l`.
            unsafe { dealloc(p, l) };
        }
    }
}

/// Site C, run in another thread: 64 MiB in 4 KiB vectors, all freed.
#[inline(never)]
fn site_c_in_thread() -> usize {
    let mut sum = 0;
    for i in 0..(64 * MIB / (4 * KIB)) {
        let v = std::hint::black_box(vec![i as u8; 4 * KIB]);
        sum += v[7] as usize;
    }
    sum
}

/// Site D: blocks over 512 MiB (the profiler's arena takes them in whole units): one of
/// 600 MiB freed, one of 1.5 GiB kept. Only their ends are written.
#[inline(never)]
fn site_d(kept: &mut Vec<(*mut u8, Layout)>) {
    for (size, keep) in [(600 * MIB, false), (1536 * MIB, true)] {
        let l = Layout::from_size_align(size, 16).unwrap();
        // SAFETY: a non-zero size.
        let p = unsafe { alloc(l) };
        assert!(!p.is_null());
        // SAFETY: `p` holds `size` bytes.
        unsafe { (p.write(1), p.add(size - 1).write(2)) };
        if keep {
            kept.push((p, l));
        } else {
            // SAFETY: allocated above with `l`.
            unsafe { dealloc(p, l) };
        }
    }
}

fn within(name: &str, got: i64, truth: usize) {
    let err = (got as f64 - truth as f64).abs() / truth as f64;
    assert!(
        err <= 0.10,
        "{name}: estimated {got} bytes, truth {truth} ({:.1} % off)",
        100.0 * err
    );
}

fn sum_for(m: &std::collections::HashMap<String, i64>, f: &str) -> i64 {
    m.iter()
        .filter(|(k, _)| k.ends_with(f))
        .map(|(_, v)| *v)
        .sum()
}

#[test]
fn known_sites_within_ten_percent() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    start();
    let mut kept = Vec::with_capacity(60_000);
    site_a(&mut kept);
    site_b(&mut kept);
    let c = std::thread::spawn(site_c_in_thread).join().unwrap();
    assert!(c > 0);

    let dir = std::env::temp_dir().join(format!("hakmem-heap-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let files = heap_profile::dump(dir.join("heap")).unwrap();
    let data = std::fs::read(&files[0]).unwrap();
    let profile = decode::decode(&data).unwrap();
    assert_eq!(
        profile
            .sample_types
            .iter()
            .map(|(t, _)| t.as_str())
            .collect::<Vec<_>>(),
        [
            "alloc_objects",
            "alloc_space",
            "inuse_objects",
            "inuse_space"
        ]
    );
    let alloc = profile.cumulative("alloc_space");
    let inuse = profile.cumulative("inuse_space");
    within("site A alloc_space", sum_for(&alloc, "site_a"), 200 * MIB);
    within("site A inuse_space", sum_for(&inuse, "site_a"), 50 * MIB);
    within("site B alloc_space", sum_for(&alloc, "site_b"), 20 * MIB);
    within("site B inuse_space", sum_for(&inuse, "site_b"), 10 * MIB);
    within(
        "site C alloc_space",
        sum_for(&alloc, "site_c_in_thread"),
        64 * MIB,
    );
    assert!(sum_for(&inuse, "site_c_in_thread") < (MIB as i64));

    // The allocator's own frames are cut: the innermost frame of site A's stacks is the
    // program's, not hakmem's.
    for s in &profile.samples {
        let leaf = s.functions.first().map_or("", |f| f.as_str());
        assert!(
            !leaf.starts_with("hakmem"),
            "allocator frame left: {:?}",
            s.functions
        );
    }
    // The flame graphs and the text report name the sites too.
    let svg = std::fs::read_to_string(&files[1]).unwrap();
    assert!(
        svg.starts_with("<?xml") && svg.contains("site_a"),
        "in-use flame graph"
    );
    let svg = std::fs::read_to_string(&files[2]).unwrap();
    assert!(svg.contains("site_c_in_thread"), "allocated flame graph");
    let report = std::fs::read_to_string(&files[3]).unwrap();
    let first = report
        .lines()
        .skip_while(|l| !l.contains("stack (innermost first)"))
        .nth(1)
        .unwrap_or("");
    assert!(
        first.contains("site_a"),
        "report's first in-use stack: {report}"
    );

    // The snapshot API agrees.
    let snap = heap_profile::snapshot();
    assert!(snap.stacks[0].functions().any(|f| f.ends_with("site_a")));

    maybe_go_pprof(&files[0]);
    for (p, l) in kept {
        // SAFETY: allocated with `l` and kept until now.
        unsafe { dealloc(p, l) };
    }
    let inuse = heap_profile::snapshot();
    let a: u64 = inuse
        .stacks
        .iter()
        .filter(|s| s.functions().any(|f| f.ends_with("site_a")))
        .map(|s| s.inuse_bytes)
        .sum();
    assert!(
        a < MIB as u64,
        "site A still holds {a} bytes after its blocks were freed"
    );
    heap_profile::stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `go tool pprof -top` reads the profile, when Go is installed (CI need not have it:
/// the checks above decode the file themselves).
/// Blocks over 512 MiB are sampled too (a program's biggest, which a profile must show).
#[test]
fn huge_blocks_are_sampled() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    start();
    let mut kept = Vec::new();
    site_d(&mut kept);
    let dir = std::env::temp_dir().join(format!("hakmem-heap-profile-huge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let files = heap_profile::dump(dir.join("heap")).unwrap();
    let profile = decode::decode(&std::fs::read(&files[0]).unwrap()).unwrap();
    within(
        "site D alloc_space",
        sum_for(&profile.cumulative("alloc_space"), "site_d"),
        2136 * MIB,
    );
    within(
        "site D inuse_space",
        sum_for(&profile.cumulative("inuse_space"), "site_d"),
        1536 * MIB,
    );
    for (p, l) in kept {
        // SAFETY: allocated with `l` and kept until now.
        unsafe { dealloc(p, l) };
    }
    let held: u64 = heap_profile::snapshot()
        .stacks
        .iter()
        .filter(|s| s.functions().any(|f| f.ends_with("site_d")))
        .map(|s| s.inuse_bytes)
        .sum();
    assert_eq!(held, 0, "the freed huge blocks are no longer in use");
    std::fs::remove_dir_all(&dir).ok();
}

/// Site E: 8 MiB in 1 KiB blocks, all kept (in `kept`, allocated by the caller, so that
/// site E's stacks hold 1 KiB blocks only) until the caller frees them.
#[inline(never)]
fn site_e(kept: &mut Vec<(*mut u8, Layout)>) {
    let l = Layout::from_size_align(KIB, 8).unwrap();
    for _ in 0..8 * KIB {
        // SAFETY: a non-zero size.
        let p = unsafe { alloc(l) };
        assert!(!p.is_null());
        kept.push((p, l));
    }
}

/// A block freed after the interval changed gives back the weight it was sampled with:
/// site E's blocks, sampled every 16 KiB, half of them freed while sampling every 1 MiB.
/// Each live sample of a 1 KiB block stands for `1024 / p` bytes, `p = 1 - e^(-1/16)`,
/// before and after; weighed at the new interval, each free would remove 64 times what
/// its sample added.
#[test]
fn interval_change_keeps_in_use_figures() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    start();
    let mut kept = Vec::with_capacity(8 * KIB);
    site_e(&mut kept);
    let held = || -> (u64, u64) {
        let snap = heap_profile::snapshot();
        let mine = snap
            .stacks
            .iter()
            .filter(|s| s.functions().any(|f| f.ends_with("site_e")));
        let bytes = mine.clone().map(|s| s.inuse_bytes).sum();
        (bytes, mine.map(|s| s.live_samples).sum())
    };
    let per_sample = KIB as f64 / -(-1.0f64 / 16.0).exp_m1();
    let agrees = |(bytes, samples): (u64, u64)| {
        let want = samples as f64 * per_sample;
        assert!(
            (bytes as f64 - want).abs() <= want * 0.01,
            "{bytes} bytes in use for {samples} live samples, want {want:.0}"
        );
    };
    let before = held();
    assert!(before.1 > 100, "site E was sampled: {before:?}");
    agrees(before);
    heap_profile::start(Options { interval: MIB }).unwrap();
    let mut rest = Vec::new();
    for (i, (p, l)) in kept.into_iter().enumerate() {
        if i % 2 == 0 {
            // SAFETY: allocated with `l` and kept until now.
            unsafe { dealloc(p, l) };
        } else {
            rest.push((p, l));
        }
    }
    let after = held();
    assert!(after.1 > 0 && after.1 < before.1, "{before:?} -> {after:?}");
    agrees(after);
    start();
    for (p, l) in rest {
        // SAFETY: allocated with `l` and kept until now.
        unsafe { dealloc(p, l) };
    }
}

fn maybe_go_pprof(path: &std::path::Path) {
    let Ok(o) = std::process::Command::new("go")
        .args(["tool", "pprof", "-top", "-sample_index=alloc_space"])
        .arg(path)
        .output()
    else {
        return;
    };
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "go tool pprof failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("site_a"), "go tool pprof -top:\n{out}");
}

/// Threads that allocate, exit and fork while sampling at a tiny interval: no deadlock,
/// no recursion, and a forked child can allocate and sample.
#[test]
fn threads_exit_and_fork_while_sampling() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    heap_profile::start(Options { interval: 4 * KIB }).unwrap();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                for round in 0..20 {
                    let inner = std::thread::spawn(move || {
                        let v: Vec<Vec<u8>> =
                            (0..200).map(|i| vec![t as u8; 64 + i * round]).collect();
                        v.iter().map(|x| x.len()).sum::<usize>()
                    });
                    assert!(inner.join().unwrap() > 0);
                    if t == 0 && round % 5 == 0 {
                        fork_and_allocate();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    heap_profile::stop();
}

fn fork_and_allocate() {
    // SAFETY: the child only allocates, frees and exits with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let v: Vec<Box<[u8]>> = (0..2000)
            .map(|i| vec![1u8; 100 + i].into_boxed_slice())
            .collect();
        let ok = v.iter().all(|b| b[0] == 1);
        // SAFETY: leaves the child at once, running no handlers of the parent's.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
}

/// The shadow model through `HakMem` (sized frees, realloc) on one thread and on three,
/// sampling every 256 bytes on average: sampled blocks are kept apart, aligned and intact,
/// and their frees and reallocs are routed back correctly.
#[test]
fn shadow_model_while_sampling() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    heap_profile::start(Options { interval: 256 }).unwrap();
    for seed in 0..4 * common::scale() as u64 {
        let ops = shadow::ops_from_bytes(&common::Rng::new(seed).bytes(8 * 2000));
        shadow::run(&ops, shadow::Api::Sized);
        shadow::run_threads(&ops, &shadow::Api::Sized, 3);
    }
    let snap = heap_profile::snapshot();
    assert!(
        snap.stacks.iter().map(|s| s.samples).sum::<u64>() > 100,
        "few samples"
    );
    heap_profile::stop();
}
