//! Who holds what: a launch's grid, blocks, warps and SMs; the lanes and registers of an
//! `mma.m16n8k16` fragment; the rows `ldmatrix.x4` reads and where they land.

use emu::fragments;
use kernels::gemm::ldmatrix_x4_lane;
use perf::specs::GpuSpec;

use super::{Svg, arrow};

/// A light colour per lane: the lane's group of four (`g = lane / 4`, the fragment row) picks
/// the hue, its place in the group (`t`) the lightness.
fn lane_colour(lane: usize) -> String {
    let (g, t) = (lane / 4, lane % 4);
    format!("hsl({}, 70%, {}%)", g * 45, 88 - 8 * t)
}

// ---- A launch: grid, blocks, warps, SMs ------------------------------------------------------

/// A thread's rank in a block `width` threads wide, x fastest: what
/// `kernels::cuda::thread::linear_thread_idx` computes on the device for a 2-D block.
fn linear_thread_idx(x: u32, y: u32, width: u32) -> u32 {
    y * width + x
}

/// The launch picture's shape: a grid of `grid` blocks of `block` threads, `picked` the block
/// drawn thread by thread.
struct Launch {
    grid: (u32, u32),
    block: (u32, u32),
    picked: (u32, u32),
}

/// Where the launch picture's three panels sit: the grid's origin and block size, the block's
/// origin and cell, the SMs' origin and box.
const GRID_AT: (f64, f64, f64, f64) = (10.0, 70.0, 48.0, 34.0);
const BLOCK_AT: (f64, f64, f64) = (300.0, 70.0, 13.0);
const SMS_AT: (f64, f64, f64, f64) = (640.0, 70.0, 240.0, 74.0);

pub(super) fn launch() -> String {
    let shape = Launch {
        grid: (4, 3),
        block: (16, 16),
        picked: (1, 0),
    };
    let ((grid_x, grid_y), (block_x, block_y)) = (shape.grid, shape.block);
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
    let ((gx0, gy0, bw, bh), (tx0, ty0, cell), (sx0, sy0, _, _)) = (GRID_AT, BLOCK_AT, SMS_AT);
    grid_panel(&mut svg, &shape);
    block_panel(&mut svg, &shape);
    arrow(
        &mut svg,
        (gx0 + f64::from(grid_x) * bw + 4.0, gy0 + bh / 2.0),
        (tx0 - 6.0, ty0 + 20.0),
    );
    sms_panel(&mut svg, &shape, h100.sms);
    arrow(
        &mut svg,
        (tx0 + f64::from(block_x) * cell + 90.0, ty0 + 30.0),
        (sx0 - 4.0, sy0 + 38.0),
    );
    svg.text(10.0, 360.0, 11.0, "start", "A scheduler issues one instruction for a whole warp, picking among its SM's resident warps. cargo xtask figures.");
    svg.finish()
}

/// The grid: its blocks by index, the picked one highlighted.
fn grid_panel(svg: &mut Svg, shape: &Launch) {
    let ((grid_x, grid_y), picked) = (shape.grid, shape.picked);
    let (gx0, gy0, bw, bh) = GRID_AT;
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
}

/// One block, its threads coloured by warp, each warp's rows named.
fn block_panel(svg: &mut Svg, shape: &Launch) {
    let ((block_x, block_y), picked) = (shape.block, shape.picked);
    let (tx0, ty0, cell) = BLOCK_AT;
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
}

/// The SMs (`sms` of them on an H100), three drawn, the blocks dealt to them round-robin.
fn sms_panel(svg: &mut Svg, shape: &Launch, sms: u32) {
    let ((grid_x, grid_y), picked) = (shape.grid, shape.picked);
    let (sx0, sy0, sw, sh) = SMS_AT;
    svg.text(
        sx0,
        sy0 - 24.0,
        12.0,
        "start",
        &format!("SMs ({sms} on an H100)"),
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

pub(super) fn mma_fragments() -> String {
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

pub(super) fn ldmatrix_x4() -> String {
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
