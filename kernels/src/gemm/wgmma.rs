//! Step 5: Hopper GEMM, bf16 or f16 in, f32 accumulated and out: TMA, an mbarrier pipeline,
//! warp specialisation and `wgmma`.
//!
//! What changes from step 4, level by level:
//!
//! - **HBM to shared memory: the TMA.** One thread of the *producer* warpgroup issues one
//!   `cp.async.bulk.tensor` per box (A: one 128 x 64 box, B: four 64 x 64 boxes); the copy engine
//!   computes the addresses, zero-fills whatever lies outside the matrix (so M, N and K need no
//!   edge code at all) and writes the tile in the 128-byte swizzle. Step 4 spent 256 threads and
//!   8 `cp.async` each per tile on that.
//! - **Synchronisation: mbarriers, not `sync_threads`.** Each of the 4 stages has a *full* barrier
//!   (1 arrival, the producer's `expect_tx`, plus the tile's bytes) and an *empty* barrier (256
//!   arrivals, every consumer thread). The producer waits on *empty*, the consumers on *full*;
//!   nobody waits for the whole block.
//! - **Shared memory to tensor cores: `wgmma`.** Each consumer warpgroup multiplies its 64 rows of
//!   the tile by the whole 64 x 256 B with 4 x 2 `wgmma.m64n128k16`, operands read by the tensor
//!   cores straight from shared memory through descriptors: no `ldmatrix`, no operand registers,
//!   so the 128 accumulators per thread are nearly all the consumer needs, and `setmaxnreg` moves
//!   the producer's unused registers to the consumers.
//! - **L2**: the tile order of step 4 ([`raster`](super::raster)).
//!
//! The stage cycle, for K tile `kt` in stage `s = kt % 4`, round `r = kt / 4`:
//!
//! ```text
//! producer:  wait empty[s] parity (r & 1) ^ 1   (round 0 passes at once: the phase "before" 0)
//!            arrive.expect_tx full[s], 48 KiB; TMA A, B -> stage s, complete_tx on full[s]
//! consumers: wait full[s] parity r & 1; wgmma x 8 on stage s; commit
//!            wait_group 1 (tile kt - 1's wgmmas are done) -> arrive empty[(kt - 1) % 4]
//! ```
//!
//! Only the sm_90a build has this kernel's instructions; the sm_80 and sm_90 builds keep the
//! entry point (every build has the same ones) with a body that traps, and the host launches it
//! only on an sm_90a device or the emulator.

#![cfg_attr(
    all(target_arch = "nvptx64", not(target_feature = "sm_90a")),
    allow(dead_code, unused_imports)
)]

use super::{
    TC_GROUP_M, WG_ALIGN, WG_BOX_COLS, WG_CONSUMERS, WG_STAGE_BYTES, WG_STAGES, WGMMA, raster,
    store_c, unroll,
};
use crate::cuda::mbarrier::{
    fence_mbarrier_init, mbarrier_arrive, mbarrier_arrive_expect_tx, mbarrier_init,
    mbarrier_wait_parity, ring_slot,
};
use crate::cuda::mma::MmaInput;
use crate::cuda::shared::{dynamic_shared_aligned, shared_address};
use crate::cuda::thread::{block_idx_x, sync_threads, thread_idx_x};
use crate::cuda::tma::{TensorMap, tma_load_2d};
use crate::cuda::wgmma::{
    Accumulator, B128_ATOM_BYTES, B128_ROW_BYTES, MatrixDescriptor, accumulator_position,
    k_major_b128, mn_major_b128, setmaxnreg_dec, setmaxnreg_inc, wgmma_commit_group, wgmma_fence,
    wgmma_ss, wgmma_wait_group,
};
use crate::cuda::{GlobalPtr, SharedPtr};
use crate::{kernel, launch_bounds};

const BM: u32 = WGMMA.m;
const BN: u32 = WGMMA.n;
const BK: u32 = WGMMA.k;
/// Threads of a warpgroup.
const WARPGROUP: u32 = 128;
/// Rows of A (and of C) per consumer warpgroup: one `wgmma.m64`.
const WG_M: u32 = BM / WG_CONSUMERS;
/// Depth of one `wgmma`.
const MMA_K: u32 = 16;
/// Bytes of one 128-byte-swizzled row, and of the 8-row group the pattern repeats over.
const ROW_BYTES: u32 = B128_ROW_BYTES;
const SWIZZLE_ATOM: u32 = B128_ATOM_BYTES;
/// Bytes of a stage's A tile and of one 64-column box of its B tile, and B's boxes per stage.
const A_BYTES: u32 = BM * BK * 2;
const B_BOX_BYTES: u32 = BK * WG_BOX_COLS * 2;
const B_BOXES: u32 = BN / WG_BOX_COLS;
/// Columns of one `wgmma`: the warpgroup's 64 x 256 tile is two `m64n128k16` wide. (One
/// `m64n256k16` would do the same work in half the instructions, but its 128-register accumulator
/// is one array LLVM leaves in local memory, which the two 64-register halves are not.)
const MMA_N: u32 = 128;
/// Accumulator registers per consumer thread for each of the two halves.
const ACC_REGS: usize = (WG_M * MMA_N / WARPGROUP) as usize;
/// Bytes from one half of a stage's B to the other: two boxes.
const B_HALF_BYTES: u32 = MMA_N / WG_BOX_COLS * B_BOX_BYTES;
/// Arrivals that release a stage: every consumer thread.
const CONSUMER_THREADS: u32 = WARPGROUP * WG_CONSUMERS;
/// Registers per thread after `setmaxnreg`: the producer keeps a few, the consumers take the rest
/// (128 x 40 + 256 x 232 = 64512 of the SM's 65536).
pub(crate) const PRODUCER_REGS: u32 = 40;
pub(crate) const CONSUMER_REGS: u32 = 232;

// One wgmma.m64 per consumer warpgroup, n256 covering the tile, K a whole swizzled row.
const _: () = assert!(WG_M == 64 && BN == 256 && BK * 2 == ROW_BYTES);
const _: () =
    assert!(BN.is_multiple_of(WG_BOX_COLS) && WG_STAGE_BYTES == A_BYTES + B_BOXES * B_BOX_BYTES);
// Two halves, and the epilogue's unroll!(.. in 0..2) x (0..16) x (0..4) covers them.
const _: () = assert!(BN == 2 * MMA_N && ACC_REGS == 64);
// Every box starts on a 1024-byte boundary.
const _: () =
    assert!(A_BYTES.is_multiple_of(SWIZZLE_ATOM) && B_BOX_BYTES.is_multiple_of(SWIZZLE_ATOM));
const _: () = assert!(WARPGROUP * PRODUCER_REGS + CONSUMER_THREADS * CONSUMER_REGS <= 65536);

kernel! {
    /// `C = A B (+ C)` on Hopper: A (M x K) and B (K x N) bf16 through tensor maps `a_map`
    /// (box 64 x 128, dimension 0 along K) and `b_map` (box 64 x 64, dimension 0 along N), both
    /// 128-byte swizzled; C (M x N) f32 row-major; `accumulate` 0 or 1. Launch:
    /// `ceil(M / 128) * ceil(N / 256)` blocks in one dimension, 384 threads each,
    /// [`WG_SHARED_BYTES`](super::WG_SHARED_BYTES) of dynamic shared memory; sm_90a only.
    pub unsafe fn gemm_wgmma_bf16(
        a_map: GlobalPtr<TensorMap>,
        b_map: GlobalPtr<TensorMap>,
        c: GlobalPtr<f32>,
        m: u32,
        n: u32,
        k: u32,
        accumulate: u32,
    ) {
        // SAFETY: the kernel's contract, passed on.
        unsafe { gemm_wgmma(MmaInput::Bf16, a_map, b_map, c, (m, n, k), accumulate != 0) }
    }
}

// One block of 384 threads per SM: the register cap at entry (65536 / 384 = 168 per thread)
// that `setmaxnreg` then redistributes, 40 to the producer and 232 to the consumers.
launch_bounds!(gemm_wgmma_bf16, super::WG_THREADS, 1);
launch_bounds!(gemm_wgmma_f16, super::WG_THREADS, 1);

kernel! {
    /// [`gemm_wgmma_bf16`] with f16 inputs.
    pub unsafe fn gemm_wgmma_f16(
        a_map: GlobalPtr<TensorMap>,
        b_map: GlobalPtr<TensorMap>,
        c: GlobalPtr<f32>,
        m: u32,
        n: u32,
        k: u32,
        accumulate: u32,
    ) {
        // SAFETY: the kernel's contract, passed on.
        unsafe { gemm_wgmma(MmaInput::F16, a_map, b_map, c, (m, n, k), accumulate != 0) }
    }
}

/// The builds without wgmma: nothing to run (the host never launches it there).
#[cfg(all(target_arch = "nvptx64", not(target_feature = "sm_90a")))]
#[inline(always)]
unsafe fn gemm_wgmma(
    _: MmaInput,
    _: GlobalPtr<TensorMap>,
    _: GlobalPtr<TensorMap>,
    _: GlobalPtr<f32>,
    _: (u32, u32, u32),
    _: bool,
) {
    // SAFETY: stops the kernel; the driver reports it.
    unsafe { core::arch::nvptx::trap() }
}

/// The kernel body, for either 16-bit input type.
///
/// # Safety
/// The launch described at [`gemm_wgmma_bf16`].
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
#[inline(always)]
unsafe fn gemm_wgmma(
    input: MmaInput,
    a_map: GlobalPtr<TensorMap>,
    b_map: GlobalPtr<TensorMap>,
    c: GlobalPtr<f32>,
    (m, n, k): (u32, u32, u32),
    accumulate: bool,
) {
    let stages = Stages::new();
    let tid = thread_idx_x();
    let (tile_m, tile_n) = raster(block_idx_x(), m.div_ceil(BM), n.div_ceil(BN), TC_GROUP_M);
    let (row0, col0) = (tile_m * BM, tile_n * BN);
    let k_tiles = k.div_ceil(BK);

    if tid == 0 {
        for s in 0..WG_STAGES {
            // SAFETY: the barriers' own 8 bytes each, initialised once before anyone uses them.
            unsafe {
                mbarrier_init(stages.full(s), 1);
                mbarrier_init(stages.empty(s), CONSUMER_THREADS);
            }
        }
        // The copy engine must see the initialised barriers too.
        fence_mbarrier_init();
    }
    sync_threads();

    // Warp specialisation: one role per warpgroup, each role one branch (setmaxnreg needs that).
    if tid < WARPGROUP {
        setmaxnreg_dec::<PRODUCER_REGS>();
        if tid == 0 {
            // SAFETY: the maps describe A and B; the stages are this block's.
            unsafe { produce(&stages, a_map, b_map, (row0, col0), k_tiles) };
        }
    } else {
        setmaxnreg_inc::<CONSUMER_REGS>();
        let wg = tid / WARPGROUP - 1;
        // SAFETY: the stages are filled by the producer and released as `consume` says.
        let acc = unsafe { consume(&stages, input, wg, k_tiles) };
        // Epilogue: every register to its element of C, inside C only.
        let t = tid % WARPGROUP;
        unroll!(h in 0..2 {
            let regs = acc[h].read();
            let col_h = col0 + h as u32 * MMA_N;
            unroll!(j in 0..16 {
                unroll!(q in 0..4 {
                    let i = 4 * j + q;
                    let (r, col) = accumulator_position(t, i as u32);
                    // SAFETY: store_c skips elements outside C; each element has one owner.
                    unsafe { store_c(c, row0 + wg * WG_M + r, col_h + col, m, n, regs[i], accumulate) };
                });
            });
        });
    }
}

/// The block's shared memory: `WG_STAGES` A tiles, then `WG_STAGES` B tiles, then the full and
/// empty barriers, from the first 1024-byte boundary of dynamic shared memory.
#[derive(Clone, Copy)]
struct Stages {
    base: SharedPtr<u8>,
}

impl Stages {
    #[inline(always)]
    fn new() -> Self {
        Self {
            base: dynamic_shared_aligned(WG_ALIGN),
        }
    }

    fn a(self, s: u32) -> SharedPtr<u8> {
        self.base.offset((s * A_BYTES) as usize)
    }

    fn b(self, s: u32) -> SharedPtr<u8> {
        self.base
            .offset((WG_STAGES * A_BYTES + s * B_BOXES * B_BOX_BYTES) as usize)
    }

    fn barriers(self) -> SharedPtr<u64> {
        self.base
            .offset((WG_STAGES * WG_STAGE_BYTES) as usize)
            .cast()
    }

    /// Stage `s` holds its tile: completed by the producer's arrival and the tile's bytes.
    fn full(self, s: u32) -> SharedPtr<u64> {
        self.barriers().offset(s as usize)
    }

    /// Stage `s` may be refilled: completed by every consumer thread's arrival.
    fn empty(self, s: u32) -> SharedPtr<u64> {
        self.barriers().offset((WG_STAGES + s) as usize)
    }
}

/// The stage and the phase parity of the round in which K tile `kt` passes through it.
#[inline(always)]
pub const fn stage_of(kt: u32) -> (u32, u32) {
    ring_slot(kt, WG_STAGES)
}

/// The producer (one thread): for every K tile, wait until its stage is empty, announce the
/// stage's bytes on its full barrier, and have the TMA bring A's 128 x 64 box and B's four 64 x 64
/// boxes. Out-of-bounds elements arrive as zeros, so the edges need nothing here.
///
/// # Safety
/// `a_map` and `b_map` are the kernel's maps; `stages` is this block's, barriers initialised.
#[inline(always)]
unsafe fn produce(
    stages: &Stages,
    a_map: GlobalPtr<TensorMap>,
    b_map: GlobalPtr<TensorMap>,
    (row0, col0): (u32, u32),
    k_tiles: u32,
) {
    for kt in 0..k_tiles {
        let (s, parity) = stage_of(kt);
        let k0 = (kt * BK) as i32;
        // SAFETY: the stage is refilled only after every consumer released it.
        unsafe {
            mbarrier_wait_parity(stages.empty(s), parity ^ 1);
            mbarrier_arrive_expect_tx(stages.full(s), WG_STAGE_BYTES);
            // A's box: dimension 0 along K, dimension 1 along M.
            tma_load_2d(stages.a(s), a_map, k0, row0 as i32, stages.full(s));
            // B's boxes: dimension 0 along N (64 columns each), dimension 1 along K.
            for j in 0..B_BOXES {
                let dst = stages.b(s).offset((j * B_BOX_BYTES) as usize);
                let n0 = (col0 + j * WG_BOX_COLS) as i32;
                tma_load_2d(dst, b_map, n0, k0, stages.full(s));
            }
        }
    }
}

/// One consumer warpgroup (`wg`, rows `64 wg..` of the tile): for every K tile, wait until its
/// stage is full, multiply with 4 x 2 `wgmma.m64n128k16` (four K slices, two column halves),
/// and release the *previous* stage once
/// its `wgmma`s are known done (one group stays in flight, overlapping the next wait).
///
/// # Safety
/// `stages` is this block's; the producer fills them as [`produce`] does. All 128 threads of the
/// warpgroup call it.
#[inline(always)]
unsafe fn consume(
    stages: &Stages,
    input: MmaInput,
    wg: u32,
    k_tiles: u32,
) -> [Accumulator<ACC_REGS>; 2] {
    let mut acc = [Accumulator::zero(); 2];
    // The zeroing stays before the first `wgmma_fence` (see `fence_operand`).
    acc.iter_mut().for_each(Accumulator::fence_operand);
    for kt in 0..k_tiles {
        let (s, parity) = stage_of(kt);
        // SAFETY: the full barrier's phase brings the whole stage.
        unsafe { mbarrier_wait_parity(stages.full(s), parity) };
        wgmma_fence();
        let a0 = shared_address(stages.a(s)) + wg * WG_M * ROW_BYTES;
        let b0 = shared_address(stages.b(s));
        for kk in 0..BK / MMA_K {
            let a = a_descriptor(a0, kk);
            unroll!(h in 0..2 {
                let b = b_descriptor(b0 + h as u32 * B_HALF_BYTES, kk);
                // SAFETY: the stage is full and is not refilled before this group completes.
                unsafe { wgmma_ss(input, a, b, true, &mut acc[h]) };
            });
        }
        wgmma_commit_group();
        wgmma_wait_group::<1>();
        if kt > 0 {
            // SAFETY: tile kt - 1's group has completed: its stage may be refilled.
            unsafe { mbarrier_arrive(stages.empty(stage_of(kt - 1).0)) };
        }
    }
    wgmma_wait_group::<0>();
    // And the epilogue's reads after the last `wait_group`.
    acc.iter_mut().for_each(Accumulator::fence_operand);
    acc
}

/// A's descriptor for K slice `kk` (16 deep) of the warpgroup's 64 x 64 part of a stage at
/// `.shared` address `a0`: K-major, 128-byte swizzle ([`k_major_b128`]).
#[inline(always)]
pub const fn a_descriptor(a0: u32, kk: u32) -> MatrixDescriptor {
    k_major_b128(a0, kk)
}

/// B's descriptor for K slice `kk` of 128 columns of a stage's B at `.shared` address `b0` (the
/// first box of them): MN-major (row-major B, N contiguous), 128-byte swizzle, each K row 128
/// bytes of 64 columns, the next 64 columns one box further ([`mn_major_b128`]).
#[inline(always)]
pub const fn b_descriptor(b0: u32, kk: u32) -> MatrixDescriptor {
    mn_major_b128(b0, kk, B_BOX_BYTES)
}
