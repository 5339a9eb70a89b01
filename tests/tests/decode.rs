//! Decode: the GEMV and split-KV decode attention against the f64 references on odd shapes, the
//! merge kernel alone against the direct softmax, the emulator's counted bytes against the cost
//! models, and refusals of shapes the kernels do not take.
//!
//! Tolerances are bounds. Unit roundoffs: `U = 2^-24` (f32 accumulation), `UH = 2^-8` (bf16
//! output: rounding the f32 result once moves it by at most `UH |y|`).
//!
//! - GEMV: each output is a dot product of length K accumulated in f32 in some order (per lane,
//!   then five shuffles, then eight warps): at most `K + 13` roundings, so within
//!   `gamma_(K+13) sum_k |x_k w_k|` of the exact value (the bound of `GemmKernel::error_bound`),
//!   then rounded to bf16.
//! - Attention: the bound of tests/tests/attention.rs (scores off by `delta = (d + 2) u scale
//!   max_j sum_c |q_c k_jc|`, weights by `exp(+-2 delta)`, sums over keys and dims `(4 (n + d) +
//!   32) u`), plus `4 u` per split for the merge's rescale and sum, plus the bf16 rounding.

use emu::LaunchCounters;
use half::bf16;
use host::ops::decode::{self, DecodeShape, DecodeWorkspace};
use host::ops::gemm::GemmShape;
use host::{Error, Runtime, reference};
use kernels::decode::attention::{HEAD_DIM, MAX_GROUP};
use proptest::prelude::*;
use suite::runtime;

const U: f64 = f32::EPSILON as f64 / 2.0;
const UH: f64 = 1.0 / 256.0;

/// `n` values uniform in `[-a, a]`, rounded to bf16, and the same widened back (what the
/// references see, so that input rounding is no error of the kernel's).
fn bf16_values(n: usize, seed: u64, a: f32) -> (Vec<bf16>, Vec<f32>) {
    let x: Vec<bf16> = reference::uniform(n, seed, -a, a)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let wide = x.iter().map(|v| v.to_f32()).collect();
    (x, wide)
}

fn widen(x: &[bf16]) -> Vec<f32> {
    x.iter().map(|v| v.to_f32()).collect()
}

/// Runs the GEMV: `Y` widened, and the counters (`None` on a GPU).
fn run_gemv(
    rt: &Runtime,
    w: &[bf16],
    x: &[bf16],
    shape: GemmShape,
) -> (Vec<f32>, Option<LaunchCounters>) {
    let (wd, xd) = (rt.upload(w).unwrap(), rt.upload(x).unwrap());
    let mut y = rt.alloc::<bf16>(shape.m * shape.n).unwrap();
    let counters =
        decode::gemv(rt, &wd, &xd, &mut y, shape).unwrap_or_else(|e| panic!("{shape:?}: {e}"));
    (widen(&rt.download(&y).unwrap()), counters)
}

/// K: small, around the vector width (8) and the block's 256 threads x 8, multiples of 8 (the
/// 16-byte path) and not (the scalar path).
fn gemv_k() -> impl Strategy<Value = usize> {
    prop_oneof![
        1usize..=40,
        (1usize..=300).prop_map(|c| 8 * c),
        2040usize..=2060
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    /// Every M from 1 to 16 (each row tile, and M below its tile), N not a multiple of the
    /// block's 4 rows, K of both paths.
    #[test]
    fn gemv_matches_reference(m in 1usize..=16, n in 1usize..=37, k in gemv_k(), seed in any::<u64>()) {
        let shape = GemmShape::new(m, n, k);
        let (w, wf) = bf16_values(n * k, seed, 1.0);
        let (x, xf) = bf16_values(m * k, seed ^ 7, 1.0);
        let (got, _) = run_gemv(&runtime(), &w, &x, shape);
        let want = reference::gemv(&xf, &wf, (m, n, k));
        let gamma = 1.01 * (k + 13) as f64 * U;
        for (i, (g, e)) in got.iter().zip(&want).enumerate() {
            let err = (f64::from(*g) - e.value).abs();
            let bound = gamma * e.magnitude + UH * (e.value.abs() + gamma * e.magnitude);
            prop_assert!(err <= bound, "{shape:?}: y[{}, {}] = {g}, reference {}: error {err:e} > {bound:e}",
                i / n, i % n, e.value);
        }
    }

    /// The bytes and FLOPs the emulator counts are the cost model's, exactly: W once, X once per
    /// block, Y once.
    #[test]
    fn gemv_counters_equal_cost_model(m in 1usize..=16, n in 1usize..=13, k in gemv_k()) {
        let shape = GemmShape::new(m, n, k);
        let (w, _) = bf16_values(n * k, 1, 1.0);
        let (x, _) = bf16_values(m * k, 2, 1.0);
        let (_, counts) = run_gemv(&Runtime::emulator(), &w, &x, shape);
        let counts = counts.expect("the emulator counts");
        let cost = decode::gemv_cost(shape);
        prop_assert_eq!(counts.global_read_bytes, cost.bytes_read);
        prop_assert_eq!(counts.global_write_bytes, cost.bytes_written);
        prop_assert_eq!(counts.flops, cost.flops);
    }
}

#[test]
fn gemv_refuses_what_it_cannot_do() {
    let rt = Runtime::emulator();
    let w = rt.alloc::<bf16>(12).unwrap();
    let x = rt.alloc::<bf16>(17 * 4).unwrap();
    let mut y = rt.alloc::<bf16>(17 * 3).unwrap();
    let reason = |r: host::Result<_>| match r {
        Err(Error::Shape(msg)) => msg,
        other => panic!("expected a shape error, got {other:?}"),
    };
    let msg = reason(decode::gemv(&rt, &w, &x, &mut y, GemmShape::new(17, 3, 4)));
    assert!(msg.contains("at most 16"), "{msg}");
    let msg = reason(decode::gemv(&rt, &w, &x, &mut y, GemmShape::new(1, 3, 4)));
    assert!(msg.contains("X has 68 elements"), "{msg}");
    let mut y0 = rt.alloc::<bf16>(0).unwrap();
    let x0 = rt.alloc::<bf16>(0).unwrap();
    assert!(
        decode::gemv(&rt, &w, &x0, &mut y0, GemmShape::new(0, 3, 4))
            .unwrap()
            .is_none()
    );
}

/// One decode-attention problem: shape, lengths, splits, bf16 inputs and their widened values.
#[derive(Debug)]
struct Problem {
    shape: DecodeShape,
    ctx: Vec<u32>,
    splits: Option<u32>,
    inputs: [Vec<bf16>; 3],
    wide: [Vec<f32>; 3],
    scale: f32,
}

impl Problem {
    fn new(
        shape: DecodeShape,
        ctx: Vec<u32>,
        splits: Option<u32>,
        magnitude: f32,
        seed: u64,
    ) -> Self {
        let (q, qf) = bf16_values(shape.q_elems(), seed, magnitude);
        let (k, kf) = bf16_values(shape.kv_elems(), seed ^ 1, magnitude);
        let (v, vf) = bf16_values(shape.kv_elems(), seed ^ 2, 1.0);
        Self {
            shape,
            ctx,
            splits,
            inputs: [q, k, v],
            wide: [qf, kf, vf],
            scale: 1.0 / (HEAD_DIM as f32).sqrt(),
        }
    }

    /// The kernels' `o` (widened), `lse`, the splits used, and the counters.
    fn run(&self, rt: &Runtime) -> (Vec<f32>, Vec<f32>, u32, Option<LaunchCounters>) {
        let [q, k, v] = &self.inputs;
        let (q, k, v) = (
            rt.upload(q).unwrap(),
            rt.upload(k).unwrap(),
            rt.upload(v).unwrap(),
        );
        let mut ws = DecodeWorkspace::new(rt, &self.shape, &self.ctx, self.splits).unwrap();
        let mut o = rt.alloc::<bf16>(self.shape.q_elems()).unwrap();
        let mut lse = rt.alloc::<f32>(self.shape.rows()).unwrap();
        let counts = decode::attention(
            rt,
            &q,
            &k,
            &v,
            &mut o,
            &mut lse,
            &self.shape,
            &mut ws,
            self.scale,
        )
        .unwrap_or_else(|e| panic!("{:?} {:?}: {e}", self.shape, self.ctx));
        (
            widen(&rt.download(&o).unwrap()),
            rt.download(&lse).unwrap(),
            ws.splits,
            counts,
        )
    }

    /// Checks the kernels against the reference within the header's bounds.
    fn check(&self, rt: &Runtime) -> Result<(), String> {
        let (o, lse, splits, _) = self.run(rt);
        let [q, k, v] = &self.wide;
        let want = reference::decode_attention([q, k, v], &self.shape, &self.ctx, self.scale);
        let d = HEAD_DIM;
        let v_max = v.iter().fold(0.0f64, |m, x| m.max(f64::from(x.abs())));
        for row in 0..self.shape.rows() {
            let (b, hq) = (row / self.shape.q_heads, row % self.shape.q_heads);
            let h = hq / self.shape.group();
            let n = self.ctx[b] as usize;
            let start = (b * self.shape.kv_heads + h) * self.shape.max_ctx * d;
            let q_row = &q[row * d..][..d];
            let worst_dot = (0..n)
                .map(|j| {
                    q_row
                        .iter()
                        .zip(&k[start + j * d..][..d])
                        .map(|(a, b)| f64::from((a * b).abs()))
                        .sum::<f64>()
                })
                .fold(0.0, f64::max);
            let delta = (d + 2) as f64 * U * f64::from(self.scale) * worst_dot;
            let rounding = (4 * (n + d) + 32 + 4 * splits as usize) as f64 * U;
            let lse_bound = delta + rounding;
            let (got, exp) = (f64::from(lse[row]), want.lse[row]);
            let lse_ok = (got == exp) || (got - exp).abs() <= lse_bound;
            if !lse_ok {
                return Err(format!(
                    "row {row} (ctx {n}, {splits} splits): lse {got}, reference {exp}"
                ));
            }
            for c in 0..d {
                let (got, exp) = (f64::from(o[row * d + c]), want.o[row * d + c]);
                let bound = v_max * (2.0 * delta + rounding) * (1.0 + UH) + UH * exp.abs();
                let err = (got - exp).abs();
                if err.is_nan() || err > bound {
                    return Err(format!(
                        "row {row} (ctx {n}, {splits} splits) o[{c}] = {got}, reference {exp}: error {err:e} > {bound:e}"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Context lengths: none at all (a fully masked head), short, and not multiples of anything.
fn ctx_len() -> impl Strategy<Value = u32> {
    prop_oneof![1 => Just(0u32), 1 => 1u32..=17, 4 => 18u32..=300]
}

/// Splits: the host's choice, one (the whole sequence in one block, many steps of its loop),
/// or many (more splits than the shorter sequences have keys for: empty splits whose partials
/// are the identity).
fn splits() -> impl Strategy<Value = Option<u32>> {
    prop_oneof![Just(None), Just(Some(1)), (2u32..=40).prop_map(Some)]
}

fn problem() -> impl Strategy<Value = Problem> {
    let group = prop_oneof![Just(1usize), Just(4), Just(MAX_GROUP)];
    let magnitude = prop_oneof![Just(1.0f32), Just(4.0)];
    (
        1usize..=3,
        1usize..=2,
        group,
        splits(),
        magnitude,
        0usize..=20,
        any::<u64>(),
    )
        .prop_flat_map(|(batch, kv_heads, group, splits, magnitude, extra, seed)| {
            prop::collection::vec(ctx_len(), batch).prop_map(move |ctx| {
                let max_ctx = ctx.iter().copied().max().unwrap_or(0) as usize + extra;
                let shape = DecodeShape::new(batch, kv_heads * group, kv_heads, max_ctx);
                Problem::new(shape, ctx, splits, magnitude, seed)
            })
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// GQA groups of 1, 4 and 8, lengths that are not multiples of the chunk, one split, more
    /// splits than keys, empty sequences, a cache longer than every sequence.
    #[test]
    fn attention_matches_reference(p in problem()) {
        p.check(&runtime()).map_err(TestCaseError::fail)?;
    }

    /// The emulator counts every byte of K and V once, and the rest exactly as the model says.
    #[test]
    fn attention_counters_equal_cost_model(p in problem()) {
        let (_, _, splits, counts) = p.run(&Runtime::emulator());
        let counts = counts.expect("the emulator counts");
        let cost = decode::attention_traffic(&p.shape, &p.ctx, splits);
        prop_assert_eq!(counts.global_read_bytes, cost.bytes_read);
        prop_assert_eq!(counts.global_write_bytes, cost.bytes_written);
        prop_assert_eq!(counts.flops, cost.flops);
    }
}

/// A long sequence in few splits: each block runs many steps of its loop (more chunks of keys
/// than blocks), with Llama-3's group of 4 and a length that is no multiple of anything.
#[test]
fn long_sequence_in_few_blocks() {
    let shape = DecodeShape::new(1, 4, 1, 1500);
    for splits in [Some(1), Some(3), None] {
        Problem::new(shape, vec![1499], splits, 2.0, 5)
            .check(&runtime())
            .unwrap();
    }
}

/// Every sequence empty: zeros and `-inf`, never NaN, whatever the splits.
#[test]
fn fully_masked_heads_give_zeros_and_minus_infinity() {
    let shape = DecodeShape::new(2, 8, 2, 64);
    for splits in [Some(1), Some(7)] {
        let (o, lse, _, _) = Problem::new(shape, vec![0, 0], splits, 1.0, 9).run(&runtime());
        assert!(o.iter().all(|&x| x == 0.0), "{o:?}");
        assert!(lse.iter().all(|&x| x == f32::NEG_INFINITY), "{lse:?}");
    }
}

/// The partial `(m, l, o)` of scores `s` and value rows `v` (128 each) in f64, rounded to f32:
/// what a split block would leave, computed independently.
fn partial(s: &[f64], v: &[f64]) -> (f32, f32, Vec<f32>) {
    let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        return (f32::NEG_INFINITY, 0.0, vec![0.0; HEAD_DIM]);
    }
    let l = s.iter().map(|x| (x - m).exp()).sum::<f64>();
    let o = (0..HEAD_DIM)
        .map(|c| {
            s.iter()
                .enumerate()
                .map(|(j, x)| (x - m).exp() * v[j * HEAD_DIM + c])
                .sum::<f64>() as f32
        })
        .collect();
    (m as f32, l as f32, o)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// The merge kernel alone: a row of scores cut anywhere into `splits` pieces (some empty),
    /// each piece's partial computed on the host, merged on the device, against the direct
    /// softmax of the whole row times V (and its log-sum-exp).
    #[test]
    fn merge_kernel_equals_direct_softmax(
        rows in 1usize..=3,
        n in 0usize..=150,
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        scale in prop_oneof![Just(1.0f64), Just(20.0)],
        seed in any::<u64>(),
    ) {
        let rt = runtime();
        let splits = cuts.len() + 1;
        let mut bounds: Vec<usize> = cuts.iter().map(|c| c.index(n + 1)).collect();
        bounds.extend([0, n]);
        bounds.sort_unstable();
        let mut ws = DecodeWorkspace::new(&rt, &DecodeShape::new(rows, 1, 1, n), &vec![n as u32; rows], Some(splits as u32)).unwrap();
        let (mut pm, mut pl, mut po) = (vec![], vec![], vec![]);
        let mut want_o = vec![];
        let mut want_lse = vec![];
        let mut v_max = 0.0f64;
        for r in 0..rows {
            let s: Vec<f64> = reference::uniform(n, seed ^ r as u64, -1.0, 1.0).iter().map(|&x| scale * f64::from(x)).collect();
            let v: Vec<f64> = reference::uniform(n * HEAD_DIM, seed ^ 99 ^ r as u64, -1.0, 1.0).iter().map(|&x| f64::from(x)).collect();
            v_max = v.iter().fold(v_max, |m, x| m.max(x.abs()));
            for w in bounds.windows(2) {
                let (m, l, o) = partial(&s[w[0]..w[1]], &v[w[0] * HEAD_DIM..w[1] * HEAD_DIM]);
                pm.push(m);
                pl.push(l);
                po.extend(o);
            }
            let (m, l) = reference::softmax_row_stats(&s);
            want_lse.push(if l == 0.0 { f64::NEG_INFINITY } else { m + l.ln() });
            let p = reference::softmax_row(&s);
            want_o.extend((0..HEAD_DIM).map(|c| p.iter().enumerate().map(|(j, pj)| pj * v[j * HEAD_DIM + c]).sum::<f64>()));
        }
        rt.copy_to_device(&pm, &mut ws.part_m).unwrap();
        rt.copy_to_device(&pl, &mut ws.part_l).unwrap();
        rt.copy_to_device(&po, &mut ws.part_o).unwrap();
        let mut o = rt.alloc::<bf16>(rows * HEAD_DIM).unwrap();
        let mut lse = rt.alloc::<f32>(rows).unwrap();
        let counts = decode::merge_partials(&rt, &ws, &mut o, &mut lse, rows).unwrap();
        // Bytes on any backend that counts them (the PTX backend counts the FLOPs it executes,
        // not the marked ones: attention_counters_equal_cost_model checks those on the emulator).
        if let Some(counts) = counts {
            let cost = decode::merge_cost(rows, splits as u32);
            prop_assert_eq!((counts.global_read_bytes, counts.global_write_bytes),
                (cost.bytes_read, cost.bytes_written));
        }
        let (o, lse) = (widen(&rt.download(&o).unwrap()), rt.download(&lse).unwrap());
        // Inputs rounded to f32 (u each), a rescale exponential and a sum per split.
        let rounding = (4 * splits + 32) as f64 * U;
        for (i, (&g, &w)) in o.iter().zip(&want_o).enumerate() {
            let bound = v_max * rounding + UH * w.abs();
            prop_assert!((f64::from(g) - w).abs() <= bound, "o[{i}] = {g}, direct {w} ({splits} splits)");
        }
        for (r, (&g, &w)) in lse.iter().zip(&want_lse).enumerate() {
            let g = f64::from(g);
            prop_assert!(g == w || (g - w).abs() <= rounding * w.abs().max(1.0), "lse[{r}] = {g}, direct {w}");
        }
    }
}

#[test]
fn attention_refuses_what_it_cannot_do() {
    let rt = Runtime::emulator();
    let reason = |r: host::Result<DecodeWorkspace>| match r {
        Err(Error::Shape(msg)) => msg,
        Err(e) => panic!("expected a shape error, got {e}"),
        Ok(_) => panic!("expected a shape error"),
    };
    let msg = reason(DecodeWorkspace::new(
        &rt,
        &DecodeShape::new(1, 32, 5, 8),
        &[8],
        None,
    ));
    assert!(msg.contains("evenly"), "{msg}");
    let msg = reason(DecodeWorkspace::new(
        &rt,
        &DecodeShape::new(1, 32, 2, 8),
        &[8],
        None,
    ));
    assert!(msg.contains("at most 8"), "{msg}");
    let msg = reason(DecodeWorkspace::new(
        &rt,
        &DecodeShape::new(1, 8, 8, 8),
        &[9],
        None,
    ));
    assert!(msg.contains("holds 8"), "{msg}");
    let msg = reason(DecodeWorkspace::new(
        &rt,
        &DecodeShape::new(1, 8, 8, 8),
        &[8],
        Some(0),
    ));
    assert!(msg.contains("1 to 1024"), "{msg}");
    let msg = reason(DecodeWorkspace::new(
        &rt,
        &DecodeShape::new(2, 8, 8, 8),
        &[8],
        None,
    ));
    assert!(msg.contains("batch of 2"), "{msg}");
    // A workspace for another shape is refused at launch.
    let shape = DecodeShape::new(1, 8, 8, 8);
    let mut ws = DecodeWorkspace::new(&rt, &DecodeShape::new(1, 4, 4, 8), &[8], None).unwrap();
    let q = rt.alloc::<bf16>(shape.q_elems()).unwrap();
    let kv = rt.alloc::<bf16>(shape.kv_elems()).unwrap();
    let mut o = rt.alloc::<bf16>(shape.q_elems()).unwrap();
    let mut lse = rt.alloc::<f32>(shape.rows()).unwrap();
    let err =
        decode::attention(&rt, &q, &kv, &kv, &mut o, &mut lse, &shape, &mut ws, 1.0).unwrap_err();
    assert!(err.to_string().contains("another shape"), "{err}");
}

/// The problem's cache cut into pages of `page_size` positions and scattered over a pool in a
/// shuffled order, with spare pages; every position no sequence uses is NaN, so that a kernel
/// reading one poisons its output. Returns the paged shape, K and V pools, the table, the pages.
fn paginate(
    p: &Problem,
    page_size: usize,
    seed: u64,
) -> (DecodeShape, [Vec<bf16>; 2], Vec<u32>, usize) {
    let s = p.shape;
    let per_seq = s.max_ctx.div_ceil(page_size).max(1);
    let pages = s.batch * per_seq + 3;
    // A permutation of the pool (Fisher-Yates on deterministic uniforms).
    let mut order: Vec<u32> = (0..pages as u32).collect();
    let r = reference::uniform(pages, seed, 0.0, 1.0);
    for i in (1..pages).rev() {
        order.swap(i, ((r[i] * (i + 1) as f32) as usize).min(i));
    }
    let table: Vec<u32> = order[..s.batch * per_seq].to_vec();
    let layout = (&table[..], per_seq, page_size, pages);
    let pool = |cache: &[bf16]| decode::paginate(cache, &s, &p.ctx, layout, bf16::NAN);
    let paged_shape = DecodeShape::new(s.batch, s.q_heads, s.kv_heads, per_seq * page_size);
    (
        paged_shape,
        [pool(&p.inputs[1]), pool(&p.inputs[2])],
        table,
        pages,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// A paged cache gives the contiguous cache's results bit for bit (the same keys in the same
    /// order through the same arithmetic; only the addresses differ), reads no position outside
    /// the sequences (those are NaN), and moves exactly the paged cost model's bytes.
    #[test]
    fn paged_cache_equals_contiguous(p in problem(), page_size in prop_oneof![Just(1usize), Just(5), Just(16), Just(64)], seed in any::<u64>()) {
        let rt = runtime();
        let (want_o, want_lse, _, _) = p.run(&rt);
        let (shape, [kp, vp], table, pages) = paginate(&p, page_size, seed);
        let paged = decode::PagedKv::new(&rt, &table, shape.max_ctx / page_size, page_size, pages).unwrap();
        let (q, k, v) = (rt.upload(&p.inputs[0]).unwrap(), rt.upload(&kp).unwrap(), rt.upload(&vp).unwrap());
        let mut ws = DecodeWorkspace::new(&rt, &shape, &p.ctx, p.splits).unwrap();
        let mut o = rt.alloc::<bf16>(shape.q_elems()).unwrap();
        let mut lse = rt.alloc::<f32>(shape.rows()).unwrap();
        let counts = decode::attention_paged(&rt, &q, [&k, &v], &paged, &mut o, &mut lse, &shape, &mut ws, p.scale).unwrap();
        let got_o = widen(&rt.download(&o).unwrap());
        let got_lse = rt.download(&lse).unwrap();
        prop_assert!(got_o.iter().zip(&want_o).all(|(a, b)| a.to_bits() == b.to_bits()), "o differs");
        prop_assert!(got_lse.iter().zip(&want_lse).all(|(a, b)| a.to_bits() == b.to_bits()), "lse differs");
        // Bytes on any backend that counts them (FLOPs: as for the merge kernel above).
        if let Some(counts) = counts {
            let cost = decode::paged_traffic(&shape, &p.ctx, ws.splits, page_size);
            prop_assert_eq!(
                (counts.global_read_bytes, counts.global_write_bytes),
                (cost.bytes_read, cost.bytes_written)
            );
        }
    }
}

#[test]
fn paged_cache_refuses_a_bad_table() {
    let rt = Runtime::emulator();
    let reason = |r: host::Result<decode::PagedKv>| match r {
        Err(Error::Shape(msg)) => msg,
        Err(e) => panic!("expected a shape error, got {e}"),
        Ok(_) => panic!("expected a shape error"),
    };
    let msg = reason(decode::PagedKv::new(&rt, &[0, 1, 7], 3, 16, 4));
    assert!(msg.contains("page 7") && msg.contains("4 pages"), "{msg}");
    let msg = reason(decode::PagedKv::new(&rt, &[0, 1, 2], 2, 16, 4));
    assert!(msg.contains("rows of 2"), "{msg}");
    // A table for another capacity than the shape's max_ctx is refused at launch.
    let paged = decode::PagedKv::new(&rt, &[0, 1], 2, 16, 2).unwrap();
    let shape = DecodeShape::new(1, 4, 1, 64);
    let mut ws = DecodeWorkspace::new(&rt, &shape, &[10], None).unwrap();
    let q = rt.alloc::<bf16>(shape.q_elems()).unwrap();
    let kv = rt.alloc::<bf16>(paged.kv_elems(1)).unwrap();
    let mut o = rt.alloc::<bf16>(shape.q_elems()).unwrap();
    let mut lse = rt.alloc::<f32>(shape.rows()).unwrap();
    let err = decode::attention_paged(
        &rt,
        &q,
        [&kv, &kv],
        &paged,
        &mut o,
        &mut lse,
        &shape,
        &mut ws,
        1.0,
    )
    .unwrap_err();
    assert!(err.to_string().contains("table"), "{err}");
}
