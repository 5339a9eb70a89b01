//! The exercises, in the order of the pyramid: each one's launch, reference, tolerance, cost
//! model, shapes and target. The statements a learner reads are in the stubs' files.

use kernels::exercises::shapes::{
    ATT_D, ATT_ROWS, BLOCK_THREADS, COLUMN_THREADS, MAP_2D_X, MAP_2D_Y, MAP_THREADS, MM_TILE,
    RB_THREADS, RB_TILE, SOFTMAX_THREADS, TILE, TILE_ROWS,
};

use super::{
    Checked, Exercise, ExerciseRuntime, F32_U, Failure, Shape, Target, Want, check_traffic,
    compare, launch_exercise, sum_tolerance,
};
use crate::Result;
use crate::reference::uniform;
use emu::{LaunchConfig, dim3};
use perf::cost::{ComputeUnit, Cost};
use perf::model::Limiter;

type Outcome = std::result::Result<Checked, Failure>;

/// Every exercise, numbered from 1.
///
/// Each target is the reference solution's predicted result on the H100, rounded down: the
/// limiter the model names for it and (a little under) the fraction of the roofline bound it
/// reaches, with the registers ptxas gives the solution (`exercise::tests` holds every solution
/// to its target). Where that limiter is latency/occupancy (3, 4, 6: each thread has one load in flight
/// and then waits at a barrier) or an SM pipe (9, 10, 12), the breakdown says what a faster kernel
/// would change; the exercise asks for the solution's design, not more.
pub fn all() -> &'static [Exercise] {
    &EXERCISES
}

static EXERCISES: [Exercise; 12] = [
    Exercise {
        number: 1,
        kernel: "e01_map",
        title: "y[i] = a x[i] + b, one thread per element, with a guard",
        why: "HBM: every byte crosses once; the best a kernel can do is coalesce",
        chapter: "docs/roofline.md, docs/coalescing.md",
        target: Target {
            device: "h100",
            limiter: Limiter::Dram,
            fraction: 0.75,
        },
        shapes: &[
            [1, 1, 1],
            [255, 1, 1],
            [256, 1, 1],
            [1000, 1, 1],
            [4097, 1, 1],
        ],
        gpu_shape: [1 << 24, 1, 1],
        describe: elements,
        check: check_map,
        launch: launch_map,
        cost: cost_map,
    },
    Exercise {
        number: 2,
        kernel: "e02_map_2d",
        title: "out[r][c] = m[r][c] + bias[c] on a 2D grid, guarded on both edges",
        why: "HBM and L2: x along the row coalesces; the bias is reused from L2",
        chapter: "docs/coalescing.md",
        target: Target {
            device: "h100",
            limiter: Limiter::Dram,
            fraction: 0.75,
        },
        shapes: &[[1, 1, 1], [3, 33, 1], [37, 100, 1], [64, 256, 1]],
        gpu_shape: [8192, 8192, 1],
        describe: matrix,
        check: check_map_2d,
        launch: launch_map_2d,
        cost: cost_map_2d,
    },
    Exercise {
        number: 3,
        kernel: "e03_block_sum",
        title: "each block's 256 elements summed in shared memory (a tree, a barrier per level)",
        why: "shared memory: what a block's threads share, behind a barrier",
        chapter: "docs/tiling.md, docs/emulator.md",
        target: Target {
            device: "h100",
            limiter: Limiter::Latency,
            fraction: 0.09,
        },
        shapes: &[
            [1, 1, 1],
            [255, 1, 1],
            [256, 1, 1],
            [257, 1, 1],
            [3000, 1, 1],
        ],
        gpu_shape: [1 << 24, 1, 1],
        describe: elements,
        check: check_block_sum,
        launch: launch_block_sum,
        cost: cost_block_sum,
    },
    Exercise {
        number: 4,
        kernel: "e04_stencil",
        title: "a 3-point stencil through a shared tile with a halo",
        why: "shared memory as a cache you manage: each input from HBM once, reused three times",
        chapter: "docs/tiling.md",
        target: Target {
            device: "h100",
            limiter: Limiter::Latency,
            fraction: 0.45,
        },
        shapes: &[
            [1, 1, 1],
            [2, 1, 1],
            [255, 1, 1],
            [256, 1, 1],
            [257, 1, 1],
            [1000, 1, 1],
        ],
        gpu_shape: [1 << 24, 1, 1],
        describe: elements,
        check: check_stencil,
        launch: launch_stencil,
        cost: cost_map,
    },
    Exercise {
        number: 5,
        kernel: "e05_dot",
        title: "a dot product: warp sums by shuffles, one shared array of 8 per block",
        why: "registers across lanes: a shuffle moves data without shared memory",
        chapter: "docs/softmax.md",
        target: Target {
            device: "h100",
            limiter: Limiter::Dram,
            fraction: 0.75,
        },
        shapes: &[
            [1, 1, 1],
            [31, 1, 1],
            [256, 1, 1],
            [1000, 1, 1],
            [4097, 1, 1],
        ],
        gpu_shape: [1 << 24, 1, 1],
        describe: elements,
        check: check_dot,
        launch: launch_dot,
        cost: cost_dot,
    },
    Exercise {
        number: 6,
        kernel: "e06_scan",
        title: "an inclusive scan of each block's 256 elements (warp shuffles, then shared)",
        why: "registers and shared memory together: a serial-looking chain in log2 steps",
        chapter: "docs/softmax.md, docs/tiling.md",
        target: Target {
            device: "h100",
            limiter: Limiter::Latency,
            fraction: 0.3,
        },
        shapes: &[[1, 1, 1], [32, 1, 1], [255, 1, 1], [256, 1, 1], [600, 1, 1]],
        gpu_shape: [1 << 24, 1, 1],
        describe: elements,
        check: check_scan,
        launch: launch_scan,
        cost: cost_map,
    },
    Exercise {
        number: 7,
        kernel: "e07_column_sum",
        title: "the sum of each column of a row-major matrix, a thread per column",
        why: "coalescing: a warp's 32 loads on one row use every byte of 4 sectors",
        chapter: "docs/coalescing.md",
        target: Target {
            device: "h100",
            limiter: Limiter::Dram,
            fraction: 0.75,
        },
        shapes: &[[1, 1, 1], [5, 33, 1], [17, 300, 1], [64, 1000, 1]],
        gpu_shape: [512, 131072, 1],
        describe: matrix,
        check: check_column_sum,
        launch: launch_column_sum,
        cost: cost_column_sum,
    },
    Exercise {
        number: 8,
        kernel: "e08_transpose",
        title: "a transpose through a padded 32 x 33 shared tile",
        why: "shared-memory banks: a column of a 32-wide tile is a 32-way conflict",
        chapter: "docs/coalescing.md, docs/tiling.md",
        target: Target {
            device: "h100",
            limiter: Limiter::Dram,
            fraction: 0.75,
        },
        shapes: &[[1, 1, 1], [31, 33, 1], [64, 64, 1], [100, 37, 1]],
        gpu_shape: [8192, 8192, 1],
        describe: matrix,
        check: check_transpose,
        launch: launch_transpose,
        cost: cost_transpose,
    },
    Exercise {
        number: 9,
        kernel: "e09_matmul_tiled",
        title: "c = a b with 16 x 16 tiles of a and b in shared memory",
        why: "shared memory for reuse: each float from HBM used 16 times",
        chapter: "docs/gemm.md, docs/tiling.md",
        target: Target {
            device: "h100",
            limiter: Limiter::SharedWavefronts,
            fraction: 0.1,
        },
        shapes: &[[1, 1, 1], [17, 33, 5], [64, 64, 64], [70, 50, 40]],
        gpu_shape: [2048, 2048, 2048],
        describe: matmul,
        check: check_matmul_tiled,
        launch: launch_matmul_tiled,
        cost: cost_matmul,
    },
    Exercise {
        number: 10,
        kernel: "e10_matmul_register",
        title: "c = a b with 64 x 64 tiles and 4 x 4 outputs per thread in registers",
        why: "registers: 8 shared reads feed 16 multiply-adds",
        chapter: "docs/gemm.md",
        target: Target {
            device: "h100",
            limiter: Limiter::SharedWavefronts,
            fraction: 0.25,
        },
        shapes: &[[1, 1, 1], [17, 33, 5], [64, 64, 64], [130, 70, 40]],
        gpu_shape: [2048, 2048, 2048],
        describe: matmul,
        check: check_matmul_register,
        launch: launch_matmul_register,
        cost: cost_matmul,
    },
    Exercise {
        number: 11,
        kernel: "e11_softmax_online",
        title: "the softmax of each row, one warp per row, online: two reads of the row",
        why: "registers: a running max and sum replace a pass over HBM",
        chapter: "docs/softmax.md",
        target: Target {
            device: "h100",
            limiter: Limiter::Dram,
            fraction: 0.75,
        },
        shapes: &[[1, 1, 1], [3, 31, 1], [9, 100, 1], [20, 1000, 1]],
        gpu_shape: [8192, 8192, 1],
        describe: matrix,
        check: check_softmax,
        launch: launch_softmax,
        cost: cost_softmax,
    },
    Exercise {
        number: 12,
        kernel: "e12_attention_tile",
        title: "attention for 64 queries per block, keys through shared memory 16 at a time",
        why: "registers and shared memory: the scores never reach HBM (FlashAttention)",
        chapter: "docs/attention.md, docs/softmax.md",
        target: Target {
            device: "h100",
            limiter: Limiter::SharedWavefronts,
            fraction: 0.15,
        },
        shapes: &[
            [1, 1, 1],
            [1, 17, 1],
            [5, 1, 1],
            [64, 16, 1],
            [70, 33, 1],
            [130, 100, 1],
        ],
        gpu_shape: [262144, 1024, 1],
        describe: attention,
        check: check_attention,
        launch: launch_attention,
        cost: cost_attention,
    },
];

fn elements(s: Shape) -> String {
    match s[0] {
        1 => "1 element".to_string(),
        n => format!("{n} elements"),
    }
}

fn matrix(s: Shape) -> String {
    format!("{} x {} f32", s[0], s[1])
}

/// `bytes` of f32: 4 per element.
fn f32_bytes(elements: usize) -> u64 {
    4 * elements as u64
}

fn memory_cost(read: usize, written: usize, flops: usize) -> Cost {
    Cost {
        bytes_read: f32_bytes(read),
        bytes_written: f32_bytes(written),
        flops: flops as u64,
        exps: 0,
        unit: ComputeUnit::CudaCoreF32,
        ..Cost::NONE
    }
}

/// A one-dimensional launch of blocks of `threads`, one thread per element.
fn linear(n: usize, threads: u32) -> LaunchConfig {
    LaunchConfig::for_elements(n as u32, threads)
}

/// The blocks of 256 elements that `n` elements make.
fn blocks_of(n: usize) -> usize {
    n.div_ceil(BLOCK_THREADS as usize)
}

// --- 1: map -------------------------------------------------------------------------------

const MAP_A: f32 = 1.5;
const MAP_B: f32 = -0.25;

fn map(ert: &ExerciseRuntime, x: &[f32]) -> Result<(Vec<f32>, crate::runtime::Launched)> {
    let rt = ert.runtime();
    let dx = rt.upload(x)?;
    let dy = rt.alloc::<f32>(x.len())?;
    let (xp, yp, a, b, n) = (dx.ptr(), dy.ptr(), MAP_A, MAP_B, x.len() as u32);
    let launched = launch_exercise!(ert, linear(x.len(), MAP_THREADS), e01_map(xp, yp, a, b, n))?;
    Ok((ert.download_output(&dy)?, launched))
}

fn check_map(ert: &ExerciseRuntime, s: Shape, seed: u64) -> Outcome {
    let x = uniform(s[0], seed, -1e3, 1e3);
    let (got, launched) = map(ert, &x)?;
    // Two roundings: the product's and the sum's.
    let want: Vec<Want> = x
        .iter()
        .map(|&v| {
            let (ax, b) = (f64::from(MAP_A) * f64::from(v), f64::from(MAP_B));
            Want {
                value: ax + b,
                tolerance: 2.0 * F32_U * (ax.abs() + b.abs()),
            }
        })
        .collect();
    let summary = compare(&got, &want, |i| format!("y[{i}]"))?;
    let traffic = check_traffic(&launched, f32_bytes(s[0]), f32_bytes(s[0]))?;
    Ok(Checked {
        summary: summary + traffic,
    })
}

fn launch_map(ert: &ExerciseRuntime, s: Shape) -> Result<Cost> {
    map(ert, &vec![1.0; s[0]])?;
    Ok(cost_map(s))
}

fn cost_map(s: Shape) -> Cost {
    memory_cost(s[0], s[0], 2 * s[0])
}

// --- 2: map in 2D -------------------------------------------------------------------------

fn map_2d(
    ert: &ExerciseRuntime,
    m: &[f32],
    bias: &[f32],
    (rows, cols): (usize, usize),
) -> Result<(Vec<f32>, crate::runtime::Launched)> {
    let rt = ert.runtime();
    let (dm, db) = (rt.upload(m)?, rt.upload(bias)?);
    let dout = rt.alloc::<f32>(rows * cols)?;
    let cfg = LaunchConfig {
        grid: dim3(
            (cols as u32).div_ceil(MAP_2D_X),
            (rows as u32).div_ceil(MAP_2D_Y),
            1,
        ),
        block: dim3(MAP_2D_X, MAP_2D_Y, 1),
        dynamic_shared: 0,
    };
    let (mp, bp, op, r, c) = (dm.ptr(), db.ptr(), dout.ptr(), rows as u32, cols as u32);
    let launched = launch_exercise!(ert, cfg, e02_map_2d(mp, bp, op, r, c))?;
    Ok((ert.download_output(&dout)?, launched))
}

fn check_map_2d(ert: &ExerciseRuntime, s: Shape, seed: u64) -> Outcome {
    let (rows, cols) = (s[0], s[1]);
    let m = uniform(rows * cols, seed, -1e3, 1e3);
    let bias = uniform(cols, seed ^ 1, -1e3, 1e3);
    let (got, launched) = map_2d(ert, &m, &bias, (rows, cols))?;
    let want: Vec<Want> = (0..rows * cols)
        .map(|e| {
            let v = f64::from(m[e]) + f64::from(bias[e % cols]);
            Want {
                value: v,
                tolerance: F32_U * v.abs(),
            }
        })
        .collect();
    let summary = compare(&got, &want, |e| format!("out[{}][{}]", e / cols, e % cols))?;
    // Each element's load, and the bias once per element (it stays in L1 and L2).
    let traffic = check_traffic(
        &launched,
        f32_bytes(2 * rows * cols),
        f32_bytes(rows * cols),
    )?;
    Ok(Checked {
        summary: summary + traffic,
    })
}

fn launch_map_2d(ert: &ExerciseRuntime, s: Shape) -> Result<Cost> {
    let (rows, cols) = (s[0], s[1]);
    map_2d(ert, &vec![1.0; rows * cols], &vec![1.0; cols], (rows, cols))?;
    Ok(cost_map_2d(s))
}

fn cost_map_2d(s: Shape) -> Cost {
    let (rows, cols) = (s[0], s[1]);
    memory_cost(rows * cols + cols, rows * cols, rows * cols)
}

// --- 3, 5: per-block sums -----------------------------------------------------------------

/// Per block of 256: the exact sum of `term(i)` (in f64) and the tolerance of an f32 sum of
/// those terms in any order, each term itself rounded `term_roundings` times.
fn block_sums(n: usize, term: impl Fn(usize) -> f64, term_roundings: usize) -> Vec<Want> {
    let b = BLOCK_THREADS as usize;
    (0..blocks_of(n))
        .map(|k| {
            let range = k * b..((k + 1) * b).min(n);
            let value: f64 = range.clone().map(&term).sum();
            let magnitude: f64 = range.map(|i| term(i).abs()).sum();
            Want {
                value,
                tolerance: sum_tolerance(b + term_roundings, magnitude),
            }
        })
        .collect()
}

fn block_sum(ert: &ExerciseRuntime, x: &[f32]) -> Result<(Vec<f32>, crate::runtime::Launched)> {
    let rt = ert.runtime();
    let dx = rt.upload(x)?;
    let dp = rt.alloc::<f32>(blocks_of(x.len()))?;
    let (xp, pp, n) = (dx.ptr(), dp.ptr(), x.len() as u32);
    let launched = launch_exercise!(
        ert,
        linear(x.len(), BLOCK_THREADS),
        e03_block_sum(xp, pp, n)
    )?;
    Ok((ert.download_output(&dp)?, launched))
}

fn check_block_sum(ert: &ExerciseRuntime, s: Shape, seed: u64) -> Outcome {
    let x = uniform(s[0], seed, -1.0, 1.0);
    let (got, launched) = block_sum(ert, &x)?;
    let want = block_sums(s[0], |i| f64::from(x[i]), 0);
    let summary = compare(&got, &want, |b| format!("partial[{b}] (block {b})"))?;
    let traffic = check_traffic(&launched, f32_bytes(s[0]), f32_bytes(blocks_of(s[0])))?;
    Ok(Checked {
        summary: summary + traffic,
    })
}

fn launch_block_sum(ert: &ExerciseRuntime, s: Shape) -> Result<Cost> {
    block_sum(ert, &vec![1.0; s[0]])?;
    Ok(cost_block_sum(s))
}

fn cost_block_sum(s: Shape) -> Cost {
    memory_cost(s[0], blocks_of(s[0]), s[0])
}

fn dot(
    ert: &ExerciseRuntime,
    x: &[f32],
    y: &[f32],
) -> Result<(Vec<f32>, crate::runtime::Launched)> {
    let rt = ert.runtime();
    let (dx, dy) = (rt.upload(x)?, rt.upload(y)?);
    let dp = rt.alloc::<f32>(blocks_of(x.len()))?;
    let (xp, yp, pp, n) = (dx.ptr(), dy.ptr(), dp.ptr(), x.len() as u32);
    let launched = launch_exercise!(ert, linear(x.len(), BLOCK_THREADS), e05_dot(xp, yp, pp, n))?;
    Ok((ert.download_output(&dp)?, launched))
}

fn check_dot(ert: &ExerciseRuntime, s: Shape, seed: u64) -> Outcome {
    let (x, y) = (
        uniform(s[0], seed, -1.0, 1.0),
        uniform(s[0], seed ^ 1, -1.0, 1.0),
    );
    let (got, launched) = dot(ert, &x, &y)?;
    let want = block_sums(s[0], |i| f64::from(x[i]) * f64::from(y[i]), 1);
    let summary = compare(&got, &want, |b| format!("partial[{b}] (block {b})"))?;
    let traffic = check_traffic(&launched, f32_bytes(2 * s[0]), f32_bytes(blocks_of(s[0])))?;
    Ok(Checked {
        summary: summary + traffic,
    })
}

fn launch_dot(ert: &ExerciseRuntime, s: Shape) -> Result<Cost> {
    let ones = vec![1.0; s[0]];
    dot(ert, &ones, &ones)?;
    Ok(cost_dot(s))
}

fn cost_dot(s: Shape) -> Cost {
    memory_cost(2 * s[0], blocks_of(s[0]), 2 * s[0])
}

// --- 4: stencil ---------------------------------------------------------------------------

fn stencil(ert: &ExerciseRuntime, x: &[f32]) -> Result<(Vec<f32>, crate::runtime::Launched)> {
    let rt = ert.runtime();
    let dx = rt.upload(x)?;
    let dout = rt.alloc::<f32>(x.len())?;
    let (xp, op, n) = (dx.ptr(), dout.ptr(), x.len() as u32);
    let launched = launch_exercise!(ert, linear(x.len(), MAP_THREADS), e04_stencil(xp, op, n))?;
    Ok((ert.download_output(&dout)?, launched))
}

fn check_stencil(ert: &ExerciseRuntime, s: Shape, seed: u64) -> Outcome {
    let n = s[0];
    let x = uniform(n, seed, -1e3, 1e3);
    let (got, launched) = stencil(ert, &x)?;
    let at = |i: i64| {
        if (0..n as i64).contains(&i) {
            f64::from(x[i as usize])
        } else {
            0.0
        }
    };
    let want: Vec<Want> = (0..n as i64)
        .map(|i| {
            let terms = [at(i - 1), at(i), at(i + 1)];
            let magnitude: f64 = terms.iter().map(|t| t.abs()).sum();
            // Two additions and the product by the rounded 1/3: four roundings at most.
            Want {
                value: terms.iter().sum::<f64>() / 3.0,
                tolerance: 4.0 * F32_U * magnitude,
            }
        })
        .collect();
    let summary = compare(&got, &want, |i| format!("out[{i}]"))?;
    // Each element once, plus a halo of 2 per block.
    let halo = 2 * n.div_ceil(MAP_THREADS as usize);
    let traffic = check_traffic(&launched, f32_bytes(n + halo), f32_bytes(n))?;
    Ok(Checked {
        summary: summary + traffic,
    })
}

fn launch_stencil(ert: &ExerciseRuntime, s: Shape) -> Result<Cost> {
    stencil(ert, &vec![1.0; s[0]])?;
    Ok(cost_map(s))
}

// --- 6: scan ------------------------------------------------------------------------------

fn scan(ert: &ExerciseRuntime, x: &[f32]) -> Result<(Vec<f32>, crate::runtime::Launched)> {
    let rt = ert.runtime();
    let dx = rt.upload(x)?;
    let dout = rt.alloc::<f32>(x.len())?;
    let (xp, op, n) = (dx.ptr(), dout.ptr(), x.len() as u32);
    let launched = launch_exercise!(ert, linear(x.len(), BLOCK_THREADS), e06_scan(xp, op, n))?;
    Ok((ert.download_output(&dout)?, launched))
}

fn check_scan(ert: &ExerciseRuntime, s: Shape, seed: u64) -> Outcome {
    let n = s[0];
    let x = uniform(n, seed, -1.0, 1.0);
    let (got, launched) = scan(ert, &x)?;
    let b = BLOCK_THREADS as usize;
    let mut want = Vec::with_capacity(n);
    let (mut value, mut magnitude) = (0.0f64, 0.0f64);
    for (i, &v) in x.iter().enumerate() {
        if i % b == 0 {
            (value, magnitude) = (0.0, 0.0);
        }
        value += f64::from(v);
        magnitude += f64::from(v).abs();
        want.push(Want {
            value,
            tolerance: sum_tolerance(i % b + 1, magnitude),
        });
    }
    let summary = compare(&got, &want, |i| {
        format!("out[{i}] (block {}, element {})", i / b, i % b)
    })?;
    let traffic = check_traffic(&launched, f32_bytes(n), f32_bytes(n))?;
    Ok(Checked {
        summary: summary + traffic,
    })
}

fn launch_scan(ert: &ExerciseRuntime, s: Shape) -> Result<Cost> {
    scan(ert, &vec![1.0; s[0]])?;
    Ok(cost_map(s))
}

// --- 7: column sums -----------------------------------------------------------------------

fn column_sum(
    ert: &ExerciseRuntime,
    m: &[f32],
    (rows, cols): (usize, usize),
) -> Result<(Vec<f32>, crate::runtime::Launched)> {
    let rt = ert.runtime();
    let dm = rt.upload(m)?;
    let dout = rt.alloc::<f32>(cols)?;
    let (mp, op, r, c) = (dm.ptr(), dout.ptr(), rows as u32, cols as u32);
    let launched = launch_exercise!(
        ert,
        linear(cols, COLUMN_THREADS),
        e07_column_sum(mp, op, r, c)
    )?;
    Ok((ert.download_output(&dout)?, launched))
}

fn check_column_sum(ert: &ExerciseRuntime, s: Shape, seed: u64) -> Outcome {
    let (rows, cols) = (s[0], s[1]);
    let m = uniform(rows * cols, seed, -1.0, 1.0);
    let (got, launched) = column_sum(ert, &m, (rows, cols))?;
    let want: Vec<Want> = (0..cols)
        .map(|c| {
            let column = (0..rows).map(|r| f64::from(m[r * cols + c]));
            let magnitude: f64 = column.clone().map(f64::abs).sum();
            Want {
                value: column.sum(),
                tolerance: sum_tolerance(rows, magnitude),
            }
        })
        .collect();
    let summary = compare(&got, &want, |c| format!("out[{c}]"))?;
    let traffic = check_traffic(&launched, f32_bytes(rows * cols), f32_bytes(cols))?;
    Ok(Checked {
        summary: summary + traffic,
    })
}

fn launch_column_sum(ert: &ExerciseRuntime, s: Shape) -> Result<Cost> {
    column_sum(ert, &vec![1.0; s[0] * s[1]], (s[0], s[1]))?;
    Ok(cost_column_sum(s))
}

fn cost_column_sum(s: Shape) -> Cost {
    memory_cost(s[0] * s[1], s[1], s[0] * s[1])
}

// --- 8: transpose -------------------------------------------------------------------------

fn transpose(
    ert: &ExerciseRuntime,
    input: &[f32],
    (rows, cols): (usize, usize),
) -> Result<(Vec<f32>, crate::runtime::Launched)> {
    let rt = ert.runtime();
    let din = rt.upload(input)?;
    let dout = rt.alloc::<f32>(rows * cols)?;
    let tile = TILE as u32;
    let cfg = LaunchConfig {
        grid: dim3(
            (cols as u32).div_ceil(tile),
            (rows as u32).div_ceil(tile),
            1,
        ),
        block: dim3(tile, TILE_ROWS, 1),
        dynamic_shared: 0,
    };
    let (ip, op, r, c) = (din.ptr(), dout.ptr(), rows as u32, cols as u32);
    let launched = launch_exercise!(ert, cfg, e08_transpose(ip, op, r, c))?;
    Ok((ert.download_output(&dout)?, launched))
}

fn check_transpose(ert: &ExerciseRuntime, s: Shape, seed: u64) -> Outcome {
    let (rows, cols) = (s[0], s[1]);
    let input = uniform(rows * cols, seed, -1e3, 1e3);
    let (got, launched) = transpose(ert, &input, (rows, cols))?;
    // A copy: exact.
    let want: Vec<Want> = crate::reference::transpose(&input, rows, cols)
        .into_iter()
        .map(|v| Want {
            value: f64::from(v),
            tolerance: 0.0,
        })
        .collect();
    let summary = compare(&got, &want, |e| format!("out[{}][{}]", e / rows, e % rows))?;
    let traffic = check_traffic(&launched, f32_bytes(rows * cols), f32_bytes(rows * cols))?;
    Ok(Checked {
        summary: summary + traffic,
    })
}

fn launch_transpose(ert: &ExerciseRuntime, s: Shape) -> Result<Cost> {
    transpose(ert, &vec![1.0; s[0] * s[1]], (s[0], s[1]))?;
    Ok(cost_transpose(s))
}

fn cost_transpose(s: Shape) -> Cost {
    memory_cost(s[0] * s[1], s[0] * s[1], 0)
}

// --- 9, 10: matmul ------------------------------------------------------------------------

fn matmul_shape(s: Shape) -> (usize, usize, usize) {
    (s[0], s[1], s[2])
}

fn matmul(s: Shape) -> String {
    let (m, n, k) = matmul_shape(s);
    format!("{m} x {n} x {k} (m x n x k)")
}

/// Launches exercise 9 (`register = false`) or 10 on `a` (`m x k`) and `b` (`k x n`).
fn run_matmul(
    ert: &ExerciseRuntime,
    register: bool,
    a: &[f32],
    b: &[f32],
    s: Shape,
) -> Result<(Vec<f32>, crate::runtime::Launched)> {
    let (m, n, k) = matmul_shape(s);
    let rt = ert.runtime();
    let (da, db) = (rt.upload(a)?, rt.upload(b)?);
    let dc = rt.alloc::<f32>(m * n)?;
    let (ap, bp, cp, m32, n32, k32) = (da.ptr(), db.ptr(), dc.ptr(), m as u32, n as u32, k as u32);
    let launched = if register {
        let tile = RB_TILE as u32;
        let cfg = LaunchConfig {
            grid: dim3(n32.div_ceil(tile), m32.div_ceil(tile), 1),
            block: dim3(RB_THREADS, 1, 1),
            dynamic_shared: 0,
        };
        launch_exercise!(ert, cfg, e10_matmul_register(ap, bp, cp, m32, n32, k32))?
    } else {
        let tile = MM_TILE as u32;
        let cfg = LaunchConfig {
            grid: dim3(n32.div_ceil(tile), m32.div_ceil(tile), 1),
            block: dim3(tile, tile, 1),
            dynamic_shared: 0,
        };
        launch_exercise!(ert, cfg, e09_matmul_tiled(ap, bp, cp, m32, n32, k32))?
    };
    Ok((ert.download_output(&dc)?, launched))
}

/// Both matmuls against `reference::gemm` (f64 sums with the sum of the products' magnitudes):
/// a dot product of length `k` in f32 is within `gamma_k` of the magnitude. The loads may ask
/// for each element of `a` once per `tile`-wide column of tiles of `c` and each of `b` once per
/// row of tiles.
fn check_matmul(ert: &ExerciseRuntime, register: bool, s: Shape, seed: u64) -> Outcome {
    let (m, n, k) = matmul_shape(s);
    let (a, b) = (
        uniform(m * k, seed, -1.0, 1.0),
        uniform(k * n, seed ^ 1, -1.0, 1.0),
    );
    let (got, launched) = run_matmul(ert, register, &a, &b, s)?;
    let want: Vec<Want> = crate::reference::gemm(&a, &b, None, (m, n, k))
        .into_iter()
        .map(|e| Want {
            value: e.value,
            tolerance: sum_tolerance(k + 1, e.magnitude),
        })
        .collect();
    let summary = compare(&got, &want, |e| format!("c[{}][{}]", e / n, e % n))?;
    let tile = if register { RB_TILE } else { MM_TILE };
    let reads = f32_bytes(m * k * n.div_ceil(tile) + k * n * m.div_ceil(tile));
    let traffic = check_traffic(&launched, reads, f32_bytes(m * n))?;
    Ok(Checked {
        summary: summary + traffic,
    })
}

fn check_matmul_tiled(ert: &ExerciseRuntime, s: Shape, seed: u64) -> Outcome {
    check_matmul(ert, false, s, seed)
}

fn check_matmul_register(ert: &ExerciseRuntime, s: Shape, seed: u64) -> Outcome {
    check_matmul(ert, true, s, seed)
}

fn launch_matmul_tiled(ert: &ExerciseRuntime, s: Shape) -> Result<Cost> {
    let (m, n, k) = matmul_shape(s);
    run_matmul(ert, false, &vec![1.0; m * k], &vec![1.0; k * n], s)?;
    Ok(cost_matmul(s))
}

fn launch_matmul_register(ert: &ExerciseRuntime, s: Shape) -> Result<Cost> {
    let (m, n, k) = matmul_shape(s);
    run_matmul(ert, true, &vec![1.0; m * k], &vec![1.0; k * n], s)?;
    Ok(cost_matmul(s))
}

/// Each matrix crosses HBM once; `2 m n k` FLOPs.
fn cost_matmul(s: Shape) -> Cost {
    let (m, n, k) = matmul_shape(s);
    memory_cost(m * k + k * n, m * n, 2 * m * n * k)
}

// --- 11: online softmax -------------------------------------------------------------------

/// `|got - want| <= SOFTMAX_RTOL |want| + f32::MIN_POSITIVE`, as `tests/tests/softmax.rs`
/// derives it for the project's own online softmax (values in [-10, 10]): rounding `x - m` and
/// its scaling by `log2 e` change `exp` by up to `|x - m| 2^-24` relative (1.1e-5 together),
/// `ex2.approx` adds ~2 ulp, the sum `l` the same relative error plus its own roundings; 3e-5
/// keeps a margin without hiding a wrong max, a wrong sum or a lost column, which are wrong by a
/// factor. `ex2.approx.ftz` flushes results below 2^-126 to zero.
const SOFTMAX_RTOL: f64 = 3e-5;

fn softmax(
    ert: &ExerciseRuntime,
    x: &[f32],
    (rows, cols): (usize, usize),
) -> Result<(Vec<f32>, crate::runtime::Launched)> {
    let rt = ert.runtime();
    let dx = rt.upload(x)?;
    let dout = rt.alloc::<f32>(rows * cols)?;
    let rows_per_block = (SOFTMAX_THREADS / 32) as usize;
    let cfg = LaunchConfig::linear(rows.div_ceil(rows_per_block) as u32, SOFTMAX_THREADS);
    let (xp, op, r, c) = (dx.ptr(), dout.ptr(), rows as u32, cols as u32);
    let launched = launch_exercise!(ert, cfg, e11_softmax_online(xp, op, r, c))?;
    Ok((ert.download_output(&dout)?, launched))
}

fn check_softmax(ert: &ExerciseRuntime, s: Shape, seed: u64) -> Outcome {
    let (rows, cols) = (s[0], s[1]);
    let x = uniform(rows * cols, seed, -10.0, 10.0);
    let (got, launched) = softmax(ert, &x, (rows, cols))?;
    let want: Vec<Want> = x
        .chunks(cols)
        .flat_map(|row| {
            let row: Vec<f64> = row.iter().map(|&v| f64::from(v)).collect();
            crate::reference::softmax_row(&row)
        })
        .map(|v| Want {
            value: v,
            tolerance: SOFTMAX_RTOL * v.abs() + f64::from(f32::MIN_POSITIVE),
        })
        .collect();
    let summary = compare(&got, &want, |e| format!("out[{}][{}]", e / cols, e % cols))?;
    // Two reads of each row (the running statistics, then the normalisation), one write.
    let traffic = check_traffic(
        &launched,
        f32_bytes(2 * rows * cols),
        f32_bytes(rows * cols),
    )?;
    Ok(Checked {
        summary: summary + traffic,
    })
}

fn launch_softmax(ert: &ExerciseRuntime, s: Shape) -> Result<Cost> {
    softmax(ert, &vec![1.0; s[0] * s[1]], (s[0], s[1]))?;
    Ok(cost_softmax(s))
}

/// Each element crosses HBM once each way (the second read of a row, 32 KiB at the GPU shape,
/// can come from L2; the model's DRAM estimate says whether it does), one exponential per
/// element.
fn cost_softmax(s: Shape) -> Cost {
    let n = s[0] * s[1];
    Cost {
        exps: n as u64,
        ..memory_cost(n, n, 4 * n)
    }
}

// --- 12: one attention tile ---------------------------------------------------------------

fn attention_shape(s: Shape) -> crate::ops::attention::AttentionShape {
    crate::ops::attention::AttentionShape::new(1, 1, s[0], ATT_D).with_n_kv(s[1])
}

fn attention(s: Shape) -> String {
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!(
        "{} x {}, d = {ATT_D}",
        plural(s[0], "query", "queries"),
        plural(s[1], "key", "keys")
    )
}

/// The scale of the scores, `1 / sqrt(d)`.
fn attention_scale() -> f32 {
    1.0 / (ATT_D as f32).sqrt()
}

/// Launches exercise 12 on `q` (`n_q x d`), `k` and `v` (`n_k x d`).
fn run_attention(
    ert: &ExerciseRuntime,
    [q, k, v]: [&[f32]; 3],
    s: Shape,
) -> Result<(Vec<f32>, crate::runtime::Launched)> {
    let (n_q, n_k) = (s[0], s[1]);
    let rt = ert.runtime();
    let (dq, dk, dv) = (rt.upload(q)?, rt.upload(k)?, rt.upload(v)?);
    let dout = rt.alloc::<f32>(n_q * ATT_D)?;
    let cfg = LaunchConfig::linear((n_q as u32).div_ceil(ATT_ROWS), ATT_ROWS);
    let (qp, kp, vp, op) = (dq.ptr(), dk.ptr(), dv.ptr(), dout.ptr());
    let (nq, nk, scale) = (n_q as u32, n_k as u32, attention_scale());
    let launched = launch_exercise!(ert, cfg, e12_attention_tile(qp, kp, vp, op, nq, nk, scale))?;
    Ok((ert.download_output(&dout)?, launched))
}

/// Against `reference::attention` (f64, from the definition), within
/// `reference::AttentionRowBound`, the bound that `tests/tests/attention.rs` derives for the
/// project's f32 fused kernel, the same algorithm: under `1e-4 max|v|` at these shapes. A lost
/// key or a wrong max moves outputs by a fraction of `max|v|`; the subtlest mistake, a missing
/// rescale of the accumulator, by about ten times the bound (tried: at 70 queries x 33 keys,
/// 1085 of the 2240 outputs fall outside it). Q and K in [-2, 2]: scores of standard deviation
/// about 1.3, so that a row's weights spread over several units of the exponent and the running
/// max and its rescale matter.
fn check_attention(ert: &ExerciseRuntime, s: Shape, seed: u64) -> Outcome {
    let (n_q, n_k, d) = (s[0], s[1], ATT_D);
    let q = uniform(n_q * d, seed, -2.0, 2.0);
    let k = uniform(n_k * d, seed ^ 1, -2.0, 2.0);
    let v = uniform(n_k * d, seed ^ 2, -1.0, 1.0);
    let (got, launched) = run_attention(ert, [&q, &k, &v], s)?;
    let scale = attention_scale();
    let reference = crate::reference::attention(&q, &k, &v, &attention_shape(s), scale, false);
    let v_max = v.iter().fold(0.0f64, |m, x| m.max(f64::from(x.abs())));
    let want: Vec<Want> = q
        .chunks(d)
        .zip(reference.o.chunks(d))
        .flat_map(|(q_i, o_i)| {
            let tolerance = crate::reference::AttentionRowBound::new(q_i, &k, scale).o(v_max, 0.0);
            o_i.iter().map(move |&value| Want { value, tolerance })
        })
        .collect();
    let summary = compare(&got, &want, |e| format!("o[{}][{}]", e / d, e % d))?;
    // q once; k and v once per block of 64 queries; o once.
    let blocks = n_q.div_ceil(ATT_ROWS as usize);
    let reads = f32_bytes(n_q * d + 2 * n_k * d * blocks);
    let traffic = check_traffic(&launched, reads, f32_bytes(n_q * d))?;
    Ok(Checked {
        summary: summary + traffic,
    })
}

fn launch_attention(ert: &ExerciseRuntime, s: Shape) -> Result<Cost> {
    let (q, kv) = (vec![1.0; s[0] * ATT_D], vec![1.0; s[1] * ATT_D]);
    run_attention(ert, [&q, &kv, &kv], s)?;
    Ok(cost_attention(s))
}

/// Q, K, V and O cross HBM once (the re-reads of K and V by each block can come from L2: 256 KiB
/// at the GPU shape); `4 d` FLOPs and one exponential per (query, key) pair.
fn cost_attention(s: Shape) -> Cost {
    let (n_q, n_k) = (s[0], s[1]);
    Cost {
        exps: (n_q * n_k) as u64,
        ..memory_cost((n_q + 2 * n_k) * ATT_D, n_q * ATT_D, 4 * n_q * n_k * ATT_D)
    }
}
