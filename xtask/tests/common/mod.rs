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
