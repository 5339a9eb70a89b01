//! Whole models: decode from the weight bytes, the KV cache, a forward pass through every weight
//! matmul, the batch at which a matmul turns compute-bound, and whole training runs.

use perf::cost::{Cost, CostRoofline, Roofline};

use super::costs::{self, ModelShape, WeightMatmul};
use super::report::{self, Report, Section, Value, field};
use super::{Ctx, MlpKind, cost_fields, gpu_name, positive, roofline_section, timing_fields};

pub(super) fn decode(ctx: Ctx, params: f64, batch: u64) -> Result<Report, String> {
    let batch = positive("--batch", batch)?;
    if params >= u64::MAX as f64 {
        return Err(format!("--params {params} is too large"));
    }
    let params = positive("--params", params.round() as u64)?;
    let cost = costs::decode(params, batch, ctx.dtype)?;
    let mut facts = vec![
        field("params", "parameters", Value::Count(params)),
        field("batch", "sequences per step", Value::Count(batch)),
    ];
    facts.extend(cost_fields(&cost));
    let rows = ctx
        .gpus
        .iter()
        .map(|g| {
            // Weights too large for one GPU are split evenly over the fewest GPUs that hold
            // them (tensor parallel): each reads its share every step, all at once.
            let gpus = (cost.bytes_read as f64 / g.hbm_bytes).ceil().max(1.0) as u64;
            let share = Cost {
                bytes_read: cost.bytes_read.div_ceil(gpus),
                flops: cost.flops.div_ceil(gpus),
                ..cost
            };
            let step = Roofline::modelled(&share, g).bound_seconds;
            let mut row = vec![field(
                "gpus_to_hold_weights",
                "GPUs to hold weights",
                Value::Count(gpus),
            )];
            row.extend(timing_fields(&share, g, false));
            row.push(field(
                "tokens_per_s",
                "tokens/s",
                Value::Number(batch as f64 / step, 1),
            ));
            row
        })
        .collect();
    let headline = format!(
        "decode, {} parameters in {}, batch {batch}: each step reads every weight once",
        report::thousands(params),
        ctx.dtype.name()
    );
    let notes = vec![
        "the time at the bound is per step; the KV cache's reads are left out (see kv-cache)"
            .to_string(),
        "weights larger than one GPU's HBM are split evenly over the GPUs that hold them: each \
         GPU's step reads its share, and the table's time and tokens/s are those of the whole \
         group (the all-reduce between the GPUs is left out)"
            .to_string(),
    ];
    let sections = vec![
        Section::list("cost", "one decode step", facts),
        Section::table("roofline", "per GPU", rows),
    ];
    Ok(ctx.report_with("decode", headline, sections, notes))
}

pub(super) fn kv_cache(ctx: Ctx, sizes: [u64; 5]) -> Result<Report, String> {
    let names = [
        "--layers",
        "--kv-heads",
        "--head-dim",
        "--context",
        "--batch",
    ];
    for (name, value) in names.iter().zip(sizes) {
        positive(name, value)?;
    }
    let [layers, kv_heads, head_dim, context, batch] = sizes;
    let per_token = costs::kv_bytes_per_token(layers, kv_heads, head_dim, ctx.dtype)?;
    let per_sequence = costs::product(&[per_token, context])?;
    let total = costs::product(&[per_sequence, batch])?;
    let facts = vec![
        field("per_token", "per token", report::bytes(per_token)),
        field(
            "per_token_exact",
            "per token, bytes",
            Value::Count(per_token),
        ),
        field("per_sequence", "per sequence", report::bytes(per_sequence)),
        field("batch_bytes", "whole batch", report::bytes(total)),
    ];
    let read = Cost {
        bytes_read: total,
        bytes_written: 0,
        flops: 0,
        exps: 0,
        unit: ctx.dtype.matmul_unit(),
        ..Cost::NONE
    };
    let rows = ctx.per_gpu(|g| {
        vec![
            field("hbm_bytes", "HBM", Value::Bytes(g.hbm_bytes)),
            field(
                "fraction_of_hbm",
                "batch's cache ÷ HBM",
                Value::Percent(total as f64 / g.hbm_bytes),
            ),
            field(
                "read_s",
                "read once (one decode step)",
                Value::Seconds(read.memory_seconds(g)),
            ),
        ]
    });
    let headline = format!(
        "KV cache: {layers} layers × {kv_heads} KV heads × head dim {head_dim}, {}, context \
         {context}, batch {batch}",
        ctx.dtype.name()
    );
    let notes = vec![
        "per token = 2 (K and V) × layers × KV heads × head dim × bytes per element; the \
         weights' share of HBM is not subtracted"
            .to_string(),
    ];
    let sections = vec![
        Section::list("cache", "KV cache", facts),
        Section::table("per_gpu", "per GPU", rows),
    ];
    Ok(ctx.report_with("kv-cache", headline, sections, notes))
}

pub(super) fn model_shape(
    hidden: u64,
    mlp: u64,
    layers: u64,
    vocab: u64,
    heads: Option<u64>,
    kv_heads: Option<u64>,
    kind: MlpKind,
) -> Result<ModelShape, String> {
    let hidden = positive("--hidden", hidden)?;
    let heads = match heads {
        Some(h) => positive("--heads", h)?,
        None if hidden.is_multiple_of(128) => hidden / 128,
        None => {
            return Err(format!(
                "--hidden {hidden} is not a multiple of 128: give --heads"
            ));
        }
    };
    if !hidden.is_multiple_of(heads) {
        return Err(format!(
            "--hidden {hidden} is not divisible by --heads {heads}"
        ));
    }
    let kv_heads = positive("--kv-heads", kv_heads.unwrap_or(heads))?;
    if !heads.is_multiple_of(kv_heads) {
        return Err(format!(
            "--heads {heads} is not a multiple of --kv-heads {kv_heads}"
        ));
    }
    Ok(ModelShape {
        hidden,
        mlp: positive("--mlp", mlp)?,
        layers: positive("--layers", layers)?,
        vocab: positive("--vocab", vocab)?,
        heads,
        kv_heads,
        head_dim: hidden / heads,
        gated: kind == MlpKind::Gated,
    })
}

/// Per GPU, the first batch M at which M tokens through `mats` are compute-bound.
fn crossover_section(ctx: &Ctx, mats: &[WeightMatmul]) -> Result<Section, String> {
    let dtype = ctx.dtype;
    let mut rows = Vec::new();
    for g in &ctx.gpus {
        let m = costs::first_compute_bound_m(mats, dtype, g)?;
        let at_m = match m {
            Some(m) => Value::Intensity(costs::matmuls_cost(mats, m, dtype)?.intensity()),
            None => Value::None,
        };
        rows.push(vec![
            gpu_name(g),
            field(
                "ridge",
                "ridge",
                Value::Intensity(g.ridge(dtype.matmul_unit())),
            ),
            field(
                "first_compute_bound_m",
                "compute-bound from M =",
                m.map_or(Value::Text("never".to_string()), Value::Count),
            ),
            field("intensity_at_m", "intensity there", at_m),
            field(
                "intensity_limit",
                "limit as M grows",
                Value::Intensity(costs::intensity_limit(mats, dtype)),
            ),
        ]);
    }
    Ok(Section::table(
        "crossover",
        "batch at which it turns compute-bound",
        rows,
    ))
}

pub(super) fn crossover(ctx: Ctx, k: u64, n: u64) -> Result<Report, String> {
    let (k, n) = (positive("--k", k)?, positive("--n", n)?);
    let mats = [WeightMatmul {
        name: "W",
        k,
        n,
        count: 1,
    }];
    let sections = vec![crossover_section(&ctx, &mats)?];
    let headline = format!(
        "crossover of [M, {k}] × [{k}, {n}], {}: the smallest M with intensity ≥ ridge",
        ctx.dtype.name()
    );
    Ok(ctx.report("crossover", headline, sections))
}

pub(super) fn forward(ctx: Ctx, shape: &ModelShape, tokens: &[u64]) -> Result<Report, String> {
    if tokens.is_empty() {
        return Err("--tokens needs at least one batch size".to_string());
    }
    for &m in tokens {
        positive("--tokens", m)?;
    }
    let mats = shape.matmuls();
    let params = costs::weight_params(&mats)?;
    let mlp = if shape.gated {
        "gated (SwiGLU): gate, up, down, 3 matrices"
    } else {
        "plain: up, down, 2 matrices"
    };
    let facts = vec![
        field("hidden", "hidden C", Value::Count(shape.hidden)),
        field("mlp", "MLP hidden H", Value::Count(shape.mlp)),
        field("layers", "layers L", Value::Count(shape.layers)),
        field("vocab", "vocabulary V", Value::Count(shape.vocab)),
        field("heads", "heads", Value::Count(shape.heads)),
        field("kv_heads", "KV heads", Value::Count(shape.kv_heads)),
        field("head_dim", "head dim", Value::Count(shape.head_dim)),
        field("mlp_kind", "MLP", Value::Text(mlp.to_string())),
        field("weight_params", "weights in matmuls", Value::Count(params)),
        field(
            "weight_bytes",
            "their bytes",
            Value::Bytes(costs::product(&[params, ctx.dtype.bytes()])? as f64),
        ),
    ];
    let shapes = mats
        .iter()
        .map(|w| {
            Ok(vec![
                field("name", "matmul", Value::Text(w.name.to_string())),
                field("k", "K", Value::Count(w.k)),
                field("n", "N", Value::Count(w.n)),
                field("count", "per forward", Value::Count(w.count)),
                field(
                    "params",
                    "weights",
                    Value::Count(costs::product(&[w.k, w.n, w.count])?),
                ),
            ])
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut costs = Vec::new();
    for &m in tokens {
        let label = vec![field("tokens", "M", Value::Count(m))];
        costs.push((label, costs::matmuls_cost(&mats, m, ctx.dtype)?));
    }
    let passes = costs
        .iter()
        .map(|(label, c)| {
            label
                .iter()
                .cloned()
                .chain([
                    field("flops", "FLOPs", report::flops(c.flops)),
                    field("bytes", "HBM bytes", report::bytes(c.bytes())),
                    field("intensity", "intensity", Value::Intensity(c.intensity())),
                ])
                .collect()
        })
        .collect();
    let sections = vec![
        Section::list("model", "model", facts),
        Section::table("matmuls", "weight matmuls, [M, K] × [K, N]", shapes),
        Section::table("passes", "one forward pass of M tokens", passes),
        roofline_section(&ctx, &costs),
        crossover_section(&ctx, &mats)?,
    ];
    let headline = format!(
        "forward pass through every weight matmul, {}, M = {}",
        ctx.dtype.name(),
        tokens
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    let notes = vec![
        "matmuls against weights only: the embedding lookup, attention's QKᵀ and PV, norms and \
         activations are left out"
            .to_string(),
        "each matmul reads its weights and its input activations and writes its output once"
            .to_string(),
    ];
    Ok(ctx.report_with("forward", headline, sections, notes))
}

pub(super) fn utilisation(ctx: Ctx, achieved: f64) -> Result<Report, String> {
    let unit = ctx.dtype.matmul_unit();
    // No kernel runs faster than the peak: a figure above every selected GPU's is a typo.
    let highest = ctx
        .gpus
        .iter()
        .map(|g| g.peak_flops(unit))
        .fold(0.0, f64::max);
    if !(achieved > 0.0 && achieved <= highest) {
        return Err(format!(
            "--achieved {} is not in (0, {}], the highest dense {} peak of the GPUs selected",
            report::si(achieved, "FLOP/s"),
            report::si(highest, "FLOP/s"),
            costs::unit_name(unit)
        ));
    }
    let rows = ctx.per_gpu(|g| {
        vec![
            field("achieved", "achieved", Value::FlopRate(achieved)),
            field("peak", "peak", Value::FlopRate(g.peak_flops(unit))),
            field(
                "fraction",
                "fraction of peak",
                Value::Percent(achieved / g.peak_flops(unit)),
            ),
        ]
    });
    let headline = format!(
        "{} against the dense {} peak",
        report::si(achieved, "FLOP/s"),
        costs::unit_name(unit)
    );
    let sections = vec![Section::table("utilisation", "utilisation", rows)];
    Ok(ctx.report("utilisation", headline, sections))
}

pub(super) fn train_time(ctx: Ctx, flops: f64, gpus: f64, mfu: f64) -> Result<Report, String> {
    if !(mfu > 0.0 && mfu <= 1.0) {
        return Err(format!("--mfu must be in (0, 1], got {mfu}"));
    }
    // A whole number of GPUs, and no more than any cluster could have (10^8, a hundred times
    // the largest announced), so that the count prints exactly.
    if !((1.0..=1e8).contains(&gpus) && gpus.fract() == 0.0) {
        return Err(format!(
            "--gpus must be a whole number from 1 to 100000000, got {gpus}"
        ));
    }
    if !(flops > 0.0 && flops.is_finite()) {
        return Err(format!("--flops must be a positive number, got {flops}"));
    }
    let unit = ctx.dtype.matmul_unit();
    let rows = ctx.per_gpu(|g| {
        let peak = gpus * g.peak_flops(unit);
        vec![
            field("cluster_peak", "cluster peak", Value::FlopRate(peak)),
            field("useful", "useful at MFU", Value::FlopRate(peak * mfu)),
            field("time_s", "time", Value::Seconds(flops / (peak * mfu))),
            field("peak_vs_useful", "peak ÷ useful", Value::Ratio(1.0 / mfu)),
        ]
    });
    let headline = format!(
        "training run of {} on {} GPUs at {:.0}% MFU ({})",
        report::si(flops, "FLOP"),
        report::thousands(gpus.round() as u64),
        mfu * 100.0,
        costs::unit_name(unit)
    );
    let sections = vec![Section::table("train_time", "time", rows)];
    let notes = vec!["MFU = useful FLOP/s ÷ (GPUs × peak FLOP/s)".to_string()];
    Ok(ctx.report_with("train-time", headline, sections, notes))
}
