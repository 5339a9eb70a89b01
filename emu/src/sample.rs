//! Sampled launches: a few blocks of a full-size grid, run with every check and the profiler on,
//! so that a performance model can read a launch at the shape a GPU runs without emulating all of
//! it. Blocks are independent, so any subset of a grid is a valid launch of those blocks.
//!
//! Which blocks: along each grid dimension of extent `n > 1`, the first block, the middle one
//! and the last one, the other coordinates at the middle (the *anchor*). The last block of a
//! dimension is where a shape that is not a multiple of the tile leaves a partial tile; the first
//! and the middle show a trend along the dimension (a causal mask's growing work along the query
//! tiles). [`grid_mean`] turns a count measured on these blocks into the grid's mean.

use std::collections::BTreeMap;

use serde::Serialize;

use super::LaunchCounters;
use super::profile::{SECTOR_BYTES, l1_quarter_clocks, sectors, wavefronts};
use crate::launch::{Dim3, LaunchConfig};

/// The most blocks a [`plan`] has (the anchor and two per dimension).
pub const WHOLE_PLAN: usize = 7;
/// A sample size that runs every block of the grid, in launch order (to check the model's
/// estimates against the whole launch on small shapes).
pub const EVERY_BLOCK: usize = usize::MAX;

/// The blocks a sampled launch runs: the anchor first, then per dimension (x, y, z) its first and
/// last block, each once. A limited plan ([`Sampling::blocks`]) keeps its first blocks.
///
/// [`Sampling::blocks`]: super::Sampling::blocks
pub fn plan(grid: Dim3) -> Vec<Dim3> {
    let mid = |n: u32| n / 2;
    let anchor = Dim3 {
        x: mid(grid.x),
        y: mid(grid.y),
        z: mid(grid.z),
    };
    let mut blocks = vec![anchor];
    for d in 0..3 {
        let n = extent(grid, d);
        for i in [0, n.saturating_sub(1)] {
            let b = with(anchor, d, i);
            if !blocks.contains(&b) {
                blocks.push(b);
            }
        }
    }
    blocks
}

/// A grid dimension's extent (0: x, 1: y, 2: z).
pub fn extent(d3: Dim3, d: usize) -> u32 {
    [d3.x, d3.y, d3.z][d]
}

/// `b` with coordinate `d` set to `i`.
pub fn with(mut b: Dim3, d: usize, i: u32) -> Dim3 {
    match d {
        0 => b.x = i,
        1 => b.y = i,
        _ => b.z = i,
    }
    b
}

/// The mean over the whole grid of a count `f` measured on the blocks of [`plan`].
///
/// Additive along the dimensions: the anchor's value plus, per dimension, how the mean along that
/// dimension differs from the anchor. Along one dimension of `n` blocks, with `first`, `mid` and
/// `last` measured: if `first` equals `mid` the dimension is uniform but for its last block (a
/// partial edge tile): `(mid (n - 1) + last) / n`; otherwise the count follows a trend (causal
/// attention), read piecewise linearly through the three points.
pub fn grid_mean(grid: Dim3, f: impl Fn(Dim3) -> f64) -> f64 {
    let blocks = plan(grid);
    let anchor = blocks[0];
    let at_anchor = f(anchor);
    let mut mean = at_anchor;
    for d in 0..3 {
        let n = extent(grid, d);
        if n <= 1 {
            continue;
        }
        let (first, mid, last) = (f(with(anchor, d, 0)), at_anchor, f(with(anchor, d, n - 1)));
        let m = extent(anchor, d) as f64;
        let last_index = (n - 1) as f64;
        let along = if (first - mid).abs() <= 1e-9 * mid.abs().max(1.0) {
            (mid * last_index + last) / n as f64
        } else {
            // Trapezoids over [0, m] and [m, n - 1], then averaged over the n - 1 intervals'
            // worth of blocks.
            ((first + mid) / 2.0 * m + (mid + last) / 2.0 * (last_index - m)) / last_index
        };
        mean += along - at_anchor;
    }
    mean
}

/// What one block of a sampled launch moved, read off the profiler's warp-wide requests.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BlockTraffic {
    /// Warp-wide global load requests and the 32-byte sectors they touched.
    pub load_requests: u64,
    pub load_sectors: u64,
    /// Warp-wide global store requests and their sectors.
    pub store_requests: u64,
    pub store_sectors: u64,
    /// The L1's clocks for the block's global requests, in quarters
    /// ([`l1_quarter_clocks`](super::profile::l1_quarter_clocks)): `[0]` where a request takes at
    /// least one clock (GA100, GH100), `[1]` where it takes at least two (GA102).
    pub l1_quarters: [u64; 2],
    /// Warp-wide shared-memory requests and their wavefronts (bank-conflict serialisation), and
    /// the wavefronts the same requests would take without a conflict.
    pub shared_requests: u64,
    pub shared_wavefronts: u64,
    pub shared_ideal_wavefronts: u64,
    /// Bytes the asynchronous engines moved for the block (TMA copies, wgmma operand fetches):
    /// global sectors they loaded or stored (through L2, not L1 or the load/store units), and
    /// shared-memory bytes they wrote or read (through shared memory's banks).
    pub engine_global_sectors: u64,
    pub engine_shared_bytes: u64,
    /// The distinct sectors the block loaded, per allocation (its index among the launch's live
    /// allocations, by address), sorted.
    #[serde(skip)]
    pub loaded: BTreeMap<usize, Vec<u64>>,
    /// The distinct sectors the block stored, likewise.
    #[serde(skip)]
    pub stored: BTreeMap<usize, Vec<u64>>,
}

impl BlockTraffic {
    /// Distinct bytes (whole sectors) the block loaded, over every allocation.
    pub fn loaded_bytes(&self) -> u64 {
        footprint_bytes(&self.loaded)
    }

    /// Distinct bytes (whole sectors) the block stored.
    pub fn stored_bytes(&self) -> u64 {
        footprint_bytes(&self.stored)
    }

    /// Folds one warp-wide request into the totals.
    pub(super) fn add_request(
        &mut self,
        global: bool,
        load: bool,
        lanes: &[(usize, usize)],
        allocation_of: impl Fn(usize) -> Option<usize>,
    ) {
        if !global {
            let (waves, ideal) = wavefronts(lanes);
            self.shared_requests += 1;
            self.shared_wavefronts += waves;
            self.shared_ideal_wavefronts += ideal;
            return;
        }
        let (touched, _) = sectors(lanes);
        let l1 = l1_quarter_clocks(lanes, load);
        self.l1_quarters[0] += l1.max(4);
        self.l1_quarters[1] += l1.max(8);
        let (requests, count, set) = if load {
            (
                &mut self.load_requests,
                &mut self.load_sectors,
                &mut self.loaded,
            )
        } else {
            (
                &mut self.store_requests,
                &mut self.store_sectors,
                &mut self.stored,
            )
        };
        *requests += 1;
        *count += touched;
        for &(addr, bytes) in lanes {
            if let Some(a) = allocation_of(addr) {
                let entry = set.entry(a).or_default();
                for s in (addr / SECTOR_BYTES)..(addr + bytes).div_ceil(SECTOR_BYTES) {
                    entry.push(s as u64);
                }
            }
        }
    }

    /// Folds what an engine moved into the totals.
    pub(super) fn add_engine(
        &mut self,
        global: bool,
        load: bool,
        moved: &[(usize, usize)],
        allocation_of: impl Fn(usize) -> Option<usize>,
    ) {
        for &(addr, bytes) in moved {
            if !global {
                self.engine_shared_bytes += bytes as u64;
                continue;
            }
            let sectors = (addr / SECTOR_BYTES)..(addr + bytes).div_ceil(SECTOR_BYTES);
            self.engine_global_sectors += sectors.len() as u64;
            if let Some(a) = allocation_of(addr) {
                let set = if load {
                    &mut self.loaded
                } else {
                    &mut self.stored
                };
                set.entry(a).or_default().extend(sectors.map(|s| s as u64));
            }
        }
    }

    /// These counts and `other`'s, each pair through `f` (`SampledLaunch::extended`): `other`'s
    /// allocation `of_self[i]` is this one's `i`. The sector sets become sets of `f`'s size,
    /// numbered from 0.
    fn extended(&self, other: &Self, of_self: &[usize], f: &impl Fn(u64, u64) -> u64) -> Self {
        let sets = |mine: &BTreeMap<usize, Vec<u64>>, theirs: &BTreeMap<usize, Vec<u64>>| {
            (0..of_self.len())
                .filter_map(|i| {
                    let len = |m: &BTreeMap<usize, Vec<u64>>, k| m.get(&k).map_or(0, Vec::len);
                    let (x, y) = (len(mine, i) as u64, len(theirs, of_self[i]) as u64);
                    (x + y > 0).then(|| (i, (0..f(x, y)).collect()))
                })
                .collect()
        };
        Self {
            load_requests: f(self.load_requests, other.load_requests),
            load_sectors: f(self.load_sectors, other.load_sectors),
            store_requests: f(self.store_requests, other.store_requests),
            store_sectors: f(self.store_sectors, other.store_sectors),
            l1_quarters: [
                f(self.l1_quarters[0], other.l1_quarters[0]),
                f(self.l1_quarters[1], other.l1_quarters[1]),
            ],
            shared_requests: f(self.shared_requests, other.shared_requests),
            shared_wavefronts: f(self.shared_wavefronts, other.shared_wavefronts),
            shared_ideal_wavefronts: f(self.shared_ideal_wavefronts, other.shared_ideal_wavefronts),
            engine_global_sectors: f(self.engine_global_sectors, other.engine_global_sectors),
            engine_shared_bytes: f(self.engine_shared_bytes, other.engine_shared_bytes),
            loaded: sets(&self.loaded, &other.loaded),
            stored: sets(&self.stored, &other.stored),
        }
    }

    /// Sorts and de-duplicates the sector sets (after the last request).
    pub(super) fn finish(&mut self) {
        for set in self.loaded.values_mut().chain(self.stored.values_mut()) {
            set.sort_unstable();
            set.dedup();
        }
    }
}

fn footprint_bytes(sets: &BTreeMap<usize, Vec<u64>>) -> u64 {
    sets.values().map(|s| s.len() as u64).sum::<u64>() * SECTOR_BYTES as u64
}

/// One sampled block: where it sits in the grid, its counters and its traffic.
#[derive(Clone, Debug)]
pub struct SampledBlock {
    pub block: Dim3,
    pub counters: LaunchCounters,
    /// The PTX's requests, as the emulator executed them.
    pub traffic: BlockTraffic,
    /// The same accesses as each architecture's machine code issues them, where the launch had
    /// it (`LaunchOptions::machine_code`): wider loads and stores where ptxas merged neighbours.
    pub machine: Vec<(String, BlockTraffic)>,
}

/// A launch of which only the [`plan`]'s blocks ran.
#[derive(Clone, Debug)]
pub struct SampledLaunch {
    pub kernel: &'static str,
    pub config: LaunchConfig,
    /// Device calls its threads made (accesses, barriers, collectives, FLOP counts) when a
    /// budget was set: the cost of the sample, machine-independent; 0 without a budget.
    pub work: u64,
    /// Bytes of each live allocation at the launch, in address order (the indices of
    /// [`BlockTraffic::loaded`]).
    pub allocations: Vec<u64>,
    /// Each of those allocations' place in the order the buffers were made (what pairs them
    /// between two runs of one case, whose addresses may come out in another order).
    pub allocation_order: Vec<u64>,
    pub blocks: Vec<SampledBlock>,
}

/// The value at `size` on the line through `x` at `sa` and `y` at `sb`: how
/// [`SampledLaunch::extended`] moves a count, and what the model reads beside a sample moves too.
pub fn along_line((sa, sb): (usize, usize), size: usize) -> impl Fn(f64, f64) -> f64 {
    let t = (size as f64 - sa as f64) / (sb as f64 - sa as f64);
    move |x, y| x + (y - x) * t
}

impl SampledLaunch {
    /// The launch with each block's traffic as the machine code of the first architecture
    /// `runs` accepts issues it ([`SampledBlock::machine`]), or `None` where some block has no
    /// count for such an architecture.
    pub fn as_issued_by(&self, runs: impl Fn(&str) -> bool) -> Option<SampledLaunch> {
        let blocks = self
            .blocks
            .iter()
            .map(|b| {
                let (_, traffic) = b.machine.iter().find(|(a, _)| runs(a))?;
                Some(SampledBlock {
                    traffic: traffic.clone(),
                    machine: Vec::new(),
                    ..b.clone()
                })
            })
            .collect::<Option<Vec<_>>>()?;
        (!blocks.is_empty()).then(|| SampledLaunch {
            blocks,
            ..self.clone()
        })
    }

    /// The sampled block at `b`, if it ran.
    pub fn get(&self, b: Dim3) -> Option<&SampledBlock> {
        self.blocks.iter().find(|s| s.block == b)
    }

    /// The plan's first block, which every sample runs.
    pub fn at_anchor(&self) -> &SampledBlock {
        self.get(plan(self.config.grid)[0])
            .unwrap_or(&self.blocks[0])
    }

    /// The grid's mean of `f` over its blocks, from the sample ([`grid_mean`]); with the anchor
    /// alone sampled (a limited plan), the anchor's value.
    pub fn mean(&self, f: impl Fn(&SampledBlock) -> f64) -> f64 {
        // A launch whose blocks were skipped (`Sampling::skip`) ran none to count.
        if self.blocks.is_empty() {
            return 0.0;
        }
        let anchor = self.at_anchor();
        grid_mean(self.config.grid, |b| f(self.get(b).unwrap_or(anchor)))
    }

    /// Blocks in the grid.
    pub fn grid_blocks(&self) -> u64 {
        self.config.grid.volume()
    }

    /// The launch at a size of the case past two samples of it, `a` at size `sa` and `b` at
    /// `sb`, for a launch whose every count, allocation and grid extent is affine in that size
    /// (the key length of non-causal attention: each key tile costs a block the same, and a grid
    /// or a buffer that grows with the keys grows by whole tiles). Each moves along the line
    /// through its two values, to `size`.
    ///
    /// Both samples must be the anchor alone, of the same kernel, block and allocations (paired
    /// by the order they were made). The extended block's sector sets keep only their sizes
    /// (sectors numbered from 0): with the anchor alone, their sizes are all the model reads of
    /// them (`model::dram_bytes`). An extent that does not land on a whole number of blocks, or
    /// a count that would fall below zero, is refused: the launch is not affine in that size.
    pub fn extended(
        a: &SampledLaunch,
        b: &SampledLaunch,
        (sa, sb): (usize, usize),
        size: usize,
    ) -> Result<SampledLaunch, String> {
        let refuse = |why: String| Err(format!("{} cannot be extended to {size}: {why}", a.kernel));
        if a.kernel != b.kernel || a.config.block != b.config.block || sa == sb {
            return refuse(format!(
                "two different launches ({} and {}, blocks {:?} and {:?}, sizes {sa} and {sb})",
                a.kernel, b.kernel, a.config.block, b.config.block
            ));
        }
        if a.blocks.len() != 1 || b.blocks.len() != 1 {
            return refuse("a sample of more than its anchor".to_string());
        }
        if a.allocations.len() != b.allocations.len() {
            return refuse(format!(
                "{} allocations against {}",
                a.allocations.len(),
                b.allocations.len()
            ));
        }
        let along = along_line((sa, sb), size);
        let line = |x: u64, y: u64| along(x as f64, y as f64);
        let bad = std::cell::RefCell::new(None);
        let whole = |x: u64, y: u64| {
            let v = line(x, y);
            if v < -1e-6 {
                *bad.borrow_mut() = Some(format!("a count goes from {x} to {y}, and below zero"));
            }
            v.round().max(0.0) as u64
        };
        let extent = |x: u32, y: u32| {
            let v = line(u64::from(x), u64::from(y));
            if (v - v.round()).abs() > 1e-6 || v < 1.0 {
                *bad.borrow_mut() = Some(format!("a grid extent goes from {x} to {y}, to {v}"));
            }
            v.round().max(1.0) as u32
        };
        let grid = Dim3 {
            x: extent(a.config.grid.x, b.config.grid.x),
            y: extent(a.config.grid.y, b.config.grid.y),
            z: extent(a.config.grid.z, b.config.grid.z),
        };
        // b's allocation index for each of a's: the same place in the order they were made.
        let rank = |order: &[u64]| {
            let mut by = (0..order.len()).collect::<Vec<_>>();
            by.sort_by_key(|&i| order[i]);
            by
        };
        let (ra, rb) = (rank(&a.allocation_order), rank(&b.allocation_order));
        let mut of_a = vec![0; ra.len()];
        for (&i, &j) in ra.iter().zip(&rb) {
            of_a[i] = j;
        }
        let allocations = (0..a.allocations.len())
            .map(|i| whole(a.allocations[i], b.allocations[of_a[i]]))
            .collect();
        let (ba, bb) = (&a.blocks[0], &b.blocks[0]);
        let counters = ba.counters.zip_with(&bb.counters, whole);
        let traffic = ba.traffic.extended(&bb.traffic, &of_a, &whole);
        let machine = ba
            .machine
            .iter()
            .filter_map(|(arch, t)| {
                let (_, u) = bb.machine.iter().find(|(other, _)| other == arch)?;
                Some((arch.clone(), t.extended(u, &of_a, &whole)))
            })
            .collect();
        let work = whole(a.work, b.work);
        if let Some(why) = bad.into_inner() {
            return refuse(why);
        }
        let config = LaunchConfig { grid, ..a.config };
        Ok(SampledLaunch {
            kernel: a.kernel,
            config,
            work,
            allocations,
            allocation_order: a.allocation_order.clone(),
            blocks: vec![SampledBlock {
                block: plan(grid)[0],
                counters,
                traffic,
                machine,
            }],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dim(x: u32, y: u32, z: u32) -> Dim3 {
        Dim3 { x, y, z }
    }

    /// The estimator against the exact mean of counts a block's position determines: uniform
    /// with a smaller last tile, and a linear trend (a causal mask), each summed over every block.
    #[test]
    fn grid_mean_is_exact_for_an_edge_tile_and_for_a_trend() {
        let grid = dim(7, 5, 3);
        let every = |f: &dyn Fn(Dim3) -> f64| {
            let mut sum = 0.0;
            for z in 0..3 {
                for y in 0..5 {
                    for x in 0..7 {
                        sum += f(dim(x, y, z));
                    }
                }
            }
            sum / grid.volume() as f64
        };
        let edge = |b: Dim3| if b.x == 6 { 40.0 } else { 100.0 } * if b.y == 4 { 0.5 } else { 1.0 };
        let trend = |b: Dim3| 10.0 + 3.0 * b.y as f64 + 2.0 * b.z as f64;
        for f in [&edge as &dyn Fn(Dim3) -> f64, &trend] {
            let (want, got) = (every(f), grid_mean(grid, f));
            // The edge case's two edges multiply, which an additive estimator reads to first
            // order: it misses the product of the two shortfalls, (1 - 0.914)(1 - 0.9) = 0.9 %
            // of the anchor here.
            assert!((got - want).abs() <= 0.011 * want, "{got} vs {want}");
        }
        assert!((grid_mean(grid, trend) - every(&trend)).abs() < 1e-9);
    }

    #[test]
    fn the_plan_names_each_block_once_and_covers_every_edge() {
        assert_eq!(plan(dim(1, 1, 1)), vec![dim(0, 0, 0)]);
        let p = plan(dim(8, 4, 1));
        assert_eq!(p[0], dim(4, 2, 0));
        for b in [dim(0, 2, 0), dim(7, 2, 0), dim(4, 0, 0), dim(4, 3, 0)] {
            assert!(p.contains(&b), "{p:?}");
        }
        assert_eq!(p.len(), 5);
    }
}
