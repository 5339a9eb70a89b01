//! GEMV and skinny GEMM: `Y = X W^T` for a few rows of activations.
//!
//! `W` is `N x K` row-major (PyTorch's `nn.Linear` weight: row `n` holds the `K` weights of
//! output feature `n`, contiguous), `X` is `M x K` and `Y` is `M x N`, all bf16, with
//! `y[m, n] = sum_k x[m, k] w[n, k]` accumulated in f32 and rounded once to bf16. `M` = 1 to 16
//! (the batch of a decode step); `K` and `N` are free.
//!
//! # Where the bytes go
//!
//! At `M = 1` each weight is used for one multiply-add: 2 FLOPs per 2-byte weight, 1 FLOP per
//! byte, 1/300 of an H100's tensor-core ridge and 1/20 of its CUDA-core one. Nothing about the
//! arithmetic matters; the kernel is as fast as it streams `W` from HBM, so it reads every byte
//! of `W` exactly once, with 16-byte loads (`ld.global.v4`, 8 weights), coalesced: the 32 lanes of
//! a warp read 512 consecutive bytes of a row.
//!
//! One block of [`THREADS`] threads owns [`ROWS_PER_BLOCK`] rows of `W`. Thread `t` takes the
//! chunks `t, t + THREADS, ...` of each of those rows (8 weights a chunk), multiplies them with
//! the same chunks of every row of `X` and keeps `ROWS_PER_BLOCK x M` running sums in registers.
//! The chunks of `X` come from L2 (all of `X` is at most 16 x K x 2 bytes, 448 KiB at
//! K = 14336, and every block reads it): each is loaded once per block and used for all
//! `ROWS_PER_BLOCK` rows, which is why a block owns several rows. At the end the 32 lanes of each
//! warp are summed with five shuffles, and the warps' sums through shared memory.
//!
//! # Bytes in flight
//!
//! Little's law: to sustain a bandwidth `B` against a latency `L`, `B x L` bytes must be on their
//! way at every moment. An H200 streams 4.8 TB/s (perf/src/specs.rs); an HBM access takes about
//! 600 cycles on an idle GPU (docs/pyramid.md, 0.3 us at 2 GHz) and roughly 0.6 to 0.8 us on a
//! saturated one, so 3 to 4 MB must be in flight, 22 to 29 KiB per SM of its 132 (an H100 at
//! 3.35 TB/s: 15 to 20 KiB; `cargo xtask hierarchy` measures the latency on a GPU). Each thread issues its [`ROWS_PER_BLOCK`] 16-byte loads of `W`
//! before it uses any of them, so a block has `THREADS x ROWS_PER_BLOCK x 16` = 16 KiB of `W` in
//! flight. How many blocks share an SM is set by registers (`cargo xtask ptxas`, sm_90): 48 a
//! thread at `M` = 1, so 5 blocks and 80 KiB in flight; 95 at `M` = 8, 2 blocks, 32 KiB; 161 at
//! `M` = 16, one block, 16 KiB, short of the target (docs/decode.md). The grid is
//! `N / ROWS_PER_BLOCK` blocks, 1024 even for the 4096-row down projection: every SM gets several.
//!
//! # K not a multiple of 8
//!
//! A 16-byte load needs a 16-byte aligned address, and row `n` of `W` starts at byte `2 n K`: with
//! `K` a multiple of 8 every row (and every row of `X`) is aligned and the kernel uses 16-byte
//! chunks; otherwise it runs the same loop with one-element chunks ([`Scalar1`]), which moves the
//! same bytes in 8x the load instructions. The projections of real models have `K` a multiple of
//! 8; the scalar path is there so that no shape is refused.
//!
//! # FLOP accounting
//!
//! Each multiply-add of a weight with an activation counts 2; the reductions across lanes and
//! warps (`ROWS_PER_BLOCK x M` sums per block, independent of `K`) are not counted, as in the
//! softmax kernels.

use super::{BF16_PER_VECTOR, widen_bf16x8};
use crate::cuda::intrinsics::{count_flops, fma};
use crate::cuda::thread::{block_idx_x, sync_threads, thread_idx_x};
use crate::cuda::warp::{WARP_SIZE, lane_id, reduce_sum};
use crate::cuda::{Bf16, GlobalPtr};
use crate::elementwise::Words4;
use crate::{kernel, shared_array, unroll};

/// Threads per block: 8 warps share each row of `W`, so one block has 16 KiB of it in flight.
pub const THREADS: u32 = 256;
/// Rows of `W` (output features) per block: each chunk of `X` loaded from L2 serves this many
/// rows. 4 keeps the `4 x M` accumulators of `M` = 16 within 64 registers.
pub const ROWS_PER_BLOCK: usize = 4;
/// Rows of `X` per entry point: the kernel for tile `MT` takes any `M <= MT` (its accumulator
/// arrays are sized at compile time, so that they stay in registers).
pub const M_TILES: [u32; 5] = [1, 2, 4, 8, 16];
/// The largest `M` a launch takes.
pub const MAX_M: u32 = 16;
/// Warps per block.
const WARPS: usize = (THREADS / WARP_SIZE) as usize;
/// FLOPs per multiply-add.
pub const FMA_FLOPS: u32 = 2;

/// A run of consecutive bf16 values one thread loads at once: 8 ([`Vector8`], one 16-byte load)
/// or 1 ([`Scalar1`]). The loop of [`gemv_pass`] is written once over this trait.
trait Chunk: Copy {
    /// Values per chunk.
    const LEN: usize;
    /// Loads chunk `c` of `row`: values `c * LEN .. (c + 1) * LEN`.
    ///
    /// # Safety
    /// The row holds them, and for [`Vector8`] starts on a 16-byte boundary.
    unsafe fn load(row: GlobalPtr<Bf16>, c: usize) -> Self;
    /// The values, widened to f32 (after the load has been issued: see [`gemv_pass`]).
    fn widen(self) -> [f32; BF16_PER_VECTOR];
}

/// Eight bf16 values, 16 bytes, one `ld.global.v4.b32`.
#[derive(Clone, Copy)]
struct Vector8(Words4);
/// One bf16 value (the path for `K` not a multiple of 8).
#[derive(Clone, Copy)]
struct Scalar1(Bf16);

impl Chunk for Vector8 {
    const LEN: usize = BF16_PER_VECTOR;
    #[inline(always)]
    unsafe fn load(row: GlobalPtr<Bf16>, c: usize) -> Self {
        // SAFETY: the caller's contract.
        Vector8(unsafe { row.cast::<Words4>().read(c) })
    }
    #[inline(always)]
    fn widen(self) -> [f32; BF16_PER_VECTOR] {
        widen_bf16x8(self.0)
    }
}

impl Chunk for Scalar1 {
    const LEN: usize = 1;
    #[inline(always)]
    unsafe fn load(row: GlobalPtr<Bf16>, c: usize) -> Self {
        // SAFETY: the caller's contract.
        Scalar1(unsafe { row.read(c) })
    }
    #[inline(always)]
    fn widen(self) -> [f32; BF16_PER_VECTOR] {
        let mut out = [0.0; BF16_PER_VECTOR];
        out[0] = self.0.to_f32();
        out
    }
}

/// The first row of `W` that block `block` owns.
#[inline(always)]
pub const fn first_row(block: u32) -> u32 {
    block * ROWS_PER_BLOCK as u32
}

/// How many rows block `block` owns: [`ROWS_PER_BLOCK`], fewer in the last block when `N` is not
/// a multiple of it.
#[inline(always)]
pub const fn rows_of_block(block: u32, n: u32) -> u32 {
    let left = n - first_row(block);
    if left < ROWS_PER_BLOCK as u32 {
        left
    } else {
        ROWS_PER_BLOCK as u32
    }
}

/// This thread's sums `acc[r][i] = sum over its chunks of w[row r] . x[row i]`: the streaming
/// loop, written once for both chunk widths.
///
/// # Safety
/// `w` points at the block's first row of a matrix with `k` columns and `rows` valid rows; `x`
/// holds `m` rows of `k`; for [`Vector8`], `k` is a multiple of 8 and both are 16-byte aligned.
#[inline(always)]
unsafe fn dot_chunks<C: Chunk, const MT: usize>(
    w: GlobalPtr<Bf16>,
    x: GlobalPtr<Bf16>,
    (m, rows, k): (u32, u32, u32),
    acc: &mut [[f32; MT]; ROWS_PER_BLOCK],
) {
    let chunks = k as usize / C::LEN;
    let mut c = thread_idx_x() as usize;
    while c < chunks {
        // HBM -> registers: this thread's chunk of each of the block's rows, every load issued
        // before any value is used, so that ROWS_PER_BLOCK loads per thread are in flight.
        let mut wc = [None::<C>; ROWS_PER_BLOCK];
        unroll!(r in 0..4 {
            if r < ROWS_PER_BLOCK && (r as u32) < rows {
                // SAFETY: row r < rows exists, and chunk c < k / LEN lies inside it.
                wc[r] = Some(unsafe { C::load(w.offset(r * k as usize), c) });
            }
        });
        unroll!(i in 0..16 {
            if i < MT && (i as u32) < m {
                // L2 -> registers: the same chunk of row i of X, used for every row of W.
                // SAFETY: row i < m of X exists; chunk c lies inside it.
                let xc = unsafe { C::load(x.offset(i * k as usize), c) }.widen();
                unroll!(r in 0..4 {
                    // W stays packed (two bf16 a register) until here: half the registers.
                    if let Some(wr) = wc[r] {
                        let wr = wr.widen();
                        for e in 0..C::LEN {
                            acc[r][i] = fma(wr[e], xc[e], acc[r][i]);
                        }
                    }
                });
            }
        });
        count_flops(FMA_FLOPS * C::LEN as u32 * rows * m);
        c += THREADS as usize;
    }
}

/// The whole kernel for row tile `MT`: the entry points below fix it.
///
/// # Safety
/// Blocks of [`THREADS`] threads, `ceil(n / ROWS_PER_BLOCK)` of them; `w` holds `n x k`, `x`
/// `m x k` and `y` `m x n` elements, `1 <= m <= MT`.
#[inline(always)]
unsafe fn gemv_pass<const MT: usize>(
    w: GlobalPtr<Bf16>,
    x: GlobalPtr<Bf16>,
    y: GlobalPtr<Bf16>,
    (m, n, k): (u32, u32, u32),
) {
    let block = block_idx_x();
    let row0 = first_row(block);
    let rows = rows_of_block(block, n);
    let w = w.offset(row0 as usize * k as usize);
    // Registers: ROWS_PER_BLOCK x MT running sums.
    let mut acc = [[0.0f32; MT]; ROWS_PER_BLOCK];
    if (k as usize).is_multiple_of(BF16_PER_VECTOR) {
        // SAFETY: every row of W and X starts 2 k bytes after the last, a multiple of 16.
        unsafe { dot_chunks::<Vector8, MT>(w, x, (m, rows, k), &mut acc) };
    } else {
        // SAFETY: the launch contract.
        unsafe { dot_chunks::<Scalar1, MT>(w, x, (m, rows, k), &mut acc) };
    }

    // Registers -> one sum per warp (shuffles), -> shared memory -> one sum per block.
    let partials = shared_array![gemv_partials: [f32; WARPS * ROWS_PER_BLOCK * MAX_M as usize]];
    let warp = (thread_idx_x() / WARP_SIZE) as usize;
    let slot = |w: usize, r: usize, i: usize| (w * ROWS_PER_BLOCK + r) * MAX_M as usize + i;
    unroll!(r in 0..4 {
        unroll!(i in 0..16 {
            if i < MT && (i as u32) < m && (r as u32) < rows {
                let sum = reduce_sum(acc[r][i]);
                if lane_id() == 0 {
                    // SAFETY: one writer per slot (warp, r, i).
                    unsafe { partials.write(slot(warp, r, i), sum) };
                }
            }
        });
    });
    sync_threads();
    // Thread (r, i) adds the warps' sums for y[i, row0 + r] and writes it.
    let t = thread_idx_x() as usize;
    let (r, i) = (t / MAX_M as usize, t % MAX_M as usize);
    if r < rows as usize && i < m as usize {
        let mut sum = 0.0f32;
        for w in 0..WARPS {
            // SAFETY: written before the barrier by warp w.
            sum += unsafe { partials.read(slot(w, r, i)) };
        }
        // SAFETY: i < m, row0 + r < n; one writer per element.
        unsafe { y.write(i * n as usize + (row0 as usize + r), Bf16::from_f32(sum)) };
    }
}

const _: () = assert!(ROWS_PER_BLOCK * MAX_M as usize <= THREADS as usize);
const _: () = assert!(ROWS_PER_BLOCK <= 4); // the unrolled loop above covers 4 rows

macro_rules! gemv_kernels {
    ($($name:ident = $mt:literal),*) => {$(
        kernel! {
            #[doc = concat!("`Y = X W^T` in bf16 (f32 accumulation) for `M <= ", stringify!($mt), "` rows of `X`: ")]
            #[doc = "`ceil(N / ROWS_PER_BLOCK)` blocks of [`THREADS`] threads."]
            pub unsafe fn $name(w: GlobalPtr<Bf16>, x: GlobalPtr<Bf16>, y: GlobalPtr<Bf16>, m: u32, n: u32, k: u32) {
                unsafe { gemv_pass::<$mt>(w, x, y, (m, n, k)) }
            }
        }
    )*};
}

gemv_kernels!(
    gemv_bf16_m1 = 1,
    gemv_bf16_m2 = 2,
    gemv_bf16_m4 = 4,
    gemv_bf16_m8 = 8,
    gemv_bf16_m16 = 16
);

// What the rest of the project needs (docs/registry.md); the GPU build never sees it.

/// The bound on each element of `Y`, which the registry's check takes with a tolerance of 1:
/// the f32 sum's error, at most `K + 13` roundings (per lane, five shuffles, eight warps) of
/// `2^-24` times the magnitude `sum_k |x_k w_k|` (the factor 1.01 covers `gamma`'s
/// denominator), then one rounding of the result to bf16, at most `2^-8` of it. A wrong
/// element is off by whole terms.
#[cfg(not(target_arch = "nvptx64"))]
fn bound(k: usize, value: f64, magnitude: f64) -> f64 {
    let gamma = 1.01 * (k + 13) as f64 * f64::from(f32::EPSILON) / 2.0;
    gamma * magnitude + (value.abs() + gamma * magnitude) / 256.0
}

/// `Y = X W^T` at `[m, k, n]`: the smallest row tile that holds `m` (its accumulators are sized
/// at compile time), on `ceil(n / ROWS_PER_BLOCK)` blocks.
#[cfg(not(target_arch = "nvptx64"))]
pub const GEMV_BF16: crate::registry::Spec = {
    use crate::launch_registered;
    use crate::registry::*;
    Spec {
        name: "gemv_bf16",
        what: "Y = X W^T in bf16 (f32 accumulation) for M <= 16 rows of X: W streamed once",
        dims: &["m", "k", "n"],
        shapes: Shapes {
            // Llama-3-8B's MLP projections at batch 1, up (4096 -> 14336) and down, and the up
            // projection at batch 16, where X's re-reads from L2 and the registers per thread
            // (one block an SM) start to tell (docs/decode.md). On the emulator, N not a
            // multiple of the block's 4 rows.
            run: &[
                RunShape {
                    gpu: [1, 4096, 14336, 1, 1],
                    emulator: [1, 1000, 301, 1, 1],
                },
                RunShape {
                    gpu: [1, 14336, 4096, 1, 1],
                    emulator: [1, 1000, 301, 1, 1],
                },
                RunShape {
                    gpu: [16, 4096, 14336, 1, 1],
                    emulator: [16, 1000, 301, 1, 1],
                },
            ],
            // Every row tile, K of both paths (a multiple of 8 one draw in eight), N past a
            // block's rows.
            test_max: [MAX_M as usize, 300, 40, 1, 1],
            multiple: [1, 1, 1, 1, 1],
            // The reference of row 0 of X, as the GPU row always checked: the first and the
            // last at batch 16.
            gpu_rows_checked: Some(2),
        },
        inputs: |[m, k, n, ..]| std::vec![Buffer::bf16(n * k), Buffer::bf16(m * k)],
        input_range: (-1.0, 1.0),
        values_steer: false,
        affine_keys: None,
        output: |[m, _, n, ..]| Buffer::bf16(m * n),
        rows: |[m, ..]| m,
        workspaces: |_| std::vec![],
        indices: |_| std::vec![],
        tensor_maps: |_| std::vec![],
        sm90a_only: false,
        launch: |launcher, buffers, [m, k, n, ..]| {
            let (w, x) = (buffers.input::<Bf16>(0)?, buffers.input::<Bf16>(1)?);
            let y = buffers.output::<Bf16>()?;
            let (m, n, k) = (m as u32, n as u32, k as u32);
            let geometry =
                LaunchConfig::grid_2d((n.div_ceil(ROWS_PER_BLOCK as u32), 1), (THREADS, 1));
            match M_TILES.into_iter().find(|&t| m <= t) {
                Some(1) => launch_registered!(launcher, geometry, gemv_bf16_m1(w, x, y, m, n, k)),
                Some(2) => launch_registered!(launcher, geometry, gemv_bf16_m2(w, x, y, m, n, k)),
                Some(4) => launch_registered!(launcher, geometry, gemv_bf16_m4(w, x, y, m, n, k)),
                Some(8) => launch_registered!(launcher, geometry, gemv_bf16_m8(w, x, y, m, n, k)),
                Some(_) => launch_registered!(launcher, geometry, gemv_bf16_m16(w, x, y, m, n, k)),
                None => Err(std::format!(
                    "gemv_bf16: M = {m} rows of X; the GEMV takes at most {MAX_M} (a batch that large is a GEMM)"
                )
                .into()),
            }
        },
        // Row i of Y from row i of X and every row of W (`W` is `B` transposed), in f64, each
        // element with its bound ([`bound`]).
        reference: |inputs, [_, k, n, ..], rows| {
            let (w, x) = (inputs[0], inputs[1]);
            let (values, bounds) = rows
                .iter()
                .flat_map(|&i| crate::gemm::reference_row(x, w, None, (n, k), i))
                .map(|e| (e.value, bound(k, e.value, e.magnitude)))
                .unzip();
            Expected {
                values,
                magnitudes: Some(bounds),
            }
        },
        // Each element's bound is stated with it.
        tolerance: |_| 1.0,
        // W once and X once per block: every block reads all of X (from L2 on a GPU, where it
        // stays: at most 448 KiB) and Y is written once. 2 FLOPs per weight and row of X.
        cost: |[m, k, n, ..]| {
            let (m, k, n) = (m as u64, k as u64, n as u64);
            let blocks = n.div_ceil(ROWS_PER_BLOCK as u64);
            // Saturating: a shape too large to count reads as u64::MAX, never wraps.
            let x = 2u64.saturating_mul(m).saturating_mul(k);
            let resident_rereads = x.saturating_mul(blocks.saturating_sub(1));
            Cost {
                bytes_read: 2u64
                    .saturating_mul(n)
                    .saturating_mul(k)
                    .saturating_add(x)
                    .saturating_add(resident_rereads),
                bytes_written: 2u64.saturating_mul(m).saturating_mul(n),
                flops: u64::from(FMA_FLOPS)
                    .saturating_mul(m)
                    .saturating_mul(n)
                    .saturating_mul(k),
                exps: 0,
                rereads: 0,
                resident_rereads,
                l2_rereads: 0,
                unit: ComputeUnit::CudaCoreF32,
            }
        },
        accumulates: false,
        // ROWS_PER_BLOCK 16-byte loads of W issued before any is used.
        occupancy: Occupancy {
            threads: THREADS,
            dynamic_shared: 0,
            in_flight_per_thread: Some(ROWS_PER_BLOCK as u32 * 16),
        },
        baseline: Some(Baseline {
            op: "linear",
            dims: &["m", "k", "n"],
        }),
    }
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_the_rows_once() {
        for n in [1u32, 3, 4, 5, 17, 4096] {
            let blocks = n.div_ceil(ROWS_PER_BLOCK as u32);
            let covered: u32 = (0..blocks).map(|b| rows_of_block(b, n)).sum();
            assert_eq!(covered, n);
            assert_eq!(first_row(blocks - 1) + rows_of_block(blocks - 1, n), n);
        }
    }
}
