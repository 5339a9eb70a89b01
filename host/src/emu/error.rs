use std::fmt;

use kernels::cuda::emu::{Access, Site};

use crate::launch::Dim3;

/// Which memory an access went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemorySpace {
    /// Global memory (HBM).
    Global,
    /// The block's shared memory.
    Shared,
}

/// One thread's access, as a race report shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadAccess {
    /// `threadIdx` of the thread.
    pub thread: Dim3,
    /// Load or store.
    pub access: Access,
    /// Where in the kernel source.
    pub site: Site,
}

/// What went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EmuErrorKind {
    /// An access outside every allocation of its memory space.
    OutOfBounds {
        /// Global or shared.
        space: MemorySpace,
        /// Who, what, where.
        by: ThreadAccess,
        /// The address.
        addr: usize,
        /// Width of the access.
        bytes: usize,
    },
    /// An access not aligned to its own width, which faults on a GPU.
    Misaligned {
        /// Global or shared.
        space: MemorySpace,
        /// Who, what, where.
        by: ThreadAccess,
        /// The address.
        addr: usize,
        /// Width of the access.
        bytes: usize,
    },
    /// Two threads touched the same shared-memory byte between two barriers, one of them writing.
    SharedRace {
        /// Byte offset in the shared array (or in dynamic shared memory).
        offset: usize,
        /// The earlier access.
        first: ThreadAccess,
        /// The access that conflicts with it.
        second: ThreadAccess,
    },
    /// A read of shared memory that no thread of the block has written.
    UninitializedShared {
        /// Byte offset in the shared array (or in dynamic shared memory).
        offset: usize,
        /// The read.
        by: ThreadAccess,
    },
    /// Threads of one block wait at different barriers, or some wait while others have exited.
    BarrierDivergence {
        /// Threads waiting, with the barrier each waits at (first few).
        waiting: Vec<(Dim3, Site)>,
        /// Threads that exited, or wait somewhere else (first few).
        elsewhere: Vec<(Dim3, String)>,
    },
    /// A shuffle, `ldmatrix` or `mma` that not every lane in its mask executed.
    WarpCollective {
        /// Warp index in the block.
        warp: u32,
        /// The collective's mask.
        mask: u32,
        /// The instruction's site, from one lane that did execute it.
        site: Site,
        /// What is wrong.
        detail: String,
    },
    /// More shared memory than a block may have.
    SharedMemoryLimit {
        /// Bytes the block asked for, static and dynamic.
        requested: usize,
        /// The device's limit.
        limit: usize,
    },
    /// An access to shared memory that a `cp.async` still in flight copies into: the classic
    /// pipeline bug of reading a tile before waiting for it.
    AsyncCopyInFlight {
        /// Byte offset, in its shared array (or in dynamic shared memory), of the first byte of
        /// the access that is in flight.
        offset: usize,
        /// That byte's address.
        addr: usize,
        /// The access.
        by: ThreadAccess,
        /// The copy in flight: the thread that started it, and where.
        copy: ThreadAccess,
    },
    /// Every thread of the block is blocked and at least one waits on an mbarrier phase that no
    /// thread or copy can complete any more: on a GPU, a hang.
    MbarrierDeadlock {
        /// Threads waiting on an mbarrier, with where and what they wait for (first few).
        waiting: Vec<(Dim3, Site, String)>,
        /// What the other threads do (first few).
        others: Vec<(Dim3, String)>,
    },
    /// An mbarrier used against the ISA's rules (not initialised, not in shared memory, ...).
    Mbarrier {
        /// The thread.
        thread: Dim3,
        /// The instruction.
        site: Site,
        /// What is wrong.
        detail: String,
    },
    /// A bulk tensor copy the hardware would refuse or whose result the ISA leaves undefined.
    Tma {
        /// The issuing thread.
        thread: Dim3,
        /// The instruction.
        site: Site,
        /// What is wrong.
        detail: String,
    },
    /// An access to shared memory that a TMA copy writes, by a thread that has not yet seen the
    /// copy's mbarrier phase complete.
    TmaInFlight {
        /// Byte offset of the first such byte, in its array.
        offset: usize,
        /// The access.
        by: ThreadAccess,
        /// The copy: the issuing thread and where.
        copy: ThreadAccess,
        /// The mbarrier phase (0, 1, 2, ...) the copy completes on.
        phase: u64,
    },
    /// A write to shared memory that a `wgmma` still in flight reads.
    WgmmaOperandInFlight {
        /// Byte offset of the first such byte, in its array.
        offset: usize,
        /// The write.
        by: ThreadAccess,
        /// The `wgmma` that reads it.
        wgmma: Site,
    },
    /// A read of accumulator registers before the `wgmma.wait_group` that completes the `wgmma`
    /// writing them.
    WgmmaAccumulatorInFlight {
        /// The thread.
        thread: Dim3,
        /// The read.
        site: Site,
        /// The `wgmma` still writing them.
        wgmma: Site,
    },
    /// A `wgmma` the warpgroup did not issue as the ISA requires (not all 128 threads, different
    /// operands, a descriptor the emulator cannot follow).
    Wgmma {
        /// Warpgroup index in the block.
        warpgroup: u32,
        /// The instruction.
        site: Site,
        /// What is wrong.
        detail: String,
    },
    /// The kernel itself panicked (an assertion, an arithmetic overflow, a slice index).
    Panic {
        /// The thread.
        thread: Dim3,
        /// The panic message.
        message: String,
    },
}

/// A bug the emulator found in a kernel, with where it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmuError {
    /// The kernel's name.
    pub kernel: &'static str,
    /// `blockIdx` of the block.
    pub block: Dim3,
    /// The bug.
    pub kind: EmuErrorKind,
}

impl std::error::Error for EmuError {}

fn d(v: Dim3) -> String {
    format!("({}, {}, {})", v.x, v.y, v.z)
}

fn access(a: &ThreadAccess) -> String {
    let verb = match a.access {
        Access::Read => "read",
        Access::Write => "write",
    };
    format!("thread {} {verb} at {}", d(a.thread), a.site)
}

impl fmt::Display for EmuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kernel `{}`, block {}: ", self.kernel, d(self.block))?;
        match &self.kind {
            EmuErrorKind::OutOfBounds {
                space,
                by,
                addr,
                bytes,
            } => write!(
                f,
                "out-of-bounds {space:?} memory access: {} of {bytes} bytes at address {addr:#x} lies outside every allocation",
                access(by)
            ),
            EmuErrorKind::Misaligned {
                space,
                by,
                addr,
                bytes,
            } => write!(
                f,
                "misaligned {space:?} memory access: {} of {bytes} bytes at address {addr:#x}, which is not a multiple of {bytes}",
                access(by)
            ),
            EmuErrorKind::SharedRace {
                offset,
                first,
                second,
            } => write!(
                f,
                "data race on shared memory at byte {offset} of its array: {} and {} with no sync_threads between them",
                access(first),
                access(second)
            ),
            EmuErrorKind::UninitializedShared { offset, by } => write!(
                f,
                "read of uninitialised shared memory at byte {offset} of its array: {} but no thread of the block wrote it before the next barrier",
                access(by)
            ),
            EmuErrorKind::BarrierDivergence { waiting, elsewhere } => {
                write!(f, "barrier divergence: ")?;
                let w: Vec<String> = waiting
                    .iter()
                    .map(|(t, s)| format!("thread {} waits at {s}", d(*t)))
                    .collect();
                let e: Vec<String> = elsewhere
                    .iter()
                    .map(|(t, s)| format!("thread {} {s}", d(*t)))
                    .collect();
                write!(f, "{}; but {}", w.join(", "), e.join(", "))
            }
            EmuErrorKind::WarpCollective {
                warp,
                mask,
                site,
                detail,
            } => write!(
                f,
                "warp-collective instruction at {site} (warp {warp}, mask {mask:#010x}): {detail}"
            ),
            EmuErrorKind::SharedMemoryLimit { requested, limit } => write!(
                f,
                "the block needs {requested} bytes of shared memory, more than the device limit of {limit}"
            ),
            EmuErrorKind::AsyncCopyInFlight {
                offset,
                addr,
                by,
                copy,
            } => write!(
                f,
                "shared memory at byte {offset} of its array (address {addr:#x}) is the destination of a cp.async still in flight: {}, but the copy that thread {} started at {} has not completed; wait for it first (cp_async_wait_group / cp_async_wait_all in the copying thread, then sync_threads for the others)",
                access(by),
                d(copy.thread),
                copy.site
            ),
            EmuErrorKind::MbarrierDeadlock { waiting, others } => {
                let w: Vec<String> = waiting
                    .iter()
                    .map(|(t, site, what)| format!("thread {} waits at {site} for {what}", d(*t)))
                    .collect();
                let o: Vec<String> = others
                    .iter()
                    .map(|(t, what)| format!("thread {} {what}", d(*t)))
                    .collect();
                write!(
                    f,
                    "mbarrier deadlock: every thread is blocked and no arrival or copy is left to complete the phase waited for: {}",
                    w.join(", ")
                )?;
                if !o.is_empty() {
                    write!(f, "; meanwhile {}", o.join(", "))?;
                }
                Ok(())
            }
            EmuErrorKind::Mbarrier {
                thread,
                site,
                detail,
            } => write!(
                f,
                "mbarrier misuse by thread {} at {site}: {detail}",
                d(*thread)
            ),
            EmuErrorKind::Tma {
                thread,
                site,
                detail,
            } => write!(
                f,
                "bulk tensor copy (TMA) by thread {} at {site}: {detail}",
                d(*thread)
            ),
            EmuErrorKind::TmaInFlight {
                offset,
                by,
                copy,
                phase,
            } => write!(
                f,
                "shared memory at byte {offset} of its array is the destination of a TMA copy that thread {} issued at {}, completing on phase {phase} of its mbarrier: {}, which has not waited for that phase (mbarrier_wait_parity) first",
                d(copy.thread),
                copy.site,
                access(by)
            ),
            EmuErrorKind::WgmmaOperandInFlight { offset, by, wgmma } => write!(
                f,
                "shared memory at byte {offset} of its array is an operand of the wgmma at {wgmma}, still in flight: {}; wait for its group (wgmma_wait_group) before overwriting it",
                access(by)
            ),
            EmuErrorKind::WgmmaAccumulatorInFlight {
                thread,
                site,
                wgmma,
            } => write!(
                f,
                "thread {} reads wgmma accumulator registers at {site} before the wgmma at {wgmma} that writes them has completed: commit its group and wgmma_wait_group first",
                d(*thread)
            ),
            EmuErrorKind::Wgmma {
                warpgroup,
                site,
                detail,
            } => write!(f, "wgmma at {site} (warpgroup {warpgroup}): {detail}"),
            EmuErrorKind::Panic { thread, message } => {
                write!(f, "thread {} panicked: {message}", d(*thread))
            }
        }
    }
}
