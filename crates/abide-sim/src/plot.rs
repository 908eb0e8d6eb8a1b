//! SVG plots of request rate and 429 rate over time, one line per policy.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::{PolicyResult, ScenarioReport, SimError};

const COLOURS: [RGBColor; 5] = [
    RGBColor(120, 120, 120),
    RGBColor(214, 39, 40),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(44, 160, 44),
];

/// Write `DIR/<scenario>.svg`: requests per second (top) and 429s per second (bottom) over
/// virtual time, one line per policy, dashed verticals where the limit changes. Returns the
/// path written.
///
/// # Errors
/// [`SimError::Plot`] when the file cannot be written.
pub fn write_svg(report: &ScenarioReport, dir: &Path) -> Result<PathBuf, SimError> {
    let path = dir.join(format!("{}.svg", report.scenario));
    let err = |e: &dyn std::fmt::Display| SimError::Plot {
        path: path.clone(),
        message: e.to_string(),
    };
    {
        let root = SVGBackend::new(&path, (1100, 760)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let root = root
            .titled(
                &format!("abide sim: {} (seed {})", report.scenario, report.seed),
                ("sans-serif", 22),
            )
            .map_err(|e| err(&e))?;
        let (top, bottom) = root.split_vertically(370);
        panel(&top, report, "requests / s", |b| f64::from(b.attempts)).map_err(|e| err(&e))?;
        panel(&bottom, report, "429s / s", |b| f64::from(b.throttles)).map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    Ok(path)
}

type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

fn panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    report: &ScenarioReport,
    label: &str,
    value: impl Fn(&crate::Bucket) -> f64,
) -> DrawResult {
    let width = report.bucket_secs;
    let rate = |r: &PolicyResult| -> Vec<(f64, f64)> {
        r.series
            .iter()
            .enumerate()
            .map(|(k, b)| (k as f64 * width, value(b) / width))
            .collect()
    };
    let x_max = report
        .results
        .iter()
        .map(|r| r.series.len() as f64 * width)
        .fold(width, f64::max);
    let y_max = report
        .results
        .iter()
        .flat_map(|r| rate(r).into_iter().map(|(_, y)| y))
        .fold(1.0, f64::max)
        * 1.05;
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("virtual time (s)")
        .y_desc(label)
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 16))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for &t in report.limit_changes_secs.iter().filter(|t| **t > 0.0) {
        chart.draw_series(DashedLineSeries::new(
            [(t, 0.0), (t, y_max)],
            6,
            4,
            BLACK.mix(0.4).into(),
        ))?;
    }
    for (k, r) in report.results.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(rate(r), colour.stroke_width(2)))?
            .label(r.policy.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    Ok(())
}
