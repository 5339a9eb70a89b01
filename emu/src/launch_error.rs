//! Every way a launch can fail, as one error type with one-sentence messages: the vocabulary
//! every backend reports in (the runtime's driver, the emulator, the PTX interpreter). It lives
//! here, in the lowest crate that raises one, so that no backend depends on another's types.

use crate::EmuError;

/// An error from the runtime: no device, a refused launch, a bad shape, or a kernel bug that the
/// emulator caught.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// libcuda could not be loaded.
    #[error(
        "no CUDA driver on this machine (libcuda.so not found): install the NVIDIA driver to use a GPU, or run on the CPU emulator"
    )]
    NoDriver,
    /// The driver loaded but found no usable device.
    #[error("no CUDA GPU available: {0}")]
    NoDevice(String),
    /// A driver call failed.
    #[error("CUDA driver error in {call}: {message}")]
    Driver {
        /// What was being done.
        call: String,
        /// The driver's message.
        message: String,
    },
    /// The device (or PTX module) lacks what the kernel needs: wgmma and the TMA on sm_80, say.
    #[error("not available on this device: {0}")]
    Unsupported(String),
    /// A launch configuration exceeds what the device accepts.
    #[error(
        "launch of `{kernel}` refused: {what} requested {requested}, but the device allows at most {limit}"
    )]
    LaunchLimit {
        /// The kernel.
        kernel: String,
        /// Which limit.
        what: &'static str,
        /// What the launch asked for.
        requested: u64,
        /// The device's limit.
        limit: u64,
    },
    /// An environment variable or setting with a value it does not accept: the message names
    /// the variable and the values it takes.
    #[error("invalid setting: {0}")]
    Config(String),
    /// Inputs whose shapes or sizes the operation does not accept.
    #[error("invalid input: {0}")]
    Shape(String),
    /// An allocation that does not fit in device memory.
    #[error("not enough device memory: {what} needs {needed} bytes, {free} bytes are free")]
    OutOfMemory {
        /// What was being allocated.
        what: String,
        /// Bytes needed.
        needed: u64,
        /// Bytes free.
        free: u64,
    },
    /// The PTX backend cannot run a launch: no such entry, parameters that do not match the
    /// entry's `.param` list, an instruction it does not implement, a module it cannot read.
    #[error("PTX backend: {0}")]
    Ptx(String),
    /// The emulator caught a bug in a kernel.
    #[error(transparent)]
    Emulator(#[from] Box<EmuError>),
}

impl Error {
    /// Whether the process's CUDA state may be broken after this error, so that no further work
    /// should run in it. A kernel fault (illegal or misaligned address, trap, launch failure) is
    /// sticky: every later CUDA call in the process returns it. Any driver error is treated so,
    /// since a fresh process costs about a second and a wrong verdict costs every later result.
    pub fn poisons_process(&self) -> bool {
        matches!(self, Error::Driver { .. })
    }
}

/// The runtime's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
