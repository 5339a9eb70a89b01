//! Shared helpers for the test suite.

use host::Runtime;
use host::emu::{EmuError, EmuErrorKind, Emulator};
use host::runtime::Backend;

/// The runtime the suite runs on: `KERNELS_BACKEND` picks it (default: a GPU when one is
/// present, the emulator otherwise), so one property suite serves both.
pub fn runtime() -> Runtime {
    Runtime::from_env().expect("KERNELS_BACKEND names a usable backend")
}

/// An emulator runtime and its emulator, for tests that launch their own (often deliberately
/// broken) kernels.
pub fn emulator() -> (Runtime, std::sync::Arc<Emulator>) {
    let rt = Runtime::emulator();
    let Backend::Emulator(emu) = rt.backend() else {
        unreachable!()
    };
    let emu = emu.clone();
    (rt, emu)
}

/// A runtime that counts and profiles, for tests of the project's own kernels that read the
/// emulator's counters or profile: the PTX backend when `KERNELS_BACKEND=ptx`, else the source
/// emulator; with the emulator that holds the memory and the profile.
pub fn counting() -> (Runtime, std::sync::Arc<Emulator>) {
    if std::env::var(host::runtime::BACKEND_VAR).as_deref() == Ok("ptx") {
        let rt = Runtime::ptx_from_env().expect("the PTX module loads");
        let Backend::Ptx(device) = rt.backend() else {
            unreachable!()
        };
        let emu = device.emulator().clone();
        (rt, emu)
    } else {
        emulator()
    }
}

/// The emulator error inside a runtime error, or a panic saying what came back instead.
#[track_caller]
pub fn emu_error<T: std::fmt::Debug>(result: host::Result<T>) -> EmuError {
    match result {
        Err(host::Error::Emulator(e)) => *e,
        other => panic!("expected an emulator error, got {other:?}"),
    }
}

/// The kind of an emulator error.
#[track_caller]
pub fn emu_error_kind<T: std::fmt::Debug>(result: host::Result<T>) -> EmuErrorKind {
    emu_error(result).kind
}

/// Whether a launch's counted FLOPs agree with a cost model's.
///
/// The source emulator counts what the kernels mark with `count_flops`, the useful work the cost
/// models count, so there the two must be equal. `count_flops` compiles to nothing in the PTX:
/// the PTX backend counts the floating-point operations it executes (fma 2; add, mul, compare,
/// `ex2`, `rcp`... 1; `mma` 2 x 16 x 8 x 16), padding lanes, tile remainders and epilogues
/// included, so there the count must cover the model: at least as large.
pub fn flops_agree(counted: u64, model: u64) -> bool {
    static PTX: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ptx = *PTX.get_or_init(|| matches!(runtime().backend(), Backend::Ptx(_)));
    if ptx {
        counted >= model
    } else {
        counted == model
    }
}
