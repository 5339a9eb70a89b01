//! Hopper's asynchronous machinery in the emulator: mbarriers and the TMA (bulk tensor copies),
//! with the ISA's semantics and its rules checked. `wgmma.rs` adds the warpgroup MMA.
//!
//! - **mbarrier**: each barrier (keyed by its shared-memory offset) has a phase number, the
//!   arrivals still pending and a transaction count. A phase completes when both reach zero; the
//!   threads waiting on it become runnable. A waiting thread *observes* the completed phases, and
//!   only what it observed orders memory for it. When every thread of the block is blocked and some
//!   wait on an mbarrier, no arrival can come any more: a deadlock, reported with who waits on
//!   what.
//! - **TMA**: a copy lands at once (the copy engine may be that fast), with the box's elements
//!   outside the tensor zero-filled, in the map's swizzle, and its bytes counted against the
//!   barrier. Every 16-byte chunk it wrote is tagged with (barrier, phase): a thread may read or
//!   write the chunk only once it has observed that phase complete. The global bytes read are the
//!   box's elements inside the tensor, counted like loads.

use std::collections::HashMap;

use kernels::cuda::emu::{Access, MbarrierOp, Site, TmaLoad};
use kernels::cuda::tma::{EmuTensorMap, TensorMap, TmaSwizzle};

use super::block::{Block, State};
use super::error::{EmuErrorKind, MemorySpace, ThreadAccess};

/// Granularity of the TMA tags: the swizzle moves 16-byte chunks, so a chunk is all one copy's.
pub(super) const CHUNK: usize = 16;

/// One mbarrier's state.
#[derive(Clone, Copy, Debug)]
struct Barrier {
    /// Arrivals per phase.
    count: u32,
    /// Arrivals the current phase still waits for.
    pending: u32,
    /// Transaction bytes the current phase still waits for (negative while copies have landed
    /// before the `expect_tx` that announces them, which the ISA allows).
    tx: i64,
    /// Completed phases: the current phase's number.
    phase: u64,
}

/// The copy that last wrote a 16-byte chunk.
#[derive(Clone, Copy, Debug)]
struct TmaTag {
    bar: usize,
    phase: u64,
    thread: usize,
    site: Site,
}

/// The Hopper state of one block. The per-thread part is made by [`activate`](Self::activate),
/// at the block's first Hopper instruction: the other blocks (nearly all) do not pay for it.
pub(super) struct HopperState {
    /// Whether any mbarrier, TMA or wgmma was used: the fast path of every shared access.
    pub active: bool,
    /// Threads of the block.
    threads: usize,
    barriers: HashMap<usize, Barrier>,
    /// Per 16-byte chunk of the arena, the TMA copy that wrote it (grown on demand).
    tags: Vec<Option<TmaTag>>,
    /// Per thread: barrier offset -> phases that thread has seen complete (empty until active).
    observed: Vec<HashMap<usize, u64>>,
    /// Per thread: where it blocked in `try_wait`, for the deadlock report (empty until active).
    wait_sites: Vec<Option<Site>>,
    pub wgmma: super::wgmma::WgmmaState,
}

impl HopperState {
    pub(super) fn new(threads: usize) -> Self {
        Self {
            active: false,
            threads,
            barriers: HashMap::new(),
            tags: Vec::new(),
            observed: Vec::new(),
            wait_sites: Vec::new(),
            wgmma: super::wgmma::WgmmaState::default(),
        }
    }

    /// A Hopper instruction runs: from now on the state is tracked per thread (the caller
    /// also leaves the block's fast path, whose condition this changes).
    pub(super) fn activate(&mut self) {
        if !self.active {
            self.active = true;
            self.observed = vec![HashMap::new(); self.threads];
            self.wait_sites = vec![None; self.threads];
            self.wgmma = super::wgmma::WgmmaState::new(self.threads);
        }
    }
}

fn mbarrier_error(block: &Block, t: usize, site: Site, detail: String) -> EmuErrorKind {
    EmuErrorKind::Mbarrier {
        thread: block.thread_dim3(t),
        site,
        detail,
    }
}

/// The arena offset of the 8-byte barrier at `addr`, checked.
fn barrier_offset(block: &Block, t: usize, addr: usize, site: Site) -> Result<usize, EmuErrorKind> {
    if !addr.is_multiple_of(8) {
        return Err(mbarrier_error(
            block,
            t,
            site,
            format!("address {addr:#x} is not 8-byte aligned"),
        ));
    }
    block.arena.borrow().offset_of(addr, 8).ok_or_else(|| {
        mbarrier_error(
            block,
            t,
            site,
            format!("address {addr:#x} is not in this block's shared memory"),
        )
    })
}

/// Whether the most recent phase of parity `parity` of a barrier now in phase `phase` completed.
fn parity_complete(phase: u64, parity: u32) -> bool {
    phase % 2 != u64::from(parity & 1)
}

/// Thread `t` executes `op` on the barrier at `addr`. `Ok(false)`: a wait that must block.
pub(super) fn mbarrier(
    block: &Block,
    t: usize,
    addr: usize,
    op: MbarrierOp,
    site: Site,
) -> Result<bool, EmuErrorKind> {
    let bar = barrier_offset(block, t, addr, site)?;
    let mut h = block.hopper.borrow_mut();
    h.activate();
    block.leave_fast_path();
    if let MbarrierOp::Init { count } = op {
        if count == 0 || count >= 1 << 20 {
            return Err(mbarrier_error(
                block,
                t,
                site,
                format!("init with count {count}: the ISA allows 1 to 2^20 - 1"),
            ));
        }
        h.barriers.insert(
            bar,
            Barrier {
                count,
                pending: count,
                tx: 0,
                phase: 0,
            },
        );
        return Ok(true);
    }
    let Some(b) = h.barriers.get_mut(&bar) else {
        return Err(mbarrier_error(
            block,
            t,
            site,
            format!(
                "the barrier at byte {bar} of shared memory was never initialised (mbarrier_init)"
            ),
        ));
    };
    match op {
        MbarrierOp::Init { .. } => unreachable!("handled above"),
        MbarrierOp::Arrive | MbarrierOp::ArriveExpectTx { .. } => {
            // Every expected arrival of the phase is in and the phase waits only for bytes of
            // its transactions: one more arrival is more than `mbarrier_init`'s count allows.
            if b.pending == 0 {
                let (count, phase, tx) = (b.count, b.phase, b.tx);
                return Err(mbarrier_error(
                    block,
                    t,
                    site,
                    format!(
                        "arrival at the barrier at byte {bar} of shared memory after all {count} arrivals of its phase {phase} (initialised with count {count}) were in, while the phase waits for {tx} transaction bytes: more threads arrive than the count says"
                    ),
                ));
            }
            if let MbarrierOp::ArriveExpectTx { bytes } = op {
                b.tx += i64::from(bytes);
            }
            b.pending -= 1;
            drop(h);
            try_complete(block, bar);
            Ok(true)
        }
        MbarrierOp::TryWait { parity } => {
            if parity_complete(b.phase, parity) {
                let phase = b.phase;
                let seen = h.observed[t].entry(bar).or_default();
                *seen = (*seen).max(phase);
                Ok(true)
            } else {
                Ok(false)
            }
        }
    }
}

/// Completes the barrier's current phase if nothing is pending, and wakes its waiters.
fn try_complete(block: &Block, bar: usize) {
    let mut h = block.hopper.borrow_mut();
    let b = h.barriers.get_mut(&bar).expect("an initialised barrier");
    if b.pending != 0 || b.tx != 0 {
        return;
    }
    b.phase += 1;
    b.pending = b.count;
    let phase = b.phase;
    drop(h);
    let mut states = block.states.borrow_mut();
    for s in states.iter_mut() {
        if let State::AtMbarrier {
            bar: waited,
            parity,
        } = *s
            && waited == bar
            && parity_complete(phase, parity)
        {
            *s = State::Runnable;
        }
    }
}

/// The state a thread blocked in `try_wait` waits in.
pub(super) fn wait_state(block: &Block, addr: usize, op: MbarrierOp) -> State {
    let bar = block
        .arena
        .borrow()
        .offset_of(addr, 8)
        .expect("checked by `mbarrier`");
    let MbarrierOp::TryWait { parity } = op else {
        unreachable!("only try_wait blocks")
    };
    State::AtMbarrier { bar, parity }
}

/// Every thread is blocked: if some wait on an mbarrier, none of them can ever be woken.
pub(super) fn stuck(block: &Block, states: &[State]) -> Option<EmuErrorKind> {
    const REPORT: usize = 4;
    if !states.iter().any(|s| matches!(s, State::AtMbarrier { .. })) {
        return None;
    }
    let h = block.hopper.borrow();
    let waiting = (0..states.len())
        .filter_map(|t| match states[t] {
            State::AtMbarrier { bar, parity } => Some((t, bar, parity)),
            _ => None,
        })
        .take(REPORT)
        .map(|(t, bar, parity)| {
            let b = h.barriers[&bar];
            let what = format!(
                "parity {parity} of the mbarrier at byte {bar} (in phase {}, {} of {} arrivals and {} transaction bytes still missing)",
                b.phase, b.pending, b.count, b.tx
            );
            (block.thread_dim3(t), h.wait_sites[t].unwrap_or_else(Site::caller), what)
        })
        .collect();
    let others = (0..states.len())
        .filter(|&t| !matches!(states[t], State::AtMbarrier { .. }))
        .take(REPORT)
        .map(|t| {
            let what = match states[t] {
                State::Done => "has exited".to_string(),
                State::AtBarrier(site) => format!("waits at the barrier at {site}"),
                _ => "waits at a warp or warpgroup instruction".to_string(),
            };
            (block.thread_dim3(t), what)
        })
        .collect();
    Some(EmuErrorKind::MbarrierDeadlock { waiting, others })
}

/// The block passed a `sync_threads`: what any thread observed before it (a completed mbarrier
/// phase, and with it the TMA bytes that phase brought), every thread has observed after it.
pub(super) fn barrier_released(block: &Block) {
    let mut h = block.hopper.borrow_mut();
    if !h.active {
        return;
    }
    let mut seen: HashMap<usize, u64> = HashMap::new();
    for observed in &h.observed {
        for (&bar, &phase) in observed {
            let s = seen.entry(bar).or_default();
            *s = (*s).max(phase);
        }
    }
    for observed in &mut h.observed {
        observed.clone_from(&seen);
    }
}

/// Records that thread `t` blocked in `try_wait` at `site` (for the deadlock report).
pub(super) fn note_wait(block: &Block, t: usize, site: Site) {
    block.hopper.borrow_mut().wait_sites[t] = Some(site);
}

/// Thread `t` woke from a wait: it is no longer waiting anywhere.
pub(super) fn woke(block: &Block, t: usize) {
    block.hopper.borrow_mut().wait_sites[t] = None;
}

/// Refuses thread `t`'s `access` to arena bytes `[offset, offset + bytes)` if a TMA copy wrote
/// any of them on a phase `t` has not seen complete; a write also clears the chunks' tags (they
/// now hold the thread's data) and must not hit an operand of a `wgmma` in flight.
pub(super) fn check_shared(
    block: &Block,
    t: usize,
    offset: usize,
    bytes: usize,
    by: impl Fn() -> ThreadAccess,
) -> Result<(), EmuErrorKind> {
    let mut h = block.hopper.borrow_mut();
    if !h.active {
        return Ok(());
    }
    let chunks = offset / CHUNK..(offset + bytes).div_ceil(CHUNK);
    for c in chunks.clone() {
        let Some(tag) = h.tags.get(c).copied().flatten() else {
            continue;
        };
        let seen = h.observed[t].get(&tag.bar).copied().unwrap_or(0);
        if seen <= tag.phase {
            return Err(EmuErrorKind::TmaInFlight {
                offset: block.arena.borrow().in_array((c * CHUNK).max(offset)),
                by: by(),
                copy: block.thread_access(tag.thread, Access::Write, tag.site),
                phase: tag.phase,
            });
        }
    }
    if by().access == Access::Write {
        if let Some((c, wgmma)) = h.wgmma.reader_of(chunks.clone()) {
            return Err(EmuErrorKind::WgmmaOperandInFlight {
                offset: block.arena.borrow().in_array((c * CHUNK).max(offset)),
                by: by(),
                wgmma,
            });
        }
        for c in chunks {
            if let Some(tag) = h.tags.get_mut(c) {
                *tag = None;
            }
        }
    }
    Ok(())
}

fn tma_error(block: &Block, t: usize, site: Site, detail: String) -> EmuErrorKind {
    EmuErrorKind::Tma {
        thread: block.thread_dim3(t),
        site,
        detail,
    }
}

/// Checks that `[addr, addr + bytes)` lies in one live global allocation.
fn global_inside(block: &Block, addr: usize, bytes: usize) -> bool {
    let regions = &block.launch.regions;
    let i = regions.partition_point(|r| r.start <= addr);
    i > 0 && addr + bytes <= regions[i - 1].end
}

/// Reads and validates the tensor map at global address `map`.
fn tensor_map(
    block: &Block,
    t: usize,
    map: usize,
    site: Site,
) -> Result<EmuTensorMap, EmuErrorKind> {
    let size = size_of::<TensorMap>();
    if !map.is_multiple_of(64) || !global_inside(block, map, size) {
        return Err(tma_error(
            block,
            t,
            site,
            format!("the tensor map at {map:#x} is not 64-byte aligned in a global allocation"),
        ));
    }
    // SAFETY: 128 bytes inside a live allocation, 64-byte aligned.
    let raw = unsafe { (map as *const TensorMap).read() };
    let m = EmuTensorMap::decode(&raw).ok_or_else(|| {
        tma_error(
            block,
            t,
            site,
            format!("the 128 bytes at {map:#x} are not a tensor map encoded for the emulator"),
        )
    })?;
    validate_map(&m).map_err(|detail| tma_error(block, t, site, detail))?;
    Ok(m)
}

/// The rules `cuTensorMapEncodeTiled` enforces, for a two-dimensional map (the host checks the
/// same before encoding; the emulator again, in case a kernel got its bytes elsewhere).
pub fn validate_map(m: &EmuTensorMap) -> Result<(), String> {
    let e = u64::from(m.elem_bytes);
    if !matches!(m.elem_bytes, 1 | 2 | 4 | 8) {
        return Err(format!("element size {} bytes: 1, 2, 4 or 8", m.elem_bytes));
    }
    if !m.base.is_multiple_of(16) {
        return Err(format!(
            "global address {:#x} is not 16-byte aligned",
            m.base
        ));
    }
    if m.dims[0] == 0 || m.dims[1] == 0 || m.dims[0] > 1 << 32 || m.dims[1] > 1 << 32 {
        return Err(format!("dimensions {:?}: each from 1 to 2^32", m.dims));
    }
    if !m.row_pitch.is_multiple_of(16) || m.row_pitch < m.dims[0] * e {
        return Err(format!(
            "row pitch {} bytes: a multiple of 16 of at least a row ({} bytes)",
            m.row_pitch,
            m.dims[0] * e
        ));
    }
    let [b0, b1] = m.box_dims;
    if !(1..=256).contains(&b0) || !(1..=256).contains(&b1) {
        return Err(format!("box {b0} x {b1}: each side from 1 to 256 elements"));
    }
    let inner = u64::from(b0) * e;
    if inner % 16 != 0 {
        return Err(format!("box rows of {inner} bytes: a multiple of 16"));
    }
    if m.swizzle == TmaSwizzle::B128 && inner != 128 {
        // The hardware takes rows of up to 128 bytes; the emulator models the full-width case.
        return Err(format!(
            "box rows of {inner} bytes with the 128-byte swizzle: the emulator models rows of exactly 128 bytes"
        ));
    }
    Ok(())
}

/// The 128-byte swizzle (`Swizzle<3, 4, 3>` on byte addresses): bits 4-6 of a `.shared` address
/// XOR bits 7-9, i.e. 16-byte chunk `c` of 128-byte line `r` goes to chunk `c ^ (r % 8)`.
pub(super) const fn swizzle_128b(addr: usize) -> usize {
    addr ^ ((addr >> 3) & 0x70)
}

/// Thread `t` issues a bulk tensor copy.
pub(super) fn tma_load(
    block: &Block,
    t: usize,
    op: TmaLoad,
    site: Site,
) -> Result<(), EmuErrorKind> {
    let m = tensor_map(block, t, op.map, site)?;
    let bar = barrier_offset(block, t, op.bar, site)?;
    let box_bytes = m.box_bytes() as usize;
    let align = if m.swizzle == TmaSwizzle::B128 {
        1024
    } else {
        128
    };
    let dst = block
        .arena
        .borrow()
        .offset_of(op.dst, box_bytes)
        .ok_or_else(|| {
            tma_error(
                block,
                t,
                site,
                format!(
                    "the {box_bytes}-byte box at {:#x} does not fit in one shared allocation",
                    op.dst
                ),
            )
        })?;
    if !dst.is_multiple_of(align) {
        return Err(tma_error(
            block,
            t,
            site,
            format!(
                "destination at .shared address {dst:#x}: a {:?}-swizzled box must start on a {align}-byte boundary",
                m.swizzle
            ),
        ));
    }
    {
        let mut h = block.hopper.borrow_mut();
        h.activate();
        block.leave_fast_path();
        let Some(b) = h.barriers.get(&bar) else {
            drop(h);
            return Err(mbarrier_error(
                block,
                t,
                site,
                format!("the copy's barrier at byte {bar} was never initialised"),
            ));
        };
        let phase = b.phase;
        let chunks = dst / CHUNK..(dst + box_bytes) / CHUNK;
        if let Some((c, wgmma)) = h.wgmma.reader_of(chunks.clone()) {
            drop(h);
            return Err(EmuErrorKind::WgmmaOperandInFlight {
                offset: block.arena.borrow().in_array(c * CHUNK),
                by: block.thread_access(t, Access::Write, site),
                wgmma,
            });
        }
        if h.tags.len() < chunks.end {
            h.tags.resize(chunks.end, None);
        }
        for c in chunks {
            h.tags[c] = Some(TmaTag {
                bar,
                phase,
                thread: t,
                site,
            });
        }
    }
    // Row by row: the part of the row inside the tensor is read, the rest is zeros.
    let e = m.elem_bytes as usize;
    let [b0, b1] = m.box_dims.map(|b| b as usize);
    let row_bytes = b0 * e;
    let mut row = vec![0u8; row_bytes];
    for y in 0..b1 {
        row.fill(0);
        let gy = i64::from(op.coords[1]) + y as i64;
        let x0 = i64::from(op.coords[0]);
        let lo = x0.max(0);
        let hi = (x0 + b0 as i64).min(m.dims[0] as i64);
        if gy >= 0 && (gy as u64) < m.dims[1] && lo < hi {
            let src = m.base as usize + gy as usize * m.row_pitch as usize + lo as usize * e;
            let n = (hi - lo) as usize * e;
            if !global_inside(block, src, n) {
                return Err(EmuErrorKind::OutOfBounds {
                    space: MemorySpace::Global,
                    by: block.thread_access(t, Access::Read, site),
                    addr: src,
                    bytes: n,
                    near: super::nearest_allocation(&block.launch.regions, src, n),
                });
            }
            let at = (lo - x0) as usize * e;
            // SAFETY: checked just above to lie in a live allocation.
            unsafe { std::ptr::copy_nonoverlapping(src as *const u8, row[at..].as_mut_ptr(), n) };
            block.count(MemorySpace::Global, Access::Read, site, t, src, n);
        }
        // The row's 16-byte chunks, each to its (swizzled) place.
        let arena = block.arena.borrow();
        for (i, chunk) in row.chunks_exact(CHUNK).enumerate() {
            let linear = dst + y * row_bytes + i * CHUNK;
            let at = match m.swizzle {
                TmaSwizzle::None => linear,
                TmaSwizzle::B128 => swizzle_128b(linear),
            };
            // SAFETY: inside the box's shared allocation: the swizzle permutes the chunks of
            // each 128-byte line, and the box is whole lines.
            unsafe { std::ptr::copy_nonoverlapping(chunk.as_ptr(), arena.ptr_at(at), CHUNK) };
        }
    }
    block.arena.borrow_mut().mark_async_write(dst, box_bytes);
    block.count(
        MemorySpace::Shared,
        Access::Write,
        site,
        t,
        op.dst,
        box_bytes,
    );
    {
        let mut h = block.hopper.borrow_mut();
        let b = h.barriers.get_mut(&bar).expect("checked above");
        b.tx -= box_bytes as i64;
    }
    try_complete(block, bar);
    Ok(())
}
