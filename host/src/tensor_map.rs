//! Tensor maps (`CUtensorMap`) for the TMA: built on the host from a buffer and a box, then
//! copied to a small device buffer that the kernel receives a pointer to.
//!
//! One set of parameters, two encodings: on a GPU the driver's `cuTensorMapEncodeTiled`, on the
//! emulator [`EmuTensorMap::encode`]. Both check the same rules first ([`validate_map`]), so a
//! map the emulator accepts is one the driver accepts.

use kernels::cuda::GlobalPtr;
use kernels::cuda::tma::{EmuTensorMap, TensorMap, TmaSwizzle};

use crate::buffer::{DeviceBuffer, Element};
use crate::runtime::{Backend, Runtime};
use crate::{Error, Result};
use emu::validate_map;

/// A two-dimensional tiled tensor map in device memory.
pub struct TensorMap2d {
    words: DeviceBuffer<u64>,
    /// What it describes.
    pub params: EmuTensorMap,
}

impl TensorMap2d {
    /// The kernel argument: the map's address in global memory.
    pub fn ptr(&self) -> GlobalPtr<TensorMap> {
        self.words.ptr().cast()
    }
}

/// One tensor map per slab of a tensor (per head of attention's Q, K or V), in one device
/// buffer: map `i` at `ptr().offset(i)`, each describing its own slab only, so a box past a
/// slab's last row is zero-filled instead of reading the next slab.
pub struct TensorMaps2d {
    words: DeviceBuffer<u64>,
    /// What each describes.
    pub params: Vec<EmuTensorMap>,
}

impl TensorMaps2d {
    /// The kernel argument: map 0's address in global memory (map `i` is 128 bytes further each).
    pub fn ptr(&self) -> GlobalPtr<TensorMap> {
        self.words.ptr().cast()
    }
}

impl Runtime {
    /// A map of `tensor` viewed as `rows` x `cols` elements, row-major (dimension 0 along a row,
    /// rows `cols` elements apart), copied in boxes of `box_rows` x `box_cols` laid out in
    /// shared memory as `swizzle` says. Elements of a box outside the tensor read as zeros.
    pub fn tensor_map_2d<T: Element>(
        &self,
        tensor: &DeviceBuffer<T>,
        (rows, cols): (usize, usize),
        (box_rows, box_cols): (u32, u32),
        swizzle: TmaSwizzle,
    ) -> Result<TensorMap2d> {
        let maps = self.tensor_maps_2d(tensor, 1, (rows, cols), (box_rows, box_cols), swizzle)?;
        Ok(TensorMap2d {
            words: maps.words,
            params: maps.params[0],
        })
    }

    /// `slabs` maps as [`tensor_map_2d`](Self::tensor_map_2d)'s, map `i` of the `rows` x `cols`
    /// elements that start at element `i * rows * cols` of `tensor`.
    pub fn tensor_maps_2d<T: Element>(
        &self,
        tensor: &DeviceBuffer<T>,
        slabs: usize,
        (rows, cols): (usize, usize),
        (box_rows, box_cols): (u32, u32),
        swizzle: TmaSwizzle,
    ) -> Result<TensorMaps2d> {
        let e = size_of::<T>();
        if tensor.len() < slabs * rows * cols {
            return Err(Error::Shape(format!(
                "{slabs} tensor maps of {rows} x {cols} over a buffer of {} elements",
                tensor.len()
            )));
        }
        let mut words = Vec::with_capacity(slabs * 16);
        let mut all = Vec::with_capacity(slabs);
        for i in 0..slabs {
            let params = EmuTensorMap {
                base: tensor.ptr().offset(i * rows * cols).addr() as u64,
                dims: [cols as u64, rows as u64],
                row_pitch: (cols * e) as u64,
                box_dims: [box_cols, box_rows],
                elem_bytes: e as u32,
                swizzle,
            };
            validate_map(&params).map_err(|why| Error::Shape(format!("tensor map: {why}")))?;
            let map = match self.backend() {
                Backend::Cuda(gpu) => gpu.encode_tensor_map(&params)?,
                // Kernels run on the host read the emulator's encoding.
                _ => params.encode(),
            };
            words.extend_from_slice(&map.opaque);
            all.push(params);
        }
        Ok(TensorMaps2d {
            words: self.upload(&words)?,
            params: all,
        })
    }
}
