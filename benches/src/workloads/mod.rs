//! The workloads, by name. Each runs about `ops` operations and returns how many it did.

mod churn;
mod fixed;
mod larson;
mod producer_consumer;
mod realloc;

pub struct Workload {
    pub name: &'static str,
    /// The operation count of a full run (`cargo xtask bench` scales it with `--ops`).
    pub default_ops: u64,
    pub run: fn(ops: u64) -> u64,
}

pub const WORKLOADS: &[Workload] = &[
    Workload {
        name: "random-mixed",
        default_ops: 20_000_000,
        run: churn::random_mixed,
    },
    Workload {
        name: "fixed-size",
        default_ops: 50_000_000,
        run: fixed::fixed_size,
    },
    Workload {
        name: "larson-1t",
        default_ops: 10_000_000,
        run: larson::one_thread,
    },
    Workload {
        name: "larson-2t",
        default_ops: 10_000_000,
        run: larson::two_threads,
    },
    Workload {
        name: "mid-large",
        default_ops: 5_000_000,
        run: churn::mid_large,
    },
    Workload {
        name: "producer-consumer",
        default_ops: 10_000_000,
        run: producer_consumer::run,
    },
    Workload {
        name: "realloc-growth",
        default_ops: 5_000_000,
        run: realloc::realloc_growth,
    },
    Workload {
        name: "large",
        default_ops: 300_000,
        run: churn::large,
    },
    Workload {
        name: "thread-churn",
        default_ops: 5_000_000,
        run: churn::thread_churn,
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
