//! Larson's server simulation: each thread replaces random blocks of 10..1000 bytes in its
//! array, then hands the array on to the next thread, so blocks are freed by threads other
//! than the one that allocated them.
//!
//! `realloc-xthread` runs the same with another replacement: blocks of 8..512 bytes, 2 %
//! of them grown by `realloc` to 0.8 KiB..5 MiB.
//!
//! The threads live as long as the session: thread 0 is the caller's, the others wait for
//! orders between steps, so a soak sees the same threads (and thread caches) throughout.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Barrier, Mutex};
use std::thread::JoinHandle;

use super::churn::{churn, empty_slots};
use super::{Session, Setup};
use crate::{Block, Rng};

const SLOTS: usize = 1000;
/// Replacements a thread makes in an array before passing it on.
const ROUND: u64 = 10_000;

pub fn one_thread(_: &Setup) -> Box<dyn Session> {
    Box::new(Larson::new(1, replace_small))
}

pub fn two_threads(_: &Setup) -> Box<dyn Session> {
    Box::new(Larson::new(2, replace_small))
}

/// Eight threads: on a machine of fewer cores, threads are preempted while they hold a
/// lock (the array's, the allocator's).
pub fn eight_threads(_: &Setup) -> Box<dyn Session> {
    Box::new(Larson::new(8, replace_small))
}

pub fn realloc_two_threads(_: &Setup) -> Box<dyn Session> {
    Box::new(Larson::new(2, replace_or_grow))
}

/// How a thread replaces `ops` random blocks of an array.
type Replace = fn(&mut [Option<Block>], &mut Rng, u64);

/// Larson's: a new block of 10..1000 bytes in place of the old one.
fn replace_small(slots: &mut [Option<Block>], rng: &mut Rng, ops: u64) {
    churn(slots, rng, ops, (10, 1000));
}

/// One time in fifty a block is resized by `realloc` to 0.8 KiB..5 MiB (log-uniform, so
/// every size range gets its share; a block already bigger shrinks); otherwise it is
/// replaced by a new one of 8..512 bytes.
fn replace_or_grow(slots: &mut [Option<Block>], rng: &mut Rng, ops: u64) {
    const GROWN: (f64, f64) = (800.0, (5 << 20) as f64);
    for _ in 0..ops {
        let slot = &mut slots[rng.below(slots.len())];
        match slot {
            Some(block) if rng.below(50) == 0 => {
                let fraction = rng.next_u64() as f64 / 2f64.powi(64);
                block.resize((GROWN.0 * (GROWN.1 / GROWN.0).powf(fraction)) as usize);
            }
            _ => {
                drop(slot.take());
                *slot = Some(Block::new(rng.between((8, 512))));
            }
        }
    }
}

/// What the threads share: the arrays that move from thread to thread.
struct Shared {
    arrays: Vec<Mutex<Vec<Option<Block>>>>,
    barrier: Barrier,
    replace: Replace,
}

/// One thread's part: its random numbers and the rounds it has done, which say the array
/// it works on next.
struct Worker {
    t: usize,
    rng: Rng,
    rounds_done: usize,
}

impl Worker {
    fn new(t: usize) -> Worker {
        Worker {
            t,
            rng: Rng::new(t as u64),
            rounds_done: 0,
        }
    }

    /// `rounds` rounds of `round` replacements, all threads in step.
    fn rounds(&mut self, shared: &Shared, round: u64, rounds: u64) {
        let n = shared.arrays.len();
        for _ in 0..rounds {
            // In round r thread t works on array t + r: the arrays move one thread on.
            let mut array = shared.arrays[(self.t + self.rounds_done) % n]
                .lock()
                .unwrap();
            (shared.replace)(&mut array, &mut self.rng, round);
            drop(array);
            shared.barrier.wait();
            self.rounds_done += 1;
        }
    }
}

/// Orders to a helper thread: rounds of this many replacements, this many rounds.
type Order = (u64, u64);

struct Larson {
    shared: Arc<Shared>,
    first: Worker,
    helpers: Vec<(Sender<Order>, JoinHandle<()>)>,
    done: Receiver<()>,
}

impl Larson {
    fn new(threads: usize, replace: Replace) -> Larson {
        let shared = Arc::new(Shared {
            arrays: (0..threads)
                .map(|_| Mutex::new(empty_slots(SLOTS)))
                .collect(),
            barrier: Barrier::new(threads),
            replace,
        });
        let (done_tx, done) = channel();
        let helpers = (1..threads)
            .map(|t| {
                let (orders_tx, orders) = channel::<Order>();
                let (shared, done) = (Arc::clone(&shared), done_tx.clone());
                let thread = std::thread::spawn(move || {
                    let mut worker = Worker::new(t);
                    for (round, rounds) in orders {
                        worker.rounds(&shared, round, rounds);
                        if done.send(()).is_err() {
                            return;
                        }
                    }
                });
                (orders_tx, thread)
            })
            .collect();
        Larson {
            shared,
            first: Worker::new(0),
            helpers,
            done,
        }
    }
}

impl Session for Larson {
    fn step(&mut self, ops: u64) -> u64 {
        let threads = self.helpers.len() as u64 + 1;
        let round = (ops / threads).clamp(1, ROUND);
        let rounds = (ops / (threads * round)).max(1);
        for (orders, _) in &self.helpers {
            orders.send((round, rounds)).expect("helper thread alive");
        }
        self.first.rounds(&self.shared, round, rounds);
        for _ in &self.helpers {
            self.done.recv().expect("helper thread alive");
        }
        rounds * round * threads
    }
}

impl Drop for Larson {
    fn drop(&mut self) {
        for (orders, thread) in self.helpers.drain(..) {
            drop(orders);
            let _ = thread.join();
        }
    }
}
