//! # Exercise 11: the online softmax
//!
//! Write the softmax of each row of a `rows x cols` row-major matrix of finite values:
//! `out[r][c] = exp(x[r][c] - m_r) / l_r`, with `m_r` the row's max and `l_r = sum_c exp(x[r][c]
//! - m_r)`, reading each row twice, not three times.
//!
//! The host launches `ceil(rows / 8)` blocks of [`SOFTMAX_THREADS`](super::shapes::SOFTMAX_THREADS)
//! = 256 threads: one warp per row (row `8 * blockIdx.x + threadIdx.x / 32`). Each lane walks
//! its columns `lane, lane + 32, ...` keeping a running max `m` and sum `l`: a value above `m`
//! rescales `l` by `exp(m - v)` before it adds its own 1 (the online recurrence). Then merge the
//! 32 lanes' `(m, l)` with five `shuffle_xor` steps (`l = l exp(m - M) + l' exp(m' - M)` with
//! `M = max(m, m')`; mind `m = m' = -inf` for a lane that saw no column), and a second pass
//! writes `exp(x - m) / l`. Use `crate::cuda::intrinsics::exp_approx` (`__expf`).
//!
//! Why it matters: the textbook softmax reads the row three times (max, sum, normalise). Its
//! running max and sum live in registers, so the online form needs one read fewer; fused into
//! attention it needs none at all, which is FlashAttention (docs/softmax.md, docs/attention.md).
//!
//! Check it: `cargo xtask exercise 11`.

use crate::cuda::GlobalPtr;
use crate::kernel;

kernel! {
    /// `out[r][c] = exp(x[r][c] - max_r) / sum_c' exp(x[r][c'] - max_r)`.
    pub unsafe fn e11_softmax_online(x: GlobalPtr<f32>, out: GlobalPtr<f32>, rows: u32, cols: u32) {
        // TODO: your kernel.
        let _ = (x, out, rows, cols);
    }
}
