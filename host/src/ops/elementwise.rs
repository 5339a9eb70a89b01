//! Host side of `kernels::elementwise`.

use half::f16;
use kernels::elementwise::{COPY_WORDS, VECTOR_ADD_F16, VECTOR_ADD_F32};

use super::{len_u32, same_len};
use crate::Result;
use crate::buffer::DeviceBuffer;
use crate::runtime::{Launched, Runtime};
use perf::cost::{ComputeUnit, Cost, product};

/// `c = a + b` for f32 vectors, launched as the kernel's spec says (it is registered,
/// docs/registry.md).
pub fn vector_add_f32(
    rt: &Runtime,
    a: &DeviceBuffer<f32>,
    b: &DeviceBuffer<f32>,
    c: &mut DeviceBuffer<f32>,
) -> Result<Launched> {
    same_len("vector_add_f32(a, b, c)", &[a.len(), b.len(), c.len()])?;
    if len_u32("vector_add_f32", a.len())? == 0 {
        return Ok(None);
    }
    crate::registry::launch_on(
        rt,
        &VECTOR_ADD_F32,
        &[a, b],
        c,
        &[],
        [a.len(), 1, 1, 1, 1],
        false,
    )
}

/// `c = a + b` for f16 vectors, added in f32 and rounded once, launched as the kernel's spec
/// says (it is registered).
pub fn vector_add_f16(
    rt: &Runtime,
    a: &DeviceBuffer<f16>,
    b: &DeviceBuffer<f16>,
    c: &mut DeviceBuffer<f16>,
) -> Result<Launched> {
    same_len("vector_add_f16(a, b, c)", &[a.len(), b.len(), c.len()])?;
    if len_u32("vector_add_f16", a.len())? == 0 {
        return Ok(None);
    }
    crate::registry::launch_on(
        rt,
        &VECTOR_ADD_F16,
        &[a, b],
        c,
        &[],
        [a.len(), 1, 1, 1, 1],
        false,
    )
}

/// Cost of an elementwise add of `n` elements of `elem_bytes` each: two reads and a write per
/// element, one FLOP.
pub fn vector_add_cost(n: usize, elem_bytes: usize) -> Cost {
    Cost {
        bytes_read: product(&[2, n as u64, elem_bytes as u64]),
        bytes_written: product(&[n as u64, elem_bytes as u64]),
        flops: n as u64,
        exps: 0,
        unit: ComputeUnit::CudaCoreF32,
        ..Cost::NONE
    }
}

/// `dst = src`, 4-byte words, device to device, launched as the kernel's spec says (it is
/// registered).
pub fn copy(
    rt: &Runtime,
    src: &DeviceBuffer<u32>,
    dst: &mut DeviceBuffer<u32>,
) -> Result<Launched> {
    same_len("copy(src, dst)", &[src.len(), dst.len()])?;
    if len_u32("copy", src.len())? == 0 {
        return Ok(None);
    }
    crate::registry::launch_on(
        rt,
        &COPY_WORDS,
        &[src],
        dst,
        &[],
        [src.len(), 1, 1, 1, 1],
        false,
    )
}

/// Cost of copying `n` words: each byte read once and written once, no arithmetic.
pub fn copy_cost(n: usize) -> Cost {
    Cost {
        bytes_read: product(&[4, n as u64]),
        bytes_written: product(&[4, n as u64]),
        flops: 0,
        exps: 0,
        unit: ComputeUnit::CudaCoreF32,
        ..Cost::NONE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each spec states the cost this module computes at its element size (the kernel crate
    /// cannot call it), at each of its sizes and at one element.
    #[test]
    fn the_spec_declares_this_cost() {
        for (spec, bytes) in [(&VECTOR_ADD_F32, 4), (&VECTOR_ADD_F16, 2)] {
            for dims in spec.shapes.every() {
                let want = vector_add_cost(dims[0], bytes);
                assert_eq!(crate::registry::cost(spec, dims), want, "{}", spec.name);
            }
        }
        for dims in COPY_WORDS.shapes.every() {
            assert_eq!(crate::registry::cost(&COPY_WORDS, dims), copy_cost(dims[0]));
        }
    }
}
