//! # Exercise 12: one attention tile
//!
//! Write single-head attention, `o = softmax(scale q k^T) v`, for row-major f32 `q` (`n_q x
//! 32`), `k` and `v` (`n_k x 32`) and `o` (`n_q x 32`): row `i` of `o` is
//! `sum_j p_ij v_j / sum_j p_ij` with `p_ij = exp(scale q_i . k_j - m_i)` and `m_i` the row's
//! largest score. The inputs are finite and `n_k >= 1`; no mask.
//!
//! The host launches `ceil(n_q / 64)` blocks of [`ATT_ROWS`](super::shapes::ATT_ROWS) = 64
//! threads, one per query row (row `64 * blockIdx.x + threadIdx.x`; a row past `n_q` computes
//! nothing it writes, but reaches every barrier). Each thread keeps its query row, its output
//! accumulator (`[f32; ATT_D]`, [`ATT_D`](super::shapes::ATT_D) = 32) and its running max `m`
//! and sum `l` in registers. Walk the keys [`ATT_KEYS`](super::shapes::ATT_KEYS) = 16 at a time:
//! a barrier, the block copies the tile's 16 rows of `k` and of `v` into two shared arrays
//! (consecutive threads, consecutive floats; zeros past `n_k`), a barrier; then each thread
//! computes its 16 scores into a register array, leaving out the keys past `n_k`, takes the
//! tile's max `m'`, rescales `l` and the accumulator by `exp(m - m')` (0 on the first tile, where
//! `m = -inf`), and adds `p v_j` for each key. At the end, write the accumulator divided by `l`.
//! This is the recurrence of docs/attention.md ("Fused: the recurrence"); the score is cheapest
//! in base 2 (`scale * log2(e)` once, then `crate::cuda::intrinsics::exp2_approx`), or use
//! `exp_approx`. `count_flops(4 * n_k * 32)` once per output row written (`2 d` per key for the
//! score, `2 d` for `p v_j`).
//!
//! Why it matters: the textbook attention writes the `n_q x n_k` scores to HBM, reads them back
//! for the softmax, writes the probabilities and reads them again: four trips of a matrix that
//! is made and consumed inside one operation. Here a row's scores live in registers for one
//! tile and the keys in shared memory, so each block reads `k` and `v` from HBM once and
//! writes only `o`: exercise 11's running max and sum fused with two matmuls, which is
//! FlashAttention (docs/attention.md; docs/softmax.md for the online softmax). The check counts
//! the bytes your loads ask for: `q` once, `k` and `v` once per block.
//!
//! Check it: `cargo xtask exercise 12`.

use crate::cuda::GlobalPtr;
use crate::kernel;

kernel! {
    /// `o = softmax(scale q k^T) v` for row-major `q`, `o` (`n_q x 32`) and `k`, `v`
    /// (`n_k x 32`).
    pub unsafe fn e12_attention_tile(q: GlobalPtr<f32>, k: GlobalPtr<f32>, v: GlobalPtr<f32>, o: GlobalPtr<f32>, n_q: u32, n_k: u32, scale: f32) {
        // TODO: your kernel.
        let _ = (q, k, v, o, n_q, n_k, scale);
    }
}
