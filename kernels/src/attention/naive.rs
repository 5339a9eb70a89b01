//! Attention as written: `S = scale Q K^T` to HBM, `P = softmax(S)` to HBM, `O = P V`.
//!
//! Two of the three steps are here; the middle one is the softmax chapter's fused row-softmax
//! kernel, run on the `batch * heads * n_q` rows of S. Both kernels here are ordinary
//! shared-memory-tiled matrix products (64 x 64 output tiles, 16 x 16 threads with a 4 x 4 or
//! 4 x d/16 register tile each): reasonable kernels on their own, and still the slow flow,
//! because S and P (`n_q x n_kv` per head) cross the HBM boundary four times between them
//! (docs/attention.md counts them).
//!
//! Masked scores are written as `-inf`, which the softmax turns into probability 0 (and a fully
//! masked row into zeros), so `P V` needs no mask of its own.

use super::{is_visible, row_offset};
use crate::cuda::GlobalPtr;
use crate::cuda::intrinsics::{count_flops, fma};
use crate::cuda::thread::{block_idx_x, block_idx_y, block_idx_z, sync_threads};
use crate::cuda::thread::{thread_idx_x, thread_idx_y};
use crate::{kernel, shared_array};

/// Threads per block along x and y (256 threads), and the width of the tiles staged in shared
/// memory along the reduction (16 columns of d for `Q K^T`, 16 keys for `P V`).
pub const THREADS: usize = 16;
/// Rows (and, for S, columns) of a block's output tile: each thread owns `PER_THREAD` rows
/// `y, y + 16, ...` (and columns `x, x + 16, ...`), so a tile of Q, K or V read from HBM serves
/// 64 rows of output before it is dropped.
pub const OUT_TILE: usize = THREADS * PER_THREAD;
const PER_THREAD: usize = 4;
/// Row stride of the `[64 x 16]` shared tiles: 17 words, so 16 threads reading 16 different
/// rows at the same column hit 16 different banks.
const STRIDE: usize = THREADS + 1;
/// The widest head the `P V` kernel's shared `V` tile holds.
const MAX_D: usize = 128;

/// Copies a `[64 x 16]` tile, rows `r0..` and columns `c0..` of a `rows x cols` matrix, from HBM
/// into shared memory (zeros past the last row), 4 elements per thread; each half-warp reads 16
/// consecutive floats of one row.
#[inline(always)]
unsafe fn load_64x16(
    src: GlobalPtr<f32>,
    rows: usize,
    cols: usize,
    r0: usize,
    c0: usize,
    dst: crate::cuda::SharedPtr<f32>,
) {
    let (x, y) = (thread_idx_x() as usize, thread_idx_y() as usize);
    for a in 0..PER_THREAD {
        let r = y + THREADS * a;
        let value = if r0 + r < rows && c0 + x < cols {
            unsafe { src.read((r0 + r) * cols + c0 + x) }
        } else {
            0.0
        };
        unsafe { dst.write(r * STRIDE + x, value) };
    }
}

kernel! {
    /// `S[bh, i, j] = scale * q_i . k_j` where query `i` sees key `j`, `-inf` where it does not.
    /// Grid `(ceil(n_kv / 64), ceil(n_q / 64), batch * heads)`, blocks of `16 x 16`: the block's
    /// 64 Q rows and 64 K rows go through shared memory 16 columns of `d` at a time, so Q is
    /// read from HBM once per key tile and K once per query tile (the cost model's re-reads).
    pub unsafe fn attention_scores_f32(
        q: GlobalPtr<f32>, k: GlobalPtr<f32>, s: GlobalPtr<f32>,
        n_q: u32, n_kv: u32, d: u32, scale: f32, causal: u32,
    ) {
        let (n_q, n_kv, d) = (n_q as usize, n_kv as usize, d as usize);
        let (x, y) = (thread_idx_x() as usize, thread_idx_y() as usize);
        let (j0, i0, bh) = (block_idx_x() as usize * OUT_TILE, block_idx_y() as usize * OUT_TILE, block_idx_z() as usize);
        let (q, k) = (q.offset(row_offset(bh, n_q, 0, d)), k.offset(row_offset(bh, n_kv, 0, d)));
        // Shared: [64 x 16] of Q (rows i0..) and of K (rows j0..). Registers: a 4 x 4 tile of S.
        let q_s = shared_array![q_s: [f32; OUT_TILE * STRIDE]];
        let k_s = shared_array![k_s: [f32; OUT_TILE * STRIDE]];
        let mut acc = [[0.0f32; PER_THREAD]; PER_THREAD];
        let mut c0 = 0;
        while c0 < d {
            unsafe {
                load_64x16(q, n_q, d, i0, c0, q_s);
                load_64x16(k, n_kv, d, j0, c0, k_s);
            }
            sync_threads();
            for cc in 0..THREADS {
                let (mut qa, mut kb) = ([0.0f32; PER_THREAD], [0.0f32; PER_THREAD]);
                for a in 0..PER_THREAD {
                    qa[a] = unsafe { q_s.read((y + THREADS * a) * STRIDE + cc) };
                    kb[a] = unsafe { k_s.read((x + THREADS * a) * STRIDE + cc) };
                }
                for (row, q_a) in acc.iter_mut().zip(&qa) {
                    for (a, k_b) in row.iter_mut().zip(&kb) {
                        *a = fma(*q_a, *k_b, *a);
                    }
                }
            }
            sync_threads();
            c0 += THREADS;
        }
        for (a, row) in acc.iter().enumerate() {
            let i = i0 + y + THREADS * a;
            for (b, dot) in row.iter().enumerate() {
                let j = j0 + x + THREADS * b;
                if i < n_q && j < n_kv {
                    // Every product is computed, masked or not: `2 d` FLOPs per pair. A
                    // causal-aware kernel would skip the tiles above the diagonal.
                    count_flops(2 * d as u32);
                    let visible = is_visible(i, j, n_q, n_kv, causal != 0);
                    let score = if visible { scale * dot } else { f32::NEG_INFINITY };
                    unsafe { s.write(row_offset(bh, n_q, i, n_kv) + j, score) };
                }
            }
        }
    }
}

/// `O = P V` for head dimension `D`: the kernels below fix it.
#[inline(always)]
unsafe fn probabilities_times_values<const D: usize>(
    p: GlobalPtr<f32>,
    v: GlobalPtr<f32>,
    o: GlobalPtr<f32>,
    n_q: usize,
    n_kv: usize,
) {
    // This thread's part of the [64 x D] output tile: rows y + 16 a, columns x + 16 u.
    let cols = const { D / THREADS };
    let (x, y) = (thread_idx_x() as usize, thread_idx_y() as usize);
    let (i0, bh) = (block_idx_x() as usize * OUT_TILE, block_idx_y() as usize);
    let (p, v) = (
        p.offset(row_offset(bh, n_q, 0, n_kv)),
        v.offset(row_offset(bh, n_kv, 0, D)),
    );
    // Shared: [64 x 16] of P (rows i0.., keys j0..) and [16 x D] of V (keys j0..).
    let p_s = shared_array![p_s: [f32; OUT_TILE * STRIDE]];
    let v_s = shared_array![v_s: [f32; THREADS * MAX_D]];
    let mut acc = [[0.0f32; MAX_D / THREADS]; PER_THREAD];
    let mut j0 = 0;
    while j0 < n_kv {
        unsafe { load_64x16(p, n_q, n_kv, i0, j0, p_s) };
        for u in 0..cols {
            let (j, c) = (j0 + y, x + THREADS * u);
            let value = if j < n_kv {
                unsafe { v.read(j * D + c) }
            } else {
                0.0
            };
            unsafe { v_s.write(y * D + c, value) };
        }
        sync_threads();
        for jj in 0..THREADS {
            let mut pa = [0.0f32; PER_THREAD];
            for (a, p_a) in pa.iter_mut().enumerate() {
                *p_a = unsafe { p_s.read((y + THREADS * a) * STRIDE + jj) };
            }
            for (row, p_a) in acc.iter_mut().zip(&pa) {
                for (u, a) in row.iter_mut().enumerate().take(cols) {
                    *a = fma(*p_a, unsafe { v_s.read(jj * D + x + THREADS * u) }, *a);
                }
            }
        }
        sync_threads();
        j0 += THREADS;
    }
    for (a, row) in acc.iter().enumerate() {
        let i = i0 + y + THREADS * a;
        if i < n_q {
            // The FLOPs done: 2 d per key, the products with the zeros of masked keys
            // included, shared by the row's 16 threads.
            count_flops((2 * cols * n_kv) as u32);
            for (u, value) in row.iter().enumerate().take(cols) {
                unsafe { o.write(row_offset(bh, n_q, i, D) + x + THREADS * u, *value) };
            }
        }
    }
}

kernel! {
    /// `O = P V`, head dimension 64. Grid `(ceil(n_q / 64), batch * heads)`, blocks of
    /// `16 x 16`: a block computes 64 whole rows of O, so P is read from HBM exactly once and V
    /// once per query tile (the re-reads).
    pub unsafe fn attention_pv_f32_d64(p: GlobalPtr<f32>, v: GlobalPtr<f32>, o: GlobalPtr<f32>, n_q: u32, n_kv: u32) {
        unsafe { probabilities_times_values::<64>(p, v, o, n_q as usize, n_kv as usize) }
    }
}

kernel! {
    /// `O = P V`, head dimension 128; as [`attention_pv_f32_d64`].
    pub unsafe fn attention_pv_f32_d128(p: GlobalPtr<f32>, v: GlobalPtr<f32>, o: GlobalPtr<f32>, n_q: u32, n_kv: u32) {
        unsafe { probabilities_times_values::<128>(p, v, o, n_q as usize, n_kv as usize) }
    }
}
