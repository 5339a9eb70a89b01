//! `scaffold_tiled`: a transpose through a shared-memory tile, `out[c][r] = input[r][c]`.
//!
//! Written by `cargo xtask new NAME --template tiled` (this file is the template, itself a
//! registered kernel, so the project's tests run it as generated). Change the kernel's body and
//! `reference` together; docs/registry.md says what each field of `SPEC` is for.
//!
//! A 16 x 16 block copies a 16 x 16 tile from HBM into shared memory by rows (coalesced), waits
//! at a barrier, and writes it out by rows of the output, reading the tile down a column. The
//! tile's rows are padded to 17 words so that a column's 16 elements sit in 16 different banks.

use crate::cuda::GlobalPtr;
use crate::cuda::thread::{block_idx_x, block_idx_y, sync_threads, thread_idx_x, thread_idx_y};
use crate::{kernel, shared_array};

/// Tile edge, and the block's edge in threads: one element per thread.
pub const TILE: u32 = 16;
/// The tile's row pitch in words: one more than its width, so columns do not share a bank.
pub const PITCH: u32 = TILE + 1;

kernel! {
    /// `out[c * rows + r] = input[r * cols + c]` for a `rows x cols` row-major input.
    pub unsafe fn scaffold_tiled(input: GlobalPtr<f32>, out: GlobalPtr<f32>, rows: u32, cols: u32) {
        let tile = shared_array![scaffold_tiled_tile: [f32; (TILE * PITCH) as usize]];
        let (tx, ty) = (thread_idx_x(), thread_idx_y());
        let (r, c) = (block_idx_y() * TILE + ty, block_idx_x() * TILE + tx);
        // HBM -> shared: lanes take consecutive columns of one input row.
        if r < rows && c < cols {
            unsafe { tile.write((ty * PITCH + tx) as usize, input.read((r * cols + c) as usize)) };
        }
        // Outside the `if`: every thread of the block must reach it.
        sync_threads();
        // Shared -> HBM: lanes take consecutive rows of the input, i.e. one output row.
        let (r, c) = (block_idx_y() * TILE + tx, block_idx_x() * TILE + ty);
        if r < rows && c < cols {
            unsafe { out.write((c * rows + r) as usize, tile.read((tx * PITCH + ty) as usize)) };
        }
    }
}

/// What the rest of the project needs (docs/registry.md); the GPU build never sees it.
#[cfg(not(target_arch = "nvptx64"))]
pub const SPEC: crate::registry::Spec = {
    use crate::launch_registered;
    use crate::registry::*;
    Spec {
        name: "scaffold_tiled",
        what: "out = input^T through a padded shared tile",
        dims: &["rows", "cols"],
        shapes: Shapes {
            run: &[RunShape {
                gpu: [8192, 8192, 1, 1, 1],
                // Not multiples of the tile: the edge tiles are exercised.
                emulator: [200, 300, 1, 1, 1],
            }],
            test_max: [100, 100, 1, 1, 1],
            multiple: [1, 1, 1, 1, 1],
            gpu_rows_checked: None,
        },
        inputs: |[rows, cols, ..]| std::vec![Buffer::f32(rows * cols)],
        input_range: (-1.0, 1.0),
        values_steer: false,
        affine_keys: None,
        output: |[rows, cols, ..]| Buffer::f32(rows * cols),
        rows: |[_, cols, ..]| cols,
        workspaces: |_| std::vec![],
        indices: |_| std::vec![],
        tensor_maps: |_| std::vec![],
        sm90a_only: false,
        launch: |launcher, buffers, [rows, cols, ..]| {
            let (input, out) = (buffers.input::<f32>(0)?, buffers.output::<f32>()?);
            let (rows, cols) = (rows as u32, cols as u32);
            let blocks = (cols.div_ceil(TILE), rows.div_ceil(TILE));
            launch_registered!(
                launcher,
                LaunchConfig::grid_2d(blocks, (TILE, TILE)),
                scaffold_tiled(input, out, rows, cols)
            )
        },
        // A copy: exact. Row `c` of the output is column `c` of the input.
        reference: |inputs, [rows, cols, ..], out_rows| {
            let column = |c: usize| (0..rows).map(move |r| f64::from(inputs[0][r * cols + c]));
            out_rows.iter().flat_map(|&c| column(c)).collect::<std::vec::Vec<f64>>().into()
        },
        tolerance: |_| 0.0,
        cost: |[rows, cols, ..]| Cost {
            bytes_read: 4 * (rows * cols) as u64,
            bytes_written: 4 * (rows * cols) as u64,
            flops: 0,
            ..Cost::NONE
        },
        accumulates: false,
        occupancy: Occupancy {
            threads: TILE * TILE,
            dynamic_shared: 0,
            in_flight_per_thread: Some(4),
        },
        baseline: Some(Baseline {
            op: "transpose",
            dims: &["rows", "cols"],
        }),
    }
};
