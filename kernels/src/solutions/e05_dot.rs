//! Exercise 5, solved: each warp sums its 32 products in registers with shuffles, and only the
//! eight warp sums go through shared memory.

use crate::cuda::thread::{block_idx_x, index_1d, sync_threads, thread_idx_x};
use crate::cuda::warp::{FULL_MASK, WARP_SIZE, shuffle_down};
use crate::cuda::{GlobalPtr, SharedPtr};
use crate::exercises::shapes::BLOCK_THREADS;
use crate::{kernel, shared_array};

/// Warps per block.
const WARPS: usize = (BLOCK_THREADS / WARP_SIZE) as usize;

/// The sum of `v` over the warp's 32 lanes, in lane 0: five steps of `shuffle_down`, every lane
/// taking part in each (the full mask).
#[inline(always)]
fn warp_sum(mut v: f32) -> f32 {
    let mut offset = WARP_SIZE / 2;
    while offset > 0 {
        v += shuffle_down(FULL_MASK, v, offset);
        offset /= 2;
    }
    v
}

kernel! {
    /// `partial[b] = sum of x[i] * y[i]` over block `b`'s 256 elements (past `n`: 0).
    pub unsafe fn e05_dot(x: GlobalPtr<f32>, y: GlobalPtr<f32>, partial: GlobalPtr<f32>, n: u32) {
        let warp_sums: SharedPtr<f32> = shared_array![warp_sums: [f32; WARPS]];
        let t = thread_idx_x();
        let (warp, lane) = ((t / WARP_SIZE) as usize, t % WARP_SIZE);
        let i = index_1d();
        let p = if i < n {
            unsafe { x.read(i as usize) * y.read(i as usize) }
        } else {
            0.0
        };
        let s = warp_sum(p);
        if lane == 0 {
            unsafe { warp_sums.write(warp, s) };
        }
        sync_threads();
        // The first warp sums the eight warp sums (its other lanes add zeros).
        if warp == 0 {
            let v = if (lane as usize) < WARPS { unsafe { warp_sums.read(lane as usize) } } else { 0.0 };
            let total = warp_sum(v);
            if lane == 0 {
                unsafe { partial.write(block_idx_x() as usize, total) };
            }
        }
    }
}
