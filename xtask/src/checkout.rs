//! Where a command reads and writes by default: the checkout it runs in, its `target/`, and the
//! folder of reports under it. Found at run time from the current directory, never from the path
//! the binary was built at.

use std::path::{Path, PathBuf};

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
