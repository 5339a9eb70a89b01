//! The performance model: one launch's predicted time on a named device, and the resource that
//! limits it, from what the emulator counted on a sample of the launch's blocks at the real shape
//! (`emu::sample`). It reads the emulator's counts and the device figures ([`Machine`]); neither
//! depends on it. docs/model.md gives the equations and the sources of every constant.
//!
//! Each resource's time is the work the launch gives it over its rate; the launch takes as long
//! as the slowest (perfect overlap of the rest), stretched by the last wave's idle SMs, plus the
//! launch's own cost:
//!
//! - **DRAM**: the bytes that miss L2 ([`dram_bytes`]) over the bandwidth a stream reaches;
//! - **L2**: the sectors that miss L1 (each block's distinct load sectors) and every store
//!   sector (L1 is write-through), over L2's measured bandwidth;
//! - **L1** and **shared wavefronts**: global sectors and shared-memory wavefronts through the
//!   SM's 128-byte-per-clock data path;
//! - **LSU issue**: warp-wide memory instructions, one per clock per SM;
//! - **FP32**, **tensor** (`mma.sync` at its fraction of the peak, `wgmma` at the peak), **MUFU**
//!   (`ex2`), and **issue** (all warp instructions, where the PTX backend counted them);
//! - **latency**: Little's law, when the resident warps cannot keep enough bytes in flight to
//!   reach DRAM bandwidth.

pub mod machine;

use serde::{Deserialize, Serialize};

pub use machine::{Machine, SOURCES};

use crate::emu::sample::{self, SampledLaunch};
use crate::launch::Dim3;
use crate::occupancy::{self, BlockResources};

/// What limits a launch: the resource whose time is the longest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Limiter {
    Dram,
    L2,
    L1,
    SharedWavefronts,
    LsuIssue,
    Fp32,
    Tensor,
    Mufu,
    Issue,
    Latency,
    Tail,
    Launch,
}

impl Limiter {
    /// The name reports print.
    pub fn name(self) -> &'static str {
        match self {
            Limiter::Dram => "DRAM",
            Limiter::L2 => "L2",
            Limiter::L1 => "L1",
            Limiter::SharedWavefronts => "shared wavefronts",
            Limiter::LsuIssue => "LSU issue",
            Limiter::Fp32 => "FP32",
            Limiter::Tensor => "tensor",
            Limiter::Mufu => "MUFU",
            Limiter::Issue => "issue",
            Limiter::Latency => "latency/occupancy",
            Limiter::Tail => "tail",
            Limiter::Launch => "launch",
        }
    }

    /// Whether the resource belongs to each SM (its time stretches with the last wave's idle
    /// SMs) rather than to the whole chip.
    fn per_sm(self) -> bool {
        !matches!(
            self,
            Limiter::Dram | Limiter::L2 | Limiter::Latency | Limiter::Tail | Limiter::Launch
        )
    }
}

/// What a compiled kernel uses per thread and block, from ptxas where it ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KernelResources {
    /// Registers per thread (`None`: not known; occupancy then ignores registers).
    pub registers: Option<u32>,
    /// Static shared memory per block, bytes.
    pub static_shared: u32,
}

/// One launch to predict: the emulator's sample of it, the kernel's resources, and optionally
/// the PTX backend's instruction counts for the whole grid.
pub struct LaunchInput<'a> {
    pub sample: &'a SampledLaunch,
    pub resources: KernelResources,
    /// Warp instructions over the whole grid (PTX backend), for the issue limit.
    pub warp_instructions: Option<f64>,
    /// Exponentials over the whole grid (`ex2`: the PTX backend's count, or the cost model's).
    pub exps: f64,
}

/// One resource's time.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Component {
    pub limiter: Limiter,
    pub seconds: f64,
}

/// The launch's totals over the whole grid, as the model estimated them from the sample.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Totals {
    pub load_requests: f64,
    pub load_sectors: f64,
    pub store_requests: f64,
    pub store_sectors: f64,
    pub shared_requests: f64,
    pub shared_wavefronts: f64,
    pub shared_ideal_wavefronts: f64,
    /// Global sectors and shared-memory bytes the asynchronous engines (TMA, wgmma) moved.
    pub engine_global_sectors: f64,
    pub engine_shared_bytes: f64,
    /// Bytes L1 misses send to L2 (loads) plus every stored sector.
    pub l2_bytes: f64,
    /// Bytes that miss L2.
    pub dram_bytes: f64,
    pub fp32_flops: f64,
    pub mma_flops: f64,
    pub wgmma_flops: f64,
    pub exps: f64,
    pub warp_instructions: Option<f64>,
}

/// A launch's prediction.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LaunchPrediction {
    pub kernel: String,
    pub seconds: f64,
    pub limiter: Limiter,
    /// Every resource's time, longest first.
    pub components: Vec<Component>,
    pub totals: Totals,
    /// Blocks resident per SM, and what limits them.
    pub blocks_per_sm: u32,
    pub occupancy_limiter: String,
    /// Waves of resident blocks the grid takes, and the factor the last one's idle SMs cost.
    pub waves: f64,
    pub tail_factor: f64,
    /// Blocks emulated, of the grid's.
    pub sampled_blocks: usize,
    pub grid_blocks: u64,
}

/// An operation's prediction: its launches in order.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Prediction {
    pub device: String,
    pub seconds: f64,
    /// The limiter of the launch that takes longest.
    pub limiter: Limiter,
    pub launches: Vec<LaunchPrediction>,
}

impl Prediction {
    /// The launches' predictions summed (they run one after another).
    pub fn of(machine: &Machine, launches: Vec<LaunchPrediction>) -> Option<Prediction> {
        let longest = launches
            .iter()
            .max_by(|a, b| a.seconds.total_cmp(&b.seconds))?;
        Some(Prediction {
            device: machine.spec.key.to_string(),
            seconds: launches.iter().map(|l| l.seconds).sum(),
            limiter: longest.limiter,
            launches,
        })
    }
}

/// Predicts one launch on `machine`, or says why it cannot run there.
pub fn predict_launch(machine: &Machine, input: &LaunchInput) -> Result<LaunchPrediction, String> {
    let s = input.sample;
    let cfg = s.config;
    let blocks = s.grid_blocks() as f64;
    let per_grid = |f: &dyn Fn(&sample::SampledBlock) -> f64| s.mean(f) * blocks;
    let t = |f: fn(&sample::BlockTraffic) -> u64| per_grid(&|b| f(&b.traffic) as f64);
    let c = |f: fn(&crate::emu::LaunchCounters) -> u64| per_grid(&|b| f(&b.counters) as f64);

    let wgmma_flops = c(|k| k.wgmma_flops);
    if wgmma_flops > 0.0 && !machine.has_wgmma {
        return Err(format!(
            "{} has no wgmma (sm_90a only): this kernel does not run there",
            machine.spec.name
        ));
    }
    let occupancy = occupancy::occupancy(
        &machine.sm,
        &BlockResources {
            threads: cfg.block.volume() as u32,
            registers: input.resources.registers.unwrap_or(0),
            shared_bytes: input.resources.static_shared + cfg.shared_mem_bytes,
        },
    )?;
    let sms = f64::from(machine.spec.sms);
    let resident = f64::from(occupancy.blocks) * sms;
    let waves = blocks / resident;
    let tail_factor = waves.ceil() / waves;

    let (mma_flops, all_flops) = (c(|k| k.mma_flops), c(|k| k.flops));
    let totals = Totals {
        load_requests: t(|b| b.load_requests),
        load_sectors: t(|b| b.load_sectors),
        store_requests: t(|b| b.store_requests),
        store_sectors: t(|b| b.store_sectors),
        shared_requests: t(|b| b.shared_requests),
        shared_wavefronts: t(|b| b.shared_wavefronts),
        shared_ideal_wavefronts: t(|b| b.shared_ideal_wavefronts),
        engine_global_sectors: t(|b| b.engine_global_sectors),
        engine_shared_bytes: t(|b| b.engine_shared_bytes),
        l2_bytes: per_grid(&|b| b.traffic.loaded_bytes() as f64) + t(|b| b.store_sectors) * 32.0,
        dram_bytes: dram_bytes(machine, s, occupancy.blocks),
        fp32_flops: (all_flops - mma_flops - wgmma_flops).max(0.0),
        mma_flops,
        wgmma_flops,
        exps: input.exps,
        warp_instructions: input.warp_instructions,
    };

    let clock = machine.spec.boost_clock_hz;
    let sm_cycles = |cycles: f64| cycles / (sms * clock);
    let tensor = machine.spec.bf16_flops;
    let global_sectors = totals.load_sectors + totals.store_sectors;
    let data_path = |bytes: f64| sm_cycles(bytes / machine.l1_bytes_per_clock);
    let mut components = vec![
        (Limiter::Dram, totals.dram_bytes / machine.dram_bandwidth()),
        (Limiter::L2, totals.l2_bytes / machine.l2_bandwidth),
        (Limiter::L1, data_path(global_sectors * 32.0)),
        (
            Limiter::SharedWavefronts,
            data_path(
                totals.shared_wavefronts * machine.l1_bytes_per_clock + totals.engine_shared_bytes,
            ),
        ),
        (
            Limiter::LsuIssue,
            sm_cycles(
                (totals.load_requests + totals.store_requests + totals.shared_requests)
                    / machine.lsu_per_clock,
            ),
        ),
        (
            Limiter::Fp32,
            sm_cycles(totals.fp32_flops / (2.0 * machine.fp32_lanes())),
        ),
        (
            Limiter::Tensor,
            totals.mma_flops / (tensor * machine.mma_sync_fraction) + totals.wgmma_flops / tensor,
        ),
        (
            Limiter::Mufu,
            sm_cycles(totals.exps / machine.spec.exp_per_clock_per_sm),
        ),
    ];
    if let Some(n) = totals.warp_instructions {
        components.push((Limiter::Issue, sm_cycles(n / machine.issue_per_clock)));
    }
    // Per-SM resources stretch by the last wave's idle SMs; chip-wide ones do not.
    for (limiter, seconds) in &mut components {
        if limiter.per_sm() {
            *seconds *= tail_factor;
        }
    }
    components.push((
        Limiter::Latency,
        latency_seconds(machine, s, &occupancy, totals.dram_bytes),
    ));
    // The first of equals wins: the memory levels are listed from DRAM inwards.
    let (mut limiter, busiest) =
        components
            .iter()
            .copied()
            .fold((Limiter::Dram, f64::MIN), |best, c| {
                if c.1 > best.1 { c } else { best }
            });
    // The last wave's idle SMs named when they cost more than a third of the time.
    if limiter.per_sm() && tail_factor >= 1.5 {
        limiter = Limiter::Tail;
    }
    if machine.launch_seconds > busiest {
        limiter = Limiter::Launch;
    }
    let seconds = busiest + machine.launch_seconds;
    components.push((Limiter::Launch, machine.launch_seconds));
    let mut components: Vec<Component> = components
        .into_iter()
        .map(|(limiter, seconds)| Component { limiter, seconds })
        .collect();
    components.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    Ok(LaunchPrediction {
        kernel: s.kernel.to_string(),
        seconds,
        limiter,
        components,
        totals,
        blocks_per_sm: occupancy.blocks,
        occupancy_limiter: occupancy.limiter_names(),
        waves,
        tail_factor,
        sampled_blocks: s.blocks.len(),
        grid_blocks: s.grid_blocks(),
    })
}

/// Bytes that miss L2: each allocation once (what the launch touches of it) while the data one
/// wave of resident blocks touches fits in L2's effective capacity, so that what the next wave
/// reuses is still there; otherwise every wave fetches its own data again.
///
/// The data of a wave, per allocation: the largest sampled block's slice times the number of
/// distinct slices among the wave's blocks. Along a grid dimension, two sampled blocks that
/// differ only there read either the same slice (the dimension does not matter: a GEMM's B along
/// the block rows), one slice inside the other (a causal mask's prefix of the same keys: the
/// union is the larger), or different slices (each block along it brings its own: A along the
/// block rows). With the anchor alone sampled, slices are taken as shared by the wave.
pub fn dram_bytes(machine: &Machine, s: &SampledLaunch, blocks_per_sm: u32) -> f64 {
    let grid = s.config.grid;
    let blocks = s.grid_blocks() as f64;
    let wave = (u64::from(blocks_per_sm) * u64::from(machine.spec.sms)).min(s.grid_blocks());
    let anchor = s.at_anchor();
    let mut touched = 0.0;
    let mut per_wave = 0.0;
    let sides: [Side; 2] = [|t| &t.loaded, |t| &t.stored];
    for side in sides {
        for (&a, slice) in side(&anchor.traffic) {
            let whole = s.allocations[a] as f64;
            let sectors_in =
                |b: &sample::SampledBlock| side(&b.traffic).get(&a).map_or(0, Vec::len);
            touched += (s.mean(|b| sectors_in(b) as f64 * 32.0) * blocks).min(whole);
            let largest = s.blocks.iter().map(sectors_in).max().unwrap_or(0) as f64 * 32.0;
            // The dimensions along which blocks bring slices of their own.
            let depends: Vec<usize> = (0..3)
                .filter(|&d| {
                    let Some(other) = s.get(sample::with(anchor.block, d, 0)) else {
                        return false;
                    };
                    if sample::extent(grid, d) <= 1 || other.block == anchor.block {
                        return false;
                    }
                    let theirs = side(&other.traffic).get(&a).map_or(&[][..], Vec::as_slice);
                    !(nested(slice, theirs) || nested(theirs, slice))
                })
                .collect();
            let distinct = distinct_slices(grid, wave, &depends) as f64;
            per_wave += (largest * distinct).min(whole);
        }
    }
    if per_wave <= machine.l2_effective_bytes {
        touched
    } else {
        (per_wave * blocks / wave as f64).max(touched)
    }
}

/// The loads or the stores of a block's traffic: per allocation, the sectors.
type Side = fn(&sample::BlockTraffic) -> &std::collections::BTreeMap<usize, Vec<u64>>;

/// Whether every element of the sorted `inner` is in the sorted `outer`.
fn nested(inner: &[u64], outer: &[u64]) -> bool {
    let mut o = outer.iter().peekable();
    inner.iter().all(|x| {
        while o.next_if(|y| *y < x).is_some() {}
        o.next_if_eq(&x).is_some()
    })
}

/// How many distinct values the coordinates `dims` take over the first `wave` blocks in launch
/// order (x fastest).
fn distinct_slices(grid: Dim3, wave: u64, dims: &[usize]) -> usize {
    let mut seen = std::collections::HashSet::new();
    for i in 0..wave {
        let b = [
            i % u64::from(grid.x),
            i / u64::from(grid.x) % u64::from(grid.y),
            i / (u64::from(grid.x) * u64::from(grid.y)),
        ];
        seen.insert(dims.iter().map(|&d| b[d]).collect::<Vec<_>>());
    }
    seen.len()
}

/// Little's law: the time to move `dram_bytes` when the resident warps keep too few bytes in
/// flight to cover DRAM latency. A warp's loads between two barriers are taken as all in flight
/// at once (optimistic for dependent loads, right for the tile and elementwise loads here).
fn latency_seconds(
    machine: &Machine,
    s: &SampledLaunch,
    occupancy: &occupancy::Occupancy,
    dram_bytes: f64,
) -> f64 {
    let in_flight_per_block = s.mean(|b: &sample::SampledBlock| {
        let loaded = b.traffic.load_sectors as f64 * 32.0;
        loaded / (b.counters.barriers as f64 + 1.0)
    });
    let in_flight = in_flight_per_block * f64::from(occupancy.blocks) * f64::from(machine.spec.sms);
    let latency = machine.dram_latency_cycles / machine.spec.boost_clock_hz;
    let reachable = in_flight / latency;
    // Only a shortfall is a limit of its own: with enough in flight, DRAM's own time stands.
    if reachable <= 0.0 || reachable >= machine.dram_bandwidth() {
        return 0.0;
    }
    dram_bytes / reachable
}
