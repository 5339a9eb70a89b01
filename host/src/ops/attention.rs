//! Host side of `kernels::attention`: `O = softmax(scale Q K^T [+ causal mask]) V`, naive and
//! fused, with the cost models that say what each moves across the HBM boundary.
//!
//! The mask (which key each query sees, and when a row sees none) is defined once, in
//! `kernels::attention`; this module validates shapes, launches, and counts.

use half::{bf16, f16};
use kernels::attention::{
    ATTENTION_FUSED_BF16, ATTENTION_FUSED_BF16_FMA_EXP, ATTENTION_FUSED_F16, ATTENTION_FUSED_F32,
    ATTENTION_NAIVE_BF16, ATTENTION_NAIVE_F16, ATTENTION_NAIVE_F32, ATTENTION_NAIVE_F32_CAUSAL,
    FlashKernel, HEAD_DIMS, NaiveKernel, naive as naive_kernels,
};
use kernels::registry::{Dims, Spec};

use super::{GridAxis, elements, grid_blocks};
use crate::buffer::{DeviceBuffer, Element};
use crate::launch;
use crate::runtime::{Launched, Runtime};
use crate::tensor_map::TensorMaps2d;
use crate::{Error, Result};
use emu::LaunchConfig;
use perf::cost::{Cost, product, sum};

const F32: usize = size_of::<f32>();

/// The sizes of one attention call: Q and O are `batch x heads x n_q x head_dim`, K and V
/// `batch x heads x n_kv x head_dim`, the log-sum-exp `batch x heads x n_q`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    /// Sequences in the batch.
    pub batch: usize,
    /// Heads per sequence.
    pub heads: usize,
    /// Queries per head.
    pub n_q: usize,
    /// Keys (and values) per head.
    pub n_kv: usize,
    /// `d`, the length of each query, key, value and output row.
    pub head_dim: usize,
}

impl AttentionShape {
    /// Self-attention: `n` queries over the same `n` keys.
    pub fn new(batch: usize, heads: usize, n: usize, head_dim: usize) -> Self {
        Self {
            batch,
            heads,
            n_q: n,
            n_kv: n,
            head_dim,
        }
    }

    /// The same with `n_kv` keys instead (with a causal mask and `n_q > n_kv`, the first
    /// `n_q - n_kv` queries see no key: see `kernels::attention`).
    pub fn with_n_kv(self, n_kv: usize) -> Self {
        Self { n_kv, ..self }
    }

    /// `batch * heads`: independent attention problems.
    ///
    /// This and the element counts below saturate at `usize::MAX` for a shape too large for
    /// any memory; every op refuses such a shape first ([`AttentionShape::check`]).
    pub fn bh(&self) -> usize {
        self.batch.saturating_mul(self.heads)
    }

    /// Elements of Q (and of O).
    pub fn q_elems(&self) -> usize {
        self.bh()
            .saturating_mul(self.n_q)
            .saturating_mul(self.head_dim)
    }

    /// Elements of K (and of V).
    pub fn kv_elems(&self) -> usize {
        self.bh()
            .saturating_mul(self.n_kv)
            .saturating_mul(self.head_dim)
    }

    /// Elements of the log-sum-exp: one per query row.
    pub fn lse_elems(&self) -> usize {
        self.bh().saturating_mul(self.n_q)
    }

    /// Elements of S (and of P) in the naive flow: `n_q x n_kv` per head.
    pub fn score_elems(&self) -> usize {
        self.bh().saturating_mul(self.n_q).saturating_mul(self.n_kv)
    }

    /// Refuses a shape whose tensors (with the naive flow's S and P when `scores`) have more
    /// elements than the address space holds, naming the dimensions.
    pub fn check(&self, what: &str, scores: bool) -> Result<()> {
        let (b, h) = (("batch", self.batch), ("heads", self.heads));
        elements(
            what,
            &[b, h, ("n_q", self.n_q), ("head_dim", self.head_dim)],
        )?;
        elements(
            what,
            &[b, h, ("n_kv", self.n_kv), ("head_dim", self.head_dim)],
        )?;
        if scores {
            // S and P, f32 each.
            elements(
                what,
                &[b, h, ("n_q", self.n_q), ("n_kv", self.n_kv), ("8 bytes", 8)],
            )?;
        }
        Ok(())
    }
}

/// What the softmax is taken of: `scale * Q K^T`, causally masked or not.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionParams {
    /// Multiplies every score; `1 / sqrt(head_dim)` in the transformer.
    pub scale: f32,
    /// Whether query `i` sees only keys up to its own position (bottom-right aligned).
    pub causal: bool,
}

impl AttentionParams {
    /// The transformer's scale, `1 / sqrt(head_dim)`.
    pub fn standard(head_dim: usize, causal: bool) -> Self {
        Self {
            scale: 1.0 / (head_dim as f32).sqrt(),
            causal,
        }
    }
}

/// The head dimension as a kernel choice, or the error naming the supported ones.
fn head_dim(what: &str, d: usize) -> Result<u32> {
    HEAD_DIMS
        .into_iter()
        .find(|&h| h as usize == d)
        .ok_or_else(|| {
            Error::Shape(format!(
                "{what}: head dimension {d} is not supported; the kernels are built for {HEAD_DIMS:?}"
            ))
        })
}

/// The length checks of Q, K, V and O (which has Q's shape), for [`validate`].
fn qkvo_lens(
    shape: &AttentionShape,
    [q, k, v, o]: [usize; 4],
) -> [(&'static str, usize, usize); 4] {
    [
        ("q", q, shape.q_elems()),
        ("k", k, shape.kv_elems()),
        ("v", v, shape.kv_elems()),
        ("o", o, shape.q_elems()),
    ]
}

/// Checks the shape, the parameters and every buffer's `(name, length, required length)`.
/// `Ok(false)` means there is nothing to compute (no query rows).
fn validate(
    what: &str,
    shape: &AttentionShape,
    params: &AttentionParams,
    lens: &[(&str, usize, usize)],
) -> Result<bool> {
    head_dim(what, shape.head_dim)?;
    // With S or P among the buffers (the naive flow) their size must be addressable too.
    shape.check(what, lens.iter().any(|l| matches!(l.0, "s" | "p")))?;
    if !params.scale.is_finite() {
        return Err(Error::Shape(format!(
            "{what}: the softmax scale must be finite, got {}",
            params.scale
        )));
    }
    for &(name, len, want) in lens {
        if len != want {
            return Err(Error::Shape(format!(
                "{what}: {name} has {len} elements, but {shape:?} needs {want}"
            )));
        }
    }
    if shape.lse_elems() == 0 {
        return Ok(false);
    }
    if shape.n_kv == 0 {
        return Err(Error::Shape(format!(
            "{what}: n_kv = 0, there are no keys to attend to"
        )));
    }
    // Heads go on the grid's y axis (one block row each); rows and keys are indexed with u32.
    grid_blocks(what, ("batch x heads", shape.bh()), 1, GridAxis::Y)?;
    if u32::try_from(shape.n_q.max(shape.n_kv)).is_err() {
        return Err(Error::Shape(format!(
            "{what}: sequence lengths above {} are not supported",
            u32::MAX
        )));
    }
    Ok(true)
}

/// An element type of the fused kernels: f32 (`kernels::attention::flash_f32`, CUDA cores), or
/// bf16 and f16 (`kernels::attention::flash_mma`, tensor cores with f32 accumulation). Its
/// kernel's block shape and launch are the kernel crate's ([`FlashKernel`]); its spec is the
/// row of `cargo xtask run` that the op launches through.
pub trait FlashElement: Element + FlashKernel + crate::registry::SpecElement {
    /// The non-causal row's spec (`attention_fused_f32`, `_bf16`, `_f16`).
    const SPEC: &'static Spec;
}

impl FlashElement for f32 {
    const SPEC: &'static Spec = &ATTENTION_FUSED_F32;
}

impl FlashElement for bf16 {
    const SPEC: &'static Spec = &ATTENTION_FUSED_BF16;
}

impl FlashElement for f16 {
    const SPEC: &'static Spec = &ATTENTION_FUSED_F16;
}

/// The registry's dimensions of `shape`: `[batch, heads, n_q, n_kv, head_dim]`.
pub fn dims(shape: &AttentionShape) -> Dims {
    [
        shape.batch,
        shape.heads,
        shape.n_q,
        shape.n_kv,
        shape.head_dim,
    ]
}

/// A fused attention op for element type `T`, [`fused`] or [`fused_wgmma`]: the tests run both
/// kernels through one function.
pub type FusedOp<T> = fn(
    &Runtime,
    &DeviceBuffer<T>,
    &DeviceBuffer<T>,
    &DeviceBuffer<T>,
    &mut DeviceBuffer<T>,
    &mut DeviceBuffer<f32>,
    &AttentionShape,
    &AttentionParams,
) -> Result<Launched>;

/// FlashAttention forward, one kernel: writes O (in `T`) and the per-row log-sum-exp `lse` (f32,
/// natural log; `-inf` for a row that sees no key, whose O row is zeros).
#[allow(clippy::too_many_arguments)]
pub fn fused<T: FlashElement>(
    rt: &Runtime,
    q: &DeviceBuffer<T>,
    k: &DeviceBuffer<T>,
    v: &DeviceBuffer<T>,
    o: &mut DeviceBuffer<T>,
    lse: &mut DeviceBuffer<f32>,
    shape: &AttentionShape,
    params: &AttentionParams,
) -> Result<Launched> {
    let lens = [q.len(), k.len(), v.len(), o.len(), lse.len()];
    if fused_args("attention::fused", shape, params, lens)?.is_none() {
        return Ok(None);
    }
    let scale_mask = (params.scale, params.causal);
    crate::registry::launch_with(
        rt,
        T::SPEC,
        &[q, k, v],
        o,
        (&[lse], &[], &[]),
        dims(shape),
        &|l, b, d| kernels::attention::launch_fused::<T>(l, b, d, scale_mask, false),
    )
}

/// The fused kernel's arguments `(n_q, n_kv, scale, causal)` after checking the buffers' lengths
/// `[q, k, v, o, lse]` against the shape, or `None` when there is nothing to compute.
fn fused_args(
    op: &str,
    shape: &AttentionShape,
    params: &AttentionParams,
    [q, k, v, o, lse]: [usize; 5],
) -> Result<Option<(u32, u32, f32, u32)>> {
    let [lq, lk, lv, lo] = qkvo_lens(shape, [q, k, v, o]);
    let lens = [lq, lk, lv, lo, ("lse", lse, shape.lse_elems())];
    if !validate(op, shape, params, &lens)? {
        return Ok(None);
    }
    Ok(Some((
        shape.n_q as u32,
        shape.n_kv as u32,
        params.scale,
        u32::from(params.causal),
    )))
}

/// [`fused`] in bf16 at d = 64 with half of the exponentials on the FMA units
/// (`kernels::attention::exp2_fma`, FlashAttention-4's trick): every other 8-key piece of each
/// score tile. The special function units then take half as many exponentials
/// ([`fused_fma_exp_traffic`]).
#[allow(clippy::too_many_arguments)]
pub fn fused_bf16_fma_exp(
    rt: &Runtime,
    q: &DeviceBuffer<bf16>,
    k: &DeviceBuffer<bf16>,
    v: &DeviceBuffer<bf16>,
    o: &mut DeviceBuffer<bf16>,
    lse: &mut DeviceBuffer<f32>,
    shape: &AttentionShape,
    params: &AttentionParams,
) -> Result<Launched> {
    let op = "attention::fused_bf16_fma_exp";
    if shape.head_dim != 64 {
        return Err(Error::Shape(format!(
            "{op} is built for d = 64 only, got d = {}",
            shape.head_dim
        )));
    }
    let lens = [q.len(), k.len(), v.len(), o.len(), lse.len()];
    if fused_args(op, shape, params, lens)?.is_none() {
        return Ok(None);
    }
    let spec = &ATTENTION_FUSED_BF16_FMA_EXP;
    let scale_mask = (params.scale, params.causal);
    crate::registry::launch_with(
        rt,
        spec,
        &[q, k, v],
        o,
        (&[lse], &[], &[]),
        dims(shape),
        &|l, b, d| kernels::attention::launch_fused::<bf16>(l, b, d, scale_mask, true),
    )
}

/// [`fused_bf16_fma_exp`]'s traffic: the bf16 kernel's, with half of its exponentials moved to
/// the FMA units (about half: every other 8-key piece; their FMAs run on the CUDA cores beside
/// the tensor cores and are not counted in the FLOPs).
pub fn fused_fma_exp_traffic(shape: &AttentionShape, causal: bool) -> Cost {
    let mut t = fused_traffic::<bf16>(shape, causal);
    t.exps /= 2;
    t
}

/// The 16-bit element types of the Hopper kernel (`kernels::attention::flash_wgmma`: TMA,
/// mbarrier ring, `wgmma`), which only an sm_90a GPU, the source emulator, or the PTX backend
/// with the sm_90a module runs ([`Runtime::has_wgmma`]).
pub trait WgmmaFlashElement: FlashElement + kernels::attention::WgmmaKernel {
    /// The non-causal Hopper row's spec (`attention_wgmma_bf16`, `_f16`), through which the op
    /// launches (its buffers' types checked, its tensor maps declared).
    const WGMMA_SPEC: &'static Spec;
}

impl WgmmaFlashElement for bf16 {
    const WGMMA_SPEC: &'static Spec = &kernels::attention::ATTENTION_WGMMA_BF16;
}

impl WgmmaFlashElement for f16 {
    const WGMMA_SPEC: &'static Spec = &kernels::attention::ATTENTION_WGMMA_F16;
}

/// The Hopper kernel's tensor maps for one shape: one per head of Q (`n_q` rows), K and V
/// (`n_kv` rows), boxes of `BOX_ROWS x BOX_COLS`, 128-byte swizzle. A map per head, so that the
/// TMA zero-fills a tile past the end of a head's sequence instead of reading the next head's
/// rows. Building them takes a driver call per map, so a caller that launches repeatedly builds
/// them once ([`fused_wgmma_with`]).
pub struct WgmmaMaps {
    shape: AttentionShape,
    /// The device addresses of the Q, K and V the maps describe: a launch with other buffers
    /// would read these ones (or freed memory), so it is refused.
    buffers: [usize; 3],
    /// Q's, K's and V's, as the spec declares them (`kernels::attention::wgmma_maps`).
    maps: Vec<TensorMaps2d>,
}

impl WgmmaMaps {
    /// The maps of `q`, `k`, `v` for `shape` (checked as [`fused_wgmma`] checks it).
    pub fn new<T: WgmmaFlashElement>(
        rt: &Runtime,
        [q, k, v]: [&DeviceBuffer<T>; 3],
        shape: &AttentionShape,
    ) -> Result<Self> {
        // A map needs non-empty dimensions: a sequence of no rows is viewed as one, which no
        // box reads.
        let [b, h, n_q, n_kv, d] = dims(shape);
        let viewed = [b, h, n_q.max(1), n_kv.max(1), d];
        Ok(Self {
            shape: *shape,
            buffers: [q.ptr().addr(), k.ptr().addr(), v.ptr().addr()],
            maps: crate::registry::tensor_maps(rt, T::WGMMA_SPEC, viewed, &[q, k, v])?,
        })
    }
}

/// [`fused`] on Hopper's `wgmma` (FlashAttention-3's structure: a TMA producer warpgroup, two
/// consumer warpgroups, K and V through a two-stage mbarrier ring): bf16 or f16, d = 64 or 128,
/// the same O and LSE. Builds the tensor maps for this call; [`fused_wgmma_with`] takes them
/// built. Refused, saying why, where [`Runtime::has_wgmma`] is false.
#[allow(clippy::too_many_arguments)]
pub fn fused_wgmma<T: WgmmaFlashElement>(
    rt: &Runtime,
    q: &DeviceBuffer<T>,
    k: &DeviceBuffer<T>,
    v: &DeviceBuffer<T>,
    o: &mut DeviceBuffer<T>,
    lse: &mut DeviceBuffer<f32>,
    shape: &AttentionShape,
    params: &AttentionParams,
) -> Result<Launched> {
    let lens = [q.len(), k.len(), v.len(), o.len(), lse.len()];
    if fused_wgmma_args(rt, shape, params, lens)?.is_none() {
        return Ok(None);
    }
    let maps = WgmmaMaps::new(rt, [q, k, v], shape)?;
    fused_wgmma_with(rt, &maps, [q, k, v], o, lse, shape, params)
}

/// [`fused_wgmma`] with its tensor maps built ([`WgmmaMaps::new`] of the same `q`, `k`, `v`
/// and `shape`; maps of another shape or other buffers are refused with `Error::Shape`).
#[allow(clippy::too_many_arguments)]
pub fn fused_wgmma_with<T: WgmmaFlashElement>(
    rt: &Runtime,
    maps: &WgmmaMaps,
    [q, k, v]: [&DeviceBuffer<T>; 3],
    o: &mut DeviceBuffer<T>,
    lse: &mut DeviceBuffer<f32>,
    shape: &AttentionShape,
    params: &AttentionParams,
) -> Result<Launched> {
    let lens = [q.len(), k.len(), v.len(), o.len(), lse.len()];
    if fused_wgmma_args(rt, shape, params, lens)?.is_none() {
        return Ok(None);
    }
    if maps.shape != *shape {
        return Err(Error::Shape(format!(
            "attention::fused_wgmma: tensor maps built for {:?}, launched for {shape:?}",
            maps.shape
        )));
    }
    if maps.buffers != [q.ptr().addr(), k.ptr().addr(), v.ptr().addr()] {
        return Err(Error::Shape(
            "attention::fused_wgmma: tensor maps built for other Q, K, V buffers than the ones launched with (the kernel reads through the maps): build them with WgmmaMaps::new of these buffers".into(),
        ));
    }
    let scale_mask = (params.scale, params.causal);
    crate::registry::launch_with(
        rt,
        T::WGMMA_SPEC,
        &[q, k, v],
        o,
        (&[lse], &[], &maps.maps),
        dims(shape),
        &|l, b, d| kernels::attention::launch_wgmma::<T>(l, b, d, scale_mask),
    )
}

/// The Hopper kernel's launch: one block of a producer and two consumer warpgroups per `BR` =
/// 128 queries of each head, with the dynamic shared memory of Q and the K/V ring.
pub fn fused_wgmma_config(shape: &AttentionShape) -> LaunchConfig {
    kernels::attention::wgmma_geometry(dims(shape))
}

/// [`fused_args`] for the Hopper kernel, after refusing a runtime without it.
fn fused_wgmma_args(
    rt: &Runtime,
    shape: &AttentionShape,
    params: &AttentionParams,
    lens: [usize; 5],
) -> Result<Option<(u32, u32, f32, u32)>> {
    let op = "attention::fused_wgmma";
    if !rt.has_wgmma() {
        return Err(Error::Unsupported(format!(
            "{op} needs wgmma and the TMA: an sm_90a GPU (H100, H200), the source emulator or the PTX backend with KERNELS_PTX_ARCH=sm_90a, not {}",
            rt.device_name()
        )));
    }
    fused_args(op, shape, params, lens)
}

/// [`fused_wgmma`]'s traffic: [`fused_traffic`]'s accounting with its `128 x 128` tiles (each
/// block of 128 queries reads its K and V tiles once; the TMA reads nothing outside a head, so
/// the zero-filled rows past its end cost no bytes).
pub fn fused_wgmma_traffic(shape: &AttentionShape, causal: bool, elem_bytes: usize) -> Cost {
    kernels::attention::wgmma_flash_cost(dims(shape), causal, elem_bytes)
}

/// The naive flow's intermediates in HBM: S and P, `n_q x n_kv` f32 per head each (O(N^2), what
/// stops this flow first; see [`max_sequence_len`]). Allocate once and reuse, so that a timed run
/// times the three kernels and not two allocations.
pub struct NaiveWorkspace {
    /// S = scale Q K^T.
    pub s: DeviceBuffer<f32>,
    /// P = softmax(S).
    pub p: DeviceBuffer<f32>,
}

impl NaiveWorkspace {
    /// S and P for `shape`, after checking that they fit in the device's free memory: refuses
    /// with the bytes needed and free rather than failing inside the allocator.
    pub fn new(rt: &Runtime, shape: &AttentionShape) -> Result<Self> {
        shape.check("naive attention", true)?;
        let needed = product(&[2, f32_bytes(shape.score_elems())]);
        let free = rt.free_memory()?;
        if needed > free {
            return Err(Error::OutOfMemory {
                what: format!(
                    "naive attention's S and P ({} heads x {} x {} f32, twice)",
                    shape.bh(),
                    shape.n_q,
                    shape.n_kv
                ),
                needed,
                free,
            });
        }
        Ok(Self {
            s: rt.alloc::<f32>(shape.score_elems())?,
            p: rt.alloc::<f32>(shape.score_elems())?,
        })
    }
}

/// An element type of the naive flow: f32 (`kernels::attention::naive`, CUDA cores), or bf16
/// and f16 (`kernels::attention::naive_mma`, its two products on tensor cores); S and P are f32
/// in every one. Its spec is the row of `cargo xtask run` the op launches through.
pub trait NaiveElement: Element + NaiveKernel + crate::registry::SpecElement {
    /// The non-causal row's spec (`attention_naive_f32`, `_bf16`, `_f16`).
    const NAIVE_SPEC: &'static Spec;
    /// The causal row's, where there is one (f32); the others launch through the non-causal
    /// spec, which names the same kernels and buffers (the op passes the mask itself).
    const NAIVE_CAUSAL_SPEC: &'static Spec = Self::NAIVE_SPEC;
}

impl NaiveElement for f32 {
    const NAIVE_SPEC: &'static Spec = &ATTENTION_NAIVE_F32;
    const NAIVE_CAUSAL_SPEC: &'static Spec = &ATTENTION_NAIVE_F32_CAUSAL;
}

impl NaiveElement for bf16 {
    const NAIVE_SPEC: &'static Spec = &ATTENTION_NAIVE_BF16;
}

impl NaiveElement for f16 {
    const NAIVE_SPEC: &'static Spec = &ATTENTION_NAIVE_F16;
}

/// Attention as written, three launches: [`scores`] writes S to HBM, the softmax chapter's
/// fused row softmax ([`softmax::fused`]) turns it into P in HBM, [`probabilities_times_values`]
/// reads P back for O (in bf16 and f16, the tensor-core kernels of `naive_mma` in place of
/// the first and last). S and P live in `workspace` ([`NaiveWorkspace::new`]), f32 for every
/// element type.
#[allow(clippy::too_many_arguments)]
pub fn naive<T: NaiveElement>(
    rt: &Runtime,
    q: &DeviceBuffer<T>,
    k: &DeviceBuffer<T>,
    v: &DeviceBuffer<T>,
    o: &mut DeviceBuffer<T>,
    workspace: &mut NaiveWorkspace,
    shape: &AttentionShape,
    params: &AttentionParams,
) -> Result<Launched> {
    let lens = qkvo_lens(shape, [q.len(), k.len(), v.len(), o.len()]);
    if !validate("attention::naive", shape, params, &lens)? {
        return Ok(None);
    }
    let NaiveWorkspace { s, p } = workspace;
    let spec = if params.causal {
        T::NAIVE_CAUSAL_SPEC
    } else {
        T::NAIVE_SPEC
    };
    let scale_mask = (params.scale, params.causal);
    crate::registry::launch_with(
        rt,
        spec,
        &[q, k, v],
        o,
        (&[s, p], &[], &[]),
        dims(shape),
        &|l, b, d| kernels::attention::launch_naive::<T>(l, b, d, scale_mask),
    )
}

/// The fused kernel's launch for element type `T`: one block of `T::THREADS` per `T::BR` queries
/// of each head, with the dynamic shared memory of its Q, K and V tiles.
pub fn fused_config<T: FlashElement>(shape: &AttentionShape) -> LaunchConfig {
    kernels::attention::fused_geometry::<T>(dims(shape))
}

/// Both naive kernels: blocks of `THREADS x THREADS` threads, static shared memory only.
pub fn naive_config(x: usize, y: usize, z: usize) -> LaunchConfig {
    kernels::attention::naive_geometry((x, y, z))
}

/// Naive step 1: `S = scale Q K^T` (masked scores `-inf`), `s` being `batch x heads x n_q x n_kv`.
pub fn scores(
    rt: &Runtime,
    q: &DeviceBuffer<f32>,
    k: &DeviceBuffer<f32>,
    s: &mut DeviceBuffer<f32>,
    shape: &AttentionShape,
    params: &AttentionParams,
) -> Result<Launched> {
    let lens = [
        ("q", q.len(), shape.q_elems()),
        ("k", k.len(), shape.kv_elems()),
        ("s", s.len(), shape.score_elems()),
    ];
    if !validate("attention::scores", shape, params, &lens)? {
        return Ok(None);
    }
    let tile = naive_kernels::OUT_TILE;
    let cfg = naive_config(
        shape.n_kv.div_ceil(tile),
        shape.n_q.div_ceil(tile),
        shape.bh(),
    );
    let (q, k, s) = (q.ptr(), k.ptr(), s.ptr());
    let (n_q, n_kv, d) = (shape.n_q as u32, shape.n_kv as u32, shape.head_dim as u32);
    let (scale, causal) = (params.scale, u32::from(params.causal));
    launch!(
        rt,
        cfg,
        attention::attention_scores_f32(q, k, s, n_q, n_kv, d, scale, causal)
    )
}

/// Naive step 3: `O = P V`, `p` being the row-softmax of S (`batch x heads x n_q x n_kv`).
/// The mask is already in P (zeros), so `params.causal` plays no part here.
pub fn probabilities_times_values(
    rt: &Runtime,
    p: &DeviceBuffer<f32>,
    v: &DeviceBuffer<f32>,
    o: &mut DeviceBuffer<f32>,
    shape: &AttentionShape,
    params: &AttentionParams,
) -> Result<Launched> {
    let lens = [
        ("p", p.len(), shape.score_elems()),
        ("v", v.len(), shape.kv_elems()),
        ("o", o.len(), shape.q_elems()),
    ];
    if !validate(
        "attention::probabilities_times_values",
        shape,
        params,
        &lens,
    )? {
        return Ok(None);
    }
    let cfg = naive_config(shape.n_q.div_ceil(naive_kernels::OUT_TILE), shape.bh(), 1);
    let (p, v, o) = (p.ptr(), v.ptr(), o.ptr());
    let (n_q, n_kv) = (shape.n_q as u32, shape.n_kv as u32);
    if shape.head_dim == 64 {
        launch!(rt, cfg, attention::attention_pv_f32_d64(p, v, o, n_q, n_kv))
    } else {
        launch!(
            rt,
            cfg,
            attention::attention_pv_f32_d128(p, v, o, n_q, n_kv)
        )
    }
}

/// Naive step 1 ([`scores`]): reads Q and K, writes S (`n_q x n_kv` per head); each 64-row
/// tile of Q is read once per 64-key tile of K and vice versa (`kernels::attention::scores_cost`).
pub fn scores_traffic(shape: &AttentionShape) -> Cost {
    kernels::attention::scores_cost(dims(shape))
}

/// Naive step 3 ([`probabilities_times_values`]): reads P once, V once per 64-row query tile,
/// writes O (`kernels::attention::pv_cost`).
pub fn pv_traffic(shape: &AttentionShape) -> Cost {
    kernels::attention::pv_cost(dims(shape))
}

/// The naive flow's traffic, its spec's cost: its three steps'. Compulsory: Q, K, V read, S
/// written and read, P written and read, O written (and the softmax's FLOPs on top of the
/// attention's); re-reads: Q, K and V once more per extra tile in the two products, and S once
/// more where a row is too long for the softmax to keep on chip. The mask changes none of it:
/// the naive kernels compute every score and every product with P, and mask by writing `-inf`
/// (see [`naive_flops`]).
pub fn naive_traffic(shape: &AttentionShape) -> Cost {
    naive_traffic_of::<f32>(shape)
}

/// [`naive_traffic`] of the flow in `T`: Q, K, V read and O written in `T`, S and P in f32
/// (its spec's cost).
pub fn naive_traffic_of<T: NaiveElement>(shape: &AttentionShape) -> Cost {
    kernels::attention::naive_cost_in::<T>(dims(shape))
}

/// The two products' FLOPs as the naive kernels execute them: `4 d` for every (query, key)
/// pair, masked or not. Against [`attention_flops`] with the causal mask, a causal-aware naive
/// flow (skipping the 64 x 64 tiles above the diagonal) would save about half:
/// `1 - (n + 1) / (2 n)` of them for `n_q = n_kv = n`.
pub fn naive_flops(shape: &AttentionShape) -> u64 {
    kernels::attention::naive_flops(dims(shape))
}

/// `4 d` FLOPs per (query, key) pair the mask lets through: `4 n^2 d` per head, about half that
/// when causal (`2 n (n + 1) d` exactly).
pub fn attention_flops(shape: &AttentionShape, causal: bool) -> u64 {
    kernels::attention::attention_flops(dims(shape), causal)
}

/// The fused kernel's traffic for element type `T` (`kernels::attention::flash_cost`, which its
/// specs' costs are): Q, K, V read once, O and LSE written once (compulsory); and each query
/// tile of `T::BR` rows re-reads the K and V tiles it needs (all of them, or up to its diagonal
/// when causal), `(tiles - 1)` extra copies of K and V per head. (The FLOPs are the attention's;
/// the emulator counts the f32 kernel's the same way, and the tensor-core kernel's as every
/// `mma` it issues, masked or not.)
pub fn fused_traffic<T: FlashElement>(shape: &AttentionShape, causal: bool) -> Cost {
    kernels::attention::fused_cost::<T>(dims(shape), causal)
}

/// Device memory each flow needs for `shape` in f32: Q, K, V, O for both; the naive flow adds
/// S and P (`n_q x n_kv` per head, O(N^2)), the fused one only the log-sum-exp (O(N)).
pub fn device_bytes(flow: Flow, shape: &AttentionShape) -> u64 {
    let (q, kv) = (shape.q_elems() as u64, shape.kv_elems() as u64);
    let extra = match flow {
        Flow::Naive => product(&[2, shape.score_elems() as u64]),
        Flow::Fused => shape.lse_elems() as u64,
    };
    product(&[sum(&[product(&[2, sum(&[q, kv])]), extra]), F32 as u64])
}

/// Bytes of `elems` f32 values, saturating (see [`product`]).
fn f32_bytes(elems: usize) -> u64 {
    product(&[elems as u64, F32 as u64])
}

/// Which attention flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Flow {
    /// S and P materialised in HBM: three kernels.
    Naive,
    /// FlashAttention: one kernel, S and P on chip.
    Fused,
}

/// The largest `n` (self-attention, `n_q = n_kv = n`) for which `flow` fits in `free_bytes` of
/// device memory with `batch x heads` heads of dimension `head_dim`: where the memory sweep's
/// naive column stops.
pub fn max_sequence_len(
    flow: Flow,
    free_bytes: u64,
    batch: usize,
    heads: usize,
    head_dim: usize,
) -> usize {
    let fits = |n: usize| {
        device_bytes(flow, &AttentionShape::new(batch, heads, n, head_dim)) <= free_bytes
    };
    if !fits(1) {
        return 0;
    }
    // Exponential search for an upper bound, then bisection: device_bytes grows with n. Past
    // half the address space the next doubling would wrap: `usize::MAX` is the bound then.
    let mut hi: usize = 2;
    while fits(hi) {
        match hi.checked_mul(2) {
            Some(next) => hi = next,
            None if fits(usize::MAX) => return usize::MAX,
            None => {
                hi = usize::MAX;
                break;
            }
        }
    }
    let mut lo = hi / 2; // fits(lo), !fits(hi)
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) { lo = mid } else { hi = mid }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::softmax;

    #[test]
    fn naive_memory_is_quadratic_and_fused_linear() {
        let s = AttentionShape::new(4, 16, 4096, 128);
        let qkvo = 4 * 4 * 16 * 4096 * 128 * 4;
        assert_eq!(device_bytes(Flow::Fused, &s), qkvo + 4 * 16 * 4096 * 4);
        assert_eq!(
            device_bytes(Flow::Naive, &s),
            qkvo + 2 * 4 * 16 * 4096 * 4096 * 4
        );
        // Doubling n doubles fused memory (plus nothing) and roughly quadruples naive memory.
        let s2 = AttentionShape::new(4, 16, 8192, 128);
        assert_eq!(
            device_bytes(Flow::Fused, &s2),
            2 * device_bytes(Flow::Fused, &s)
        );
        let ratio = device_bytes(Flow::Naive, &s2) as f64 / device_bytes(Flow::Naive, &s) as f64;
        assert!(ratio > 3.85 && ratio < 4.0, "{ratio}");
    }

    #[test]
    fn the_largest_n_that_fits_is_exact() {
        let free = 80_000_000_000u64;
        for flow in [Flow::Naive, Flow::Fused] {
            let n = max_sequence_len(flow, free, 4, 16, 128);
            let at = |n| device_bytes(flow, &AttentionShape::new(4, 16, n, 128));
            assert!(at(n) <= free && at(n + 1) > free, "{flow:?}: {n}");
        }
        // 80 GB: naive stops near n = 12.3k (2 * 64 * n^2 * 4 bytes of S and P), fused near
        // 609k (131 kB per token: 64 heads of Q, K, V, O rows and one LSE each).
        let naive = max_sequence_len(Flow::Naive, free, 4, 16, 128);
        assert!((12_000..12_500).contains(&naive), "{naive}");
        let fused = max_sequence_len(Flow::Fused, free, 4, 16, 128);
        assert_eq!(fused, (free / (64 * (4 * 128 + 1) * 4)) as usize);
        assert_eq!(max_sequence_len(Flow::Naive, 10, 1, 1, 64), 0);
    }

    #[test]
    fn naive_flops_ignore_the_mask_and_causal_would_save_about_half() {
        let s = AttentionShape::new(2, 3, 100, 64);
        assert_eq!(naive_flops(&s), attention_flops(&s, false));
        assert_eq!(naive_traffic(&s).flops - softmax_flops(&s), naive_flops(&s));
        let saved = 1.0 - attention_flops(&s, true) as f64 / naive_flops(&s) as f64;
        assert!((saved - (1.0 - 101.0 / 200.0)).abs() < 1e-12, "{saved}");
    }

    fn softmax_flops(s: &AttentionShape) -> u64 {
        softmax::fused_cost(s.bh() * s.n_q, s.n_kv, F32).flops
    }

    #[test]
    fn one_exponential_per_score_fused_per_visible_score() {
        let s = AttentionShape::new(2, 3, 100, 64);
        assert_eq!(naive_traffic(&s).exps, 6 * 100 * 100);
        assert_eq!(fused_traffic::<f32>(&s, false).exps, 6 * 100 * 100);
        assert_eq!(fused_traffic::<f32>(&s, true).exps, 6 * 100 * 101 / 2);
    }

    #[test]
    fn causal_flops_are_about_half() {
        let s = AttentionShape::new(2, 3, 100, 64);
        assert_eq!(attention_flops(&s, false), 4 * 100 * 100 * 64 * 6);
        assert_eq!(attention_flops(&s, true), 2 * 100 * 101 * 64 * 6);
        // 5 queries over 2 keys, causal: the first 3 see nothing.
        let s = AttentionShape::new(1, 1, 5, 64).with_n_kv(2);
        assert_eq!(attention_flops(&s, true), 4 * 64 * 3);
    }

    #[test]
    fn fused_re_reads_are_k_and_v_per_extra_query_tile() {
        // 200 queries: 4 query tiles, each reads all of K and V, 3 of them extra.
        let s = AttentionShape::new(1, 2, 200, 64);
        let t = fused_traffic::<f32>(&s, false);
        assert_eq!(t.reread_bytes(), 2 * 3 * 2 * 200 * 64 * 4);
        assert_eq!(t.compulsory().bytes_read, 2 * 3 * 200 * 64 * 4);
        assert_eq!(t.bytes_written, 2 * (200 * 64 + 200) * 4);
        // Causal: tile b reads keys up to its diagonal, ceil(64 (b + 1) / 16) * 16 of them.
        let t = fused_traffic::<f32>(&s, true);
        let rows = 64 + 128 + 192; // + 200, all of K: the compulsory read
        assert_eq!(t.reread_bytes(), 2 * 2 * rows * 64 * 4);
    }
}
