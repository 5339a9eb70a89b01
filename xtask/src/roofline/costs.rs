//! The cost of each operation the teaching material prices: FLOPs and the bytes that cross the
//! HBM boundary, as a [`Cost`]. Pure functions on sizes; the roofline itself (time, bound) is
//! `perf::cost::Roofline`, never recomputed here.
//!
//! Conventions, the teaching material's:
//! - a matmul `[M, K] x [K, N]` does `2·M·K·N` FLOPs and moves `A` and `B` in and `C` out once;
//! - FLOPs are multiply-adds counted as 2; softmax counts 5 per element (max, subtract, exp, sum,
//!   divide) and RMSNorm 4 (square, sum, scale by the reciprocal root, scale by the weight);
//! - attention's FLOPs are its two matmuls, `4·T²·d` per head;
//! - exponentials are counted apart (they have their own roof, the special function units'):
//!   one per softmax element, so one per attention score.

use perf::cost::{Bound, ComputeUnit, Cost, Roofline};
use perf::specs::GpuSpec;

/// Element type: how many bytes a number takes, and which units multiply it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Dtype {
    Bf16,
    F16,
    F32,
    Fp8,
}

impl Dtype {
    /// Bytes per element.
    pub fn bytes(self) -> u64 {
        match self {
            Dtype::Fp8 => 1,
            Dtype::Bf16 | Dtype::F16 => 2,
            Dtype::F32 => 4,
        }
    }

    /// The name printed in reports.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Bf16 => "bf16",
            Dtype::F16 => "f16",
            Dtype::F32 => "f32",
            Dtype::Fp8 => "fp8",
        }
    }

    /// Where a matmul in this type runs: tensor cores for 16- and 8-bit, CUDA cores for f32.
    pub fn matmul_unit(self) -> ComputeUnit {
        match self {
            Dtype::Bf16 | Dtype::F16 => ComputeUnit::TensorCore16,
            Dtype::Fp8 => ComputeUnit::TensorCore8,
            Dtype::F32 => ComputeUnit::CudaCoreF32,
        }
    }
}

/// How a kind of arithmetic is named in reports.
pub fn unit_name(unit: ComputeUnit) -> &'static str {
    match unit {
        ComputeUnit::CudaCoreF32 => "CUDA cores, f32",
        ComputeUnit::TensorCore16 => "tensor cores, 16-bit",
        ComputeUnit::TensorCore8 => "tensor cores, FP8",
    }
}

/// The product of `factors`, or an error saying the sizes are too large to count in 64 bits.
pub fn product(factors: &[u64]) -> Result<u64, String> {
    factors.iter().try_fold(1u64, |acc, &f| {
        acc.checked_mul(f)
            .ok_or_else(|| format!("sizes too large: {factors:?} overflows a 64-bit count"))
    })
}

fn sum(terms: &[u64]) -> Result<u64, String> {
    terms.iter().try_fold(0u64, |acc, &t| {
        acc.checked_add(t)
            .ok_or_else(|| "sizes too large: a byte count overflows 64 bits".to_string())
    })
}

/// `n` launches of `cost` (e.g. one per head).
pub fn times(cost: Cost, n: u64) -> Result<Cost, String> {
    Ok(Cost {
        bytes_read: product(&[cost.bytes_read, n])?,
        bytes_written: product(&[cost.bytes_written, n])?,
        flops: product(&[cost.flops, n])?,
        exps: product(&[cost.exps, n])?,
        unit: cost.unit,
        ..Cost::NONE
    })
}

/// `[M, K] x [K, N]`: read `A` and `B`, write `C`, `2·M·K·N` FLOPs.
pub fn matmul(m: u64, k: u64, n: u64, dtype: Dtype) -> Result<Cost, String> {
    let b = dtype.bytes();
    Ok(Cost {
        bytes_read: sum(&[product(&[b, m, k])?, product(&[b, k, n])?])?,
        bytes_written: product(&[b, m, n])?,
        flops: product(&[2, m, k, n])?,
        exps: 0,
        unit: dtype.matmul_unit(),
        ..Cost::NONE
    })
}

/// FLOPs per element of a row softmax: max, subtract, exp, sum, divide.
pub const SOFTMAX_FLOPS_PER_ELEMENT: u64 = 5;
/// FLOPs per element of RMSNorm: square, sum, scale by 1/rms, scale by the weight.
pub const RMSNORM_FLOPS_PER_ELEMENT: u64 = 4;

/// Row softmax over `[rows, cols]` in one fused pass: read the matrix once, write it once.
pub fn softmax(rows: u64, cols: u64, dtype: Dtype, unit: ComputeUnit) -> Result<Cost, String> {
    let matrix = product(&[dtype.bytes(), rows, cols])?;
    Ok(Cost {
        bytes_read: matrix,
        bytes_written: matrix,
        flops: product(&[SOFTMAX_FLOPS_PER_ELEMENT, rows, cols])?,
        exps: product(&[rows, cols])?,
        unit,
        ..Cost::NONE
    })
}

/// RMSNorm over `[rows, cols]` in one pass: read the matrix and the `cols` weights, write once.
pub fn rmsnorm(rows: u64, cols: u64, dtype: Dtype, unit: ComputeUnit) -> Result<Cost, String> {
    let matrix = product(&[dtype.bytes(), rows, cols])?;
    Ok(Cost {
        bytes_read: sum(&[matrix, product(&[dtype.bytes(), cols])?])?,
        bytes_written: matrix,
        flops: product(&[RMSNORM_FLOPS_PER_ELEMENT, rows, cols])?,
        exps: 0,
        unit,
        ..Cost::NONE
    })
}

/// One attention head over `T` tokens of head dimension `d`, two ways.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Attention {
    /// Bytes of one of Q, K, V, O: `T·d` elements.
    pub tensor_bytes: u64,
    /// Bytes of one `T x T` matrix (S or P).
    pub score_bytes: u64,
    /// Three kernels: `S = QKᵀ` written, read by softmax, `P` written, read by `PV`.
    pub naive: Cost,
    /// One kernel: Q, K, V read once, O written once; S and P stay on chip.
    pub fused: Cost,
}

/// Attention traffic for one head. Causal masking halves the fused kernel's FLOPs (it skips
/// the masked tiles: `T(T+1)/2` scores); the naive kernels compute the full matrices and mask.
pub fn attention(t: u64, d: u64, dtype: Dtype, causal: bool) -> Result<Attention, String> {
    let tensor_bytes = product(&[dtype.bytes(), t, d])?;
    let score_bytes = product(&[dtype.bytes(), t, t])?;
    let full_flops = product(&[4, t, t, d])?;
    let fused_flops = if causal {
        product(&[2, d, t, t + 1])?
    } else {
        full_flops
    };
    // One exponential per score the fused kernel computes: T² or, causal, T(T+1)/2. The
    // per-row rescale exp(m_old - m_new), one per row per key tile, is left out (1/64 of it).
    let fused_exps = fused_flops / product(&[4, d])?;
    let unit = dtype.matmul_unit();
    Ok(Attention {
        tensor_bytes,
        score_bytes,
        naive: Cost {
            // Q, K; S; P, V.
            bytes_read: sum(&[product(&[3, tensor_bytes])?, score_bytes, score_bytes])?,
            // S; P; O.
            bytes_written: sum(&[score_bytes, score_bytes, tensor_bytes])?,
            flops: full_flops,
            // The softmax exponentiates all of S, masked scores included.
            exps: product(&[t, t])?,
            unit,
            ..Cost::NONE
        },
        fused: Cost {
            bytes_read: product(&[3, tensor_bytes])?,
            bytes_written: tensor_bytes,
            flops: fused_flops,
            exps: fused_exps,
            unit,
            ..Cost::NONE
        },
    })
}

/// One decode step at batch `batch`: every weight read once, `2·params` FLOPs per token.
/// The KV cache is left out (see `kv-cache`).
pub fn decode(params: u64, batch: u64, dtype: Dtype) -> Result<Cost, String> {
    Ok(Cost {
        bytes_read: product(&[params, dtype.bytes()])?,
        bytes_written: 0,
        flops: product(&[2, params, batch])?,
        exps: 0,
        unit: dtype.matmul_unit(),
        ..Cost::NONE
    })
}

/// KV-cache bytes one token adds: K and V, in every layer, for every KV head.
pub fn kv_bytes_per_token(
    layers: u64,
    kv_heads: u64,
    head_dim: u64,
    dtype: Dtype,
) -> Result<u64, String> {
    product(&[2, layers, kv_heads, head_dim, dtype.bytes()])
}

/// The on-chip working set of one FlashAttention step: a tile of `tile` queries against a tile
/// of `kv_tile` keys and values, with its score tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashTile {
    pub q: u64,
    pub k: u64,
    pub v: u64,
    pub scores: u64,
}

impl FlashTile {
    pub fn new(tile: u64, kv_tile: u64, head_dim: u64, dtype: Dtype) -> Result<Self, String> {
        let b = dtype.bytes();
        Ok(Self {
            q: product(&[tile, head_dim, b])?,
            k: product(&[kv_tile, head_dim, b])?,
            v: product(&[kv_tile, head_dim, b])?,
            scores: product(&[tile, kv_tile, b])?,
        })
    }

    /// Q, K and V tiles: what sits in shared memory.
    pub fn qkv(&self) -> u64 {
        self.q + self.k + self.v
    }

    /// With the score tile (held in registers or shared memory).
    pub fn total(&self) -> u64 {
        self.qkv() + self.scores
    }
}

/// A weight matrix `[K, N]` that every token is multiplied by, `count` times per forward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WeightMatmul {
    pub name: &'static str,
    pub k: u64,
    pub n: u64,
    pub count: u64,
}

/// The shapes of a decoder-only transformer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelShape {
    pub hidden: u64,
    pub mlp: u64,
    pub layers: u64,
    pub vocab: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    /// Gated MLP (SwiGLU): gate, up and down matrices; otherwise up and down.
    pub gated: bool,
}

impl ModelShape {
    /// Every weight matmul of one forward pass: per layer the Q, K, V, O projections and the
    /// MLP, then the unembedding. Not matmuls against weights, so left out: the embedding lookup,
    /// attention's `QKᵀ` and `PV`, norms and activations.
    pub fn matmuls(&self) -> Vec<WeightMatmul> {
        let (c, l) = (self.hidden, self.layers);
        let q = self.heads * self.head_dim;
        let kv = self.kv_heads * self.head_dim;
        let mut mats = vec![
            WeightMatmul {
                name: "attention Q",
                k: c,
                n: q,
                count: l,
            },
            WeightMatmul {
                name: "attention K",
                k: c,
                n: kv,
                count: l,
            },
            WeightMatmul {
                name: "attention V",
                k: c,
                n: kv,
                count: l,
            },
            WeightMatmul {
                name: "attention O",
                k: q,
                n: c,
                count: l,
            },
        ];
        if self.gated {
            mats.push(WeightMatmul {
                name: "MLP gate",
                k: c,
                n: self.mlp,
                count: l,
            });
        }
        mats.push(WeightMatmul {
            name: "MLP up",
            k: c,
            n: self.mlp,
            count: l,
        });
        mats.push(WeightMatmul {
            name: "MLP down",
            k: self.mlp,
            n: c,
            count: l,
        });
        mats.push(WeightMatmul {
            name: "unembedding",
            k: c,
            n: self.vocab,
            count: 1,
        });
        mats
    }
}

/// Weight parameters in `mats`.
pub fn weight_params(mats: &[WeightMatmul]) -> Result<u64, String> {
    let each: Result<Vec<u64>, String> =
        mats.iter().map(|w| product(&[w.k, w.n, w.count])).collect();
    sum(&each?)
}

/// `M` tokens through every matmul in `mats`: the sum of their costs.
pub fn matmuls_cost(mats: &[WeightMatmul], m: u64, dtype: Dtype) -> Result<Cost, String> {
    let mut total = Cost {
        bytes_read: 0,
        bytes_written: 0,
        flops: 0,
        exps: 0,
        unit: dtype.matmul_unit(),
        ..Cost::NONE
    };
    for w in mats {
        total = total.plus(times(matmul(m, w.k, w.n, dtype)?, w.count)?);
    }
    Ok(total)
}

/// The intensity `M` tokens through `mats` tends to as `M` grows: `2·ΣKN / (b·Σ(K+N))`, the
/// weights read once against activations that grow with `M`.
pub fn intensity_limit(mats: &[WeightMatmul], dtype: Dtype) -> f64 {
    // In f64: the products of 32-bit-sized dimensions overflow 64-bit integers.
    let kn: f64 = mats
        .iter()
        .map(|w| w.k as f64 * w.n as f64 * w.count as f64)
        .sum();
    let edges: f64 = mats
        .iter()
        .map(|w| (w.k as f64 + w.n as f64) * w.count as f64)
        .sum();
    2.0 * kn / (dtype.bytes() as f64 * edges)
}

/// The smallest batch `M` at which `M` tokens through `mats` are compute-bound on `gpu`, or
/// `None` when even the limit of large `M` is below the ridge. Intensity rises with `M`, so a
/// doubling search then a bisection on the roofline's own verdict finds it.
pub fn first_compute_bound_m(
    mats: &[WeightMatmul],
    dtype: Dtype,
    gpu: &GpuSpec,
) -> Result<Option<u64>, String> {
    if intensity_limit(mats, dtype) <= gpu.ridge(dtype.matmul_unit()) {
        return Ok(None);
    }
    let compute_bound = |m: u64| -> Result<bool, String> {
        let cost = matmuls_cost(mats, m, dtype)?;
        Ok(Roofline::modelled(&cost, gpu).bound == Bound::Compute)
    };
    let mut hi = 1u64;
    while !compute_bound(hi)? {
        hi = hi
            .checked_mul(2)
            .ok_or("no compute-bound batch below 2^64")?;
    }
    let mut lo = hi / 2; // memory-bound, or 0
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if compute_bound(mid)? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(Some(hi))
}

/// One step of a tiled matmul's K loop for an `Mt x Nt` output tile: read an `Mt x Kt` strip of
/// A and a `Kt x Nt` strip of B, do `2·Mt·Nt·Kt` FLOPs. Its intensity, `2·Mt·Nt / (b·(Mt+Nt))`,
/// is the tile's intensity at the HBM boundary whatever `Kt` is (`Mt·Nt/(Mt+Nt)` in bf16).
pub fn tile_step(mt: u64, nt: u64, kt: u64, dtype: Dtype) -> Result<Cost, String> {
    let b = dtype.bytes();
    Ok(Cost {
        bytes_read: sum(&[product(&[mt, kt, b])?, product(&[kt, nt, b])?])?,
        bytes_written: 0,
        flops: product(&[2, mt, nt, kt])?,
        exps: 0,
        unit: dtype.matmul_unit(),
        ..Cost::NONE
    })
}

/// One SM's fair share of a GPU: HBM bandwidth and every peak divided by the SM count.
pub fn sm_share(gpu: &GpuSpec) -> GpuSpec {
    let sms = f64::from(gpu.sms);
    GpuSpec {
        hbm_bandwidth: gpu.hbm_bandwidth / sms,
        bf16_flops: gpu.bf16_flops / sms,
        fp8_flops: gpu.fp8_flops.map(|f| f / sms),
        f32_flops: gpu.f32_flops / sms,
        sms: 1,
        ..*gpu
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perf::cost::CostRoofline;

    #[test]
    fn matmul_counts_each_operand_once() {
        let c = matmul(2, 3, 4, Dtype::F32).unwrap();
        assert_eq!(c.flops, 2 * 2 * 3 * 4);
        assert_eq!(c.bytes_read, 4 * (2 * 3 + 3 * 4));
        assert_eq!(c.bytes_written, 4 * 2 * 4);
        assert_eq!(c.unit, ComputeUnit::CudaCoreF32);
        assert_eq!(
            matmul(1, 1, 1, Dtype::Fp8).unwrap().unit,
            ComputeUnit::TensorCore8
        );
    }

    #[test]
    fn overflow_is_an_error_not_a_wrap() {
        let err = matmul(1 << 30, 1 << 30, 1 << 30, Dtype::Bf16).unwrap_err();
        assert!(err.contains("too large"), "{err}");
    }

    #[test]
    fn causal_attention_halves_only_the_fused_flops() {
        let full = attention(1024, 64, Dtype::Bf16, false).unwrap();
        let causal = attention(1024, 64, Dtype::Bf16, true).unwrap();
        assert_eq!(causal.naive, full.naive);
        assert_eq!(causal.fused.flops, 2 * 64 * 1024 * 1025);
        assert_eq!(causal.fused.bytes(), full.fused.bytes());
        // One exponential per score: all of S for naive, the visible half for causal fused.
        assert_eq!(full.naive.exps, 1024 * 1024);
        assert_eq!(full.fused.exps, 1024 * 1024);
        assert_eq!(causal.naive.exps, 1024 * 1024);
        assert_eq!(causal.fused.exps, 1024 * 1025 / 2);
    }

    #[test]
    fn plain_mlp_has_two_matrices_and_gated_three() {
        let mut shape = ModelShape {
            hidden: 8,
            mlp: 32,
            layers: 2,
            vocab: 100,
            heads: 2,
            kv_heads: 1,
            head_dim: 4,
            gated: true,
        };
        let gated = weight_params(&shape.matmuls()).unwrap();
        shape.gated = false;
        let plain = weight_params(&shape.matmuls()).unwrap();
        assert_eq!(gated - plain, 2 * 8 * 32);
        // Q 8x8, K 8x4, V 8x4, O 8x8, up 8x32, down 32x8, per layer; unembedding 8x100 once.
        assert_eq!(plain, 2 * (64 + 32 + 32 + 64 + 256 + 256) + 800);
    }

    #[test]
    fn the_first_compute_bound_batch_is_exact() {
        let gpu = GpuSpec::find("h100").unwrap();
        let w = [WeightMatmul {
            name: "w",
            k: 8192,
            n: 28672,
            count: 1,
        }];
        let m = first_compute_bound_m(&w, Dtype::Bf16, gpu)
            .unwrap()
            .unwrap();
        let ridge = gpu.ridge(ComputeUnit::TensorCore16);
        assert!(matmul(m, 8192, 28672, Dtype::Bf16).unwrap().intensity() >= ridge);
        assert!(matmul(m - 1, 8192, 28672, Dtype::Bf16).unwrap().intensity() < ridge);
        // A thin matrix never gets there: its limit, 2·K·N/(2·(K+N)), is below the ridge.
        let thin = [WeightMatmul {
            name: "w",
            k: 8192,
            n: 128,
            count: 1,
        }];
        assert_eq!(
            first_compute_bound_m(&thin, Dtype::Bf16, gpu).unwrap(),
            None
        );
    }

    #[test]
    fn an_sm_share_divides_rates_not_sizes() {
        let gpu = GpuSpec::find("h100").unwrap();
        let sm = sm_share(gpu);
        assert!((sm.hbm_bandwidth * 132.0 - gpu.hbm_bandwidth).abs() < 1.0);
        assert_eq!(sm.shared_per_sm, gpu.shared_per_sm);
        assert_eq!(
            sm.ridge(ComputeUnit::TensorCore16),
            gpu.ridge(ComputeUnit::TensorCore16)
        );
    }
}
