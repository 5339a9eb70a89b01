//! `cp.async` in the emulator, modelled as asynchronous as the hardware makes it.
//!
//! Each thread keeps its copies in flight, in the commit groups it made. Nothing is read or
//! written when a copy starts: its 16 destination bytes are only marked *in flight*, and any
//! access to them by any thread (the copying one included) is a bug, reported with the thread,
//! the address and the copy's site. `wait_group(N)` completes the thread's committed groups but
//! the `N` most recent, oldest first; completing a copy is when its global read happens (checked
//! and counted, attributed to the copying thread) and its shared write lands (recorded in the
//! race shadow as that thread's write, so other threads still need a barrier before reading it).
//! A barrier completes nothing, as on the GPU. A thread that exits with copies in flight has them
//! completed then: the copy engine finishes them whether or not anyone waits.

use std::collections::{BTreeMap, VecDeque};

use kernels::cuda::emu::{Access, AsyncCopy, Site};
use kernels::cuda::pipeline::CP_ASYNC_BYTES;

use super::block::Block;
use super::error::{EmuErrorKind, MemorySpace, ThreadAccess};

/// Bytes one copy writes to shared memory.
const CHUNK: usize = CP_ASYNC_BYTES as usize;

/// One copy in flight.
#[derive(Clone, Copy)]
struct PendingCopy {
    /// Destination, as the kernel's generic address and as an offset in the shared arena.
    dst: usize,
    offset: usize,
    src: usize,
    src_bytes: usize,
    site: Site,
}

/// A thread's copies: the groups it committed (oldest first) and the group it is filling.
#[derive(Default)]
struct ThreadCopies {
    committed: VecDeque<Vec<PendingCopy>>,
    open: Vec<PendingCopy>,
}

/// The destination of a copy in flight.
struct InFlight {
    end: usize,
    thread: usize,
    site: Site,
}

/// Every copy in flight in one block.
pub(super) struct AsyncCopies {
    /// Per thread, made at the block's first `cp.async` instruction (see [`thread`](Self::thread)):
    /// the blocks of kernels that issue none do not pay for it.
    threads: Vec<ThreadCopies>,
    /// Threads of the block.
    count: usize,
    /// Destinations by arena offset; they never overlap (a copy into bytes in flight is refused).
    in_flight: BTreeMap<usize, InFlight>,
}

impl AsyncCopies {
    pub(super) fn new(threads: usize) -> Self {
        Self {
            threads: Vec::new(),
            count: threads,
            in_flight: BTreeMap::new(),
        }
    }

    /// Thread `t`'s copies, the block's per-thread state made on first use.
    fn thread(&mut self, t: usize) -> &mut ThreadCopies {
        if self.threads.is_empty() {
            self.threads.resize_with(self.count, ThreadCopies::default);
        }
        &mut self.threads[t]
    }

    /// Whether any copy is in flight (most accesses find none, and skip the lookup).
    pub(super) fn any_in_flight(&self) -> bool {
        !self.in_flight.is_empty()
    }

    /// The first in-flight byte of `[offset, offset + bytes)` and the copy it belongs to.
    fn in_flight_byte(&self, offset: usize, bytes: usize) -> Option<(usize, &InFlight)> {
        // Destinations are disjoint, so only the last one starting before the access's end can
        // reach into it.
        let (&start, copy) = self.in_flight.range(..offset + bytes).next_back()?;
        (copy.end > offset).then_some((start.max(offset), copy))
    }
}

/// Refuses `by`'s access to `bytes` bytes at arena `offset` (address `addr`) if a copy in flight
/// writes any of them.
pub(super) fn check_not_in_flight(
    block: &Block,
    offset: usize,
    addr: usize,
    bytes: usize,
    by: impl FnOnce() -> ThreadAccess,
) -> Result<(), EmuErrorKind> {
    let copies = block.async_copies.borrow();
    let Some((first, copy)) = copies.in_flight_byte(offset, bytes) else {
        return Ok(());
    };
    Err(EmuErrorKind::AsyncCopyInFlight {
        offset: block.arena.borrow().in_array(first),
        addr: addr + (first - offset),
        by: by(),
        copy: block.thread_access(copy.thread, Access::Write, copy.site),
    })
}

/// Thread `t` executes `op`.
pub(super) fn execute(
    block: &Block,
    t: usize,
    op: AsyncCopy,
    site: Site,
) -> Result<(), EmuErrorKind> {
    match op {
        AsyncCopy::Copy {
            dst,
            src,
            src_bytes,
        } => start(block, t, dst, src, src_bytes as usize, site),
        AsyncCopy::CommitGroup => {
            let mut copies = block.async_copies.borrow_mut();
            let thread = copies.thread(t);
            let group = std::mem::take(&mut thread.open);
            thread.committed.push_back(group);
            Ok(())
        }
        AsyncCopy::WaitGroup { pending } => loop {
            let oldest = {
                let mut copies = block.async_copies.borrow_mut();
                let thread = copies.thread(t);
                if thread.committed.len() > pending as usize {
                    thread.committed.pop_front()
                } else {
                    None
                }
            };
            let Some(group) = oldest else { return Ok(()) };
            for copy in group {
                complete(block, t, copy)?;
            }
        },
    }
}

/// Thread `t` has exited: whatever it left in flight lands now.
pub(super) fn finish_thread(block: &Block, t: usize) -> Result<(), EmuErrorKind> {
    let left: Vec<PendingCopy> = {
        let mut copies = block.async_copies.borrow_mut();
        // No per-thread state: the block has issued no `cp.async`, so nothing is left.
        let Some(thread) = copies.threads.get_mut(t) else {
            return Ok(());
        };
        let thread = std::mem::take(thread);
        thread
            .committed
            .into_iter()
            .flatten()
            .chain(thread.open)
            .collect()
    };
    left.into_iter()
        .try_for_each(|copy| complete(block, t, copy))
}

/// Starts a copy: checks both addresses' alignment and the destination (bounds, not already in
/// flight, no race with this barrier interval's accesses; its 16 bytes are counted as written),
/// then marks the destination in flight.
fn start(
    block: &Block,
    t: usize,
    dst: usize,
    src: usize,
    src_bytes: usize,
    site: Site,
) -> Result<(), EmuErrorKind> {
    // The source must be 16-byte aligned even when fewer bytes (or none) are read.
    let read = || block.thread_access(t, Access::Read, site);
    block.aligned(MemorySpace::Global, src, CHUNK, read)?;
    block.shared_check(t, dst, CHUNK, Access::Write, site)?;
    let offset = block
        .arena
        .borrow()
        .offset_of(dst, CHUNK)
        .expect("shared_check accepted the destination");
    block.leave_fast_path();
    let mut copies = block.async_copies.borrow_mut();
    copies.in_flight.insert(
        offset,
        InFlight {
            end: offset + CHUNK,
            thread: t,
            site,
        },
    );
    copies.thread(t).open.push(PendingCopy {
        dst,
        offset,
        src,
        src_bytes,
        site,
    });
    Ok(())
}

/// Completes a copy on thread `t`'s behalf: the global read (checked, counted), then the shared
/// write, which races with any other thread's access to those bytes in this barrier interval.
fn complete(block: &Block, t: usize, copy: PendingCopy) -> Result<(), EmuErrorKind> {
    block
        .async_copies
        .borrow_mut()
        .in_flight
        .remove(&copy.offset);
    block.refresh_fast_path();
    let mut chunk = [0u8; CHUNK];
    if copy.src_bytes > 0 {
        block.global_check(t, copy.src, copy.src_bytes, Access::Read, copy.site)?;
        // SAFETY: `global_check` found `src_bytes` bytes inside a live buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(copy.src as *const u8, chunk.as_mut_ptr(), copy.src_bytes)
        };
    }
    block.shared_race_check(t, copy.offset, CHUNK, Access::Write, copy.site)?;
    // SAFETY: `start` checked that these 16 bytes lie in this block's shared memory.
    unsafe { (copy.dst as *mut [u8; CHUNK]).write(chunk) };
    Ok(())
}
