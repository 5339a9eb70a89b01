//! # Exercise 10: a register-blocked matmul
//!
//! Write `c = a b` as in exercise 9, but with each block computing a 64 x 64 tile of `c` and each
//! of its [`RB_THREADS`](super::shapes::RB_THREADS) = 256 threads a 4 x 4 block of outputs held
//! in registers (`[[f32; 4]; 4]`).
//!
//! The host launches a grid of `ceil(n / 64) x ceil(m / 64)` blocks of 256 threads (one
//! dimension: split `threadIdx.x` into a column `t % 16` and a row `t / 16`). Walk K
//! [`RB_K`](super::shapes::RB_K) = 16 at a time: the block loads a 64 x 16 tile of `a` and a 16 x
//! 64 tile of `b` (4 elements of each per thread), a barrier, then for each of the 16 steps a
//! thread reads 4 values of `a` and 4 of `b` from shared memory into registers and does the 16
//! multiply-adds of their outer product; a second barrier. Give thread `(tx, ty)` the rows
//! `ty + 16 i` and columns `tx + 16 j`, so that the 16 lanes of a row read 16 consecutive floats
//! (no bank conflict). `count_flops(2 * k)` once per output written.
//!
//! Why it matters: in exercise 9 each multiply-add needs two shared-memory reads, so shared
//! memory, not the FP32 units, sets the pace. Registers are the top of the pyramid: with 4 x 4
//! outputs per thread, 8 shared reads feed 16 multiply-adds, and each float from HBM is used 64
//! times (docs/gemm.md, step 3). The check's traffic budget is that of 64 x 64 tiles.
//!
//! Check it: `cargo xtask exercise 10`.

use crate::cuda::GlobalPtr;
use crate::kernel;

kernel! {
    /// `c = a b` for row-major `a` (`m x k`), `b` (`k x n`) and `c` (`m x n`).
    pub unsafe fn e10_matmul_register(a: GlobalPtr<f32>, b: GlobalPtr<f32>, c: GlobalPtr<f32>, m: u32, n: u32, k: u32) {
        // TODO: your kernel.
        let _ = (a, b, c, m, n, k);
    }
}
