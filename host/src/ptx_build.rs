//! How one PTX module of the kernel crate is compiled: the rustc command, the launch-bounds
//! pass over its output, and the one-line hint for a method the GPU's `core` lacks.
//!
//! `host/build.rs` includes this file (`#[path]`) to build the modules the host embeds, and
//! `host` compiles it as [`host::ptx_build`](self) so that `cargo xtask ... --watch` builds the
//! one module a command needs, at run time, the same way. It uses `std` alone, as a build
//! script's module must.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Every architecture the host can load. sm_80 (A100) and sm_90 (H100/H200) are the portable
/// builds; sm_90a adds the Hopper-only instructions (wgmma, TMA) that no later chip keeps.
pub const ARCHES: [&str; 3] = ["sm_80", "sm_90", "sm_90a"];
pub const TARGET: &str = "nvptx64-nvidia-cuda";
/// The exercises' modules and the `kernels_exercises` value each is built with. They hold the
/// exercises alone, for sm_80 (their PTX runs on every GPU from Ampere on, JIT-compiled).
pub const EXERCISE_MODULES: [(&str, &str); 2] = [
    ("exercises-sm_80", "stubs"),
    ("solutions-sm_80", "solutions"),
];

/// One module to build: its file name (without `.ptx`), architecture and, for the exercises'
/// modules, the `kernels_exercises` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Module {
    pub name: String,
    pub arch: &'static str,
    pub exercises: Option<&'static str>,
}

impl Module {
    /// The project's module for `arch`.
    pub fn project(arch: &'static str) -> Self {
        Self {
            name: format!("kernels-{arch}"),
            arch,
            exercises: None,
        }
    }

    /// The stubs' (`solutions: false`) or the reference solutions' module.
    pub fn exercises(solutions: bool) -> Self {
        let (name, cfg) = EXERCISE_MODULES[usize::from(solutions)];
        Self {
            name: name.to_string(),
            arch: "sm_80",
            exercises: Some(cfg),
        }
    }

    /// Every module the host embeds: the project's per architecture, then the exercises' two.
    pub fn all() -> Vec<Self> {
        let mut all: Vec<Self> = ARCHES.into_iter().map(Self::project).collect();
        all.extend([Self::exercises(false), Self::exercises(true)]);
        all
    }

    /// The rustc command that writes this module to `out_dir/NAME.ptx` (its rlib goes to
    /// `out_dir/rlib-NAME`), for the kernel crate at `kernels` with the nightly `toolchain`.
    pub fn rustc(&self, kernels: &Path, toolchain: &str, out_dir: &Path) -> Command {
        let mut rustc = nightly(toolchain, "rustc");
        rustc
            .current_dir(kernels)
            .args([
                "--edition",
                "2024",
                "--crate-type",
                "rlib",
                "--crate-name",
                "kernels",
            ])
            .args(["--target", TARGET])
            .arg(format!("-Ctarget-cpu={}", self.arch))
            .args(["-Copt-level=3", "-Ccodegen-units=1", "-Cdebuginfo=0"])
            // The host's own build of the same crate reports every warning, once, with its
            // source; the PTX builds would repeat each up to five times.
            .arg("-Awarnings")
            .arg(format!("--emit=asm={}", self.ptx_file(out_dir).display()))
            .arg(format!(
                "--out-dir={}",
                out_dir.join(format!("rlib-{}", self.name)).display()
            ));
        if let Some(cfg) = self.exercises {
            // Both forms: `cfg(kernels_exercises)` (any exercises build) and the value.
            rustc.args(["--cfg", "kernels_exercises", "--cfg"]);
            rustc.arg(format!("kernels_exercises=\"{cfg}\""));
        }
        rustc.arg("src/lib.rs");
        rustc
    }

    /// Where [`rustc`](Self::rustc) writes the PTX.
    pub fn ptx_file(&self, out_dir: &Path) -> PathBuf {
        out_dir.join(format!("{}.ptx", self.name))
    }
}

/// Turns each `// launch_bounds NAME THREADS BLOCKS` marker (left by `kernels::launch_bounds!`)
/// into `.maxntid THREADS, 1, 1` and `.minnctapersm BLOCKS` between the parameter list and the
/// body of `.entry NAME`, where the PTX ISA puts performance-tuning directives.
pub fn apply_launch_bounds(ptx: &str) -> Result<String, String> {
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
pub fn pinned_toolchain(file: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    channel(&text)
        .map(str::to_string)
        .ok_or_else(|| format!("no channel = \"...\" in {}", file.display()))
}

/// The `channel = "..."` of a rust-toolchain.toml's text.
pub fn channel(toolchain_toml: &str) -> Option<&str> {
    toolchain_toml
        .lines()
        .filter_map(|l| l.trim().strip_prefix("channel"))
        .find_map(|rest| rest.split('"').nth(1))
}

/// A `rustup run <toolchain> <tool>` command with the outer (stable) build's environment removed,
/// so that the child does not inherit this build's rustc, flags or toolchain override.
pub fn nightly(toolchain: &str, tool: &str) -> Command {
    let mut cmd = Command::new("rustup");
    cmd.args(["run", toolchain, tool]);
    for (key, _) in std::env::vars_os() {
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

/// The `f32` methods that need `std` (the GPU build has `core` alone) and the device library's
/// function a kernel calls instead (`kernels::cuda::intrinsics`, named as rust-cuda's
/// `cuda_std` names them). `max`, `min`, `abs` and `copysign` are in `core` and work as they are.
pub const STD_ONLY_F32: [(&str, &str); 9] = [
    ("sqrt", "sqrt"),
    ("exp", "exp"),
    ("exp2", "exp2"),
    ("ln", "ln"),
    ("log2", "log2"),
    ("tanh", "tanh"),
    ("sin", "sin"),
    ("cos", "cos"),
    ("mul_add", "fma"),
];

/// One line per `f32` method rustc could not find in the GPU build (`error[E0599]: no method
/// named `sqrt` found for type `f32``) that the device library has, naming the function to call
/// and where: what a learner who wrote `x.sqrt()` reads first.
pub fn std_only_hints(rustc_stderr: &str) -> Vec<String> {
    let lines: Vec<&str> = rustc_stderr.lines().collect();
    let mut hints = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.strip_prefix("error[E0599]: no method named `") else {
            continue;
        };
        let Some((method, tail)) = rest.split_once('`') else {
            continue;
        };
        if !tail.contains("type `f32`") {
            continue;
        }
        let Some((_, helper)) = STD_ONLY_F32.iter().find(|(m, _)| *m == method) else {
            continue;
        };
        let place = lines[i + 1..]
            .iter()
            .take(3)
            .find_map(|l| l.trim().strip_prefix("--> "))
            .map(|p| format!(" (kernels/{p})"))
            .unwrap_or_default();
        hints.push(format!(
            "error: `f32::{method}` is in `std`, which the GPU build lacks: call `kernels::cuda::intrinsics::{helper}`{place}"
        ));
    }
    hints.dedup();
    hints
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What rustc prints for `x.sqrt()` in the GPU build becomes one line naming the helper and
    /// the place; an error about another type or an unknown method adds nothing.
    #[test]
    fn a_std_only_method_names_its_helper() {
        let stderr = "error[E0599]: no method named `sqrt` found for type `f32` in the current scope\n  --> src/exercises/e01_map.rs:14:30\n   |\n\
                      error[E0599]: no method named `sqrt` found for type `f64` in the current scope\n\
                      error[E0599]: no method named `frobnicate` found for type `f32` in the current scope\n";
        assert_eq!(
            std_only_hints(stderr),
            [
                "error: `f32::sqrt` is in `std`, which the GPU build lacks: call `kernels::cuda::intrinsics::sqrt` (kernels/src/exercises/e01_map.rs:14:30)"
            ]
        );
    }

    #[test]
    fn launch_bounds_go_before_the_body() {
        let ptx = ".visible .entry k(\n.param .u32 n\n)\n{\n// launch_bounds k 256 2\nret;\n}\n";
        let out = apply_launch_bounds(ptx).unwrap();
        assert!(
            out.contains(")\n.maxntid 256, 1, 1\n.minnctapersm 2\n{"),
            "{out}"
        );
        assert!(apply_launch_bounds("// launch_bounds q 1 1\n").is_err());
    }
}
