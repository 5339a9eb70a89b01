//! Vendor figures for the GPUs the roofline is drawn for. Dense (no sparsity) peaks.

use serde::Serialize;

/// One GPU's published numbers.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct GpuSpec {
    /// Short name used on the command line (`h100`).
    pub key: &'static str,
    /// Full name.
    pub name: &'static str,
    /// Dense bf16 tensor-core peak, FLOP/s.
    pub bf16_flops: f64,
    /// f32 peak on CUDA cores (FMA counted as 2), FLOP/s.
    pub f32_flops: f64,
    /// HBM bandwidth, bytes/s.
    pub hbm_bandwidth: f64,
    /// HBM capacity, bytes.
    pub hbm_bytes: f64,
    /// Streaming multiprocessors.
    pub sms: u32,
    /// Shared memory per SM, bytes (the largest carve-out).
    pub shared_per_sm: f64,
    /// L2 cache, bytes.
    pub l2_bytes: f64,
}

const GB: f64 = 1e9;
const TB: f64 = 1e12;
const KIB: f64 = 1024.0;
const MIB: f64 = 1024.0 * 1024.0;

/// The table, oldest first.
pub const GPUS: [GpuSpec; 4] = [
    GpuSpec {
        key: "a100",
        name: "A100 SXM 80GB",
        bf16_flops: 312.0 * TB,
        f32_flops: 19.5 * TB,
        hbm_bandwidth: 2.039 * TB,
        hbm_bytes: 80.0 * GB,
        sms: 108,
        shared_per_sm: 164.0 * KIB,
        l2_bytes: 40.0 * MIB,
    },
    GpuSpec {
        key: "h100",
        name: "H100 SXM",
        bf16_flops: 989.0 * TB,
        f32_flops: 67.0 * TB,
        hbm_bandwidth: 3.35 * TB,
        hbm_bytes: 80.0 * GB,
        sms: 132,
        shared_per_sm: 228.0 * KIB,
        l2_bytes: 50.0 * MIB,
    },
    GpuSpec {
        key: "h200",
        name: "H200 SXM",
        bf16_flops: 989.0 * TB,
        f32_flops: 67.0 * TB,
        hbm_bandwidth: 4.8 * TB,
        hbm_bytes: 141.0 * GB,
        sms: 132,
        shared_per_sm: 228.0 * KIB,
        l2_bytes: 50.0 * MIB,
    },
    GpuSpec {
        key: "b200",
        name: "B200",
        bf16_flops: 2250.0 * TB,
        f32_flops: 80.0 * TB,
        hbm_bandwidth: 8.0 * TB,
        hbm_bytes: 192.0 * GB,
        sms: 148,
        shared_per_sm: 228.0 * KIB,
        l2_bytes: 126.0 * MIB,
    },
];

impl GpuSpec {
    /// Looks a GPU up by key (`h100`) or by a device name that contains its key (`NVIDIA H200`).
    pub fn find(name: &str) -> Option<&'static GpuSpec> {
        let lower = name.to_ascii_lowercase();
        GPUS.iter()
            .find(|g| lower == g.key || lower.contains(g.key))
    }

    /// The peak for a kind of arithmetic.
    pub fn peak_flops(&self, unit: crate::cost::ComputeUnit) -> f64 {
        match unit {
            crate::cost::ComputeUnit::CudaCoreF32 => self.f32_flops,
            crate::cost::ComputeUnit::TensorCore16 => self.bf16_flops,
        }
    }

    /// FLOPs per HBM byte at which a kernel of this kind of arithmetic stops being memory-bound.
    pub fn ridge(&self, unit: crate::cost::ComputeUnit) -> f64 {
        self.peak_flops(unit) / self.hbm_bandwidth
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::ComputeUnit;

    #[test]
    fn h100_ridge_is_the_teaching_materials_295() {
        let ridge = GpuSpec::find("h100")
            .unwrap()
            .ridge(ComputeUnit::TensorCore16);
        assert!((ridge - 295.2).abs() < 0.1, "{ridge}");
    }

    #[test]
    fn device_names_resolve() {
        assert_eq!(GpuSpec::find("NVIDIA H200").unwrap().key, "h200");
        assert!(GpuSpec::find("GeForce GTX 680").is_none());
    }
}
