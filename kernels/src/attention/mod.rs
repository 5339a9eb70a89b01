//! Attention `O = softmax(scale * Q K^T [+ causal mask]) V`, as written and fused.
//!
//! Q and O are `batch x heads x n_q x d`, K and V `batch x heads x n_kv x d`, all row-major and
//! contiguous; the per-row log-sum-exp `LSE = log sum_j exp(S_ij)` is `batch x heads x n_q`.
//! `bh = b * heads + h` numbers the (batch, head) pairs: every head is independent.
//!
//! Two flows, the same arithmetic (docs/attention.md counts their bytes):
//! - [`naive`]: S = scale Q K^T written to HBM, P = softmax(S) written to HBM (the softmax
//!   chapter's fused row-softmax kernel), O = P V. S and P are `n_q x n_kv` per head.
//! - [`flash_f32`]: FlashAttention's forward pass in one kernel; S and P never leave the chip.
//!   [`flash_mma`] is the same on `mma.sync` tensor cores, [`flash_wgmma`] on Hopper's `wgmma`
//!   fed by the TMA (FlashAttention-3's structure, sm_90a).
//!
//! # The mask, and when a row is fully masked
//!
//! Query `i` sees key `j` when `j < n_kv` and, if causal, when `j <= i + (n_kv - n_q)`: the
//! queries are the *last* `n_q` positions of the key sequence (the bottom-right aligned causal
//! mask of FlashAttention 2.1 and later; with `n_q == n_kv` it is the usual `j <= i`). So with
//! `n_q > n_kv` and a causal mask, the first `n_q - n_kv` queries come before every key and see
//! nothing: such a *fully masked* row has output zeros and `LSE = -inf`, never NaN.
//!
//! # Infinities and NaN (one rule for every flow and the reference)
//!
//! Each row of scores `S_i = scale q_i K^T` (masked entries `-inf`) is computed in IEEE
//! arithmetic and then follows the softmax chapter's rule (`crate::softmax`): `-inf` scores get
//! probability 0; a row that is all `-inf` gives zeros and `LSE = -inf`; a row with `k >= 1`
//! scores equal to `+inf` (and no NaN) gives each of them `1/k`, so `O_i` is the mean of those
//! keys' V rows and `LSE = +inf`; any NaN score makes `O_i` and `LSE_i` NaN. So:
//! - `+inf` in Q row `i` makes its scores `±inf` (NaN where it meets a zero or infinities of
//!   both signs): usually a finite `O_i`, the mean of the V rows of the keys that score `+inf`;
//! - NaN in Q row `i` makes row `i` NaN; NaN in K row `j` makes every row that sees key `j` NaN;
//! - NaN in `V[j][c]` makes column `c` of `O` NaN in every row that sees key `j` (its
//!   probability times NaN is NaN, even a probability of 0). Whether a row that does *not* see
//!   key `j` gets it too depends on the flow's tiling: do not rely on it.
//!
//! The fused kernels get this from the softmax chapter's own `exp2_shifted` and `maximum`; the
//! naive flow from its softmax kernel; `host::reference::attention` implements the rule directly.
//!
//! Everything a kernel and its host cost model must agree on (tile shapes, which K/V rows a
//! query block loads, which pairs are visible) is defined once, here.

pub mod flash_f32;
pub mod flash_mma;
pub mod flash_wgmma;
pub mod naive;
pub mod naive_mma;
#[cfg(not(target_arch = "nvptx64"))]
mod spec;

#[cfg(not(target_arch = "nvptx64"))]
pub use spec::*;

use crate::cuda::GlobalPtr;

// The entry points, one path segment from the crate (as the host's `launch!` names them).
pub use flash_f32::{flash_attention_f32_d64, flash_attention_f32_d128};
pub use flash_mma::{
    flash_attention_bf16_d64, flash_attention_bf16_d128, flash_attention_bf16_poly_d64,
    flash_attention_f16_d64, flash_attention_f16_d128,
};
pub use flash_wgmma::{
    flash_attention_wgmma_bf16_d64, flash_attention_wgmma_bf16_d128, flash_attention_wgmma_f16_d64,
    flash_attention_wgmma_f16_d128,
};
pub use naive::{attention_pv_f32_d64, attention_pv_f32_d128, attention_scores_f32};
pub use naive_mma::{
    attention_pv_bf16_d64, attention_pv_bf16_d128, attention_pv_f16_d64, attention_pv_f16_d128,
    attention_scores_bf16_d64, attention_scores_bf16_d128, attention_scores_f16_d64,
    attention_scores_f16_d128,
};

/// Head dimensions the kernels are built for (each is a separate kernel with `d` fixed at
/// compile time, so that the per-row accumulators are arrays of known size, i.e. registers).
pub const HEAD_DIMS: [u32; 2] = [64, 128];

/// `log2(e)`: the kernels keep scores in base 2 (scaled once by this) so that each exponential
/// is one `ex2.approx`, and convert the log-sum-exp back to base e at the end.
pub const LOG2_E: f32 = core::f32::consts::LOG2_E;

/// Taylor coefficients of `2^f = e^(f ln 2)`: `(ln 2)^k / k!`, k = 1..4.
const EXP2_TAYLOR: [f32; 4] = [
    core::f32::consts::LN_2,
    0.240_226_5,
    0.055_504_11,
    0.009_618_129,
];

/// [`exp2_fma`]'s relative error bound, which the tests allow for on top of the SFU kernel's.
pub const EXP2_FMA_MAX_REL_ERROR: f32 = 1e-4;

/// The most negative exponent [`exp2_fma`] returns a normal number for; below it, 0 (as
/// `ex2.approx.ftz` flushes results under 2^-126 to zero).
pub const EXP2_FMA_MIN: f32 = -125.0;

/// `2^x` on the FMA units instead of the special function units (FlashAttention-4's trick for
/// Blackwell, where the 16 exponentials per clock per SM bound attention): round `x` to the
/// nearest integer `n`, take `2^f` for `f = x - n` in `[-0.5, 0.5]` as a degree-4 polynomial
/// (4 FMAs), and put `n` into the exponent bits. Relative error below 1e-4 (the Taylor remainder
/// `(ln 2 / 2)^5 / 5!` times at most `2^0.5`: 6e-5), far under the 2^-8 of the bf16 it is
/// rounded to for `P V`. `-inf` and anything below
/// [`EXP2_FMA_MIN`] give 0, NaN gives NaN; meant for the softmax's `x <= 0`.
#[inline(always)]
pub fn exp2_fma(x: f32) -> f32 {
    use crate::cuda::intrinsics::fma;
    if x.is_nan() {
        return x;
    }
    if x < EXP2_FMA_MIN {
        return 0.0;
    }
    // Round to nearest by adding and subtracting 1.5 x 2^23 (exact for |x| < 2^22).
    const ROUND: f32 = 12_582_912.0;
    let n = (x + ROUND) - ROUND;
    let f = x - n;
    let [c1, c2, c3, c4] = EXP2_TAYLOR;
    let p = fma(fma(fma(fma(c4, f, c3), f, c2), f, c1), f, 1.0);
    // 2^n x p: add n to p's exponent field (p is in [0.7, 1.42], n >= -125: a normal result).
    f32::from_bits((p.to_bits() as i32 + ((n as i32) << 23)) as u32)
}

/// Element offset of row `row` of head `bh` in a `heads x rows x d` tensor.
#[inline(always)]
pub const fn row_offset(bh: usize, rows: usize, row: usize, d: usize) -> usize {
    (bh * rows + row) * d
}

/// Q, K, V, O moved to the start of head `bh` (Q and O have `n_q` rows of `d`, K and V `n_kv`),
/// and the log-sum-exp to the head's first row.
#[inline(always)]
pub fn select_head<T: Copy>(
    [q, k, v, o]: [GlobalPtr<T>; 4],
    lse: GlobalPtr<f32>,
    bh: usize,
    (n_q, n_kv, d): (usize, usize, usize),
) -> ([GlobalPtr<T>; 4], GlobalPtr<f32>) {
    let (at_q, at_kv) = (row_offset(bh, n_q, 0, d), row_offset(bh, n_kv, 0, d));
    let qkvo = [
        q.offset(at_q),
        k.offset(at_kv),
        v.offset(at_kv),
        o.offset(at_q),
    ];
    (qkvo, lse.offset(bh * n_q))
}

/// Whether query `i` sees key `j` (the mask above). `j + n_q <= i + n_kv` is
/// `j <= i + n_kv - n_q` without a negative intermediate.
#[inline(always)]
pub const fn is_visible(i: usize, j: usize, n_q: usize, n_kv: usize, causal: bool) -> bool {
    j < n_kv && (!causal || j + n_q <= i + n_kv)
}

/// How many keys query `i` sees: `4 d` FLOPs each (2 d for its score, 2 d for `P V`), the
/// attention FLOP count of the cost models.
#[inline(always)]
pub const fn visible_keys(i: usize, n_q: usize, n_kv: usize, causal: bool) -> usize {
    if causal {
        let end = (i + 1 + n_kv).saturating_sub(n_q);
        if end < n_kv { end } else { n_kv }
    } else {
        n_kv
    }
}

/// The keys a block of query rows `[i0, i0 + rows)` needs: `[0, kv_end)`. Non-causal, all of
/// them; causal, up to the last visible key of its last real row (rows past `n_q` do not count).
#[inline(always)]
pub const fn kv_end(i0: usize, rows: usize, n_q: usize, n_kv: usize, causal: bool) -> usize {
    let last = if i0 + rows < n_q { i0 + rows } else { n_q };
    if last == 0 {
        return 0;
    }
    visible_keys(last - 1, n_q, n_kv, causal)
}

/// The K (and V) rows a query block actually loads: whole tiles of `tile` keys up to `kv_end`,
/// cut at `n_kv` (rows past the end of K are never read; the tile is zero-filled there).
#[inline(always)]
pub const fn kv_rows_loaded(kv_end: usize, tile: usize, n_kv: usize) -> usize {
    let rows = kv_end.div_ceil(tile) * tile;
    if rows < n_kv { rows } else { n_kv }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the exact 2^x (f64) on a fine grid of [-125, 0] and at the edges: relative error
    /// under 1e-4; 2^0 = 1 and 2^-1 = 0.5 exactly; -inf and very negative give 0, NaN NaN.
    #[test]
    fn exp2_fma_is_within_1e_4_of_the_exact_power() {
        let mut worst = 0.0f64;
        for i in 0..=250_000 {
            let x = -125.0 * i as f32 / 250_000.0;
            let exact = 2f64.powf(f64::from(x));
            let got = f64::from(exp2_fma(x));
            worst = worst.max((got - exact).abs() / exact);
        }
        assert!(
            worst < f64::from(EXP2_FMA_MAX_REL_ERROR),
            "worst relative error {worst:e}"
        );
        assert!(
            worst > 1e-7,
            "a degree-4 polynomial is not this exact: {worst:e}"
        );
        assert_eq!(exp2_fma(0.0), 1.0);
        assert_eq!(exp2_fma(-1.0), 0.5);
        assert_eq!(exp2_fma(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp2_fma(-200.0), 0.0);
        assert!(exp2_fma(f32::NAN).is_nan());
    }

    #[test]
    fn the_causal_mask_is_bottom_right_aligned() {
        // n_q == n_kv: the usual lower triangle.
        assert!(is_visible(3, 3, 8, 8, true) && !is_visible(3, 4, 8, 8, true));
        // 2 queries, 5 keys: they are positions 3 and 4 of the key sequence.
        assert!(is_visible(0, 3, 2, 5, true) && !is_visible(0, 4, 2, 5, true));
        assert_eq!(visible_keys(0, 2, 5, true), 4);
        // 5 queries, 2 keys: queries 0..3 precede every key.
        assert_eq!(
            (0..5)
                .map(|i| visible_keys(i, 5, 2, true))
                .collect::<std::vec::Vec<_>>(),
            [0, 0, 0, 1, 2]
        );
        assert!(!is_visible(7, 8, 8, 8, false) && is_visible(0, 7, 8, 8, false));
    }

    #[test]
    fn kv_end_stops_at_the_last_real_rows_diagonal() {
        // 100 queries and keys, blocks of 64: block 0 needs keys 0..64, block 1 all 100.
        assert_eq!(kv_end(0, 64, 100, 100, true), 64);
        assert_eq!(kv_end(64, 64, 100, 100, true), 100);
        assert_eq!(kv_end(0, 64, 100, 100, false), 100);
        // Every row of the block fully masked: no key at all.
        assert_eq!(kv_end(0, 4, 10, 3, true), 0);
        assert_eq!(kv_rows_loaded(0, 16, 3), 0);
        assert_eq!(kv_rows_loaded(64, 16, 100), 64);
        assert_eq!(kv_rows_loaded(65, 16, 100), 80);
        assert_eq!(kv_rows_loaded(100, 16, 100), 100);
    }
}
