//! Host side of `kernels::decode`: the GEMV / skinny GEMM of the projections and split-KV decode
//! attention, each with its cost model (docs/decode.md).
//!
//! ```
//! use half::bf16;
//! use host::{Runtime, ops::{decode, gemm::GemmShape}};
//! let rt = Runtime::emulator();
//! // W = [[1, 2, 3], [4, 5, 6]] (N = 2 rows of K = 3), x = [1, 1, 1]: y = [6, 15].
//! let w: Vec<bf16> = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0].map(bf16::from_f32).to_vec();
//! let x = vec![bf16::ONE; 3];
//! let (w, x) = (rt.upload(&w).unwrap(), rt.upload(&x).unwrap());
//! let mut y = rt.alloc::<bf16>(2).unwrap();
//! decode::gemv(&rt, &w, &x, &mut y, GemmShape::new(1, 2, 3)).unwrap();
//! assert_eq!(rt.download(&y).unwrap(), [6.0f32, 15.0].map(bf16::from_f32));
//! ```

use half::bf16;
use kernels::decode::attention::{
    BLOCK_KEYS_PER_STEP, FLOPS_PER_KEY, GROUP_TILES, HEAD_DIM, MAX_GROUP, MAX_SPLITS, MERGE_FLOPS,
    MERGE_THREADS, THREADS as SPLIT_THREADS,
};
use kernels::decode::gemv::{GEMV_BF16, MAX_M};

use super::attention::Traffic;
use super::gemm::{GemmCost, GemmShape};
use super::then;
use crate::buffer::DeviceBuffer;
use crate::cost::{ComputeUnit, Cost, product, product_usize, sum};
use crate::error::{Error, Result};
use crate::launch;
use crate::launch::{LaunchConfig, dim3};
use crate::runtime::{Launched, Runtime};

const BF16: u64 = 2;
const F32: u64 = 4;

/// `Y = X W^T` with `W` `n x k` (row-major, one output feature per row), `X` `m x k`, `Y`
/// `m x n`, all bf16, f32 accumulation; `1 <= m <= 16`, any `n` and `k`. See
/// `kernels::decode::gemv`.
pub fn gemv(
    rt: &Runtime,
    w: &DeviceBuffer<bf16>,
    x: &DeviceBuffer<bf16>,
    y: &mut DeviceBuffer<bf16>,
    shape: GemmShape,
) -> Result<Launched> {
    let GemmShape { m, n, k } = shape;
    let what = "decode::gemv";
    if m > MAX_M as usize {
        return Err(Error::Shape(format!(
            "{what}: M = {m} rows of X; the GEMV takes at most {MAX_M} (a batch that large is a GEMM: use the tensor-core kernel)"
        )));
    }
    for (name, len, rows, cols) in [
        ("W", w.len(), n, k),
        ("X", x.len(), m, k),
        ("Y", y.len(), m, n),
    ] {
        if Some(len) != rows.checked_mul(cols) {
            return Err(Error::Shape(format!(
                "{what}: {name} has {len} elements, but {name} is {rows} x {cols}"
            )));
        }
    }
    let limit = i32::MAX as usize;
    if n > limit || k > limit {
        return Err(Error::Shape(format!(
            "{what}: N = {n}, K = {k}; each must be below 2^31"
        )));
    }
    if m == 0 || n == 0 {
        return Ok(None);
    }
    // The registered kernel's launch (`kernels::decode::gemv::GEMV_BF16`): the smallest row tile
    // that holds M. K = 0 launches too: every output is an empty sum, 0.
    crate::registry::launch_on(rt, &GEMV_BF16, &[w, x], y, &[], [m, k, n, 1, 1], false)
}

/// The GEMV's cost model, its registered spec's (`kernels::decode::gemv::GEMV_BF16`): W read
/// exactly once, X once, Y written once, `2 m n k` FLOPs on CUDA cores (compulsory); every
/// block but one reads X again (re-reads, from L2 on a GPU: X is at most a few hundred KiB). An
/// empty Y launches nothing: 0.
pub fn gemv_cost(shape: GemmShape) -> GemmCost {
    let GemmShape { m, n, k } = shape;
    let c = if m == 0 || n == 0 {
        kernels::registry::Cost {
            bytes_read: 0,
            bytes_written: 0,
            flops: 0,
            exps: 0,
            rereads: 0,
            resident_rereads: 0,
        }
    } else {
        (GEMV_BF16.cost)([m, k, n, 1, 1])
    };
    GemmCost {
        compulsory: Cost {
            bytes_read: c.compulsory_read(),
            bytes_written: c.bytes_written,
            flops: c.flops,
            exps: 0,
            unit: ComputeUnit::CudaCoreF32,
        },
        reread_bytes: c.resident_rereads,
    }
}

/// The shape of one decode-attention step. The head dimension is
/// [`HEAD_DIM`](kernels::decode::attention::HEAD_DIM) = 128.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeShape {
    /// Sequences decoded together.
    pub batch: usize,
    /// Query heads per sequence.
    pub q_heads: usize,
    /// KV heads per sequence (`q_heads` a multiple of it).
    pub kv_heads: usize,
    /// Positions the cache holds per (sequence, KV head); each sequence uses its first `ctx[b]`.
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

    /// Elements of K (and V): the whole cache, `batch x kv_heads x max_ctx x 128`.
    pub fn kv_elems(&self) -> usize {
        product_usize(&[self.batch, self.kv_heads, self.max_ctx, HEAD_DIM])
    }
}

/// Splits per (sequence, KV head) the host picks: enough blocks for [`SPLIT_TARGET_BLOCKS`], but
/// chunks of at least [`MIN_CHUNK`] keys (so the partials stay a few percent of the cache bytes).
pub fn auto_splits(shape: &DecodeShape, longest: usize) -> u32 {
    let heads = (shape.batch * shape.kv_heads).max(1);
    let for_blocks = SPLIT_TARGET_BLOCKS.div_ceil(heads);
    let for_chunks = longest.div_ceil(MIN_CHUNK).max(1);
    for_blocks.min(for_chunks).clamp(1, MAX_SPLITS as usize) as u32
}

/// Blocks the automatic split aims for: 4 per SM of a 132-SM H100 or H200, so that even a
/// batch of one sequence keeps every SM streaming the cache.
pub const SPLIT_TARGET_BLOCKS: usize = 4 * 132;
/// The shortest chunk of keys the automatic split makes: a partial costs `(D + 2) x 4` bytes
/// written and read per query head, against `2 x D x 2` bytes of K and V per key per KV head.
pub const MIN_CHUNK: usize = 256;

/// Keys per split for sequences of at most `longest` keys in `splits` splits: whole steps of the
/// kernel's loop ([`BLOCK_KEYS_PER_STEP`]), and at least one.
pub fn chunk_len(longest: usize, splits: u32) -> u32 {
    let step = BLOCK_KEYS_PER_STEP as usize;
    longest
        .div_ceil(splits as usize)
        .next_multiple_of(step)
        .max(step) as u32
}

/// What decode attention keeps on the device between its two kernels, and the sequence lengths.
/// Built once per step shape, outside any timed launch.
pub struct DecodeWorkspace {
    /// `ctx[b]`, on the device.
    pub ctx: DeviceBuffer<u32>,
    /// The same on the host (the cost model needs it).
    pub ctx_lens: Vec<u32>,
    /// Splits per (sequence, KV head).
    pub splits: u32,
    /// Keys per split.
    pub chunk: u32,
    /// Each partial's maximum score, `rows x splits`.
    pub part_m: DeviceBuffer<f32>,
    /// Each partial's `l = sum exp(s - m)`.
    pub part_l: DeviceBuffer<f32>,
    /// Each partial's unnormalised output, `rows x splits x 128`.
    pub part_o: DeviceBuffer<f32>,
}

impl DecodeWorkspace {
    /// Uploads `ctx_lens` (one per sequence, each at most `shape.max_ctx`) and allocates the
    /// partials for `splits` splits (`None`: [`auto_splits`]).
    pub fn new(
        rt: &Runtime,
        shape: &DecodeShape,
        ctx_lens: &[u32],
        splits: Option<u32>,
    ) -> Result<Self> {
        let what = "decode::attention";
        check_heads(what, shape)?;
        if ctx_lens.len() != shape.batch {
            return Err(Error::Shape(format!(
                "{what}: {} context lengths for a batch of {}",
                ctx_lens.len(),
                shape.batch
            )));
        }
        if let Some((b, &len)) = ctx_lens
            .iter()
            .enumerate()
            .find(|&(_, &len)| len as usize > shape.max_ctx)
        {
            return Err(Error::Shape(format!(
                "{what}: sequence {b} has {len} keys, but the cache holds {} per head",
                shape.max_ctx
            )));
        }
        let longest = ctx_lens.iter().copied().max().unwrap_or(0) as usize;
        let splits = splits.unwrap_or_else(|| auto_splits(shape, longest));
        if !(1..=MAX_SPLITS).contains(&splits) {
            return Err(Error::Shape(format!(
                "{what}: {splits} splits; the merge kernel takes 1 to {MAX_SPLITS}"
            )));
        }
        let partials = shape.rows() * splits as usize;
        Ok(Self {
            ctx: rt.upload(ctx_lens)?,
            ctx_lens: ctx_lens.to_vec(),
            splits,
            chunk: chunk_len(longest, splits),
            part_m: rt.alloc(partials)?,
            part_l: rt.alloc(partials)?,
            part_o: rt.alloc(partials * HEAD_DIM)?,
        })
    }
}

/// Heads that the kernel takes: `q_heads` a multiple of `kv_heads`, groups of at most
/// [`MAX_GROUP`], sizes that fit the kernels' u32 indices.
fn check_heads(what: &str, shape: &DecodeShape) -> Result<()> {
    let DecodeShape {
        q_heads, kv_heads, ..
    } = *shape;
    if kv_heads == 0 || q_heads == 0 || !q_heads.is_multiple_of(kv_heads) {
        return Err(Error::Shape(format!(
            "{what}: {q_heads} query heads cannot share {kv_heads} KV heads evenly"
        )));
    }
    if shape.group() > MAX_GROUP {
        return Err(Error::Shape(format!(
            "{what}: {} query heads per KV head; the kernel keeps at most {MAX_GROUP} in registers",
            shape.group()
        )));
    }
    let limit = u32::MAX as usize;
    if shape.max_ctx > limit || shape.batch > 65535 || kv_heads > 65535 {
        return Err(Error::Shape(format!(
            "{what}: batch {}, {kv_heads} KV heads, {} positions: at most 65535, 65535 and 2^32 - 1",
            shape.batch, shape.max_ctx
        )));
    }
    Ok(())
}

/// Split-KV decode attention: `o` (bf16, `batch x q_heads x 128`) and `lse` (`batch x q_heads`)
/// for one query token per head, two launches (see `kernels::decode::attention`).
#[allow(clippy::too_many_arguments)]
pub fn attention(
    rt: &Runtime,
    q: &DeviceBuffer<bf16>,
    k: &DeviceBuffer<bf16>,
    v: &DeviceBuffer<bf16>,
    o: &mut DeviceBuffer<bf16>,
    lse: &mut DeviceBuffer<f32>,
    shape: &DecodeShape,
    ws: &mut DecodeWorkspace,
    scale: f32,
) -> Result<Launched> {
    let what = "decode::attention";
    let kv = [k.len(), v.len()].map(|len| (len, shape.kv_elems()));
    let Some((cfg, tile)) = prepare(what, q, kv, (&*o, &*lse), shape, ws)? else {
        return Ok(None);
    };
    let (kv_heads, group, max_ctx) = (
        shape.kv_heads as u32,
        shape.group() as u32,
        shape.max_ctx as u32,
    );
    let (q, k, v, ctx, chunk) = (q.ptr(), k.ptr(), v.ptr(), ws.ctx.ptr(), ws.chunk);
    let (part_m, part_l, part_o) = (ws.part_m.ptr(), ws.part_l.ptr(), ws.part_o.ptr());
    macro_rules! split {
        ($kernel:ident) => {
            launch!(
                rt,
                cfg,
                decode::$kernel(
                    q, k, v, ctx, part_m, part_l, part_o, kv_heads, group, max_ctx, chunk, scale
                )
            )
        };
    }
    let first = match tile {
        1 => split!(decode_attention_split_bf16_g1),
        2 => split!(decode_attention_split_bf16_g2),
        4 => split!(decode_attention_split_bf16_g4),
        _ => split!(decode_attention_split_bf16_g8),
    }?;
    let second = merge_partials(rt, ws, o, lse, shape.rows())?;
    Ok(then(first, second))
}

/// A paged KV cache's block table, on the device, checked against the page pool.
pub struct PagedKv {
    /// `batch x pages_per_seq` page numbers.
    pub table: DeviceBuffer<u32>,
    /// Table entries per sequence: `shape.max_ctx` must be `pages_per_seq * page_size`.
    pub pages_per_seq: usize,
    /// Positions per page.
    pub page_size: usize,
    /// Pages in the pool: K and V each hold `pages x kv_heads x page_size x 128` elements.
    pub pages: usize,
}

impl PagedKv {
    /// Uploads `table` (`batch x pages_per_seq`, each entry below `pages`).
    pub fn new(
        rt: &Runtime,
        table: &[u32],
        pages_per_seq: usize,
        page_size: usize,
        pages: usize,
    ) -> Result<Self> {
        let what = "decode::PagedKv";
        if page_size == 0 || pages_per_seq == 0 || !table.len().is_multiple_of(pages_per_seq) {
            return Err(Error::Shape(format!(
                "{what}: a table of {} entries in rows of {pages_per_seq}, pages of {page_size} positions",
                table.len()
            )));
        }
        if let Some(bad) = table.iter().find(|&&p| p as usize >= pages) {
            return Err(Error::Shape(format!(
                "{what}: page {bad} in the block table, but the pool has {pages} pages"
            )));
        }
        if pages_per_seq
            .checked_mul(page_size)
            .is_none_or(|n| n > u32::MAX as usize)
        {
            return Err(Error::Shape(format!(
                "{what}: {pages_per_seq} pages of {page_size} positions overflow a u32 position"
            )));
        }
        Ok(Self {
            table: rt.upload(table)?,
            pages_per_seq,
            page_size,
            pages,
        })
    }

    /// Elements of K (and V): the whole pool.
    pub fn kv_elems(&self, kv_heads: usize) -> usize {
        product_usize(&[self.pages, kv_heads, self.page_size, HEAD_DIM])
    }
}

/// A contiguous cache (`shape`: `batch x kv_heads x max_ctx x 128`) laid out as a paged pool: the
/// first `ctx[b]` positions of sequence `b` go to pages `table[b * pages_per_seq ..]`, pages of
/// `page_size` positions, in a pool of `pages`; every other element is `fill` (the tests use NaN,
/// so that a kernel reading an unused position poisons its output).
pub fn paginate(
    cache: &[bf16],
    shape: &DecodeShape,
    ctx: &[u32],
    (table, pages_per_seq, page_size, pages): (&[u32], usize, usize, usize),
    fill: bf16,
) -> Vec<bf16> {
    let (d, kv_heads) = (HEAD_DIM, shape.kv_heads);
    let mut pool = vec![fill; pages * kv_heads * page_size * d];
    for (b, &len) in ctx.iter().enumerate() {
        for j in 0..len as usize {
            let page = table[b * pages_per_seq + j / page_size] as usize;
            for h in 0..kv_heads {
                let from = ((b * kv_heads + h) * shape.max_ctx + j) * d;
                let to = ((page * kv_heads + h) * page_size + j % page_size) * d;
                pool[to..to + d].copy_from_slice(&cache[from..from + d]);
            }
        }
    }
    pool
}

/// [`attention`] on a paged cache: K and V are pools of pages of `kv_heads x page_size x 128`,
/// and sequence `b`'s position `j` is row `j % page_size` of page `table[b][j / page_size]`.
/// `shape.max_ctx` is the table's capacity, `pages_per_seq * page_size`.
#[allow(clippy::too_many_arguments)]
pub fn attention_paged(
    rt: &Runtime,
    q: &DeviceBuffer<bf16>,
    [k, v]: [&DeviceBuffer<bf16>; 2],
    paged: &PagedKv,
    o: &mut DeviceBuffer<bf16>,
    lse: &mut DeviceBuffer<f32>,
    shape: &DecodeShape,
    ws: &mut DecodeWorkspace,
    scale: f32,
) -> Result<Launched> {
    let what = "decode::attention_paged";
    if shape.max_ctx != paged.pages_per_seq * paged.page_size
        || paged.table.len() != shape.batch * paged.pages_per_seq
    {
        return Err(Error::Shape(format!(
            "{what}: {shape:?} needs a table of {} rows of {} pages of {} positions (max_ctx), got {} entries",
            shape.batch,
            paged.pages_per_seq,
            paged.page_size,
            paged.table.len()
        )));
    }
    let kv = [k.len(), v.len()].map(|len| (len, paged.kv_elems(shape.kv_heads)));
    let Some((cfg, tile)) = prepare(what, q, kv, (&*o, &*lse), shape, ws)? else {
        return Ok(None);
    };
    let (kv_heads, group) = (shape.kv_heads as u32, shape.group() as u32);
    let (pages_per_seq, page_size) = (paged.pages_per_seq as u32, paged.page_size as u32);
    let (q, k, v, ctx, table, chunk) = (
        q.ptr(),
        k.ptr(),
        v.ptr(),
        ws.ctx.ptr(),
        paged.table.ptr(),
        ws.chunk,
    );
    let (part_m, part_l, part_o) = (ws.part_m.ptr(), ws.part_l.ptr(), ws.part_o.ptr());
    macro_rules! split {
        ($kernel:ident) => {
            launch!(
                rt,
                cfg,
                decode::$kernel(
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
        };
    }
    let first = match tile {
        1 => split!(decode_attention_paged_bf16_g1),
        2 => split!(decode_attention_paged_bf16_g2),
        4 => split!(decode_attention_paged_bf16_g4),
        _ => split!(decode_attention_paged_bf16_g8),
    }?;
    let second = merge_partials(rt, ws, o, lse, shape.rows())?;
    Ok(then(first, second))
}

/// What both layouts check before pass 1: heads, `q` and the outputs, K and V (`(len, wanted)`),
/// the workspace against the shape. The launch and the group tile, or `None` for an empty batch.
fn prepare(
    what: &str,
    q: &DeviceBuffer<bf16>,
    kv: [(usize, usize); 2],
    (o, lse): (&DeviceBuffer<bf16>, &DeviceBuffer<f32>),
    shape: &DecodeShape,
    ws: &DecodeWorkspace,
) -> Result<Option<(LaunchConfig, u32)>> {
    check_heads(what, shape)?;
    let [(k, want_k), (v, want_v)] = kv;
    for (name, len, want) in [
        ("q", q.len(), shape.q_elems()),
        ("k", k, want_k),
        ("v", v, want_v),
    ] {
        if len != want {
            return Err(Error::Shape(format!(
                "{what}: {name} has {len} elements, but {shape:?} needs {want}"
            )));
        }
    }
    if ws.ctx_lens.len() != shape.batch
        || ws.part_m.len() != shape.rows() * ws.splits as usize
        || ws.ctx_lens.iter().any(|&c| c as usize > shape.max_ctx)
    {
        return Err(Error::Shape(format!(
            "{what}: the workspace was made for another shape than {shape:?}"
        )));
    }
    check_outputs(what, o, lse, shape.rows())?;
    if shape.batch == 0 {
        return Ok(None);
    }
    let cfg = LaunchConfig {
        grid: dim3(ws.splits, shape.kv_heads as u32, shape.batch as u32),
        block: dim3(SPLIT_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    // The smallest group tile that holds the group (its per-head registers are sized at compile
    // time).
    let group = shape.group() as u32;
    let tile = GROUP_TILES
        .into_iter()
        .find(|&t| group <= t)
        .expect("group <= MAX_GROUP");
    Ok(Some((cfg, tile)))
}

fn check_outputs(
    what: &str,
    o: &DeviceBuffer<bf16>,
    lse: &DeviceBuffer<f32>,
    rows: usize,
) -> Result<()> {
    for (name, len, want) in [("o", o.len(), rows * HEAD_DIM), ("lse", lse.len(), rows)] {
        if len != want {
            return Err(Error::Shape(format!(
                "{what}: {name} has {len} elements, but {rows} heads need {want}"
            )));
        }
    }
    Ok(())
}

/// The second kernel alone: merges the `ws.splits` partials of each of `rows` heads already in
/// `ws` into `o` and `lse`. [`attention`] calls it; the tests call it on partials of their own.
pub fn merge_partials(
    rt: &Runtime,
    ws: &DecodeWorkspace,
    o: &mut DeviceBuffer<bf16>,
    lse: &mut DeviceBuffer<f32>,
    rows: usize,
) -> Result<Launched> {
    let what = "decode::merge_partials";
    check_outputs(what, o, lse, rows)?;
    let partials = rows * ws.splits as usize;
    if ws.part_m.len() != partials || ws.part_l.len() != partials {
        return Err(Error::Shape(format!(
            "{what}: {rows} heads of {} splits need {partials} partials, the workspace has {}",
            ws.splits,
            ws.part_m.len()
        )));
    }
    if ws.part_o.len() != partials * HEAD_DIM || !(1..=MAX_SPLITS).contains(&ws.splits) {
        return Err(Error::Shape(format!(
            "{what}: a workspace of {} splits (1 to {MAX_SPLITS}) with {} output elements",
            ws.splits,
            ws.part_o.len()
        )));
    }
    if rows == 0 {
        return Ok(None);
    }
    let rows = super::len_u32(what, rows)?;
    let (part_m, part_l, part_o) = (ws.part_m.ptr(), ws.part_l.ptr(), ws.part_o.ptr());
    let (o, lse, splits) = (o.ptr(), lse.ptr(), ws.splits);
    launch!(
        rt,
        LaunchConfig::linear(rows, MERGE_THREADS),
        decode::decode_attention_merge_bf16(part_m, part_l, part_o, o, lse, splits)
    )
}

/// Pass 2's traffic for `rows` heads of `splits` partials: each partial (`m`, `l` and 128 f32 of
/// `o`) read once, `o` (bf16) and `lse` written; 2 FLOPs per (partial, dimension).
pub fn merge_cost(rows: usize, splits: u32) -> Cost {
    let (rows, splits) = (rows as u64, u64::from(splits));
    let d = HEAD_DIM as u64;
    Cost {
        bytes_read: product(&[rows, splits, 2 + d, F32]),
        bytes_written: product(&[rows, d * BF16 + F32]),
        flops: product(&[rows, splits, d, u64::from(MERGE_FLOPS)]),
        // One rescaling factor exp(m_s - m) per partial.
        exps: product(&[rows, splits]),
        unit: ComputeUnit::CudaCoreF32,
    }
}

/// Both passes' traffic, split as the attention chapter splits it.
///
/// Compulsory: K and V of the `ctx[b]` keys of every (sequence, KV head) read **once** (the
/// group's query heads share each byte), Q read once, each sequence length once, the partials
/// written once and read once, `o` and `lse` written; `4 d` FLOPs per (query head, key) plus the
/// merge's. Re-reads: Q once more per additional split (every block of a (sequence, KV head)
/// loads the group's query rows), and each sequence length by every thread of every block.
pub fn attention_traffic(shape: &DecodeShape, ctx_lens: &[u32], splits: u32) -> Traffic {
    let d = HEAD_DIM as u64;
    let (batch, kv_heads, splits) = (shape.batch as u64, shape.kv_heads as u64, u64::from(splits));
    let keys = total_keys(ctx_lens);
    let rows = shape.rows() as u64;
    let q = product(&[rows, d, BF16]);
    let ctx = product(&[batch, F32]);
    let partials = product(&[rows, splits, 2 + d, F32]);
    let merge = merge_cost(shape.rows(), splits as u32);
    let scores = product(&[keys, shape.group() as u64, kv_heads]);
    let split = Cost {
        bytes_read: sum(&[product(&[keys, kv_heads, 2, d, BF16]), q, ctx]),
        bytes_written: partials,
        flops: product(&[scores, u64::from(FLOPS_PER_KEY)]),
        // One exponential per score, as the attention chapter's model counts them.
        exps: scores,
        unit: ComputeUnit::CudaCoreF32,
    };
    let ctx_readers = product(&[kv_heads, splits, u64::from(SPLIT_THREADS)]);
    Traffic {
        compulsory: split.plus(merge),
        re_read_bytes: sum(&[
            product(&[splits.saturating_sub(1), q]),
            product(&[ctx_readers.saturating_sub(1), ctx]),
        ]),
    }
}

/// [`attention_traffic`] on a paged cache of `page_size` positions a page: the same, plus the
/// block table, read once per (key, KV head) by one lane of the key group that loads the key:
/// each entry in use once (compulsory), the rest re-reads.
pub fn paged_traffic(
    shape: &DecodeShape,
    ctx_lens: &[u32],
    splits: u32,
    page_size: usize,
) -> Traffic {
    let keys = total_keys(ctx_lens);
    let entries: u64 = ctx_lens
        .iter()
        .map(|&c| (c as usize).div_ceil(page_size.max(1)) as u64)
        .sum();
    let lookups = product(&[keys, shape.kv_heads as u64]);
    let table = Traffic {
        compulsory: Cost {
            bytes_read: product(&[entries, F32]),
            bytes_written: 0,
            flops: 0,
            exps: 0,
            unit: ComputeUnit::CudaCoreF32,
        },
        re_read_bytes: product(&[lookups - entries.min(lookups), F32]),
    };
    attention_traffic(shape, ctx_lens, splits).plus(table)
}

/// Bytes of K and V one step reads: `sum_b ctx[b] x kv_heads x 2 x 128 x 2`.
pub fn kv_bytes(shape: &DecodeShape, ctx_lens: &[u32]) -> u64 {
    product(&[
        total_keys(ctx_lens),
        shape.kv_heads as u64,
        2,
        HEAD_DIM as u64,
        BF16,
    ])
}

/// `sum_b ctx[b]`: keys of one step over the batch (a `u64` sum of `u32`s cannot overflow for
/// any slice that fits in memory).
fn total_keys(ctx_lens: &[u32]) -> u64 {
    ctx_lens.iter().map(|&c| u64::from(c)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemv_reads_the_weights_once() {
        // Llama-3-8B's up projection at batch 1: 14336 x 4096 bf16 weights, 112 MiB.
        let c = gemv_cost(GemmShape::new(1, 14336, 4096));
        assert_eq!(c.compulsory.bytes_read, 14336 * 4096 * 2 + 4096 * 2);
        assert_eq!(c.compulsory.bytes_written, 14336 * 2);
        assert_eq!(c.reread_bytes, (14336 / 4 - 1) * 4096 * 2);
        assert!((c.compulsory.intensity() - 1.0).abs() < 1e-3);
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

    #[test]
    fn every_kv_byte_is_read_once() {
        let shape = DecodeShape::new(2, 32, 8, 8192);
        let t = attention_traffic(&shape, &[8192, 100], 16);
        let kv = kv_bytes(&shape, &[8192, 100]);
        assert_eq!(kv, (8192 + 100) * 8 * 2 * 128 * 2);
        // The rest is small: Q, lengths and partials.
        let rest = t.total().bytes() - kv;
        assert!(rest < kv / 20, "{rest} vs {kv}");
    }
}
