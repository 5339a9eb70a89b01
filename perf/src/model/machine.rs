//! The per-SM and memory-system figures the performance model reads, for each device, each from a
//! specification, an NVIDIA guide or a published microbenchmark (never from the timing of a whole
//! kernel: the model is judged against those). [`SOURCES`] lists them for docs/model.md.
//!
//! What the vendor table ([`GpuSpec`]) already holds (SMs, clocks, HBM bandwidth, L2 size,
//! tensor, f32 and `ex2` peaks) is read from there; this file adds what a model needs beyond the
//! roofline: what each SM's memory pipeline and tensor instructions reach, how fast L2 and DRAM
//! stream in practice, their latencies, and what a launch costs.

use crate::occupancy::SmLimits;
use crate::specs::{GPUS, GpuSpec, RTX_A6000};

/// One device as the model sees it.
#[derive(Clone, Copy, Debug)]
pub struct Machine {
    pub spec: &'static GpuSpec,
    /// Resident threads, blocks, registers and shared memory per SM (occupancy).
    pub sm: SmLimits,
    /// Warp instructions the SM's schedulers issue per clock (one per scheduler).
    pub issue_per_clock: f64,
    /// Warp-wide memory instructions (global or shared) the SM's load/store units take per clock.
    pub lsu_per_clock: f64,
    /// Bytes per clock per SM through the L1/shared-memory data path: a shared-memory wavefront
    /// a clock (32 banks of 4 bytes), global requests served by L1 sharing it.
    pub l1_bytes_per_clock: f64,
    /// The least time the L1 takes for one warp-wide global request: 1 or 2 clocks (the sample
    /// holds both, `emu::sample::BlockTraffic::l1_quarters`; `emu::profile::l1_quarter_clocks`
    /// gives the rest: lines looked up, bank wavefronts).
    pub l1_clocks_per_request: usize,
    /// The fraction of the tensor peak that warp-level `mma.sync` reaches (1 where it is the
    /// native tensor-core instruction).
    pub mma_sync_fraction: f64,
    /// Whether the device has warpgroup `wgmma` (sm_90a).
    pub has_wgmma: bool,
    /// L2 bandwidth measured by a microbenchmark, bytes/s.
    pub l2_bandwidth: f64,
    /// The data set up to which L2 holds its bandwidth in that microbenchmark, bytes: what a
    /// kernel's reuse can count on (below the nominal size: the L2 is two partitions).
    pub l2_effective_bytes: f64,
    /// DRAM bandwidth a streaming kernel reaches, as a fraction of the datasheet's.
    pub dram_efficiency: f64,
    /// Load latencies at rest, SM clock cycles: L1 hit, L2 hit, DRAM.
    pub l1_latency_cycles: f64,
    pub l2_latency_cycles: f64,
    pub dram_latency_cycles: f64,
    /// Seconds one launch costs back to back in a stream, whatever its size.
    pub launch_seconds: f64,
}

impl Machine {
    /// The model's devices: A100, H100, H200, B200 and the RTX A6000.
    pub fn all() -> [Machine; 5] {
        let find = |k: &str| GPUS.iter().find(|g| g.key == k).expect("in the table");
        // What every Ampere, Hopper and Blackwell SM shares (see SOURCES): four schedulers, 32
        // load/store units, a 128-byte-per-clock L1/shared data path.
        let base = |spec: &'static GpuSpec, sm: SmLimits| Machine {
            spec,
            sm,
            issue_per_clock: 4.0,
            lsu_per_clock: 1.0,
            l1_bytes_per_clock: 128.0,
            l1_clocks_per_request: 1,
            mma_sync_fraction: 1.0,
            has_wgmma: false,
            l2_bandwidth: 0.0,
            l2_effective_bytes: spec.l2_bytes,
            dram_efficiency: 1.0,
            l1_latency_cycles: 0.0,
            l2_latency_cycles: 0.0,
            dram_latency_cycles: 0.0,
            launch_seconds: 0.0,
        };
        let ampere = |spec| Machine {
            l1_latency_cycles: 36.0,
            l2_latency_cycles: 211.0,
            dram_latency_cycles: 571.0,
            launch_seconds: 2.7e-6,
            ..base(spec, SmLimits::SM80)
        };
        let hopper = |spec| Machine {
            mma_sync_fraction: 0.63,
            has_wgmma: true,
            l2_bandwidth: 9.7e12,
            l2_effective_bytes: 44.0 * 1024.0 * 1024.0,
            dram_efficiency: 3.89 / 4.8,
            l1_latency_cycles: 34.0,
            l2_latency_cycles: 265.0,
            dram_latency_cycles: 650.0,
            launch_seconds: 2.5e-6,
            ..base(spec, SmLimits::SM90)
        };
        [
            Machine {
                l2_bandwidth: 5.4e12,
                l2_effective_bytes: 28.0 * 1024.0 * 1024.0,
                dram_efficiency: 1.88 / 2.039,
                ..ampere(find("a100"))
            },
            hopper(find("h100")),
            hopper(find("h200")),
            Machine {
                // Blackwell's native tensor instruction is tcgen05, not wgmma (sm_100 has no
                // wgmma); mma.sync is taken at Hopper's fraction of the peak.
                has_wgmma: false,
                l2_effective_bytes: find("b200").l2_bytes,
                l2_bandwidth: 9.7e12 * (148.0 / 132.0),
                ..hopper(find("b200"))
            },
            Machine {
                // GA102's L1 returns 64 bytes a clock to global loads: two clocks a request.
                l1_clocks_per_request: 2,
                l2_bandwidth: 2.43e12,
                dram_efficiency: 679.0 / 696.0,
                sm: SmLimits {
                    max_threads: 1536,
                    max_blocks: 16,
                    shared_bytes: 100 * 1024,
                    shared_per_block: 99 * 1024,
                    ..SmLimits::SM80
                },
                ..ampere(&RTX_A6000)
            },
        ]
    }

    /// The machine for a device key or name (`h100`, `NVIDIA H200`, `a6000`).
    pub fn find(name: &str) -> Option<Machine> {
        let spec = GpuSpec::find(name)?;
        Machine::all().into_iter().find(|m| m.spec.key == spec.key)
    }

    /// FP32 lanes per SM, from the datasheet's f32 peak (FMA counted as 2) at the boost clock:
    /// 64 on GA100, 128 on GA102, GH100 and Blackwell.
    pub fn fp32_lanes(&self) -> f64 {
        self.spec.f32_flops / (2.0 * f64::from(self.spec.sms) * self.spec.boost_clock_hz)
    }

    /// DRAM bandwidth a streaming kernel reaches, bytes/s.
    pub fn dram_bandwidth(&self) -> f64 {
        self.spec.hbm_bandwidth * self.dram_efficiency
    }
}

/// Where each figure of [`Machine::all`] comes from: (figure, devices, value, source).
pub const SOURCES: &[(&str, &str, &str, &str)] = &[
    (
        "SMs, clocks, HBM bandwidth, L2 size, tensor/f32/ex2 peaks",
        "all",
        "perf/src/specs.rs",
        "NVIDIA datasheets and architecture whitepapers (each row's comment there)",
    ),
    (
        "warp schedulers per SM (issue per clock)",
        "all",
        "4",
        "NVIDIA A100, H100 and GA102 whitepapers: four processing blocks per SM, one warp scheduler each",
    ),
    (
        "load/store units per SM",
        "all",
        "32 (one warp-wide memory instruction per clock)",
        "the same whitepapers: 8 LD/ST units per processing block",
    ),
    (
        "L1/shared data path per SM",
        "all",
        "128 B per clock (a shared-memory wavefront a clock)",
        "CUDA C++ Programming Guide, shared memory: 32 banks of 4 bytes per clock; te42kyfo/gpu-benches gpu-cache: V100, A100 and H100 reach close to 128 B/clock/SM from L1",
    ),
    (
        "L1 time of a global request",
        "all; least a request: a100, h100, h200, b200; a6000",
        "the longer of its 128-byte lines' lookups (the first a clock, then four a clock) and a load's bank wavefronts; at least 1; 2 clocks",
        "te42kyfo/gpu-benches gpu-strides (L1 hits, Nsight's tag-stage and data-stage wavefronts per instruction): a100.txt and h200.txt from stride 0 to 64 and over rows; a40.txt (GA102): 2 clocks for a coalesced f32 load, and gpu-cache a40.txt 9.35 TB/s from L1, 64 B/clock/SM at 84 SMs and 1.74 GHz; Blackwell assumed as Hopper",
    ),
    (
        "occupancy limits (threads, blocks, registers, shared memory per SM)",
        "all",
        "SmLimits::SM80 / SM90; GA102: 1536 threads, 16 blocks, 100 KiB",
        "CUDA C++ Programming Guide, table of technical specifications per compute capability (8.0, 8.6, 9.0)",
    ),
    (
        "mma.sync on Hopper",
        "h100, h200, b200",
        "63 % of the tensor peak",
        "Hazy Research, 'GPUs Go Brrr' (2024, ThunderKittens): without wgmma the H100 tops out at about 63 % of its tensor peak; Blackwell assumed the same (no published figure)",
    ),
    (
        "L2 bandwidth",
        "a100; h100, h200; b200; a6000",
        "5.4; 9.7; 10.9; 2.43 TB/s",
        "te42kyfo/gpu-benches gpu-l2-cache (a100_80.txt: 5.4 TB/s; h200.txt: 9.7 TB/s from 10 to 40 MB, the H100 SXM being the same GH100 at the same clocks); B200 scaled from the H200 by its SMs (no published figure); gpu-cache a40.txt: 2.43 TB/s past L1 on the A40, the same GA102 as the A6000",
    ),
    (
        "L2 capacity that holds its bandwidth",
        "a100; h100, h200",
        "28 MB; 44 MB",
        "gpu-benches gpu-l2-cache: the bandwidth falls past 28 MB (A100, 40 MB L2) and 44 MB (H200, 50 MB L2), where data can no longer be kept in both L2 partitions; nominal size elsewhere",
    ),
    (
        "DRAM bandwidth reached by a stream",
        "a100; h100, h200, b200; a6000",
        "92 %; 81 %; 97.6 % of the datasheet",
        "gpu-benches gpu-stream: a100_80.txt 1880 of 2039 GB/s; h200.txt 3898 of 4800 GB/s (H100 SXM and B200 assumed the same: no figure in the source); a40.txt 679 of 696 GB/s (GA102, GDDR6)",
    ),
    (
        "load latency: L1, L2, DRAM",
        "ampere; hopper, blackwell",
        "36, 211, 571 cycles; 34, 265, 650 cycles",
        "gpu-benches gpu-latency (pointer chase, one warp): a100_80.txt and h100_pcie.txt; GA102 and Blackwell assumed as GA100 and GH100",
    ),
    (
        "launch cost back to back",
        "ampere; hopper, blackwell",
        "2.7 µs; 2.5 µs",
        "gpu-benches gpu-small-kernels: a 64 kB SCALE kernel launched 10000 times reaches 24 GB/s (a100_80.txt) and 26 GB/s (h200.txt)",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_device_has_its_measured_figures() {
        for m in Machine::all() {
            assert!(m.l2_bandwidth > m.dram_bandwidth(), "{}", m.spec.key);
            assert!(m.dram_efficiency > 0.5 && m.dram_efficiency <= 1.0);
            assert!(m.l1_latency_cycles < m.l2_latency_cycles);
            assert!(m.l2_latency_cycles < m.dram_latency_cycles);
            assert!(m.launch_seconds > 1e-6);
            assert!(m.l2_effective_bytes <= m.spec.l2_bytes);
            assert!(
                (1..=2).contains(&m.l1_clocks_per_request),
                "the sample holds the L1's time at 1 and 2 clocks a request"
            );
        }
    }

    /// The lane counts the whitepapers give, recovered from the datasheets' f32 peaks.
    #[test]
    fn fp32_lanes_are_the_whitepapers() {
        let lanes = |k: &str| Machine::find(k).unwrap().fp32_lanes().round();
        assert_eq!(lanes("a100"), 64.0);
        assert_eq!(lanes("h100"), 128.0);
        assert_eq!(lanes("a6000"), 128.0);
    }

    /// docs/model.md's table of constants is this file's, row for row.
    #[test]
    fn the_chapter_lists_every_source() {
        let chapter = include_str!("../../../docs/model.md");
        for (figure, devices, value, source) in SOURCES {
            let row = format!("| {figure} | {devices} | {value} | {source} |");
            assert!(chapter.contains(&row), "docs/model.md lacks the row\n{row}");
        }
    }

    #[test]
    fn only_hopper_has_wgmma() {
        let keys: Vec<_> = Machine::all()
            .into_iter()
            .filter(|m| m.has_wgmma)
            .map(|m| m.spec.key)
            .collect();
        assert_eq!(keys, ["h100", "h200"]);
    }
}
