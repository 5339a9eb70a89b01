//! GPU kernels written in Rust.
//!
//! One source, two targets:
//! - `nvptx64-nvidia-cuda`: `host/build.rs` compiles this file with rustc's own NVPTX backend into
//!   PTX (one file per GPU architecture) that the host runtime loads through the CUDA driver.
//! - the host: the same kernels become ordinary `unsafe fn`s that the project's CPU emulator runs
//!   with GPU semantics (a coroutine per thread, real barriers, warps of 32 lanes, checked memory).
//!
//! [`cuda`] is the device-support layer that makes this possible: on the GPU each helper is one
//! PTX instruction, on the host it is a call into the emulator. Kernels only ever touch memory,
//! indices and barriers through it.
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_ptx, stdarch_nvptx, asm_experimental_arch)
)]

#[cfg(not(target_arch = "nvptx64"))]
extern crate std;

// The project's kernels. `host/build.rs` also compiles this file with `--cfg kernels_exercises`
// and `--cfg kernels_exercises="stubs"` (or `="solutions"`) into the exercises' own PTX modules,
// which hold the exercises alone: the project's modules (and `cargo xtask ptxas`) never see a
// learner's stub.
pub mod cuda;
#[cfg(not(kernels_exercises))]
pub mod device_math;
#[cfg(not(kernels_exercises))]
pub mod hierarchy;
#[cfg(not(kernels_exercises))]
pub mod histogram;
#[cfg(not(kernels_exercises))]
pub mod registry;

// The registered kernels (docs/registry.md): each file declares beside its kernels everything
// the rest of the project needs. A file of one kernel is one line here (`cargo xtask new NAME
// --template T` writes the file and the line); a file of several names each kernel's spec.
#[cfg(not(kernels_exercises))]
registry! {
    elementwise::{COPY_WORDS, VECTOR_ADD_F32, VECTOR_ADD_F16},
    transpose::{COPY_STRIDED, TRANSPOSE_NAIVE, TRANSPOSE_SHARED, TRANSPOSE_PADDED},
    gemm::{
        GEMM_NAIVE_F32,
        GEMM_TILED_F32,
        GEMM_REGISTER_BLOCKED_F32,
        GEMM_TENSOR_CORE_BF16,
        GEMM_TENSOR_CORE_F16,
        GEMM_WGMMA_BF16,
        GEMM_WGMMA_F16,
    },
    decode::{GEMV_BF16, DECODE_ATTENTION_BF16, DECODE_ATTENTION_PAGED_BF16},
    attention::{
        ATTENTION_NAIVE_F32,
        ATTENTION_NAIVE_BF16,
        ATTENTION_NAIVE_F16,
        ATTENTION_FUSED_F32,
        ATTENTION_FUSED_BF16,
        ATTENTION_FUSED_F16,
        ATTENTION_NAIVE_F32_CAUSAL,
        ATTENTION_FUSED_BF16_CAUSAL,
        ATTENTION_FUSED_BF16_FMA_EXP,
        ATTENTION_WGMMA_BF16,
        ATTENTION_WGMMA_F16,
        ATTENTION_WGMMA_BF16_CAUSAL,
    },
    softmax::{
        SOFTMAX_NAIVE_F32,
        SOFTMAX_ONLINE_F32,
        SOFTMAX_FUSED_F32,
        SOFTMAX_NAIVE_BF16,
        SOFTMAX_ONLINE_BF16,
        SOFTMAX_FUSED_BF16,
    },
    scaffold_elementwise,
    scaffold_reduction,
    scaffold_tiled,
    scaffold_warp,
}

/// The exercises (docs/exercises.md): the stubs a learner fills in, one file each, and the
/// launch shapes they share with their solutions.
#[cfg(any(not(target_arch = "nvptx64"), kernels_exercises))]
pub mod exercises;
/// The exercises' reference solutions, kept apart from the stubs; the same entry names, built
/// into a PTX module of their own.
#[cfg(any(not(target_arch = "nvptx64"), kernels_exercises = "solutions"))]
pub mod solutions;

/// A GPU has nowhere to print a panic: stop the kernel with `trap`, which the driver reports to
/// the host as an illegal-instruction error on the next synchronising call.
#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    unsafe { core::arch::nvptx::trap() }
}
