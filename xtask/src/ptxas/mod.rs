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

use std::path::Path;
use std::process::Command;

use host::embedded::Arch;
use ptx::analysis::convergence::{Allowance, check_text};

use crate::nvidia_tools::{NVDISASM, cubin_path, fetch_tool, reports, tools_dir};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_one_function_in_a_disassembly() {
        let sass = "\t.section\t.text.a,\"ax\",@progbits\n.text.a:\n  HMMA.16816.F32.BF16 R0, R4, R8, R0 ;\n\
                    \t.section\t.text.b,\"ax\",@progbits\n.text.b:\n  FFMA R0, R1, R2, R0 ;\n";
        let a = function_sass(sass, "a").unwrap();
        assert!(a.contains("HMMA") && !a.contains("FFMA"), "{a}");
        assert!(function_sass(sass, "b").unwrap().contains("FFMA"));
        assert!(function_sass(sass, "c").is_none());
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
