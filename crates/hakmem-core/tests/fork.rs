//! `fork` while other threads allocate, free, trim and read statistics: the child (which
//! inherits the locks as the `pthread_atfork` handlers left them) can allocate every kind
//! of block, free, trim, and exit, without hanging.

use hakmem_core::{alloc, dealloc, stats, trim};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const SIZES: [usize; 5] = [24, 1000, 30_000, 200_000, 5_000_000];

/// What the child does; no allocation but hakmem's, no formatting (another thread may
/// have held the system allocator's lock at the fork). Returns the exit status.
fn child() -> i32 {
    for i in 0..2000 {
        let size = SIZES[i % SIZES.len()];
        let p = alloc(size, 16);
        if p.is_null() {
            return 3;
        }
        // SAFETY: a fresh block of `size` bytes, freed as made.
        unsafe {
            *p = 1;
            *p.add(size - 1) = 2;
            dealloc(p, size, 16);
        }
    }
    trim();
    i32::from(stats().mapped == 0)
}

/// Worker iterations allowed per round of forks: the work stays bounded however slow the
/// machine is. Unbounded, the workers ran for as long as the forks took, and under
/// qemu-user (7.2), which keeps about 49 KB for every 8 MiB `mmap` + `munmap` pair it
/// emulates, the process grew by gigabytes; each fork then took longer, letting the
/// workers churn more, until a child missed its deadline on a slow CI machine.
const PER_ROUND: usize = 1000;
const WORKERS: usize = 3;

#[test]
fn fork_while_other_threads_allocate() {
    static STOP: AtomicBool = AtomicBool::new(false);
    // Rounds begun; a worker may make `PER_ROUND` iterations for each.
    static ROUNDS: AtomicUsize = AtomicUsize::new(0);
    static DONE: [AtomicUsize; WORKERS] = [const { AtomicUsize::new(0) }; WORKERS];
    let workers: Vec<_> = (0..WORKERS)
        .map(|t| {
            std::thread::spawn(move || {
                let mut live: Vec<(usize, usize)> = Vec::new();
                let mut i = 0usize;
                while !STOP.load(Ordering::Relaxed) {
                    if i >= ROUNDS.load(Ordering::Relaxed) * PER_ROUND {
                        std::thread::sleep(Duration::from_millis(1));
                        continue;
                    }
                    i += 1;
                    let size = SIZES[i % SIZES.len()];
                    live.push((alloc(size, 16) as usize, size));
                    if live.len() > 50 {
                        let (p, size) = live.swap_remove((i * 7 + t) % live.len());
                        // SAFETY: a live block made with `(size, 16)`.
                        unsafe { dealloc(p as *mut u8, size, 16) };
                    }
                    if i % 1000 == 0 {
                        trim();
                        let _ = stats();
                    }
                    DONE[t].store(i, Ordering::Relaxed);
                }
                for (p, size) in live {
                    // SAFETY: as above.
                    unsafe { dealloc(p as *mut u8, size, 16) };
                }
            })
        })
        .collect();
    let mut failures = Vec::new();
    for round in 0..50 {
        // Let the workers into this round's work, and fork once each is a tenth into it.
        ROUNDS.store(round + 1, Ordering::Relaxed);
        let begun = round * PER_ROUND + PER_ROUND / 10;
        while DONE.iter().any(|d| d.load(Ordering::Relaxed) < begun) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // SAFETY: a fresh block, freed as made (this thread is set up before the fork).
        unsafe { dealloc(alloc(100, 16), 100, 16) };
        // SAFETY: the child only runs `child` and `_exit`s.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: leaving the child at once, without running the parent's exit code.
            unsafe { libc::_exit(child()) };
        }
        assert!(pid > 0, "fork failed");
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut status = 0;
        let mut hung = String::new();
        // SAFETY: waiting for our own child.
        while unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } != pid {
            if Instant::now() > deadline {
                hung = threads_of(pid);
                // SAFETY: our own child, hung.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, &mut status, 0);
                }
                status = -1;
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        match status {
            0 => {}
            -1 => failures.push(format!("round {round}: the child hung: {hung}")),
            s => failures.push(format!("round {round}: child wait status {s:#x}")),
        }
    }
    STOP.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// What each thread of a hung child is doing, read twice half a second apart: state,
/// CPU ticks and kernel wait channel (a thread spinning on one of our locks runs and
/// gains ticks; one stuck in a lock of the emulator or libc sleeps in `futex_wait`).
fn threads_of(pid: i32) -> String {
    let read = || {
        let mut out = Vec::new();
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return out;
        };
        for t in dir.flatten() {
            let path = t.path();
            let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
            let wchan = std::fs::read_to_string(path.join("wchan")).unwrap_or_default();
            let f: Vec<&str> = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect();
            let ticks = f
                .get(11)
                .zip(f.get(12))
                .map(|(u, s)| u.parse::<u64>().unwrap_or(0) + s.parse::<u64>().unwrap_or(0));
            out.push(format!(
                "{} {} ticks {} in {wchan}",
                t.file_name().to_string_lossy(),
                f.first().unwrap_or(&"?"),
                ticks.unwrap_or(0)
            ));
        }
        out
    };
    let before = read();
    std::thread::sleep(Duration::from_millis(500));
    format!("{before:?} then {:?}", read())
}
