//! Host side of `kernels::hierarchy`: the memory-pyramid microbenchmarks.

use kernels::elementwise::Words4;
use kernels::hierarchy::{BLOCK_SIZE, CHASE_THREADS, SHARED_WORDS, STORE_TILE};

use super::len_u32;
use crate::buffer::DeviceBuffer;
use crate::launch;
use crate::runtime::{Launched, Runtime};
use crate::{Error, Result};
use emu::LaunchConfig;
use perf::cost::{ComputeUnit, Cost, product};

/// Most blocks a streaming launch uses: enough to fill every SM of any current GPU many times
/// over; beyond it the grid-stride loop takes over.
const MAX_STREAM_BLOCKS: u32 = 132 * 16;

/// Reads `src` `passes` times. `src.len()` must be a multiple of 4 (whole 16-byte words).
pub fn stream_read(
    rt: &Runtime,
    src: &DeviceBuffer<u32>,
    passes: u32,
    out: &mut DeviceBuffer<u32>,
) -> Result<Launched> {
    if !src.len().is_multiple_of(4) || src.is_empty() || out.is_empty() {
        return Err(Error::Shape(format!(
            "stream_read needs a non-empty source of whole 16-byte words (got {} words) and an output word",
            src.len()
        )));
    }
    let n = len_u32("stream_read", src.len() / 4)?;
    let cfg = LaunchConfig::for_elements(n, BLOCK_SIZE);
    let cfg = LaunchConfig::linear(cfg.grid.x.min(MAX_STREAM_BLOCKS), BLOCK_SIZE);
    let (src, out) = (src.ptr().cast::<Words4>(), out.ptr());
    launch!(rt, cfg, hierarchy::stream_read(src, n, passes, out))
}

/// Bytes `stream_read` moves: the buffer, `passes` times.
pub fn stream_read_cost(words: usize, passes: u32) -> Cost {
    Cost {
        bytes_read: product(&[4, words as u64, u64::from(passes)]),
        bytes_written: 0,
        flops: 0,
        exps: 0,
        unit: ComputeUnit::CudaCoreF32,
        ..Cost::NONE
    }
}

/// Shared-memory bandwidth: `blocks` blocks of `threads` threads each read the 32 KiB tile
/// `passes` times.
pub fn shared_read(
    rt: &Runtime,
    blocks: u32,
    threads: u32,
    passes: u32,
    out: &mut DeviceBuffer<u32>,
) -> Result<Launched> {
    let rows = (SHARED_WORDS / 4) as u32;
    if threads == 0 || !rows.is_multiple_of(threads) || out.is_empty() {
        return Err(Error::Shape(format!(
            "shared_read needs a thread count dividing {rows} and an output word"
        )));
    }
    let out = out.ptr();
    launch!(
        rt,
        LaunchConfig::linear(blocks, threads),
        hierarchy::shared_read(passes, out)
    )
}

/// Shared bytes `shared_read` reads (its one pass of writes aside).
pub fn shared_read_bytes(blocks: u32, passes: u32) -> u64 {
    product(&[
        u64::from(blocks),
        u64::from(passes),
        (SHARED_WORDS * 4) as u64,
    ])
}

/// One thread walks `steps` hops of `chain` after `warm` untimed hops; writes the final index to
/// `end[0]` and the clock cycles of the timed hops to `cycles[0]`.
pub fn pointer_chase(
    rt: &Runtime,
    chain: &DeviceBuffer<u32>,
    warm: u32,
    steps: u32,
    end: &mut DeviceBuffer<u32>,
    cycles: &mut DeviceBuffer<u64>,
) -> Result<Launched> {
    check_chain(chain, end, cycles)?;
    let (next, end, cycles) = (chain.ptr(), end.ptr(), cycles.ptr());
    launch!(
        rt,
        LaunchConfig::linear(1, CHASE_THREADS),
        hierarchy::pointer_chase(next, warm, steps, end, cycles)
    )
}

/// [`pointer_chase`] with the chain in shared memory (at most `SHARED_WORDS` links).
pub fn shared_pointer_chase(
    rt: &Runtime,
    chain: &DeviceBuffer<u32>,
    steps: u32,
    end: &mut DeviceBuffer<u32>,
    cycles: &mut DeviceBuffer<u64>,
) -> Result<Launched> {
    check_chain(chain, end, cycles)?;
    if chain.len() > SHARED_WORDS {
        return Err(Error::Shape(format!(
            "a shared-memory chain holds at most {SHARED_WORDS} links, got {}",
            chain.len()
        )));
    }
    let len = chain.len() as u32;
    let (next, end, cycles) = (chain.ptr(), end.ptr(), cycles.ptr());
    launch!(
        rt,
        LaunchConfig::linear(1, BLOCK_SIZE),
        hierarchy::shared_pointer_chase(next, len, steps, end, cycles)
    )
}

fn check_chain(
    chain: &DeviceBuffer<u32>,
    end: &DeviceBuffer<u32>,
    cycles: &DeviceBuffer<u64>,
) -> Result<()> {
    if chain.is_empty() || end.is_empty() || cycles.is_empty() {
        return Err(Error::Shape("a pointer chase needs a non-empty chain and one word each for the end index and the cycles".into()));
    }
    len_u32("pointer_chase", chain.len()).map(|_| ())
}

/// Writes every word of `out` once (`out[i] = i`) in 32 x 32 tiles, by columns of each tile
/// (`scattered`: the naive transpose's stores) or by rows (coalesced). `out.len()` must be a
/// non-zero multiple of 1024 words.
pub fn store_tiles(rt: &Runtime, out: &mut DeviceBuffer<u32>, scattered: bool) -> Result<Launched> {
    let tile_words = (STORE_TILE * STORE_TILE) as usize;
    if out.is_empty() || !out.len().is_multiple_of(tile_words) {
        return Err(Error::Shape(format!(
            "store_tiles needs whole 32 x 32 tiles of words (got {} words)",
            out.len()
        )));
    }
    let tiles = len_u32("store_tiles", out.len() / tile_words)?;
    let cfg = LaunchConfig::linear(tiles.min(MAX_STREAM_BLOCKS), BLOCK_SIZE);
    let (out, scattered) = (out.ptr(), u32::from(scattered));
    launch!(rt, cfg, hierarchy::store_tiles(out, tiles, scattered))
}

/// Bytes `store_tiles` writes: every word of the buffer once.
pub fn store_tiles_cost(words: usize) -> Cost {
    Cost {
        bytes_read: 0,
        bytes_written: product(&[4, words as u64]),
        flops: 0,
        exps: 0,
        unit: ComputeUnit::CudaCoreF32,
        ..Cost::NONE
    }
}
