//! # Exercise 9: a tiled matmul
//!
//! Write `c = a b` for row-major f32 matrices `a` (`m x k`), `b` (`k x n`) and `c` (`m x n`),
//! one thread per element of `c`.
//!
//! The host launches a grid of `ceil(n / 16) x ceil(m / 16)` blocks of
//! [`MM_TILE`](super::shapes::MM_TILE) x `MM_TILE` = 16 x 16 threads (x along a row of `c`).
//! Walk K 16 at a time: each thread loads one element of a 16 x 16 tile of `a` and one of `b`
//! into shared arrays (0 outside the matrices), a barrier, 16 multiply-adds from the tiles, and a
//! second barrier before the next step overwrites them. `count_flops(2 * k)` once per output
//! written (the model's FP32 time reads it).
//!
//! Why it matters: the naive kernel loads `2k` floats from global memory per output, `2mnk`
//! in all; with 16 x 16 tiles each loaded float is used 16 times, so global traffic falls 16x
//! and the kernel climbs the roofline's slope from memory-bound towards compute-bound
//! (docs/gemm.md, steps 1 and 2; docs/tiling.md). The check counts the bytes your loads ask for.
//!
//! Check it: `cargo xtask exercise 9`.

use crate::cuda::GlobalPtr;
use crate::kernel;

kernel! {
    /// `c = a b` for row-major `a` (`m x k`), `b` (`k x n`) and `c` (`m x n`).
    pub unsafe fn e09_matmul_tiled(a: GlobalPtr<f32>, b: GlobalPtr<f32>, c: GlobalPtr<f32>, m: u32, n: u32, k: u32) {
        // TODO: your kernel.
        let _ = (a, b, c, m, n, k);
    }
}
