//! `cargo xtask`: the project's commands.
//!
//! - `run`: every kernel at realistic sizes, checked against its CPU reference, timed on a GPU
//!   or modelled on the CPU emulator, read against the roofline.
//! - `ptxas`: checks the kernels' PTX for barriers under divergent branches, assembles it with
//!   NVIDIA's ptxas and reports registers and spills.
//! - `hierarchy`: each level of the memory pyramid measured, beside the vendor figures.
//! - `roofline`: the roofline calculator.
//! - `trace-softmax`: the online-softmax recurrence, one score at a time.
//! - `inspect`: the emulator as a profiler, per source line of a kernel.
//! - `summarize`: the device bundle's last step, each row beside its vendor baseline.
//! - `emu-speed`: how fast the emulator runs (the README quotes it).
//! - `device-bundle`: the one folder a short GPU window needs.
//! - `new`: a new kernel from a template, one file and one registry line (docs/registry.md).
//! - `figures`: the teaching pictures in docs/img, drawn from the kernels' and emulator's code.
//! - `doc-pastes`: the docs' pastes of `run` and `ptxas` against outputs CI saved.
//! - `exercise`: one exercise (docs/exercises.md): correctness, emulator checks, predicted time;
//!   with `--watch`, again on every save, from the one PTX module it needs (`watch`).
//! - `check`: one entry of any PTX module, with every emulator check on.

mod atomic;
mod baseline;
mod check;
mod checkout;
mod decode;
mod docs;
mod emu_speed;
mod exercise;
mod format;
mod gpu_window;
mod hierarchy;
mod host_code;
mod inspect;
mod kernel_args;
mod machine_code;
mod npy;
mod nvidia_tools;
mod nvrtc;
mod options;
mod plot;
mod predict;
mod ptxas;
mod roofline;
mod run;
mod scaffold;
mod sites;
mod trace_softmax;
mod validate;
mod watch;
mod watchdog;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Run, check and measure the kernels")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run every kernel, check it against its CPU reference and report it against the roofline.
    Run(run::RunArgs),
    /// Start a new kernel from a template: one file, kernels/src/NAME.rs, and one line in
    /// kernels/src/lib.rs's registry (docs/registry.md).
    New(scaffold::NewArgs),
    /// Check the PTX for barriers under divergent branches, then assemble every kernel with ptxas
    /// for sm_90; fail on a finding, an assembly error or any spill.
    Ptxas(ptxas::PtxasArgs),
    /// Measure each level of the memory pyramid on this GPU, beside the vendor figures.
    Hierarchy(hierarchy::HierarchyArgs),
    /// The roofline calculator: FLOPs, HBM bytes, intensity and bound of any operation on any GPU.
    Roofline(roofline::RooflineArgs),
    /// Print the online-softmax recurrence step by step for given scores and values.
    TraceSoftmax(trace_softmax::TraceSoftmaxArgs),
    /// Profile one kernel on the emulator: coalescing, bank conflicts and traffic per source line.
    Inspect(inspect::InspectArgs),
    /// The performance model on one kernel at its GPU shape: predicted time and limiter per
    /// launch and device, with every resource's share (MODELLED, never measured).
    Predict(predict::PredictArgs),
    /// The device bundle's summary: each row beside its vendor baseline at the same shape, the
    /// sanitizers' verdicts per case, and the findings.
    Summarize(gpu_window::summary::SummarizeArgs),
    /// The cases of a run, in this process (what `run` starts in a child process).
    #[command(hide = true)]
    RunCases(run::CasesArgs),
    /// Measure the emulator's own speed (wall time on this machine's CPUs).
    EmuSpeed(emu_speed::EmuSpeedArgs),
    /// Build the folder a GPU window needs (binary, PTX, entry script, baselines); `--check` runs
    /// it here in CPU mode.
    DeviceBundle(gpu_window::bundle::BundleArgs),
    /// Draw the teaching pictures into docs/img from the kernels' and the emulator's own layout
    /// functions (a test fails when a committed one is stale).
    Figures(docs::figures::FiguresArgs),
    /// Check the pastes of `run` and `ptxas` in the docs against outputs saved by CI (the other
    /// commands' pastes are checked by a unit test).
    DocPastes(docs::pastes::DocPastesArgs),
    /// One exercise (docs/exercises.md): your kernel against its CPU reference with every
    /// emulator check on, then its predicted (MODELLED) time against the exercise's target.
    Exercise(exercise::ExerciseArgs),
    /// One entry of any PTX module (NVRTC's output, your own) on the PTX backend with every
    /// emulator check on, with the arguments given; `--list` lists its entries.
    Check(check::CheckArgs),
    /// The model against published measurements (perf::validation): each row's prediction
    /// (MODELLED) beside the published figure and its source, the ratio and the limiter; rank
    /// correlation and directions per progression; median error and worst ratio.
    Validate(validate::ValidateArgs),
}

fn main() -> ExitCode {
    quiet_on_broken_pipe();
    if let Err(e) = exit_with_parent() {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    let args = trace_softmax::escape_minus_infinity(std::env::args());
    let matches = allowing_negative_numbers(Cli::command()).get_matches_from(args);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match &cli.command {
        Command::Run(args) => run::run(args),
        Command::New(args) => scaffold::run(args),
        Command::Ptxas(args) => ptxas::run(args),
        Command::Hierarchy(args) => hierarchy::run(args),
        Command::Roofline(args) => roofline::run(args),
        Command::TraceSoftmax(args) => trace_softmax::run(args),
        Command::Inspect(args) => {
            let _watch = watchdog::arm(args.deadline, &format!("inspect {}", args.kernel));
            inspect::run(args)
        }
        Command::Predict(args) => {
            let _watch = watchdog::arm(args.deadline, &format!("predict {}", args.kernel));
            predict::run(args)
        }
        Command::Summarize(args) => gpu_window::summary::run(args),
        Command::RunCases(args) => run::run_cases(args),
        Command::EmuSpeed(args) => emu_speed::run(args),
        Command::DeviceBundle(args) => gpu_window::bundle::run(args),
        Command::Figures(args) => docs::figures::run(args),
        Command::DocPastes(args) => docs::pastes::run(args),
        // A watch runs until it is stopped; each of its rounds is a process with its own deadline.
        Command::Exercise(args) if args.watch => exercise::run(args),
        Command::Exercise(args) => {
            let _watch = watchdog::arm(args.deadline, &format!("exercise {}", args.exercise));
            exercise::run(args)
        }
        Command::Check(args) => {
            let _watch = watchdog::arm(args.deadline, &format!("check {}", args.file.display()));
            check::run(args)
        }
        Command::Validate(args) => {
            let _watch = watchdog::arm(args.deadline, "validate");
            validate::run(args)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The device bundle's run.sh names itself in `XTASK_EXIT_WITH`: a stage's xtask (and each case
/// process it starts, which inherits the variable) ends when that process is gone. Ctrl-C and
/// SIGTERM reach the stage through run.sh's trap; SIGKILL cannot be trapped, and without this
/// the stage would run on, orphaned, holding the GPU its next window needs.
fn exit_with_parent() -> Result<(), String> {
    const VAR: &str = "XTASK_EXIT_WITH";
    let Some(value) = std::env::var_os(VAR) else {
        return Ok(());
    };
    let value = value.to_string_lossy();
    let pid = value
        .trim()
        .parse::<i32>()
        .ok()
        .filter(|&p| p > 1)
        .ok_or_else(|| format!("{VAR}={value}: expected the process id of the bundle's run.sh"))?;
    #[cfg(unix)]
    {
        let alive = move || {
            // SAFETY: signal 0 checks that the process exists; nothing is sent.
            let found = unsafe { libc::kill(pid, 0) } == 0;
            // EPERM: it exists, owned by another user.
            found || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
        };
        if !alive() {
            return Err(format!("{VAR}={pid}: no such process (run.sh is gone)"));
        }
        std::thread::spawn(move || {
            while alive() {
                std::thread::sleep(std::time::Duration::from_millis(250));
            }
            eprintln!("error: run.sh (process {pid}) is gone: this stage stops with it");
            std::process::exit(143);
        });
    }
    Ok(())
}

/// Output piped into a reader that stops early (`cargo xtask inspect copy_words | head -1`) ends
/// the program quietly, as it ends any Unix tool: the Rust runtime ignores SIGPIPE, so that every
/// `println!` after the reader left would panic; the default action is restored instead.
fn quiet_on_broken_pipe() {
    #[cfg(unix)]
    // SAFETY: sets the disposition of one signal to its default, before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// A value that starts with a minus (`--case-timeout -1`, `--flops -5`) is a value, for every
/// command: clap otherwise takes it for an unknown flag ("unexpected argument '-1'") and never
/// says what the option takes; given to the option, it is refused by the option's own range.
fn allowing_negative_numbers(command: clap::Command) -> clap::Command {
    command
        .allow_negative_numbers(true)
        .mut_subcommands(allowing_negative_numbers)
}
