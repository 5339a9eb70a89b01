//! # Exercise 1: map, and the guard
//!
//! Write `y[i] = a * x[i] + b` for every `i < n`, one thread per element.
//!
//! The host launches `ceil(n / 256)` blocks of [`MAP_THREADS`](super::shapes::MAP_THREADS) =
//! 256 threads: the last block has threads past the end of the arrays, which must touch nothing
//! (the emulator reports the access one past the end, with the buffer and by how far).
//!
//! Why it matters: each element is read once and written once, so nothing above HBM can help.
//! The kernel is memory-bound; the most it can do is keep every warp's 32 loads on 32 consecutive
//! floats. Read docs/roofline.md (the memory-bound slope) and docs/coalescing.md.
//!
//! Helpers: `crate::cuda::thread::index_1d()`, `GlobalPtr::read` and `GlobalPtr::write`.
//!
//! Check it: `cargo xtask exercise 1`.

use crate::cuda::GlobalPtr;
use crate::kernel;

kernel! {
    /// `y[i] = a * x[i] + b` for every `i < n`.
    pub unsafe fn e01_map(x: GlobalPtr<f32>, y: GlobalPtr<f32>, a: f32, b: f32, n: u32) {
        // TODO: your kernel. (Until then, `y` keeps its zeros and the check fails.)
        let _ = (x, y, a, b, n);
    }
}
