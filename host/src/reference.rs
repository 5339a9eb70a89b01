//! CPU references, in one place for tests and xtask: rayon-parallel, written for clarity, and
//! independent of the kernels (no shared code path), so that agreement means something. A
//! registered kernel's reference is its spec's, written beside it in the kernel crate's host-only
//! part (`kernels::gemm::reference_row`, which [`gemm_rows`] runs), no kernel's code either.

use half::{bf16, f16};
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
        .map(|(x, y)| f16_nearest(x.to_f64() + y.to_f64()))
        .collect()
}

/// `x` rounded once to the nearest f16, ties to even: what `cvt.rn.f16.f32` does to an exact
/// value.
///
/// Not `f16::from_f64`: without `std`, `half` narrows an f64 by first dropping its low 32 bits,
/// which loses the sticky bits that decide a near-tie (40848.015625 must round up to 40864, and
/// that path gives 40832); with `std` it goes through `f as f32`, which rounds twice. Rounding to
/// f32 *to odd* first and then to nearest is exact, because f32 keeps at least two bits more than
/// f16 or bf16 (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums: proved
/// algorithms using rounding to odd", 2008); `half`'s f32 narrowing reads every bit.
pub fn f16_nearest(x: f64) -> f16 {
    f16::from_f32(f32_round_to_odd(x))
}

/// `x` rounded once to the nearest bf16, ties to even (see [`f16_nearest`]).
pub fn bf16_nearest(x: f64) -> bf16 {
    bf16::from_f32(f32_round_to_odd(x))
}

/// `x` rounded to f32 toward zero, with the last bit set when that lost anything ("round to
/// odd"): the result remembers that it is inexact, so a second rounding cannot mistake it for a tie.
fn f32_round_to_odd(x: f64) -> f32 {
    let nearest = x as f32;
    if x.is_nan() || f64::from(nearest) == x {
        return nearest;
    }
    let mut bits = nearest.to_bits();
    if f64::from(nearest).abs() > x.abs() {
        // Rounded away from zero (possibly to infinity): one step back, toward zero.
        bits -= 1;
    }
    f32::from_bits(bits | 1)
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

/// A pointer-chase chain: `len` links `stride` words apart (the rest of the buffer unused), visited
/// in a shuffled order closed into one cycle, so that no prefetcher can guess the next address
/// and every link is on the walk from index 0.
pub fn chase_chain(len: usize, stride: usize, seed: u64) -> Vec<u32> {
    let mut order: Vec<usize> = (0..len).collect();
    let r = uniform(len, seed, 0.0, 1.0);
    for i in (1..len).rev() {
        let j = ((r[i] * (i + 1) as f32) as usize).min(i);
        order.swap(i, j);
    }
    let mut next = vec![0u32; len * stride];
    for k in 0..len {
        next[order[k] * stride] = (order[(k + 1) % len] * stride) as u32;
    }
    next
}

/// Where `steps` hops through `chain` from index 0 end.
pub fn chase_end(chain: &[u32], steps: usize) -> u32 {
    (0..steps).fold(0u32, |i, _| chain[i as usize])
}

/// `input` (rows x cols, row-major) transposed.
pub fn transpose(input: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..rows * cols)
        .into_par_iter()
        .map(|i| input[(i % rows) * cols + i / rows])
        .collect()
}

/// `(m, l)` of one row in f64: its maximum and `sum exp(x - m)`, with the kernels' defined
/// results written out case by case (see `kernels::softmax`):
/// - any NaN: `(NaN, NaN)`;
/// - any `+inf`: `(+inf, k)` for `k` entries equal to `+inf`, each weighing 1 and the rest 0;
/// - every entry `-inf` (no mass): `(-inf, 0)`;
/// - otherwise the ordinary definition.
pub fn softmax_row_stats(row: &[f64]) -> (f64, f64) {
    if row.iter().any(|x| x.is_nan()) {
        return (f64::NAN, f64::NAN);
    }
    let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::INFINITY {
        let k = row.iter().filter(|&&x| x == f64::INFINITY).count();
        return (m, k as f64);
    }
    if m == f64::NEG_INFINITY {
        return (m, 0.0);
    }
    (m, row.iter().map(|&x| (x - m).exp()).sum())
}

/// Softmax of one row in f64 from [`softmax_row_stats`]: a NaN row gives NaN everywhere, a row
/// with no mass gives zeros, `+inf` entries share the mass equally.
pub fn softmax_row(row: &[f64]) -> Vec<f64> {
    let (m, l) = softmax_row_stats(row);
    row.iter()
        .map(|&x| {
            if l.is_nan() {
                f64::NAN
            } else if l == 0.0 {
                0.0
            } else if m == f64::INFINITY {
                if x == m { 1.0 / l } else { 0.0 }
            } else {
                (x - m).exp() / l
            }
        })
        .collect()
}

/// Row softmax of a row-major matrix with `cols` columns: each row widened to f64, computed by
/// [`softmax_row`], and rounded once back to the element type.
fn softmax_rows<T: Sync + Send>(
    x: &[T],
    cols: usize,
    widen: impl Fn(&T) -> f64 + Sync,
    narrow: impl Fn(f64) -> T + Sync + Send,
) -> Vec<T> {
    x.par_chunks(cols)
        .flat_map_iter(|row| {
            let row: Vec<f64> = row.iter().map(&widen).collect();
            softmax_row(&row).into_iter().map(&narrow)
        })
        .collect()
}

/// Row softmax of a row-major f32 matrix with `cols` columns, in f64, rounded once to f32.
pub fn softmax_f32(x: &[f32], cols: usize) -> Vec<f32> {
    softmax_rows(x, cols, |&v| f64::from(v), |p| p as f32)
}

/// Row softmax of a row-major bf16 matrix with `cols` columns, in f64, rounded once to bf16.
pub fn softmax_bf16(x: &[bf16], cols: usize) -> Vec<bf16> {
    softmax_rows(x, cols, |v| v.to_f64(), bf16_nearest)
}

/// One element of a GEMM reference: the value, and the size its rounding errors scale with
/// (the kernel crate's, which the registered GEMMs' references compute).
pub use kernels::gemm::GemmEntry;

/// `C = A B (+ C)` for row-major A (m x k), B (k x n) and C (m x n), only for the rows listed
/// (all of them for a full check; a few for matrices too large to multiply on the CPU), row by
/// row in parallel ([`kernels::gemm::reference_row`]). Returns `rows.len() * n` entries, row after
/// row.
pub fn gemm_rows(
    a: &[f32],
    b: &[f32],
    c: Option<&[f32]>,
    (n, k): (usize, usize),
    rows: &[usize],
) -> Vec<GemmEntry> {
    let b_t = kernels::gemm::transposed(b, (n, k));
    rows.par_iter()
        .flat_map_iter(|&i| kernels::gemm::reference_row(a, &b_t, c, (n, k), i))
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

/// `Y = X W^T` for row-major X (`m x k`) and W (`n x k`, one output feature per row: the
/// layout of `ops::decode::gemv`), accumulated in f64 as [`gemm_rows`] does: `m x n` entries.
pub fn gemv(x: &[f32], w: &[f32], (m, n, k): (usize, usize, usize)) -> Vec<GemmEntry> {
    (0..m * n)
        .into_par_iter()
        .map(|e| {
            let (x_row, w_row) = (&x[e / n * k..][..k], &w[e % n * k..][..k]);
            let (value, magnitude) =
                x_row
                    .iter()
                    .zip(w_row)
                    .fold((0.0, 0.0), |(v, s), (&a, &b)| {
                        let p = f64::from(a) * f64::from(b);
                        (v + p, s + p.abs())
                    });
            GemmEntry { value, magnitude }
        })
        .collect()
}

/// Decode attention in f64: for each (sequence `b`, query head `hq`), the one query row against
/// the first `ctx[b]` keys and values of KV head `hq / group` of the cache
/// (`batch x kv_heads x max_ctx x 128`), by [`attention`] on that head alone. Rows of `o` and
/// `lse` in `b * q_heads + hq` order; a sequence with no key gives zeros and `-inf`.
pub fn decode_attention(
    [q, k, v]: [&[f32]; 3],
    shape: &crate::ops::decode::DecodeShape,
    ctx: &[u32],
    scale: f32,
) -> AttentionOutput {
    use crate::ops::attention::AttentionShape;
    let d = kernels::decode::attention::HEAD_DIM;
    let rows: Vec<AttentionOutput> = (0..shape.rows())
        .into_par_iter()
        .map(|row| {
            let (b, hq) = (row / shape.q_heads, row % shape.q_heads);
            let h = hq / shape.group();
            let n = ctx[b] as usize;
            let start = (b * shape.kv_heads + h) * shape.max_ctx * d;
            let head = AttentionShape::new(1, 1, 1, d).with_n_kv(n);
            let (keys, values) = (&k[start..][..n * d], &v[start..][..n * d]);
            attention(&q[row * d..][..d], keys, values, &head, scale, false)
        })
        .collect();
    AttentionOutput {
        o: rows.iter().flat_map(|r| r.o.iter().copied()).collect(),
        lse: rows.iter().map(|r| r.lse[0]).collect(),
    }
}

/// Attention's output and per-row log-sum-exp, in f64.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionOutput {
    /// `batch x heads x n_q x head_dim`.
    pub o: Vec<f64>,
    /// `batch x heads x n_q`, natural log; `-inf` for a row that sees no key.
    pub lse: Vec<f64>,
}

/// Whether query `i` sees key `j`: the causal mask aligned to the bottom right (the queries are
/// the last `n_q` of the `n_kv` positions), written with signed positions.
fn sees(i: usize, j: usize, n_q: usize, n_kv: usize, causal: bool) -> bool {
    let position = i as i64 + n_kv as i64 - n_q as i64;
    !causal || (j as i64) <= position
}

/// `scale * q_i . k_j` in f64, one row of S per query, `-inf` where the mask hides the key:
/// `batch x heads x n_q x n_kv`.
pub fn attention_scores(
    q: &[f32],
    k: &[f32],
    shape: &crate::ops::attention::AttentionShape,
    scale: f32,
    causal: bool,
) -> Vec<f64> {
    let (n_q, n_kv, d) = (shape.n_q, shape.n_kv, shape.head_dim);
    (0..shape.bh() * n_q)
        .into_par_iter()
        .flat_map_iter(|row| {
            let (h, i) = (row / n_q, row % n_q);
            let q_i = &q[row * d..][..d];
            (0..n_kv).map(move |j| {
                if !sees(i, j, n_q, n_kv, causal) {
                    return f64::NEG_INFINITY;
                }
                let k_j = &k[(h * n_kv + j) * d..][..d];
                let dot: f64 = q_i
                    .iter()
                    .zip(k_j)
                    .map(|(a, b)| f64::from(*a) * f64::from(*b))
                    .sum();
                f64::from(scale) * dot
            })
        })
        .collect()
}

/// `O = softmax(scale Q K^T [causal]) V` and the log-sum-exp of each row of scores, in f64,
/// straight from the definition: each row's scores, their max, `exp(s - max)`, the sum, the
/// weighted sum of V rows. Special values as `kernels::attention` defines them: a row that sees
/// no key gives zeros and `-inf`; a NaN score makes the row NaN; `k` scores of `+inf` share the
/// probability (`1/k` each) and give `LSE = +inf`.
pub fn attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    shape: &crate::ops::attention::AttentionShape,
    scale: f32,
    causal: bool,
) -> AttentionOutput {
    let (n_q, n_kv, d) = (shape.n_q, shape.n_kv, shape.head_dim);
    let s = attention_scores(q, k, shape, scale, causal);
    let rows: Vec<(Vec<f64>, f64)> = (0..shape.bh() * n_q)
        .into_par_iter()
        .map(|row| {
            let h = row / n_q;
            let s_i = &s[row * n_kv..][..n_kv];
            if s_i.iter().any(|x| x.is_nan()) {
                return (vec![f64::NAN; d], f64::NAN);
            }
            let m = s_i.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if m == f64::NEG_INFINITY {
                return (vec![0.0; d], f64::NEG_INFINITY);
            }
            // exp(s - m), with s = m = +inf counted as 1 (the limit as those scores grow).
            let e: Vec<f64> = s_i
                .iter()
                .map(|&x| if x == m { 1.0 } else { (x - m).exp() })
                .collect();
            let l: f64 = e.iter().sum();
            let mut o = vec![0.0f64; d];
            for (j, p) in e.iter().enumerate() {
                let v_j = &v[(h * n_kv + j) * d..][..d];
                for (o_c, v_c) in o.iter_mut().zip(v_j) {
                    *o_c += p / l * f64::from(*v_c);
                }
            }
            (o, m + l.ln())
        })
        .collect();
    let lse = rows.iter().map(|r| r.1).collect();
    AttentionOutput {
        o: rows.into_iter().flat_map(|r| r.0).collect(),
        lse,
    }
}

/// How far one row of attention computed in f32 by the fused recurrence (running max and sum,
/// `exp2` of scores in base 2) may be from [`attention`], as `tests/tests/attention.rs`
/// derives it. With unit roundoff `u = 2^-24`, a score `scale q_i . k_j` computed with `d`
/// fused multiply-adds and two scalings is off by at most `score`; a softmax weight then moves
/// by a factor within `exp(+-2 score)`, an output by `2 score max|v|`, the log-sum-exp by
/// `score`; the sums over keys and over `d`, `exp2` and the division add `rounding` (relative).
#[derive(Clone, Copy, Debug)]
pub struct AttentionRowBound {
    /// `(d + 2) u |scale| max_j sum_c |q_ic k_jc|`.
    pub score: f64,
    /// `(4 (n_kv + d) + 32) u`.
    pub rounding: f64,
}

impl AttentionRowBound {
    /// The bound of query row `q_i` (`d` values) against `keys` (`n_kv x d`, row-major).
    pub fn new(q_i: &[f32], keys: &[f32], scale: f32) -> Self {
        let u = f64::from(f32::EPSILON) / 2.0;
        let d = q_i.len();
        let worst_dot = keys
            .chunks(d)
            .map(|k_j| {
                let terms = q_i.iter().zip(k_j);
                terms
                    .map(|(a, b)| (f64::from(*a) * f64::from(*b)).abs())
                    .sum()
            })
            .fold(0.0, f64::max);
        Self {
            score: (d + 2) as f64 * u * f64::from(scale.abs()) * worst_dot,
            rounding: (4 * (keys.len() / d + d) + 32) as f64 * u,
        }
    }

    /// The bound of each output of the row, for values `v` at most `v_max` in magnitude and an
    /// output rounded at the end to a format of unit roundoff `half_u` (0 for f32).
    pub fn o(&self, v_max: f64, half_u: f64) -> f64 {
        v_max * (2.0 * self.score + 2.0 * half_u + self.rounding)
    }

    /// The bound of the row's log-sum-exp.
    pub fn lse(&self) -> f64 {
        self.score + self.rounding
    }
}

/// The histogram of `data` in `1 << bits` bins, a value's bin its top `bits` bits: one pass in
/// order, with none of the kernel's private, per-block and atomic steps.
pub fn histogram_top_bits(data: &[u32], bits: u32) -> Vec<u32> {
    let mut hist = vec![0u32; 1 << bits];
    for &v in data {
        hist[(u64::from(v) >> (32 - bits)) as usize] += 1;
    }
    hist
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Whether `got` (a 16-bit float's bits, decoded by `value`) is the value nearest to `x`,
    /// ties to even, checked from the definition: `x` lies between the midpoints to the two
    /// neighbouring values, and on a midpoint the even one wins. Positive `x` only; the format is
    /// symmetric. Independent of the code under test: it only decodes bit patterns.
    fn is_nearest(x: f64, got: u16, value: impl Fn(u16) -> f64, inf_bits: u16) -> bool {
        let r = value(got);
        let lower = if got == 0 { -value(1) } else { value(got - 1) };
        let above = |b: u16| {
            if b + 1 == inf_bits {
                // The midpoint to infinity is where the next (unrepresentable) value would be.
                2.0 * value(b) - value(b - 1)
            } else {
                value(b + 1)
            }
        };
        if got == inf_bits {
            let max = inf_bits - 1;
            let limit = (value(max) + above(max)) / 2.0;
            return x > limit || (x == limit && !max.is_multiple_of(2));
        }
        let (low_mid, high_mid) = ((lower + r) / 2.0, (r + above(got)) / 2.0);
        let even = got.is_multiple_of(2);
        (low_mid < x || (low_mid == x && even)) && (x < high_mid || (x == high_mid && even))
    }

    fn f16_ok(x: f64) -> bool {
        is_nearest(
            x,
            f16_nearest(x).to_bits(),
            |b| f16::from_bits(b).to_f64(),
            0x7C00,
        )
    }

    fn bf16_ok(x: f64) -> bool {
        is_nearest(
            x,
            bf16_nearest(x).to_bits(),
            |b| bf16::from_bits(b).to_f64(),
            0x7F80,
        )
    }

    #[test]
    fn a_near_tie_rounds_by_its_low_bits() {
        // 40864 + (-15.984375): the f16 neighbours are 40832 and 40864, the midpoint 40848, and
        // the sum lies just above it. `half`'s no-std f64 path gives 40832.
        let sum = 40864.0 + -15.984375;
        assert_eq!(f16_nearest(sum).to_f64(), 40864.0);
        assert!(f16_ok(sum));
        assert_eq!(
            f16_nearest(40848.0).to_f64(),
            40832.0,
            "an exact tie goes to even"
        );
        assert!(f16_nearest(f64::NAN).is_nan() && bf16_nearest(f64::NAN).is_nan());
        assert_eq!(f16_nearest(1e9), f16::INFINITY);
        assert_eq!(
            f16_nearest(-1e-30).to_bits(),
            0x8000,
            "negative zero keeps its sign"
        );
        assert_eq!(bf16_nearest(1e300), bf16::INFINITY);
    }

    #[test]
    fn the_check_rejects_the_truncating_path() {
        let sum = 40864.0 + -15.984375;
        let truncating = f16::from_f64(sum).to_bits();
        assert!(
            !is_nearest(sum, truncating, |b| f16::from_bits(b).to_f64(), 0x7C00),
            "the definition must catch the old reference's result"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// Sums of two f16 values, as the elementwise kernel's reference computes them.
        #[test]
        fn f16_sums_round_to_nearest_even(a in any::<u16>(), b in any::<u16>()) {
            let (a, b) = (f16::from_bits(a).to_f64(), f16::from_bits(b).to_f64());
            let sum = a + b;
            prop_assume!(sum.is_finite());
            prop_assert!(f16_ok(sum.abs()), "{a} + {b} = {sum} -> {}", f16_nearest(sum.abs()));
            prop_assert_eq!(f16_nearest(-sum).to_bits(), f16_nearest(sum).to_bits() ^ 0x8000);
        }

        /// Values just off a midpoint between two neighbours, by one bit anywhere in the f64
        /// mantissa: where a rounding that loses low bits (the old reference) or rounds twice
        /// (through f32 to nearest) goes the wrong way. Random values almost never land there.
        #[test]
        fn near_ties_round_by_every_bit(bits in 0u16..0x7F7F, shift in 1i32..53, up in any::<bool>()) {
            let offset = |m: f64| if up { m * 2f64.powi(-shift) } else { -m * 2f64.powi(-shift) };
            if bits < 0x7BFF {
                let (r, next) = (f16::from_bits(bits).to_f64(), f16::from_bits(bits + 1).to_f64());
                let mid = (r + next) / 2.0;
                let x = mid + offset(mid);
                prop_assert!(f16_ok(x), "f16 of {x:e} gave {}", f16_nearest(x));
            }
            let (r, next) = (bf16::from_bits(bits).to_f64(), bf16::from_bits(bits + 1).to_f64());
            let mid = (r + next) / 2.0;
            let x = mid + offset(mid);
            prop_assert!(bf16_ok(x), "bf16 of {x:e} gave {}", bf16_nearest(x));
        }

        /// Any positive f64 across both formats' ranges, subnormals and overflow included.
        #[test]
        fn any_value_rounds_to_nearest_even(mantissa in 1u64..(1 << 52), exponent in -150i32..140) {
            let x = (1.0 + mantissa as f64 / (1u64 << 52) as f64) * 2f64.powi(exponent);
            prop_assert!(f16_ok(x), "f16 of {x:e}");
            prop_assert!(bf16_ok(x), "bf16 of {x:e}");
        }
    }
}
