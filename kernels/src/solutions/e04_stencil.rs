//! Exercise 4, solved: each block stages its elements and a halo of `R` on each side in shared
//! memory, so every input is read from HBM once although three threads use it.

use crate::cuda::thread::{block_dim_x, index_1d, sync_threads, thread_idx_x};
use crate::cuda::{GlobalPtr, SharedPtr};
use crate::exercises::shapes::{MAP_THREADS, STENCIL_RADIUS};
use crate::{kernel, shared_array};

/// `x[i]`, or 0 outside `0..n` (the stencil's boundary condition).
#[inline(always)]
fn at_or_zero(x: GlobalPtr<f32>, i: i64, n: u32) -> f32 {
    if i >= 0 && i < i64::from(n) {
        unsafe { x.read(i as usize) }
    } else {
        0.0
    }
}

kernel! {
    /// `out[i] = (x[i - 1] + x[i] + x[i + 1]) / 3`, with `x` taken as 0 outside `0..n`.
    pub unsafe fn e04_stencil(x: GlobalPtr<f32>, out: GlobalPtr<f32>, n: u32) {
        const R: usize = STENCIL_RADIUS;
        let tile: SharedPtr<f32> = shared_array![tile: [f32; MAP_THREADS as usize + 2 * STENCIL_RADIUS]];
        let t = thread_idx_x() as usize;
        let i = i64::from(index_1d());
        // Element i sits at tile[t + R]; the first R threads also fetch the halos.
        unsafe { tile.write(t + R, at_or_zero(x, i, n)) };
        if t < R {
            let left = i - R as i64;
            let right = i + i64::from(block_dim_x());
            unsafe {
                tile.write(t, at_or_zero(x, left, n));
                tile.write(t + block_dim_x() as usize + R, at_or_zero(x, right, n));
            }
        }
        sync_threads();
        if i < i64::from(n) {
            let sum = unsafe { tile.read(t) + tile.read(t + 1) + tile.read(t + 2) };
            unsafe { out.write(i as usize, sum * (1.0 / 3.0)) };
        }
    }
}
