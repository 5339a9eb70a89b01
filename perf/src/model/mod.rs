//! The performance model: one launch's predicted time on a named device, and the resource that
//! limits it, from what the emulator counted on a sample of the launch's blocks at the real shape
//! (`emu::sample`). It reads the emulator's counts and the device figures ([`Machine`]); neither
//! depends on it. docs/model.md gives the equations and the sources of every constant.
//!
//! Each resource's time is the work the launch gives it over its rate; the launch takes as long
//! as the slowest (perfect overlap of the rest, except the matmul + softmax term's sum),
//! stretched by the last wave's idle SMs, plus the launch's own cost:
//!
//! - **DRAM**: the bytes that miss L2 ([`dram_bytes`]) over the bandwidth a stream reaches;
//! - **L2**: the sectors that miss L1 (each block's distinct load sectors) and every store
//!   sector (L1 is write-through), over L2's measured bandwidth;
//! - **L1** or **shared wavefronts**: global requests (each the longer of its lines' lookups and
//!   its bank wavefronts, `emu::profile::l1_quarter_clocks`) and shared-memory wavefronts through
//!   the SM's one data path, the L1/shared SRAM (their sum, named after the larger part);
//! - **LSU issue**: warp-wide memory instructions, one per clock per SM;
//! - **FP32**, **tensor** (`mma.sync` at its fraction of the peak, `wgmma` at the peak), **MUFU**
//!   (`ex2`), and **issue** (all warp instructions, where the PTX backend counted them);
//! - **matmul + softmax**: in an attention launch on the tensor cores, the longer of the
//!   product's resources plus the longer of the softmax's, which wait for each other
//!   ([`serial_phases`]);
//! - **latency**: Little's law, when the resident warps cannot keep enough bytes in flight to
//!   reach DRAM bandwidth.

pub mod machine;
pub mod next;

use serde::{Deserialize, Serialize};

pub use machine::{Machine, SOURCES};
pub use next::{Advice, CostBytes, NextStep, next_step};

use crate::occupancy::{self, BlockResources};
use emu::Dim3;
use emu::sample::{self, SampledLaunch};

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
    /// A tensor-core product and the softmax of its scores, one after the other (their sum).
    Phases,
    Latency,
    Tail,
    Launch,
}

impl Limiter {
    /// Every limiter, memory levels from DRAM inwards, then the SM's pipes, then the rest.
    pub const ALL: [Limiter; 13] = [
        Limiter::Dram,
        Limiter::L2,
        Limiter::L1,
        Limiter::SharedWavefronts,
        Limiter::LsuIssue,
        Limiter::Fp32,
        Limiter::Tensor,
        Limiter::Mufu,
        Limiter::Issue,
        Limiter::Phases,
        Limiter::Latency,
        Limiter::Tail,
        Limiter::Launch,
    ];

    /// The name reports print.
    pub const fn name(self) -> &'static str {
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
            Limiter::Phases => "matmul + softmax",
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
    /// Of those, the ones that compute on a tensor-core product's result (`ptx::analysis::dataflow`):
    /// in attention, the softmax's share of the issue, the rest the products'.
    pub on_products: Option<f64>,
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
    /// Clocks of the L1's data path the global requests take.
    #[serde(default)]
    pub l1_clocks: f64,
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
    /// Of `warp_instructions`, those on a tensor-core product's result ([`LaunchInput`]).
    #[serde(default)]
    pub on_products: Option<f64>,
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
    /// Blocks emulated, of the grid's, and the device calls they made (0 when not counted).
    pub sampled_blocks: usize,
    pub grid_blocks: u64,
    #[serde(default)]
    pub sample_work: u64,
    /// The matmul + softmax term's two parts, (product, softmax), where it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<(f64, f64)>,
}

/// An operation's prediction: its launches in order.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Prediction {
    pub device: String,
    pub seconds: f64,
    /// The limiter of the launch that takes longest.
    pub limiter: Limiter,
    pub launches: Vec<LaunchPrediction>,
    /// The two shorter key lengths whose samples were extended to the case's, where its blocks
    /// were too long to emulate (`SampledLaunch::extended`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_from: Option<(usize, usize)>,
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
            extended_from: None,
        })
    }
}

/// What [`no_wgmma`] says, for a caller that tells that reason from the others.
pub const NO_WGMMA: &str = "has no wgmma (sm_90a only)";

/// Why a kernel with `wgmma` has no prediction on `machine` (the A100, the A6000, the B200).
pub fn no_wgmma(machine: &Machine) -> String {
    format!(
        "{} {NO_WGMMA}: this kernel does not run there",
        machine.spec.name
    )
}

/// Predicts one launch on `machine`, or says why it cannot run there.
pub fn predict_launch(machine: &Machine, input: &LaunchInput) -> Result<LaunchPrediction, String> {
    let s = input.sample;
    let cfg = s.config;
    let blocks = s.grid_blocks() as f64;
    let per_grid = |f: &dyn Fn(&sample::SampledBlock) -> f64| s.mean(f) * blocks;
    let t = |f: fn(&sample::BlockTraffic) -> u64| per_grid(&|b| f(&b.traffic) as f64);
    let c = |f: fn(&emu::LaunchCounters) -> u64| per_grid(&|b| f(&b.counters) as f64);

    let wgmma_flops = c(|k| k.wgmma_flops);
    if wgmma_flops > 0.0 && !machine.has_wgmma {
        return Err(no_wgmma(machine));
    }
    let occupancy = occupancy::occupancy(
        &machine.sm,
        &BlockResources {
            threads: cfg.block.volume() as u32,
            registers: input.resources.registers.unwrap_or(0),
            shared_bytes: input.resources.static_shared + cfg.dynamic_shared,
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
        l1_clocks: per_grid(&|b| {
            b.traffic.l1_quarters[machine.l1_clocks_per_request - 1] as f64 / 4.0
        }),
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
        on_products: input.on_products,
    };

    let clock = machine.spec.boost_clock_hz;
    let sm_cycles = |cycles: f64| cycles / (sms * clock);
    let tensor = machine.spec.bf16_flops;
    // Global requests served by L1 and shared-memory wavefronts go through one data path (the
    // unified L1/shared SRAM): its time is their sum, named after the larger part.
    let global_clocks = totals.l1_clocks;
    let shared_clocks =
        totals.shared_wavefronts + totals.engine_shared_bytes / machine.l1_bytes_per_clock;
    let data_path = sm_cycles(global_clocks + shared_clocks);
    let data_path_limiter = if shared_clocks >= global_clocks {
        Limiter::SharedWavefronts
    } else {
        Limiter::L1
    };
    let mut components = vec![
        (Limiter::Dram, totals.dram_bytes / machine.dram_bandwidth()),
        (Limiter::L2, totals.l2_bytes / machine.l2_bandwidth),
        (data_path_limiter, data_path),
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
    let issue = |n: f64| sm_cycles(n / machine.issue_per_clock);
    if let Some(n) = totals.warp_instructions {
        components.push((Limiter::Issue, issue(n)));
    }
    // The issue's split between the two phases: what computes on the products' results is the
    // softmax's, the rest (the products' own instructions, their operands' loads and addresses,
    // the loops) the products'.
    let split = totals.warp_instructions.map(|n| {
        let softmax = totals.on_products.unwrap_or(0.0).min(n);
        (issue(n - softmax), issue(softmax))
    });
    let phases = serial_phases(&components, &totals, split).map(|(p, s)| {
        components.push((Limiter::Phases, p + s));
        (p * tail_factor, s * tail_factor)
    });
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
        sample_work: s.work,
        phases,
    })
}

/// The time of a tensor-core launch with exponentials (attention) when its matrix products and
/// its softmax run one after the other on each SM: the longer of the product's resources (the
/// tensor cores and the L1/shared data path and load/store units that feed them) plus the
/// longer of the softmax's (MUFU, FP32). Where the instructions were counted (the PTX backend),
/// `issue` is the time to issue each phase's own, (products, softmax), and each phase takes at
/// least that: the warps issue the softmax's instructions while the tensor cores wait, as they
/// wait on MUFU. The two phases' times, (product, softmax); `None` for any other launch.
///
/// Why they do not overlap: each warp waits for its scores (an `mma.sync` is synchronous, the
/// wgmma kernel waits for its group) before it exponentiates them, and its next product waits
/// for those exponentials; the warps of a block start together and wait on the same barriers.
/// Pipes shared fairly among the warps that want them keep warps that start in step in step:
/// two that start a product together share the tensor cores, finish together and then share
/// MUFU. Only a kernel that staggers its warpgroups on purpose (FlashAttention-3's "ping-pong"
/// named barriers, which none here has) or overlaps one tile's softmax with the next tile's
/// product inside a warpgroup gets the overlap that the max of the two would assume.
fn serial_phases(
    components: &[(Limiter, f64)],
    totals: &Totals,
    issue: Option<(f64, f64)>,
) -> Option<(f64, f64)> {
    if totals.mma_flops + totals.wgmma_flops == 0.0 || totals.exps == 0.0 {
        return None;
    }
    let longest = |of: &[Limiter]| {
        components
            .iter()
            .filter(|c| of.contains(&c.0))
            .map(|c| c.1)
            .fold(0.0, f64::max)
    };
    let (product_issue, softmax_issue) = issue.unwrap_or_default();
    let product = longest(&[
        Limiter::Tensor,
        Limiter::SharedWavefronts,
        Limiter::L1,
        Limiter::LsuIssue,
    ])
    .max(product_issue);
    Some((
        product,
        longest(&[Limiter::Mufu, Limiter::Fp32]).max(softmax_issue),
    ))
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
/// block rows). With the anchor alone sampled, slices are taken as shared by the wave (whether
/// it fits L2), and as covering each allocation over the whole launch (what it touches).
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
            // What the whole launch touches: as a wave's, over every block, and no more than
            // the blocks' own bytes summed. With the anchor alone sampled nothing says which
            // blocks share a slice, so the launch is taken to touch as much of the allocation as
            // its blocks' bytes reach (the compulsory traffic: every output tile written once).
            let everywhere = if s.blocks.len() == 1 {
                blocks
            } else {
                distinct_slices(grid, s.grid_blocks(), &depends) as f64
            };
            let summed = s.mean(|b| sectors_in(b) as f64 * 32.0) * blocks;
            touched += (largest * everywhere).min(summed).min(whole);
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
    if wave >= grid.volume() {
        // Over the whole grid: the product of the dimensions' extents.
        return dims
            .iter()
            .map(|&d| sample::extent(grid, d) as usize)
            .product();
    }
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

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, VecDeque};

    use super::*;
    use emu::LaunchCounters;
    use emu::sample::{BlockTraffic, SampledBlock};
    use emu::{LaunchConfig, dim3};

    fn h100() -> Machine {
        Machine::find("h100").unwrap()
    }

    /// A launch of `grid` blocks of 256 threads whose block at `b` moves what `traffic` says,
    /// sampled as the emulator samples (the plan's blocks), or every block.
    fn launch(
        grid: Dim3,
        allocations: Vec<u64>,
        every: bool,
        traffic: impl Fn(Dim3) -> (LaunchCounters, BlockTraffic),
    ) -> SampledLaunch {
        let blocks: Vec<Dim3> = if every {
            (0..grid.z)
                .flat_map(|z| {
                    (0..grid.y).flat_map(move |y| (0..grid.x).map(move |x| dim3(x, y, z)))
                })
                .collect()
        } else {
            sample::plan(grid)
        };
        SampledLaunch {
            kernel: "synthetic",
            work: 0,
            config: LaunchConfig {
                grid,
                block: dim3(256, 1, 1),
                dynamic_shared: 0,
            },
            allocation_order: (0..allocations.len() as u64).collect(),
            allocations,
            blocks: blocks
                .into_iter()
                .map(|block| {
                    let (counters, traffic) = traffic(block);
                    SampledBlock {
                        block,
                        counters,
                        traffic,
                        machine: Vec::new(),
                    }
                })
                .collect(),
        }
    }

    fn predict(s: &SampledLaunch, machine: &Machine) -> LaunchPrediction {
        predict_with_exps(s, machine, 0.0)
    }

    /// [`predict`] with `exps` exponentials over the grid.
    fn predict_with_exps(s: &SampledLaunch, machine: &Machine, exps: f64) -> LaunchPrediction {
        predict_counted(s, machine, exps, None)
    }

    /// [`predict_with_exps`] with counted warp instructions, (all, on the products' results),
    /// as the PTX backend gives them.
    fn predict_counted(
        s: &SampledLaunch,
        machine: &Machine,
        exps: f64,
        instructions: Option<(f64, f64)>,
    ) -> LaunchPrediction {
        predict_launch(
            machine,
            &LaunchInput {
                sample: s,
                resources: KernelResources {
                    registers: Some(32),
                    static_shared: 0,
                },
                warp_instructions: instructions.map(|i| i.0),
                on_products: instructions.map(|i| i.1),
                exps,
            },
        )
        .unwrap()
    }

    /// `limiter`'s time in `p` (0 where it has none).
    fn seconds_of(p: &LaunchPrediction, limiter: Limiter) -> f64 {
        p.components
            .iter()
            .find(|c| c.limiter == limiter)
            .map_or(0.0, |c| c.seconds)
    }

    /// A stream: each block reads its own 8 KiB of one allocation with coalesced 128-byte
    /// requests and writes as much to another.
    fn stream(blocks: u32, stride_sectors: u64) -> SampledLaunch {
        let per_block = 256u64; // sectors: 8 KiB
        let n = u64::from(blocks) * per_block;
        launch(
            dim3(blocks, 1, 1),
            vec![n * 32 * stride_sectors, n * 32],
            false,
            |b| {
                let first = u64::from(b.x) * per_block;
                let mut t = BlockTraffic {
                    load_requests: per_block / 4,
                    load_sectors: per_block * stride_sectors,
                    store_requests: per_block / 4,
                    store_sectors: per_block,
                    ..BlockTraffic::default()
                };
                t.loaded.insert(
                    0,
                    (first * stride_sectors..(first + per_block) * stride_sectors).collect(),
                );
                t.stored.insert(1, (first..first + per_block).collect());
                // Eight barrier intervals: one 4-byte load per thread in flight at a time.
                let c = LaunchCounters {
                    barriers: 7,
                    ..LaunchCounters::default()
                };
                (c, t)
            },
        )
    }

    #[test]
    fn a_stream_is_dram_bound_at_the_measured_bandwidth() {
        let m = h100();
        let p = predict(&stream(64 * 1024, 1), &m);
        assert_eq!(p.limiter, Limiter::Dram);
        let bytes = 2.0 * 64.0 * 1024.0 * 8192.0;
        assert!(
            (p.totals.dram_bytes - bytes).abs() < 1.0,
            "{}",
            p.totals.dram_bytes
        );
        let want = bytes / m.dram_bandwidth() + m.launch_seconds;
        assert!((p.seconds - want).abs() < 1e-9, "{} vs {want}", p.seconds);
    }

    /// Reading every eighth sector (one 4-byte word per sector, say) moves 8 times the bytes.
    #[test]
    fn breaking_coalescing_multiplies_the_dram_time() {
        let m = h100();
        let coalesced = predict(&stream(64 * 1024, 1), &m);
        let strided = predict(&stream(64 * 1024, 8), &m);
        let ratio = strided.seconds / coalesced.seconds;
        // Reads 8x, writes 1x: (8 + 1) / (1 + 1).
        assert!((ratio - 4.5).abs() < 0.05, "{ratio}");
    }

    /// Shared-memory wavefronts: a 32-way conflict makes a shared-bound kernel 32 times longer
    /// in its shared-memory component.
    #[test]
    fn a_bank_conflict_costs_its_degree_in_wavefronts() {
        let m = h100();
        let shared = |degree: u64| {
            launch(dim3(4096, 1, 1), vec![1 << 20], false, move |_| {
                let t = BlockTraffic {
                    shared_requests: 1000,
                    shared_wavefronts: 1000 * degree,
                    shared_ideal_wavefronts: 1000,
                    ..BlockTraffic::default()
                };
                (LaunchCounters::default(), t)
            })
        };
        let (free, conflicted) = (predict(&shared(1), &m), predict(&shared(32), &m));
        assert_eq!(conflicted.limiter, Limiter::SharedWavefronts);
        let time = |p: &LaunchPrediction| seconds_of(p, Limiter::SharedWavefronts);
        assert!((time(&conflicted) / time(&free) - 32.0).abs() < 1e-6);
        // 4096 blocks x 32000 wavefronts, 132 SMs at 1.98 GHz, one per clock.
        let want =
            4096.0 * 32000.0 / 132.0 / 1.98e9 * (4096.0 / 1056.0f64).ceil() / (4096.0 / 1056.0);
        assert!(
            (time(&conflicted) - want).abs() < 1e-9,
            "{}",
            time(&conflicted)
        );
    }

    /// A tensor-core product and exponentials in one launch (attention) take the sum of the two
    /// phases' longest resources; the same work without exponentials (a GEMM), or exponentials
    /// on the CUDA cores alone, take the longest resource, as before.
    #[test]
    fn a_softmax_waits_for_its_product_and_the_product_for_it() {
        let m = h100();
        let with = |mma_flops: u64, shared_wavefronts: u64| {
            launch(dim3(1056, 1, 1), vec![1 << 20], false, move |_| {
                let c = LaunchCounters {
                    flops: mma_flops,
                    mma_flops,
                    ..LaunchCounters::default()
                };
                let t = BlockTraffic {
                    shared_requests: shared_wavefronts,
                    shared_wavefronts,
                    shared_ideal_wavefronts: shared_wavefronts,
                    ..BlockTraffic::default()
                };
                (c, t)
            })
        };
        let run = |s: &SampledLaunch, exps: f64| predict_with_exps(s, &m, exps);
        let time = seconds_of;
        // One wave of 1056 blocks (8 a SM), so the tail is 1; 2^27 exponentials: 1 ms of
        // the grid's MUFU (16 a clock a SM).
        let exps = 1000e-6 * 16.0 * 132.0 * 1.98e9;
        let attention = with(1 << 30, 1 << 16);
        let p = run(&attention, exps);
        assert_eq!(p.limiter, Limiter::Phases);
        let product = time(&p, Limiter::Tensor);
        assert!(product > time(&p, Limiter::SharedWavefronts));
        assert!((time(&p, Limiter::Mufu) - 1000e-6).abs() < 1e-9);
        assert!(
            (time(&p, Limiter::Phases) - (product + 1000e-6)).abs() < 1e-12,
            "{p:?}"
        );
        assert!((p.seconds - (product + 1000e-6 + m.launch_seconds)).abs() < 1e-12);
        // The product's longer resource is the data path when the shared loads outweigh it.
        let fed = run(&with(1 << 20, 1 << 24), exps);
        let wavefronts = time(&fed, Limiter::SharedWavefronts);
        assert!(wavefronts > time(&fed, Limiter::Tensor));
        assert!((time(&fed, Limiter::Phases) - (wavefronts + 1000e-6)).abs() < 1e-12);
        // Counted instructions (the PTX backend): each phase takes at least the time to issue
        // its own. The softmax's (on the products' results) 2 ms of issue outlast MUFU's 1 ms;
        // then the products' own outlast the tensor cores by 1 ms. All of them together take
        // no longer than the sum, which they never undercut.
        let issue_ms =
            |ms: f64| ms * 1e-3 * m.issue_per_clock * f64::from(m.spec.sms) * m.spec.boost_clock_hz;
        let counted = |all_ms: f64, softmax_ms: f64| {
            predict_counted(
                &attention,
                &m,
                exps,
                Some((issue_ms(all_ms), issue_ms(softmax_ms))),
            )
        };
        let slow_softmax = counted(2.0, 2.0);
        assert_eq!(slow_softmax.limiter, Limiter::Phases);
        assert!((time(&slow_softmax, Limiter::Issue) - 2e-3).abs() < 1e-9);
        assert!((time(&slow_softmax, Limiter::Phases) - (product + 2e-3)).abs() < 1e-9);
        let product_ms = product * 1e3;
        let slow_product = counted(product_ms + 1.5, 0.5);
        assert!(
            (time(&slow_product, Limiter::Phases) - (product + 1e-3 + 1e-3)).abs() < 1e-9,
            "{slow_product:?}"
        );
        // Few instructions: the tensor cores and MUFU, as without counts.
        let few = counted(0.2, 0.1);
        assert!((time(&few, Limiter::Phases) - (product + 1e-3)).abs() < 1e-12);
        // A GEMM: no exponentials, no phases.
        let gemm = run(&attention, 0.0);
        assert_eq!(gemm.limiter, Limiter::Tensor);
        assert_eq!(time(&gemm, Limiter::Phases), 0.0);
        // Exponentials without tensor-core work (softmax on its own): MUFU alone.
        let softmax = run(&with(0, 1 << 16), exps);
        assert_eq!(softmax.limiter, Limiter::Mufu);
    }

    /// One and a tenth waves: the second wave's few blocks leave most SMs idle.
    #[test]
    fn a_grid_just_over_one_wave_is_limited_by_its_tail() {
        let m = h100();
        let fp32 = |blocks: u32| {
            launch(dim3(blocks, 1, 1), vec![1 << 20], false, |_| {
                let c = LaunchCounters {
                    flops: 1 << 24,
                    ..LaunchCounters::default()
                };
                (c, BlockTraffic::default())
            })
        };
        // 256 threads at 32 registers: 8 blocks per SM, 1056 per wave.
        let (full, over) = (predict(&fp32(1056), &m), predict(&fp32(1162), &m));
        assert_eq!(full.limiter, Limiter::Fp32);
        assert_eq!(over.limiter, Limiter::Tail);
        assert!((over.tail_factor - 2.0 / (1162.0 / 1056.0)).abs() < 1e-9);
        assert!(over.seconds > 1.7 * full.seconds);
    }

    /// More registers per thread than an occupancy step allows: fewer warps keep fewer bytes in
    /// flight, and a kernel that issues one load per thread between barriers falls below DRAM
    /// bandwidth (Little's law).
    #[test]
    fn fewer_resident_warps_turn_a_stream_latency_bound() {
        let m = h100();
        let s = stream(64 * 1024, 1);
        let with = |registers: u32| {
            predict_launch(
                &m,
                &LaunchInput {
                    sample: &s,
                    resources: KernelResources {
                        registers: Some(registers),
                        static_shared: 0,
                    },
                    warp_instructions: None,
                    on_products: None,
                    exps: 0.0,
                },
            )
            .unwrap()
        };
        let (light, heavy) = (with(32), with(255));
        assert_eq!(light.limiter, Limiter::Dram);
        assert_eq!(heavy.blocks_per_sm, 1);
        assert_eq!(heavy.limiter, Limiter::Latency);
        assert!(heavy.seconds > 1.5 * light.seconds);
    }

    /// A GEMM's structure: block (x, y) reads the y-th strip of A and the x-th strip of B, in
    /// `steps` chunks along K; a causal variant reads a prefix of B's strips growing with y.
    fn gemm_like(grid: Dim3, strip: u64, steps: u64, causal: bool, every: bool) -> SampledLaunch {
        let (a, b) = (u64::from(grid.y) * strip, u64::from(grid.x) * strip);
        launch(grid, vec![a * 32, b * 32], every, move |blk| {
            let mut t = BlockTraffic::default();
            let (y, x) = (u64::from(blk.y), u64::from(blk.x));
            t.loaded.insert(0, (y * strip..(y + 1) * strip).collect());
            let b_sectors: Vec<u64> = if causal {
                (0..(y + 1) * strip / u64::from(grid.y)).collect()
            } else {
                (x * strip..(x + 1) * strip).collect()
            };
            t.load_sectors = strip + b_sectors.len() as u64;
            t.load_requests = t.load_sectors / 4;
            t.loaded.insert(1, b_sectors);
            let _ = steps;
            (LaunchCounters::default(), t)
        })
    }

    /// The trace the shortcut stands for: waves of resident blocks in launch order, each wave's
    /// blocks streaming their sectors in K order, interleaved, through an LRU cache of
    /// `capacity` bytes of 32-byte sectors; the misses' bytes.
    fn lru_misses(s: &SampledLaunch, wave: usize, capacity: f64, steps: usize) -> f64 {
        let lines = (capacity / 32.0) as usize;
        let mut cache: HashMap<(usize, u64), u64> = HashMap::new();
        let mut order: VecDeque<((usize, u64), u64)> = VecDeque::new();
        let (mut clock, mut misses) = (0u64, 0u64);
        for w in s.blocks.chunks(wave) {
            // Each block's sectors per allocation cut into `steps` chunks (its K loop).
            let chunks: Vec<Vec<Vec<(usize, u64)>>> = w
                .iter()
                .map(|b| {
                    let mut per_step = vec![Vec::new(); steps];
                    for (&a, set) in &b.traffic.loaded {
                        let n = set.len().div_ceil(steps).max(1);
                        for (i, c) in set.chunks(n).enumerate() {
                            per_step[i].extend(c.iter().map(|&x| (a, x)));
                        }
                    }
                    per_step
                })
                .collect();
            for step in 0..steps {
                for block in &chunks {
                    for &key in &block[step] {
                        clock += 1;
                        if cache.insert(key, clock).is_none() {
                            misses += 1;
                        }
                        order.push_back((key, clock));
                        while cache.len() > lines {
                            let (old, at) = order.pop_front().unwrap();
                            if cache.get(&old) == Some(&at) {
                                cache.remove(&old);
                            }
                        }
                    }
                }
            }
        }
        misses as f64 * 32.0
    }

    /// The analytic L2 (`dram_bytes`, from the plan's few blocks) against the LRU trace of every
    /// block: when a wave's data fits (GEMM strips, and a causal prefix shared by the wave),
    /// each byte once; when it does not, about once per wave.
    #[test]
    fn the_l2_shortcut_agrees_with_an_lru_trace_of_every_block() {
        let grid = dim3(16, 16, 1);
        let strip = 4096; // sectors: 128 KiB
        for (causal, capacity) in [(false, 64e6), (false, 1.5e6), (true, 64e6)] {
            let mut m = h100();
            m.l2_effective_bytes = capacity;
            // 256 threads at 32 registers: 8 blocks per SM; 4 SMs make a 32-block wave.
            let mut spec = *m.spec;
            spec.sms = 4;
            let spec: &'static _ = Box::leak(Box::new(spec));
            m.spec = spec;
            let wave = 32;
            let sampled = gemm_like(grid, strip, 8, causal, false);
            let every = gemm_like(grid, strip, 8, causal, true);
            let analytic = dram_bytes(&m, &sampled, 8);
            let traced = lru_misses(&every, wave, capacity, 8);
            let ratio = analytic / traced;
            assert!(
                (0.75..=1.34).contains(&ratio),
                "causal {causal}, L2 {capacity}: analytic {analytic:.3e} vs trace {traced:.3e}"
            );
        }
    }

    #[test]
    fn nested_reads_a_prefix_as_inside() {
        assert!(nested(&[1, 2, 3], &[0, 1, 2, 3, 4]));
        assert!(!nested(&[1, 5], &[0, 1, 2, 3, 4]));
        assert!(nested(&[], &[0]));
    }
}
