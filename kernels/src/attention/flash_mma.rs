//! FlashAttention forward on tensor cores: bf16 or f16 Q, K, V; f32 accumulation; O in the
//! input type, LSE in f32.
//!
//! The recurrence is [`flash_f32`](super::flash_f32)'s, line for line; what changes is who holds
//! what. A block of 4 warps takes `BR = 128` query rows, 32 per warp as two `m16` row tiles, and
//! streams K/V tiles of `BC = 64` keys through shared memory. Each warp computes its `32 x BC`
//! slice of `S_i^(j) = Q_i K_j^T` with `mma.sync.m16n8k16`, so the scores, `P`, and the `32 x d`
//! output accumulator all live in the warp's registers as mma accumulator fragments: lane
//! `(g, t) = (lane / 4, lane % 4)` holds rows `g` and `g + 8` of each 16 x 8 piece, columns
//! `2t, 2t + 1`. Each K or V fragment a warp loads from shared memory feeds both row tiles' `mma`s:
//! shared memory's bandwidth, not the tensor cores, bounds this kernel, and two row tiles halve
//! its reads per FLOP.
//! Row statistics `m`, `l` are therefore per lane for four rows; a row's max is combined over its
//! 4 lanes with two shuffles, and its sum only once, at the end (every lane of a row rescales by
//! the same factor, so the per-lane partial sums can be merged last).
//!
//! The accumulator layout of `S` (rows `g, g + 8`, columns `2t, 2t + 1` of each 8-key piece) is
//! exactly the A-operand layout `mma` wants for `P` in `O += P V`: `P` goes from one mma's
//! output to the next one's input without leaving registers, rounded to 16 bits on the way.
//!
//! Memory pyramid: Q, K, V tiles in shared memory (rows padded by 16 bytes so that `ldmatrix`'s
//! eight 16-byte rows fall in different banks); S/P, O, m, l in registers, and Q's fragments too
//! where they fit ([`q_in_registers`]).
//! K and V are double-buffered: `cp.async` (the GEMM chapter's pipeline) copies tile j + 1 into
//! one stage while the warps compute on tile j in the other, one barrier per tile.

use super::{LOG2_E, exp2_fma, kv_end, select_head, visible_keys};
use crate::cuda::intrinsics::log2_approx;
use crate::cuda::mma::{MmaInput, ldmatrix_x4, mma_m16n8k16};
use crate::cuda::pipeline::{
    CP_ASYNC_BYTES, cp_async_16, cp_async_commit_group, cp_async_wait_group,
};
use crate::cuda::shared::dynamic_shared_mem;
use crate::cuda::thread::{block_idx_x, block_idx_y, sync_threads, thread_idx_x};
use crate::cuda::warp::{FULL_MASK, WARP_SIZE, lane_id, shuffle_xor};
use crate::cuda::{Bf16, F16, GlobalPtr, SharedPtr};
use crate::gemm::{accumulator_position, ldmatrix_x4_lane};
use crate::softmax::{exp2_shifted, maximum, shifted};
use crate::{kernel, unroll};

/// `m16` row tiles (the M of `m16n8k16`) per warp: every K and V fragment a warp loads by
/// `ldmatrix` feeds one `mma` per row tile, so two halve the shared-memory reads per FLOP.
pub const ROW_TILES: usize = 2;
/// Query rows per warp.
pub const WARP_ROWS: usize = 16 * ROW_TILES;
/// Warps per block.
pub const WARPS: usize = 4;
/// Query rows per block: 4 warps of 32 rows.
pub const BR: usize = WARPS * WARP_ROWS;
/// Keys per K/V tile.
pub const BC: usize = 64;
/// Keys per step of the recurrence: a K/V tile is taken in two steps, each computing its scores,
/// softmax and `P V` before the next, so that a warp's scores (32 x KEYS f32) take 32
/// registers instead of 64, beside O's 128 at d = 128: what lets 32 rows fit without spills.
pub const KEYS: usize = 32;
const _: () = assert!(
    KEYS / 8 == 4 && BC.is_multiple_of(KEYS),
    "the score loops unroll 4 pieces of 8 keys"
);
/// Threads per block.
pub const THREADS: usize = WARPS * WARP_SIZE as usize;
/// Padding of every shared row, in elements: 8 x 2 bytes = 16 bytes, one `ldmatrix` row.
pub const ROW_PAD: usize = 8;
/// Registers are sized for the largest head dimension; a `d = 64` kernel uses half.
pub(super) const MAX_D: usize = 128;

// The unrolled loops below are written for these sizes: 2 row tiles, BC / 8 = 8 score pieces,
// 4 k-steps of P V; d / 16 <= 8 k-steps of Q K^T, d / 8 <= 16 output pieces.
const _: () = assert!(BC == 64 && ROW_TILES == 2 && MAX_D == 128);

/// Whether a warp keeps Q's A fragments in registers for the whole key loop (`D / 16 x 4`
/// registers per row tile), or loads them from shared memory again at every key tile. At
/// d = 128 two row tiles' O accumulators (128 registers) and scores (64) leave no room for Q's
/// 64: held, they would spill to local memory (HBM behind the L1); reloading costs one
/// `ldmatrix` per k-step and row tile, a quarter of what the two row tiles save on K and V.
pub const fn q_in_registers(d: usize) -> bool {
    d <= 64
}

/// `p`, through an empty `asm!` the compiler cannot see into: addresses computed from it inside
/// a loop stay there, as adds of constants, instead of being hoisted out of the loop into
/// registers that stay live across it.
#[inline(always)]
fn opaque<T: Copy>(p: SharedPtr<T>) -> SharedPtr<T> {
    #[cfg(target_arch = "nvptx64")]
    {
        let mut a = p.as_ptr() as u64;
        // SAFETY: moves a register to itself.
        unsafe { core::arch::asm!("mov.b64 {a}, {a};", a = inout(reg64) a) };
        SharedPtr::from_raw(a as *mut T)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    p
}

/// The first row, in the block's tile, of row tile `t` of warp `warp`.
#[inline(always)]
fn row_tile_start(warp: usize, t: usize) -> usize {
    warp * WARP_ROWS + 16 * t
}

/// Which of this lane's four rows accumulator register `e` (0..4) of row tile `t` belongs to:
/// `2 t` for row `g`, `2 t + 1` for row `g + 8`; the index of `m` and `l`.
#[inline(always)]
const fn lane_row(t: usize, e: usize) -> usize {
    2 * t + e / 2
}

/// Dynamic shared memory for head dimension `d`: the Q tile and two stages of K and V tiles,
/// 2-byte elements.
pub const fn shared_bytes(d: usize) -> usize {
    (BR + 2 * STAGES * BC) * (d + ROW_PAD) * 2
}

/// K/V tiles in shared memory at once: the one being computed on and the one being copied.
pub const STAGES: usize = 2;

/// A 16-bit input type of the tensor cores.
pub trait Half: Copy {
    /// Which `mma` variant multiplies it.
    const INPUT: MmaInput;
    /// Rounds to nearest even.
    fn from_f32(x: f32) -> Self;
    /// The raw bits.
    fn to_bits(self) -> u16;
}

impl Half for Bf16 {
    const INPUT: MmaInput = MmaInput::Bf16;
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        Bf16::from_f32(x)
    }
    #[inline(always)]
    fn to_bits(self) -> u16 {
        Bf16::to_bits(self)
    }
}

impl Half for F16 {
    const INPUT: MmaInput = MmaInput::F16;
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        F16::from_f32(x)
    }
    #[inline(always)]
    fn to_bits(self) -> u16 {
        F16::to_bits(self)
    }
}

/// Two f32 rounded to `T` and packed as one 32-bit register, `lo` in the low half: the form of
/// an `mma` operand (two consecutive columns) and of a 4-byte store of two outputs.
#[inline(always)]
pub(super) fn pack<T: Half>(lo: f32, hi: f32) -> u32 {
    u32::from(T::from_f32(lo).to_bits()) | (u32::from(T::from_f32(hi).to_bits()) << 16)
}

/// The epilogue both attention flows on tensor cores end with: a warp's accumulator fragments
/// (its 16 rows of O from `first_row`, `D` columns, f32 in registers), each row times its
/// `scale` (`1 / l` for the fused kernel, 1 for `P V`), rounded to `T` and written two elements
/// at a time to O in HBM; rows at or past `n_q` are not written.
///
/// # Safety
/// `o` holds `n_q` rows of `D` elements, 4-byte aligned.
#[inline(always)]
pub(super) unsafe fn store_o<T: Half, const D: usize>(
    o: GlobalPtr<T>,
    o_acc: &[[f32; 4]; MAX_D / 8],
    scale: [f32; 2],
    lane: usize,
    first_row: usize,
    n_q: usize,
) {
    let o_pairs = o.cast::<u32>();
    unroll!(nd in 0..16 {
        if nd < D / 8 {
            let acc = o_acc[nd];
            for h in 0..2 {
                let (r, c) = accumulator_at(lane, 2 * h);
                let i = first_row + r;
                if i < n_q {
                    let pair = pack::<T>(acc[2 * h] * scale[h], acc[2 * h + 1] * scale[h]);
                    unsafe { o_pairs.write((i * D + nd * 8 + c) / 2, pair) };
                }
            }
        }
    });
}

/// `ldmatrix.x4` for two B operands from a row-major `N x K` tile, without `.trans` (K's rows
/// are keys, the N of `S = Q K^T`; its columns are the reduction over d): matrix `lane / 8` is
/// keys `0..8` or `8..16` (`/ 2`) at columns `0..8` or `8..16` (`% 2`), so registers 0, 1 are
/// the B fragment of keys 0..8 and registers 2, 3 that of keys 8..16. (Q's A fragments and V's
/// `.trans` B fragments use the GEMM's [`ldmatrix_x4_lane`].)
#[inline(always)]
pub const fn b_fragment_row(lane: usize) -> (usize, usize) {
    let (matrix, row) = (lane / 8, lane % 8);
    ((matrix / 2) * 8 + row, (matrix % 2) * 8)
}

/// This lane's `ldmatrix.x4` row for an A operand, or a `.trans` B operand: (row, column).
#[inline(always)]
pub(super) fn x4_lane(lane: usize) -> (usize, usize) {
    let (row, col) = ldmatrix_x4_lane(lane as u32);
    (row as usize, col as usize)
}

/// Where register `e` (0..4) of this lane's accumulator fragment sits in its 16 x 8 tile.
#[inline(always)]
pub(super) fn accumulator_at(lane: usize, e: usize) -> (usize, usize) {
    let (row, col) = accumulator_position(lane as u32, e as u32);
    (row as usize, col as usize)
}

/// Max over the 4 lanes that hold one row (lanes `4g .. 4g + 4`): two butterfly shuffles.
#[inline(always)]
pub(super) fn quad_max(x: f32) -> f32 {
    let x = maximum(x, shuffle_xor(FULL_MASK, x, 1));
    maximum(x, shuffle_xor(FULL_MASK, x, 2))
}

/// Sum over the 4 lanes that hold one row.
#[inline(always)]
pub(super) fn quad_sum(x: f32) -> f32 {
    let x = x + shuffle_xor(FULL_MASK, x, 1);
    x + shuffle_xor(FULL_MASK, x, 2)
}

/// Starts copying rows `[first, first + tile_rows)` of a `rows x D` matrix of 16-bit elements
/// from HBM into a shared tile with padded rows: one 16-byte `cp.async` per thread and step, the
/// block's threads taking consecutive chunks (coalesced). Rows past `rows` are zero-filled
/// without reading anything (`src_bytes = 0`, from the matrix's first, valid address).
#[inline(always)]
pub(super) unsafe fn copy_tile_async<T: Half, const D: usize>(
    src: GlobalPtr<T>,
    first: usize,
    rows: usize,
    dst: SharedPtr<T>,
    tile_rows: usize,
) {
    let chunks = D / 8; // 16-byte chunks per row
    let mut e = thread_idx_x() as usize;
    while e < tile_rows * chunks {
        let (r, ch) = (e / chunks, e % chunks);
        let (from, bytes) = if first + r < rows {
            (src.offset((first + r) * D + ch * 8), CP_ASYNC_BYTES)
        } else {
            (src, 0)
        };
        unsafe { cp_async_16(dst.offset(r * (D + ROW_PAD) + ch * 8), from, bytes) };
        e += THREADS;
    }
}

/// Shared memory holds five padded tiles: `Q_i` [BR x (D + ROW_PAD)], then two stages of
/// `K_j`, `V_j` [BC x (D + ROW_PAD)] each: tile `j` computes from stage `j % 2` while tile
/// `j + 1` is copied into the other.
#[inline(always)]
fn q_tile<T: Half, const D: usize>() -> SharedPtr<T> {
    dynamic_shared_mem::<T>()
}

/// `K_j` and `V_j` of stage `stage` (0 or 1).
#[inline(always)]
fn kv_stage<T: Half, const D: usize>(stage: usize) -> (SharedPtr<T>, SharedPtr<T>) {
    let stride = D + ROW_PAD;
    let k = dynamic_shared_mem::<T>().offset((BR + 2 * stage * BC) * stride);
    (k, k.offset(BC * stride))
}

/// One warp's scores for a step of KEYS keys: `S[t][nt]` is row tile `t`'s accumulator
/// fragment of keys `8 nt .. 8 nt + 8`.
type Scores = [[[f32; 4]; KEYS / 8]; ROW_TILES];
/// One warp's O: row tile `t`'s accumulator fragments, `D / 8` of them used.
type Output = [[[f32; 4]; MAX_D / 8]; ROW_TILES];
/// A value per row of this lane ([`lane_row`]): m, l, the mask's hidden keys.
type Rows<T> = [T; 2 * ROW_TILES];

/// Q_i's A fragment for k-step `kk` of row tile `t`, by `ldmatrix` from shared memory at a
/// constant offset from this lane's row `q_lane`.
#[inline(always)]
fn q_fragment<T: Half, const D: usize>(q_lane: SharedPtr<T>, t: usize, kk: usize) -> [u32; 4] {
    let stride = D + ROW_PAD;
    unsafe { ldmatrix_x4(q_lane.offset(16 * t * stride + kk * 16), false) }
}

/// The causal mask of this lane's rows, in 4 registers: how many keys each of them does not
/// see, past its diagonal; key `j` is visible where `j + hidden < n_kv` (`is_visible`, which per
/// score keeps ~64 more values live). Counted from the end so that no mask is the constant 0: as
/// a count of visible keys it would share n_kv's register, which the PTX convergence check (it
/// follows registers, not values) would then take for a per-lane tile count.
#[inline(always)]
fn hidden_keys(
    (i0, warp, lane): (usize, usize, usize),
    (n_q, n_kv, causal): (usize, usize, bool),
) -> Rows<u32> {
    let mut hidden = [0u32; 2 * ROW_TILES];
    unroll!(t in 0..2 {
        unroll!(h in 0..2 {
            let row = i0 + row_tile_start(warp, t) + lane / 4 + 8 * h;
            hidden[lane_row(t, 2 * h)] = (n_kv - visible_keys(row, n_q, n_kv, causal)) as u32;
        });
    });
    hidden
}

/// S_i^(j) = Q_i K_j^T for one step: [32 x KEYS] per warp, KEYS / 8 accumulators per row tile,
/// D / 16 k-steps; each K fragment (from this lane's row `k_step`) feeds both row tiles. Q's
/// fragments are `q_held` where it fits in registers, else loaded from `q_lane` again.
#[inline(always)]
fn scores<T: Half, const D: usize>(
    q_held: &[[[u32; 4]; MAX_D / 16]; ROW_TILES],
    q_lane: SharedPtr<T>,
    k_step: SharedPtr<T>,
) -> Scores {
    let stride = D + ROW_PAD;
    let mut s = [[[0.0f32; 4]; KEYS / 8]; ROW_TILES];
    unroll!(kk in 0..8 {
        if kk < D / 16 {
            let a = if q_in_registers(D) {
                [q_held[0][kk], q_held[1][kk]]
            } else {
                [q_fragment::<T, D>(q_lane, 0, kk), q_fragment::<T, D>(q_lane, 1, kk)]
            };
            unroll!(pair in 0..2 {
                let nt = 2 * pair; // two 8-key pieces per ldmatrix
                let b = unsafe { ldmatrix_x4(k_step.offset(nt * 8 * stride + kk * 16), false) };
                unroll!(t in 0..2 {
                    s[t][nt] = mma_m16n8k16(T::INPUT, a[t], [b[0], b[1]], s[t][nt]);
                    s[t][nt + 1] = mma_m16n8k16(T::INPUT, a[t], [b[2], b[3]], s[t][nt + 1]);
                });
            });
        }
    });
    s
}

/// Scales `s` (base 2) and masks it: a score whose key `j0 + ...` is past its row's visible keys
/// (`hidden`) becomes -inf. Returns m_i^(j) = max(m_i^(j-1), rowmax(S_i^(j))) over the row's 4
/// lanes. (Unrolled by hand: S must stay in registers; a loop LLVM leaves rolled indexes it,
/// and an indexed array lives in local memory, which is HBM behind the L1.)
#[inline(always)]
fn mask_and_max(
    s: &mut Scores,
    m: &Rows<f32>,
    hidden: &Rows<u32>,
    (lane, j0, n_kv): (usize, usize, usize),
    scale_log2: f32,
) -> Rows<f32> {
    let mut m_new = *m;
    unroll!(t in 0..2 {
        unroll!(nt in 0..4 {
            unroll!(e in 0..4 {
                let x = &mut s[t][nt][e];
                let (_, c) = accumulator_at(lane, e);
                let row = lane_row(t, e);
                *x = if j0 + nt * 8 + c + (hidden[row] as usize) < n_kv {
                    *x * scale_log2
                } else {
                    f32::NEG_INFINITY
                };
                m_new[row] = maximum(m_new[row], *x);
            });
        });
    });
    m_new.map(quad_max)
}

/// O and l rescaled by alpha = exp(m_i^(j-1) - m_i^(j)), before P is computed so that
/// m_i^(j-1) and alpha are dead by then.
#[inline(always)]
fn rescale<const D: usize>(
    o_acc: &mut Output,
    l: &mut Rows<f32>,
    m: &Rows<f32>,
    m_new: &Rows<f32>,
) {
    let mut alpha = [0.0f32; 2 * ROW_TILES];
    unroll!(row in 0..4 {
        alpha[row] = exp2_shifted(m[row], m_new[row]);
        l[row] *= alpha[row];
    });
    unroll!(t in 0..2 {
        unroll!(nd in 0..16 {
            if nd < D / 8 {
                unroll!(e in 0..4 {
                    o_acc[t][nd][e] *= alpha[lane_row(t, e)];
                });
            }
        });
    });
}

/// P_i^(j) = exp(S_i^(j) - m_i^(j)) in place, and this lane's part of rowsum(P_i^(j)) added to
/// `l`. `exp2_shifted` gives the softmax chapter's special values (see `kernels::attention`).
/// With FMA_EXP, every other 8-key piece takes its exponentials on the FMA units (`exp2_fma`),
/// so the special function units do half of them. (Unrolled, so that the choice is made at
/// compile time and `s` stays in registers.)
#[inline(always)]
fn exponentiate<const FMA_EXP: bool>(s: &mut Scores, m: &Rows<f32>, l: &mut Rows<f32>) {
    let mut rowsum = [0.0f32; 2 * ROW_TILES];
    unroll!(t in 0..2 {
        unroll!(nt in 0..4 {
            unroll!(e in 0..4 {
                let x = &mut s[t][nt][e];
                let row = lane_row(t, e);
                *x = if FMA_EXP && nt % 2 == 1 {
                    shifted(*x, m[row], exp2_fma)
                } else {
                    exp2_shifted(*x, m[row])
                };
                rowsum[row] += *x;
            });
        });
    });
    unroll!(row in 0..4 {
        l[row] += rowsum[row];
    });
}

/// O_i^(j) += P_i^(j) V_j: P straight from S's registers as A fragments (16 keys each), V_j's
/// fragments by ldmatrix.trans from this lane's row `v_step`, each feeding both row tiles.
#[inline(always)]
fn accumulate_pv<T: Half, const D: usize>(o_acc: &mut Output, s: &Scores, v_step: SharedPtr<T>) {
    let stride = D + ROW_PAD;
    unroll!(kk in 0..2 {
        let p = [0, 1].map(|t| {
            let (lo, hi) = (s[t][2 * kk], s[t][2 * kk + 1]);
            [
                pack::<T>(lo[0], lo[1]),
                pack::<T>(lo[2], lo[3]),
                pack::<T>(hi[0], hi[1]),
                pack::<T>(hi[2], hi[3]),
            ]
        });
        unroll!(pair in 0..8 {
            let nd = 2 * pair; // two 8-column pieces of d per ldmatrix
            if nd < D / 8 {
                let b = unsafe { ldmatrix_x4(v_step.offset(kk * 16 * stride + nd * 8), true) };
                unroll!(t in 0..2 {
                    o_acc[t][nd] = mma_m16n8k16(T::INPUT, p[t], [b[0], b[1]], o_acc[t][nd]);
                    o_acc[t][nd + 1] = mma_m16n8k16(T::INPUT, p[t], [b[2], b[3]], o_acc[t][nd + 1]);
                });
            }
        });
    });
}

/// O_i = O_i^(last) / l_i^(last), LSE_i = m_i^(last) + log l_i^(last); the row's sum is merged
/// over its 4 lanes now. A fully masked row has l = 0: zeros and -inf.
///
/// # Safety
/// `o` and `lse` hold the head's `n_q` rows.
#[inline(always)]
unsafe fn store_o_lse<T: Half, const D: usize>(
    (o, lse): (GlobalPtr<T>, GlobalPtr<f32>),
    o_acc: &Output,
    (m, l): (&Rows<f32>, &Rows<f32>),
    (i0, warp, lane, n_q): (usize, usize, usize, usize),
) {
    let l = l.map(quad_sum);
    let inv_l = l.map(|x| if x > 0.0 { 1.0 / x } else { 0.0 });
    unroll!(t in 0..2 {
        let first_row = i0 + row_tile_start(warp, t);
        let scale = [inv_l[lane_row(t, 0)], inv_l[lane_row(t, 2)]];
        unsafe { store_o::<T, D>(o, &o_acc[t], scale, lane, first_row, n_q) };
        unroll!(h in 0..2 {
            let (row, own) = (first_row + lane / 4 + 8 * h, lane_row(t, 2 * h));
            if lane.is_multiple_of(4) && row < n_q {
                let lse_2 = m[own] + log2_approx(l[own]);
                unsafe { lse.write(row, lse_2 * core::f32::consts::LN_2) };
            }
        });
    });
}

/// The forward pass for input type `T` and head dimension `D`; the kernels below fix both.
/// The recurrence is here, a step of it a call per line: scores, mask and running max,
/// rescale, exponentials, `P V`; the helpers above hold each one's fragment arithmetic.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn flash_forward<T: Half, const D: usize, const FMA_EXP: bool>(
    q: GlobalPtr<T>,
    k: GlobalPtr<T>,
    v: GlobalPtr<T>,
    o: GlobalPtr<T>,
    lse: GlobalPtr<f32>,
    n_q: usize,
    n_kv: usize,
    scale: f32,
    causal: bool,
) {
    let bh = block_idx_y() as usize;
    let i0 = block_idx_x() as usize * BR; // first query row of the block
    let lane = lane_id() as usize;
    let warp = thread_idx_x() as usize / WARP_SIZE as usize;
    let ([q, k, v, o], lse) = select_head([q, k, v, o], lse, bh, (n_q, n_kv, D));

    // Shared: Q_i [BR x D] and two stages of K_j, V_j [BC x D], rows padded.
    let stride = D + ROW_PAD;
    let q_s = q_tile::<T, D>();
    let kv_end = kv_end(i0, BR, n_q, n_kv, causal);
    let tiles = kv_end.div_ceil(BC);
    // K_j, V_j of tile `j` (keys j * BC ..): HBM -> stage j % 2, asynchronously.
    let copy_kv = |j: usize| {
        let (k_s, v_s) = kv_stage::<T, D>(j % STAGES);
        unsafe {
            copy_tile_async::<T, D>(k, j * BC, n_kv, k_s, BC);
            copy_tile_async::<T, D>(v, j * BC, n_kv, v_s, BC);
        }
    };

    // Q_i and tile 0 in flight as one group; wait for it, and (barrier) for everyone's part.
    unsafe { copy_tile_async::<T, D>(q, i0, n_q, q_s, BR) };
    if tiles > 0 {
        copy_kv(0);
    }
    cp_async_commit_group();
    cp_async_wait_group::<0>();
    sync_threads();

    // Q_i's A fragments are read by `ldmatrix` at constant offsets from this lane's row,
    // `q_lane` ([`q_fragment`]).
    let (ar, ac) = x4_lane(lane);
    let q_lane = q_s.offset((row_tile_start(warp, 0) + ar) * stride + ac);
    // Where they fit (d = 64), Q_i goes shared -> registers once: the warp's two row tiles as
    // D / 16 A fragments each.
    let mut q_held = [[[0u32; 4]; MAX_D / 16]; ROW_TILES];
    if q_in_registers(D) {
        unroll!(t in 0..2 {
            unroll!(kk in 0..8 {
                if kk < D / 16 {
                    q_held[t][kk] = q_fragment::<T, D>(q_lane, t, kk);
                }
            });
        });
    }

    // Registers: O_i (32 x D per warp, D / 8 accumulator fragments per row tile), and m, l for
    // this lane's 4 rows, g and g + 8 of each row tile ([`lane_row`]; l as this lane's partial
    // sum over its columns), and the causal mask of those rows.
    let mut o_acc: Output = [[[0.0f32; 4]; MAX_D / 8]; ROW_TILES];
    let mut m = [f32::NEG_INFINITY; 2 * ROW_TILES];
    let mut l = [0.0f32; 2 * ROW_TILES];
    let scale_log2 = scale * LOG2_E;
    let hidden = hidden_keys((i0, warp, lane), (n_q, n_kv, causal));

    for j in 0..tiles {
        // Tile j is in its stage, visible to every thread. Start copying tile j + 1 into the
        // other stage, which every warp finished reading (tile j - 1) before the last barrier;
        // it lands while this tile is computed. (An empty group past the end keeps the count.)
        if j + 1 < tiles {
            copy_kv(j + 1);
        }
        cp_async_commit_group();
        // This lane's ldmatrix rows of K_j and V_j. (The bases change with the stage, so the
        // compiler computes the fragment addresses here, as adds of constants, instead of
        // hoisting them out of the loop into 128 live registers.)
        let (k_s, v_s) = kv_stage::<T, D>(j % STAGES);
        let (br, bc) = b_fragment_row(lane);
        let (vr, vc) = x4_lane(lane);
        let k_lane = k_s.offset(br * stride + bc);
        let v_lane = v_s.offset(vr * stride + vc);
        // The tile in steps of KEYS keys, each one whole step of the recurrence.
        for step in 0..BC / KEYS {
            let j0 = j * BC + step * KEYS; // first key of the step
            let k_step = k_lane.offset(step * KEYS * stride);
            let v_step = v_lane.offset(step * KEYS * stride);
            // Likewise Q's (d = 128): a base the compiler cannot hoist, or it would keep all 16
            // fragment addresses live across the loop, 32 registers.
            let q_in_loop = opaque(q_lane);

            let mut s = scores::<T, D>(&q_held, q_in_loop, k_step);
            let m_new = mask_and_max(&mut s, &m, &hidden, (lane, j0, n_kv), scale_log2);
            // l_i^(j) = exp(m_i^(j-1) - m_i^(j)) l_i^(j-1) + rowsum(P_i^(j)), and O alike.
            rescale::<D>(&mut o_acc, &mut l, &m, &m_new);
            m = m_new;
            exponentiate::<FMA_EXP>(&mut s, &m, &mut l);
            accumulate_pv::<T, D>(&mut o_acc, &s, v_step);
        }
        // Tile j + 1 has landed for this thread; after the barrier, for every thread, and every
        // warp is done with tile j, whose stage tile j + 2 will refill.
        cp_async_wait_group::<0>();
        sync_threads();
    }

    unsafe { store_o_lse::<T, D>((o, lse), &o_acc, (&m, &l), (i0, warp, lane, n_q)) };
}

macro_rules! flash_mma_kernel {
    ($(#[$meta:meta])* $name:ident, $t:ty, $d:literal) => {
        flash_mma_kernel!($(#[$meta])* $name, $t, $d, false);
    };
    ($(#[$meta:meta])* $name:ident, $t:ty, $d:literal, $fma_exp:literal) => {
        kernel! {
            $(#[$meta])*
            pub unsafe fn $name(
                q: GlobalPtr<$t>, k: GlobalPtr<$t>, v: GlobalPtr<$t>, o: GlobalPtr<$t>, lse: GlobalPtr<f32>,
                n_q: u32, n_kv: u32, scale: f32, causal: u32,
            ) {
                unsafe { flash_forward::<$t, $d, $fma_exp>(q, k, v, o, lse, n_q as usize, n_kv as usize, scale, causal != 0) }
            }
        }
    };
}

flash_mma_kernel!(
    /// FlashAttention forward on tensor cores, bf16, d = 64. Grid `(ceil(n_q / BR),
    /// batch * heads)`, `THREADS` threads, [`shared_bytes`]`(64)` of dynamic shared memory.
    flash_attention_bf16_d64, Bf16, 64);
flash_mma_kernel!(
    /// As [`flash_attention_bf16_d64`], d = 128.
    flash_attention_bf16_d128, Bf16, 128);
flash_mma_kernel!(
    /// As [`flash_attention_bf16_d64`], with half of the exponentials (every other 8-key piece
    /// of each score tile) computed by [`exp2_fma`] on the FMA units: FlashAttention-4's answer
    /// to the exponential roof (docs/attention.md).
    flash_attention_bf16_poly_d64, Bf16, 64, true);
flash_mma_kernel!(
    /// As [`flash_attention_bf16_d64`], f16 inputs.
    flash_attention_f16_d64, F16, 64);
flash_mma_kernel!(
    /// As [`flash_attention_bf16_d64`], f16 inputs, d = 128.
    flash_attention_f16_d128, F16, 128);

#[cfg(test)]
mod tests {
    use super::*;

    /// Both `ldmatrix.x4` lane maps supply 32 distinct 16-byte rows covering a 16 x 16 block, and
    /// K's groups keys 0..8 (matrices 0, 1) before keys 8..16 (matrices 2, 3), columns 0..8 first.
    #[test]
    fn ldmatrix_lane_maps_cover_a_16x16_block() {
        for map in [b_fragment_row, x4_lane] {
            let mut rows: std::vec::Vec<_> = (0..32).map(map).collect();
            assert!(rows.iter().all(|&(r, c)| r < 16 && (c == 0 || c == 8)));
            rows.sort();
            rows.dedup();
            assert_eq!(rows.len(), 32);
        }
        let matrix = |lane: usize| {
            let (r, c) = b_fragment_row(lane);
            (r / 8, c / 8)
        };
        assert_eq!([0, 8, 16, 24].map(matrix), [(0, 0), (0, 1), (1, 0), (1, 1)]);
    }
}
