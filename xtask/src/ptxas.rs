//! `cargo xtask ptxas`: NVIDIA's assembler on our PTX, as the driver would run it.
//!
//! ptxas comes from PyPI's `nvidia-cuda-nvcc` wheel, fetched once into `target/ptxas/` with pip;
//! no CUDA install is needed. Its `-v` report gives each kernel's registers per thread, static
//! shared memory, stack frame and spills: the numbers that decide occupancy, and the first place
//! to look when a kernel is slower than its roofline.

use std::path::{Path, PathBuf};
use std::process::Command;

use host::ptx::Arch;

/// The PyPI package that carries ptxas, and the path of ptxas inside its wheel.
const WHEEL: &str = "nvidia-cuda-nvcc";
const PTXAS_IN_WHEEL: &str = "nvidia/cu13/bin/ptxas";

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

/// ptxas's report on every kernel of one PTX build (fetching ptxas on first use).
pub fn reports(arch: Arch) -> Result<Vec<KernelReport>, String> {
    let dir = target_dir().join("ptxas");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let ptxas = fetch_ptxas(&dir)?;
    let ptx_path = dir.join(format!("kernels-{}.ptx", arch.name()));
    std::fs::write(&ptx_path, arch.ptx())
        .map_err(|e| format!("cannot write {}: {e}", ptx_path.display()))?;
    let out = Command::new(&ptxas)
        .arg(format!("-arch={}", arch.name()))
        .arg("-v")
        .arg(&ptx_path)
        .arg("-o")
        .arg(dir.join(format!("kernels-{}.cubin", arch.name())))
        .output()
        .map_err(|e| format!("cannot run {}: {e}", ptxas.display()))?;
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("ptxas failed on {}:\n{log}", ptx_path.display()));
    }
    Ok(parse_report(&log))
}

pub fn run(args: &PtxasArgs) -> Result<(), String> {
    let arch = Arch::ALL
        .into_iter()
        .find(|a| a.name() == args.arch)
        .expect("clap checked the value");
    let reports = reports(arch)?;
    let expected = host::ptx::entry_points(arch.ptx());
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
    Ok(())
}

/// Where reports go: `$XTASK_OUT` (set by the device bundle), else `target/xtask/`.
pub fn report_dir() -> PathBuf {
    std::env::var_os("XTASK_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("xtask"))
}

/// The workspace's `target/` directory.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .unwrap()
                .join("target")
        })
}

/// ptxas in `dir`, downloaded with pip and unpacked with Python's zipfile on first use.
fn fetch_ptxas(dir: &Path) -> Result<PathBuf, String> {
    let ptxas = dir.join("ptxas");
    if ptxas.exists() {
        return Ok(ptxas);
    }
    let wheels = dir.join("wheel");
    println!("fetching ptxas from PyPI ({WHEEL}, about 47 MB, once)...");
    let status = Command::new("python3")
        .args(["-m", "pip", "download", "--quiet", "--no-deps", "--dest"])
        .arg(&wheels)
        .arg(WHEEL)
        .status()
        .map_err(|e| format!("cannot run python3 -m pip: {e}"))?;
    if !status.success() {
        return Err(format!(
            "`python3 -m pip download {WHEEL}` failed: ptxas comes from that PyPI package"
        ));
    }
    let script = format!(
        "import glob, os, sys, zipfile\n\
         w = glob.glob(os.path.join(sys.argv[1], '*.whl'))[0]\n\
         open(sys.argv[2], 'wb').write(zipfile.ZipFile(w).read('{PTXAS_IN_WHEEL}'))\n\
         os.chmod(sys.argv[2], 0o755)\n"
    );
    let status = Command::new("python3")
        .args(["-c", &script])
        .arg(&wheels)
        .arg(&ptxas)
        .status()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    if !status.success() {
        return Err(format!(
            "could not unpack {PTXAS_IN_WHEEL} from the {WHEEL} wheel"
        ));
    }
    Ok(ptxas)
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
