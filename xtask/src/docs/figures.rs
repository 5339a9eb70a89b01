//! `cargo xtask figures`: the teaching pictures in `docs/img/`, drawn from the functions the
//! kernels and the emulator use, so a picture cannot drift from the code:
//!
//! - `launch.svg`: a launch's grid of blocks, one 16 x 16 block's threads coloured by warp (x
//!   fastest, as `kernels::cuda::thread::linear_thread_idx` numbers them), and blocks placed on
//!   SMs (basics.md);
//! - `mma-fragments.svg`: which lane and register of `mma.m16n8k16` holds each element of A, B
//!   and C (the emulator's reading of the PTX ISA, `emu::fragments`);
//! - `ldmatrix-x4.svg`: `ldmatrix.x4` without and with `.trans` (the kernels' row addresses,
//!   `kernels::gemm::ldmatrix_x4_lane`, and the emulator's destinations);
//! - `banks-transpose.svg`, `banks-tiles.svg`: the shared-memory banks a warp's access touches
//!   in the transpose tile (pitch 32 against 33), the tensor-core GEMM's tile (with and without
//!   `kernels::gemm::swizzle`) and the attention kernel's padded tile;
//! - `raster.svg`: the order in which blocks walk C, row by row against `kernels::gemm::raster`;
//! - `pyramid.svg`: the memory pyramid of an H100 to scale (`perf::specs`);
//! - `online-softmax.svg`: the online-softmax recurrence (`trace-softmax`'s `online_trace`);
//! - `flash-tiling.svg`: one query tile of the tensor-core FlashAttention kernel over time, which
//!   tiles sit in HBM, shared memory and registers at each step (`kernels::attention`'s tile
//!   sizes, stages and causal `kv_end`);
//! - `toolchain.svg`: one Rust source, its two compilations, the three ways it runs and the
//!   ptxas check (the embedded PTX modules' own entry points, `host::embedded`, and the pinned
//!   nightly);
//! - `decode-bytes.svg`: the bytes one decode step of Llama-3-8B reads, weights against KV cache,
//!   as the context grows (the decode kernels' cost models, `xtask::decode::token_steps`);
//! - `wgmma-pipeline.svg`: GEMM step 5's mbarrier ring over time, each K tile's stage and phase
//!   from `kernels::gemm::wgmma::stage_of` (a schematic schedule; the latencies are labelled).
//!
//! The SVG is written by hand (rectangles, lines and text, numbers to one decimal), so the
//! output is byte-for-byte deterministic; a test regenerates every figure and fails if a
//! committed one differs.

use std::fmt::Write;
use std::path::PathBuf;

mod memory;
mod pipeline;
mod threads;
mod toolchain;

use memory::{banks_tiles, banks_transpose, decode_bytes, pyramid, raster_order};
use pipeline::{flash_tiling, online_softmax, wgmma_pipeline};
use threads::{launch, ldmatrix_x4, mma_fragments};
use toolchain::toolchain;

/// `cargo xtask figures`: writes every figure into `docs/img/`.
#[derive(clap::Args)]
pub struct FiguresArgs {
    /// Write into this folder instead of docs/img.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(args: &FiguresArgs) -> Result<(), String> {
    let dir = match &args.out {
        Some(dir) => dir.clone(),
        None => img_dir()?,
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for (name, svg) in all() {
        let path = dir.join(name);
        std::fs::write(&path, svg).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(())
}

/// docs/img of the checkout the command runs in.
fn img_dir() -> Result<PathBuf, String> {
    Ok(crate::checkout::checkout()?.join("docs/img"))
}

/// Every figure: file name and SVG text.
pub fn all() -> Vec<(&'static str, String)> {
    vec![
        ("launch.svg", launch()),
        ("mma-fragments.svg", mma_fragments()),
        ("ldmatrix-x4.svg", ldmatrix_x4()),
        ("banks-transpose.svg", banks_transpose()),
        ("banks-tiles.svg", banks_tiles()),
        ("raster.svg", raster_order()),
        ("pyramid.svg", pyramid()),
        ("online-softmax.svg", online_softmax()),
        ("flash-tiling.svg", flash_tiling()),
        ("toolchain.svg", toolchain()),
        ("decode-bytes.svg", decode_bytes()),
        ("wgmma-pipeline.svg", wgmma_pipeline()),
    ]
}

// ---- A minimal SVG writer ---------------------------------------------------------------------

struct Svg {
    width: f64,
    height: f64,
    body: String,
}

impl Svg {
    fn new(width: f64, height: f64) -> Self {
        let mut svg = Self {
            width,
            height,
            body: String::new(),
        };
        svg.rect(0.0, 0.0, width, height, "white", "none");
        svg
    }

    fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, stroke: &str) {
        let _ = writeln!(
            self.body,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{fill}" stroke="{stroke}" stroke-width="0.5"/>"#
        );
    }

    /// Text at (`x`, `y`), `anchor` start, middle or end.
    fn text(&mut self, x: f64, y: f64, size: f64, anchor: &str, text: &str) {
        let text = text
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        let _ = writeln!(
            self.body,
            r#"<text x="{x:.1}" y="{y:.1}" font-size="{size:.1}" text-anchor="{anchor}">{text}</text>"#
        );
    }

    fn line(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), stroke: &str, width: f64) {
        let _ = writeln!(
            self.body,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{stroke}" stroke-width="{width:.1}"/>"#
        );
    }

    fn polyline(&mut self, points: &[(f64, f64)], stroke: &str) {
        let pts: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect();
        let _ = writeln!(
            self.body,
            r#"<polyline points="{}" fill="none" stroke="{stroke}" stroke-width="2.0"/>"#,
            pts.join(" ")
        );
        for &(x, y) in points {
            let _ = writeln!(
                self.body,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.0" fill="{stroke}"/>"#
            );
        }
    }

    fn finish(self) -> String {
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" font-family=\"sans-serif\">\n{}</svg>\n",
            self.body,
            w = self.width,
            h = self.height
        )
    }
}

/// A line from `from` to `to` with a small head at `to`.
fn arrow(svg: &mut Svg, from: (f64, f64), to: (f64, f64)) {
    svg.line(from, to, "#557", 1.2);
    let (dx, dy) = (to.0 - from.0, to.1 - from.1);
    let len = dx.hypot(dy);
    let (ux, uy) = (dx / len, dy / len);
    let back = (to.0 - 7.0 * ux, to.1 - 7.0 * uy);
    let wing = |side: f64| (back.0 - 3.5 * uy * side, back.1 + 3.5 * ux * side);
    svg.line(to, wing(1.0), "#557", 1.2);
    svg.line(to, wing(-1.0), "#557", 1.2);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CI's check that no picture is stale: every figure, regenerated, equals the committed file.
    #[test]
    fn committed_figures_are_current() {
        for (name, svg) in all() {
            let path = img_dir().unwrap().join(name);
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                committed == svg,
                "docs/img/{name} is stale or missing: run `cargo xtask figures` and commit it"
            );
        }
    }

    #[test]
    fn drawing_is_deterministic() {
        assert_eq!(all(), all());
    }
}
