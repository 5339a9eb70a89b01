//! `mbarrier`: the split-phase barrier in shared memory that Hopper's asynchronous copies and
//! warp-specialised pipelines synchronise on (CUDA C++'s `cuda::barrier`, CUTLASS's
//! `ClusterTransactionBarrier`).
//!
//! An mbarrier is 8 bytes of shared memory counting two things for its *current phase*: arrivals
//! still expected (set by [`mbarrier_init`]) and, since Hopper, bytes of asynchronous transactions
//! still expected (the *tx-count*). A thread arrives with [`mbarrier_arrive`], or with
//! [`mbarrier_arrive_expect_tx`], which first raises the tx-count by the bytes a copy will bring;
//! a bulk tensor copy ([`tma`](super::tma)) lowers it as its bytes land (`complete_tx`). When both
//! reach zero the phase completes, the counts reset, and the next phase begins.
//!
//! Phases are numbered 0, 1, 2, ... and a waiter names one by its *parity* (number mod 2):
//! [`mbarrier_try_wait_parity`]`(bar, p)` is true once the most recent phase of parity `p` has
//! completed, i.e. while the current phase's parity differs from `p`. So on a fresh barrier
//! (phase 0 running) a wait for parity 1 returns at once: the "phase before" counts as complete,
//! which is how a producer's first wait on an *empty* barrier passes before any consumer arrived.
//!
//! The emulator models each barrier's counts and phase, blocks a waiting thread until its phase
//! completes, and reports a wait that no thread or copy can ever complete (every thread blocked)
//! instead of hanging.

use super::SharedPtr;

/// An mbarrier operation, as the emulator receives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MbarrierOp {
    /// `mbarrier.init`: phase 0, `count` arrivals expected, tx-count 0.
    Init {
        /// Arrivals per phase, 1 to 2^20 - 1.
        count: u32,
    },
    /// `mbarrier.arrive`: one arrival.
    Arrive,
    /// `mbarrier.arrive.expect_tx`: tx-count += `bytes`, then one arrival.
    ArriveExpectTx {
        /// Bytes of asynchronous transactions this phase will also wait for.
        bytes: u32,
    },
    /// `mbarrier.try_wait.parity`: whether the phase of parity `parity` has completed. The
    /// emulator blocks the thread until it has (or reports that it never can).
    TryWait {
        /// 0 or 1.
        parity: u32,
    },
}

/// The 32-bit `.shared` address of `bar`, as the mbarrier instructions take it.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn smem(bar: SharedPtr<u64>) -> u32 {
    super::shared::shared_address(bar)
}

/// `mbarrier.init.shared::cta.b64 [bar], count`: a barrier expecting `count` arrivals per phase.
///
/// Initialise it from one thread, then make the initialisation visible to the other threads
/// (`sync_threads`) and to the copy engine ([`fence_mbarrier_init`]) before anyone uses it.
///
/// # Safety
/// `bar` is 8-byte aligned shared memory used for nothing else while the barrier is in use.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn mbarrier_init(bar: SharedPtr<u64>, count: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract.
    unsafe {
        core::arch::asm!("mbarrier.init.shared::cta.b64 [{b}], {n};", b = in(reg32) smem(bar), n = in(reg32) count)
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emulate(bar, MbarrierOp::Init { count });
}

/// `mbarrier.arrive.shared::cta.b64`: this thread's arrival on the current phase.
///
/// # Safety
/// `bar` is an initialised barrier.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn mbarrier_arrive(bar: SharedPtr<u64>) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract.
    unsafe {
        core::arch::asm!("{{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [{b}]; }}", b = in(reg32) smem(bar))
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emulate(bar, MbarrierOp::Arrive);
}

/// `mbarrier.arrive.expect_tx.shared::cta.b64 [bar], bytes`: announces that `bytes` of
/// asynchronous copies will complete on the current phase, then arrives. The phase completes only
/// once the arrivals *and* those bytes are in.
///
/// # Safety
/// `bar` is an initialised barrier.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn mbarrier_arrive_expect_tx(bar: SharedPtr<u64>, bytes: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract.
    unsafe {
        core::arch::asm!(
            "{{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [{b}], {n}; }}",
            b = in(reg32) smem(bar), n = in(reg32) bytes,
        )
    };
    #[cfg(not(target_arch = "nvptx64"))]
    emulate(bar, MbarrierOp::ArriveExpectTx { bytes });
}

/// `mbarrier.try_wait.parity.shared::cta.b64`: whether the most recent phase of parity `parity`
/// has completed. On the GPU it may give up after a while and return false, so callers loop
/// ([`mbarrier_wait_parity`]); the emulator returns only once it is true.
///
/// # Safety
/// `bar` is an initialised barrier.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn mbarrier_try_wait_parity(bar: SharedPtr<u64>, parity: u32) -> bool {
    #[cfg(target_arch = "nvptx64")]
    {
        let done: u32;
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!(
                "{{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [{b}], {q}; selp.u32 {d}, 1, 0, p; }}",
                b = in(reg32) smem(bar), q = in(reg32) parity, d = out(reg32) done,
            )
        };
        done != 0
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let site = super::emu::Site::caller();
        let op = MbarrierOp::TryWait { parity };
        super::emu::with(|gpu| gpu.mbarrier(bar.as_ptr() as usize, op, site))
    }
}

/// Waits until the phase of parity `parity` of `bar` has completed: [`mbarrier_try_wait_parity`]
/// until it says so. Afterwards this thread sees every byte the phase's copies brought.
///
/// # Safety
/// `bar` is an initialised barrier.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn mbarrier_wait_parity(bar: SharedPtr<u64>, parity: u32) {
    // SAFETY: the caller's contract.
    while !unsafe { mbarrier_try_wait_parity(bar, parity) } {}
}

/// `fence.mbarrier_init.release.cluster`: makes this thread's [`mbarrier_init`]s visible to the
/// asynchronous proxy (the copy engine that signals `complete_tx`), as the ISA requires before a
/// barrier initialised by ordinary stores is used by a bulk copy.
///
/// The emulator has one view of a barrier's state, so the fence orders nothing there; a kernel
/// that leaves it out runs on the emulator and may not on a GPU.
#[inline(always)]
pub fn fence_mbarrier_init() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a fence.
    unsafe {
        core::arch::asm!("fence.mbarrier_init.release.cluster;")
    };
}

/// `fence.proxy.async.shared::cta`: orders this thread's ordinary shared-memory accesses before
/// later accesses by the asynchronous proxy (TMA, wgmma) and after earlier ones. Needed when
/// threads write shared memory that a wgmma or a bulk copy then reads, or the reverse.
///
/// As [`fence_mbarrier_init`], it orders nothing in the emulator's single view of memory.
#[inline(always)]
pub fn fence_proxy_async() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a fence.
    unsafe {
        core::arch::asm!("fence.proxy.async.shared::cta;")
    };
}

#[cfg(not(target_arch = "nvptx64"))]
#[track_caller]
fn emulate(bar: SharedPtr<u64>, op: MbarrierOp) {
    let site = super::emu::Site::caller();
    super::emu::with(|gpu| gpu.mbarrier(bar.as_ptr() as usize, op, site));
}

/// Where the `i`-th use of a ring of `stages` buffers, each guarded by its own mbarriers, falls:
/// buffer `i % stages`, in round `i / stages`, whose phase has parity `round & 1` (a consumer
/// waits for that parity on the buffer's *full* barrier, the producer for the opposite one on
/// its *empty* barrier, which the phase "before" round 0 satisfies at once).
#[inline(always)]
pub const fn ring_slot(i: u32, stages: u32) -> (u32, u32) {
    (i % stages, (i / stages) & 1)
}
