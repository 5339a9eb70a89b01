//! The process's own watchdog for the commands that launch kernels in this process (`inspect`,
//! `predict`, `exercise`). The emulator bounds each launch with its budget
//! (`KERNELS_EMU_WATCHDOG_S`), but a kernel that never returns on a GPU, or a launch that hangs
//! in the driver, has no such bound: `run` keeps its cases in a child process it stops after
//! `--case-timeout`; these commands stop themselves after `--timeout`, saying so.

use std::sync::mpsc;
use std::time::Duration;

/// The `--timeout` of a command that launches kernels in its own process.
#[derive(clap::Args, Clone, Copy)]
pub struct Deadline {
    /// Seconds the command may take before it stops itself and fails (a hang: a kernel that
    /// never returns on a GPU, or a driver call that does not come back).
    #[arg(long = "timeout", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub seconds: u64,
}

/// While this lives the process is watched: if it is not dropped within the deadline the
/// process prints why and exits with status 1. Dropping it (the command's work is done) ends
/// the watch.
#[must_use = "the watch ends when the guard is dropped"]
pub struct Watch {
    _done: mpsc::Sender<()>,
}

/// Starts the watch over `command`'s work (e.g. `inspect vector_add_f32`).
pub fn arm(deadline: Deadline, command: &str) -> Watch {
    let (done, wait) = mpsc::channel::<()>();
    let command = command.to_string();
    std::thread::spawn(move || {
        // A drop of the guard disconnects the channel: the work ended in time.
        if let Err(mpsc::RecvTimeoutError::Timeout) =
            wait.recv_timeout(Duration::from_secs(deadline.seconds))
        {
            eprintln!(
                "error: `cargo xtask {command}` gave no result within {} s (--timeout): stopped (a hang? a kernel that never returns, or a driver call that does not come back)",
                deadline.seconds
            );
            std::process::exit(1);
        }
    });
    Watch { _done: done }
}
