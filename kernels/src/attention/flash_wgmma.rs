//! FlashAttention forward on Hopper (sm_90a), FlashAttention-3's structure: the TMA streams K
//! and V through an mbarrier ring, a producer warpgroup feeds two consumer warpgroups, and both
//! products run on `wgmma`. bf16 or f16 Q, K, V; f32 accumulation; O in the input type, LSE f32.
//!
//! The recurrence is [`flash_mma`](super::flash_mma)'s (and [`flash_f32`](super::flash_f32)'s)
//! line for line; what changes is who moves the tiles and who multiplies them, level by level:
//!
//! - **HBM to shared memory: the TMA.** One thread of the producer warpgroup issues one
//!   `cp.async.bulk.tensor` per 64-column box (`d / 64` per tile): Q's `BR x d` once, then K's
//!   and V's `BC x d` tiles, into a ring of [`STAGES`] stages. Each head has its own tensor maps
//!   (`n_q` or `n_kv` rows), so a tile past the end of the sequence is zero-filled by the copy
//!   engine, not read from the next head; the mask below takes care of the scores of those
//!   zero keys. `flash_mma` spent 128 threads and `d / 8` `cp.async` each per tile on that.
//! - **Synchronisation: mbarriers.** Q has one *full* barrier; every stage a *K-full* and a
//!   *V-full* barrier (the producer's `expect_tx` plus the tile's bytes: `S = Q K^T` may start
//!   while V is still landing) and an *empty* barrier (256 arrivals, every consumer thread, once
//!   `P V` of the tile is done).
//! - **Shared memory to tensor cores: `wgmma`.** Each consumer warpgroup owns 64 query rows
//!   (`wgmma.m64`): `S = Q K^T` is `d / 16` `wgmma.m64n128k16` with Q (A) and K (B, K-major:
//!   a key's `d` values are contiguous) read from shared memory through descriptors. The 64 x
//!   128 S lands in the warpgroup's registers in the accumulator layout, where the online
//!   softmax runs (nothing goes back to shared memory), and P, rounded to 16 bits, is already
//!   in the layout of `wgmma`'s *register* A operand: `O += P V` is 8 `wgmma.m64n{d}k16` in the
//!   RS form, V read from shared memory as an MN-major B (`imm-trans-b`: V's rows are keys, the
//!   reduction, with `d` contiguous). P never touches shared memory: that would cost a store, a
//!   fence and a barrier per tile, and the 32 KiB that hold a K/V stage.
//!
//! The stage cycle, for key tile `j` in stage `s = j % STAGES`, round `r = j / STAGES`:
//!
//! ```text
//! producer:  once: arrive.expect_tx q_full, Q's bytes; TMA Q
//!            wait empty[s] parity (r & 1) ^ 1       (round 0 passes at once)
//!            arrive.expect_tx k_full[s]; TMA K_j;  arrive.expect_tx v_full[s]; TMA V_j
//! consumers: once: wait q_full parity 0
//!            wait k_full[s] parity r & 1; S = Q K_j^T (wgmma, commit, wait 0)
//!            softmax on S's registers; O *= alpha; P = 16-bit S
//!            wait v_full[s] parity r & 1; O += P V_j (wgmma RS, commit, wait 0); arrive empty[s]
//! ```
//!
//! Tile sizes: `BR = 128` query rows (two consumers of 64) and `BC = 128` keys. Per consumer
//! thread the registers are S (64 x 128 / 128 threads = 64 f32), O (64 x d / 128 = d / 2: 32 or
//! 64), P (64 x 128 / 128 16-bit values = 32 words, live while the `P V` wgmmas are in flight)
//! and the row statistics: about 170 at d = 128 against the 232 that `setmaxnreg` gives the
//! consumers (GEMM step 5's split). A wider key tile (FlashAttention-3 uses up to 176 at
//! d = 128) would take S and P past that; a narrower one would halve each `wgmma`'s work per
//! softmax step. Shared memory at d = 128: Q 32 KiB plus 64 KiB per K/V stage, so two stages
//! (160 KiB) leave room for a third only with 1 KiB to spare. Two suffice: each tile costs two
//! GEMMs and a softmax, long against one tile's copy, so one tile in flight hides the latency.
//! What this kernel does not do (FlashAttention-3 does): overlap one tile's softmax with the next
//! tile's `S` wgmma inside a warpgroup, and schedule the two consumers' softmaxes against each
//! other with named barriers ("ping-pong"); here the warp schedulers interleave them as they can.
//!
//! Only the sm_90a build has this kernel's instructions; the sm_80 and sm_90 builds keep the
//! entry points with a body that traps, as GEMM step 5 does.

#![cfg_attr(
    all(target_arch = "nvptx64", not(target_feature = "sm_90a")),
    allow(dead_code, unused_imports)
)]

use super::flash_mma::{Half, pack, quad_max, quad_sum};
use super::{LOG2_E, is_visible, kv_end};
use crate::cuda::intrinsics::log2_approx;
use crate::cuda::mbarrier::{
    fence_mbarrier_init, mbarrier_arrive, mbarrier_arrive_expect_tx, mbarrier_init,
    mbarrier_wait_parity, ring_slot,
};
use crate::cuda::shared::{dynamic_shared_aligned, shared_address};
use crate::cuda::thread::{block_idx_x, block_idx_y, sync_threads, thread_idx_x};
use crate::cuda::tma::{TensorMap, tma_load_2d};
use crate::cuda::wgmma::{
    Accumulator, B128_ROW_BYTES, accumulator_position, fence_a_fragment, k_major_b128,
    mn_major_b128, setmaxnreg_dec, setmaxnreg_inc, wgmma_commit_group, wgmma_fence, wgmma_rs,
    wgmma_ss, wgmma_wait_group,
};
use crate::cuda::{Bf16, F16, GlobalPtr, SharedPtr};
use crate::gemm::wgmma::{CONSUMER_REGS, PRODUCER_REGS};
use crate::gemm::{WG_ALIGN, WG_BOX_COLS, WG_CONSUMERS, WG_THREADS};
use crate::{kernel, launch_bounds, unroll};

/// Query rows per block: two consumer warpgroups of 64 (the M of `wgmma.m64`).
pub const BR: usize = 128;
/// Keys per K/V tile: the N of the `S` wgmma.
pub const BC: usize = 128;
/// K/V stages of the ring (see the module docs for why two).
pub const STAGES: usize = 2;
/// Threads per block: the producer warpgroup and the two consumers (GEMM step 5's block).
pub const THREADS: usize = WG_THREADS as usize;
/// Columns of one TMA box: one 128-byte swizzled row of 16-bit elements.
pub const BOX_COLS: usize = WG_BOX_COLS as usize;
/// Rows of every TMA box (Q's, K's and V's): `BR == BC`, so one box shape serves all three.
pub const BOX_ROWS: usize = BR;

/// Threads of a warpgroup.
const WARPGROUP: u32 = 128;
/// Query rows per consumer.
const WG_M: usize = 64;
/// Arrivals that release a stage: every consumer thread.
const CONSUMER_THREADS: u32 = WARPGROUP * WG_CONSUMERS;
/// Bytes of one box (Q, K or V, 64 columns of 128 rows).
const BOX_BYTES: usize = BOX_ROWS * BOX_COLS * 2;
/// S's accumulator: 64 x BC f32 over 128 threads.
const S_REGS: usize = WG_M * BC / WARPGROUP as usize;

const _: () = assert!(BR == WG_CONSUMERS as usize * WG_M && BC == BR && S_REGS == 64);
// Every box starts on a 1024-byte boundary (the swizzle pattern's).
const _: () = assert!(BOX_BYTES.is_multiple_of(WG_ALIGN as usize));

/// Dynamic shared memory for head dimension `d`: the alignment slack, Q, `STAGES` K and V tiles
/// (2-byte elements), and the barriers (Q's, then K-full, V-full and empty per stage).
pub const fn shared_bytes(d: usize) -> usize {
    WG_ALIGN as usize + (BR + 2 * STAGES * BC) * d * 2 + (1 + 3 * STAGES) * 8
}

/// The block's shared memory from its first 1024-byte boundary: Q's `d / 64` boxes, then per
/// stage K's boxes and V's boxes, then the barriers.
#[derive(Clone, Copy)]
struct Tiles<const D: usize> {
    base: SharedPtr<u8>,
}

impl<const D: usize> Tiles<D> {
    /// Boxes per tile: 64 columns of d each.
    const BOXES: usize = D / BOX_COLS;
    /// Bytes of one Q, K or V tile.
    const TILE_BYTES: usize = Self::BOXES * BOX_BYTES;

    #[inline(always)]
    fn new() -> Self {
        Self {
            base: dynamic_shared_aligned(WG_ALIGN),
        }
    }

    fn q(self) -> SharedPtr<u8> {
        self.base
    }

    fn k(self, s: u32) -> SharedPtr<u8> {
        self.base.offset((1 + 2 * s as usize) * Self::TILE_BYTES)
    }

    fn v(self, s: u32) -> SharedPtr<u8> {
        self.k(s).offset(Self::TILE_BYTES)
    }

    fn barrier(self, i: usize) -> SharedPtr<u64> {
        self.base
            .offset((1 + 2 * STAGES) * Self::TILE_BYTES)
            .cast::<u64>()
            .offset(i)
    }

    /// Q has landed.
    fn q_full(self) -> SharedPtr<u64> {
        self.barrier(0)
    }

    /// Stage `s`'s K tile has landed.
    fn k_full(self, s: u32) -> SharedPtr<u64> {
        self.barrier(1 + s as usize)
    }

    /// Stage `s`'s V tile has landed.
    fn v_full(self, s: u32) -> SharedPtr<u64> {
        self.barrier(1 + STAGES + s as usize)
    }

    /// Stage `s` may be refilled: every consumer thread is done with its K and V.
    fn empty(self, s: u32) -> SharedPtr<u64> {
        self.barrier(1 + 2 * STAGES + s as usize)
    }
}

/// Q's descriptor for d slice `kk` (16 deep) of consumer `wg`'s 64 rows: K-major A, box `kk / 4`
/// of the tile at `.shared` address `q0`, rows `64 wg..` (128 bytes each).
#[inline(always)]
pub const fn q_descriptor(q0: u32, wg: u32, kk: u32) -> crate::cuda::wgmma::MatrixDescriptor {
    let row0 = wg * WG_M as u32 * B128_ROW_BYTES;
    k_major_b128(q0 + (kk / 4) * BOX_BYTES as u32 + row0, kk % 4)
}

/// K's descriptor for d slice `kk`: the B of `S = Q K^T` is K^T, whose reduction (d) is
/// contiguous in each key's row, so K-major, the BC keys as the N rows of box `kk / 4`.
#[inline(always)]
pub const fn k_descriptor(k0: u32, kk: u32) -> crate::cuda::wgmma::MatrixDescriptor {
    k_major_b128(k0 + (kk / 4) * BOX_BYTES as u32, kk % 4)
}

/// V's descriptor for key slice `kk` (16 keys) of `O += P V`: V is row-major keys x d, N (= d)
/// contiguous, so MN-major, one 64-column box of d after the other (LBO one box).
#[inline(always)]
pub const fn v_descriptor(v0: u32, kk: u32) -> crate::cuda::wgmma::MatrixDescriptor {
    mn_major_b128(v0, kk, BOX_BYTES as u32)
}

/// Word `w` (0..4) of the register A fragment of key slice `kk` (16 keys) of P, from S's
/// accumulator registers: slice `kk` is S's columns `16 kk..`, i.e. the accumulator's 8-column
/// blocks `2 kk` and `2 kk + 1`, registers `8 kk..8 kk + 8`; A's words are (row g, keys 0..8),
/// (row g + 8, keys 0..8), (row g, keys 8..16), (row g + 8, keys 8..16), two keys each, which are
/// registers `8 kk + 2 w` and `+ 1` (see `accumulator_position` and `a_fragment_position`).
#[inline(always)]
pub const fn p_register(kk: usize, w: usize) -> usize {
    8 * kk + 2 * w
}

/// The forward pass for input type `T`, head dimension `D` and O's accumulator of `R = D / 2`
/// registers; the kernels below fix all three.
///
/// # Safety
/// The launch described at [`flash_attention_wgmma_bf16_d64`].
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90a"))]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn flash_wgmma<T: Half, const D: usize, const R: usize>(
    maps: [GlobalPtr<TensorMap>; 3],
    o: GlobalPtr<T>,
    lse: GlobalPtr<f32>,
    n_q: usize,
    n_kv: usize,
    scale: f32,
    causal: bool,
) {
    const { assert!((D == 64 || D == 128) && R == D / 2) };
    let tiles = Tiles::<D>::new();
    let tid = thread_idx_x();
    let bh = block_idx_y() as usize;
    let i0 = block_idx_x() as usize * BR;
    // Causal: the key tiles up to the last real row's diagonal; the ones after it are skipped.
    let key_tiles = kv_end(i0, BR, n_q, n_kv, causal).div_ceil(BC) as u32;

    if tid == 0 {
        // SAFETY: the barriers' own 8 bytes each, initialised once before anyone uses them.
        unsafe {
            mbarrier_init(tiles.q_full(), 1);
            for s in 0..STAGES as u32 {
                mbarrier_init(tiles.k_full(s), 1);
                mbarrier_init(tiles.v_full(s), 1);
                mbarrier_init(tiles.empty(s), CONSUMER_THREADS);
            }
        }
        fence_mbarrier_init();
    }
    sync_threads();

    if tid < WARPGROUP {
        setmaxnreg_dec::<PRODUCER_REGS>();
        if tid == 0 {
            // SAFETY: the maps are this head's; the tiles are this block's.
            unsafe { produce(tiles, maps.map(|m| m.offset(bh)), i0, key_tiles) };
        }
    } else {
        setmaxnreg_inc::<CONSUMER_REGS>();
        let wg = tid / WARPGROUP - 1;
        let t = tid % WARPGROUP;
        // The head's O and LSE; this consumer's first row.
        let o = o.offset(bh * n_q * D);
        let lse = lse.offset(bh * n_q);
        let row0 = i0 + wg as usize * WG_M;
        let sizes = (n_q, n_kv, scale, causal);
        // SAFETY: the tiles are filled and released as `consume` says.
        let (acc, m, l) = unsafe { consume::<T, D, R>(tiles, wg, t, row0, key_tiles, sizes) };
        store::<T, D, R>(o, lse, t, row0, n_q, acc, m, l);
    }
}

/// The builds without wgmma: nothing to run (the host never launches it there).
#[cfg(all(target_arch = "nvptx64", not(target_feature = "sm_90a")))]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn flash_wgmma<T: Half, const D: usize, const R: usize>(
    _: [GlobalPtr<TensorMap>; 3],
    _: GlobalPtr<T>,
    _: GlobalPtr<f32>,
    _: usize,
    _: usize,
    _: f32,
    _: bool,
) {
    // SAFETY: stops the kernel; the driver reports it.
    unsafe { core::arch::nvptx::trap() }
}

/// The producer (one thread): Q once, then for every key tile wait until its stage is empty and
/// have the TMA bring K's and V's boxes, each tile completing on its own barrier.
///
/// # Safety
/// `q_map`, `k_map`, `v_map` are this head's maps (rows of `d` 16-bit elements, boxes of
/// [`BOX_ROWS`] x [`BOX_COLS`], 128-byte swizzle); the barriers are initialised.
#[inline(always)]
unsafe fn produce<const D: usize>(
    tiles: Tiles<D>,
    [q_map, k_map, v_map]: [GlobalPtr<TensorMap>; 3],
    i0: usize,
    key_tiles: u32,
) {
    let boxes = Tiles::<D>::BOXES;
    let tile_bytes = Tiles::<D>::TILE_BYTES as u32;
    // One tile (d / 64 boxes, dimension 0 along d, dimension 1 along rows) at row `row`.
    let load = |dst: SharedPtr<u8>, map, row: usize, bar| {
        for c in 0..boxes {
            let col = (c * BOX_COLS) as i32;
            // SAFETY: the caller's contract; the box fits its place in the tile.
            unsafe { tma_load_2d(dst.offset(c * BOX_BYTES), map, col, row as i32, bar) };
        }
    };
    // SAFETY: Q's barrier expects exactly Q's boxes.
    unsafe { mbarrier_arrive_expect_tx(tiles.q_full(), tile_bytes) };
    load(tiles.q(), q_map, i0, tiles.q_full());
    for j in 0..key_tiles {
        let (s, parity) = ring_slot(j, STAGES as u32);
        let key0 = j as usize * BC;
        // SAFETY: the stage is refilled only after every consumer released it.
        unsafe {
            mbarrier_wait_parity(tiles.empty(s), parity ^ 1);
            mbarrier_arrive_expect_tx(tiles.k_full(s), tile_bytes);
        }
        load(tiles.k(s), k_map, key0, tiles.k_full(s));
        // SAFETY: as for K.
        unsafe { mbarrier_arrive_expect_tx(tiles.v_full(s), tile_bytes) };
        load(tiles.v(s), v_map, key0, tiles.v_full(s));
    }
}

/// One consumer warpgroup (`wg`, thread `t` of it, query rows `row0..row0 + 64` of the head):
/// the online softmax over every key tile. Returns O's accumulator (unnormalised), and the row
/// statistics `m` (base 2) and `l` (this thread's partial sums) of its rows g and g + 8.
///
/// # Safety
/// `tiles` is this block's, filled by [`produce`]. All 128 threads of the warpgroup call it.
#[inline(always)]
unsafe fn consume<T: Half, const D: usize, const R: usize>(
    tiles: Tiles<D>,
    wg: u32,
    t: u32,
    row0: usize,
    key_tiles: u32,
    (n_q, n_kv, scale, causal): (usize, usize, f32, bool),
) -> (Accumulator<R>, [f32; 2], [f32; 2]) {
    let mut o = Accumulator::<R>::zero();
    let mut m = [f32::NEG_INFINITY; 2];
    let mut l = [0.0f32; 2];
    let scale_log2 = scale * LOG2_E;
    let q0 = shared_address(tiles.q());
    // SAFETY: Q's phase brings all of Q.
    unsafe { mbarrier_wait_parity(tiles.q_full(), 0) };
    for j in 0..key_tiles {
        let (s, parity) = ring_slot(j, STAGES as u32);
        let key0 = j as usize * BC;

        // S = Q K_j^T: d / 16 wgmmas from shared memory, waited for at once (the softmax needs
        // all of S).
        // SAFETY: K's phase brings the tile; the stage is not refilled before `empty`.
        unsafe { mbarrier_wait_parity(tiles.k_full(s), parity) };
        let mut s_acc = Accumulator::<S_REGS>::zero();
        // (Each `fence_operand` keeps the compiler from moving register writes past a
        // `wgmma_fence`, or reads before a `wait_group`: see its docs.)
        s_acc.fence_operand();
        wgmma_fence();
        let k0 = shared_address(tiles.k(s));
        unroll!(kk in 0..8 {
            if kk < D / 16 {
                let (a, b) = (q_descriptor(q0, wg, kk as u32), k_descriptor(k0, kk as u32));
                // SAFETY: Q and K_j have landed and are not written while this group runs.
                unsafe { wgmma_ss(T::INPUT, a, b, false, &mut s_acc) };
            }
        });
        wgmma_commit_group();
        wgmma_wait_group::<0>();
        s_acc.fence_operand();
        let mut sc = s_acc.read();

        // Scale (base 2) and mask; m_new = max(m, rowmax(S)) over the row's 4 lanes.
        // (Unrolled: S must stay in registers, every index a constant.)
        let mut m_new = m;
        unroll!(jb in 0..16 {
            unroll!(q in 0..4 {
                let i = 4 * jb + q;
                let (r, c) = accumulator_position(t, i as u32);
                let visible = is_visible(row0 + r as usize, key0 + c as usize, n_q, n_kv, causal);
                let x = if visible { sc[i] * scale_log2 } else { f32::NEG_INFINITY };
                sc[i] = x;
                m_new[q / 2] = crate::softmax::maximum(m_new[q / 2], x);
            });
        });
        let m_new = m_new.map(quad_max);
        // P = exp2(S - m_new) in place, this thread's part of its rows' sums.
        let mut rowsum = [0.0f32; 2];
        unroll!(jb in 0..16 {
            unroll!(q in 0..4 {
                let i = 4 * jb + q;
                sc[i] = crate::softmax::exp2_shifted(sc[i], m_new[q / 2]);
                rowsum[q / 2] += sc[i];
            });
        });
        // l = alpha l + rowsum, O = alpha O (O's last wgmma was waited for).
        let alpha = [0, 1].map(|h| crate::softmax::exp2_shifted(m[h], m_new[h]));
        for h in 0..2 {
            l[h] = alpha[h] * l[h] + rowsum[h];
        }
        let mut oc = o.read();
        unroll!(jb in 0..16 {
            if jb < R / 4 {
                unroll!(q in 0..4 {
                    oc[4 * jb + q] *= alpha[q / 2];
                });
            }
        });
        o.write(oc);
        o.fence_operand();
        m = m_new;

        // O += P V_j: P from S's registers as `wgmma`'s register A, 16 keys per wgmma.
        let mut p = [[0u32; 4]; BC / 16];
        unroll!(kk in 0..8 {
            unroll!(w in 0..4 {
                let i = p_register(kk, w);
                p[kk][w] = pack::<T>(sc[i], sc[i + 1]);
            });
            fence_a_fragment(&mut p[kk]);
        });
        // SAFETY: V's phase brings the tile.
        unsafe { mbarrier_wait_parity(tiles.v_full(s), parity) };
        wgmma_fence();
        let v0 = shared_address(tiles.v(s));
        unroll!(kk in 0..8 {
            // SAFETY: V_j has landed and is not refilled before this group completes.
            unsafe { wgmma_rs(T::INPUT, p[kk], v_descriptor(v0, kk as u32), true, &mut o) };
        });
        wgmma_commit_group();
        wgmma_wait_group::<0>();
        o.fence_operand();
        // SAFETY: both wgmma groups reading stage s have completed.
        unsafe { mbarrier_arrive(tiles.empty(s)) };
    }
    (o, m, l)
}

/// O = O / l and LSE = m + log l (base e) for this thread's rows that exist; a fully masked row
/// (l = 0) gets zeros and -inf. The row sums are merged over their 4 lanes here.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn store<T: Half, const D: usize, const R: usize>(
    o: GlobalPtr<T>,
    lse: GlobalPtr<f32>,
    t: u32,
    row0: usize,
    n_q: usize,
    acc: Accumulator<R>,
    m: [f32; 2],
    l: [f32; 2],
) {
    let l = l.map(quad_sum);
    let inv_l = l.map(|x| if x > 0.0 { 1.0 / x } else { 0.0 });
    let regs = acc.read();
    let o_pairs = o.cast::<u32>();
    unroll!(jb in 0..16 {
        if jb < R / 4 {
            unroll!(h in 0..2 {
                let i = 4 * jb + 2 * h;
                let (r, c) = accumulator_position(t, i as u32);
                let row = row0 + r as usize;
                if row < n_q {
                    let pair = pack::<T>(regs[i] * inv_l[h], regs[i + 1] * inv_l[h]);
                    // SAFETY: a row of O inside the head; each pair has one owner.
                    unsafe { o_pairs.write((row * D + c as usize) / 2, pair) };
                }
            });
        }
    });
    for h in 0..2 {
        let (r, _) = accumulator_position(t, 2 * h as u32);
        let row = row0 + r as usize;
        if t.is_multiple_of(4) && row < n_q {
            let lse_2 = m[h] + log2_approx(l[h]);
            // SAFETY: the row's LSE, written by its lane 0 of 4.
            unsafe { lse.write(row, lse_2 * core::f32::consts::LN_2) };
        }
    }
}

macro_rules! flash_wgmma_kernel {
    ($(#[$meta:meta])* $name:ident, $t:ty, $d:literal) => {
        kernel! {
            $(#[$meta])*
            pub unsafe fn $name(
                q_maps: GlobalPtr<TensorMap>, k_maps: GlobalPtr<TensorMap>, v_maps: GlobalPtr<TensorMap>,
                o: GlobalPtr<$t>, lse: GlobalPtr<f32>,
                n_q: u32, n_kv: u32, scale: f32, causal: u32,
            ) {
                // SAFETY: the kernel's contract, passed on.
                unsafe {
                    flash_wgmma::<$t, $d, { $d / 2 }>(
                        [q_maps, k_maps, v_maps], o, lse, n_q as usize, n_kv as usize, scale, causal != 0,
                    )
                }
            }
        }
        // One block of 384 threads per SM, as GEMM step 5: `setmaxnreg` splits its registers.
        launch_bounds!($name, THREADS, 1);
    };
}

flash_wgmma_kernel!(
    /// FlashAttention forward on Hopper, bf16, d = 64: `q_maps`, `k_maps`, `v_maps` are one
    /// tensor map per head (Q's `n_q` x 64 rows, K's and V's `n_kv` x 64, boxes of
    /// [`BOX_ROWS`] x [`BOX_COLS`], 128-byte swizzle); O (bf16) and LSE (f32) as `flash_mma`'s.
    /// Grid `(ceil(n_q / BR), batch * heads)`, [`THREADS`] threads, [`shared_bytes`]`(64)` of
    /// dynamic shared memory; sm_90a only.
    flash_attention_wgmma_bf16_d64, Bf16, 64);
flash_wgmma_kernel!(
    /// As [`flash_attention_wgmma_bf16_d64`], d = 128 (two boxes per row of Q, K, V).
    flash_attention_wgmma_bf16_d128, Bf16, 128);
flash_wgmma_kernel!(
    /// As [`flash_attention_wgmma_bf16_d64`], f16 inputs.
    flash_attention_wgmma_f16_d64, F16, 64);
flash_wgmma_kernel!(
    /// As [`flash_attention_wgmma_bf16_d64`], f16 inputs, d = 128.
    flash_attention_wgmma_f16_d128, F16, 128);
