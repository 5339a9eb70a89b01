//! # Exercise 6: a prefix scan
//!
//! Write the inclusive scan of each block's 256 elements: `out[i] = x[s] + x[s + 1] + ... +
//! x[i]`, where `s = 256 * (i / 256)` is the first element of `i`'s block, for every `i < n`
//! (elements past `n` are not written).
//!
//! The host launches blocks of [`BLOCK_THREADS`](super::shapes::BLOCK_THREADS) = 256 threads.
//! Scan within each warp with `shuffle_up` (at step `offset` = 1, 2, 4, 8, 16, a lane adds the
//! value `offset` lanes below it when `lane >= offset`); the last lane of each warp writes the
//! warp's total to shared memory; after a barrier the first warp scans the 8 totals; after a
//! second barrier each warp adds the total of the warps before it.
//!
//! Why it matters: a scan is the building block of stream compaction, radix sort and
//! top-k sampling, and it is a dependency chain that looks serial. In registers (shuffles) the
//! chain costs log2(32) steps per warp; shared memory joins the warps (docs/softmax.md for warp
//! collectives, docs/tiling.md for shared memory).
//!
//! Helpers: `crate::cuda::warp::{shuffle_up, FULL_MASK, WARP_SIZE}`.
//!
//! Check it: `cargo xtask exercise 6`.

use crate::cuda::GlobalPtr;
use crate::kernel;

kernel! {
    /// `out[i] = x[s] + x[s + 1] + ... + x[i]` where `s` is the first element of `i`'s block.
    pub unsafe fn e06_scan(x: GlobalPtr<f32>, out: GlobalPtr<f32>, n: u32) {
        // TODO: your kernel.
        let _ = (x, out, n);
    }
}
