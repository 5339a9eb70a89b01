//! # Exercise 2: two-dimensional indexing
//!
//! Write `out[r][c] = m[r][c] + bias[c]` for a `rows x cols` row-major matrix (element `(r, c)`
//! at `r * cols + c`), one thread per element.
//!
//! The host launches a two-dimensional grid of blocks of [`MAP_2D_X`](super::shapes::MAP_2D_X)
//! x [`MAP_2D_Y`](super::shapes::MAP_2D_Y) = 32 x 8 threads: `blockIdx.x` and `threadIdx.x` run
//! along a row (columns), `y` down the rows. Both edges need a guard: neither `rows` nor `cols`
//! is a multiple of the block.
//!
//! Why it matters: a warp is 32 consecutive `threadIdx.x`. With x along the row, its 32 loads
//! are 32 consecutive floats, 128 bytes, four whole sectors; swap x and y and each load of the
//! warp is a different row, a sector each (docs/coalescing.md). The bias is read by every row:
//! it stays in L2 (docs/pyramid.md).
//!
//! Helpers: `crate::cuda::thread::{block_idx_x, block_idx_y, block_dim_x, block_dim_y,
//! thread_idx_x, thread_idx_y}`.
//!
//! Check it: `cargo xtask exercise 2`.

use crate::cuda::GlobalPtr;
use crate::kernel;

kernel! {
    /// `out[r][c] = m[r][c] + bias[c]` for a `rows x cols` row-major matrix.
    pub unsafe fn e02_map_2d(m: GlobalPtr<f32>, bias: GlobalPtr<f32>, out: GlobalPtr<f32>, rows: u32, cols: u32) {
        // TODO: your kernel.
        let _ = (m, bias, out, rows, cols);
    }
}
