//! `scaffold_reduction`: the sum of each block's `THREADS` elements, through shared memory.
//!
//! Written by `cargo xtask new NAME --template reduction` (this file is the template, itself a
//! registered kernel, so the project's tests run it as generated). Change the kernel's body and
//! `reference` together; docs/registry.md says what each field of `SPEC` is for.
//!
//! Each thread loads one element from HBM into the block's shared memory; then a tree of halving
//! steps adds pairs, a barrier between steps so that no thread reads a partial sum before its
//! writer stored it. Thread 0 writes the block's sum: one float per block goes back to HBM.

use crate::cuda::GlobalPtr;
use crate::cuda::intrinsics::count_flops;
use crate::cuda::thread::{block_idx_x, index_1d, sync_threads, thread_idx_x};
use crate::{kernel, shared_array};

/// Threads per block, a power of two (the tree halves it): 8 warps.
pub const THREADS: u32 = 256;

kernel! {
    /// `sums[b] = x[b * THREADS] + ... + x[b * THREADS + THREADS - 1]` (elements past `n` are 0).
    pub unsafe fn scaffold_reduction(x: GlobalPtr<f32>, sums: GlobalPtr<f32>, n: u32) {
        // The array is named after the kernel: a `.shared` symbol must be unique in the module.
        let partial = shared_array![scaffold_reduction_partial: [f32; THREADS as usize]];
        let t = thread_idx_x();
        let i = index_1d();
        // HBM -> shared: every thread stores, those past the end a 0, so the tree needs no guard.
        let v = if i < n { unsafe { x.read(i as usize) } } else { 0.0 };
        unsafe { partial.write(t as usize, v) };
        sync_threads();
        let mut half = THREADS / 2;
        while half > 0 {
            if t < half {
                let s = unsafe { partial.read(t as usize) + partial.read((t + half) as usize) };
                count_flops(1);
                unsafe { partial.write(t as usize, s) };
            }
            // Outside the `if`: every thread of the block must reach each barrier.
            sync_threads();
            half /= 2;
        }
        if t == 0 {
            unsafe { sums.write(block_idx_x() as usize, partial.read(0)) };
        }
    }
}

/// Blocks for `n` elements.
#[cfg(not(target_arch = "nvptx64"))]
fn blocks(n: usize) -> usize {
    n.div_ceil(THREADS as usize).max(1)
}

/// What the rest of the project needs (docs/registry.md); the GPU build never sees it.
#[cfg(not(target_arch = "nvptx64"))]
pub const SPEC: crate::registry::Spec = {
    use crate::launch_registered;
    use crate::registry::*;
    Spec {
        name: "scaffold_reduction",
        what: "the sum of each block of 256 elements",
        dims: &["n"],
        shapes: Shapes {
            run: &[RunShape {
                gpu: [1 << 26, 1, 1, 1, 1],
                emulator: [(1 << 18) + 7, 1, 1, 1, 1],
            }],
            test_max: [5000, 1, 1, 1, 1],
            multiple: [1, 1, 1, 1, 1],
            gpu_rows_checked: None,
        },
        inputs: |[n, ..]| std::vec![Buffer::f32(n)],
        input_range: (-1.0, 1.0),
        values_steer: false,
        affine_keys: None,
        output: |[n, ..]| Buffer::f32(blocks(n)),
        rows: |_| 1,
        workspaces: |_| std::vec![],
        indices: |_| std::vec![],
        tensor_maps: |_| std::vec![],
        sm90a_only: false,
        launch: |launcher, buffers, [n, ..]| {
            let (x, sums, n) = (buffers.input::<f32>(0)?, buffers.output::<f32>()?, n as u32);
            launch_registered!(
                launcher,
                LaunchConfig::for_elements(n, THREADS),
                scaffold_reduction(x, sums, n)
            )
        },
        reference: |inputs, [n, ..], _| {
            let sums: std::vec::Vec<f64> = (0..blocks(n))
                .map(|b| {
                    let chunk = &inputs[0][b * THREADS as usize..n.min((b + 1) * THREADS as usize)];
                    chunk.iter().map(|&v| f64::from(v)).sum()
                })
                .collect();
            sums.into()
        },
        // A tree of depth log2(256) = 8 over |x| <= 1: each f32 addition errs by at most u times
        // its result, so the sum by at most 8 u sum|x| <= 8 u 256 (u = 2^-24), with 1% slack.
        tolerance: |_| 1.01 * f64::from(THREADS.ilog2()) * f64::from(f32::EPSILON / 2.0) * f64::from(THREADS),
        cost: |[n, ..]| Cost {
            bytes_read: 4 * n as u64,
            bytes_written: 4 * blocks(n) as u64,
            // THREADS - 1 additions per block, the zeros past the end included.
            flops: (THREADS as u64 - 1) * blocks(n) as u64,
            exps: 0,
            rereads: 0,
            resident_rereads: 0,
            // Of `bytes_read`, those a block reads again right after its first read (a second
            // pass over its row, as an RMSNorm's scaling after its sum of squares): L2 serves
            // them, so the roofline bound and the model count them once. 0: one pass.
            l2_rereads: 0,
            // Where the FLOPs run, the roofline's compute roof: f32 on the CUDA cores.
            unit: ComputeUnit::CudaCoreF32,
        },
        accumulates: false,
        occupancy: Occupancy {
            threads: THREADS,
            dynamic_shared: 0,
            in_flight_per_thread: Some(4),
        },
        baseline: None,
    }
};
