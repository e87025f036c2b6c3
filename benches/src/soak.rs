//! `bench-ALLOCATOR soak ...`: one workload session kept going for a while, reported in
//! epochs of fixed length, for `cargo xtask soak`:
//!
//! ```text
//! bench-hakmem soak --list                     # "soak-workload NAME" per line
//! bench-hakmem soak WORKLOAD DURATION_MS EPOCH_MS [--phases-bytes N] [--phases-idle-ms N]
//! EPOCH t=1.000012 secs=1.000012 ops=51234567 rss_kb=2816 os_calls=0 in_use_kb=212
//! MARK t=1.250004 what=freed block=64 rss_kb=40960 in_use_kb=37
//! ```
//!
//! An `EPOCH` line ends each epoch: `t` is the time since the start in seconds, `secs`
//! the epoch's length, `ops` the operations done in it, `rss_kb` the resident set then
//! (`/proc/self/statm`), `os_calls` the allocator's OS calls made in it and `in_use_kb` what
//! it counts as handed out, thread caches included (both hakmem only). A `MARK` line says
//! when the workload reached a moment worth marking (see [`crate::workloads::Mark`]), with
//! the resident set (and bytes in use) at that moment.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::procfs::rss_kb;
use crate::workloads::{Session, Setup, WORKLOADS};
use crate::{fail, Hooks};

/// A step of the session should take about this long: long enough that reading the clock
/// costs nothing, short enough that epochs end on time.
const STEP_TIME: (Duration, Duration) = (Duration::from_micros(500), Duration::from_millis(2));
const MAX_CHUNK: u64 = 1 << 22;

pub fn main(args: &[&str], hooks: Hooks) {
    let mut setup = Setup {
        trim: hooks.trim,
        ..Setup::default()
    };
    match args {
        ["--list"] => {
            for w in WORKLOADS.iter().filter(|w| w.can_soak(&setup)) {
                println!("soak-workload {}", w.name);
            }
        }
        [name, duration_ms, epoch_ms, options @ ..] => {
            for pair in options.chunks(2) {
                match pair {
                    ["--phases-bytes", n] => setup.phases_bytes = number(n) as usize,
                    ["--phases-idle-ms", n] => setup.phases_idle = millis(n),
                    _ => fail(&format!("unknown soak option(s) {pair:?}")),
                }
            }
            let Some(session) = crate::workloads::find(name).and_then(|w| w.start(&setup)) else {
                fail(&format!(
                    "{name:?} cannot soak with this allocator; `soak --list` shows what can"
                ));
            };
            let (duration, epoch) = (millis(duration_ms), millis(epoch_ms));
            if epoch.is_zero() {
                fail("EPOCH_MS must be at least 1");
            }
            soak(session, duration, epoch, hooks);
        }
        _ => fail("usage: bench-ALLOCATOR soak --list | soak WORKLOAD DURATION_MS EPOCH_MS [--phases-bytes N] [--phases-idle-ms N]"),
    }
}

fn number(text: &str) -> u64 {
    text.parse()
        .unwrap_or_else(|_| fail(&format!("not a number: {text:?}")))
}

fn millis(text: &str) -> Duration {
    Duration::from_millis(number(text))
}

/// Run `session` for `duration` in epochs of `epoch`, printing a line per epoch and per mark.
fn soak(mut session: Box<dyn Session>, duration: Duration, epoch: Duration, hooks: Hooks) {
    let mut out = std::io::stdout().lock();
    let start = Instant::now();
    let end = start + duration;
    let mut calls = hooks.os_calls.map(|f| f());
    let mut chunk = 1024;
    let mut epoch_start = start;
    for k in 1.. {
        let epoch_end = (start + epoch * k).min(end);
        let mut ops = 0;
        loop {
            let before = Instant::now();
            if before >= epoch_end {
                break;
            }
            ops += session.step(chunk);
            let took = before.elapsed();
            if took < STEP_TIME.0 {
                chunk = (chunk * 2).min(MAX_CHUNK);
            } else if took > STEP_TIME.1 {
                chunk = (chunk / 2).max(1);
            }
            if let Some(mark) = session.take_mark() {
                let t = start.elapsed().as_secs_f64();
                let (what, block) = (mark.what, mark.block);
                let memory = memory(hooks);
                let _ = writeln!(out, "MARK t={t:.6} what={what} block={block}{memory}");
            }
        }
        let now = Instant::now();
        let mut line = format!(
            "EPOCH t={:.6} secs={:.6} ops={ops}{}",
            (now - start).as_secs_f64(),
            (now - epoch_start).as_secs_f64(),
            memory(hooks)
        );
        if let (Some(f), Some(before)) = (hooks.os_calls, calls.as_mut()) {
            let total = f();
            line += &format!(" os_calls={}", total - *before);
            *before = total;
        }
        let _ = writeln!(out, "{line}");
        epoch_start = now;
        if epoch_end >= end {
            break;
        }
    }
    // Leave the session's heap and threads to the exit: freeing a gigabyte of blocks
    // would only delay the next run.
    std::mem::forget(session);
}

/// ` rss_kb=.. [in_use_kb=..]`: memory as the kernel and the allocator see it now.
fn memory(hooks: Hooks) -> String {
    let rss = format!(" rss_kb={}", rss_kb());
    match hooks.in_use {
        Some(f) => format!("{rss} in_use_kb={}", f() / 1024),
        None => rss,
    }
}
