//! Matrix transpose three ways: the lesson of how bytes move, not how many.
//!
//! All three move the same bytes across the HBM boundary (read `rows x cols` f32, write them
//! once). What differs is *how*: whether a warp's 32 accesses land in 4 consecutive 32-byte
//! sectors (coalesced) or in 32 different ones, and whether a warp's shared-memory accesses hit
//! 32 different banks or queue on one. `cargo xtask inspect transpose_naive` shows both, per line.
//!
//! 1. [`transpose_naive`]: reads rows (coalesced), writes columns: each lane's store goes to a
//!    different row of the output, 32 sectors per warp-wide store.
//! 2. [`transpose_shared`]: a 32 x 32 tile is read by rows into shared memory and written out by
//!    rows of the *output*, so both HBM sides are coalesced; but the tile is read by columns, and
//!    the 32 elements of a column of a 32-wide f32 tile all sit in the same bank: a 32-way conflict.
//! 3. [`transpose_padded`]: the same with each tile row padded to 33 words, which puts the
//!    elements of a column in 32 different banks: conflict-free.

use crate::cuda::thread::{block_idx_x, block_idx_y, sync_threads, thread_idx_x, thread_idx_y};
use crate::cuda::{GlobalPtr, SharedPtr};
use crate::{kernel, shared_array};

/// Tile edge: one warp's width, so a tile row is one coalesced warp-wide access.
pub const TILE: usize = 32;
/// Rows of threads per block; each thread handles `TILE / BLOCK_ROWS` elements of a tile column.
/// 32 x 8 = 256 threads: enough warps to hide latency, and each thread reuses its index maths.
pub const BLOCK_ROWS: usize = 8;
/// Padded tile pitch: one extra word shifts each row by one bank.
pub const PADDED_PITCH: usize = TILE + 1;

/// `(row, col)` of the input element that thread `(tx, ty)` handles at step `k` of tile
/// `(bx, by)`: tiles are `TILE` square, tile x runs along columns.
#[inline(always)]
pub fn tile_element(bx: usize, by: usize, tx: usize, ty: usize, k: usize) -> (usize, usize) {
    (by * TILE + ty + k * BLOCK_ROWS, bx * TILE + tx)
}

kernel! {
    /// `out[c][r] = input[r][c]` straight through HBM, one element per thread per step.
    pub unsafe fn transpose_naive(input: GlobalPtr<f32>, out: GlobalPtr<f32>, rows: u32, cols: u32) {
        let (rows, cols) = (rows as usize, cols as usize);
        for k in 0..TILE / BLOCK_ROWS {
            let (r, c) = tile_element(block_idx_x() as usize, block_idx_y() as usize, thread_idx_x() as usize, thread_idx_y() as usize, k);
            if r < rows && c < cols {
                // Read: lanes take consecutive columns of one row (coalesced). Write: lanes take
                // consecutive rows of one output column, `rows` floats apart (scattered).
                unsafe { out.write(c * rows + r, input.read(r * cols + c)) };
            }
        }
    }
}

/// The tiled transpose, with the tile's row pitch a parameter: the whole difference between the
/// conflicted and the conflict-free version.
#[inline(always)]
unsafe fn transpose_through(
    tile: SharedPtr<f32>,
    pitch: usize,
    input: GlobalPtr<f32>,
    out: GlobalPtr<f32>,
    rows: usize,
    cols: usize,
) {
    let (bx, by) = (block_idx_x() as usize, block_idx_y() as usize);
    let (tx, ty) = (thread_idx_x() as usize, thread_idx_y() as usize);
    // HBM -> shared, by rows of the input: coalesced reads, row-wise (conflict-free) stores.
    for k in 0..TILE / BLOCK_ROWS {
        let (r, c) = tile_element(bx, by, tx, ty, k);
        if r < rows && c < cols {
            unsafe { tile.write((ty + k * BLOCK_ROWS) * pitch + tx, input.read(r * cols + c)) };
        }
    }
    sync_threads();
    // Shared -> HBM, by rows of the output (the transposed tile): coalesced writes; the tile is
    // read down a column, `pitch` words apart, which is where banks collide when pitch = 32.
    for k in 0..TILE / BLOCK_ROWS {
        let (c, r) = tile_element(by, bx, tx, ty, k);
        if r < rows && c < cols {
            unsafe { out.write(c * rows + r, tile.read(tx * pitch + ty + k * BLOCK_ROWS)) };
        }
    }
}

kernel! {
    /// Through a 32 x 32 shared tile: coalesced both ways, 32-way bank conflicts on the reads.
    pub unsafe fn transpose_shared(input: GlobalPtr<f32>, out: GlobalPtr<f32>, rows: u32, cols: u32) {
        let tile = shared_array![tile: [f32; TILE * TILE]];
        unsafe { transpose_through(tile, TILE, input, out, rows as usize, cols as usize) };
    }
}

kernel! {
    /// Through a 32 x 33 shared tile: coalesced both ways and conflict-free.
    pub unsafe fn transpose_padded(input: GlobalPtr<f32>, out: GlobalPtr<f32>, rows: u32, cols: u32) {
        let tile = shared_array![padded: [f32; TILE * PADDED_PITCH]];
        unsafe { transpose_through(tile, PADDED_PITCH, input, out, rows as usize, cols as usize) };
    }
}

kernel! {
    /// `dst[i] = src[i * stride]`: with stride 1 a warp reads 4 sectors, with stride >= 8 floats
    /// every lane touches its own sector: the same bytes used, up to 8x the bytes moved.
    pub unsafe fn copy_strided(src: GlobalPtr<f32>, dst: GlobalPtr<f32>, n: u32, stride: u32) {
        let i = crate::cuda::thread::index_1d();
        if i < n {
            unsafe { dst.write(i as usize, src.read(i as usize * stride as usize)) };
        }
    }
}

// What the rest of the project needs of each kernel here (docs/registry.md); the GPU build never
// sees it.

/// Each transpose's spec but for its kernel: the three move the same bytes, and differ only in
/// how (and so in the loads each thread has in flight).
#[cfg(not(target_arch = "nvptx64"))]
const fn transpose_spec(
    name: &'static str,
    what: &'static str,
    in_flight_per_thread: u32,
    launch: crate::registry::LaunchFn,
) -> crate::registry::Spec {
    use crate::registry::*;
    Spec {
        name,
        what,
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
        launch,
        // From the definition, not from `tile_element`, which the kernels share: a copy, exact.
        // Row `c` of the output is column `c` of the input.
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
            threads: (TILE * BLOCK_ROWS) as u32,
            dynamic_shared: 0,
            in_flight_per_thread: Some(in_flight_per_thread),
        },
        baseline: Some(Baseline {
            op: "transpose",
            dims: &["rows", "cols"],
        }),
    }
}

/// A transpose kernel's [`Spec::launch`](crate::registry::Spec::launch): a block of
/// `TILE x BLOCK_ROWS` threads per `TILE x TILE` tile, tile x along the columns.
#[cfg(not(target_arch = "nvptx64"))]
macro_rules! tiled_launch {
    ($kernel:ident) => {
        |launcher, buffers, [rows, cols, ..]| {
            let (input, out) = (buffers.input::<f32>(0)?, buffers.output::<f32>()?);
            let (rows, cols, tile) = (rows as u32, cols as u32, TILE as u32);
            let blocks = (cols.div_ceil(tile), rows.div_ceil(tile));
            let geometry = crate::registry::LaunchConfig::grid_2d(blocks, (tile, BLOCK_ROWS as u32));
            crate::launch_registered!(launcher, geometry, $kernel(input, out, rows, cols))
        }
    };
}

/// A thread moves `TILE / BLOCK_ROWS` = 4 elements: the naive transpose stores each before it
/// loads the next, one 4-byte load in flight.
#[cfg(not(target_arch = "nvptx64"))]
pub const TRANSPOSE_NAIVE: crate::registry::Spec = transpose_spec(
    "transpose_naive",
    "out = input^T straight through HBM: coalesced loads, scattered stores",
    4,
    tiled_launch!(transpose_naive),
);

/// The tiled transposes load all four of a thread's elements into the tile before the barrier.
#[cfg(not(target_arch = "nvptx64"))]
const TILED_IN_FLIGHT: u32 = (TILE / BLOCK_ROWS) as u32 * 4;

#[cfg(not(target_arch = "nvptx64"))]
pub const TRANSPOSE_SHARED: crate::registry::Spec = transpose_spec(
    "transpose_shared",
    "out = input^T through a 32 x 32 shared tile: coalesced, 32-way bank conflicts",
    TILED_IN_FLIGHT,
    tiled_launch!(transpose_shared),
);

#[cfg(not(target_arch = "nvptx64"))]
pub const TRANSPOSE_PADDED: crate::registry::Spec = transpose_spec(
    "transpose_padded",
    "out = input^T through a 32 x 33 shared tile: coalesced, conflict-free",
    TILED_IN_FLIGHT,
    tiled_launch!(transpose_padded),
);

/// The stride is a dimension, not a constant of the spec: the property test draws it (1 is a
/// plain copy, 8 and more a sector per element), and the row says it.
#[cfg(not(target_arch = "nvptx64"))]
pub const COPY_STRIDED: crate::registry::Spec = {
    use crate::elementwise::BLOCK_SIZE;
    use crate::launch_registered;
    use crate::registry::*;
    Spec {
        name: "copy_strided",
        what: "dst[i] = src[i * stride]",
        dims: &["n", "stride"],
        shapes: Shapes {
            run: &[RunShape {
                // Stride 8 floats = 32 bytes: every lane in its own sector, 8x the bytes of a
                // contiguous read moved for the same bytes used.
                gpu: [1 << 24, 8, 1, 1, 1],
                emulator: [1 << 16, 8, 1, 1, 1],
            }],
            test_max: [3000, 40, 1, 1, 1],
            multiple: [1, 1, 1, 1, 1],
            gpu_rows_checked: None,
        },
        // The first column of an `n x stride` row-major matrix.
        inputs: |[n, stride, ..]| std::vec![Buffer::f32(n * stride)],
        input_range: (-1.0, 1.0),
        values_steer: false,
        affine_keys: None,
        output: |[n, ..]| Buffer::f32(n),
        rows: |_| 1,
        workspaces: |_| std::vec![],
        indices: |_| std::vec![],
        tensor_maps: |_| std::vec![],
        sm90a_only: false,
        launch: |launcher, buffers, [n, stride, ..]| {
            let (src, dst) = (buffers.input::<f32>(0)?, buffers.output::<f32>()?);
            let (n, stride) = (n as u32, stride as u32);
            launch_registered!(
                launcher,
                LaunchConfig::for_elements(n, BLOCK_SIZE),
                copy_strided(src, dst, n, stride)
            )
        },
        // A copy: exact.
        reference: |inputs, [n, stride, ..], _| {
            let values: std::vec::Vec<f64> = (0..n).map(|i| f64::from(inputs[0][i * stride])).collect();
            values.into()
        },
        tolerance: |_| 0.0,
        // The bytes it uses, a copy's: the sectors a wide stride moves beside them are what
        // `cargo xtask inspect copy_strided` shows and the model predicts from.
        cost: |[n, ..]| crate::elementwise::words_copied(n),
        // One 4-byte load in flight per thread before it waits.
        accumulates: false,
        occupancy: Occupancy {
            threads: BLOCK_SIZE,
            dynamic_shared: 0,
            in_flight_per_thread: Some(4),
        },
        baseline: Some(Baseline {
            op: "strided_copy",
            dims: &["n", "stride"],
        }),
    }
};
