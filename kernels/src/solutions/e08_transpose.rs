//! Exercise 8, solved: a tile goes through shared memory so that both the HBM read and the HBM
//! write are along rows (coalesced); one padding column makes the tile's column reads hit 32
//! different banks.

use crate::cuda::thread::{block_idx_x, block_idx_y, sync_threads, thread_idx_x, thread_idx_y};
use crate::cuda::{GlobalPtr, SharedPtr};
use crate::exercises::shapes::{TILE, TILE_ROWS};
use crate::{kernel, shared_array};

/// The tile's row pitch in floats: one more than the tile is wide, so that column `c` of rows
/// `r` and `r + 1` are 33 words apart and a warp reading a column touches 32 different banks.
const PITCH: usize = TILE + 1;

kernel! {
    /// `out[c][r] = input[r][c]` for a `rows x cols` row-major `input` (`out` is `cols x rows`).
    pub unsafe fn e08_transpose(input: GlobalPtr<f32>, out: GlobalPtr<f32>, rows: u32, cols: u32) {
        let tile: SharedPtr<f32> = shared_array![tile: [f32; TILE * PITCH]];
        let (tx, ty) = (thread_idx_x() as usize, thread_idx_y() as usize);
        let (rows, cols) = (rows as usize, cols as usize);
        let (row0, col0) = (block_idx_y() as usize * TILE, block_idx_x() as usize * TILE);
        // Read a TILE x TILE block along its rows: lane tx reads column col0 + tx.
        let mut y = ty;
        while y < TILE {
            let (r, c) = (row0 + y, col0 + tx);
            if r < rows && c < cols {
                unsafe { tile.write(y * PITCH + tx, input.read(r * cols + c)) };
            }
            y += TILE_ROWS as usize;
        }
        sync_threads();
        // Write the transposed block along the output's rows: lane tx writes out row col0 + y,
        // column row0 + tx, which is the tile's column y.
        let mut y = ty;
        while y < TILE {
            let (r, c) = (row0 + tx, col0 + y);
            if r < rows && c < cols {
                unsafe { out.write(c * rows + r, tile.read(tx * PITCH + y)) };
            }
            y += TILE_ROWS as usize;
        }
    }
}
