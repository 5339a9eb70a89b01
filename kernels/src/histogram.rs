//! A histogram, written the way a learner's first one often is: each thread counts into a
//! private array, then the counts go up the pyramid with atomics (per block in shared memory,
//! then once per block into global memory).
//!
//! It is here for what rustc makes of it, which the PTX backend must run as the GPU would:
//!
//! - **A local array indexed at run time** (`counts[bin]`, `bin` read from the data). Registers
//!   cannot be indexed by a value known only at run time, so the array lives in *local memory*:
//!   the thread's private stack, which is off-chip (in HBM, like global memory) and only cached
//!   in L1/L2. The PTX declares it as a `.local` depot and reaches it with loads and stores, not
//!   registers. (An array indexed only by constants, or by a loop the compiler unrolls, stays in
//!   registers: the index decides, not the declaration.) `ptxas` may still rescue a small one:
//!   for these 16 counters it reports a stack frame of 0 bytes (`cargo xtask ptxas`), having
//!   turned each indexed access into a choice among registers. The PTX, which is what the PTX
//!   backend runs, has the local memory; a larger array, or one indexed more often, keeps it in
//!   SASS too (`LDL`/`STL`).
//! - **A device function that is not inlined** ([`bin_of`], `#[inline(never)]`): a `.func` in the
//!   PTX and a `call` at each use. A call passes its arguments and result through `.param`
//!   space and is a branch the compiler cannot optimise across: on the GPU it costs far more
//!   than the arithmetic of a small helper, which is why kernels normally inline everything.
//! - **Atomics** ([`Ptr::atomic_add`](crate::cuda::Ptr::atomic_add)): many threads adding to one
//!   bin is a race with plain loads and stores, and none with `atom`. Shared-memory atomics are
//!   resolved on the SM; global ones at L2, so the kernel sends each block's bins there once
//!   rather than each thread's.
//!
//! `tests/tests/histogram.rs` checks the counts on both backends against a CPU count, and that
//! the PTX really has the `.local` depot, the `call` and the `atom`s.

use crate::cuda::GlobalPtr;
use crate::cuda::thread::{block_dim_x, grid_size_1d, index_1d, sync_threads, thread_idx_x};
use crate::{kernel, shared_array};

/// Bins: the top [`BIN_BITS`] bits of each value.
pub const BINS: usize = 1 << BIN_BITS;
/// Bits of a value that pick its bin.
pub const BIN_BITS: u32 = 4;
/// Threads per block (the kernel runs with any block size).
pub const THREADS: u32 = 128;

/// The bin of `value`: its top [`BIN_BITS`] bits.
///
/// `#[inline(never)]` only to show what a call is in PTX (a `.func`, `.param` passing, `call`);
/// a helper this small would be inlined otherwise, and should be.
#[inline(never)]
pub fn bin_of(value: u32) -> usize {
    (value >> (32 - BIN_BITS)) as usize
}

kernel! {
    /// Adds the histogram of `data[..n]` into `hist` ([`BINS`] counts, which the caller zeroes
    /// before the first launch). Any grid: a grid-stride loop covers `n`.
    pub unsafe fn histogram_u32(data: GlobalPtr<u32>, n: u32, hist: GlobalPtr<u32>) {
        let block_bins = shared_array![histogram_block_bins: [u32; BINS]];
        let t = thread_idx_x() as usize;
        let mut bin = t;
        while bin < BINS {
            unsafe { block_bins.write(bin, 0) };
            bin += block_dim_x() as usize;
        }
        // The zeroes must be in shared memory before any thread adds to a bin.
        sync_threads();

        // Private counts in local memory: the index is data, so they cannot be registers.
        let mut counts = [0u32; BINS];
        let mut i = index_1d();
        while i < n {
            counts[bin_of(unsafe { data.read(i as usize) })] += 1;
            i += grid_size_1d();
        }
        // Only the bins this thread saw: an atomic per non-zero count, not per element.
        for (bin, &count) in counts.iter().enumerate() {
            if count != 0 {
                unsafe { block_bins.atomic_add(bin, count) };
            }
        }
        // Every thread's counts are in the block's bins before they leave for HBM.
        sync_threads();
        let mut bin = t;
        while bin < BINS {
            unsafe { hist.atomic_add(bin, block_bins.read(bin)) };
            bin += block_dim_x() as usize;
        }
    }
}
