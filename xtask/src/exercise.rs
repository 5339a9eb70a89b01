//! `cargo xtask exercise <n>`: one exercise of `host::exercises` (docs/exercises.md), checked the
//! way the project checks its own kernels: the output against an independent CPU reference at
//! small shapes with edges, with every emulator check on (the emulator's report is the hint),
//! then the time the performance model predicts at the GPU shape against the exercise's target.

use host::exercises::{self, Exercise, ExerciseRuntime, Failure, Which};
use host::predict::Sampled;
use host::runtime::Backend;
use perf::cost::CostRoofline;
use perf::model::Machine;

#[derive(clap::Args)]
pub struct ExerciseArgs {
    /// The exercise: its number (1, 2, ...) or its name (`block_sum`); `list` lists them.
    pub exercise: String,
    /// Run the reference solution (kernels/src/solutions/) instead of your stub.
    #[arg(long)]
    pub solution: bool,
    /// The device the time is predicted for (default: the target's).
    #[arg(long)]
    pub device: Option<String>,
    /// Check correctness only.
    #[arg(long)]
    pub no_predict: bool,
    #[command(flatten)]
    pub(crate) deadline: crate::watchdog::Deadline,
    /// Check again on every save under kernels/src: only the exercises' PTX module is rebuilt
    /// (about a second) and the check runs on the PTX backend, with nothing recompiled.
    #[arg(long)]
    pub watch: bool,
}

/// The seed of the check's inputs (the property tests draw their own).
const SEED: u64 = 2026;

pub fn run(args: &ExerciseArgs) -> Result<(), String> {
    if args.watch {
        if exercises::find(&args.exercise).is_none() {
            return Err(format!(
                "--watch needs an exercise, not `{}`: `cargo xtask exercise list` lists them",
                args.exercise
            ));
        }
        let module = host::ptx_build::Module::exercises(args.solution);
        return crate::watch::watch(module, &crate::watch::args_without_watch());
    }
    if args.exercise == "list" {
        print!("{}", list(true));
        return Ok(());
    }
    let (text, passed) = render(args)?;
    print!("{text}");
    if passed {
        if let Some(e) = exercises::find(&args.exercise).filter(|_| !args.solution) {
            record_solved(e);
        }
        Ok(())
    } else {
        Err(format!(
            "exercise {} is not solved yet: fix the first failure above, then run it again",
            args.exercise
        ))
    }
}

/// What `cargo xtask exercise` prints, and whether the exercise passed.
pub fn render(args: &ExerciseArgs) -> Result<(String, bool), String> {
    if args.exercise == "list" {
        // Without the progress marks: the docs paste this, and progress is this clone's own.
        return Ok((list(false), true));
    }
    let e = exercises::find(&args.exercise).ok_or_else(|| {
        format!(
            "no exercise `{}`: `cargo xtask exercise list` lists them",
            args.exercise
        )
    })?;
    let which = if args.solution {
        Which::Solution
    } else {
        Which::Stub
    };
    let mut out = format!(
        "exercise {}: {}\n  edit {} (its comment is the statement); read {}\n  why: {}\n",
        e.number,
        e.title,
        which.file(e.kernel),
        e.chapter,
        e.why
    );
    let ert = ExerciseRuntime::from_env(which).map_err(|e| e.to_string())?;
    out += &format!("1. correctness on {}:\n", ert.runtime().device_name());
    for &shape in e.shapes {
        match exercises::check(e, &ert, shape, SEED) {
            Ok(c) => out += &format!("   ok    {}: {}\n", (e.describe)(shape), c.summary),
            Err(f) => {
                out += &format!("   FAIL  {}: {}\n", (e.describe)(shape), hint(&f, e));
                return Ok((out, false));
            }
        }
    }
    if args.no_predict {
        return Ok((out, true));
    }
    let device = args.device.as_deref().unwrap_or(e.target.device);
    let machine = Machine::find(device).ok_or_else(|| format!("unknown device `{device}`"))?;
    let (text, met) = performance(e, which, &machine)?;
    out += &text;
    Ok((out, met))
}

/// One line per exercise; with `progress`, `(solved)` after the ones whose stub passed as it is
/// now.
fn list(progress: bool) -> String {
    let mut out = String::new();
    for e in exercises::all() {
        out += &format!(
            "{:>2}  {:<16} {}{}\n    target: {}\n",
            e.number,
            e.kernel,
            e.title,
            if progress && is_solved(e) {
                "  (solved)"
            } else {
                ""
            },
            target(e)
        );
    }
    out
}

/// Where a passed exercise is recorded: a file per stub holding a hash of the source that passed
/// (an edit after it makes the exercise unsolved again until it passes again).
fn solved_file(e: &Exercise) -> Result<std::path::PathBuf, String> {
    Ok(crate::checkout::report_dir()?.join("solved").join(e.kernel))
}

/// FNV-1a of the stub's source as it is now, or none if it cannot be read.
fn stub_hash(e: &Exercise) -> Option<String> {
    let path = crate::checkout::checkout()
        .ok()?
        .join(Which::Stub.file(e.kernel));
    let text = std::fs::read(path).ok()?;
    let hash = text.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    Some(format!("{hash:016x}"))
}

fn record_solved(e: &Exercise) {
    let (Some(hash), Ok(file)) = (stub_hash(e), solved_file(e)) else {
        return;
    };
    // Progress only: a record that cannot be written leaves the exercise unmarked.
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(file, hash);
}

fn is_solved(e: &Exercise) -> bool {
    let recorded =
        solved_file(e).and_then(|f| std::fs::read_to_string(f).map_err(|e| e.to_string()));
    let recorded = recorded.ok();
    recorded.is_some() && recorded == stub_hash(e)
}

fn target(e: &Exercise) -> String {
    let t = e.target;
    format!(
        "on {} at {}, limited by {} and at least {:.0}% of the roofline's speed (MODELLED)",
        Machine::find(t.device).map_or(t.device, |m| m.spec.name),
        (e.describe)(e.gpu_shape),
        t.limiter.name(),
        100.0 * t.fraction
    )
}

/// The tool that shows an exercise's algorithm step by step, for a wrong value: the exercise's
/// kernel and what to run.
const TOOLS: [(&str, &str); 1] = [(
    "e11_softmax_online",
    "`cargo xtask trace-softmax` steps the online recurrence (running max, rescaled sum) one score at a time: compare each step with your kernel's",
)];

/// A failure as the learner reads it: the emulator's report as is (it names the kernel, the
/// thread, the Rust line and the mistake), a wrong value with what a zero usually means and, for
/// an exercise with one, the tool that replays its algorithm.
fn hint(f: &Failure, e: &Exercise) -> String {
    let tool = TOOLS
        .iter()
        .find(|(kernel, _)| *kernel == e.kernel)
        .map(|(_, tool)| format!("\n         {tool}"))
        .unwrap_or_default();
    match f {
        Failure::Launch(err) => format!("the launch failed:\n         {err}"),
        Failure::Wrong {
            message,
            writer: Some(writer),
            ..
        } => format!("{message}\n         {writer}{tool}"),
        // On a GPU, which records no store.
        Failure::Wrong { message, .. } if message.contains(" is 0, ") => {
            format!("{message}\n         (an output the kernel never wrote reads 0){tool}")
        }
        Failure::Wrong { message, .. } => format!("{message}{tool}"),
        Failure::Counters(s) => s.clone(),
    }
}

/// The kernel at its GPU shape, a sample of its blocks on an emulator, and the model's
/// prediction against the target. The sample runs on the source emulator (the Rust compiled into
/// this binary), or, when the PTX backend runs a module file (`KERNELS_PTX`, as `--watch` sets
/// it), on that module: the kernel as it was just saved.
pub(crate) fn performance(
    e: &Exercise,
    which: Which,
    machine: &Machine,
) -> Result<(String, bool), String> {
    let file = std::env::var_os(host::embedded::PTX_FILE_VAR).filter(|p| !p.is_empty());
    let on_file = match file {
        Some(_) => ExerciseRuntime::from_env(which)
            .ok()
            .filter(|ert| matches!(ert.runtime().backend(), Backend::Ptx(_))),
        None => None,
    };
    let ptx_text = match (&on_file, &file) {
        (Some(_), Some(path)) => Some(
            std::fs::read_to_string(path)
                .map_err(|err| format!("cannot read {}: {err}", path.to_string_lossy()))?,
        ),
        _ => None,
    };
    let ert = on_file.unwrap_or_else(|| ExerciseRuntime::emulator(which));
    let (cost, observed) = ert
        .with_options(whole_plan)
        .observe(|ert| (e.launch)(ert, e.gpu_shape));
    let cost = cost.map_err(|err| err.to_string())?;
    // The kernel's registers, as ptxas assembles the learner's own code: more of them can cost
    // resident blocks, and the model's occupancy reads them.
    let solutions = which == Which::Solution;
    let (resources, registers) =
        match crate::nvidia_tools::exercise_resources(solutions, ptx_text.as_deref()) {
            Ok(list) => (list, "registers from ptxas".to_string()),
            Err(why) => (Vec::new(), format!("registers not counted: {why}")),
        };
    let launches = observed
        .samples
        .into_iter()
        // No instruction mix: the kernels count their own exponentials.
        .map(|sample| host::predict::launch_input(sample, None, &resources))
        .collect();
    let sampled = Sampled {
        shape: (e.describe)(e.gpu_shape),
        backend: ert.runtime().device_name(),
        launches,
        seconds: 0.0,
        resources_note: String::new(),
        extended_from: None,
        work_spent: 0,
        cost,
    };
    let p = host::predict::predict(machine, &sampled)?;
    let bound = cost.bound_seconds(machine.spec);
    let fraction = bound / p.seconds;
    let t = e.target;
    let met = p.limiter == t.limiter && fraction >= t.fraction;
    let mut out = format!(
        "2. predicted time at {} on {} (MODELLED: the model reads a sample of the blocks on the emulator; {registers}):\n",
        sampled.shape, machine.spec.name
    );
    out += &crate::format::breakdown(&p);
    out += &format!(
        "   roofline bound {} ({:?}-bound): the prediction runs at {:.0}% of the roofline's speed (bound / predicted time)\n   target: {}\n   {}\n",
        crate::format::duration(bound),
        cost.bound(machine.spec),
        100.0 * fraction,
        target(e),
        if met {
            "target met".to_string()
        } else if p.limiter != t.limiter {
            format!(
                "target missed: limited by {}, not {}: the breakdown above says which resource the kernel spends its time on",
                p.limiter.name(),
                t.limiter.name()
            )
        } else {
            format!(
                "target missed: {:.0}% of the roofline's speed, the target {:.0}%",
                100.0 * fraction,
                100.0 * t.fraction
            )
        }
    );
    if !met && let Some(site) = costliest_site(e, &ert, p.limiter)? {
        out += &format!(
            "   where the {} time goes: {site} (`cargo xtask inspect {}`: every line)\n",
            p.limiter.name(),
            e.kernel
        );
    }
    Ok((out, met))
}

/// Sampled launches over the whole plan, with no budget: an exercise's launches are small.
fn whole_plan(options: &mut emu::LaunchOptions) {
    options.sampling = Some(emu::Sampling {
        blocks: emu::sample::WHOLE_PLAN,
        budget: None,
        skip: None,
    });
}

/// On a miss, the sampled launch again with the profiler on, and the access site that costs
/// `limiter` most (`inspect::costliest_site`). Only on a miss: profiling every sampled access
/// costs seconds, which a kernel that meets its target need not pay.
fn costliest_site(
    e: &Exercise,
    ert: &ExerciseRuntime,
    limiter: perf::model::Limiter,
) -> Result<Option<String>, String> {
    let profiled = ert.with_options(|o| {
        whole_plan(o);
        o.profiling = true;
    });
    // Only the profile is read: the samples are those the prediction read, again.
    let (again, observed) = profiled.observe(|ert| (e.launch)(ert, e.gpu_shape));
    again.map_err(|err| err.to_string())?;
    Ok(crate::sites::costliest_site(&observed.profile, limiter))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each target is its reference solution's own predicted result rounded down, so every
    /// solution meets it: a change to the model (or to a solution) that moves one past its
    /// target fails here instead of in a learner's hands.
    /// A wrong value in the online softmax points at the tool that replays its recurrence;
    /// one in another exercise gets no such line.
    #[test]
    fn a_wrong_softmax_value_points_at_trace_softmax() {
        let wrong = Failure::Wrong {
            message: "y[3] (row 0) is 0.25, expected 0.125".into(),
            element: Some(3),
            writer: None,
        };
        let softmax = exercises::find("e11_softmax_online").unwrap();
        assert!(hint(&wrong, softmax).contains("cargo xtask trace-softmax"));
        let map = exercises::find("1").unwrap();
        assert!(!hint(&wrong, map).contains("trace-softmax"));
    }

    #[test]
    fn every_solution_meets_its_target() {
        for e in exercises::all() {
            let machine = Machine::find(e.target.device).unwrap();
            let (report, met) = performance(e, Which::Solution, &machine).unwrap();
            assert!(met, "exercise {} ({}):\n{report}", e.number, e.kernel);
            assert!(!report.contains("time goes: "), "{report}");
        }
    }

    /// A performance miss names the line that costs the limiting resource: exercise 8's
    /// solution against a target it misses (a fraction no kernel reaches) names one of its own
    /// accesses, with its share.
    #[test]
    fn a_performance_miss_names_the_line() {
        let e = exercises::find("e08_transpose").unwrap();
        let missed = Exercise {
            target: exercises::Target {
                fraction: 2.0,
                ..e.target
            },
            ..*e
        };
        let machine = Machine::find(e.target.device).unwrap();
        let (report, met) = performance(&missed, Which::Solution, &machine).unwrap();
        assert!(!met, "{report}");
        let line = report
            .lines()
            .find(|l| l.contains("time goes: "))
            .unwrap_or_else(|| panic!("no line named:\n{report}"));
        assert!(
            line.contains("kernels/src/solutions/e08_transpose.rs:") && line.contains("% of the"),
            "{line}"
        );
    }
}
