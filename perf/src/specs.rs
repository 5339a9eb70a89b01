//! Vendor figures for the GPUs the roofline is drawn for. Dense (no sparsity) peaks.
//!
//! This is the one table of published numbers in the project: the roofline calculator
//! (`cargo xtask roofline`), the cost models and the benchmarks all read it. Each row names its
//! sources in a comment: NVIDIA's datasheets (which quote tensor peaks *with* 2:4 sparsity, so
//! the dense figure here is half the datasheet's), the architecture whitepapers (A100, Hopper,
//! Blackwell), the DGX user guides and the CUDA programming guide's throughput table (16
//! `ex2`/clock/SM on compute capability 8.x, 9.0 and 10.0). Where NVIDIA publishes no figure
//! the field's comment says so.

use kernels::registry::ComputeUnit;
use serde::Serialize;

/// One GPU's published numbers.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct GpuSpec {
    /// Short name used on the command line (`h100`).
    pub key: &'static str,
    /// Full name.
    pub name: &'static str,
    /// The architecture ptxas assembles its machine code for (its compute capability, CUDA C++
    /// Programming Guide, "Compute Capabilities"): `sm_80`, `sm_86`, `sm_90`, `sm_100`.
    pub arch: &'static str,
    /// Dense bf16 tensor-core peak, FLOP/s.
    pub bf16_flops: f64,
    /// Dense FP8 tensor-core peak, FLOP/s; `None` where the GPU has no FP8 tensor cores (A100).
    pub fp8_flops: Option<f64>,
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
    /// Register file per SM, bytes (64K 32-bit registers).
    pub registers_per_sm: f64,
    /// L1 cache and shared memory together per SM, bytes (one SRAM, split by the carve-out).
    pub l1_shared_per_sm: f64,
    /// Tensor memory per SM, bytes (Blackwell's accumulator store; 0 before it).
    pub tensor_memory_per_sm: f64,
    /// Shared-memory bandwidth per SM, bytes per clock (32 banks x 4 bytes).
    pub shared_bytes_per_clock: f64,
    /// Maximum boost clock of the SMs, Hz: the clock shared-memory bandwidth, the f32 peak and
    /// the exponential roof are quoted at. The tensor peaks are quoted at a lower clock (H100:
    /// 4096 x 132 x 1.83 GHz = 989.5 TFLOP/s; see [`GpuSpec::tensor_clock_hz`]), so
    /// `tensor_flops_per_clock_per_sm x sms x boost_clock_hz` overstates them (1.07 PFLOP/s).
    pub boost_clock_hz: f64,
    /// Dense 16-bit tensor-core FLOPs per clock per SM.
    pub tensor_flops_per_clock_per_sm: f64,
    /// Exponentials (`ex2`, special function units) per clock per SM.
    pub exp_per_clock_per_sm: f64,
    /// NVLink bandwidth per direction, bytes/s (NVIDIA quotes the sum of both directions).
    pub nvlink_bandwidth: f64,
    /// Host link (PCIe) bandwidth per direction, bytes/s.
    pub pcie_bandwidth: f64,
    /// Network bandwidth per GPU (one NIC port per GPU in NVIDIA's DGX systems), bytes/s.
    pub network_bandwidth: f64,
}

const GB: f64 = 1e9;
const TB: f64 = 1e12;
const KIB: f64 = 1024.0;
const MIB: f64 = 1024.0 * 1024.0;
/// A network port's bits per second, as bytes per second.
const GBIT: f64 = 1e9 / 8.0;

/// The table, oldest first.
pub const GPUS: [GpuSpec; 4] = [
    // NVIDIA A100 datasheet (SXM 80GB: 312 TFLOP/s bf16 dense, 19.5 f32, 2,039 GB/s, NVLink
    // 600 GB/s, PCIe Gen4 64 GB/s, both directions summed) and the Ampere whitepaper (108 SMs,
    // 164 KB shared of 192 KB L1 per SM, 40 MB L2, 1.41 GHz boost).
    GpuSpec {
        key: "a100",
        name: "A100 SXM 80GB",
        arch: "sm_80",
        bf16_flops: 312.0 * TB,
        fp8_flops: None,
        f32_flops: 19.5 * TB,
        hbm_bandwidth: 2.039 * TB,
        hbm_bytes: 80.0 * GB,
        sms: 108,
        shared_per_sm: 164.0 * KIB,
        l2_bytes: 40.0 * MIB,
        registers_per_sm: 256.0 * KIB,
        l1_shared_per_sm: 192.0 * KIB,
        tensor_memory_per_sm: 0.0,
        shared_bytes_per_clock: 128.0,
        boost_clock_hz: 1.41e9,
        tensor_flops_per_clock_per_sm: 2048.0,
        exp_per_clock_per_sm: 16.0,
        nvlink_bandwidth: 300.0 * GB,
        pcie_bandwidth: 32.0 * GB,
        network_bandwidth: 200.0 * GBIT,
    },
    // NVIDIA H100 datasheet (SXM: bf16 1,979 and FP8 3,958 TFLOP/s *with sparsity*, so 989.5
    // and 1,979 dense; 67 TFLOP/s f32; 80 GB at 3.35 TB/s; NVLink 900 GB/s and PCIe Gen5 128 GB/s,
    // both directions summed) and the Hopper whitepaper (132 SMs, 228 KB shared of 256 KB L1 per
    // SM, 50 MB L2, 1.98 GHz boost for the CUDA cores, 1.83 GHz behind the tensor peak).
    GpuSpec {
        key: "h100",
        name: "H100 SXM",
        arch: "sm_90",
        bf16_flops: 989.5 * TB,
        fp8_flops: Some(1979.0 * TB),
        f32_flops: 67.0 * TB,
        hbm_bandwidth: 3.35 * TB,
        hbm_bytes: 80.0 * GB,
        sms: 132,
        shared_per_sm: 228.0 * KIB,
        l2_bytes: 50.0 * MIB,
        registers_per_sm: 256.0 * KIB,
        l1_shared_per_sm: 256.0 * KIB,
        tensor_memory_per_sm: 0.0,
        shared_bytes_per_clock: 128.0,
        boost_clock_hz: 1.98e9,
        tensor_flops_per_clock_per_sm: 4096.0,
        exp_per_clock_per_sm: 16.0,
        nvlink_bandwidth: 450.0 * GB,
        pcie_bandwidth: 64.0 * GB,
        network_bandwidth: 400.0 * GBIT,
    },
    // NVIDIA H200 datasheet (SXM: the H100's compute, quoted with sparsity like it; 141 GB at
    // 4.8 TB/s; NVLink 900 GB/s, PCIe Gen5 128 GB/s, both directions summed). Same GH100 SM.
    GpuSpec {
        key: "h200",
        name: "H200 SXM",
        arch: "sm_90",
        bf16_flops: 989.5 * TB,
        fp8_flops: Some(1979.0 * TB),
        f32_flops: 67.0 * TB,
        hbm_bandwidth: 4.8 * TB,
        hbm_bytes: 141.0 * GB,
        sms: 132,
        shared_per_sm: 228.0 * KIB,
        l2_bytes: 50.0 * MIB,
        registers_per_sm: 256.0 * KIB,
        l1_shared_per_sm: 256.0 * KIB,
        tensor_memory_per_sm: 0.0,
        shared_bytes_per_clock: 128.0,
        boost_clock_hz: 1.98e9,
        tensor_flops_per_clock_per_sm: 4096.0,
        exp_per_clock_per_sm: 16.0,
        nvlink_bandwidth: 450.0 * GB,
        pcie_bandwidth: 64.0 * GB,
        network_bandwidth: 400.0 * GBIT,
    },
    // NVIDIA HGX B200 datasheet (1,000 W: bf16 4.5 and FP8 9 PFLOP/s with sparsity, so 2.25 and
    // 4.5 dense; 80 TFLOP/s f32; 8 TB/s; NVLink 1.8 TB/s both directions summed) and the DGX
    // B200 user guide (1,440 GB over 8 GPUs: 180 GB each; the 192 GB of the launch material is
    // the HBM3e fitted, not what a program can allocate). 148 SMs and 126 MB of L2 are in no
    // datasheet: they are what the CUDA device query reports on a B200.
    GpuSpec {
        key: "b200",
        name: "B200",
        arch: "sm_100",
        bf16_flops: 2250.0 * TB,
        fp8_flops: Some(4500.0 * TB),
        f32_flops: 80.0 * TB,
        hbm_bandwidth: 8.0 * TB,
        hbm_bytes: 180.0 * GB,
        sms: 148,
        shared_per_sm: 228.0 * KIB,
        l2_bytes: 126.0 * MIB,
        registers_per_sm: 256.0 * KIB,
        l1_shared_per_sm: 256.0 * KIB,
        tensor_memory_per_sm: 256.0 * KIB,
        shared_bytes_per_clock: 128.0,
        // No NVIDIA datasheet figure; listings give 1.98 GHz boost (1.86 GHz tensor clock).
        boost_clock_hz: 1.98e9,
        tensor_flops_per_clock_per_sm: 8192.0,
        exp_per_clock_per_sm: 16.0,
        nvlink_bandwidth: 900.0 * GB,
        pcie_bandwidth: 64.0 * GB,
        network_bandwidth: 400.0 * GBIT,
    },
];

/// A workstation part many learners' numbers come from, outside the data-centre table above (the
/// roofline calculator's comparisons are over [`GPUS`]): NVIDIA RTX A6000 datasheet (84 SMs of
/// GA102, 48 GB GDDR6 at 768 GB/s, 38.7 TFLOP/s f32, 309.7 tensor TFLOP/s *with sparsity*, so
/// 154.8 dense with f32 accumulation; NVLink 112.5 GB/s both directions summed, PCIe Gen4 x16) and
/// the GA102 whitepaper (1.80 GHz boost, 6 MB L2, 128 KB L1 per SM of which up to 100 KB shared,
/// half of GA100's tensor rate per SM: 1024 dense 16-bit FLOPs per clock).
pub static RTX_A6000: GpuSpec = GpuSpec {
    key: "a6000",
    name: "RTX A6000",
    arch: "sm_86",
    bf16_flops: 154.8 * TB,
    fp8_flops: None,
    f32_flops: 38.7 * TB,
    hbm_bandwidth: 768.0 * GB,
    hbm_bytes: 48.0 * GB,
    sms: 84,
    shared_per_sm: 100.0 * KIB,
    l2_bytes: 6.0 * MIB,
    registers_per_sm: 256.0 * KIB,
    l1_shared_per_sm: 128.0 * KIB,
    tensor_memory_per_sm: 0.0,
    shared_bytes_per_clock: 128.0,
    boost_clock_hz: 1.80e9,
    tensor_flops_per_clock_per_sm: 1024.0,
    exp_per_clock_per_sm: 16.0,
    nvlink_bandwidth: 56.25 * GB,
    pcie_bandwidth: 32.0 * GB,
    network_bandwidth: 0.0,
};

impl GpuSpec {
    /// Whether machine code ptxas made for `arch` runs on this device: its own architecture, or
    /// the architecture-specific variant of it (`sm_90a` on an H100, whose `arch` is `sm_90`).
    pub fn runs_code_for(&self, arch: &str) -> bool {
        arch == self.arch || arch.strip_suffix('a') == Some(self.arch)
    }

    /// Looks a GPU up by key (`h100`) or by a device name that contains its key (`NVIDIA H200`):
    /// the data-centre table [`GPUS`], then [`RTX_A6000`].
    pub fn find(name: &str) -> Option<&'static GpuSpec> {
        let lower = name.to_ascii_lowercase();
        GPUS.iter()
            .chain(std::iter::once(&RTX_A6000))
            .find(|g| lower == g.key || lower.contains(g.key))
    }

    /// The peak for a kind of arithmetic.
    pub fn peak_flops(&self, unit: ComputeUnit) -> f64 {
        match unit {
            ComputeUnit::CudaCoreF32 => self.f32_flops,
            ComputeUnit::TensorCore16 => self.bf16_flops,
            // Without FP8 tensor cores, FP8 data is widened and multiplied at the 16-bit rate.
            ComputeUnit::TensorCore8 => self.fp8_flops.unwrap_or(self.bf16_flops),
        }
    }

    /// The SM clock the vendor's dense 16-bit tensor peak implies: `bf16_flops ÷ (tensor FLOPs
    /// per clock per SM × SMs)`, 1.83 GHz on an H100, below its 1.98 GHz boost clock.
    pub fn tensor_clock_hz(&self) -> f64 {
        self.bf16_flops / (self.tensor_flops_per_clock_per_sm * f64::from(self.sms))
    }

    /// Exponentials per second on the special function units: `ex2` per clock per SM × SMs ×
    /// boost clock. The third roof of attention and softmax (the roofline's exponential bound).
    pub fn exp_per_second(&self) -> f64 {
        self.exp_per_clock_per_sm * f64::from(self.sms) * self.boost_clock_hz
    }

    /// FLOPs per HBM byte at which a kernel of this kind of arithmetic stops being memory-bound.
    pub fn ridge(&self, unit: ComputeUnit) -> f64 {
        self.peak_flops(unit) / self.hbm_bandwidth
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An H100 runs sm_90 and sm_90a code, not sm_80's or sm_86's; an A6000 runs sm_86's only.
    #[test]
    fn a_device_runs_its_own_architecture_and_its_a_variant() {
        let (h100, a6000) = (
            GpuSpec::find("h100").unwrap(),
            GpuSpec::find("a6000").unwrap(),
        );
        assert!(h100.runs_code_for("sm_90") && h100.runs_code_for("sm_90a"));
        assert!(!h100.runs_code_for("sm_80") && !h100.runs_code_for("sm_100"));
        assert!(a6000.runs_code_for("sm_86") && !a6000.runs_code_for("sm_80"));
    }

    #[test]
    fn h100_ridge_is_the_teaching_materials_295() {
        let ridge = GpuSpec::find("h100")
            .unwrap()
            .ridge(ComputeUnit::TensorCore16);
        assert!((ridge - 295.4).abs() < 0.1, "{ridge}");
    }

    #[test]
    fn tensor_peaks_agree_with_per_clock_figures_within_the_boost_clock() {
        for g in GPUS.iter().chain([&RTX_A6000]) {
            let at_boost = g.tensor_flops_per_clock_per_sm * f64::from(g.sms) * g.boost_clock_hz;
            assert!(g.bf16_flops <= at_boost * 1.001, "{}", g.key);
            assert!(g.bf16_flops >= at_boost * 0.9, "{}", g.key);
        }
    }

    #[test]
    fn the_h100_tensor_peak_implies_1_83_ghz_and_the_sfus_4_2_tera_exp() {
        let h100 = GpuSpec::find("h100").unwrap();
        assert!((h100.tensor_clock_hz() - 1.830e9).abs() < 0.005e9);
        // 16 per clock x 132 SMs x 1.98 GHz.
        assert!((h100.exp_per_second() - 4.18e12).abs() < 0.01e12);
    }

    #[test]
    fn fp8_runs_at_the_16_bit_rate_without_fp8_tensor_cores() {
        let a100 = GpuSpec::find("a100").unwrap();
        assert_eq!(a100.peak_flops(ComputeUnit::TensorCore8), a100.bf16_flops);
        let h100 = GpuSpec::find("h100").unwrap();
        assert_eq!(h100.peak_flops(ComputeUnit::TensorCore8), 1979e12);
    }

    #[test]
    fn device_names_resolve() {
        assert_eq!(GpuSpec::find("NVIDIA H200").unwrap().key, "h200");
        assert!(GpuSpec::find("GeForce GTX 680").is_none());
    }
}
