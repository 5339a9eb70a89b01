//! Step 1: one thread per element of C, every operand straight from global memory.
//!
//! `C[i][j] = sum_k A[i][k] B[k][j]`: thread (i, j) reads row i of A and column j of B, K values
//! each, and does 2K FLOPs: 2 FLOPs per 8 bytes requested, 0.25 FLOP/byte. Nothing is shared
//! between threads, so A is requested N times over and B M times: the "tile" whose strips are
//! read once is a single element (docs/gemm.md, step 1).

use super::{NAIVE_BLOCK, at, store_c};
use crate::cuda::GlobalPtr;
use crate::cuda::intrinsics::{count_flops, fma};
use crate::cuda::thread::{block_idx_x, block_idx_y, thread_idx_x, thread_idx_y};
use crate::kernel;

kernel! {
    /// `C = A B (+ C)` for row-major f32 matrices, A M x K, B K x N, C M x N; `accumulate` is 0
    /// (overwrite C) or 1 (add to it). Launch: blocks of 16 x 16 threads ([`NAIVE_BLOCK`]),
    /// `ceil(N / 16)` x `ceil(M / 16)` of them.
    pub unsafe fn gemm_naive_f32(
        a: GlobalPtr<f32>,
        b: GlobalPtr<f32>,
        c: GlobalPtr<f32>,
        m: u32,
        n: u32,
        k: u32,
        accumulate: u32,
    ) {
        // x runs along a row of C, and x is what varies fastest across a warp. A warp of a 16 x 16
        // block is two rows of 16 lanes: they read 16 consecutive B[kk][j] (one 64-byte request,
        // the same for both rows) and two A values, A[i][kk] and A[i + 1][kk], each broadcast to
        // 16 lanes. Those two words lie K floats apart, in the same bank of the L1's SRAM, which
        // reads them one after the other (docs/model.md, "L1").
        let j = block_idx_x() * NAIVE_BLOCK + thread_idx_x();
        let i = block_idx_y() * NAIVE_BLOCK + thread_idx_y();
        if i >= m || j >= n {
            return;
        }
        let mut acc = 0.0;
        for kk in 0..k {
            // SAFETY: i < M, j < N and kk < K: inside A and B.
            acc = unsafe { fma(a.read(at(i, kk, k)), b.read(at(kk, j, n)), acc) };
        }
        count_flops(2 * k);
        // SAFETY: inside C, and (i, j) belongs to this thread alone.
        unsafe { store_c(c, i, j, m, n, acc, accumulate != 0) };
    }
}
