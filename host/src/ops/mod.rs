//! One safe host function per kernel: validate the inputs, compute the launch configuration from
//! the kernel crate's own constants, launch; a registered kernel (docs/registry.md) is launched
//! as its spec says, so its launch is written once. Each also has its cost model beside it.

pub mod attention;
pub mod decode;
pub mod elementwise;
pub mod gemm;
pub mod hierarchy;
pub mod histogram;
pub mod softmax;
pub mod transpose;

use crate::{Error, Result};
use emu::DeviceLimits;

/// The element count of a shape, `dims` multiplied (each named as the user gave it, e.g.
/// `[("M", m), ("K", k)]`), or an error naming them when the product overflows the address
/// space. Every op computes its buffer sizes through this one, before comparing any length.
pub(crate) fn elements(what: &str, dims: &[(&str, usize)]) -> Result<usize> {
    dims.iter()
        .try_fold(1usize, |acc, &(_, d)| acc.checked_mul(d))
        .ok_or_else(|| {
            let names: Vec<&str> = dims.iter().map(|d| d.0).collect();
            let values: Vec<String> = dims.iter().map(|d| d.1.to_string()).collect();
            Error::Shape(format!(
                "{what}: {} = {} is more elements than the address space holds",
                names.join(" x "),
                values.join(" x ")
            ))
        })
}

/// One axis of a launch grid.
#[derive(Clone, Copy, Debug)]
pub(crate) enum GridAxis {
    X,
    Y,
}

/// The blocks along grid axis `axis` that cover the user's dimension `dim` = `extent` in tiles
/// of `tile`, or an error that names the dimension (not only the axis) when the axis cannot hold
/// that many blocks on any CUDA device (x: 2^31 - 1, y: 65535).
pub(crate) fn grid_blocks(
    what: &str,
    (dim, extent): (&str, usize),
    tile: usize,
    axis: GridAxis,
) -> Result<u32> {
    let limits = DeviceLimits::SM90.max_grid_dim;
    let (name, limit) = match axis {
        GridAxis::X => ("x", limits.x),
        GridAxis::Y => ("y", limits.y),
    };
    let blocks = extent.div_ceil(tile);
    u32::try_from(blocks)
        .ok()
        .filter(|&b| b <= limit)
        .ok_or_else(|| {
            Error::Shape(format!(
                "{what}: {dim} = {extent} needs {blocks} blocks of {tile} along the grid's {name} axis, which holds at most {limit}, so {dim} can be at most {}; split the problem along {dim}",
                limit as usize * tile
            ))
        })
}

/// `n` as the `u32` kernels index with, or a clear error for inputs too large for one launch.
pub(crate) fn len_u32(what: &str, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| {
        Error::Shape(format!(
            "{what} has {n} elements; one launch handles at most {}",
            u32::MAX
        ))
    })
}

/// Checks that buffers that must match in length do.
pub(crate) fn same_len(what: &str, lens: &[usize]) -> Result<()> {
    if lens.windows(2).all(|w| w[0] == w[1]) {
        Ok(())
    } else {
        Err(Error::Shape(format!(
            "{what}: buffer lengths differ ({lens:?})"
        )))
    }
}

/// The counts of an operation made of several launches (nothing from a GPU).
pub(crate) fn then(
    first: crate::runtime::Launched,
    second: crate::runtime::Launched,
) -> crate::runtime::Launched {
    match (first, second) {
        (Some(mut a), Some(b)) => {
            a.add(&b);
            Some(a)
        }
        _ => None,
    }
}
