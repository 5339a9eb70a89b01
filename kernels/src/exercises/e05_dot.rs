//! # Exercise 5: a dot product with warp shuffles
//!
//! Write `partial[b] = x[i] * y[i]` summed over block `b`'s 256 elements `i` (past `n`: 0).
//!
//! The host launches blocks of [`BLOCK_THREADS`](super::shapes::BLOCK_THREADS) = 256 threads
//! (8 warps). Sum each warp's 32 products in registers with `shuffle_down` (or `shuffle_xor`):
//! five steps, every lane taking part (`FULL_MASK`). Lane 0 of each warp writes its warp's sum to
//! a shared array of 8; after a barrier, the first warp sums those 8 the same way.
//!
//! Why it matters: a shuffle moves a register from one lane to another without touching shared
//! memory, the fastest level of the pyramid after the registers themselves. Exercise 3 used 9
//! barriers and 511 shared writes per block; this uses one barrier and 8. A shuffle with a mask
//! that leaves out a lane that takes part, or with lanes that do not all reach it, is undefined
//! on the GPU: the emulator names the lane (docs/softmax.md, warp reductions).
//!
//! Helpers: `crate::cuda::warp::{shuffle_down, FULL_MASK, WARP_SIZE}`.
//!
//! Check it: `cargo xtask exercise 5`.

use crate::cuda::GlobalPtr;
use crate::kernel;

kernel! {
    /// `partial[b] = sum of x[i] * y[i]` over block `b`'s 256 elements (past `n`: 0).
    pub unsafe fn e05_dot(x: GlobalPtr<f32>, y: GlobalPtr<f32>, partial: GlobalPtr<f32>, n: u32) {
        // TODO: your kernel.
        let _ = (x, y, partial, n);
    }
}
