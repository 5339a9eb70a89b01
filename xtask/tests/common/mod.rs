//! What the tests of `cargo xtask` share: the built binary, run as a user runs it.

use std::process::{Command, Output};

/// `cargo xtask <args>` on the emulator, with `envs` set, run to its end.
pub fn xtask(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.args(args).env("KERNELS_BACKEND", "emulator");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().expect("xtask starts")
}

/// A fresh, empty directory of the test's own.
#[allow(dead_code)] // Not every test binary needs one.
pub fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("xtask-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A device bundle in a fresh directory: `run.sh`, `baselines.py` and the built binary (linked).
#[allow(dead_code)] // Not every test binary needs one.
pub fn bundle(name: &str) -> std::path::PathBuf {
    let dir = scratch(name);
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bundle");
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_xtask"), dir.join("bin/xtask")).unwrap();
    for file in ["run.sh", "baselines.py"] {
        std::fs::copy(source.join(file), dir.join(file)).unwrap();
    }
    dir
}
