//! Where a thread is in the launch grid, and the block-wide barrier.
//!
//! A launch is a grid of blocks, a block a group of up to 1024 threads that share one SM's
//! shared memory and can wait for each other at [`sync_threads`]. Blocks never wait for each
//! other: the only way they communicate is through global memory, after the kernel ends.

#[cfg(target_arch = "nvptx64")]
use core::arch::nvptx;

macro_rules! special_register {
    ($(#[$meta:meta])* $name:ident, $intrinsic:ident, $field:ident . $axis:ident) => {
        $(#[$meta])*
        #[inline(always)]
        pub fn $name() -> u32 {
            #[cfg(target_arch = "nvptx64")]
            {
                // SAFETY: reading a special register has no preconditions.
                unsafe { nvptx::$intrinsic() as u32 }
            }
            #[cfg(not(target_arch = "nvptx64"))]
            {
                super::emu::with(|gpu| gpu.position().$field.$axis)
            }
        }
    };
}

special_register!(/// `threadIdx.x`: this thread's index in its block (`%tid.x`).
    thread_idx_x, _thread_idx_x, thread.x);
special_register!(/// `threadIdx.y` (`%tid.y`).
    thread_idx_y, _thread_idx_y, thread.y);
special_register!(/// `threadIdx.z` (`%tid.z`).
    thread_idx_z, _thread_idx_z, thread.z);
special_register!(/// `blockIdx.x`: this block's index in the grid (`%ctaid.x`).
    block_idx_x, _block_idx_x, block.x);
special_register!(/// `blockIdx.y` (`%ctaid.y`).
    block_idx_y, _block_idx_y, block.y);
special_register!(/// `blockIdx.z` (`%ctaid.z`).
    block_idx_z, _block_idx_z, block.z);
special_register!(/// `blockDim.x`: threads per block along x (`%ntid.x`).
    block_dim_x, _block_dim_x, block_dim.x);
special_register!(/// `blockDim.y` (`%ntid.y`).
    block_dim_y, _block_dim_y, block_dim.y);
special_register!(/// `blockDim.z` (`%ntid.z`).
    block_dim_z, _block_dim_z, block_dim.z);
special_register!(/// `gridDim.x`: blocks in the grid along x (`%nctaid.x`).
    grid_dim_x, _grid_dim_x, grid_dim.x);
special_register!(/// `gridDim.y` (`%nctaid.y`).
    grid_dim_y, _grid_dim_y, grid_dim.y);
special_register!(/// `gridDim.z` (`%nctaid.z`).
    grid_dim_z, _grid_dim_z, grid_dim.z);

/// The global index of this thread in a one-dimensional launch:
/// `blockIdx.x * blockDim.x + threadIdx.x`.
#[inline(always)]
pub fn index_1d() -> u32 {
    block_idx_x() * block_dim_x() + thread_idx_x()
}

/// Total threads of a one-dimensional launch, the stride of a grid-stride loop:
/// `gridDim.x * blockDim.x`.
#[inline(always)]
pub fn grid_size_1d() -> u32 {
    grid_dim_x() * block_dim_x()
}

/// This thread's rank in its block, x fastest: the order in which warps are formed.
#[inline(always)]
pub fn linear_thread_idx() -> u32 {
    (thread_idx_z() * block_dim_y() + thread_idx_y()) * block_dim_x() + thread_idx_x()
}

/// `__syncthreads()` (`bar.sync 0`): wait until every thread of the block has arrived here.
///
/// After it, every shared-memory write made before it by any thread of the block is visible to
/// every thread. All threads of the block must reach the *same* barrier: one that some threads
/// skip (inside a divergent `if`, or after an early `return`) hangs or corrupts on a GPU, and
/// the emulator reports it as barrier divergence. Two calls that the two sides of a divergent
/// `if` each reach are undefined in CUDA C++; a GPU counts arrivals by barrier id, so the
/// emulator lets them meet and warns, naming both lines.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn sync_threads() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a barrier has no memory-safety preconditions; divergence is a logic error.
    unsafe {
        nvptx::_syncthreads()
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let site = super::emu::Site::caller();
        super::emu::with(|gpu| gpu.sync_threads(site))
    }
}
