//! The benchmark cases of `cargo xtask run`: each kernel at a size for the backend, with its
//! inputs, its cost model and a check against the CPU reference.

use std::cell::RefCell;
use std::rc::Rc;

use half::{bf16, f16};
use host::Runtime;
use host::ops::attention::{self as attention_op, AttentionParams, AttentionShape};
use host::ops::gemm::{self, Epilogue, GemmKernel, GemmOperands, GemmShape};
use host::reference;
use host::registry;
use host::runtime::Launched;
use perf::cost::Cost;

/// How big the problems are, and what the case is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Realistic on a GPU: several times the L2, hundreds of MB.
    Gpu,
    /// Small enough for the emulator on two cores.
    Emulator,
    /// The GPU's shape, for the performance model (`crate::predict`). No CPU reference is
    /// computed, since the model runs a sample of the launch's blocks and never checks the
    /// output ([`reference_of`]), and most inputs are zeros ([`uniform`]): the requests,
    /// sectors, wavefronts and instructions of a copy, a transpose or a GEMM do not depend on
    /// the values, and hundreds of MB of random numbers would cost seconds per row. Scores do
    /// steer softmax and attention, whose exponentials are skipped where a score equals its
    /// row's maximum (all of them, were the inputs zeros): their inputs vary
    /// ([`varied_in_as`]). `keys`, for a case [`affine_keys`] names, replaces the GPU shape's
    /// keys per head (the queries, and so the shape's name, unchanged).
    Model { keys: Option<usize> },
}

impl Scale {
    fn pick(self, gpu: usize, emulator: usize) -> usize {
        match self {
            Scale::Gpu | Scale::Model { .. } => gpu,
            Scale::Emulator => emulator,
        }
    }

    /// Whether the case is built for the performance model.
    fn for_model(self) -> bool {
        matches!(self, Scale::Model { .. })
    }

    /// The keys per head the model samples an attention case at, in place of its GPU shape's.
    fn model_keys(self) -> Option<usize> {
        match self {
            Scale::Model { keys } => keys,
            _ => None,
        }
    }
}

type LaunchFn<'a> = Box<dyn FnMut(&Runtime) -> host::Result<Launched> + 'a>;
type CheckFn<'a> = Box<dyn Fn(&Runtime) -> Result<String, String> + 'a>;

/// One kernel at one shape, ready to run.
pub struct Case<'a> {
    pub kernel: &'static str,
    pub shape: String,
    pub cost: Cost,
    /// The shape and cost at GPU scale: what modelled figures describe when the case itself runs
    /// at the emulator's scale.
    pub gpu: (String, Cost),
    /// Enqueues the work (one or several launches).
    pub launch: LaunchFn<'a>,
    /// Compares the output with the CPU reference: a one-line summary, or what is wrong.
    pub check: CheckFn<'a>,
}

/// A case not yet built: building allocates its buffers, so cases are built one at a time.
pub struct CaseSpec {
    pub kernel: &'static str,
    build: Build,
}

/// How a case is built: by its function in this file, or from a registered kernel's spec
/// (`kernels::registry`, docs/registry.md).
enum Build {
    Here(for<'a> fn(&'a Runtime, Scale) -> host::Result<Case<'a>>),
    /// The spec, and which of its GPU shapes ([`registry::Spec`]'s `shapes.run`) the row is.
    Registered(&'static registry::Spec, usize),
}

impl CaseSpec {
    /// Builds the case at `scale` on `rt` (allocates and fills its buffers).
    pub fn build<'a>(&self, rt: &'a Runtime, scale: Scale) -> host::Result<Case<'a>> {
        match self.build {
            Build::Here(build) => build(rt, scale),
            Build::Registered(spec, shape) => from_spec(rt, scale, spec, shape),
        }
    }
}

/// Every case, in the order of the lessons: the registered kernels that a lesson orders where it
/// does, the others (the scaffold's templates, a kernel of `cargo xtask new`) last, in the order
/// of the `registry!` block.
pub fn all() -> Vec<CaseSpec> {
    let lessons: Vec<CaseSpec> = vec![
        registered(&kernels::elementwise::COPY_WORDS),
        registered(&kernels::elementwise::VECTOR_ADD_F32),
        registered(&kernels::elementwise::VECTOR_ADD_F16),
        registered(&kernels::transpose::COPY_STRIDED),
        registered(&kernels::transpose::TRANSPOSE_NAIVE),
        registered(&kernels::transpose::TRANSPOSE_SHARED),
        registered(&kernels::transpose::TRANSPOSE_PADDED),
        registered(&kernels::softmax::SOFTMAX_NAIVE_F32),
        registered(&kernels::softmax::SOFTMAX_ONLINE_F32),
        registered(&kernels::softmax::SOFTMAX_FUSED_F32),
        registered(&kernels::softmax::SOFTMAX_NAIVE_BF16),
        registered(&kernels::softmax::SOFTMAX_ONLINE_BF16),
        registered(&kernels::softmax::SOFTMAX_FUSED_BF16),
        // The tall rows, 32768 x 4096.
        registered_at(&kernels::softmax::SOFTMAX_NAIVE_BF16, 1),
        registered_at(&kernels::softmax::SOFTMAX_ONLINE_BF16, 1),
        registered_at(&kernels::softmax::SOFTMAX_FUSED_BF16, 1),
        registered(&kernels::attention::ATTENTION_NAIVE_F32),
        registered(&kernels::attention::ATTENTION_FUSED_F32),
        registered(&kernels::attention::ATTENTION_NAIVE_BF16),
        registered(&kernels::attention::ATTENTION_FUSED_BF16),
        registered(&kernels::attention::ATTENTION_NAIVE_F16),
        registered(&kernels::attention::ATTENTION_FUSED_F16),
        registered(&kernels::attention::ATTENTION_NAIVE_F32_CAUSAL),
        registered(&kernels::attention::ATTENTION_FUSED_BF16_CAUSAL),
        case("attention_wgmma_bf16", |rt, s| {
            attention_wgmma::<bf16>(rt, s, false)
        }),
        case("attention_wgmma_f16", |rt, s| {
            attention_wgmma::<f16>(rt, s, false)
        }),
        case("attention_wgmma_bf16_causal", |rt, s| {
            attention_wgmma::<bf16>(rt, s, true)
        }),
        registered(&kernels::attention::ATTENTION_FUSED_BF16_FMA_EXP),
    ]
    .into_iter()
    .chain(gemm_cases())
    .chain(decode_cases())
    .collect();
    let rest: Vec<CaseSpec> = registry::all()
        .iter()
        .filter(|spec| !lessons.iter().any(|c| c.kernel == spec.name))
        .flat_map(|&spec| (0..spec.shapes.run.len()).map(|i| registered_at(spec, i)))
        .collect();
    lessons.into_iter().chain(rest).collect()
}

/// Whether `rt` can run `kernel` at all ([`needs_wgmma`]: step 5 needs an sm_90a GPU
/// or the emulator, and so does attention on wgmma); elsewhere its rows are left out, not failed.
pub fn runs_on(rt: &Runtime, kernel: &str) -> bool {
    !needs_wgmma(kernel) || rt.has_wgmma()
}

/// Whether `kernel` issues `wgmma` (GEMM step 5, attention on wgmma): sm_90a only.
pub fn needs_wgmma(kernel: &str) -> bool {
    kernel.starts_with("attention_wgmma")
        || GemmKernel::ALL
            .iter()
            .any(|k| k.name() == kernel && k.is_wgmma())
}

/// The line `cargo xtask run` prints when [`runs_on`] left rows out: how many, which kernels,
/// and what would run them; `None` when none was left out.
pub fn left_out(rt: &Runtime, kernels: &[&str]) -> Option<String> {
    if kernels.is_empty() {
        return None;
    }
    let mut names: Vec<&str> = Vec::new();
    for k in kernels {
        if !names.contains(k) {
            names.push(k);
        }
    }
    Some(format!(
        "{} rows left out ({}): they need sm_90a (wgmma, TMA), which {} does not have; a Hopper GPU runs them, and so does the PTX backend with KERNELS_PTX_ARCH=sm_90a",
        kernels.len(),
        names.join(", "),
        rt.device_name()
    ))
}

/// A registered kernel's case at its first GPU shape, built from its spec.
const fn registered(spec: &'static registry::Spec) -> CaseSpec {
    registered_at(spec, 0)
}

/// A registered kernel's case at its GPU shape `shape` (an index into `shapes.run`).
const fn registered_at(spec: &'static registry::Spec, shape: usize) -> CaseSpec {
    CaseSpec {
        kernel: spec.name,
        build: Build::Registered(spec, shape),
    }
}

const fn case(
    kernel: &'static str,
    build: for<'a> fn(&'a Runtime, Scale) -> host::Result<Case<'a>>,
) -> CaseSpec {
    CaseSpec {
        kernel,
        build: Build::Here(build),
    }
}

/// Keys per head of the attention cases at GPU scale.
const ATTENTION_KEYS: usize = 4096;

/// A case whose every count, buffer and grid extent is affine in its keys per head, so that the
/// model can extend two short samples to its GPU shape's (`emu::sample::SampledLaunch::extended`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AffineKeys {
    /// Keys per head at the GPU shape.
    pub keys: usize,
    /// The two shorter lengths to sample: long enough that each launch's counts are on their
    /// line from the first of them, and multiples of every tile along the keys.
    pub short: (usize, usize),
    /// The one launch (by kernel) that is affine, where the others are not: they are sampled
    /// at the GPU shape. `None`: every launch is.
    pub only: Option<&'static str>,
}

/// `spec`'s [`AffineKeys`], for its samples on the PTX backend (`ptx`) or the source emulator:
/// the non-causal attention cases, where each key tile costs a block the same. Their tiles are at
/// most 64 keys wide, and the naive flow's softmax gives each of its 256 threads a row's keys in
/// a loop: 256 and 512 keys. On the PTX backend the compiler unrolls that loop by four, so the
/// naive flow's counts follow one line only over multiples of 1024 keys: 1024 and 2048 there
/// (checked from 1024 and 2048 to 3072 by hand, 2026-12-02: a minute, too long for the suite).
/// A causal case is not affine (with fewer keys than queries, the middle query tiles see no key
/// at all), except for the naive flow's P V launch: the mask is in P as zeros, which it
/// multiplies like any other value (`NAIVE_CAUSAL_PV`). The fused causal kernels skip masked
/// tiles and are sampled at the GPU shape, where their blocks are short enough.
pub fn affine_keys(spec: &CaseSpec, ptx: bool) -> Option<AffineKeys> {
    let causal = spec.kernel.contains("causal");
    let naive = spec.kernel.starts_with("attention_naive");
    if !spec.kernel.starts_with("attention_") || (causal && !naive) {
        return None;
    }
    use kernels::attention::{flash_f32, flash_mma, flash_wgmma};
    let short = if naive {
        if ptx { (1024, 2048) } else { (256, 512) }
    } else {
        // Two and four key tiles: each sample holds at least two whole tiles, so that a kernel
        // that loads the next tile while it computes this one (the wgmma kernel's pipeline)
        // runs its steady state in both. Shorter samples cost less: a tenth of a second.
        let tile = if spec.kernel.starts_with("attention_wgmma") {
            flash_wgmma::BC
        } else if spec.kernel.starts_with("attention_fused_f32") {
            flash_f32::BC
        } else {
            flash_mma::BC
        };
        (2 * tile, 4 * tile)
    };
    Some(AffineKeys {
        keys: ATTENTION_KEYS,
        short,
        only: causal.then_some(NAIVE_CAUSAL_PV),
    })
}

/// The naive flow's P V kernel at the GPU shape's head dimension (128).
const NAIVE_CAUSAL_PV: &str = "attention_pv_f32_d128";

/// The CPU reference `f` computes, or nothing when the case is built for the model.
fn reference_of<T: Default>(scale: Scale, f: impl FnOnce() -> T) -> T {
    if scale.for_model() { T::default() } else { f() }
}

/// `n` inputs uniform in [lo, hi] (`reference::uniform`, seeded); zeros for the model.
fn uniform(scale: Scale, n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    if scale.for_model() {
        vec![0.0; n]
    } else {
        reference::uniform(n, seed, lo, hi)
    }
}

/// `n` inputs uniform in [-1, 1] ([`uniform`]), each converted by `to`; for the model, zero
/// bits that no page holds yet (`host::buffer::zeroed_vec`): converting hundreds of MB of zeros
/// would write every page.
fn uniform_as<T: host::Element>(
    scale: Scale,
    n: usize,
    seed: u64,
    to: impl Fn(f32) -> T,
) -> Vec<T> {
    if scale.for_model() {
        host::buffer::zeroed_vec(n)
    } else {
        uniform(scale, n, seed, -1.0, 1.0)
            .into_iter()
            .map(to)
            .collect()
    }
}

/// `n` inputs in [lo, hi], each converted by `to`, for the inputs whose values steer a kernel's
/// branches (softmax's and attention's scores: `kernels::softmax::exp_shifted` returns 1
/// without an exponential where a score equals its row's maximum, so zero inputs would count no
/// exponential at all): [`uniform`]'s for a check, and for the model a cheap hash of the index
/// that varies as they do (the model needs them to differ, not to be random).
fn varied_in_as<T: host::Element>(
    scale: Scale,
    n: usize,
    seed: u64,
    (lo, hi): (f32, f32),
    to: impl Fn(f32) -> T,
) -> Vec<T> {
    if !scale.for_model() {
        return uniform(scale, n, seed, lo, hi)
            .into_iter()
            .map(to)
            .collect();
    }
    // Knuth's multiplicative hash: 24 well-mixed bits an element, no state between them, over
    // a period of 64 Ki elements repeated (copying is ten times cheaper than converting). A
    // softmax row (at most 8192) holds no repeat; attention's K repeats every 512 keys at
    // d = 128, so a row's maximum recurs 8 times in 4096 keys: 7 exponentials skipped in 4096.
    const PERIOD: usize = 1 << 16;
    let unit = |i: usize| {
        let h = (i as u32 ^ seed as u32).wrapping_mul(2_654_435_761);
        (h >> 8) as f32 / (1u32 << 24) as f32
    };
    let mut out: Vec<T> = (0..n.min(PERIOD))
        .map(|i| to(lo + (hi - lo) * unit(i)))
        .collect();
    out.reserve_exact(n - out.len());
    while out.len() < n {
        let more = (n - out.len()).min(out.len());
        out.extend_from_within(..more);
    }
    out
}

/// A registered kernel's case (`kernels::registry`): its shape at `scale`, inputs uniform in its
/// `input_range` (for the model, zeros, or [`varied_in_as`] where its values steer it), checked
/// against its reference and tolerance (at a GPU's shape, on the rows its spec checks there).
///
/// Its cost at the emulator's shape is every byte the kernel requests, which the emulator
/// counts; so is the modelled figure's at the GPU shape, whose shape says `(no L2)` where the
/// spec's cost has re-reads (a tiled GEMM's), the roofline of a GPU whose L2 serves none of them.
/// A GPU's measurement is read against the compulsory traffic, without the re-reads, the true
/// roofline where L2 serves many (docs/gemm.md).
fn from_spec<'a>(
    rt: &'a Runtime,
    scale: Scale,
    spec: &'static registry::Spec,
    shape: usize,
) -> host::Result<Case<'a>> {
    // The row's GPU shape names the modelled figure; the model may sample it at fewer keys
    // (`Scale::Model`'s keys: the dimension `n_kv`), the queries unchanged.
    let row = spec.shapes.run[shape].gpu;
    let mut gpu = row;
    if let Some(keys) = scale.model_keys() {
        let axis = spec.dims.iter().position(|d| *d == "n_kv").ok_or_else(|| {
            host::Error::Shape(format!("{}: no dimension n_kv to sample", spec.name))
        })?;
        gpu[axis] = keys;
    }
    let dims = match scale {
        Scale::Gpu | Scale::Model { .. } => gpu,
        Scale::Emulator => spec.shapes.run[shape].emulator,
    };
    let range = spec.input_range;
    let inputs: Vec<Vec<f32>> = (spec.inputs)(dims)
        .into_iter()
        .enumerate()
        .map(|(i, b)| {
            let seed = 41 + i as u64;
            let round = |v| registry::round_to(b.elem, v);
            if spec.values_steer {
                varied_in_as(scale, b.len, seed, range, round)
            } else {
                let mut x = uniform(scale, b.len, seed, range.0, range.1);
                // The model's zeros are exact in every type.
                if b.elem != registry::Elem::F32 && !scale.for_model() {
                    x.iter_mut().for_each(|v| *v = round(*v));
                }
                x
            }
        })
        .collect();
    let buffers = Rc::new(registry::upload(rt, spec, dims, &inputs)?);
    // Nothing to compare with when the case is built for the model.
    let inputs = reference_of(scale, || inputs);
    let (cost, rows) = match scale {
        Scale::Gpu | Scale::Model { .. } => (
            registry::compulsory_cost(spec, dims),
            registry::gpu_rows(spec, dims),
        ),
        Scale::Emulator => (registry::cost(spec, dims), registry::all_rows(spec, dims)),
    };
    Ok(Case {
        kernel: spec.name,
        shape: registry::describe(spec, dims),
        cost,
        gpu: (
            registry::describe_modelled(spec, row),
            registry::modelled_cost(spec, gpu),
        ),
        launch: Box::new({
            let buffers = buffers.clone();
            move |rt| registry::launch(rt, spec, &buffers)
        }),
        check: Box::new(move |rt| {
            let got = buffers.output.download(rt).map_err(|e| e.to_string())?;
            registry::check(spec, dims, &inputs, &got, &rows)
        }),
    })
}

use attention_op::{WgmmaFlashElement, WgmmaMaps};

/// A 16-bit element type of the Hopper kernel.
trait WgmmaCase: WgmmaFlashElement + kernels::registry::Element {
    fn from_f32(v: f32) -> Self;
    fn to_f32(self) -> f32;
}

impl WgmmaCase for bf16 {
    fn from_f32(v: f32) -> Self {
        bf16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
}

impl WgmmaCase for f16 {
    fn from_f32(v: f32) -> Self {
        f16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
}

/// Attention on Hopper's wgmma (`flash_wgmma`, 16-bit types only), at the registered attention
/// rows' shapes (batch 4, 16 heads, N = 4096, d = 128 on a GPU; 2 heads of N = 1030 on the
/// emulator, enough for 9 of its 128-key tiles, so its ring goes round 5 times: the producer
/// waits for the consumers to release a stage and the mbarriers' phase parity alternates).
/// Written here, not registered: it launches on TMA tensor maps the host builds for its Q, K
/// and V, and runs only on sm_90a (docs/registry.md). Q, K, V uniform in [-1, 1].
///
/// The cost the emulator's counts are checked against is the flow's whole traffic, re-reads
/// included; the roofline figures use its compulsory traffic (docs/attention.md).
fn attention_wgmma<T: WgmmaCase>(
    rt: &Runtime,
    scale: Scale,
    causal: bool,
) -> host::Result<Case<'_>> {
    let run = kernels::attention::ATTENTION_FUSED_BF16.shapes.run[0];
    let shape_at = |s: Scale| {
        let [batch, heads, n, _, d] = match s {
            Scale::Gpu | Scale::Model { .. } => run.gpu,
            Scale::Emulator => run.emulator,
        };
        let shape = AttentionShape::new(batch, heads, n, d);
        match s {
            Scale::Gpu | Scale::Model { .. } => shape.with_n_kv(s.model_keys().unwrap_or(n)),
            Scale::Emulator => shape,
        }
    };
    // The modelled figure's shape: the GPU's, at the keys the model samples where it does.
    let gpu_scale = if scale.for_model() { scale } else { Scale::Gpu };
    let (shape, gpu_shape) = (shape_at(scale), shape_at(gpu_scale));
    let elem = T::ELEM.name();
    let describe = |s: &AttentionShape| {
        let mask = if causal { " causal" } else { "" };
        format!(
            "{}x{}x{}x{} {elem}{mask}",
            s.batch, s.heads, s.n_q, s.head_dim
        )
    };
    let traffic = |s: &AttentionShape| attention_op::fused_wgmma_traffic(s, causal, size_of::<T>());
    let cost = match scale {
        Scale::Emulator => traffic(&shape).total(),
        Scale::Gpu | Scale::Model { .. } => traffic(&shape).compulsory,
    };
    let gpu = (describe(&gpu_shape), traffic(&gpu_shape).compulsory);
    let params = AttentionParams::standard(shape.head_dim, causal);
    // Q and K make the scores, which steer the softmax; V's values steer nothing.
    let input = |n, seed| varied_in_as(scale, n, seed, (-1.0, 1.0), T::from_f32);
    let (q, k, v) = (
        input(shape.q_elems(), 1),
        input(shape.kv_elems(), 2),
        uniform_as(scale, shape.kv_elems(), 3, T::from_f32),
    );
    // The reference for the first head only: at the GPU shape all 64 heads in f64 would take
    // minutes of CPU; every head runs the same code.
    let head = AttentionShape::new(1, 1, shape.n_q, shape.head_dim).with_n_kv(shape.n_kv);
    let widen = |x: &[T], n: usize| x[..n].iter().map(|x| x.to_f32()).collect::<Vec<f32>>();
    let want = reference_of(scale, || {
        let (hq, hk, hv) = (
            widen(&q, head.q_elems()),
            widen(&k, head.kv_elems()),
            widen(&v, head.kv_elems()),
        );
        reference::attention(&hq, &hk, &hv, &head, params.scale, causal).o
    });
    // The registered rows' bound (`kernels::attention::error_bound`), rounded to `T`.
    let half_u = T::ELEM.unit_roundoff();
    let tolerance = kernels::attention::error_bound(head.n_kv, head.head_dim, params.scale, half_u);
    let qkv = [rt.upload(&q)?, rt.upload(&k)?, rt.upload(&v)?];
    let o = Rc::new(RefCell::new(rt.alloc::<T>(shape.q_elems())?));
    let mut lse = rt.alloc::<f32>(shape.lse_elems())?;
    // The Hopper kernel's tensor maps, built once (a driver call per head and tensor).
    let maps = WgmmaMaps::new(rt, [&qkv[0], &qkv[1], &qkv[2]], &shape)?;
    let kernel = format!(
        "attention_wgmma_{elem}{}",
        if causal { "_causal" } else { "" }
    );
    Ok(Case {
        kernel: Box::leak(kernel.into_boxed_str()),
        shape: describe(&shape),
        cost,
        gpu,
        launch: Box::new({
            let o = o.clone();
            move |rt| {
                let [q, k, v] = &qkv;
                let o = &mut o.borrow_mut();
                attention_op::fused_wgmma_with(rt, &maps, [q, k, v], o, &mut lse, &shape, &params)
            }
        }),
        check: Box::new(move |rt| {
            let got = rt.download(&o.borrow()).map_err(|e| e.to_string())?;
            let err = got[..want.len()]
                .iter()
                .zip(&want)
                .map(|(g, w)| (f64::from(g.to_f32()) - w).abs())
                .fold(0.0f64, |m, e| if e.is_nan() { f64::NAN } else { m.max(e) });
            if err <= tolerance {
                Ok(format!("head 0: max |error| {err:.1e} <= {tolerance:.1e}"))
            } else {
                Err(format!("head 0: max |error| {err:e} > {tolerance:e}"))
            }
        }),
    })
}

/// Every GEMM step at every size of the sweep (`kernels::gemm::RUN`), size by size so that each
/// size reads as the progression from step 1 to step 5: steps 1 to 4 are registered, each size
/// a row of their spec; step 5 is written here.
fn gemm_cases() -> Vec<CaseSpec> {
    use kernels::gemm::{
        GEMM_NAIVE_F32, GEMM_REGISTER_BLOCKED_F32, GEMM_TENSOR_CORE_BF16, GEMM_TENSOR_CORE_F16,
        GEMM_TILED_F32,
    };
    macro_rules! at_size {
        ($size:literal) => {
            [
                registered_at(&GEMM_NAIVE_F32, $size),
                registered_at(&GEMM_TILED_F32, $size),
                registered_at(&GEMM_REGISTER_BLOCKED_F32, $size),
                registered_at(&GEMM_TENSOR_CORE_BF16, $size),
                registered_at(&GEMM_TENSOR_CORE_F16, $size),
                case(GemmKernel::ALL[5].name(), gemm_case::<5, $size>),
                case(GemmKernel::ALL[6].name(), gemm_case::<6, $size>),
            ]
        };
    }
    const _: () = assert!(GemmKernel::ALL.len() == 7 && kernels::gemm::RUN.len() == 3);
    [at_size!(0), at_size!(1), at_size!(2)]
        .into_iter()
        .flatten()
        .collect()
}

/// Rows of C checked against the CPU reference: all of them on the emulator; on a GPU, 16 spread
/// over the matrix (first and last included), since the f64 reference of a whole 4096^3 product
/// would take minutes on the CPU.
fn gemm_check_rows(m: usize, scale: Scale) -> Vec<usize> {
    match scale {
        Scale::Emulator => (0..m).collect(),
        Scale::Gpu | Scale::Model { .. } => (0..16).map(|i| i * (m - 1) / 15).collect(),
    }
}

/// Step 5 (`KERNEL` 5 or 6 of `GemmKernel::ALL`) at size `SIZE` of the sweep, `C = A B`.
///
/// Two costs, from `GemmKernel::cost`, as a registered spec's re-reads give them to steps 1 to 3
/// ([`from_spec`]) and step 4. Every byte the kernel requests (the compulsory traffic plus the re-reads its
/// tiling causes) is what the emulator counts, so it is the cost checked at the emulator's size;
/// it is also what the modelled figure at the GPU size uses, labelled "no L2": the roofline of a
/// GPU without L2 reuse, where each step's larger tile shows as a higher intensity. A GPU
/// measurement is read against the compulsory traffic (A, B read once, C written), the true
/// roofline, since L2 serves many of the re-reads (docs/gemm.md).
fn gemm_case<const KERNEL: usize, const SIZE: usize>(
    rt: &Runtime,
    scale: Scale,
) -> host::Result<Case<'_>> {
    let kernel = GemmKernel::ALL[KERNEL];
    let run = kernels::gemm::RUN[SIZE];
    let size = |s: Scale| s.pick(run.gpu[0], run.emulator[0]);
    let s = size(scale);
    let shape = GemmShape::new(s, s, s);
    let model = kernel.cost(shape, Epilogue::Overwrite);
    let cost = match scale {
        Scale::Gpu | Scale::Model { .. } => model.compulsory,
        Scale::Emulator => model.requested(),
    };
    let g = size(Scale::Gpu);
    let gpu = (
        format!("{g}^3 (no L2)"),
        kernel
            .cost(GemmShape::new(g, g, g), Epilogue::Overwrite)
            .requested(),
    );
    let input = |seed| uniform_as(scale, s * s, seed, |x| kernel.representable(x));
    let (a_host, b_host) = (input(11), input(12));
    let rows = gemm_check_rows(s, scale);
    let want = reference_of(scale, || {
        reference::gemm_rows(&a_host, &b_host, None, (s, s), &rows)
    });
    let operands = GemmOperands::upload(rt, kernel, &a_host, &b_host)?;
    let c = Rc::new(RefCell::new(rt.alloc::<f32>(s * s)?));
    Ok(Case {
        kernel: kernel.name(),
        shape: format!("{s}^3"),
        cost,
        gpu,
        launch: Box::new({
            let c = c.clone();
            move |rt| {
                let mut c = c.borrow_mut();
                gemm::gemm(rt, kernel, &operands, &mut c, shape, Epilogue::Overwrite)
            }
        }),
        check: Box::new(move |rt| {
            let all = rt.download(&c.borrow()).map_err(|e| e.to_string())?;
            let got: Vec<f32> = rows
                .iter()
                .flat_map(|&i| all[i * s..(i + 1) * s].iter().copied())
                .collect();
            let error = reference::gemm_error(&got, &want);
            let bound = kernel.error_bound(s);
            if error <= bound {
                Ok(format!(
                    "{} rows within {:.0}% of the rounding bound",
                    rows.len(),
                    100.0 * error / bound
                ))
            } else {
                Err(format!(
                    "error {error:e} x magnitude, rounding bound {bound:e}"
                ))
            }
        }),
    })
}

/// The decode kernels at Llama-3-8B's shapes (docs/decode.md): the GEMV at batch 1 on the up
/// projection (K = 4096, N = 14336) and the down projection (K = 14336, N = 4096), a skinny
/// batch of 16, and split-KV attention (32 query heads, 8 KV heads of 128) at 4k, 32k and 128k
/// keys, and at 128k on a paged cache.
fn decode_cases() -> Vec<CaseSpec> {
    vec![
        registered_at(&kernels::decode::GEMV_BF16, 0),
        registered_at(&kernels::decode::GEMV_BF16, 1),
        registered_at(&kernels::decode::GEMV_BF16, 2),
        registered_at(&kernels::decode::DECODE_ATTENTION_BF16, 0),
        registered_at(&kernels::decode::DECODE_ATTENTION_BF16, 1),
        registered_at(&kernels::decode::DECODE_ATTENTION_BF16, 2),
        registered(&kernels::decode::DECODE_ATTENTION_PAGED_BF16),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each registered kernel is one case per GPU shape of its spec, in the spec's order, and
    /// no case written here has its name: the registry and this file cannot both describe a
    /// kernel.
    #[test]
    fn each_registered_kernel_is_one_case_per_gpu_shape_and_only_there() {
        let all = all();
        for spec in registry::all() {
            let shapes: Vec<usize> = all
                .iter()
                .filter(|c| c.kernel == spec.name)
                .map(|c| match c.build {
                    Build::Registered(_, i) => i,
                    Build::Here(_) => panic!("{} is also written here", spec.name),
                })
                .collect();
            let want: Vec<usize> = (0..spec.shapes.run.len()).collect();
            assert_eq!(shapes, want, "{}", spec.name);
        }
    }

    /// A row left out for want of sm_90a is said, with the count and the way to run it.
    #[test]
    fn rows_left_out_are_named_with_what_runs_them() {
        let rt = Runtime::emulator();
        assert_eq!(left_out(&rt, &[]), None);
        let note = left_out(
            &rt,
            &["gemm_wgmma_bf16", "attention_wgmma_f16", "gemm_wgmma_bf16"],
        )
        .unwrap();
        assert!(
            note.starts_with("3 rows left out (gemm_wgmma_bf16, attention_wgmma_f16)"),
            "{note}"
        );
        assert!(note.contains("KERNELS_PTX_ARCH=sm_90a"), "{note}");
    }
}
