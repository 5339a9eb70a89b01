//! Elementwise kernels: the memory-bound end of the roofline.
//!
//! Each output element needs its inputs once and nothing else, so no level of the pyramid above
//! HBM can help: bytes cross the HBM boundary exactly once each way, and the best a kernel can do
//! is keep every load coalesced (the 32 lanes of a warp reading 32 consecutive elements, i.e.
//! whole 32-byte sectors) so that the achieved bandwidth approaches the device's.

use crate::cuda::intrinsics::count_flops;
use crate::cuda::thread::{grid_size_1d, index_1d};
use crate::cuda::{F16, GlobalPtr};
use crate::kernel;

/// Threads per block for the elementwise kernels. 256 = 8 warps: enough warps per block to
/// hide HBM latency when several blocks share an SM, few enough that 8 blocks fit per SM.
pub const BLOCK_SIZE: u32 = 256;

/// 16 bytes, the widest load a thread can issue (`ld.global.v4.u32`); the alignment lets the
/// compiler emit one vector instruction instead of four.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C, align(16))]
pub struct Words4(pub [u32; 4]);

kernel! {
    /// `c[i] = a[i] + b[i]` for f32: 1 FLOP per 12 bytes, intensity 1/12 FLOP/byte.
    pub unsafe fn vector_add_f32(a: GlobalPtr<f32>, b: GlobalPtr<f32>, c: GlobalPtr<f32>, n: u32) {
        let i = index_1d();
        if i < n {
            let i = i as usize;
            // a[i], b[i] come from HBM into registers; c[i] goes back. Nothing is reused.
            let sum = unsafe { a.read(i) + b.read(i) };
            count_flops(1);
            unsafe { c.write(i, sum) };
        }
    }
}

kernel! {
    /// `c[i] = a[i] + b[i]` for f16, computed in f32 and rounded once: 1 FLOP per 6 bytes,
    /// intensity 0.17 FLOP/byte, the teaching material's example of a memory-bound operation.
    pub unsafe fn vector_add_f16(a: GlobalPtr<F16>, b: GlobalPtr<F16>, c: GlobalPtr<F16>, n: u32) {
        let i = index_1d();
        if i < n {
            let i = i as usize;
            let sum = unsafe { a.read(i).to_f32() + b.read(i).to_f32() };
            count_flops(1);
            unsafe { c.write(i, F16::from_f32(sum)) };
        }
    }
}

/// How many whole 16-byte words, and how many trailing 4-byte words, `n` words make.
#[inline(always)]
pub const fn split_words4(n: u32) -> (u32, u32) {
    (n / 4, n % 4)
}

kernel! {
    /// Device-to-device copy of `n` 4-byte words: the bandwidth ceiling every memory-bound
    /// kernel is measured against. A grid-stride loop of 16-byte loads and stores; the last
    /// `n % 4` words are copied one by one by the first threads.
    pub unsafe fn copy_words(src: GlobalPtr<u32>, dst: GlobalPtr<u32>, n: u32) {
        let (wide, tail) = split_words4(n);
        let src4 = src.cast::<Words4>();
        let dst4 = dst.cast::<Words4>();
        let mut i = index_1d();
        while i < wide {
            unsafe { dst4.write(i as usize, src4.read(i as usize)) };
            i += grid_size_1d();
        }
        let t = index_1d();
        if t < tail {
            let j = (wide * 4 + t) as usize;
            unsafe { dst.write(j, src.read(j)) };
        }
    }
}

/// The cost of copying `n` 4-byte words: each read once and written once, no arithmetic
/// (`copy_words`'s, and `copy_strided`'s, which uses the same bytes).
#[cfg(not(target_arch = "nvptx64"))]
pub const fn words_copied(n: usize) -> crate::registry::Cost {
    let bytes = 4u64.saturating_mul(n as u64);
    crate::registry::Cost {
        bytes_read: bytes,
        bytes_written: bytes,
        ..crate::registry::Cost::NONE
    }
}

/// What the rest of the project needs of `copy_words` (docs/registry.md); the GPU build never
/// sees it.
#[cfg(not(target_arch = "nvptx64"))]
pub const COPY_WORDS: crate::registry::Spec = {
    use crate::registry::*;
    Spec {
        name: "copy_words",
        what: "dst[i] = src[i], 4-byte words moved 16 bytes at a time",
        dims: &["n"],
        shapes: Shapes {
            // 256 Mi words, 1 GiB each way on a GPU; on the emulator a count that is not a
            // multiple of 4, so that the scalar tail runs.
            run: &[RunShape {
                gpu: [1 << 28, 1, 1, 1, 1],
                emulator: [(1 << 20) + 3, 1, 1, 1, 1],
            }],
            test_max: [5000, 1, 1, 1, 1],
            multiple: [1, 1, 1, 1, 1],
            gpu_rows_checked: None,
        },
        inputs: |[n, ..]| std::vec![Buffer::of::<u32>(n)],
        // Words of every size up to 2^24, nearly all distinct: a word copied to the wrong
        // place shows.
        input_range: U32_EXACT_IN_F32,
        values_steer: false,
        affine_keys: None,
        output: |[n, ..]| Buffer::of::<u32>(n),
        rows: |_| 1,
        workspaces: |_| std::vec![],
        indices: |_| std::vec![],
        tensor_maps: |_| std::vec![],
        sm90a_only: false,
        launch: |launcher, buffers, [n, ..]| {
            let (src, dst, n) = (buffers.input::<u32>(0)?, buffers.output::<u32>()?, n as u32);
            // A thread per 16-byte word, or per tail word if there are more of those (n < 4).
            let (wide, tail) = split_words4(n);
            crate::launch_registered!(
                launcher,
                LaunchConfig::for_elements(wide.max(tail), BLOCK_SIZE),
                copy_words(src, dst, n)
            )
        },
        // A copy: exactly its input.
        reference: |inputs, _, _| {
            let values: std::vec::Vec<f64> = inputs[0].iter().map(|&w| f64::from(w)).collect();
            values.into()
        },
        tolerance: |_| 0.0,
        cost: |[n, ..]| words_copied(n),
        accumulates: false,
        // One 16-byte load per grid-stride step.
        occupancy: Occupancy {
            threads: BLOCK_SIZE,
            dynamic_shared: 0,
            in_flight_per_thread: Some(16),
        },
        baseline: Some(Baseline {
            op: "copy",
            dims: &["n"],
        }),
    }
};

/// What the rest of the project needs of `vector_add_f32` (docs/registry.md); the GPU build never
/// sees it.
#[cfg(not(target_arch = "nvptx64"))]
pub const VECTOR_ADD_F32: crate::registry::Spec = vector_add_spec::<f32>(
    "vector_add_f32",
    "c[i] = a[i] + b[i]",
    // 256 MiB per input, several times the L2.
    &[crate::registry::RunShape {
        gpu: [1 << 26, 1, 1, 1, 1],
        // A multiple of the block: the property test draws the sizes that are not.
        emulator: [1 << 20, 1, 1, 1, 1],
    }],
    |launcher, buffers, [n, ..]| {
        let (a, b) = (buffers.input::<f32>(0)?, buffers.input::<f32>(1)?);
        let (c, n) = (buffers.output::<f32>()?, n as u32);
        crate::launch_registered!(
            launcher,
            crate::registry::LaunchConfig::for_elements(n, BLOCK_SIZE),
            vector_add_f32(a, b, c, n)
        )
    },
    // The same one f32 addition per element: exact.
    |inputs, _, _| add_each(inputs, |a, b| a + b),
);

/// What the rest of the project needs of `vector_add_f16` (docs/registry.md); the GPU build never
/// sees it.
#[cfg(not(target_arch = "nvptx64"))]
pub const VECTOR_ADD_F16: crate::registry::Spec = vector_add_spec::<F16>(
    "vector_add_f16",
    "c[i] = a[i] + b[i] in f16, added in f32 and rounded once",
    // 256 MiB per input, as vector_add_f32's.
    &[crate::registry::RunShape {
        gpu: [1 << 27, 1, 1, 1, 1],
        emulator: [1 << 20, 1, 1, 1, 1],
    }],
    |launcher, buffers, [n, ..]| {
        let (a, b) = (buffers.input::<F16>(0)?, buffers.input::<F16>(1)?);
        let (c, n) = (buffers.output::<F16>()?, n as u32);
        crate::launch_registered!(
            launcher,
            crate::registry::LaunchConfig::for_elements(n, BLOCK_SIZE),
            vector_add_f16(a, b, c, n)
        )
    },
    // The same f32 addition of two f16 values, rounded to f16 once: exact.
    |inputs, _, _| add_each(inputs, |a, b| F16::from_f32(a + b).to_f32()),
);

/// The reference of an elementwise add (its output's one row): `add` on each pair, as the kernel
/// computes and rounds it.
#[cfg(not(target_arch = "nvptx64"))]
fn add_each(inputs: &[&[f32]], add: fn(f32, f32) -> f32) -> crate::registry::Expected {
    let (a, b) = (inputs[0], inputs[1]);
    let values: std::vec::Vec<f64> = a.iter().zip(b).map(|(&a, &b)| f64::from(add(a, b))).collect();
    values.into()
}

/// The spec of `c[i] = a[i] + b[i]` on buffers of `T`, launched by `launch` and checked against
/// `reference`, exactly.
#[cfg(not(target_arch = "nvptx64"))]
const fn vector_add_spec<T: crate::registry::Element>(
    name: &'static str,
    what: &'static str,
    run: &'static [crate::registry::RunShape],
    launch: crate::registry::LaunchFn,
    reference: fn(&[&[f32]], crate::registry::Dims, &[usize]) -> crate::registry::Expected,
) -> crate::registry::Spec {
    use crate::registry::*;
    Spec {
        name,
        what,
        dims: &["n"],
        shapes: Shapes {
            run,
            test_max: [5000, 1, 1, 1, 1],
            multiple: [1, 1, 1, 1, 1],
            gpu_rows_checked: None,
        },
        inputs: |[n, ..]| std::vec![Buffer::of::<T>(n); 2],
        input_range: (-1.0, 1.0),
        values_steer: false,
        affine_keys: None,
        output: |[n, ..]| Buffer::of::<T>(n),
        rows: |_| 1,
        workspaces: |_| std::vec![],
        indices: |_| std::vec![],
        tensor_maps: |_| std::vec![],
        sm90a_only: false,
        launch,
        reference,
        tolerance: |_| 0.0,
        cost: |[n, ..]| {
            let bytes = (n * T::ELEM.bytes()) as u64;
            Cost {
                bytes_read: 2 * bytes,
                bytes_written: bytes,
                flops: n as u64,
                ..Cost::NONE
            }
        },
        // a[i] and b[i] are both loaded before the add.
        accumulates: false,
        occupancy: Occupancy {
            threads: BLOCK_SIZE,
            dynamic_shared: 0,
            in_flight_per_thread: Some(2 * T::ELEM.bytes() as u32),
        },
        baseline: Some(Baseline {
            op: "add",
            dims: &["n"],
        }),
    }
}
