//! The emulator as a profiler: every lane's every access is seen, so how a warp's accesses
//! coalesce into 32-byte sectors (global memory) and spread over the 32 banks (shared memory) can
//! be reported exactly, per source line, on any machine.
//!
//! A *request* is one warp-wide execution of one access site: lane `l`'s `k`-th access at a site
//! is grouped with every other lane's `k`-th access at the same site in the same warp, which is
//! what the hardware sees when the warp executes that instruction the `k`-th time.

use std::collections::{BTreeMap, HashMap};

use rustc_hash::FxHashMap;

use kernels::cuda::emu::{Access, Site};
use serde::Serialize;

use super::error::MemorySpace;
use super::machine_code::{KernelCode, regroup};

/// Bytes in one global-memory sector, the unit DRAM and L2 move.
pub const SECTOR_BYTES: usize = 32;
/// Shared-memory banks, each 4 bytes wide.
pub const BANKS: usize = 32;
/// Bytes in one L1 cache line (four sectors), the unit the L1's tag stage looks up.
pub const LINE_BYTES: usize = 128;

/// What one site did over a launch (or several).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SiteStats {
    /// `file:line:column` of the access in the kernel source.
    pub site: String,
    /// Global or shared.
    pub space: String,
    /// Load or store.
    pub access: String,
    /// Warp-wide requests.
    pub requests: u64,
    /// Bytes the lanes asked for.
    pub bytes: u64,
    /// Global: 32-byte sectors touched, summed over requests.
    pub sectors: u64,
    /// Global: the fewest sectors that could hold the bytes each request asked for.
    pub ideal_sectors: u64,
    /// Global: the L1's clocks for the requests, in quarters ([`l1_quarter_clocks`], at least a
    /// clock a request).
    pub l1_quarters: u64,
    /// Shared: wavefronts (bank-conflict serialisation steps), summed over requests.
    pub wavefronts: u64,
    /// Shared: wavefronts without any conflict (one per phase).
    pub ideal_wavefronts: u64,
}

impl SiteStats {
    /// Global: sectors per request (4 for 32 lanes reading consecutive f32, up to 32 scattered).
    pub fn sectors_per_request(&self) -> f64 {
        self.sectors as f64 / self.requests.max(1) as f64
    }

    /// Shared: the bank-conflict degree (1 = conflict-free, up to 32).
    pub fn conflict_degree(&self) -> f64 {
        self.wavefronts as f64 / self.ideal_wavefronts.max(1) as f64
    }
}

/// A launch's (or several launches') profile: per kernel, per site.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Profile {
    /// Kernel name to its sites, in source order.
    pub kernels: BTreeMap<String, Vec<SiteStats>>,
}

pub(super) type SiteKey = (Site, MemorySpace, Access);

/// What one block saw, before it is folded into per-site statistics.
#[derive(Default)]
pub(super) struct BlockProfile {
    /// (site, thread) to how many accesses that thread made there so far.
    seen: FxHashMap<(SiteKey, usize), u32>,
    /// (site, warp, occurrence) to the lanes' (address, bytes).
    requests: FxHashMap<(SiteKey, usize, u32), Vec<(usize, usize)>>,
    /// What the asynchronous engines moved (TMA copies, wgmma operand fetches): (space, access)
    /// to their (address, bytes), outside any warp's requests.
    engine: HashMap<(MemorySpace, Access), Vec<(usize, usize)>>,
}

impl BlockProfile {
    pub(super) fn record(
        &mut self,
        space: MemorySpace,
        access: Access,
        site: Site,
        thread: usize,
        addr: usize,
        bytes: usize,
    ) {
        let key = (site, space, access);
        let k = self.seen.entry((key, thread)).or_default();
        let occurrence = *k;
        *k += 1;
        self.requests
            .entry((key, thread / 32, occurrence))
            .or_default()
            .push((addr, bytes));
    }

    /// What this block moved, request by request (for a sampled launch: `sample.rs`).
    /// `allocation_of` names the allocation an address lies in.
    /// Given the kernel's machine code, the PTX's requests are first regrouped as the GPU issues
    /// them (`machine_code::regroup`).
    pub(super) fn traffic(
        &self,
        allocation_of: impl Fn(usize) -> Option<usize>,
        code: Option<&KernelCode>,
    ) -> super::sample::BlockTraffic {
        let mut t = super::sample::BlockTraffic::default();
        let mut add = |key: &SiteKey, lanes: &[(usize, usize)]| {
            let global = key.1 == MemorySpace::Global;
            t.add_request(global, key.2 == Access::Read, lanes, &allocation_of);
        };
        match code {
            None => {
                for ((key, _, _), lanes) in &self.requests {
                    add(key, lanes);
                }
            }
            Some(code) => {
                // One site's occurrences in one warp in order, as `regroup` reads them.
                let mut requests: Vec<_> = self
                    .requests
                    .iter()
                    .map(|(k, lanes)| (*k, lanes.clone()))
                    .collect();
                requests.sort_by_key(|((key, warp, occurrence), _)| {
                    (
                        key.0.position(),
                        key.1 as u8,
                        key.2 as u8,
                        *warp,
                        *occurrence,
                    )
                });
                let regrouped = regroup(requests, code, |(key, warp, _)| {
                    (key.0.kind(), key.1, key.2, *warp)
                });
                for ((key, _, _), lanes) in &regrouped {
                    add(key, lanes);
                }
            }
        }
        for (&(space, access), moved) in &self.engine {
            t.add_engine(
                space == MemorySpace::Global,
                access == Access::Read,
                moved,
                &allocation_of,
            );
        }
        t.finish();
        t
    }

    /// An access by an asynchronous engine, not by a thread's instruction.
    pub(super) fn record_engine(
        &mut self,
        space: MemorySpace,
        access: Access,
        addr: usize,
        bytes: usize,
    ) {
        self.engine
            .entry((space, access))
            .or_default()
            .push((addr, bytes));
    }

    /// Folds this block's requests into `stats`, keyed by site.
    pub(super) fn fold_into(self, stats: &mut HashMap<SiteKey, SiteStats>) {
        for ((key, _, _), lanes) in self.requests {
            let s = stats.entry(key).or_default();
            s.requests += 1;
            s.bytes += lanes.iter().map(|l| l.1 as u64).sum::<u64>();
            match key.1 {
                MemorySpace::Global => {
                    let (touched, ideal) = sectors(&lanes);
                    s.sectors += touched;
                    s.ideal_sectors += ideal;
                    s.l1_quarters += l1_quarter_clocks(&lanes, key.2 == Access::Read).max(4);
                }
                MemorySpace::Shared => {
                    let (waves, ideal) = wavefronts(&lanes);
                    s.wavefronts += waves;
                    s.ideal_wavefronts += ideal;
                }
            }
        }
    }
}

/// Finishes per-site statistics, sorted by source position.
pub(super) fn finish(stats: HashMap<SiteKey, SiteStats>) -> Vec<SiteStats> {
    let mut out: Vec<(Site, SiteStats)> = stats
        .into_iter()
        .map(|((loc, space, access), mut s)| {
            s.site = loc.to_string();
            s.space = format!("{space:?}").to_lowercase();
            s.access = format!("{access:?}").to_lowercase();
            (loc, s)
        })
        .collect();
    out.sort_by(|a, b| (a.0.position(), &a.1.access).cmp(&(b.0.position(), &b.1.access)));
    out.into_iter().map(|(_, s)| s).collect()
}

/// Sectors one request touches, and the fewest that could hold its distinct bytes.
pub fn sectors(lanes: &[(usize, usize)]) -> (u64, u64) {
    // Every lane's byte range, sorted by start: the touched sectors and the distinct bytes are
    // then one pass over the merged ranges (a request is at most 32 lanes: no allocation).
    let mut inline = [(0usize, 0usize); 32];
    let mut spilled = Vec::new();
    let ranges: &mut [(usize, usize)] = if lanes.len() <= inline.len() {
        for (r, &(a, b)) in inline.iter_mut().zip(lanes) {
            *r = (a, a + b);
        }
        &mut inline[..lanes.len()]
    } else {
        spilled.extend(lanes.iter().map(|&(a, b)| (a, a + b)));
        &mut spilled
    };
    ranges.sort_unstable();
    let (mut touched, mut bytes) = (0u64, 0u64);
    let (mut last_sector, mut covered) = (None::<usize>, 0usize);
    for &(start, end) in ranges.iter() {
        if end <= start {
            continue;
        }
        let first = start / SECTOR_BYTES;
        let from = match last_sector {
            Some(s) if s >= first => s + 1,
            _ => first,
        };
        let last = (end - 1) / SECTOR_BYTES;
        if last >= from {
            touched += (last - from + 1) as u64;
        }
        last_sector = Some(last_sector.map_or(last, |s| s.max(last)));
        let begin = start.max(covered);
        if end > begin {
            bytes += (end - begin) as u64;
        }
        covered = covered.max(end);
    }
    (touched, bytes.div_ceil(SECTOR_BYTES as u64))
}

/// The `unit`-byte units (4-byte words, 128-byte lines) the byte ranges `lanes` touch, one entry
/// per lane's unit (repeats kept), sorted: in `inline` while they fit (a warp's request, without
/// allocating), else in `spilled`.
fn units_sorted<'a, const N: usize>(
    lanes: &[(usize, usize)],
    unit: usize,
    inline: &'a mut [usize; N],
    spilled: &'a mut Vec<usize>,
) -> &'a mut [usize] {
    let mut n = 0;
    for &(addr, bytes) in lanes {
        for u in (addr / unit)..(addr + bytes).div_ceil(unit) {
            if n < N {
                inline[n] = u;
            } else {
                if spilled.is_empty() {
                    spilled.extend_from_slice(&inline[..]);
                }
                spilled.push(u);
            }
            n += 1;
        }
    }
    let units = if n <= N {
        &mut inline[..n]
    } else {
        &mut spilled[..]
    };
    units.sort_unstable();
    units
}

/// The L1's time for one warp-wide global request, in quarters of a clock, before the
/// device's least time per request (one clock on GA100 and GH100, two on GA102:
/// `model::Machine::l1_clocks_per_request`).
///
/// The L1 (which is the shared memory's SRAM) takes the longer of two stages, as te42kyfo's
/// gpu-benches `gpu-strides` measured on the A100 and H200 (Nsight's
/// `l1tex__t_output_wavefronts` and `l1tex__data_pipe_lsu_wavefronts` per instruction, L1 hits):
/// - its **tag stage** looks up the request's distinct 128-byte lines, the first in a clock and
///   four more each clock after it (a 32-line scatter: 8.75 clocks, measured 8.0 to 9.3);
/// - a load's **data stage** reads the lines' words out of the same 32 four-byte banks as shared
///   memory, so a load of words in one bank is serialised exactly as a shared load would be
///   ([`wavefronts`]: a stride of 8 floats, 8 clocks). A store goes through to L2 (L1 is
///   write-through) and is priced by its lookups alone, which that benchmark does not measure.
pub fn l1_quarter_clocks(lanes: &[(usize, usize)], load: bool) -> u64 {
    let (mut inline, mut spilled) = ([0usize; 64], Vec::new());
    let lines = units_sorted(lanes, LINE_BYTES, &mut inline, &mut spilled);
    let distinct =
        lines.windows(2).filter(|w| w[0] != w[1]).count() as u64 + u64::from(!lines.is_empty());
    // First line one clock (4 quarters), each further line a quarter.
    let tags = (distinct + 3).max(4);
    if load {
        tags.max(4 * wavefronts(lanes).0)
    } else {
        tags
    }
}

/// Wavefronts one shared-memory request needs, and the conflict-free number.
///
/// Accesses of 8 or 16 bytes per lane are served in 2 or 4 phases (half- or quarter-warps), each
/// moving at most 128 bytes. Within a phase, lanes touching *different* 4-byte words in the same
/// bank are serialised; lanes reading the same word share it (broadcast).
pub fn wavefronts(lanes: &[(usize, usize)]) -> (u64, u64) {
    let width = lanes.iter().map(|l| l.1).max().unwrap_or(4).max(4);
    let phases = (width / 4).min(4);
    let per_phase = 32 / phases;
    let mut total = 0;
    for phase in lanes.chunks(per_phase) {
        // The phase's distinct words (at most 128 B of 4-byte words per phase, a few more for an
        // unaligned access), then the most of them that fall in one bank.
        let (mut inline, mut spilled) = ([0usize; 160], Vec::new());
        let words = units_sorted(phase, 4, &mut inline, &mut spilled);
        let mut per_bank = [0u32; BANKS];
        let mut previous = None;
        for &w in words.iter() {
            if previous != Some(w) {
                per_bank[w % BANKS] += 1;
                previous = Some(w);
            }
        }
        total += u64::from(per_bank.iter().copied().max().unwrap_or(0).max(1));
    }
    let ideal = lanes.len().div_ceil(per_phase) as u64;
    (total, ideal)
}

/// Adds `new` into `into`, site by site (the same kernel launched again).
pub(super) fn merge(into: &mut Vec<SiteStats>, new: Vec<SiteStats>) {
    for n in new {
        match into
            .iter_mut()
            .find(|s| s.site == n.site && s.space == n.space && s.access == n.access)
        {
            Some(s) => {
                // Every count, named: a field added to SiteStats and not summed here fails to
                // compile (l1_quarters was once left out).
                let SiteStats {
                    site: _,
                    space: _,
                    access: _,
                    requests,
                    bytes,
                    sectors,
                    ideal_sectors,
                    l1_quarters,
                    wavefronts,
                    ideal_wavefronts,
                } = n;
                s.requests += requests;
                s.bytes += bytes;
                s.sectors += sectors;
                s.ideal_sectors += ideal_sectors;
                s.l1_quarters += l1_quarters;
                s.wavefronts += wavefronts;
                s.ideal_wavefronts += ideal_wavefronts;
            }
            None => into.push(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two launches' counts of one site add up, each count on its own.
    #[test]
    fn merge_sums_every_count_of_a_site() {
        let at = |k: u64| SiteStats {
            site: "k.rs:1:1".into(),
            space: "global".into(),
            access: "load".into(),
            requests: k,
            bytes: 2 * k,
            sectors: 3 * k,
            ideal_sectors: 5 * k,
            l1_quarters: 7 * k,
            wavefronts: 11 * k,
            ideal_wavefronts: 13 * k,
        };
        let mut sites = vec![at(1)];
        merge(&mut sites, vec![at(10)]);
        assert_eq!(sites, vec![at(11)]);
        let other = SiteStats {
            site: "k.rs:2:1".into(),
            ..at(1)
        };
        merge(&mut sites, vec![other.clone()]);
        assert_eq!(sites, vec![at(11), other], "another site is kept apart");
    }

    fn lanes(stride_bytes: usize, bytes: usize) -> Vec<(usize, usize)> {
        (0..32).map(|l| (4096 + l * stride_bytes, bytes)).collect()
    }

    #[test]
    fn consecutive_f32_is_four_sectors_and_a_stride_is_thirty_two() {
        assert_eq!(sectors(&lanes(4, 4)), (4, 4));
        assert_eq!(sectors(&lanes(128, 4)), (32, 4));
        assert_eq!(
            sectors(&lanes(16, 16)),
            (16, 16),
            "16-byte vectors: 512 bytes, 16 sectors"
        );
    }

    /// The definitions, spelled out: every sector any lane touches; every distinct byte; per
    /// phase, the most distinct 4-byte words any one bank holds.
    fn sectors_by_definition(lanes: &[(usize, usize)]) -> (u64, u64) {
        let mut touched = std::collections::BTreeSet::new();
        let mut bytes = std::collections::BTreeSet::new();
        for &(a, b) in lanes {
            touched.extend((a / SECTOR_BYTES)..(a + b).div_ceil(SECTOR_BYTES));
            bytes.extend(a..a + b);
        }
        (
            touched.len() as u64,
            bytes.len().div_ceil(SECTOR_BYTES) as u64,
        )
    }

    fn wavefronts_by_definition(lanes: &[(usize, usize)]) -> u64 {
        let width = lanes.iter().map(|l| l.1).max().unwrap_or(4).max(4);
        let per_phase = 32 / (width / 4).min(4);
        lanes
            .chunks(per_phase)
            .map(|phase| {
                let mut banks = vec![std::collections::BTreeSet::new(); BANKS];
                for &(a, b) in phase {
                    for w in (a / 4)..(a + b).div_ceil(4) {
                        banks[w % BANKS].insert(w);
                    }
                }
                banks.iter().map(|b| b.len()).max().unwrap_or(0).max(1) as u64
            })
            .sum()
    }

    proptest::proptest! {
        #[test]
        fn sectors_and_wavefronts_follow_their_definitions(
            lanes in proptest::collection::vec(
                (0usize..4096, proptest::sample::select(vec![1usize, 2, 4, 8, 16])),
                1..=32,
            ),
        ) {
            // Aligned as the hardware requires: an access of b bytes at a multiple of b.
            let lanes: Vec<(usize, usize)> = lanes.iter().map(|&(a, b)| (a / b * b, b)).collect();
            proptest::prop_assert_eq!(sectors(&lanes), sectors_by_definition(&lanes));
            proptest::prop_assert_eq!(wavefronts(&lanes).0, wavefronts_by_definition(&lanes));
        }
    }

    /// te42kyfo/gpu-benches `gpu-strides` (a100.txt, h200.txt, a40.txt): L1 clocks per warp-wide
    /// f32 load, lane `l` reading `base + 4 s l`, all hits. The third column is the least a
    /// request takes on that device (two on the A40's GA102).
    const GPU_STRIDES: &[(&str, usize, f64, f64)] = &[
        ("h200", 0, 1.01, 1.0),
        ("h200", 1, 1.01, 1.0),
        ("h200", 2, 2.01, 1.0),
        ("h200", 3, 1.63, 1.0),
        ("h200", 4, 4.01, 1.0),
        ("h200", 5, 2.00, 1.0),
        ("h200", 7, 2.41, 1.0),
        ("h200", 8, 8.0, 1.0),
        ("h200", 9, 3.00, 1.0),
        ("h200", 11, 3.41, 1.0),
        ("h200", 13, 4.10, 1.0),
        ("h200", 15, 4.60, 1.0),
        ("a100", 7, 2.67, 1.0),
        ("a100", 16, 16.0, 1.0),
        ("a100", 17, 5.1, 1.0),
        ("a100", 21, 6.0, 1.0),
        ("a100", 25, 7.0, 1.0),
        ("a100", 29, 8.0, 1.0),
        ("a100", 31, 8.5, 1.0),
        ("a100", 32, 32.0, 1.0),
        ("a100", 33, 8.8, 1.0),
        ("a100", 64, 32.0, 1.0),
        ("a40", 1, 2.00, 2.0),
        ("a40", 3, 2.00, 2.0),
        ("a40", 5, 2.20, 2.0),
        ("a40", 8, 8.0, 2.0),
        ("a40", 9, 3.03, 2.0),
    ];

    #[test]
    fn a_global_request_costs_the_l1_what_gpu_strides_measured() {
        for &(device, stride, measured, least) in GPU_STRIDES {
            let lanes: Vec<(usize, usize)> =
                (0..32).map(|l| ((1 << 20) + 4 * stride * l, 4)).collect();
            let clocks = (l1_quarter_clocks(&lanes, true) as f64 / 4.0).max(least);
            assert!(
                (clocks - measured).abs() <= 0.15 * measured,
                "{device}, stride {stride}: {clocks} clocks, measured {measured}"
            );
        }
    }

    /// The benchmark's 2D variant (`blockKernel`, pitch 4098 floats): `w` lanes along a row, the
    /// warp over 32 / w rows (a100.txt and h200.txt agree within 4 %).
    #[test]
    fn a_warp_over_rows_costs_the_l1_its_lines() {
        for (w, measured) in [
            (1usize, 9.2),
            (2, 4.82),
            (4, 3.00),
            (8, 4.01),
            (16, 2.01),
            (32, 1.02),
        ] {
            let lanes: Vec<(usize, usize)> = (0..32)
                .map(|l| ((1 << 20) + 4 * ((l / w) * 4098 + l % w), 4))
                .collect();
            let clocks = l1_quarter_clocks(&lanes, true).max(4) as f64 / 4.0;
            assert!(
                (clocks - measured).abs() <= 0.15 * measured,
                "{w} lanes a row: {clocks} clocks, measured {measured}"
            );
        }
    }

    #[test]
    fn a_store_is_priced_by_its_lines_alone() {
        // A stride of 8 floats: 8 lines and an 8-way bank conflict, which a store does not read.
        let lanes: Vec<(usize, usize)> = (0..32).map(|l| ((1 << 20) + 32 * l, 4)).collect();
        assert_eq!(l1_quarter_clocks(&lanes, true), 32);
        assert_eq!(l1_quarter_clocks(&lanes, false), 11);
    }

    #[test]
    fn a_column_of_a_32_wide_tile_is_a_32_way_conflict() {
        assert_eq!(wavefronts(&lanes(4, 4)), (1, 1), "a row: 32 banks");
        assert_eq!(
            wavefronts(&lanes(32 * 4, 4)),
            (32, 1),
            "a column of a 32-wide f32 tile"
        );
        assert_eq!(
            wavefronts(&lanes(33 * 4, 4)),
            (1, 1),
            "padded to 33: conflict-free"
        );
        let broadcast: Vec<_> = (0..32).map(|_| (4096, 4)).collect();
        assert_eq!(wavefronts(&broadcast), (1, 1), "one word read by all lanes");
        assert_eq!(
            wavefronts(&lanes(16, 16)),
            (4, 4),
            "16-byte vectors in 4 conflict-free phases"
        );
    }
}
