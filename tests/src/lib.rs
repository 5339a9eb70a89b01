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
