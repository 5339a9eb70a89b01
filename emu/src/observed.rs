//! What a launch observed besides its counters: returned by the launch
//! ([`Emulator::launch_with`](crate::Emulator::launch_with)), never kept on the emulator, so
//! that what a caller reads is what its own launches saw, whatever else ran on the device.

use std::collections::BTreeMap;

use crate::profile::{self, Profile};
use crate::sample::SampledLaunch;
use crate::{BenignRace, DivergentBarrier, LastStore};

/// What one launch (or several, [`merged`](Observed::merge)) observed, each part only where
/// the launch's [`LaunchOptions`](crate::LaunchOptions) asked for it.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// Per kernel and access site, the warp-wide requests ([`LaunchOptions::profiling`](crate::LaunchOptions::profiling)).
    pub profile: Profile,
    /// The sampled launches ([`LaunchOptions::sampling`](crate::LaunchOptions::sampling)), in
    /// launch order.
    pub samples: Vec<SampledLaunch>,
    /// The benign races ([`BenignRace`]), in launch order and, within a launch, one per pair of
    /// sites, the first in block order. Each pair of sites is also printed once to standard
    /// error as a warning when an emulator first finds it.
    pub benign_races: Vec<BenignRace>,
    /// The block barriers that threads met at different instructions ([`DivergentBarrier`]),
    /// likewise in launch order, one per pair of sites within a launch, and printed once to
    /// standard error as a warning.
    pub divergent_barriers: Vec<DivergentBarrier>,
    /// The last store to the watched range ([`LaunchOptions::watch`](crate::LaunchOptions::watch));
    /// `None`: no store reached it.
    pub last_store: Option<LastStore>,
    /// Per kernel, executions per PTX instruction (its index in the decoded kernel), counted by
    /// the PTX backend when [`LaunchOptions::instruction_mix`](crate::LaunchOptions::instruction_mix)
    /// asks; the source emulator runs no PTX and leaves it empty.
    pub instruction_mix: BTreeMap<&'static str, Vec<u64>>,
}

impl Observed {
    /// Adds what a later launch observed (an operation makes several): profiles add up site by
    /// site, samples, benign races and divergent barriers follow in launch order, the later
    /// last store wins, and instruction counts add up per instruction.
    pub fn merge(&mut self, later: Observed) {
        for (kernel, sites) in later.profile.kernels {
            profile::merge(self.profile.kernels.entry(kernel).or_default(), sites);
        }
        self.samples.extend(later.samples);
        self.benign_races.extend(later.benign_races);
        self.divergent_barriers.extend(later.divergent_barriers);
        if later.last_store.is_some() {
            self.last_store = later.last_store;
        }
        for (kernel, counts) in later.instruction_mix {
            let mine = self.instruction_mix.entry(kernel).or_default();
            if mine.len() < counts.len() {
                mine.resize(counts.len(), 0);
            }
            for (m, c) in mine.iter_mut().zip(counts) {
                *m += c;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SiteStats;

    fn site(requests: u64) -> SiteStats {
        SiteStats {
            site: "k.rs:1:1".into(),
            space: "global".into(),
            access: "load".into(),
            requests,
            ..SiteStats::default()
        }
    }

    /// Two launches of one kernel add up: the same site's requests, each instruction's
    /// executions; the samples of both are kept in order.
    #[test]
    fn merge_adds_two_launches_of_one_kernel() {
        let launch = |requests, executions: Vec<u64>| Observed {
            profile: Profile {
                kernels: [("k".to_string(), vec![site(requests)])].into(),
            },
            instruction_mix: [("k", executions)].into(),
            ..Observed::default()
        };
        let mut all = launch(2, vec![1, 2]);
        all.merge(launch(3, vec![10, 20, 30]));
        assert_eq!(all.profile.kernels["k"], vec![site(5)]);
        assert_eq!(all.instruction_mix["k"], vec![11, 22, 30]);
        assert!(all.samples.is_empty() && all.last_store.is_none());
    }
}
