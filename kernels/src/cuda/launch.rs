//! The launch geometry, `<<<grid, block, dynamic shared bytes>>>` (host target only).
//!
//! One type for every launch the project makes: a registered kernel's spec states it
//! ([`crate::registry::Launcher`]), the emulator checks and runs it (`emu::LaunchConfig` names
//! this type), and the host's runtime hands it to the driver. It sits here, in the lowest crate
//! that needs it, so that the specs and the emulator share it without an adapter between them.

use super::emu::Dim3;

/// `<<<grid, block, dynamic shared bytes>>>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads per block.
    pub block: Dim3,
    /// Dynamic shared memory per block, in bytes (`extern __shared__`); the kernel's static
    /// shared memory comes on top of it.
    pub dynamic_shared: u32,
}

impl LaunchConfig {
    /// A one-dimensional launch of `blocks` blocks of `threads` threads.
    pub const fn linear(blocks: u32, threads: u32) -> Self {
        Self::grid_2d((blocks, 1), (threads, 1))
    }

    /// One thread per item, `threads` per block: `ceil(n / threads)` blocks (at least one).
    pub const fn for_elements(n: u32, threads: u32) -> Self {
        let blocks = n.div_ceil(threads);
        Self::linear(if blocks == 0 { 1 } else { blocks }, threads)
    }

    /// A grid of `blocks.0 x blocks.1` blocks of `threads.0 x threads.1` threads.
    pub const fn grid_2d(blocks: (u32, u32), threads: (u32, u32)) -> Self {
        Self {
            grid: dim3(blocks.0, blocks.1, 1),
            block: dim3(threads.0, threads.1, 1),
            dynamic_shared: 0,
        }
    }

    /// The same launch with `bytes` of dynamic shared memory.
    pub const fn with_dynamic_shared(mut self, bytes: u32) -> Self {
        self.dynamic_shared = bytes;
        self
    }
}

/// Builds a [`Dim3`].
pub const fn dim3(x: u32, y: u32, z: u32) -> Dim3 {
    Dim3 { x, y, z }
}
