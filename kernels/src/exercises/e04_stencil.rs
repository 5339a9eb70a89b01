//! # Exercise 4: a shared-memory stencil
//!
//! Write `out[i] = (x[i - 1] + x[i] + x[i + 1]) / 3` for every `i < n`, with `x` taken as 0
//! outside `0..n`, computed as `(x[i - 1] + x[i] + x[i + 1]) * (1.0 / 3.0)`.
//!
//! The host launches blocks of [`MAP_THREADS`](super::shapes::MAP_THREADS) = 256 threads. Read
//! each input from HBM once: each block loads its 256 elements plus a halo of
//! [`STENCIL_RADIUS`](super::shapes::STENCIL_RADIUS) on each side into a shared tile of
//! `256 + 2` floats, waits at a barrier, then each thread reads its three neighbours from the
//! tile.
//!
//! Why it matters: three threads need every input. Without the tile each is loaded three times
//! (L1 and L2 catch most of the repeats, at a cost); with it, HBM sees each byte once and the
//! reuse happens in shared memory, one level up the pyramid (docs/tiling.md). The halo is where
//! the off-by-one errors live: the emulator names the array, its size and the index.
//!
//! Check it: `cargo xtask exercise 4`.

use crate::cuda::GlobalPtr;
use crate::kernel;

kernel! {
    /// `out[i] = (x[i - 1] + x[i] + x[i + 1]) / 3`, with `x` taken as 0 outside `0..n`.
    pub unsafe fn e04_stencil(x: GlobalPtr<f32>, out: GlobalPtr<f32>, n: u32) {
        // TODO: your kernel.
        let _ = (x, out, n);
    }
}
