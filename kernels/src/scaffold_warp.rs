//! `scaffold_warp`: the sum of each warp's 32 elements, with shuffles and no shared memory.
//!
//! Written by `cargo xtask new NAME --template warp` (this file is the template, itself a
//! registered kernel, so the project's tests run it as generated). Change the kernel's body and
//! `reference` together; docs/registry.md says what each field of `SPEC` is for.
//!
//! The 32 lanes of a warp exchange registers directly (`shfl.sync.bfly`): five butterfly steps
//! leave the warp's sum in every lane, with no shared memory and no block barrier. Every lane
//! must take part in each shuffle, so the lanes past the end hold a 0 instead of returning early.

use crate::cuda::GlobalPtr;
use crate::cuda::intrinsics::count_flops;
use crate::cuda::thread::index_1d;
use crate::cuda::warp::{FULL_MASK, WARP_SIZE, lane_id, shuffle_xor};
use crate::kernel;

/// Threads per block: 8 warps.
pub const THREADS: u32 = 256;

kernel! {
    /// `sums[w] = x[32 w] + ... + x[32 w + 31]` (elements past `n` are 0).
    pub unsafe fn scaffold_warp(x: GlobalPtr<f32>, sums: GlobalPtr<f32>, n: u32) {
        let i = index_1d();
        let mut v = if i < n { unsafe { x.read(i as usize) } } else { 0.0 };
        let mut offset = WARP_SIZE / 2;
        while offset > 0 {
            // Lane l adds lane l ^ offset's value: after log2(32) = 5 steps, all hold the sum.
            v += shuffle_xor(FULL_MASK, v, offset);
            offset /= 2;
        }
        // Lane 0 of each warp that has an element writes its sum.
        if lane_id() == 0 && i < n {
            // The work is the 31 additions a sum of 32 needs; the butterfly does 5 in each lane
            // so that every lane ends with the sum, and the compiler drops the ones no lane uses.
            count_flops(WARP_SIZE - 1);
            unsafe { sums.write((i / WARP_SIZE) as usize, v) };
        }
    }
}

/// Warps with at least one element.
#[cfg(not(target_arch = "nvptx64"))]
fn warps(n: usize) -> usize {
    n.div_ceil(WARP_SIZE as usize)
}

/// What the rest of the project needs (docs/registry.md); the GPU build never sees it.
#[cfg(not(target_arch = "nvptx64"))]
pub const SPEC: crate::registry::Spec = {
    use crate::launch_registered;
    use crate::registry::*;
    Spec {
        name: "scaffold_warp",
        what: "the sum of each warp's 32 elements",
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
        output: |[n, ..]| Buffer::f32(warps(n)),
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
                scaffold_warp(x, sums, n)
            )
        },
        reference: |inputs, [n, ..], _| {
            let sums: std::vec::Vec<f64> = inputs[0][..n]
                .chunks(WARP_SIZE as usize)
                .map(|c| c.iter().map(|&v| f64::from(v)).sum())
                .collect();
            sums.into()
        },
        // A butterfly of depth 5 over |x| <= 1: at most 5 u sum|x| <= 5 u 32 (u = 2^-24), with
        // 1% slack.
        tolerance: |_| 1.01 * 5.0 * f64::from(f32::EPSILON / 2.0) * f64::from(WARP_SIZE),
        cost: |[n, ..]| Cost {
            bytes_read: 4 * n as u64,
            bytes_written: 4 * warps(n) as u64,
            flops: (WARP_SIZE as u64 - 1) * warps(n) as u64,
            // Of `bytes_read`, those a block reads again right after its first read (a second
            // pass over its row, as an RMSNorm's scaling after its sum of squares): L2 serves
            // them, so the roofline bound and the model count them once. 0: one pass.
            l2_rereads: 0,
            ..Cost::NONE
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
