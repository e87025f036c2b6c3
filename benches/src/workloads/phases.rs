//! Phases: allocate a large heap of small blocks, free it all, idle; then again with the
//! next block size (64 B, 256 B, 1 KiB, 64 B, ...). It shows how far and how fast an
//! allocator gives memory back once a program's working set shrinks, and whether memory
//! freed as one size class serves the next. `phases-trim` asks the allocator to trim
//! right after each free.
//!
//! One operation is one allocation or one free; idling does none.

use std::ptr::{null_mut, NonNull};
use std::time::{Duration, Instant};

use super::{Mark, Session, Setup};
use crate::Block;

const SIZES: [usize; 3] = [64, 256, 1024];
/// The longest sleep of one idle step, so that a soak's epochs stay on time.
const NAP: Duration = Duration::from_millis(5);

pub fn plain(setup: &Setup) -> Box<dyn Session> {
    Box::new(Phases::new(setup, None))
}

pub fn with_trim(setup: &Setup) -> Box<dyn Session> {
    let trim = setup.trim.expect("phases-trim needs the allocator's trim");
    Box::new(Phases::new(setup, Some(trim)))
}

enum Stage {
    Fill { left: usize },
    Free,
    Trim,
    Idle { until: Instant },
}

struct Phases {
    bytes: usize,
    idle: Duration,
    trim: Option<fn()>,
    /// Phases begun before the current one.
    phase: usize,
    stage: Stage,
    heap: Chain,
    mark: Option<Mark>,
}

impl Phases {
    fn new(setup: &Setup, trim: Option<fn()>) -> Phases {
        let mut p = Phases {
            bytes: setup.phases_bytes,
            idle: setup.phases_idle,
            trim,
            phase: 0,
            stage: Stage::Free,
            heap: Chain::new(),
            mark: None,
        };
        p.begin_fill();
        p
    }

    fn block(&self) -> usize {
        SIZES[self.phase % SIZES.len()]
    }

    /// Go on to `stage`, marking that `what` just happened.
    fn enter(&mut self, stage: Stage, what: &'static str) {
        self.stage = stage;
        self.mark = Some(Mark {
            what,
            block: self.block(),
        });
    }

    fn begin_fill(&mut self) {
        let left = (self.bytes / self.block()).max(1);
        self.enter(Stage::Fill { left }, "fill");
    }

    fn begin_idle(&mut self, what: &'static str) {
        let until = Instant::now() + self.idle;
        self.enter(Stage::Idle { until }, what);
    }
}

impl Session for Phases {
    fn step(&mut self, ops: u64) -> u64 {
        let ops = usize::try_from(ops).unwrap_or(usize::MAX);
        match self.stage {
            Stage::Fill { left } => {
                let n = left.min(ops);
                for _ in 0..n {
                    self.heap.push(Block::new(self.block()));
                }
                match left - n {
                    0 => self.enter(Stage::Free, "filled"),
                    left => self.stage = Stage::Fill { left },
                }
                n as u64
            }
            Stage::Free => {
                let mut n = 0;
                while n < ops && self.heap.pop().is_some() {
                    n += 1;
                }
                if self.heap.is_empty() {
                    match self.trim {
                        Some(_) => self.enter(Stage::Trim, "freed"),
                        None => self.begin_idle("freed"),
                    }
                }
                n as u64
            }
            Stage::Trim => {
                if let Some(trim) = self.trim {
                    trim();
                }
                self.begin_idle("trimmed");
                0
            }
            Stage::Idle { until } => {
                let now = Instant::now();
                if now < until {
                    std::thread::sleep(NAP.min(until - now));
                } else {
                    self.phase += 1;
                    self.begin_fill();
                }
                0
            }
        }
    }

    fn take_mark(&mut self) -> Option<Mark> {
        self.mark.take()
    }
}

/// Blocks of one size linked through their first word: a heap of many blocks that takes
/// no memory besides the blocks themselves (a `Vec` of them would add a quarter to a heap
/// of 64-byte blocks, in one large allocation).
struct Chain {
    head: *mut u8,
    size: usize,
}

impl Chain {
    fn new() -> Chain {
        Chain {
            head: null_mut(),
            size: 0,
        }
    }

    fn is_empty(&self) -> bool {
        self.head.is_null()
    }

    fn push(&mut self, block: Block) {
        let (ptr, size) = block.into_raw();
        assert!(size >= size_of::<*mut u8>() && (self.is_empty() || size == self.size));
        // SAFETY: the block is ours, 8-byte aligned and at least a pointer long.
        unsafe { ptr.as_ptr().cast::<*mut u8>().write(self.head) };
        self.head = ptr.as_ptr();
        self.size = size;
    }

    fn pop(&mut self) -> Option<Block> {
        let ptr = NonNull::new(self.head)?;
        // SAFETY: `ptr` was pushed: its first word links the rest, and it came from
        // `into_raw` with `self.size` bytes (every block on the chain has that size).
        unsafe {
            self.head = ptr.as_ptr().cast::<*mut u8>().read();
            Some(Block::from_raw(ptr, self.size))
        }
    }
}

impl Drop for Chain {
    fn drop(&mut self) {
        while self.pop().is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks_of(s: &mut Phases, steps: usize) -> Vec<(&'static str, usize)> {
        (0..steps)
            .filter_map(|_| {
                s.step(1000);
                s.take_mark().map(|m| (m.what, m.block))
            })
            .collect()
    }

    #[test]
    fn fills_frees_idles_and_moves_to_the_next_size() {
        let setup = Setup {
            phases_bytes: 64 * 1500,
            phases_idle: Duration::ZERO,
            trim: None,
        };
        let mut s = Phases::new(&setup, None);
        assert_eq!(s.take_mark().map(|m| m.what), Some("fill"));
        // 1500 blocks of 64 B: two steps to fill, two to free, one to leave the idle.
        assert_eq!(s.step(1000), 1000);
        assert_eq!(s.step(1000), 500);
        assert_eq!(
            s.take_mark().map(|m| (m.what, m.block)),
            Some(("filled", 64))
        );
        assert_eq!(s.step(1000), 1000);
        assert_eq!(s.step(1000), 500);
        assert_eq!(s.take_mark().map(|m| m.what), Some("freed"));
        assert_eq!(s.step(1000), 0);
        assert_eq!(
            s.take_mark().map(|m| (m.what, m.block)),
            Some(("fill", 256))
        );
    }

    #[test]
    fn the_trim_variant_trims_after_each_free() {
        let setup = Setup {
            phases_bytes: 1024,
            phases_idle: Duration::ZERO,
            trim: Some(|| {}),
        };
        let mut s = Phases::new(&setup, setup.trim);
        s.take_mark();
        let marks = marks_of(&mut s, 4);
        let whats: Vec<_> = marks.iter().map(|m| m.0).collect();
        assert_eq!(whats, ["filled", "freed", "trimmed", "fill"]);
    }
}
