//! Exercise 3, solved: a tree reduction in shared memory, a barrier between every two levels.

use crate::cuda::thread::{block_idx_x, index_1d, sync_threads, thread_idx_x};
use crate::cuda::{GlobalPtr, SharedPtr};
use crate::exercises::shapes::BLOCK_THREADS;
use crate::{kernel, shared_array};

kernel! {
    /// `partial[b] = x[b * 256] + ... + x[b * 256 + 255]` (elements past `n` count as 0).
    pub unsafe fn e03_block_sum(x: GlobalPtr<f32>, partial: GlobalPtr<f32>, n: u32) {
        let sums: SharedPtr<f32> = shared_array![sums: [f32; BLOCK_THREADS as usize]];
        let t = thread_idx_x() as usize;
        let i = index_1d();
        let v = if i < n { unsafe { x.read(i as usize) } } else { 0.0 };
        unsafe { sums.write(t, v) };
        // Every thread's write must land before any thread reads its neighbour's.
        sync_threads();
        let mut stride = BLOCK_THREADS as usize / 2;
        while stride > 0 {
            if t < stride {
                unsafe { sums.write(t, sums.read(t) + sums.read(t + stride)) };
            }
            // Outside the `if`: every thread of the block must reach the same barrier.
            sync_threads();
            stride /= 2;
        }
        if t == 0 {
            unsafe { partial.write(block_idx_x() as usize, sums.read(0)) };
        }
    }
}
