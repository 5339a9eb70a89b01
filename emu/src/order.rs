//! Happens-before between the lanes of a warp: what `__syncwarp` (`bar.warp.sync`) orders.
//!
//! The PTX ISA gives `bar.warp.sync` the memory ordering of a barrier among the lanes of its
//! mask: an access a lane made before it is visible to every other lane of the mask after it.
//! A block-wide barrier orders everything (the race shadows start a new interval there); between
//! two barriers, two lanes of one warp are ordered only through a chain of `__syncwarp`s.
//!
//! That chain is tracked with vector clocks, one per thread over the 32 lanes of its warp. Each
//! thread's *epoch* counts the `__syncwarp`s it has passed; its clock says, for every lane of its
//! warp, the latest epoch of that lane it has synchronised with (directly or through others). An
//! access thread `t` made at epoch `a` is ordered before thread `u`'s access at epoch `b` exactly
//! when `u`'s clock at `b` knows an epoch of `t` later than `a`. A kernel that never calls
//! `__syncwarp` costs nothing here: every thread stays at epoch 0 and no clock is stored (nor a
//! per-thread history, made at the block's first `__syncwarp`).

const WARP: usize = 32;

/// A lane's clock: the latest epoch of every lane of its warp it has synchronised with.
type Clock = [u32; WARP];

/// The vector clocks of one block's threads.
#[derive(Default)]
pub(super) struct WarpOrder {
    /// `history[t][e - 1]`: thread `t`'s clock from its epoch `e` on (epoch 0 knows nothing);
    /// empty until the first `__syncwarp`.
    history: Vec<Vec<Clock>>,
    /// Threads of the block.
    threads: usize,
    /// Whether any thread passed a `__syncwarp` (until then only program order orders).
    synced: bool,
}

impl WarpOrder {
    pub(super) fn new(threads: usize) -> Self {
        Self {
            history: Vec::new(),
            threads,
            synced: false,
        }
    }

    /// How many `__syncwarp`s thread `t` has passed.
    #[inline]
    pub(super) fn epoch(&self, t: usize) -> u32 {
        self.history.get(t).map_or(0, |h| h.len() as u32)
    }

    /// Whether any thread passed a `__syncwarp`.
    pub(super) fn any_sync(&self) -> bool {
        self.synced
    }

    /// Thread `t`'s clock at epoch `e`.
    fn clock(&self, t: usize, e: u32) -> Clock {
        match e {
            0 => [0; WARP],
            e => self.history[t][e as usize - 1],
        }
    }

    /// What thread `t`'s clock at epoch `e` knows of lane `lane`.
    fn knows(&self, t: usize, e: u32, lane: usize) -> u32 {
        match e {
            0 => 0,
            e => self.history[t][e as usize - 1][lane],
        }
    }

    /// The lanes of `mask` in the warp starting at thread `base` passed one `__syncwarp`: each
    /// moves to its next epoch and learns everything every other one knew.
    pub(super) fn sync(&mut self, base: usize, mask: u32) {
        let threads = self.threads;
        if self.history.is_empty() {
            self.history.resize_with(threads, Vec::new);
        }
        let lanes = (0..WARP).filter(move |l| mask & (1 << l) != 0 && base + l < threads);
        let mut joined = [0; WARP];
        for l in lanes.clone() {
            let t = base + l;
            let clock = self.clock(t, self.epoch(t));
            for (j, c) in joined.iter_mut().zip(clock) {
                *j = (*j).max(c);
            }
            joined[l] = self.epoch(t) + 1;
        }
        for l in lanes {
            self.history[base + l].push(joined);
        }
        self.synced = true;
    }

    /// Whether thread `t`'s access at epoch `a` is ordered before thread `u`'s at epoch `b` by
    /// `__syncwarp`s alone (program order for one thread, nothing across warps).
    pub(super) fn before(&self, t: usize, a: u32, u: usize, b: u32) -> bool {
        t == u || (self.synced && t / WARP == u / WARP && self.knows(u, b, t % WARP) > a)
    }

    /// Whether the two accesses are ordered either way.
    pub(super) fn ordered(&self, t: usize, a: u32, u: usize, b: u32) -> bool {
        self.before(t, a, u, b) || self.before(u, b, t, a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_syncwarp_orders_the_lanes_of_its_mask_and_no_others() {
        let mut o = WarpOrder::new(64);
        // Lanes 0 and 1 access at epoch 0; nothing orders them yet.
        assert!(!o.ordered(0, 0, 1, 0));
        o.sync(0, 0b11);
        // Lane 0's access before the sync is ordered before lane 1's after it, not the reverse.
        assert!(o.before(0, 0, 1, 1));
        assert!(!o.before(1, 1, 0, 1));
        // Lane 2 was not in the mask; warp 1 is another warp.
        assert!(!o.before(0, 0, 2, 0));
        assert!(!o.before(0, 0, 33, 0));
    }

    #[test]
    fn ordering_is_transitive_through_a_chain_of_syncwarps() {
        let mut o = WarpOrder::new(32);
        o.sync(0, 0b011); // lanes 0 and 1
        o.sync(0, 0b110); // lanes 1 and 2
        // Lane 0's access at epoch 0 reaches lane 2 through lane 1.
        assert!(o.before(0, 0, 2, o.epoch(2)));
        // Lane 0's access after its only sync (epoch 1) is not ordered before lane 2.
        assert!(!o.before(0, 1, 2, o.epoch(2)));
    }
}
