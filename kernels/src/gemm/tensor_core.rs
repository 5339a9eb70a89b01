//! Step 4: warp-level tensor-core GEMM, bf16 or f16 in, f32 accumulated and out.
//!
//! Four changes over step 3, each for one level of the pyramid:
//!
//! - **Tensor cores** (registers): a warp computes 16 x 8 x 16 products with one `mma.sync`, its
//!   operands in registers in the PTX ISA's fragment layouts, loaded from shared memory by
//!   `ldmatrix` (8 rows of 16 bytes per matrix, four matrices per instruction). A block of 8
//!   warps computes a 128 x 128 tile of C, each warp a 64 x 32 tile: 4 x 4 `mma` tiles, 64 f32
//!   accumulators per thread.
//! - **A `cp.async` pipeline** (HBM to shared memory): tiles of A (128 x 64) and B (64 x 128) go
//!   straight from global to shared memory without passing through registers, three stages deep,
//!   so that two tiles are in flight while the tensor cores work on the third.
//! - **An XOR-swizzled shared layout** (shared memory): chunk `c` of row `r` is stored at chunk
//!   `c ^ (r % 8)`, so that the 8 rows an `ldmatrix` phase reads sit in 8 different bank groups
//!   ([`swizzle`](super::swizzle)).
//! - **Block rasterisation** (L2): blocks visit tiles in groups of 8 tile rows
//!   ([`raster`](super::raster)), so blocks running together share strips of A and B in L2.
//!
//! Edges: M is free (rows past it are zero-filled by `cp.async` with `src_bytes = 0`, and not
//! stored); K and N must be multiples of 8 so that every row of A and B starts on a 16-byte
//! boundary, which `cp.async` needs (the host refuses other shapes, saying so).

use super::{
    ELEMS_PER_CHUNK, TC_GROUP_M, TC_STAGES, TC_THREADS, TC_WARPS_M, TC_WARPS_N, TENSOR_CORE,
    accumulator_position, at, ldmatrix_x4_lane, raster, store_c, swizzled, unroll,
};
use crate::cuda::mma::{MmaInput, ldmatrix_x4, mma_m16n8k16};
use crate::cuda::pipeline::{
    CP_ASYNC_BYTES, cp_async_16, cp_async_commit_group, cp_async_wait_group,
};
use crate::cuda::shared::dynamic_shared_mem;
use crate::cuda::thread::{block_idx_x, sync_threads, thread_idx_x};
use crate::cuda::warp::WARP_SIZE;
use crate::cuda::{Bf16, F16, GlobalPtr, SharedPtr};
use crate::kernel;

const BM: u32 = TENSOR_CORE.m;
const BN: u32 = TENSOR_CORE.n;
const BK: u32 = TENSOR_CORE.k;
/// A warp's tile of C.
const WARP_M: u32 = BM / TC_WARPS_M;
const WARP_N: u32 = BN / TC_WARPS_N;
/// The shape of one `mma.m16n8k16`.
const MMA_M: u32 = 16;
const MMA_N: u32 = 8;
const MMA_K: u32 = 16;
/// `mma` tiles per warp tile, along M and N.
const MI: usize = (WARP_M / MMA_M) as usize;
const NI: usize = (WARP_N / MMA_N) as usize;
/// Elements per stage of each shared tile.
const A_STAGE: usize = (BM * BK) as usize;
const B_STAGE: usize = (BK * BN) as usize;

// Rows of both tiles are whole 128-byte lines (64 elements), so the swizzle spreads any 8
// consecutive rows over all 32 banks.
const _: () = assert!(BK.is_multiple_of(64) && BN.is_multiple_of(64));
// Each tile is an exact number of 16-byte chunks per thread.
const _: () = assert!((BM * BK / ELEMS_PER_CHUNK).is_multiple_of(TC_THREADS));
const _: () = assert!((BK * BN / ELEMS_PER_CHUNK).is_multiple_of(TC_THREADS));
// B fragments come in pairs of 8-column strips (one ldmatrix.x4.trans each).
const _: () = assert!(NI.is_multiple_of(2) && BK.is_multiple_of(MMA_K));
// The epilogue's unroll!(.. in 0..4) loops cover the 4 x 4 mma tiles of a warp tile.
const _: () = assert!(MI == 4 && NI == 4);
// The pipeline waits for all but STAGES - 2 groups: at least two stages.
const _: () = assert!(TC_STAGES >= 2);

kernel! {
    /// `C = A B (+ C)`: A (M x K) and B (K x N) bf16, C (M x N) f32, all row-major; K and N
    /// multiples of 8; `accumulate` 0 or 1. Launch: `ceil(M / 128) * ceil(N / 128)` blocks in one
    /// dimension, 256 threads each, [`TC_SHARED_BYTES`](super::TC_SHARED_BYTES) of dynamic
    /// shared memory.
    pub unsafe fn gemm_tensor_core_bf16(
        a: GlobalPtr<Bf16>,
        b: GlobalPtr<Bf16>,
        c: GlobalPtr<f32>,
        m: u32,
        n: u32,
        k: u32,
        accumulate: u32,
    ) {
        // SAFETY: the kernel's contract, passed on.
        unsafe { gemm_tensor_core(MmaInput::Bf16, a, b, c, m, n, k, accumulate != 0) }
    }
}

kernel! {
    /// [`gemm_tensor_core_bf16`] with f16 inputs.
    pub unsafe fn gemm_tensor_core_f16(
        a: GlobalPtr<F16>,
        b: GlobalPtr<F16>,
        c: GlobalPtr<f32>,
        m: u32,
        n: u32,
        k: u32,
        accumulate: u32,
    ) {
        // SAFETY: the kernel's contract, passed on.
        unsafe { gemm_tensor_core(MmaInput::F16, a, b, c, m, n, k, accumulate != 0) }
    }
}

/// The kernel body, for either 16-bit input type.
///
/// # Safety
/// The launch described at [`gemm_tensor_core_bf16`], with `T` a 2-byte type.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_tensor_core<T: Copy>(
    input: MmaInput,
    a: GlobalPtr<T>,
    b: GlobalPtr<T>,
    c: GlobalPtr<f32>,
    m: u32,
    n: u32,
    k: u32,
    accumulate: bool,
) {
    // Dynamic shared memory: TC_STAGES A tiles [BM][BK], then TC_STAGES B tiles [BK][BN], each
    // swizzled.
    let smem = dynamic_shared_mem::<T>();
    let a_stage = |s: u32| smem.offset(s as usize * A_STAGE);
    let b_stage = |s: u32| smem.offset(TC_STAGES as usize * A_STAGE + s as usize * B_STAGE);

    let tid = thread_idx_x();
    let (warp, lane) = (tid / WARP_SIZE, tid % WARP_SIZE);
    let (tile_m, tile_n) = raster(block_idx_x(), m.div_ceil(BM), n.div_ceil(BN), TC_GROUP_M);
    let (row0, col0) = (tile_m * BM, tile_n * BN);
    // This warp's 64 x 32 tile of the block's tile.
    let (wm, wn) = (warp / TC_WARPS_N * WARP_M, warp % TC_WARPS_N * WARP_N);
    let k_tiles = k.div_ceil(BK);
    // SAFETY (both loads): tiles are copied from inside A and B into this block's stages.
    let load = |kt: u32, stage: u32| unsafe {
        copy_tile_async(a_stage(stage), a, (row0, kt * BK), (BM, BK), (m, k), tid);
        copy_tile_async(b_stage(stage), b, (kt * BK, col0), (BK, BN), (k, n), tid);
    };

    // Prologue: tiles 0 .. STAGES - 1 in flight, one commit group each (empty past K's end, so
    // that every iteration below can count on the same number of groups).
    for s in 0..TC_STAGES - 1 {
        if s < k_tiles {
            load(s, s);
        }
        cp_async_commit_group();
    }
    // acc[mi][ni]: the 16 x 8 accumulator fragment of mma tile (mi, ni) of the warp's tile.
    let mut acc = [[[0f32; 4]; NI]; MI];
    for kt in 0..k_tiles {
        // Tile kt was committed STAGES - 1 groups ago: once at most STAGES - 2 groups are in
        // flight, it has landed, for this thread...
        cp_async_wait_group::<{ TC_STAGES - 2 }>();
        // ...and, after the barrier, for every thread. The barrier also means that every warp
        // has finished with tile kt - 1, whose stage the load below refills.
        sync_threads();
        let next = kt + TC_STAGES - 1;
        if next < k_tiles {
            load(next, next % TC_STAGES);
        }
        cp_async_commit_group();
        let stage = kt % TC_STAGES;
        // SAFETY: the stage holds tile kt, complete and visible to every thread.
        unsafe {
            warp_tile_mma(
                input,
                a_stage(stage),
                b_stage(stage),
                (wm, wn),
                lane,
                &mut acc,
            )
        };
    }

    // Epilogue: each register of each fragment to its element of C, inside C only. Unrolled, so
    // that every index into `acc` is a constant and it stays in registers.
    unroll!(mi in 0..4 {
        unroll!(ni in 0..4 {
            unroll!(i in 0..4 {
                let (r, col) = accumulator_position(lane, i as u32);
                let row = row0 + wm + mi as u32 * MMA_M + r;
                let col = col0 + wn + ni as u32 * MMA_N + col;
                // SAFETY: store_c skips elements outside C; each element has one owner lane.
                unsafe { store_c(c, row, col, m, n, acc[mi][ni][i], accumulate) };
            });
        });
    });
}

/// Starts copying the `rows` x `cols` tile at (`row0`, `col0`) of a `src_rows` x `src_cols`
/// row-major matrix of 2-byte elements into a swizzled shared tile, 16 bytes per `cp.async`,
/// the block's threads taking consecutive chunks (so a warp reads whole 128-byte lines).
///
/// `src_cols` is a multiple of 8, so a chunk is wholly inside the matrix or wholly outside; one
/// outside is zero-filled (`src_bytes = 0`) from the matrix's first address, which is not read.
///
/// # Safety
/// `src` must hold the whole matrix and `dst` a whole tile of this block's shared memory.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn copy_tile_async<T: Copy>(
    dst: SharedPtr<T>,
    src: GlobalPtr<T>,
    (row0, col0): (u32, u32),
    (rows, cols): (u32, u32),
    (src_rows, src_cols): (u32, u32),
    tid: u32,
) {
    let chunks_per_row = cols / ELEMS_PER_CHUNK;
    let mut q = tid;
    while q < rows * chunks_per_row {
        let (r, col) = (q / chunks_per_row, q % chunks_per_row * ELEMS_PER_CHUNK);
        let (src_row, src_col) = (row0 + r, col0 + col);
        let (from, bytes) = if src_row < src_rows && src_col < src_cols {
            (src.offset(at(src_row, src_col, src_cols)), CP_ASYNC_BYTES)
        } else {
            (src, 0)
        };
        // SAFETY: the caller's contract; `from` is 16-byte aligned since src_cols % 8 == 0.
        unsafe { cp_async_16(dst.offset(swizzled(r, col, cols)), from, bytes) };
        q += TC_THREADS;
    }
}

/// One stage's worth of the warp's work: for each 16-deep slice of the BK-deep tiles, the A
/// fragments of the warp's 4 strips of 16 rows and the B fragments of its 4 strips of 8 columns
/// come from shared memory with `ldmatrix`, and 16 `mma`s add their products to the accumulators.
///
/// # Safety
/// `a_s` and `b_s` must be complete swizzled tiles, visible to this warp; all 32 lanes call it.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn warp_tile_mma<T: Copy>(
    input: MmaInput,
    a_s: SharedPtr<T>,
    b_s: SharedPtr<T>,
    (wm, wn): (u32, u32),
    lane: u32,
    acc: &mut [[[f32; 4]; NI]; MI],
) {
    let (lane_row, lane_col) = ldmatrix_x4_lane(lane);
    for kk in 0..BK / MMA_K {
        let k0 = kk * MMA_K;
        // A: the 16 x 16 block (rows wm + 16 mi.., columns k0..) is exactly one A fragment.
        let a_frag: [[u32; 4]; MI] = core::array::from_fn(|mi| {
            let row = wm + mi as u32 * MMA_M + lane_row;
            // SAFETY: inside the tile; all lanes execute it.
            unsafe { ldmatrix_x4(a_s.offset(swizzled(row, k0 + lane_col, BK)), false) }
        });
        // B: the 16 x 16 block (rows k0.., columns wn + 16 nj..), transposed on the way, is the
        // B fragments of two 8-column strips: registers 0-1 the left one, 2-3 the right one.
        let mut b_frag = [[0u32; 2]; NI];
        for nj in 0..NI / 2 {
            let col = wn + nj as u32 * 2 * MMA_N + lane_col;
            // SAFETY: inside the tile; all lanes execute it.
            let x = unsafe { ldmatrix_x4(b_s.offset(swizzled(k0 + lane_row, col, BN)), true) };
            b_frag[2 * nj] = [x[0], x[1]];
            b_frag[2 * nj + 1] = [x[2], x[3]];
        }
        for (acc_m, a) in acc.iter_mut().zip(&a_frag) {
            for (fragment, b) in acc_m.iter_mut().zip(&b_frag) {
                *fragment = mma_m16n8k16(input, *a, *b, *fragment);
            }
        }
    }
}
