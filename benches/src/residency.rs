//! `--residency`: where the allocator's resident memory was through a run, from its
//! census ([`crate::Hooks::residency`]) taken every 2 ms on a thread of its own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::procfs::rss_kb;

/// Per kind of memory an allocator holds: `(what, mapped bytes, resident bytes)`.
pub type Census = Vec<(&'static str, usize, usize)>;

/// A thread that takes a census every 2 ms and keeps the one with the most resident,
/// leaving out those that count more than the process holds (taken while the workload
/// moved blocks, they count some twice).
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Census>,
}

impl Sampler {
    pub fn start(census: fn() -> Census) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let resident = |c: &Census| c.iter().map(|k| k.2).sum::<usize>();
            let mut most = census();
            while !stopped.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(2));
                let now = census();
                let held = usize::try_from(rss_kb() * 1024).unwrap_or(usize::MAX);
                if resident(&now) > resident(&most) && resident(&now) <= held {
                    most = now;
                }
            }
            most
        });
        Sampler { stop, thread }
    }

    /// The `RESIDENCY` line: per kind, resident and mapped MiB at the fullest sample.
    pub fn finish(self) -> String {
        self.stop.store(true, Ordering::Relaxed);
        let most = self.thread.join().expect("the sampler thread");
        let mib = |b: usize| b as f64 / (1 << 20) as f64;
        let kinds: Vec<String> = most
            .iter()
            .map(|(what, mapped, resident)| {
                format!("{what}={:.1}/{:.1}", mib(*resident), mib(*mapped))
            })
            .collect();
        format!(
            "RESIDENCY resident/mapped MiB at the fullest sample: {}",
            kinds.join(" ")
        )
    }
}
