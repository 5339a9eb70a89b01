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
//! | `sqrtf`, `rsqrtf`, `expf`/`__expf`, `exp2f`, `logf`/`__logf`, `log2f`, `tanhf`, `__sinf`, `__cosf` (`cuda_std::GpuFloat`'s `sqrt`, `exp`, `ln`, ...) | [`intrinsics::sqrt`], [`intrinsics::rsqrt`], [`intrinsics::exp`], [`intrinsics::exp2`], [`intrinsics::ln`], [`intrinsics::log2`], [`intrinsics::tanh`], [`intrinsics::sin`], [`intrinsics::cos`] |
//! | `fmaxf`, `fminf`, `fabsf`, `copysignf` | `core`'s own `f32::max`, `min`, `abs`, `copysign` (`max.f32`, `min.f32`, `abs.f32`) |
//! | `__pipeline_memcpy_async` (`cp.async`), `__pipeline_commit`, `__pipeline_wait_prior` | [`pipeline::cp_async_16`], [`pipeline::cp_async_commit_group`], [`pipeline::cp_async_wait_group`] |
//! | a `float*` into global memory (HBM) | [`GlobalPtr`] |
//! | `mbarrier.init` / `arrive` / `arrive.expect_tx` / `try_wait.parity` (CUTLASS's `ClusterTransactionBarrier`) | [`mbarrier::mbarrier_init`], [`mbarrier::mbarrier_arrive`], [`mbarrier::mbarrier_arrive_expect_tx`], [`mbarrier::mbarrier_wait_parity`] |
//! | `fence.proxy.async`, `fence.mbarrier_init` | [`mbarrier::fence_proxy_async`], [`mbarrier::fence_mbarrier_init`] |
//! | `cp.async.bulk.tensor.2d` (TMA) from a `CUtensorMap` | [`tma::tma_load_2d`], [`tma::TensorMap`] |
//! | `wgmma.fence` / `commit_group` / `wait_group`, `wgmma.mma_async` (sm_90a) | [`wgmma::wgmma_fence`], [`wgmma::wgmma_commit_group`], [`wgmma::wgmma_wait_group`], [`wgmma::wgmma_ss`], [`wgmma::wgmma_rs`] |
//! | `setmaxnreg` (sm_90a) | [`wgmma::setmaxnreg_inc`], [`wgmma::setmaxnreg_dec`] |
//! | `__cvta_generic_to_shared` | [`shared::shared_address`] |
//!
//! On the GPU every item compiles to the PTX instruction named in its docs. On the host (the
//! emulator) each is a call through [`emu`], which is where barriers wait, shuffles exchange
//! values between lanes, and every memory access is bounds-checked, race-checked and counted.

#[cfg(not(target_arch = "nvptx64"))]
pub mod emu;
pub mod intrinsics;
mod kernel;
#[cfg(not(target_arch = "nvptx64"))]
pub mod launch;
pub mod mbarrier;
pub mod mma;
pub mod pipeline;
mod ptr;
pub mod shared;
pub mod thread;
pub mod tma;
mod unroll;
pub mod warp;
pub mod wgmma;

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
