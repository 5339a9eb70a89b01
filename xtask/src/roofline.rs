//! `cargo xtask roofline`: place any operation of a transformer on the roofline of a GPU.
//!
//! For an operation it counts the FLOPs and the bytes that must cross the HBM boundary, then
//! reads them against a GPU of `perf::specs` with `perf::cost::Roofline`: intensity (FLOP/B),
//! which roof bounds it, and the time at that bound. Every figure is modelled from vendor
//! numbers; nothing is measured. docs/roofline-examples.md reproduces the teaching material's worked
//! examples with these commands.

mod costs;
mod hardware;
mod operations;
mod report;
mod workloads;

use clap::{Args, Subcommand, ValueEnum};
use perf::cost::{Bound, Cost, CostRoofline, Roofline};
use perf::specs::{GPUS, GpuSpec};

use costs::Dtype;
use report::{Field, Report, Section, Value, field};

/// Roofline calculator: FLOPs, HBM bytes, intensity, bound and time at the bound, modelled
/// from vendor figures.
#[derive(Args, Clone, Debug)]
pub struct RooflineArgs {
    #[command(subcommand)]
    pub command: RooflineCommand,

    /// GPU: a100, h100, h200, b200, or `all` for one row per GPU. Defaults to h100 (all for
    /// `gpus` and `crossover`).
    #[arg(long, global = true)]
    pub gpu: Option<String>,

    /// Element type, which sets the bytes per number and which peak the matmuls run at.
    #[arg(long, global = true, value_enum, default_value_t = Dtype::Bf16)]
    pub dtype: Dtype,

    /// Print JSON (the same fields, numbers in bytes, FLOPs and seconds) instead of tables.
    #[arg(long, global = true)]
    pub json: bool,

    /// What-if: multiply every GPU's HBM bandwidth by this factor (0.5 halves it).
    #[arg(long, global = true, default_value_t = 1.0)]
    pub hbm_scale: f64,
}

/// Which operation to place on the roofline.
#[derive(Subcommand, Clone, Debug)]
pub enum RooflineCommand {
    /// The GPU table with each ridge point (peak FLOP/s ÷ HBM bandwidth).
    Gpus,
    /// The memory pyramid of a GPU: size and bandwidth of each level, against HBM.
    Levels,
    /// Two GPUs side by side with the ratio of each figure (`--gpu` against `--vs`).
    Compare {
        /// The GPU compared against `--gpu`.
        #[arg(long, default_value = "b200")]
        vs: String,
    },
    /// A matmul [M, K] x [K, N]: read A and B, write C, 2·M·K·N FLOPs.
    Matmul { m: u64, k: u64, n: u64 },
    /// One attention head's score matrix S = QKᵀ computed and written to HBM.
    AttentionScores {
        /// Sequence length T.
        #[arg(long)]
        seq: u64,
        /// Head dimension d.
        #[arg(long, default_value_t = 128)]
        head_dim: u64,
    },
    /// Row softmax over [ROWS, COLS] in one pass (5 FLOPs per element).
    Softmax {
        rows: u64,
        cols: u64,
        /// Which peak the FLOPs are timed against.
        #[arg(long, value_enum, default_value_t = Peak::CudaCore)]
        peak: Peak,
    },
    /// RMSNorm over [ROWS, COLS] in one pass (4 FLOPs per element).
    Rmsnorm {
        rows: u64,
        cols: u64,
        /// Which peak the FLOPs are timed against.
        #[arg(long, value_enum, default_value_t = Peak::CudaCore)]
        peak: Peak,
    },
    /// Elementwise add of two vectors of N elements (host's vector_add cost).
    Add { n: u64 },
    /// Attention naive (S and P written to HBM and read back) against fused (FlashAttention).
    Attention {
        /// Sequence length T.
        #[arg(long)]
        seq: u64,
        /// Head dimension d.
        #[arg(long, default_value_t = 128)]
        head_dim: u64,
        /// Heads, for the all-heads rows.
        #[arg(long, default_value_t = 1)]
        heads: u64,
        /// Causal mask: the fused kernel skips the masked half of the FLOPs.
        #[arg(long)]
        causal: bool,
    },
    /// Decode time per step from the weight bytes (every weight read once per step).
    Decode {
        /// Parameters: 8e9, 8B, 70B, 405B.
        #[arg(long, value_parser = parse_count)]
        params: f64,
        /// Sequences decoded together (one token each per step).
        #[arg(long, default_value_t = 1)]
        batch: u64,
    },
    /// KV-cache bytes per token, per sequence and per batch.
    KvCache {
        /// Layers L.
        #[arg(long)]
        layers: u64,
        /// Key/value heads per layer (fewer than query heads under grouped-query attention).
        #[arg(long)]
        kv_heads: u64,
        /// Head dimension d.
        #[arg(long, default_value_t = 128)]
        head_dim: u64,
        /// Tokens of context per sequence.
        #[arg(long)]
        context: u64,
        /// Sequences held at once.
        #[arg(long, default_value_t = 1)]
        batch: u64,
    },
    /// The T x T score matrix against FlashAttention's on-chip working set of one tile.
    ScoreMatrix {
        /// Context length T.
        #[arg(long)]
        context: u64,
        /// Attention heads per layer.
        #[arg(long, default_value_t = 1)]
        heads: u64,
        /// Head dimension d.
        #[arg(long, default_value_t = 128)]
        head_dim: u64,
        /// Query tile (rows of the score tile).
        #[arg(long, default_value_t = 128)]
        tile: u64,
        /// Key/value tile (columns of the score tile); defaults to --tile.
        #[arg(long)]
        kv_tile: Option<u64>,
        /// Layers, for all layers' scores and the whole forward pass's attention arithmetic.
        #[arg(long, default_value_t = 1)]
        layers: u64,
    },
    /// Every weight matmul of one forward pass for a batch of M tokens, and the M at which the
    /// pass turns compute-bound.
    Forward {
        /// Hidden size C.
        #[arg(long)]
        hidden: u64,
        /// MLP hidden size H.
        #[arg(long)]
        mlp: u64,
        /// Layers L.
        #[arg(long)]
        layers: u64,
        /// Vocabulary V (the unembedding is [C, V]).
        #[arg(long)]
        vocab: u64,
        /// Batches of tokens M, comma-separated: 1,64,4096.
        #[arg(long, value_delimiter = ',', required = true)]
        tokens: Vec<u64>,
        /// Attention heads (default: hidden / 128).
        #[arg(long)]
        heads: Option<u64>,
        /// Key/value heads, for grouped-query attention (default: --heads).
        #[arg(long)]
        kv_heads: Option<u64>,
        /// MLP: gated (SwiGLU: gate, up, down) or plain (up, down).
        #[arg(long, value_enum, default_value_t = MlpKind::Gated)]
        mlp_kind: MlpKind,
    },
    /// The batch M at which [M, K] x [K, N] turns compute-bound on each GPU.
    Crossover {
        /// Inner dimension K (the weight's rows).
        #[arg(long)]
        k: u64,
        /// Output dimension N (the weight's columns).
        #[arg(long)]
        n: u64,
    },
    /// A matmul tile's intensity Mt·Nt/(Mt+Nt) and one tile's journey HBM → shared →
    /// registers → tensor cores in one SM.
    Tile {
        /// Output tile rows Mt.
        #[arg(long, default_value_t = 128)]
        mt: u64,
        /// Output tile columns Nt.
        #[arg(long, default_value_t = 128)]
        nt: u64,
        /// Depth of the A and B tiles along K.
        #[arg(long, default_value_t = 128)]
        kt: u64,
    },
    /// A kernel's achieved FLOP/s as a fraction of the peak (740T, 225e12).
    Utilisation {
        /// Achieved FLOP/s of one GPU: 740T, 225e12.
        #[arg(long, value_parser = parse_count)]
        achieved: f64,
    },
    /// Days to do a training run's FLOPs on a cluster at a model FLOPs utilisation.
    TrainTime {
        /// Total FLOPs (6 × parameters × tokens for a dense transformer): 3.8e25.
        #[arg(long, value_parser = parse_count)]
        flops: f64,
        /// GPUs in the cluster.
        #[arg(long, value_parser = parse_count)]
        gpus: f64,
        /// Model FLOPs utilisation, 0 to 1.
        #[arg(long)]
        mfu: f64,
    },
}

/// The peak an elementwise kernel's FLOPs are timed against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Peak {
    /// f32 on CUDA cores, where norms and softmax really run.
    CudaCore,
    /// The tensor-core peak of --dtype (what the teaching material divides by).
    Tensor,
}

/// The MLP block's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MlpKind {
    /// SwiGLU: gate and up [C, H], down [H, C]: three matrices.
    Gated,
    /// up [C, H], down [H, C]: two matrices.
    Plain,
}

/// Runs `cargo xtask roofline ...`: prints the report as a table or as JSON.
pub fn run(args: &RooflineArgs) -> Result<(), String> {
    print!("{}", render(args)?);
    Ok(())
}

/// The text `run` prints.
pub(crate) fn render(args: &RooflineArgs) -> Result<String, String> {
    let report = build(args)?;
    if args.json {
        serde_json::to_string_pretty(&report.to_json())
            .map(|s| s + "\n")
            .map_err(|e| format!("writing JSON: {e}"))
    } else {
        Ok(report.to_text())
    }
}

/// What every subcommand needs: the GPUs chosen (with any what-if applied) and the dtype.
struct Ctx {
    gpus: Vec<GpuSpec>,
    dtype: Dtype,
    hbm_scale: f64,
    notes: Vec<String>,
}

impl Ctx {
    fn new(args: &RooflineArgs, default_all: bool) -> Result<Self, String> {
        let scale = args.hbm_scale;
        if !(scale.is_finite() && scale > 0.0) {
            return Err(format!(
                "--hbm-scale must be a positive number, got {scale}"
            ));
        }
        let mut ctx = Self {
            gpus: Vec::new(),
            dtype: args.dtype,
            hbm_scale: scale,
            notes: Vec::new(),
        };
        let name = args
            .gpu
            .as_deref()
            .unwrap_or(if default_all { "all" } else { "h100" });
        ctx.gpus = if name.eq_ignore_ascii_case("all") {
            GPUS.iter().map(|g| ctx.scaled(*g)).collect()
        } else {
            vec![ctx.lookup(name)?]
        };
        if scale != 1.0 {
            ctx.notes.push(format!(
                "what-if: HBM bandwidth × {scale} on every GPU, so every ridge × {:.2}",
                1.0 / scale
            ));
        }
        Ok(ctx)
    }

    /// One table row per GPU: its name, then `fields` of it.
    fn per_gpu(&self, fields: impl Fn(&GpuSpec) -> Vec<Field>) -> Vec<Vec<Field>> {
        self.gpus
            .iter()
            .map(|g| std::iter::once(gpu_name(g)).chain(fields(g)).collect())
            .collect()
    }

    /// A GPU by name, with the what-if applied.
    fn lookup(&self, name: &str) -> Result<GpuSpec, String> {
        find_gpu(name).map(|g| self.scaled(*g))
    }

    fn scaled(&self, mut gpu: GpuSpec) -> GpuSpec {
        gpu.hbm_bandwidth *= self.hbm_scale;
        gpu
    }

    fn report(self, command: &'static str, headline: String, sections: Vec<Section>) -> Report {
        self.report_with(command, headline, sections, Vec::new())
    }

    fn report_with(
        self,
        command: &'static str,
        headline: String,
        sections: Vec<Section>,
        notes: Vec<String>,
    ) -> Report {
        Report {
            command,
            headline,
            sections,
            notes: notes.into_iter().chain(self.notes).collect(),
        }
    }
}

fn find_gpu(name: &str) -> Result<&'static GpuSpec, String> {
    GpuSpec::find(name).ok_or_else(|| {
        let known: Vec<&str> = GPUS.iter().map(|g| g.key).collect();
        format!("unknown GPU '{name}'; known: {}, or all", known.join(", "))
    })
}

/// A size that must be at least 1.
fn positive(name: &str, value: u64) -> Result<u64, String> {
    if value == 0 {
        Err(format!("{name} must be at least 1, got 0"))
    } else {
        Ok(value)
    }
}

/// `8e9`, `8B`, `70b`, `740T`, `16000`, `3.8e25`: a positive count with an optional SI
/// suffix (k, M, B or G, T, P).
fn parse_count(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (number, scale) = match t.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('k') => (&t[..t.len() - 1], 1e3),
        Some('m') => (&t[..t.len() - 1], 1e6),
        Some('b' | 'g') => (&t[..t.len() - 1], 1e9),
        Some('t') => (&t[..t.len() - 1], 1e12),
        Some('p') => (&t[..t.len() - 1], 1e15),
        _ => (t, 1.0),
    };
    match number.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x * scale),
        _ => Err(format!(
            "'{text}' is not a positive count (examples: 8e9, 8B, 740T, 16000)"
        )),
    }
}

fn build(args: &RooflineArgs) -> Result<Report, String> {
    use RooflineCommand as C;
    use operations::Rowwise;
    let default_all = matches!(args.command, C::Gpus | C::Crossover { .. });
    let ctx = Ctx::new(args, default_all)?;
    match &args.command {
        C::Gpus => Ok(hardware::gpus(ctx)),
        C::Levels => Ok(hardware::levels(ctx)),
        C::Compare { vs } => hardware::compare(ctx, vs),
        C::Tile { mt, nt, kt } => hardware::tile(ctx, *mt, *nt, *kt),
        C::Matmul { m, k, n } => operations::matmul(ctx, *m, *k, *n),
        C::AttentionScores { seq, head_dim } => operations::attention_scores(ctx, *seq, *head_dim),
        C::Softmax { rows, cols, peak } => {
            operations::rowwise(ctx, Rowwise::Softmax, *rows, *cols, *peak)
        }
        C::Rmsnorm { rows, cols, peak } => {
            operations::rowwise(ctx, Rowwise::RmsNorm, *rows, *cols, *peak)
        }
        C::Add { n } => operations::add(ctx, *n),
        C::Attention {
            seq,
            head_dim,
            heads,
            causal,
        } => operations::attention(ctx, *seq, *head_dim, *heads, *causal),
        C::ScoreMatrix {
            context,
            heads,
            head_dim,
            tile,
            kv_tile,
            layers,
        } => operations::score_matrix(
            ctx,
            operations::ScoreArgs {
                context: *context,
                heads: *heads,
                head_dim: *head_dim,
                tile: *tile,
                kv_tile: kv_tile.unwrap_or(*tile),
                layers: *layers,
            },
        ),
        C::Decode { params, batch } => workloads::decode(ctx, *params, *batch),
        C::KvCache {
            layers,
            kv_heads,
            head_dim,
            context,
            batch,
        } => workloads::kv_cache(ctx, [*layers, *kv_heads, *head_dim, *context, *batch]),
        C::Forward {
            hidden,
            mlp,
            layers,
            vocab,
            tokens,
            heads,
            kv_heads,
            mlp_kind,
        } => {
            let shape = workloads::model_shape(
                *hidden, *mlp, *layers, *vocab, *heads, *kv_heads, *mlp_kind,
            )?;
            workloads::forward(ctx, &shape, tokens)
        }
        C::Crossover { k, n } => workloads::crossover(ctx, *k, *n),
        C::Utilisation { achieved } => workloads::utilisation(ctx, *achieved),
        C::TrainTime { flops, gpus, mfu } => workloads::train_time(ctx, *flops, *gpus, *mfu),
    }
}

// ---------------------------------------------------------------------------------------------
// Shared pieces: a cost's numbers, and its roofline on each GPU.

fn bound_name(bound: Bound) -> Value {
    Value::Text(bound.name().to_string())
}

fn gpu_name(gpu: &GpuSpec) -> Field {
    field("gpu", "GPU", Value::Text(gpu.name.to_string()))
}

/// FLOPs, bytes and intensity of one cost.
fn cost_fields(cost: &Cost) -> Vec<Field> {
    let mut fields = vec![
        field("flops", "FLOPs", report::flops(cost.flops)),
        field(
            "bytes_read",
            "HBM bytes read",
            report::bytes(cost.bytes_read),
        ),
        field(
            "bytes_written",
            "HBM bytes written",
            report::bytes(cost.bytes_written),
        ),
        field("bytes", "HBM bytes", report::bytes(cost.bytes())),
        field("intensity", "intensity", Value::Intensity(cost.intensity())),
        field(
            "arithmetic",
            "arithmetic",
            Value::Text(costs::unit_name(cost.unit).to_string()),
        ),
    ];
    if cost.exps > 0 {
        fields.push(field("exps", "exponentials", Value::Exps(cost.exps as f64)));
    }
    fields
}

/// The roofline of `cost` on `gpu`: ridge, bound, the time on each roof and at the bound. With
/// `exps`, the third roof's time too: the exponentials at the special function units' rate.
fn timing_fields(cost: &Cost, gpu: &GpuSpec, exps: bool) -> Vec<Field> {
    let r = Roofline::modelled(cost, gpu);
    let compute = cost.compute_seconds(gpu);
    let mut fields = vec![
        gpu_name(gpu),
        field("ridge", "ridge", Value::Intensity(gpu.ridge(cost.unit))),
        field("bound", "bound", bound_name(r.bound)),
        field("compute_s", "compute", Value::Seconds(compute)),
        field(
            "memory_s",
            "memory",
            Value::Seconds(cost.memory_seconds(gpu)),
        ),
    ];
    if exps {
        fields.push(field(
            "exp_s",
            "exponentials",
            Value::Seconds(cost.exp_seconds(gpu)),
        ));
    }
    fields.extend([
        field(
            "time_at_bound_s",
            "at bound",
            Value::Seconds(r.bound_seconds),
        ),
        field(
            "compute_busy",
            "compute busy",
            Value::Percent(compute / r.bound_seconds),
        ),
    ]);
    fields
}

/// One row per GPU (and per labelled cost): the labels, then the roofline. The exponential roof
/// is shown when any of the costs takes exponentials.
fn roofline_rows(ctx: &Ctx, costs: &[(Vec<Field>, Cost)]) -> Vec<Vec<Field>> {
    let exps = costs.iter().any(|(_, c)| c.exps > 0);
    let mut rows = Vec::new();
    for gpu in &ctx.gpus {
        for (labels, cost) in costs {
            rows.push(
                labels
                    .iter()
                    .cloned()
                    .chain(timing_fields(cost, gpu, exps))
                    .collect(),
            );
        }
    }
    rows
}

fn roofline_section(ctx: &Ctx, costs: &[(Vec<Field>, Cost)]) -> Section {
    let title = if costs.iter().any(|(_, c)| c.exps > 0) {
        "roofline (time at the bound = max(bytes ÷ bandwidth, FLOPs ÷ peak, exponentials ÷ \
         exponential rate))"
    } else {
        "roofline (time at the bound = max(bytes ÷ bandwidth, FLOPs ÷ peak))"
    };
    Section::table("roofline", title, roofline_rows(ctx, costs))
}

/// A report for a single cost: its numbers, then its roofline.
fn single_cost_report(
    ctx: Ctx,
    command: &'static str,
    headline: String,
    mut facts: Vec<Field>,
    cost: Cost,
    notes: Vec<String>,
) -> Report {
    facts.extend(cost_fields(&cost));
    let sections = vec![
        Section::list("cost", "cost", facts),
        roofline_section(&ctx, &[(Vec::new(), cost)]),
    ];
    ctx.report_with(command, headline, sections, notes)
}

// ---------------------------------------------------------------------------------------------
// The teaching material's worked numbers (the three texts docs/roofline-examples.md names), each
// within the rounding the text states; docs/roofline-examples.md lists them with the commands.

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use serde_json::Value as Json;

    /// The shape `xtask`'s main gives the command.
    #[derive(Parser)]
    enum Cli {
        Roofline(RooflineArgs),
    }

    fn parse(cmd: &str) -> Result<RooflineArgs, String> {
        let words = ["xtask", "roofline"]
            .into_iter()
            .chain(cmd.split_whitespace());
        match Cli::try_parse_from(words) {
            Ok(Cli::Roofline(args)) => Ok(args),
            Err(e) => Err(e.to_string()),
        }
    }

    fn json(cmd: &str) -> Json {
        build(&parse(cmd).unwrap()).unwrap().to_json()
    }

    fn text(cmd: &str) -> String {
        render(&parse(cmd).unwrap()).unwrap()
    }

    fn error(cmd: &str) -> String {
        build(&parse(cmd).unwrap()).unwrap_err()
    }

    /// `value` within `tolerance` of `expected`.
    #[track_caller]
    fn near(value: &Json, expected: f64, tolerance: f64) {
        let v = value
            .as_f64()
            .unwrap_or_else(|| panic!("not a number: {value}"));
        assert!(
            (v - expected).abs() <= tolerance,
            "{v} is not {expected} ± {tolerance}"
        );
    }

    /// The row of a per-GPU table for `key`'s GPU.
    fn row<'a>(table: &'a Json, name: &str) -> &'a Json {
        table
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["gpu"] == name)
            .unwrap_or_else(|| panic!("no {name} row in {table}"))
    }

    const US: f64 = 1e-6;

    #[test]
    fn ridge_is_295_and_doubles_when_bandwidth_halves() {
        let j = json("gpus");
        near(&row(&j["gpus"], "H100 SXM")["ridge_bf16"], 295.4, 0.05);
        let halved = json("gpus --gpu h100 --hbm-scale 0.5");
        near(&halved["gpus"][0]["ridge_bf16"], 590.7, 0.05);
        assert_eq!(j["gpus"].as_array().unwrap().len(), 4);
    }

    #[test]
    fn prefill_matmul_is_compute_bound_at_4587_flop_per_byte() {
        let j = json("matmul 16384 8192 28672");
        near(&j["cost"]["dot_products"], 470e6, 0.5e6);
        near(&j["cost"]["flops"], 7.7e12, 0.05e12);
        near(&j["cost"]["bytes"], 1.7e9, 0.05e9);
        near(&j["cost"]["intensity"], 4587.5, 0.05);
        let r = &j["roofline"][0];
        assert_eq!(r["bound"], "compute");
        near(&r["compute_s"], 7778.3 * US, 0.05 * US);
        near(&r["memory_s"], 500.8 * US, 0.05 * US);
    }

    #[test]
    fn decode_matmul_is_memory_bound_at_2_flop_per_byte_and_140_us() {
        let j = json("matmul 2 8192 28672");
        near(&j["cost"]["flops"], 9.4e8, 0.05e8);
        near(&j["cost"]["bytes"], 4.7e8, 0.05e8);
        near(&j["cost"]["intensity"], 2.0, 0.05);
        let r = &j["roofline"][0];
        assert_eq!(r["bound"], "memory");
        near(&r["memory_s"], 140.3 * US, 0.05 * US);
        // The teaching material prints 0.9 µs: 0.94997 µs, rounded to one decimal.
        near(&r["compute_s"], 0.95 * US, 0.005 * US);
        assert!(r["compute_busy"].as_f64().unwrap() < 0.01, "cores idle 99%");
    }

    #[test]
    fn materialised_scores_are_memory_bound_at_124_flop_per_byte() {
        let j = json("attention-scores --seq 8192 --head-dim 128");
        near(&j["cost"]["flops"], 1.7e10, 0.05e10);
        near(&j["cost"]["bytes"], 1.4e8, 0.05e8);
        near(&j["cost"]["intensity"], 124.1, 0.05);
        let r = &j["roofline"][0];
        assert_eq!(r["bound"], "memory");
        near(&r["compute_s"], 17.4 * US, 0.05 * US);
        near(&r["memory_s"], 41.3 * US, 0.05 * US);
    }

    #[test]
    fn norms_and_softmax_sit_near_one_flop_per_byte() {
        let j = json("rmsnorm 16384 8192 --peak tensor");
        near(&j["cost"]["intensity"], 1.0, 0.05);
        near(&j["roofline"][0]["compute_s"], 0.5 * US, 0.05 * US);
        near(&j["roofline"][0]["memory_s"], 160.3 * US, 0.05 * US);
        let j = json("softmax 8192 8192 --peak tensor");
        near(&j["cost"]["intensity"], 1.25, 1e-9);
        near(&j["roofline"][0]["compute_s"], 0.3 * US, 0.05 * US);
        near(&j["roofline"][0]["memory_s"], 80.1 * US, 0.05 * US);
        // On the CUDA cores, where they run, the compute time grows but the bound does not move.
        let cuda = json("softmax 8192 8192");
        assert_eq!(cuda["roofline"][0]["bound"], "memory");
        near(
            &cuda["roofline"][0]["time_at_bound_s"],
            80.1 * US,
            0.05 * US,
        );
        assert!(text("softmax 8192 8192 --peak tensor").contains("1.2 FLOP/B"));
    }

    #[test]
    fn f16_add_does_one_flop_per_six_bytes() {
        let j = json("add 1048576 --dtype f16");
        near(&j["cost"]["intensity"], 1.0 / 6.0, 1e-12);
    }

    #[test]
    fn naive_attention_moves_138_mb_fused_4_mib() {
        let j = json("attention --seq 4096 --head-dim 128 --dtype f16");
        let s = &j["sizes"];
        assert_eq!(s["tensor_bytes"], 1_048_576);
        assert_eq!(s["score_bytes"], 33_554_432);
        near(&s["naive_score_traffic"], 134e6, 0.5e6);
        near(&s["naive_bytes"], 138e6, 0.5e6);
        assert_eq!(s["fused_bytes"], 4 * 1_048_576);
        // 33.0× against all naive bytes; the text's "about 32-fold" divides the N×N term alone.
        near(&s["reduction"], 33.0, 0.05);
        let score_only = s["naive_score_traffic"].as_f64().unwrap() / 4_194_304.0;
        assert!((score_only - 32.0).abs() < 0.05);
        let naive = &j["roofline"][0];
        assert_eq!(naive["variant"], "naive");
        near(&naive["memory_s"], 41.0 * US, 0.5 * US);
        near(&naive["compute_s"], 8.7 * US, 0.05 * US);
        let waiting = naive["memory_s"].as_f64().unwrap() / naive["compute_s"].as_f64().unwrap();
        assert!(
            (4.0..5.0).contains(&waiting),
            "roughly four times: {waiting}"
        );
        near(&j["traffic"][0]["flops"], 8.6e9, 0.05e9);
        near(&j["traffic"][0]["intensity"], 62.0, 0.5);
        let fused = &j["roofline"][1];
        assert_eq!(
            (&fused["variant"], &fused["bound"]),
            (&"fused".into(), &"compute".into())
        );
        near(&fused["memory_s"], 1.25 * US, 0.005 * US);
        near(&j["traffic"][1]["intensity"], 2048.0, 1e-9);
    }

    /// FlashAttention-4's starting point: on a B200 a d = 64 head waits on its exponentials
    /// (T² at 16 per clock per SM), not on its tensor cores; on an H100 the tensor cores still
    /// bind, and at d = 128 they bind on both.
    #[test]
    fn the_exponentials_bind_d64_attention_on_b200() {
        let j = json("attention --seq 4096 --head-dim 64 --gpu b200");
        let fused = &j["roofline"][1];
        assert_eq!(fused["variant"], "fused");
        assert_eq!(fused["bound"], "exponentials");
        let exps = 4096.0 * 4096.0;
        near(&fused["exp_s"], exps / (16.0 * 148.0 * 1.98e9), 1e-12);
        near(
            &fused["time_at_bound_s"],
            exps / (16.0 * 148.0 * 1.98e9),
            1e-12,
        );
        near(&fused["compute_s"], 4.0 * exps * 64.0 / 2250e12, 1e-12);
        let printed = text("attention --seq 4096 --head-dim 64 --gpu b200");
        assert!(
            printed.contains("the exponentials bind the fused kernel, not the tensor cores"),
            "{printed}"
        );
        // Half of the exponentials on the FMA units: the tensor cores bind again.
        let fma = &j["roofline"][2];
        assert_eq!(fma["variant"], "fused, half exp on FMA");
        assert_eq!(fma["bound"], "compute");
        near(&fma["exp_s"], exps / 2.0 / (16.0 * 148.0 * 1.98e9), 1e-12);
        for cmd in [
            "attention --seq 4096 --head-dim 64 --gpu h100",
            "attention --seq 4096 --head-dim 128 --gpu b200",
        ] {
            assert_eq!(json(cmd)["roofline"][1]["bound"], "compute", "{cmd}");
            assert_eq!(json(cmd)["roofline"].as_array().unwrap().len(), 2, "{cmd}");
            assert!(!text(cmd).contains("exponentials bind"), "{cmd}");
        }
        // Softmax over a matrix takes one exponential per element and is memory-bound anyway.
        let softmax = json("softmax 8192 8192 --gpu b200");
        near(&softmax["cost"]["exps"], 8192.0 * 8192.0, 0.0);
        assert_eq!(softmax["roofline"][0]["bound"], "memory");
    }

    #[test]
    fn all_heads_scale_the_traffic_not_the_intensity() {
        let j = json("attention --seq 1024 --head-dim 64 --heads 8 --causal");
        let t = j["traffic"].as_array().unwrap();
        assert_eq!(t.len(), 4);
        near(&t[1]["bytes"], 8.0 * t[0]["bytes"].as_f64().unwrap(), 0.0);
        near(
            &t[1]["intensity"],
            t[0]["intensity"].as_f64().unwrap(),
            1e-9,
        );
        near(&t[3]["flops"], 8.0 * (2 * 64 * 1024 * 1025) as f64, 0.0);
    }

    #[test]
    fn an_8b_model_decodes_at_4_8_ms_and_209_tokens_per_second() {
        let j = json("decode --params 8B --dtype f16");
        near(&j["cost"]["bytes"], 16e9, 0.0);
        near(&j["roofline"][0]["time_at_bound_s"], 4.8e-3, 0.05e-3);
        near(&j["roofline"][0]["tokens_per_s"], 209.0, 0.5);
        // 405B in bf16 is 810 GB: five B200s hold it.
        let big = json("decode --params 405e9 --gpu b200");
        near(&big["cost"]["bytes"], 810e9, 0.0);
        assert_eq!(big["roofline"][0]["gpus_to_hold_weights"], 5);
        // On H100s it takes 11, each reading 1/11 of the weights per step: 11 times one GPU's
        // rate (45.5 tokens/s, not the 4.1 one H100 would reach if it could hold them).
        let h100 = json("decode --params 405B");
        let r = &h100["roofline"][0];
        assert_eq!(r["gpus_to_hold_weights"], 11);
        near(&r["time_at_bound_s"], 810e9 / 11.0 / 3.35e12, 0.01e-3);
        near(&r["tokens_per_s"], 45.5, 0.1);
    }

    #[test]
    fn kv_cache_is_128_kib_a_token_and_a_gib_a_sequence() {
        let j = json(
            "kv-cache --layers 32 --kv-heads 8 --head-dim 128 --dtype f16 --context 8000 --batch 64",
        );
        assert_eq!(j["cache"]["per_token"], 131_072);
        let gib = (1u64 << 30) as f64;
        near(&j["cache"]["per_sequence"], gib, 0.03 * gib);
        // 64 × 0.98 GiB = 62.5 GiB; the text's "64 GiB" is 64 × its rounded "about 1 GiB".
        near(&j["cache"]["batch_bytes"], 62.5 * gib, 0.01 * gib);
        let share = j["per_gpu"][0]["fraction_of_hbm"].as_f64().unwrap();
        assert!(share > 0.8 && share < 1.0, "most of an 80 GB card: {share}");
    }

    #[test]
    fn a_128k_score_matrix_is_32_8_gb_a_head_against_a_128_kib_tile() {
        let j = json("score-matrix --context 128000 --heads 128 --layers 126");
        near(&j["scores"]["one_head"], 32.8e9, 0.05e9);
        near(&j["scores"]["one_layer"], 4.2e12, 0.05e12);
        assert_eq!(j["working_set"]["total"], 131_072);
        near(&j["working_set"]["reduction"], 250_000.0, 0.5);
        near(&j["arithmetic"]["per_head"], 8.4e12, 0.05e12);
        near(&j["arithmetic"]["total"], 135e15, 0.5e15);
        let minutes = j["per_gpu"][0]["attention_s"].as_f64().unwrap() / 60.0;
        assert!(
            (2.0..2.5).contains(&minutes),
            "about two minutes: {minutes}"
        );
    }

    #[test]
    fn score_matrix_sizes_of_the_other_texts() {
        // 32k context: 2 GiB a head, 64 GiB for 32 heads.
        let j = json("score-matrix --context 32768 --heads 32 --dtype f16");
        assert_eq!(j["scores"]["one_head"], 1u64 << 31);
        assert_eq!(j["scores"]["one_layer"], 64u64 << 30);
        // 32 heads on 80 GB fill HBM at 35k tokens (the text's "about 11k" does not follow).
        assert_eq!(j["per_gpu"][0]["context_filling_hbm"], 35_355);
        // A 128-query row of 8k scores: 2 MiB in bf16, 4 MiB in f32, 9 to 18 × shared memory.
        let bf16 = json("score-matrix --context 8192");
        assert_eq!(bf16["scores"]["row_block"], 2u64 << 20);
        near(&bf16["per_gpu"][0]["row_block_vs_shared"], 9.0, 0.05);
        let f32 = json("score-matrix --context 8192 --dtype f32");
        near(&f32["per_gpu"][0]["row_block_vs_shared"], 18.0, 0.05);
        // Q 128×128 and K, V 64×128 in f16: 32 + 16 + 16 = 64 KiB.
        let tiles = json("score-matrix --context 4096 --kv-tile 64 --dtype f16");
        assert_eq!(tiles["working_set"]["q_tile"], 32 * 1024);
        assert_eq!(tiles["working_set"]["k_tile"], 16 * 1024);
        assert_eq!(tiles["working_set"]["qkv"], 64 * 1024);
    }

    const LLAMA3_8B: &str =
        "forward --hidden 4096 --mlp 14336 --layers 32 --vocab 128256 --heads 32 --kv-heads 8";

    #[test]
    fn llama3_8b_forward_crosses_the_h100_ridge_at_332_tokens() {
        let j = json(&format!("{LLAMA3_8B} --tokens 1,64,4096"));
        assert_eq!(j["model"]["weight_params"], 7_504_658_432u64);
        let passes = j["passes"].as_array().unwrap();
        near(&passes[0]["intensity"], 1.0, 0.01);
        near(&passes[1]["intensity"], 62.5, 0.05);
        near(&passes[2]["intensity"], 1636.4, 0.05);
        let bounds: Vec<&Json> = j["roofline"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| &r["bound"])
            .collect();
        assert_eq!(bounds, ["memory", "memory", "compute"]);
        assert_eq!(j["crossover"][0]["first_compute_bound_m"], 332);
        let plain = json(&format!("{LLAMA3_8B} --tokens 1 --mlp-kind plain"));
        let fewer = 7_504_658_432u64 - 32 * 4096 * 14336;
        assert_eq!(plain["model"]["weight_params"], fewer);
    }

    #[test]
    fn an_mlp_matmul_turns_compute_bound_at_310_on_h100_and_295_on_b200() {
        let j = json("crossover --k 8192 --n 28672");
        assert_eq!(
            row(&j["crossover"], "H100 SXM")["first_compute_bound_m"],
            310
        );
        assert_eq!(row(&j["crossover"], "B200")["first_compute_bound_m"], 295);
        assert_eq!(
            row(&j["crossover"], "A100 SXM 80GB")["first_compute_bound_m"],
            157
        );
        let never = json("crossover --k 8192 --n 64 --gpu h100");
        assert_eq!(never["crossover"][0]["first_compute_bound_m"], "never");
    }

    #[test]
    fn tiles_of_128_and_256_reach_64_and_128_flop_per_byte() {
        near(&json("tile")["tile"]["intensity"], 64.0, 0.0);
        near(
            &json("tile --mt 256 --nt 256")["tile"]["intensity"],
            128.0,
            0.0,
        );
        near(&json("tile --dtype f32")["tile"]["intensity"], 32.0, 0.0);
    }

    #[test]
    fn a_tiles_journey_loads_for_4_6_times_as_long_as_it_multiplies_2_3_for_a_alone() {
        let j = json("tile");
        assert_eq!(j["tile"]["a_tile"], 32 * 1024);
        near(&j["tile"]["multiply_flops"], 4.2e6, 0.05e6);
        let r = &j["journey"][0];
        near(&r["sm_hbm_share"], 25e9, 0.5e9);
        // The teaching material's journey moves A alone: 1.3 µs, 2.3x the multiply.
        near(&r["hbm_to_shared_a_s"], 1.3 * US, 0.05 * US);
        near(&r["load_a_vs_multiply"], 2.3, 0.05);
        // The multiply needs B as well: twice the bytes, 4.6x.
        near(&r["hbm_to_shared_s"], 2.58 * US, 0.05 * US);
        near(&r["shared_to_registers_s"], 0.26 * US, 0.005 * US);
        near(&r["sm_peak"], 7.5e12, 0.05e12);
        near(&r["multiply_s"], 0.56 * US, 0.005 * US);
        near(&r["load_vs_multiply"], 4.6, 0.05);
    }

    #[test]
    fn the_pyramid_drops_a_decade_per_rung() {
        let j = json("levels");
        let level = |name: &str| {
            j["levels"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["level"] == name)
                .unwrap()
                .clone()
        };
        assert_eq!(level("registers")["total"], 33u64 << 20);
        let shared = level("shared memory, max");
        near(&shared["bandwidth"], 33.45e12, 0.01e12);
        near(&shared["vs_hbm"], 10.0, 0.05);
        near(&level("NVLink, per direction")["vs_hbm"], 1.0 / 7.4, 0.002);
        near(&level("PCIe, per direction")["vs_hbm"], 1.0 / 52.3, 0.0002);
        near(&level("network, per GPU")["vs_hbm"], 1.0 / 67.0, 0.0002);
    }

    #[test]
    fn blackwell_doubles_the_matmul_and_nothing_else_in_the_sm() {
        let j = json("compare --gpu h100 --vs b200");
        let ratio = |name: &str| {
            j["compare"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["quantity"] == name)
                .unwrap()["ratio"]
                .clone()
        };
        for (name, expected) in [
            ("dense bf16 tensor", 2.3),
            ("HBM bandwidth", 2.4),
            // 180 GB usable against 80: the 192 GB fitted would be 2.4x.
            ("HBM capacity", 2.25),
            ("SMs", 1.1),
            ("shared memory per SM", 1.0),
            ("shared memory, bytes/clock/SM", 1.0),
            ("exponentials/clock/SM", 1.0),
            ("L2", 2.5),
            ("NVLink, per direction", 2.0),
        ] {
            near(&ratio(name), expected, 0.05);
        }
        assert_eq!(ratio("tensor memory per SM"), "new");
        let per_exp = j["compare"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["quantity"] == "tensor FLOPs per exponential")
            .unwrap()["b"]
            .clone();
        assert_eq!(per_exp, 512);
        // A100 to H100: matmul tripled, bandwidth 1.6× (1.7× with the text's rounded 2.0 TB/s).
        let older = json("compare --gpu a100 --vs h100");
        near(&older["compare"][0]["ratio"], 3.2, 0.05);
        near(&older["compare"][3]["ratio"], 1.64, 0.005);
    }

    #[test]
    fn flash_attention_papers_utilisation() {
        near(
            &json("utilisation --achieved 740T")["utilisation"][0]["fraction"],
            0.75,
            0.005,
        );
        let a100 = json("utilisation --achieved 225e12 --gpu a100");
        near(&a100["utilisation"][0]["fraction"], 0.72, 0.005);
    }

    #[test]
    fn llama3_405b_trains_in_70_days_at_40_percent_mfu() {
        let j = json("train-time --flops 3.8e25 --gpus 16000 --mfu 0.40");
        let r = &j["train_time"][0];
        near(&r["useful"], 6.3e18, 0.05e18);
        near(&r["time_s"], 70.0 * 86400.0, 1.0 * 86400.0);
        near(&r["peak_vs_useful"], 2.5, 1e-9);
    }

    #[test]
    fn bad_input_says_what_is_wrong() {
        assert_eq!(error("matmul 0 8 8"), "M must be at least 1, got 0");
        assert_eq!(
            error("matmul 1 1 1 --gpu v100"),
            "unknown GPU 'v100'; known: a100, h100, h200, b200, or all"
        );
        assert!(error("gpus --hbm-scale 0").contains("--hbm-scale"));
        assert!(error("compare --gpu all").contains("one --gpu"));
        assert!(error("train-time --flops 1e20 --gpus 8 --mfu 1.5").contains("--mfu"));
        assert!(error("utilisation --achieved 1e30").contains("--achieved"));
        assert!(error("train-time --flops 1e20 --gpus 1e30 --mfu 0.4").contains("--gpus"));
        assert!(error("train-time --flops 1e20 --gpus 0.5 --mfu 0.4").contains("--gpus"));
        let gqa = "forward --hidden 4096 --mlp 1 --layers 1 --vocab 1 --tokens 1 --kv-heads 5";
        assert!(error(gqa).contains("--kv-heads 5"));
        assert!(error("score-matrix --context 0").contains("--context"));
        assert!(error("matmul 4294967296 4294967296 4294967296").contains("too large"));
        assert!(
            parse("decode --params 8X")
                .unwrap_err()
                .contains("not a positive count")
        );
        assert!(
            parse("kv-cache --layers 1").is_err(),
            "missing flags are clap errors"
        );
    }

    #[test]
    fn counts_take_si_suffixes() {
        assert_eq!(parse_count("8B"), Ok(8e9));
        assert_eq!(parse_count("740t"), Ok(740e12));
        assert_eq!(parse_count("3.8e25"), Ok(3.8e25));
        assert_eq!(parse_count("16000"), Ok(16000.0));
        assert!(parse_count("-1").is_err());
        assert!(parse_count("").is_err());
    }

    /// docs/roofline.md and its appendix paste each command's whole output; they must still be
    /// exactly what the command prints.
    #[test]
    fn the_outputs_pasted_in_the_docs_are_current() {
        let mut blocks = 0;
        for (file, doc) in [
            ("docs/roofline.md", include_str!("../../docs/roofline.md")),
            (
                "docs/roofline-examples.md",
                include_str!("../../docs/roofline-examples.md"),
            ),
        ] {
            let mut lines = doc.lines();
            while let Some(line) = lines.next() {
                if line != "```console" {
                    continue;
                }
                let command = lines.next().unwrap_or_default();
                let args = command
                    .strip_prefix("$ cargo xtask roofline ")
                    .unwrap_or_else(|| {
                        panic!("a console block starts with a roofline command: {command}")
                    });
                let pasted: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
                let printed = text(args);
                assert_eq!(pasted.join("\n") + "\n", printed, "{file}: {command}");
                blocks += 1;
            }
        }
        assert!(
            blocks >= 20,
            "only {blocks} roofline commands found in the docs"
        );
    }

    #[test]
    fn every_report_says_it_is_modelled_and_json_carries_the_table_fields() {
        for cmd in [
            "gpus",
            "levels --gpu all",
            "compare",
            "matmul 2 8192 28672 --gpu all",
            "attention --seq 4096 --heads 4",
            "decode --params 70B --batch 8",
            "tile --gpu all",
            &format!("{LLAMA3_8B} --tokens 1,4096 --gpu all"),
        ] {
            let out = text(cmd);
            assert!(out.contains(report::PROVENANCE), "{cmd}");
            let j = json(cmd);
            assert_eq!(j["provenance"], report::PROVENANCE);
            let rep = build(&parse(cmd).unwrap()).unwrap();
            for section in &rep.sections {
                let rows = match &j[section.key] {
                    Json::Array(rows) => rows.clone(),
                    one => vec![one.clone()],
                };
                assert_eq!(rows.len(), section.rows.len(), "{cmd}: {}", section.key);
                for (json_row, fields) in rows.iter().zip(&section.rows) {
                    for f in fields {
                        assert_eq!(json_row[f.key], f.value.json(), "{cmd}: {}", f.key);
                    }
                }
            }
        }
        let j: Json = serde_json::from_str(&text("matmul 2 8192 28672 --json")).unwrap();
        assert_eq!(j["command"], "matmul");
    }
}
