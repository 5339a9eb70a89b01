//! Step 2: shared-memory tiles.
//!
//! A block of 32 x 32 threads computes a 32 x 32 tile of C. It walks K in steps of 32: each
//! thread copies one element of a 32 x 32 tile of A and one of B into shared memory, the block
//! synchronises, and every thread reads a row of the A tile and a column of the B tile from
//! shared memory. Each element brought from global memory is now used 32 times, so the strips of
//! A and B are requested once per block: `ceil(N / 32)` times for A and `ceil(M / 32)` for B,
//! 32 times fewer than step 1. Tile intensity (f32): `2 * 32 * 32 / (4 * (32 + 32))` = 8 FLOP/B.

use super::{TILED, at, load_or_zero, store_c};
use crate::cuda::GlobalPtr;
use crate::cuda::intrinsics::{count_flops, fma};
use crate::cuda::thread::{block_idx_x, block_idx_y, sync_threads, thread_idx_x, thread_idx_y};
use crate::{kernel, shared_array};

/// The tile side: one thread per element of each tile, so the tile must be square in all three.
const T: u32 = TILED.m;
const _: () = assert!(TILED.m == TILED.n && TILED.n == TILED.k);
/// Elements per tile.
const TILE_ELEMS: usize = (T * T) as usize;

kernel! {
    /// `C = A B (+ C)` for row-major f32 matrices (see [`gemm_naive_f32`](super::gemm_naive_f32)
    /// for the arguments). Launch: blocks of 32 x 32 threads, `ceil(N / 32)` x `ceil(M / 32)`.
    pub unsafe fn gemm_tiled_f32(
        a: GlobalPtr<f32>,
        b: GlobalPtr<f32>,
        c: GlobalPtr<f32>,
        m: u32,
        n: u32,
        k: u32,
        accumulate: u32,
    ) {
        // a_tile: [T rows of A][T of K]; b_tile: [T of K][T columns of B], both row-major.
        let a_tile = shared_array![gemm_tiled_a: [f32; TILE_ELEMS]];
        let b_tile = shared_array![gemm_tiled_b: [f32; TILE_ELEMS]];
        let (tx, ty) = (thread_idx_x(), thread_idx_y());
        let (row, col) = (block_idx_y() * T + ty, block_idx_x() * T + tx);
        let mut acc = 0.0;
        let mut k0 = 0;
        while k0 < k {
            // Every thread stages one element of each tile, zero outside the matrices so that a
            // tile hanging over an edge adds nothing. Lanes (consecutive tx) read consecutive
            // addresses of both A and B: coalesced.
            // SAFETY: each thread writes its own slot; load_or_zero stays inside A and B.
            unsafe {
                a_tile.write(at(ty, tx, T), load_or_zero(a, row, k0 + tx, m, k));
                b_tile.write(at(ty, tx, T), load_or_zero(b, k0 + ty, col, k, n));
            }
            // The tiles are complete for everyone...
            sync_threads();
            for kk in 0..T {
                // A value is a broadcast across the warp (same ty); B values are consecutive words
                // in 32 different banks: no bank conflict.
                // SAFETY: inside the tiles, written before the barrier.
                acc = unsafe { fma(a_tile.read(at(ty, kk, T)), b_tile.read(at(kk, tx, T)), acc) };
            }
            // ...and nobody overwrites them with the next step's until everyone is done with them.
            sync_threads();
            k0 += T;
        }
        if row < m && col < n {
            count_flops(2 * k);
        }
        // SAFETY: store_c skips elements outside C; (row, col) belongs to this thread alone.
        unsafe { store_c(c, row, col, m, n, acc, accumulate != 0) };
    }
}
