//! Exercise 7, solved: one thread per column, walking down the rows, so that at every step a
//! warp reads 32 consecutive floats of one row: whole 32-byte sectors (coalesced).

use crate::cuda::GlobalPtr;
use crate::cuda::thread::index_1d;
use crate::kernel;

kernel! {
    /// `out[c] = m[0][c] + m[1][c] + ... + m[rows - 1][c]` for a `rows x cols` row-major matrix.
    pub unsafe fn e07_column_sum(m: GlobalPtr<f32>, out: GlobalPtr<f32>, rows: u32, cols: u32) {
        let c = index_1d();
        if c < cols {
            let mut sum = 0.0f32;
            for r in 0..rows as usize {
                sum += unsafe { m.read(r * cols as usize + c as usize) };
            }
            unsafe { out.write(c as usize, sum) };
        }
    }
}
