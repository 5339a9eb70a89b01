//! Step 3: register blocking, with 16-byte loads.
//!
//! In step 2 every FMA needs two shared-memory loads: shared memory, not the FMA units, sets the
//! pace. Here a block of 256 threads computes a 128 x 128 tile of C, each thread an 8 x 8
//! sub-tile held in 64 registers. Per step of K a thread loads 8 values of A and 8 of B from
//! shared memory into registers and does their 64 outer-product FMAs: 4 FMAs per shared load
//! instead of 1/2. The larger block tile also cuts global traffic: strips are requested
//! `ceil(N / 128)` and `ceil(M / 128)` times, tile intensity (f32)
//! `2 * 128 * 128 / (4 * (128 + 128))` = 32 FLOP/B.
//!
//! Loads are 16 bytes wide (`ld.global.v4.f32`, `ld.shared.v4.f32`) wherever alignment allows: a
//! thread's 8 values of B for one k are two 16-byte shared loads, and A's tile is stored
//! transposed (k-major) so that its 8 values of A are contiguous too.

use super::{
    F32x4, REGISTER_BLOCKED, REGISTER_BLOCKED_THREADS, THREAD_TILE, at, inside, load4_or_zero,
    store4_c, unroll,
};
use crate::cuda::GlobalPtr;
use crate::cuda::intrinsics::{count_flops, fma};
use crate::cuda::thread::{block_idx_x, block_idx_y, sync_threads, thread_idx_x};
use crate::{kernel, shared_array};

const BM: u32 = REGISTER_BLOCKED.m;
const BN: u32 = REGISTER_BLOCKED.n;
const BK: u32 = REGISTER_BLOCKED.k;
/// A thread's sub-tile side (8 rows of A, 8 columns of B).
const TT: usize = THREAD_TILE as usize;
/// Sub-tiles per row of the block's tile.
const THREADS_N: u32 = BN / THREAD_TILE;
/// 4-element chunks per row of the A tile (BM x BK) and of the B tile (BK x BN).
const A_CHUNKS_PER_ROW: u32 = BK / 4;
const B_CHUNKS_PER_ROW: u32 = BN / 4;
// One 16-byte chunk of each tile per thread per step; a thread's 8 values are two chunks.
const _: () = assert!(BM * BK / 4 == REGISTER_BLOCKED_THREADS);
const _: () = assert!(BK * BN / 4 == REGISTER_BLOCKED_THREADS);
// The epilogue's `unroll!(i in 0..8)` and the two 4-wide halves of a row.
const _: () = assert!(THREAD_TILE == 8);
/// Chunks per shared tile.
const A_CHUNKS: usize = (BK * BM / 4) as usize;
const B_CHUNKS: usize = (BK * BN / 4) as usize;

kernel! {
    /// `C = A B (+ C)` for row-major f32 matrices (see [`gemm_naive_f32`](super::gemm_naive_f32)
    /// for the arguments). Launch: blocks of 256 threads (one dimension), `ceil(N / 128)` x
    /// `ceil(M / 128)` of them.
    pub unsafe fn gemm_register_blocked_f32(
        a: GlobalPtr<f32>,
        b: GlobalPtr<f32>,
        c: GlobalPtr<f32>,
        m: u32,
        n: u32,
        k: u32,
        accumulate: u32,
    ) {
        // a_t: the A tile transposed, [BK][BM], as BK rows of BM / 4 chunks.
        // b_s: the B tile, [BK][BN], as BK rows of BN / 4 chunks.
        let a_t = shared_array![gemm_rb_a: [F32x4; A_CHUNKS]];
        let b_s = shared_array![gemm_rb_b: [F32x4; B_CHUNKS]];
        let tid = thread_idx_x();
        let (row0, col0) = (block_idx_y() * BM, block_idx_x() * BN);
        // This thread's 8 x 8 sub-tile: rows ti..ti+8, columns tj..tj+8 of the block's tile.
        let (ti, tj) = (tid / THREADS_N * THREAD_TILE, tid % THREADS_N * THREAD_TILE);
        // This thread's chunk of each tile load: 4 values of K in row a_r of the A tile, 4
        // columns in row b_r of the B tile. Consecutive threads take consecutive chunks.
        let (a_r, a_k) = (tid / A_CHUNKS_PER_ROW, tid % A_CHUNKS_PER_ROW * 4);
        let (b_r, b_c) = (tid / B_CHUNKS_PER_ROW, tid % B_CHUNKS_PER_ROW * 4);
        // Of this thread's sub-tile, the part inside C: only it counts as FLOPs done.
        let useful = inside(row0 + ti, THREAD_TILE, m) * inside(col0 + tj, THREAD_TILE, n);
        let mut acc = [[0f32; TT]; TT];
        let mut k0 = 0;
        while k0 < k {
            // SAFETY: loads stay inside A and B (zero outside); each thread writes its own
            // chunk of b_s and its own column of a_t.
            unsafe {
                let av = load4_or_zero(a, row0 + a_r, k0 + a_k, m, k);
                let a_t = a_t.cast::<f32>();
                for (q, v) in av.iter().enumerate() {
                    a_t.write(at(a_k + q as u32, a_r, BM), *v);
                }
                let bv = load4_or_zero(b, k0 + b_r, col0 + b_c, k, n);
                b_s.write(at(b_r, b_c / 4, B_CHUNKS_PER_ROW), F32x4(bv));
            }
            sync_threads();
            for kk in 0..BK {
                // 8 values of A (column kk of the tile, rows ti..ti+8) and 8 of B (row kk,
                // columns tj..tj+8), two 16-byte shared loads each, then their outer product.
                // SAFETY: inside the tiles, written before the barrier.
                let (a_reg, b_reg) = unsafe {
                    let a_row = at(kk, ti / 4, BM / 4);
                    let b_row = at(kk, tj / 4, B_CHUNKS_PER_ROW);
                    (
                        concat(a_t.read(a_row), a_t.read(a_row + 1)),
                        concat(b_s.read(b_row), b_s.read(b_row + 1)),
                    )
                };
                for i in 0..TT {
                    for j in 0..TT {
                        acc[i][j] = fma(a_reg[i], b_reg[j], acc[i][j]);
                    }
                }
            }
            // Everyone is done with the tiles before the next step overwrites them.
            sync_threads();
            count_flops(2 * useful * inside(k0, BK, k));
            k0 += BK;
        }
        // Unrolled, so that every index into `acc` is a constant and it stays in registers.
        unroll!(i in 0..8 {
            unroll!(half in 0..2 {
                let j = 4 * half;
                let v = [acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]];
                let (row, col) = (row0 + ti + i as u32, col0 + tj + j as u32);
                // SAFETY: store4_c skips elements outside C; the sub-tile is this thread's alone.
                unsafe { store4_c(c, row, col, m, n, v, accumulate != 0) };
            });
        });
    }
}

/// Two 4-vectors as one 8-array.
#[inline(always)]
fn concat(lo: F32x4, hi: F32x4) -> [f32; TT] {
    let (lo, hi) = (lo.0, hi.0);
    [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]]
}
