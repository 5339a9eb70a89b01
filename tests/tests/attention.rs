//! Attention, naive and fused, against the f64 reference on random small shapes: sequence
//! lengths that are not tile multiples (and 1), both head dimensions, causal or not, queries
//! with fewer keys than queries (whose first rows see no key at all), and scores large enough
//! that `exp` would overflow without the running max. Also: the bytes the emulator counts equal
//! each flow's traffic model (compulsory + re-reads) exactly, and bad shapes are refused.
//!
//! Tolerances are stated as bounds, not guesses. In f32 (unit roundoff `u = 2^-24`) a score
//! `s_ij = scale * q_i . k_j` computed with `d` fused multiply-adds is off by at most
//! `delta_i = (d + 2) u scale max_j sum_c |q_ic k_jc|`; a softmax weight then moves by a factor
//! within `exp(+-2 delta_i)`, so an output by at most `2 delta_i max|v|`, and the log-sum-exp
//! by `delta_i`. On top come the roundings of the sums over keys and columns and of `exp2`
//! (`(4 (n_kv + d) + 32) u`, relative). [`Bound`] computes both per row. The tensor-core kernel
//! also rounds P to 16 bits before `P V` and O to 16 bits at the end (unit roundoff `u_h`:
//! `2^-8` for bf16, `2^-11` for f16): `2 u_h max|v|` more for O; its inputs are rounded to 16
//! bits before the reference sees them, so that input rounding is no error of the kernel's.

use emu::LaunchCounters;
use half::{bf16, f16};
use host::ops::attention::{self, AttentionParams, AttentionShape, FlashElement, FusedOp};
use host::reference::{self, AttentionOutput};
use perf::cost::Cost;
use proptest::prelude::*;
use suite::runtime;

const U: f64 = f32::EPSILON as f64 / 2.0;

/// One attention problem with its inputs.
#[derive(Debug)]
struct Problem {
    shape: AttentionShape,
    params: AttentionParams,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
}

impl Problem {
    /// Q, K uniform in `[-magnitude, magnitude]`, V in `[-1, 1]`.
    fn new(shape: AttentionShape, params: AttentionParams, magnitude: f32, seed: u64) -> Self {
        let m = magnitude;
        Self {
            q: reference::uniform(shape.q_elems(), seed, -m, m),
            k: reference::uniform(shape.kv_elems(), seed ^ 1, -m, m),
            v: reference::uniform(shape.kv_elems(), seed ^ 2, -1.0, 1.0),
            shape,
            params,
        }
    }

    fn reference(&self) -> AttentionOutput {
        let p = &self.params;
        reference::attention(&self.q, &self.k, &self.v, &self.shape, p.scale, p.causal)
    }

    /// The same problem with Q, K, V rounded to `T` (the values the reference then sees).
    fn rounded<T: FusedElement>(&self) -> (Problem, [Vec<T>; 3]) {
        let round = |x: &[f32]| x.iter().map(|&x| T::from_f32(x)).collect::<Vec<T>>();
        let widen = |x: &[T]| x.iter().map(|x| x.to_f32()).collect::<Vec<f32>>();
        let (q, k, v) = (round(&self.q), round(&self.k), round(&self.v));
        let problem = Problem {
            shape: self.shape,
            params: self.params,
            q: widen(&q),
            k: widen(&k),
            v: widen(&v),
        };
        (problem, [q, k, v])
    }

    /// The per-row error bounds of the header (`reference::AttentionRowBound`), for outputs
    /// rounded with unit roundoff `half_u` (0 for f32 outputs).
    fn bounds(&self, half_u: f64) -> Vec<Bound> {
        let (n_q, n_kv, d) = (self.shape.n_q, self.shape.n_kv, self.shape.head_dim);
        let v_max = self.v.iter().fold(0.0f64, |m, x| m.max(f64::from(x.abs())));
        (0..self.shape.bh() * n_q)
            .map(|row| {
                let h = row / n_q;
                let q_i = &self.q[row * d..][..d];
                let keys = &self.k[h * n_kv * d..][..n_kv * d];
                let b = reference::AttentionRowBound::new(q_i, keys, self.params.scale);
                Bound {
                    o: b.o(v_max, half_u),
                    lse: b.lse(),
                }
            })
            .collect()
    }
}

/// How far a row of O (each element) and its log-sum-exp may be from the f64 reference.
#[derive(Clone, Copy, Debug)]
struct Bound {
    o: f64,
    lse: f64,
}

/// Checks O (and, when given, LSE) row by row against the reference within `slack` times the
/// bounds; a NaN anywhere fails.
fn check(
    problem: &Problem,
    o: &[f32],
    lse: Option<&[f32]>,
    want: &AttentionOutput,
    slack: f64,
) -> Result<(), String> {
    check_rounded(problem, o, lse, want, slack, 0.0)
}

/// [`check`] for outputs rounded to a 16-bit type of unit roundoff `half_u`.
fn check_rounded(
    problem: &Problem,
    o: &[f32],
    lse: Option<&[f32]>,
    want: &AttentionOutput,
    slack: f64,
    half_u: f64,
) -> Result<(), String> {
    let d = problem.shape.head_dim;
    for (row, bound) in problem.bounds(half_u).into_iter().enumerate() {
        for c in 0..d {
            let (got, want) = (f64::from(o[row * d + c]), want.o[row * d + c]);
            let err = (got - want).abs();
            // A NaN error fails too: it is not `<=` anything.
            if err.is_nan() || err > slack * bound.o {
                return Err(format!(
                    "O[row {row}][{c}] = {got}, reference {want}: error {err:e} > bound {:e}",
                    slack * bound.o
                ));
            }
        }
        if let Some(lse) = lse {
            let (got, want) = (f64::from(lse[row]), want.lse[row]);
            let masked = want == f64::NEG_INFINITY;
            let ok = if masked {
                got == f64::NEG_INFINITY
            } else {
                (got - want).abs() <= slack * bound.lse
            };
            if !ok {
                return Err(format!(
                    "LSE[row {row}] = {got}, reference {want} (bound {:e})",
                    slack * bound.lse
                ));
            }
        }
    }
    Ok(())
}

/// Q, K and V on the device.
fn upload<T: host::Element>(rt: &host::Runtime, qkv: [&[T]; 3]) -> [host::DeviceBuffer<T>; 3] {
    qkv.map(|x| rt.upload(x).unwrap())
}

/// O (widened to f32) and LSE of one run.
type OutputAndLse = (Vec<f32>, Vec<f32>);

/// O (widened to f32), LSE and the counters (None on a GPU) of one run.
type FusedRun = (Vec<f32>, Vec<f32>, Option<LaunchCounters>);

/// `op` on Q, K, V (of `problem`'s shape and parameters).
fn run_op<T: FusedElement>(
    op: FusedOp<T>,
    problem: &Problem,
    qkv: [&[T]; 3],
) -> host::Result<FusedRun> {
    let rt = runtime();
    let s = &problem.shape;
    let [q, k, v] = upload(&rt, qkv);
    let mut o = rt.alloc::<T>(s.q_elems()).unwrap();
    let mut lse = rt.alloc::<f32>(s.lse_elems()).unwrap();
    let counters = op(&rt, &q, &k, &v, &mut o, &mut lse, s, &problem.params)?;
    let o = rt
        .download(&o)
        .unwrap()
        .iter()
        .map(FusedElement::to_f32)
        .collect();
    Ok((o, rt.download(&lse).unwrap(), counters))
}

/// The fused kernel for element type `T` on Q, K, V (of `problem`'s shape and parameters).
fn run_fused<T: FusedElement>(problem: &Problem, qkv: [&[T]; 3]) -> FusedRun {
    run_op(attention::fused::<T>, problem, qkv).unwrap()
}

/// The f32 fused kernel on `problem`.
fn fused(problem: &Problem) -> (Vec<f32>, Vec<f32>, Option<LaunchCounters>) {
    run_fused::<f32>(problem, [&problem.q, &problem.k, &problem.v])
}

/// Counted bytes against a traffic model, exactly, and FLOPs as [`suite::flops_agree`] says.
fn assert_counts(counters: Option<LaunchCounters>, model: Cost) -> Result<(), String> {
    let Some(c) = counters else { return Ok(()) };
    let counted = (c.global_read_bytes, c.global_write_bytes, c.flops);
    let modelled = (model.bytes_read, model.bytes_written, model.flops);
    if counted.0 == modelled.0
        && counted.1 == modelled.1
        && suite::flops_agree(c.flops, model.flops)
    {
        Ok(())
    } else {
        Err(format!(
            "counted (read, written, flops) {counted:?}, model {modelled:?} (re-reads {})",
            model.reread_bytes()
        ))
    }
}

fn shape_strategy() -> impl Strategy<Value = (AttentionShape, bool)> {
    (
        1usize..=2,
        1usize..=2,
        1usize..=130,
        prop_oneof![3 => Just(None), 1 => (1usize..=130).prop_map(Some)],
        prop_oneof![Just(64usize), Just(128)],
        any::<bool>(),
    )
        .prop_map(|(batch, heads, n, n_kv, d, causal)| {
            let shape = AttentionShape::new(batch, heads, n, d).with_n_kv(n_kv.unwrap_or(n));
            (shape, causal)
        })
}

/// A random problem: a shape from [`shape_strategy`], a scale, and Q, K either in [-1, 1] or in
/// [-40, 40] (scores in the thousands).
fn problem_strategy() -> impl Strategy<Value = Problem> {
    (
        shape_strategy(),
        0.02f32..0.3,
        prop_oneof![3 => Just(1.0f32), 1 => Just(40.0)],
        any::<u64>(),
    )
        .prop_map(|((shape, causal), scale, magnitude, seed)| {
            Problem::new(shape, AttentionParams { scale, causal }, magnitude, seed)
        })
}

proptest! {
    #![proptest_config(suite::proptest_config(12))]

    /// Fused vs the f64 reference within the header's bound (slack 1: the bound is a worst
    /// case, typical errors are 10-100x below it); counted bytes = compulsory + re-reads.
    #[test]
    fn fused_matches_the_reference(problem in problem_strategy()) {
        let (shape, causal) = (problem.shape, problem.params.causal);
        let (o, lse, counters) = fused(&problem);
        check(&problem, &o, Some(&lse), &problem.reference(), 1.0).map_err(TestCaseError::fail)?;
        assert_counts(counters, attention::fused_traffic::<f32>(&shape, causal)).map_err(TestCaseError::fail)?;
    }
}

/// The naive flow's O and counters.
fn naive(problem: &Problem) -> (Vec<f32>, Option<LaunchCounters>) {
    let rt = runtime();
    let s = &problem.shape;
    let [q, k, v] = upload(&rt, [&problem.q, &problem.k, &problem.v]);
    let mut o = rt.alloc::<f32>(s.q_elems()).unwrap();
    let mut workspace = attention::NaiveWorkspace::new(&rt, s).unwrap();
    let counters =
        attention::naive(&rt, &q, &k, &v, &mut o, &mut workspace, s, &problem.params).unwrap();
    (rt.download(&o).unwrap(), counters)
}

proptest! {
    #![proptest_config(suite::proptest_config(8))]

    /// The naive flow (S, softmax, P V) vs the reference within the header's bound, its counted
    /// bytes and FLOPs = its traffic model; and the fused kernel agrees with it within twice the
    /// bound (each is within one bound of the reference).
    #[test]
    fn naive_matches_the_reference_and_the_fused_kernel(problem in problem_strategy()) {
        let shape = problem.shape;
        let (o_naive, counters) = naive(&problem);
        check(&problem, &o_naive, None, &problem.reference(), 1.0).map_err(TestCaseError::fail)?;
        assert_counts(counters, attention::naive_traffic(&shape)).map_err(TestCaseError::fail)?;
        let (o_fused, _, _) = fused(&problem);
        let naive_as_reference = AttentionOutput {
            o: o_naive.iter().map(|&x| f64::from(x)).collect(),
            lse: vec![],
        };
        check(&problem, &o_fused, None, &naive_as_reference, 2.0).map_err(TestCaseError::fail)?;
    }
}

/// S and P of 150k x 150k f32 need 180 GB, more than the emulated (or any) device has: the
/// naive flow refuses before allocating, naming both numbers.
#[test]
fn naive_refuses_when_s_and_p_do_not_fit() {
    let rt = runtime();
    let shape = AttentionShape::new(1, 1, 150_000, 64);
    let Err(err) = attention::NaiveWorkspace::new(&rt, &shape) else {
        panic!("S and P of {shape:?} were allocated");
    };
    let free = rt.free_memory().unwrap();
    let needed = 2 * 150_000u64 * 150_000 * 4;
    assert!(
        needed > free,
        "the test needs a shape larger than the device"
    );
    let msg = err.to_string();
    assert!(
        msg.contains(&needed.to_string()) && msg.contains(&free.to_string()),
        "{msg}"
    );
    assert!(matches!(err, host::Error::OutOfMemory { .. }), "{err:?}");
}

/// Row-softmax of reference scores, in f64, rounded to f32 (rows with no visible key: zeros):
/// the P that naive step 3 is given when tested on its own.
fn softmax_rows(scores: &[f64], n_kv: usize) -> Vec<f32> {
    scores
        .chunks(n_kv)
        .flat_map(|row| {
            let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = row
                .iter()
                .map(|x| {
                    if m == f64::NEG_INFINITY {
                        0.0
                    } else {
                        (x - m).exp()
                    }
                })
                .collect();
            let l: f64 = e.iter().sum();
            e.into_iter()
                .map(move |x| if l > 0.0 { (x / l) as f32 } else { 0.0 })
        })
        .collect()
}

proptest! {
    #![proptest_config(suite::proptest_config(8))]

    /// Naive step 1, `S = scale Q K^T` with -inf where masked: each score within
    /// `(d + 2) u scale sum_c |q_c k_c|` of the f64 reference (the first term of the header's
    /// bound); masked entries exactly -inf. Counted bytes = its traffic model.
    #[test]
    fn naive_scores_match_the_reference(
        (shape, causal) in shape_strategy(),
        scale in 0.02f32..0.3,
        seed in any::<u64>(),
    ) {
        let problem = Problem::new(shape, AttentionParams { scale, causal }, 1.0, seed);
        let rt = runtime();
        let (q, k) = (rt.upload(&problem.q).unwrap(), rt.upload(&problem.k).unwrap());
        let mut s = rt.alloc::<f32>(shape.score_elems()).unwrap();
        let counters = attention::scores(&rt, &q, &k, &mut s, &shape, &problem.params).unwrap();
        let got = rt.download(&s).unwrap();
        let want = reference::attention_scores(&problem.q, &problem.k, &shape, scale, causal);
        let (n_q, n_kv, d) = (shape.n_q, shape.n_kv, shape.head_dim);
        for (e, (&g, &w)) in got.iter().zip(&want).enumerate() {
            let (row, j) = (e / n_kv, e % n_kv);
            let q_i = &problem.q[row * d..][..d];
            let k_j = &problem.k[((row / n_q) * n_kv + j) * d..][..d];
            let abs_dot: f64 = q_i.iter().zip(k_j).map(|(a, b)| f64::from((a * b).abs())).sum();
            let bound = (d + 2) as f64 * U * f64::from(scale) * abs_dot;
            let ok = if w == f64::NEG_INFINITY { g == f32::NEG_INFINITY } else { (f64::from(g) - w).abs() <= bound };
            prop_assert!(ok, "S[{row}][{j}] = {g}, reference {w}, bound {bound:e}");
        }
        assert_counts(counters, attention::scores_traffic(&shape)).map_err(TestCaseError::fail)?;
    }

    /// Naive step 3, `O = P V`, given the reference's P rounded to f32: within the header's
    /// bound. Counted bytes = its traffic model.
    #[test]
    fn naive_pv_matches_the_reference(
        (shape, causal) in shape_strategy(),
        seed in any::<u64>(),
    ) {
        let params = AttentionParams::standard(shape.head_dim, causal);
        let problem = Problem::new(shape, params, 1.0, seed);
        let scores = reference::attention_scores(&problem.q, &problem.k, &shape, params.scale, causal);
        let rt = runtime();
        let (p, v) = (rt.upload(&softmax_rows(&scores, shape.n_kv)).unwrap(), rt.upload(&problem.v).unwrap());
        let mut o = rt.alloc::<f32>(shape.q_elems()).unwrap();
        let counters = attention::probabilities_times_values(&rt, &p, &v, &mut o, &shape, &params).unwrap();
        let got = rt.download(&o).unwrap();
        check(&problem, &got, None, &problem.reference(), 1.0).map_err(TestCaseError::fail)?;
        assert_counts(counters, attention::pv_traffic(&shape)).map_err(TestCaseError::fail)?;
    }
}

/// Causal with 70 queries over 5 keys: queries 0..65 come before every key. Their rows are
/// zeros with LSE = -inf (never NaN), in the same query tile as rows that do see keys.
#[test]
fn fully_masked_rows_are_zero_with_lse_minus_infinity() {
    for d in [64, 128] {
        let shape = AttentionShape::new(1, 2, 70, d).with_n_kv(5);
        let problem = Problem::new(shape, AttentionParams::standard(d, true), 1.0, 7);
        let (o, lse, counters) = fused(&problem);
        for h in 0..2 {
            for i in 0..70 {
                let row = h * 70 + i;
                let masked = i < 65;
                assert_eq!(
                    lse[row] == f32::NEG_INFINITY,
                    masked,
                    "row {row}: {}",
                    lse[row]
                );
                let o_row = &o[row * d..][..d];
                assert!(o_row.iter().all(|x| !x.is_nan()), "row {row}");
                if masked {
                    assert!(o_row.iter().all(|&x| x == 0.0), "row {row}");
                }
            }
        }
        check(&problem, &o, Some(&lse), &problem.reference(), 1.0).unwrap();
        assert_counts(counters, attention::fused_traffic::<f32>(&shape, true)).unwrap();
    }
}

/// N = 1: one query, one key: O is V's row exactly (weight exp(0) / 1), LSE the lone score.
#[test]
fn one_query_one_key_returns_the_value() {
    for (d, causal) in [(64, false), (128, true)] {
        let shape = AttentionShape::new(2, 1, 1, d);
        let problem = Problem::new(shape, AttentionParams::standard(d, causal), 1.0, 3);
        let (o, lse, _) = fused(&problem);
        assert_eq!(o, problem.v);
        let want = problem.reference();
        check(&problem, &o, Some(&lse), &want, 1.0).unwrap();
    }
}

/// Scores in the thousands: `exp(s)` overflows f32 beyond 88, so only the running max keeps
/// this finite. The softmax is close to one-hot here, and still within the bound.
#[test]
fn large_scores_do_not_overflow() {
    let shape = AttentionShape::new(1, 1, 100, 64);
    let problem = Problem::new(
        shape,
        AttentionParams {
            scale: 1.0,
            causal: false,
        },
        30.0,
        11,
    );
    let (o, lse, _) = fused(&problem);
    let want = problem.reference();
    assert!(
        want.lse.iter().any(|&l| l > 1000.0),
        "the test needs large scores"
    );
    check(&problem, &o, Some(&lse), &want, 1.0).unwrap();
}

#[test]
fn unsupported_head_dims_and_wrong_lengths_are_refused() {
    let rt = runtime();
    let shape = AttentionShape::new(1, 1, 8, 96);
    let buf = |n| rt.alloc::<f32>(n).unwrap();
    let (q, k, v) = (
        buf(shape.q_elems()),
        buf(shape.kv_elems()),
        buf(shape.kv_elems()),
    );
    let (mut o, mut lse) = (buf(shape.q_elems()), buf(shape.lse_elems()));
    let params = AttentionParams::standard(96, false);
    let err = attention::fused(&rt, &q, &k, &v, &mut o, &mut lse, &shape, &params)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("head dimension 96") && err.contains("[64, 128]"),
        "{err}"
    );

    let shape = AttentionShape::new(1, 1, 8, 64);
    let params = AttentionParams::standard(64, false);
    let (q, k, v) = (
        buf(shape.q_elems()),
        buf(shape.kv_elems() + 1),
        buf(shape.kv_elems()),
    );
    let (mut o, mut lse) = (buf(shape.q_elems()), buf(shape.lse_elems()));
    let err = attention::fused(&rt, &q, &k, &v, &mut o, &mut lse, &shape, &params)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("k has 513 elements") && err.contains("needs 512"),
        "{err}"
    );
}

/// The fused kernels' element types, as the tests need them: f32 (rounding nothing) and the
/// tensor-core kernel's 16-bit types.
trait FusedElement: FlashElement {
    /// Unit roundoff.
    const U: f64;
    fn from_f32(x: f32) -> Self;
    fn to_f32(&self) -> f32;
}
impl FusedElement for f32 {
    const U: f64 = 0.0;
    fn from_f32(x: f32) -> Self {
        x
    }
    fn to_f32(&self) -> f32 {
        *self
    }
}
impl FusedElement for bf16 {
    const U: f64 = 1.0 / 256.0;
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn to_f32(&self) -> f32 {
        bf16::to_f32(*self)
    }
}
impl FusedElement for f16 {
    const U: f64 = 1.0 / 2048.0;
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn to_f32(&self) -> f32 {
        f16::to_f32(*self)
    }
}

/// The tensor-core kernel on `problem` rounded to `T`: checked against the reference of the
/// rounded inputs, and its counted bytes against its traffic model. Returns O (widened) and LSE.
fn tensor_cores<T: FusedElement>(problem: &Problem) -> Result<OutputAndLse, String> {
    rounded_within_bound(
        attention::fused::<T>,
        attention::fused_traffic::<T>,
        problem,
    )
}

/// `op` (a 16-bit kernel) on `problem` rounded to `T`, checked against the reference of the
/// rounded inputs within the header's bound with the 16-bit roundings, and its counted bytes
/// against `traffic` (shape, causal) exactly.
fn rounded_within_bound<T: FusedElement>(
    op: FusedOp<T>,
    traffic: impl Fn(&AttentionShape, bool) -> Cost,
    problem: &Problem,
) -> Result<OutputAndLse, String> {
    let (problem, [q, k, v]) = problem.rounded::<T>();
    let s = &problem.shape;
    let (o, lse, counters) = run_op(op, &problem, [&q, &k, &v]).map_err(|e| e.to_string())?;
    check_rounded(&problem, &o, Some(&lse), &problem.reference(), 1.0, T::U)?;
    if let Some(c) = counters {
        let model = traffic(s, problem.params.causal);
        let counted = (c.global_read_bytes, c.global_write_bytes);
        if counted != (model.bytes_read, model.bytes_written) {
            return Err(format!(
                "counted (read, written) {counted:?}, model {model:?}"
            ));
        }
    }
    Ok((o, lse))
}

proptest! {
    #![proptest_config(suite::proptest_config(8))]

    /// bf16 and f16 on tensor cores (the emulator's fragment-exact ldmatrix and mma) vs the f64
    /// reference of the rounded inputs, within the header's bound with the 16-bit roundings.
    #[test]
    fn tensor_core_kernel_matches_the_reference(problem in problem_strategy(), use_bf16 in any::<bool>()) {
        let result = if use_bf16 { tensor_cores::<bf16>(&problem) } else { tensor_cores::<f16>(&problem) };
        result.map_err(TestCaseError::fail)?;
    }
}

/// The naive flow in `T` (`kernels::attention::naive_mma`: both products on the tensor cores,
/// S and P f32 in HBM) on `problem` rounded to `T`: within the same bound as the fused
/// tensor-core kernel (its scores are as exact, and it rounds P and O to `T` as that kernel
/// does), its counted bytes equal to its traffic model exactly and its counted FLOPs covering
/// the model's (the emulator counts every `mma` issued, over partial tiles too).
fn naive_tensor_cores<T: FusedElement + attention::NaiveElement>(
    problem: &Problem,
) -> Result<(), String> {
    let (problem, [q, k, v]) = problem.rounded::<T>();
    let rt = runtime();
    let s = &problem.shape;
    let [q, k, v] = upload(&rt, [&q, &k, &v]);
    let mut o = rt.alloc::<T>(s.q_elems()).unwrap();
    let mut workspace = attention::NaiveWorkspace::new(&rt, s).unwrap();
    let counters = attention::naive(&rt, &q, &k, &v, &mut o, &mut workspace, s, &problem.params)
        .map_err(|e| e.to_string())?;
    let o: Vec<f32> = rt
        .download(&o)
        .unwrap()
        .iter()
        .map(FusedElement::to_f32)
        .collect();
    check_rounded(&problem, &o, None, &problem.reference(), 1.0, T::U)?;
    if let Some(c) = counters {
        let model = attention::naive_traffic_of::<T>(s);
        let counted = (c.global_read_bytes, c.global_write_bytes);
        if counted != (model.bytes_read, model.bytes_written) || c.flops < model.flops {
            return Err(format!(
                "counted (read, written) {counted:?} and {} FLOPs, model {model:?}",
                c.flops
            ));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(suite::proptest_config(8))]

    /// The naive flow in bf16 and f16 vs the f64 reference of the rounded inputs, on shapes that
    /// are no multiple of its 64 x 64 tiles, causal or not, fewer keys than queries or more.
    #[test]
    fn naive_tensor_core_flow_matches_the_reference(problem in problem_strategy(), use_bf16 in any::<bool>()) {
        let result = if use_bf16 { naive_tensor_cores::<bf16>(&problem) } else { naive_tensor_cores::<f16>(&problem) };
        result.map_err(TestCaseError::fail)?;
    }
}

/// The variant with half of its exponentials on the FMA units (`exp2_fma`, relative error at
/// most `EXP2_FMA_MAX_REL_ERROR` = e): each of those weights moves by a factor within `1 +- e`,
/// so O by at most `2 e max|v|` more than the SFU kernel's bound and the LSE by at most `e`. It
/// must meet that widened bound against the reference, and stay that close to the SFU kernel.
#[test]
fn fma_exponentials_stay_within_their_error_bound() {
    let e = f64::from(kernels::attention::EXP2_FMA_MAX_REL_ERROR);
    for (n_q, n_kv, causal, seed) in [
        (1, 1, false, 1),
        (70, 130, false, 2),
        (130, 130, true, 3),
        (64, 200, true, 4),
    ] {
        let shape = AttentionShape::new(1, 2, n_q, 64).with_n_kv(n_kv);
        let problem = Problem::new(shape, AttentionParams::standard(64, causal), 1.0, seed);
        let (problem, [q, k, v]) = problem.rounded::<bf16>();
        let rt = runtime();
        let [qd, kd, vd] = upload(&rt, [&q, &k, &v]);
        let mut o = rt.alloc::<bf16>(shape.q_elems()).unwrap();
        let mut lse = rt.alloc::<f32>(shape.lse_elems()).unwrap();
        attention::fused_bf16_fma_exp(
            &rt,
            &qd,
            &kd,
            &vd,
            &mut o,
            &mut lse,
            &shape,
            &problem.params,
        )
        .unwrap();
        let o: Vec<f32> = rt
            .download(&o)
            .unwrap()
            .iter()
            .map(|x| x.to_f32())
            .collect();
        let lse = rt.download(&lse).unwrap();
        check_rounded(
            &problem,
            &o,
            None,
            &problem.reference(),
            1.0,
            <bf16 as FusedElement>::U + e,
        )
        .unwrap();
        let (_, sfu_lse, _) = run_fused::<bf16>(&problem, [&q, &k, &v]);
        for (row, (a, b)) in lse.iter().zip(&sfu_lse).enumerate() {
            let diff = f64::from(*a) - f64::from(*b);
            assert!(
                a == b || diff.abs() <= 2.0 * e,
                "{n_q}x{n_kv} causal {causal}: LSE row {row}: {a} against {b}"
            );
        }
    }
    let wide = AttentionShape::new(1, 1, 8, 128);
    let problem = Problem::new(wide, AttentionParams::standard(128, false), 1.0, 5);
    let (problem, [q, k, v]) = problem.rounded::<bf16>();
    let rt = runtime();
    let [qd, kd, vd] = upload(&rt, [&q, &k, &v]);
    let (mut o, mut lse) = (
        rt.alloc::<bf16>(wide.q_elems()).unwrap(),
        rt.alloc::<f32>(wide.lse_elems()).unwrap(),
    );
    let err =
        attention::fused_bf16_fma_exp(&rt, &qd, &kd, &vd, &mut o, &mut lse, &wide, &problem.params)
            .unwrap_err();
    assert!(err.to_string().contains("d = 64 only"), "{err}");
}

/// The tensor-core kernel's fully masked rows (70 queries over 5 keys, causal): zeros, -inf.
#[test]
fn tensor_core_fully_masked_rows_are_zero_with_lse_minus_infinity() {
    for d in [64, 128] {
        let shape = AttentionShape::new(1, 1, 70, d).with_n_kv(5);
        let problem = Problem::new(shape, AttentionParams::standard(d, true), 1.0, 5);
        for (o, lse) in [
            tensor_cores::<bf16>(&problem).unwrap(),
            tensor_cores::<f16>(&problem).unwrap(),
        ] {
            for i in 0..70 {
                let masked = i < 65;
                assert_eq!(lse[i] == f32::NEG_INFINITY, masked, "row {i}: {}", lse[i]);
                assert!(
                    !masked || o[i * d..][..d].iter().all(|&x| x == 0.0),
                    "row {i}"
                );
            }
        }
    }
}

/// The Hopper kernel (`flash_wgmma`: TMA, mbarrier ring, `wgmma` with P from registers) on
/// `problem` rounded to `T`: the same check as [`tensor_cores`] (the same bound: its arithmetic
/// is the same recurrence, with the same 16-bit roundings of P and O), and its counted bytes
/// against its own traffic model. `None` where the runtime has no wgmma (the PTX backend's
/// sm_80 and sm_90 modules).
fn hopper<T: FusedElement + attention::WgmmaFlashElement>(
    problem: &Problem,
) -> Result<Option<OutputAndLse>, String> {
    if !runtime().has_wgmma() {
        return Ok(None);
    }
    let traffic =
        |s: &AttentionShape, causal| attention::fused_wgmma_traffic(s, causal, size_of::<T>());
    rounded_within_bound(attention::fused_wgmma::<T>, traffic, problem).map(Some)
}

/// Shapes for the Hopper kernel's 128 x 128 tiles: up to two query blocks, and up to 300 keys
/// (three key tiles, so that the two-stage ring wraps and its phase parity flips), neither a
/// tile multiple as a rule; fewer keys than queries too.
fn hopper_problem_strategy() -> impl Strategy<Value = Problem> {
    (
        1usize..=2,
        1usize..=200,
        prop_oneof![1 => Just(None), 1 => (1usize..=300).prop_map(Some)],
        prop_oneof![Just(64usize), Just(128)],
        any::<bool>(),
        0.02f32..0.3,
        prop_oneof![3 => Just(1.0f32), 1 => Just(40.0)],
        any::<u64>(),
    )
        .prop_map(|(heads, n, n_kv, d, causal, scale, magnitude, seed)| {
            let shape = AttentionShape::new(1, heads, n, d).with_n_kv(n_kv.unwrap_or(n));
            Problem::new(shape, AttentionParams { scale, causal }, magnitude, seed)
        })
}

proptest! {
    #![proptest_config(suite::proptest_config(12))]

    /// bf16 and f16 on wgmma (the emulator's descriptor-exact and fragment-exact model) vs the
    /// f64 reference of the rounded inputs, within the tensor-core kernel's bound.
    #[test]
    fn wgmma_kernel_matches_the_reference(problem in hopper_problem_strategy(), use_bf16 in any::<bool>()) {
        let result = if use_bf16 { hopper::<bf16>(&problem) } else { hopper::<f16>(&problem) };
        result.map_err(TestCaseError::fail)?;
    }
}

/// The Hopper kernel's fully masked rows, causal: 70 queries over 5 keys (one query block, one
/// key tile), and 200 queries over 5 keys, whose first block of 128 sees no key at all (no key
/// tile: the consumers wait for Q only) while the second block's last 5 rows see some: zeros
/// and -inf, never NaN.
#[test]
fn wgmma_fully_masked_rows_are_zero_with_lse_minus_infinity() {
    for (d, n_q) in [(64, 70), (128, 200)] {
        let shape = AttentionShape::new(1, 1, n_q, d).with_n_kv(5);
        let problem = Problem::new(shape, AttentionParams::standard(d, true), 1.0, 5);
        for result in [hopper::<bf16>(&problem), hopper::<f16>(&problem)] {
            let Some((o, lse)) = result.unwrap() else {
                return;
            };
            for i in 0..n_q {
                let masked = i < n_q - 5;
                assert_eq!(lse[i] == f32::NEG_INFINITY, masked, "row {i}: {}", lse[i]);
                assert!(
                    !masked || o[i * d..][..d].iter().all(|&x| x == 0.0),
                    "row {i}"
                );
            }
        }
    }
}
