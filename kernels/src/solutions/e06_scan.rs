//! Exercise 6, solved: an inclusive scan of each block's 256 elements: a scan within each warp
//! by shuffles, the warps' totals scanned by the first warp through shared memory, then added.

use crate::cuda::thread::{index_1d, sync_threads, thread_idx_x};
use crate::cuda::warp::{FULL_MASK, WARP_SIZE, shuffle_up};
use crate::cuda::{GlobalPtr, SharedPtr};
use crate::exercises::shapes::BLOCK_THREADS;
use crate::{kernel, shared_array};

/// Warps per block.
const WARPS: usize = (BLOCK_THREADS / WARP_SIZE) as usize;

/// The inclusive scan of `v` over the warp's lanes (lane `l` gets lanes `0..=l`): at each step a
/// lane adds the value `offset` lanes below it, if there is one (Hillis and Steele).
#[inline(always)]
fn warp_scan(mut v: f32, lane: u32) -> f32 {
    let mut offset = 1;
    while offset < WARP_SIZE {
        let below = shuffle_up(FULL_MASK, v, offset);
        if lane >= offset {
            v += below;
        }
        offset *= 2;
    }
    v
}

kernel! {
    /// `out[i] = x[s] + x[s + 1] + ... + x[i]` where `s` is the first element of `i`'s block.
    pub unsafe fn e06_scan(x: GlobalPtr<f32>, out: GlobalPtr<f32>, n: u32) {
        let totals: SharedPtr<f32> = shared_array![totals: [f32; WARPS]];
        let t = thread_idx_x();
        let (warp, lane) = ((t / WARP_SIZE) as usize, t % WARP_SIZE);
        let i = index_1d();
        let v = if i < n { unsafe { x.read(i as usize) } } else { 0.0 };
        let within = warp_scan(v, lane);
        if lane == WARP_SIZE - 1 {
            unsafe { totals.write(warp, within) };
        }
        sync_threads();
        if warp == 0 {
            let total = if (lane as usize) < WARPS { unsafe { totals.read(lane as usize) } } else { 0.0 };
            // Each warp's total becomes the sum of the warps up to and including it (each lane
            // rewrites the word it read: no other thread touches it).
            let scanned = warp_scan(total, lane);
            if (lane as usize) < WARPS {
                unsafe { totals.write(lane as usize, scanned) };
            }
        }
        sync_threads();
        let before = if warp > 0 { unsafe { totals.read(warp - 1) } } else { 0.0 };
        if i < n {
            unsafe { out.write(i as usize, within + before) };
        }
    }
}
