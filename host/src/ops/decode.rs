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
    self as kernel, DECODE_ATTENTION_BF16, DECODE_ATTENTION_PAGED_BF16, HEAD_DIM, Layout,
    MAX_GROUP, MAX_SPLITS, MERGE_THREADS, Step,
};
pub use kernels::decode::attention::{
    DecodeShape, MIN_CHUNK, SPLIT_TARGET_BLOCKS, auto_splits, chunk_len, kv_bytes,
};
use kernels::decode::gemv::{GEMV_BF16, MAX_M};

use super::gemm::GemmShape;
use crate::buffer::DeviceBuffer;
use crate::launch;
use crate::runtime::{Launched, Runtime};
use crate::{Error, Result};
use emu::LaunchConfig;
use perf::cost::{Cost, product_usize};

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
pub fn gemv_cost(shape: GemmShape) -> Cost {
    let GemmShape { m, n, k } = shape;
    if m == 0 || n == 0 {
        Cost::NONE
    } else {
        (GEMV_BF16.cost)([m, k, n, 1, 1])
    }
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
/// for one query token per head, two launches (see `kernels::decode::attention`), through the
/// registered spec's launch (`DECODE_ATTENTION_BF16`) with the workspace's lengths and splits.
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
    let (what, io) = ("decode::attention", (&*o, &*lse));
    launch_step(rt, what, q, [k, v], None, io, shape, ws, scale)
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
    let io = (&*o, &*lse);
    launch_step(rt, what, q, [k, v], Some(paged), io, shape, ws, scale)
}

/// Both layouts' two launches, after [`prepare`]'s checks: through the registered spec's launch
/// (`kernels::decode::attention`'s `DECODE_ATTENTION_BF16`, or `_PAGED_BF16` on `paged`'s
/// table), with the workspace's lengths and splits. Its dimensions (`batch, kv_heads, group,
/// ctx, page`, `ctx` the longest sequence) are what the spec's buffers are checked against.
#[allow(clippy::too_many_arguments)]
fn launch_step(
    rt: &Runtime,
    what: &str,
    q: &DeviceBuffer<bf16>,
    [k, v]: [&DeviceBuffer<bf16>; 2],
    paged: Option<&PagedKv>,
    (o, lse): (&DeviceBuffer<bf16>, &DeviceBuffer<f32>),
    shape: &DecodeShape,
    ws: &DecodeWorkspace,
    scale: f32,
) -> Result<Launched> {
    let want = paged.map_or(shape.kv_elems(), |p| p.kv_elems(shape.kv_heads));
    let kv = [k.len(), v.len()].map(|len| (len, want));
    if !prepare(what, q, kv, (o, lse), shape, ws)? {
        return Ok(None);
    }
    let (spec, layout, page, indices) = match paged {
        None => {
            let max_ctx = shape.max_ctx as u32;
            let layout = Layout::Contiguous { max_ctx };
            (&DECODE_ATTENTION_BF16, layout, 1, vec![&ws.ctx])
        }
        Some(p) => {
            let layout = Layout::Paged {
                pages_per_seq: p.pages_per_seq as u32,
                page_size: p.page_size as u32,
            };
            let indices = vec![&ws.ctx, &p.table];
            (&DECODE_ATTENTION_PAGED_BF16, layout, p.page_size, indices)
        }
    };
    let step = Step {
        batch: shape.batch as u32,
        kv_heads: shape.kv_heads as u32,
        group: shape.group() as u32,
        layout,
        splits: ws.splits,
        chunk: ws.chunk,
        scale,
    };
    let longest = ws.ctx_lens.iter().copied().max().unwrap_or(0) as usize;
    crate::registry::launch_with(
        rt,
        spec,
        &[q, k, v],
        o,
        (&[&ws.part_m, &ws.part_l, &ws.part_o, lse], &indices, &[]),
        [shape.batch, shape.kv_heads, shape.group(), longest, page],
        &|l, b, _| kernel::launch(l, b, &step),
    )
}

/// What both layouts check before pass 1: heads, `q` and the outputs, K and V (`(len, wanted)`),
/// the workspace against the shape. False for an empty batch, which launches nothing.
fn prepare(
    what: &str,
    q: &DeviceBuffer<bf16>,
    kv: [(usize, usize); 2],
    (o, lse): (&DeviceBuffer<bf16>, &DeviceBuffer<f32>),
    shape: &DecodeShape,
    ws: &DecodeWorkspace,
) -> Result<bool> {
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
    Ok(shape.batch > 0)
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
/// `ws` into `o` and `lse`. The tests call it on partials of their own; [`attention`] launches
/// it after pass 1, through the spec's launch.
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

/// Pass 2's traffic for `rows` heads of `splits` partials, the kernel crate's `merge_cost`:
/// each partial (`m`, `l` and 128 f32 of `o`) read once, `o` (bf16) and `lse` written; 2 FLOPs
/// per (partial, dimension).
pub fn merge_cost(rows: usize, splits: u32) -> Cost {
    kernel::merge_cost(rows, splits).compulsory()
}

/// Both passes' traffic, split as the attention chapter splits it: the kernel crate's `cost`
/// (`kernels::decode::attention`), which the registered rows state.
///
/// Compulsory: K and V of the `ctx[b]` keys of every (sequence, KV head) read **once** (the
/// group's query heads share each byte), Q read once, each sequence length once, the partials
/// written once and read once, `o` and `lse` written; `4 d` FLOPs per (query head, key) plus the
/// merge's. Re-reads: Q once more per additional split (every block of a (sequence, KV head)
/// loads the group's query rows), and each sequence length by every thread of every block.
pub fn attention_traffic(shape: &DecodeShape, ctx_lens: &[u32], splits: u32) -> Cost {
    kernel::cost(shape, ctx_lens, splits, None)
}

/// [`attention_traffic`] on a paged cache of `page_size` positions a page: the same, plus the
/// block table, read once per (key, KV head) by one lane of the key group that loads the key:
/// each entry in use once (compulsory), the rest re-reads.
pub fn paged_traffic(shape: &DecodeShape, ctx_lens: &[u32], splits: u32, page_size: usize) -> Cost {
    kernel::cost(shape, ctx_lens, splits, Some(page_size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemv_reads_the_weights_once() {
        use perf::cost::CostRoofline;
        // Llama-3-8B's up projection at batch 1: 14336 x 4096 bf16 weights, 112 MiB.
        let c = gemv_cost(GemmShape::new(1, 14336, 4096));
        assert_eq!(c.compulsory().bytes_read, 14336 * 4096 * 2 + 4096 * 2);
        assert_eq!(c.bytes_written, 14336 * 2);
        assert_eq!(c.reread_bytes(), (14336 / 4 - 1) * 4096 * 2);
        assert!((c.compulsory().intensity() - 1.0).abs() < 1e-3);
    }

    #[test]
    fn every_kv_byte_is_read_once() {
        let shape = DecodeShape::new(2, 32, 8, 8192);
        let t = attention_traffic(&shape, &[8192, 100], 16);
        let kv = kv_bytes(&shape, &[8192, 100]);
        assert_eq!(kv, (8192 + 100) * 8 * 2 * 128 * 2);
        // The rest is small: Q, lengths and partials.
        let rest = t.bytes() - kv;
        assert!(rest < kv / 20, "{rest} vs {kv}");
    }
}
