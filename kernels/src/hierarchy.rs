//! Microbenchmarks of the memory pyramid: each kernel isolates one level, so that its measured
//! bandwidth or latency can be set beside the vendor's figure.
//!
//! - [`stream_read`]: bandwidth of whatever level holds the working set: HBM when it is far
//!   larger than L2, L2 when it fits (the kernel re-reads it `passes` times).
//! - [`shared_read`]: shared-memory bandwidth: every thread reads the block's tile over and over.
//! - [`pointer_chase`] and [`shared_pointer_chase`]: load-to-use latency. One thread follows a
//!   chain `i = next[i]`; each load's address depends on the previous load, so nothing overlaps
//!   and the time per hop is the latency of the level the chain lives in.
//! - [`store_tiles`]: the rate of scattered stores, each lane's 4 bytes in its own 128-byte line
//!   (the naive transpose's write), against coalesced stores of the same bytes.

use crate::cuda::intrinsics::clock64;
use crate::cuda::thread::{
    block_dim_x, block_idx_x, grid_dim_x, grid_size_1d, index_1d, sync_threads, thread_idx_x,
};
use crate::cuda::warp::{WARP_SIZE, lane_id};
use crate::cuda::{GlobalPtr, SharedPtr};
use crate::elementwise::Words4;
use crate::{kernel, shared_array};

/// Threads per block for the streaming kernels.
pub const BLOCK_SIZE: u32 = 256;
/// The pointer chases' launch: one warp, of which one thread walks (a whole warp so that the
/// launch is an ordinary one; the other 31 lanes return at once).
pub const CHASE_THREADS: u32 = 32;
/// Words in the shared tile of [`shared_read`] and [`shared_pointer_chase`]: 32 KiB, small enough
/// for several blocks per SM, and a whole number of 16-byte rows per thread.
pub const SHARED_WORDS: usize = 8192;
/// A value the folded checksum never equals in practice; writing only when it does keeps the
/// compiler from deleting the loads without adding stores to the measurement.
pub const SENTINEL: u32 = 0x5eed_f00d;

/// Folds a 16-byte word into a running checksum (xor keeps it cheap: the loads must dominate).
#[inline(always)]
pub fn fold(acc: u32, w: Words4) -> u32 {
    acc ^ w.0[0] ^ w.0[1] ^ w.0[2] ^ w.0[3]
}

kernel! {
    /// Reads `n` 16-byte words `passes` times (grid-stride, coalesced) and folds them into a
    /// checksum, written to `out[0]` only if it equals [`SENTINEL`].
    pub unsafe fn stream_read(src: GlobalPtr<Words4>, n: u32, passes: u32, out: GlobalPtr<u32>) {
        let mut acc = 0u32;
        for _ in 0..passes {
            let mut i = index_1d();
            while i < n {
                acc = fold(acc, unsafe { src.read(i as usize) });
                i += grid_size_1d();
            }
        }
        if acc == SENTINEL {
            unsafe { out.write(0, acc) };
        }
    }
}

kernel! {
    /// Fills a 32 KiB shared tile, then every thread reads 16-byte words of it `passes` times,
    /// lane `l` reading row `l` so that a warp's 32 reads hit all 32 banks once per 4-byte slice.
    pub unsafe fn shared_read(passes: u32, out: GlobalPtr<u32>) {
        let tile: SharedPtr<Words4> = shared_array![tile: [Words4; SHARED_WORDS / 4]];
        let rows = SHARED_WORDS / 4;
        let t = thread_idx_x() as usize;
        let mut r = t;
        while r < rows {
            let v = r as u32;
            unsafe { tile.write(r, Words4([v, v ^ 1, v ^ 2, v ^ 3])) };
            r += block_dim_x() as usize;
        }
        sync_threads();
        let mut acc = 0u32;
        for p in 0..passes as usize {
            // Each pass starts at a different row so the loop cannot be hoisted.
            let mut r = (t + p) % rows;
            for _ in 0..rows / block_dim_x() as usize {
                acc = fold(acc, unsafe { tile.read(r) });
                r = (r + block_dim_x() as usize) % rows;
            }
        }
        if acc == SENTINEL {
            unsafe { out.write(0, acc) };
        }
    }
}

kernel! {
    /// One thread follows `steps` hops of the chain in `next` from index 0, then writes where it
    /// ended in `out[0]` and the elapsed SM clock cycles in `cycles[0]`. A first untimed walk of
    /// `warm` hops loads the chain into whatever cache level can hold it.
    pub unsafe fn pointer_chase(next: GlobalPtr<u32>, warm: u32, steps: u32, out: GlobalPtr<u32>, cycles: GlobalPtr<u64>) {
        if index_1d() != 0 {
            return;
        }
        let mut i = 0u32;
        for _ in 0..warm {
            i = unsafe { next.read(i as usize) };
        }
        let start = clock64();
        for _ in 0..steps {
            i = unsafe { next.read(i as usize) };
        }
        let end = clock64();
        unsafe {
            out.write(0, i);
            cycles.write(0, end - start);
        }
    }
}

kernel! {
    /// [`pointer_chase`] through a chain copied into shared memory first: shared-memory latency.
    pub unsafe fn shared_pointer_chase(next: GlobalPtr<u32>, len: u32, steps: u32, out: GlobalPtr<u32>, cycles: GlobalPtr<u64>) {
        let chain: SharedPtr<u32> = shared_array![chain: [u32; SHARED_WORDS]];
        let t = thread_idx_x();
        let mut k = t;
        while k < len {
            unsafe { chain.write(k as usize, next.read(k as usize)) };
            k += block_dim_x();
        }
        sync_threads();
        if t != 0 {
            return;
        }
        let mut i = 0u32;
        let start = clock64();
        for _ in 0..steps {
            i = unsafe { chain.read(i as usize) };
        }
        let end = clock64();
        unsafe {
            out.write(0, i);
            cycles.write(0, end - start);
        }
    }
}

/// Edge of a [`store_tiles`] tile in words: a warp's 32 lanes.
pub const STORE_TILE: u32 = WARP_SIZE;

/// Word `(row, col)` of tile `tile` in [`store_tiles`]'s output: tiles one after another, each
/// row-major, so a row is one 128-byte line.
#[inline(always)]
pub fn store_tile_word(tile: u32, row: u32, col: u32) -> u32 {
    (tile * STORE_TILE + row) * STORE_TILE + col
}

kernel! {
    /// Writes every word of `tiles` 32 x 32 tiles once, each its own index, a warp a line of the
    /// tile at a time: with `scattered` = 0 a row (lane `l` writes column `l`: one 128-byte line,
    /// a coalesced store); with `scattered` = 1 a column (lane `l` writes row `l`: 32 lines, 4
    /// bytes of a 32-byte sector each, the naive transpose's store, its sectors completed by the
    /// block's other warps). The same bytes either way, so the ratio of the two rates is what
    /// scattering stores costs the L1, the crossbar and L2, which no published microbenchmark
    /// measures (docs/model.md). Blocks of [`BLOCK_SIZE`] threads, a tile a block at a time.
    pub unsafe fn store_tiles(out: GlobalPtr<u32>, tiles: u32, scattered: u32) {
        let (lane, warp) = (lane_id(), thread_idx_x() / WARP_SIZE);
        let warps = block_dim_x() / WARP_SIZE;
        let mut tile = block_idx_x();
        while tile < tiles {
            let mut line = warp;
            while line < STORE_TILE {
                let (row, col) = if scattered != 0 { (lane, line) } else { (line, lane) };
                let i = store_tile_word(tile, row, col);
                unsafe { out.write(i as usize, i) };
                line += warps;
            }
            tile += grid_dim_x();
        }
    }
}
