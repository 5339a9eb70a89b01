//! SVG charts: the roofline with every kernel placed on it, and bandwidth against working-set
//! size. Drawn with plotters' SVG backend; text uses the viewer's fonts.

use std::path::Path;

use host::cost::ComputeUnit;
use host::specs::GpuSpec;
use plotters::prelude::*;

/// One kernel on the roofline chart.
pub struct RooflinePoint {
    pub label: String,
    /// FLOPs per HBM byte.
    pub intensity: f64,
    /// Achieved (or modelled) FLOP/s.
    pub flops_per_second: f64,
    pub unit: ComputeUnit,
    /// Measured on a GPU (filled marker) or modelled (hollow marker).
    pub measured: bool,
}

fn err<E: std::fmt::Display>(e: E) -> String {
    format!("plotting failed: {e}")
}

/// A chart's drawing area: an SVG drawn into memory.
type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// Draws a 900 x 600 chart with `draw` and writes it to `path` whole ([`crate::atomic`]).
fn svg_file(path: &Path, draw: impl FnOnce(Area<'_>) -> Result<(), String>) -> Result<(), String> {
    let mut svg = String::new();
    draw(SVGBackend::with_string(&mut svg, (900, 600)).into_drawing_area())?;
    crate::atomic::write(path, svg)
}

/// The roofline of `spec` (bandwidth slope and both compute roofs) with `points` placed on it.
pub fn roofline(
    path: &Path,
    spec: &GpuSpec,
    points: &[RooflinePoint],
    title: &str,
) -> Result<(), String> {
    svg_file(path, |root| draw_roofline(root, spec, points, title))
}

fn draw_roofline(
    root: Area<'_>,
    spec: &GpuSpec,
    points: &[RooflinePoint],
    title: &str,
) -> Result<(), String> {
    root.fill(&WHITE).map_err(err)?;
    let (x_min, x_max) = (1e-2f64, 1e4f64);
    let y_max = spec.bf16_flops * 2.0;
    let y_min = 1e9f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((x_min..x_max).log_scale(), (y_min..y_max).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("arithmetic intensity (FLOP per HBM byte)")
        .y_desc("FLOP/s")
        .y_label_formatter(&|y| format!("{:.0e}", y))
        .x_label_formatter(&|x| format!("{x}"))
        .draw()
        .map_err(err)?;
    let xs: Vec<f64> = (0..=120)
        .map(|i| x_min * (x_max / x_min).powf(f64::from(i) / 120.0))
        .collect();
    for (unit, colour, name) in [
        (ComputeUnit::TensorCore16, BLUE, "bf16 tensor-core roof"),
        (ComputeUnit::CudaCoreF32, RED, "f32 CUDA-core roof"),
    ] {
        let peak = spec.peak_flops(unit);
        chart
            .draw_series(LineSeries::new(
                xs.iter().map(|&x| (x, (x * spec.hbm_bandwidth).min(peak))),
                colour.stroke_width(2),
            ))
            .map_err(err)?
            .label(format!(
                "{name}: {:.0} TFLOP/s, ridge {:.0} FLOP/B",
                peak / 1e12,
                spec.ridge(unit)
            ))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
    }
    for p in points
        .iter()
        .filter(|p| p.intensity > 0.0 && p.flops_per_second > 0.0)
    {
        let colour = if p.unit == ComputeUnit::TensorCore16 {
            BLUE
        } else {
            RED
        };
        let style = if p.measured {
            colour.filled()
        } else {
            colour.stroke_width(2)
        };
        let at = (
            p.intensity.clamp(x_min, x_max),
            p.flops_per_second.clamp(y_min, y_max),
        );
        chart
            .draw_series([Circle::new(at, 5, style)])
            .map_err(err)?;
        chart
            .draw_series([Text::new(
                p.label.clone(),
                (at.0 * 1.08, at.1),
                ("sans-serif", 12),
            )])
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// Achieved bandwidth against working-set size, with the L2 size marked: the L2 and HBM plateaus.
pub fn bandwidth(
    path: &Path,
    points: &[(f64, f64)],
    l2_bytes: f64,
    title: &str,
) -> Result<(), String> {
    svg_file(path, |root| draw_bandwidth(root, points, l2_bytes, title))
}

fn draw_bandwidth(
    root: Area<'_>,
    points: &[(f64, f64)],
    l2_bytes: f64,
    title: &str,
) -> Result<(), String> {
    root.fill(&WHITE).map_err(err)?;
    let x_min = points
        .iter()
        .map(|p| p.0)
        .fold(f64::INFINITY, f64::min)
        .min(l2_bytes / 4.0);
    let x_max = points
        .iter()
        .map(|p| p.0)
        .fold(0.0, f64::max)
        .max(l2_bytes * 4.0);
    let y_max = points.iter().map(|p| p.1).fold(0.0, f64::max) * 1.3;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((x_min..x_max).log_scale(), 0.0..y_max / 1e12)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("working set (bytes)")
        .y_desc("read bandwidth (TB/s)")
        .x_label_formatter(&|x| format!("{:.0} MiB", x / (1024.0 * 1024.0)))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(
            points.iter().map(|&(x, y)| (x, y / 1e12)),
            BLUE.stroke_width(2),
        ))
        .map_err(err)?;
    chart
        .draw_series(
            points
                .iter()
                .map(|&(x, y)| Circle::new((x, y / 1e12), 4, BLUE.filled())),
        )
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(
            [(l2_bytes, 0.0), (l2_bytes, y_max / 1e12)],
            BLACK.stroke_width(1),
        ))
        .map_err(err)?
        .label("L2 size")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}
