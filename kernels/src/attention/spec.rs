//! The attention rows' specs (docs/registry.md): the naive flow in f32, the fused kernel in
//! f32 (CUDA cores), bf16 and f16 (tensor cores), the causal naive and bf16 rows, the bf16
//! kernel with half of its exponentials on the FMA units, and the Hopper kernel (`flash_wgmma`,
//! bf16 and f16, and bf16 causal), which reads Q, K and V through tensor maps the harness
//! encodes (one per head) and runs on sm_90a only.
//!
//! Dimensions `["batch", "heads", "n_q", "n_kv", "d"]`: the rows of `cargo xtask run` are
//! self-attention (`n_q == n_kv`, written `4x16x4096x128 bf16`); the property test draws the
//! query and key lengths apart (cross-attention, and causal rows that see no key), and the
//! performance model samples the keys alone (a spec's `affine_keys`). `d` is a multiple of 64,
//! the head dimensions the kernels are built for (`HEAD_DIMS`). The launch functions take the
//! softmax scale and the mask, which `host::ops::attention` passes as its caller asks; a spec's
//! own launch passes the transformer's scale and its row's mask.

use std::vec::Vec;

use super::{
    flash_f32, flash_mma, flash_wgmma, is_visible, kv_end, kv_rows_loaded, naive, naive_mma,
    visible_keys,
};
use crate::cuda::emu::Dim3;
use crate::cuda::tma::{TensorMap, TmaSwizzle};
use crate::cuda::{Bf16, F16, GlobalPtr};
use crate::registry::*;

/// The dimensions' names, in [`Dims`] order.
pub const DIMS: &[&str] = &["batch", "heads", "n_q", "n_kv", "d"];

/// `1 / sqrt(d)`, the transformer's softmax scale.
pub fn standard_scale(d: usize) -> f32 {
    1.0 / (d as f32).sqrt()
}

/// The largest error of an output element, for inputs in [-1, 1] (so `sum_c |q_c k_c| <= d` and
/// `max |v| <= 1`), as tests/tests/attention.rs derives it: `2 delta + (4 (n_kv + d) + 32) u +
/// 2 u_h`, with `delta = (d + 2) u scale d` the f32 error of a score, `u` f32's unit roundoff
/// and `u_h` the output's (0 for f32; the 16-bit kernels also round P to it before `P V`).
pub fn error_bound(n_kv: usize, d: usize, scale: f32, half_u: f64) -> f64 {
    let u = f64::from(f32::EPSILON) / 2.0;
    let d = d as f64;
    let delta = (d + 2.0) * u * f64::from(scale) * d;
    2.0 * delta + (4.0 * (n_kv as f64 + d) + 32.0) * u + 2.0 * half_u
}

/// `4 d` FLOPs per (query, key) pair the mask lets through, over every head.
pub fn attention_flops([batch, heads, n_q, n_kv, d]: Dims, causal: bool) -> u64 {
    let pairs: u64 = (0..n_q)
        .map(|i| visible_keys(i, n_q, n_kv, causal) as u64)
        .sum();
    4 * d as u64 * pairs * (batch * heads) as u64
}

/// The naive flow's two products' FLOPs: `4 d` per pair, masked or not (its kernels compute
/// every score and every product with P, and mask by writing `-inf`).
pub fn naive_flops([batch, heads, n_q, n_kv, d]: Dims) -> u64 {
    4 * (d * n_q * n_kv * batch * heads) as u64
}

const F32: u64 = 4;

/// Elements of Q (and O), of K (and V), and of S (and P): `(q, kv, s)`.
const fn elems([batch, heads, n_q, n_kv, d]: Dims) -> (usize, usize, usize) {
    let bh = batch * heads;
    (bh * n_q * d, bh * n_kv * d, bh * n_q * n_kv)
}

/// A cost whose bytes read beyond `once` (its inputs read once) are tile re-reads that a GPU's
/// L2 serves ([`Cost::resident_rereads`]: the blocks of one head run together and share its
/// tiles), as the attention chapter reads them (docs/attention.md).
const fn with_rereads(once: u64, reads: u64, bytes_written: u64, flops: u64, exps: u64) -> Cost {
    Cost {
        bytes_read: reads,
        bytes_written,
        flops,
        exps,
        rereads: 0,
        resident_rereads: reads - once,
        l2_rereads: 0,
        unit: ComputeUnit::CudaCoreF32,
    }
}

/// Naive step 1 (`attention_scores_f32`, or `_bf16`/`_f16` on the tensor cores, whose inputs
/// are `elem_bytes` each): reads Q and K, writes S (f32 in every flow); each 64-row tile of Q is
/// read once per 64-key tile of K and vice versa. FLOPs: `2 d` per pair, masked or not.
pub fn scores_cost_of(dims: Dims, elem_bytes: usize) -> Cost {
    let [_, _, n_q, n_kv, _] = dims;
    let tile = naive::OUT_TILE;
    let (q, kv, s) = elems(dims);
    let (q, k) = ((elem_bytes * q) as u64, (elem_bytes * kv) as u64);
    let reads = q * n_kv.div_ceil(tile) as u64 + k * n_q.div_ceil(tile) as u64;
    with_rereads(q + k, reads, F32 * s as u64, naive_flops(dims) / 2, 0)
}

/// [`scores_cost_of`] in f32.
pub fn scores_cost(dims: Dims) -> Cost {
    scores_cost_of(dims, F32 as usize)
}

/// Naive step 3 (`attention_pv_*`, V and O of `elem_bytes` each): reads P (f32) once (a block
/// computes whole rows of O), V once per 64-row query tile, writes O. FLOPs: `2 d` per pair
/// (masked keys' zeros included).
pub fn pv_cost_of(dims: Dims, elem_bytes: usize) -> Cost {
    let n_q = dims[2];
    let (q, kv, s) = elems(dims);
    let (p, v) = (F32 * s as u64, (elem_bytes * kv) as u64);
    let reads = p + v * n_q.div_ceil(naive::OUT_TILE) as u64;
    with_rereads(p + v, reads, (elem_bytes * q) as u64, naive_flops(dims) / 2, 0)
}

/// [`pv_cost_of`] in f32.
pub fn pv_cost(dims: Dims) -> Cost {
    pv_cost_of(dims, F32 as usize)
}

// Both naive flows tile S by 64 x 64 and O by 64 rows: the costs above hold for either.
const _: () = assert!(naive::OUT_TILE == naive_mma::TILE);

/// The naive flow with inputs and output of `elem_bytes` each: [`scores_cost_of`], the softmax
/// chapter's fused row softmax on the `batch x heads x n_q` rows of S (f32; it reads a row twice
/// where it is too long to keep on chip: a re-read), and [`pv_cost_of`]. The mask changes none
/// of it.
pub fn naive_cost_of(dims: Dims, elem_bytes: usize) -> Cost {
    let [batch, heads, n_q, n_kv, _] = dims;
    let softmax = crate::softmax::fused_cost::<f32>([batch * heads * n_q, n_kv, 1, 1, 1]);
    let s = F32 * elems(dims).2 as u64;
    let softmax = Cost {
        resident_rereads: softmax.bytes_read - s,
        ..softmax
    };
    scores_cost_of(dims, elem_bytes)
        .plus(softmax)
        .plus(pv_cost_of(dims, elem_bytes))
}

/// [`naive_cost_of`] in f32: the f32 flow's cost.
pub fn naive_cost(dims: Dims) -> Cost {
    naive_cost_of(dims, F32 as usize)
}

/// A fused kernel's cost with tiles of `br` queries and `bc` keys of `elem_bytes` each: Q, K, V
/// read once, O and the f32 log-sum-exp written once; each query tile re-reads the K and V
/// tiles it needs (all of them, or up to its diagonal when causal). The FLOPs are the
/// attention's, one exponential per visible score (the per-row rescales and the masked scores
/// of diagonal tiles are left out, as in the FLOPs).
pub fn flash_cost(dims: Dims, causal: bool, (br, bc): (usize, usize), elem_bytes: usize) -> Cost {
    let [batch, heads, n_q, n_kv, d] = dims;
    let bh = (batch * heads) as u64;
    let row = (d * elem_bytes) as u64;
    let kv_rows: u64 = (0..n_q.div_ceil(br))
        .map(|b| kv_rows_loaded(kv_end(b * br, br, n_q, n_kv, causal), bc, n_kv) as u64)
        .sum();
    let compulsory_kv = if n_q > 0 { n_kv as u64 } else { 0 };
    let flops = attention_flops(dims, causal);
    let once = bh * (n_q as u64 + 2 * compulsory_kv) * row;
    let rereads = bh * 2 * kv_rows.saturating_sub(compulsory_kv) * row;
    with_rereads(
        once,
        once + rereads,
        bh * (n_q as u64 * row + F32 * n_q as u64),
        flops,
        flops / (4 * d as u64).max(1),
    )
}

/// The fused kernel in `T` ([`flash_cost`] with its tiles and element size), on its compute
/// unit: what its specs state, and what the host's attention op reports.
pub fn fused_cost<T: FlashKernel>(dims: Dims, causal: bool) -> Cost {
    Cost {
        unit: T::UNIT,
        ..flash_cost(dims, causal, (T::BR, T::BC), T::ELEM.bytes())
    }
}

/// The Hopper kernel ([`flash_cost`] with its `128 x 128` tiles) on elements of `elem_bytes`,
/// on the tensor cores: what its specs state, and what the host's attention op reports.
pub fn wgmma_flash_cost(dims: Dims, causal: bool, elem_bytes: usize) -> Cost {
    Cost {
        unit: ComputeUnit::TensorCore16,
        ..flash_cost(dims, causal, (flash_wgmma::BR, flash_wgmma::BC), elem_bytes)
    }
}

/// The naive flow in `T` ([`naive_cost_of`]), on the units its products run on: what its specs
/// state, and what the host's attention op reports.
pub fn naive_cost_in<T: NaiveKernel>(dims: Dims) -> Cost {
    Cost {
        unit: T::NAIVE_UNIT,
        ..naive_cost_of(dims, T::ELEM.bytes())
    }
}

/// An element type of the fused kernels: f32 (`flash_f32`, CUDA cores), bf16 and f16
/// (`flash_mma`, tensor cores with f32 accumulation), each with its kernel's tiles.
pub trait FlashKernel: Element {
    /// Query rows per block, keys per K/V tile, threads per block.
    const BR: usize;
    const BC: usize;
    const THREADS: usize;
    const UNIT: ComputeUnit;
    /// Dynamic shared memory at each of [`super::HEAD_DIMS`], 64 and 128.
    const SHARED_BYTES: [usize; 2];
    /// Dynamic shared memory for head dimension `d`.
    fn shared_bytes(d: usize) -> usize;
    /// Launches the kernel for `d` (64 or 128); `fma_exp`: the bf16 kernel at d = 64 with half
    /// of its exponentials on the FMA units (an error for any other).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn launch(
        launcher: &dyn Launcher,
        geometry: LaunchConfig,
        d: usize,
        fma_exp: bool,
        qkvo: [GlobalPtr<Self>; 4],
        lse: GlobalPtr<f32>,
        args: (u32, u32, f32, u32),
    ) -> Result<(), LaunchError>;
}

macro_rules! flash_kernel {
    ($t:ty, $kernels:ident, $unit:ident, $d64:ident, $d128:ident, $fma:expr) => {
        impl FlashKernel for $t {
            const BR: usize = $kernels::BR;
            const BC: usize = $kernels::BC;
            const THREADS: usize = $kernels::THREADS;
            const UNIT: ComputeUnit = ComputeUnit::$unit;
            const SHARED_BYTES: [usize; 2] = [$kernels::shared_bytes(64), $kernels::shared_bytes(128)];
            fn shared_bytes(d: usize) -> usize {
                $kernels::shared_bytes(d)
            }
            fn launch(
                launcher: &dyn Launcher,
                geometry: LaunchConfig,
                d: usize,
                fma_exp: bool,
                [q, k, v, o]: [GlobalPtr<Self>; 4],
                lse: GlobalPtr<f32>,
                (n_q, n_kv, scale, causal): (u32, u32, f32, u32),
            ) -> Result<(), LaunchError> {
                use $kernels::{$d64, $d128};
                match (d, fma_exp) {
                    (64, false) => crate::launch_registered!(
                        launcher,
                        geometry,
                        $d64(q, k, v, o, lse, n_q, n_kv, scale, causal)
                    ),
                    (128, false) => crate::launch_registered!(
                        launcher,
                        geometry,
                        $d128(q, k, v, o, lse, n_q, n_kv, scale, causal)
                    ),
                    (64, true) => ($fma)(launcher, geometry, [q, k, v, o], lse, (n_q, n_kv, scale, causal)),
                    _ => Err(std::format!(
                        "no fused attention kernel for d = {d}{}",
                        if fma_exp { " with FMA exponentials" } else { "" }
                    )
                    .into()),
                }
            }
        }
    };
}

/// The FMA-exponential kernel exists in bf16 only.
fn no_fma_exp<T>(
    _: &dyn Launcher,
    _: LaunchConfig,
    _: [GlobalPtr<T>; 4],
    _: GlobalPtr<f32>,
    _: (u32, u32, f32, u32),
) -> Result<(), LaunchError> {
    Err("the FMA-exponential kernel exists in bf16 only".into())
}

fn bf16_fma_exp(
    launcher: &dyn Launcher,
    geometry: LaunchConfig,
    [q, k, v, o]: [GlobalPtr<Bf16>; 4],
    lse: GlobalPtr<f32>,
    (n_q, n_kv, scale, causal): (u32, u32, f32, u32),
) -> Result<(), LaunchError> {
    use flash_mma::flash_attention_bf16_poly_d64;
    crate::launch_registered!(
        launcher,
        geometry,
        flash_attention_bf16_poly_d64(q, k, v, o, lse, n_q, n_kv, scale, causal)
    )
}

flash_kernel!(f32, flash_f32, CudaCoreF32, flash_attention_f32_d64, flash_attention_f32_d128, no_fma_exp);
flash_kernel!(Bf16, flash_mma, TensorCore16, flash_attention_bf16_d64, flash_attention_bf16_d128, bf16_fma_exp);
flash_kernel!(F16, flash_mma, TensorCore16, flash_attention_f16_d64, flash_attention_f16_d128, no_fma_exp);

/// A grid of `blocks` blocks of `threads` threads and `shared` bytes of dynamic shared memory.
const fn geometry(blocks: (usize, usize, usize), threads: (usize, usize), shared: usize) -> LaunchConfig {
    LaunchConfig {
        grid: Dim3 {
            x: blocks.0 as u32,
            y: blocks.1 as u32,
            z: blocks.2 as u32,
        },
        block: Dim3 {
            x: threads.0 as u32,
            y: threads.1 as u32,
            z: 1,
        },
        dynamic_shared: shared as u32,
    }
}

/// The fused kernel's launch for `T`: one block of `T::THREADS` per `T::BR` queries of each head,
/// with the dynamic shared memory of its tiles.
pub fn fused_geometry<T: FlashKernel>([batch, heads, n_q, _, d]: Dims) -> LaunchConfig {
    geometry(
        (n_q.div_ceil(T::BR), batch * heads, 1),
        (T::THREADS, 1),
        T::shared_bytes(d),
    )
}

/// The naive kernels' blocks, `16 x 16` threads, static shared memory only, on a grid of
/// `blocks`.
pub const fn naive_geometry(blocks: (usize, usize, usize)) -> LaunchConfig {
    geometry(blocks, (naive::THREADS, naive::THREADS), 0)
}

/// `dims`' sequence lengths and the scale and mask as the kernels take them.
fn args([_, _, n_q, n_kv, _]: Dims, scale: f32, causal: bool) -> (u32, u32, f32, u32) {
    (n_q as u32, n_kv as u32, scale, u32::from(causal))
}

/// The fused kernel (`fma_exp`: its FMA-exponential variant) on Q, K, V (inputs 0 to 2), O (the
/// output) and the log-sum-exp (workspace 0, f32, one per query row).
pub fn launch_fused<T: FlashKernel>(
    launcher: &dyn Launcher,
    buffers: &Buffers,
    dims: Dims,
    (scale, causal): (f32, bool),
    fma_exp: bool,
) -> Result<(), LaunchError> {
    let qkvo = [
        buffers.input::<T>(0)?,
        buffers.input::<T>(1)?,
        buffers.input::<T>(2)?,
        buffers.output::<T>()?,
    ];
    let lse = buffers.workspaces[0];
    let geometry = fused_geometry::<T>(dims);
    T::launch(launcher, geometry, dims[4], fma_exp, qkvo, lse, args(dims, scale, causal))
}

/// An element type of the naive flow: f32 (`naive`, CUDA cores) or bf16 and f16 (`naive_mma`,
/// tensor cores with f32 accumulation). S and P are f32 in every one, and the softmax between
/// the two products is the same f32 kernel.
pub trait NaiveKernel: Element {
    /// Where the two products' FLOPs run.
    const NAIVE_UNIT: ComputeUnit;
    /// Threads per block of both kernels, and the dynamic shared memory of the larger at d = 128
    /// (the occupancy table's row).
    const NAIVE_BLOCK: (usize, usize);
    /// Step 1: `S = scale Q K^T`, masked scores `-inf`, on the grid of 64 x 64 tiles of S.
    #[doc(hidden)]
    fn launch_scores(
        launcher: &dyn Launcher,
        dims: Dims,
        q: GlobalPtr<Self>,
        k: GlobalPtr<Self>,
        s: GlobalPtr<f32>,
        args: (u32, u32, f32, u32),
    ) -> Result<(), LaunchError>;
    /// Step 3: `O = P V`, on the grid of 64-row tiles of O.
    #[doc(hidden)]
    fn launch_pv(
        launcher: &dyn Launcher,
        dims: Dims,
        p: GlobalPtr<f32>,
        v: GlobalPtr<Self>,
        o: GlobalPtr<Self>,
    ) -> Result<(), LaunchError>;
}

/// The error of a naive launch at a head dimension no kernel is built for.
fn no_naive_kernel(d: usize) -> LaunchError {
    std::format!("no naive attention kernel for d = {d}").into()
}

impl NaiveKernel for f32 {
    const NAIVE_UNIT: ComputeUnit = ComputeUnit::CudaCoreF32;
    const NAIVE_BLOCK: (usize, usize) = (naive::THREADS * naive::THREADS, 0);
    fn launch_scores(
        launcher: &dyn Launcher,
        [batch, heads, n_q, n_kv, d]: Dims,
        q: GlobalPtr<f32>,
        k: GlobalPtr<f32>,
        s: GlobalPtr<f32>,
        (n_q32, n_kv32, scale, causal): (u32, u32, f32, u32),
    ) -> Result<(), LaunchError> {
        use naive::attention_scores_f32;
        let tile = naive::OUT_TILE;
        let scores = naive_geometry((n_kv.div_ceil(tile), n_q.div_ceil(tile), batch * heads));
        let d32 = d as u32;
        crate::launch_registered!(
            launcher,
            scores,
            attention_scores_f32(q, k, s, n_q32, n_kv32, d32, scale, causal)
        )
    }
    fn launch_pv(
        launcher: &dyn Launcher,
        [batch, heads, n_q, n_kv, d]: Dims,
        p: GlobalPtr<f32>,
        v: GlobalPtr<f32>,
        o: GlobalPtr<f32>,
    ) -> Result<(), LaunchError> {
        use naive::{attention_pv_f32_d64, attention_pv_f32_d128};
        let pv = naive_geometry((n_q.div_ceil(naive::OUT_TILE), batch * heads, 1));
        let (n_q, n_kv) = (n_q as u32, n_kv as u32);
        match d {
            64 => crate::launch_registered!(launcher, pv, attention_pv_f32_d64(p, v, o, n_q, n_kv)),
            128 => crate::launch_registered!(launcher, pv, attention_pv_f32_d128(p, v, o, n_q, n_kv)),
            _ => Err(no_naive_kernel(d)),
        }
    }
}

macro_rules! naive_mma_kernel {
    ($t:ty, $scores64:ident, $scores128:ident, $pv64:ident, $pv128:ident) => {
        impl NaiveKernel for $t {
            const NAIVE_UNIT: ComputeUnit = ComputeUnit::TensorCore16;
            const NAIVE_BLOCK: (usize, usize) =
                (flash_mma::THREADS, naive_mma::scores_shared_bytes(128));
            fn launch_scores(
                launcher: &dyn Launcher,
                [batch, heads, n_q, n_kv, d]: Dims,
                q: GlobalPtr<$t>,
                k: GlobalPtr<$t>,
                s: GlobalPtr<f32>,
                (n_q32, n_kv32, scale, causal): (u32, u32, f32, u32),
            ) -> Result<(), LaunchError> {
                use naive_mma::{$scores64, $scores128, TILE};
                let blocks = (n_kv.div_ceil(TILE), n_q.div_ceil(TILE), batch * heads);
                let g = geometry(blocks, (flash_mma::THREADS, 1), naive_mma::scores_shared_bytes(d));
                match d {
                    64 => crate::launch_registered!(
                        launcher,
                        g,
                        $scores64(q, k, s, n_q32, n_kv32, scale, causal)
                    ),
                    128 => crate::launch_registered!(
                        launcher,
                        g,
                        $scores128(q, k, s, n_q32, n_kv32, scale, causal)
                    ),
                    _ => Err(no_naive_kernel(d)),
                }
            }
            fn launch_pv(
                launcher: &dyn Launcher,
                [batch, heads, n_q, n_kv, d]: Dims,
                p: GlobalPtr<f32>,
                v: GlobalPtr<$t>,
                o: GlobalPtr<$t>,
            ) -> Result<(), LaunchError> {
                use naive_mma::{$pv64, $pv128, TILE};
                let blocks = (n_q.div_ceil(TILE), batch * heads, 1);
                let g = geometry(blocks, (flash_mma::THREADS, 1), naive_mma::pv_shared_bytes(d));
                let (n_q, n_kv) = (n_q as u32, n_kv as u32);
                match d {
                    64 => crate::launch_registered!(launcher, g, $pv64(p, v, o, n_q, n_kv)),
                    128 => crate::launch_registered!(launcher, g, $pv128(p, v, o, n_q, n_kv)),
                    _ => Err(no_naive_kernel(d)),
                }
            }
        }
    };
}

naive_mma_kernel!(
    Bf16,
    attention_scores_bf16_d64,
    attention_scores_bf16_d128,
    attention_pv_bf16_d64,
    attention_pv_bf16_d128
);
naive_mma_kernel!(
    F16,
    attention_scores_f16_d64,
    attention_scores_f16_d128,
    attention_pv_f16_d64,
    attention_pv_f16_d128
);

/// The naive flow's three launches in `T` on Q, K, V (inputs 0 to 2) and O (the output), S and
/// P in workspaces 0 and 1 (f32, `n_q x n_kv` per head): `S = scale Q K^T` (masked scores
/// `-inf`), P = the row softmax of S (the softmax chapter's fused kernel, launched through its
/// spec), `O = P V`.
pub fn launch_naive<T: NaiveKernel>(
    launcher: &dyn Launcher,
    buffers: &Buffers,
    dims: Dims,
    (scale, causal): (f32, bool),
) -> Result<(), LaunchError> {
    let [batch, heads, n_q, n_kv, _] = dims;
    let (q, k, v, o) = (
        buffers.input::<T>(0)?,
        buffers.input::<T>(1)?,
        buffers.input::<T>(2)?,
        buffers.output::<T>()?,
    );
    let (s, p) = (buffers.workspaces[0], buffers.workspaces[1]);
    T::launch_scores(launcher, dims, q, k, s, args(dims, scale, causal))?;
    let softmax = Buffers {
        inputs: &[Untyped {
            ptr: s.cast::<u8>(),
            elem: Elem::F32,
        }],
        output: Untyped {
            ptr: p.cast::<u8>(),
            elem: Elem::F32,
        },
        workspaces: &[],
        indices: &[],
        accumulate: false,
        tensor_maps: &[],
    };
    let rows = [batch * heads * n_q, n_kv, 1, 1, 1];
    (crate::softmax::SOFTMAX_FUSED_F32.launch)(launcher, &softmax, rows)?;
    T::launch_pv(launcher, dims, p, v, o)
}

/// Output rows `rows` (of `batch x heads x n_q`, each `d` long) from the definition, in f64:
/// each query row against its head's keys, `-inf` where masked; a row that sees no key is zeros.
/// The spec's inputs are finite, so no special value arises (tests/tests/attention_special.rs
/// tests those through `host::ops::attention`).
fn reference<const CAUSAL: bool>(inputs: &[&[f32]], dims: Dims, rows: &[usize]) -> Expected {
    let [_, _, n_q, n_kv, d] = dims;
    let scale = f64::from(standard_scale(d));
    let (q, k, v) = (inputs[0], inputs[1], inputs[2]);
    let mut out = Vec::with_capacity(rows.len() * d);
    for &row in rows {
        let (h, i) = (row / n_q, row % n_q);
        let at = |j: usize| (h * n_kv + j) * d;
        let keys = (0..n_kv).filter(|&j| is_visible(i, j, n_q, n_kv, CAUSAL));
        let keys = keys.map(|j| (&k[at(j)..][..d], &v[at(j)..][..d]));
        out.extend(attend_row(&q[row * d..][..d], keys, scale));
    }
    out.into()
}

/// One query row `q` against its keys and values (`(k_j, v_j)` rows, as long as `q`), from the
/// definition in f64: `sum_j softmax_j(scale q . k_j) v_j`, zeros where there is no key. The
/// attention rows' references and decode attention's (`crate::decode::attention`) share it.
pub fn attend_row<'a>(
    q: &[f32],
    keys: impl Iterator<Item = (&'a [f32], &'a [f32])>,
    scale: f64,
) -> Vec<f64> {
    let s: Vec<(f64, &[f32])> = keys
        .map(|(k_j, v_j)| {
            let dot: f64 = q
                .iter()
                .zip(k_j)
                .map(|(a, b)| f64::from(*a) * f64::from(*b))
                .sum();
            (scale * dot, v_j)
        })
        .collect();
    let m = s.iter().fold(f64::NEG_INFINITY, |m, x| m.max(x.0));
    let l: f64 = s.iter().map(|x| (x.0 - m).exp()).sum();
    let mut o = std::vec![0.0f64; q.len()];
    for &(s_j, v_j) in &s {
        let p = (s_j - m).exp() / l;
        for (o_c, v_c) in o.iter_mut().zip(v_j) {
            *o_c += p * f64::from(*v_c);
        }
    }
    o
}

/// Which kernels a spec launches.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flow {
    Naive,
    Fused,
    FusedFmaExp,
}

/// Self-attention at the shape on a GPU (batch 4, 16 heads, N = 4096, d = 128), and on
/// the emulator 2 heads of `n`, a multiple of no tile or fragment (the last tile holds 6 rows,
/// part of an 8-wide `mma` fragment). The fused kernels run N = 1030, enough to walk their whole
/// key loop: 33 K/V tiles of `flash_f32`'s 32 keys, 17 of `flash_mma`'s 64 through its 2-stage
/// ring. The naive flow stays at N = 200: its two kernels are shared-memory-tiled matrix
/// products with no pipeline, which at 200 already walk 4 x 4 output tiles of 64 and 13 key
/// tiles of 16, while at 1030 its O(N^2) round trips of S and P through HBM would cost the
/// emulator about twice all the fused rows together.
const fn run_shape(n: usize, d: usize) -> RunShape {
    RunShape {
        gpu: [4, 16, 4096, 4096, d],
        emulator: [1, 2, n, n, d],
    }
}

// The model's samples along the keys (`AffineKeys`): the non-causal rows, where each key tile
// costs a block the same. The tiles are at most 128 keys wide, and the naive flow's softmax gives
// each of its 256 threads a row's keys in a loop: 256 and 512 keys. On the PTX backend the
// compiler unrolls that loop by four, so the naive flow's counts follow one line only over
// multiples of 1024 keys: 1024 and 2048 there (checked from 1024 and 2048 to 3072 by hand: a
// minute, too long for the suite). A causal row is not affine (with fewer keys than queries, the
// middle query tiles see no key at all), except for the naive flow's P V launch: the mask is in
// P as zeros, which it multiplies like any other value (`NAIVE_CAUSAL_PV`). The fused causal
// kernels skip masked tiles and are sampled at the GPU shape, where their blocks are short
// enough.

/// The naive flow's P V kernel at the GPU shape's head dimension (128): the causal naive row's
/// one launch affine in the keys.
const NAIVE_CAUSAL_PV: &str = "attention_pv_f32_d128";

/// A fused kernel's samples along the keys, `bc` keys a tile: two and four key tiles, so that
/// each sample holds at least two whole tiles and a kernel that loads the next tile while it
/// computes this one (the Hopper kernel's pipeline) runs its steady state in both. Shorter
/// samples cost less: a tenth of a second.
const fn fused_affine_keys(bc: usize) -> AffineKeys {
    AffineKeys {
        short: (2 * bc, 4 * bc),
        short_ptx: (2 * bc, 4 * bc),
        only: None,
    }
}

const NAIVE_RUN: &[RunShape] = &[run_shape(200, 128)];
const FUSED_RUN: &[RunShape] = &[run_shape(1030, 128)];
/// The FMA-exponential kernel is built for d = 64.
const FMA_EXP_RUN: &[RunShape] = &[run_shape(1030, 64)];

/// The spec of one attention row: `T` its element type, `FLOW` its kernels (0 naive, 1 fused,
/// 2 fused with FMA exponentials), `CAUSAL` its mask.
const fn attention_spec<T: FlashKernel + NaiveKernel, const FLOW: u8, const CAUSAL: bool>(
    name: &'static str,
    what: &'static str,
) -> Spec {
    let flow = match FLOW {
        0 => Flow::Naive,
        1 => Flow::Fused,
        _ => Flow::FusedFmaExp,
    };
    let (run, max_d) = match flow {
        Flow::Naive => (NAIVE_RUN, 128),
        Flow::Fused => (FUSED_RUN, 128),
        Flow::FusedFmaExp => (FMA_EXP_RUN, 64),
    };
    let occupancy = match flow {
        Flow::Naive => geometry((1, 1, 1), (T::NAIVE_BLOCK.0, 1), T::NAIVE_BLOCK.1),
        Flow::Fused | Flow::FusedFmaExp => {
            geometry((1, 1, 1), (T::THREADS, 1), T::SHARED_BYTES[max_d / 64 - 1])
        }
    };
    Spec {
        name,
        what,
        dims: DIMS,
        shapes: Shapes {
            run,
            // Two query and key tiles past the first of every kernel (64 rows), so that a
            // causal draw of more queries than keys has whole tiles that see no key.
            test_max: [2, 2, 150, 150, max_d],
            multiple: [1, 1, 1, 1, 64],
            // At the GPU shape: 16 query rows over the 64 heads, each against its head's 4096
            // keys in f64.
            gpu_rows_checked: Some(16),
        },
        inputs: |[batch, heads, n_q, n_kv, d]| {
            let (q, kv) = (batch * heads * n_q * d, batch * heads * n_kv * d);
            std::vec![Buffer::of::<T>(q), Buffer::of::<T>(kv), Buffer::of::<T>(kv)]
        },
        input_range: (-1.0, 1.0),
        // Q and K make the scores, whose row maxima skip their exponentials
        // (`kernels::softmax::exp2_shifted`): on zeros the model would count none.
        values_steer: true,
        affine_keys: match (flow, CAUSAL) {
            (Flow::Naive, _) => Some(AffineKeys {
                short: (256, 512),
                short_ptx: (1024, 2048),
                only: if CAUSAL { Some(NAIVE_CAUSAL_PV) } else { None },
            }),
            (Flow::Fused | Flow::FusedFmaExp, false) => Some(fused_affine_keys(T::BC)),
            (Flow::Fused | Flow::FusedFmaExp, true) => None,
        },
        output: |[batch, heads, n_q, _, d]| Buffer::of::<T>(batch * heads * n_q * d),
        rows: |[batch, heads, n_q, ..]| batch * heads * n_q,
        workspaces: match flow {
            // S and P, f32, `n_q x n_kv` per head.
            Flow::Naive => |dims| std::vec![elems(dims).2; 2],
            // The log-sum-exp, f32, one per query row.
            Flow::Fused | Flow::FusedFmaExp => |[batch, heads, n_q, ..]| std::vec![batch * heads * n_q],
        },
        indices: |_| std::vec![],
        tensor_maps: |_| std::vec![],
        sm90a_only: false,
        launch: match flow {
            Flow::Naive => |l, b, dims| launch_naive::<T>(l, b, dims, (standard_scale(dims[4]), CAUSAL)),
            Flow::Fused => |l, b, dims| launch_fused::<T>(l, b, dims, (standard_scale(dims[4]), CAUSAL), false),
            Flow::FusedFmaExp => {
                |l, b, dims| launch_fused::<T>(l, b, dims, (standard_scale(dims[4]), CAUSAL), true)
            }
        },
        reference: reference::<CAUSAL>,
        tolerance: |[_, _, _, n_kv, d]| error_bound(n_kv, d, standard_scale(d), T::ELEM.unit_roundoff()),
        cost: match flow {
            Flow::Naive => |dims| naive_cost_in::<T>(dims),
            Flow::Fused => |dims| fused_cost::<T>(dims, CAUSAL),
            // Half of the exponentials (every other 8-key piece) on the FMA units, whose FMAs
            // run beside the tensor cores and are not counted in the FLOPs.
            Flow::FusedFmaExp => |dims| {
                let c = fused_cost::<T>(dims, CAUSAL);
                Cost {
                    exps: c.exps / 2,
                    ..c
                }
            },
        },
        accumulates: false,
        occupancy: Occupancy {
            threads: occupancy.block.x * occupancy.block.y,
            dynamic_shared: occupancy.dynamic_shared,
            in_flight_per_thread: None,
        },
        baseline: Some(Baseline {
            op: "sdpa",
            dims: &["batch", "heads", "seq", "head_dim"],
        }),
    }
}

/// S and P through HBM: three kernels.
pub const ATTENTION_NAIVE_F32: Spec = attention_spec::<f32, 0, false>(
    "attention_naive_f32",
    "O = softmax(Q K^T / sqrt(d)) V in three kernels: S to HBM, P = softmax(S) to HBM, P V",
);
/// The same three kernels with the two products on `mma.sync` tensor cores, bf16 (S and P still
/// f32 in HBM).
pub const ATTENTION_NAIVE_BF16: Spec = attention_spec::<Bf16, 0, false>(
    "attention_naive_bf16",
    "O = softmax(Q K^T / sqrt(d)) V in three kernels, bf16 products on the tensor cores, S and P f32 in HBM",
);
/// The same, f16.
pub const ATTENTION_NAIVE_F16: Spec = attention_spec::<F16, 0, false>(
    "attention_naive_f16",
    "O = softmax(Q K^T / sqrt(d)) V in three kernels, f16 products on the tensor cores, S and P f32 in HBM",
);
/// FlashAttention's forward pass on the CUDA cores: S and P stay on chip.
pub const ATTENTION_FUSED_F32: Spec = attention_spec::<f32, 1, false>(
    "attention_fused_f32",
    "O = softmax(Q K^T / sqrt(d)) V in one kernel, f32 on the CUDA cores",
);
/// The same on `mma.sync` tensor cores, bf16.
pub const ATTENTION_FUSED_BF16: Spec = attention_spec::<Bf16, 1, false>(
    "attention_fused_bf16",
    "O = softmax(Q K^T / sqrt(d)) V in one kernel, bf16 on the tensor cores",
);
/// The same on `mma.sync` tensor cores, f16.
pub const ATTENTION_FUSED_F16: Spec = attention_spec::<F16, 1, false>(
    "attention_fused_f16",
    "O = softmax(Q K^T / sqrt(d)) V in one kernel, f16 on the tensor cores",
);
/// The naive flow with the causal mask (every product still computed: docs/attention.md).
pub const ATTENTION_NAIVE_F32_CAUSAL: Spec = attention_spec::<f32, 0, true>(
    "attention_naive_f32_causal",
    "causal attention in three kernels, every score computed and the masked ones written -inf",
);
/// The bf16 kernel with the causal mask: tiles above the diagonal skipped.
pub const ATTENTION_FUSED_BF16_CAUSAL: Spec = attention_spec::<Bf16, 1, true>(
    "attention_fused_bf16_causal",
    "causal attention in one kernel, bf16 on the tensor cores, the tiles past the diagonal skipped",
);
/// The bf16 kernel at d = 64 with half of its exponentials on the FMA units (FlashAttention-4's
/// trick).
pub const ATTENTION_FUSED_BF16_FMA_EXP: Spec = attention_spec::<Bf16, 2, false>(
    "attention_fused_bf16_fma_exp",
    "the bf16 fused kernel at d = 64, every other 8-key piece's exponentials on the FMA units",
);

/// A 16-bit element type of the Hopper kernel (`flash_wgmma`: TMA, an mbarrier ring, `wgmma`):
/// bf16 and f16.
pub trait WgmmaKernel: FlashKernel {
    /// Launches the kernel for `d` (64 or 128) on the tensor maps of Q, K and V.
    #[doc(hidden)]
    fn launch_wgmma(
        launcher: &dyn Launcher,
        geometry: LaunchConfig,
        d: usize,
        qkv_maps: [GlobalPtr<TensorMap>; 3],
        o: GlobalPtr<Self>,
        lse: GlobalPtr<f32>,
        args: (u32, u32, f32, u32),
    ) -> Result<(), LaunchError>;
}

macro_rules! wgmma_kernel {
    ($t:ty, $d64:ident, $d128:ident) => {
        impl WgmmaKernel for $t {
            fn launch_wgmma(
                launcher: &dyn Launcher,
                geometry: LaunchConfig,
                d: usize,
                [q_maps, k_maps, v_maps]: [GlobalPtr<TensorMap>; 3],
                o: GlobalPtr<$t>,
                lse: GlobalPtr<f32>,
                (n_q, n_kv, scale, causal): (u32, u32, f32, u32),
            ) -> Result<(), LaunchError> {
                use flash_wgmma::{$d64, $d128};
                match d {
                    64 => crate::launch_registered!(
                        launcher,
                        geometry,
                        $d64(q_maps, k_maps, v_maps, o, lse, n_q, n_kv, scale, causal)
                    ),
                    128 => crate::launch_registered!(
                        launcher,
                        geometry,
                        $d128(q_maps, k_maps, v_maps, o, lse, n_q, n_kv, scale, causal)
                    ),
                    _ => Err(std::format!("no Hopper attention kernel for d = {d}").into()),
                }
            }
        }
    };
}

wgmma_kernel!(Bf16, flash_attention_wgmma_bf16_d64, flash_attention_wgmma_bf16_d128);
wgmma_kernel!(F16, flash_attention_wgmma_f16_d64, flash_attention_wgmma_f16_d128);

/// The Hopper kernel's launch: one block of a producer and two consumer warpgroups per
/// `flash_wgmma::BR` = 128 queries of each head, with the dynamic shared memory of Q and the
/// K/V ring.
pub fn wgmma_geometry([batch, heads, n_q, _, d]: Dims) -> LaunchConfig {
    geometry(
        (n_q.div_ceil(flash_wgmma::BR), batch * heads, 1),
        (flash_wgmma::THREADS, 1),
        flash_wgmma::shared_bytes(d),
    )
}

/// The Hopper kernel's tensor maps: one per head of Q (inputs 0, `n_q` rows of `d`), of K and
/// of V (inputs 1 and 2, `n_kv` rows), boxes of `BOX_ROWS x BOX_COLS`, 128-byte swizzle. A map
/// per head, so that the TMA zero-fills a tile past the end of a head's sequence instead of
/// reading the next head's rows.
pub fn wgmma_maps([batch, heads, n_q, n_kv, d]: Dims) -> Vec<TensorMaps> {
    let map = |input, rows| TensorMaps {
        input,
        slabs: batch * heads,
        rows,
        cols: d,
        box_rows: flash_wgmma::BOX_ROWS as u32,
        box_cols: flash_wgmma::BOX_COLS as u32,
        swizzle: TmaSwizzle::B128,
    };
    std::vec![map(0, n_q), map(1, n_kv), map(2, n_kv)]
}

/// The Hopper kernel on the tensor maps of Q, K and V ([`wgmma_maps`]), O (the output) and the
/// log-sum-exp (workspace 0, f32, one per query row), as [`launch_fused`]'s.
pub fn launch_wgmma<T: WgmmaKernel>(
    launcher: &dyn Launcher,
    buffers: &Buffers,
    dims: Dims,
    (scale, causal): (f32, bool),
) -> Result<(), LaunchError> {
    let maps = [
        buffers.tensor_map(0)?,
        buffers.tensor_map(1)?,
        buffers.tensor_map(2)?,
    ];
    let (o, lse) = (buffers.output::<T>()?, buffers.workspaces[0]);
    let geometry = wgmma_geometry(dims);
    T::launch_wgmma(launcher, geometry, dims[4], maps, o, lse, args(dims, scale, causal))
}

/// The spec of a Hopper row: the fused rows' problem, inputs, reference and bound (the same O
/// and LSE), with its own launch, tiles (128 queries by 128 keys, so its cost), occupancy, its
/// tensor maps, sm_90a only, and read against PyTorch's fastest attention on Hopper (the cuDNN
/// and the FlashAttention backends both measured, the faster one the baseline: `sdpa_hopper`).
const fn wgmma_spec<T: WgmmaKernel + NaiveKernel, const CAUSAL: bool>(
    name: &'static str,
    what: &'static str,
) -> Spec {
    Spec {
        launch: |l, b, dims| launch_wgmma::<T>(l, b, dims, (standard_scale(dims[4]), CAUSAL)),
        cost: |dims| wgmma_flash_cost(dims, CAUSAL, T::ELEM.bytes()),
        occupancy: Occupancy {
            threads: flash_wgmma::THREADS as u32,
            dynamic_shared: flash_wgmma::shared_bytes(128) as u32,
            in_flight_per_thread: None,
        },
        tensor_maps: wgmma_maps,
        sm90a_only: true,
        affine_keys: if CAUSAL {
            None
        } else {
            Some(fused_affine_keys(flash_wgmma::BC))
        },
        baseline: Some(Baseline {
            op: "sdpa_hopper",
            dims: &["batch", "heads", "seq", "head_dim"],
        }),
        ..attention_spec::<T, 1, CAUSAL>(name, what)
    }
}

/// FlashAttention-3's structure on Hopper, bf16: a TMA producer warpgroup, two consumer
/// warpgroups on `wgmma`, K and V through a two-stage mbarrier ring.
pub const ATTENTION_WGMMA_BF16: Spec = wgmma_spec::<Bf16, false>(
    "attention_wgmma_bf16",
    "O = softmax(Q K^T / sqrt(d)) V in one kernel on Hopper (TMA, mbarrier ring, wgmma), bf16; sm_90a only",
);
/// The same, f16.
pub const ATTENTION_WGMMA_F16: Spec = wgmma_spec::<F16, false>(
    "attention_wgmma_f16",
    "O = softmax(Q K^T / sqrt(d)) V in one kernel on Hopper (TMA, mbarrier ring, wgmma), f16; sm_90a only",
);
/// The bf16 Hopper kernel with the causal mask: tiles past the diagonal skipped.
pub const ATTENTION_WGMMA_BF16_CAUSAL: Spec = wgmma_spec::<Bf16, true>(
    "attention_wgmma_bf16_causal",
    "causal attention in one kernel on Hopper (TMA, mbarrier ring, wgmma), bf16, the tiles past the diagonal skipped; sm_90a only",
);
