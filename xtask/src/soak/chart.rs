//! The SVG plot of a soak: RSS over time (top) and throughput per epoch (bottom), one line
//! per run. Runs of the first workload are solid, those of others dashed.

use std::path::Path;

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::plan::Series;
use super::run::Trace;
use crate::shared::plot::{color, plot_error};

/// One run's line in a panel.
struct Line {
    label: String,
    color: RGBColor,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

pub fn write(path: &Path, series: &[Series], traces: &[Trace]) -> Result<()> {
    let first = series.first().map(|s| s.workload.as_str());
    let lines = |points: &dyn Fn(&Trace) -> Vec<(f64, f64)>| -> Vec<Line> {
        series
            .iter()
            .zip(traces)
            .map(|(s, t)| Line {
                label: s.name(),
                color: color(s.allocator, s.profile),
                dashed: Some(s.workload.as_str()) != first,
                points: points(t),
            })
            .collect()
    };
    let rss = lines(&|t| {
        t.rss()
            .iter()
            .map(|&(t, kb)| (t, kb as f64 / 1024.0))
            .collect()
    });
    let rate = lines(&|t| {
        t.epochs
            .iter()
            .map(|e| (e.t, e.ops_per_sec() / 1e6))
            .collect()
    });
    let root = SVGBackend::new(path, (1200, 900)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let (top, bottom) = root.split_vertically(450);
    panel(&top, "RSS in MiB (lower is better)", &rss, true)?;
    panel(&bottom, "throughput per epoch, M ops/s", &rate, false)?;
    root.present().map_err(plot_error)
}

fn panel(
    area: &DrawingArea<SVGBackend, Shift>,
    title: &str,
    lines: &[Line],
    legend: bool,
) -> Result<()> {
    let all = || lines.iter().flat_map(|l| l.points.iter());
    let x_max = all().map(|p| p.0).fold(1e-3, f64::max);
    let y_max = all().map(|p| p.1).fold(1e-3, f64::max) * 1.05;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .x_desc("seconds since the start of the run")
        .draw()
        .map_err(plot_error)?;
    for line in lines {
        let style = line.color.stroke_width(2);
        let points = line.points.iter().copied();
        let drawn = if line.dashed {
            chart.draw_series(DashedLineSeries::new(points, 8, 5, style))
        } else {
            chart.draw_series(LineSeries::new(points, style))
        };
        let color = line.color;
        drawn
            .map_err(plot_error)?
            .label(line.label.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2)));
    }
    if legend {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()
            .map_err(plot_error)?;
    }
    Ok(())
}
