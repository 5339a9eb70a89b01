//! The benchmark cases of `cargo xtask run`: each kernel at a size for the backend, with its
//! inputs, its cost model and a check against the CPU reference.

use std::rc::Rc;

use perf::cost::Cost;

use crate::Runtime;
use crate::reference;
use crate::registry;
use crate::runtime::Launched;

/// How big the problems are, and what the case is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Realistic on a GPU: several times the L2, hundreds of MB.
    Gpu,
    /// Small enough for the emulator on two cores.
    Emulator,
    /// The GPU's shape, for the performance model (`crate::predict`, the prediction pipeline). No CPU reference is
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

type LaunchFn<'a> = Box<dyn FnMut(&Runtime) -> crate::Result<Launched> + 'a>;
type CheckFn<'a> = Box<dyn Fn(&Runtime) -> Result<String, String> + 'a>;

/// One kernel at one shape, ready to run.
pub struct Case<'a> {
    pub kernel: &'static str,
    pub shape: String,
    pub cost: Cost,
    /// The case at GPU scale: what modelled figures describe when the case itself runs at the
    /// emulator's scale.
    pub gpu: AtGpu,
    /// Enqueues the work (one or several launches).
    pub launch: LaunchFn<'a>,
    /// Compares the output with the CPU reference: a one-line summary, or what is wrong.
    pub check: CheckFn<'a>,
}

/// A case at a GPU's size, as a modelled row reads it.
#[derive(Clone, Debug)]
pub struct AtGpu {
    /// The row's shape (`registry::describe`): `4096^3`, `4x16x4096x128 bf16 causal`.
    pub shape: String,
    /// The compulsory traffic, FLOPs and exponentials (`Cost::compulsory`): the roofline bound's
    /// cost, which no kernel on any device beats, and which a GPU's measurement is read against.
    pub cost: Cost,
    /// Every byte the kernel requests, its re-reads taken from HBM (`Cost::modelled`), where
    /// that is more than `cost`: the time of a GPU with no cache between its SMs and HBM, a
    /// figure of its own (`--wide`'s `no-cache`), never the bound.
    pub no_cache: Option<Cost>,
}

/// A case not yet built: a registered kernel (`kernels::registry`, docs/registry.md) at one of
/// its GPU shapes. Building allocates its buffers, so cases are built one at a time.
pub struct CaseSpec {
    pub kernel: &'static str,
    pub spec: &'static registry::Spec,
    /// Which of its GPU shapes ([`registry::Spec`]'s `shapes.run`) the row is.
    shape: usize,
}

impl CaseSpec {
    /// Builds the case at `scale` on `rt` (allocates and fills its buffers).
    pub fn build<'a>(&self, rt: &'a Runtime, scale: Scale) -> crate::Result<Case<'a>> {
        from_spec(rt, scale, self.spec, self.shape)
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
        registered(&kernels::attention::ATTENTION_WGMMA_BF16),
        registered(&kernels::attention::ATTENTION_WGMMA_F16),
        registered(&kernels::attention::ATTENTION_WGMMA_BF16_CAUSAL),
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

/// Whether `rt` can run the case's kernel at all (`host::registry::runs_on`: a kernel of the
/// sm_90a build, GEMM step 5 or attention on wgmma, needs an sm_90a GPU or the emulator);
/// elsewhere its rows are left out, not failed.
pub fn runs_on(rt: &Runtime, case: &CaseSpec) -> bool {
    registry::runs_on(rt, case.spec)
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
pub const fn registered_at(spec: &'static registry::Spec, shape: usize) -> CaseSpec {
    CaseSpec {
        kernel: spec.name,
        spec,
        shape,
    }
}

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

/// The case's [`AffineKeys`], for its samples on the PTX backend (`ptx`) or the source emulator:
/// its spec's `affine_keys` (the attention rows affine in their keys, docs/registry.md), at its
/// GPU shape's keys per head.
pub fn affine_keys(spec: &CaseSpec, ptx: bool) -> Option<AffineKeys> {
    let affine = spec.spec.affine_keys?;
    let axis = spec.spec.dims.iter().position(|d| *d == "n_kv")?;
    Some(AffineKeys {
        keys: spec.spec.shapes.run[spec.shape].gpu[axis],
        short: if ptx { affine.short_ptx } else { affine.short },
        only: affine.only,
    })
}

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

/// `n` inputs in [lo, hi], each converted by `to`, for the inputs whose values steer a kernel's
/// branches (softmax's and attention's scores: `kernels::softmax::exp_shifted` returns 1
/// without an exponential where a score equals its row's maximum, so zero inputs would count no
/// exponential at all): [`uniform`]'s for a check, and for the model a cheap hash of the index
/// that varies as they do (the model needs them to differ, not to be random).
fn varied_in_as<T: crate::Element>(
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
/// counts. At the GPU shape, the modelled row and a GPU's measurement are both read against the
/// compulsory traffic, without the re-reads that a tiled GEMM's blocks make and L2 serves: the
/// roofline bound (docs/roofline.md). Every byte requested, re-reads from HBM, is kept beside it
/// as the time of a GPU with no cache ([`AtGpu::no_cache`], docs/gemm.md).
fn from_spec<'a>(
    rt: &'a Runtime,
    scale: Scale,
    spec: &'static registry::Spec,
    shape: usize,
) -> crate::Result<Case<'a>> {
    // The row's GPU shape names the modelled figure; the model may sample it at fewer keys
    // (`Scale::Model`'s keys: the dimension `n_kv`), the queries unchanged.
    let row = spec.shapes.run[shape].gpu;
    let mut gpu = row;
    if let Some(keys) = scale.model_keys() {
        let axis = spec.dims.iter().position(|d| *d == "n_kv").ok_or_else(|| {
            crate::Error::Shape(format!("{}: no dimension n_kv to sample", spec.name))
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
    let compulsory = registry::compulsory_cost(spec, gpu);
    Ok(Case {
        kernel: spec.name,
        shape: registry::describe(spec, dims),
        cost,
        gpu: AtGpu {
            shape: registry::describe(spec, row),
            cost: compulsory,
            no_cache: Some(registry::modelled_cost(spec, gpu))
                .filter(|c| c.bytes() > compulsory.bytes()),
        },
        launch: Box::new({
            let buffers = buffers.clone();
            move |rt| registry::launch(rt, spec, &buffers)
        }),
        check: Box::new(move |rt| registry::check_output(rt, spec, &buffers, &inputs, &rows)),
    })
}

/// Every GEMM step at every size of the sweep (`kernels::gemm::RUN`), size by size so that each
/// size reads as the progression from step 1 to step 5, each size a row of the steps' specs.
fn gemm_cases() -> Vec<CaseSpec> {
    use kernels::gemm::{
        GEMM_NAIVE_F32, GEMM_REGISTER_BLOCKED_F32, GEMM_TENSOR_CORE_BF16, GEMM_TENSOR_CORE_F16,
        GEMM_TILED_F32, GEMM_WGMMA_BF16, GEMM_WGMMA_F16,
    };
    macro_rules! at_size {
        ($size:literal) => {
            [
                registered_at(&GEMM_NAIVE_F32, $size),
                registered_at(&GEMM_TILED_F32, $size),
                registered_at(&GEMM_REGISTER_BLOCKED_F32, $size),
                registered_at(&GEMM_TENSOR_CORE_BF16, $size),
                registered_at(&GEMM_TENSOR_CORE_F16, $size),
                registered_at(&GEMM_WGMMA_BF16, $size),
                registered_at(&GEMM_WGMMA_F16, $size),
            ]
        };
    }
    const _: () = assert!(kernels::gemm::RUN.len() == 3);
    [at_size!(0), at_size!(1), at_size!(2)]
        .into_iter()
        .flatten()
        .collect()
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
    /// every case is a registered kernel's.
    #[test]
    fn each_registered_kernel_is_one_case_per_gpu_shape() {
        let all = all();
        for spec in registry::all() {
            let shapes: Vec<usize> = all
                .iter()
                .filter(|c| c.kernel == spec.name)
                .map(|c| c.shape)
                .collect();
            let want: Vec<usize> = (0..spec.shapes.run.len()).collect();
            assert_eq!(shapes, want, "{}", spec.name);
        }
        assert_eq!(
            all.len(),
            registry::all()
                .iter()
                .map(|s| s.shapes.run.len())
                .sum::<usize>()
        );
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
