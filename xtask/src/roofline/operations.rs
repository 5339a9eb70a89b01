//! Single operations of a transformer layer: matmuls, the score matrix, row-wise kernels, naive
//! against fused attention, and the score matrix against FlashAttention's working set.

use perf::cost::{Bound, ComputeUnit, Cost, CostRoofline, Roofline};

use super::costs::{self, FlashTile};
use super::report::{self, Report, Section, Value, field};
use super::{Ctx, Peak, positive, roofline_section, single_cost_report};

pub(super) fn matmul(ctx: Ctx, m: u64, k: u64, n: u64) -> Result<Report, String> {
    let (m, k, n) = (positive("M", m)?, positive("K", k)?, positive("N", n)?);
    let cost = costs::matmul(m, k, n, ctx.dtype)?;
    let headline = format!("matmul [{m}, {k}] × [{k}, {n}], {}", ctx.dtype.name());
    let facts = vec![field(
        "dot_products",
        "output elements (dot products)",
        Value::Count(costs::product(&[m, n])?),
    )];
    let notes =
        vec!["A and B read once and C written once: the least any kernel can move".to_string()];
    Ok(single_cost_report(
        ctx, "matmul", headline, facts, cost, notes,
    ))
}

pub(super) fn attention_scores(ctx: Ctx, t: u64, d: u64) -> Result<Report, String> {
    let (t, d) = (positive("--seq", t)?, positive("--head-dim", d)?);
    let cost = costs::matmul(t, d, t, ctx.dtype)?;
    let headline = format!(
        "attention scores S = QKᵀ for one head: [{t}, {d}] × [{d}, {t}], {}, S written to HBM",
        ctx.dtype.name()
    );
    let facts = vec![field(
        "score_bytes",
        "score matrix S [T, T]",
        report::bytes(cost.bytes_written),
    )];
    let notes = vec![format!(
        "the softmax that follows reads S back: `roofline softmax {t} {t}`"
    )];
    Ok(single_cost_report(
        ctx,
        "attention-scores",
        headline,
        facts,
        cost,
        notes,
    ))
}

/// The two one-pass row operations.
#[derive(Clone, Copy)]
pub(super) enum Rowwise {
    Softmax,
    RmsNorm,
}

pub(super) fn rowwise(
    ctx: Ctx,
    op: Rowwise,
    rows: u64,
    cols: u64,
    peak: Peak,
) -> Result<Report, String> {
    let (rows, cols) = (positive("ROWS", rows)?, positive("COLS", cols)?);
    let unit = match peak {
        Peak::CudaCore => ComputeUnit::CudaCoreF32,
        Peak::Tensor => ctx.dtype.matmul_unit(),
    };
    let (cost, name, command, per_element, what, traffic) = match op {
        Rowwise::Softmax => (
            costs::softmax(rows, cols, ctx.dtype, unit)?,
            "softmax",
            "softmax",
            costs::SOFTMAX_FLOPS_PER_ELEMENT,
            "max, subtract, exp, sum, divide",
            "the input read once and the output written once",
        ),
        Rowwise::RmsNorm => (
            costs::rmsnorm(rows, cols, ctx.dtype, unit)?,
            "RMSNorm",
            "rmsnorm",
            costs::RMSNORM_FLOPS_PER_ELEMENT,
            "square, sum, scale by 1/rms, scale by the weight",
            "the input and the COLS weights read once and the output written once",
        ),
    };
    let headline = format!(
        "{name} over [{rows}, {cols}], {}, one fused pass",
        ctx.dtype.name()
    );
    let notes = vec![
        format!("one pass: {traffic}; a kernel per step would move the matrix once per step"),
        format!(
            "FLOPs: {per_element} per element ({what}), timed against the {} peak. These \
             kernels run on CUDA cores (--peak cuda-core, the default); the teaching material \
             divides by the tensor-core peak (--peak tensor)",
            costs::unit_name(unit)
        ),
    ];
    Ok(single_cost_report(
        ctx,
        command,
        headline,
        Vec::new(),
        cost,
        notes,
    ))
}

pub(super) fn add(ctx: Ctx, n: u64) -> Result<Report, String> {
    let n = positive("N", n)?;
    let elem = ctx.dtype.bytes();
    costs::product(&[3, n, elem])?;
    let count = usize::try_from(n).map_err(|_| format!("N = {n} does not fit in memory"))?;
    let cost = host::ops::elementwise::vector_add_cost(count, elem as usize);
    let headline = format!(
        "elementwise add c = a + b of {n} elements, {}",
        ctx.dtype.name()
    );
    let notes = vec!["two reads and one write per element, one FLOP".to_string()];
    Ok(single_cost_report(
        ctx,
        "add",
        headline,
        Vec::new(),
        cost,
        notes,
    ))
}

pub(super) fn attention(
    ctx: Ctx,
    t: u64,
    d: u64,
    heads: u64,
    causal: bool,
) -> Result<Report, String> {
    let (t, d) = (positive("--seq", t)?, positive("--head-dim", d)?);
    let heads = positive("--heads", heads)?;
    let a = costs::attention(t, d, ctx.dtype, causal)?;
    let sizes = vec![
        field(
            "tensor_bytes",
            "each of Q, K, V, O [T, d]",
            report::bytes(a.tensor_bytes),
        ),
        field(
            "score_bytes",
            "each of S, P [T, T]",
            report::bytes(a.score_bytes),
        ),
        field(
            "naive_score_traffic",
            "naive: S and P each written and read",
            report::bytes(4 * a.score_bytes),
        ),
        field(
            "naive_bytes",
            "naive HBM bytes",
            report::bytes(a.naive.bytes()),
        ),
        field(
            "fused_bytes",
            "fused HBM bytes",
            report::bytes(a.fused.bytes()),
        ),
        field(
            "reduction",
            "naive ÷ fused bytes",
            Value::Ratio(a.naive.bytes() as f64 / a.fused.bytes() as f64),
        ),
    ];
    let all_heads = format!("all {heads} heads");
    let mut costs = Vec::new();
    let mut variants = vec![("naive", a.naive), ("fused", a.fused)];
    // Where the exponentials bind, FlashAttention-4's answer: half of them on the FMA units
    // (the project's `flash_attention_bf16_poly_d64`), the other half on the SFUs.
    let exp_bound = ctx
        .gpus
        .iter()
        .any(|g| a.fused.bound(g) == Bound::Exponential);
    if exp_bound {
        let half = Cost {
            exps: a.fused.exps / 2,
            ..a.fused
        };
        variants.push(("fused, half exp on FMA", half));
    }
    for (variant, cost) in variants {
        let mut scopes = vec![("one head".to_string(), cost)];
        if heads > 1 {
            scopes.push((all_heads.clone(), costs::times(cost, heads)?));
        }
        for (scope, cost) in scopes {
            let labels = vec![
                field("variant", "variant", Value::Text(variant.to_string())),
                field("scope", "scope", Value::Text(scope)),
            ];
            costs.push((labels, cost));
        }
    }
    let traffic = costs
        .iter()
        .map(|(labels, c)| {
            labels
                .iter()
                .cloned()
                .chain([
                    field("bytes", "HBM bytes", report::bytes(c.bytes())),
                    field("flops", "FLOPs", report::flops(c.flops)),
                    field("exps", "exponentials", Value::Exps(c.exps as f64)),
                    field("intensity", "intensity", Value::Intensity(c.intensity())),
                ])
                .collect()
        })
        .collect();
    let headline = format!(
        "attention, T = {t}, d = {d}, {}{}: naive against fused",
        ctx.dtype.name(),
        if causal { ", causal" } else { "" }
    );
    let mut notes = vec![
        "naive: three kernels, (1) read Q, K, write S; (2) read S, write P; (3) read P, V, \
         write O. Fused: read Q, K, V once, write O (real kernels re-read K and V once per \
         query block, so somewhat more)"
            .to_string(),
        "FLOPs: the two matmuls, 4·T²·d per head; softmax's few FLOPs per score are left out. \
         Exponentials: one per score (T² per head, causal fused T(T+1)/2), at 16 per clock per \
         SM on the special function units"
            .to_string(),
    ];
    for g in &ctx.gpus {
        if a.fused.bound(g) == Bound::Exponential {
            notes.push(format!(
                "{}: the exponentials bind the fused kernel, not the tensor cores: 4·d = {} \
                 FLOPs per score against {} tensor FLOPs per exponential (per clock per SM: \
                 {} ÷ {})",
                g.name,
                4 * d,
                g.tensor_flops_per_clock_per_sm / g.exp_per_clock_per_sm,
                g.tensor_flops_per_clock_per_sm,
                g.exp_per_clock_per_sm
            ));
        }
    }
    if exp_bound {
        notes.push(
            "fused, half exp on FMA: every other 8-key piece's exponentials computed by a \
             degree-4 polynomial on the FMA units (kernels::attention::exp2_fma, \
             flash_attention_bf16_poly_d64), FlashAttention-4's trick; its FMAs run on the CUDA \
             cores beside the tensor cores and are left out of the FLOPs"
                .to_string(),
        );
    }
    if causal {
        notes.push(
            "causal: the fused kernel skips masked tiles (T(T+1)/2 scores); the naive kernels \
             compute and store the full matrices"
                .to_string(),
        );
    }
    let sections = vec![
        Section::list("sizes", "tensors and traffic, one head", sizes),
        Section::table("traffic", "traffic", traffic),
        roofline_section(&ctx, &costs),
    ];
    Ok(ctx.report_with("attention", headline, sections, notes))
}

/// `score-matrix`'s sizes.
pub(super) struct ScoreArgs {
    pub(super) context: u64,
    pub(super) heads: u64,
    pub(super) head_dim: u64,
    pub(super) tile: u64,
    pub(super) kv_tile: u64,
    pub(super) layers: u64,
}

pub(super) fn score_matrix(ctx: Ctx, s: ScoreArgs) -> Result<Report, String> {
    let t = positive("--context", s.context)?;
    let d = positive("--head-dim", s.head_dim)?;
    let heads = positive("--heads", s.heads)?;
    let layers = positive("--layers", s.layers)?;
    let (tile, kv_tile) = (
        positive("--tile", s.tile)?,
        positive("--kv-tile", s.kv_tile)?,
    );
    let b = ctx.dtype.bytes();
    let one_head = costs::product(&[b, t, t])?;
    let one_layer = costs::product(&[one_head, heads])?;
    let row_block = costs::product(&[b, tile, t])?;
    let working = FlashTile::new(tile, kv_tile, d, ctx.dtype)?;
    let fused = costs::attention(t, d, ctx.dtype, false)?.fused;
    let all = costs::times(fused, costs::product(&[heads, layers])?)?;

    let mut scores = vec![
        field("one_head", "one head [T, T]", report::bytes(one_head)),
        field(
            "one_layer",
            "one layer (all heads)",
            report::bytes(one_layer),
        ),
    ];
    if layers > 1 {
        let all_layers = costs::product(&[one_layer, layers])?;
        scores.push(field("all_layers", "all layers", report::bytes(all_layers)));
    }
    scores.push(field(
        "row_block",
        "one query tile's row of scores [tile, T]",
        report::bytes(row_block),
    ));
    let working_set = vec![
        field("q_tile", "Q tile [tile, d]", report::bytes(working.q)),
        field("k_tile", "K tile [kv tile, d]", report::bytes(working.k)),
        field("v_tile", "V tile [kv tile, d]", report::bytes(working.v)),
        field(
            "score_tile",
            "score tile [tile, kv tile]",
            report::bytes(working.scores),
        ),
        field("qkv", "Q + K + V tiles", report::bytes(working.qkv())),
        field(
            "total",
            "working set, all four",
            report::bytes(working.total()),
        ),
        field(
            "reduction",
            "one head's scores ÷ working set",
            Value::Ratio(one_head as f64 / working.total() as f64),
        ),
    ];
    let arithmetic = vec![
        field(
            "per_head",
            "per head per layer, 4·T²·d",
            report::flops(fused.flops),
        ),
        field("total", "all heads, all layers", report::flops(all.flops)),
    ];
    let rows = ctx.per_gpu(|g| {
        let fill = (g.hbm_bytes / (heads * b) as f64).sqrt().floor();
        vec![
            field("hbm_bytes", "HBM", Value::Bytes(g.hbm_bytes)),
            field(
                "layer_vs_hbm",
                "layer's scores ÷ HBM",
                Value::Ratio(one_layer as f64 / g.hbm_bytes),
            ),
            field(
                "context_filling_hbm",
                "T filling HBM",
                Value::Count(fill as u64),
            ),
            field(
                "shared_per_sm",
                "shared / SM",
                Value::Bytes(g.shared_per_sm),
            ),
            field(
                "working_set_vs_shared",
                "working set ÷ shared",
                Value::Percent(working.total() as f64 / g.shared_per_sm),
            ),
            field(
                "row_block_vs_shared",
                "tile row ÷ shared",
                Value::Ratio(row_block as f64 / g.shared_per_sm),
            ),
            field(
                "attention_s",
                "arithmetic at bound",
                Value::Seconds(Roofline::modelled(&all, g).bound_seconds),
            ),
        ]
    });
    let headline = format!(
        "score matrix at T = {t}, d = {d}, {}: {} × {}, tile {tile} × {kv_tile}",
        ctx.dtype.name(),
        plural(heads, "head"),
        plural(layers, "layer"),
    );
    let notes = vec![
        "T filling HBM: the context at which one layer's score matrices alone fill HBM".to_string(),
        "arithmetic at bound: all heads and layers, fused (Q, K, V read, O written once)"
            .to_string(),
    ];
    let sections = vec![
        Section::list("scores", "score matrices in HBM (naive)", scores),
        Section::list(
            "working_set",
            "FlashAttention working set, one tile (on chip)",
            working_set,
        ),
        Section::list("arithmetic", "arithmetic, unchanged by fusion", arithmetic),
        Section::table("per_gpu", "per GPU", rows),
    ];
    Ok(ctx.report_with("score-matrix", headline, sections, notes))
}

/// `1 head`, `128 heads`.
fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}
