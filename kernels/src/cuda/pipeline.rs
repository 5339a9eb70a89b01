//! Asynchronous copies from global to shared memory: `cp.async` (Ampere and later), CUDA C's
//! `__pipeline_memcpy_async`, `__pipeline_commit` and `__pipeline_wait_prior`.
//!
//! An ordinary tile load is `ld.global` into a register, then `st.shared`: the thread waits for
//! HBM's ~600 cycles with the value in flight in a register. `cp.async` hands the copy to the
//! memory system and returns at once, so a block can have the *next* tiles in flight while it
//! computes on the current one (a multi-stage pipeline), with no registers tied up.
//!
//! The price is bookkeeping. Each thread groups its copies with [`cp_async_commit_group`] and
//! waits with [`cp_async_wait_group`]`::<N>()`, which returns once all but the `N` most recently
//! committed groups have landed in shared memory. Until then the destination bytes are in flight:
//! reading (or writing) them is a race with the copy engine. Completion is per thread, so other
//! threads see the data only after a [`sync_threads`] that follows the wait; and a barrier alone
//! completes nothing. The emulator models exactly this: a copy's global read and shared write
//! happen when its group is waited for, and any access to bytes still in flight is reported with
//! the thread and address.
//!
//! [`sync_threads`]: super::thread::sync_threads

use super::{GlobalPtr, SharedPtr};

/// Bytes one `cp.async.cg` moves.
pub const CP_ASYNC_BYTES: u32 = 16;

/// An asynchronous-copy instruction, as the emulator receives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncCopy {
    /// `cp.async.cg.shared.global [dst], [src], 16, src_bytes`: 16 bytes to `dst`, the first
    /// `src_bytes` of them from `src`, the rest zeros.
    Copy {
        /// Generic address of the shared-memory destination (16-byte aligned).
        dst: usize,
        /// Generic address of the global-memory source (16-byte aligned).
        src: usize,
        /// Bytes read from `src`, 0 to 16.
        src_bytes: u32,
    },
    /// `cp.async.commit_group`: the thread's copies since the last commit become one group
    /// (possibly empty).
    CommitGroup,
    /// `cp.async.wait_group N`: every committed group but the `pending` most recent completes.
    WaitGroup {
        /// Groups that may stay in flight.
        pending: u32,
    },
}

/// `cp.async.cg.shared.global [dst], [src], 16, src_bytes;`: starts copying 16 bytes from `src`
/// to `dst`, of which the first `src_bytes` are read and the rest are zero-filled.
///
/// `src_bytes < 16` is the edge-handling tool: a tile row that runs past the matrix is loaded
/// with the bytes that exist and zeros after them, and `src_bytes = 0` writes a zero chunk
/// without reading anything (the address must still be a valid, aligned global address).
///
/// # Safety
/// `dst` and `src` must be 16-byte aligned, `src..src + src_bytes` inside a global buffer and
/// `dst..dst + 16` inside this block's shared memory; nobody may touch `dst..dst + 16` until this
/// thread has waited for the copy's group (and the block has synchronised, for other threads).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn cp_async_16<T: Copy>(dst: SharedPtr<T>, src: GlobalPtr<T>, src_bytes: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract. `cvta.to.shared` / `cvta.to.global` turn the generic
    // addresses into the state-space addresses `cp.async` takes.
    unsafe {
        core::arch::asm!(
            "{{ .reg .u64 s, g; cvta.to.shared.u64 s, {d}; cvta.to.global.u64 g, {src}; cp.async.cg.shared.global [s], [g], 16, {n}; }}",
            d = in(reg64) dst.as_ptr() as u64,
            src = in(reg64) src.addr() as u64,
            n = in(reg32) src_bytes,
        );
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        assert!(
            src_bytes <= CP_ASYNC_BYTES,
            "cp_async_16 with src_bytes = {src_bytes}: at most 16 bytes are read"
        );
        let op = AsyncCopy::Copy {
            dst: dst.as_ptr() as usize,
            src: src.addr(),
            src_bytes,
        };
        emulate(op);
    }
}

/// `cp.async.commit_group` (`__pipeline_commit`): closes this thread's current group of copies.
/// A commit with no copies since the last one makes an empty group, which keeps the group count
/// of a pipeline's loop the same in every iteration.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn cp_async_commit_group() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: bookkeeping of the thread's own copies.
    unsafe {
        core::arch::asm!("cp.async.commit_group;")
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emulate(AsyncCopy::CommitGroup);
}

/// `cp.async.wait_group N` (`__pipeline_wait_prior(N)`): waits until at most the `N` most
/// recently committed groups of this thread are in flight. Only this thread's view is complete:
/// follow it with `sync_threads` before other threads read the data.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn cp_async_wait_group<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: waits for the thread's own copies; a memory clobber for the compiler.
    unsafe {
        core::arch::asm!("cp.async.wait_group {n};", n = const N)
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emulate(AsyncCopy::WaitGroup { pending: N });
}

/// `cp.async.wait_all`: commits the current group and waits for every group of this thread
/// (the PTX ISA defines it as `commit_group` then `wait_group 0`).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn cp_async_wait_all() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: as `cp_async_wait_group`.
    unsafe {
        core::arch::asm!("cp.async.wait_all;")
    };
    #[cfg(not(target_arch = "nvptx64"))]
    {
        emulate(AsyncCopy::CommitGroup);
        emulate(AsyncCopy::WaitGroup { pending: 0 });
    }
}

#[cfg(not(target_arch = "nvptx64"))]
#[track_caller]
fn emulate(op: AsyncCopy) {
    let site = super::emu::Site::caller();
    super::emu::with(|gpu| gpu.async_copy(op, site));
}
