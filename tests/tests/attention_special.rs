//! Infinities and NaN in attention: the naive flows (f32, and bf16 on the tensor cores), the fused
//! kernels (f32 and bf16) and the f64 reference follow the one rule `kernels::attention`
//! documents (the softmax chapter's rule on each row of scores).

use half::bf16;
use host::ops::attention::{self, AttentionParams, AttentionShape};
use host::reference;
use suite::runtime;

const N: usize = 40;
const D: usize = 64;

/// One head of N queries over N keys, not causal: every row sees every key.
fn shape() -> AttentionShape {
    AttentionShape::new(1, 1, N, D)
}

fn inputs() -> [Vec<f32>; 3] {
    let n = N * D;
    [1, 2, 3].map(|seed| reference::uniform(n, seed, -1.0, 1.0))
}

/// What a flow computed: O, and LSE where the flow has it.
struct Out {
    flow: &'static str,
    o: Vec<f32>,
    lse: Option<Vec<f32>>,
    tol: f64,
}

fn flows(q: &[f32], k: &[f32], v: &[f32]) -> Vec<Out> {
    let rt = runtime();
    let (s, params) = (shape(), AttentionParams::standard(D, false));
    let up = |x: &[f32]| rt.upload(x).unwrap();
    let (dq, dk, dv) = (up(q), up(k), up(v));
    let mut o = rt.alloc::<f32>(s.q_elems()).unwrap();
    let mut ws = attention::NaiveWorkspace::new(&rt, &s).unwrap();
    attention::naive(&rt, &dq, &dk, &dv, &mut o, &mut ws, &s, &params).unwrap();
    let naive = rt.download(&o).unwrap();
    let mut lse = rt.alloc::<f32>(s.lse_elems()).unwrap();
    attention::fused(&rt, &dq, &dk, &dv, &mut o, &mut lse, &s, &params).unwrap();
    let fused = (rt.download(&o).unwrap(), rt.download(&lse).unwrap());
    let b = |x: &[f32]| rt.upload(&x.iter().map(|&v| bf16::from_f32(v)).collect::<Vec<_>>());
    let (bq, bk, bv) = (b(q).unwrap(), b(k).unwrap(), b(v).unwrap());
    let mut bo = rt.alloc::<bf16>(s.q_elems()).unwrap();
    let widen = |bo: &host::DeviceBuffer<bf16>| -> Vec<f32> {
        rt.download(bo)
            .unwrap()
            .iter()
            .map(|x| x.to_f32())
            .collect()
    };
    attention::naive(&rt, &bq, &bk, &bv, &mut bo, &mut ws, &s, &params).unwrap();
    let naive_tc = widen(&bo);
    attention::fused(&rt, &bq, &bk, &bv, &mut bo, &mut lse, &s, &params).unwrap();
    let tc = widen(&bo);
    vec![
        Out {
            flow: "naive f32",
            o: naive,
            lse: None,
            tol: 1e-3,
        },
        Out {
            flow: "fused f32",
            o: fused.0,
            lse: Some(fused.1),
            tol: 1e-3,
        },
        // Inputs and P rounded to bf16 (8 bits): a few percent on values of size 1.
        Out {
            flow: "naive bf16",
            o: naive_tc,
            lse: None,
            tol: 5e-2,
        },
        Out {
            flow: "fused bf16",
            o: tc,
            lse: Some(rt.download(&lse).unwrap()),
            tol: 5e-2,
        },
    ]
}

/// Same special value, or within `tol`.
fn agrees(got: f32, want: f64, tol: f64) -> bool {
    let got = f64::from(got);
    (got.is_nan() && want.is_nan()) || got == want || (got - want).abs() <= tol
}

/// Every flow against the reference on the bf16-rounded inputs for the bf16 flow and the f32
/// ones otherwise; returns the reference (on the f32 inputs).
fn check(q: &[f32], k: &[f32], v: &[f32]) -> reference::AttentionOutput {
    let s = shape();
    let scale = AttentionParams::standard(D, false).scale;
    let want = reference::attention(q, k, v, &s, scale, false);
    let round = |x: &[f32]| {
        x.iter()
            .map(|&v| bf16::from_f32(v).to_f32())
            .collect::<Vec<_>>()
    };
    let want_bf16 = reference::attention(&round(q), &round(k), &round(v), &s, scale, false);
    for out in flows(q, k, v) {
        let w = if out.flow.ends_with("bf16") {
            &want_bf16
        } else {
            &want
        };
        for (i, (g, r)) in out.o.iter().zip(&w.o).enumerate() {
            assert!(
                agrees(*g, *r, out.tol),
                "{}: O[{}][{}] = {g}, reference {r}",
                out.flow,
                i / D,
                i % D
            );
        }
        if let Some(lse) = &out.lse {
            for (i, (g, r)) in lse.iter().zip(&w.lse).enumerate() {
                assert!(
                    agrees(*g, *r, out.tol),
                    "{}: LSE[{i}] = {g}, reference {r}",
                    out.flow
                );
            }
        }
    }
    want
}

#[test]
fn plus_infinity_in_q_averages_the_keys_that_score_plus_infinity() {
    let [mut q, k, v] = inputs();
    q[3 * D] = f32::INFINITY;
    let want = check(&q, &k, &v);
    // Row 3: the mean of the V rows whose K has a positive first component; LSE +inf.
    let keys: Vec<usize> = (0..N).filter(|&j| k[j * D] > 0.0).collect();
    for c in 0..D {
        let mean = keys.iter().map(|&j| f64::from(v[j * D + c])).sum::<f64>() / keys.len() as f64;
        assert!((want.o[3 * D + c] - mean).abs() < 1e-12, "column {c}");
    }
    assert_eq!(want.lse[3], f64::INFINITY);
    assert!(want.lse[2].is_finite());
}

#[test]
fn nan_in_q_makes_its_row_nan_and_the_reference_agrees() {
    let [mut q, k, v] = inputs();
    q[2 * D + 5] = f32::NAN;
    let want = check(&q, &k, &v);
    // The reference used to fold NaN scores away with f64::max and call the row masked.
    assert!(want.o[2 * D..3 * D].iter().all(|x| x.is_nan()) && want.lse[2].is_nan());
    assert!(
        want.o[..2 * D]
            .iter()
            .chain(&want.o[3 * D..])
            .all(|x| x.is_finite())
    );
}

#[test]
fn nan_in_k_makes_every_row_that_sees_the_key_nan() {
    let [q, mut k, v] = inputs();
    k[7 * D + 1] = f32::NAN;
    let want = check(&q, &k, &v);
    assert!(want.o.iter().all(|x| x.is_nan()) && want.lse.iter().all(|x| x.is_nan()));
}

#[test]
fn nan_in_v_makes_its_column_of_o_nan() {
    let [q, k, mut v] = inputs();
    v[7 * D + 9] = f32::NAN;
    let want = check(&q, &k, &v);
    for (i, x) in want.o.iter().enumerate() {
        assert_eq!(x.is_nan(), i % D == 9, "O[{}][{}] = {x}", i / D, i % D);
    }
    assert!(want.lse.iter().all(|x| x.is_finite()));
}
