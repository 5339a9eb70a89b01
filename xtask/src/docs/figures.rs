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

use emu::fragments;
use kernels::gemm::{ELEMS_PER_CHUNK, TC_GROUP_M, ldmatrix_x4_lane, raster, swizzled};
use perf::specs::GpuSpec;

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

/// A light colour per lane: the lane's group of four (`g = lane / 4`, the fragment row) picks
/// the hue, its place in the group (`t`) the lightness.
fn lane_colour(lane: usize) -> String {
    let (g, t) = (lane / 4, lane % 4);
    format!("hsl({}, 70%, {}%)", g * 45, 88 - 8 * t)
}

/// A colour per bank group of four banks (one 16-byte chunk).
fn bank_colour(bank: usize) -> String {
    format!("hsl({}, 65%, 78%)", (bank / 4) * 45)
}

// ---- A launch: grid, blocks, warps, SMs ------------------------------------------------------

/// A thread's rank in a block `width` threads wide, x fastest: what
/// `kernels::cuda::thread::linear_thread_idx` computes on the device for a 2-D block.
fn linear_thread_idx(x: u32, y: u32, width: u32) -> u32 {
    y * width + x
}

fn launch() -> String {
    let (grid_x, grid_y) = (4u32, 3u32);
    let (block_x, block_y) = (16u32, 16u32);
    let picked = (1u32, 0u32);
    let h100 = GpuSpec::find("h100").expect("in the table");
    let mut svg = Svg::new(900.0, 370.0);
    svg.text(
        10.0,
        20.0,
        15.0,
        "start",
        &format!(
            "A launch of {grid_x} x {grid_y} blocks of {block_x} x {block_y} threads: the grid, one block's warps, the SMs"
        ),
    );
    // The grid.
    let (gx0, gy0, bw, bh) = (10.0, 70.0, 48.0, 34.0);
    svg.text(
        gx0,
        gy0 - 10.0,
        12.0,
        "start",
        "grid: blocks (block_idx_x, block_idx_y)",
    );
    for by in 0..grid_y {
        for bx in 0..grid_x {
            let (x, y) = (gx0 + f64::from(bx) * bw, gy0 + f64::from(by) * bh);
            let fill = if (bx, by) == picked {
                "hsl(30, 90%, 70%)"
            } else {
                "hsl(210, 30%, 94%)"
            };
            svg.rect(x, y, bw, bh, fill, "#888");
            svg.text(
                x + bw / 2.0,
                y + bh / 2.0 + 4.0,
                10.0,
                "middle",
                &format!("({bx}, {by})"),
            );
        }
    }
    svg.text(
        gx0,
        gy0 + f64::from(grid_y) * bh + 18.0,
        10.0,
        "start",
        "blocks run in no defined order;",
    );
    svg.text(
        gx0,
        gy0 + f64::from(grid_y) * bh + 32.0,
        10.0,
        "start",
        "they cannot wait for each other",
    );
    // One block, its threads coloured by warp.
    let (tx0, ty0, cell) = (300.0, 70.0, 13.0);
    svg.text(
        tx0,
        ty0 - 24.0,
        12.0,
        "start",
        &format!(
            "block ({}, {}): {block_x} x {block_y} threads, x fastest",
            picked.0, picked.1
        ),
    );
    svg.text(
        tx0,
        ty0 - 10.0,
        10.0,
        "start",
        "colour: warp = (x + 16 y) / 32",
    );
    let warps = block_x * block_y / 32;
    for y in 0..block_y {
        for x in 0..block_x {
            let warp = linear_thread_idx(x, y, block_x) / 32;
            let fill = format!("hsl({}, 65%, 78%)", warp * 360 / warps);
            svg.rect(
                tx0 + f64::from(x) * cell,
                ty0 + f64::from(y) * cell,
                cell,
                cell,
                &fill,
                "#777",
            );
        }
    }
    for warp in 0..warps {
        // The rows a warp spans: its first and last thread's y.
        let (first, last) = (warp * 32 / block_x, (warp * 32 + 31) / block_x);
        let mid = ty0 + (f64::from(first + last) / 2.0 + 0.5) * cell + 4.0;
        let rows = if first == last {
            format!("y = {first}")
        } else {
            format!("y = {first}, {last}")
        };
        svg.text(
            tx0 + f64::from(block_x) * cell + 6.0,
            mid,
            10.0,
            "start",
            &format!("warp {warp}: {rows}"),
        );
    }
    svg.text(
        tx0,
        ty0 + f64::from(block_y) * cell + 16.0,
        10.0,
        "start",
        "x: 0 .. 15 along a row; y: down",
    );
    arrow(
        &mut svg,
        (gx0 + f64::from(grid_x) * bw + 4.0, gy0 + bh / 2.0),
        (tx0 - 6.0, ty0 + 20.0),
    );
    // The SMs.
    let (sx0, sy0, sw, sh) = (640.0, 70.0, 240.0, 74.0);
    svg.text(
        sx0,
        sy0 - 24.0,
        12.0,
        "start",
        &format!("SMs ({} on an H100)", h100.sms),
    );
    svg.text(
        sx0,
        sy0 - 10.0,
        10.0,
        "start",
        "one possible placement of the blocks",
    );
    let shown = 3u32;
    for sm in 0..shown {
        let y = sy0 + f64::from(sm) * (sh + 10.0);
        svg.rect(sx0, y, sw, sh, "hsl(120, 25%, 93%)", "#557");
        svg.text(
            sx0 + 8.0,
            y + 16.0,
            11.0,
            "start",
            &format!("SM {sm}: 4 warp schedulers"),
        );
        // Blocks dealt round-robin: SM k holds blocks k, k + shown, ... of the grid, in order.
        let mut x = sx0 + 8.0;
        for b in (sm..grid_x * grid_y).step_by(shown as usize) {
            let (bx, by) = (b % grid_x, b / grid_x);
            let fill = if (bx, by) == picked {
                "hsl(30, 90%, 70%)"
            } else {
                "hsl(210, 30%, 94%)"
            };
            svg.rect(x, y + 26.0, 54.0, 24.0, fill, "#888");
            svg.text(x + 27.0, y + 42.0, 10.0, "middle", &format!("({bx}, {by})"));
            x += 58.0;
        }
    }
    let below = sy0 + f64::from(shown) * (sh + 10.0) + 4.0;
    svg.text(
        sx0,
        below,
        10.0,
        "start",
        "a block stays on its SM until it ends;",
    );
    svg.text(
        sx0,
        below + 14.0,
        10.0,
        "start",
        "an SM holds as many as fit (occupancy)",
    );
    arrow(
        &mut svg,
        (tx0 + f64::from(block_x) * cell + 90.0, ty0 + 30.0),
        (sx0 - 4.0, sy0 + 38.0),
    );
    svg.text(10.0, 360.0, 11.0, "start", "A scheduler issues one instruction for a whole warp, picking among its SM's resident warps. cargo xtask figures.");
    svg.finish()
}

// ---- mma.m16n8k16 ------------------------------------------------------------------------------

/// One matrix of cells, `rows x cols`, with a title; `label(r, c)` gives the cell's lane and two
/// lines of text.
fn grid(
    svg: &mut Svg,
    (x0, y0): (f64, f64),
    (rows, cols): (usize, usize),
    (cw, ch): (f64, f64),
    title: &str,
    label: impl Fn(usize, usize) -> (usize, String, String),
) {
    svg.text(x0, y0 - 8.0, 13.0, "start", title);
    for r in 0..rows {
        for c in 0..cols {
            let (lane, top, bottom) = label(r, c);
            let (x, y) = (x0 + c as f64 * cw, y0 + r as f64 * ch);
            svg.rect(x, y, cw, ch, &lane_colour(lane), "#555");
            svg.text(x + cw / 2.0, y + ch / 2.0 - 1.0, 8.0, "middle", &top);
            svg.text(x + cw / 2.0, y + ch - 3.0, 7.0, "middle", &bottom);
        }
    }
}

/// Inverts a fragment layout: for each element of a `rows x cols` tile, the (lane, register,
/// half) that holds it.
fn owners<const R: usize, const C: usize>(
    regs: usize,
    halves: usize,
    at: impl Fn(usize, usize, usize) -> (usize, usize),
) -> [[(usize, usize, usize); C]; R] {
    let mut owner = [[(0, 0, 0); C]; R];
    for lane in 0..32 {
        for reg in 0..regs {
            for half in 0..halves {
                let (r, c) = at(lane, reg, half);
                owner[r][c] = (lane, reg, half);
            }
        }
    }
    owner
}

fn mma_fragments() -> String {
    let (cw, ch) = (30.0, 22.0);
    let mut svg = Svg::new(1010.0, 450.0);
    svg.text(
        10.0,
        20.0,
        15.0,
        "start",
        "mma.m16n8k16: which lane (T) and register holds each element (colour: lane; g = lane / 4 sets the hue)",
    );
    let a = owners::<16, 16>(4, 2, fragments::mma_a);
    grid(
        &mut svg,
        (10.0, 60.0),
        (16, 16),
        (cw, ch),
        "A, 16 x 16 (rows m, columns k): a0..a3, two elements each",
        |r, c| {
            let (lane, reg, half) = a[r][c];
            (
                lane,
                format!("T{lane}"),
                format!("a{reg}.{}", ["lo", "hi"][half]),
            )
        },
    );
    let b = owners::<16, 8>(2, 2, fragments::mma_b);
    grid(
        &mut svg,
        (520.0, 60.0),
        (16, 8),
        (cw, ch),
        "B, 16 x 8 (k, n): b0, b1",
        |r, c| {
            let (lane, reg, half) = b[r][c];
            (
                lane,
                format!("T{lane}"),
                format!("b{reg}.{}", ["lo", "hi"][half]),
            )
        },
    );
    let cc = owners::<16, 8>(4, 1, |lane, reg, _| fragments::mma_c(lane, reg));
    grid(
        &mut svg,
        (770.0, 60.0),
        (16, 8),
        (cw, ch),
        "C and D, 16 x 8 f32: c0..c3",
        |r, c| {
            let (lane, reg, _) = cc[r][c];
            (lane, format!("T{lane}"), format!("c{reg}"))
        },
    );
    svg.text(10.0, 438.0, 11.0, "start", "Drawn by cargo xtask figures from emu::fragments, the emulator's reading of the PTX ISA's fragment figures.");
    svg.finish()
}

// ---- ldmatrix.x4 -------------------------------------------------------------------------------

/// The 16 x 16 block an `ldmatrix.x4` reads, each element labelled with the lane and register
/// it lands in.
fn ldmatrix_panel(svg: &mut Svg, x0: f64, trans: bool) {
    let (cw, ch) = (26.0, 22.0);
    // Where element (r, c) of matrix j sits in the 16 x 16 block: its row is the one lane
    // 8j + r addresses (the kernels' ldmatrix_x4_lane).
    let place = |j: usize, r: usize, c: usize| {
        let (row, col) = ldmatrix_x4_lane(fragments::ldmatrix_row_lane(j, r) as u32);
        (row as usize, col as usize + c)
    };
    let mut owner = [[(0usize, 0usize); 16]; 16];
    for lane in 0..32 {
        for j in 0..4 {
            for half in 0..2 {
                let (r, c) = fragments::ldmatrix(lane, half, trans);
                let (row, col) = place(j, r, c);
                owner[row][col] = (lane, j);
            }
        }
    }
    let title = if trans {
        "with .trans: each matrix read down its columns (B of PV)"
    } else {
        "without .trans: the A fragment of mma (Q, and A of the GEMM)"
    };
    grid(svg, (x0 + 50.0, 60.0), (16, 16), (cw, ch), title, |r, c| {
        let (lane, j) = owner[r][c];
        (lane, format!("T{lane}"), format!("r{j}"))
    });
    for row in 0..16 {
        for j in 0..4 {
            for r in 0..8 {
                let lane = fragments::ldmatrix_row_lane(j, r);
                let (br, bc) = ldmatrix_x4_lane(lane as u32);
                if br as usize == row && bc == 0 {
                    svg.text(
                        x0 + 47.0,
                        60.0 + row as f64 * ch + 15.0,
                        8.0,
                        "end",
                        &format!("L{lane}, L{}", lane + 16),
                    );
                }
            }
        }
    }
}

fn ldmatrix_x4() -> String {
    let mut svg = Svg::new(940.0, 470.0);
    svg.text(10.0, 20.0, 15.0, "start", "ldmatrix.x4, 16 x 16 block of 16-bit elements: lanes Lx give a row's address; each element lands in lane T, register r");
    ldmatrix_panel(&mut svg, 0.0, false);
    ldmatrix_panel(&mut svg, 470.0, true);
    svg.text(10.0, 440.0, 11.0, "start", "Row addresses: kernels::gemm::ldmatrix_x4_lane (lanes 0-15 the left 8 columns, 16-31 the right 8); destinations:");
    svg.text(
        10.0,
        456.0,
        11.0,
        "start",
        "emu::fragments::ldmatrix. Drawn by cargo xtask figures.",
    );
    svg.finish()
}

// ---- Shared-memory banks -----------------------------------------------------------------------

const BANKS: usize = 32;

/// The bank of a 4-byte word offset.
fn bank(word: usize) -> usize {
    word % BANKS
}

/// A warp reading one column of the 32 x 32 f32 transpose tile: the bank of each of its 32
/// elements, with row pitch `pitch` words.
fn column_banks(pitch: usize) -> Vec<usize> {
    (0..kernels::transpose::TILE)
        .map(|ty| bank(ty * pitch))
        .collect()
}

/// How many lanes of a request land in the busiest bank (distinct words; 1 is conflict-free).
fn conflict_degree(banks: &[usize]) -> usize {
    (0..BANKS)
        .map(|b| banks.iter().filter(|&&x| x == b).count())
        .max()
        .unwrap_or(0)
}

fn degree_text(degree: usize) -> String {
    if degree == 1 {
        "no conflict".to_string()
    } else {
        format!("{degree}-way conflict")
    }
}

fn banks_transpose() -> String {
    use kernels::transpose::{PADDED_PITCH, TILE};
    let mut svg = Svg::new(840.0, 250.0);
    svg.text(10.0, 20.0, 15.0, "start", "transpose: a warp reads one column of the 32 x 32 f32 tile (lane i reads row i); the cell is the bank");
    for (i, (pitch, name)) in [
        (TILE, "transpose_shared"),
        (PADDED_PITCH, "transpose_padded"),
    ]
    .into_iter()
    .enumerate()
    {
        let banks = column_banks(pitch);
        let y = 60.0 + i as f64 * 90.0;
        svg.text(
            10.0,
            y - 8.0,
            12.0,
            "start",
            &format!(
                "{name}: pitch {pitch} words, bank = (lane x {pitch}) mod 32: {}",
                degree_text(conflict_degree(&banks))
            ),
        );
        for (lane, &b) in banks.iter().enumerate() {
            let x = 10.0 + lane as f64 * 23.0;
            svg.rect(x, y, 23.0, 24.0, &bank_colour(b), "#555");
            svg.text(x + 11.5, y + 16.0, 9.0, "middle", &b.to_string());
            svg.text(x + 11.5, y + 36.0, 7.0, "middle", &format!("L{lane}"));
        }
    }
    svg.text(10.0, 240.0, 11.0, "start", "Pitches from kernels::transpose (TILE, PADDED_PITCH): one word of padding per row spreads a column over all 32 banks. cargo xtask figures.");
    svg.finish()
}

/// One 8 x 8 grid of 16-byte chunks: eight rows of a tile as an `ldmatrix` phase sees them, each
/// cell the bank group of chunk `chunk` of that row; the chunks of logical column chunk 0 (the
/// ones one phase reads) are outlined.
fn chunk_panel(
    svg: &mut Svg,
    (x0, y0): (f64, f64),
    title: &str,
    word_of: impl Fn(u32, u32) -> usize,
) {
    svg.text(x0, y0 - 8.0, 12.0, "start", title);
    let (cw, ch) = (40.0, 22.0);
    let mut first_chunk_banks = Vec::new();
    for row in 0..8u32 {
        for chunk in 0..8u32 {
            let word = word_of(row, chunk);
            let b = bank(word);
            let slot = (b / 4) as f64;
            let (x, y) = (x0 + slot * cw, y0 + f64::from(row) * ch);
            let stroke = if chunk == 0 { "black" } else { "#bbb" };
            svg.rect(x, y, cw, ch, &bank_colour(b), stroke);
            if chunk == 0 {
                svg.rect(x + 1.0, y + 1.0, cw - 2.0, ch - 2.0, "none", "black");
                first_chunk_banks.extend((0..4).map(|i| b + i));
            }
            svg.text(
                x + cw / 2.0,
                y + 15.0,
                9.0,
                "middle",
                &format!("r{row} c{chunk}"),
            );
        }
    }
    let degree = conflict_degree(&first_chunk_banks);
    svg.text(
        x0,
        y0 + 8.0 * ch + 14.0,
        10.0,
        "start",
        &format!(
            "outlined, chunk 0 of 8 rows (one ldmatrix phase): {}",
            degree_text(degree)
        ),
    );
}

fn banks_tiles() -> String {
    use kernels::attention::flash_mma::ROW_PAD;
    let mut svg = Svg::new(1010.0, 300.0);
    svg.text(10.0, 20.0, 15.0, "start", "Where each 16-byte chunk (r row, c chunk) of a bf16 tile lands in the 32 banks: columns are bank groups 0-3, 4-7, ..., 28-31");
    // The GEMM's A tile: 64 bf16 per row (128 bytes, one bank line), chunk c of row r.
    let cols = 64u32;
    let words = |elem: usize| elem * 2 / 4;
    chunk_panel(
        &mut svg,
        (10.0, 60.0),
        "GEMM tile, 64 bf16 per row, no swizzle",
        |r, c| words((r * cols + c * ELEMS_PER_CHUNK) as usize),
    );
    chunk_panel(
        &mut svg,
        (345.0, 60.0),
        "GEMM tile with kernels::gemm::swizzled",
        |r, c| words(swizzled(r, c * ELEMS_PER_CHUNK, cols)),
    );
    let stride = 64 + ROW_PAD as u32;
    chunk_panel(
        &mut svg,
        (680.0, 60.0),
        &format!("attention tile, d = 64 + ROW_PAD = {stride} per row"),
        |r, c| words((r * stride + c * ELEMS_PER_CHUNK) as usize),
    );
    svg.text(10.0, 290.0, 11.0, "start", "Unswizzled rows of one 128-byte line put a column's chunks in one bank group; the XOR swizzle and the 16-byte row padding spread them over all eight. cargo xtask figures.");
    svg.finish()
}

// ---- Block rasterisation -----------------------------------------------------------------------

/// Tiles of C visited by blocks `0..blocks` of a `blocks_m x blocks_n` grid under `order`.
fn raster_panel(
    svg: &mut Svg,
    (x0, y0): (f64, f64),
    (blocks_m, blocks_n): (u32, u32),
    wave: u32,
    title: &str,
    order: impl Fn(u32) -> (u32, u32),
) {
    let cell = 26.0;
    let mut rows = std::collections::BTreeSet::new();
    let mut cols = std::collections::BTreeSet::new();
    for pid in 0..blocks_m * blocks_n {
        let (r, c) = order(pid);
        let (x, y) = (x0 + f64::from(c) * cell, y0 + f64::from(r) * cell);
        let fill = if pid < wave {
            rows.insert(r);
            cols.insert(c);
            "hsl(30, 90%, 70%)"
        } else {
            "hsl(210, 30%, 94%)"
        };
        svg.rect(x, y, cell, cell, fill, "#888");
        svg.text(x + cell / 2.0, y + 17.0, 9.0, "middle", &pid.to_string());
    }
    svg.text(x0, y0 - 24.0, 12.0, "start", title);
    svg.text(
        x0,
        y0 - 8.0,
        11.0,
        "start",
        &format!(
            "first {wave} blocks read {} strips of A and {} of B: {} in all",
            rows.len(),
            cols.len(),
            rows.len() + cols.len()
        ),
    );
}

fn raster_order() -> String {
    let (blocks_m, blocks_n, wave) = (16u32, 12u32, 32u32);
    let mut svg = Svg::new(740.0, 520.0);
    svg.text(
        10.0,
        20.0,
        15.0,
        "start",
        "Block order over 16 x 12 tiles of C (number: block index; orange: the first 32 blocks)",
    );
    raster_panel(
        &mut svg,
        (10.0, 70.0),
        (blocks_m, blocks_n),
        wave,
        "row by row",
        |pid| (pid / blocks_n, pid % blocks_n),
    );
    raster_panel(
        &mut svg,
        (370.0, 70.0),
        (blocks_m, blocks_n),
        wave,
        &format!("kernels::gemm::raster, groups of {TC_GROUP_M} rows"),
        |pid| raster(pid, blocks_m, blocks_n, TC_GROUP_M),
    );
    svg.text(10.0, 510.0, 11.0, "start", "Blocks running together share strips in L2: fewer distinct strips, fewer HBM reads. cargo xtask figures.");
    svg.finish()
}

// ---- The memory pyramid ------------------------------------------------------------------------

/// A horizontal bar chart on a log10 axis from `lo` to `hi` decades.
fn log_bars(
    svg: &mut Svg,
    (x0, y0): (f64, f64),
    title: &str,
    unit: &str,
    (lo, hi): (f64, f64),
    bars: &[(&str, f64, String)],
) {
    let width = 300.0;
    svg.text(x0, y0 - 10.0, 13.0, "start", title);
    let scale = |v: f64| (v.log10() - lo) / (hi - lo) * width;
    for d in (lo as i32)..=(hi as i32) {
        let x = x0 + 110.0 + scale(10f64.powi(d));
        svg.line((x, y0), (x, y0 + 30.0 * bars.len() as f64), "#ddd", 1.0);
        svg.text(
            x,
            y0 + 30.0 * bars.len() as f64 + 12.0,
            9.0,
            "middle",
            &format!("1e{d}"),
        );
    }
    for (i, (name, value, text)) in bars.iter().enumerate() {
        let y = y0 + 30.0 * i as f64 + 5.0;
        svg.text(x0 + 105.0, y + 14.0, 11.0, "end", name);
        svg.rect(
            x0 + 110.0,
            y,
            scale(*value),
            20.0,
            "hsl(210, 60%, 70%)",
            "#557",
        );
        svg.text(x0 + 114.0 + scale(*value), y + 14.0, 10.0, "start", text);
    }
    svg.text(
        x0 + 110.0 + width / 2.0,
        y0 + 30.0 * bars.len() as f64 + 26.0,
        10.0,
        "middle",
        unit,
    );
}

fn pyramid() -> String {
    let g = GpuSpec::find("h100").expect("in the table");
    let sms = f64::from(g.sms);
    let shared_bw = g.shared_bytes_per_clock * sms * g.boost_clock_hz;
    let size = |b: f64| {
        if b >= 1e9 {
            format!("{:.0} GB", b / 1e9)
        } else {
            format!("{:.1} MB", b / 1e6)
        }
    };
    let rate = |b: f64| {
        if b >= 1e12 {
            format!("{:.2} TB/s", b / 1e12)
        } else {
            format!("{:.0} GB/s", b / 1e9)
        }
    };
    let sizes = [
        ("registers", g.registers_per_sm * sms),
        ("shared memory", g.shared_per_sm * sms),
        ("L2", g.l2_bytes),
        ("HBM", g.hbm_bytes),
    ];
    let rates = [
        ("shared memory", shared_bw),
        ("HBM", g.hbm_bandwidth),
        ("NVLink", g.nvlink_bandwidth),
        ("PCIe", g.pcie_bandwidth),
        ("network", g.network_bandwidth),
    ];
    let mut svg = Svg::new(960.0, 260.0);
    svg.text(
        10.0,
        20.0,
        15.0,
        "start",
        &format!(
            "The memory pyramid of the {}, to scale (vendor figures, log axes)",
            g.name
        ),
    );
    let sized: Vec<(&str, f64, String)> = sizes.iter().map(|&(n, b)| (n, b, size(b))).collect();
    log_bars(
        &mut svg,
        (10.0, 60.0),
        "capacity, whole GPU",
        "bytes",
        (7.0, 11.0),
        &sized,
    );
    let rated: Vec<(&str, f64, String)> = rates.iter().map(|&(n, b)| (n, b, rate(b))).collect();
    log_bars(
        &mut svg,
        (470.0, 60.0),
        "bandwidth (links: per direction)",
        "bytes per second",
        (10.0, 14.0),
        &rated,
    );
    svg.text(10.0, 250.0, 11.0, "start", "From perf::specs (shared memory: 128 B per clock per SM x SMs x boost clock; no vendor figure for the register file or L2 bandwidth). cargo xtask figures.");
    svg.finish()
}

// ---- The toolchain ----------------------------------------------------------------------------

/// The pinned nightly's channel, from the file host/build.rs reads.
fn kernels_nightly() -> &'static str {
    host::ptx_build::channel(include_str!("../../../kernels/rust-toolchain.toml"))
        .expect("kernels/rust-toolchain.toml names a channel")
}

/// A box with a bold first line and smaller lines under it.
fn boxed(svg: &mut Svg, (x, y, w, h): (f64, f64, f64, f64), fill: &str, lines: &[&str]) {
    svg.rect(x, y, w, h, fill, "#557");
    for (i, l) in lines.iter().enumerate() {
        let size = if i == 0 { 12.0 } else { 10.0 };
        svg.text(x + 8.0, y + 16.0 + 14.0 * i as f64, size, "start", l);
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

/// `words` joined by ", " into lines of at most `width` characters (a word longer than that on a
/// line of its own).
fn wrap(words: &[String], width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let piece = if i + 1 < words.len() {
            format!("{w},")
        } else {
            w.clone()
        };
        match lines.last_mut() {
            Some(line) if line.len() + 1 + piece.len() <= width => {
                line.push(' ');
                line.push_str(&piece);
            }
            _ => lines.push(piece),
        }
    }
    lines
}

fn toolchain() -> String {
    use host::embedded::{Arch, entry_body, entry_points};
    let entries = |a: Arch| entry_points(a.ptx());
    // Every build has the same entries; a Hopper-only kernel's body is wgmma and TMA in sm_90a
    // and a trap elsewhere.
    let hopper_body = |a: Arch, name: &str| {
        entry_body(a.ptx(), name).is_some_and(|b| b.contains("wgmma.") || b.contains(".tensor"))
    };
    // The Hopper-only kernels by family: `gemm_wgmma_bf16` and `gemm_wgmma_f16` are `gemm_wgmma_*`.
    let family = |name: &str| {
        let kept: Vec<&str> = name
            .split('_')
            .filter(|t| !["f32", "bf16", "f16", "d64", "d128", "causal"].contains(t))
            .collect();
        kept.join("_") + "_*"
    };
    let hopper_only: std::collections::BTreeSet<String> = entries(Arch::Sm90a)
        .into_iter()
        .filter(|e| hopper_body(Arch::Sm90a, e) && !hopper_body(Arch::Sm90, e))
        .map(family)
        .collect();
    let mut svg = Svg::new(1000.0, 360.0);
    svg.text(
        10.0,
        20.0,
        15.0,
        "start",
        "One Rust source, two compilations, three ways to run it and one to check it (ptxas)",
    );
    let source = (10.0, 135.0, 200.0, 62.0);
    boxed(
        &mut svg,
        source,
        "hsl(40, 80%, 88%)",
        &[
            "kernels/ (#![no_std] Rust)",
            "every kernel a kernel!{...}",
            "device support: kernels::cuda",
        ],
    );
    // Top: the PTX modules host/build.rs embeds, one per architecture.
    svg.text(
        230.0,
        46.0,
        10.0,
        "start",
        &format!("rustc {} --target nvptx64-nvidia-cuda", kernels_nightly()),
    );
    svg.text(
        230.0,
        58.0,
        10.0,
        "start",
        "(host/build.rs, at cargo build)",
    );
    // No count of entries: the picture must not go stale when a kernel is added.
    let module = |i: usize| (330.0, 70.0 + 48.0 * i as f64, 300.0, 40.0);
    for (i, &arch) in Arch::ALL.iter().enumerate() {
        let mut lines = vec![format!(
            "kernels-{}.ptx: one .entry per kernel",
            arch.name()
        )];
        match arch {
            Arch::Sm80 => lines.push("A100 and later (the driver JITs it)".to_string()),
            Arch::Sm90 => lines.push("Hopper, portable (Hopper-only kernels trap)".to_string()),
            Arch::Sm90a => {
                lines.push("wgmma + TMA in the Hopper-only kernels:".to_string());
                lines.extend(wrap(&hopper_only.iter().cloned().collect::<Vec<_>>(), 46));
            }
        }
        let (x, y, w, _) = module(i);
        // As tall as its lines (the last box has room below it).
        let h = (12.0 + 14.0 * lines.len() as f64).max(40.0);
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        boxed(&mut svg, (x, y, w, h), "hsl(210, 60%, 90%)", &lines);
        arrow(
            &mut svg,
            (source.0 + source.2, source.1 + 20.0),
            (x, y + h / 2.0),
        );
    }
    let runs = [
        (
            "on a GPU: cuModuleLoadData (cudarc)",
            "the driver compiles the PTX to SASS and runs it",
        ),
        (
            "cargo xtask ptxas: NVIDIA's ptxas",
            "registers, spills, occupancy; SASS via nvdisasm",
        ),
        (
            "PTX backend (KERNELS_BACKEND=ptx)",
            "the ptx crate parses and runs the PTX itself",
        ),
    ];
    for (i, (head, note)) in runs.iter().enumerate() {
        let (x, y, w, h) = (680.0, 70.0 + 48.0 * i as f64, 310.0, 40.0);
        boxed(&mut svg, (x, y, w, h), "hsl(120, 40%, 90%)", &[head, note]);
        // Any module can take any of the three paths: a bus between the two columns.
        let (mx, my, mw, mh) = module(i);
        let bus = 655.0;
        svg.line((mx + mw, my + mh / 2.0), (bus, my + mh / 2.0), "#557", 1.2);
        arrow(&mut svg, (bus, y + h / 2.0), (x, y + h / 2.0));
    }
    let (first, last) = (module(0), module(2));
    svg.line(
        (655.0, first.1 + first.3 / 2.0),
        (655.0, last.1 + last.3 / 2.0),
        "#557",
        1.2,
    );
    // Bottom: the same source as a host function.
    svg.text(340.0, 256.0, 10.0, "start", "rustc (stable), host target");
    let host = (330.0, 262.0, 300.0, 40.0);
    boxed(
        &mut svg,
        host,
        "hsl(40, 80%, 92%)",
        &[
            "kernel!{...} as a plain unsafe fn",
            "kernels::cuda calls into the emulator",
        ],
    );
    arrow(
        &mut svg,
        (source.0 + source.2, source.1 + 42.0),
        (host.0, host.1 + 20.0),
    );
    let emulated = (680.0, 262.0, 310.0, 40.0);
    boxed(
        &mut svg,
        emulated,
        "hsl(120, 40%, 90%)",
        &[
            "source backend (KERNELS_BACKEND=emulator)",
            "called once per simulated thread",
        ],
    );
    arrow(
        &mut svg,
        (host.0 + host.2, host.1 + 20.0),
        (emulated.0, emulated.1 + 20.0),
    );
    svg.text(
        10.0,
        335.0,
        11.0,
        "start",
        "Both CPU backends share the emulator's block scheduler and checks (races, out of bounds, barrier divergence, counted bytes); the tests run on either.",
    );
    svg.text(
        10.0,
        350.0,
        11.0,
        "start",
        "Hopper-only kernels read from the embedded modules (host::embedded::Arch::ptx), the nightly from kernels/rust-toolchain.toml. cargo xtask figures.",
    );
    svg.finish()
}

// ---- Decode: bytes per token --------------------------------------------------------------------

fn decode_bytes() -> String {
    let (h100, h200) = (
        GpuSpec::find("h100").expect("in the table"),
        GpuSpec::find("h200").expect("in the table"),
    );
    let steps = crate::decode::token_steps(h100);
    let faster = crate::decode::token_steps(h200);
    let most = steps
        .iter()
        .map(|t| t.weight_bytes + t.kv_bytes)
        .max()
        .unwrap_or(1) as f64;
    let (x0, width, row) = (70.0, 560.0, 28.0);
    let px = |b: u64| b as f64 / most * width;
    let mut svg = Svg::new(960.0, 70.0 + row * steps.len() as f64 + 50.0);
    svg.text(
        10.0,
        20.0,
        15.0,
        "start",
        "One decode step of Llama-3-8B at batch 1: every weight and the whole KV cache, read once (modelled)",
    );
    let legend = [
        ("weights (bf16)", "hsl(210, 60%, 70%)"),
        ("KV cache", "hsl(30, 85%, 65%)"),
    ];
    for (i, (name, colour)) in legend.iter().enumerate() {
        let x = x0 + 160.0 * i as f64;
        svg.rect(x, 34.0, 14.0, 14.0, colour, "#557");
        svg.text(x + 20.0, 46.0, 11.0, "start", name);
    }
    svg.text(
        x0 + width + 10.0,
        46.0,
        11.0,
        "start",
        "per token: H100 SXM / H200",
    );
    for (i, (t, f)) in steps.iter().zip(&faster).enumerate() {
        let y = 60.0 + row * i as f64;
        svg.text(
            x0 - 8.0,
            y + 15.0,
            11.0,
            "end",
            &format!("{}k", t.context / 1024),
        );
        svg.rect(x0, y, px(t.weight_bytes), row - 8.0, legend[0].1, "#557");
        svg.rect(
            x0 + px(t.weight_bytes),
            y,
            px(t.kv_bytes),
            row - 8.0,
            legend[1].1,
            "#557",
        );
        let gb = |b: u64| b as f64 / 1e9;
        svg.text(
            x0 + 4.0,
            y + 14.0,
            10.0,
            "start",
            &format!("{:.1} GB", gb(t.weight_bytes)),
        );
        svg.text(
            x0 + width + 10.0,
            y + 14.0,
            11.0,
            "start",
            &format!(
                "{:.1} GB of cache: {} / {}",
                gb(t.kv_bytes),
                crate::format::duration(t.seconds),
                crate::format::duration(f.seconds)
            ),
        );
    }
    let y = 60.0 + row * steps.len() as f64;
    svg.text(x0 - 8.0, y + 2.0, 10.0, "end", "context");
    svg.text(
        10.0,
        y + 26.0,
        11.0,
        "start",
        "Bytes from the GEMV and split-KV attention cost models; time = bytes / HBM bandwidth (perf::specs). cargo xtask figures.",
    );
    svg.finish()
}

// ---- Hopper: the mbarrier ring ------------------------------------------------------------------

/// When each K tile of GEMM step 5 is issued by the producer, lands in shared memory, is
/// multiplied and is released, in units of one K tile's `wgmma`s, if a TMA takes `latency` units
/// from issue to its `full` barrier's phase completing. The ring follows the kernel: tile `kt`
/// waits for its stage's previous round to be released, and a consumer releases tile `kt` once
/// `wgmma.wait_group 1` after committing `kt + 1` returns.
struct RingEvent {
    kt: u32,
    issued: f64,
    full: f64,
    multiplied: f64,
    released: f64,
}

fn ring_schedule(tiles: u32, stages: u32, latency: f64) -> Vec<RingEvent> {
    let mut ev: Vec<RingEvent> = Vec::new();
    for kt in 0..tiles {
        let previous_round = (kt >= stages).then(|| (kt - stages) as usize);
        // The stage is empty once the consumers released the tile that used it a round ago.
        let empty = previous_round.map_or(0.0, |j| ev[j].released);
        let issued = ev.last().map_or(0.0, |e| e.issued + 0.25).max(empty);
        let full = issued + latency;
        let multiplied = ev.last().map_or(full, |e| full.max(e.multiplied + 1.0));
        if let Some(e) = ev.last_mut() {
            e.released = multiplied.max(e.multiplied + 1.0);
        }
        ev.push(RingEvent {
            kt,
            issued,
            full,
            multiplied,
            released: multiplied + 1.0,
        });
    }
    ev
}

fn wgmma_pipeline() -> String {
    use kernels::gemm::WG_STAGES;
    use kernels::gemm::wgmma::stage_of;
    let (tiles, latency) = (12, 3.0);
    let ev = ring_schedule(tiles, WG_STAGES, latency);
    let end = ev.last().map_or(1.0, |e| e.released);
    let (x0, unit) = (150.0, 760.0 / end);
    let x = |t: f64| x0 + t * unit;
    let colour = |kt: u32| format!("hsl({}, 60%, 72%)", (kt * 47) % 360);
    let rows = 2 + WG_STAGES as usize;
    let row_y = |r: usize| 50.0 + 34.0 * r as f64;
    let mut svg = Svg::new(940.0, row_y(rows) + 62.0);
    svg.text(
        10.0,
        20.0,
        15.0,
        "start",
        &format!(
            "GEMM step 5: the producer fills a ring of {WG_STAGES} stages, the consumers drain it (schematic)"
        ),
    );
    svg.text(x0 - 8.0, row_y(0) + 16.0, 11.0, "end", "producer: TMA");
    for s in 0..WG_STAGES {
        svg.text(
            x0 - 8.0,
            row_y(1 + s as usize) + 16.0,
            11.0,
            "end",
            &format!("stage {s} (full/empty[{s}])"),
        );
    }
    svg.text(
        x0 - 8.0,
        row_y(rows - 1) + 16.0,
        11.0,
        "end",
        "consumers: wgmma",
    );
    for e in &ev {
        let (s, parity) = stage_of(e.kt);
        let c = colour(e.kt);
        // The producer's issue: one thread, arrive.expect_tx then five TMA boxes.
        svg.rect(x(e.issued), row_y(0), 0.25 * unit, 24.0, &c, "#557");
        svg.text(
            x(e.issued) + 2.0,
            row_y(0) + 16.0,
            9.0,
            "start",
            &e.kt.to_string(),
        );
        // The stage: bytes in flight, then full (read by the tensor cores) until released.
        let y = row_y(1 + s as usize);
        svg.rect(
            x(e.issued),
            y + 8.0,
            (e.full - e.issued) * unit,
            8.0,
            &c,
            "none",
        );
        svg.rect(x(e.full), y, (e.released - e.full) * unit, 24.0, &c, "#557");
        svg.text(
            x(e.full) + 3.0,
            y + 16.0,
            9.0,
            "start",
            &format!("kt {} p{parity}", e.kt),
        );
        svg.rect(x(e.multiplied), row_y(rows - 1), unit, 24.0, &c, "#557");
        svg.text(
            x(e.multiplied) + 3.0,
            row_y(rows - 1) + 16.0,
            9.0,
            "start",
            &e.kt.to_string(),
        );
    }
    let notes = [
        "Thin bar: a TMA's bytes in flight, until full[s] completes the phase whose parity (p) the consumers wait on.".to_string(),
        "Wide bar: the stage is full and read by wgmma, until every consumer thread arrives on empty[s] (after wgmma.wait_group 1).".to_string(),
        format!(
            "Schematic, not measured: a TMA takes {latency} units from issue to full, one K tile of wgmma 1; stage and parity from kernels::gemm::wgmma::stage_of."
        ),
    ];
    for (i, n) in notes.iter().enumerate() {
        svg.text(10.0, row_y(rows) + 14.0 + 15.0 * i as f64, 11.0, "start", n);
    }
    svg.finish()
}

// ---- Online softmax ----------------------------------------------------------------------------

fn online_softmax() -> String {
    let scores = [1.0, 3.0, 2.0, 3.5, 0.5, 4.0];
    let values: Vec<Vec<f64>> = (1..=scores.len()).map(|v| vec![v as f64]).collect();
    let steps = crate::trace_softmax::online_trace(&scores, &values);
    let direct = crate::trace_softmax::direct_average(&scores, &values)[0];
    let mut svg = Svg::new(820.0, 360.0);
    svg.text(10.0, 20.0, 15.0, "start", "Online softmax, one score at a time: running max m, sum l and average o / l (values 1, 2, 3, ...)");
    let (x0, y0, w, h) = (60.0, 50.0, 520.0, 250.0);
    let y_max = 6.0;
    let px = |i: usize| x0 + w * i as f64 / (scores.len() - 1) as f64;
    let py = |v: f64| y0 + h - h * v / y_max;
    svg.line((x0, y0 + h), (x0 + w, y0 + h), "#333", 1.0);
    svg.line((x0, y0), (x0, y0 + h), "#333", 1.0);
    for v in 0..=6 {
        svg.text(
            x0 - 6.0,
            py(f64::from(v)) + 4.0,
            10.0,
            "end",
            &v.to_string(),
        );
        svg.line(
            (x0, py(f64::from(v))),
            (x0 + w, py(f64::from(v))),
            "#eee",
            1.0,
        );
    }
    for (i, s) in steps.iter().enumerate() {
        svg.text(
            px(i),
            y0 + h + 16.0,
            10.0,
            "middle",
            &format!("s{} = {}", i + 1, s.score),
        );
        if s.rescale < 1.0 && i > 0 {
            svg.text(
                px(i),
                y0 + h + 30.0,
                9.0,
                "middle",
                &format!("rescale {:.3}", s.rescale),
            );
        }
    }
    let series = [
        (
            "running max m",
            "hsl(0, 70%, 50%)",
            steps.iter().map(|s| s.m).collect::<Vec<_>>(),
        ),
        (
            "sum l = Σ exp(s - m)",
            "hsl(120, 50%, 35%)",
            steps.iter().map(|s| s.l).collect(),
        ),
        (
            "average o / l",
            "hsl(220, 70%, 45%)",
            steps.iter().map(|s| s.o[0] / s.l).collect(),
        ),
    ];
    for (k, (name, colour, ys)) in series.iter().enumerate() {
        let pts: Vec<(f64, f64)> = ys
            .iter()
            .enumerate()
            .map(|(i, &v)| (px(i), py(v)))
            .collect();
        svg.polyline(&pts, colour);
        let ly = 70.0 + 22.0 * k as f64;
        svg.line((600.0, ly), (625.0, ly), colour, 3.0);
        svg.text(630.0, ly + 4.0, 11.0, "start", name);
    }
    svg.text(
        600.0,
        150.0,
        11.0,
        "start",
        &format!("direct softmax average: {direct:.4}"),
    );
    let last = steps.last().expect("scores");
    svg.text(
        600.0,
        168.0,
        11.0,
        "start",
        &format!("online, last step: {:.4}", last.o[0] / last.l),
    );
    svg.text(10.0, 350.0, 11.0, "start", "From trace_softmax::online_trace (cargo xtask trace-softmax 1 3 2 3.5 0.5 4 --values 1 2 3 4 5 6). cargo xtask figures.");
    svg.finish()
}

// ---- FlashAttention over time -----------------------------------------------------------------

fn flash_tiling() -> String {
    use kernels::attention::flash_mma::{BC, BR, KEYS, STAGES, q_in_registers};
    use kernels::attention::{HEAD_DIMS, kv_end};
    // The head dimensions at which a warp keeps Q's A fragments for the whole loop, and the others.
    let dims = |held: bool| {
        HEAD_DIMS
            .iter()
            .filter(|&&d| q_in_registers(d as usize) == held)
            .map(|d| format!("d = {d}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    // One head of n = 4 key tiles; the query tile two before its end (rows tile BR ..), causal:
    // it needs key tiles up to its diagonal only.
    let n = 4 * BC;
    let tile = (n / BR).saturating_sub(2);
    let steps = kv_end(tile * BR, BR, n, n, true).div_ceil(BC);
    let all_steps = n.div_ceil(BC);
    let mut svg = Svg::new(980.0, 486.0);
    svg.text(10.0, 20.0, 15.0, "start", &format!("FlashAttention (tensor cores), query tile {tile} of a {n}-key head, causal: where each tile lives at each step"));
    // The registers' band holds a fourth row, Q's fragments.
    let bands = [
        ("HBM", 50.0, 100.0),
        ("shared memory", 160.0, 100.0),
        ("registers", 270.0, 126.0),
    ];
    for (name, y, height) in bands {
        svg.rect(10.0, y, 960.0, height, "hsl(210, 30%, 97%)", "#ccc");
        svg.text(16.0, y + 16.0, 12.0, "start", name);
    }
    let (x0, col) = (130.0, 165.0);
    let box_ = |svg: &mut Svg, x: f64, y: f64, w: f64, text: &str, fill: &str| {
        svg.rect(x, y, w, 22.0, fill, "#555");
        svg.text(x + w / 2.0, y + 15.0, 9.0, "middle", text);
    };
    let (now, soon, idle) = ("hsl(30, 90%, 72%)", "hsl(50, 90%, 82%)", "white");
    for j in 0..all_steps {
        let x = x0 + j as f64 * col;
        let active = j < steps;
        svg.text(
            x + col / 2.0 - 8.0,
            44.0,
            11.0,
            "middle",
            &if active {
                format!("step j = {j}")
            } else {
                format!("j = {j}: skipped (masked)")
            },
        );
        // HBM: all of K and V; this step's tile is being read (it was prefetched a step ago).
        for t in 0..all_steps {
            let fill = if active && t == j {
                now
            } else if active && t == j + 1 && t < steps {
                soon
            } else {
                idle
            };
            box_(
                &mut svg,
                x + t as f64 * 36.0,
                70.0,
                34.0,
                &format!("K{t} V{t}"),
                fill,
            );
        }
        if j == 0 {
            box_(
                &mut svg,
                x,
                100.0,
                70.0,
                &format!("Q{tile} (read once)"),
                now,
            );
        }
        if !active {
            continue;
        }
        // Shared memory: Q_i for the whole loop, and STAGES stages of K, V.
        box_(
            &mut svg,
            x,
            180.0,
            60.0,
            &format!("Q{tile} [{BR} x d]"),
            "hsl(120, 40%, 85%)",
        );
        for stage in 0..STAGES {
            let held = if stage == j % STAGES { j } else { j + 1 };
            let (fill, text) = if held == j {
                (now, format!("K{held} V{held} [{BC} x d]"))
            } else if held < steps {
                (soon, format!("K{held} V{held} loading"))
            } else {
                (idle, "—".to_string())
            };
            box_(&mut svg, x, 206.0 + stage as f64 * 26.0, 140.0, &text, fill);
        }
        // Registers: the scores, probabilities and the running O, m, l of the tile's rows.
        box_(
            &mut svg,
            x,
            290.0,
            140.0,
            &format!("S = Q{tile} K{j}ᵀ, {KEYS} keys at a time"),
            now,
        );
        box_(&mut svg, x, 316.0, 140.0, "P = exp2(S - m) → bf16", now);
        box_(
            &mut svg,
            x,
            342.0,
            140.0,
            "O += P V, m, l (rescaled)",
            "hsl(120, 40%, 85%)",
        );
        // At d = 64 each warp keeps its rows of Q as mma A fragments for the whole loop; at
        // d = 128 they do not fit beside O and come from shared memory again at every step.
        box_(
            &mut svg,
            x,
            368.0,
            140.0,
            &format!("Q{tile} A fragments ({})", dims(true)),
            "hsl(120, 40%, 85%)",
        );
    }
    svg.text(10.0, 421.0, 11.0, "start", &format!("Orange: this step; yellow: the next K, V tile arriving by cp.async ({STAGES} stages); green: held for the whole loop. S and P never leave the registers;"));
    svg.text(10.0, 437.0, 11.0, "start", &format!("O goes to HBM once, after step {}; Q's A fragments stay in registers at {}, and at {} come from shared memory again each step;", steps - 1, dims(true), dims(false)));
    svg.text(10.0, 453.0, 11.0, "start", &format!("S is f32, P bf16, each for {KEYS} of the tile's {BC} keys at a time (two steps of the recurrence per K, V tile)."));
    svg.text(10.0, 469.0, 11.0, "start", &format!("Tile sizes BR = {BR}, BC = {BC}, KEYS = {KEYS} and the causal end from kernels::attention. cargo xtask figures."));
    svg.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The toolchain picture says nothing that changes when a kernel is added: no count of
    /// kernels or entries (its staleness test would fail on every new kernel), and its longest
    /// line fits its box.
    #[test]
    fn the_toolchain_picture_embeds_no_kernel_count() {
        let svg = toolchain();
        let n = host::embedded::entry_points(host::embedded::Arch::Sm90.ptx()).len();
        assert!(
            !svg.contains(&format!(">{n} ")) && !svg.contains(&format!(": {n} ")),
            "{svg}"
        );
        assert!(!svg.contains(" entries<") && !svg.contains(" kernels,"));
        let hopper = wrap(
            &[
                "attention_wgmma_*".into(),
                "flash_attention_wgmma_*".into(),
                "gemm_wgmma_*".into(),
            ],
            46,
        );
        assert_eq!(
            hopper,
            [
                "attention_wgmma_*, flash_attention_wgmma_*,",
                "gemm_wgmma_*"
            ]
        );
    }

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

    /// The ring's schedule obeys the kernel's rules: a stage is refilled only after the tile
    /// of its previous round was released, a tile is multiplied only once full and after the
    /// previous one, and once the ring is primed the consumers never wait.
    #[test]
    fn the_ring_schedule_keeps_the_kernels_rules() {
        let stages = kernels::gemm::WG_STAGES;
        let ev = ring_schedule(16, stages, 3.0);
        for (i, e) in ev.iter().enumerate() {
            assert!(e.full <= e.multiplied && e.multiplied < e.released);
            if i >= stages as usize {
                assert!(e.issued >= ev[i - stages as usize].released, "tile {i}");
            }
            if i > 0 {
                assert!(e.multiplied >= ev[i - 1].multiplied + 1.0);
            }
        }
        let steady = &ev[stages as usize..];
        assert!(
            steady
                .windows(2)
                .all(|w| w[1].multiplied == w[0].multiplied + 1.0)
        );
    }

    #[test]
    fn drawing_is_deterministic() {
        assert_eq!(all(), all());
    }

    /// The pictures' claims, computed independently: pitch 32 puts a column in one bank, 33
    /// spreads it; the swizzle and the attention padding make an ldmatrix phase conflict-free.
    #[test]
    fn the_bank_pictures_show_what_the_chapters_say() {
        assert_eq!(conflict_degree(&column_banks(32)), 32);
        assert_eq!(conflict_degree(&column_banks(33)), 1);
        let phase = |word_of: &dyn Fn(u32) -> usize| {
            let banks: Vec<usize> = (0..8)
                .flat_map(|r| (0..4).map(move |i| (r, i)))
                .map(|(r, i)| bank(word_of(r)) + i)
                .collect();
            conflict_degree(&banks)
        };
        assert_eq!(phase(&|r| (r * 64) as usize / 2), 8);
        assert_eq!(phase(&|r| swizzled(r, 0, 64) / 2), 1);
        assert_eq!(
            phase(&|r| (r as usize * (64 + kernels::attention::flash_mma::ROW_PAD)) / 2),
            1
        );
    }
}
