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

#[path = "src/ptx_build.rs"]
#[allow(dead_code)]
mod ptx_build;

use ptx_build::{Module, TARGET, nightly};

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let kernels = manifest.parent().unwrap().join("kernels");
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    // Relative to this package's directory, as cargo resolves them: an absolute path would keep
    // naming the tree this one was built in after it is moved or copied, and an edit here would
    // then never rebuild the PTX (the source emulator would run the edit, the PTX backend the
    // old module). `host/tests/build_inputs.rs` holds this to it.
    println!("cargo:rerun-if-changed=../kernels/src");
    println!("cargo:rerun-if-changed=../kernels/rust-toolchain.toml");
    println!("cargo:rerun-if-changed=src/ptx_build.rs");

    let toolchain = ptx_build::pinned_toolchain(&kernels.join("rust-toolchain.toml"))
        .unwrap_or_else(|e| fail(&e));
    ensure_toolchain(&toolchain, &kernels);

    // The project's module per architecture, then the exercises' two (docs/exercises.md): the
    // stubs and the reference solutions, each holding only the exercises.
    let builds: Vec<_> = Module::all()
        .into_iter()
        .map(|module| {
            let child = module
                .rustc(&kernels, &toolchain, &out_dir)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| {
                    fail(&format!("could not start rustc for {}: {e}", module.name))
                });
            (module, child)
        })
        .collect();
    let mut failed = None;
    for (module, child) in builds {
        let output = child.wait_with_output().unwrap();
        if !output.status.success() {
            // Every module fails on the same line: the first one's errors are enough.
            failed.get_or_insert((
                module.name,
                String::from_utf8_lossy(&output.stderr).into_owned(),
            ));
            continue;
        }
        let out = module.ptx_file(&out_dir);
        let ptx = fs::read_to_string(&out).unwrap();
        let bounded = ptx_build::apply_launch_bounds(&ptx)
            .unwrap_or_else(|e| fail(&format!("{}: {e}", module.name)));
        fs::write(&out, bounded).unwrap();
    }
    if let Some((name, stderr)) = failed {
        let hints = ptx_build::std_only_hints(&stderr);
        for hint in &hints {
            eprintln!("{hint}");
        }
        fail(&format!(
            "compiling kernels/ to PTX ({name}) failed{}:\n{stderr}",
            if hints.is_empty() {
                ""
            } else {
                " (see the line above)"
            }
        ));
    }
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
    // On stderr, not as a `cargo:warning`: cargo would replay a warning on every later
    // command until this script runs again, long after the install.
    eprintln!(
        "installing {toolchain} with the {TARGET} target (once; see kernels/rust-toolchain.toml)"
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

/// Stops the build with `msg` on stderr, once (a panic would print it twice, with a backtrace
/// note about the build script rather than the kernel).
fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(1);
}
