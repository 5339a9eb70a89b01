//! `cargo xtask run`: every kernel, checked, timed (GPU) or modelled (emulator), on the roofline.

use std::time::Instant;

use host::bench::{self, BenchConfig, Timing};
use host::cost::{Bound, Roofline};
use host::emu::LaunchCounters;
use host::specs::GpuSpec;
use host::{Runtime, runtime::Backend};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::cases::{self, Scale};
use crate::plot;
use crate::ptxas::report_dir;

#[derive(clap::Args)]
pub struct RunArgs {
    /// The GPU whose roofline the figures are read against: on a GPU, the one found by name
    /// (this flag overrides it); on the emulator, the device the modelled figures are for.
    #[arg(long, default_value = "h100")]
    device: String,
    /// Run only the kernels whose name contains this.
    #[arg(long)]
    only: Option<String>,
    /// Problem sizes: `full` (hundreds of MB, the default on a GPU) or `small` (the emulator's
    /// default; on a GPU, a quick correctness pass).
    #[arg(long, value_parser = ["full", "small"])]
    scale: Option<String>,
    /// Where to write the JSON report (default: target/xtask/run.json).
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Timed runs per kernel on a GPU.
    #[arg(long, default_value_t = 20)]
    runs: usize,
}

/// One row of the report.
#[derive(Serialize)]
struct Row {
    kernel: &'static str,
    shape: String,
    /// `true` when `roofline` holds a GPU measurement, `false` when it is modelled.
    measured: bool,
    timing: Option<Timing>,
    roofline: Roofline,
    cost: host::cost::Cost,
    /// The emulator's counts for one run (emulator only).
    counters: Option<LaunchCounters>,
    /// Seconds the emulator took on this machine's CPUs (emulator only).
    emulator_seconds: Option<f64>,
    check: Result<String, String>,
}

#[derive(Serialize)]
struct Report<'a> {
    backend: String,
    roofline_device: &'a GpuSpec,
    rows: Vec<Row>,
    /// Kernels that could not be run at all (a launch or setup error), with why.
    failures: Vec<Failure>,
}

#[derive(Serialize)]
struct Failure {
    kernel: &'static str,
    error: String,
}

pub fn run(args: &RunArgs) -> Result<(), String> {
    let rt = Runtime::from_env().map_err(|e| e.to_string())?;
    let spec = GpuSpec::find(&args.device).ok_or_else(|| unknown_device(&args.device))?;
    let scale = match (args.scale.as_deref(), rt.is_gpu()) {
        (Some("small"), _) | (None, false) => Scale::Emulator,
        _ => Scale::Gpu,
    };
    if scale == Scale::Gpu && !rt.is_gpu() {
        return Err("--scale full needs a GPU: the emulator runs the small sizes".into());
    }
    match rt.backend() {
        Backend::Emulator(_) => println!(
            "No GPU: {}. Running every kernel on the CPU emulator at small sizes (checked against the CPU reference and its cost model); time, GB/s, TFLOP/s and % of roofline are MODELLED for {} at the GPU shapes shown (the kernel at its roofline bound).",
            no_gpu_reason(),
            spec.name
        ),
        Backend::Cuda(gpu) => println!(
            "GPU: {} ({}), measured with CUDA events, median of {} runs after 3 warm-ups, L2 flushed between runs; roofline of {}.",
            gpu.name(),
            gpu.arch().name(),
            args.runs,
            spec.name
        ),
    }
    let specs: Vec<_> = cases::all()
        .into_iter()
        .filter(|c| cases::runs_on(&rt, c.kernel))
        .filter(|c| {
            args.only
                .as_ref()
                .is_none_or(|o| c.kernel.contains(o.as_str()))
        })
        .collect();
    let bar = ProgressBar::new(specs.len() as u64)
        .with_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").unwrap());
    let path = args
        .json
        .clone()
        .unwrap_or_else(|| report_dir().join("run.json"));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let mut report = Report {
        backend: rt.device_name(),
        roofline_device: spec,
        rows: Vec::new(),
        failures: Vec::new(),
    };
    for spec_case in &specs {
        bar.set_message(spec_case.kernel);
        match run_case(&rt, spec_case, scale, spec, args.runs) {
            Ok(row) => report.rows.push(row),
            // Reported, and the run goes on: one broken kernel must not cost the others' figures.
            Err(error) => {
                bar.println(format!("{}: FAILED: {error}", spec_case.kernel));
                report.failures.push(Failure {
                    kernel: spec_case.kernel,
                    error,
                });
            }
        }
        // Written after every case, so a run stopped at its time budget keeps what it has.
        let json = serde_json::to_string_pretty(&report).expect("report serialises");
        std::fs::write(&path, json).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    print_table(&report.rows, rt.is_gpu());
    if report
        .rows
        .iter()
        .any(|r| r.kernel.starts_with("attention"))
    {
        attention_sweep(&report.rows, spec);
    }
    println!("JSON report: {}", path.display());
    let svg = path.with_file_name("roofline.svg");
    // One point per kernel (its first, headline shape): a sweep's points would sit on each other.
    let mut seen = std::collections::HashSet::new();
    let points: Vec<_> = report
        .rows
        .iter()
        .filter(|r| seen.insert(r.kernel))
        .map(|r| plot::RooflinePoint {
            label: r.kernel.to_string(),
            intensity: r.roofline.intensity,
            flops_per_second: r.roofline.flops_per_second,
            unit: r.cost.unit,
            measured: r.measured,
        })
        .collect();
    let how = if rt.is_gpu() {
        format!("measured on {}", rt.device_name())
    } else {
        "MODELLED at the roofline bound (no GPU)".to_string()
    };
    plot::roofline(
        &svg,
        spec,
        &points,
        &format!("{} roofline, kernels {how}", spec.name),
    )?;
    println!("roofline chart: {}", svg.display());
    println!("how each kernel's bytes move, per source line: cargo xtask inspect <kernel>");
    let failed: Vec<_> = report
        .rows
        .iter()
        .filter(|r| r.check.is_err())
        .map(|r| r.kernel)
        .chain(report.failures.iter().map(|f| f.kernel))
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "failed or differ from the CPU reference: {failed:?}"
        ))
    }
}

fn unknown_device(name: &str) -> String {
    let known: Vec<_> = host::specs::GPUS.iter().map(|g| g.key).collect();
    format!("unknown device `{name}`; known: {}", known.join(", "))
}

/// Why the runtime is the emulator, in one sentence: the driver's answer, or the variable's.
pub fn no_gpu_reason() -> String {
    match Runtime::gpu(0) {
        Err(e) => e.to_string(),
        Ok(_) => "KERNELS_BACKEND selects the emulator".to_string(),
    }
}

fn run_case(
    rt: &Runtime,
    spec_case: &cases::CaseSpec,
    scale: Scale,
    spec: &GpuSpec,
    runs: usize,
) -> Result<Row, String> {
    let mut case = (spec_case.build)(rt, scale).map_err(|e| e.to_string())?;
    let row = if rt.is_gpu() {
        let timing = bench::time_gpu(rt, BenchConfig { warmup: 3, runs }, || {
            (case.launch)(rt).map(|_| ())
        })
        .map_err(|e| e.to_string())?;
        Row {
            kernel: case.kernel,
            shape: case.shape.clone(),
            measured: true,
            timing: Some(timing),
            roofline: Roofline::new(&case.cost, spec, timing.median),
            cost: case.cost,
            counters: None,
            emulator_seconds: None,
            check: (case.check)(rt),
        }
    } else {
        let start = Instant::now();
        let counters = (case.launch)(rt).map_err(|e| e.to_string())?;
        let seconds = start.elapsed().as_secs_f64();
        let mut check = (case.check)(rt).map(|s| format!("at {}: {s}", case.shape));
        if let (Some(c), Ok(summary)) = (&counters, &check) {
            let (read, written) = (c.global_read_bytes, c.global_write_bytes);
            check = if (read, written) == (case.cost.bytes_read, case.cost.bytes_written) {
                Ok(format!("{summary}; HBM bytes = cost model"))
            } else {
                Err(format!(
                    "counted {read} B read / {written} B written, cost model says {} / {}",
                    case.cost.bytes_read, case.cost.bytes_written
                ))
            };
        }
        Row {
            kernel: case.kernel,
            shape: case.gpu.0.clone(),
            measured: false,
            timing: None,
            roofline: Roofline::modelled(&case.gpu.1, spec),
            cost: case.gpu.1,
            counters,
            emulator_seconds: Some(seconds),
            check,
        }
    };
    Ok(row)
}

fn duration(s: f64) -> String {
    if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

fn print_table(rows: &[Row], measured: bool) {
    let tag = if measured { "" } else { " (modelled)" };
    println!(
        "{:<27} {:<28} {:>12} {:>11} {:>12} {:>8} {:>7} {:>10}  check",
        "kernel",
        "shape",
        format!("time{tag}"),
        "GB/s",
        "TFLOP/s",
        "FLOP/B",
        "bound",
        "% roof"
    );
    for r in rows {
        let f = &r.roofline;
        let bound = match f.bound {
            Bound::Memory => "memory",
            Bound::Compute => "compute",
        };
        let check = match &r.check {
            Ok(s) => format!("ok: {s}"),
            Err(e) => format!("FAILED: {e}"),
        };
        println!(
            "{:<27} {:<28} {:>12} {:>11.0} {:>12.3} {:>8.3} {:>7} {:>9.1}%  {}",
            r.kernel,
            r.shape,
            duration(f.seconds),
            f.bytes_per_second / 1e9,
            f.flops_per_second / 1e12,
            f.intensity,
            bound,
            100.0 * f.fraction_of_roofline,
            check
        );
    }
}

/// `cargo xtask emu-speed`: the emulator's throughput on this machine.
pub fn emu_speed() -> Result<(), String> {
    let rt = Runtime::emulator();
    let n = 1 << 20;
    let a = rt
        .upload(&host::reference::uniform(n, 1, -1.0, 1.0))
        .map_err(|e| e.to_string())?;
    let b = rt
        .upload(&host::reference::uniform(n, 2, -1.0, 1.0))
        .map_err(|e| e.to_string())?;
    let mut c = rt.alloc::<f32>(n).map_err(|e| e.to_string())?;
    let t = wall_clock(|| {
        host::ops::elementwise::vector_add_f32(&rt, &a, &b, &mut c)
            .map(|_| ())
            .map_err(|e| e.to_string())
    })?;
    println!(
        "emulator, {} threads: vector_add_f32 of 1M elements (1M simulated GPU threads): median {} over {} runs ({:.1} M threads/s)",
        rayon_threads(),
        duration(t.median),
        t.runs,
        n as f64 / t.median / 1e6
    );
    attention_head_speed()
}

/// Median wall-clock time of three runs of `f` on the emulator, whose launches are synchronous
/// (on a GPU a wall clock would time only the enqueue: see `host::bench`).
fn wall_clock(mut f: impl FnMut() -> Result<(), String>) -> Result<Timing, String> {
    let mut samples = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        f()?;
        samples.push(start.elapsed().as_secs_f64());
    }
    Ok(Timing::from_samples(samples).expect("three samples"))
}

/// One attention head through the fused f32 kernel on the emulator: 256 queries over 256 keys,
/// d = 64 (4 blocks of 64 threads, 16 K/V tiles each), median of 3 runs.
pub fn attention_head_speed() -> Result<(), String> {
    use host::ops::attention::{self, AttentionParams, AttentionShape};
    let rt = Runtime::emulator();
    let shape = AttentionShape::new(1, 1, 256, 64);
    let params = AttentionParams::standard(64, false);
    let upload = |n, seed| rt.upload(&host::reference::uniform(n, seed, -1.0, 1.0));
    let err = |e: host::Error| e.to_string();
    let (q, k, v) = (
        upload(shape.q_elems(), 1).map_err(err)?,
        upload(shape.kv_elems(), 2).map_err(err)?,
        upload(shape.kv_elems(), 3).map_err(err)?,
    );
    let mut o = rt.alloc::<f32>(shape.q_elems()).map_err(err)?;
    let mut lse = rt.alloc::<f32>(shape.lse_elems()).map_err(err)?;
    let t = wall_clock(|| {
        attention::fused(&rt, &q, &k, &v, &mut o, &mut lse, &shape, &params)
            .map(|_| ())
            .map_err(err)
    })?;
    println!(
        "emulator, {} threads: one attention head (256 queries x 256 keys, d = 64) through flash_attention_f32_d64: median {} over {} runs",
        rayon_threads(),
        duration(t.median),
        t.runs
    );
    Ok(())
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The attention chapter's two sweeps over N (batch 4, 16 heads, d = 128): modelled time at the
/// roofline bound of each flow, and device memory against the device's HBM, with the N past
/// which the naive flow no longer fits. Then the speedup of fused over naive from the table.
fn attention_sweep(rows: &[Row], spec: &GpuSpec) {
    use host::ops::attention::{
        AttentionShape, Flow, device_bytes, fused_traffic, max_sequence_len, naive_traffic,
    };
    let (batch, heads, d) = (4, 16, 128);
    println!(
        "\nattention over N (batch {batch}, {heads} heads, d = {d}), MODELLED on {} at the roofline bound of the compulsory traffic:",
        spec.name
    );
    println!(
        "{:>8} {:>14} {:>14} {:>16} {:>16} {:>10} {:>10}",
        "N", "naive f32", "fused bf16", "naive memory", "fused memory", "naive fits", "fused fits"
    );
    let mut n = 1024;
    while n <= 65536 {
        let shape = AttentionShape::new(batch, heads, n, d);
        let naive = Roofline::modelled(&naive_traffic(&shape, false).compulsory, spec).seconds;
        let fused =
            Roofline::modelled(&fused_traffic::<half::bf16>(&shape, false).compulsory, spec)
                .seconds;
        let (nm, fm) = (
            device_bytes(Flow::Naive, &shape),
            device_bytes(Flow::Fused, &shape),
        );
        let fits = |b: u64| {
            if b as f64 <= spec.hbm_bytes {
                "yes"
            } else {
                "no"
            }
        };
        println!(
            "{n:>8} {:>14} {:>14} {:>13.1} GB {:>13.2} GB {:>10} {:>10}",
            duration(naive),
            duration(fused),
            nm as f64 / 1e9,
            fm as f64 / 1e9,
            fits(nm),
            fits(fm)
        );
        n *= 2;
    }
    let hbm = spec.hbm_bytes as u64;
    println!(
        "largest N in {:.0} GB: naive {}, fused {} (f32 buffers; fused needs O(N d), naive O(N^2))",
        spec.hbm_bytes / 1e9,
        max_sequence_len(Flow::Naive, hbm, batch, heads, d),
        max_sequence_len(Flow::Fused, hbm, batch, heads, d)
    );
    let time = |k: &str| {
        rows.iter()
            .find(|r| r.kernel == k)
            .map(|r| r.roofline.seconds)
    };
    for fused in ["attention_fused_f32", "attention_fused_bf16"] {
        if let (Some(n), Some(f)) = (time("attention_naive_f32"), time(fused)) {
            let how = if rows[0].measured {
                "measured"
            } else {
                "modelled"
            };
            println!(
                "speedup of {fused} over attention_naive_f32 at N = 4096: {:.1}x ({how})",
                n / f
            );
        }
    }
}
