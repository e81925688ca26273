//! The PNG plots: one per series and one overview with every series side by side. The x axis
//! is the member or node count on a log scale (10, 100, 1,000, 5,000), the y axis the cost from
//! zero, the target a dashed red line.

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::catalogue;
use crate::figures::Series;

const FONT: &str = "sans-serif";
const PANEL: (u32, u32) = (640, 400);
const COLUMNS: usize = 3;

#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error(
        "the embedded font did not load; the epaint_default_fonts crate's bytes are not a font"
    )]
    Font,
    #[error("drawing {path}: {message}")]
    Draw { path: String, message: String },
    #[error("no figures to draw: did the benchmarks print any `FIGURE` lines?")]
    Empty,
}

/// Registers the embedded font once per process (plotters' text has no font of its own here).
fn font() -> Result<(), PlotError> {
    static LOADED: OnceLock<bool> = OnceLock::new();
    let ok = *LOADED.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, epaint_default_fonts::UBUNTU_LIGHT)
            .is_ok()
    });
    if ok { Ok(()) } else { Err(PlotError::Font) }
}

fn draw_error(path: &Path) -> impl Fn(String) -> PlotError + '_ {
    move |message| PlotError::Draw {
        path: path.display().to_string(),
        message,
    }
}

/// One PNG of one series.
pub fn draw_series(series: &Series, path: &Path) -> Result<(), PlotError> {
    font()?;
    let fail = draw_error(path);
    let root = BitMapBackend::new(path, PANEL).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
    panel(&root, series).map_err(&fail)?;
    root.present().map_err(|e| fail(e.to_string()))
}

/// One PNG with every series, three to a row.
pub fn draw_overview(all: &[Series], path: &Path) -> Result<(), PlotError> {
    if all.is_empty() {
        return Err(PlotError::Empty);
    }
    font()?;
    let fail = draw_error(path);
    let rows = all.len().div_ceil(COLUMNS);
    let size = (
        PANEL.0 * COLUMNS as u32,
        PANEL.1 * u32::try_from(rows).unwrap_or(u32::MAX / PANEL.1),
    );
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
    for (area, series) in root.split_evenly((rows, COLUMNS)).iter().zip(all) {
        panel(area, series).map_err(&fail)?;
    }
    root.present().map_err(|e| fail(e.to_string()))
}

/// The x range on a log scale with a margin either side, from the sizes measured.
fn x_range(series: &Series) -> (f64, f64) {
    let lo = series.points.keys().next().copied().unwrap_or(10).max(1) as f64;
    let hi = series.points.keys().last().copied().unwrap_or(1000).max(1) as f64;
    (lo / 1.5, hi * 1.5)
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    series: &Series,
) -> Result<(), String> {
    let known = catalogue::lookup(&series.name);
    let title = known.map_or(series.name.as_str(), |k| k.title);
    let counts = known.map_or("size", |k| k.counts);
    let target = known.and_then(|k| k.target);
    let highest = series
        .points
        .values()
        .copied()
        .chain(target.map(|t| t.at_most))
        .fold(0.0_f64, f64::max);
    let y_top = if highest > 0.0 { highest * 1.15 } else { 1.0 };
    let (x_lo, x_hi) = x_range(series);
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{title} ({})", series.unit), (FONT, 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (x_lo..x_hi)
                .log_scale()
                .with_key_points(series.points.keys().map(|x| *x as f64).collect()),
            0.0..y_top,
        )
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(counts)
        .x_label_formatter(&|x| format!("{:.0}", x))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .draw()
        .map_err(|e| e.to_string())?;
    let points: Vec<(f64, f64)> = series.points.iter().map(|(x, v)| (*x as f64, *v)).collect();
    chart
        .draw_series(LineSeries::new(
            points.iter().copied(),
            BLUE.stroke_width(2),
        ))
        .map_err(|e| e.to_string())?;
    chart
        .draw_series(points.iter().map(|p| Circle::new(*p, 4, BLUE.filled())))
        .map_err(|e| e.to_string())?;
    if let Some(t) = target {
        chart
            .draw_series(DashedLineSeries::new(
                [(x_lo, t.at_most), (x_hi, t.at_most)],
                8,
                6,
                RED.stroke_width(2),
            ))
            .map_err(|e| e.to_string())?
            .label(format!("target at {} {counts}", t.at_size))
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], RED.stroke_width(2)));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FONT, 14))
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::collect;

    const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

    fn png_size(path: &Path) -> (u32, u32) {
        let bytes = std::fs::read(path).expect("written");
        assert!(
            bytes.starts_with(PNG_SIGNATURE),
            "{} is not a PNG",
            path.display()
        );
        // IHDR follows the signature: length, "IHDR", width, height (big-endian).
        let word = |at: usize| {
            u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        assert_eq!(&bytes[12..16], b"IHDR");
        (word(16), word(20))
    }

    #[test]
    fn draws_one_png_per_series_and_an_overview() {
        let all = collect(
            "FIGURE agent_rss_mib 10 14.9 MiB\nFIGURE agent_rss_mib 100 15.5 MiB\n\
             FIGURE agent_rss_mib 1000 20.0 MiB\nFIGURE gossip_idle_kbps 1000 49.9 KB/s\n\
             FIGURE gossip_idle_kbps 100 5.0 KB/s\nFIGURE only_one 5000 0 x\n\
             FIGURE extender_filter_p99_us 5000 420 us\n",
        )
        .expect("valid");
        let dir = tempfile::tempdir().expect("temp dir");
        for series in &all {
            let path = dir.path().join(format!("{}.png", series.name));
            draw_series(series, &path).expect("drawn");
            assert_eq!(png_size(&path), PANEL);
        }
        let overview = dir.path().join("overview.png");
        draw_overview(&all, &overview).expect("drawn");
        // Four series, three to a row: two rows.
        assert_eq!(png_size(&overview), (PANEL.0 * 3, PANEL.1 * 2));
    }

    #[test]
    fn nothing_to_draw_is_an_error_not_an_empty_picture() {
        let dir = tempfile::tempdir().expect("temp dir");
        let err = draw_overview(&[], &dir.path().join("x.png")).expect_err("empty");
        assert!(err.to_string().contains("FIGURE"), "{err}");
    }
}
