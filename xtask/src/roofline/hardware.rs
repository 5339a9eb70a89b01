//! The GPUs themselves: the spec table with ridge points, the memory pyramid, two GPUs side by
//! side, and one matmul tile's trip through an SM.

use perf::cost::{ComputeUnit, Cost, CostRoofline};
use perf::specs::GpuSpec;

use super::report::{self, Report, Section, Value, field};
use super::{Ctx, costs, gpu_name, positive};

pub(super) fn gpus(ctx: Ctx) -> Report {
    let rows = ctx.per_gpu(|g| {
        vec![
            field("key", "--gpu", Value::Text(g.key.to_string())),
            field(
                "bf16_flops",
                "dense bf16 tensor",
                Value::FlopRate(g.bf16_flops),
            ),
            field("f32_flops", "f32 CUDA cores", Value::FlopRate(g.f32_flops)),
            field(
                "hbm_bandwidth",
                "HBM bandwidth",
                Value::ByteRate(g.hbm_bandwidth),
            ),
            field("hbm_bytes", "HBM size", Value::Bytes(g.hbm_bytes)),
            field("sms", "SMs", Value::Count(u64::from(g.sms))),
            field(
                "shared_per_sm",
                "shared memory / SM",
                Value::Bytes(g.shared_per_sm),
            ),
            field("l2_bytes", "L2", Value::Bytes(g.l2_bytes)),
            field(
                "ridge_bf16",
                "ridge, bf16 tensor",
                Value::Intensity(g.ridge(ComputeUnit::TensorCore16)),
            ),
            field(
                "ridge_f32",
                "ridge, f32",
                Value::Intensity(g.ridge(ComputeUnit::CudaCoreF32)),
            ),
        ]
    });
    let sections = vec![Section::columns("gpus", "GPUs (dense peaks)", rows)];
    let notes = vec![
        "ridge = peak FLOP/s ÷ HBM bytes/s: below it an operation is memory-bound".to_string(),
    ];
    ctx.report_with("gpus", "GPU table".to_string(), sections, notes)
}

pub(super) fn levels(ctx: Ctx) -> Report {
    let mut rows = Vec::new();
    for g in &ctx.gpus {
        let sms = f64::from(g.sms);
        let shared_bw = g.shared_bytes_per_clock * sms * g.boost_clock_hz;
        let row = |level: &str, per_sm: Option<f64>, total: Option<f64>, bw: Option<f64>| {
            vec![
                gpu_name(g),
                field("level", "level", Value::Text(level.to_string())),
                field("per_sm", "per SM", per_sm.map_or(Value::None, Value::Bytes)),
                field(
                    "total",
                    "whole GPU",
                    total.map_or(Value::None, Value::Bytes),
                ),
                field(
                    "bandwidth",
                    "bandwidth",
                    bw.map_or(Value::None, Value::ByteRate),
                ),
                field(
                    "vs_hbm",
                    "vs HBM",
                    bw.map_or(Value::None, |b| Value::Ratio(b / g.hbm_bandwidth)),
                ),
            ]
        };
        rows.push(row(
            "registers",
            Some(g.registers_per_sm),
            Some(g.registers_per_sm * sms),
            None,
        ));
        if g.tensor_memory_per_sm > 0.0 {
            rows.push(row(
                "tensor memory",
                Some(g.tensor_memory_per_sm),
                Some(g.tensor_memory_per_sm * sms),
                None,
            ));
        }
        rows.push(row(
            "L1 + shared (one SRAM)",
            Some(g.l1_shared_per_sm),
            Some(g.l1_shared_per_sm * sms),
            Some(shared_bw),
        ));
        rows.push(row(
            "shared memory, max",
            Some(g.shared_per_sm),
            Some(g.shared_per_sm * sms),
            Some(shared_bw),
        ));
        rows.push(row("L2 cache", None, Some(g.l2_bytes), None));
        rows.push(row("HBM", None, Some(g.hbm_bytes), Some(g.hbm_bandwidth)));
        rows.push(row(
            "NVLink, per direction",
            None,
            None,
            Some(g.nvlink_bandwidth),
        ));
        rows.push(row(
            "PCIe, per direction",
            None,
            None,
            Some(g.pcie_bandwidth),
        ));
        rows.push(row(
            "network, per GPU",
            None,
            None,
            Some(g.network_bandwidth),
        ));
    }
    let notes = ctx
        .gpus
        .iter()
        .map(|g| {
            format!(
                "{}: shared-memory bandwidth = {} B per clock per SM × {} SMs × {}",
                g.name,
                g.shared_bytes_per_clock,
                g.sms,
                report::si(g.boost_clock_hz, "Hz")
            )
        })
        .chain([
            "registers' and L2's bandwidth and every level's latency are measured, not published: \
             see `cargo xtask hierarchy`"
                .to_string(),
        ])
        .collect();
    let sections = vec![Section::table("levels", "memory levels", rows)];
    ctx.report_with("levels", "The memory pyramid".to_string(), sections, notes)
}

/// One line of `compare`: a figure of a GPU (`None` where it has none) and how to print it.
struct Quantity {
    name: &'static str,
    show: fn(f64) -> Value,
    get: fn(&GpuSpec) -> Option<f64>,
}

/// A whole number without unit.
fn whole(x: f64) -> Value {
    Value::Number(x, 0)
}

/// What `compare` sets side by side.
const COMPARED: [Quantity; 19] = [
    Quantity {
        name: "dense bf16 tensor",
        show: Value::FlopRate,
        get: |g| Some(g.bf16_flops),
    },
    Quantity {
        name: "dense FP8 tensor",
        show: Value::FlopRate,
        get: |g| g.fp8_flops,
    },
    Quantity {
        name: "f32 CUDA cores",
        show: Value::FlopRate,
        get: |g| Some(g.f32_flops),
    },
    Quantity {
        name: "HBM bandwidth",
        show: Value::ByteRate,
        get: |g| Some(g.hbm_bandwidth),
    },
    Quantity {
        name: "HBM capacity",
        show: Value::Bytes,
        get: |g| Some(g.hbm_bytes),
    },
    Quantity {
        name: "ridge, bf16",
        show: Value::Intensity,
        get: |g| Some(g.ridge(ComputeUnit::TensorCore16)),
    },
    Quantity {
        name: "SMs",
        show: whole,
        get: |g| Some(f64::from(g.sms)),
    },
    Quantity {
        name: "boost clock",
        show: Value::Hertz,
        get: |g| Some(g.boost_clock_hz),
    },
    Quantity {
        name: "clock the bf16 peak implies",
        show: Value::Hertz,
        get: |g| Some(g.tensor_clock_hz()),
    },
    Quantity {
        name: "shared memory per SM",
        show: Value::Bytes,
        get: |g| Some(g.shared_per_sm),
    },
    Quantity {
        name: "L1 + shared per SM",
        show: Value::Bytes,
        get: |g| Some(g.l1_shared_per_sm),
    },
    Quantity {
        name: "shared memory, bytes/clock/SM",
        show: whole,
        get: |g| Some(g.shared_bytes_per_clock),
    },
    Quantity {
        name: "exponentials/clock/SM",
        show: whole,
        get: |g| Some(g.exp_per_clock_per_sm),
    },
    Quantity {
        name: "exponentials/s",
        show: Value::ExpRate,
        get: |g| Some(g.exp_per_second()),
    },
    Quantity {
        name: "tensor FLOPs/clock/SM",
        show: whole,
        get: |g| Some(g.tensor_flops_per_clock_per_sm),
    },
    Quantity {
        name: "tensor FLOPs per exponential",
        show: whole,
        get: |g| Some(g.tensor_flops_per_clock_per_sm / g.exp_per_clock_per_sm),
    },
    Quantity {
        name: "tensor memory per SM",
        show: Value::Bytes,
        get: |g| Some(g.tensor_memory_per_sm).filter(|&t| t > 0.0),
    },
    Quantity {
        name: "L2",
        show: Value::Bytes,
        get: |g| Some(g.l2_bytes),
    },
    Quantity {
        name: "NVLink, per direction",
        show: Value::ByteRate,
        get: |g| Some(g.nvlink_bandwidth),
    },
];

pub(super) fn compare(ctx: Ctx, vs: &str) -> Result<Report, String> {
    let a = ctx
        .gpus
        .first()
        .copied()
        .ok_or("compare needs one --gpu, not all")?;
    if ctx.gpus.len() > 1 {
        return Err("compare takes one --gpu (not all) and one --vs".to_string());
    }
    let b = ctx.lookup(vs)?;
    let rows = COMPARED
        .iter()
        .map(|q| {
            let (x, y) = ((q.get)(&a), (q.get)(&b));
            let ratio = match (x, y) {
                (Some(x), Some(y)) => Value::Ratio(y / x),
                (None, Some(_)) => Value::Text("new".to_string()),
                _ => Value::None,
            };
            vec![
                field("quantity", "", Value::Text(q.name.to_string())),
                field("a", a.name, x.map_or(Value::None, q.show)),
                field("b", b.name, y.map_or(Value::None, q.show)),
                field("ratio", format!("{} ÷ {}", b.key, a.key), ratio),
            ]
        })
        .collect();
    let headline = format!("{} against {}", a.name, b.name);
    let sections = vec![Section::table("compare", "side by side", rows)];
    Ok(ctx.report("compare", headline, sections))
}

pub(super) fn tile(ctx: Ctx, mt: u64, nt: u64, kt: u64) -> Result<Report, String> {
    let (mt, nt, kt) = (
        positive("--mt", mt)?,
        positive("--nt", nt)?,
        positive("--kt", kt)?,
    );
    let b = ctx.dtype.bytes();
    let step = costs::tile_step(mt, nt, kt, ctx.dtype)?;
    let a_tile = costs::product(&[mt, kt, b])?;
    let accumulator = costs::product(&[mt, nt, 4])?;
    let facts = vec![
        field(
            "intensity",
            "tile intensity at HBM",
            Value::Intensity(step.intensity()),
        ),
        field("a_tile", "A tile [Mt, Kt]", report::bytes(a_tile)),
        field("ab_tiles", "A + B tiles", report::bytes(step.bytes_read)),
        field(
            "accumulator",
            "f32 accumulator [Mt, Nt]",
            report::bytes(accumulator),
        ),
        field(
            "multiply_flops",
            "multiply [Mt, Kt] × [Kt, Nt]",
            report::flops(step.flops),
        ),
    ];
    let mut reuse = Vec::new();
    let mut journey = Vec::new();
    for g in &ctx.gpus {
        let ridge = g.ridge(step.unit);
        reuse.push(vec![
            gpu_name(g),
            field("ridge", "ridge", Value::Intensity(ridge)),
            field(
                "sms_sharing_for_ridge",
                "SMs sharing a strip to reach it",
                Value::Count((ridge / step.intensity()).ceil() as u64),
            ),
            field(
                "tiles_vs_shared",
                "A + B ÷ shared",
                Value::Percent(step.bytes_read as f64 / g.shared_per_sm),
            ),
            field(
                "accumulator_vs_registers",
                "accumulator ÷ registers",
                Value::Percent(accumulator as f64 / g.registers_per_sm),
            ),
        ]);
        let sm = costs::sm_share(g);
        let load_seconds = |bytes: u64| {
            Cost {
                bytes_read: bytes,
                bytes_written: 0,
                flops: 0,
                exps: 0,
                unit: step.unit,
                ..Cost::NONE
            }
            .memory_seconds(&sm)
        };
        // The multiply needs both strips; the teaching material's journey moves only A, which
        // halves the load. Both are printed, A alone labelled as the simplification.
        let (load_a, load) = (load_seconds(a_tile), load_seconds(step.bytes_read));
        let multiply = Cost {
            bytes_read: 0,
            ..step
        }
        .compute_seconds(&sm);
        let to_registers = step.bytes_read as f64 / (g.shared_bytes_per_clock * g.boost_clock_hz);
        journey.push(vec![
            gpu_name(g),
            field(
                "sm_hbm_share",
                "SM's share of HBM",
                Value::ByteRate(sm.hbm_bandwidth),
            ),
            field("hbm_to_shared_a_s", "A alone", Value::Seconds(load_a)),
            field("hbm_to_shared_s", "HBM → shared", Value::Seconds(load)),
            field(
                "shared_to_registers_s",
                "shared → registers",
                Value::Seconds(to_registers),
            ),
            field(
                "sm_peak",
                "SM's share of peak",
                Value::FlopRate(sm.peak_flops(step.unit)),
            ),
            field("multiply_s", "multiply", Value::Seconds(multiply)),
            field(
                "load_a_vs_multiply",
                "A alone ÷ multiply",
                Value::Ratio(load_a / multiply),
            ),
            field(
                "load_vs_multiply",
                "load ÷ multiply",
                Value::Ratio(load / multiply),
            ),
        ]);
    }
    let headline = format!(
        "matmul tile Mt = {mt}, Nt = {nt}, Kt = {kt}, {}",
        ctx.dtype.name()
    );
    let notes = vec![
        "tile intensity = 2·Mt·Nt·K ÷ (bytes × K·(Mt+Nt)): each strip element in shared memory \
         is used Nt or Mt times; C's single write is left out"
            .to_string(),
        "journey: the A and B tiles one multiply needs, in one SM, with 1/SMs of the HBM \
         bandwidth and of the tensor peak; shared → registers at the SM's bytes per clock at \
         boost clock. \"A alone\" is the teaching material's simplification (half the load)"
            .to_string(),
    ];
    let sections = vec![
        Section::list("tile", "one output tile", facts),
        Section::table("reuse", "reuse against the ridge", reuse),
        Section::table("journey", "one tile's journey in one SM", journey),
    ];
    Ok(ctx.report_with("tile", headline, sections, notes))
}
