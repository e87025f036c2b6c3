//! The workloads, by name. A benchmark run does about `ops` operations once and returns
//! how many it did; a soak (see [`crate::soak`]) keeps a [`Session`] going for as long as
//! it is asked to.

mod aligned;
mod batch;
mod big;
mod churn;
mod fixed;
mod hash_table;
mod larson;
mod list;
mod live_growth;
mod phases;
mod producer_consumer;
mod realloc;
mod scratch;
mod thread_pool;
mod tree;

use std::time::Duration;

/// A workload in progress. It keeps its state (its blocks, its threads) between steps, so
/// a soak can run it step after step for as long as it likes.
pub trait Session {
    /// Do about `ops` more operations; how many were done. A workload that is idling
    /// does none: it sleeps a few milliseconds and returns 0.
    fn step(&mut self, ops: u64) -> u64;

    /// A moment the last step reached that a report should mark (see [`Mark`]), once.
    fn take_mark(&mut self) -> Option<Mark> {
        None
    }
}

/// A moment in a workload's life, e.g. "all blocks of `block` bytes freed".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    pub what: &'static str,
    /// The block size the moment is about.
    pub block: usize,
}

/// What sessions may need beyond the operation count.
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    /// Bytes of small blocks the `phases` workload allocates in each phase.
    pub phases_bytes: usize,
    /// How long `phases` idles after each free.
    pub phases_idle: Duration,
    /// The allocator's "give cached memory back now", if it has one (`phases-trim`).
    pub trim: Option<fn()>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            phases_bytes: 1 << 30,
            phases_idle: Duration::from_secs(1),
            trim: None,
        }
    }
}

/// How a workload runs.
pub enum Run {
    /// From scratch, `ops` operations at once.
    Once(fn(ops: u64) -> u64),
    /// As a session; a benchmark run is one step of a fresh session.
    Session(fn(&Setup) -> Box<dyn Session>),
}

pub struct Workload {
    pub name: &'static str,
    /// The operation count of a full benchmark run (`cargo xtask bench` scales it with
    /// `--ops`); `None` for a workload that only soaks.
    pub default_ops: Option<u64>,
    pub run: Run,
    /// Runs only with an allocator that has a `trim`.
    pub needs_trim: bool,
}

impl Workload {
    const fn bench(name: &'static str, default_ops: u64, run: Run) -> Workload {
        Workload {
            name,
            default_ops: Some(default_ops),
            run,
            needs_trim: false,
        }
    }

    const fn soak(name: &'static str, start: fn(&Setup) -> Box<dyn Session>) -> Workload {
        Workload {
            name,
            default_ops: None,
            run: Run::Session(start),
            needs_trim: false,
        }
    }

    /// Run `ops` operations from scratch (a benchmark run); how many were done.
    pub fn run_once(&self, ops: u64) -> u64 {
        match self.run {
            Run::Once(run) => run(ops),
            Run::Session(start) => start(&Setup::default()).step(ops),
        }
    }

    /// A session of this workload, if it can soak with what `setup` offers.
    pub fn start(&self, setup: &Setup) -> Option<Box<dyn Session>> {
        match self.run {
            Run::Session(start) if self.can_soak(setup) => Some(start(setup)),
            _ => None,
        }
    }

    pub fn can_soak(&self, setup: &Setup) -> bool {
        matches!(self.run, Run::Session(_)) && (setup.trim.is_some() || !self.needs_trim)
    }
}

pub const WORKLOADS: &[Workload] = &[
    Workload::bench(
        "random-mixed",
        20_000_000,
        Run::Session(churn::random_mixed),
    ),
    Workload::bench("fixed-size", 50_000_000, Run::Once(fixed::fixed_size)),
    Workload::bench("larson-1t", 10_000_000, Run::Session(larson::one_thread)),
    Workload::bench("larson-2t", 10_000_000, Run::Session(larson::two_threads)),
    Workload::bench("mid-large", 5_000_000, Run::Once(churn::mid_large)),
    Workload::bench("wide-churn", 5_000_000, Run::Once(churn::wide)),
    Workload::bench(
        "producer-consumer",
        10_000_000,
        Run::Once(producer_consumer::run),
    ),
    Workload::bench(
        "realloc-growth",
        5_000_000,
        Run::Once(realloc::realloc_growth),
    ),
    Workload::bench("large", 300_000, Run::Once(churn::large)),
    Workload::bench("thread-churn", 5_000_000, Run::Once(churn::thread_churn)),
    Workload::bench("many-threads", 8_000_000, Run::Once(churn::many_threads)),
    Workload::bench("pages", 5_000_000, Run::Once(churn::pages)),
    Workload::bench("batch-fwd", 1_000_000, Run::Once(batch::forward)),
    Workload::bench("batch-rev", 1_000_000, Run::Once(batch::reverse)),
    Workload::bench("batch-rand", 1_000_000, Run::Once(batch::random)),
    Workload::bench("batch-xthread", 1_000_000, Run::Once(batch::cross_thread)),
    Workload::bench(
        "batch-xthread-rand",
        1_000_000,
        Run::Once(batch::cross_thread_random),
    ),
    Workload::bench("big-buffers", 64, Run::Once(big::big_buffers)),
    Workload::bench("big-zeroed", 64, Run::Once(big::big_zeroed)),
    Workload::bench("large-written", 20_000, Run::Once(big::large_written)),
    Workload::bench("big-sparse", 20_000, Run::Once(big::big_sparse)),
    Workload::bench("sparse-zeroed", 200, Run::Once(big::sparse_zeroed)),
    Workload::bench("shrunk-buffers", 500, Run::Once(big::shrunk_buffers)),
    Workload::bench("phase-change", 6, Run::Once(big::phase_change)),
    Workload::bench("buffer-doubling", 280, Run::Once(big::buffer_doubling)),
    Workload::bench(
        "live-growth",
        1_000_000,
        Run::Once(live_growth::live_growth),
    ),
    Workload::bench("tree", 1_000_000, Run::Once(tree::tree)),
    Workload::bench("aligned", 10_000_000, Run::Once(aligned::aligned)),
    Workload::bench(
        "realloc-xthread",
        3_000_000,
        Run::Session(larson::realloc_two_threads),
    ),
    Workload::bench(
        "string-builders",
        2_000_000,
        Run::Once(realloc::string_builders),
    ),
    Workload::bench("half-freed", 1_500_000, Run::Once(batch::half_freed)),
    Workload::bench("io-buffers", 5_000_000, Run::Once(churn::io_buffers)),
    Workload::bench("list-rebuild", 1_000_000, Run::Once(list::list_rebuild)),
    Workload::bench(
        "hash-teardown",
        1_000_000,
        Run::Once(hash_table::hash_teardown),
    ),
    Workload::bench("fifo", 5_000_000, Run::Once(churn::fifo)),
    Workload::bench("table-churn", 5_000_000, Run::Once(churn::table)),
    Workload::bench("conn-buffers", 300_000, Run::Once(churn::conn_buffers)),
    Workload::bench(
        "conn-buffers-small",
        300_000,
        Run::Once(churn::conn_buffers_small),
    ),
    Workload::bench("larson-8t", 10_000_000, Run::Session(larson::eight_threads)),
    Workload::bench("thread-pool", 300_000, Run::Once(thread_pool::run)),
    Workload::bench("buffer-ring", 50_000, Run::Once(big::buffer_ring)),
    Workload::bench("buffer-pipeline", 20_000, Run::Once(big::buffer_pipeline)),
    Workload::bench("cache-scratch", 200_000, Run::Once(scratch::run)),
    Workload::bench("cache-scratch-warm", 200_000, Run::Once(scratch::run_warm)),
    Workload::soak("phases", phases::plain),
    Workload {
        needs_trim: true,
        ..Workload::soak("phases-trim", phases::with_trim)
    },
];

pub fn find(name: &str) -> Option<&'static Workload> {
    WORKLOADS.iter().find(|w| w.name == name)
}

/// Run `work(0..threads)` on `threads` threads at once; one thread runs on the caller's.
fn on_threads(threads: usize, work: impl Fn(usize) + Sync) {
    if threads == 1 {
        return work(0);
    }
    std::thread::scope(|s| {
        for t in 0..threads {
            let work = &work;
            s.spawn(move || work(t));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_soak_only_ones_are_not_benchmarks() {
        for (i, w) in WORKLOADS.iter().enumerate() {
            assert!(
                WORKLOADS[..i].iter().all(|o| o.name != w.name),
                "{}",
                w.name
            );
            if w.default_ops.is_none() {
                assert!(matches!(w.run, Run::Session(_)), "{}", w.name);
            }
        }
    }

    #[test]
    fn trim_workloads_need_a_trim() {
        let w = find("phases-trim").expect("listed");
        assert!(w.start(&Setup::default()).is_none());
        let setup = Setup {
            trim: Some(|| {}),
            ..Setup::default()
        };
        assert!(w.can_soak(&setup));
        assert!(!find("fixed-size").expect("listed").can_soak(&setup));
    }

    #[test]
    fn sessions_keep_going_step_after_step() {
        for name in [
            "random-mixed",
            "larson-1t",
            "larson-2t",
            "larson-8t",
            "realloc-xthread",
        ] {
            let mut s = find(name)
                .expect("listed")
                .start(&Setup::default())
                .unwrap();
            let done: u64 = (0..3).map(|_| s.step(2_000)).sum();
            assert_eq!(done, 6_000, "{name}");
        }
    }
}
