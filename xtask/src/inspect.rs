//! `cargo xtask inspect <kernel>`: the emulator as a profiler. For one launch of a kernel, per
//! source line of the kernel: global requests and the 32-byte sectors each touches (against the
//! fewest possible), shared requests and their bank-conflict degree; then the launch's totals and
//! what ptxas says of the kernel's registers, shared memory and spills on sm_90. An exercise
//! (`cargo xtask inspect e08_transpose`, or its number) is profiled the same way: your stub as it
//! is now (`--solution`: the reference solution), then its verdict against the target.

use std::time::Instant;

use emu::Profile;
use host::Runtime;
use host::cases::{self, Scale};
use host::exercises::{self, Exercise, ExerciseRuntime, Which};
use host::runtime::Backend;
use ptx::decode::Class;

use crate::sites::{profile_text, site_costs_text};

#[derive(clap::Args)]
pub struct InspectArgs {
    /// The kernel (as `cargo xtask run` names it), e.g. transpose_shared, or an exercise (its
    /// kernel, e.g. e08_transpose, or its number).
    pub(crate) kernel: String,
    /// For an exercise: profile the reference solution instead of your stub.
    #[arg(long)]
    solution: bool,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Run the kernel's PTX on the PTX backend and print its dynamic instruction mix instead
    /// (the module `KERNELS_PTX` / `KERNELS_PTX_ARCH` name; default the embedded sm_90 build).
    #[arg(long)]
    ptx: bool,
    /// The device the performance model predicts for at the kernel's GPU shape (a100, h100,
    /// h200, b200, a6000).
    #[arg(long, default_value = "h100")]
    device: String,
    /// Leave out the performance model's prediction at the GPU shape (a sample of the full-size
    /// launch: seconds to minutes for the attention kernels).
    #[arg(long)]
    no_predict: bool,
    #[command(flatten)]
    pub(crate) deadline: crate::watchdog::Deadline,
}

/// What `inspect` was asked to profile: a registered kernel's case or an exercise.
enum Inspected {
    Case(cases::CaseSpec),
    Exercise(&'static Exercise),
}

/// The registered kernel named `name` (its case), else the exercise it names.
fn lookup(name: &str) -> Result<Inspected, String> {
    let mut all = cases::all();
    if let Some(at) = all.iter().position(|c| c.kernel == name) {
        return Ok(Inspected::Case(all.swap_remove(at)));
    }
    if let Some(e) = exercises::find(name) {
        return Ok(Inspected::Exercise(e));
    }
    let names: Vec<_> = all.iter().map(|c| c.kernel).collect();
    Err(format!(
        "no kernel `{name}`; known: {}; or an exercise (`cargo xtask exercise list`)",
        names.join(", ")
    ))
}

pub fn run(args: &InspectArgs) -> Result<(), String> {
    let inspected = lookup(&args.kernel)?;
    let machine = perf::model::Machine::find(&args.device).ok_or_else(|| {
        let known: Vec<_> = perf::model::Machine::all()
            .iter()
            .map(|m| m.spec.key)
            .collect();
        format!(
            "unknown device `{}`; the model knows {}",
            args.device,
            known.join(", ")
        )
    })?;
    let ptx = crate::options::ptx_requested("inspect", args.ptx)?;
    let spec = match inspected {
        Inspected::Case(spec) => spec,
        Inspected::Exercise(e) => {
            if ptx {
                return Err(format!(
                    "{}: --ptx profiles a registered kernel; an exercise's PTX runs under `cargo xtask exercise {} --watch`",
                    e.kernel, e.number
                ));
            }
            let which = if args.solution {
                Which::Solution
            } else {
                Which::Stub
            };
            print!("{}", exercise_profile(e, which, args.json)?);
            if !args.no_predict && !args.json {
                let (text, _) = crate::exercise::performance(e, which, &machine)?;
                print!("\n{text}");
            }
            return Ok(());
        }
    };
    if args.solution {
        return Err(format!(
            "--solution is for an exercise; `{}` is a registered kernel",
            spec.kernel
        ));
    }
    let spec = &spec;
    if ptx {
        ptx_mix(spec)?;
    } else {
        source_profile(spec, args.json)?;
    }
    if !args.no_predict && !args.json {
        prediction(spec, &machine, ptx)?;
    }
    Ok(())
}

/// An exercise's kernel (`which`: the stub as it is now, or the solution) profiled at the
/// largest of its check's shapes on the source emulator: the per-site table and each site's
/// share of the memory pipeline, as for a registered kernel.
fn exercise_profile(e: &Exercise, which: Which, json: bool) -> Result<String, String> {
    let ert = ExerciseRuntime::emulator(which);
    let shape = *e
        .shapes
        .iter()
        .max_by_key(|&&s| (e.cost)(s).bytes())
        .expect("every exercise checks at least one shape");
    let (launched, observed) = ert
        .with_options(|o| o.profiling = true)
        .observe(|ert| (e.launch)(ert, shape));
    let profile = observed.profile;
    launched.map_err(|err| err.to_string())?;
    if json {
        let out = serde_json::json!({ "kernel": e.kernel, "shape": (e.describe)(shape), "profile": profile });
        return Ok(serde_json::to_string_pretty(&out).expect("serialises") + "\n");
    }
    Ok(format!(
        "{} ({}) at {} on the emulator, profiled:\n\n{}{}",
        e.kernel,
        which.file(e.kernel),
        (e.describe)(shape),
        profile_text(&profile),
        site_costs_text(&profile)
    ))
}

/// The model's breakdown at the GPU shape: what the pipes would take on `machine`.
fn prediction(
    spec: &cases::CaseSpec,
    machine: &perf::model::Machine,
    ptx: bool,
) -> Result<(), String> {
    let program = if ptx {
        Some(host::embedded::program_from_env().map_err(|e| e.to_string())?)
    } else {
        None
    };
    println!(
        "
the performance model at the GPU shape (sampling the full-size launch)..."
    );
    let sampled = host::predict::sample(
        crate::nvidia_tools::resources(),
        spec,
        program,
        None,
        Default::default(),
    )?
    .map_err(|shape| format!("no case at {shape}"))?;
    println!(
        "{}; {} (MODELLED):",
        sampled.header(spec.kernel),
        machine.spec.name
    );
    match host::predict::predict(machine, &sampled) {
        Ok(p) => print!("{}", crate::format::breakdown(&p)),
        Err(why) => println!("  {why}"),
    }
    Ok(())
}

/// The source emulator's per-site profile, the sites' shares of the memory pipeline, the
/// launch's totals and ptxas's resources.
fn source_profile(spec: &cases::CaseSpec, json: bool) -> Result<(), String> {
    let rt = Runtime::emulator();
    let Profiled {
        kernel,
        shape,
        cost,
        counters,
        profile,
        plain,
        profiled,
    } = profile_kernel(&rt, spec)?;
    if json {
        let out = serde_json::json!({ "kernel": kernel, "shape": shape, "counters": counters, "profile": profile });
        println!(
            "{}",
            serde_json::to_string_pretty(&out).expect("serialises")
        );
        return Ok(());
    }
    // Two runs of the same launch differ by a few percent here: a ratio under 1.1 is that noise,
    // not an overhead (nor a profiler that speeds the kernel up).
    let ratio = profiled / plain;
    println!(
        "{} at {} on the emulator: {:.1} ms plain, {:.1} ms profiled ({})\n",
        kernel,
        shape,
        plain * 1e3,
        profiled * 1e3,
        if ratio < 1.1 {
            "no overhead this run can tell from noise".to_string()
        } else {
            format!("{ratio:.1}x")
        }
    );
    print_profile(&profile);
    print!("{}", site_costs_text(&profile));
    println!(
        "\ntotals: global {} B read, {} B written (cost model: {} / {}); shared {} B read, {} B written; {} barriers; {} warp collectives",
        counters.global_read_bytes,
        counters.global_write_bytes,
        cost.bytes_read,
        cost.bytes_written,
        counters.shared_read_bytes,
        counters.shared_write_bytes,
        counters.barriers,
        counters.warp_collectives
    );
    match crate::nvidia_tools::reports(host::embedded::Arch::Sm90) {
        Ok(reports) => {
            for r in reports
                .iter()
                .filter(|r| profile.kernels.contains_key(&r.name))
            {
                println!(
                    "ptxas sm_90 {}: {} registers, {} B static shared, {} B stack, {} B spilled",
                    r.name,
                    r.registers,
                    r.shared_bytes,
                    r.stack_bytes,
                    r.spill_stores + r.spill_loads
                );
            }
        }
        Err(e) => println!("ptxas: unavailable ({e})"),
    }
    Ok(())
}

/// One launch of `spec` on the PTX backend: per kernel, the instructions executed per class,
/// the hottest instructions, and the ratios the chapters reason with.
fn ptx_mix(spec: &cases::CaseSpec) -> Result<(), String> {
    let program = host::embedded::program_from_env().map_err(|e| e.to_string())?;
    let rt = Runtime::ptx(program);
    let Backend::Ptx(device) = rt.backend() else {
        unreachable!()
    };
    let mut case = spec
        .build(&rt, Scale::Emulator)
        .map_err(|e| e.to_string())?;
    let (launched, observed) = rt
        .with_options(|o| o.instruction_mix = true)
        .observe(|rt| (case.launch)(rt));
    let counters = launched
        .map_err(|e| e.to_string())?
        .expect("the PTX backend counts");
    let mix = device.mix(&observed);
    (case.check)(&rt)?;
    println!(
        "{} at {} on the PTX backend ({}): dynamic instruction mix of one run, per thread (a warp-wide `mma` counts 32; guarded-off instructions count, they are issued)\n",
        case.kernel, case.shape, program.origin
    );
    let mut total = 0u64;
    let mut ex2 = 0u64;
    for m in &mix {
        let classes = m.classes();
        let all: u64 = classes.iter().map(|(_, n)| n).sum();
        total += all;
        // The instructions on a tensor-core product's result: the softmax's share of the
        // issue in attention (ptx::analysis::dataflow, docs/model.md), a column where there are any.
        let on_products = m.on_products(None);
        println!("{}: {all} instructions", m.kernel);
        if on_products > 0 {
            println!("  {:<24} {:>14} {:>7} {:>14}", "", "", "", "on products");
        }
        for (class, n) in &classes {
            let on = if on_products > 0 {
                format!(" {:>14}", m.on_products(Some(*class)))
            } else {
                String::new()
            };
            println!(
                "  {:<24} {:>14} {:>6.1}%{on}",
                class.name(),
                n,
                100.0 * *n as f64 / all.max(1) as f64
            );
            if *class == Class::Ex2 {
                ex2 += n;
            }
        }
        // With a line table (a PTX file built with line info, through KERNELS_PTX): per Rust line.
        let mut by_line: std::collections::BTreeMap<(&str, u32), u64> = Default::default();
        for (i, &n) in m.per_instruction.iter().enumerate() {
            if let Some(at) = m.sites[i].source {
                *by_line.entry(at).or_default() += n;
            }
        }
        if !by_line.is_empty() {
            let mut lines: Vec<_> = by_line.into_iter().collect();
            lines.sort_by_key(|&(at, n)| (std::cmp::Reverse(n), at));
            println!("  hottest source lines (the PTX line table's innermost frame):");
            for ((file, line), n) in lines.into_iter().take(8) {
                println!("  {n:>14}  {file}:{line}");
            }
        }
        if on_products > 0 {
            println!(
                "  on the products' results  {on_products:>14} {:>6.1}% (the softmax's share of the issue)",
                100.0 * on_products as f64 / all.max(1) as f64
            );
        }
        let mut hot: Vec<(usize, u64)> = m.per_instruction.iter().copied().enumerate().collect();
        hot.sort_by_key(|&(i, n)| (std::cmp::Reverse(n), i));
        println!("  hottest instructions (their share of the kernel's executed instructions):");
        for (i, n) in hot.into_iter().take(8) {
            let site = &m.sites[i];
            let source = site
                .source
                .map(|(file, line)| format!(" ({file}:{line})"))
                .unwrap_or_default();
            println!(
                "  {n:>14} {:>5.1}%  PTX line {:>6}  {}{source}",
                100.0 * n as f64 / all.max(1) as f64,
                site.line,
                site.text
            );
        }
    }
    let hbm = counters.global_read_bytes + counters.global_write_bytes;
    let shared = counters.shared_read_bytes + counters.shared_write_bytes;
    println!("\nratios over the launch:");
    println!(
        "  PTX instructions per HBM byte   {:.2}",
        total as f64 / hbm.max(1) as f64
    );
    println!(
        "  FLOPs per shared-memory byte    {:.2} ({} executed FLOPs, {shared} shared bytes)",
        counters.flops as f64 / shared.max(1) as f64,
        counters.flops
    );
    if let Some(scores) = scores(case.kernel, &case.shape) {
        println!(
            "  exponentials (ex2) per score    {:.3} ({ex2} ex2 over {scores} scores)",
            ex2 as f64 / scores as f64
        );
    }
    Ok(())
}

/// How many scores (attention: batch x heads x N x N) or elements (softmax: rows x cols) the
/// case's shape string describes, e.g. `1x2x200x128 f32` or `64 x 1000 f32`.
fn scores(kernel: &str, shape: &str) -> Option<u64> {
    let dims: Vec<u64> = shape
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    match (kernel.split('_').next(), dims.as_slice()) {
        (Some("attention"), [b, h, n, _d, ..]) => Some(b * h * n * n),
        (Some("softmax"), [rows, cols, ..]) => Some(rows * cols),
        _ => None,
    }
}

fn print_profile(profile: &Profile) {
    print!("{}", profile_text(profile));
}

/// One kernel's launch on the emulator, run plain and then profiled.
pub(crate) struct Profiled {
    pub kernel: &'static str,
    pub shape: String,
    pub cost: perf::cost::Cost,
    pub counters: emu::LaunchCounters,
    pub profile: Profile,
    /// Wall seconds of the plain and the profiled run.
    pub plain: f64,
    pub profiled: f64,
}

/// Runs `spec`'s case at the emulator's scale on `rt` (an emulator runtime) twice, plain then
/// profiled, and checks it.
pub(crate) fn profile_kernel(rt: &Runtime, spec: &cases::CaseSpec) -> Result<Profiled, String> {
    if !matches!(rt.backend(), Backend::Emulator(_)) {
        return Err("profiling needs the emulator".to_string());
    }
    let mut case = spec.build(rt, Scale::Emulator).map_err(|e| e.to_string())?;
    let start = Instant::now();
    (case.launch)(rt).map_err(|e| e.to_string())?;
    let plain = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let (launched, observed) = rt
        .with_options(|o| o.profiling = true)
        .observe(|rt| (case.launch)(rt));
    let counters = launched
        .map_err(|e| e.to_string())?
        .expect("the emulator counts");
    let profiled = start.elapsed().as_secs_f64();
    let profile = observed.profile;
    (case.check)(rt)?;
    Ok(Profiled {
        kernel: case.kernel,
        shape: case.shape.clone(),
        cost: case.cost,
        counters,
        profile,
        plain,
        profiled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A coalesced global read (one line a request: one clock of the data path) and a 32-way
    /// conflicted shared read (32 wavefronts: 32 clocks), as many requests each: half the issue
    /// each, 1/33 and 32/33 of the data path.
    /// `inspect` takes an exercise by its kernel or number (it said `no kernel e08_transpose`),
    /// and a name that is neither still says what it knows.
    #[test]
    fn an_exercise_can_be_inspected() {
        for name in ["e08_transpose", "8"] {
            assert!(matches!(lookup(name), Ok(Inspected::Exercise(e)) if e.number == 8));
        }
        assert!(matches!(lookup("transpose_shared"), Ok(Inspected::Case(_))));
        let Err(err) = lookup("e99_nothing") else {
            panic!("found")
        };
        assert!(err.contains("exercise list"), "{err}");
        // A padded tile's transpose, profiled at the check's largest shape: its sites by line.
        let e = exercises::find("e08_transpose").unwrap();
        let text = exercise_profile(e, Which::Solution, false).unwrap();
        assert!(text.contains("e08_transpose.rs:"), "{text}");
    }
}
