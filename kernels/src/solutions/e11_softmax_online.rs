//! Exercise 11, solved: one warp per row. Each lane keeps a running max and sum over its
//! columns (the online recurrence), the 32 lanes' pairs are merged by shuffles, and a second
//! pass writes the probabilities: two reads of the row instead of three.

use crate::cuda::GlobalPtr;
use crate::cuda::intrinsics::exp_approx;
use crate::cuda::thread::{block_idx_x, thread_idx_x};
use crate::cuda::warp::{FULL_MASK, WARP_SIZE, shuffle_xor};
use crate::exercises::shapes::SOFTMAX_THREADS;
use crate::kernel;

/// `exp(from - to)` for the rescale of a running sum from max `from` to max `to >= from`: 1
/// when they are equal, so that two lanes that saw no column (`-inf`) do not make a NaN.
#[inline(always)]
fn rescale(from: f32, to: f32) -> f32 {
    if from == to {
        1.0
    } else {
        exp_approx(from - to)
    }
}

kernel! {
    /// `out[r][c] = exp(x[r][c] - max_r) / sum_c' exp(x[r][c'] - max_r)` for a `rows x cols`
    /// row-major matrix of finite values.
    pub unsafe fn e11_softmax_online(x: GlobalPtr<f32>, out: GlobalPtr<f32>, rows: u32, cols: u32) {
        let t = thread_idx_x();
        let (warp, lane) = (t / WARP_SIZE, t % WARP_SIZE);
        let row = block_idx_x() * (SOFTMAX_THREADS / WARP_SIZE) + warp;
        // The whole warp takes this branch or none of it: the shuffles below see all 32 lanes.
        if row < rows {
            let base = row as usize * cols as usize;
            let (mut m, mut l) = (f32::NEG_INFINITY, 0.0f32);
            let mut c = lane as usize;
            while c < cols as usize {
                let v = unsafe { x.read(base + c) };
                if v > m {
                    l = l * rescale(m, v) + 1.0;
                    m = v;
                } else {
                    l += exp_approx(v - m);
                }
                c += WARP_SIZE as usize;
            }
            let mut offset = WARP_SIZE / 2;
            while offset > 0 {
                let (m2, l2) = (shuffle_xor(FULL_MASK, m, offset), shuffle_xor(FULL_MASK, l, offset));
                let mx = m.max(m2);
                l = l * rescale(m, mx) + l2 * rescale(m2, mx);
                m = mx;
                offset /= 2;
            }
            let mut c = lane as usize;
            while c < cols as usize {
                let v = unsafe { x.read(base + c) };
                unsafe { out.write(base + c, exp_approx(v - m) / l) };
                c += WARP_SIZE as usize;
            }
        }
    }
}
