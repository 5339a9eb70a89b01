//! The exercises' launch shapes, shared by the stubs, the solutions and the host that launches
//! them: change one here and both sides follow.

/// Exercises 1, 4: threads per block of a one-dimensional launch (8 warps).
pub const MAP_THREADS: u32 = 256;
/// Exercise 2: the block is 32 x 8 threads, x along a row so that a warp reads 32 consecutive
/// floats (one 128-byte line).
pub const MAP_2D_X: u32 = 32;
pub const MAP_2D_Y: u32 = 8;
/// Exercises 3, 5 and 6: threads per block, and elements per block (one each).
pub const BLOCK_THREADS: u32 = 256;
/// Exercise 4: the stencil's radius (3 points: `i - 1`, `i`, `i + 1`).
pub const STENCIL_RADIUS: usize = 1;
/// Exercise 7: threads per block, one column each.
pub const COLUMN_THREADS: u32 = 256;
/// Exercise 8: the transpose's tile is `TILE x TILE`, moved by a block of `TILE x TILE_ROWS`
/// threads, each moving `TILE / TILE_ROWS` elements.
pub const TILE: usize = 32;
pub const TILE_ROWS: u32 = 8;
/// Exercise 9: the tiled matmul's tiles are `MM_TILE x MM_TILE`, one output per thread.
pub const MM_TILE: usize = 16;
/// Exercise 10: a block computes an `RB_TILE x RB_TILE` tile of C with `RB_THREADS` threads,
/// each `RB_PER_THREAD x RB_PER_THREAD` outputs kept in registers; K goes `RB_K` at a time.
pub const RB_TILE: usize = 64;
pub const RB_K: usize = 16;
pub const RB_PER_THREAD: usize = 4;
/// 16 x 16 threads: a 64-wide tile, 4 outputs per thread each way.
pub const RB_THREADS: u32 = ((RB_TILE / RB_PER_THREAD) * (RB_TILE / RB_PER_THREAD)) as u32;
/// Exercise 11: threads per block, one warp per row (8 rows per block).
pub const SOFTMAX_THREADS: u32 = 256;
/// Exercise 12: one attention tile. The head dimension is `ATT_D`; a block takes `ATT_ROWS`
/// query rows, one thread each, and streams the keys and values through shared memory
/// `ATT_KEYS` at a time: the query tile of docs/attention.md's f32 kernel (`BR = 64`), with one
/// thread per row instead of its register blocks, and a head small enough (32) that a thread's
/// query row and output row fit in its registers.
pub const ATT_D: usize = 32;
pub const ATT_ROWS: u32 = 64;
pub const ATT_KEYS: usize = 16;
