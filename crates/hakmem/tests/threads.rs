//! Many threads at once: blocks freed by threads that did not allocate them, threads that
//! exit while their blocks live on (their superslabs are abandoned, then adopted), and
//! the memory of a program that starts ten thousand threads.
//!
//! hakmem is this binary's global allocator, so that besides the test blocks everything
//! std does around threads (spawn, channels, thread handles, thread-local destructors
//! running at exit, the test harness) also goes through it, as in a real program. Every
//! test block carries a pattern checked before it is freed ([`common::Block`]).
//!
//! The tests take one lock, so that they run one at a time: the RSS test measures the
//! whole process, and the others already use every core.

mod common;

use common::{Block, Rng};
use std::sync::mpsc;
use std::sync::{Barrier, Mutex, MutexGuard};
use std::thread;

#[global_allocator]
static GLOBAL: hakmem::HakMem = hakmem::HakMem;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Ids unique across threads: the thread number in the high bits.
fn id(thread: usize, i: usize) -> u64 {
    ((thread as u64) << 32) | i as u64
}

#[test]
fn producer_consumer_cross_thread_frees() {
    let _serial = serial();
    let per_producer = 10_000 * common::scale();
    let pairs: Vec<_> = (0..2)
        .map(|t| {
            // Bounded, so that a producer runs at most this far ahead.
            let (to_consumer, from_producer) = mpsc::sync_channel::<Block>(256);
            let (to_producer, returned) = mpsc::channel::<Block>();
            let producer = thread::spawn(move || {
                let mut rng = Rng::new(t as u64);
                let mut came_back = 0;
                for i in 0..per_producer {
                    to_consumer
                        .send(Block::random(&mut rng, 256 << 10, id(t, i)))
                        .unwrap();
                    // Free our own blocks after they went through another thread.
                    for b in returned.try_iter() {
                        assert_eq!(b.id() >> 32, t as u64);
                        came_back += 1;
                    }
                }
                drop(to_consumer);
                came_back + returned.iter().count()
            });
            let consumer = thread::spawn(move || {
                let mut freed = 0;
                for b in from_producer {
                    if b.id() % 8 == 0 {
                        b.check("at the consumer");
                        to_producer.send(b).unwrap();
                    } else {
                        drop(b);
                        freed += 1;
                    }
                }
                freed
            });
            (producer, consumer)
        })
        .collect();
    for (producer, consumer) in pairs {
        let returned = producer.join().unwrap();
        let freed = consumer.join().unwrap();
        assert_eq!(returned, per_producer.div_ceil(8));
        assert_eq!(returned + freed, per_producer);
    }
}

#[test]
fn every_thread_frees_the_others_blocks() {
    let _serial = serial();
    const THREADS: usize = 4;
    let rounds = 12 * common::scale();
    let slots: Vec<Mutex<Vec<Block>>> = (0..THREADS).map(|_| Mutex::new(Vec::new())).collect();
    let barrier = Barrier::new(THREADS);
    thread::scope(|s| {
        for t in 0..THREADS {
            let (slots, barrier) = (&slots, &barrier);
            s.spawn(move || {
                let mut rng = Rng::new(100 + t as u64);
                for round in 0..rounds {
                    let mine: Vec<Block> = (0..400)
                        .map(|i| Block::random(&mut rng, 128 << 10, id(t, round * 1000 + i)))
                        .collect();
                    slots[t].lock().unwrap().extend(mine);
                    barrier.wait();
                    // Each round, free the blocks of a different other thread.
                    let victim = (t + 1 + round % (THREADS - 1)) % THREADS;
                    let theirs = std::mem::take(&mut *slots[victim].lock().unwrap());
                    assert_eq!(theirs.len(), 400);
                    for b in theirs {
                        assert_eq!(b.id() >> 32, victim as u64);
                        drop(b);
                    }
                    barrier.wait();
                }
            });
        }
    });
    assert!(slots.iter().all(|s| s.lock().unwrap().is_empty()));
}

/// Threads that exit while some of their blocks live on: each thread frees half of what
/// it allocated and hands the rest out; the main thread keeps those for two more batches
/// (while new threads adopt the abandoned superslabs and allocate from them), then hands
/// some to a new thread to free and frees the rest itself.
#[test]
fn thread_churn_with_blocks_outliving_their_threads() {
    let _serial = serial();
    const BATCH: usize = 16;
    let threads = 2_000 * common::scale();
    let mut held: std::collections::VecDeque<Vec<Block>> = Default::default();
    let mut rng = Rng::new(7);
    let mut handed_out = 0usize;
    for batch in 0..threads / BATCH {
        let handles: Vec<_> = (0..BATCH)
            .map(|k| {
                let t = batch * BATCH + k;
                // Blocks of threads long gone, for this one to free.
                let to_free: Vec<Block> = match held.front_mut() {
                    Some(old) => (0..4).filter_map(|_| old.pop()).collect(),
                    None => Vec::new(),
                };
                let seed = rng.next_u64();
                thread::spawn(move || {
                    drop(to_free);
                    let mut rng = Rng::new(seed);
                    let mut blocks: Vec<Block> = (0..48)
                        .map(|i| Block::random(&mut rng, 160 << 10, id(t, i)))
                        .collect();
                    let keep = blocks.split_off(24);
                    drop(blocks);
                    keep
                })
            })
            .collect();
        let mut out = Vec::new();
        for h in handles {
            let keep = h.join().unwrap();
            handed_out += keep.len();
            out.extend(keep);
        }
        for b in &out {
            b.check("after its thread exited");
        }
        held.push_back(out);
        if held.len() > 2 {
            drop(held.pop_front());
        }
    }
    assert_eq!(handed_out, threads / BATCH * BATCH * 24);
    for batch in held {
        for b in batch {
            b.check("at the end");
        }
    }
}

/// Start and join threads that each allocate and free a little, some of it freed by the
/// main thread after they exit; between the 1,000th and the 10,000th thread (times
/// `HAKMEM_TEST_SCALE`) neither the resident set nor hakmem's mappings may grow by more
/// than 16 MiB: the memory of exited threads is reused, not leaked.
#[test]
fn ten_thousand_threads_keep_memory_flat() {
    let _serial = serial();
    const BATCH: usize = 8;
    const BOUND: usize = 16 << 20;
    let run = |from: usize, to: usize| {
        for batch in (from..to).step_by(BATCH) {
            let handles: Vec<_> = (batch..batch + BATCH)
                .map(|t| {
                    thread::spawn(move || {
                        let mut rng = Rng::new(t as u64);
                        let small: Vec<Block> = (0..16)
                            .map(|i| Block::new(rng.range(1, 512), 8, id(t, i)))
                            .collect();
                        let mid = Block::new(rng.range(1025, 40_000), 16, id(t, 100));
                        let text: String = (0..50).map(|i| char::from(b'a' + i % 26)).collect();
                        drop(small);
                        drop(mid);
                        (Block::new(rng.range(1, 256), 8, id(t, 200)), text)
                    })
                })
                .collect();
            for h in handles {
                let (b, text) = h.join().unwrap();
                assert_eq!(text.len(), 50);
                drop(b);
            }
        }
    };
    run(0, 1_000);
    let at_1k = hakmem::stats();
    assert!(at_1k.resident > 0, "RSS not readable");
    let threads = 10_000 * common::scale();
    run(1_000, threads);
    let after = hakmem::stats();
    eprintln!("after 1,000 threads: {at_1k:?}\nafter {threads} threads: {after:?}");
    // Under an emulator (qemu-user) the resident set is the emulator's, which keeps
    // memory for every guest thread it ever ran: only hakmem's mappings are checked there.
    let emulated = std::env::var_os(common::RUNNER_VAR).is_some();
    let rss = ("RSS", at_1k.resident, after.resident);
    let mappings = ("hakmem's mappings", at_1k.mapped, after.mapped);
    let checks = if emulated {
        vec![mappings]
    } else {
        vec![rss, mappings]
    };
    for (what, before, now) in checks {
        assert!(
            now < before + BOUND,
            "{what} grew from {} KiB to {} KiB over {} threads",
            before >> 10,
            now >> 10,
            threads - 1_000
        );
    }
}
