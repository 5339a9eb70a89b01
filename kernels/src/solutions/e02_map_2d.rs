//! Exercise 2, solved: a two-dimensional grid over a row-major matrix, x along the row.

use crate::cuda::GlobalPtr;
use crate::cuda::thread::{
    block_dim_x, block_dim_y, block_idx_x, block_idx_y, thread_idx_x, thread_idx_y,
};
use crate::kernel;

kernel! {
    /// `out[r][c] = m[r][c] + bias[c]` for a `rows x cols` row-major matrix.
    pub unsafe fn e02_map_2d(m: GlobalPtr<f32>, bias: GlobalPtr<f32>, out: GlobalPtr<f32>, rows: u32, cols: u32) {
        // x is the fastest-varying thread index, so it walks along a row: a warp's 32 lanes
        // touch 32 consecutive floats.
        let c = block_idx_x() * block_dim_x() + thread_idx_x();
        let r = block_idx_y() * block_dim_y() + thread_idx_y();
        if r < rows && c < cols {
            let at = r as usize * cols as usize + c as usize;
            let v = unsafe { m.read(at) + bias.read(c as usize) };
            unsafe { out.write(at, v) };
        }
    }
}
