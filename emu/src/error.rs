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

/// Two threads of one block stored the same bytes to one place in shared memory with no
/// barrier between them (every lane of a warp setting one flag): a race by the memory model,
/// harmless in practice, since whichever store lands last leaves the same bytes. A warning, not
/// an error: the launch goes on (`Observed::benign_races`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BenignRace {
    /// The kernel's name.
    pub kernel: &'static str,
    /// `blockIdx` of the block.
    pub block: Dim3,
    /// Byte offset in the shared array (or in dynamic shared memory) of the first such byte.
    pub offset: usize,
    /// The earlier store.
    pub first: ThreadAccess,
    /// The store that raced with it, storing the same bytes.
    pub second: ThreadAccess,
}

/// A finding a launch warns about and goes on with (a benign race, a barrier met at two
/// instructions): named by the pair of sites it is between, and reported once per pair.
pub(crate) trait Warning: Sized {
    /// The two sites.
    fn sites(&self) -> (Site, Site);

    /// Adds the finding to `list` unless one of the same pair of sites is there already.
    fn add_to(self, list: &mut Vec<Self>) {
        if !list.iter().any(|b| b.sites() == self.sites()) {
            list.push(self);
        }
    }
}

impl Warning for BenignRace {
    /// The two stores' sites.
    fn sites(&self) -> (Site, Site) {
        (self.first.site, self.second.site)
    }
}

impl fmt::Display for BenignRace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kernel `{}`, block {}: benign data race on shared memory at byte {} of its array: {} and {} store the same bytes with no sync_threads between them (a race by the memory model, harmless in practice since either order leaves the same bytes; the launch goes on)",
            self.kernel,
            d(self.block),
            self.offset,
            access(&self.first),
            access(&self.second)
        )
    }
}

/// The threads of one block met the block barrier (barrier 0, `__syncthreads()`, `bar.sync 0`)
/// at two different instructions: the two halves of a double-buffered GEMM, each calling
/// `__syncthreads()` in its own branch. The barrier released once every thread of the block had
/// arrived, as the PTX ISA counts arrivals at a barrier by its id on sm_70 and later ("Parallel
/// Synchronization and Communication Instructions: bar, barrier"), but CUDA C++ calls
/// `__syncthreads()` in divergent code undefined, and so does the ISA for the aligned form
/// (`bar.sync`, `barrier.sync.aligned`) that it compiles to. A warning, not an error: the launch
/// goes on (`Observed::divergent_barriers`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DivergentBarrier {
    /// The kernel's name.
    pub kernel: &'static str,
    /// `blockIdx` of the block.
    pub block: Dim3,
    /// A thread at one of the instructions, and the instruction.
    pub first: (Dim3, Site),
    /// A thread at another, and that instruction.
    pub second: (Dim3, Site),
}

impl Warning for DivergentBarrier {
    /// The two instructions.
    fn sites(&self) -> (Site, Site) {
        (self.first.1, self.second.1)
    }
}

impl fmt::Display for DivergentBarrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kernel `{}`, block {}: the threads met barrier 0 at different instructions: thread {} at {} and thread {} at {}. It released once every thread of the block had arrived, since on sm_70 and later the PTX ISA counts arrivals at a barrier by its id, wherever they come from (PTX ISA, \"bar, barrier\"); but CUDA C++ calls __syncthreads() in divergent code undefined, and the ISA likewise the aligned barrier it compiles to (bar.sync, barrier.sync.aligned) unless every thread executes the same one; the non-aligned barrier.sync is the defined form. The launch goes on",
            self.kernel,
            d(self.block),
            d(self.first.0),
            self.first.1,
            d(self.second.0),
            self.second.1
        )
    }
}

/// One racing pair of a global race report beyond the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RacingPair {
    /// The byte's address.
    pub addr: usize,
    /// Its offset in the allocation that holds it.
    pub offset: usize,
    /// `blockIdx` of the first access's thread (in block order, the earlier).
    pub first_block: Dim3,
    /// The first access.
    pub first: ThreadAccess,
    /// `blockIdx` of the other access's thread.
    pub second_block: Dim3,
    /// The other access.
    pub second: ThreadAccess,
}

/// The allocation an out-of-bounds access lies just past.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overrun {
    /// The shared array's name as the kernel declared it (`None`: a global buffer, or dynamic
    /// shared memory).
    pub array: Option<&'static str>,
    /// Its first byte.
    pub start: usize,
    /// Its size in bytes.
    pub bytes: usize,
    /// Its element type and size (`f32`, 4) as the host allocated it.
    pub elem: (&'static str, usize),
    /// How many bytes past its end the access starts (0: at the first byte after it).
    pub past_end: usize,
}

impl ThreadAccess {
    /// The `thread` an atomic in a shared-memory race report has: the shadow records atomics
    /// as one thread's (see the emulator's `block.rs`), not which thread issued each.
    pub const ATOMIC: Dim3 = Dim3 {
        x: u32::MAX,
        y: u32::MAX,
        z: u32::MAX,
    };
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
        /// For a global access, the allocation it overran, when it starts in the red zone
        /// after one (the emulator leaves 256 bytes unallocated after each buffer, so an access
        /// just past the end lands in no neighbour).
        near: Option<Overrun>,
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
        /// The barrier both accesses come after (the last one the block passed), if any: an
        /// access on an earlier line than it was made in the next iteration of a loop.
        after_barrier: Option<Site>,
    },
    /// Two threads of one launch touched the same global-memory byte, one of them writing, with
    /// nothing ordering the two accesses: threads of different blocks (nothing orders blocks), or
    /// of one block between two barriers (and, in one warp, not separated by `__syncwarp`).
    /// The error's `block` is the first thread's. The race shown is the first of the launch's
    /// racing pairs of instructions in the order `more` continues: pairs across warps or blocks
    /// before pairs of lanes of one warp, then by address.
    GlobalRace {
        /// The byte's address.
        addr: usize,
        /// Its offset in the allocation that holds it.
        offset: usize,
        /// One access (in block order, the earlier block's).
        first: ThreadAccess,
        /// `blockIdx` of the other access's thread.
        second_block: Dim3,
        /// The other access.
        second: ThreadAccess,
        /// The other racing pairs of instructions, one race each, in order (at most
        /// [`REPORTED_RACES`](crate::REPORTED_RACES) in all).
        more: Vec<RacingPair>,
    },
    /// A read of shared memory that no thread of the block has written.
    UninitializedShared {
        /// Byte offset in the shared array (or in dynamic shared memory).
        offset: usize,
        /// The read.
        by: ThreadAccess,
    },
    /// Threads of one block wait at a barrier that the others never reach: they exited, or are
    /// blocked elsewhere (a deadlock on a GPU).
    BarrierDivergence {
        /// Threads waiting, with the barrier instruction each waits at (first few).
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
    /// A thread ran for longer than the watchdog's budget without reaching a barrier, a warp
    /// collective or its end: most likely a loop that never ends.
    Watchdog {
        /// The thread.
        thread: Dim3,
        /// Where it was last seen (its last memory access, or the PTX instruction it had reached
        /// at the watchdog's look), if anywhere since it last waited.
        last_site: Option<Site>,
        /// The budget, in milliseconds.
        budget_ms: u64,
        /// Other threads that had not finished, and where they were (first few).
        others: Vec<(Dim3, String)>,
    },
    /// A block ran for longer than the watchdog's budget, though its threads kept reaching
    /// barriers or warp instructions: most likely a loop around a barrier that never ends
    /// (`while (!done) __syncthreads();`), which resets no thread's own budget.
    BlockWatchdog {
        /// The budget, in milliseconds.
        budget_ms: u64,
        /// The barrier the block last passed as a whole, if any.
        last_barrier: Option<Site>,
        /// The block's threads that had not finished, and where they were (first few).
        threads: Vec<(Dim3, String)>,
    },
    /// A thread's locals outgrew its coroutine stack.
    StackOverflow {
        /// The thread.
        thread: Dim3,
        /// The stack's size.
        stack_bytes: usize,
    },
    /// The host could not provide what the block needs to run (memory for its threads' stacks).
    Resources(String),
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
    /// An access to accumulator registers (or, in PTX, to the registers of a register A
    /// fragment) before the `wgmma.wait_group` that completes the `wgmma` using them.
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
    /// The kernel executed PTX's `trap` (CUDA ends the launch with an illegal instruction).
    Trap {
        /// The thread.
        thread: Dim3,
        /// The `trap`.
        site: Site,
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

pub(crate) fn d(v: Dim3) -> String {
    format!("({}, {}, {})", v.x, v.y, v.z)
}

fn verb(a: Access) -> &'static str {
    match a {
        Access::Read => "read",
        Access::Write => "write",
    }
}

/// Of two racing accesses made after the barrier at `barrier`, the one on an earlier line of
/// the same function or file than that barrier (a thread can only get there by going round a
/// loop), and the barrier.
fn next_iteration(
    barrier: Site,
    first: &ThreadAccess,
    second: &ThreadAccess,
) -> Option<(ThreadAccess, Site)> {
    let (file, line, _) = barrier.position();
    [first, second]
        .into_iter()
        .find(|a| {
            let (f, l, _) = a.site.position();
            a.thread != ThreadAccess::ATOMIC && f == file && l < line
        })
        .map(|a| (*a, barrier))
}

fn access(a: &ThreadAccess) -> String {
    let verb = verb(a.access);
    if a.thread == ThreadAccess::ATOMIC {
        return format!("an atomic at {}", a.site);
    }
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
                near,
            } => out_of_bounds(f, space, by, addr, bytes, near),
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
                after_barrier,
            } => shared_race(f, offset, first, second, after_barrier),
            EmuErrorKind::GlobalRace {
                addr,
                offset,
                first,
                second_block,
                second,
                more,
            } => {
                global_race(f, addr, offset, first, second_block, second)?;
                more_races(f, more)
            }
            EmuErrorKind::UninitializedShared { offset, by } => write!(
                f,
                "read of uninitialised shared memory at byte {offset} of its array: {} but no thread of the block wrote it before the next barrier",
                access(by)
            ),
            EmuErrorKind::BarrierDivergence { waiting, elsewhere } => {
                barrier_divergence(f, waiting, elsewhere)
            }
            EmuErrorKind::WarpCollective {
                warp,
                mask,
                site,
                detail,
            } => write!(
                f,
                "warp-collective instruction at {site} (warp {warp}, mask {mask:#010x}): {detail} (the mask names the lanes that execute this very instruction together: FULL_MASK when all 32 do, the mask of those lanes when it is inside an `if` on the lane; docs/softmax.md)"
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
            } => async_copy_in_flight(f, offset, addr, by, copy),
            EmuErrorKind::Watchdog {
                thread,
                last_site,
                budget_ms,
                others,
            } => watchdog(f, thread, last_site, budget_ms, others),
            EmuErrorKind::BlockWatchdog {
                budget_ms,
                last_barrier,
                threads,
            } => block_watchdog(f, *budget_ms, last_barrier, threads),
            EmuErrorKind::StackOverflow {
                thread,
                stack_bytes,
            } => write!(
                f,
                "thread {} overflowed its {} KiB stack: its locals (per-thread arrays, which a GPU would keep in registers or spill to local memory) need more; make them smaller or raise {}",
                d(*thread),
                stack_bytes / 1024,
                super::STACK_VAR
            ),
            EmuErrorKind::Resources(what) => write!(f, "{what}"),
            EmuErrorKind::MbarrierDeadlock { waiting, others } => {
                mbarrier_deadlock(f, waiting, others)
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
            } => tma_in_flight(f, offset, by, copy, phase),
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
                "thread {} accesses wgmma accumulator (or A-fragment) registers at {site} before the wgmma at {wgmma} that uses them has completed: commit its group and wgmma_wait_group first",
                d(*thread)
            ),
            EmuErrorKind::Wgmma {
                warpgroup,
                site,
                detail,
            } => write!(f, "wgmma at {site} (warpgroup {warpgroup}): {detail}"),
            EmuErrorKind::Trap { thread, site } => write!(
                f,
                "thread {} executed `trap` at {site}: the kernel aborted the launch (CUDA_ERROR_ILLEGAL_INSTRUCTION on a GPU)",
                d(*thread)
            ),
            EmuErrorKind::Panic { thread, message } => {
                write!(f, "thread {} panicked: {message}", d(*thread))
            }
        }
    }
}

/// An access outside every allocation, with the array or buffer it overruns when one is near.
fn out_of_bounds(
    f: &mut fmt::Formatter<'_>,
    space: &MemorySpace,
    by: &ThreadAccess,
    addr: &usize,
    bytes: &usize,
    near: &Option<Overrun>,
) -> fmt::Result {
    write!(
        f,
        "out-of-bounds {space:?} memory access: {} of {bytes} bytes at address {addr:#x} lies outside every allocation",
        access(by)
    )?;
    if let (MemorySpace::Shared, Some(o)) = (space, near) {
        let (elem, size) = o.elem;
        let (len, index) = (o.bytes / size.max(1), (addr - o.start) / size.max(1));
        let array = match o.array {
            Some(name) => {
                format!("shared array `{name}` ([{elem}; {len}], {} bytes)", o.bytes)
            }
            None => format!("the dynamic shared memory ({} bytes)", o.bytes),
        };
        return write!(
            f,
            ": index {index} of {array}, whose last index is {}{}",
            len.saturating_sub(1),
            if index == len {
                ": one past the end (check the loop bound, the guard or the halo's size; docs/tiling.md)"
            } else {
                ""
            }
        );
    }
    if let Some(o) = near {
        let (elem, size) = o.elem;
        write!(
            f,
            ": {} bytes past the end of the buffer of {} x {elem} at {:#x} ({} bytes; element {} of it, one past its last is {})",
            o.past_end,
            o.bytes / size.max(1),
            o.start,
            o.bytes,
            (addr - o.start) / size.max(1),
            o.bytes / size.max(1)
        )?;
        if (addr - o.start) / size.max(1) == o.bytes / size.max(1) {
            write!(
                f,
                ": one past the end, as a thread of the last block does without a guard (`if i < n`)"
            )?;
        }
    }
    Ok(())
}

/// Two unordered accesses to one byte of shared memory, one of them a write.
fn shared_race(
    f: &mut fmt::Formatter<'_>,
    offset: &usize,
    first: &ThreadAccess,
    second: &ThreadAccess,
    after_barrier: &Option<Site>,
) -> fmt::Result {
    write!(
        f,
        "data race on shared memory at byte {offset} of its array: {} and {} with no sync_threads between them",
        access(first),
        access(second)
    )?;
    match after_barrier.and_then(|b| next_iteration(b, first, second)) {
        Some((early, barrier)) => write!(
            f,
            "; the {} at {} is on an earlier line than the barrier at {barrier} that both accesses follow, so its thread had gone round a loop: it is the next iteration's, racing with this one's (a sync_threads() at the end of the loop body, after the last read of the tile, keeps an iteration's writes from overtaking the previous one's reads; docs/tiling.md)",
            verb(early.access),
            early.site
        ),
        None => write!(
            f,
            " (a sync_threads() between the write and the read orders them; docs/tiling.md)"
        ),
    }
}

/// Two unordered accesses to one byte of global memory from two blocks.
fn global_race(
    f: &mut fmt::Formatter<'_>,
    addr: &usize,
    offset: &usize,
    first: &ThreadAccess,
    second_block: &Dim3,
    second: &ThreadAccess,
) -> fmt::Result {
    write!(
        f,
        "data race on global memory at address {addr:#x} (byte {offset} of its allocation): {} and, in block {}, {}, with nothing ordering them (sync_threads orders the threads of one block, sync_warp the lanes of its mask; nothing orders two blocks: to combine the blocks' results, give each block its own output and combine them in a later launch, or use an atomic)",
        access(first),
        d(*second_block),
        access(second)
    )
}

/// The racing pairs after the first, one line each.
fn more_races(f: &mut fmt::Formatter<'_>, more: &[RacingPair]) -> fmt::Result {
    if more.is_empty() {
        return Ok(());
    }
    let s = if more.len() == 1 { "" } else { "s" };
    write!(f, "\nand {} more racing pair{s}:", more.len())?;
    for p in more {
        write!(
            f,
            "\n  byte {} of its allocation: in block {}, {}; in block {}, {}",
            p.offset,
            d(p.first_block),
            access(&p.first),
            d(p.second_block),
            access(&p.second)
        )?;
    }
    Ok(())
}

/// Threads of one block waiting at a barrier the others do not reach.
fn barrier_divergence(
    f: &mut fmt::Formatter<'_>,
    waiting: &[(Dim3, Site)],
    elsewhere: &[(Dim3, String)],
) -> fmt::Result {
    write!(f, "barrier divergence: ")?;
    let w: Vec<String> = waiting
        .iter()
        .map(|(t, s)| format!("thread {} waits at {s}", d(*t)))
        .collect();
    let e: Vec<String> = elsewhere
        .iter()
        .map(|(t, s)| format!("thread {} {s}", d(*t)))
        .collect();
    write!(
        f,
        "{}; but {} (every thread of a block must reach the same sync_threads: one inside an `if` on the thread index, or after an early `return`, is reached by some threads only; move it out of the branch; docs/emulator.md)",
        w.join(", "),
        e.join(", ")
    )
}

/// An access to the destination of a `cp.async` that has not completed.
fn async_copy_in_flight(
    f: &mut fmt::Formatter<'_>,
    offset: &usize,
    addr: &usize,
    by: &ThreadAccess,
    copy: &ThreadAccess,
) -> fmt::Result {
    write!(
        f,
        "shared memory at byte {offset} of its array (address {addr:#x}) is the destination of a cp.async still in flight: {}, but the copy that thread {} started at {} has not completed; wait for it first (cp_async_wait_group / cp_async_wait_all in the copying thread, then sync_threads for the others)",
        access(by),
        d(copy.thread),
        copy.site
    )
}

/// A thread that ran past its time budget.
fn watchdog(
    f: &mut fmt::Formatter<'_>,
    thread: &Dim3,
    last_site: &Option<Site>,
    budget_ms: &u64,
    others: &[(Dim3, String)],
) -> fmt::Result {
    write!(
        f,
        "thread {} ran for {:.1} s without reaching a barrier, a warp instruction or its end (a loop that never ends?)",
        d(*thread),
        *budget_ms as f64 / 1e3
    )?;
    if let Some(site) = last_site {
        write!(f, "; it was last seen at {site}")?;
    }
    if !others.is_empty() {
        let o: Vec<String> = others
            .iter()
            .map(|(t, s)| format!("thread {} {s}", d(*t)))
            .collect();
        write!(f, "; meanwhile {}", o.join(", "))?;
    }
    write!(f, " (the budget is {} in seconds)", super::WATCHDOG_VAR)
}

/// A block that ran past its time budget while its threads kept meeting barriers.
fn block_watchdog(
    f: &mut fmt::Formatter<'_>,
    budget_ms: u64,
    last_barrier: &Option<Site>,
    threads: &[(Dim3, String)],
) -> fmt::Result {
    write!(
        f,
        "the block ran for {:.1} s without ending, its threads meeting barriers or warp instructions all the while (a loop around a barrier that never ends?)",
        budget_ms as f64 / 1e3
    )?;
    if let Some(site) = last_barrier {
        write!(f, "; the last barrier it passed is at {site}")?;
    }
    match threads {
        [] => {}
        [(_, first), rest @ ..] if rest.iter().all(|(_, s)| s == first) => {
            write!(
                f,
                "; then its threads {}",
                first.replacen("waits", "wait", 1)
            )?;
        }
        _ => {
            let t: Vec<String> = threads
                .iter()
                .map(|(t, s)| format!("thread {} {s}", d(*t)))
                .collect();
            write!(f, "; then {}", t.join(", "))?;
        }
    }
    write!(
        f,
        " (the budget, per block and per thread between two waits, is {} in seconds)",
        super::WATCHDOG_VAR
    )
}

/// Every thread blocked on an mbarrier phase nothing is left to complete.
fn mbarrier_deadlock(
    f: &mut fmt::Formatter<'_>,
    waiting: &[(Dim3, Site, String)],
    others: &[(Dim3, String)],
) -> fmt::Result {
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

/// An access to the destination of a TMA copy before its phase was waited for.
fn tma_in_flight(
    f: &mut fmt::Formatter<'_>,
    offset: &usize,
    by: &ThreadAccess,
    copy: &ThreadAccess,
    phase: &u64,
) -> fmt::Result {
    write!(
        f,
        "shared memory at byte {offset} of its array is the destination of a TMA copy that thread {} issued at {}, completing on phase {phase} of its mbarrier: {}, which has not waited for that phase (mbarrier_wait_parity) first",
        d(copy.thread),
        copy.site,
        access(by)
    )
}
