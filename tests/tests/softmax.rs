//! Row softmax, three ways (naive, online, fused), on the emulator against the f64 reference;
//! the defined results on special values; the laws of the online state's merge; and the cost
//! models against the emulator's counters.

use emu::LaunchCounters;
use half::bf16;
use host::ops::softmax::{self, RowStats, SoftmaxElement, Variant};
use host::{Error, Runtime, reference};
use kernels::softmax::{F32_RTOL, FUSED_ON_CHIP_COLS, OnlineState, ROW_THREADS, Scalar, merge};
use proptest::prelude::*;

// f32 outputs: `|got - want| <= F32_RTOL * |want| + F32_ATOL`, with `kernels::softmax::F32_RTOL`
// (its doc derives it; the registered f32 kernels' tolerance is the same).

/// `ex2.approx.ftz` flushes results below 2^-126 to zero, so an output whose exact value is
/// below that may come back as 0.
const F32_ATOL: f32 = f32::MIN_POSITIVE;

/// Whether a kernel output matches the reference: both NaN, or within tolerance.
fn close_f32(got: f32, want: f32) -> bool {
    (got.is_nan() && want.is_nan()) || (got - want).abs() <= F32_RTOL * want.abs() + F32_ATOL
}

/// bf16 outputs: at most one bf16 ulp from the reference (which rounds the f64 result once).
/// bf16 keeps 8 significant bits, so one ulp is 2^-8 to 2^-7 of the value; the kernel's f32 result
/// is within ~2e-5 of exact (see [`F32_RTOL`]) and rounds to the same bf16 unless the exact value
/// lies within 2e-5 of a rounding boundary, and then to the neighbouring one. Below 2^-126 the
/// flush to zero applies as for f32.
fn close_bf16(got: bf16, want: bf16) -> bool {
    let (g, w) = (got.to_f32(), want.to_f32());
    let ulps = (i32::from(got.to_bits() as i16) - i32::from(want.to_bits() as i16)).abs();
    (g.is_nan() && w.is_nan())
        || (g.is_sign_positive() == w.is_sign_positive() && ulps <= 1)
        || (g.abs() <= F32_ATOL && w.abs() <= F32_ATOL)
}

/// What the tests need of an element type beyond what the op takes (`Scalar` converts).
trait Dtype: SoftmaxElement + Scalar + PartialEq {
    /// The largest finite magnitude (bf16's is below f32's, which would round to +inf).
    const EXTREME: f32;
    fn reference(x: &[Self], cols: usize) -> Vec<Self>;
    fn close(got: Self, want: Self) -> bool;
}

impl Dtype for f32 {
    const EXTREME: f32 = f32::MAX;
    fn reference(x: &[Self], cols: usize) -> Vec<Self> {
        reference::softmax_f32(x, cols)
    }
    fn close(got: Self, want: Self) -> bool {
        close_f32(got, want)
    }
}

impl Dtype for bf16 {
    const EXTREME: f32 = bf16::MAX.to_f32_const();
    fn reference(x: &[Self], cols: usize) -> Vec<Self> {
        reference::softmax_bf16(x, cols)
    }
    fn close(got: Self, want: Self) -> bool {
        close_bf16(got, want)
    }
}

/// Runs `variant` on a fresh counting runtime (the PTX backend under `KERNELS_BACKEND=ptx`):
/// the output and the launch's counters.
fn run<T: Dtype>(variant: Variant, x: &[T], rows: usize, cols: usize) -> (Vec<T>, LaunchCounters) {
    let (rt, _) = suite::counting();
    let xd = rt.upload(x).unwrap();
    let mut yd = rt.alloc::<T>(x.len()).unwrap();
    let mut stats = RowStats::new(&rt, rows).unwrap();
    let counters = variant
        .run(&rt, &xd, &mut yd, &mut stats, rows, cols)
        .unwrap_or_else(|e| panic!("{} {rows} x {cols}: {e}", variant.name()))
        .expect("the emulator reports counters");
    (rt.download(&yd).unwrap(), counters)
}

/// Runs every variant on `x` and compares each with the reference, naming the first mismatch.
fn check_all<T: Dtype>(x: &[T], rows: usize, cols: usize) -> Result<(), TestCaseError> {
    let want = T::reference(x, cols);
    for variant in Variant::ALL {
        let (got, _) = run(variant, x, rows, cols);
        if let Some(i) = (0..want.len()).find(|&i| !T::close(got[i], want[i])) {
            let row = &x[i / cols * cols..][..cols];
            let row: Vec<f32> = row.iter().take(8).map(|v| v.to_f32()).collect();
            return Err(TestCaseError::fail(format!(
                "{} {rows} x {cols}: y[{}, {}] = {:e}, reference {:e} (row starts {row:?})",
                variant.name(),
                i / cols,
                i % cols,
                got[i].to_f32(),
                want[i].to_f32(),
            )));
        }
    }
    Ok(())
}

/// A `rows x cols` matrix of values `u * scale`, `u` uniform in [-1, 1]: scales from 1e-3 (nearly
/// uniform rows) to 80 (a few entries carry all the mass).
fn matrix(
    rows: impl Strategy<Value = usize>,
    cols: impl Strategy<Value = usize>,
) -> impl Strategy<Value = (usize, usize, Vec<f32>)> {
    let scale = prop_oneof![Just(1e-3f32), Just(1.0), Just(10.0), Just(80.0)];
    (rows, cols, scale).prop_flat_map(|(rows, cols, scale)| {
        let values = prop::collection::vec(-1.0f32..=1.0, rows * cols);
        (
            Just(rows),
            Just(cols),
            values.prop_map(move |v| v.into_iter().map(|u| u * scale).collect()),
        )
    })
}

/// Column counts around the interesting sizes: 1, fewer than a warp, around one block of
/// threads ([`ROW_THREADS`]) and mostly not a multiple of it.
fn short_cols() -> impl Strategy<Value = usize> {
    let block = ROW_THREADS as usize;
    prop_oneof![1usize..=40, (block - 20)..=(2 * block + 50)]
}

/// Longer than the fused kernel keeps on chip: two or three chunks, the last one partial.
fn long_cols() -> impl Strategy<Value = usize> {
    let on_chip = FUSED_ON_CHIP_COLS as usize;
    (on_chip + 1)..=(2 * on_chip + 300)
}

fn convert<T: Dtype>(x: &[f32]) -> Vec<T> {
    x.iter().map(|&v| T::from_f32(v)).collect()
}

proptest! {
    #![proptest_config(suite::proptest_config(64))]

    #[test]
    fn f32_matches_reference((rows, cols, x) in matrix(1usize..=5, short_cols())) {
        check_all::<f32>(&x, rows, cols)?;
    }

    #[test]
    fn bf16_matches_reference((rows, cols, x) in matrix(1usize..=5, short_cols())) {
        check_all::<bf16>(&convert(&x), rows, cols)?;
    }
}

proptest! {
    #![proptest_config(suite::proptest_config(6))]

    #[test]
    fn f32_rows_longer_than_on_chip((rows, cols, x) in matrix(1usize..=2, long_cols())) {
        check_all::<f32>(&x, rows, cols)?;
    }

    #[test]
    fn bf16_rows_longer_than_on_chip((rows, cols, x) in matrix(1usize..=2, long_cols())) {
        check_all::<bf16>(&convert(&x), rows, cols)?;
    }
}

/// What a row of the edge-case matrix holds besides ordinary values.
#[derive(Clone, Copy, Debug)]
enum Edge {
    /// Ordinary values only.
    Plain,
    /// Some entries `-inf` (masked).
    NegInf,
    /// Every entry `-inf`: no mass.
    AllNegInf,
    /// Some entries `+inf`.
    PosInf,
    /// Some entries NaN.
    NaN,
    /// Some entries at the dtype's limits, both signs, with ordinary values around them.
    Extreme,
}

/// Sets the row's `picks` (and for [`Edge::AllNegInf`] every entry) to `edge`'s values.
fn apply_edge(row: &mut [f32], edge: Edge, picks: &[prop::sample::Index], extreme: f32) {
    let big = [extreme, -extreme, 3e38, -3e38];
    if let Edge::AllNegInf = edge {
        row.fill(f32::NEG_INFINITY);
    }
    for (k, pick) in picks.iter().enumerate() {
        let at = pick.index(row.len());
        match edge {
            Edge::Plain | Edge::AllNegInf => {}
            Edge::NegInf => row[at] = f32::NEG_INFINITY,
            Edge::PosInf => row[at] = f32::INFINITY,
            Edge::NaN => row[at] = f32::NAN,
            Edge::Extreme => row[at] = big[k % big.len()],
        }
    }
}

/// A matrix whose rows each get an [`Edge`], for element type `T`.
fn edge_matrix<T: Dtype>(
    cols: impl Strategy<Value = usize>,
) -> impl Strategy<Value = (usize, usize, Vec<T>)> {
    let edge = prop_oneof![
        Just(Edge::Plain),
        Just(Edge::NegInf),
        Just(Edge::AllNegInf),
        Just(Edge::PosInf),
        Just(Edge::NaN),
        Just(Edge::Extreme),
    ];
    let picks = prop::collection::vec(any::<prop::sample::Index>(), 1..4);
    matrix(1usize..=6, cols)
        .prop_flat_map(move |(rows, cols, x)| {
            let edges = prop::collection::vec((edge.clone(), picks.clone()), rows);
            (Just(rows), Just(cols), Just(x), edges)
        })
        .prop_map(|(rows, cols, mut x, edges)| {
            for (row, (edge, picks)) in x.chunks_mut(cols).zip(&edges) {
                apply_edge(row, *edge, picks, T::EXTREME);
            }
            (rows, cols, convert(&x))
        })
}

fn any_cols() -> impl Strategy<Value = usize> {
    let on_chip = FUSED_ON_CHIP_COLS as usize;
    prop_oneof![6 => short_cols(), 1 => Just(on_chip), 1 => Just(on_chip + 1), 1 => long_cols()]
}

proptest! {
    #![proptest_config(suite::proptest_config(48))]

    #[test]
    fn f32_edge_rows_match_reference((rows, cols, x) in edge_matrix::<f32>(any_cols())) {
        check_all::<f32>(&x, rows, cols)?;
    }

    #[test]
    fn bf16_edge_rows_match_reference((rows, cols, x) in edge_matrix::<bf16>(any_cols())) {
        check_all::<bf16>(&x, rows, cols)?;
    }

    /// The `(m, l)` that naive and online leave in HBM: `m` exactly the row's max (a max rounds
    /// nothing), `l` as the outputs.
    #[test]
    fn row_stats_match_reference((rows, cols, x) in edge_matrix::<f32>(short_cols())) {
        let rt = Runtime::emulator();
        let xd = rt.upload(&x).unwrap();
        let mut yd = rt.alloc::<f32>(x.len()).unwrap();
        for variant in [Variant::Naive, Variant::Online] {
            let mut stats = RowStats::new(&rt, rows).unwrap();
            variant.run(&rt, &xd, &mut yd, &mut stats, rows, cols).unwrap();
            let (m, l) = (rt.download(&stats.max).unwrap(), rt.download(&stats.sum).unwrap());
            for (r, row) in x.chunks(cols).enumerate() {
                let row: Vec<f64> = row.iter().map(|&v| f64::from(v)).collect();
                let (want_m, want_l) = reference::softmax_row_stats(&row);
                let name = variant.name();
                prop_assert!(
                    m[r] == want_m as f32 || (m[r].is_nan() && want_m.is_nan()),
                    "{name} row {r}: m = {}, reference {want_m}", m[r]
                );
                prop_assert!(close_f32(l[r], want_l as f32), "{name} row {r}: l = {}, reference {want_l}", l[r]);
            }
        }
    }
}

/// The defined results, checked on the outputs directly rather than through the reference.
#[test]
fn special_values_have_their_defined_results() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let cols = 300; // more columns than threads, so the specials sit in different threads
    let mut x = vec![0.5f32; 5 * cols];
    x[..cols].fill(f32::NEG_INFINITY); // row 0: no mass
    x[cols + 7] = nan; // row 1: a NaN
    x[2 * cols + 3] = inf; // row 2: two +inf
    x[2 * cols + 290] = inf;
    x[3 * cols + 1] = f32::NEG_INFINITY; // row 3: masked entries among equal scores
    x[3 * cols + 299] = f32::NEG_INFINITY;
    x[4 * cols] = f32::MAX; // row 4: the limits
    x[4 * cols + 1] = -f32::MAX;
    for variant in Variant::ALL {
        let (y, _) = run(variant, &x, 5, cols);
        let name = variant.name();
        let row = |r: usize| &y[r * cols..(r + 1) * cols];
        assert!(
            row(0).iter().all(|&p| p == 0.0),
            "{name}: an all -inf row gives zeros"
        );
        assert!(
            row(1).iter().all(|p| p.is_nan()),
            "{name}: a NaN poisons its row"
        );
        for (j, &p) in row(2).iter().enumerate() {
            let want = if j == 3 || j == 290 { 0.5 } else { 0.0 };
            assert_eq!(p, want, "{name}: the +inf entries share the mass (col {j})");
        }
        let uniform = 1.0 / (cols - 2) as f32;
        for (j, &p) in row(3).iter().enumerate() {
            let want = if j == 1 || j == 299 { 0.0 } else { uniform };
            assert!(close_f32(p, want), "{name}: row 3 col {j}: {p} != {want}");
        }
        assert_eq!(
            row(4)[0],
            1.0,
            "{name}: f32::MAX takes all the mass, no overflow"
        );
        assert!(row(4)[1..].iter().all(|&p| p == 0.0), "{name}: row 4");
    }
}

/// The state of a run of elements, merged one at a time (what each thread of the online kernel
/// does).
fn fold(values: &[f32]) -> OnlineState {
    values
        .iter()
        .fold(OnlineState::IDENTITY, |s, &x| merge(s, OnlineState::of(x)))
}

/// The most one merge changes `l`, relative: its fma rounds once (2^-24), and its exponential
/// `exp(m_lo - m_hi)`, with `|m_lo - m_hi| <= 20` for scores in [-10, 10], is off by up to
/// `20 * 2^-24` for rounding the difference, as much again for the product with log2 e, and
/// 2^-22 (4 * 2^-24) for ex2.approx: 45 * 2^-24, 2.7e-6, in all.
const PER_MERGE: f32 = 45.0 / (1u32 << 24) as f32;

/// Two states computed with `merges` merges between them: `m` exactly (a max rounds nothing),
/// `l` within the first-order sum of the merges' errors.
fn same_state(a: OnlineState, b: OnlineState, merges: usize) -> bool {
    let tolerance = merges as f32 * PER_MERGE;
    a.m == b.m && (a.l - b.l).abs() <= tolerance * a.l.abs().max(b.l.abs())
}

/// Values for the merge laws: ordinary scores, occasionally masked.
fn scores(len: impl Into<prop::collection::SizeRange>) -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(
        prop_oneof![9 => -10.0f32..=10.0, 1 => Just(f32::NEG_INFINITY)],
        len,
    )
}

proptest! {
    #![proptest_config(suite::proptest_config(256))]

    #[test]
    fn identity_is_exact(a in scores(0..20)) {
        let s = fold(&a);
        prop_assert_eq!(merge(OnlineState::IDENTITY, s), s);
        prop_assert_eq!(merge(s, OnlineState::IDENTITY), s);
    }

    /// Exactly commutative: the larger max is kept whatever the order, and a tie adds the two
    /// sums in one commutative fma. (The butterfly reduction relies on it: lanes `i` and `i ^ k`
    /// merge the same pair in opposite orders and must agree.)
    #[test]
    fn merge_is_commutative(a in scores(0..20), b in scores(0..20)) {
        let (a, b) = (fold(&a), fold(&b));
        prop_assert_eq!(merge(a, b), merge(b, a));
    }

    #[test]
    fn merge_is_associative(a in scores(0..20), b in scores(0..20), c in scores(0..20)) {
        let (a, b, c) = (fold(&a), fold(&b), fold(&c));
        let left = merge(merge(a, b), c);
        let right = merge(a, merge(b, c));
        prop_assert!(same_state(left, right, 4), "{left:?} != {right:?}");
    }

    /// Cutting a row anywhere, folding each chunk and merging the chunks' states, either left to
    /// right or as a balanced tree, gives the single pass's state, and both match the f64
    /// reference.
    #[test]
    fn any_chunking_equals_one_pass(
        row in scores(1..200),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(row.len() + 1)).collect();
        cuts.extend([0, row.len()]);
        cuts.sort_unstable();
        let chunks: Vec<OnlineState> = cuts.windows(2).map(|w| fold(&row[w[0]..w[1]])).collect();
        let one_pass = fold(&row);
        // Each side merges every element once and the chunks at most once more.
        let merges = 2 * (row.len() + chunks.len());
        let in_order = chunks.iter().fold(OnlineState::IDENTITY, |s, &c| merge(s, c));
        prop_assert!(same_state(in_order, one_pass, merges), "{in_order:?} != {one_pass:?}");
        let mut tree = chunks;
        while tree.len() > 1 {
            tree = tree.chunks(2).map(|p| p.iter().fold(OnlineState::IDENTITY, |s, &c| merge(s, c))).collect();
        }
        prop_assert!(same_state(tree[0], one_pass, merges), "{:?} != {one_pass:?}", tree[0]);
        let wide: Vec<f64> = row.iter().map(|&v| f64::from(v)).collect();
        let (m, l) = reference::softmax_row_stats(&wide);
        let exact = OnlineState { m: m as f32, l: l as f32 };
        prop_assert!(same_state(one_pass, exact, row.len() + 1), "{one_pass:?} vs ({m}, {l})");
    }
}

proptest! {
    #![proptest_config(suite::proptest_config(24))]

    /// The emulator's counted HBM traffic and FLOPs equal each variant's cost model exactly, so
    /// the modelled bytes the roofline figures rest on are the bytes the kernels move.
    #[test]
    fn counters_equal_cost_models(rows in 1usize..=4, cols in any_cols()) {
        let x = vec![1.0f32; rows * cols];
        for variant in Variant::ALL {
            let (_, f32_counts) = run(variant, &x, rows, cols);
            let (_, bf16_counts) = run(variant, &convert::<bf16>(&x), rows, cols);
            for (counts, bytes) in [(f32_counts, 4), (bf16_counts, 2)] {
                let cost = variant.cost(rows, cols, bytes);
                let name = variant.name();
                prop_assert_eq!(counts.global_read_bytes, cost.bytes_read, "{} read", name);
                prop_assert_eq!(counts.global_write_bytes, cost.bytes_written, "{} written", name);
                prop_assert!(
                    suite::flops_agree(counts.flops, cost.flops),
                    "{} flops: counted {}, model {}",
                    name,
                    counts.flops,
                    cost.flops
                );
            }
        }
    }
}

#[test]
fn bad_shapes_are_refused_with_a_reason() {
    let rt = Runtime::emulator();
    let x = rt.upload(&[0.0f32; 12]).unwrap();
    let mut y = rt.alloc::<f32>(12).unwrap();
    let mut short_y = rt.alloc::<f32>(11).unwrap();
    let mut stats = RowStats::new(&rt, 3).unwrap();
    let mut short_stats = RowStats::new(&rt, 2).unwrap();
    let reason = |r: host::Result<_>| match r {
        Err(Error::Shape(msg)) => msg,
        Err(e) => panic!("expected a shape error, got {e}"),
        Ok(_) => panic!("expected a shape error, got a launch"),
    };
    assert!(reason(softmax::fused(&rt, &x, &mut y, 12, 0)).contains("at least 1"));
    assert!(reason(softmax::fused(&rt, &x, &mut y, 3, 5)).contains("x has 12 elements"));
    assert!(reason(softmax::fused(&rt, &x, &mut short_y, 3, 4)).contains("y has 11"));
    let msg = reason(softmax::naive(&rt, &x, &mut y, &mut short_stats, 3, 4));
    assert!(msg.contains("stats.max has 2"), "{msg}");
    let msg = reason(softmax::online(&rt, &x, &mut y, &mut short_stats, 4, 3));
    assert!(msg.contains("stats.max has 2"), "{msg}");
    assert!(softmax::online(&rt, &x, &mut y, &mut stats, 3, 4).is_ok());
    let empty = rt.alloc::<f32>(0).unwrap();
    let mut empty_y = rt.alloc::<f32>(0).unwrap();
    assert!(
        softmax::fused(&rt, &empty, &mut empty_y, 0, 7)
            .unwrap()
            .is_none()
    );
}
