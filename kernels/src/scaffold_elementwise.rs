//! `scaffold_elementwise`: `y[i] = 2 x[i] + 1`, one thread per element.
//!
//! Written by `cargo xtask new NAME --template elementwise` (this file is the template, itself a
//! registered kernel, so the project's tests run it as generated). Change the kernel's body and
//! `reference` together, then the cost model if the bytes or FLOPs change; docs/registry.md says
//! what each field of `SPEC` is for.
//!
//! Memory-bound: every element crosses the HBM boundary once each way and nothing is reused, so
//! the best this kernel can do is keep each warp's 32 loads in 4 consecutive 32-byte sectors.

use crate::cuda::GlobalPtr;
use crate::cuda::intrinsics::count_flops;
use crate::cuda::thread::index_1d;
use crate::kernel;

/// Threads per block: 8 warps, enough to hide HBM latency with several blocks per SM.
pub const THREADS: u32 = 256;

kernel! {
    /// `y[i] = 2 x[i] + 1` for `i < n`.
    pub unsafe fn scaffold_elementwise(x: GlobalPtr<f32>, y: GlobalPtr<f32>, n: u32) {
        let i = index_1d();
        // The last block has threads past the end: they must not touch memory.
        if i < n {
            let i = i as usize;
            // x[i] comes from HBM into a register, y[i] goes back; nothing is reused.
            let v = unsafe { x.read(i) };
            count_flops(2);
            unsafe { y.write(i, 2.0 * v + 1.0) };
        }
    }
}

/// What the rest of the project needs (docs/registry.md); the GPU build never sees it.
#[cfg(not(target_arch = "nvptx64"))]
pub const SPEC: crate::registry::Spec = {
    use crate::launch_registered;
    use crate::registry::*;
    Spec {
        name: "scaffold_elementwise",
        what: "y[i] = 2 x[i] + 1",
        dims: &["n"],
        shapes: Shapes {
            run: &[RunShape {
                gpu: [1 << 26, 1, 1, 1, 1],
                // Not a multiple of the block: the last block's guard is exercised.
                emulator: [(1 << 20) + 7, 1, 1, 1, 1],
            }],
            test_max: [5000, 1, 1, 1, 1],
            multiple: [1, 1, 1, 1, 1],
            gpu_rows_checked: None,
        },
        inputs: |[n, ..]| std::vec![Buffer::f32(n)],
        input_range: (-1.0, 1.0),
        values_steer: false,
        affine_keys: None,
        output: |[n, ..]| Buffer::f32(n),
        rows: |_| 1,
        workspaces: |_| std::vec![],
        indices: |_| std::vec![],
        tensor_maps: |_| std::vec![],
        sm90a_only: false,
        launch: |launcher, buffers, [n, ..]| {
            let (x, y, n) = (buffers.input::<f32>(0)?, buffers.output::<f32>()?, n as u32);
            launch_registered!(
                launcher,
                LaunchConfig::for_elements(n, THREADS),
                scaffold_elementwise(x, y, n)
            )
        },
        // The same two f32 operations in the same order (Rust never fuses them): exact.
        reference: |inputs, _, _| {
            let values: std::vec::Vec<f64> = inputs[0].iter().map(|&v| f64::from(2.0 * v + 1.0)).collect();
            values.into()
        },
        tolerance: |_| 0.0,
        cost: |[n, ..]| Cost {
            bytes_read: 4 * n as u64,
            bytes_written: 4 * n as u64,
            flops: 2 * n as u64,
            ..Cost::NONE
        },
        // One 4-byte load in flight per thread before it waits.
        accumulates: false,
        occupancy: Occupancy {
            threads: THREADS,
            dynamic_shared: 0,
            in_flight_per_thread: Some(4),
        },
        baseline: None,
    }
};
