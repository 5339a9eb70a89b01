//! Row softmax three ways: naive (three passes), online (two), fused (one).
//!
//! `y[r, j] = exp(x[r, j] - m_r) / l_r` with `m_r = max_j x[r, j]` and
//! `l_r = sum_j exp(x[r, j] - m_r)`, for a row-major `rows x cols` matrix, one block per row.
//! Subtracting `m_r` keeps every exponent `<= 0`, so nothing overflows even at the dtype's limits.
//!
//! The three variants do the same arithmetic and differ only in how often the row crosses the
//! HBM boundary (docs/softmax.md counts the bytes):
//!
//! | variant | kernels | reads of the row | writes |
//! |---|---|---|---|
//! | naive | [`softmax_row_max_f32`], [`softmax_row_sum_exp_f32`], [`softmax_normalise_f32`] | 3 | 1 |
//! | online | [`softmax_online_stats_f32`], then [`softmax_normalise_f32`] | 2 | 1 |
//! | fused | [`softmax_fused_f32`] | 1 (2 above [`FUSED_ON_CHIP_COLS`]) | 1 |
//!
//! (and the same with `_bf16`). Naive and online leave `(m, l)` per row in two small global
//! buffers between their kernels; fused keeps everything on chip.
//!
//! # The online state and its merge
//!
//! An [`OnlineState`] `(m, l)` summarises any part of a row: its maximum `m` and the sum `l` of
//! `exp(x - m)` over it. Two parts combine with [`merge`]: the larger maximum wins and the other
//! part's sum is rescaled by `exp(m_small - m_large)` (Milakov and Gimelshein, 2018). `merge` is
//! associative (up to rounding) and [`OnlineState::IDENTITY`] `= (-inf, 0)` is its identity, so
//! a row may be cut into chunks in any way, per element, per thread or per warp, and merged in any
//! grouping. Every kernel here that needs `(m, l)` builds it with `merge`.
//!
//! # Special values (the defined results)
//!
//! - `-inf` entries get probability 0 (they are masked-out scores, as in causal attention).
//! - A row that is entirely `-inf` has no mass (`l = 0`); its output is all **zeros**, not NaN.
//!   Zeros are what a fully masked row should contribute downstream, and `(-inf, 0)` is the
//!   merge's identity, so this is the state such a row already has.
//! - `+inf` entries: if a row holds `k >= 1` entries equal to `+inf` (and no NaN), each of them
//!   gets `1/k` and every other entry 0: the limit of softmax as those scores grow together.
//! - Any NaN in a row makes the whole output row NaN (its `(m, l)` is `(NaN, NaN)`).
//! - Finite entries of any size, up to `±f32::MAX`, never overflow: every exponent is `x - m <= 0`
//!   (and `-f32::MAX - f32::MAX` rounds to `-inf`, whose exponential is exactly 0).
//!
//! All of this lives in two functions, [`exp_shifted`] and [`merge`], which every kernel uses.
//!
//! # FLOP accounting
//!
//! Kernels mark the arithmetic they do *per element* with `count_flops`, at the rates given by the
//! `*_FLOPS` constants here (a compare, add, multiply or exponential counts 1, an fma 2); the host
//! cost models use the same constants. The per-row work of the block reductions (a few dozen
//! operations per thread, independent of `cols`) is neither marked nor modelled.

use crate::cuda::intrinsics::{count_flops, exp_approx, exp2_approx, fma};
use crate::cuda::thread::{block_dim_x, block_idx_x, sync_threads, thread_idx_x};
use crate::cuda::warp::{FULL_MASK, WARP_SIZE, lane_id, shuffle_xor};
use crate::cuda::{Bf16, GlobalPtr};
use crate::{kernel, shared_array};

/// Threads per block (one block per row) for the naive and online kernels: 8 warps stride over
/// the row, each warp reading 32 consecutive elements per step (coalesced).
pub const ROW_THREADS: u32 = 256;
/// Threads per block of the fused kernel: 16 warps, so that one block holds a long row.
pub const FUSED_THREADS: u32 = 512;
/// Row elements each fused-kernel thread keeps in registers (as f32) at a time.
pub const FUSED_ITEMS: usize = 16;
/// The longest row the fused kernel keeps on chip (in registers: `FUSED_THREADS` threads x
/// `FUSED_ITEMS` f32 each, 32 KB per block): it is read from HBM once. Longer rows are processed
/// in chunks of this many columns with the online recurrence, then read a second time to write
/// the output.
pub const FUSED_ON_CHIP_COLS: u32 = FUSED_THREADS * FUSED_ITEMS as u32;
/// The most warps a block can have (1024 threads): the size of the reduction's shared array.
const MAX_WARPS: usize = 32;

/// A block is whole warps (every lane of a shuffle must exist), at most `MAX_WARPS` of them.
const fn valid_block(threads: u32) -> bool {
    threads.is_multiple_of(WARP_SIZE) && threads as usize <= MAX_WARPS * WARP_SIZE as usize
}
const _: () = assert!(valid_block(ROW_THREADS) && valid_block(FUSED_THREADS));

/// Per element of naive pass 1: one compare (the running max).
pub const MAX_FLOPS: u32 = 1;
/// Per element of naive pass 2 (and of the fused kernel's read): `x - m`, `exp`, `+=`.
pub const EXP_SUM_FLOPS: u32 = 3;
/// Per element of the normalisation: `x - m`, `exp`, `* (1 / l)`.
pub const NORMALISE_FLOPS: u32 = 3;
/// Per element of the online pass, one [`merge`] with a one-element state: the compare that picks
/// the larger max, `m_small - m_large`, `exp`, and one fma (2).
pub const ONLINE_FLOPS: u32 = 5;
/// Per element of the fused kernel's on-chip write: `e * (rescale / l)`, one multiply (the
/// exponential is already in a register).
pub const RESCALE_FLOPS: u32 = 1;

/// A storage dtype: loaded and stored as itself, computed with in f32.
pub trait Scalar: Copy {
    /// Widens to f32 (exact for f32 and bf16).
    fn to_f32(self) -> f32;
    /// Narrows from f32, rounding to nearest even.
    fn from_f32(v: f32) -> Self;
}

impl Scalar for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
}

impl Scalar for Bf16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        Bf16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        Bf16::from_f32(v)
    }
}

/// `exp(x - m)` for a score `x` against a reference maximum `m >= x`, with the limits that give
/// softmax its defined results on infinities:
/// - `x = -inf` gives 0, even when `m = -inf` (a masked entry has no mass);
/// - `x = m` gives exactly 1, including `+inf = +inf` (where `x - m` would be NaN);
/// - otherwise `exp_approx(x - m)`, which is 0 for `x` finite and `m = +inf`, and NaN if either is.
#[inline(always)]
pub fn exp_shifted(x: f32, m: f32) -> f32 {
    shifted(x, m, exp_approx)
}

/// `exp(x - m)` through `exp` with the limits of [`exp_shifted`].
#[inline(always)]
pub(crate) fn shifted(x: f32, m: f32, exp: fn(f32) -> f32) -> f32 {
    if x == f32::NEG_INFINITY {
        0.0
    } else if x == m {
        1.0
    } else {
        exp(x - m)
    }
}

/// [`exp_shifted`] in base 2, for scores already scaled by `log2 e` (the attention kernels):
/// `2^(x - m)` with the same limits (`-inf` gives 0, `x = m` gives 1, NaN stays NaN).
#[inline(always)]
pub fn exp2_shifted(x: f32, m: f32) -> f32 {
    shifted(x, m, exp2_approx)
}

/// IEEE 754-2019 `maximum`: the larger of `a` and `b`, or NaN if either is NaN (PTX
/// `max.NaN.f32`). Rust's `f32::max` (PTX `max.f32`) would drop a NaN instead.
#[inline(always)]
pub fn maximum(a: f32, b: f32) -> f32 {
    if a > b || a.is_nan() { a } else { b }
}

/// `1 / l`, or 0 when `l = 0`: a row with no mass (all `-inf`) normalises to zeros.
#[inline(always)]
pub fn reciprocal_or_zero(l: f32) -> f32 {
    if l == 0.0 { 0.0 } else { 1.0 / l }
}

/// The online softmax state of part of a row: `m` its maximum, `l = sum exp(x - m)` over it.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct OnlineState {
    /// Running maximum.
    pub m: f32,
    /// Running sum of `exp(x - m)`.
    pub l: f32,
}

impl OnlineState {
    /// The state of an empty part, `(-inf, 0)`: the identity of [`merge`].
    pub const IDENTITY: Self = Self {
        m: f32::NEG_INFINITY,
        l: 0.0,
    };

    /// The state of one element, `(x, exp(x - x))` with [`exp_shifted`]'s limits: `(x, 1)`, the
    /// identity for `x = -inf` (no mass), `(NaN, NaN)` for NaN.
    #[inline(always)]
    pub fn of(x: f32) -> Self {
        Self {
            m: x,
            l: exp_shifted(x, x),
        }
    }
}

/// The state of the concatenation of two parts of a row:
/// `m = max(m1, m2)`, `l = l1 exp(m1 - m) + l2 exp(m2 - m)`.
///
/// One of the two factors is 1 (the part holding the larger max), so only the other part's sum
/// is rescaled: one exponential and one fma per merge. A NaN max wins, so NaN propagates.
///
/// ```
/// use kernels::softmax::{merge, OnlineState};
/// let a = OnlineState { m: 1.0, l: 1.0 };
/// let b = OnlineState { m: 3.0, l: 1.0 };
/// let ab = merge(a, b);
/// assert_eq!(ab.m, 3.0);
/// assert!((ab.l - (1.0 + (-2.0f32).exp())).abs() < 1e-6);
/// assert_eq!(merge(OnlineState::IDENTITY, ab), ab);
/// ```
#[inline(always)]
pub fn merge(a: OnlineState, b: OnlineState) -> OnlineState {
    let (hi, lo) = if a.m >= b.m || a.m.is_nan() {
        (a, b)
    } else {
        (b, a)
    };
    OnlineState {
        m: hi.m,
        l: fma(lo.l, exp_shifted(lo.m, hi.m), hi.l),
    }
}

/// A value a block can reduce: an associative `combine`, moved between lanes by shuffles.
/// Kept to at most 8 bytes so that one `u64` slot of shared memory holds a warp's partial.
pub(crate) trait Reduce: Copy {
    fn combine(self, other: Self) -> Self;
    fn shuffle_xor(self, lane_mask: u32) -> Self;
}

/// A row maximum (NaN-propagating).
#[derive(Clone, Copy)]
struct RowMax(f32);
/// A row sum.
#[derive(Clone, Copy)]
struct RowSum(f32);

impl Reduce for RowMax {
    #[inline(always)]
    fn combine(self, other: Self) -> Self {
        RowMax(maximum(self.0, other.0))
    }
    #[inline(always)]
    fn shuffle_xor(self, lane_mask: u32) -> Self {
        RowMax(shuffle_xor(FULL_MASK, self.0, lane_mask))
    }
}

impl Reduce for RowSum {
    #[inline(always)]
    fn combine(self, other: Self) -> Self {
        RowSum(self.0 + other.0)
    }
    #[inline(always)]
    fn shuffle_xor(self, lane_mask: u32) -> Self {
        RowSum(shuffle_xor(FULL_MASK, self.0, lane_mask))
    }
}

impl Reduce for OnlineState {
    #[inline(always)]
    fn combine(self, other: Self) -> Self {
        merge(self, other)
    }
    #[inline(always)]
    fn shuffle_xor(self, lane_mask: u32) -> Self {
        OnlineState {
            m: shuffle_xor(FULL_MASK, self.m, lane_mask),
            l: shuffle_xor(FULL_MASK, self.l, lane_mask),
        }
    }
}

/// Every thread of the block gets the combination of every thread's `value`.
///
/// Registers first: five butterfly shuffles combine the 32 lanes of each warp without touching
/// memory. Then one partial per warp goes through shared memory (the only way warps exchange
/// data), and every thread combines those `blockDim.x / 32` partials itself. Every thread must
/// call it (it has barriers and full-warp shuffles); the block size must be a multiple of 32.
#[inline(always)]
pub(crate) fn block_allreduce<R: Reduce>(value: R) -> R {
    const { assert!(size_of::<R>() <= size_of::<u64>()) };
    // One slot per warp, in shared memory: the partials outlive the warps' registers only for
    // the moment it takes the other warps to read them.
    let partials = shared_array![softmax_partials: [u64; MAX_WARPS]].cast::<R>();
    let mut v = value;
    let mut lane_mask = WARP_SIZE / 2;
    while lane_mask > 0 {
        v = v.combine(v.shuffle_xor(lane_mask));
        lane_mask /= 2;
    }
    let warp = (thread_idx_x() / WARP_SIZE) as usize;
    if lane_id() == 0 {
        // SAFETY: warp < MAX_WARPS (block size <= 1024); one writer per slot.
        unsafe { partials.write(warp, v) };
    }
    sync_threads();
    let warps = (block_dim_x() / WARP_SIZE) as usize;
    // SAFETY: slots 0..warps were written before the barrier.
    let mut total = unsafe { partials.read(0) };
    for w in 1..warps {
        // SAFETY: as above.
        total = total.combine(unsafe { partials.read(w) });
    }
    // Every read of `partials` happens before any later call writes it again.
    sync_threads();
    total
}

/// Thread 0 loads a per-row value (from HBM, once per row rather than once per thread), and every
/// thread of the block receives it through shared memory. Call at most once per kernel.
///
/// `load` is `Fn`, not `FnOnce`, on purpose: an `FnOnce` would be moved only inside the `if`, so
/// MIR would carry a drop flag for it past the barrier, and rustc's MIR JumpThreading pass copies
/// the `sync_threads()` into both arms to settle that flag (rust-lang/rust#137086): thread 0 and
/// the others then wait at two different `bar.sync`, undefined behaviour for the aligned barrier.
/// Called through `&load`, the closure is dropped on every path and there is no flag. See
/// docs/toolchain.md; `cargo xtask ptxas` checks the PTX for it.
#[inline(always)]
fn broadcast_from_thread0<V: Copy>(load: impl Fn() -> V) -> V {
    const { assert!(size_of::<V>() <= size_of::<u64>()) };
    let cell = shared_array![softmax_broadcast: [u64; 1]].cast::<V>();
    if thread_idx_x() == 0 {
        // SAFETY: one writer, slot 0 of a one-slot array.
        unsafe { cell.write(0, load()) };
    }
    sync_threads();
    // SAFETY: written before the barrier; only read afterwards.
    unsafe { cell.read(0) }
}

/// Offset of row `row`'s first element in a row-major matrix with `cols` columns (as usize:
/// `rows * cols` may exceed `u32`).
#[inline(always)]
pub fn row_start(row: u32, cols: u32) -> usize {
    row as usize * cols as usize
}

/// The columns a thread visits in the naive and online kernels: `thread, thread + blockDim, ...`,
/// so that at each step a warp touches 32 consecutive columns (one coalesced access).
#[inline(always)]
fn strided_cols(cols: u32) -> impl Iterator<Item = usize> {
    (thread_idx_x() as usize..cols as usize).step_by(block_dim_x() as usize)
}

/// How many chunks of [`FUSED_ON_CHIP_COLS`] columns the fused kernel cuts a row into.
#[inline(always)]
pub const fn fused_chunks(cols: u32) -> u32 {
    cols.div_ceil(FUSED_ON_CHIP_COLS)
}

/// The column that item `item` of thread `thread` holds in chunk `chunk` of the fused kernel.
/// Consecutive threads hold consecutive columns, so each of a thread's `FUSED_ITEMS` loads is one
/// coalesced warp access.
#[inline(always)]
pub const fn fused_col(chunk: u32, item: usize, thread: u32) -> u32 {
    chunk * FUSED_ON_CHIP_COLS + item as u32 * FUSED_THREADS + thread
}

/// Every thread folds the row's elements it visits (strided, so each warp step is one coalesced
/// access) into `init` with `step`, marking `flops` per element; the block then combines the
/// threads' results, which every thread receives. The shape of every pass that reduces a row.
///
/// # Safety
/// `x_row` holds `cols` elements.
#[inline(always)]
unsafe fn reduce_row<T: Scalar, R: Reduce>(
    x_row: GlobalPtr<T>,
    cols: u32,
    init: R,
    flops: u32,
    step: impl Fn(R, f32) -> R,
) -> R {
    // Registers: this thread's running max, sum or (m, l).
    let mut acc = init;
    for col in strided_cols(cols) {
        // SAFETY: col < cols.
        acc = step(acc, unsafe { x_row.read(col) }.to_f32());
        count_flops(flops);
    }
    block_allreduce(acc)
}

/// Naive pass 1: `row_max[r] = max_j x[r, j]`.
///
/// # Safety
/// One block of any multiple of 32 threads per row; `x` holds `gridDim.x * cols` elements and
/// `row_max` `gridDim.x`.
#[inline(always)]
unsafe fn row_max_pass<T: Scalar>(x: GlobalPtr<T>, row_max: GlobalPtr<f32>, cols: u32) {
    let row = block_idx_x();
    let x_row = x.offset(row_start(row, cols));
    let init = RowMax(f32::NEG_INFINITY);
    // SAFETY: the row has `cols` elements.
    let m = unsafe { reduce_row(x_row, cols, init, MAX_FLOPS, |m, x| RowMax(maximum(m.0, x))) };
    if thread_idx_x() == 0 {
        // SAFETY: one writer per row.
        unsafe { row_max.write(row as usize, m.0) };
    }
}

/// Naive pass 2: `row_sum[r] = sum_j exp(x[r, j] - row_max[r])`, reading the row from HBM again.
///
/// # Safety
/// As [`row_max_pass`], and `row_max` holds pass 1's output.
#[inline(always)]
unsafe fn row_sum_exp_pass<T: Scalar>(
    x: GlobalPtr<T>,
    row_max: GlobalPtr<f32>,
    row_sum: GlobalPtr<f32>,
    cols: u32,
) {
    let row = block_idx_x();
    let x_row = x.offset(row_start(row, cols));
    // SAFETY: row < gridDim.x.
    let m = broadcast_from_thread0(|| unsafe { row_max.read(row as usize) });
    let add = |l: RowSum, x| RowSum(l.0 + exp_shifted(x, m));
    // SAFETY: the row has `cols` elements.
    let l = unsafe { reduce_row(x_row, cols, RowSum(0.0), EXP_SUM_FLOPS, add) };
    if thread_idx_x() == 0 {
        // SAFETY: one writer per row.
        unsafe { row_sum.write(row as usize, l.0) };
    }
}

/// The online pass: `(row_max[r], row_sum[r])` in one read of the row, each thread merging its
/// elements one at a time into a running `(m, l)` held in registers, then the block merging the
/// threads' states.
///
/// # Safety
/// As [`row_max_pass`]; `row_sum` also holds `gridDim.x` elements.
#[inline(always)]
unsafe fn online_stats_pass<T: Scalar>(
    x: GlobalPtr<T>,
    row_max: GlobalPtr<f32>,
    row_sum: GlobalPtr<f32>,
    cols: u32,
) {
    let row = block_idx_x();
    let x_row = x.offset(row_start(row, cols));
    let init = OnlineState::IDENTITY;
    let step = |state, x| merge(state, OnlineState::of(x));
    // SAFETY: the row has `cols` elements.
    let state = unsafe { reduce_row(x_row, cols, init, ONLINE_FLOPS, step) };
    if thread_idx_x() == 0 {
        // SAFETY: one writer per row.
        unsafe {
            row_max.write(row as usize, state.m);
            row_sum.write(row as usize, state.l);
        }
    }
}

/// The normalisation pass shared by naive and online: `y = exp(x - m) / l`, reading the row once
/// more and writing it once.
///
/// # Safety
/// As [`online_stats_pass`], with `(row_max, row_sum)` filled in; `y` as large as `x`.
#[inline(always)]
unsafe fn normalise_pass<T: Scalar>(
    x: GlobalPtr<T>,
    row_max: GlobalPtr<f32>,
    row_sum: GlobalPtr<f32>,
    y: GlobalPtr<T>,
    cols: u32,
) {
    let row = block_idx_x();
    let start = row_start(row, cols);
    let (x_row, y_row) = (x.offset(start), y.offset(start));
    // SAFETY: row < gridDim.x.
    let state = broadcast_from_thread0(|| unsafe {
        OnlineState {
            m: row_max.read(row as usize),
            l: row_sum.read(row as usize),
        }
    });
    let inv_l = reciprocal_or_zero(state.l);
    for col in strided_cols(cols) {
        // SAFETY: col < cols; this thread alone writes y[row, col].
        unsafe {
            let p = exp_shifted(x_row.read(col).to_f32(), state.m) * inv_l;
            y_row.write(col, T::from_f32(p));
        }
        count_flops(NORMALISE_FLOPS);
    }
}

/// Loads this thread's `FUSED_ITEMS` elements of chunk `chunk` into `e` and replaces each with
/// `exp(x - m_t)`, `m_t` being the max of the thread's own elements; returns `(m_t, sum e)`.
/// Columns past the row's end count as `-inf` (no mass). The loops have a constant trip count and
/// LLVM unrolls them, so `e[i]` is a register, never local memory: `ptxas -v` reports a 0-byte
/// stack frame for the fused kernels (a loop left rolled shows up there as 64 bytes).
#[inline(always)]
unsafe fn load_chunk<T: Scalar>(
    x_row: GlobalPtr<T>,
    cols: u32,
    chunk: u32,
    e: &mut [f32; FUSED_ITEMS],
) -> OnlineState {
    let thread = thread_idx_x();
    for (item, slot) in e.iter_mut().enumerate() {
        let col = fused_col(chunk, item, thread);
        *slot = if col < cols {
            count_flops(MAX_FLOPS + EXP_SUM_FLOPS);
            // SAFETY: col < cols.
            unsafe { x_row.read(col as usize) }.to_f32()
        } else {
            f32::NEG_INFINITY
        };
    }
    let m = e.iter().fold(f32::NEG_INFINITY, |m, &x| maximum(m, x));
    let mut l = 0.0;
    for slot in e.iter_mut() {
        *slot = exp_shifted(*slot, m);
        l += *slot;
    }
    OnlineState { m, l }
}

/// The fused kernel: one block per row, the row read from HBM once and written once when it has
/// at most [`FUSED_ON_CHIP_COLS`] columns.
///
/// Each thread keeps its `FUSED_ITEMS` elements of the row in registers as `exp(x - m_t)`, with
/// `m_t` its own max, and the block merges the threads' `(m_t, l_t)` into the row's `(m, l)`.
/// The output is then `e * exp(m_t - m) / l`: one multiply per element, no second exponential and
/// no second read. A longer row is cut into chunks of `FUSED_ON_CHIP_COLS`; each thread merges
/// its chunks' states (the online recurrence across chunks), and a second sweep re-reads the row
/// to write it (from L2 on a GPU, if the row is still there).
///
/// # Safety
/// One block of [`FUSED_THREADS`] threads per row; `x` and `y` hold `gridDim.x * cols` elements.
#[inline(always)]
unsafe fn fused_pass<T: Scalar>(x: GlobalPtr<T>, y: GlobalPtr<T>, cols: u32) {
    let row = block_idx_x();
    let start = row_start(row, cols);
    let (x_row, y_row) = (x.offset(start), y.offset(start));
    let thread = thread_idx_x();
    let chunks = fused_chunks(cols);
    // Registers: this thread's slice of the current chunk, and its running state over chunks.
    let mut e = [0.0f32; FUSED_ITEMS];
    let mut thread_state = OnlineState::IDENTITY;
    for chunk in 0..chunks {
        // SAFETY: the row has `cols` columns.
        thread_state = merge(thread_state, unsafe {
            load_chunk(x_row, cols, chunk, &mut e)
        });
    }
    let row_state = block_allreduce(thread_state);
    let inv_l = reciprocal_or_zero(row_state.l);
    if chunks == 1 {
        // The row is still in registers: rescale from this thread's max to the row's.
        let factor = exp_shifted(thread_state.m, row_state.m) * inv_l;
        for (item, &ei) in e.iter().enumerate() {
            let col = fused_col(0, item, thread);
            if col < cols {
                // SAFETY: col < cols; this thread alone writes y[row, col].
                unsafe { y_row.write(col as usize, T::from_f32(ei * factor)) };
                count_flops(RESCALE_FLOPS);
            }
        }
    } else {
        for chunk in 0..chunks {
            for item in 0..FUSED_ITEMS {
                let col = fused_col(chunk, item, thread);
                if col < cols {
                    // SAFETY: col < cols; this thread alone writes y[row, col].
                    unsafe {
                        let x = x_row.read(col as usize).to_f32();
                        y_row.write(
                            col as usize,
                            T::from_f32(exp_shifted(x, row_state.m) * inv_l),
                        );
                    }
                    count_flops(NORMALISE_FLOPS);
                }
            }
        }
    }
}

/// One PTX entry point per dtype for each pass: entry points cannot be generic, so each is a thin
/// wrapper around the generic pass above, where the algorithm lives.
macro_rules! softmax_kernels {
    ($t:ty, $dtype:literal, $row_max:ident, $row_sum_exp:ident, $normalise:ident,
     $online_stats:ident, $fused:ident) => {
        kernel! {
            #[doc = concat!("Naive softmax pass 1 (", $dtype, "): `row_max[r] = max_j x[r, j]`. ")]
            #[doc = concat!("One block per row, any multiple of 32 threads (the host uses [`ROW_THREADS`]).")]
            pub unsafe fn $row_max(x: GlobalPtr<$t>, row_max: GlobalPtr<f32>, cols: u32) {
                unsafe { row_max_pass(x, row_max, cols) }
            }
        }
        kernel! {
            #[doc = concat!("Naive softmax pass 2 (", $dtype, "): `row_sum[r] = sum_j exp(x[r, j] - row_max[r])`.")]
            pub unsafe fn $row_sum_exp(
                x: GlobalPtr<$t>,
                row_max: GlobalPtr<f32>,
                row_sum: GlobalPtr<f32>,
                cols: u32,
            ) {
                unsafe { row_sum_exp_pass(x, row_max, row_sum, cols) }
            }
        }
        kernel! {
            #[doc = concat!("Softmax normalisation (", $dtype, "), the last pass of naive and online: ")]
            #[doc = "`y[r, j] = exp(x[r, j] - row_max[r]) / row_sum[r]`."]
            pub unsafe fn $normalise(
                x: GlobalPtr<$t>,
                row_max: GlobalPtr<f32>,
                row_sum: GlobalPtr<f32>,
                y: GlobalPtr<$t>,
                cols: u32,
            ) {
                unsafe { normalise_pass(x, row_max, row_sum, y, cols) }
            }
        }
        kernel! {
            #[doc = concat!("Online softmax pass 1 (", $dtype, "): `(row_max[r], row_sum[r])` in one read ")]
            #[doc = "of the row, by merging one element at a time."]
            pub unsafe fn $online_stats(
                x: GlobalPtr<$t>,
                row_max: GlobalPtr<f32>,
                row_sum: GlobalPtr<f32>,
                cols: u32,
            ) {
                unsafe { online_stats_pass(x, row_max, row_sum, cols) }
            }
        }
        kernel! {
            #[doc = concat!("Fused softmax (", $dtype, "): one kernel, one read and one write of each row ")]
            #[doc = "of at most [`FUSED_ON_CHIP_COLS`] columns. Blocks of [`FUSED_THREADS`] threads."]
            pub unsafe fn $fused(x: GlobalPtr<$t>, y: GlobalPtr<$t>, cols: u32) {
                unsafe { fused_pass(x, y, cols) }
            }
        }
    };
}

softmax_kernels!(
    f32,
    "f32",
    softmax_row_max_f32,
    softmax_row_sum_exp_f32,
    softmax_normalise_f32,
    softmax_online_stats_f32,
    softmax_fused_f32
);
softmax_kernels!(
    Bf16,
    "bf16",
    softmax_row_max_bf16,
    softmax_row_sum_exp_bf16,
    softmax_normalise_bf16,
    softmax_online_stats_bf16,
    softmax_fused_bf16
);

/// The largest accepted relative error of an f32 softmax output, `|y - exact| <= F32_RTOL |exact|`
/// (plus `f32::MIN_POSITIVE` absolute: `ex2.approx.ftz` flushes results below it to zero).
///
/// Per element the kernels compute `exp_approx(x - m) / l`. For `|x - m| <= 88` (beyond that the
/// result is below 2^-126 and falls under the absolute term), rounding `x - m` and then
/// `(x - m) log2 e` in f32 each change `exp` by up to `|x - m| 2^-24` relative, at most 1.1e-5
/// together; `ex2.approx` adds ~2 ulp (2^-22, 2.4e-7). `l` is a sum of such terms (so the same
/// relative error) plus its own roundings: about `cols / threads + 10` additions per term on the
/// longest rows tested (~100, 6e-6), and in the online pass one rescale exponential each time a
/// thread's running max moves, which for values in random order is ~ln(n) times (5 for the ~80
/// elements per thread of the longest rows; a sorted row would need a tolerance growing with its
/// length). So `y` is within ~2e-5 of exact; 3e-5 keeps a margin without hiding a wrong max, a
/// wrong sum or a lost chunk, which are wrong by a factor, not by ulps. (The emulator's `exp2` is
/// correctly rounded, so it is more accurate than the GPU; observed errors stay below 5e-6.)
pub const F32_RTOL: f32 = 3e-5;

// What the rest of the project needs of the kernels here (docs/registry.md); the GPU build never
// sees it. Each flow is registered at each dtype by `softmax_specs!` below.

/// The largest accepted `|y - exact|` of a softmax output stored as `elem`, for outputs in
/// [0, 1]: the f32 computation's error ([`F32_RTOL`] relative, `f32::MIN_POSITIVE` absolute),
/// then, for a 16-bit output, one rounding to nearest, at most half an ulp: 2^-8 of the value
/// for bf16's 8 significant bits, 2^-11 for f16's 11. A wrong maximum, sum or chunk is wrong by
/// a factor, far above either.
#[cfg(not(target_arch = "nvptx64"))]
const fn tolerance(elem: crate::registry::Elem) -> f64 {
    let rtol = F32_RTOL as f64;
    let f32_error = rtol + f32::MIN_POSITIVE as f64;
    let rounding = elem.unit_roundoff();
    // Rounding a value already off by `rtol` of it: half an ulp of at most `1 + rtol`.
    f32_error + rounding * (1.0 + rtol)
}

/// The row-softmax spec every flow and dtype shares: it differs in its launches and its costs
/// (docs/softmax.md).
#[cfg(not(target_arch = "nvptx64"))]
const fn softmax_spec<T: crate::registry::Element>(
    name: &'static str,
    what: &'static str,
    run: &'static [crate::registry::RunShape],
    launch: crate::registry::LaunchFn,
    workspaces: fn(crate::registry::Dims) -> std::vec::Vec<usize>,
    cost: fn(crate::registry::Dims) -> crate::registry::Cost,
    occupancy: crate::registry::Occupancy,
) -> crate::registry::Spec {
    use crate::registry::*;
    Spec {
        name,
        what,
        dims: &["rows", "cols"],
        shapes: Shapes {
            run,
            // Past FUSED_ON_CHIP_COLS one draw in six: the fused kernel's second sweep.
            test_max: [4, 10_000, 1, 1, 1],
            multiple: [1, 1, 1, 1, 1],
            gpu_rows_checked: None,
        },
        inputs: |[rows, cols, ..]| std::vec![Buffer::of::<T>(rows * cols)],
        // Scores of a few units, as attention's are: rows far from uniform, whose small entries
        // (down to e^-16) test the relative accuracy.
        input_range: (-8.0, 8.0),
        // `exp_shifted` skips the exponential of a row's maximum: on zeros the model would count
        // none.
        values_steer: true,
        affine_keys: None,
        output: |[rows, cols, ..]| Buffer::of::<T>(rows * cols),
        rows: |[rows, ..]| rows,
        workspaces,
        indices: |_| std::vec![],
        tensor_maps: |_| std::vec![],
        sm90a_only: false,
        launch,
        // From the definition, in f64, on the values the kernel reads (the inputs rounded to
        // `T`); the spec's inputs are finite, so no special value arises (tests/tests/softmax.rs
        // tests those through `host::ops::softmax`).
        reference: |inputs, [_, cols, ..], rows| {
            let mut out = std::vec::Vec::with_capacity(rows.len() * cols);
            for row in rows.iter().map(|&r| &inputs[0][r * cols..(r + 1) * cols]) {
                let m = row.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
                let e: std::vec::Vec<f64> =
                    row.iter().map(|&x| (f64::from(x) - f64::from(m)).exp()).collect();
                let l: f64 = e.iter().sum();
                out.extend(e.iter().map(|e| e / l));
            }
            out.into()
        },
        tolerance: |_| tolerance(T::ELEM),
        cost,
        accumulates: false,
        occupancy,
        baseline: Some(Baseline {
            op: "softmax",
            dims: &["rows", "cols"],
        }),
    }
}

/// The issue's square shape, 256 MiB each way in f32, several times the L2; on the emulator,
/// columns that are no multiple of the block.
#[cfg(not(target_arch = "nvptx64"))]
const SQUARE: crate::registry::RunShape = crate::registry::RunShape {
    gpu: [8192, 8192, 1, 1, 1],
    emulator: [64, 1000, 1, 1, 1],
};

/// Tall rows of 4096 (a block's half of the fused kernel's on-chip columns): four times the
/// rows, each a launch's block. On the emulator, rows past [`FUSED_ON_CHIP_COLS`], which the
/// fused kernel reads twice.
#[cfg(not(target_arch = "nvptx64"))]
const TALL: crate::registry::RunShape = crate::registry::RunShape {
    gpu: [32768, 4096, 1, 1, 1],
    emulator: [4, 9000, 1, 1, 1],
};

/// One kernel's traffic and arithmetic in a softmax's cost, as `host::ops::softmax`'s cost
/// models count it: whole-matrix sweeps read and written, f32 row statistics read and written
/// per row, FLOPs and exponentials per element.
#[cfg(not(target_arch = "nvptx64"))]
#[derive(Clone, Copy)]
struct Sweep {
    matrix: (u64, u64),
    stats: (u64, u64),
    flops: u32,
    exps: u32,
}

#[cfg(not(target_arch = "nvptx64"))]
impl Sweep {
    /// `(reads, writes)` of the matrix and of the row statistics, FLOPs and exponentials.
    const fn new(matrix: (u64, u64), stats: (u64, u64), flops: u32, exps: u32) -> Self {
        Self {
            matrix,
            stats,
            flops,
            exps,
        }
    }

    /// The normalisation that ends naive and online: reads x, m and l, writes y.
    const NORMALISE: Self = Self::new((1, 1), (2, 0), NORMALISE_FLOPS, 1);
}

/// The cost of `sweeps` over a `rows x cols` matrix of `T`.
#[cfg(not(target_arch = "nvptx64"))]
fn sweeps_cost<T: crate::registry::Element>(
    [rows, cols, ..]: crate::registry::Dims,
    sweeps: &[Sweep],
) -> crate::registry::Cost {
    let (n, rows) = ((rows * cols) as u64, rows as u64);
    let elem = T::ELEM.bytes() as u64;
    let mut cost = crate::registry::Cost::NONE;
    for s in sweeps {
        cost.bytes_read += elem * s.matrix.0 * n + 4 * s.stats.0 * rows;
        cost.bytes_written += elem * s.matrix.1 * n + 4 * s.stats.1 * rows;
        cost.flops += u64::from(s.flops) * n;
        cost.exps += u64::from(s.exps) * n;
    }
    cost
}

/// The fused kernel: the row read once and kept in registers for the write, or, past
/// [`FUSED_ON_CHIP_COLS`], read again and its exponentials taken again.
#[cfg(not(target_arch = "nvptx64"))]
pub(crate) fn fused_cost<T: crate::registry::Element>(dims: crate::registry::Dims) -> crate::registry::Cost {
    let read = MAX_FLOPS + EXP_SUM_FLOPS;
    if dims[1] <= FUSED_ON_CHIP_COLS as usize {
        sweeps_cost::<T>(dims, &[Sweep::new((1, 1), (0, 0), read + RESCALE_FLOPS, 1)])
    } else {
        sweeps_cost::<T>(dims, &[Sweep::new((2, 1), (0, 0), read + NORMALISE_FLOPS, 2)])
    }
}

/// Naive: pass 1 reads x and writes m; pass 2 reads x and m, writes l; then the normalisation.
#[cfg(not(target_arch = "nvptx64"))]
fn naive_cost<T: crate::registry::Element>(dims: crate::registry::Dims) -> crate::registry::Cost {
    let max = Sweep::new((1, 0), (0, 1), MAX_FLOPS, 0);
    let sum_exp = Sweep::new((1, 0), (1, 1), EXP_SUM_FLOPS, 1);
    sweeps_cost::<T>(dims, &[max, sum_exp, Sweep::NORMALISE])
}

/// Online: one pass reads x and writes m and l; then the normalisation.
#[cfg(not(target_arch = "nvptx64"))]
fn online_cost<T: crate::registry::Element>(dims: crate::registry::Dims) -> crate::registry::Cost {
    let stats = Sweep::new((1, 0), (0, 2), ONLINE_FLOPS, 1);
    sweeps_cost::<T>(dims, &[stats, Sweep::NORMALISE])
}

/// One block of [`FUSED_THREADS`] per row; each thread loads its [`FUSED_ITEMS`] elements of a
/// chunk before it waits on the first.
#[cfg(not(target_arch = "nvptx64"))]
const fn fused_occupancy<T: crate::registry::Element>() -> crate::registry::Occupancy {
    crate::registry::Occupancy {
        threads: FUSED_THREADS,
        dynamic_shared: 0,
        in_flight_per_thread: Some(FUSED_ITEMS as u32 * T::ELEM.bytes() as u32),
    }
}

/// The naive and online kernels run one block of [`ROW_THREADS`] per row, each thread folding
/// one element per step: one load in flight.
#[cfg(not(target_arch = "nvptx64"))]
const fn row_occupancy<T: crate::registry::Element>() -> crate::registry::Occupancy {
    crate::registry::Occupancy {
        threads: ROW_THREADS,
        dynamic_shared: 0,
        in_flight_per_thread: Some(T::ELEM.bytes() as u32),
    }
}

/// Naive and online pass each row's `(m, l)` from kernel to kernel: `row_max` and `row_sum`.
#[cfg(not(target_arch = "nvptx64"))]
const ROW_STATS: fn(crate::registry::Dims) -> std::vec::Vec<usize> =
    |[rows, ..]| std::vec![rows, rows];

/// [`row_args`]: `x`, `row_max`, `row_sum`, `y`, the geometry and `cols`.
#[cfg(not(target_arch = "nvptx64"))]
type RowArgs<T> = (
    GlobalPtr<T>,
    GlobalPtr<f32>,
    GlobalPtr<f32>,
    GlobalPtr<T>,
    crate::registry::LaunchConfig,
    u32,
);

/// What the naive and online kernels are launched with: `x`, the workspaces `row_max` and
/// `row_sum`, the output `y`, one block of [`ROW_THREADS`] threads per row, and `cols`.
#[cfg(not(target_arch = "nvptx64"))]
fn row_args<T: crate::registry::Element>(
    buffers: &crate::registry::Buffers,
    [rows, cols, ..]: crate::registry::Dims,
) -> Result<RowArgs<T>, crate::registry::LaunchError> {
    let geometry = crate::registry::LaunchConfig::grid_2d((rows as u32, 1), (ROW_THREADS, 1));
    let (row_max, row_sum) = (buffers.workspaces[0], buffers.workspaces[1]);
    let (x, y) = (buffers.input::<T>(0)?, buffers.output::<T>()?);
    Ok((x, row_max, row_sum, y, geometry, cols as u32))
}

/// The three flows' specs at one dtype: the kernels' names differ, nothing else (PTX entry
/// points cannot be generic, and `launch_registered!` names each one).
macro_rules! softmax_specs {
    ($t:ty, $run:expr, ($naive_spec:ident, $naive:literal), ($online_spec:ident, $online:literal),
     ($fused_spec:ident, $fused:ident), $row_max:ident, $row_sum_exp:ident, $normalise:ident,
     $online_stats:ident) => {
        /// One kernel: the row read once, kept in registers between its read and its write.
        #[cfg(not(target_arch = "nvptx64"))]
        pub const $fused_spec: crate::registry::Spec = softmax_spec::<$t>(
            stringify!($fused),
            "y = softmax of each row of x in one kernel: the row read once (twice past 8192 columns)",
            $run,
            |launcher, buffers, [rows, cols, ..]| {
                let (x, y, cols) = (buffers.input::<$t>(0)?, buffers.output::<$t>()?, cols as u32);
                let geometry =
                    crate::registry::LaunchConfig::grid_2d((rows as u32, 1), (FUSED_THREADS, 1));
                crate::launch_registered!(launcher, geometry, $fused(x, y, cols))
            },
            |_| std::vec![],
            fused_cost::<$t>,
            fused_occupancy::<$t>(),
        );

        /// Three kernels, the row's `(m, l)` left in the two workspaces between them.
        #[cfg(not(target_arch = "nvptx64"))]
        pub const $naive_spec: crate::registry::Spec = softmax_spec::<$t>(
            $naive,
            "y = softmax of each row of x in three kernels: row max, row sum of exp(x - m), normalise",
            $run,
            |launcher, buffers, dims| {
                let (x, row_max, row_sum, y, geometry, cols) = row_args::<$t>(buffers, dims)?;
                crate::launch_registered!(launcher, geometry, $row_max(x, row_max, cols))?;
                crate::launch_registered!(
                    launcher,
                    geometry,
                    $row_sum_exp(x, row_max, row_sum, cols)
                )?;
                crate::launch_registered!(
                    launcher,
                    geometry,
                    $normalise(x, row_max, row_sum, y, cols)
                )
            },
            ROW_STATS,
            naive_cost::<$t>,
            row_occupancy::<$t>(),
        );

        /// Two kernels: the online `(m, l)` pass, then the normalisation.
        #[cfg(not(target_arch = "nvptx64"))]
        pub const $online_spec: crate::registry::Spec = softmax_spec::<$t>(
            $online,
            "y = softmax of each row of x in two kernels: the online (m, l) pass, then normalise",
            $run,
            |launcher, buffers, dims| {
                let (x, row_max, row_sum, y, geometry, cols) = row_args::<$t>(buffers, dims)?;
                crate::launch_registered!(
                    launcher,
                    geometry,
                    $online_stats(x, row_max, row_sum, cols)
                )?;
                crate::launch_registered!(
                    launcher,
                    geometry,
                    $normalise(x, row_max, row_sum, y, cols)
                )
            },
            ROW_STATS,
            online_cost::<$t>,
            row_occupancy::<$t>(),
        );
    };
}

softmax_specs!(
    f32,
    &[SQUARE],
    (SOFTMAX_NAIVE_F32, "softmax_naive_f32"),
    (SOFTMAX_ONLINE_F32, "softmax_online_f32"),
    (SOFTMAX_FUSED_F32, softmax_fused_f32),
    softmax_row_max_f32,
    softmax_row_sum_exp_f32,
    softmax_normalise_f32,
    softmax_online_stats_f32
);
softmax_specs!(
    Bf16,
    &[SQUARE, TALL],
    (SOFTMAX_NAIVE_BF16, "softmax_naive_bf16"),
    (SOFTMAX_ONLINE_BF16, "softmax_online_bf16"),
    (SOFTMAX_FUSED_BF16, softmax_fused_bf16),
    softmax_row_max_bf16,
    softmax_row_sum_exp_bf16,
    softmax_normalise_bf16,
    softmax_online_stats_bf16
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fused_columns_tile_each_chunk_exactly_once() {
        let mut seen = [0u8; 2 * FUSED_ON_CHIP_COLS as usize];
        for chunk in 0..2 {
            for item in 0..FUSED_ITEMS {
                for thread in 0..FUSED_THREADS {
                    seen[fused_col(chunk, item, thread) as usize] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&n| n == 1));
        assert_eq!(fused_chunks(1), 1);
        assert_eq!(fused_chunks(FUSED_ON_CHIP_COLS), 1);
        assert_eq!(fused_chunks(FUSED_ON_CHIP_COLS + 1), 2);
    }

    #[test]
    fn exp_shifted_limits() {
        let inf = f32::INFINITY;
        assert_eq!(exp_shifted(-inf, -inf), 0.0);
        assert_eq!(exp_shifted(-inf, 3.0), 0.0);
        assert_eq!(exp_shifted(inf, inf), 1.0);
        assert_eq!(exp_shifted(2.0, inf), 0.0);
        assert_eq!(exp_shifted(-f32::MAX, f32::MAX), 0.0);
        assert_eq!(exp_shifted(f32::MAX, f32::MAX), 1.0);
        assert!(exp_shifted(f32::NAN, 1.0).is_nan());
        assert!(exp_shifted(1.0, f32::NAN).is_nan());
    }

    #[test]
    fn maximum_propagates_nan() {
        assert!(maximum(f32::NAN, 1.0).is_nan());
        assert!(maximum(1.0, f32::NAN).is_nan());
        assert_eq!(maximum(1.0, 2.0), 2.0);
        assert_eq!(maximum(f32::NEG_INFINITY, -3.0), -3.0);
    }
}
