//! In a profile with a background return (lean here, whose visits come every 125 ms), a
//! thread keeps the large blocks it frees without a lock (`kept::Keeper`): the next
//! request takes a kept block, the visit to the idle thread gives what it keeps back (the
//! return started again for it if it had ended), and threads that keep using their blocks
//! while the visits come are never handed a block that is live (a smoke test: a visit
//! claims the blocks of an idle thread only, so a race is rare).
//!
//! The profile is process-wide: one test, its steps in turn.

use hakmem_core::{alloc, dealloc, set_profile, stats, Profile, CHUNK_SIZE};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;

/// Set the calling thread's heap up (a small block's slow path): only a thread with a
/// heap keeps large blocks.
fn set_up_heap() {
    // SAFETY: a fresh block, freed with its request.
    unsafe { dealloc(alloc(64, 16), 64, 16) };
}

/// The live large blocks of every thread of the stress, as `(start, end)`.
static LIVE: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

/// A large block of `size` bytes, its ends written with `tag`, noted live; panics if it
/// overlaps a block that is.
fn large(size: usize, tag: u8) -> *mut u8 {
    let p = alloc(size, 16);
    assert!(!p.is_null());
    let (start, end) = (p as usize, p as usize + size);
    let mut live = LIVE.lock().unwrap();
    if let Some(other) = live.iter().find(|&&(s, e)| s < end && start < e) {
        panic!("{start:#x}..{end:#x} handed out while {other:x?} is live");
    }
    live.push((start, end));
    drop(live);
    // SAFETY: a fresh block of `size` bytes: its ends.
    unsafe {
        p.write(tag);
        p.add(size - 1).write(tag);
    }
    p
}

/// Free a block [`large`] made, after checking its ends still hold `tag`.
fn free(p: *mut u8, size: usize, tag: u8) {
    // SAFETY: a live block of `size` bytes.
    let ends = unsafe { (p.read(), p.add(size - 1).read()) };
    assert_eq!(ends, (tag, tag), "a live block's ends were overwritten");
    LIVE.lock().unwrap().retain(|&(s, _)| s != p as usize);
    // SAFETY: a live block made with `(size, 16)`.
    unsafe { dealloc(p, size, 16) };
}

#[test]
fn lean_keeps_large_blocks_and_its_visits_give_them_back() {
    set_profile(Profile::Lean);
    set_up_heap();

    // The threads keep blocks once the background return has readied the process
    // barrier (it starts when memory is first retained): a freed block is then kept,
    // not cached. On Linux it must come (qemu-user passes the call through too).
    let deadline = Instant::now() + Duration::from_secs(5);
    let a = loop {
        let a = large(3 * MIB, 1);
        let cached = stats().cached_large;
        free(a, 3 * MIB, 1);
        if stats().cached_large == cached {
            break a;
        }
        assert!(Instant::now() < deadline, "lean never kept a large block");
        std::thread::sleep(Duration::from_millis(20));
    };
    let b = large(5 * MIB / 2, 2);
    assert_eq!(b, a, "the kept block serves the next request");
    free(b, 5 * MIB / 2, 2);

    // Idle: a visit notes the use, the next gives the block back (kept blocks count as
    // allocated).
    let allocated = stats().allocated;
    std::thread::sleep(Duration::from_millis(1000));
    assert!(
        stats().allocated + CHUNK_SIZE <= allocated,
        "the visits to the idle thread gave its kept block back"
    );

    // The return ends once nothing is retained and no thread is active (lean: a pass
    // every 125 ms, retained pieces kept 250 ms); a block kept after that starts it
    // again, so that it is given back too.
    std::thread::sleep(Duration::from_millis(1500));
    let c = large(3 * MIB, 3);
    free(c, 3 * MIB, 3);
    let allocated = stats().allocated;
    std::thread::sleep(Duration::from_millis(1000));
    assert!(
        stats().allocated + CHUNK_SIZE <= allocated,
        "a block kept after the return ended was given back"
    );

    // Threads that use their kept blocks in bursts, idle between (so that visits claim
    // them), beside threads without a heap, which take from the cache what the visits
    // give back: no block is handed out twice.
    let end = Instant::now() + Duration::from_millis(1500);
    let workers: Vec<_> = (0..4u8)
        .map(|w| {
            std::thread::spawn(move || {
                let keeps = w % 2 == 0;
                if keeps {
                    set_up_heap();
                }
                let mut round = 0usize;
                while Instant::now() < end {
                    round += 1;
                    let held: Vec<(*mut u8, usize)> = (0..3)
                        .map(|i| {
                            let size = MIB + (round * 7 + i * 5 + w as usize) % 24 * 128 * 1024;
                            (large(size, w), size)
                        })
                        .collect();
                    for (p, size) in held {
                        free(p, size, w);
                    }
                    if keeps && round % 8 == 0 {
                        let ms = 100 + (round * 37 + w as usize * 53) % 200;
                        std::thread::sleep(Duration::from_millis(ms as u64));
                    }
                }
                round
            })
        })
        .collect();
    for w in workers {
        let rounds = w.join().expect("a worker");
        assert!(rounds > 8, "a worker ran {rounds} rounds");
    }
}
