//! What the charts share: a colour per allocator (and per hakmem profile), an axis with
//! ticks exactly where asked (powers of two on a log scale), and errors.

use std::ops::Range;

use anyhow::anyhow;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::style::RGBColor;

use super::{Allocator, Profile};

/// The colour of an allocator's bars and lines; hakmem's profiles get shades of its own.
pub fn color(a: Allocator, profile: Option<Profile>) -> RGBColor {
    match (a, profile) {
        (Allocator::Hakmem, None | Some(Profile::Fast)) => RGBColor(214, 39, 40),
        (Allocator::Hakmem, Some(Profile::Balanced)) => RGBColor(255, 127, 14),
        (Allocator::Hakmem, Some(Profile::Lean)) => RGBColor(148, 103, 189),
        (Allocator::Mimalloc, _) => RGBColor(31, 119, 180),
        (Allocator::Mimalloc2, _) => RGBColor(23, 190, 207),
        (Allocator::Jemalloc, _) => RGBColor(44, 160, 44),
        (Allocator::Tcmalloc, _) => RGBColor(140, 86, 75),
        (Allocator::System, _) => RGBColor(140, 140, 140),
        (Allocator::Baseline, _) => RGBColor(247, 182, 210),
        (Allocator::HakmemBalanced, _) => color(Allocator::Hakmem, Some(Profile::Balanced)),
        (Allocator::HakmemLean, _) => color(Allocator::Hakmem, Some(Profile::Lean)),
    }
}

pub fn plot_error(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("drawing the chart: {e}")
}

pub fn log2(v: f64) -> f64 {
    v.max(1e-9).log2()
}

/// An axis: its range, where its ticks go (exactly there), and how they read.
#[derive(Clone)]
pub struct Axis {
    pub range: Range<f64>,
    pub ticks: Vec<f64>,
    pub label: fn(f64) -> String,
}

impl Axis {
    /// For values that are log2 of something: whole powers of two, spanning at least
    /// `span` and all values with some room.
    pub fn log2(
        values: impl Iterator<Item = f64> + Clone,
        span: Range<f64>,
        label: fn(f64) -> String,
    ) -> Axis {
        let lo = values
            .clone()
            .fold(span.start, |lo, v| lo.min(v - 0.5))
            .floor();
        let hi = values.fold(span.end, |hi, v| hi.max(v + 0.25)).ceil();
        let ticks = (lo as i32..=hi as i32).map(f64::from).collect();
        Axis {
            range: lo..hi,
            ticks,
            label,
        }
    }
}

impl Ranged for Axis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, (from, to): (i32, i32)) -> i32 {
        let fraction = (value - self.range.start) / (self.range.end - self.range.start);
        from + (fraction * f64::from(to - from)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        self.ticks.clone()
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}
