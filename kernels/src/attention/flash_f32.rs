//! FlashAttention forward, f32 on CUDA cores: one kernel, S and P never reach HBM.
//!
//! One block per (query tile `Q_i`, head); one thread per query row. The block copies `Q_i`
//! (`BR x d`) from HBM into shared memory once, then streams the key/value tiles `K_j`, `V_j`
//! (`BC x d` each) through shared memory. For each tile, every thread computes its row of the
//! scores `S_i^(j) = Q_i K_j^T` in registers and folds it into three running quantities (paper
//! notation, Dao 2023, Algorithm 1; one row of each per thread):
//!
//! ```text
//! m_i^(j) = max(m_i^(j-1), rowmax(S_i^(j)))                          running max
//! P_i^(j) = exp(S_i^(j) - m_i^(j))                                   unnormalised probabilities
//! l_i^(j) = exp(m_i^(j-1) - m_i^(j)) l_i^(j-1) + rowsum(P_i^(j))     running sum, rescaled
//! O_i^(j) = exp(m_i^(j-1) - m_i^(j)) O_i^(j-1) + P_i^(j) V_j          output accumulator, rescaled
//! ```
//!
//! After the last tile it writes `O_i = O_i^(last) / l_i^(last)` and
//! `LSE_i = m_i^(last) + log l_i^(last)`: the only HBM writes. Starting from `m = -inf, l = 0,
//! O = 0`, a row that sees no key at all ends as `O = 0`, `LSE = -inf`.
//!
//! Where each piece lives: `m`, `l` and the `BC` scores of the current tile in registers; `Q_i`,
//! `K_j`, `V_j` and the accumulator `O_i` in shared memory. (A row of `O` is `d` = 64 or 128
//! floats; as registers it would need every loop over `d` unrolled and 128+ registers per
//! thread. Here each thread keeps its own row of `O_i` in shared memory, read and written once
//! per tile. The tensor-core kernel, with `d` spread over a warp, keeps `O_i` in registers.)
//!
//! Scores are kept in base 2 (`scale * log2(e)` applied once) so each `exp` is one `ex2.approx`.

use super::{LOG2_E, is_visible, kv_end, select_head};
use crate::cuda::intrinsics::{count_flops, fma, log2_approx};
use crate::cuda::shared::dynamic_shared_mem;
use crate::cuda::thread::{block_idx_x, block_idx_y, sync_threads, thread_idx_x};
use crate::cuda::{GlobalPtr, SharedPtr};
use crate::kernel;
use crate::softmax::{exp2_shifted, maximum};

/// Query rows per block, one thread each: the rows that share every K/V tile loaded from HBM.
pub const BR: usize = 64;
/// Threads per block: one per query row.
pub const THREADS: usize = BR;
/// Keys per K/V tile: one row of scores for one tile, `BC` f32, lives in registers.
pub const BC: usize = 16;
/// Padding of each row of `Q_i` and `O_i` in shared memory: thread `r` works on row `r`, and a
/// row stride of `d + 1` words puts the rows a warp touches at once in 32 different banks.
pub const ROW_PAD: usize = 1;

/// Dynamic shared memory of the kernel for head dimension `d`: `Q_i` and `O_i` (padded rows),
/// `K_j` and `V_j`.
pub const fn shared_bytes(d: usize) -> usize {
    (2 * BR * (d + ROW_PAD) + 2 * BC * d) * core::mem::size_of::<f32>()
}

/// Copies rows `[first, first + tile_rows)` of a `rows x D` matrix from HBM into a shared tile
/// with row stride `stride`, zero-filling rows past `rows` (they exist in no tensor). The block's
/// threads take consecutive elements, so a warp reads 32 consecutive floats (coalesced).
#[inline(always)]
unsafe fn load_tile<const D: usize>(
    src: GlobalPtr<f32>,
    first: usize,
    rows: usize,
    dst: SharedPtr<f32>,
    tile_rows: usize,
    stride: usize,
) {
    let mut e = thread_idx_x() as usize;
    while e < tile_rows * D {
        let (r, c) = (e / D, e % D);
        let x = if first + r < rows {
            unsafe { src.read((first + r) * D + c) }
        } else {
            0.0
        };
        unsafe { dst.write(r * stride + c, x) };
        e += THREADS;
    }
}

/// The inverse of [`load_tile`] for the output: rows `[first, min(first + BR, rows))` of a
/// shared tile with row stride `stride` to HBM, coalesced.
#[inline(always)]
unsafe fn store_tile<const D: usize>(
    src: SharedPtr<f32>,
    stride: usize,
    dst: GlobalPtr<f32>,
    first: usize,
    rows: usize,
) {
    let mut e = thread_idx_x() as usize;
    while e < BR * D {
        let (r, c) = (e / D, e % D);
        if first + r < rows {
            unsafe { dst.write((first + r) * D + c, src.read(r * stride + c)) };
        }
        e += THREADS;
    }
}

/// The whole forward pass for head dimension `D`; the kernels below fix `D`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn flash_forward<const D: usize>(
    q: GlobalPtr<f32>,
    k: GlobalPtr<f32>,
    v: GlobalPtr<f32>,
    o: GlobalPtr<f32>,
    lse: GlobalPtr<f32>,
    n_q: usize,
    n_kv: usize,
    scale: f32,
    causal: bool,
) {
    let bh = block_idx_y() as usize;
    let i0 = block_idx_x() as usize * BR; // first query row of this block
    let r = thread_idx_x() as usize; // this thread's row of the tile ...
    let i = i0 + r; // ... and of the head
    let ([q, k, v, o], lse) = select_head([q, k, v, o], lse, bh, (n_q, n_kv, D));

    // Shared memory: Q_i, O_i [BR x (D + ROW_PAD)], K_j, V_j [BC x D].
    let stride = D + ROW_PAD;
    let q_s = dynamic_shared_mem::<f32>();
    let o_s = q_s.offset(BR * stride);
    let k_s = o_s.offset(BR * stride);
    let v_s = k_s.offset(BC * D);
    let (q_row, o_row) = (q_s.offset(r * stride), o_s.offset(r * stride));

    // Q_i: HBM -> shared, once for the whole pass. O_i = 0 (each thread its own row).
    unsafe { load_tile::<D>(q, i0, n_q, q_s, BR, stride) };
    for c in 0..D {
        unsafe { o_row.write(c, 0.0) };
    }
    // m_i, l_i: registers.
    let scale_log2 = scale * LOG2_E;
    let mut m = f32::NEG_INFINITY;
    let mut l = 0.0f32;

    let kv_end = kv_end(i0, BR, n_q, n_kv, causal);
    let mut j0 = 0;
    while j0 < kv_end {
        // K_j, V_j: HBM -> shared. The barrier before: every thread is done with the last tile
        // (and, the first time, Q_i is complete); the one after: this tile is.
        sync_threads();
        unsafe {
            load_tile::<D>(k, j0, n_kv, k_s, BC, D);
            load_tile::<D>(v, j0, n_kv, v_s, BC, D);
        }
        sync_threads();

        // S_i^(j) = q_i K_j^T: BC scores in registers. K_j[jj][c] is the same word for every
        // thread of the warp: a broadcast, no bank conflict.
        let mut s = [0.0f32; BC];
        for c in 0..D {
            let q_c = unsafe { q_row.read(c) };
            for (jj, s_j) in s.iter_mut().enumerate() {
                *s_j = fma(q_c, unsafe { k_s.read(jj * D + c) }, *s_j);
            }
        }
        // Scale (base 2), mask, and m_i^(j) = max(m_i^(j-1), rowmax(S_i^(j))).
        let mut seen = 0;
        for (jj, s_j) in s.iter_mut().enumerate() {
            let visible = is_visible(i, j0 + jj, n_q, n_kv, causal);
            *s_j = if visible {
                *s_j * scale_log2
            } else {
                f32::NEG_INFINITY
            };
            seen += visible as usize;
        }
        let m_new = s.iter().fold(m, |m, s_j| maximum(m, *s_j));
        // P_i^(j) = exp(S_i^(j) - m_i^(j)), in place of S; its rowsum. `exp2_shifted` gives the
        // softmax chapter's special values (a masked -inf is 0, +inf against a +inf max is 1, a
        // NaN stays NaN): see `kernels::attention`.
        let mut rowsum = 0.0f32;
        for s_j in s.iter_mut() {
            *s_j = exp2_shifted(*s_j, m_new);
            rowsum += *s_j;
        }
        // l_i^(j) = exp(m_i^(j-1) - m_i^(j)) l_i^(j-1) + rowsum(P_i^(j)).
        let alpha = exp2_shifted(m, m_new);
        l = fma(alpha, l, rowsum);
        // O_i^(j) = exp(m_i^(j-1) - m_i^(j)) O_i^(j-1) + P_i^(j) V_j, column by column: one
        // read and one write of this thread's row of O_i per tile; V_j[jj][c] is a broadcast.
        for c in 0..D {
            let mut acc = alpha * unsafe { o_row.read(c) };
            for (jj, p) in s.iter().enumerate() {
                acc = fma(*p, unsafe { v_s.read(jj * D + c) }, acc);
            }
            unsafe { o_row.write(c, acc) };
        }
        m = m_new;
        if i < n_q {
            count_flops((4 * D * seen) as u32);
        }
        j0 += BC;
    }

    // O_i = O_i^(last) / l_i^(last) (a fully masked row has l = 0 and stays 0), then the tile
    // goes to HBM with coalesced stores once every row is final.
    let inv_l = if l > 0.0 { 1.0 / l } else { 0.0 };
    for c in 0..D {
        unsafe { o_row.write(c, inv_l * o_row.read(c)) };
    }
    sync_threads();
    unsafe { store_tile::<D>(o_s, stride, o, i0, n_q) };
    // LSE_i = m_i^(last) + log l_i^(last), back to base e; log 0 = -inf for a masked row.
    if i < n_q {
        let lse_2 = m + log2_approx(l);
        unsafe { lse.write(i, lse_2 * core::f32::consts::LN_2) };
    }
}

kernel! {
    /// FlashAttention forward, f32, head dimension 64. Grid `(ceil(n_q / BR), batch * heads)`,
    /// `BR` threads per block, [`shared_bytes`]`(64)` bytes of dynamic shared memory.
    pub unsafe fn flash_attention_f32_d64(
        q: GlobalPtr<f32>, k: GlobalPtr<f32>, v: GlobalPtr<f32>, o: GlobalPtr<f32>, lse: GlobalPtr<f32>,
        n_q: u32, n_kv: u32, scale: f32, causal: u32,
    ) {
        unsafe { flash_forward::<64>(q, k, v, o, lse, n_q as usize, n_kv as usize, scale, causal != 0) }
    }
}

kernel! {
    /// FlashAttention forward, f32, head dimension 128; as [`flash_attention_f32_d64`].
    pub unsafe fn flash_attention_f32_d128(
        q: GlobalPtr<f32>, k: GlobalPtr<f32>, v: GlobalPtr<f32>, o: GlobalPtr<f32>, lse: GlobalPtr<f32>,
        n_q: u32, n_kv: u32, scale: f32, causal: u32,
    ) {
        unsafe { flash_forward::<128>(q, k, v, o, lse, n_q as usize, n_kv as usize, scale, causal != 0) }
    }
}
