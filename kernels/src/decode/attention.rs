//! Split-KV decode attention ("flash-decoding"): one query token per (sequence, query head)
//! against that sequence's KV cache, in two kernels.
//!
//! # Layout
//!
//! - `q`: `batch x q_heads x D` (the new token's query, one row per head), bf16.
//! - `k`, `v`: the KV cache, `batch x kv_heads x max_ctx x D`, bf16; sequence `b` uses its first
//!   `ctx[b]` positions (`ctx`: `batch` u32, each `<= max_ctx`; the rest is never read). Or paged
//!   ([`Paged`]): a pool of pages of `kv_heads x page_size x D` and a block table per sequence.
//! - grouped-query attention: query head `hq` reads KV head `hq / group`, `group = q_heads /
//!   kv_heads` (Llama-3-8B: 32 query heads, 8 KV heads, groups of 4). `D` = [`HEAD_DIM`].
//! - out: `o` (`batch x q_heads x D`, bf16) and the log-sum-exp `lse` (`batch x q_heads`, f32).
//!
//! `o[b, hq] = sum_j p_j v[b, hq / group, j]`, `p = softmax(scale q[b, hq] . k[b, hq / group, j])`
//! over `j < ctx[b]`. A sequence with `ctx[b] = 0` sees no key: `o = 0`, `lse = -inf`, as a fully
//! masked row of `kernels::attention`.
//!
//! # Why split, and the two kernels
//!
//! One query row per head leaves nothing to tile over the queries: a block per (sequence, KV
//! head) would be 8 blocks for one Llama-3 sequence on a 132-SM GPU, 6% of the machine streaming
//! the cache. So the cache is also cut along the keys: [`decode_attention_split_bf16_g4`] (and
//! its siblings for other group sizes) runs one block per (chunk of `chunk` keys, KV head,
//! sequence); each block reads its chunk of K and V
//! once, for every query head of the group (the GQA saving: a KV byte is read once, not `group`
//! times), and writes each head's **partial** `(m, l, o)` (in f32, `o` unnormalised, relative to
//! `m`) to a small workspace. [`decode_attention_merge_bf16`] then merges each head's partials
//! with the online-softmax law ([`crate::softmax::merge`] for `(m, l)`, and `o` rescaled by the
//! same factors `exp(m_s - m)`), normalises, and writes `o` and `lse`.
//!
//! The merge is a second kernel rather than "the last block to finish merges": that would need
//! a global atomic counter per head, a memory fence, and a workspace counter reset between
//! launches, and it makes the order of the merge depend on timing. The second launch costs a few
//! microseconds and reads `splits x (D + 2) x 4` bytes per head, under 3% of the cache bytes with
//! the host's smallest chunk of 256 keys (docs/decode.md counts it).
//!
//! # Inside a split block
//!
//! [`THREADS`] = 128 threads = 8 **key groups** of 16 lanes (half-warps). A key row of `D` = 128
//! bf16 is 256 bytes, 16 lanes x 16 bytes: each lane of a key group loads 8 dims of K and of V
//! with one 16-byte load each, so a warp reads 512 consecutive bytes (two rows) per instruction.
//! Key group `g` takes keys `start + g, start + g + 8, ...` of the chunk, [`KEYS_PER_STEP`] at a
//! time, all loads issued before any is used (`128 x 2 x 2 x 16` = 8 KiB of K and V in flight
//! per block, see docs/decode.md for how many blocks that needs per SM). For each key and each
//! query head of the group, the lane's 8 products are summed over the 16 lanes with four
//! shuffles, and the one-key partial `(s, 1, v)` is merged into the head's running partial: the
//! online softmax, one key at a time. At the end the two halves of each warp merge through a
//! shuffle, the four warps through shared memory (one thread per dimension, so that each head's
//! partial is written with coalesced stores), and the block writes one partial per head.
//!
//! Where each piece lives: the group's query rows in shared memory once (then registers, as
//! f32, pre-multiplied by `scale`), the running `(m, l, o)` of each head in registers (8 dims of
//! `o` per lane), K and V only in registers on their way through.

use core::num::NonZeroU32;

use super::{BF16_PER_VECTOR, widen_bf16x8};
use crate::cuda::intrinsics::{count_flops, fma, log2_approx};
use crate::cuda::thread::{
    block_idx_x, block_idx_y, block_idx_z, grid_dim_x, sync_threads, thread_idx_x,
};
use crate::cuda::warp::{
    FULL_MASK, WARP_SIZE, lane_id, reduce_sum_within, shuffle_idx, shuffle_xor,
};
use crate::cuda::{Bf16, GlobalPtr};
use crate::elementwise::Words4;
use crate::softmax::{
    OnlineState, Reduce, block_allreduce, exp_shifted, merge, reciprocal_or_zero,
};
use crate::{kernel, shared_array, unroll};

/// The head dimension the kernels are built for (Llama-3, Mistral, Qwen: 128).
pub const HEAD_DIM: usize = 128;
/// Threads per split block: 4 warps, 8 key groups.
pub const THREADS: u32 = 128;
/// Lanes that share one key row: `HEAD_DIM` bf16 in 16-byte pieces.
pub const LANES_PER_KEY: u32 = (HEAD_DIM / BF16_PER_VECTOR) as u32;
/// Key groups per block: keys processed side by side.
pub const KEY_GROUPS: u32 = THREADS / LANES_PER_KEY;
/// Keys each key group loads per step before using any.
pub const KEYS_PER_STEP: u32 = 2;
/// Keys a block consumes per step of its loop.
pub const BLOCK_KEYS_PER_STEP: u32 = KEY_GROUPS * KEYS_PER_STEP;
/// The largest GQA group (query heads per KV head) the kernel keeps in registers.
pub const MAX_GROUP: usize = 8;
/// The most splits per sequence the merge kernel takes (its shared array of split maxima).
pub const MAX_SPLITS: u32 = 1024;
/// Threads per merge block: one per dimension of the head.
pub const MERGE_THREADS: u32 = HEAD_DIM as u32;
/// Warps per split block.
const WARPS: usize = (THREADS / WARP_SIZE) as usize;
/// Lanes in a warp's half (`KEY_GROUPS` per block, two per warp).
const HALF_WARP: u32 = WARP_SIZE / 2;

/// FLOPs per (query head, visible key): `2 D` for the score, `2 D` for `p v`, as every attention
/// cost model here counts. Each of the 16 lanes of a key marks its eighth.
pub const FLOPS_PER_KEY: u32 = 4 * HEAD_DIM as u32;
/// FLOPs per (head, split, dimension) of the merge: one multiply-add of the rescaled partial.
pub const MERGE_FLOPS: u32 = 2;

const _: () = assert!(LANES_PER_KEY == HALF_WARP && THREADS.is_multiple_of(WARP_SIZE));
const _: () = assert!(MAX_GROUP * LANES_PER_KEY as usize <= THREADS as usize);
// The unrolled loops cover 2 keys per step and 8 heads per group.
const _: () = assert!(KEYS_PER_STEP == 2 && MAX_GROUP == 8);
// The split block's epilogue gives each thread one dimension of the head.
const _: () = assert!(THREADS as usize == HEAD_DIM);

/// A partial softmax-weighted sum over some of a head's keys, as one lane holds it: the online
/// state `(m, l)` of the scores and 8 dims of `o = sum_j exp(s_j - m) v_j`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Partial {
    /// `(m, l)` of the keys seen.
    pub state: OnlineState,
    /// This lane's 8 dims of the unnormalised output.
    pub o: [f32; BF16_PER_VECTOR],
}

impl Partial {
    /// No key seen: the merge's identity.
    pub const EMPTY: Self = Self {
        state: OnlineState::IDENTITY,
        o: [0.0; BF16_PER_VECTOR],
    };

    /// One key with score `s` and value `v`: `(s, 1, v)`.
    #[inline(always)]
    pub fn one(s: f32, v: [f32; BF16_PER_VECTOR]) -> Self {
        Self {
            state: OnlineState::of(s),
            o: v,
        }
    }
}

/// The partial of the union of two disjoint sets of keys: `(m, l)` by [`merge`], and
/// `o = exp(m_a - m) o_a + exp(m_b - m) o_b` with the same factors (one of them exactly 1, by
/// [`exp_shifted`]'s `x = m` case). Exactly commutative, so the two lanes of a butterfly agree.
#[inline(always)]
pub fn merge_partial(a: Partial, b: Partial) -> Partial {
    let state = merge(a.state, b.state);
    let (fa, fb) = (
        exp_shifted(a.state.m, state.m),
        exp_shifted(b.state.m, state.m),
    );
    let mut o = [0.0f32; BF16_PER_VECTOR];
    for (e, o_e) in o.iter_mut().enumerate() {
        *o_e = fa * a.o[e] + fb * b.o[e];
    }
    Partial { state, o }
}

/// The keys `[start, end)` split `split` of a sequence with `ctx` keys covers, chunks of `chunk`:
/// empty for a split past the end of a shorter sequence (its partial is the identity).
#[inline(always)]
pub const fn split_keys(split: u32, chunk: u32, ctx: u32) -> (u32, u32) {
    let start = split as u64 * chunk as u64;
    let end = start + chunk as u64;
    (clamp_to(start, ctx), clamp_to(end, ctx))
}

/// `min(x, ctx)` as u32.
#[inline(always)]
const fn clamp_to(x: u64, ctx: u32) -> u32 {
    if x < ctx as u64 { x as u32 } else { ctx }
}

/// Element offset of key `j`'s row for KV head `h` of sequence `b` in the cache.
#[inline(always)]
pub const fn kv_row(b: usize, h: usize, j: usize, (kv_heads, max_ctx): (usize, usize)) -> usize {
    ((b * kv_heads + h) * max_ctx + j) * HEAD_DIM
}

/// Where the split kernel finds key `j` of KV head `h` of sequence `b`: the element offset of its
/// row of `HEAD_DIM` in the K (and V) buffer. Every lane of the warp calls it together (the paged
/// layout exchanges a value between lanes); `valid` is false for a lane whose key is past the end,
/// which must not read anything.
pub trait KvLayout: Copy {
    /// # Safety
    /// With `valid`, `j < ctx[b]` and the layout's buffers hold the row.
    unsafe fn row(self, b: u32, h: u32, j: u32, valid: bool) -> usize;
}

/// One contiguous cache per (sequence, KV head): `batch x kv_heads x max_ctx x D` ([`kv_row`]).
#[derive(Clone, Copy)]
pub struct Contiguous {
    /// KV heads per sequence.
    pub kv_heads: u32,
    /// Positions per (sequence, KV head).
    pub max_ctx: u32,
}

impl KvLayout for Contiguous {
    #[inline(always)]
    unsafe fn row(self, b: u32, h: u32, j: u32, _valid: bool) -> usize {
        kv_row(
            b as usize,
            h as usize,
            j as usize,
            (self.kv_heads as usize, self.max_ctx as usize),
        )
    }
}

/// A paged cache (vLLM's "PagedAttention" layout): the cache is a pool of pages, each
/// `kv_heads x page_size x D`, and sequence `b`'s position `j` lives in page
/// `table[b * pages_per_seq + j / page_size]`, at row `j % page_size`. Pages can be allocated as
/// sequences grow, in any order, with no copy.
#[derive(Clone, Copy)]
pub struct Paged {
    /// The block table: `batch x pages_per_seq` page numbers.
    pub table: GlobalPtr<u32>,
    /// Entries per sequence in the table.
    pub pages_per_seq: u32,
    /// Positions per page.
    pub page_size: u32,
    /// KV heads per sequence (and per page).
    pub kv_heads: u32,
}

/// Element offset of row `slot` of KV head `h` in page `page` of a paged cache.
#[inline(always)]
pub const fn paged_row(
    page: usize,
    h: usize,
    slot: usize,
    (kv_heads, page_size): (usize, usize),
) -> usize {
    ((page * kv_heads + h) * page_size + slot) * HEAD_DIM
}

impl KvLayout for Paged {
    /// Lane 0 of each key group reads the table entry (4 bytes per key from HBM, not 16 lanes x 4)
    /// and the other 15 lanes receive it with one shuffle.
    #[inline(always)]
    unsafe fn row(self, b: u32, h: u32, j: u32, valid: bool) -> usize {
        let lane = lane_id();
        // The host refuses pages of 0 positions; dividing by a `NonZeroU32` has no panic path
        // (a division by a plain u32 would call into core's panic machinery, absent on the GPU).
        let page_size = NonZeroU32::new(self.page_size).unwrap_or(NonZeroU32::MIN);
        let mut page = 0u32;
        if valid && lane.is_multiple_of(LANES_PER_KEY) {
            let entry = b as usize * self.pages_per_seq as usize + (j / page_size) as usize;
            // SAFETY: the caller's contract: j < ctx[b] <= pages_per_seq * page_size.
            page = unsafe { self.table.read(entry) };
        }
        let page = shuffle_idx(FULL_MASK, page, lane - lane % LANES_PER_KEY);
        let shape = (self.kv_heads as usize, self.page_size as usize);
        paged_row(page as usize, h as usize, (j % page_size) as usize, shape)
    }
}

/// Index of the partial of (sequence-head `row` = `b * q_heads + hq`, split `s`).
#[inline(always)]
pub const fn partial_index(row: usize, split: usize, splits: usize) -> usize {
    row * splits + split
}

/// Pass 1. Block `(split, h, b)`: the partials of the `group` query heads of KV head `h` over
/// split `split`'s keys of sequence `b`.
///
/// # Safety
/// Grid `(splits, kv_heads, batch)`, blocks of [`THREADS`]; `1 <= group <= MAX_GROUP`; buffers
/// as in the module docs, `layout` holding every key `j < ctx[b]` of `k` and `v`,
/// `splits * chunk >= max(ctx)`; the partials hold
/// `batch * q_heads * splits` states (`part_o` `HEAD_DIM` f32 each); all 16-byte aligned.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn split_pass<const GT: usize, L: KvLayout>(
    q: GlobalPtr<Bf16>,
    [k, v]: [GlobalPtr<Bf16>; 2],
    layout: L,
    ctx: GlobalPtr<u32>,
    part_m: GlobalPtr<f32>,
    part_l: GlobalPtr<f32>,
    part_o: GlobalPtr<f32>,
    (kv_heads, group, chunk): (u32, u32, u32),
    scale: f32,
) {
    let (split, h, b) = (block_idx_x(), block_idx_y(), block_idx_z());
    let splits = grid_dim_x();
    let t = thread_idx_x();
    let (key_group, lane16) = (t / LANES_PER_KEY, (t % LANES_PER_KEY) as usize);
    let group_n = group as usize;
    let q_heads = (kv_heads * group) as usize;
    let first_head = b as usize * q_heads + (h * group) as usize; // row of the group's head 0

    // The sequence length, read by every thread: the 32 lanes of a warp read the same 4 bytes,
    // one sector. (Thread 0 reading it into shared memory for the others would put a barrier
    // after a `tid == 0` branch, which rustc's MIR JumpThreading can copy into both arms:
    // docs/toolchain.md.)
    // SAFETY: b < batch.
    let ctx_b = unsafe { ctx.read(b as usize) };
    let (start, end) = split_keys(split, chunk, ctx_b);

    // HBM -> shared, once per block: the group's query rows (group x 256 bytes).
    let q_s = shared_array![decode_q: [Words4; MAX_GROUP * LANES_PER_KEY as usize]];
    if (t as usize) < group_n * LANES_PER_KEY as usize {
        // SAFETY: the group's rows are consecutive in q; one writer per slot.
        unsafe {
            let at = first_head * LANES_PER_KEY as usize + t as usize;
            q_s.write(t as usize, q.cast::<Words4>().read(at));
        }
    }
    sync_threads();
    // Shared -> registers: this lane's 8 dims of each query row, as f32 times the scale.
    let mut q_r = [[0.0f32; BF16_PER_VECTOR]; GT];
    unroll!(g in 0..8 {
        if g < GT && g < group_n {
            // SAFETY: written before the barrier.
            let row = widen_bf16x8(unsafe { q_s.read(g * LANES_PER_KEY as usize + lane16) });
            q_r[g] = row.map(|x| x * scale);
        }
    });

    let (k4, v4) = (k.cast::<Words4>(), v.cast::<Words4>());
    // Registers: each head's running partial.
    let mut acc = [Partial::EMPTY; GT];
    let mut j0 = start;
    // The trip count is the same for the whole block (start and end are), so every lane reaches
    // every shuffle; a key group past the end masks its keys instead of leaving the loop.
    while j0 < end {
        // HBM -> registers: KEYS_PER_STEP keys of K and V, all loads issued first.
        let mut kv = [None::<(Words4, Words4)>; KEYS_PER_STEP as usize];
        unroll!(u in 0..2 {
            let j = j0 + key_group + KEY_GROUPS * u as u32;
            // Every lane finds its row (the paged layout shuffles), then only real keys load.
            // SAFETY: the launch contract: key j < ctx[b] has a row in the cache.
            let row = unsafe { layout.row(b, h, j, j < end) };
            if j < end {
                // SAFETY: as above; 16 lanes x 16 bytes is the row.
                let piece = row / BF16_PER_VECTOR + lane16;
                kv[u] = Some(unsafe { (k4.read(piece), v4.read(piece)) });
            }
        });
        unroll!(u in 0..2 {
            let key = kv[u];
            let (kw, vw) = key.unwrap_or_default();
            let (kf, vf) = (widen_bf16x8(kw), widen_bf16x8(vw));
            unroll!(g in 0..8 {
                if g < GT && g < group_n {
                    let mut dot = 0.0f32;
                    for e in 0..BF16_PER_VECTOR {
                        dot = fma(q_r[g][e], kf[e], dot);
                    }
                    // The 16 lanes of the key group hold the 16 pieces of the dot product.
                    let s = reduce_sum_within(dot, LANES_PER_KEY);
                    if key.is_some() {
                        acc[g] = merge_partial(acc[g], Partial::one(s, vf));
                        count_flops(FLOPS_PER_KEY / LANES_PER_KEY);
                    }
                }
            });
        });
        j0 += BLOCK_KEYS_PER_STEP;
    }

    // The two key groups of each warp: one butterfly step across the halves.
    unroll!(g in 0..8 {
        if g < GT && g < group_n {
            acc[g] = merge_partial(acc[g], acc[g].shuffle_xor(HALF_WARP));
        }
    });
    // The four warps, through shared memory: lanes 0..16 of each warp write their partials.
    let o_s = shared_array![decode_o: [f32; WARPS * MAX_GROUP * HEAD_DIM]];
    let ml_s = shared_array![decode_ml: [OnlineState; WARPS * MAX_GROUP]];
    let warp = t as usize / WARP_SIZE as usize;
    let o_at = |w: usize, g: usize, e: usize| (w * MAX_GROUP + g) * HEAD_DIM + lane16 * 8 + e;
    if (t % WARP_SIZE) < HALF_WARP {
        unroll!(g in 0..8 {
            if g < GT && g < group_n {
                // SAFETY: one writer per slot: (warp, g, lane16's dims), and lane 0's state.
                unsafe {
                    for e in 0..BF16_PER_VECTOR {
                        o_s.write(o_at(warp, g, e), acc[g].o[e]);
                    }
                    if lane16 == 0 {
                        ml_s.write(warp * MAX_GROUP + g, acc[g].state);
                    }
                }
            }
        });
    }
    sync_threads();
    // Thread d, for each head of the group: dimension d of the four warps' partials merged
    // ((m, l) by `merge`, o rescaled to their common max) and written, so that the 128 threads
    // write a head's 128 floats side by side (one coalesced store, not 16 lanes 32 bytes apart).
    let d = t as usize;
    for g in 0..group_n {
        // SAFETY: written before the barrier.
        let state_of = |w: usize| unsafe { ml_s.read(w * MAX_GROUP + g) };
        let total = (0..WARPS).fold(OnlineState::IDENTITY, |s, w| merge(s, state_of(w)));
        let o_d = rescaled_sum(WARPS, total.m, |w| {
            // SAFETY: written before the barrier (lane16 * 8 + e covers every dimension).
            let o = unsafe { o_s.read((w * MAX_GROUP + g) * HEAD_DIM + d) };
            (state_of(w).m, o)
        });
        let at = partial_index(first_head + g, split as usize, splits as usize);
        // SAFETY: one writer per partial and per dimension.
        unsafe {
            part_o.write(at * HEAD_DIM + d, o_d);
            if d == 0 {
                part_m.write(at, total.m);
                part_l.write(at, total.l);
            }
        }
    }
}

/// `sum_s exp(m_s - m) o_s` over `n` partials, `part(s) = (m_s, o_s)`: one dimension of their
/// outputs rescaled to the maximum `m` of their merged state and summed, the `o` half of the merge
/// law. (A partial with no key has `m_s = -inf` and weighs 0.)
#[inline(always)]
fn rescaled_sum(n: usize, m: f32, part: impl Fn(usize) -> (f32, f32)) -> f32 {
    let mut sum = 0.0f32;
    for s in 0..n {
        let (m_s, o_s) = part(s);
        sum += exp_shifted(m_s, m) * o_s;
    }
    sum
}

impl Partial {
    /// The partial held by lane `lane ^ lane_mask` (10 shuffles).
    #[inline(always)]
    fn shuffle_xor(self, lane_mask: u32) -> Self {
        Self {
            state: Reduce::shuffle_xor(self.state, lane_mask),
            o: self.o.map(|x| shuffle_xor(FULL_MASK, x, lane_mask)),
        }
    }
}

/// Pass 2. Block `row` (= `b * q_heads + hq`), thread `d`: merges the head's `splits` partials
/// and writes `o[row, d]` (and, thread 0, `lse[row]`).
///
/// # Safety
/// `batch * q_heads` blocks of [`MERGE_THREADS`]; `1 <= splits <= MAX_SPLITS`; the partials as
/// pass 1 leaves them.
#[inline(always)]
unsafe fn merge_pass(
    part_m: GlobalPtr<f32>,
    part_l: GlobalPtr<f32>,
    part_o: GlobalPtr<f32>,
    o: GlobalPtr<Bf16>,
    lse: GlobalPtr<f32>,
    splits: u32,
) {
    let row = block_idx_x() as usize;
    let d = thread_idx_x() as usize;
    let splits = splits as usize;
    // HBM -> registers: each thread merges the states of splits d, d + 128, ...; the maxima also
    // go to shared memory, where every thread needs them for its rescale factors.
    let m_s = shared_array![decode_split_max: [f32; MAX_SPLITS as usize]];
    let mut state = OnlineState::IDENTITY;
    for s in (d..splits).step_by(MERGE_THREADS as usize) {
        let at = partial_index(row, s, splits);
        // SAFETY: at < rows * splits; one writer per slot of m_s.
        let part = unsafe {
            OnlineState {
                m: part_m.read(at),
                l: part_l.read(at),
            }
        };
        // SAFETY: s < splits <= MAX_SPLITS; one writer per slot.
        unsafe { m_s.write(s, part.m) };
        state = merge(state, part);
    }
    // The head's (m, l), in every thread (its barriers also publish m_s).
    let total = block_allreduce(state);
    let sum = rescaled_sum(splits, total.m, |s| {
        // SAFETY: m_s[s] written before the barrier; the partial exists.
        unsafe {
            (
                m_s.read(s),
                part_o.read(partial_index(row, s, splits) * HEAD_DIM + d),
            )
        }
    });
    count_flops(MERGE_FLOPS * splits as u32);
    // SAFETY: row < rows, d < HEAD_DIM: one writer per element.
    unsafe {
        o.write(
            row * HEAD_DIM + d,
            Bf16::from_f32(sum * reciprocal_or_zero(total.l)),
        )
    };
    if d == 0 {
        // lse = m + ln l: -inf for a head that saw no key (l = 0, m = -inf).
        let lse_row = total.m + log2_approx(total.l) * core::f32::consts::LN_2;
        // SAFETY: one writer per row.
        unsafe { lse.write(row, lse_row) };
    }
}

/// One entry point per group tile and cache layout: the kernel for tile `GT` takes groups of up
/// to `GT` query heads (its per-head registers are sized at compile time: a group of 4 in the
/// tile of 8 would hold twice the registers it needs, and fewer blocks would fit an SM).
macro_rules! split_kernels {
    ($($name:ident, $paged:ident = $gt:literal);*) => {$(
        kernel! {
            #[doc = concat!("Split-KV decode attention, pass 1 (bf16, `D` = 128, groups of up to ", stringify!($gt), " query heads, ")]
            #[doc = "a contiguous cache): each block's partial `(m, l, o)` for the query heads of one KV head over one "]
            #[doc = "chunk of keys. Grid `(splits, kv_heads, batch)`, blocks of [`THREADS`]."]
            pub unsafe fn $name(
                q: GlobalPtr<Bf16>,
                k: GlobalPtr<Bf16>,
                v: GlobalPtr<Bf16>,
                ctx: GlobalPtr<u32>,
                part_m: GlobalPtr<f32>,
                part_l: GlobalPtr<f32>,
                part_o: GlobalPtr<f32>,
                kv_heads: u32,
                group: u32,
                max_ctx: u32,
                chunk: u32,
                scale: f32,
            ) {
                let layout = Contiguous { kv_heads, max_ctx };
                let shape = (kv_heads, group, chunk);
                unsafe { split_pass::<$gt, _>(q, [k, v], layout, ctx, part_m, part_l, part_o, shape, scale) }
            }
        }
        kernel! {
            #[doc = concat!("Pass 1 as [`", stringify!($name), "`], on a paged cache ([`Paged`]).")]
            pub unsafe fn $paged(
                q: GlobalPtr<Bf16>,
                k: GlobalPtr<Bf16>,
                v: GlobalPtr<Bf16>,
                ctx: GlobalPtr<u32>,
                table: GlobalPtr<u32>,
                part_m: GlobalPtr<f32>,
                part_l: GlobalPtr<f32>,
                part_o: GlobalPtr<f32>,
                kv_heads: u32,
                group: u32,
                pages_per_seq: u32,
                page_size: u32,
                chunk: u32,
                scale: f32,
            ) {
                let layout = Paged { table, pages_per_seq, page_size, kv_heads };
                let shape = (kv_heads, group, chunk);
                unsafe { split_pass::<$gt, _>(q, [k, v], layout, ctx, part_m, part_l, part_o, shape, scale) }
            }
        }
    )*};
}

split_kernels!(
    decode_attention_split_bf16_g1, decode_attention_paged_bf16_g1 = 1;
    decode_attention_split_bf16_g2, decode_attention_paged_bf16_g2 = 2;
    decode_attention_split_bf16_g4, decode_attention_paged_bf16_g4 = 4;
    decode_attention_split_bf16_g8, decode_attention_paged_bf16_g8 = 8
);

/// Query heads per KV head of each pass-1 entry point.
pub const GROUP_TILES: [u32; 4] = [1, 2, 4, 8];

kernel! {
    /// Split-KV decode attention, pass 2: merges each head's partials and writes `o` (bf16) and
    /// `lse`. One block of [`MERGE_THREADS`] per (sequence, query head).
    pub unsafe fn decode_attention_merge_bf16(
        part_m: GlobalPtr<f32>,
        part_l: GlobalPtr<f32>,
        part_o: GlobalPtr<f32>,
        o: GlobalPtr<Bf16>,
        lse: GlobalPtr<f32>,
        splits: u32,
    ) {
        unsafe { merge_pass(part_m, part_l, part_o, o, lse, splits) }
    }
}

#[cfg(not(target_arch = "nvptx64"))]
pub use spec::*;

/// The two registered rows, `decode_attention_bf16` and `decode_attention_paged_bf16`
/// (docs/registry.md), with what `host::ops::decode` shares with them: the shape of a step, the
/// host's choice of splits, the launch of both passes, the cost model and the error bound.
#[cfg(not(target_arch = "nvptx64"))]
mod spec {
    use std::vec::Vec;

    use super::*;
    use crate::cuda::emu::Dim3;
    use crate::registry::*;

    /// The shape of one decode-attention step. The head dimension is [`HEAD_DIM`].
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct DecodeShape {
        /// Sequences decoded together.
        pub batch: usize,
        /// Query heads per sequence.
        pub q_heads: usize,
        /// KV heads per sequence (`q_heads` a multiple of it).
        pub kv_heads: usize,
        /// Positions the cache holds per (sequence, KV head); each sequence uses its first
        /// `ctx[b]`.
        pub max_ctx: usize,
    }

    impl DecodeShape {
        /// `batch` sequences of `q_heads` query and `kv_heads` KV heads, room for `max_ctx` keys.
        pub const fn new(batch: usize, q_heads: usize, kv_heads: usize, max_ctx: usize) -> Self {
            Self {
                batch,
                q_heads,
                kv_heads,
                max_ctx,
            }
        }

        /// Query heads per KV head.
        pub fn group(&self) -> usize {
            self.q_heads / self.kv_heads.max(1)
        }

        /// (sequence, query head) pairs: rows of Q and O.
        pub fn rows(&self) -> usize {
            self.batch.saturating_mul(self.q_heads)
        }

        /// Elements of Q (and O).
        pub fn q_elems(&self) -> usize {
            self.rows().saturating_mul(HEAD_DIM)
        }

        /// Elements of K (and V): the whole cache, `batch x kv_heads x max_ctx x 128` (a paged
        /// pool of as many positions holds as many).
        pub fn kv_elems(&self) -> usize {
            (self.batch.saturating_mul(self.kv_heads))
                .saturating_mul(self.max_ctx)
                .saturating_mul(HEAD_DIM)
        }
    }

    /// Blocks the automatic split aims for: 4 per SM of a 132-SM H100 or H200, so that even a
    /// batch of one sequence keeps every SM streaming the cache.
    pub const SPLIT_TARGET_BLOCKS: usize = 4 * 132;
    /// The shortest chunk of keys the automatic split makes: a partial costs `(D + 2) x 4` bytes
    /// written and read per query head, against `2 x D x 2` bytes of K and V per key per KV head.
    pub const MIN_CHUNK: usize = 256;

    /// Splits per (sequence, KV head) the host picks: enough blocks for [`SPLIT_TARGET_BLOCKS`],
    /// but chunks of at least [`MIN_CHUNK`] keys (so the partials stay a few percent of the
    /// cache bytes).
    pub fn auto_splits(shape: &DecodeShape, longest: usize) -> u32 {
        let heads = (shape.batch * shape.kv_heads).max(1);
        let for_blocks = SPLIT_TARGET_BLOCKS.div_ceil(heads);
        let for_chunks = longest.div_ceil(MIN_CHUNK).max(1);
        for_blocks.min(for_chunks).clamp(1, MAX_SPLITS as usize) as u32
    }

    /// Keys per split for sequences of at most `longest` keys in `splits` splits: whole steps of
    /// the kernel's loop ([`BLOCK_KEYS_PER_STEP`]), and at least one.
    pub fn chunk_len(longest: usize, splits: u32) -> u32 {
        let step = BLOCK_KEYS_PER_STEP as usize;
        longest
            .div_ceil(splits as usize)
            .next_multiple_of(step)
            .max(step) as u32
    }

    /// How pass 1 finds the keys: a contiguous cache of `max_ctx` positions per (sequence, KV
    /// head), or a paged one ([`Paged`]: the table is index input 1).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Layout {
        Contiguous { max_ctx: u32 },
        Paged { pages_per_seq: u32, page_size: u32 },
    }

    /// What one step's two launches take besides their buffers: the heads, the cache's layout,
    /// the splits and their chunk of keys, the softmax scale. The spec's rows choose them from
    /// the dimensions ([`Step::of`]); `host::ops::decode` from its caller's shape and workspace.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct Step {
        pub batch: u32,
        pub kv_heads: u32,
        /// Query heads per KV head, 1 to [`MAX_GROUP`].
        pub group: u32,
        pub layout: Layout,
        /// Splits per (sequence, KV head), 1 to [`MAX_SPLITS`], of `chunk` keys each.
        pub splits: u32,
        pub chunk: u32,
        pub scale: f32,
    }

    impl Step {
        /// A registered row's step at `dims`: [`shape`]'s cache (a paged one, `paged`, in pages
        /// of `page`), the host's automatic splits of its longest sequence, `ctx`, and the
        /// transformer's scale `1 / sqrt(128)`.
        pub fn of(dims: Dims, paged: bool) -> Self {
            let [batch, kv_heads, group, ctx, page] = dims;
            let shape = shape(dims);
            let splits = auto_splits(&shape, ctx);
            let max_ctx = shape.max_ctx as u32;
            Self {
                batch: batch as u32,
                kv_heads: kv_heads as u32,
                group: group as u32,
                layout: if paged {
                    Layout::Paged {
                        pages_per_seq: max_ctx / page as u32,
                        page_size: page as u32,
                    }
                } else {
                    Layout::Contiguous { max_ctx }
                },
                splits,
                chunk: chunk_len(ctx, splits),
                scale: crate::attention::standard_scale(HEAD_DIM),
            }
        }
    }

    /// Pass 1 on the group tile that holds `step.group` (its per-head registers are sized at
    /// compile time), then pass 2: Q, K and V are inputs 0 to 2 (K and V the cache, or the paged
    /// pool), O the output; the partials `(m, l, o)` workspaces 0 to 2 and the log-sum-exp
    /// workspace 3 (f32); the sequence lengths index input 0, a paged cache's table index input 1.
    pub fn launch(
        launcher: &dyn Launcher,
        buffers: &Buffers,
        step: &Step,
    ) -> Result<(), LaunchError> {
        use crate::launch_registered;
        let (q, k, v) = (
            buffers.input::<Bf16>(0)?,
            buffers.input::<Bf16>(1)?,
            buffers.input::<Bf16>(2)?,
        );
        let o = buffers.output::<Bf16>()?;
        let &[part_m, part_l, part_o, lse] = buffers.workspaces else {
            return Err("decode attention takes four workspaces: m, l, o and the lse".into());
        };
        let ctx = buffers.index(0)?;
        let Step {
            batch,
            kv_heads,
            group,
            splits,
            chunk,
            scale,
            ..
        } = *step;
        let geometry = LaunchConfig {
            grid: Dim3 {
                x: splits,
                y: kv_heads,
                z: batch,
            },
            block: Dim3 {
                x: THREADS,
                y: 1,
                z: 1,
            },
            dynamic_shared: 0,
        };
        let tile = GROUP_TILES.into_iter().find(|&t| group <= t);
        // One pass-1 entry per group tile: the same arguments for each.
        macro_rules! by_tile {
            ($g1:ident, $g2:ident, $g4:ident, $g8:ident, $args:tt) => {
                match tile {
                    Some(1) => launch_registered!(launcher, geometry, $g1 $args),
                    Some(2) => launch_registered!(launcher, geometry, $g2 $args),
                    Some(4) => launch_registered!(launcher, geometry, $g4 $args),
                    Some(_) => launch_registered!(launcher, geometry, $g8 $args),
                    None => Err(std::format!(
                        "{group} query heads per KV head; the kernel keeps at most {MAX_GROUP} in registers"
                    )
                    .into()),
                }
            };
        }
        match step.layout {
            Layout::Contiguous { max_ctx } => by_tile!(
                decode_attention_split_bf16_g1,
                decode_attention_split_bf16_g2,
                decode_attention_split_bf16_g4,
                decode_attention_split_bf16_g8,
                (q, k, v, ctx, part_m, part_l, part_o, kv_heads, group, max_ctx, chunk, scale)
            ),
            Layout::Paged {
                pages_per_seq,
                page_size,
            } => {
                let table = buffers.index(1)?;
                by_tile!(
                    decode_attention_paged_bf16_g1,
                    decode_attention_paged_bf16_g2,
                    decode_attention_paged_bf16_g4,
                    decode_attention_paged_bf16_g8,
                    (
                        q,
                        k,
                        v,
                        ctx,
                        table,
                        part_m,
                        part_l,
                        part_o,
                        kv_heads,
                        group,
                        pages_per_seq,
                        page_size,
                        chunk,
                        scale
                    )
                )
            }
        }?;
        let rows = (batch.checked_mul(kv_heads))
            .and_then(|r| r.checked_mul(group))
            .ok_or_else(|| std::format!("{batch} x {kv_heads} x {group} heads: past 2^32 blocks"))?;
        let merge = LaunchConfig::grid_2d((rows, 1), (MERGE_THREADS, 1));
        launch_registered!(
            launcher,
            merge,
            decode_attention_merge_bf16(part_m, part_l, part_o, o, lse, splits)
        )
    }

    /// The contiguous row's dimensions: `batch` sequences of `kv_heads` KV heads, each shared
    /// by `group` query heads (so that every draw of the property test is a GQA shape the
    /// kernels take, which `q_heads` drawn apart would not be), the longest sequence `ctx` keys.
    pub const DIMS: &[&str] = &["batch", "kv_heads", "group", "ctx"];
    /// The paged row's: the same, in pages of `page` positions.
    pub const PAGED_DIMS: &[&str] = &["batch", "kv_heads", "group", "ctx", "page"];

    /// The stride of [`context_lengths`]: a prime, a multiple of no chunk or page.
    pub const LENGTH_STRIDE: usize = 223;

    /// The sequences' lengths at `dims` (index input 0), a rule of `batch` and `ctx` where a
    /// serving batch would have lengths of its own: sequence `b` holds `(ctx - 223 b) mod
    /// (ctx + 1)` keys. The first holds `ctx` (a GPU row's one sequence), the others step down
    /// by [`LENGTH_STRIDE`] and wrap, so that the property test's draws have uneven lengths,
    /// some short, some empty, and the emulator's `[300, 77]`, neither a multiple of a chunk.
    pub fn context_lengths([batch, _, _, ctx, _]: Dims) -> Vec<u32> {
        (0..batch)
            .map(|b| {
                let step = (b as u64 * LENGTH_STRIDE as u64) % (ctx as u64 + 1);
                (ctx as u64 - step) as u32
            })
            .collect()
    }

    /// The shape of the rows' cache at `dims`: positions for `ctx` keys rounded up to 64 (and
    /// to a whole number of pages), so that the emulator's cache (320 positions) holds some past
    /// every sequence, which no block may read.
    pub fn shape([batch, kv_heads, group, ctx, page]: Dims) -> DecodeShape {
        let max_ctx = ctx.next_multiple_of(64).next_multiple_of(page.max(1));
        DecodeShape::new(batch, kv_heads * group, kv_heads, max_ctx)
    }

    /// The paged row's block table at `dims` (index input 1): each sequence's pages, the pool's
    /// pages in reverse order (sequence 0's first page is the pool's last), so that no key's
    /// page is where a contiguous cache would have it.
    pub fn page_table(dims: Dims) -> Vec<u32> {
        let s = shape(dims);
        let pages = (s.batch * s.max_ctx / dims[4]) as u32;
        (0..pages).rev().collect()
    }

    const BF16: u64 = 2;
    const F32: u64 = 4;

    /// The product of `factors`, saturating at `u64::MAX`: a shape too large to count never
    /// wraps.
    fn product(factors: &[u64]) -> u64 {
        factors.iter().fold(1, |acc, &f| acc.saturating_mul(f))
    }

    /// `sum_b ctx[b]`: keys of one step over the batch (a `u64` sum of `u32`s cannot overflow
    /// for any slice that fits in memory).
    fn total_keys(ctx_lens: &[u32]) -> u64 {
        ctx_lens.iter().map(|&c| u64::from(c)).sum()
    }

    /// Bytes of K and V one step reads: `sum_b ctx[b] x kv_heads x 2 x 128 x 2`.
    pub fn kv_bytes(shape: &DecodeShape, ctx_lens: &[u32]) -> u64 {
        let (keys, kv_heads) = (total_keys(ctx_lens), shape.kv_heads as u64);
        product(&[keys, kv_heads, 2, HEAD_DIM as u64, BF16])
    }

    /// Pass 2's cost for `rows` heads of `splits` partials: each partial (`m`, `l` and 128 f32
    /// of `o`) read once, `o` (bf16) and `lse` written; 2 FLOPs per (partial, dimension), one
    /// rescaling exponential per partial.
    pub fn merge_cost(rows: usize, splits: u32) -> Cost {
        let (rows, splits) = (rows as u64, u64::from(splits));
        let d = HEAD_DIM as u64;
        Cost {
            bytes_read: product(&[rows, splits, 2 + d, F32]),
            bytes_written: product(&[rows, d * BF16 + F32]),
            flops: product(&[rows, splits, d, u64::from(MERGE_FLOPS)]),
            exps: product(&[rows, splits]),
            rereads: 0,
            resident_rereads: 0,
            l2_rereads: 0,
            unit: ComputeUnit::CudaCoreF32,
        }
    }

    /// Both passes' cost, as the attention chapter splits it: every byte requested, what the
    /// emulator counts, of which the bytes read again, from buffers small enough for L2 to keep,
    /// are [`Cost::resident_rereads`] (at a shape too large to count, where the sum saturates,
    /// [`Cost::compulsory_read`] stays `u64::MAX`).
    ///
    /// Compulsory: K and V of the `ctx[b]` keys of every (sequence, KV head) read **once** (the
    /// group's query heads share each byte), Q read once, each sequence length once, the
    /// partials written once and read once, `o` and `lse` written, and, paged (`page`
    /// positions a page), each table entry in use read once; `4 d` FLOPs per (query head, key)
    /// and one exponential, plus the merge's. Read again: Q once more per additional split
    /// (every block of a (sequence, KV head) loads the group's query rows), each sequence
    /// length by every thread of every block, a table entry by one lane per (key, KV head).
    pub fn cost(
        shape: &DecodeShape,
        ctx_lens: &[u32],
        splits: u32,
        page: Option<usize>,
    ) -> Cost {
        let d = HEAD_DIM as u64;
        let (batch, kv_heads) = (shape.batch as u64, shape.kv_heads as u64);
        let keys = total_keys(ctx_lens);
        let rows = shape.rows() as u64;
        let q = product(&[rows, d, BF16]);
        let ctx = product(&[batch, F32]);
        let scores = product(&[keys, shape.group() as u64, kv_heads]);
        let entries: u64 = match page {
            None => 0,
            Some(page) => ctx_lens
                .iter()
                .map(|&c| (c as usize).div_ceil(page.max(1)) as u64)
                .sum(),
        };
        let split = Cost {
            bytes_read: kv_bytes(shape, ctx_lens)
                .saturating_add(q)
                .saturating_add(ctx)
                .saturating_add(product(&[entries, F32])),
            bytes_written: product(&[rows, u64::from(splits), 2 + d, F32]),
            flops: product(&[scores, u64::from(FLOPS_PER_KEY)]),
            // One exponential per score, as the attention chapter's model counts them.
            exps: scores,
            ..Cost::NONE
        };
        let lookups = if page.is_some() {
            product(&[keys, kv_heads])
        } else {
            0
        };
        let ctx_readers = product(&[kv_heads, u64::from(splits), u64::from(THREADS)]);
        let again = [
            product(&[u64::from(splits).saturating_sub(1), q]),
            product(&[ctx_readers.saturating_sub(1), ctx]),
            product(&[lookups - entries.min(lookups), F32]),
        ];
        let again = again.iter().fold(0u64, |a, &b| a.saturating_add(b));
        let c = split.plus(merge_cost(shape.rows(), splits));
        Cost {
            bytes_read: c.bytes_read.saturating_add(again),
            resident_rereads: again,
            ..c
        }
    }

    /// The largest error of an element of `o` with `n` keys, for inputs in [-1, 1]: the
    /// attention rows' bound (`crate::attention::error_bound`: `|q . k| <= d`, sums over keys
    /// and dims in f32) plus `4 u` per split for the merge's rescale and sum, at the most splits
    /// the merge takes ([`MAX_SPLITS`]), plus the rounding of `o` (at most 1) to bf16: the bound
    /// of tests/tests/decode.rs.
    pub fn error_bound(n: usize) -> f64 {
        let scale = crate::attention::standard_scale(HEAD_DIM);
        let u = f64::from(f32::EPSILON) / 2.0;
        crate::attention::error_bound(n, HEAD_DIM, scale, 0.0)
            + 4.0 * f64::from(MAX_SPLITS) * u
            + Elem::Bf16.unit_roundoff()
    }

    /// Rows `rows` of `o` (`b * q_heads + hq`) from the definition, in f64: each query row against
    /// the first `ctx[b]` keys of KV head `hq / group`, where the layout (`PAGED`: the table's)
    /// puts them; a sequence of no key gives zeros.
    fn reference<const PAGED: bool>(inputs: &[&[f32]], dims: Dims, rows: &[usize]) -> Expected {
        let s = shape(dims);
        let (q, k, v) = (inputs[0], inputs[1], inputs[2]);
        let lens = context_lengths(dims);
        let table = if PAGED { page_table(dims) } else { Vec::new() };
        let (d, page) = (HEAD_DIM, dims[4]);
        let scale = f64::from(crate::attention::standard_scale(d));
        let mut out = Vec::with_capacity(rows.len() * d);
        for &row in rows {
            let (b, hq) = (row / s.q_heads, row % s.q_heads);
            let h = hq / s.group();
            let at = |j: usize| match PAGED {
                false => kv_row(b, h, j, (s.kv_heads, s.max_ctx)),
                true => {
                    let p = table[b * (s.max_ctx / page) + j / page] as usize;
                    paged_row(p, h, j % page, (s.kv_heads, page))
                }
            };
            let keys = (0..lens[b] as usize).map(|j| (&k[at(j)..][..d], &v[at(j)..][..d]));
            out.extend(crate::attention::attend_row(&q[row * d..][..d], keys, scale));
        }
        out.into()
    }

    /// Llama-3-8B's attention at batch 1 (32 query heads on 8 KV heads of 128) at 4k, 32k and
    /// 128k keys; on the emulator two sequences, of 300 and 77 keys (no multiple of the chunk),
    /// with 8 query heads on 2 KV heads.
    const fn run_shape(ctx: usize, page: usize) -> RunShape {
        RunShape {
            gpu: [1, 8, 4, ctx, page],
            emulator: [2, 2, 4, 300, page],
        }
    }

    const CONTIGUOUS_RUN: &[RunShape] = &[
        run_shape(4096, 1),
        run_shape(32768, 1),
        run_shape(131072, 1),
    ];
    /// The paged row: pages of 16 positions (vLLM's default).
    const PAGED_RUN: &[RunShape] = &[run_shape(131072, 16)];

    /// The spec of a row on a contiguous cache, or (`PAGED`) on a paged one.
    const fn decode_spec<const PAGED: bool>(name: &'static str, what: &'static str) -> Spec {
        Spec {
            name,
            what,
            dims: if PAGED { PAGED_DIMS } else { DIMS },
            shapes: Shapes {
                run: if PAGED { PAGED_RUN } else { CONTIGUOUS_RUN },
                // Every group tile and groups between them, sequences past a chunk of 256 keys
                // (two splits), pages of up to 16.
                test_max: [3, 2, MAX_GROUP, 300, if PAGED { 16 } else { 1 }],
                multiple: [1, 1, 1, 1, 1],
                // Every row: 32 at a GPU shape, each against its sequence's keys in f64.
                gpu_rows_checked: None,
            },
            inputs: |dims| {
                let s = shape(dims);
                std::vec![
                    Buffer::bf16(s.q_elems()),
                    Buffer::bf16(s.kv_elems()),
                    Buffer::bf16(s.kv_elems())
                ]
            },
            input_range: (-1.0, 1.0),
            // Q and K make the scores, whose maxima skip their exponentials
            // (`kernels::softmax::exp_shifted`): on zeros the model would count none.
            values_steer: true,
            affine_keys: None,
            output: |dims| Buffer::bf16(shape(dims).q_elems()),
            rows: |dims| shape(dims).rows(),
            // The partials' m, l and o of each (row, split), and the log-sum-exp of each row:
            // f32, never checked (the check covers o).
            workspaces: |dims| {
                let s = shape(dims);
                let partials = s.rows() * Step::of(dims, PAGED).splits as usize;
                std::vec![partials, partials, partials * HEAD_DIM, s.rows()]
            },
            indices: |dims| match PAGED {
                false => std::vec![context_lengths(dims)],
                true => std::vec![context_lengths(dims), page_table(dims)],
            },
            tensor_maps: |_| std::vec![],
            sm90a_only: false,
            launch: |launcher, buffers, dims| launch(launcher, buffers, &Step::of(dims, PAGED)),
            reference: reference::<PAGED>,
            // The longest sequence's: the bound grows with the keys.
            tolerance: |dims| error_bound(dims[3]),
            // Every byte requested, the re-reads of Q, the lengths and the table counted as
            // HBM reads (1.1% of the bytes at 4k keys, 0.15% at 128k), as the rows written in
            // host/src/cases.rs counted them; `Cost::resident_rereads` would read them from L2.
            cost: |dims| {
                let splits = Step::of(dims, PAGED).splits;
                let page = PAGED.then_some(dims[4]);
                let c = cost(&shape(dims), &context_lengths(dims), splits, page);
                Cost {
                    resident_rereads: 0,
                    ..c
                }
            },
            accumulates: false,
            // Pass 1's: KEYS_PER_STEP keys' 16-byte pieces of K and V loaded before any is used.
            occupancy: Occupancy {
                threads: THREADS,
                dynamic_shared: 0,
                in_flight_per_thread: Some(KEYS_PER_STEP * 2 * 16),
            },
            baseline: Some(Baseline {
                op: "sdpa_decode",
                dims: if PAGED {
                    &["batch", "q_heads", "kv_heads", "ctx", "page"]
                } else {
                    &["batch", "q_heads", "kv_heads", "ctx"]
                },
            }),
        }
    }

    /// Split-KV decode attention on a contiguous cache.
    pub const DECODE_ATTENTION_BF16: Spec = decode_spec::<false>(
        "decode_attention_bf16",
        "one query token per head against its sequence's KV cache, split along the keys, the partials merged by a second kernel",
    );
    /// The same on a paged cache (vLLM's PagedAttention layout).
    pub const DECODE_ATTENTION_PAGED_BF16: Spec = decode_spec::<true>(
        "decode_attention_paged_bf16",
        "split-KV decode attention on a paged KV cache: each key's page looked up in a block table",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_tile_the_sequence() {
        // 1000 keys in chunks of 256: 256, 256, 256, 232, then empty splits.
        let keys: std::vec::Vec<(u32, u32)> = (0..6).map(|s| split_keys(s, 256, 1000)).collect();
        assert_eq!(
            keys,
            [
                (0, 256),
                (256, 512),
                (512, 768),
                (768, 1000),
                (1000, 1000),
                (1000, 1000)
            ]
        );
        assert_eq!(split_keys(0, 256, 0), (0, 0));
        assert_eq!(split_keys(3, u32::MAX, 7), (7, 7));
    }

    #[test]
    fn splits_fill_the_gpu_without_tiny_chunks() {
        let llama = DecodeShape::new(1, 32, 8, 131072);
        assert_eq!(auto_splits(&llama, 131072), 66); // 528 blocks over 8 heads
        assert_eq!(auto_splits(&llama, 4096), 16); // chunks of 256 keys
        assert_eq!(auto_splits(&llama, 1), 1);
        assert_eq!(auto_splits(&DecodeShape::new(64, 32, 8, 4096), 4096), 2);
        assert_eq!(chunk_len(1000, 4), 256);
        assert_eq!(chunk_len(0, 1), BLOCK_KEYS_PER_STEP);
        assert!(chunk_len(4097, 16) as usize * 16 >= 4097);
    }

    /// The rows' rules: a GPU row's one sequence of `ctx` keys in a cache of as many, the
    /// emulator's two of 300 and 77 in a cache of 320 (20 pages of 16, in reverse order), in two
    /// splits of 160 keys; and lengths from `ctx` down to 0 as the property test draws them.
    #[test]
    fn the_rows_lengths_cache_and_table_follow_from_the_dimensions() {
        let gpu = [1, 8, 4, 131072, 16];
        assert_eq!(context_lengths(gpu), [131072]);
        assert_eq!(shape(gpu), DecodeShape::new(1, 32, 8, 131072));
        let emulator = [2, 2, 4, 300, 16];
        assert_eq!(context_lengths(emulator), [300, 77]);
        assert_eq!(shape(emulator), DecodeShape::new(2, 8, 2, 320));
        let table = page_table(emulator);
        assert_eq!((table.len(), table[0], table[39]), (40, 39, 0));
        let step = Step::of(emulator, true);
        assert_eq!((step.splits, step.chunk), (2, 160));
        let paged = Layout::Paged {
            pages_per_seq: 20,
            page_size: 16,
        };
        assert_eq!(step.layout, paged);
        assert_eq!(context_lengths([3, 1, 1, 2, 1]), [2, 1, 0]);
        let lens = context_lengths([3, 1, 1, 200, 1]);
        assert!(lens.iter().all(|&l| l <= 200) && lens[1] != lens[2], "{lens:?}");
    }

    #[test]
    fn merging_partials_is_the_softmax_of_their_union() {
        // Two keys seen one at a time, against the direct formula.
        let (s1, s2) = (0.5f32, 2.0f32);
        let (v1, v2) = ([1.0f32; 8], [3.0f32; 8]);
        let p = merge_partial(Partial::one(s1, v1), Partial::one(s2, v2));
        assert_eq!(p.state.m, s2);
        let w1 = (s1 - s2).exp();
        assert!((p.state.l - (1.0 + w1)).abs() < 1e-6);
        assert!((p.o[0] - (w1 * 1.0 + 3.0)).abs() < 1e-5);
        assert_eq!(merge_partial(Partial::EMPTY, p), p);
        assert_eq!(
            merge_partial(Partial::EMPTY, Partial::EMPTY),
            Partial::EMPTY
        );
    }
}
