//! Exercise 9, solved: each block computes a 16 x 16 tile of C, staging a 16 x 16 tile of A and
//! one of B in shared memory per step of K, so that each element loaded from HBM is used 16
//! times.

use crate::cuda::intrinsics::count_flops;
use crate::cuda::thread::{block_idx_x, block_idx_y, sync_threads, thread_idx_x, thread_idx_y};
use crate::cuda::{GlobalPtr, SharedPtr};
use crate::exercises::shapes::MM_TILE;
use crate::{kernel, shared_array};

/// `m[r][c]` of a row-major matrix with `cols` columns, or 0 outside `rows x cols`: the zero
/// padding of the edge tiles.
#[inline(always)]
fn at_or_zero(m: GlobalPtr<f32>, (r, c): (usize, usize), (rows, cols): (usize, usize)) -> f32 {
    if r < rows && c < cols {
        unsafe { m.read(r * cols + c) }
    } else {
        0.0
    }
}

kernel! {
    /// `c = a b` for row-major `a` (`m x k`), `b` (`k x n`) and `c` (`m x n`).
    pub unsafe fn e09_matmul_tiled(a: GlobalPtr<f32>, b: GlobalPtr<f32>, c: GlobalPtr<f32>, m: u32, n: u32, k: u32) {
        let a_tile: SharedPtr<f32> = shared_array![a_tile: [f32; MM_TILE * MM_TILE]];
        let b_tile: SharedPtr<f32> = shared_array![b_tile: [f32; MM_TILE * MM_TILE]];
        let (tx, ty) = (thread_idx_x() as usize, thread_idx_y() as usize);
        let (m, n, k) = (m as usize, n as usize, k as usize);
        let row = block_idx_y() as usize * MM_TILE + ty;
        let col = block_idx_x() as usize * MM_TILE + tx;
        let mut acc = 0.0f32;
        for k0 in (0..k).step_by(MM_TILE) {
            // Each thread loads one element of each tile: a warp reads 16-float runs of rows.
            unsafe {
                a_tile.write(ty * MM_TILE + tx, at_or_zero(a, (row, k0 + tx), (m, k)));
                b_tile.write(ty * MM_TILE + tx, at_or_zero(b, (k0 + ty, col), (k, n)));
            }
            sync_threads();
            for kk in 0..MM_TILE {
                acc += unsafe { a_tile.read(ty * MM_TILE + kk) * b_tile.read(kk * MM_TILE + tx) };
            }
            // The next step overwrites the tiles: every thread must be done reading them.
            sync_threads();
        }
        if row < m && col < n {
            count_flops(2 * k as u32);
            unsafe { c.write(row * n + col, acc) };
        }
    }
}
