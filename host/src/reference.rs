//! CPU references, in one place for tests and xtask: rayon-parallel, written for clarity, and
//! independent of the kernels (no shared code path), so that agreement means something.

use half::f16;
use rayon::prelude::*;

/// `a + b` in f32.
pub fn vector_add_f32(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.par_iter().zip(b).map(|(x, y)| x + y).collect()
}

/// `a + b` for f16, computed in f64 and rounded once to f16. The sum of two f16 values is exact in
/// f32, so this equals the kernel's f32-then-round result bit for bit.
pub fn vector_add_f16(a: &[f16], b: &[f16]) -> Vec<f16> {
    a.par_iter()
        .zip(b)
        .map(|(x, y)| f16::from_f64(x.to_f64() + y.to_f64()))
        .collect()
}

/// Deterministic pseudo-random values uniform in `[lo, hi)` (SplitMix64), so that inputs are the
/// same on every run and every machine without a random-number dependency in the runtime.
pub fn uniform(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            let unit = (z >> 40) as f32 / (1u64 << 24) as f32;
            lo + (hi - lo) * unit
        })
        .collect()
}

/// The largest absolute difference between two equally long slices (NaN if either holds a NaN
/// where the other does not).
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    let diff = |(x, y): (&f32, &f32)| {
        let same = (x.is_nan() && y.is_nan()) || x == y;
        if same { 0.0 } else { (x - y).abs() }
    };
    a.iter()
        .zip(b)
        .map(diff)
        .fold(0.0, |m, d| if d.is_nan() { f32::NAN } else { m.max(d) })
}

/// One element of a GEMM reference: the value, and the size that its rounding errors scale with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmEntry {
    /// `sum_k A[i][k] B[k][j] (+ C[i][j])`, accumulated in f64. Each product of two f32 values is
    /// exact in f64 and each of the K additions rounds at 2^-53, far below any f32 tolerance.
    pub value: f64,
    /// `sum_k |A[i][k] B[k][j]| (+ |C[i][j]|)`: a sum of n terms computed in floating point is off
    /// by at most about `n u` times this (u the unit roundoff), whatever the order of additions.
    pub magnitude: f64,
}

/// `C = A B (+ C)` for row-major A (m x k), B (k x n) and C (m x n), only for the rows listed
/// (all of them for a full check; a few for matrices too large to multiply on the CPU), row by
/// row in parallel. Returns `rows.len() * n` entries, row after row.
pub fn gemm_rows(
    a: &[f32],
    b: &[f32],
    c: Option<&[f32]>,
    (n, k): (usize, usize),
    rows: &[usize],
) -> Vec<GemmEntry> {
    // B transposed, so that each dot product runs along two contiguous rows.
    let b_t: Vec<f32> = (0..n * k).map(|x| b[(x % k) * n + x / k]).collect();
    rows.par_iter()
        .flat_map_iter(|&i| {
            let a_row = &a[i * k..(i + 1) * k];
            let b_t = &b_t;
            (0..n).map(move |j| {
                let b_col = &b_t[j * k..(j + 1) * k];
                let c0 = c.map_or(0.0, |c| f64::from(c[i * n + j]));
                let (value, magnitude) =
                    a_row
                        .iter()
                        .zip(b_col)
                        .fold((c0, c0.abs()), |(v, s), (&x, &y)| {
                            let p = f64::from(x) * f64::from(y);
                            (v + p, s + p.abs())
                        });
                GemmEntry { value, magnitude }
            })
        })
        .collect()
}

/// [`gemm_rows`] for every row: the full `m x n` reference.
pub fn gemm(
    a: &[f32],
    b: &[f32],
    c: Option<&[f32]>,
    (m, n, k): (usize, usize, usize),
) -> Vec<GemmEntry> {
    let rows: Vec<usize> = (0..m).collect();
    gemm_rows(a, b, c, (n, k), &rows)
}

/// The worst element of `got` against `want`: the largest `|got - value| / magnitude`, in units
/// of the magnitude (0 when exact). A tolerance of `c * K * u` in these units is a rounding-error
/// bound for a length-K dot product.
pub fn gemm_error(got: &[f32], want: &[GemmEntry]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(&g, w)| {
            let err = (f64::from(g) - w.value).abs();
            if err == 0.0 {
                0.0
            } else if w.magnitude == 0.0 || !err.is_finite() {
                f64::INFINITY
            } else {
                err / w.magnitude
            }
        })
        .fold(0.0, f64::max)
}
