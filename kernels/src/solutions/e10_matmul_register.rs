//! Exercise 10, solved: a block computes a 64 x 64 tile of C, each of its 256 threads a 4 x 4
//! block of outputs in registers. Per step of 16 along K, a thread reads 4 values of A and 4 of
//! B from shared memory and does 16 multiply-adds with them: 4 times the arithmetic per shared
//! read of exercise 9, and each element loaded from HBM is used 64 times.

use crate::cuda::intrinsics::count_flops;
use crate::cuda::thread::{block_idx_x, block_idx_y, sync_threads, thread_idx_x};
use crate::cuda::{GlobalPtr, SharedPtr};
use crate::exercises::shapes::{RB_K, RB_PER_THREAD, RB_THREADS, RB_TILE};
use crate::{kernel, shared_array};

/// Threads along each side of the block's tile.
const SIDE: usize = RB_TILE / RB_PER_THREAD;

/// `m[r][c]` of a row-major matrix with `cols` columns, or 0 outside `rows x cols`.
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
    pub unsafe fn e10_matmul_register(a: GlobalPtr<f32>, b: GlobalPtr<f32>, c: GlobalPtr<f32>, m: u32, n: u32, k: u32) {
        // A's tile is stored transposed (`[kk][row]`), so that both tiles are read along rows.
        let a_tile: SharedPtr<f32> = shared_array![a_tile: [f32; RB_K * RB_TILE]];
        let b_tile: SharedPtr<f32> = shared_array![b_tile: [f32; RB_K * RB_TILE]];
        let t = thread_idx_x() as usize;
        let (tx, ty) = (t % SIDE, t / SIDE);
        let (m, n, k) = (m as usize, n as usize, k as usize);
        let (row0, col0) = (block_idx_y() as usize * RB_TILE, block_idx_x() as usize * RB_TILE);
        // Thread (tx, ty) owns rows ty + 16 i and columns tx + 16 j: the 16 lanes with one ty
        // read 16 consecutive floats of a tile row (16 banks, no conflict).
        let mut acc = [[0.0f32; RB_PER_THREAD]; RB_PER_THREAD];
        for k0 in (0..k).step_by(RB_K) {
            // 1024 elements of each tile, 4 per thread; consecutive threads take consecutive
            // elements of a row in HBM (coalesced).
            let mut e = t;
            while e < RB_K * RB_TILE {
                let (ar, ak) = (e / RB_K, e % RB_K);
                let (bk, bc) = (e / RB_TILE, e % RB_TILE);
                unsafe {
                    a_tile.write(ak * RB_TILE + ar, at_or_zero(a, (row0 + ar, k0 + ak), (m, k)));
                    b_tile.write(bk * RB_TILE + bc, at_or_zero(b, (k0 + bk, col0 + bc), (k, n)));
                }
                e += RB_THREADS as usize;
            }
            sync_threads();
            for kk in 0..RB_K {
                let mut av = [0.0f32; RB_PER_THREAD];
                let mut bv = [0.0f32; RB_PER_THREAD];
                for i in 0..RB_PER_THREAD {
                    av[i] = unsafe { a_tile.read(kk * RB_TILE + ty + SIDE * i) };
                    bv[i] = unsafe { b_tile.read(kk * RB_TILE + tx + SIDE * i) };
                }
                for i in 0..RB_PER_THREAD {
                    for j in 0..RB_PER_THREAD {
                        acc[i][j] += av[i] * bv[j];
                    }
                }
            }
            sync_threads();
        }
        for (i, acc_row) in acc.iter().enumerate() {
            for (j, &v) in acc_row.iter().enumerate() {
                let (r, col) = (row0 + ty + SIDE * i, col0 + tx + SIDE * j);
                if r < m && col < n {
                    count_flops(2 * k as u32);
                    unsafe { c.write(r * n + col, v) };
                }
            }
        }
    }
}
