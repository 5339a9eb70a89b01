//! Attention as written, on tensor cores: the [`naive`](super::naive) flow with bf16 or f16 Q, K,
//! V and O, at the fused tensor-core kernel's shape.
//!
//! The same three launches: `S = scale Q K^T` to HBM, the softmax chapter's fused row softmax
//! over S into P in HBM, `O = P V`. The two products run on `mma.sync.m16n8k16` with f32
//! accumulators, built from [`flash_mma`](super::flash_mma)'s pieces: a block of 4 warps, 16
//! rows each, tiles staged by `cp.async` into padded shared rows, fragments by `ldmatrix`. What
//! differs from the fused kernel is only where S and P live: here each product ends by writing
//! its accumulators to HBM and the next launch reads them back, which is the lesson.
//!
//! S and P stay f32 in HBM, so the scores and the probabilities are exactly as exact as the fused
//! kernel's (which keeps S in f32 registers and rounds P to 16 bits just before `P V`, as step 3
//! here does): both flows have the same error bound, and the softmax in the middle is the f32
//! kernel of the softmax chapter, unchanged. (A framework's bf16 path would store S and P in
//! bf16, half of these bytes; docs/attention.md counts both.)
//!
//! Masked scores are written as `-inf`, which the softmax turns into probability 0, so `P V`
//! needs no mask of its own; every product is computed, masked or not, as in the f32 flow.

use super::flash_mma::{
    Half, ROW_PAD, THREADS, accumulator_at, b_fragment_row, copy_tile_async, pack, store_o, x4_lane,
};
use super::{is_visible, row_offset};
use crate::cuda::mma::{ldmatrix_x4, mma_m16n8k16};
use crate::cuda::pipeline::{cp_async_commit_group, cp_async_wait_group};
use crate::cuda::shared::dynamic_shared_mem;
use crate::cuda::thread::{block_idx_x, block_idx_y, block_idx_z, sync_threads, thread_idx_x};
use crate::cuda::warp::{WARP_SIZE, lane_id};
use crate::cuda::{Bf16, F16, GlobalPtr};
use crate::{kernel, unroll};

/// Rows of a block's tile: 4 warps of 16 query rows (the M of `m16n8k16`). The scores kernel's
/// tile is `TILE x TILE` of S (64 queries by 64 keys); `P V` streams V `TILE` keys at a time.
pub const TILE: usize = 64;
/// Registers are sized for the largest head dimension (the fused kernel's); a `d = 64` kernel
/// uses half.
const MAX_D: usize = super::flash_mma::MAX_D;

// The unrolled loops below are written for these sizes: TILE / 8 = 8 score pieces and 4 k-steps
// of P V; d / 16 <= 8 k-steps of Q K^T, d / 8 <= 16 output pieces.
const _: () = assert!(TILE == 64 && THREADS == 4 * WARP_SIZE as usize && MAX_D == 128);

/// Dynamic shared memory of the scores kernel for head dimension `d`: the Q and K tiles, padded
/// rows of 2-byte elements.
pub const fn scores_shared_bytes(d: usize) -> usize {
    2 * TILE * (d + ROW_PAD) * 2
}

/// Dynamic shared memory of the `P V` kernel: one V tile.
pub const fn pv_shared_bytes(d: usize) -> usize {
    TILE * (d + ROW_PAD) * 2
}

/// This warp's first row in its block's tile, and its lane.
#[inline(always)]
fn warp_row_and_lane() -> (usize, usize) {
    ((thread_idx_x() as usize / 32) * 16, lane_id() as usize)
}

/// `S[bh, i, j] = scale * q_i . k_j` where query `i` sees key `j`, `-inf` where it does not, for
/// head dimension `D`; the kernels below fix it and the type.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn scores<T: Half, const D: usize>(
    q: GlobalPtr<T>,
    k: GlobalPtr<T>,
    s: GlobalPtr<f32>,
    n_q: usize,
    n_kv: usize,
    scale: f32,
    causal: bool,
) {
    let (j0, i0, bh) = (
        block_idx_x() as usize * TILE,
        block_idx_y() as usize * TILE,
        block_idx_z() as usize,
    );
    let (w0, lane) = warp_row_and_lane();
    let (q, k) = (q.offset(row_offset(bh, n_q, 0, D)), k.offset(row_offset(bh, n_kv, 0, D)));
    let s = s.offset(row_offset(bh, n_q, 0, n_kv));

    // Shared: the block's 64 rows of Q and 64 rows of K, whole (d is the reduction: one stage).
    let stride = D + ROW_PAD;
    let q_s = dynamic_shared_mem::<T>();
    let k_s = q_s.offset(TILE * stride);
    unsafe {
        copy_tile_async::<T, D>(q, i0, n_q, q_s, TILE);
        copy_tile_async::<T, D>(k, j0, n_kv, k_s, TILE);
    }
    cp_async_commit_group();
    cp_async_wait_group::<0>();
    sync_threads();

    // Registers: the warp's [16 x 64] of S, 8 accumulator fragments; d / 16 k-steps, each one
    // A fragment of Q and 4 ldmatrix of K (two 8-key B fragments each), as in the fused kernel.
    let mut acc = [[0.0f32; 4]; TILE / 8];
    let (ar, ac) = x4_lane(lane);
    let (br, bc) = b_fragment_row(lane);
    let (q_lane, k_lane) = (q_s.offset((w0 + ar) * stride + ac), k_s.offset(br * stride + bc));
    unroll!(kk in 0..8 {
        if kk < D / 16 {
            let a = unsafe { ldmatrix_x4(q_lane.offset(kk * 16), false) };
            unroll!(pair in 0..4 {
                let nt = 2 * pair;
                let b = unsafe { ldmatrix_x4(k_lane.offset(nt * 8 * stride + kk * 16), false) };
                acc[nt] = mma_m16n8k16(T::INPUT, a, [b[0], b[1]], acc[nt]);
                acc[nt + 1] = mma_m16n8k16(T::INPUT, a, [b[2], b[3]], acc[nt + 1]);
            });
        }
    });

    // Scaled and masked, each register to its element of S (inside S only): what the fused
    // kernel keeps in registers goes to HBM here.
    unroll!(nt in 0..8 {
        unroll!(e in 0..4 {
            let (r, c) = accumulator_at(lane, e);
            let (i, j) = (i0 + w0 + r, j0 + nt * 8 + c);
            if i < n_q && j < n_kv {
                let visible = is_visible(i, j, n_q, n_kv, causal);
                let score = if visible { scale * acc[nt][e] } else { f32::NEG_INFINITY };
                unsafe { s.write(i * n_kv + j, score) };
            }
        });
    });
}

/// The A fragment of the `16 x 16` block of P at rows `r0..`, keys `j0..`, read from HBM and
/// rounded to `T`: lane `(g, t)` holds rows `g` and `g + 8` at keys `2t, 2t + 1` and
/// `2t + 8, 2t + 9` (the accumulator layout of two 8-key pieces, which is the A layout, as the
/// fused kernel uses it). Zeros outside P.
#[inline(always)]
unsafe fn p_fragment<T: Half>(
    p: GlobalPtr<f32>,
    (r0, j0): (usize, usize),
    lane: usize,
    (n_q, n_kv): (usize, usize),
) -> [u32; 4] {
    let at = |r: usize, c: usize| {
        let (i, j) = (r0 + r, j0 + c);
        if i < n_q && j < n_kv {
            unsafe { p.read(i * n_kv + j) }
        } else {
            0.0
        }
    };
    // Register h: rows g (h even) or g + 8 (h odd), keys of the first (h < 2) or second 8.
    core::array::from_fn(|h| {
        let (r, c) = accumulator_at(lane, 2 * (h % 2));
        let c = c + 8 * (h / 2);
        pack::<T>(at(r, c), at(r, c + 1))
    })
}

/// `O = P V` for head dimension `D`; the kernels below fix it and the type.
#[inline(always)]
unsafe fn probabilities_times_values<T: Half, const D: usize>(
    p: GlobalPtr<f32>,
    v: GlobalPtr<T>,
    o: GlobalPtr<T>,
    n_q: usize,
    n_kv: usize,
) {
    let (i0, bh) = (block_idx_x() as usize * TILE, block_idx_y() as usize);
    let (w0, lane) = warp_row_and_lane();
    let p = p.offset(row_offset(bh, n_q, 0, n_kv));
    let (v, o) = (v.offset(row_offset(bh, n_kv, 0, D)), o.offset(row_offset(bh, n_q, 0, D)));

    // Shared: one V tile [64 x D]. Registers: the warp's [16 x D] of O, D / 8 fragments.
    let stride = D + ROW_PAD;
    let v_s = dynamic_shared_mem::<T>();
    let (vr, vc) = x4_lane(lane);
    let v_lane = v_s.offset(vr * stride + vc);
    let mut o_acc = [[0.0f32; 4]; MAX_D / 8];
    let mut j0 = 0;
    while j0 < n_kv {
        unsafe { copy_tile_async::<T, D>(v, j0, n_kv, v_s, TILE) };
        cp_async_commit_group();
        cp_async_wait_group::<0>();
        sync_threads();
        // 4 k-steps of 16 keys: P's fragment from HBM, V's by ldmatrix.trans, as in the fused
        // kernel's `O += P V`.
        unroll!(kk in 0..4 {
            let a = unsafe { p_fragment::<T>(p, (i0 + w0, j0 + kk * 16), lane, (n_q, n_kv)) };
            unroll!(pair in 0..8 {
                let nd = 2 * pair;
                if nd < D / 8 {
                    let b = unsafe { ldmatrix_x4(v_lane.offset(kk * 16 * stride + nd * 8), true) };
                    o_acc[nd] = mma_m16n8k16(T::INPUT, a, [b[0], b[1]], o_acc[nd]);
                    o_acc[nd + 1] = mma_m16n8k16(T::INPUT, a, [b[2], b[3]], o_acc[nd + 1]);
                }
            });
        });
        // Every warp is done with this V tile before the next copy overwrites it.
        sync_threads();
        j0 += TILE;
    }

    // O = P V, from the accumulators to HBM (P's rows already sum to 1: no rescale).
    unsafe { store_o::<T, D>(o, &o_acc, [1.0; 2], lane, i0 + w0, n_q) };
}

macro_rules! naive_mma_kernels {
    ($t:ty, $d:literal, $scores:ident, $pv:ident) => {
        kernel! {
            /// `S = scale Q K^T` (masked scores `-inf`, S in f32) on the tensor cores. Grid
            /// `(ceil(n_kv / 64), ceil(n_q / 64), batch * heads)`, `THREADS` threads,
            /// [`scores_shared_bytes`] of dynamic shared memory.
            pub unsafe fn $scores(
                q: GlobalPtr<$t>, k: GlobalPtr<$t>, s: GlobalPtr<f32>,
                n_q: u32, n_kv: u32, scale: f32, causal: u32,
            ) {
                unsafe { scores::<$t, $d>(q, k, s, n_q as usize, n_kv as usize, scale, causal != 0) }
            }
        }
        kernel! {
            /// `O = P V` on the tensor cores, P f32 rounded on the way in. Grid
            /// `(ceil(n_q / 64), batch * heads)`, `THREADS` threads, [`pv_shared_bytes`] of
            /// dynamic shared memory.
            pub unsafe fn $pv(p: GlobalPtr<f32>, v: GlobalPtr<$t>, o: GlobalPtr<$t>, n_q: u32, n_kv: u32) {
                unsafe { probabilities_times_values::<$t, $d>(p, v, o, n_q as usize, n_kv as usize) }
            }
        }
    };
}

naive_mma_kernels!(Bf16, 64, attention_scores_bf16_d64, attention_pv_bf16_d64);
naive_mma_kernels!(Bf16, 128, attention_scores_bf16_d128, attention_pv_bf16_d128);
naive_mma_kernels!(F16, 64, attention_scores_f16_d64, attention_pv_f16_d64);
naive_mma_kernels!(F16, 128, attention_scores_f16_d128, attention_pv_f16_d128);
