//! The exercises' reference solutions (docs/exercises.md), one file per exercise, with the same
//! kernel names as the stubs in `crate::exercises`. Read one after you have passed the exercise,
//! or when stuck: CI checks that every solution passes and every stub fails.

pub mod e01_map;
pub mod e02_map_2d;
pub mod e03_block_sum;
pub mod e04_stencil;
pub mod e05_dot;
pub mod e06_scan;
pub mod e07_column_sum;
pub mod e08_transpose;
pub mod e09_matmul_tiled;
pub mod e10_matmul_register;
pub mod e11_softmax_online;
pub mod e12_attention_tile;

pub use e01_map::*;
pub use e02_map_2d::*;
pub use e03_block_sum::*;
pub use e04_stencil::*;
pub use e05_dot::*;
pub use e06_scan::*;
pub use e07_column_sum::*;
pub use e08_transpose::*;
pub use e09_matmul_tiled::*;
pub use e10_matmul_register::*;
pub use e11_softmax_online::*;
pub use e12_attention_tile::*;
