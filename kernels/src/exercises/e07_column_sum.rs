//! # Exercise 7: column sums, and coalescing
//!
//! Write `out[c] = m[0][c] + m[1][c] + ... + m[rows - 1][c]` for a `rows x cols` row-major
//! matrix, adding the rows in order.
//!
//! The host launches `ceil(cols / 256)` blocks of [`COLUMN_THREADS`](super::shapes::COLUMN_THREADS)
//! = 256 threads: one thread per column.
//!
//! Why it matters: at each step of its loop, a warp's 32 threads read 32 floats of one row:
//! adjacent in memory, four 32-byte sectors per warp-wide load, every byte fetched used.
//! Give each thread a row instead (or walk the matrix by columns) and a warp's 32 loads land in
//! 32 different rows, one sector each: 8 times the traffic through L1 and L2 for the same bytes.
//! `cargo xtask exercise 7` prints the sectors per request the emulator counted
//! (docs/coalescing.md).
//!
//! Check it: `cargo xtask exercise 7`.

use crate::cuda::GlobalPtr;
use crate::kernel;

kernel! {
    /// `out[c] = m[0][c] + m[1][c] + ... + m[rows - 1][c]` for a `rows x cols` row-major matrix.
    pub unsafe fn e07_column_sum(m: GlobalPtr<f32>, out: GlobalPtr<f32>, rows: u32, cols: u32) {
        // TODO: your kernel.
        let _ = (m, out, rows, cols);
    }
}
