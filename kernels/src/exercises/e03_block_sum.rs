//! # Exercise 3: a block-shared sum
//!
//! Write `partial[b] = x[256 b] + x[256 b + 1] + ... + x[256 b + 255]` for each block `b`
//! (elements at or past `n` count as 0): the first pass of a sum of a whole array.
//!
//! The host launches blocks of [`BLOCK_THREADS`](super::shapes::BLOCK_THREADS) = 256 threads,
//! one element each. Put each thread's element in a shared array
//! (`shared_array![sums: [f32; BLOCK_THREADS as usize]]`), then halve: at each step the first
//! half of the threads add the second half's values to theirs, until `sums[0]` holds the block's
//! sum.
//!
//! Why it matters: shared memory is the one level of the pyramid that the threads of a block
//! share, and the only way they can combine values without going back to HBM. It needs a
//! barrier (`sync_threads()`) between one step's writes and the next step's reads, and every
//! thread of the block must reach each barrier: a barrier inside `if t < stride` is the classic
//! mistake, and the emulator reports it (docs/tiling.md, docs/emulator.md).
//!
//! Helpers: `crate::cuda::thread::{thread_idx_x, block_idx_x, index_1d, sync_threads}`,
//! `crate::shared_array!`.
//!
//! Check it: `cargo xtask exercise 3`.

use crate::cuda::GlobalPtr;
use crate::kernel;

kernel! {
    /// `partial[b] = x[b * 256] + ... + x[b * 256 + 255]` (elements past `n` count as 0).
    pub unsafe fn e03_block_sum(x: GlobalPtr<f32>, partial: GlobalPtr<f32>, n: u32) {
        // TODO: your kernel.
        let _ = (x, partial, n);
    }
}
