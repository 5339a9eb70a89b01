//! GEMM, `C = A B` or `C = A B + C`, in four steps up the memory pyramid (docs/gemm.md).
//!
//! Every matrix is **row-major**: A is M x K (element (i, k) at `i * K + k`), B is K x N, C is
//! M x N. Each step is one file and one idea:
//!
//! 1. [`naive`]: one thread per element of C; every operand comes from HBM (or L2).
//! 2. [`tiled`]: a block stages 32 x 32 tiles of A and B in shared memory and reuses each
//!    element 32 times.
//! 3. [`register_blocked`]: each thread keeps an 8 x 8 sub-tile of C in registers, so each value
//!    read from shared memory feeds 8 FMAs; loads are 16 bytes wide where alignment allows.
//! 4. [`tensor_core`]: bf16/f16 inputs on the tensor cores (`ldmatrix` + `mma.sync`), tiles
//!    brought in by a 3-stage `cp.async` pipeline into an XOR-swizzled shared layout, blocks
//!    visited in groups of rows so that neighbours share strips of A and B in L2.
//! 5. [`wgmma`] (Hopper, sm_90a): the TMA copies whole tiles, a 4-stage mbarrier pipeline
//!    between one producer warp and two consumer warpgroups, and `wgmma` multiplying 64 x 256 x 16
//!    straight from shared memory.
//!
//! This module holds what the host needs too (rust-cuda's `TILE_SIZE` practice): each step's
//! tile constants, from which the host computes the grid, and the small index helpers the steps
//! share, each a pure function that tests/tests/gemm.rs checks on the CPU.

pub mod naive;
pub mod register_blocked;
pub mod tensor_core;
pub mod tiled;
pub mod wgmma;

pub use naive::gemm_naive_f32;
pub use register_blocked::gemm_register_blocked_f32;
pub use tensor_core::{gemm_tensor_core_bf16, gemm_tensor_core_f16};
pub use tiled::gemm_tiled_f32;
pub use wgmma::{gemm_wgmma_bf16, gemm_wgmma_f16};

use crate::cuda::GlobalPtr;

/// The tile of C one block computes (`m` x `n`), and the depth of the slices of A (`m` x `k`)
/// and B (`k` x `n`) it stages in shared memory per step.
///
/// Its strips of A and B are read from global memory once per block, so the FLOPs per byte of A
/// and B a block loads are `2 m n k / (bytes (m + n) k) = 2 m n / (bytes (m + n))`: the *tile
/// intensity*, `m n / (m + n)` for 2-byte elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile {
    /// Rows of C (and of A) per block.
    pub m: u32,
    /// Columns of C (and of B) per block.
    pub n: u32,
    /// Depth of K staged per step.
    pub k: u32,
}

impl Tile {
    /// Blocks along M and along N that cover an `m` x `n` C, the last ones partly outside it.
    pub const fn blocks(self, m: u32, n: u32) -> (u32, u32) {
        (m.div_ceil(self.m), n.div_ceil(self.n))
    }
}

// ---- Step 1: naive ---------------------------------------------------------------------------

/// Threads per block side of the naive kernel: 16 x 16 threads, one element of C each.
pub const NAIVE_BLOCK: u32 = 16;

// ---- Step 2: shared-memory tiles ------------------------------------------------------------

/// The tiled kernel's tile: 32 x 32 of C per block of 32 x 32 threads, K staged 32 deep.
pub const TILED: Tile = Tile {
    m: 32,
    n: 32,
    k: 32,
};

// ---- Step 3: register blocking ----------------------------------------------------------------

/// The register-blocked kernel's tile: 128 x 128 of C per block, K staged 8 deep.
pub const REGISTER_BLOCKED: Tile = Tile {
    m: 128,
    n: 128,
    k: 8,
};
/// Each thread of the register-blocked kernel accumulates a `THREAD_TILE` x `THREAD_TILE`
/// sub-tile of C in registers.
pub const THREAD_TILE: u32 = 8;
/// Threads per register-blocked block: one per 8 x 8 sub-tile of 128 x 128.
pub const REGISTER_BLOCKED_THREADS: u32 =
    (REGISTER_BLOCKED.m / THREAD_TILE) * (REGISTER_BLOCKED.n / THREAD_TILE);

// ---- Step 4: tensor cores -----------------------------------------------------------------------

/// The tensor-core kernel's tile: 128 x 128 of C per block, K staged 64 deep (a 128-byte row of
/// 16-bit elements, which the swizzle needs).
pub const TENSOR_CORE: Tile = Tile {
    m: 128,
    n: 128,
    k: 64,
};
/// Stages of the `cp.async` pipeline: two tiles in flight while the third is multiplied.
pub const TC_STAGES: u32 = 3;
/// Warps of a tensor-core block along M and along N: 2 x 4 warps, each a 64 x 32 tile of C.
pub const TC_WARPS_M: u32 = 2;
/// See [`TC_WARPS_M`].
pub const TC_WARPS_N: u32 = 4;
/// Threads per tensor-core block.
pub const TC_THREADS: u32 = 32 * TC_WARPS_M * TC_WARPS_N;
/// Block rasterisation: blocks walk down groups of this many tile rows (see [`raster`]).
pub const TC_GROUP_M: u32 = 8;
/// Dynamic shared memory per tensor-core block: every stage's A and B tiles of 2-byte elements
/// (96 KiB: over the 48 KiB default, so the host opts in).
pub const TC_SHARED_BYTES: u32 =
    TC_STAGES * (TENSOR_CORE.m * TENSOR_CORE.k + TENSOR_CORE.k * TENSOR_CORE.n) * 2;
/// The row-length multiple the tensor-core kernel needs in K and N: 8 elements of 2 bytes, so
/// that every row of A and B starts on the 16-byte boundary a `cp.async` chunk needs.
pub const TC_ROW_MULTIPLE: u32 = ELEMS_PER_CHUNK;

// ---- Step 5: TMA and wgmma (sm_90a) -------------------------------------------------------------

/// The wgmma kernel's tile: 128 x 256 of C per block (two consumer warpgroups of 64 x 256 each,
/// two `wgmma.m64n128` wide), K staged 64 deep: a 128-byte row of 16-bit elements, the width of
/// the 128-byte swizzle. Tile intensity 128 x 256 / 384 = 85 FLOP/B against step 4's 64.
pub const WGMMA: Tile = Tile {
    m: 128,
    n: 256,
    k: 64,
};
/// Stages of the mbarrier pipeline: up to three tiles in flight while the fourth is multiplied.
pub const WG_STAGES: u32 = 4;
/// Consumer warpgroups (each 64 rows of the tile); one more warpgroup is the producer.
pub const WG_CONSUMERS: u32 = 2;
/// Threads per wgmma block: the producer warpgroup and the consumers, 128 threads each.
pub const WG_THREADS: u32 = 128 * (1 + WG_CONSUMERS);
/// Columns of one TMA box: 64 two-byte elements, one 128-byte swizzled row.
pub const WG_BOX_COLS: u32 = 64;
/// Bytes of one stage: the A tile (128 x 64) and the B tile (64 x 256), 2-byte elements.
pub const WG_STAGE_BYTES: u32 = (WGMMA.m * WGMMA.k + WGMMA.k * WGMMA.n) * 2;
/// The 128-byte swizzle repeats every 1024 bytes, and a swizzled box must start on that
/// boundary: dynamic shared memory is over-allocated by this much and aligned in the kernel.
pub const WG_ALIGN: u32 = 1024;
/// Dynamic shared memory per wgmma block: the alignment slack, every stage, and two mbarriers
/// (8 bytes each) per stage.
pub const WG_SHARED_BYTES: u32 = WG_ALIGN + WG_STAGES * WG_STAGE_BYTES + 2 * WG_STAGES * 8;

// ---- Index helpers ----------------------------------------------------------------------------

/// Offset of element (`row`, `col`) of a row-major matrix with `ld` elements per row.
#[inline(always)]
pub const fn at(row: u32, col: u32, ld: u32) -> usize {
    row as usize * ld as usize + col as usize
}

/// How many of the `len` indices from `start` fall below `extent`: the part of a tile's rows or
/// columns that lies inside the matrix.
#[inline(always)]
pub const fn inside(start: u32, len: u32, extent: u32) -> u32 {
    let left = extent.saturating_sub(start);
    if left < len { left } else { len }
}

/// Block rasterisation: the tile (row, column) of C that block `pid` of a one-dimensional grid
/// computes, visiting the `blocks_m` x `blocks_n` tiles in groups of `group` tile rows, down each
/// column of a group before moving to the next column.
///
/// Blocks that run at the same time then share strips: `group` consecutive blocks read the same
/// strip of B, and a wave of `w` blocks reads about `group + w / group` strips instead of the
/// `1 + w` of row-by-row order, so far more of their loads hit in L2.
#[inline(always)]
pub const fn raster(pid: u32, blocks_m: u32, blocks_n: u32, group: u32) -> (u32, u32) {
    // Neither divisor is 0 in a launched grid; saying so (`max(1)`) lets the compiler drop the
    // division-by-zero panic, which a GPU build has no way to report.
    let per_group = max1(group * blocks_n);
    let first_row = pid / per_group * group;
    let rows = max1(inside(first_row, group, blocks_m));
    let local = pid % per_group;
    (first_row + local % rows, local / rows)
}

/// `x`, or 1 if `x` is 0.
#[inline(always)]
const fn max1(x: u32) -> u32 {
    if x == 0 { 1 } else { x }
}

/// 16-bit elements per 16-byte chunk: the unit of `cp.async`, of an `ldmatrix` row, and of the
/// swizzle.
pub const ELEMS_PER_CHUNK: u32 = 8;

/// The XOR swizzle: chunk `chunk` of row `row` of a shared tile is stored at chunk
/// `chunk ^ (row % 8)` of that row.
///
/// Shared memory serves 32 banks of 4 bytes, i.e. one 128-byte line, per cycle; `ldmatrix` reads
/// 8 rows of 16 bytes per phase. With rows a whole number of lines long, the same chunk of 8
/// consecutive rows would sit in the same 4 banks: an 8-way conflict. XOR-ing the chunk index
/// with the row's low 3 bits puts those 8 chunks in 8 different bank groups, for reads along a
/// column (`ldmatrix`) and for writes along a row (`cp.async`) alike, with no padding bytes.
#[inline(always)]
pub const fn swizzle(row: u32, chunk: u32) -> u32 {
    chunk ^ (row % 8)
}

/// Element offset of (`row`, `col`) in a swizzled tile of 16-bit elements, `cols` per row (a
/// multiple of 64, so that rows are whole 128-byte lines).
#[inline(always)]
pub const fn swizzled(row: u32, col: u32, cols: u32) -> usize {
    let chunk = swizzle(row, col / ELEMS_PER_CHUNK);
    at(row, chunk * ELEMS_PER_CHUNK + col % ELEMS_PER_CHUNK, cols)
}

/// The (row, column) that `lane` addresses in an `ldmatrix.x4` of a 16 x 16 block: lanes 0-15
/// give rows 0-15 of the left 8 columns, lanes 16-31 the same rows of the right 8. The four 8 x 8
/// matrices are then (rows 0-7, left), (rows 8-15, left), (rows 0-7, right), (rows 8-15, right):
/// the A fragment of `mma.m16n8k16`, and, with `.trans` on a K x N block, the B fragments of two
/// 8-column strips.
#[inline(always)]
pub const fn ldmatrix_x4_lane(lane: u32) -> (u32, u32) {
    (lane % 16, 8 * (lane / 16))
}

/// The (row, column) of a 16 x 8 accumulator tile that register `i` (0..4) of `lane` holds:
/// rows `lane / 4` and `lane / 4 + 8`, two adjacent columns `2 (lane % 4)` and one more.
#[inline(always)]
pub const fn accumulator_position(lane: u32, i: u32) -> (u32, u32) {
    (lane / 4 + 8 * (i / 2), 2 * (lane % 4) + i % 2)
}

/// `#pragma unroll`: the device-support layer's (`kernels/src/cuda/unroll.rs`).
pub(crate) use crate::unroll;

// ---- Loads and stores shared by the steps -----------------------------------------------------

/// Four consecutive f32 in one 16-byte aligned value: one `ld.global.v4.f32` (or `.shared`)
/// instead of four scalar loads.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C, align(16))]
pub struct F32x4(pub [f32; 4]);

/// Element (`row`, `col`) of a `rows` x `cols` row-major f32 matrix, or 0 outside it: the zero
/// fill that lets a tile run past the matrix's edge and add nothing.
///
/// # Safety
/// `p` must hold the whole matrix.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn load_or_zero(p: GlobalPtr<f32>, row: u32, col: u32, rows: u32, cols: u32) -> f32 {
    if row < rows && col < cols {
        // SAFETY: inside the matrix.
        unsafe { p.read(at(row, col, cols)) }
    } else {
        0.0
    }
}

/// Elements (`row`, `col..col + 4`) of a `rows` x `cols` row-major f32 matrix, zero outside it.
///
/// One 16-byte load when all four exist and `cols % 4 == 0`: with `col % 4 == 0` and buffers
/// 256-byte aligned, the address is then a multiple of 16. Otherwise one load per element that
/// exists, so the edges read exactly the elements inside the matrix.
///
/// # Safety
/// `p` must hold the whole matrix; `col` must be a multiple of 4.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn load4_or_zero(
    p: GlobalPtr<f32>,
    row: u32,
    col: u32,
    rows: u32,
    cols: u32,
) -> [f32; 4] {
    if row < rows && col + 4 <= cols && cols.is_multiple_of(4) {
        // SAFETY: four elements inside the matrix, 16-byte aligned (see above).
        unsafe { p.offset(at(row, col, cols)).cast::<F32x4>().read(0).0 }
    } else {
        // SAFETY: each read is inside the matrix.
        core::array::from_fn(|q| unsafe { load_or_zero(p, row, col + q as u32, rows, cols) })
    }
}

/// The epilogue every step shares: `C[row][col] = acc`, or `+= acc` when `accumulate`, if
/// (`row`, `col`) lies inside the `rows` x `cols` C.
///
/// # Safety
/// `c` must hold the whole matrix, and no other thread may touch this element.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn store_c(
    c: GlobalPtr<f32>,
    row: u32,
    col: u32,
    rows: u32,
    cols: u32,
    acc: f32,
    accumulate: bool,
) {
    if row < rows && col < cols {
        let i = at(row, col, cols);
        // SAFETY: inside the matrix; this thread owns the element.
        unsafe { c.write(i, if accumulate { acc + c.read(i) } else { acc }) };
    }
}

/// [`store_c`] for elements (`row`, `col..col + 4`): one 16-byte load (when accumulating) and
/// store where alignment allows, as [`load4_or_zero`] says, else element by element.
///
/// # Safety
/// As [`store_c`]; `col` must be a multiple of 4.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn store4_c(
    c: GlobalPtr<f32>,
    row: u32,
    col: u32,
    rows: u32,
    cols: u32,
    acc: [f32; 4],
    accumulate: bool,
) {
    if row < rows && col + 4 <= cols && cols.is_multiple_of(4) {
        let c4 = c.offset(at(row, col, cols)).cast::<F32x4>();
        let mut v = acc;
        if accumulate {
            // SAFETY: four elements inside the matrix, 16-byte aligned.
            let old = unsafe { c4.read(0).0 };
            v = core::array::from_fn(|q| acc[q] + old[q]);
        }
        // SAFETY: as above; this thread owns the four elements.
        unsafe { c4.write(0, F32x4(v)) };
    } else {
        for (q, &v) in acc.iter().enumerate() {
            // SAFETY: `store_c` checks each element against the matrix.
            unsafe { store_c(c, row, col + q as u32, rows, cols, v, accumulate) };
        }
    }
}

// ---- What the rest of the project needs of steps 1 to 4 (docs/registry.md) ---------------------
//
// The GPU build never sees it. Step 5 is not registered: it launches on TMA tensor maps that the
// host builds for each pair of operands, and runs only on sm_90a (docs/registry.md, "What a
// registered kernel is not").

#[cfg(not(target_arch = "nvptx64"))]
use crate::cuda::{Bf16, F16};

/// The GEMM sweep, square sizes M = N = K: on a GPU up to 4096^3 (the benchmark size), on
/// the emulator 64^3, 128^3 and 512^3: at 512^3 the tiled kernel walks 16 K tiles and the
/// tensor-core ones 8, so every stage of their pipelines is refilled (at 128^3 they saw 2), and
/// the whole run stays within seconds on two cores. Every step's rows, size by size.
#[cfg(not(target_arch = "nvptx64"))]
pub const RUN: &[crate::registry::RunShape] = &[
    crate::registry::RunShape {
        gpu: [1024, 1024, 1024, 1, 1],
        emulator: [64, 64, 64, 1, 1],
    },
    crate::registry::RunShape {
        gpu: [2048, 2048, 2048, 1, 1],
        emulator: [128, 128, 128, 1, 1],
    },
    crate::registry::RunShape {
        gpu: [4096, 4096, 4096, 1, 1],
        emulator: [512, 512, 512, 1, 1],
    },
];

/// The "tile" of step 1 whose strips of A and B are read once: one element, each thread reading
/// its own row of A and column of B.
pub const NAIVE_REUSE: Tile = Tile { m: 1, n: 1, k: 1 };

/// One element of a GEMM reference: the value, and the size that its rounding errors scale with.
#[cfg(not(target_arch = "nvptx64"))]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmEntry {
    /// `sum_k A[i][k] B[k][j] (+ C[i][j])`, accumulated in f64. Each product of two f32 values is
    /// exact in f64 and each of the K additions rounds at 2^-53, far below any f32 tolerance.
    pub value: f64,
    /// `sum_k |A[i][k] B[k][j]| (+ |C[i][j]|)`: a sum of n terms computed in floating point is off
    /// by at most about `n u` times this (u the unit roundoff), whatever the order of additions.
    pub magnitude: f64,
}

/// `b` (`k` x `n`, row-major) transposed, so that each of a GEMM reference's dot products runs
/// along two contiguous rows ([`reference_row`]).
#[cfg(not(target_arch = "nvptx64"))]
pub fn transposed(b: &[f32], (n, k): (usize, usize)) -> std::vec::Vec<f32> {
    (0..n * k).map(|x| b[(x % k) * n + x / k]).collect()
}

/// Row `i` of `C = A B (+ C)` in f64, for row-major A (m x k), B given [`transposed`] and C
/// (m x n): `n` entries.
#[cfg(not(target_arch = "nvptx64"))]
pub fn reference_row<'a>(
    a: &'a [f32],
    b_t: &'a [f32],
    c: Option<&'a [f32]>,
    (n, k): (usize, usize),
    i: usize,
) -> impl Iterator<Item = GemmEntry> + 'a {
    let a_row = &a[i * k..(i + 1) * k];
    (0..n).map(move |j| {
        let b_col = &b_t[j * k..(j + 1) * k];
        let c0 = c.map_or(0.0, |c| f64::from(c[i * n + j]));
        let (value, magnitude) = a_row
            .iter()
            .zip(b_col)
            .fold((c0, c0.abs()), |(v, s), (&x, &y)| {
                let p = f64::from(x) * f64::from(y);
                (v + p, s + p.abs())
            });
        GemmEntry { value, magnitude }
    })
}

/// How far an element of C computed by an f32 step may be from the exact result, as a multiple
/// of its magnitude `sum_k |a_ik b_kj| (+ |c_ij|)` ([`GemmEntry`]): each element is K fused
/// multiply-adds in sequence (one rounding each) and, when accumulating, one more addition: at
/// most K + 1 roundings of unit roundoff u = 2^-24, so the error is at most
/// `gamma_(K+1) = (K+1) u / (1 - (K+1) u)` times the magnitude, whatever the values (the factor
/// 1.01 covers the denominator up to K ~ 10^5). A wrong element is off by whole terms, each
/// about the magnitude over K: far above it.
#[cfg(not(target_arch = "nvptx64"))]
pub fn f32_error_bound(k: usize) -> f64 {
    1.01 * (k + 1) as f64 * f64::from(f32::EPSILON) / 2.0
}

/// [`f32_error_bound`] for the tensor cores (steps 4 and 5): products of bf16/f16 values are
/// exact in f32; the emulator rounds once per `mma` (K / 16 roundings). NVIDIA does not specify
/// the hardware's accumulation, which has been measured to truncate rather than round (Fasi et
/// al., "Numerical behavior of NVIDIA tensor cores", 2021), at most doubling each rounding's
/// error: hence twice the f32 bound.
#[cfg(not(target_arch = "nvptx64"))]
pub fn tensor_core_error_bound(k: usize) -> f64 {
    2.0 * f32_error_bound(k)
}

/// The FLOPs a tensor-core step executes at `m x n x k`: every `mma` of a block runs for every K
/// tile, the padding of partial tiles included, `2 (tiles of M x tile.m) (tiles of N x tile.n)
/// (tiles of K x tile.k)`: the useful `2 m n k` where the tile divides the shape (every run
/// shape), more at the edges. 0 for an empty C (no block).
#[cfg(not(target_arch = "nvptx64"))]
pub fn padded_flops(tile: Tile, [m, n, k, ..]: crate::registry::Dims) -> u64 {
    if m == 0 || n == 0 {
        return 0;
    }
    let padded = |x: usize, t: u32| x.next_multiple_of(t as usize) as u64;
    2 * padded(m, tile.m) * padded(n, tile.n) * padded(k, tile.k)
}

/// The cost of a tiled GEMM `C = A B` with inputs of `input_bytes` each: A and B read once and
/// C written once (the compulsory traffic), and, as re-reads, each of the `ceil(N / tile.n)`
/// block columns reading all of A again and each of the `ceil(M / tile.m)` block rows all of B.
/// The kernels load A and B element by element (or 16-byte chunk by chunk) and only inside the
/// matrices, so these are exactly the bytes they request. An empty C launches no block: 0.
#[cfg(not(target_arch = "nvptx64"))]
pub fn tiled_cost(tile: Tile, input_bytes: u64, [m, n, k, ..]: crate::registry::Dims) -> crate::registry::Cost {
    if m == 0 || n == 0 {
        return crate::registry::Cost::NONE;
    }
    let (m, n, k) = (m as u64, n as u64, k as u64);
    let (blocks_m, blocks_n) = (m.div_ceil(u64::from(tile.m)), n.div_ceil(u64::from(tile.n)));
    let (a, b) = (
        m.saturating_mul(k).saturating_mul(input_bytes),
        k.saturating_mul(n).saturating_mul(input_bytes),
    );
    let rereads = a
        .saturating_mul(blocks_n - 1)
        .saturating_add(b.saturating_mul(blocks_m - 1));
    crate::registry::Cost {
        bytes_read: a.saturating_add(b).saturating_add(rereads),
        bytes_written: m.saturating_mul(n).saturating_mul(4),
        flops: 2u64.saturating_mul(m).saturating_mul(n).saturating_mul(k),
        exps: 0,
        rereads,
        resident_rereads: 0,
        l2_rereads: 0,
        unit: crate::registry::ComputeUnit::CudaCoreF32,
    }
}

/// Step 1's launch: blocks of 16 x 16 threads, one element of C each, x along N.
#[cfg(not(target_arch = "nvptx64"))]
pub const fn naive_geometry(m: u32, n: u32) -> crate::registry::LaunchConfig {
    crate::registry::LaunchConfig::grid_2d(
        (n.div_ceil(NAIVE_BLOCK), m.div_ceil(NAIVE_BLOCK)),
        (NAIVE_BLOCK, NAIVE_BLOCK),
    )
}

/// Step 2's launch: a block of 32 x 32 threads per 32 x 32 tile of C, x along N.
#[cfg(not(target_arch = "nvptx64"))]
pub const fn tiled_geometry(m: u32, n: u32) -> crate::registry::LaunchConfig {
    let (blocks_m, blocks_n) = TILED.blocks(m, n);
    crate::registry::LaunchConfig::grid_2d((blocks_n, blocks_m), (TILED.n, TILED.m))
}

/// Step 3's launch: a block of 256 threads per 128 x 128 tile of C, x along N.
#[cfg(not(target_arch = "nvptx64"))]
pub const fn register_blocked_geometry(m: u32, n: u32) -> crate::registry::LaunchConfig {
    let (blocks_m, blocks_n) = REGISTER_BLOCKED.blocks(m, n);
    crate::registry::LaunchConfig::grid_2d((blocks_n, blocks_m), (REGISTER_BLOCKED_THREADS, 1))
}

/// Step 4's launch: `ceil(M / 128) * ceil(N / 128)` blocks in one dimension (the kernel maps
/// its block index to a tile with [`raster`]), 256 threads each, [`TC_SHARED_BYTES`] of dynamic
/// shared memory (over the 48 KiB default: the runtime opts in).
#[cfg(not(target_arch = "nvptx64"))]
pub const fn tensor_core_geometry(m: u32, n: u32) -> crate::registry::LaunchConfig {
    let (blocks_m, blocks_n) = TENSOR_CORE.blocks(m, n);
    crate::registry::LaunchConfig {
        dynamic_shared: TC_SHARED_BYTES,
        ..crate::registry::LaunchConfig::grid_2d((blocks_m * blocks_n, 1), (TC_THREADS, 1))
    }
}

/// Step 5's launch: `ceil(M / 128) * ceil(N / 256)` blocks in one dimension (the kernel maps its
/// block index to a tile with [`raster`]), a producer and two consumer warpgroups each,
/// [`WG_SHARED_BYTES`] of dynamic shared memory.
#[cfg(not(target_arch = "nvptx64"))]
pub const fn wgmma_geometry(m: u32, n: u32) -> crate::registry::LaunchConfig {
    let (blocks_m, blocks_n) = WGMMA.blocks(m, n);
    crate::registry::LaunchConfig {
        dynamic_shared: WG_SHARED_BYTES,
        ..crate::registry::LaunchConfig::grid_2d((blocks_m * blocks_n, 1), (WG_THREADS, 1))
    }
}

/// Step 5's two tensor maps: A (`m x k`) in boxes of 128 rows, B (`k x n`) in boxes of 64 rows,
/// each box a 128-byte row of [`WG_BOX_COLS`] elements wide, 128-byte swizzled.
#[cfg(not(target_arch = "nvptx64"))]
fn wgmma_maps([m, n, k, ..]: crate::registry::Dims) -> std::vec::Vec<crate::registry::TensorMaps> {
    use crate::cuda::tma::TmaSwizzle;
    let map = |input, (rows, cols), box_rows| crate::registry::TensorMaps {
        input,
        slabs: 1,
        rows,
        cols,
        box_rows,
        box_cols: WG_BOX_COLS,
        swizzle: TmaSwizzle::B128,
    };
    std::vec![map(0, (m, k), WGMMA.m), map(1, (k, n), WGMMA.k)]
}

/// Step 5's [`Spec::launch`](crate::registry::Spec::launch): its kernel on the tensor maps of A
/// and B and on C (f32) at `m x n x k`, adding to C where the launch accumulates.
#[cfg(not(target_arch = "nvptx64"))]
macro_rules! wgmma_launch {
    ($kernel:ident) => {
        |launcher, buffers, [m, n, k, ..]| {
            let (a_map, b_map) = (buffers.tensor_map(0)?, buffers.tensor_map(1)?);
            let c = buffers.output::<f32>()?;
            let (m, n, k) = (m as u32, n as u32, k as u32);
            let accumulate = u32::from(buffers.accumulate);
            crate::launch_registered!(
                launcher,
                wgmma_geometry(m, n),
                $kernel(a_map, b_map, c, m, n, k, accumulate)
            )
        }
    };
}

/// A step's [`Spec::launch`](crate::registry::Spec::launch): its kernel on A and B of `$input`
/// and C (f32) at `m x n x k`, on the grid of `$geometry`, adding to C where the launch
/// accumulates.
#[cfg(not(target_arch = "nvptx64"))]
macro_rules! gemm_launch {
    ($kernel:ident, $geometry:ident, $input:ty) => {
        |launcher, buffers, [m, n, k, ..]| {
            let (a, b) = (buffers.input::<$input>(0)?, buffers.input::<$input>(1)?);
            let c = buffers.output::<f32>()?;
            let (m, n, k) = (m as u32, n as u32, k as u32);
            let accumulate = u32::from(buffers.accumulate);
            crate::launch_registered!(
                launcher,
                $geometry(m, n),
                $kernel(a, b, c, m, n, k, accumulate)
            )
        }
    };
}

/// What the steps' specs differ in beside their kernel, launch and cost.
#[cfg(not(target_arch = "nvptx64"))]
struct Step {
    test_max: crate::registry::Dims,
    multiple: crate::registry::Dims,
    tolerance: fn(crate::registry::Dims) -> f64,
    occupancy: crate::registry::Occupancy,
    /// Step 5's tensor maps and sm_90a build; none and every build for the others.
    tensor_maps: fn(crate::registry::Dims) -> std::vec::Vec<crate::registry::TensorMaps>,
    sm90a_only: bool,
}

/// Steps 1 to 3: f32 on the CUDA cores, any shape, `threads` per block and no dynamic shared
/// memory.
#[cfg(not(target_arch = "nvptx64"))]
const fn f32_step(threads: u32) -> Step {
    Step {
        // Past the register-blocked kernel's 128 x 128 tile in M and N, and past the tiled
        // kernel's 32-deep K step, one draw in a few; at most 200 x 200 x 48 keeps the three
        // steps' draws to a fraction of a second each on the emulator.
        test_max: [200, 200, 48, 1, 1],
        multiple: [1, 1, 1, 1, 1],
        // In units of the magnitude: [`f32_error_bound`], a rounding-error bound of K fused
        // multiply-adds in f32 (one rounding more than an overwrite makes: an accumulation's).
        tolerance: |[_, _, k, ..]| f32_error_bound(k),
        occupancy: crate::registry::Occupancy {
            threads,
            dynamic_shared: 0,
            in_flight_per_thread: None,
        },
        tensor_maps: |_| std::vec![],
        sm90a_only: false,
    }
}

/// Step 4: bf16 or f16 on the tensor cores.
#[cfg(not(target_arch = "nvptx64"))]
const TENSOR_CORE_STEP: Step = Step {
    // Past the 128 x 128 block tile in M and N, and up to three 64-deep K tiles (the pipeline's
    // three stages filled); K and N multiples of 8 ([`TC_ROW_MULTIPLE`]), M free.
    test_max: [200, 200, 136, 1, 1],
    multiple: [1, TC_ROW_MULTIPLE as usize, TC_ROW_MULTIPLE as usize, 1, 1],
    // In units of the magnitude: [`tensor_core_error_bound`].
    tolerance: |[_, _, k, ..]| tensor_core_error_bound(k),
    occupancy: crate::registry::Occupancy {
        threads: TC_THREADS,
        dynamic_shared: TC_SHARED_BYTES,
        in_flight_per_thread: None,
    },
    tensor_maps: |_| std::vec![],
    sm90a_only: false,
};

/// Step 5: bf16 or f16 through the TMA to `wgmma`, on sm_90a only.
#[cfg(not(target_arch = "nvptx64"))]
const WGMMA_STEP: Step = Step {
    // Past the 128 x 256 block tile in M and N (two blocks each way, the TMA zero-filling the
    // second's outside), and five 64-deep K tiles: the 4-stage ring goes round once more, so the
    // producer waits for a released stage and the mbarriers' parity flips. K and N multiples of
    // 8 (a tensor map's row pitch is a multiple of 16 bytes), M free. The property test leaves
    // the Hopper kernels to their own tests (tests/tests/gemm.rs), whose draws cover these.
    test_max: [136, 264, 320, 1, 1],
    multiple: [1, TC_ROW_MULTIPLE as usize, TC_ROW_MULTIPLE as usize, 1, 1],
    // In units of the magnitude: [`tensor_core_error_bound`], as step 4.
    tolerance: |[_, _, k, ..]| tensor_core_error_bound(k),
    occupancy: crate::registry::Occupancy {
        threads: WG_THREADS,
        dynamic_shared: WG_SHARED_BYTES,
        in_flight_per_thread: None,
    },
    tensor_maps: wgmma_maps,
    sm90a_only: true,
};

/// The spec every step shares: `C = A B` on row-major matrices, A `m x k` and B `k x n` of `T`
/// (rounded to it by the harness), C f32; the steps differ in their kernel, their launch, the
/// tile whose strips they read once (their cost) and their [`Step`].
#[cfg(not(target_arch = "nvptx64"))]
const fn gemm_spec<T: crate::registry::Element>(
    name: &'static str,
    what: &'static str,
    launch: crate::registry::LaunchFn,
    cost: fn(crate::registry::Dims) -> crate::registry::Cost,
    step: Step,
) -> crate::registry::Spec {
    use crate::registry::*;
    Spec {
        name,
        what,
        dims: &["m", "n", "k"],
        shapes: Shapes {
            run: RUN,
            test_max: step.test_max,
            multiple: step.multiple,
            // The f64 reference of a whole 4096^3 product takes minutes on a CPU.
            gpu_rows_checked: Some(16),
        },
        inputs: |[m, n, k, ..]| std::vec![Buffer::of::<T>(m * k), Buffer::of::<T>(k * n)],
        input_range: (-1.0, 1.0),
        values_steer: false,
        affine_keys: None,
        output: |[m, n, ..]| Buffer::f32(m * n),
        rows: |[m, ..]| m,
        workspaces: |_| std::vec![],
        indices: |_| std::vec![],
        tensor_maps: step.tensor_maps,
        sm90a_only: step.sm90a_only,
        launch,
        // From the definition, in f64, on the values the kernel reads, with each element's
        // magnitude `sum_k |a_ik b_kj|`, which the tolerance multiplies.
        reference: |inputs, [_, n, k, ..], rows| {
            let b_t = transposed(inputs[1], (n, k));
            let (values, magnitudes) = rows
                .iter()
                .flat_map(|&i| reference_row(inputs[0], &b_t, None, (n, k), i))
                .map(|e| (e.value, e.magnitude))
                .unzip();
            Expected {
                values,
                magnitudes: Some(magnitudes),
            }
        },
        tolerance: step.tolerance,
        cost,
        accumulates: true,
        occupancy: step.occupancy,
        baseline: Some(Baseline {
            op: "matmul",
            dims: &["m", "n", "k"],
        }),
    }
}

/// Step 1 (docs/gemm.md).
#[cfg(not(target_arch = "nvptx64"))]
pub const GEMM_NAIVE_F32: crate::registry::Spec = gemm_spec::<f32>(
    "gemm_naive_f32",
    "C = A B in f32, one thread per element of C",
    gemm_launch!(gemm_naive_f32, naive_geometry, f32),
    |dims| tiled_cost(NAIVE_REUSE, 4, dims),
    f32_step(NAIVE_BLOCK * NAIVE_BLOCK),
);

/// Step 2.
#[cfg(not(target_arch = "nvptx64"))]
pub const GEMM_TILED_F32: crate::registry::Spec = gemm_spec::<f32>(
    "gemm_tiled_f32",
    "C = A B in f32 through 32 x 32 shared-memory tiles",
    gemm_launch!(gemm_tiled_f32, tiled_geometry, f32),
    |dims| tiled_cost(TILED, 4, dims),
    f32_step(TILED.m * TILED.n),
);

/// Step 3.
#[cfg(not(target_arch = "nvptx64"))]
pub const GEMM_REGISTER_BLOCKED_F32: crate::registry::Spec = gemm_spec::<f32>(
    "gemm_register_blocked_f32",
    "C = A B in f32, 128 x 128 block tiles, 8 x 8 per thread in registers",
    gemm_launch!(gemm_register_blocked_f32, register_blocked_geometry, f32),
    |dims| tiled_cost(REGISTER_BLOCKED, 4, dims),
    f32_step(REGISTER_BLOCKED_THREADS),
);

/// Step 4's cost: its tiles' traffic with 2-byte inputs, and the FLOPs its `mma`s execute,
/// padding included ([`padded_flops`]): the emulator counts those, and at every run shape they
/// are the useful `2 m n k`.
#[cfg(not(target_arch = "nvptx64"))]
fn tensor_core_cost(dims: crate::registry::Dims) -> crate::registry::Cost {
    crate::registry::Cost {
        flops: padded_flops(TENSOR_CORE, dims),
        unit: crate::registry::ComputeUnit::TensorCore16,
        ..tiled_cost(TENSOR_CORE, 2, dims)
    }
}

/// Step 4 in bf16.
#[cfg(not(target_arch = "nvptx64"))]
pub const GEMM_TENSOR_CORE_BF16: crate::registry::Spec = gemm_spec::<Bf16>(
    "gemm_tensor_core_bf16",
    "C = A B, bf16 in, f32 out, on the tensor cores (mma.sync, cp.async pipeline)",
    gemm_launch!(gemm_tensor_core_bf16, tensor_core_geometry, Bf16),
    tensor_core_cost,
    TENSOR_CORE_STEP,
);

/// Step 4 in f16.
#[cfg(not(target_arch = "nvptx64"))]
pub const GEMM_TENSOR_CORE_F16: crate::registry::Spec = gemm_spec::<F16>(
    "gemm_tensor_core_f16",
    "C = A B, f16 in, f32 out, on the tensor cores (mma.sync, cp.async pipeline)",
    gemm_launch!(gemm_tensor_core_f16, tensor_core_geometry, F16),
    tensor_core_cost,
    TENSOR_CORE_STEP,
);

/// Step 5's cost: its 128 x 256 tiles' traffic with 2-byte inputs ([`tiled_cost`]: the TMA
/// reads nothing outside A and B), and the useful `2 m n k` FLOPs (every run shape is a
/// multiple of its tiles).
#[cfg(not(target_arch = "nvptx64"))]
fn wgmma_cost(dims: crate::registry::Dims) -> crate::registry::Cost {
    crate::registry::Cost {
        unit: crate::registry::ComputeUnit::TensorCore16,
        ..tiled_cost(WGMMA, 2, dims)
    }
}

/// Step 5 in bf16 (docs/gemm.md): TMA, an mbarrier pipeline, warp specialisation and `wgmma`.
#[cfg(not(target_arch = "nvptx64"))]
pub const GEMM_WGMMA_BF16: crate::registry::Spec = gemm_spec::<Bf16>(
    "gemm_wgmma_bf16",
    "C = A B, bf16 in, f32 out, on Hopper (TMA, mbarrier pipeline, wgmma); sm_90a only",
    wgmma_launch!(gemm_wgmma_bf16),
    wgmma_cost,
    WGMMA_STEP,
);

/// Step 5 in f16.
#[cfg(not(target_arch = "nvptx64"))]
pub const GEMM_WGMMA_F16: crate::registry::Spec = gemm_spec::<F16>(
    "gemm_wgmma_f16",
    "C = A B, f16 in, f32 out, on Hopper (TMA, mbarrier pipeline, wgmma); sm_90a only",
    wgmma_launch!(gemm_wgmma_f16),
    wgmma_cost,
    WGMMA_STEP,
);
