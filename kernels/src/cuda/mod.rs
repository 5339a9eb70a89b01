//! Device support: what CUDA C gives a kernel, named as in rust-cuda's `cuda_std`.
//!
//! | CUDA C | here |
//! |---|---|
//! | `threadIdx.x`, `blockIdx.x`, `blockDim.x`, `gridDim.x` | [`thread::thread_idx_x`], [`thread::block_idx_x`], ... |
//! | `__syncthreads()` | [`thread::sync_threads`] |
//! | `__shared__ float t[256]` | [`shared_array!`](crate::shared_array)`[f32; 256]` |
//! | `extern __shared__ float t[]` | [`shared::dynamic_shared_mem`] |
//! | `__shfl_xor_sync`, `__shfl_down_sync`, `__shfl_sync` | [`warp::shuffle_xor`], [`warp::shuffle_down`], [`warp::shuffle_idx`] |
//! | `exp2f` fast path (`ex2.approx`), `__expf` | [`intrinsics::exp2_approx`], [`intrinsics::exp_approx`] |
//! | `fmaf` | [`intrinsics::fma`] |
//! | `__pipeline_memcpy_async` (`cp.async`), `__pipeline_commit`, `__pipeline_wait_prior` | [`pipeline::cp_async_16`], [`pipeline::cp_async_commit_group`], [`pipeline::cp_async_wait_group`] |
//! | a `float*` into global memory (HBM) | [`GlobalPtr`] |
//!
//! On the GPU every item compiles to the PTX instruction named in its docs. On the host (the
//! emulator) each is a call through [`emu`], which is where barriers wait, shuffles exchange
//! values between lanes, and every memory access is bounds-checked, race-checked and counted.

#[cfg(not(target_arch = "nvptx64"))]
pub mod emu;
pub mod intrinsics;
mod kernel;
pub mod mma;
pub mod pipeline;
mod ptr;
pub mod shared;
pub mod thread;
mod unroll;
pub mod warp;

pub use ptr::{Global, GlobalPtr, Ptr, Shared, SharedPtr, StateSpace};

/// IEEE half precision, 1 sign, 5 exponent, 10 mantissa bits.
///
/// On the host this is `half::f16`; on the GPU a bit-compatible wrapper whose conversions are the
/// `cvt` instructions. Both have `to_f32` and `from_f32`, so kernel source is the same for both.
#[cfg(not(target_arch = "nvptx64"))]
pub type F16 = half::f16;
/// bfloat16: f32's 8-bit exponent with a 7-bit mantissa. See [`F16`] for the two targets.
#[cfg(not(target_arch = "nvptx64"))]
pub type Bf16 = half::bf16;
#[cfg(target_arch = "nvptx64")]
pub use intrinsics::{Bf16, F16};
