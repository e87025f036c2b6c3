//! The SVG plot of a soak: RSS over time (top, log scale with a tick per power of two: a
//! few MiB kept after a free must stay visible next to a gigabyte peak) and throughput per
//! epoch (bottom), one line per run. Runs of the first workload are solid, those of
//! others dashed.

use std::path::Path;

use anyhow::Result;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::plan::Series;
use super::run::Trace;
use crate::shared::plot::{color, log2, plot_error, Axis};

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
        let each = series.iter().zip(traces).map(|(s, t)| Line {
            label: s.name(),
            color: color(s.allocator, s.profile),
            dashed: Some(s.workload.as_str()) != first,
            points: points(t),
        });
        each.collect()
    };
    let rss = lines(&|t| {
        let readings = t.rss().into_iter();
        readings
            .map(|(t, kb)| (t, log2(kb as f64 / 1024.0)))
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
    let rss_axis = Axis::log2(values(&rss), 0.0..1.0, |v| format_value(2f64.powf(v)));
    let label = rss_axis.label;
    let title = "RSS in MiB, log scale (lower is better)";
    panel(&top, title, rss_axis, &label, &rss, true)?;
    let rate_axis = 0.0..values(&rate).fold(1e-3, f64::max) * 1.05;
    let title = "throughput per epoch, M ops/s";
    panel(&bottom, title, rate_axis, &format_value, &rate, false)?;
    root.present().map_err(plot_error)
}

fn values(lines: &[Line]) -> impl Iterator<Item = f64> + Clone + '_ {
    lines.iter().flat_map(|l| l.points.iter().map(|p| p.1))
}

fn panel<Y>(
    area: &DrawingArea<SVGBackend, Shift>,
    title: &str,
    y_axis: Y,
    y_label: &dyn Fn(f64) -> String,
    lines: &[Line],
    legend: bool,
) -> Result<()>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let x_max = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .fold(1e-3, f64::max);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, y_axis)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .y_label_formatter(&|v| y_label(*v))
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

/// `1024`, `12`, `2.5`, `0.75`: as few digits as the value needs.
fn format_value(v: f64) -> String {
    match v.abs() {
        a if a >= 10.0 => format!("{v:.0}"),
        a if a >= 1.0 => format!("{v:.1}").trim_end_matches(".0").to_string(),
        _ => format!("{v:.2}"),
    }
}
