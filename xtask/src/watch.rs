//! `--watch` (`cargo xtask exercise N --watch`, `cargo xtask run --only K --watch`): the learner's
//! loop. On each save under kernels/src, the one PTX module the command needs is compiled (one
//! architecture, into target/watch/, by the same rustc command as `host/build.rs`:
//! `host::ptx_build`), and this same xtask binary runs the command again on the PTX backend with
//! that module loaded at run time (`KERNELS_BACKEND=ptx KERNELS_PTX=...`). Neither `host` nor
//! `xtask` is recompiled for a kernel edit: the kernel's host side (its launch, reference and
//! shapes) is what the last build compiled, so an edit to those, or a new kernel, needs the
//! command once without `--watch`. A watched run writes its report under target/watch/, not over
//! the full run's target/xtask/run.json.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use host::ptx_build::{self, Module};

/// How often the sources are looked at.
const POLL: Duration = Duration::from_millis(200);

/// Runs `args` (an xtask command line without `--watch`) on a fresh `module` now and after every
/// save under kernels/src, until interrupted. With `XTASK_WATCH_ONCE` set, stops after the first
/// round and returns its verdict (the benchmark and the tests use it).
pub fn watch(module: Module, args: &[String]) -> Result<(), String> {
    let root = crate::checkout::checkout()?;
    let kernels = root.join("kernels");
    let out_dir = watch_dir()?;
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    let toolchain = ptx_build::pinned_toolchain(&kernels.join("rust-toolchain.toml"))?;
    let once = std::env::var_os("XTASK_WATCH_ONCE").is_some();
    let sources = kernels.join("src");
    loop {
        let seen = newest(&sources);
        let saved = Instant::now();
        let verdict = round(&module, args, &kernels, &toolchain, &out_dir);
        let total = saved.elapsed().as_secs_f64();
        match &verdict {
            Ok((build, passed)) => eprintln!(
                "watch: {} in {total:.1} s after the save (PTX {} {build:.1} s, then the check); waiting for the next save under kernels/src (Ctrl-C stops)",
                if *passed {
                    "verdict: passed"
                } else {
                    "verdict: not yet"
                },
                module.name
            ),
            Err(why) => eprintln!(
                "{why}\nwatch: waiting for the next save under kernels/src (Ctrl-C stops)"
            ),
        }
        if once {
            return match verdict {
                Ok((_, true)) => Ok(()),
                Ok((_, false)) => Err("the check failed (above)".into()),
                Err(_) => Err("the kernels did not compile (above)".into()),
            };
        }
        while newest(&sources) == seen {
            std::thread::sleep(POLL);
        }
        // An editor may write a file in more than one step.
        std::thread::sleep(POLL);
    }
}

/// One round: the module compiled, then the command run on it. Returns the build's seconds and
/// whether the command passed, or the compiler's errors.
fn round(
    module: &Module,
    args: &[String],
    kernels: &Path,
    toolchain: &str,
    out_dir: &Path,
) -> Result<(f64, bool), String> {
    let start = Instant::now();
    let file = compile(module, kernels, toolchain, out_dir)?;
    let build = start.elapsed().as_secs_f64();
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this xtask: {e}"))?;
    let status = Command::new(exe)
        .args(args)
        .env(host::runtime::BACKEND_VAR, "ptx")
        .env(host::embedded::PTX_FILE_VAR, &file)
        .status()
        .map_err(|e| format!("cannot run the check: {e}"))?;
    Ok((build, status.success()))
}

/// `module` compiled to `out_dir/NAME.ptx`, with its launch bounds applied; the compiler's errors
/// (and the device library's name for a `std`-only `f32` method) when it does not compile.
pub fn compile(
    module: &Module,
    kernels: &Path,
    toolchain: &str,
    out_dir: &Path,
) -> Result<PathBuf, String> {
    // Line tables, which the embedded modules leave out (they change no instruction): the PTX
    // backend then names the kernel's Rust line in a report, as the source emulator does.
    let out = module
        .rustc(kernels, toolchain, out_dir)
        .arg("-Cdebuginfo=line-tables-only")
        .output()
        .map_err(|e| format!("cannot start rustc ({toolchain}): {e}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let mut text = String::new();
        for hint in ptx_build::std_only_hints(&stderr) {
            text += &format!("{hint}\n");
        }
        return Err(format!("{text}{stderr}"));
    }
    let file = module.ptx_file(out_dir);
    let ptx = std::fs::read_to_string(&file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    std::fs::write(&file, ptx_build::apply_launch_bounds(&ptx)?)
        .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    Ok(file)
}

/// The newest modification time and the number of files under `dir` (a deleted file changes the
/// count).
fn newest(dir: &Path) -> (Option<SystemTime>, usize) {
    let mut stack = vec![dir.to_path_buf()];
    let (mut latest, mut count) = (None, 0);
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                count += 1;
                latest = latest.max(meta.modified().ok());
            }
        }
    }
    (latest, count)
}

/// `cargo xtask run --only K --watch`: the project's module for `KERNELS_PTX_ARCH` (default
/// sm_90), and the rows `--only` names.
pub fn watch_run(only: &[String]) -> Result<(), String> {
    if only.is_empty() {
        return Err(
            "--watch needs --only: the kernels to check on each save (every row would take minutes)"
                .into(),
        );
    }
    let arch = host::embedded::arch_from_env().map_err(|e| e.to_string())?;
    let args = with_report_in(args_without_watch(), &watch_dir()?);
    watch(Module::project(arch.name()), &args)
}

/// Where the rounds' PTX modules and reports go: target/watch/.
fn watch_dir() -> Result<PathBuf, String> {
    Ok(crate::checkout::target_dir()?.join("watch"))
}

/// A watched run's command line with its JSON report (and the roofline beside it) in `dir`,
/// unless the command names one: each round of a partial run would otherwise replace the full
/// run's target/xtask/run.json, which the docs' pastes and the bundle read.
fn with_report_in(mut args: Vec<String>, dir: &Path) -> Vec<String> {
    let named = args
        .iter()
        .any(|a| a == "--json" || a.starts_with("--json="));
    if !named {
        args.push("--json".into());
        args.push(dir.join("run.json").to_string_lossy().into_owned());
    }
    args
}

/// The command line of this process without `--watch`, for the rounds to run.
pub fn args_without_watch() -> Vec<String> {
    std::env::args()
        .skip(1)
        .filter(|a| a != "--watch")
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watched `run --only K` writes its report under the watch's directory, where the full
    /// run's target/xtask/run.json is not; a `--json` the learner gave is kept.
    #[test]
    fn a_watched_run_writes_its_report_apart_from_the_full_runs() {
        use clap::Parser;
        let dir = Path::new("target/watch");
        let json_of = |args: Vec<String>| {
            let words = std::iter::once("xtask".to_string()).chain(with_report_in(args, dir));
            match crate::Cli::try_parse_from(words).unwrap().command {
                crate::Command::Run(run) => run.json,
                _ => unreachable!(),
            }
        };
        let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        assert_eq!(
            json_of(words("run --only scaffold_warp --no-predict")),
            Some(dir.join("run.json"))
        );
        assert_eq!(
            json_of(words("run --only k --json mine.json")),
            Some(PathBuf::from("mine.json"))
        );
        assert_eq!(
            json_of(words("run --only k --json=mine.json")),
            Some(PathBuf::from("mine.json"))
        );
    }
}
