//! What `cargo xtask run` prints after the decode kernels' rows (docs/decode.md): the GEMV
//! against the tensor-core GEMM as the batch grows, and the bytes of one generated token of
//! Llama-3-8B as the context grows, both from the kernels' own cost models, MODELLED at the
//! roofline bound of the chosen device.

use host::ops::decode::{self, DecodeShape};
use host::ops::gemm::{Epilogue, GemmKernel, GemmShape};
use kernels::decode::gemv::MAX_M;
use kernels::gemm::TENSOR_CORE;
use perf::cost::{ComputeUnit, Cost, CostRoofline, Roofline};
use perf::specs::GpuSpec;

use crate::format::{NARROW, duration, wrap};

/// Llama-3-8B: hidden 4096, MLP 14336, 32 layers, 32 query and 8 KV heads of 128, vocabulary
/// 128256. Its weight matrices as the GEMV sees them, `(K, N)` per layer, then the LM head.
const HIDDEN: usize = 4096;
const MLP: usize = 14336;
const LAYERS: usize = 32;
const VOCAB: usize = 128_256;
const LAYER_MATRICES: [(usize, usize); 7] = [
    (HIDDEN, HIDDEN), // q
    (HIDDEN, 1024),   // k (8 KV heads x 128)
    (HIDDEN, 1024),   // v
    (HIDDEN, HIDDEN), // o
    (HIDDEN, MLP),    // gate
    (HIDDEN, MLP),    // up
    (MLP, HIDDEN),    // down
];

/// Both tables.
pub fn sweeps(spec: &GpuSpec) {
    crossover(spec, HIDDEN, MLP);
    bytes_per_token(spec);
}

/// The modelled time of `cost` on `spec`, stretched when only `blocks` blocks exist for its
/// `spec.sms` SMs (an SM with no block streams nothing: the roofline does not see that).
fn filled_seconds(cost: &Cost, spec: &GpuSpec, blocks: u64) -> (f64, f64) {
    let fill = (blocks as f64 / f64::from(spec.sms)).min(1.0);
    (Roofline::modelled(cost, spec).seconds / fill, fill)
}

/// `[M, K] x [K, N]` by the GEMV and by the tensor-core GEMM, M from 1 to 512: each kernel's
/// compulsory bytes (the GEMV's X re-reads hit L2), FLOPs as executed (the tensor-core kernel
/// computes whole 128-row tiles), and the time at the roofline bound stretched by the SMs left
/// without a block.
fn crossover(spec: &GpuSpec, k: usize, n: usize) {
    let title = format!(
        "GEMV against the tensor-core GEMM, [M, {k}] x [{k}, {n}] bf16, MODELLED on {} (roofline bound of each kernel's cost model; time / SM fill when it has fewer blocks than the {} SMs):",
        spec.name, spec.sms
    );
    println!("\n{}", wrap(&title, NARROW));
    println!(
        "{:>5} {:>12} {:>12} {:>9} {:>12} {:>12} {:>12} {:>9} {:>12}  faster",
        "M",
        "GEMV bytes",
        "GEMV FLOP/B",
        "GEMV SMs",
        "GEMV time",
        "TC bytes",
        "TC FLOP/B",
        "TC SMs",
        "TC time"
    );
    let tc = GemmKernel::TensorCoreBf16;
    let mut m = 1;
    while m <= 512 {
        let shape = GemmShape::new(m, n, k);
        let gemv = decode::gemv_cost(shape).compulsory();
        let gemv_blocks = n.div_ceil(kernels::decode::gemv::ROWS_PER_BLOCK) as u64;
        let (gemv_s, gemv_fill) = filled_seconds(&gemv, spec, gemv_blocks);
        let tc_cost = Cost {
            flops: tc.executed_flops(shape),
            ..tc.cost(shape, Epilogue::Overwrite).compulsory()
        };
        let (bm, bn) = TENSOR_CORE.blocks(m as u32, n as u32);
        let (tc_s, tc_fill) = filled_seconds(&tc_cost, spec, u64::from(bm * bn));
        let gemv_note = if m as u32 > MAX_M { "*" } else { " " };
        let faster = if gemv_s < tc_s {
            "GEMV"
        } else {
            "tensor cores"
        };
        println!(
            "{m:>5} {:>9.1} MB {:>12.1} {:>8.0}% {:>11}{gemv_note} {:>9.1} MB {:>12.1} {:>8.0}% {:>12}  {faster}",
            gemv.bytes() as f64 / 1e6,
            gemv.intensity(),
            100.0 * gemv_fill,
            duration(gemv_s),
            tc_cost.bytes() as f64 / 1e6,
            tc_cost.intensity(),
            100.0 * tc_fill,
            duration(tc_s),
        );
        m *= 2;
    }
    let ridge = spec.ridge(ComputeUnit::CudaCoreF32);
    let note = format!(
        "* the GEMV takes M <= {MAX_M}; beyond, its cost model only. Its f32 FMAs turn it compute-bound near M = {ridge:.0} (the CUDA-core ridge, FLOP/B = M); the whole matmul turns compute-bound on the tensor cores much later: cargo xtask roofline crossover --k {k} --n {n}"
    );
    println!("{}", wrap(&note, NARROW));
}

/// One generated token of Llama-3-8B at batch 1 and context `context`, from the kernels' cost
/// models: the bytes of weights and of KV cache it reads, and its modelled time on a device.
pub struct TokenStep {
    pub context: u32,
    pub weight_bytes: u64,
    pub kv_bytes: u64,
    pub seconds: f64,
}

/// [`TokenStep`]s at contexts 1k, 2k, ... 128k: every projection and the LM head by the GEMV,
/// split-KV attention over the cache in each layer.
pub fn token_steps(spec: &GpuSpec) -> Vec<TokenStep> {
    let gemv = |k, n| decode::gemv_cost(GemmShape::new(1, n, k)).compulsory();
    let weights = LAYER_MATRICES
        .iter()
        .map(|&(k, n)| gemv(k, n))
        .fold(gemv(HIDDEN, VOCAB), |sum, c| {
            sum.plus(c.times(LAYERS as u64))
        });
    std::iter::successors(Some(1024u32), |c| Some(c * 2))
        .take_while(|&c| c <= 131072)
        .map(|context| {
            let shape = DecodeShape::new(1, 32, 8, context as usize);
            let splits = decode::auto_splits(&shape, context as usize);
            let layer = decode::attention_traffic(&shape, &[context], splits);
            let attention = layer.times(LAYERS as u64);
            TokenStep {
                context,
                weight_bytes: weights.bytes(),
                kv_bytes: LAYERS as u64 * decode::kv_bytes(&shape, &[context]),
                seconds: Roofline::modelled(&weights, spec).seconds
                    + Roofline::modelled(&attention, spec).seconds,
            }
        })
        .collect()
}

/// The bytes one generated token of Llama-3-8B reads at batch 1, weights against the KV cache,
/// as the context grows ([`token_steps`]).
fn bytes_per_token(spec: &GpuSpec) {
    let title = format!(
        "Llama-3-8B, one generated token at batch 1 (32 layers; GEMV for every projection and the LM head, split-KV attention over the cache), MODELLED on {} from the kernels' cost models:",
        spec.name
    );
    println!("\n{}", wrap(&title, NARROW));
    println!(
        "{:>8} {:>12} {:>12} {:>9} {:>12} {:>12}",
        "context", "weights", "KV cache", "KV share", "per token", "tokens/s"
    );
    for t in token_steps(spec) {
        let (w, kv) = (t.weight_bytes as f64, t.kv_bytes as f64);
        println!(
            "{:>8} {:>9.2} GB {:>9.2} GB {:>8.1}% {:>12} {:>12.0}",
            t.context,
            w / 1e9,
            kv / 1e9,
            100.0 * kv / (kv + w),
            duration(t.seconds),
            1.0 / t.seconds
        );
    }
}
