//! Where the bytes go: churn a working set of mid-size blocks on two threads (the shape of
//! the `mid-large` benchmark row: 64 slots each, 8..32 KiB, random replacement), then,
//! while both threads still hold their blocks, print [`hakmem::class_usage`] for every
//! class with slabs: what the program holds, what the thread caches keep, what is free
//! in the slabs, what was never carved.
//!
//! ```text
//! cargo run --release -p hakmem --example class_usage [OPS]
//! ```

#[global_allocator]
static GLOBAL: hakmem::HakMem = hakmem::HakMem;

use std::sync::{Arc, Barrier};

const THREADS: usize = 2;
const SLOTS: usize = 64;
const SIZES: (usize, usize) = (8 << 10, 32 << 10);

fn main() {
    let ops: u64 = std::env::args()
        .nth(1)
        .map_or(2_000_000, |a| a.parse().expect("OPS is a number"));
    // Both barriers are crossed by the workers and this thread: the first when the churn
    // is over, the second when the report is written.
    let churned = Arc::new(Barrier::new(THREADS + 1));
    let reported = Arc::new(Barrier::new(THREADS + 1));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (churned, reported) = (churned.clone(), reported.clone());
            std::thread::spawn(move || {
                let set = churn(t as u64 + 1, ops / THREADS as u64);
                // Another thread reads a thread's cache as of its last slow path; asking
                // here makes this thread's count exact for the report.
                let _ = hakmem::class_usage();
                churned.wait();
                reported.wait();
                drop(set);
            })
        })
        .collect();
    churned.wait();
    report();
    reported.wait();
    for w in workers {
        w.join().expect("worker");
    }
}

/// `ops` times: replace a random slot with a new block of random size, written.
fn churn(seed: u64, ops: u64) -> Vec<Option<Vec<u8>>> {
    let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng as usize
    };
    let mut set: Vec<Option<Vec<u8>>> = (0..SLOTS).map(|_| None).collect();
    for _ in 0..ops {
        let slot = next() % SLOTS;
        set[slot] = None;
        let size = SIZES.0 + next() % (SIZES.1 - SIZES.0 + 1);
        set[slot] = Some(vec![1u8; size]);
    }
    set
}

fn report() {
    println!(
        "{:>8} {:>9} {:>9} {:>9} {:>9} {:>9}   (KiB)",
        "block", "live", "caches", "free", "uncarved", "slabs"
    );
    let mut sum = hakmem::ClassUsage::default();
    for u in hakmem::class_usage().iter().filter(|u| u.slabs > 0) {
        row(&u.block_size.to_string(), u);
        sum.live += u.live;
        sum.thread_caches += u.thread_caches;
        sum.free_in_slabs += u.free_in_slabs;
        sum.uncarved += u.uncarved;
        sum.slabs += u.slabs;
    }
    row("all", &sum);
    let s = hakmem::stats();
    println!(
        "mapped {} KiB, process resident {} KiB",
        s.mapped >> 10,
        s.resident >> 10
    );
}

/// One line of the table, in KiB.
fn row(label: &str, u: &hakmem::ClassUsage) {
    println!(
        "{label:>8} {:>9} {:>9} {:>9} {:>9} {:>9}",
        u.live >> 10,
        u.thread_caches >> 10,
        u.free_in_slabs >> 10,
        u.uncarved >> 10,
        u.slabs >> 10
    );
}
