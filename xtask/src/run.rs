//! `cargo xtask run`: every kernel, checked, timed (GPU) or modelled (emulator), on the roofline.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use host::bench::{self, BenchConfig, Timing};
use host::cases::{self, Scale};
use host::registry;
use host::{Runtime, runtime::Backend};
use indicatif::{ProgressBar, ProgressStyle};
use perf::cost::{Bound, CostRoofline, Roofline};
use perf::specs::GpuSpec;
use serde::{Deserialize, Serialize};

use crate::baseline::{self, Baseline};
use crate::checkout::report_dir;
use crate::format::{NARROW, duration, wrap};
use crate::options::no_gpu_reason;
use crate::plot;

#[derive(clap::Args)]
pub struct RunArgs {
    /// The GPU whose roofline the figures are read against: on a GPU, the one found by name
    /// (this flag overrides it); on the emulator, the device the modelled figures are for.
    #[arg(long, default_value = "h100")]
    device: String,
    /// Run only the kernels whose name contains one of these (comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Leave out the kernels whose name contains one of these (comma-separated).
    #[arg(long, value_delimiter = ',')]
    skip: Vec<String>,
    /// Problem sizes: `full` (hundreds of MB, the default on a GPU) or `small` (the emulator's
    /// default; on a GPU, a quick correctness pass).
    #[arg(long, value_parser = ["full", "small"])]
    scale: Option<String>,
    /// Where to write the JSON report (default: target/xtask/run.json).
    #[arg(long)]
    pub(crate) json: Option<std::path::PathBuf>,
    /// Timed runs per kernel on a GPU.
    #[arg(long, default_value_t = 20, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    runs: usize,
    /// Leave out the performance model's predictions (`predicted`, `limiter`): on the
    /// emulator each row's sample at the GPU shape takes up to a few seconds here.
    #[arg(long)]
    no_predict: bool,
    /// Seconds one case may take before its process is stopped and the case reported as hung.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    case_timeout: u64,
    /// Every column (time at the bound, GB/s, TFLOP/s, FLOP/B, % of roofline) and each check in
    /// full, one line a row however long; the default table fits 120 columns.
    #[arg(long)]
    wide: bool,
    /// With `--only`: run again on every save under kernels/src, rebuilding only the project's
    /// PTX module for one architecture; the rows run on the PTX backend, nothing recompiled.
    #[arg(long)]
    watch: bool,
}

/// The cases of a run, executed in a child process of `cargo xtask run` (hidden subcommand
/// `run-cases`): one JSON line per case on stdout. The process stops after a case that may
/// have left the CUDA state broken (a sticky fault), so that the next case starts clean.
#[derive(clap::Args)]
pub struct CasesArgs {
    #[arg(long)]
    device: String,
    #[arg(long)]
    scale: ScaleArg,
    #[arg(long)]
    runs: usize,
    /// Indices into `cases::all()`, run in this order.
    #[arg(long, value_delimiter = ',', required = true)]
    cases: Vec<usize>,
    #[arg(long)]
    no_predict: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ScaleArg {
    Gpu,
    Emulator,
}

/// One row of the report.
#[derive(Serialize, Deserialize)]
struct Row {
    kernel: String,
    shape: String,
    /// `true` when `roofline` holds a GPU measurement, `false` when it is modelled.
    measured: bool,
    timing: Option<Timing>,
    /// Read against the compulsory cost: its `bound_seconds` is the roofline bound.
    roofline: Roofline,
    /// The compulsory cost at the row's shape: bytes that must cross the HBM boundary, FLOPs and
    /// exponentials.
    cost: perf::cost::Cost,
    /// A modelled row whose kernel re-reads what a cache would serve (a tiled GEMM): the time of
    /// every requested byte at the HBM bandwidth, as on a GPU with no cache; `--wide`'s
    /// `no-cache`, not a bound (a prediction may be faster).
    #[serde(default)]
    no_cache_seconds: Option<f64>,
    /// The emulator's counts for one run (emulator only).
    counters: Option<serde_json::Value>,
    /// Seconds the emulator took on this machine's CPUs (emulator only).
    emulator_seconds: Option<f64>,
    check: Result<String, String>,
    /// The case's distinct launches, as `kernel<<<grid, block, shared>>>`.
    launches: Vec<String>,
    /// The vendor operation this row is read against, at its shape and element type, or why
    /// there is none.
    baseline: Result<Baseline, String>,
    /// The performance model's prediction at the GPU shape on the run's device (the source
    /// emulator's and the PTX backend's runs), or why there is none.
    #[serde(default)]
    predicted: Option<Result<perf::model::Prediction, String>>,
    /// A published measurement that this row's prediction is known to disagree with
    /// (`perf::published`), with its source; set by the parent process from `predicted`.
    #[serde(default, skip_deserializing)]
    published: Option<&'static perf::published::Disagreement>,
}

impl Row {
    /// The known disagreement of this row's prediction with a published measurement, on the
    /// device it was predicted for.
    fn disagreement(&self) -> Option<&'static perf::published::Disagreement> {
        match &self.predicted {
            Some(Ok(p)) => perf::published::disagreement(&self.kernel, &p.device),
            _ => None,
        }
    }
}

#[derive(Serialize)]
struct Report<'a> {
    backend: String,
    roofline_device: &'a GpuSpec,
    rows: Vec<Row>,
    /// Kernels that could not be run at all (a launch or setup error, a fault, a crash), with why.
    failures: Vec<Failure>,
    /// Whether every selected case has its row or failure. The report is rewritten after each
    /// case, so a run that was interrupted, killed or ran out of time leaves `false` here, with
    /// its finished rows and the cases it did not reach in `not_run`.
    complete: bool,
    /// The kernels of the selected cases still to run, in order.
    not_run: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct Failure {
    kernel: String,
    error: String,
    /// The launches of the case, oldest first, as `kernel<<<grid, block, shared>>>`: on a GPU a
    /// fault surfaces at a later call than the launch that caused it, so all are named.
    launches: Vec<String>,
}

/// How a child's result line starts (`CaseResult`'s first field).
const RESULT_START: &str = "{\"index\":";

/// What a child process says of one case.
#[derive(Serialize, Deserialize)]
struct CaseResult {
    index: usize,
    outcome: Result<Row, Failure>,
    /// The case may have left the process's CUDA state broken: the process runs nothing more.
    poisoned: bool,
}

pub fn run(args: &RunArgs) -> Result<(), String> {
    if args.watch {
        return crate::watch::watch_run(&args.only);
    }
    let rt = Runtime::from_env().map_err(|e| e.to_string())?;
    let spec = GpuSpec::find(&args.device).ok_or_else(|| unknown_device(&args.device))?;
    let scale = match (args.scale.as_deref(), rt.is_gpu()) {
        (Some("small"), _) | (None, false) => Scale::Emulator,
        _ => Scale::Gpu,
    };
    if scale == Scale::Gpu && !rt.is_gpu() {
        return Err("--scale full needs a GPU: the emulator runs the small sizes".into());
    }
    crate::options::check_names("--only", &args.only)?;
    crate::options::check_names("--skip", &args.skip)?;
    let all = cases::all();
    let (named, selected) = select(args, &rt, &all)?;
    print_header(args, &rt, spec, &all, &named, &selected);
    // The cases run in child processes, on the backend found here: this process lets its go.
    let (backend, is_gpu) = (rt.device_name(), rt.is_gpu());
    drop(rt);
    let bar = ProgressBar::new(selected.len() as u64)
        .with_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").unwrap());
    let path = match &args.json {
        Some(path) => path.clone(),
        None => report_dir()?.join("run.json"),
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let _lock = crate::atomic::lock(&path)?;
    let report = Report {
        backend,
        roofline_device: spec,
        rows: Vec::new(),
        failures: Vec::new(),
        complete: false,
        not_run: selected
            .iter()
            .map(|&i| all[i].kernel.to_string())
            .collect(),
    };
    let child = ChildArgs {
        device: &args.device,
        backend: child_backend(is_gpu),
        scale: match scale {
            Scale::Gpu | Scale::Model { .. } => ScaleArg::Gpu,
            Scale::Emulator => ScaleArg::Emulator,
        },
        runs: args.runs,
        timeout: Duration::from_secs(args.case_timeout),
        predict: !args.no_predict,
    };
    let report = run_selected(&child, &all, &selected, report, &bar, &path)?;
    print_results(&report, spec, is_gpu, args.wide);
    println!("JSON report: {}", path.display());
    charts(&report, &path, spec, is_gpu)?;
    println!("how each kernel's bytes move, per source line: cargo xtask inspect <kernel>");
    failed_kernels(&report)
}

/// The cases `--only` and `--skip` name (`named`) and, of those, the ones this backend runs
/// (`selected`), as indices in `all`; an error when none is left.
fn select(
    args: &RunArgs,
    rt: &Runtime,
    all: &[cases::CaseSpec],
) -> Result<(Vec<usize>, Vec<usize>), String> {
    let named: Vec<usize> = (0..all.len())
        .filter(|&i| {
            let matches = |list: &[String]| list.iter().any(|o| all[i].kernel.contains(o.as_str()));
            (args.only.is_empty() || matches(&args.only)) && !matches(&args.skip)
        })
        .collect();
    let selected: Vec<usize> = named
        .iter()
        .copied()
        .filter(|&i| cases::runs_on(rt, &all[i]))
        .collect();
    if selected.is_empty() {
        return Err(no_kernel_left(args, all, &named, rt));
    }
    Ok((named, selected))
}

/// The run's first lines: the device and backend, why there is no GPU, and the named kernels
/// this backend leaves out.
fn print_header(
    args: &RunArgs,
    rt: &Runtime,
    spec: &GpuSpec,
    all: &[cases::CaseSpec],
    named: &[usize],
    selected: &[usize],
) {
    if args.wide {
        println!("{}", wide_first_line(rt, spec, args.runs));
    } else {
        println!("{}", wrap(&first_line(rt, spec, args.runs), NARROW));
        if !rt.is_gpu() {
            println!(
                "{}",
                wrap(&format!("(No GPU: {}.)", no_gpu_reason()), NARROW)
            );
        }
    }
    let left_out: Vec<&str> = named
        .iter()
        .filter(|i| !selected.contains(i))
        .map(|&i| all[i].kernel)
        .collect();
    if let Some(note) = cases::left_out(rt, &left_out) {
        println!("{note}");
    }
}

/// Runs the selected cases in child processes, the report rewritten at `path` after each.
fn run_selected<'a>(
    child: &ChildArgs,
    all: &[cases::CaseSpec],
    selected: &[usize],
    mut report: Report<'a>,
    bar: &ProgressBar,
    path: &std::path::Path,
) -> Result<Report<'a>, String> {
    let write = |report: &Report| {
        let json = serde_json::to_string_pretty(report).expect("report serialises");
        crate::atomic::write(path, json)
    };
    write(&report)?;
    run_isolated(child, all, selected, |result| {
        bar.set_message(all[result.index].kernel);
        match result.outcome {
            Ok(mut row) => {
                row.published = row.disagreement();
                report.rows.push(row)
            }
            // Reported, and the run goes on: one broken kernel must not cost the others' figures.
            Err(failure) => {
                let message = failure_lines(&failure);
                if bar.is_hidden() {
                    eprintln!("{message}");
                } else {
                    bar.println(message);
                }
                report.failures.push(failure);
            }
        }
        // Written after every case, so a run stopped at its time budget keeps what it has.
        report.not_run.remove(0);
        bar.inc(1);
        write(&report)
    })?;
    report.complete = true;
    write(&report)?;
    bar.finish_and_clear();
    Ok(report)
}

/// The table, the published rows' notes, the failures, and the sweeps of the lessons the rows
/// belong to.
fn print_results(report: &Report, spec: &GpuSpec, is_gpu: bool, wide: bool) {
    print!("{}", table(&report.rows, is_gpu, wide));
    print!("{}", published_notes(&report.rows));
    for failure in &report.failures {
        println!("{}", failure_lines(failure));
    }
    // The sweeps of the lessons the run's rows belong to: attention's (a row of its dimensions),
    // and decode's (the GEMV and decode attention).
    let ran = |specs: &[&registry::Spec]| {
        let ran = |s: &&registry::Spec| report.rows.iter().any(|r| r.kernel == s.name);
        specs.iter().any(ran)
    };
    let attention: Vec<&registry::Spec> = registry::all()
        .iter()
        .copied()
        .filter(|s| s.dims == kernels::attention::DIMS)
        .collect();
    if ran(&attention) {
        attention_sweep(&report.rows, spec);
    }
    use kernels::decode::{DECODE_ATTENTION_BF16, DECODE_ATTENTION_PAGED_BF16, GEMV_BF16};
    if ran(&[
        &GEMV_BF16,
        &DECODE_ATTENTION_BF16,
        &DECODE_ATTENTION_PAGED_BF16,
    ]) {
        crate::decode::sweeps(spec);
    }
}

/// The roofline chart beside the JSON report at `path`, and the model's per-pipe chart where
/// there are predictions.
fn charts(
    report: &Report,
    path: &std::path::Path,
    spec: &GpuSpec,
    is_gpu: bool,
) -> Result<(), String> {
    // `roofline.svg` beside `run.json`; `headline-roofline.svg` beside `headline.json`, so that the
    // bundle's several runs keep their own charts.
    let svg = match path.file_stem().and_then(|s| s.to_str()) {
        Some("run") | None => path.with_file_name("roofline.svg"),
        Some(stem) => path.with_file_name(format!("{stem}-roofline.svg")),
    };
    // One point per kernel (its first, headline shape): a sweep's points would sit on each other.
    let mut seen = std::collections::HashSet::new();
    let points: Vec<_> = report
        .rows
        .iter()
        .filter(|r| seen.insert(r.kernel.as_str()))
        .map(|r| {
            // A modelled row sits at the model's prediction where it has one, with its bound
            // above it; a measured row at its measurement.
            let flops = r.cost.flops as f64;
            let bound = flops / r.roofline.bound_seconds.max(f64::MIN_POSITIVE);
            match &r.predicted {
                Some(Ok(p)) if !r.measured && p.seconds > 0.0 => predicted_point(r, p, spec),
                _ => plot::RooflinePoint {
                    label: r.kernel.clone(),
                    intensity: r.roofline.intensity,
                    flops_per_second: r.roofline.flops_per_second,
                    bound: r.measured.then_some(bound),
                    unit: r.cost.unit,
                    measured: r.measured,
                },
            }
        })
        .collect();
    // A modelled point above its own roof would be a prediction faster than the model's own
    // DRAM or compute time: a bug in the model or in the placement, never a picture to draw.
    if let Some(p) = points
        .iter()
        .find(|p| !p.measured && p.bound.is_some_and(|b| p.flops_per_second > b * 1.001))
    {
        return Err(format!(
            "{}: predicted {:.3e} FLOP/s, above its roof ({:.3e}) at intensity {:.3}",
            p.label,
            p.flops_per_second,
            p.bound.unwrap_or_default(),
            p.intensity
        ));
    }
    let predicted = report
        .rows
        .iter()
        .any(|r| matches!(r.predicted, Some(Ok(_))));
    let how = if is_gpu {
        format!("measured on {}", report.backend)
    } else if predicted {
        "MODELLED: the performance model's predictions, bounds as x (no GPU)".to_string()
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
    let pipe_rows: Vec<plot::PipeRow> = report
        .rows
        .iter()
        .filter_map(|r| match &r.predicted {
            Some(Ok(p)) if p.seconds > 0.0 => Some(pipe_row(r, p)),
            _ => None,
        })
        .collect();
    if !pipe_rows.is_empty() {
        let pipes_svg = svg.with_file_name(
            svg.file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("roofline.svg")
                .replace("roofline", "model"),
        );
        plot::pipes(
            &pipes_svg,
            &pipe_rows,
            &format!(
                "{}: what each resource would take, as a share of the predicted time (MODELLED)",
                spec.name
            ),
        )?;
        println!("the model's per-pipe chart: {}", pipes_svg.display());
    }
    Ok(())
}

/// `Ok` when every row checked and no case failed; else the kernels that did not.
fn failed_kernels(report: &Report) -> Result<(), String> {
    let failed: Vec<_> = report
        .rows
        .iter()
        .filter(|r| r.check.is_err())
        .map(|r| r.kernel.as_str())
        .chain(report.failures.iter().map(|f| f.kernel.as_str()))
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "failed or differ from the CPU reference: {failed:?}"
        ))
    }
}

/// A predicted row for the per-pipe chart: each resource's time summed over the row's launches,
/// over the predicted time.
fn pipe_row(r: &Row, p: &perf::model::Prediction) -> plot::PipeRow {
    let fractions = perf::model::Limiter::ALL
        .iter()
        .map(|&limiter| {
            let seconds: f64 = p
                .launches
                .iter()
                .flat_map(|l| &l.components)
                .filter(|c| c.limiter == limiter)
                .map(|c| c.seconds)
                .sum();
            (limiter.name(), seconds / p.seconds)
        })
        .collect();
    let phases = p
        .launches
        .iter()
        .filter_map(|l| l.phases)
        .reduce(|a, b| (a.0 + b.0, a.1 + b.1))
        .map(|(product, softmax)| (product / p.seconds, softmax / p.seconds));
    plot::PipeRow {
        label: format!("{} {}", r.kernel, r.shape),
        fractions,
        limiter: p.limiter.name(),
        phases,
    }
}

/// A failed case as the run prints it: kernel, error, then each launch of the case.
fn failure_lines(failure: &Failure) -> String {
    let mut text = format!("{}: FAILED: {}", failure.kernel, failure.error);
    for launch in &failure.launches {
        text.push_str(&format!("\n    launched: {launch}"));
    }
    text
}

/// The error of a selection that leaves no case: what the filters matched (`named`) and why
/// those do not run here, or that they matched nothing, with every kernel's name, once each.
fn no_kernel_left(
    args: &RunArgs,
    all: &[cases::CaseSpec],
    named: &[usize],
    rt: &Runtime,
) -> String {
    let mut seen = std::collections::HashSet::new();
    let names: Vec<_> = all
        .iter()
        .map(|c| c.kernel)
        .filter(|k| seen.insert(*k))
        .collect();
    let mut filters = Vec::new();
    if !args.only.is_empty() {
        filters.push(format!("--only {}", args.only.join(",")));
    }
    if !args.skip.is_empty() {
        filters.push(format!("--skip {}", args.skip.join(",")));
    }
    let filters = filters.join(" ");
    let mut matched: Vec<_> = named.iter().map(|&i| all[i].kernel).collect();
    matched.dedup();
    if !matched.is_empty() {
        return format!(
            "{filters} selects {}, which cannot run on {} (the wgmma kernels need sm_90a: a Hopper GPU, or KERNELS_PTX_ARCH=sm_90a on the PTX backend)",
            matched.join(", "),
            rt.device_name()
        );
    }
    format!(
        "{filters} leaves no kernel; the kernels are: {}",
        names.join(", ")
    )
}

/// The backend a child runs on: the one `KERNELS_BACKEND` names, or under `auto` the one this
/// process found, so that a child never falls back to the emulator at GPU sizes.
fn child_backend(is_gpu: bool) -> String {
    match std::env::var(host::runtime::BACKEND_VAR).as_deref() {
        Ok("") | Ok("auto") | Err(_) if is_gpu => "gpu".to_string(),
        Ok("") | Ok("auto") | Err(_) => "emulator".to_string(),
        Ok(named) => named.to_string(),
    }
}

/// How the parent starts its child processes.
struct ChildArgs<'a> {
    device: &'a str,
    /// `KERNELS_BACKEND` for the child.
    backend: String,
    scale: ScaleArg,
    runs: usize,
    timeout: Duration,
    predict: bool,
}

/// Runs the `selected` cases in child processes, in order, handing each case's result to
/// `record` as it comes. One child runs case after case until one poisons it (a driver error),
/// crashes it or hangs past the timeout; that case is reported as failed with why, and a fresh
/// child goes on with the next. So a GPU fault costs one row, and the emulator's run pays for one
/// process start, not one per case.
fn run_isolated(
    child: &ChildArgs,
    all: &[cases::CaseSpec],
    selected: &[usize],
    mut record: impl FnMut(CaseResult) -> Result<(), String>,
) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let mut pending = std::collections::VecDeque::from(selected.to_vec());
    while !pending.is_empty() {
        let list: Vec<String> = pending.iter().map(usize::to_string).collect();
        let scale = match child.scale {
            ScaleArg::Gpu => "gpu",
            ScaleArg::Emulator => "emulator",
        };
        let mut process = std::process::Command::new(&exe)
            .args(["run-cases", "--device", child.device, "--scale", scale])
            .args([
                "--runs",
                &child.runs.to_string(),
                "--cases",
                &list.join(","),
            ])
            .args((!child.predict).then_some("--no-predict"))
            .env(host::runtime::BACKEND_VAR, &child.backend)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        let stdout = process.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut lost: Option<String> = None;
        while let Some(&index) = pending.front() {
            match rx.recv_timeout(child.timeout) {
                // A tool the run is wrapped in (a profiler, a sanitizer) may write here too.
                Ok(Ok(line)) if !line.starts_with(RESULT_START) => eprintln!("{line}"),
                Ok(Ok(line)) => {
                    let result: CaseResult = match serde_json::from_str(&line) {
                        Ok(r) => r,
                        Err(e) => {
                            lost = Some(format!("its process wrote an unreadable result ({e})"));
                            break;
                        }
                    };
                    if result.index != index {
                        lost = Some(format!("its process reported case {}", result.index));
                        break;
                    }
                    pending.pop_front();
                    let poisoned = result.poisoned;
                    record(result)?;
                    if poisoned {
                        break;
                    }
                }
                Ok(Err(e)) => {
                    lost = Some(format!("its process's output could not be read ({e})"));
                    break;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    lost = Some(format!(
                        "no result within {} s: its process was stopped (a hang?)",
                        child.timeout.as_secs()
                    ));
                    break;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = process.wait().map_err(|e| e.to_string())?;
                    lost = Some(format!("its process ended without a result ({status})"));
                    break;
                }
            }
        }
        // Whatever the child was doing, it does no more: a poisoned or lost process is not reused.
        let _ = process.kill();
        let _ = process.wait();
        if let Some(why) = lost {
            let index = pending.pop_front().expect("the case in flight");
            record(CaseResult {
                index,
                outcome: Err(Failure {
                    kernel: all[index].kernel.to_string(),
                    error: why,
                    launches: Vec::new(),
                }),
                poisoned: true,
            })?;
        }
    }
    Ok(())
}

/// `xtask run-cases`: the child's side of [`run_isolated`].
pub fn run_cases(args: &CasesArgs) -> Result<(), String> {
    // A child outlives nothing: when the parent ends (Ctrl-C, a kill, its own error), so does
    // the case it was running, hung or not.
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number and touches no memory.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    }
    let rt = Runtime::from_env().map_err(|e| e.to_string())?;
    let spec = GpuSpec::find(&args.device).ok_or_else(|| unknown_device(&args.device))?;
    let scale = match args.scale {
        ScaleArg::Gpu => Scale::Gpu,
        ScaleArg::Emulator => Scale::Emulator,
    };
    let all = cases::all();
    // This process's rows share one budget of emulated device calls for their predictions.
    let predictions = (!args.no_predict).then(host::predict::RunBudget::default);
    let mut out = std::io::stdout().lock();
    for &index in &args.cases {
        let case = all
            .get(index)
            .ok_or_else(|| format!("no case {index}: there are {}", all.len()))?;
        host::runtime::take_launches();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_case(&rt, case, scale, spec, args.runs, predictions.as_ref())
        }));
        // The case's buffers are freed by now: a deferred error is blamed on this case.
        let settled = rt.settle();
        let launches: Vec<String> = host::runtime::take_launches()
            .iter()
            .map(|l| l.to_string())
            .collect();
        let failure = |error: String, launches| Failure {
            kernel: case.kernel.to_string(),
            error,
            launches,
        };
        let (outcome, poisoned) = match (result, settled) {
            (Ok(Ok(row)), Ok(())) => (Ok(Row { launches, ..row }), false),
            (Ok(Ok(_)), Err(e)) => (Err(failure(format!("after the case: {e}"), launches)), true),
            (Ok(Err(e)), settled) => {
                let poisoned = e.poisons_process() || settled.is_err();
                (Err(failure(e.to_string(), launches)), poisoned)
            }
            // A panic is this case's failure; the process, in an unknown state, is not reused.
            (Err(panic), _) => {
                let why = format!("panicked: {}", panic_message(&*panic));
                (Err(failure(why, launches)), true)
            }
        };
        let line = serde_json::to_string(&CaseResult {
            index,
            outcome,
            poisoned,
        })
        .expect("a result serialises");
        writeln!(out, "{line}")
            .and_then(|()| out.flush())
            .map_err(|e| format!("cannot report to the parent process: {e}"))?;
        if poisoned {
            break;
        }
    }
    Ok(())
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

fn unknown_device(name: &str) -> String {
    let known: Vec<_> = perf::specs::GPUS
        .iter()
        .chain([&perf::specs::RTX_A6000])
        .map(|g| g.key)
        .collect();
    format!("unknown device `{name}`; known: {}", known.join(", "))
}

fn run_case(
    rt: &Runtime,
    spec_case: &cases::CaseSpec,
    scale: Scale,
    spec: &GpuSpec,
    runs: usize,
    predictions: Option<&host::predict::RunBudget>,
) -> host::Result<Row> {
    let mut case = spec_case.build(rt, scale)?;
    let row = if rt.is_gpu() {
        let timing = bench::time_gpu(rt, BenchConfig { warmup: 3, runs }, || {
            (case.launch)(rt).map(|_| ())
        })?;
        Row {
            kernel: case.kernel.to_string(),
            shape: case.shape.clone(),
            measured: true,
            timing: Some(timing),
            roofline: Roofline::new(&case.cost, spec, timing.median),
            cost: case.cost,
            no_cache_seconds: None,
            counters: None,
            emulator_seconds: None,
            check: (case.check)(rt),
            launches: Vec::new(),
            baseline: baseline::for_row(case.kernel, &case.shape),
            predicted: None,
            published: None,
        }
    } else {
        let start = Instant::now();
        let counters = (case.launch)(rt)?;
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
        // From the run's own backend: the PTX's counts add the issue limit.
        let sampled = predictions.and_then(|budget| {
            let program = match rt.backend() {
                Backend::Emulator(_) => None,
                Backend::Ptx(device) => Some(device.program()),
                Backend::Cuda(_) => return None,
            };
            Some(host::predict::within_budget(
                crate::nvidia_tools::resources(),
                budget,
                spec_case,
                &case.gpu.shape,
                spec,
                program,
            ))
        });
        let predicted = sampled.as_ref().map(|s| {
            let s = s.as_ref().map_err(Clone::clone)?;
            let machine = perf::model::Machine::find(spec.key)
                .ok_or_else(|| format!("no model of {}", spec.name))?;
            host::predict::predict(&machine, s)
        });
        // A prediction below the roofline bound, on any device, fails the row.
        if let Some(Ok(s)) = &sampled
            && let Some(breach) = host::predict::below_the_roofline(s, &case.gpu.cost)
        {
            check = Err(breach);
        }
        Row {
            kernel: case.kernel.to_string(),
            shape: case.gpu.shape.clone(),
            measured: false,
            timing: None,
            roofline: Roofline::modelled(&case.gpu.cost, spec),
            cost: case.gpu.cost,
            no_cache_seconds: case.gpu.no_cache.map(|c| c.bound_seconds(spec)),
            counters: counters.map(|c| serde_json::to_value(c).expect("counters serialise")),
            emulator_seconds: Some(seconds),
            check,
            launches: Vec::new(),
            baseline: baseline::for_row(case.kernel, &case.gpu.shape),
            predicted,
            published: None,
        }
    };
    Ok(row)
}

/// A predicted row's point on the roofline chart. Its x is the intensity of the bytes the model
/// charged to DRAM, not of the cost model's compulsory bytes: a kernel whose re-reads L2 serves
/// (the naive GEMM's) moves far fewer bytes across the HBM boundary than its loads, and placed at
/// the loads' intensity its predicted FLOP/s would sit above the memory roof. At the model's
/// DRAM bytes the point is under both roofs by construction (the predicted time is at least the
/// DRAM time and the FLOPs' time), and its cross marks the roof at that intensity.
fn predicted_point(r: &Row, p: &perf::model::Prediction, spec: &GpuSpec) -> plot::RooflinePoint {
    let flops = r.cost.flops as f64;
    let dram: f64 = p.launches.iter().map(|l| l.totals.dram_bytes).sum();
    // The row's cost with the model's DRAM bytes in place of its own, on the chart's two roofs.
    let (intensity, bound_seconds) = if dram > 0.0 {
        let charged = perf::cost::Cost {
            bytes_read: dram as u64,
            bytes_written: 0,
            exps: 0,
            ..r.cost
        };
        (charged.intensity(), charged.bound_seconds(spec))
    } else {
        (r.roofline.intensity, r.roofline.bound_seconds)
    };
    plot::RooflinePoint {
        label: r.kernel.clone(),
        intensity,
        flops_per_second: flops / p.seconds,
        bound: Some(flops / bound_seconds.max(f64::MIN_POSITIVE)),
        unit: r.cost.unit,
        measured: false,
    }
}

/// The run's first line: in one sentence, what runs where and what the times are.
fn first_line(rt: &Runtime, spec: &GpuSpec, runs: usize) -> String {
    match rt.backend() {
        Backend::Emulator(_) => format!(
            "Every kernel runs on the CPU emulator at a small size, checked against its CPU reference; the times are MODELLED for {} at the GPU shapes shown.",
            spec.name
        ),
        Backend::Ptx(ptx) => format!(
            "Every kernel's PTX ({}) runs on the CPU emulator at a small size, checked against its CPU reference; the times are MODELLED for {} at the GPU shapes shown.",
            ptx.program().origin,
            spec.name
        ),
        Backend::Cuda(_) => wide_first_line(rt, spec, runs),
    }
}

/// The first line of `--wide`: the backend, why there is no GPU, and every column's meaning.
fn wide_first_line(rt: &Runtime, spec: &GpuSpec, runs: usize) -> String {
    match rt.backend() {
        Backend::Emulator(_) => format!(
            "No GPU: {}. Running every kernel on the CPU emulator at small sizes (checked against the CPU reference and its cost model); at the GPU shapes shown, for {}: bound is the roofline bound (compulsory bytes, FLOPs, exponentials), no-cache the time of every byte a re-reading kernel requests (not a bound), predicted the performance model's time, GB/s, TFLOP/s and % of bound at that time; all MODELLED.",
            no_gpu_reason(),
            spec.name
        ),
        Backend::Ptx(ptx) => format!(
            "No GPU: {}. Running every kernel's PTX ({}) on the CPU emulator at small sizes (checked against the CPU reference and its cost model); at the GPU shapes shown, for {}: bound is the roofline bound (compulsory bytes, FLOPs, exponentials), no-cache the time of every byte a re-reading kernel requests (not a bound), predicted the performance model's time, GB/s, TFLOP/s and % of bound at that time; all MODELLED.",
            no_gpu_reason(),
            ptx.program().origin,
            spec.name
        ),
        Backend::Cuda(gpu) => format!(
            "GPU: {} ({}), measured with CUDA events, median of {} runs after 3 warm-ups, L2 flushed between runs; roofline of {}.",
            gpu.name(),
            gpu.arch().name(),
            runs,
            spec.name
        ),
    }
}

/// What follows a limiter whose prediction a published measurement contradicts
/// ([`published_notes`] names it under the table).
const DISAGREES: &str = " *";

/// A predicted row's limiter, marked where a published measurement disagrees with the prediction.
fn limiter(r: &Row, p: &perf::model::Prediction) -> String {
    let mark = if r.published.is_some() { DISAGREES } else { "" };
    format!("{}{mark}", p.limiter.name())
}

/// Under the table, one note for each kernel whose row is marked: the published measurement the
/// prediction disagrees with, and its source, wrapped to [`NARROW`] columns.
fn published_notes(rows: &[Row]) -> String {
    let mut seen = Vec::new();
    let mut out = String::new();
    for d in rows.iter().filter_map(|r| r.published) {
        if !seen.contains(&d.kernel) {
            seen.push(d.kernel);
            out += &wrap(&format!("{} {}", DISAGREES.trim(), d.note()), NARROW);
            out.push('\n');
        }
    }
    out
}

/// The run's table: the default one (at most [`NARROW`] columns) or `--wide`'s.
fn table(rows: &[Row], measured: bool, wide: bool) -> String {
    if wide {
        wide_table(rows, measured)
    } else {
        narrow_table(rows, measured)
    }
}

/// The default table: kernel, shape, the roofline's time at the GPU shape and what bounds it,
/// then the model's prediction and limiter (modelled) or the measured time and its share of the
/// roofline (on a GPU), then `ok` or `FAILED`, a failed row followed by its failure on a line of
/// its own, cut to fit. Each column is as wide as its widest entry; `--wide` and the JSON keep
/// the rest.
fn narrow_table(rows: &[Row], measured: bool) -> String {
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            let f = &r.roofline;
            let (time, detail) = if measured {
                (
                    duration(f.seconds),
                    format!("{:.1}%", 100.0 * f.fraction_of_roofline),
                )
            } else {
                match &r.predicted {
                    Some(Ok(p)) => (duration(p.seconds), limiter(r, p)),
                    Some(Err(e)) if e.contains(perf::model::NO_WGMMA) => {
                        ("-".to_string(), "(needs wgmma)".to_string())
                    }
                    Some(Err(_)) => ("-".to_string(), "(not predicted)".to_string()),
                    None => ("-".to_string(), String::new()),
                }
            };
            [
                r.kernel.clone(),
                r.shape.clone(),
                duration(f.bound_seconds),
                Bound::name(f.bound).to_string(),
                time,
                detail,
            ]
        })
        .collect();
    let titles = if measured {
        ["kernel", "shape", "bound", "", "measured", "% of bound"]
    } else {
        ["kernel", "shape", "bound", "", "predicted", "limiter"]
    };
    let width = |i: usize| {
        cells
            .iter()
            .map(|c| c[i].chars().count())
            .chain([titles[i].chars().count()])
            .max()
            .unwrap()
    };
    let w: Vec<usize> = (0..6).map(width).collect();
    let line = |c: [&str; 6], check: &str| {
        let text = format!(
            "{:<w0$} {:<w1$} {:>w2$} {:<w3$} {:>w4$} {:<w5$} {check}",
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            c[5],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3],
            w4 = w[4],
            w5 = w[5]
        );
        text.trim_end().to_string() + "\n"
    };
    let mut out = line(titles, "check");
    for (r, c) in rows.iter().zip(&cells) {
        let c_ref: [&str; 6] = std::array::from_fn(|i| c[i].as_str());
        out += &line(c_ref, if r.check.is_ok() { "ok" } else { "FAILED" });
        if let Err(e) = &r.check {
            let full = format!("    {e}");
            out += &if full.chars().count() <= NARROW {
                full
            } else {
                full.chars().take(NARROW - 1).collect::<String>() + "…"
            };
            out.push('\n');
        }
    }
    out
}

/// `--wide`'s table: beside the bound, the no-cache time (a re-reading kernel's every requested
/// byte at the HBM bandwidth, which is not a bound), then the measured or predicted time read
/// against the compulsory cost (GB/s of compulsory bytes, TFLOP/s, and the bound as a share of
/// the time), the model's limiter and the whole check.
fn wide_table(rows: &[Row], measured: bool) -> String {
    let mut out = String::new();
    // As wide as the longest kernel name, so that the shape column stays aligned.
    let w = rows
        .iter()
        .map(|r| r.kernel.len())
        .max()
        .unwrap_or(0)
        .max(27);
    out += &format!(
        "{:<w$} {:<28} {:>10} {:>10} {:>10} {:>8} {:>9} {:>8} {:<12} {:>10} {:<17}  check\n",
        "kernel",
        "shape",
        "bound",
        "no-cache",
        if measured { "measured" } else { "predicted" },
        "GB/s",
        "TFLOP/s",
        "FLOP/B",
        "bound by",
        "% of bound",
        "limiter"
    );
    let dash = || "-".to_string();
    for r in rows {
        let f = &r.roofline;
        let check = match &r.check {
            Ok(s) => format!("ok: {s}"),
            Err(e) => format!("FAILED: {e}"),
        };
        let (seconds, limiter) = match &r.predicted {
            _ if measured => (Some(f.seconds), String::new()),
            Some(Ok(p)) => (Some(p.seconds), limiter(r, p)),
            Some(Err(e)) if e.contains(perf::model::NO_WGMMA) => {
                (None, "(needs wgmma)".to_string())
            }
            Some(Err(_)) => (None, "(not predicted)".to_string()),
            None => (None, String::new()),
        };
        let at =
            |per: f64, scale: f64| seconds.map_or_else(dash, |t| format!("{:.1}", per / t / scale));
        out += &format!(
            "{:<w$} {:<28} {:>10} {:>10} {:>10} {:>8} {:>9} {:>8.3} {:<12} {:>10} {:<17}  {}\n",
            r.kernel,
            r.shape,
            duration(f.bound_seconds),
            r.no_cache_seconds.map_or_else(dash, duration),
            seconds.map_or_else(dash, duration),
            at(r.cost.bytes() as f64, 1e9),
            at(r.cost.flops as f64, 1e12),
            f.intensity,
            Bound::name(f.bound),
            seconds.map_or_else(dash, |t| format!("{:.1}%", 100.0 * f.bound_seconds / t)),
            limiter,
            check
        );
    }
    out
}

/// The attention chapter's two sweeps over N (batch 4, 16 heads, d = 128): modelled time at the
/// roofline bound of each flow, and device memory against the device's HBM, with the N past
/// which the naive flow no longer fits. Then the gains of fusion and of the tensor cores, each
/// at one data type, from the table.
fn attention_sweep(rows: &[Row], spec: &GpuSpec) {
    use host::ops::attention::{
        AttentionShape, Flow, device_bytes, fused_traffic, max_sequence_len, naive_traffic,
        naive_traffic_of,
    };
    let (batch, heads, d) = (4, 16, 128);
    println!(
        "\nattention over N (batch {batch}, {heads} heads, d = {d}), MODELLED on {} at the roofline bound of the compulsory traffic:",
        spec.name
    );
    println!(
        "{:>8} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}",
        "N",
        "naive f32",
        "fused f32",
        "naive bf16",
        "fused bf16",
        "naive memory",
        "fused memory",
        "naive fits",
        "fused fits"
    );
    let mut n = 1024;
    while n <= 65536 {
        let shape = AttentionShape::new(batch, heads, n, d);
        let naive = Roofline::modelled(&naive_traffic(&shape).compulsory(), spec).seconds;
        let fused_f32 =
            Roofline::modelled(&fused_traffic::<f32>(&shape, false).compulsory(), spec).seconds;
        let naive_bf16 =
            Roofline::modelled(&naive_traffic_of::<half::bf16>(&shape).compulsory(), spec).seconds;
        let fused = Roofline::modelled(
            &fused_traffic::<half::bf16>(&shape, false).compulsory(),
            spec,
        )
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
            "{n:>8} {:>12} {:>12} {:>12} {:>12} {:>9.1} GB {:>9.2} GB {:>10} {:>10}",
            duration(naive),
            duration(fused_f32),
            duration(naive_bf16),
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
    let row = |k: &str| rows.iter().find(|r| r.kernel == k);
    let how = if rows.first().is_some_and(|r| r.measured) {
        "measured"
    } else {
        "modelled"
    };
    // Fusion at each data type that has both flows, naive against fused on the same units: in
    // f32 on the CUDA cores, in bf16 on mma.sync and on wgmma. Then the tensor cores (the fused
    // kernel in bf16 against the same kernel in f32). A product of the two, bf16 fused over f32
    // naive, would mix them.
    for (what, slow, fast) in [
        ("fusion, f32", "attention_naive_f32", "attention_fused_f32"),
        (
            "fusion, bf16",
            "attention_naive_bf16",
            "attention_fused_bf16",
        ),
        (
            "fusion, bf16",
            "attention_naive_bf16",
            "attention_wgmma_bf16",
        ),
    ] {
        if let (Some(s), Some(f)) = (row(slow), row(fast)) {
            // Within the default table's width, continued lines indented.
            let text = wrap(&fusion_gain(what, s, f, how), NARROW - 2);
            println!("{}", text.replace('\n', "\n  "));
        }
    }
    if let (Some(s), Some(f)) = (row("attention_fused_f32"), row("attention_fused_bf16")) {
        println!(
            "gain of tensor cores at N = 4096: attention_fused_bf16 over attention_fused_f32: {:.1}x ({how})",
            s.roofline.seconds / f.roofline.seconds
        );
    }
}

/// One "gain of fusion" line: the fused row's speedup over the naive row at their roofline
/// bounds and, where both are predicted, by the performance model; then the reason, read from
/// the naive row's bound: where it is compute, fusion removes bytes that were not the limit (and
/// a predicted gain comes from the kernels' own limiter); where it is memory (S and P through
/// HBM), fusion removes the limit.
fn fusion_gain(what: &str, naive: &Row, fused: &Row, how: &str) -> String {
    let bound = naive.roofline.seconds / fused.roofline.seconds;
    let (predicted, slower) = match (&naive.predicted, &fused.predicted) {
        (Some(Ok(n)), Some(Ok(f))) if f.seconds > 0.0 => (
            format!(
                ", predicted {:.1}x (limiters: naive {}, fused {})",
                n.seconds / f.seconds,
                n.limiter.name(),
                f.limiter.name()
            ),
            n.seconds < f.seconds,
        ),
        _ => (String::new(), false),
    };
    let reason = match naive.roofline.bound {
        Bound::Compute => {
            "the naive flow is compute-bound already: the bytes of S and P that fusion removes were not its limit"
        }
        _ => {
            "the naive flow is bound by S and P's round trips through HBM, which fusion removes; the fused one by its arithmetic"
        }
    };
    let slower = match (slower, naive.roofline.bound) {
        (true, _) => {
            "; predicted, the fused kernel's own limiter costs more than the naive kernels'"
        }
        // Compute-bound and still faster: the model's gain is on the kernels' instructions.
        (false, Bound::Compute) if !predicted.is_empty() => {
            "; the predicted gain is on the kernels' own limiter, not on S and P's bytes"
        }
        _ => "",
    };
    format!(
        "gain of {what} at N = 4096: {} over {}: bound {bound:.1}x{predicted}, {how}; {reason}{slower}",
        fused.kernel, naive.kernel
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every case's row at its GPU shape, as the emulator's run would make it: a prediction with
    /// each limiter in turn, and every third row failed with a long message.
    fn rows() -> Vec<Row> {
        let rt = Runtime::emulator();
        let spec = GpuSpec::find("h100").unwrap();
        let limiters = perf::model::Limiter::ALL;
        cases::all()
            .iter()
            .filter_map(|c| c.build(&rt, Scale::Emulator).ok())
            .enumerate()
            .map(|(i, case)| Row {
                kernel: case.kernel.to_string(),
                shape: case.gpu.shape.clone(),
                measured: false,
                timing: None,
                roofline: Roofline::modelled(&case.gpu.cost, spec),
                cost: case.gpu.cost,
                no_cache_seconds: case.gpu.no_cache.map(|c| c.bound_seconds(spec)),
                counters: None,
                emulator_seconds: None,
                check: if i % 3 == 2 {
                    Err("counted 123456789 B read / 987654321 B written, cost model says 123456788 / 987654321; and more words than any terminal holds".repeat(2))
                } else {
                    Ok("exact (1048576 values); HBM bytes = cost model".to_string())
                },
                launches: Vec::new(),
                baseline: Err("none".to_string()),
                predicted: Some(match i % (limiters.len() + 1) {
                    0 => Err("over the run's budget".to_string()),
                    k => Ok(perf::model::Prediction {
                        device: "h100".to_string(),
                        seconds: 12.345e-3,
                        limiter: limiters[k - 1],
                        launches: Vec::new(),
                        extended_from: None,
                    }),
                }),
                published: None,
            })
            .map(|mut row| {
                row.published = row.disagreement();
                row
            })
            .collect()
    }

    /// The naive transpose's row, predicted on `device`, as the parent process marks it.
    fn transpose_naive_on(device: &str) -> Row {
        let mut row = rows()
            .into_iter()
            .find(|r| r.kernel == "transpose_naive")
            .expect("the naive transpose's case");
        row.predicted = Some(Ok(perf::model::Prediction {
            device: device.to_string(),
            seconds: 251.6e-6,
            limiter: perf::model::Limiter::L2,
            launches: Vec::new(),
            extended_from: None,
        }));
        row.published = row.disagreement();
        row
    }

    /// A prediction that a published measurement contradicts is marked in both tables and named,
    /// with its source, under them and in the JSON report; on another device it is not.
    #[test]
    fn a_row_the_published_measurement_contradicts_is_flagged_with_its_source() {
        let rows = vec![transpose_naive_on("h100")];
        let d = perf::published::disagreement("transpose_naive", "h100").unwrap();
        for wide in [false, true] {
            let text = table(&rows, false, wide);
            assert!(text.contains("L2 *"), "{text}");
        }
        let notes = published_notes(&rows);
        assert!(
            notes.starts_with("* transpose_naive on the H100"),
            "{notes}"
        );
        for part in [d.published, d.title, d.address] {
            assert!(notes.contains(part), "{part} missing from {notes}");
        }
        assert!(
            notes.lines().all(|l| l.chars().count() <= NARROW),
            "{notes}"
        );
        let json = serde_json::to_value(&rows[0]).unwrap();
        assert_eq!(json["published"]["address"], d.address);
        let elsewhere = vec![transpose_naive_on("a6000")];
        assert!(!table(&elsewhere, false, false).contains('*'));
        assert_eq!(published_notes(&elsewhere), "");
        assert!(serde_json::to_value(&elsewhere[0]).unwrap()["published"].is_null());
    }

    /// The default table fits a terminal of [`NARROW`] columns, modelled or measured, failures
    /// included; `--wide` is the one that does not.
    #[test]
    fn the_default_table_fits_120_columns() {
        let rows = rows();
        assert!(rows.len() >= 40, "only {} cases built", rows.len());
        for measured in [false, true] {
            let text = table(&rows, measured, false);
            let widest = text.lines().map(|l| l.chars().count()).max().unwrap();
            assert!(
                widest <= NARROW,
                "a line of {widest} characters (measured: {measured}):\n{text}"
            );
            let failed = rows.iter().filter(|r| r.check.is_err()).count();
            assert_eq!(text.lines().count(), 1 + rows.len() + failed, "{text}");
            assert!(text.contains("\n    counted 123456789 B read"), "{text}");
        }
        println!("{}", table(&rows, false, false));
        let wide = table(&rows, false, true);
        assert!(wide.lines().any(|l| l.chars().count() > NARROW));
        assert!(wide.contains("ok: exact (1048576 values)"));
    }

    #[test]
    fn the_first_line_wraps_between_words() {
        let text = "a sentence that is longer than its width, in words";
        assert_eq!(
            wrap(text, 20),
            "a sentence that is\nlonger than its\nwidth, in words"
        );
        assert_eq!(wrap("short", 20), "short");
        let rt = Runtime::emulator();
        let line = first_line(&rt, GpuSpec::find("h100").unwrap(), 20);
        assert!(line.chars().count() <= 2 * NARROW, "{line}");
        assert!(
            wrap(&line, NARROW)
                .lines()
                .all(|l| l.chars().count() <= NARROW)
        );
    }

    /// The naive GEMM's re-reads hit L2: its prediction beats the no-cache time of every byte
    /// it requests (which is therefore no bound), never the roofline bound of its compulsory
    /// bytes; at the intensity of the bytes the model sent to DRAM it is under both roofs, its
    /// cross on the roof at that intensity.
    #[test]
    fn a_predicted_point_sits_under_its_roof_at_the_models_dram_intensity() {
        let spec = GpuSpec::find("h100").unwrap();
        let mut row = rows()
            .into_iter()
            .find(|r| r.kernel == "gemm_naive_f32")
            .expect("the naive GEMM's case");
        let flops = row.cost.flops as f64;
        let (seconds, dram_bytes) = (400e-6, 12.6e6);
        let launch = perf::model::LaunchPrediction {
            kernel: row.kernel.clone(),
            seconds,
            limiter: perf::model::Limiter::L1,
            components: Vec::new(),
            totals: perf::model::Totals {
                dram_bytes,
                ..Default::default()
            },
            blocks_per_sm: 8,
            occupancy_limiter: String::new(),
            waves: 1.0,
            tail_factor: 1.0,
            sampled_blocks: 1,
            grid_blocks: 1,
            sample_work: 1,
            phases: None,
        };
        let prediction = perf::model::Prediction {
            device: "h100".to_string(),
            seconds,
            limiter: perf::model::Limiter::L1,
            launches: vec![launch],
            extended_from: None,
        };
        let no_cache = row
            .no_cache_seconds
            .expect("a re-reading kernel's no-cache time");
        assert!(
            seconds < no_cache && seconds >= row.roofline.bound_seconds,
            "{seconds} against no-cache {no_cache} and bound {}",
            row.roofline.bound_seconds
        );
        row.predicted = Some(Ok(prediction.clone()));
        let p = predicted_point(&row, &prediction, spec);
        assert!((p.intensity - flops / dram_bytes).abs() < 1e-9 * p.intensity);
        let roof = (p.intensity * spec.hbm_bandwidth).min(spec.peak_flops(row.cost.unit));
        assert!(
            (p.bound.unwrap() - roof).abs() <= 1e-9 * roof,
            "{:?}",
            p.bound
        );
        assert!(
            p.flops_per_second <= roof,
            "{} above {roof}",
            p.flops_per_second
        );
    }
}
