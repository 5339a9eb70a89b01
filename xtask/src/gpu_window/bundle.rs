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

use crate::checkout::target_dir;

const RUN_SH: &str = include_str!("../../bundle/run.sh");
const BASELINES_PY: &str = include_str!("../../bundle/baselines.py");
/// Stand-ins for the GPU machine's tools in the CPU check (`run.sh --check`).
const CHECK_TOOLS: [(&str, &str); 2] = [
    (
        "compute-sanitizer",
        include_str!("../../bundle/check/compute-sanitizer"),
    ),
    ("ncu", include_str!("../../bundle/check/ncu")),
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
    let out = match &args.out {
        Some(out) => out.clone(),
        None => target_dir()?.join("device-bundle"),
    };
    let io = |what: &Path| {
        let what = what.display().to_string();
        move |e: std::io::Error| format!("{what}: {e}")
    };
    let out = place_for_bundle(&out)?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    // The size before anything is written.
    let size = std::fs::metadata(&exe).map_err(io(&exe))?.len()
        + (RUN_SH.len() + BASELINES_PY.len()) as u64
        + CHECK_TOOLS.iter().map(|(_, t)| t.len() as u64).sum::<u64>()
        + Arch::ALL.iter().map(|a| a.ptx().len() as u64).sum::<u64>();
    if size > SIZE_LIMIT {
        return Err(format!(
            "the bundle would be {size} bytes, over the {SIZE_LIMIT} a device call accepts; nothing written"
        ));
    }
    // Built whole in a fresh folder beside `out` (created here, so that no link in it leads
    // anywhere), then renamed into place: a failure leaves `out` as it was.
    let name = out.file_name().expect("a named folder").to_string_lossy();
    let fresh = out.with_file_name(format!(".{name}.partial.{}", std::process::id()));
    let built = write_bundle(&fresh, &exe).and_then(|()| {
        let glibc = max_glibc(&std::fs::read(fresh.join("bin/xtask")).map_err(io(&fresh))?);
        replace_dir(&fresh, &out)?;
        Ok(glibc)
    });
    let glibc = built.inspect_err(|_| {
        let _ = std::fs::remove_dir_all(&fresh);
    })?;
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

/// The file every bundle holds and nothing else writes: a folder is taken for a previous bundle
/// by it, never by the names of the other entries, which a user's folder may happen to hold.
const MARKER: &str = ".kernels-device-bundle";

/// What a bundle folder holds (and a `--check` adds): all that may be replaced by a new one.
const BUNDLE_ENTRIES: [&str; 7] = [
    MARKER,
    "bin",
    "ptx",
    "check",
    "run.sh",
    "baselines.py",
    "results-cpu",
];

/// `out` as an absolute path with its parent made, once it is known to be a place a bundle may
/// go: nothing there yet, an empty folder, or a previous bundle (which the new one replaces).
/// Anything else (a file, a link, a folder holding anything a bundle does not) is refused with
/// nothing written, naming what is in the way.
fn place_for_bundle(out: &Path) -> Result<PathBuf, String> {
    let refuse = |why: String| {
        Err(format!(
            "--out {}: {why}; give a new or empty folder, or a previous bundle's",
            out.display()
        ))
    };
    match std::fs::symlink_metadata(out) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let Some(name) = out.file_name() else {
                return refuse("not a folder's name".into());
            };
            let parent = match out.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            std::fs::create_dir_all(&parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            let parent = parent
                .canonicalize()
                .map_err(|e| format!("{}: {e}", parent.display()))?;
            Ok(parent.join(name))
        }
        Err(e) => refuse(e.to_string()),
        Ok(meta) if meta.file_type().is_symlink() => {
            refuse("a symbolic link (the bundle is not written through one)".into())
        }
        Ok(meta) if !meta.is_dir() => refuse("not a folder".into()),
        Ok(_) => {
            let entries = std::fs::read_dir(out).map_err(|e| format!("{}: {e}", out.display()))?;
            let mut empty = true;
            for entry in entries {
                let entry = entry.map_err(|e| format!("{}: {e}", out.display()))?;
                let name = entry.file_name();
                let is_link = entry.file_type().is_ok_and(|t| t.is_symlink());
                if is_link || !BUNDLE_ENTRIES.iter().any(|b| name == *b) {
                    return refuse(format!(
                        "it holds {}, which is not part of a bundle (left untouched)",
                        entry.path().display()
                    ));
                }
                empty = false;
            }
            let marked = std::fs::symlink_metadata(out.join(MARKER)).is_ok_and(|m| m.is_file());
            if !empty && !marked {
                return refuse(format!(
                    "it is not empty and holds no {MARKER}, the file every bundle holds (left untouched)"
                ));
            }
            let out = out
                .canonicalize()
                .map_err(|e| format!("{}: {e}", out.display()))?;
            if out.file_name().is_none() {
                return refuse("the root folder".into());
            }
            Ok(out)
        }
    }
}

/// Writes every file of the bundle into `dir`, which must not exist yet.
fn write_bundle(dir: &Path, exe: &Path) -> Result<(), String> {
    let io = |what: &Path| {
        let what = what.display().to_string();
        move |e: std::io::Error| format!("{what}: {e}")
    };
    std::fs::create_dir(dir).map_err(io(dir))?;
    for sub in ["bin", "ptx", "check"] {
        std::fs::create_dir(dir.join(sub)).map_err(io(&dir.join(sub)))?;
    }
    let marker = dir.join(MARKER);
    std::fs::write(
        &marker,
        "A device bundle (cargo xtask device-bundle): the next one may replace this folder.\n",
    )
    .map_err(io(&marker))?;
    let bin = dir.join("bin/xtask");
    std::fs::copy(exe, &bin).map_err(io(&bin))?;
    write_exec(&dir.join("run.sh"), RUN_SH)?;
    write_exec(&dir.join("baselines.py"), BASELINES_PY)?;
    for (name, text) in CHECK_TOOLS {
        write_exec(&dir.join("check").join(name), text)?;
    }
    for arch in Arch::ALL {
        let p = dir.join(format!("ptx/kernels-{}.ptx", arch.name()));
        std::fs::write(&p, arch.ptx()).map_err(io(&p))?;
    }
    Ok(())
}

/// Puts the folder `fresh` where `out` is: renamed over it if it is missing or empty, else the
/// old bundle renamed aside, the new one into place, and the old one removed.
fn replace_dir(fresh: &Path, out: &Path) -> Result<(), String> {
    if std::fs::rename(fresh, out).is_ok() {
        return Ok(());
    }
    let name = out.file_name().expect("a named folder").to_string_lossy();
    let old = out.with_file_name(format!(".{name}.old.{}", std::process::id()));
    std::fs::rename(out, &old).map_err(|e| format!("cannot move {} aside: {e}", out.display()))?;
    if let Err(e) = std::fs::rename(fresh, out) {
        let _ = std::fs::rename(&old, out);
        return Err(format!(
            "cannot rename {} to {}: {e}",
            fresh.display(),
            out.display()
        ));
    }
    std::fs::remove_dir_all(&old).map_err(|e| format!("cannot remove {}: {e}", old.display()))
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
