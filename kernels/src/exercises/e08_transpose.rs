//! # Exercise 8: transpose, and bank conflicts
//!
//! Write `out[c][r] = input[r][c]` for a `rows x cols` row-major `input` (`out` is `cols x rows`,
//! row-major).
//!
//! The host launches a grid of `ceil(cols / 32) x ceil(rows / 32)` blocks of
//! [`TILE`](super::shapes::TILE) x [`TILE_ROWS`](super::shapes::TILE_ROWS) = 32 x 8 threads;
//! each block moves one 32 x 32 tile, each thread 4 of its elements. Read the tile along its
//! rows into shared memory, wait at a barrier, then write it out along the output's rows: both
//! HBM accesses coalesced. Then pad the tile (`[f32; 32 * 33]`): a warp that reads a column of a
//! 32-wide tile hits one bank 32 times (a 32-way conflict); with a pitch of 33 floats, 32 banks.
//!
//! Why it matters: the naive transpose either reads or writes with a stride of a whole row, one
//! sector per element. Shared memory turns the stride into a local reshuffle, and its 32 banks
//! decide how fast that is (docs/coalescing.md, docs/tiling.md). `cargo xtask exercise 8` prints
//! the bank-conflict degree the emulator counted.
//!
//! Check it: `cargo xtask exercise 8`.

use crate::cuda::GlobalPtr;
use crate::kernel;

kernel! {
    /// `out[c][r] = input[r][c]` for a `rows x cols` row-major `input`.
    pub unsafe fn e08_transpose(input: GlobalPtr<f32>, out: GlobalPtr<f32>, rows: u32, cols: u32) {
        // TODO: your kernel.
        let _ = (input, out, rows, cols);
    }
}
