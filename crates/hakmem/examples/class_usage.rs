//! Where the bytes go: churn a working set on several threads (by default the shape of the
//! `mid-large` benchmark row: 2 threads, 64 slots each, 8..32 KiB, random replacement),
//! then, while every thread still holds its blocks, print [`hakmem::class_usage`] for
//! every class with slabs: what the program holds, what the thread caches keep, what is
//! free in the slabs, what was never carved.
//!
//! ```text
//! cargo run --release -p hakmem --example class_usage [OPS [THREADS SLOTS MIN MAX]]
//! ```
//!
//! (`8000000 16 256 16 4096` is the shape of the `many-threads` row.)

#[global_allocator]
static GLOBAL: hakmem::HakMem = hakmem::HakMem;

use std::sync::{Arc, Barrier};

/// The working set: threads, slots a thread, smallest and largest block.
#[derive(Clone, Copy)]
struct Shape {
    threads: usize,
    slots: usize,
    sizes: (usize, usize),
}

const MID_LARGE: Shape = Shape {
    threads: 2,
    slots: 64,
    sizes: (8 << 10, 32 << 10),
};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("the arguments are numbers"))
        .collect();
    let (ops, shape) = match args[..] {
        [] => (2_000_000, MID_LARGE),
        [ops] => (ops as u64, MID_LARGE),
        [ops, threads, slots, min, max] if threads > 0 && slots > 0 && min <= max => (
            ops as u64,
            Shape {
                threads,
                slots,
                sizes: (min, max),
            },
        ),
        _ => panic!("usage: class_usage [OPS [THREADS SLOTS MIN MAX]]"),
    };
    let threads = shape.threads;
    // Both barriers are crossed by the workers and this thread: the first when the churn
    // is over, the second when the report is written.
    let churned = Arc::new(Barrier::new(threads + 1));
    let reported = Arc::new(Barrier::new(threads + 1));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (churned, reported) = (churned.clone(), reported.clone());
            std::thread::spawn(move || {
                let set = churn(t as u64 + 1, ops / threads as u64, shape);
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
fn churn(seed: u64, ops: u64, shape: Shape) -> Vec<Option<Vec<u8>>> {
    let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng as usize
    };
    let (slots, (min, max)) = (shape.slots, shape.sizes);
    let mut set: Vec<Option<Vec<u8>>> = (0..slots).map(|_| None).collect();
    for _ in 0..ops {
        let slot = next() % slots;
        set[slot] = None;
        let size = min + next() % (max - min + 1);
        set[slot] = Some(vec![1u8; size]);
    }
    set
}

fn report() {
    println!(
        "{:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}   (KiB)",
        "block", "live", "caches", "depot", "free", "uncarved", "slabs"
    );
    let mut sum = hakmem::ClassUsage::default();
    for u in hakmem::class_usage().iter().filter(|u| u.slabs > 0) {
        row(&u.block_size.to_string(), u);
        sum.live += u.live;
        sum.thread_caches += u.thread_caches;
        sum.depot += u.depot;
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
        "{label:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        u.live >> 10,
        u.thread_caches >> 10,
        u.depot >> 10,
        u.free_in_slabs >> 10,
        u.uncarved >> 10,
        u.slabs >> 10
    );
}
