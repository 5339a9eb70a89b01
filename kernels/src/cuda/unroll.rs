//! `#pragma unroll` for Rust kernels.
//!
//! A per-thread array (an accumulator tile, a set of `mma` fragments) stays in registers only if
//! every index into it is a compile-time constant; a loop the compiler does not unroll indexes
//! it at run time, and the array moves to local memory (a stack frame in `cargo xtask ptxas`,
//! backed by L1 and HBM). LLVM unrolls short simple loops by itself, but not an epilogue loop
//! with stores and branches, nor loops whose bodies hold several inline-assembly `mma` or
//! `ldmatrix` instructions; and Rust has no unroll pragma. So [`unroll!`](crate::unroll) writes
//! the copies out: `unroll!(i in 0..8 { body })` is the body eight times with `i` bound to
//! `0usize`, ..., `7usize`. Trip counts: 2, 4, 8 or 16. A bound that depends on a const generic
//! is written as the largest case with a guard, `unroll!(i in 0..8 { if i < D / 16 { ... } })`,
//! which each instantiation folds away.

/// Repeats a block with the loop variable bound to each constant in `0..N` (`N` = 2, 4, 8, 16).
///
/// ```
/// let mut acc = [0u32; 4];
/// kernels::unroll!(i in 0..4 { acc[i] = 10 * i as u32; });
/// assert_eq!(acc, [0, 10, 20, 30]);
/// ```
#[macro_export]
macro_rules! unroll {
    ($i:ident in 0..2 $body:block) => { $crate::unroll!(@ $i [0 1] $body) };
    ($i:ident in 0..4 $body:block) => { $crate::unroll!(@ $i [0 1 2 3] $body) };
    ($i:ident in 0..8 $body:block) => { $crate::unroll!(@ $i [0 1 2 3 4 5 6 7] $body) };
    ($i:ident in 0..16 $body:block) => {
        $crate::unroll!(@ $i [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15] $body)
    };
    (@ $i:ident [$($n:literal)*] $body:block) => {
        $({
            #[allow(unused_variables)]
            let $i: usize = $n;
            $body
        })*
    };
}
