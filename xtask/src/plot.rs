//! SVG charts: the roofline with every kernel placed on it, and bandwidth against working-set
//! size. Drawn with plotters' SVG backend; text uses the viewer's fonts.

use std::path::Path;

use perf::cost::ComputeUnit;
use perf::specs::GpuSpec;
use plotters::prelude::*;

/// One kernel on the roofline chart.
pub struct RooflinePoint {
    pub label: String,
    /// FLOPs per HBM byte.
    pub intensity: f64,
    /// Where the marker sits: the FLOP/s measured on a GPU, else the performance model's
    /// predicted FLOP/s, else the roofline bound.
    pub flops_per_second: f64,
    /// The roofline bound at this intensity, marked with a cross above a marker that sits below
    /// it (a measurement or a prediction), so that the gap to the roof stays visible.
    pub bound: Option<f64>,
    pub unit: ComputeUnit,
    /// Measured on a GPU (filled marker) or modelled (hollow marker).
    pub measured: bool,
}

/// A box on the chart, in pixels: left, top, width, height.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Rect {
    pub x: i32,
    pub y: i32,
    pub w: i32,
    pub h: i32,
}

impl Rect {
    fn overlaps(&self, o: &Rect) -> bool {
        self.x < o.x + o.w && o.x < self.x + self.w && self.y < o.y + o.h && o.y < self.y + self.h
    }

    fn inside(&self, area: &Rect) -> bool {
        self.x >= area.x
            && self.y >= area.y
            && self.x + self.w <= area.x + area.w
            && self.y + self.h <= area.y + area.h
    }
}

/// The box a label of `chars` characters takes at `font_px`: sans-serif glyphs average a little
/// over half an em wide (no font is loaded to measure: the SVG is drawn by the viewer).
fn text_size(chars: usize, font_px: i32) -> (i32, i32) {
    ((chars as i32 * font_px * 3 + 4) / 5, font_px + 2)
}

/// A place for each label beside its marker (pixels) such that no label covers another label,
/// a marker or an `obstacle` (the legend), and every label stays inside `area`. Candidates in
/// order: right of the marker, left, above, below, then right and left moved up or down a line at
/// a time. The flag says the label was moved away from its marker (draw a leader line); a label
/// that fits nowhere keeps the first candidate (and is flagged).
pub(crate) fn place_labels(
    markers: &[(i32, i32)],
    sizes: &[(i32, i32)],
    area: Rect,
    obstacles: &[Rect],
) -> Vec<(Rect, bool)> {
    const GAP: i32 = 7;
    let mut taken: Vec<Rect> = obstacles.to_vec();
    taken.extend(markers.iter().map(|&(x, y)| Rect {
        x: x - 5,
        y: y - 5,
        w: 11,
        h: 11,
    }));
    let mut placed = Vec::with_capacity(markers.len());
    for (&(x, y), &(w, h)) in markers.iter().zip(sizes) {
        let right = |dy: i32| Rect {
            x: x + GAP,
            y: y - h / 2 + dy,
            w,
            h,
        };
        let left = |dy: i32| Rect {
            x: x - GAP - w,
            y: y - h / 2 + dy,
            w,
            h,
        };
        let mut candidates = vec![
            (right(0), false),
            (left(0), false),
            (
                Rect {
                    x: x - w / 2,
                    y: y - GAP - h,
                    w,
                    h,
                },
                false,
            ),
            (
                Rect {
                    x: x - w / 2,
                    y: y + GAP,
                    w,
                    h,
                },
                false,
            ),
        ];
        for line in 1..=12 {
            for dy in [-line * h, line * h] {
                candidates.push((right(dy), true));
                candidates.push((left(dy), true));
            }
        }
        let chosen = candidates
            .iter()
            .find(|(r, _)| r.inside(&area) && !taken.iter().any(|t| t.overlaps(r)))
            .copied()
            .unwrap_or((candidates[0].0, true));
        taken.push(chosen.0);
        placed.push(chosen);
    }
    placed
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
    const FONT_PX: i32 = 12;
    let shown: Vec<&RooflinePoint> = points
        .iter()
        .filter(|p| p.intensity > 0.0 && p.flops_per_second > 0.0)
        .collect();
    let clamp = |x: f64, y: f64| (x.clamp(x_min, x_max), y.clamp(y_min, y_max));
    let mut markers = Vec::with_capacity(shown.len());
    for p in &shown {
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
        let at = clamp(p.intensity, p.flops_per_second);
        if let Some(bound) = p.bound.filter(|b| *b > p.flops_per_second * 1.001) {
            // The roof this kernel could reach at its intensity: a grey cross, joined to the
            // marker, so the distance to the roof reads off the chart.
            let roof = clamp(p.intensity, bound);
            let grey = BLACK.mix(0.35);
            chart
                .draw_series([PathElement::new(vec![at, roof], grey.stroke_width(1))])
                .map_err(err)?;
            chart
                .draw_series([Cross::new(roof, 4, grey.stroke_width(1))])
                .map_err(err)?;
        }
        chart
            .draw_series([Circle::new(at, 5, style)])
            .map_err(err)?;
        markers.push(chart.backend_coord(&at));
    }
    // The labels in pixels, placed so that none covers another (the kernels of one family sit
    // close together), kept off the legend in the upper left.
    let plot = chart.plotting_area();
    let ((px, py), (pw, ph)) = (plot.get_base_pixel(), plot.dim_in_pixel());
    let area = Rect {
        x: px,
        y: py,
        w: pw as i32,
        h: ph as i32,
    };
    let legend = Rect {
        x: px,
        y: py,
        w: 420,
        h: 60,
    };
    let sizes: Vec<_> = shown
        .iter()
        .map(|p| text_size(p.label.chars().count(), FONT_PX))
        .collect();
    let placed = place_labels(&markers, &sizes, area, &[legend]);
    for ((p, (rect, moved)), &(mx, my)) in shown.iter().zip(&placed).zip(&markers) {
        if *moved {
            let end = if rect.x >= mx {
                rect.x
            } else {
                rect.x + rect.w
            };
            root.draw(&PathElement::new(
                vec![(mx, my), (end, rect.y + rect.h / 2)],
                BLACK.mix(0.4).stroke_width(1),
            ))
            .map_err(err)?;
        }
        root.draw(&Text::new(
            p.label.clone(),
            (rect.x, rect.y),
            ("sans-serif", FONT_PX),
        ))
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

/// One predicted row of the per-pipe chart: what each resource would take, as a fraction of the
/// predicted time.
pub struct PipeRow {
    pub label: String,
    /// (resource, its time over the row's predicted time), any order.
    pub fractions: Vec<(&'static str, f64)>,
    /// The resource that sets the time (drawn outlined).
    pub limiter: &'static str,
    /// The matmul + softmax bar's two parts, (product, softmax), as fractions like the others:
    /// drawn one after the other, the softmax's lighter.
    pub phases: Option<(f64, f64)>,
}

/// The limiter whose bar is drawn in two parts, and its second part's colour: the phases' own,
/// lighter.
const PHASES: &str = perf::model::Limiter::Phases.name();
const SOFTMAX_PART: RGBColor = RGBColor(200, 160, 215);

/// The resources in the chart's order and colours: memory levels from DRAM inwards, then the
/// SM's pipes, then what is neither.
const PIPES: [(&str, RGBColor); 13] = [
    ("DRAM", RGBColor(31, 119, 180)),
    ("L2", RGBColor(23, 190, 207)),
    ("L1", RGBColor(44, 160, 44)),
    ("shared wavefronts", RGBColor(188, 189, 34)),
    ("LSU issue", RGBColor(255, 127, 14)),
    ("FP32", RGBColor(214, 39, 40)),
    ("tensor", RGBColor(148, 103, 189)),
    ("MUFU", RGBColor(227, 119, 194)),
    ("issue", RGBColor(140, 86, 75)),
    // Tensor and MUFU one after the other: the two colours' mix, darker (the softmax's part
    // lighter, `PipeRow::phases`).
    (PHASES, RGBColor(120, 60, 140)),
    ("latency/occupancy", RGBColor(127, 127, 127)),
    ("tail", RGBColor(90, 90, 90)),
    ("launch", RGBColor(200, 200, 200)),
];

/// The performance model's per-pipe picture: a row per kernel, each resource's time as a bar from
/// 0 to its fraction of the predicted time, the longest behind; the limiter reaches 1 and is
/// outlined, and how close the next bar comes says how much an optimisation of the limiter alone
/// can gain before another resource takes over.
pub fn pipes(path: &Path, rows: &[PipeRow], title: &str) -> Result<(), String> {
    let height = (60 + 22 * rows.len() as u32 + 60).max(200);
    let mut svg = String::new();
    draw_pipes(
        SVGBackend::with_string(&mut svg, (900, height)).into_drawing_area(),
        rows,
        title,
    )?;
    crate::atomic::write(path, svg)
}

fn draw_pipes(root: Area<'_>, rows: &[PipeRow], title: &str) -> Result<(), String> {
    root.fill(&WHITE).map_err(err)?;
    let n = rows.len().max(1) as f64;
    // Room on the left for "kernel shape" labels, on the right for the legend.
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(15)
        .margin_right(165)
        .x_label_area_size(40)
        .y_label_area_size(330)
        .build_cartesian_2d(0.0..1.05f64, 0.0..n)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc("each resource's time / predicted time (MODELLED)")
        .y_label_formatter(&|_| String::new())
        .draw()
        .map_err(err)?;
    // Each row's label right-aligned against the axis, at the middle of its bars.
    let label_style = TextStyle::from(("sans-serif", 11).into_font()).pos(
        plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Right,
            plotters::style::text_anchor::VPos::Center,
        ),
    );
    for (i, row) in rows.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(0.0, n - i as f64 - 0.5));
        root.draw(&Text::new(
            row.label.clone(),
            (x - 6, y),
            label_style.clone(),
        ))
        .map_err(err)?;
    }
    for (i, row) in rows.iter().enumerate() {
        let top = n - i as f64 - 0.1;
        let mut bars: Vec<_> = row.fractions.iter().filter(|(_, f)| *f > 0.0).collect();
        bars.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (name, fraction) in bars {
            let colour = PIPES
                .iter()
                .find(|(p, _)| p == name)
                .map_or(BLACK, |(_, c)| *c);
            let rect = [(0.0, top - 0.8), (fraction.min(1.05), top)];
            chart
                .draw_series([Rectangle::new(rect, colour.filled())])
                .map_err(err)?;
            if *name == PHASES
                && let Some((product, _)) = row.phases
            {
                // The softmax after the product: the same bar, lighter from where it starts.
                let softmax = [(product.min(1.05), top - 0.8), (fraction.min(1.05), top)];
                chart
                    .draw_series([Rectangle::new(softmax, SOFTMAX_PART.filled())])
                    .map_err(err)?;
            }
            if *name == row.limiter {
                chart
                    .draw_series([Rectangle::new(rect, BLACK.stroke_width(2))])
                    .map_err(err)?;
            }
        }
    }
    // The legend beside the chart, in pixels (a series legend is clipped to the plotting area).
    let plot = chart.plotting_area();
    let ((px, py), (pw, _)) = (plot.get_base_pixel(), plot.dim_in_pixel());
    let used = PIPES.iter().filter(|(name, _)| {
        rows.iter()
            .any(|r| r.fractions.iter().any(|(p, f)| p == name && *f > 0.0))
    });
    // The phases' second part, where a row has one.
    let split = rows
        .iter()
        .any(|r| r.phases.is_some())
        .then_some(("... its softmax part", SOFTMAX_PART));
    let entries: Vec<_> = used.copied().chain(split).collect();
    for (k, (name, colour)) in entries.iter().enumerate() {
        let (x, y) = (px + pw as i32 + 14, py + 6 + 18 * k as i32);
        root.draw(&Rectangle::new([(x, y), (x + 12, y + 12)], colour.filled()))
            .map_err(err)?;
        root.draw(&Text::new(*name, (x + 18, y), ("sans-serif", 12)))
            .map_err(err)?;
    }
    // How to read the bars: each starts at 0, the longest drawn first, so they overlap.
    let below = py + 6 + 18 * entries.len() as i32 + 8;
    for (k, line) in ["bars overlaid from 0,", "not stacked"].iter().enumerate() {
        root.draw(&Text::new(
            *line,
            (px + pw as i32 + 14, below + 16 * k as i32),
            ("sans-serif", 12),
        ))
        .map_err(err)?;
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The attention and GEMM kernels sit within a few pixels of each other on the roofline:
    /// twenty labels on markers crowded together overlap neither each other, nor a marker, nor
    /// the legend, and stay on the chart.
    #[test]
    fn crowded_labels_do_not_overlap() {
        let area = Rect {
            x: 0,
            y: 0,
            w: 900,
            h: 600,
        };
        let legend = Rect {
            x: 0,
            y: 0,
            w: 420,
            h: 60,
        };
        let markers: Vec<(i32, i32)> = (0..20)
            .map(|i| (600 + (i % 4) * 6, 300 + (i / 4) * 5))
            .collect();
        let sizes: Vec<_> = (0..20).map(|i| text_size(20 + i, 12)).collect();
        let placed = place_labels(&markers, &sizes, area, &[legend]);
        let boxes: Vec<Rect> = markers
            .iter()
            .map(|&(x, y)| Rect {
                x: x - 5,
                y: y - 5,
                w: 11,
                h: 11,
            })
            .collect();
        for (i, (a, _)) in placed.iter().enumerate() {
            assert!(a.inside(&area), "label {i} at {a:?} is off the chart");
            assert!(!a.overlaps(&legend), "label {i} covers the legend");
            for (j, (b, _)) in placed.iter().enumerate().skip(i + 1) {
                assert!(!a.overlaps(b), "labels {i} {a:?} and {j} {b:?} overlap");
            }
            for (j, m) in boxes.iter().enumerate() {
                assert!(!a.overlaps(m), "label {i} covers marker {j}");
            }
        }
        // A lone marker keeps its label right beside it, centred on it, with no leader line.
        let lone = place_labels(&[(100, 300)], &[(50, 14)], area, &[]);
        assert_eq!(
            lone[0],
            (
                Rect {
                    x: 107,
                    y: 293,
                    w: 50,
                    h: 14
                },
                false
            )
        );
    }

    /// Every limiter the model names has its colour in the per-pipe chart, and each row's
    /// limiter is outlined.
    #[test]
    fn the_pipe_chart_colours_every_limiter_and_outlines_the_one_that_sets_the_time() {
        for l in perf::model::Limiter::ALL {
            assert!(
                PIPES.iter().any(|(name, _)| *name == l.name()),
                "{}",
                l.name()
            );
        }
        let rows = [
            PipeRow {
                label: "kernel_a 1 x 2".to_string(),
                fractions: vec![("DRAM", 1.0), ("L2", 0.4), ("FP32", 0.1)],
                limiter: "DRAM",
                phases: None,
            },
            PipeRow {
                label: "kernel_b 3 x 4".to_string(),
                fractions: vec![("tensor", 1.0), ("shared wavefronts", 0.9)],
                limiter: "tensor",
                phases: None,
            },
            PipeRow {
                label: "attention 5 x 6".to_string(),
                fractions: vec![(PHASES, 1.0), ("tensor", 0.7), ("MUFU", 0.3)],
                limiter: PHASES,
                phases: Some((0.7, 0.3)),
            },
        ];
        let mut svg = String::new();
        draw_pipes(
            SVGBackend::with_string(&mut svg, (900, 300)).into_drawing_area(),
            &rows,
            "test",
        )
        .unwrap();
        assert!(svg.contains("kernel_a 1 x 2") && svg.contains("kernel_b 3 x 4"));
        // An outline (no fill) per row.
        let outlines = svg
            .lines()
            .filter(|l| l.contains("<rect") && l.contains("fill=\"none\" stroke=\"#000000\""))
            .count();
        assert_eq!(outlines, 3, "{svg}");
        // The phases' bar in two parts: the softmax's lighter, only on the row that has them.
        let hex = |c: RGBColor| format!("fill=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2);
        let lighter = svg
            .lines()
            .filter(|l| l.contains(&hex(SOFTMAX_PART)))
            .count();
        assert_eq!(lighter, 2, "the bar and its legend: {svg}");
        for name in ["DRAM", "L2", "FP32", "tensor", "shared wavefronts"] {
            assert!(svg.contains(name), "{name} in the legend");
        }
        assert!(svg.contains("bars overlaid from 0,") && svg.contains("not stacked"));
    }

    /// Each kernel's label is drawn once, and a point below its roof gets the cross that marks
    /// the bound.
    #[test]
    fn the_chart_labels_every_point_and_marks_the_bounds() {
        let spec = perf::specs::GpuSpec::find("h100").unwrap();
        let point = |label: &str, intensity: f64, at: f64, bound: Option<f64>| RooflinePoint {
            label: label.to_string(),
            intensity,
            flops_per_second: at,
            bound,
            unit: ComputeUnit::TensorCore16,
            measured: false,
        };
        let points = [
            point("kernel_a", 100.0, 1e14, Some(3e14)),
            point("kernel_b", 101.0, 1.01e14, None),
            point("kernel_c", 102.0, 2e14, Some(2e14)),
        ];
        let mut svg = String::new();
        draw_roofline(
            SVGBackend::with_string(&mut svg, (900, 600)).into_drawing_area(),
            spec,
            &points,
            "test",
        )
        .unwrap();
        for p in &points {
            assert_eq!(svg.matches(p.label.as_str()).count(), 1, "{}", p.label);
        }
        // A cross is two lines; only kernel_a is below its bound.
        let grey_lines = svg.matches("opacity=\"0.35\"").count();
        assert_eq!(
            grey_lines, 3,
            "a joining line and the cross's two strokes: {svg}"
        );
    }
}
