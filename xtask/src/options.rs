//! What several commands decide alike: which backend a sample runs on, which device the model
//! predicts for, and why there is no GPU. One place, so that `predict`, `inspect`, `check`,
//! `emu-speed` and `hierarchy` accept and refuse the same things with the same words.

use host::Runtime;
use perf::model::Machine;

/// Whether `command` runs the kernel's PTX: with `--ptx` (`flag`), or under
/// `KERNELS_BACKEND=ptx`, which is honoured as `--ptx`. A `KERNELS_PTX` file that the source
/// run would not read is refused, as is a `KERNELS_BACKEND` that is not UTF-8, where either
/// was silently ignored.
pub fn ptx_requested(command: &str, flag: bool) -> Result<bool, String> {
    let var = host::runtime::BACKEND_VAR;
    let backend = match std::env::var(var) {
        Ok(b) => b,
        Err(std::env::VarError::NotPresent) => String::new(),
        Err(std::env::VarError::NotUnicode(v)) => {
            return Err(format!(
                "{var}={}: not UTF-8; expected emulator, ptx, gpu or auto",
                v.to_string_lossy().escape_debug()
            ));
        }
    };
    if flag || backend == "ptx" {
        return Ok(true);
    }
    let file = host::embedded::PTX_FILE_VAR;
    match std::env::var_os(file).filter(|f| !f.is_empty()) {
        Some(path) => Err(format!(
            "{file}={}: `{command}` runs the kernel's Rust source on the emulator unless --ptx is given, so the file would not be used; add --ptx (or set {var}=ptx) to run it, or unset {file}",
            path.to_string_lossy().escape_debug()
        )),
        None => Ok(false),
    }
}

/// The message for a device the performance model does not know, with those it knows.
pub(crate) fn unknown_device(name: &str) -> String {
    let known: Vec<_> = Machine::all().iter().map(|m| m.spec.key).collect();
    format!(
        "unknown device `{name}`; the model knows {}",
        known.join(", ")
    )
}

/// Why the runtime is the emulator, in one sentence: the driver's answer, or the variable's.
pub fn no_gpu_reason() -> String {
    match Runtime::gpu(0) {
        Err(e) => e.to_string(),
        Ok(_) => "KERNELS_BACKEND selects the emulator".to_string(),
    }
}

/// Refuses an empty name in a `--only`/`--skip` list: it is part of every kernel's name, so
/// `--only ''` would run everything and `--skip ''` nothing, neither of which was meant.
pub fn check_names(flag: &str, names: &[String]) -> Result<(), String> {
    if names.iter().any(|n| n.trim().is_empty()) {
        return Err(format!(
            "{flag} {:?}: an empty name matches every kernel; give part of a kernel's name (e.g. softmax), or leave {flag} out",
            names.join(",")
        ));
    }
    Ok(())
}
