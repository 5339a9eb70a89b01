//! This project's `cuda_builder`: compiles `kernels/` to one PTX file per GPU architecture.
//!
//! The kernels use rustc's own NVPTX backend (see docs/toolchain.md for why not
//! rustc_codegen_nvvm). That backend needs a nightly compiler, pinned in
//! `kernels/rust-toolchain.toml`, while everything else builds with stable; so this script runs
//! the pinned nightly's rustc directly on `kernels/src/lib.rs` (the kernel crate has no
//! dependencies on the GPU target), once per architecture, and `host/src/embedded.rs` embeds the
//! results with `include_str!`.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Every architecture the host can load. sm_80 (A100) and sm_90 (H100/H200) are the portable
/// builds; sm_90a adds the Hopper-only instructions (wgmma, TMA) that no later chip keeps.
const ARCHES: [&str; 3] = ["sm_80", "sm_90", "sm_90a"];
const TARGET: &str = "nvptx64-nvidia-cuda";
/// The exercises' modules and the `kernels_exercises` value each is built with.
const EXERCISE_MODULES: [(&str, &str); 2] = [
    ("exercises-sm_80", "stubs"),
    ("solutions-sm_80", "solutions"),
];

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let kernels = manifest.parent().unwrap().join("kernels");
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed={}", kernels.join("src").display());
    println!(
        "cargo:rerun-if-changed={}",
        kernels.join("rust-toolchain.toml").display()
    );

    let toolchain = pinned_toolchain(&kernels.join("rust-toolchain.toml"));
    ensure_toolchain(&toolchain, &kernels);

    // The project's module per architecture, then the exercises' two (docs/exercises.md): the
    // stubs and the reference solutions, each holding only the exercises, for sm_80 alone (their
    // PTX runs on every GPU from Ampere on, JIT-compiled by the driver).
    let modules = ARCHES
        .iter()
        .map(|arch| (format!("kernels-{arch}"), *arch, None))
        .chain(EXERCISE_MODULES.map(|(name, cfg)| (name.to_string(), "sm_80", Some(cfg))));
    let builds: Vec<_> = modules
        .map(|(name, arch, cfg)| {
            let out = out_dir.join(format!("{name}.ptx"));
            let mut rustc = nightly(&toolchain, "rustc");
            rustc
                .current_dir(&kernels)
                .args([
                    "--edition",
                    "2024",
                    "--crate-type",
                    "rlib",
                    "--crate-name",
                    "kernels",
                ])
                .args(["--target", TARGET])
                .arg(format!("-Ctarget-cpu={arch}"))
                .args(["-Copt-level=3", "-Ccodegen-units=1", "-Cdebuginfo=0"])
                .arg(format!("--emit=asm={}", out.display()))
                .arg(format!(
                    "--out-dir={}",
                    out_dir.join(format!("rlib-{name}")).display()
                ));
            if let Some(cfg) = cfg {
                // Both forms: `cfg(kernels_exercises)` (any exercises build) and the value.
                rustc.args(["--cfg", "kernels_exercises", "--cfg"]);
                rustc.arg(format!("kernels_exercises=\"{cfg}\""));
            }
            let child = rustc
                .arg("src/lib.rs")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| fail(&format!("could not start rustc for {name}: {e}")));
            (name, child)
        })
        .collect();
    for (name, child) in builds {
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            fail(&format!(
                "compiling kernels/ to PTX ({name}) failed:\n{stderr}"
            ));
        }
        for line in stderr.lines().filter(|l| l.starts_with("warning")) {
            println!("cargo:warning=kernels ({name}): {line}");
        }
        let out = out_dir.join(format!("{name}.ptx"));
        let ptx = fs::read_to_string(&out).unwrap();
        let bounded = apply_launch_bounds(&ptx).unwrap_or_else(|e| fail(&format!("{name}: {e}")));
        fs::write(&out, bounded).unwrap();
    }
}

/// Turns each `// launch_bounds NAME THREADS BLOCKS` marker (left by `kernels::launch_bounds!`)
/// into `.maxntid THREADS, 1, 1` and `.minnctapersm BLOCKS` between the parameter list and the
/// body of `.entry NAME`, where the PTX ISA puts performance-tuning directives.
fn apply_launch_bounds(ptx: &str) -> Result<String, String> {
    let marks: Vec<(String, String, String)> = ptx
        .lines()
        .filter_map(|l| l.trim().strip_prefix("// launch_bounds "))
        .map(|rest| {
            let w: Vec<&str> = rest.split_whitespace().collect();
            (w[0].to_string(), w[1].to_string(), w[2].to_string())
        })
        .collect();
    let mut lines: Vec<String> = ptx.lines().map(str::to_string).collect();
    for (name, threads, blocks) in marks {
        let header = format!(".visible .entry {name}(");
        let start = lines
            .iter()
            .position(|l| l.starts_with(&header))
            .ok_or_else(|| format!("launch_bounds for {name}, which is not an entry point"))?;
        let body = start
            + lines[start..]
                .iter()
                .position(|l| l.trim() == "{")
                .ok_or_else(|| format!("no body after .entry {name}"))?;
        lines.insert(body, format!(".minnctapersm {blocks}"));
        lines.insert(body, format!(".maxntid {threads}, 1, 1"));
    }
    Ok(lines.join("\n") + "\n")
}

/// The `channel = "..."` of kernels/rust-toolchain.toml.
fn pinned_toolchain(file: &Path) -> String {
    let text = fs::read_to_string(file)
        .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", file.display())));
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("channel"))
        .filter_map(|rest| rest.split('"').nth(1))
        .next()
        .unwrap_or_else(|| fail(&format!("no channel = \"...\" in {}", file.display())))
        .to_string()
}

/// A `rustup run <toolchain> <tool>` command with the outer (stable) build's environment removed,
/// so that the child does not inherit this build's rustc, flags or toolchain override.
fn nightly(toolchain: &str, tool: &str) -> Command {
    let mut cmd = Command::new("rustup");
    cmd.args(["run", toolchain, tool]);
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("CARGO")
            || key.starts_with("RUSTC")
            || key == "RUSTFLAGS"
            || key == "RUSTUP_TOOLCHAIN"
            || key == "RUSTDOC"
        {
            cmd.env_remove(&*key);
        }
    }
    cmd
}

/// Installs the pinned nightly with its nvptx64 standard library when it is missing; rustup's
/// automatic install is off on this project's machines.
fn ensure_toolchain(toolchain: &str, kernels: &Path) {
    let has_target = nightly(toolchain, "rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .is_some_and(|sysroot| sysroot.join("lib/rustlib").join(TARGET).exists());
    if has_target {
        return;
    }
    println!(
        "cargo:warning=installing {toolchain} with the {TARGET} target (once; see kernels/rust-toolchain.toml)"
    );
    let status = Command::new("rustup")
        .args(["toolchain", "install"])
        .current_dir(kernels)
        .env_remove("RUSTUP_TOOLCHAIN")
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        fail(&format!(
            "the kernels need the nightly toolchain {toolchain} with the {TARGET} target, and installing it failed.\n\
             Run this, then build again:\n    rustup toolchain install {toolchain} --profile minimal --target {TARGET} --component rust-src,llvm-tools"
        ));
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}");
    panic!("{msg}");
}
