//! Host side of `kernels::transpose`: the arguments checked, then each kernel launched as its
//! spec says (the kernels are registered, docs/registry.md).

use kernels::transpose::{COPY_STRIDED, TILE, TRANSPOSE_NAIVE, TRANSPOSE_PADDED, TRANSPOSE_SHARED};

use super::{GridAxis, elements, grid_blocks, len_u32};
use crate::buffer::DeviceBuffer;
use crate::registry::{self, Spec};
use crate::runtime::{Launched, Runtime};
use crate::{Error, Result};
use perf::cost::{ComputeUnit, Cost, product};

/// Which transpose kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Straight through HBM: uncoalesced stores.
    Naive,
    /// Through a 32 x 32 shared tile: 32-way bank conflicts.
    Shared,
    /// Through a 32 x 33 shared tile: conflict-free.
    Padded,
}

impl Variant {
    /// Every variant, in the order of the lesson.
    pub const ALL: [Variant; 3] = [Variant::Naive, Variant::Shared, Variant::Padded];

    /// The kernel's name.
    pub fn kernel(self) -> &'static str {
        self.spec().name
    }

    /// The kernel's registered spec.
    pub fn spec(self) -> &'static Spec {
        match self {
            Variant::Naive => &TRANSPOSE_NAIVE,
            Variant::Shared => &TRANSPOSE_SHARED,
            Variant::Padded => &TRANSPOSE_PADDED,
        }
    }
}

/// `out (cols x rows) = input (rows x cols)` transposed, both row-major f32.
pub fn transpose(
    rt: &Runtime,
    variant: Variant,
    input: &DeviceBuffer<f32>,
    rows: usize,
    cols: usize,
    out: &mut DeviceBuffer<f32>,
) -> Result<Launched> {
    let n = elements("transpose", &[("rows", rows), ("cols", cols)])?;
    if input.len() != n || out.len() != n {
        return Err(Error::Shape(format!(
            "transpose of {rows} x {cols} needs input and output of {n} elements, got {} and {}",
            input.len(),
            out.len()
        )));
    }
    if rows == 0 || cols == 0 {
        return Ok(None);
    }
    len_u32("transpose rows", rows)?;
    len_u32("transpose cols", cols)?;
    len_u32("transpose", n)?;
    // The grid's limits, checked here to name the user's dimension; the spec launches it.
    grid_blocks("transpose", ("cols", cols), TILE, GridAxis::X)?;
    grid_blocks("transpose", ("rows", rows), TILE, GridAxis::Y)?;
    registry::launch_on(
        rt,
        variant.spec(),
        &[input],
        out,
        &[],
        [rows, cols, 1, 1, 1],
        false,
    )
}

/// Every variant's cost: each element read once and written once.
pub fn transpose_cost(rows: usize, cols: usize) -> Cost {
    let bytes = product(&[rows as u64, cols as u64, 4]);
    Cost {
        bytes_read: bytes,
        bytes_written: bytes,
        flops: 0,
        exps: 0,
        unit: ComputeUnit::CudaCoreF32,
        ..Cost::NONE
    }
}

/// `dst[i] = src[i * stride]` for `dst.len()` elements.
///
/// Its cost model is a copy's ([`copy_cost`](super::elementwise::copy_cost)): it uses `n` words
/// read and `n` written. A stride wider than a sector makes the hardware move more than this:
/// the profiler's sectors show how much.
pub fn copy_strided(
    rt: &Runtime,
    src: &DeviceBuffer<f32>,
    stride: usize,
    dst: &mut DeviceBuffer<f32>,
) -> Result<Launched> {
    let n = dst.len();
    if n == 0 {
        return Ok(None);
    }
    // The last element read is src[(n - 1) * stride].
    let span = elements(
        "copy_strided",
        &[("(elements - 1)", n - 1), ("stride", stride)],
    )?;
    if stride == 0 {
        return Err(Error::Shape(format!(
            "copy_strided of {n} elements at stride 0: the stride must be at least 1 (1 is a plain copy)"
        )));
    }
    if span >= src.len() {
        return Err(Error::Shape(format!(
            "copy_strided of {n} elements at stride {stride} needs a source of at least {} elements, got {}",
            span + 1,
            src.len()
        )));
    }
    len_u32("copy_strided", n)?;
    len_u32("copy_strided stride", stride)?;
    registry::launch_on(
        rt,
        &COPY_STRIDED,
        &[src],
        dst,
        &[],
        [n, stride, 1, 1, 1],
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::elementwise::copy_cost;

    /// The specs state the costs this module computes (the kernel crate cannot call it), at each
    /// of their sizes and at one element.
    #[test]
    fn the_specs_declare_these_costs() {
        for variant in Variant::ALL {
            for dims in variant.spec().shapes.every() {
                let want = transpose_cost(dims[0], dims[1]);
                assert_eq!(registry::cost(variant.spec(), dims), want, "{variant:?}");
            }
        }
        for dims in COPY_STRIDED.shapes.every() {
            assert_eq!(registry::cost(&COPY_STRIDED, dims), copy_cost(dims[0]));
        }
    }
}
