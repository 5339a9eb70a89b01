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

pub mod attention;
pub mod cuda;
pub mod decode;
pub mod elementwise;
pub mod gemm;
pub mod hierarchy;
pub mod registry;
pub mod softmax;
pub mod transpose;

// The registered kernels (docs/registry.md): each is its own file, `kernels/src/NAME.rs`, which
// declares beside the kernel everything the rest of the project needs; adding one is its file
// and one line here (`cargo xtask new NAME --template T` writes both).
registry! {
    scaffold_elementwise,
    scaffold_reduction,
    scaffold_tiled,
    scaffold_warp,
}

/// A GPU has nowhere to print a panic: stop the kernel with `trap`, which the driver reports to
/// the host as an illegal-instruction error on the next synchronising call.
#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    unsafe { core::arch::nvptx::trap() }
}
