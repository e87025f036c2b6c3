//! The SVG chart of a run: per workload, ops/s relative to mimalloc (left) and peak RSS
//! (right), one bar per allocator.

use std::ops::Range;
use std::path::Path;

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::summary::{Stats, Summary};
use crate::shared::plot::{color, log2, plot_error, Axis};
use crate::shared::Allocator;

/// Per workload, top to bottom: its name and one value per allocator.
type Rows = Vec<(String, Vec<Option<f64>>)>;

pub fn write(path: &Path, summaries: &[Summary], allocators: &[Allocator]) -> Result<()> {
    let throughput = rows(summaries, allocators, |st| st.vs_mimalloc.map(log2));
    let rss = rows(summaries, allocators, |st| {
        Some(log2(st.peak_rss_kb as f64 / 1024.0))
    });
    let height = 120 + throughput.len() as u32 * (10 + 9 * allocators.len() as u32);
    let root = SVGBackend::new(path, (1400, height)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let (left, right) = root.split_horizontally(700);
    let ratio_axis = log2_axis(&throughput, -1.0..1.0, |v| format!("{}x", 2f64.powf(v)));
    let title = "ops/s relative to mimalloc, log scale (higher is better)";
    panel(
        &left,
        title,
        &ratio_axis,
        &throughput,
        allocators,
        Some(0.0),
    )?;
    let rss_axis = log2_axis(&rss, 0.0..1.0, |v| format!("{}", 2f64.powf(v)));
    let title = "peak RSS in MiB, log scale (lower is better)";
    panel(&right, title, &rss_axis, &rss, allocators, None)?;
    root.present().map_err(plot_error)
}

fn rows(summaries: &[Summary], allocators: &[Allocator], value: fn(&Stats) -> Option<f64>) -> Rows {
    let mut rows: Rows = Vec::new();
    for s in summaries {
        if rows.last().is_none_or(|(w, _)| *w != s.workload) {
            rows.push((s.workload.clone(), vec![None; allocators.len()]));
        }
        let k = allocators
            .iter()
            .position(|&a| a == s.allocator)
            .expect("selected allocator");
        rows.last_mut().expect("pushed").1[k] = s.stats.as_ref().and_then(value);
    }
    rows
}

fn values(rows: &Rows) -> impl Iterator<Item = f64> + Clone + '_ {
    rows.iter().flat_map(|(_, v)| v.iter().flatten().copied())
}

fn log2_axis(rows: &Rows, span: Range<f64>, label: fn(f64) -> String) -> Axis {
    Axis::log2(values(rows), span, label)
}

/// Horizontal bars, a group per workload (the first at the top), a bar per allocator,
/// from `base` (with a line there) or else from the left edge.
fn panel(
    area: &DrawingArea<SVGBackend, Shift>,
    title: &str,
    axis: &Axis,
    rows: &Rows,
    allocators: &[Allocator],
    base: Option<f64>,
) -> Result<()> {
    let n = rows.len();
    let name_at = |y: f64| {
        rows.get(n - 1 - (y as usize).min(n - 1))
            .map_or(String::new(), |r| r.0.clone())
    };
    let row_axis = Axis {
        range: 0.0..n as f64,
        ticks: (0..n).map(|i| i as f64 + 0.5).collect(),
        label: |_| String::new(),
    };
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(140)
        .build_cartesian_2d(axis.clone(), row_axis)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_label_formatter(&|v| (axis.label)(*v))
        .y_label_formatter(&|y| name_at(*y))
        .draw()
        .map_err(plot_error)?;
    let band = 0.8 / allocators.len() as f64;
    for (k, &a) in allocators.iter().enumerate() {
        let bars = rows.iter().enumerate().filter_map(|(i, (_, values))| {
            let top = (n - i) as f64 - 0.1 - k as f64 * band;
            let bar = [
                (base.unwrap_or(axis.range.start), top - band * 0.9),
                (values[k]?, top),
            ];
            Some(Rectangle::new(bar, color(a, None).filled()))
        });
        chart
            .draw_series(bars)
            .map_err(plot_error)?
            .label(a.name())
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 12, y + 5)], color(a, None).filled())
            });
    }
    if let Some(x) = base {
        let line = PathElement::new(vec![(x, 0.0), (x, n as f64)], BLACK.stroke_width(1));
        chart
            .draw_series(std::iter::once(line))
            .map_err(plot_error)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(plot_error)
}
