//! Host side of `kernels::histogram`: the learner's histogram (local memory, a device function,
//! atomics).

use kernels::histogram::{BINS, THREADS};

use super::len_u32;
use crate::buffer::DeviceBuffer;
use crate::launch;
use crate::runtime::{Launched, Runtime};
use crate::{Error, Result};
use emu::LaunchConfig;

/// Most blocks a launch uses: each block sends its [`BINS`] counts to HBM once, so more blocks
/// than the GPU holds at a time only add global atomics; the grid-stride loop covers the rest.
const MAX_BLOCKS: u32 = 132 * 4;

/// Adds the histogram of `data` (bin = the top `BIN_BITS` bits of each value) into `hist`, which
/// holds [`BINS`] counts: zero it (a fresh [`Runtime::alloc`]) for the histogram alone.
pub fn histogram_u32(
    rt: &Runtime,
    data: &DeviceBuffer<u32>,
    hist: &mut DeviceBuffer<u32>,
) -> Result<Launched> {
    if hist.len() != BINS {
        return Err(Error::Shape(format!(
            "histogram_u32 needs {BINS} bins, got a buffer of {}",
            hist.len()
        )));
    }
    let n = len_u32("histogram_u32", data.len())?;
    let cfg = LaunchConfig::for_elements(n, THREADS);
    let cfg = LaunchConfig::linear(cfg.grid.x.min(MAX_BLOCKS), THREADS);
    let (data, hist) = (data.ptr(), hist.ptr());
    launch!(rt, cfg, histogram::histogram_u32(data, n, hist))
}
