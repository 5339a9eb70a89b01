//! FlashAttention forward, f32 on CUDA cores: one kernel, S and P never reach HBM.
//!
//! One block per (query tile `Q_i`, head). The block copies `Q_i` (`BR x d`) from HBM into
//! shared memory once, then streams the key/value tiles `K_j`, `V_j` (`BC x d` each) through
//! shared memory. For each tile it computes the scores `S_i^(j) = Q_i K_j^T` and folds them into
//! three running quantities per query row (paper notation, Dao 2023, Algorithm 1):
//!
//! ```text
//! m_i^(j) = max(m_i^(j-1), rowmax(S_i^(j)))                          running max
//! P_i^(j) = exp(S_i^(j) - m_i^(j))                                   unnormalised probabilities
//! l_i^(j) = exp(m_i^(j-1) - m_i^(j)) l_i^(j-1) + rowsum(P_i^(j))     running sum, rescaled
//! O_i^(j) = exp(m_i^(j-1) - m_i^(j)) O_i^(j-1) + P_i^(j) V_j          output accumulator, rescaled
//! ```
//!
//! After the last tile it writes `O_i = O_i^(last) / l_i^(last)` and
//! `LSE_i = m_i^(last) + log l_i^(last)`: the only HBM writes. Starting from `m = -inf, l = 0,
//! O = 0`, a row that sees no key at all ends as `O = 0`, `LSE = -inf`.
//!
//! **Register blocking**, as GEMM's step 3 does it: both products are matrix products, and a
//! thread that owns a small block of each output, rows x columns, reuses every value it loads
//! from shared memory once per column (or row) of its block. The threads of a block form
//! `BR / TM` *row groups* of [`GROUP`] consecutive lanes; row group `g` owns query rows
//! `TM g .. TM g + TM`, and lane `c` of it
//! - keys `c, c + GROUP, c + 2 GROUP, ...` of each `S_i^(j)` tile: a `TM x BC / GROUP` block of
//!   scores, each shared load of Q used `BC / GROUP` times and of K `TM` times;
//! - columns `c, c + GROUP, ...` of `O_i`: a `TM x d / GROUP` block of the accumulator, in
//!   registers from the first tile to the last, each load of P used `d / GROUP` times and of V
//!   `TM` times.
//!
//! A row's scores are spread over its group's lanes, so its max is combined with three butterfly
//! shuffles, and its sum only once at the end (every lane rescales by the same factor). `P`
//! goes from the lanes that computed it to the lanes that multiply it by `V` through a shared
//! tile. Where each piece lives: `Q_i`, `K_j`, `V_j` and `P_i^(j)` in shared memory; the scores,
//! `m`, `l` and `O_i` in registers.
//!
//! Scores are kept in base 2 (`scale * log2(e)` applied once) so each `exp` is one `ex2.approx`.

use super::{LOG2_E, is_visible, kv_end, select_head};
use crate::cuda::intrinsics::{count_flops, exp2_approx, fma, log2_approx};
use crate::cuda::shared::dynamic_shared_mem;
use crate::cuda::thread::{block_idx_x, block_idx_y, sync_threads, thread_idx_x};
use crate::cuda::warp::{FULL_MASK, WARP_SIZE, shuffle_xor};
use crate::cuda::{GlobalPtr, SharedPtr};
use crate::{kernel, unroll};
use crate::softmax::maximum;

/// Query rows per block: the rows that share every K/V tile loaded from HBM.
pub const BR: usize = 64;
/// Keys per K/V tile.
pub const BC: usize = 32;
/// Query rows per thread: each value of K or V a thread loads serves `TM` rows.
pub const TM: usize = 4;
/// Lanes per row group: the threads that share `TM` query rows, splitting the tile's keys (for
/// S) and the head dimension (for O) between them.
pub const GROUP: usize = 8;
/// Keys of each score tile per thread: `TN` scores for each of its `TM` rows.
pub const TN: usize = BC / GROUP;
/// Threads per block: `BR / TM` row groups of `GROUP` lanes.
pub const THREADS: usize = BR / TM * GROUP;
/// Padding of each row of `Q_i` and `K_j` in shared memory, in words. The lanes of a warp read
/// one column of `TM`-apart rows of `Q_i` (4 row groups) and of `GROUP` consecutive rows of
/// `K_j`: a row stride of `d + 1` puts them in different banks.
pub const ROW_PAD: usize = 1;
/// Padding of each row of the `P` tile: a warp writes `GROUP` consecutive columns of rows `TM`
/// apart, and a stride of `BC + 2` (`TM (BC + 2) = 8` banks apart) keeps them all distinct.
pub const P_PAD: usize = 2;

// A row group lies within one warp (its shuffles), and the keys and columns split evenly.
const _: () = assert!(
    (WARP_SIZE as usize).is_multiple_of(GROUP) && BC.is_multiple_of(GROUP) && BR.is_multiple_of(TM)
);
const _: () = assert!(GROUP == 8); // `group_max` and `group_sum`: three butterflies.
const _: () = assert!(TM == 4 && TN == 4); // the `unroll!(r in 0..4)` and `(t in 0..4)` below.

/// Dynamic shared memory of the kernel for head dimension `d`: `Q_i` and `K_j` (padded rows),
/// `V_j`, and the `P` tile.
pub const fn shared_bytes(d: usize) -> usize {
    ((BR + BC) * (d + ROW_PAD) + BC * d + BR * (BC + P_PAD)) * core::mem::size_of::<f32>()
}

/// This thread's place in the block: the first of its `TM` query rows in the tile, and its
/// lane within the row group (which keys and columns it owns: [`owned`]).
#[inline(always)]
fn row_group_and_lane(tid: usize) -> (usize, usize) {
    (tid / GROUP * TM, tid % GROUP)
}

/// Slot `t` of lane `lane`'s keys (in a K/V tile) or columns (of O): `lane + GROUP t`. The
/// lanes of a group take consecutive keys and columns, so their loads fall in different banks.
#[inline(always)]
const fn owned(lane: usize, t: usize) -> usize {
    lane + GROUP * t
}

/// Max over the [`GROUP`] lanes of a row group (consecutive lanes): three butterfly shuffles.
#[inline(always)]
fn group_max(x: f32) -> f32 {
    let x = maximum(x, shuffle_xor(FULL_MASK, x, 1));
    let x = maximum(x, shuffle_xor(FULL_MASK, x, 2));
    maximum(x, shuffle_xor(FULL_MASK, x, 4))
}

/// Sum over the [`GROUP`] lanes of a row group.
#[inline(always)]
fn group_sum(x: f32) -> f32 {
    let x = x + shuffle_xor(FULL_MASK, x, 1);
    let x = x + shuffle_xor(FULL_MASK, x, 2);
    x + shuffle_xor(FULL_MASK, x, 4)
}

/// `2^(x - m)` with the softmax chapter's limits (`exp2_shifted`'s: `x = -inf` gives 0, `x = m`
/// gives 1, `+inf` against `+inf` included, NaN stays NaN), for the probabilities and the rescale
/// factor `alpha`. Unlike `exp2_shifted`, which skips the exponential where `x = m`, it takes one
/// `ex2` in every case (of the argument those limits call for), so the exponentials a block counts
/// do not depend on where its rows' maxima fall: the count grows with the keys in a straight
/// line, which the performance model's extension along the keys relies on. (On a GPU a warp pays
/// for the `ex2` as soon as any one of its lanes needs it.)
#[inline(always)]
fn exp2_shifted_always(x: f32, m: f32) -> f32 {
    let arg = if x == f32::NEG_INFINITY {
        f32::NEG_INFINITY
    } else if x == m {
        0.0
    } else {
        x - m
    };
    exp2_approx(arg)
}

/// Copies rows `[first, first + tile_rows)` of a `rows x D` matrix from HBM into a shared tile
/// with row stride `stride`, zero-filling rows past `rows` (they exist in no tensor). The block's
/// threads take consecutive elements, so a warp reads 32 consecutive floats (coalesced).
#[inline(always)]
unsafe fn load_tile<const D: usize>(
    src: GlobalPtr<f32>,
    first: usize,
    rows: usize,
    dst: SharedPtr<f32>,
    tile_rows: usize,
    stride: usize,
) {
    let mut e = thread_idx_x() as usize;
    while e < tile_rows * D {
        let (r, c) = (e / D, e % D);
        let x = if first + r < rows {
            unsafe { src.read((first + r) * D + c) }
        } else {
            0.0
        };
        unsafe { dst.write(r * stride + c, x) };
        e += THREADS;
    }
}

/// The whole forward pass for head dimension `D`, each thread owning `OC = D / GROUP` columns
/// of O; the kernels below fix both.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn flash_forward<const D: usize, const OC: usize>(
    q: GlobalPtr<f32>,
    k: GlobalPtr<f32>,
    v: GlobalPtr<f32>,
    o: GlobalPtr<f32>,
    lse: GlobalPtr<f32>,
    n_q: usize,
    n_kv: usize,
    scale: f32,
    causal: bool,
) {
    const { assert!(D == OC * GROUP) };
    let bh = block_idx_y() as usize;
    let i0 = block_idx_x() as usize * BR; // first query row of this block
    let (r0, lane) = row_group_and_lane(thread_idx_x() as usize); // this thread's rows r0 ..
    let row = |r: usize| i0 + r0 + r; // .. and row r of them in the head
    let ([q, k, v, o], lse) = select_head([q, k, v, o], lse, bh, (n_q, n_kv, D));

    // Shared memory: Q_i [BR x (D + ROW_PAD)], K_j [BC x (D + ROW_PAD)], V_j [BC x D],
    // P [BR x (BC + P_PAD)].
    let (stride, p_stride) = (D + ROW_PAD, BC + P_PAD);
    let q_s = dynamic_shared_mem::<f32>();
    let k_s = q_s.offset(BR * stride);
    let v_s = k_s.offset(BC * stride);
    let p_s = v_s.offset(BC * D);

    // Q_i: HBM -> shared, once for the whole pass. m_i, l_i and O_i: registers (`l` is this
    // lane's share of the row sum; the group adds its shares at the end).
    unsafe { load_tile::<D>(q, i0, n_q, q_s, BR, stride) };
    let scale_log2 = scale * LOG2_E;
    let mut m = [f32::NEG_INFINITY; TM];
    let mut l = [0.0f32; TM];
    let mut o_acc = [[0.0f32; OC]; TM];

    let kv_end = kv_end(i0, BR, n_q, n_kv, causal);
    let mut j0 = 0;
    while j0 < kv_end {
        // K_j, V_j: HBM -> shared. The barrier before: every thread is done with the last tile
        // and its P (and, the first time, Q_i is complete); the one after: this tile is.
        sync_threads();
        unsafe {
            load_tile::<D>(k, j0, n_kv, k_s, BC, stride);
            load_tile::<D>(v, j0, n_kv, v_s, BC, D);
        }
        sync_threads();

        // S_i^(j) = Q_i K_j^T, this thread's TM x TN block: per column c of Q and K, TM values
        // of Q and TN of K from shared memory, and their TM x TN products.
        let mut s = [[0.0f32; TN]; TM];
        for c in 0..D {
            let (mut q_c, mut k_c) = ([0.0f32; TM], [0.0f32; TN]);
            for (r, q_rc) in q_c.iter_mut().enumerate() {
                *q_rc = unsafe { q_s.read((r0 + r) * stride + c) };
            }
            for (t, k_tc) in k_c.iter_mut().enumerate() {
                *k_tc = unsafe { k_s.read(owned(lane, t) * stride + c) };
            }
            for (s_r, q_rc) in s.iter_mut().zip(&q_c) {
                for (s_rt, k_tc) in s_r.iter_mut().zip(&k_c) {
                    *s_rt = fma(*q_rc, *k_tc, *s_rt);
                }
            }
        }
        // Per row: scale (base 2) and mask, m_i^(j) = max(m_i^(j-1), rowmax(S_i^(j))) over the
        // group, P_i^(j) = exp(S_i^(j) - m_i^(j)) in place of S, and this lane's share of l.
        // (Unrolled, as every loop below with a shuffle or an `ex2` in it: LLVM leaves those
        // rolled, and a register array indexed by a loop counter would go to local memory.)
        let mut seen = 0;
        let mut alpha = [0.0f32; TM];
        unroll!(r in 0..4 {
            let mut row_max = m[r];
            unroll!(t in 0..4 {
                let visible = is_visible(row(r), j0 + owned(lane, t), n_q, n_kv, causal);
                s[r][t] = if visible {
                    s[r][t] * scale_log2
                } else {
                    f32::NEG_INFINITY
                };
                seen += (visible && row(r) < n_q) as usize;
                row_max = maximum(row_max, s[r][t]);
            });
            let m_new = group_max(row_max);
            // `exp2_shifted_always` gives the softmax chapter's special values (a masked -inf
            // is 0, +inf against a +inf max is 1, a NaN stays NaN): see `kernels::attention`.
            let mut rowsum = 0.0f32;
            unroll!(t in 0..4 {
                s[r][t] = exp2_shifted_always(s[r][t], m_new);
                rowsum += s[r][t];
            });
            // l_i^(j) = exp(m_i^(j-1) - m_i^(j)) l_i^(j-1) + rowsum(P_i^(j)).
            alpha[r] = exp2_shifted_always(m[r], m_new);
            l[r] = fma(alpha[r], l[r], rowsum);
            m[r] = m_new;
        });
        // P to shared memory, where every lane of the group finds the whole rows it needs.
        for (r, p_r) in s.iter().enumerate() {
            for (t, p) in p_r.iter().enumerate() {
                unsafe { p_s.write((r0 + r) * p_stride + owned(lane, t), *p) };
            }
        }
        sync_threads();
        // O_i^(j) = exp(m_i^(j-1) - m_i^(j)) O_i^(j-1) + P_i^(j) V_j, this thread's TM x OC
        // block: per key, TM values of P and OC of V, and their TM x OC products.
        for (o_r, alpha_r) in o_acc.iter_mut().zip(&alpha) {
            for o_rc in o_r.iter_mut() {
                *o_rc *= *alpha_r;
            }
        }
        for jj in 0..BC {
            let (mut p_j, mut v_j) = ([0.0f32; TM], [0.0f32; OC]);
            for (r, p_rj) in p_j.iter_mut().enumerate() {
                *p_rj = unsafe { p_s.read((r0 + r) * p_stride + jj) };
            }
            for (t, v_jc) in v_j.iter_mut().enumerate() {
                *v_jc = unsafe { v_s.read(jj * D + owned(lane, t)) };
            }
            for (o_r, p_rj) in o_acc.iter_mut().zip(&p_j) {
                for (o_rc, v_jc) in o_r.iter_mut().zip(&v_j) {
                    *o_rc = fma(*p_rj, *v_jc, *o_rc);
                }
            }
        }
        count_flops((4 * D * seen) as u32);
        j0 += BC;
    }

    // O_i = O_i^(last) / l_i^(last) (a fully masked row has l = 0 and stays 0), straight from
    // registers to HBM: a warp's store covers 4 rows x 8 consecutive floats, whole sectors.
    // LSE_i = m_i^(last) + log l_i^(last), back to base e; log 0 = -inf for a masked row.
    unroll!(r in 0..4 {
        let l_r = group_sum(l[r]);
        let inv_l = if l_r > 0.0 { 1.0 / l_r } else { 0.0 };
        if row(r) < n_q {
            for (t, o_rc) in o_acc[r].iter().enumerate() {
                unsafe { o.write(row(r) * D + owned(lane, t), inv_l * *o_rc) };
            }
            if lane == 0 {
                let lse_2 = m[r] + log2_approx(l_r);
                unsafe { lse.write(row(r), lse_2 * core::f32::consts::LN_2) };
            }
        }
    });
}

kernel! {
    /// FlashAttention forward, f32, head dimension 64. Grid `(ceil(n_q / BR), batch * heads)`,
    /// [`THREADS`] threads per block, [`shared_bytes`]`(64)` bytes of dynamic shared memory.
    pub unsafe fn flash_attention_f32_d64(
        q: GlobalPtr<f32>, k: GlobalPtr<f32>, v: GlobalPtr<f32>, o: GlobalPtr<f32>, lse: GlobalPtr<f32>,
        n_q: u32, n_kv: u32, scale: f32, causal: u32,
    ) {
        unsafe { flash_forward::<64, 8>(q, k, v, o, lse, n_q as usize, n_kv as usize, scale, causal != 0) }
    }
}

kernel! {
    /// FlashAttention forward, f32, head dimension 128; as [`flash_attention_f32_d64`].
    pub unsafe fn flash_attention_f32_d128(
        q: GlobalPtr<f32>, k: GlobalPtr<f32>, v: GlobalPtr<f32>, o: GlobalPtr<f32>, lse: GlobalPtr<f32>,
        n_q: u32, n_kv: u32, scale: f32, causal: u32,
    ) {
        unsafe { flash_forward::<128, 16>(q, k, v, o, lse, n_q as usize, n_kv as usize, scale, causal != 0) }
    }
}
