//! Cost models and the roofline: what a kernel must move and compute, and what a timing means.
//!
//! Every kernel declares a [`Cost`]: the bytes it must move across the HBM boundary, the FLOPs
//! it does and the exponentials it takes. The emulator's counters check the bytes and FLOPs
//! (tests/cost_models.rs), and a timing turns the cost into GB/s, TFLOP/s and a fraction of the
//! roofline bound `max(bytes / bandwidth, flops / peak, exponentials / exponential rate)`.
//!
//! The third roof is the special function units': 16 `ex2` per clock per SM on Ampere, Hopper
//! and Blackwell alike, while the tensor cores doubled twice. Softmax needs one exponential per
//! score whatever the head dimension, so attention with a small head dimension on a Blackwell
//! waits on its exponentials, not its matrix products (`cargo xtask roofline attention --seq 4096
//! --head-dim 64 --gpu b200`).

use serde::{Deserialize, Serialize};

use crate::specs::GpuSpec;

/// The project's one cost vocabulary, declared in `kernels` beside the specs that state it:
/// this module adds the roofline's arithmetic on it ([`CostRoofline`]).
pub use kernels::registry::{ComputeUnit, Cost};

/// The product of `factors`, saturating at `u64::MAX`.
///
/// Every cost and size helper counts with this and [`sum`]: a shape too large for any memory
/// gives `u64::MAX` (which no device has: the ops refuse the shape when they allocate or check
/// it), never a panic in a debug build or a wrapped small number in a release one.
pub fn product(factors: &[u64]) -> u64 {
    factors.iter().fold(1, |acc, &f| acc.saturating_mul(f))
}

/// The sum of `terms`, saturating at `u64::MAX` (see [`product`]).
pub fn sum(terms: &[u64]) -> u64 {
    terms.iter().fold(0, |acc, &t| acc.saturating_add(t))
}

/// [`product`] in `usize`, for element counts.
pub fn product_usize(factors: &[usize]) -> usize {
    factors.iter().fold(1, |acc, &f| acc.saturating_mul(f))
}

/// The roofline's arithmetic on a [`Cost`]: its bytes (read and written, as the cost states
/// them: pass the view a figure is about, [`Cost::compulsory`] or [`Cost::modelled`]) against
/// `gpu`'s HBM bandwidth, its FLOPs against the peak of its unit, its exponentials against the
/// special function units' rate. An extension trait: the cost is the kernels' vocabulary, the
/// device tables are this crate's.
pub trait CostRoofline {
    /// FLOPs per HBM byte.
    fn intensity(&self) -> f64;
    /// Seconds to move the bytes at `gpu`'s HBM bandwidth: the roofline's memory roof.
    fn memory_seconds(&self, gpu: &GpuSpec) -> f64;
    /// Seconds to do the FLOPs at `gpu`'s peak for this unit: the roofline's compute roof.
    fn compute_seconds(&self, gpu: &GpuSpec) -> f64;
    /// Seconds to take the exponentials at `gpu`'s special-function rate: the third roof.
    fn exp_seconds(&self, gpu: &GpuSpec) -> f64;
    /// The roofline's lower bound on the time: the slowest of the three roofs.
    fn bound_seconds(&self, gpu: &GpuSpec) -> f64;
    /// Which roof [`bound_seconds`](Self::bound_seconds) comes from. Memory against compute is
    /// the intensity against the ridge; the exponentials bind when their time is the longest.
    fn bound(&self, gpu: &GpuSpec) -> Bound;
}

impl CostRoofline for Cost {
    fn intensity(&self) -> f64 {
        self.flops as f64 / self.bytes().max(1) as f64
    }

    fn memory_seconds(&self, gpu: &GpuSpec) -> f64 {
        self.bytes() as f64 / gpu.hbm_bandwidth
    }

    fn compute_seconds(&self, gpu: &GpuSpec) -> f64 {
        self.flops as f64 / gpu.peak_flops(self.unit)
    }

    fn exp_seconds(&self, gpu: &GpuSpec) -> f64 {
        self.exps as f64 / gpu.exp_per_second()
    }

    fn bound_seconds(&self, gpu: &GpuSpec) -> f64 {
        self.memory_seconds(gpu)
            .max(self.compute_seconds(gpu))
            .max(self.exp_seconds(gpu))
    }

    fn bound(&self, gpu: &GpuSpec) -> Bound {
        if self.exp_seconds(gpu) > self.memory_seconds(gpu).max(self.compute_seconds(gpu)) {
            Bound::Exponential
        } else if self.intensity() < gpu.ridge(self.unit) {
            Bound::Memory
        } else {
            Bound::Compute
        }
    }
}

/// Which roof a kernel sits under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Bound {
    /// Intensity below the ridge: limited by HBM bandwidth.
    Memory,
    /// Intensity above the ridge: limited by arithmetic.
    Compute,
    /// Limited by the special function units' exponentials (softmax, attention).
    Exponential,
}

impl Bound {
    /// The name reports print.
    pub fn name(self) -> &'static str {
        match self {
            Bound::Memory => "memory",
            Bound::Compute => "compute",
            Bound::Exponential => "exponentials",
        }
    }
}

/// A timing (measured or modelled) read against the roofline of one device.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Roofline {
    /// Seconds per run.
    pub seconds: f64,
    /// Achieved HBM bandwidth, bytes/s.
    pub bytes_per_second: f64,
    /// Achieved FLOP/s.
    pub flops_per_second: f64,
    /// FLOPs per HBM byte.
    pub intensity: f64,
    /// Memory-, compute- or exponential-bound on this device.
    pub bound: Bound,
    /// The roofline's lower bound on the time.
    pub bound_seconds: f64,
    /// `bound_seconds / seconds`: 1.0 is on the roof.
    pub fraction_of_roofline: f64,
}

impl Roofline {
    /// Reads `seconds` for `cost` against `gpu`.
    pub fn new(cost: &Cost, gpu: &GpuSpec, seconds: f64) -> Self {
        let bound_seconds = cost.bound_seconds(gpu);
        Self {
            seconds,
            bytes_per_second: cost.bytes() as f64 / seconds,
            flops_per_second: cost.flops as f64 / seconds,
            intensity: cost.intensity(),
            bound: cost.bound(gpu),
            bound_seconds,
            fraction_of_roofline: bound_seconds / seconds,
        }
    }

    /// The modelled figure: the kernel running exactly at the roofline bound.
    pub fn modelled(cost: &Cost, gpu: &GpuSpec) -> Self {
        Self::new(cost, gpu, cost.bound_seconds(gpu))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> &'static GpuSpec {
        GpuSpec::find("h100").unwrap()
    }

    #[test]
    fn f16_add_is_memory_bound_at_a_sixth_of_a_flop_per_byte() {
        let n = 1 << 20;
        let cost = Cost {
            bytes_read: 4 * n,
            bytes_written: 2 * n,
            flops: n,
            exps: 0,
            unit: ComputeUnit::CudaCoreF32,
            ..Cost::NONE
        };
        assert!((cost.intensity() - 1.0 / 6.0).abs() < 1e-12);
        let r = Roofline::modelled(&cost, spec());
        assert_eq!(r.bound, Bound::Memory);
        assert!((r.bytes_per_second - spec().hbm_bandwidth).abs() < 1.0);
        assert!((r.fraction_of_roofline - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_run_twice_the_bound_is_half_the_roofline() {
        let cost = Cost {
            bytes_read: 1 << 30,
            bytes_written: 0,
            flops: 1 << 50,
            exps: 0,
            unit: ComputeUnit::TensorCore16,
            ..Cost::NONE
        };
        let bound = Roofline::modelled(&cost, spec());
        assert_eq!(bound.bound, Bound::Compute);
        let slow = Roofline::new(&cost, spec(), 2.0 * bound.seconds);
        assert!((slow.fraction_of_roofline - 0.5).abs() < 1e-12);
    }

    /// One head of attention at T = 4096: 4·T²·d FLOPs on the tensor cores and T² exponentials.
    /// Hopper has 4096 tensor FLOPs per clock per SM for 16 exponentials (256 to one), Blackwell
    /// 8192 (512 to one): at d = 64 (256 FLOPs per score) the exponentials bind on the B200.
    #[test]
    fn exponentials_bind_small_head_attention_on_blackwell_not_hopper() {
        let t = 4096u64;
        let attention = |d: u64| Cost {
            bytes_read: 3 * t * d * 2,
            bytes_written: t * d * 2,
            flops: 4 * t * t * d,
            exps: t * t,
            unit: ComputeUnit::TensorCore16,
            ..Cost::NONE
        };
        let b200 = GpuSpec::find("b200").unwrap();
        let r = Roofline::modelled(&attention(64), b200);
        assert_eq!(r.bound, Bound::Exponential);
        // 16.8 M exponentials at 16 x 148 x 1.98 GHz = 4.69 T/s.
        let exp_s = (t * t) as f64 / (16.0 * 148.0 * 1.98e9);
        assert!(
            (r.bound_seconds - exp_s).abs() < 1e-12,
            "{}",
            r.bound_seconds
        );
        assert_eq!(
            Roofline::modelled(&attention(128), b200).bound,
            Bound::Compute
        );
        assert_eq!(
            Roofline::modelled(&attention(64), spec()).bound,
            Bound::Compute
        );
        let no_exps = Cost {
            exps: 0,
            ..attention(64)
        };
        assert_eq!(Roofline::modelled(&no_exps, b200).bound, Bound::Compute);
    }
}
