//! `cargo xtask device-bundle`: everything a short GPU window needs, in one folder.
//!
//! The GPU machine has a driver, Python and PyTorch but no Rust and no network, so the bundle
//! carries the release `xtask` binary (host runtime, emulator and the kernels' PTX for sm_80,
//! sm_90 and sm_90a embedded), the entry script `run.sh` with its time budget, and
//! `baselines.py` for the vendor baselines and the summary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use host::embedded::Arch;

use crate::ptxas::target_dir;

const RUN_SH: &str = include_str!("../bundle/run.sh");
const BASELINES_PY: &str = include_str!("../bundle/baselines.py");
/// Stand-ins for the GPU machine's tools in the CPU check (`run.sh --check`).
const CHECK_TOOLS: [(&str, &str); 2] = [
    (
        "compute-sanitizer",
        include_str!("../bundle/check/compute-sanitizer"),
    ),
    ("ncu", include_str!("../bundle/check/ncu")),
];
/// What the device machine accepts in one call.
const SIZE_LIMIT: u64 = 64 * 1024 * 1024;

#[derive(clap::Args)]
pub struct BundleArgs {
    /// Where to write the bundle (default: target/device-bundle).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Then run the bundle here as a check, in its CPU mode: the emulator, stand-ins for
    /// compute-sanitizer and ncu, synthetic baselines; fails unless every stage ran to its end
    /// and every row was matched to its baseline.
    #[arg(long)]
    check: bool,
    /// Time budget for `--check`, seconds (1 to a day): shared out among the stages as on the
    /// GPU machine, but not timed against this machine's speed.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86400))]
    budget: u64,
}

pub fn run(args: &BundleArgs) -> Result<(), String> {
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| target_dir().join("device-bundle"));
    let io = |what: &Path| {
        let what = what.display().to_string();
        move |e: std::io::Error| format!("{what}: {e}")
    };
    std::fs::create_dir_all(out.join("bin")).map_err(io(&out))?;
    std::fs::create_dir_all(out.join("ptx")).map_err(io(&out))?;
    std::fs::create_dir_all(out.join("check")).map_err(io(&out))?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let bin = out.join("bin/xtask");
    std::fs::copy(&exe, &bin).map_err(io(&bin))?;
    write_exec(&out.join("run.sh"), RUN_SH)?;
    write_exec(&out.join("baselines.py"), BASELINES_PY)?;
    for (name, text) in CHECK_TOOLS {
        write_exec(&out.join("check").join(name), text)?;
    }
    for arch in Arch::ALL {
        let p = out.join(format!("ptx/kernels-{}.ptx", arch.name()));
        std::fs::write(&p, arch.ptx()).map_err(io(&p))?;
    }
    let size = dir_size(&out)?;
    let glibc = max_glibc(&std::fs::read(&bin).map_err(io(&bin))?);
    println!(
        "bundle: {} ({:.1} MiB of the {} MiB a device call accepts)",
        out.display(),
        size as f64 / 1048576.0,
        SIZE_LIMIT >> 20
    );
    println!(
        "binary needs glibc {} or newer; run it as: {}/run.sh [--budget 480] [--out DIR]",
        glibc.as_deref().unwrap_or("(none found)"),
        out.display()
    );
    if size > SIZE_LIMIT {
        return Err(format!(
            "the bundle is {size} bytes, over the {SIZE_LIMIT} a device call accepts"
        ));
    }
    if args.check {
        let results = out.join("results-cpu");
        // A previous check's files must not pass for this one's.
        let _ = std::fs::remove_dir_all(&results);
        let start = Instant::now();
        let status = Command::new(out.join("run.sh"))
            .args(["--check", "--budget", &args.budget.to_string(), "--out"])
            .arg(&results)
            .env("KERNELS_BACKEND", "auto")
            .status()
            .map_err(|e| format!("cannot run the bundle: {e}"))?;
        let stages = std::fs::read_to_string(results.join("stages.txt")).unwrap_or_default();
        if !status.success() || !results.join("results.json").exists() {
            return Err(format!(
                "the bundle's CPU-mode check failed ({status}); stages:\n{stages}"
            ));
        }
        println!(
            "CPU-mode check: every stage ran, {:.0} s end to end, results in {}",
            start.elapsed().as_secs_f64(),
            results.display()
        );
    }
    Ok(())
}

fn write_exec(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

fn dir_size(dir: &Path) -> Result<u64, String> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        let meta = entry.metadata().map_err(|e| e.to_string())?;
        if meta.is_dir() {
            if entry.file_name() != "results-cpu" {
                total += dir_size(&entry.path())?;
            }
        } else {
            total += meta.len();
        }
    }
    Ok(total)
}

/// The newest `GLIBC_2.N` symbol version the binary asks for: the oldest system it starts on.
fn max_glibc(binary: &[u8]) -> Option<String> {
    let needle = b"GLIBC_2.";
    binary
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .filter_map(|(i, _)| {
            let digits: String = binary[i + needle.len()..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .map(|&b| b as char)
                .collect();
            digits.parse::<u32>().ok()
        })
        .max()
        .map(|minor| format!("2.{minor}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_the_newest_glibc_version() {
        let bin = b"\0GLIBC_2.2.5\0GLIBC_2.34\0GLIBC_2.17\0GLIBC_PRIVATE\0";
        assert_eq!(super::max_glibc(bin).as_deref(), Some("2.34"));
        assert_eq!(super::max_glibc(b"nothing"), None);
    }
}
