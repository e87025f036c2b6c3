//! What the charts share: a colour per allocator (and per hakmem profile), and errors.

use anyhow::anyhow;
use plotters::style::RGBColor;

use super::{Allocator, Profile};

/// The colour of an allocator's bars and lines; hakmem's profiles get shades of its own.
pub fn color(a: Allocator, profile: Option<Profile>) -> RGBColor {
    match (a, profile) {
        (Allocator::Hakmem, None | Some(Profile::Fast)) => RGBColor(214, 39, 40),
        (Allocator::Hakmem, Some(Profile::Balanced)) => RGBColor(255, 127, 14),
        (Allocator::Hakmem, Some(Profile::Lean)) => RGBColor(148, 103, 189),
        (Allocator::Mimalloc, _) => RGBColor(31, 119, 180),
        (Allocator::Jemalloc, _) => RGBColor(44, 160, 44),
        (Allocator::System, _) => RGBColor(140, 140, 140),
    }
}

pub fn plot_error(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("drawing the chart: {e}")
}
