//! The exercises: twelve kernels that climb the memory pyramid, one file each, in the order of
//! docs/exercises.md. Each file is a stub that compiles and fails its check: write the body, then
//! `cargo xtask exercise <n>` checks it against a CPU reference, with every emulator check on,
//! and reads its predicted (modelled) time against the exercise's target.
//!
//! The launch shapes (threads per block, tile sizes) are in [`shapes`]: the host launches with
//! them and the reference solutions (`crate::solutions`, kept apart) use them too.

pub mod shapes;

/// Declares each stub's file and re-exports its kernel, so that the host launches
/// `exercises::e01_map` as it launches `solutions::e01_map`. Not in the solutions' PTX build,
/// whose entries have the same names.
macro_rules! stubs {
    ($($file:ident),* $(,)?) => {$(
        #[cfg(not(kernels_exercises = "solutions"))]
        pub mod $file;
        #[cfg(not(kernels_exercises = "solutions"))]
        pub use $file::*;
    )*};
}

stubs!(
    e01_map,
    e02_map_2d,
    e03_block_sum,
    e04_stencil,
    e05_dot,
    e06_scan,
    e07_column_sum,
    e08_transpose,
    e09_matmul_tiled,
    e10_matmul_register,
    e11_softmax_online,
    e12_attention_tile,
);
