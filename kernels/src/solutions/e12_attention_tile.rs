//! Exercise 12, solved: one thread per query row, the keys and values streamed through shared
//! memory 16 rows at a time, each tile's scores in registers and folded into a running max,
//! sum and output accumulator (docs/attention.md, "Fused: the recurrence"). HBM sees `q` once,
//! `k` and `v` once per block, and `o` once; the scores never leave the SM.

use crate::cuda::intrinsics::{count_flops, exp2_approx, fma};
use crate::cuda::thread::{block_idx_x, sync_threads, thread_idx_x};
use crate::cuda::{GlobalPtr, SharedPtr};
use crate::exercises::shapes::{ATT_D, ATT_KEYS, ATT_ROWS};
use crate::{kernel, shared_array};

/// Copies rows `[first, first + ATT_KEYS)` of an `n x ATT_D` matrix from HBM into a shared tile,
/// zeros past row `n`. Consecutive threads take consecutive floats: a warp reads 32 in a row,
/// one 128-byte line.
#[inline(always)]
unsafe fn load_tile(src: GlobalPtr<f32>, first: usize, n: usize, tile: SharedPtr<f32>) {
    let mut e = thread_idx_x() as usize;
    while e < ATT_KEYS * ATT_D {
        let row = first + e / ATT_D;
        let x = if row < n {
            unsafe { src.read(row * ATT_D + e % ATT_D) }
        } else {
            0.0
        };
        unsafe { tile.write(e, x) };
        e += ATT_ROWS as usize;
    }
}

kernel! {
    /// `o = softmax(scale q k^T) v` for row-major `q`, `o` (`n_q x 32`) and `k`, `v`
    /// (`n_k x 32`).
    pub unsafe fn e12_attention_tile(q: GlobalPtr<f32>, k: GlobalPtr<f32>, v: GlobalPtr<f32>, o: GlobalPtr<f32>, n_q: u32, n_k: u32, scale: f32) {
        let k_tile: SharedPtr<f32> = shared_array![k_tile: [f32; ATT_KEYS * ATT_D]];
        let v_tile: SharedPtr<f32> = shared_array![v_tile: [f32; ATT_KEYS * ATT_D]];
        let (n_q, n_k) = (n_q as usize, n_k as usize);
        let i = block_idx_x() as usize * ATT_ROWS as usize + thread_idx_x() as usize;
        // Registers, for the whole pass: this row of q (zeros past n_q: such a thread computes
        // on zeros, writes nothing, and reaches every barrier), of the output, and m, l.
        let mut q_i = [0.0f32; ATT_D];
        if i < n_q {
            for (c, q_ic) in q_i.iter_mut().enumerate() {
                *q_ic = unsafe { q.read(i * ATT_D + c) };
            }
        }
        let mut acc = [0.0f32; ATT_D];
        let (mut m, mut l) = (f32::NEG_INFINITY, 0.0f32);
        // Scores in base 2, so that each exponential is one ex2.
        let scale_log2 = scale * core::f32::consts::LOG2_E;
        let mut j0 = 0;
        while j0 < n_k {
            // The barrier before: every thread is done reading the previous tile; after: this
            // one is complete.
            sync_threads();
            unsafe {
                load_tile(k, j0, n_k, k_tile);
                load_tile(v, j0, n_k, v_tile);
            }
            sync_threads();
            // This tile's scores, in registers. k_tile[jj][c] is the same word for every thread
            // of the warp: a broadcast, no bank conflict.
            let mut s = [f32::NEG_INFINITY; ATT_KEYS];
            let mut m_new = m;
            for (jj, s_j) in s.iter_mut().enumerate() {
                if j0 + jj < n_k {
                    let mut dot = 0.0f32;
                    for (c, &q_ic) in q_i.iter().enumerate() {
                        dot = fma(q_ic, unsafe { k_tile.read(jj * ATT_D + c) }, dot);
                    }
                    *s_j = dot * scale_log2;
                    m_new = m_new.max(*s_j);
                }
            }
            // The tile holds a key, so m_new is finite: alpha is 0 on the first tile (m = -inf),
            // else the rescale of everything summed so far from the old max to the new one.
            let alpha = exp2_approx(m - m_new);
            l *= alpha;
            for a in acc.iter_mut() {
                *a *= alpha;
            }
            for (jj, &s_j) in s.iter().enumerate() {
                if j0 + jj < n_k {
                    let p = exp2_approx(s_j - m_new);
                    l += p;
                    for (c, a) in acc.iter_mut().enumerate() {
                        *a = fma(p, unsafe { v_tile.read(jj * ATT_D + c) }, *a);
                    }
                }
            }
            m = m_new;
            j0 += ATT_KEYS;
        }
        if i < n_q {
            count_flops((4 * n_k * ATT_D) as u32);
            // l >= 1: the row's largest score contributes exp2(0). Each thread writes its own
            // row, as it read its row of q: a warp's access spans 32 lines, but once per row,
            // against the ceil(n_k / 16) tiles of the loop.
            for (c, &a) in acc.iter().enumerate() {
                unsafe { o.write(i * ATT_D + c, a / l) };
            }
        }
    }
}
