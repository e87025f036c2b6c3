//! `fork` while other threads allocate, free, trim and read statistics: the child (which
//! inherits the locks as the `pthread_atfork` handlers left them) can allocate every kind
//! of block, free, trim, and exit, without hanging.

use hakmem_core::{alloc, dealloc, stats, trim};
use std::sync::atomic::{AtomicBool, Ordering};
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

#[test]
fn fork_while_other_threads_allocate() {
    static STOP: AtomicBool = AtomicBool::new(false);
    let workers: Vec<_> = (0..3)
        .map(|t| {
            std::thread::spawn(move || {
                let mut live: Vec<(usize, usize)> = Vec::new();
                let mut i = 0usize;
                while !STOP.load(Ordering::Relaxed) {
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
        // SAFETY: waiting for our own child.
        while unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } != pid {
            if Instant::now() > deadline {
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
            -1 => failures.push(format!("round {round}: the child hung")),
            s => failures.push(format!("round {round}: child wait status {s:#x}")),
        }
    }
    STOP.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
