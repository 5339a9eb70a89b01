//! The validation suite: published measurements of GPU kernels, each with the kernel that follows
//! the published algorithm (a CUDA C++ file under tests/validation/ at the published launch, or a
//! registered project kernel at the published shape), and the arithmetic that scores the model's
//! predictions against them ([`score`]). `cargo xtask validate` predicts every row and prints the
//! table docs/model.md pastes ("Validation against published measurements").
//!
//! A published figure is never used to set a constant of the model (that would make the
//! comparison circular); the rows are only read. A figure someone else quoted from the source is
//! marked second-hand.

use serde::Serialize;

use crate::model::Advice;

/// The unit a source publishes its figure in; a prediction is converted to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Unit {
    /// Floating-point operations per second, in 10^9 (GFLOP/s).
    Gflops,
    /// In 10^12 (TFLOP/s).
    Tflops,
    /// Bytes per second, in 10^9 (GB/s).
    GBps,
}

impl Unit {
    /// What one of the unit is, in operations or bytes per second.
    pub fn scale(self) -> f64 {
        match self {
            Unit::Gflops | Unit::GBps => 1e9,
            Unit::Tflops => 1e12,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Unit::Gflops => "GFLOP/s",
            Unit::Tflops => "TFLOP/s",
            Unit::GBps => "GB/s",
        }
    }

    /// The rate `work` operations (or bytes) in `seconds` make, in this unit.
    pub fn rate(self, work: f64, seconds: f64) -> f64 {
        work / seconds / self.scale()
    }
}

/// Where a figure was published.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Source {
    pub title: &'static str,
    pub address: &'static str,
    /// Which table or figure of it, or which sentence.
    pub place: &'static str,
    /// Quoted from the source by someone else (named here), not read in the source itself.
    pub second_hand: Option<&'static str>,
}

/// What the suite runs for a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Kernel {
    /// An `extern "C"` entry of a CUDA C++ file of the repository (compiled by NVRTC), launched
    /// at `grid` x `block` with `args` (in `cargo xtask check`'s `--arg` syntax).
    Cuda {
        file: &'static str,
        entry: &'static str,
        grid: [u32; 3],
        block: [u32; 3],
        args: &'static [&'static str],
    },
    /// A registered project kernel (`cargo xtask predict KERNEL --shape SHAPE`).
    Registered {
        kernel: &'static str,
        shape: &'static str,
    },
}

impl Kernel {
    /// The kernel's name as the table prints it.
    pub fn name(&self) -> &'static str {
        match self {
            Kernel::Cuda { entry, .. } => entry,
            Kernel::Registered { kernel, .. } => kernel,
        }
    }
}

/// One published measurement and the kernel that follows its algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The step as the source names it.
    pub label: &'static str,
    pub kernel: Kernel,
    /// The device it was measured on (a [`crate::specs::GpuSpec::key`]).
    pub device: &'static str,
    /// The figure, in `unit`.
    pub published: f64,
    pub unit: Unit,
    /// The operations (or bytes) the source divides by the time to get its rate: what the
    /// prediction's time is turned into the same unit with.
    pub work: f64,
    /// The size the figure was measured at, as the source states it.
    pub shape: &'static str,
    pub source: Source,
    /// The progression (a worklog's ordered steps) the row is a step of, and its place in it
    /// (from 1).
    pub progression: Option<(&'static str, u32)>,
    /// What this step changed from the step before, as the model's advice names changes
    /// (`perf::model::next_step`); `None` where no advice names it (a retune, a new tiling).
    pub change: Option<Advice>,
}

const BOEHM: Source = Source {
    title: "How to Optimize a CUDA Matmul Kernel for cuBLAS-like Performance: a Worklog (S. Boehm); repository siboehm/SGEMM_CUDA",
    address: "https://github.com/siboehm/SGEMM_CUDA",
    place: "README, table \"GFLOPs at matrix size 4092x4092\" (RTX A6000)",
    second_hand: None,
};

const FARADAY: Source = Source {
    title: "Matrix Transpose: The Canonical CUDA Optimization Problem (CUDA Kernel Engineering, part 18)",
    address: "https://fridayswithfaraday.com/posts/cuda-kernel-eng-matrix-transpose-optimization",
    place: "introduction and the copy kernel's comment (A100-80GB SXM)",
    second_hand: None,
};

const YENCAL: Source = Source {
    title: "Optimizing GPU Matrix Transpose: From 14% to 88% of Peak Bandwidth (yencal, 2025-12-24)",
    address: "https://yencal.github.io/gpu-matrix-transpose-optimization",
    place: "section \"Results and Discussion\", the table of 20 kernels (H100, theoretical peak 3352.3 GB/s: the SXM)",
    second_hand: None,
};

const YENCAL_MEMCPY: Source = Source {
    title: "How Data Type Width Affects GPU Memory Throughput (yencal, 2025-11-29; the H100 transposes' author)",
    address: "https://yencal.github.io/gpu-memory-throughput-optimization",
    place: "\"HBM-dominated plateau region\" (H100 SXM, block size 1024): a range of GB/s per width, whose middle is the row's figure; the repository's benchmark_results.csv (block size 256, GPU not named) reads 435 to 1363 GB/s at 2^27 bytes, and is not used",
    second_hand: None,
};

const GPU_BENCHES: Source = Source {
    title: "GPU benchmarks, gpu-stream (te42kyfo/gpu-benches)",
    address: "https://github.com/te42kyfo/gpu-benches",
    place: "gpu-stream/a100_80.txt and gpu-stream/h200.txt (commit fd7091f, 2023-12-13), the line at blockSize 1024 (100 % occupancy); the A100's file does not say SXM or PCIe; the model's DRAM efficiency of both GPUs is this source's init column, so init is not a row",
    second_hand: None,
};

const TENSORCORE_KERNELS: Source = Source {
    title: "blackwell-tensorcore-kernels (waynehacking8), H100 benchmark",
    address: "https://github.com/waynehacking8/blackwell-tensorcore-kernels",
    place: "results/bench_sm90a.csv, kernels naive and tiled (NVIDIA H100 80GB HBM3)",
    second_hand: None,
};

const FA3: Source = Source {
    title: "FlashAttention-3: Fast and Accurate Attention with Asynchrony and Low-precision (Shah et al.)",
    address: "https://arxiv.org/abs/2407.08608",
    place: "forward-pass speed figure, head dim 128, non-causal, BF16, sequence length 4096 (H100 SXM5)",
    second_hand: Some("values read off the figure by subtext.edge.nugit.net"),
};

/// 4096^3 SGEMM's FLOPs as the worklog counts them (2 M N K).
const SGEMM_WORK: f64 = 2.0 * 4096.0 * 4096.0 * 4096.0;
/// A 4096 x 4096 f32 matrix read and written once.
const TRANSPOSE_4096_BYTES: f64 = 2.0 * 4096.0 * 4096.0 * 4.0;
/// Non-causal attention forward at batch 4, 16 heads, 4096 tokens, head dim 128, as the
/// FlashAttention papers count it: 4 B H N^2 d.
const ATTENTION_WORK: f64 = 4.0 * 4.0 * 16.0 * 4096.0 * 4096.0 * 128.0;

/// SGEMM's arguments at 4096^3: M, N, K, alpha, A, B, beta, C.
const SGEMM_ARGS: &[&str] = &[
    "i32:4096",
    "i32:4096",
    "i32:4096",
    "f32:1",
    "f32[16777216]:zeros",
    "f32[16777216]:zeros",
    "f32:0",
    "f32[16777216]:zeros",
];
const TRANSPOSE_ARGS: &[&str] = &["f32[16777216]:zeros", "f32[16777216]:zeros", "i32:4096"];

const SGEMM_FILE: &str = "tests/validation/sgemm.cu";
const STREAM_FILE: &str = "tests/validation/stream.cu";
const GEMM_SIMT_FILE: &str = "tests/validation/gemm_simt.cu";

const MEMCPY_FILE: &str = "tests/validation/memcpy.cu";

/// The memcpy post's largest buffer, 2^27 bytes (past the H100's 50 MB L2): dst, src, n.
const MEMCPY_ARGS: &[&str] = &[
    "u8[134217728]:zeros",
    "u8[134217728]:zeros",
    "u64:134217728",
];

/// The copy moving 2^27 bytes as `width`-byte elements, one per thread, blocks of 1024: the
/// published range's middle, `low..high` GB/s (read + write).
const fn memcpy(entry: &'static str, width: u32, low: f64, high: f64, step: u32) -> Row {
    Row {
        label: entry,
        kernel: Kernel::Cuda {
            file: MEMCPY_FILE,
            entry,
            grid: [(1 << 27) / width / 1024, 1, 1],
            block: [1024, 1, 1],
            args: MEMCPY_ARGS,
        },
        device: "h100",
        published: (low + high) / 2.0,
        unit: Unit::GBps,
        work: 2.0 * (1u64 << 27) as f64,
        shape: "2^27 bytes (the largest the benchmark copies), elements of 1 to 16 bytes",
        source: YENCAL_MEMCPY,
        progression: Some(("memcpy by access width, H100", step)),
        change: if step > 1 {
            Some(Advice::WiderAccesses)
        } else {
            None
        },
    }
}

/// gpu-stream's arrays: 128 Mi + 2 f64 elements each.
const STREAM_N: f64 = 134_217_730.0;
const STREAM_ARGS: &[&str] = &[
    "f64[134217730]:zeros",
    "f64[134217730]:zeros",
    "f64[134217730]:zeros",
    "i32:134217730",
];

/// A gpu-stream kernel at 1024-thread blocks on `device` (`a100` or `h200`): the source counts
/// `streams` arrays of 8-byte elements moved per launch.
const fn stream(
    label: &'static str,
    entry: &'static str,
    device: &'static str,
    streams: f64,
    published: f64,
) -> Row {
    Row {
        label,
        kernel: Kernel::Cuda {
            file: STREAM_FILE,
            entry,
            // n / 1024 + 1 blocks, as the source launches them.
            grid: [131_073, 1, 1],
            block: [1024, 1, 1],
            args: STREAM_ARGS,
        },
        device,
        published,
        unit: Unit::GBps,
        work: streams * STREAM_N * 8.0,
        shape: "128 Mi + 2 f64 elements per array, blocks of 1024 threads",
        source: GPU_BENCHES,
        progression: None,
        change: None,
    }
}

/// The naive (blocks of `b` = 16 x 16 threads) or tiled (`b` = 32: 32 x 32 tiles and blocks) f32
/// GEMM at n^3 on the H100; the 4096^3 pair is a progression, the tiled step reading each
/// element of A and B into shared memory once per block where the naive one re-reads it.
const fn gemm_simt(
    label: &'static str,
    entry: &'static str,
    b: u32,
    n: u32,
    args: &'static [&'static str],
    published: f64,
    step: Option<u32>,
) -> Row {
    let progression = match step {
        Some(s) => Some(("SIMT SGEMM 4096^3, H100", s)),
        None => None,
    };
    Row {
        label,
        kernel: Kernel::Cuda {
            file: GEMM_SIMT_FILE,
            entry,
            grid: [n / b, n / b, 1],
            block: [b, b, 1],
            args,
        },
        device: "h100",
        published,
        unit: Unit::Tflops,
        work: 2.0 * (n as f64) * (n as f64) * (n as f64),
        shape: "M = N = K = 2048 or 4096 as the step says, f32 (the source's 8192^3 left out to keep the command short)",
        source: TENSORCORE_KERNELS,
        progression,
        change: if b == 32 {
            Some(Advice::ReadOnce)
        } else {
            None
        },
    }
}

/// A GEMM's arguments at n^3: A, B, C, M, N, K.
const GEMM_2048: &[&str] = &[
    "f32[4194304]:zeros",
    "f32[4194304]:zeros",
    "f32[4194304]:zeros",
    "i32:2048",
    "i32:2048",
    "i32:2048",
];
const GEMM_4096: &[&str] = &[
    "f32[16777216]:zeros",
    "f32[16777216]:zeros",
    "f32[16777216]:zeros",
    "i32:4096",
    "i32:4096",
    "i32:4096",
];

/// yencal's transposes at 32768 x 32768 f32 on the H100.
const YENCAL_ARGS: &[&str] = &[
    "f32[1073741824]:zeros",
    "f32[1073741824]:zeros",
    "i32:32768",
];
const TRANSPOSE_32768_BYTES: f64 = 2.0 * 32768.0 * 32768.0 * 4.0;

const fn yencal(
    label: &'static str,
    entry: &'static str,
    grid: u32,
    block: [u32; 2],
    published: f64,
    step: Option<u32>,
    change: Option<Advice>,
) -> Row {
    let progression = match step {
        Some(s) => Some(("transpose, H100", s)),
        None => None,
    };
    Row {
        label,
        kernel: Kernel::Cuda {
            file: TRANSPOSE_FILE,
            entry,
            grid: [grid, grid, 1],
            block: [block[0], block[1], 1],
            args: YENCAL_ARGS,
        },
        device: "h100",
        published,
        unit: Unit::GBps,
        work: TRANSPOSE_32768_BYTES,
        shape: "32768 x 32768 f32",
        source: YENCAL,
        progression,
        change,
    }
}
const TRANSPOSE_FILE: &str = "tests/validation/transpose.cu";

const fn sgemm(
    label: &'static str,
    entry: &'static str,
    grid: [u32; 3],
    block: u32,
    published: f64,
    step: u32,
    change: Option<Advice>,
) -> Row {
    let block = if block == 0 {
        [32, 32, 1]
    } else {
        [block, 1, 1]
    };
    Row {
        label,
        kernel: Kernel::Cuda {
            file: SGEMM_FILE,
            entry,
            grid,
            block,
            args: SGEMM_ARGS,
        },
        device: "a6000",
        published,
        unit: Unit::Gflops,
        work: SGEMM_WORK,
        shape: "4092^3, predicted at 4096^3 (the nearest multiple of every step's tiles)",
        source: BOEHM,
        progression: Some(("SGEMM worklog, RTX A6000", step)),
        change,
    }
}

const fn transpose(
    label: &'static str,
    entry: &'static str,
    grid: [u32; 3],
    block: [u32; 3],
    published: f64,
    step: u32,
    change: Option<Advice>,
) -> Row {
    Row {
        label,
        kernel: Kernel::Cuda {
            file: TRANSPOSE_FILE,
            entry,
            grid,
            block,
            args: TRANSPOSE_ARGS,
        },
        device: "a100",
        published,
        unit: Unit::GBps,
        work: TRANSPOSE_4096_BYTES,
        shape: "4096 x 4096 f32",
        source: FARADAY,
        progression: Some(("transpose, A100", step)),
        change,
    }
}

const fn attention(
    label: &'static str,
    kernel: &'static str,
    published: f64,
    step: u32,
    change: Option<Advice>,
) -> Row {
    Row {
        label,
        kernel: Kernel::Registered {
            kernel,
            shape: "4x16x4096x128",
        },
        device: "h100",
        published,
        unit: Unit::Tflops,
        work: ATTENTION_WORK,
        shape: "batch 4, 16 heads, 4096 tokens, head dim 128, bf16",
        source: FA3,
        progression: Some(("attention forward, H100", step)),
        change,
    }
}

/// Every row, progression by progression, each in its steps' order. The worklog's step 0
/// (cuBLAS) is left out: the project has no kernel that follows it.
pub const ROWS: [Row; 43] = [
    sgemm("1: naive", "sgemm_naive", [128, 128, 1], 0, 309.0, 1, None),
    sgemm(
        "2: GMEM coalescing",
        "sgemm_coalesced",
        [128, 128, 1],
        1024,
        1986.5,
        2,
        Some(Advice::Coalesce),
    ),
    sgemm(
        "3: SMEM caching",
        "sgemm_shared",
        [128, 128, 1],
        1024,
        2980.3,
        3,
        Some(Advice::ReadOnce),
    ),
    sgemm(
        "4: 1D blocktiling",
        "sgemm_blocktile_1d",
        [64, 64, 1],
        512,
        8474.7,
        4,
        Some(Advice::FewerSharedAccesses),
    ),
    sgemm(
        "5: 2D blocktiling",
        "sgemm_blocktile_2d",
        [32, 32, 1],
        256,
        15971.7,
        5,
        Some(Advice::FewerSharedAccesses),
    ),
    sgemm(
        "6: vectorized",
        "sgemm_vectorised",
        [32, 32, 1],
        256,
        18237.3,
        6,
        Some(Advice::WiderAccesses),
    ),
    sgemm(
        "7: bank conflicts (linearize)",
        "sgemm_linearised",
        [32, 32, 1],
        256,
        16213.4,
        7,
        Some(Advice::PadOrSwizzle),
    ),
    sgemm(
        "8: bank conflicts (offset)",
        "sgemm_padded",
        [32, 32, 1],
        256,
        16459.2,
        8,
        Some(Advice::PadOrSwizzle),
    ),
    sgemm(
        "9: autotuning",
        "sgemm_autotuned",
        [32, 32, 1],
        256,
        19721.0,
        9,
        None,
    ),
    sgemm(
        "10: warptiling",
        "sgemm_warptiled",
        [32, 32, 1],
        128,
        21779.3,
        10,
        None,
    ),
    sgemm(
        "11: double buffering",
        "sgemm_double_buffered",
        [16, 32, 1],
        256,
        17278.3,
        11,
        Some(Advice::Overlap),
    ),
    transpose(
        "copy (upper bound)",
        "copy",
        [65536, 1, 1],
        [256, 1, 1],
        1870.0,
        1,
        None,
    ),
    transpose(
        "naive",
        "transpose_naive",
        [128, 128, 1],
        [32, 32, 1],
        150.0,
        2,
        None,
    ),
    transpose(
        "tiled",
        "transpose_tiled",
        [128, 128, 1],
        [32, 8, 1],
        900.0,
        3,
        Some(Advice::Coalesce),
    ),
    transpose(
        "padded",
        "transpose_padded",
        [128, 128, 1],
        [32, 8, 1],
        1600.0,
        4,
        Some(Advice::PadOrSwizzle),
    ),
    yencal(
        "Naive",
        "transpose_naive",
        1024,
        [32, 32],
        475.5,
        Some(1),
        None,
    ),
    yencal(
        "Tiled",
        "transpose_tiled_32x32",
        1024,
        [32, 32],
        996.1,
        Some(2),
        Some(Advice::Coalesce),
    ),
    yencal(
        "TiledPadded",
        "transpose_padded_32x32",
        1024,
        [32, 32],
        1693.4,
        Some(3),
        Some(Advice::PadOrSwizzle),
    ),
    yencal(
        "Coarsen2",
        "transpose_padded_32x16",
        1024,
        [32, 16],
        2385.1,
        Some(4),
        Some(Advice::MoreInFlight),
    ),
    yencal(
        "Coarsen4",
        "transpose_padded",
        1024,
        [32, 8],
        2772.4,
        Some(5),
        Some(Advice::MoreInFlight),
    ),
    yencal(
        "Vec4_T64",
        "transpose_vec4_t64",
        512,
        [16, 32],
        2938.9,
        Some(6),
        Some(Advice::WiderAccesses),
    ),
    memcpy("memcpy_u8", 1, 650.0, 700.0, 1),
    memcpy("memcpy_u16", 2, 1150.0, 1200.0, 2),
    memcpy("memcpy_u32", 4, 1950.0, 2050.0, 3),
    memcpy("memcpy_u64", 8, 2550.0, 2700.0, 4),
    memcpy("memcpy_u128", 16, 3000.0, 3100.0, 5),
    stream("read", "stream_read", "a100", 1.0, 1769.0),
    stream("scale", "stream_scale", "a100", 2.0, 1732.0),
    stream("triad", "stream_triad", "a100", 3.0, 1759.0),
    stream("3pt", "stream_3pt", "a100", 2.0, 1696.0),
    stream("5pt", "stream_5pt", "a100", 2.0, 1680.0),
    stream("read", "stream_read", "h200", 1.0, 2756.0),
    stream("scale", "stream_scale", "h200", 2.0, 3165.0),
    stream("triad", "stream_triad", "h200", 3.0, 3534.0),
    stream("3pt", "stream_3pt", "h200", 2.0, 3128.0),
    stream("5pt", "stream_5pt", "h200", 2.0, 3110.0),
    // Off the progression: the float4 transpose at yencal's 32 x 32 tiles.
    yencal(
        "Vec4",
        "transpose_vec4_t32",
        1024,
        [8, 32],
        2771.2,
        None,
        None,
    ),
    gemm_simt(
        "naive 2048^3",
        "gemm_naive_16x16",
        16,
        2048,
        GEMM_2048,
        5.48,
        None,
    ),
    gemm_simt(
        "tiled 2048^3",
        "gemm_tiled_32",
        32,
        2048,
        GEMM_2048,
        9.22,
        None,
    ),
    gemm_simt(
        "naive 4096^3",
        "gemm_naive_16x16",
        16,
        4096,
        GEMM_4096,
        5.37,
        Some(1),
    ),
    gemm_simt(
        "tiled 4096^3",
        "gemm_tiled_32",
        32,
        4096,
        GEMM_4096,
        9.04,
        Some(2),
    ),
    attention("standard attention", "attention_naive_bf16", 133.0, 1, None),
    attention(
        "FlashAttention-2",
        "attention_fused_bf16",
        368.0,
        2,
        Some(Advice::ReadOnce),
    ),
];

/// A row's prediction, in its unit, and what limits it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Scored {
    pub predicted: f64,
    pub published: f64,
    pub progression: Option<(&'static str, u32)>,
    /// What the prediction's last sentence advises (`perf::model::next_step`).
    pub advice: Advice,
    /// What the row's step changed from the one before ([`Row::change`]).
    pub change: Option<Advice>,
}

impl Scored {
    /// Predicted over published.
    pub fn ratio(&self) -> f64 {
        self.predicted / self.published
    }

    /// |predicted - published| / published.
    pub fn error(&self) -> f64 {
        (self.ratio() - 1.0).abs()
    }
}

/// One progression's agreement with its source.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProgressionScore {
    pub name: &'static str,
    pub steps: usize,
    /// Spearman's rank correlation of predicted against published (ties ranked by their mean).
    pub spearman: f64,
    /// Per step after the first, whether the prediction moves the same way (faster or slower)
    /// as the published figure from the step before.
    pub directions: Vec<bool>,
    /// The steps (indices from 0 in step order) whose advice is the next step's change, where
    /// the source measured that next step slower: advice that points the wrong way.
    pub misleading_advice: Vec<usize>,
}

/// Of `steps` in order, those whose advice names the change the next step made though the
/// source measured the next step slower ([`ProgressionScore::misleading_advice`]).
pub fn misleading_advice(steps: &[&Scored]) -> Vec<usize> {
    steps
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[1].published < w[0].published && w[1].change == Some(w[0].advice))
        .map(|(i, _)| i)
        .collect()
}

/// The suite's figures against the targets.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Score {
    pub median_error: f64,
    /// The ratio furthest from 1 (either way), as predicted / published.
    pub worst_ratio: f64,
    pub progressions: Vec<ProgressionScore>,
}

/// The targets (issue 51): median |error| at most 15 %, no ratio beyond 1.5x either way, rank
/// correlation at least 0.9 per progression, every direction right.
pub const TARGET_MEDIAN_ERROR: f64 = 0.15;
pub const TARGET_WORST_RATIO: f64 = 1.5;
pub const TARGET_SPEARMAN: f64 = 0.9;

/// The ranks of `values` from 1 (smallest), tied values sharing the mean of their ranks.
pub fn ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut out = vec![0.0; values.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && values[order[j + 1]] == values[order[i]] {
            j += 1;
        }
        // Ranks i + 1 ..= j + 1 shared.
        let mean = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            out[k] = mean;
        }
        i = j + 1;
    }
    out
}

/// Spearman's rank correlation: Pearson's correlation of the ranks (exact with ties). `NaN`
/// when either side has no spread.
pub fn spearman(x: &[f64], y: &[f64]) -> f64 {
    assert_eq!(x.len(), y.len());
    let (rx, ry) = (ranks(x), ranks(y));
    let n = x.len() as f64;
    let mean = |v: &[f64]| v.iter().sum::<f64>() / n;
    let (mx, my) = (mean(&rx), mean(&ry));
    let mut sxy = 0.0;
    let mut sxx = 0.0;
    let mut syy = 0.0;
    for (a, b) in rx.iter().zip(&ry) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    sxy / (sxx * syy).sqrt()
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Per step after the first, whether `predicted` moves the same way as `published` from the
/// step before (an unchanged published figure asks for an unchanged prediction, and an
/// unchanged prediction is right only there).
pub fn directions(published: &[f64], predicted: &[f64]) -> Vec<bool> {
    published
        .windows(2)
        .zip(predicted.windows(2))
        .map(|(p, q)| p[1].partial_cmp(&p[0]) == q[1].partial_cmp(&q[0]))
        .collect()
}

/// The suite's score over `rows` (in their progressions' step order within each progression).
pub fn score(rows: &[Scored]) -> Score {
    let errors: Vec<f64> = rows.iter().map(Scored::error).collect();
    let worst_ratio = rows
        .iter()
        .map(Scored::ratio)
        .max_by(|a, b| a.ln().abs().total_cmp(&b.ln().abs()))
        .unwrap_or(f64::NAN);
    let mut names: Vec<&'static str> = Vec::new();
    for r in rows {
        if let Some((name, _)) = r.progression
            && !names.contains(&name)
        {
            names.push(name);
        }
    }
    let progressions = names
        .into_iter()
        .map(|name| {
            let mut steps: Vec<&Scored> = rows
                .iter()
                .filter(|r| r.progression.is_some_and(|(n, _)| n == name))
                .collect();
            steps.sort_by_key(|r| r.progression.map(|(_, s)| s));
            let published: Vec<f64> = steps.iter().map(|r| r.published).collect();
            let predicted: Vec<f64> = steps.iter().map(|r| r.predicted).collect();
            ProgressionScore {
                name,
                steps: steps.len(),
                spearman: spearman(&published, &predicted),
                directions: directions(&published, &predicted),
                misleading_advice: misleading_advice(&steps),
            }
        })
        .collect();
    Score {
        median_error: median(&errors),
        worst_ratio,
        progressions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specs::GpuSpec;

    #[test]
    fn ties_share_the_mean_of_their_ranks() {
        assert_eq!(ranks(&[10.0, 30.0, 20.0]), [1.0, 3.0, 2.0]);
        assert_eq!(ranks(&[5.0, 1.0, 5.0, 7.0]), [2.5, 1.0, 2.5, 4.0]);
        assert_eq!(ranks(&[2.0, 2.0, 2.0]), [2.0, 2.0, 2.0]);
    }

    /// Spearman by hand: x = (1, 2, 3, 4, 5), y = (5, 6, 7, 8, 7); the ranks of y are
    /// (1, 2, 3.5, 5, 3.5) (the two 7s share 3 and 4); both rank means are 3; deviations x
    /// (-2, -1, 0, 1, 2), y (-2, -1, 0.5, 2, 0.5); sum of products 4 + 1 + 0 + 2 + 1 = 8; sums of
    /// squares 10 and 4 + 1 + 0.25 + 4 + 0.25 = 9.5; rho = 8 / sqrt(95) = 0.820782...
    #[test]
    fn spearman_matches_a_hand_computed_value_with_ties() {
        let rho = spearman(&[1.0, 2.0, 3.0, 4.0, 5.0], &[5.0, 6.0, 7.0, 8.0, 7.0]);
        assert!((rho - 8.0 / 95f64.sqrt()).abs() < 1e-12, "{rho}");
        assert!((rho - 0.820_782).abs() < 1e-6);
        // Any monotone map is 1, its reverse -1.
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[10.0, 400.0, 900.0]), 1.0);
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), -1.0);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[0.3, 0.1, 0.2]), 0.2);
        assert_eq!(median(&[0.4, 0.1, 0.2, 0.3]), 0.25);
    }

    #[test]
    fn directions_follow_the_published_steps() {
        // Published up, down, flat; predicted up, up, flat.
        assert_eq!(
            directions(&[1.0, 2.0, 1.5, 1.5], &[3.0, 4.0, 5.0, 5.0]),
            [true, false, true]
        );
        // A prediction that does not move where the published figure does is wrong either way
        // (the sign of a zero difference is no direction).
        assert_eq!(
            directions(&[1.0, 2.0, 1.0], &[3.0, 3.0, 3.0]),
            [false, false]
        );
    }

    /// Two progressions and a loose row: ratios 2.5, 0.5, 1.1, 0.9, 1.0; the median of the
    /// |errors| (1.5, 0.5, 0.1, 0.1, 0.0) is 0.1; the worst ratio is 2.5 (further from 1 than 0.5
    /// is, by their logarithms); progression a: published (100, 200), predicted (250, 100): rho
    /// -1, its one direction wrong; b: published (10, 20), predicted (11, 18): rho 1, right.
    #[test]
    fn the_score_of_a_hand_made_suite() {
        let row = |predicted, published, progression| Scored {
            predicted,
            published,
            progression,
            advice: Advice::Nothing,
            change: None,
        };
        let rows = [
            row(250.0, 100.0, Some(("a", 1))),
            row(100.0, 200.0, Some(("a", 2))),
            row(11.0, 10.0, Some(("b", 1))),
            row(18.0, 20.0, Some(("b", 2))),
            row(5.0, 5.0, None),
        ];
        let s = score(&rows);
        assert!((s.median_error - 0.1).abs() < 1e-12, "{}", s.median_error);
        assert_eq!(s.worst_ratio, 2.5);
        assert_eq!(s.progressions.len(), 2);
        assert_eq!(s.progressions[0].name, "a");
        assert_eq!(s.progressions[0].spearman, -1.0);
        assert_eq!(s.progressions[0].directions, [false]);
        assert_eq!(s.progressions[1].spearman, 1.0);
        assert_eq!(s.progressions[1].directions, [true]);
        // Steps given out of order are put in order (the progressions then come as first seen).
        let reversed: Vec<Scored> = rows.iter().rev().cloned().collect();
        let again = score(&reversed);
        assert_eq!(again.progressions[0].name, "b");
        assert_eq!(again.progressions[1].directions, [false]);
        assert_eq!(again.progressions[1].spearman, -1.0);
    }

    /// A worklog's step 7 pads the shared tile and measures slower than step 6: advice at step 6
    /// to pad or swizzle points the wrong way, advice to do anything else does not; a next step
    /// that measured faster is never held against the advice.
    #[test]
    fn advice_the_next_measured_step_contradicts_is_caught() {
        let step = |published, advice, change| Scored {
            predicted: 1.0,
            published,
            progression: Some(("w", 1)),
            advice,
            change,
        };
        let six = step(18237.3, Advice::PadOrSwizzle, Some(Advice::WiderAccesses));
        let seven = step(16213.4, Advice::Nothing, Some(Advice::PadOrSwizzle));
        assert_eq!(misleading_advice(&[&six, &seven]), [0]);
        let six_other = Scored {
            advice: Advice::FewerSharedAccesses,
            ..six.clone()
        };
        assert!(misleading_advice(&[&six_other, &seven]).is_empty());
        let seven_faster = Scored {
            published: 20000.0,
            ..seven.clone()
        };
        assert!(misleading_advice(&[&six, &seven_faster]).is_empty());
    }

    /// Every row names a known device and a positive figure, and each progression's steps are
    /// 1, 2, ... in the table's order.
    #[test]
    fn the_rows_are_well_formed() {
        let mut seen: Vec<(&str, u32)> = Vec::new();
        for r in &ROWS {
            assert!(GpuSpec::find(r.device).is_some(), "{}", r.device);
            assert!(r.published > 0.0 && r.work > 0.0, "{r:?}");
            if let Some((name, step)) = r.progression {
                let last = seen.iter().rev().find(|(n, _)| *n == name).map(|p| p.1);
                assert_eq!(step, last.unwrap_or(0) + 1, "{r:?}");
                seen.push((name, step));
            }
        }
        let devices: std::collections::BTreeSet<&str> = ROWS.iter().map(|r| r.device).collect();
        assert!(devices.len() >= 3, "{devices:?}");
    }
}
