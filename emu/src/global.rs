//! Data races on global memory: two threads of one launch touch the same byte, one of them
//! writing, with nothing ordering the two accesses.
//!
//! What orders them (the CUDA memory model without atomics, which the kernels do not use):
//! program order within a thread; `sync_threads` within a block (the shadow's *interval*, one
//! per barrier); `__syncwarp` between the lanes of its mask (`order.rs`). Nothing orders two
//! blocks: they may run in any order, or at the same time, so a byte one block writes may not be
//! touched by any other.
//!
//! Blocks run in parallel, so a shadow shared between them would see accesses in an order that
//! changes from run to run. Instead each block logs its own accesses, and the log is checked once
//! the launch has ended, in block order: the report is the same on every run. The log is kept
//! small by run-length encoding: the accesses of one site that form an arithmetic progression in
//! both address and thread (a coalesced load across threads, one thread's walk along a row) are
//! one [`Run`], so an elementwise kernel logs a few runs per block, not one record per access.
//! The check sweeps the runs in address order; only runs whose address ranges overlap, one of
//! them writing, are compared element by element.

use kernels::cuda::emu::{Access, Site};
use kernels::cuda::warp::WARP_SIZE;

use super::order::WarpOrder;

/// Accesses of one site, `count` of them, element `i` at `start + i * stride` by thread
/// `thread + i * thread_stride`, all in one barrier interval and `__syncwarp` epoch.
#[derive(Clone, Copy, Debug)]
pub(super) struct Run {
    start: usize,
    stride: isize,
    count: u32,
    thread: u32,
    thread_stride: i32,
    bytes: u8,
    access: Access,
    /// An atomic (logged as a write): atomics do not race with each other.
    atomic: bool,
    interval: u32,
    epoch: u32,
    site: Site,
}

impl Run {
    fn new(a: &Logged) -> Self {
        Self {
            start: a.addr,
            stride: 0,
            count: 1,
            thread: a.thread,
            thread_stride: 0,
            bytes: a.bytes,
            access: a.access,
            atomic: a.atomic,
            interval: a.interval,
            epoch: a.epoch,
            site: a.site,
        }
    }

    fn addr(&self, i: u32) -> usize {
        self.start.wrapping_add_signed(self.stride * i as isize)
    }

    fn thread_of(&self, i: u32) -> u32 {
        self.thread
            .wrapping_add_signed(self.thread_stride * i as i32)
    }

    /// Adds `a` if it continues the progression (or repeats the last access exactly, which adds
    /// nothing a race could involve); `false` when it starts a new run.
    fn extend(&mut self, a: &Logged) -> bool {
        if (a.access, a.atomic, a.bytes, a.interval, a.epoch)
            != (
                self.access,
                self.atomic,
                self.bytes,
                self.interval,
                self.epoch,
            )
        {
            return false;
        }
        let last = self.count - 1;
        if a.addr == self.addr(last) && a.thread == self.thread_of(last) {
            return true;
        }
        if self.count == 1 {
            let Ok(thread_stride) = i32::try_from(i64::from(a.thread) - i64::from(self.thread))
            else {
                return false;
            };
            self.stride = a.addr.wrapping_sub(self.start) as isize;
            self.thread_stride = thread_stride;
            self.count = 2;
            return true;
        }
        let continues = a.addr == self.addr(last).wrapping_add_signed(self.stride)
            && a.thread == self.thread_of(last).wrapping_add_signed(self.thread_stride);
        if continues && self.count < u32::MAX {
            self.count += 1;
        }
        continues
    }

    /// The elements in increasing address order: the lowest address, the step, and the element
    /// index of position `p` in that order.
    fn ascending(&self) -> (usize, usize, impl Fn(u32) -> u32 + '_) {
        let reversed = self.stride < 0;
        let low = if reversed {
            self.addr(self.count - 1)
        } else {
            self.start
        };
        let index = move |p: u32| if reversed { self.count - 1 - p } else { p };
        (low, self.stride.unsigned_abs(), index)
    }

    /// `[lowest byte, past the highest)`.
    fn span(&self) -> (usize, usize) {
        let (low, step, _) = self.ascending();
        (
            low,
            low + step * (self.count as usize - 1) + usize::from(self.bytes),
        )
    }

    /// Positions (in ascending order) of the elements that overlap `[a, b)`.
    fn positions_overlapping(&self, a: usize, b: usize) -> std::ops::Range<u32> {
        let (low, step, _) = self.ascending();
        let bytes = usize::from(self.bytes);
        if step == 0 {
            let hit = low < b && low + bytes > a;
            return if hit { 0..self.count } else { 0..0 };
        }
        // Element p covers [low + p * step, low + p * step + bytes).
        let first = (a + 1).saturating_sub(low + bytes).div_ceil(step);
        let Some(past) = b.checked_sub(low).filter(|&d| d > 0) else {
            return 0..0;
        };
        let last = (past - 1) / step;
        let first = first.min(self.count as usize) as u32;
        let end = (last + 1).min(self.count as usize) as u32;
        first..end.max(first)
    }
}

/// One access as the log receives it.
struct Logged {
    addr: usize,
    thread: u32,
    bytes: u8,
    access: Access,
    atomic: bool,
    interval: u32,
    epoch: u32,
    site: Site,
}

/// One block's global accesses, as runs.
#[derive(Default)]
pub(super) struct GlobalLog {
    /// The run each site is extending.
    open: Vec<Run>,
    /// Per site (as `open`), its last closed runs, which stack (see [`Stack`]), not yet in
    /// `closed`; `None` until the site's first run closes.
    stacks: Vec<Option<Stack>>,
    closed: Vec<Run>,
    /// Index in `open` of the last site, tried first.
    last: usize,
}

/// Closed runs of one site that are one thread's walk each, the same walk shifted by `shift`
/// bytes and `thread_shift` threads from one to the next: what a block-stride loop logs, since
/// the emulator runs a block's threads one after the other (thread 0's elements, then thread
/// 1's, ...). Their elements are the same as those of `count` runs across the threads (element
/// `i` of every thread), which is how they are logged when that is fewer runs: the race check
/// compares runs whose spans overlap, and every thread's walk spans the whole row while each
/// cross-thread run spans one slice of it.
struct Stack {
    first: Run,
    runs: u32,
    shift: isize,
    thread_shift: i32,
}

impl Stack {
    fn new(run: Run) -> Self {
        Self {
            first: run,
            runs: 1,
            shift: 0,
            thread_shift: 0,
        }
    }

    /// Run `j` of the stack.
    fn run(&self, j: u32) -> Run {
        Run {
            start: self
                .first
                .start
                .wrapping_add_signed(self.shift * j as isize),
            thread: self
                .first
                .thread
                .wrapping_add_signed(self.thread_shift * j as i32),
            ..self.first
        }
    }

    /// Adds `run` if it is the next of the stack; `false` when it starts a new one.
    fn push(&mut self, run: &Run) -> bool {
        let f = &self.first;
        let same_walk = (run.stride, run.count, run.thread_stride, run.bytes)
            == (f.stride, f.count, f.thread_stride, f.bytes)
            && (run.access, run.atomic, run.interval, run.epoch)
                == (f.access, f.atomic, f.interval, f.epoch)
            && run.thread_stride == 0
            && run.count >= 2;
        if !same_walk || self.runs == u32::MAX {
            return false;
        }
        let shift = run.start.wrapping_sub(f.start) as isize;
        let Ok(thread_shift) = i32::try_from(i64::from(run.thread) - i64::from(f.thread)) else {
            return false;
        };
        if self.runs == 1 {
            if thread_shift == 0 {
                return false;
            }
            (self.shift, self.thread_shift) = (shift, thread_shift);
        } else {
            let next = self.run(self.runs);
            if (run.start, run.thread) != (next.start, next.thread) {
                return false;
            }
        }
        self.runs += 1;
        true
    }

    /// The stack's elements as runs: `runs` walks, or `count` runs across the threads when
    /// those are fewer.
    fn emit(self, into: &mut Vec<Run>) {
        let f = self.first;
        if self.runs < 2 || f.count >= self.runs {
            into.extend((0..self.runs).map(|j| self.run(j)));
            return;
        }
        into.extend((0..f.count).map(|i| Run {
            start: f.addr(i),
            stride: self.shift,
            count: self.runs,
            thread: f.thread,
            thread_stride: self.thread_shift,
            ..f
        }));
    }
}

impl GlobalLog {
    /// Logs thread `thread`'s access, in barrier interval `interval` at `__syncwarp` epoch
    /// `epoch`.
    #[cfg(test)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record(
        &mut self,
        thread: u32,
        addr: usize,
        bytes: usize,
        access: Access,
        site: Site,
        interval: u32,
        epoch: u32,
    ) {
        self.record_as(thread, addr, bytes, (access, false), site, interval, epoch);
    }

    /// [`record`](Self::record), of an atomic when `atomic` (with `access` a write). In line in
    /// `Block::global_check`, on every global access's path.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn record_as(
        &mut self,
        thread: u32,
        addr: usize,
        bytes: usize,
        (access, atomic): (Access, bool),
        site: Site,
        interval: u32,
        epoch: u32,
    ) {
        let a = Logged {
            addr,
            thread,
            bytes: bytes as u8,
            access,
            atomic,
            interval,
            epoch,
            site,
        };
        // The site of the last access, else the one opened after it (a thread's sites come in
        // the same order as the thread before's: `a[i]`, `b[i]`, `c[i]`, then the next
        // thread's), else a search.
        let after = if self.last + 1 < self.open.len() {
            self.last + 1
        } else {
            0
        };
        let i = if self.open.get(self.last).is_some_and(|r| r.site == site) {
            Some(self.last)
        } else if self.open.get(after).is_some_and(|r| r.site == site) {
            Some(after)
        } else {
            self.open.iter().position(|r| r.site == site)
        };
        match i {
            Some(i) => {
                self.last = i;
                if !self.open[i].extend(&a) {
                    let done = std::mem::replace(&mut self.open[i], Run::new(&a));
                    self.close(i, done);
                }
            }
            None => {
                self.last = self.open.len();
                self.open.push(Run::new(&a));
                self.stacks.push(None);
            }
        }
    }

    /// Site `i`'s run `done` has ended: onto the site's stack, or the stack out and a new one.
    fn close(&mut self, i: usize, done: Run) {
        let slot = &mut self.stacks[i];
        if slot.as_mut().is_some_and(|stack| stack.push(&done)) {
            return;
        }
        if let Some(full) = slot.replace(Stack::new(done)) {
            full.emit(&mut self.closed);
        }
    }

    /// Every run, in the order they were closed (deterministic: threads run in a fixed order).
    pub(super) fn finish(mut self) -> Vec<Run> {
        for i in 0..self.open.len() {
            let open = self.open[i];
            self.close(i, open);
            if let Some(stack) = self.stacks[i].take() {
                stack.emit(&mut self.closed);
            }
        }
        self.closed
    }
}

/// What the check needs of one block: its runs, and its `__syncwarp` clocks if it used any.
pub(super) struct BlockAccesses {
    pub runs: Vec<Run>,
    pub order: Option<WarpOrder>,
}

/// One side of a race: the block (its index in launch order), thread, access and site.
#[derive(Clone, Copy, Debug)]
pub(super) struct Side {
    pub block: usize,
    pub thread: u32,
    pub access: Access,
    pub site: Site,
}

/// Two unordered accesses to byte `addr`, one of them a write.
#[derive(Clone, Copy, Debug)]
pub(super) struct GlobalRace {
    pub addr: usize,
    pub first: Side,
    pub second: Side,
}

/// A run, with the block it came from.
#[derive(Clone, Copy)]
struct Item<'a> {
    block: usize,
    run: &'a Run,
    span: (usize, usize),
    /// For a run of two or more elements that do not overlap each other: its step, and its
    /// lowest address modulo the step (where in each period its elements lie). Worked out once
    /// per run, since the sweep compares a run with many others: a block-stride loop gives
    /// every thread of a block a run over the same span.
    lattice: Option<(usize, usize)>,
}

impl<'a> Item<'a> {
    fn new(block: usize, run: &'a Run) -> Self {
        let (low, step, _) = run.ascending();
        let lattice =
            (run.count >= 2 && step >= usize::from(run.bytes)).then(|| (step, low % step));
        Self {
            block,
            run,
            span: run.span(),
            lattice,
        }
    }
}

/// The most elements a run with gaps between its elements may have and still be split into
/// one item per element for the sweep. Two accesses of one site always form a run, whatever lies
/// between them: a scatter (each thread's read-modify-writes at unrelated addresses) logs runs
/// of two elements whose spans reach across the whole buffer, and a sweep over spans would
/// compare each with nearly every other (768 threads x 64 scattered updates of a 3 MB buffer
/// took over a minute). Split, each element spans only its own bytes. Longer runs are real
/// progressions (a warp's strided access, a thread's walk), compared as lattices.
const SPLIT_AT_MOST: u32 = 4;

/// The runs of every block as the sweep compares them, each with its block: a short run with
/// gaps (see [`SPLIT_AT_MOST`]) as one run per element, in element order.
fn swept_runs(blocks: &[BlockAccesses]) -> Vec<(usize, Run)> {
    let mut out = Vec::new();
    for (block, b) in blocks.iter().enumerate() {
        for run in &b.runs {
            let gapped = run.stride.unsigned_abs() > usize::from(run.bytes);
            if gapped && run.count <= SPLIT_AT_MOST {
                out.extend((0..run.count).map(|i| {
                    let element = Run {
                        start: run.addr(i),
                        stride: 0,
                        count: 1,
                        thread: run.thread_of(i),
                        thread_stride: 0,
                        ..*run
                    };
                    (block, element)
                }));
            } else {
                out.push((block, *run));
            }
        }
    }
    out
}

impl GlobalRace {
    /// Whether the two threads are in different blocks or different warps: the pairs a report
    /// shows first. Lanes of one warp racing is often code written for warp-synchronous
    /// execution (a missing `__syncwarp`); threads of different warps or blocks racing is a
    /// missing barrier or a wrong index, the commoner bug and the plainer report.
    fn across_warps(&self) -> bool {
        let warp = |s: &Side| s.thread / WARP_SIZE;
        self.first.block != self.second.block || warp(&self.first) != warp(&self.second)
    }

    /// The order reports list races in: across warps first, then by address.
    fn rank(&self) -> (bool, usize) {
        (!self.across_warps(), self.addr)
    }

    fn sites(&self) -> (Site, Site) {
        (self.first.site, self.second.site)
    }
}

/// The runs of one site the sweep has seen whose spans may still overlap what comes.
struct Active<'a> {
    site: Site,
    writes: Vec<Item<'a>>,
    reads: Vec<Item<'a>>,
}

/// Where `found` holds the race of the pair of sites `(a, b)`, in either order.
fn entry(found: &[GlobalRace], (a, b): (Site, Site)) -> Option<usize> {
    found
        .iter()
        .position(|r| r.sites() == (a, b) || r.sites() == (b, a))
}

/// Compares runs `a` and `b`, keeping their race in `found` if it is their pair of sites'
/// first, or comes before the one kept in [`GlobalRace::rank`]'s order.
fn consider(blocks: &[BlockAccesses], found: &mut Vec<GlobalRace>, a: &Item, b: &Item) {
    let Some(race) = pair_race(blocks, a, b) else {
        return;
    };
    match entry(found, race.sites()) {
        Some(k) if race.rank() < found[k].rank() => found[k] = race,
        Some(_) => {}
        None => found.push(race),
    }
}

/// The racing pairs of the launch, one per pair of instructions (their two sites, in either
/// order), at most `limit`: those across warps or blocks first, then by address (ties: in
/// block, then log order). Each pair of instructions is shown by its own first race in that
/// order. Empty when nothing races.
///
/// A sweep in address order over the runs' spans: a run is compared only with the runs whose
/// spans overlap its own, so the cost grows with the runs and the overlaps between them, not
/// with the square of the runs (short gapped runs are split first: [`SPLIT_AT_MOST`]). A pair
/// of instructions with a race across warps below the sweep's position is settled, and their
/// further runs are not walked: a kernel whose every block writes one row costs no more than
/// a race-free one.
pub(super) fn races(blocks: &[BlockAccesses], limit: usize) -> Vec<GlobalRace> {
    let runs = swept_runs(blocks);
    let mut items: Vec<Item> = runs
        .iter()
        .map(|(block, run)| Item::new(*block, run))
        .collect();
    // Stable: equal starts stay in block and log order.
    items.sort_by_key(|i| i.span.0);
    // One race per pair of sites, in the order found (the sweep's, so the same on every run).
    let mut found: Vec<GlobalRace> = Vec::new();
    // The runs whose span reaches past the current start, by site; reads are compared only
    // with writes. By site, so that a pair of sites already settled skips a whole group unread:
    // a grid whose every block writes one word would otherwise compare each block's run with
    // every block's before it.
    let mut active: Vec<Active> = Vec::new();
    for item in items {
        let lo = item.span.0;
        // Every race found from here on is at `lo` or above.
        let settled = |r: &GlobalRace| r.across_warps() && r.addr <= lo;
        if found.len() >= limit && found.iter().filter(|r| settled(r)).count() >= limit {
            break;
        }
        let site = item.run.site;
        let write = item.run.access == Access::Write;
        for group in &mut active {
            let known = entry(&found, (group.site, site));
            if known.is_some_and(|k| settled(&found[k])) {
                continue;
            }
            group.writes.retain(|w| w.span.1 > lo);
            if write {
                group.reads.retain(|r| r.span.1 > lo);
            }
            let reads = if write { &group.reads[..] } else { &[] };
            for other in group.writes.iter().chain(reads) {
                consider(blocks, &mut found, other, &item);
            }
        }
        if write {
            consider(blocks, &mut found, &item, &item);
        }
        let group = match active.iter().position(|g| g.site == site) {
            Some(g) => &mut active[g],
            None => {
                active.push(Active {
                    site,
                    writes: Vec::new(),
                    reads: Vec::new(),
                });
                active.last_mut().expect("pushed")
            }
        };
        if write {
            group.writes.push(item);
        } else {
            group.reads.push(item);
        }
    }
    // Stable: equal ranks stay in the order found.
    found.sort_by_key(GlobalRace::rank);
    found.truncate(limit);
    found
}

/// Whether element `i` of `a` and element `j` of `b` (which overlap) race.
fn conflict(blocks: &[BlockAccesses], a: &Item, i: u32, b: &Item, j: u32) -> bool {
    if a.run.access == Access::Read && b.run.access == Access::Read || a.run.atomic && b.run.atomic
    {
        return false;
    }
    if a.block != b.block {
        return true;
    }
    let (t, u) = (a.run.thread_of(i), b.run.thread_of(j));
    if t == u || a.run.interval != b.run.interval {
        return false;
    }
    match &blocks[a.block].order {
        None => true,
        Some(order) => !order.ordered(t as usize, a.run.epoch, u as usize, b.run.epoch),
    }
}

/// Whether two runs with the same step never share a byte although their spans overlap: the
/// threads of a block striding through one row, each at its own offset.
#[inline(always)]
fn interleaved(a: &Item, b: &Item) -> bool {
    let (Some((step, residue_a)), Some((step_b, residue_b))) = (a.lattice, b.lattice) else {
        return false;
    };
    if step != step_b {
        return false;
    }
    let (bytes_a, bytes_b) = (usize::from(a.run.bytes), usize::from(b.run.bytes));
    // Where b's elements start within a's period: they miss a's bytes, and a's miss theirs.
    let d = if residue_b >= residue_a {
        residue_b - residue_a
    } else {
        residue_b + step - residue_a
    };
    d >= bytes_a && d + bytes_b <= step
}

/// Whether two runs can race at all, by what the runs say as wholes: not when one block's
/// barrier separates them, not when one thread made both, not when their spans do not overlap
/// or their elements interleave, and a run not with itself when its elements do not overlap
/// each other (a coalesced store: walking it would compare each element with itself only). In
/// line in the sweep, which asks it of many pairs (every two threads of a block-stride loop,
/// every written run with itself) and walks elements only when it says yes.
#[inline(always)]
fn may_race(a: &Item, b: &Item) -> bool {
    let separated = a.block == b.block
        && (a.run.interval != b.run.interval
            || (a.run.thread_stride == 0
                && b.run.thread_stride == 0
                && a.run.thread == b.run.thread));
    let (lo, hi) = (a.span.0.max(b.span.0), a.span.1.min(b.span.1));
    let apart = if std::ptr::eq(a.run, b.run) {
        a.lattice.is_some()
    } else {
        interleaved(a, b)
    };
    !separated && lo < hi && !apart
}

/// The first race between an element of `a` and one of `b` (`a` itself: two of its elements)
/// in the order of [`GlobalRace::rank`]: across warps first, then the lowest byte.
fn pair_race(blocks: &[BlockAccesses], a: &Item, b: &Item) -> Option<GlobalRace> {
    if !may_race(a, b) {
        return None;
    }
    let same = std::ptr::eq(a.run, b.run);
    let (lo, hi) = (a.span.0.max(b.span.0), a.span.1.min(b.span.1));
    // Walk the run with fewer elements in the overlap, looking each one up in the other.
    let (na, nb) = (
        a.run.positions_overlapping(lo, hi).len(),
        b.run.positions_overlapping(lo, hi).len(),
    );
    let (walk, look, swapped) = if na <= nb {
        (a, b, false)
    } else {
        (b, a, true)
    };
    // When both runs' threads are all in one warp of one block, no race is across warps: the
    // first found (the lowest) is the answer, as one across warps is as soon as it is found.
    let one_warp = a.block == b.block && {
        let warps = |it: &Item| {
            let (t0, t1) = (it.run.thread, it.run.thread_of(it.run.count - 1));
            (t0.min(t1) / WARP_SIZE, t0.max(t1) / WARP_SIZE)
        };
        let (wa, wb) = (warps(a), warps(b));
        wa.0 == wa.1 && wb == wa
    };
    let (low, step, index) = walk.run.ascending();
    let mut best: Option<GlobalRace> = None;
    for p in walk.run.positions_overlapping(lo, hi) {
        let start = low + step * p as usize;
        if best.is_some_and(|b| (one_warp || b.across_warps()) && b.addr <= start) {
            break;
        }
        let i = index(p);
        let end = start + usize::from(walk.run.bytes);
        let (look_low, look_step, look_index) = look.run.ascending();
        for q in look.run.positions_overlapping(start, end) {
            let j = look_index(q);
            if same && i == j {
                continue;
            }
            if conflict(blocks, walk, i, look, j) {
                let addr = start.max(look_low + look_step * q as usize);
                let side = |it: &Item, k: u32| Side {
                    block: it.block,
                    thread: it.run.thread_of(k),
                    access: it.run.access,
                    site: it.run.site,
                };
                let (mut first, mut second) = (side(walk, i), side(look, j));
                // Reported in block order, then in log order within a block.
                if (first.block, swapped) > (second.block, false) {
                    std::mem::swap(&mut first, &mut second);
                }
                let race = GlobalRace {
                    addr,
                    first,
                    second,
                };
                if best.is_none_or(|b| race.rank() < b.rank()) {
                    best = Some(race);
                }
                if race.across_warps() {
                    break;
                }
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first_race(blocks: &[BlockAccesses]) -> Option<GlobalRace> {
        races(blocks, 1).into_iter().next()
    }

    fn log(accesses: &[(u32, usize, Access)]) -> Vec<Run> {
        let mut l = GlobalLog::default();
        for &(t, addr, access) in accesses {
            l.record(t, addr, 4, access, Site::caller(), 0, 0);
        }
        l.finish()
    }

    fn block(runs: Vec<Run>) -> BlockAccesses {
        BlockAccesses { runs, order: None }
    }

    #[test]
    fn a_coalesced_access_across_threads_is_one_run() {
        let runs = log(&(0..256)
            .map(|t| (t, 0x1000 + 4 * t as usize, Access::Read))
            .collect::<Vec<_>>());
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].span(), (0x1000, 0x1000 + 1024));
    }

    #[test]
    fn disjoint_writes_and_reads_do_not_race() {
        let w = |t: u32| (t, 0x1000 + 4 * t as usize, Access::Write);
        let a = block(log(&(0..64).map(w).collect::<Vec<_>>()));
        let b = block(log(&(64..128).map(w).collect::<Vec<_>>()));
        assert!(first_race(&[a, b]).is_none());
    }

    #[test]
    fn a_write_and_a_read_of_one_byte_by_two_blocks_race_at_that_byte() {
        let a = block(log(&[
            (0, 0x1000, Access::Write),
            (1, 0x1004, Access::Write),
        ]));
        let b = block(log(&(0..8)
            .map(|t| (t, 0x0ff8 + 4 * t as usize, Access::Read))
            .collect::<Vec<_>>()));
        let race = first_race(&[a, b]).expect("a race");
        assert_eq!(race.addr, 0x1000);
        assert_eq!((race.first.block, race.first.thread), (0, 0));
        assert_eq!((race.second.block, race.second.thread), (1, 2));
    }

    #[test]
    fn two_threads_of_one_block_writing_one_element_race_unless_a_barrier_separates_them() {
        let racy = block(log(&[
            (0, 0x1000, Access::Write),
            (1, 0x1000, Access::Write),
        ]));
        let race = first_race(&[racy]).expect("a race");
        assert_eq!((race.first.thread, race.second.thread), (0, 1));
        let mut l = GlobalLog::default();
        l.record(0, 0x1000, 4, Access::Write, Site::caller(), 0, 0);
        l.record(1, 0x1000, 4, Access::Write, Site::caller(), 1, 0);
        assert!(first_race(&[block(l.finish())]).is_none());
    }

    #[test]
    fn a_run_is_compared_with_itself_only_where_its_elements_overlap() {
        // A coalesced store, every thread its own element: one run, which cannot race with
        // itself (the sweep does not walk it).
        let coalesced = log(&(0..64)
            .map(|t| (t, 0x1000 + 4 * t as usize, Access::Write))
            .collect::<Vec<_>>());
        assert_eq!(coalesced.len(), 1);
        assert!(first_race(&[block(coalesced)]).is_none());
        // Threads two bytes apart storing four bytes each: one run whose neighbours overlap.
        let mut l = GlobalLog::default();
        for t in 0..8 {
            l.record(
                t,
                0x1000 + 2 * t as usize,
                4,
                Access::Write,
                Site::caller(),
                0,
                0,
            );
        }
        let runs = l.finish();
        assert_eq!(runs.len(), 1);
        let race = first_race(&[block(runs)]).expect("a race");
        assert_eq!(race.addr, 0x1002);
        assert_eq!((race.first.thread, race.second.thread), (0, 1));
    }

    #[test]
    fn a_strided_run_is_checked_element_by_element() {
        // Thread t writes 4 bytes at 0x1000 + 8t; another thread reads the gaps only.
        let a = block(log(&(0..32)
            .map(|t| (t, 0x1000 + 8 * t as usize, Access::Write))
            .collect::<Vec<_>>()));
        let b = block(log(&(0..32)
            .map(|t| (t, 0x1004 + 8 * t as usize, Access::Read))
            .collect::<Vec<_>>()));
        assert_eq!(a.runs.len(), 1);
        assert!(first_race(&[a, b]).is_none());
    }

    #[test]
    fn a_block_stride_loop_is_logged_across_threads_and_its_races_still_found() {
        // 64 threads, each writing elements t, t + 64, t + 128, t + 192 of a row (the emulator
        // runs them one after the other): four runs across the threads, not 64 walks.
        let stride_loop = |l: &mut GlobalLog| {
            for t in 0..64 {
                for i in 0..4 {
                    l.record(
                        t,
                        0x1000 + 4 * (t as usize + 64 * i),
                        4,
                        Access::Write,
                        Site::caller(),
                        0,
                        0,
                    );
                }
            }
        };
        let mut l = GlobalLog::default();
        stride_loop(&mut l);
        let runs = l.finish();
        assert_eq!(runs.len(), 4);
        let mut elements: Vec<(usize, u32)> = runs
            .iter()
            .flat_map(|r| (0..r.count).map(move |i| (r.addr(i), r.thread_of(i))))
            .collect();
        elements.sort();
        let want: Vec<(usize, u32)> = (0..256)
            .map(|e| (0x1000 + 4 * e, (e % 64) as u32))
            .collect();
        assert_eq!(elements, want);
        assert!(first_race(&[block(runs)]).is_none());
        // Thread 64 also writes element 70 (thread 6's): the race is found at that byte.
        let mut l = GlobalLog::default();
        stride_loop(&mut l);
        l.record(64, 0x1000 + 4 * 70, 4, Access::Write, Site::caller(), 0, 0);
        let race = first_race(&[block(l.finish())]).expect("a race");
        assert_eq!(race.addr, 0x1000 + 4 * 70);
        let mut threads = [race.first.thread, race.second.thread];
        threads.sort();
        assert_eq!(threads, [6, 64]);
    }

    /// Thread `t` of one block reads and then writes each of its `slots`: a scatter.
    fn scatter(slots: &[Vec<usize>]) -> Vec<Run> {
        let mut l = GlobalLog::default();
        let (read, write) = (Site::caller(), Site::caller());
        for (t, slots) in slots.iter().enumerate() {
            for &slot in slots {
                let addr = 0x10_0000 + 4 * slot;
                l.record(t as u32, addr, 4, Access::Read, read, 0, 0);
                l.record(t as u32, addr, 4, Access::Write, write, 0, 0);
            }
        }
        l.finish()
    }

    #[test]
    fn a_scatter_is_swept_element_by_element_and_its_one_repeated_slot_found() {
        // 256 threads x 64 distinct slots of 786 432 (a 3 MB buffer), in a scrambled order.
        let n = 3 << 18;
        let slot = |k: usize| (k * 40_507 + (k * k) % 7) % n;
        let mut slots: Vec<Vec<usize>> = (0..256)
            .map(|t| (0..64).map(|i| slot(t * 64 + i)).collect())
            .collect();
        let all: std::collections::HashSet<usize> = slots.iter().flatten().copied().collect();
        assert_eq!(all.len(), 256 * 64, "the slots are distinct");
        let runs = scatter(&slots);
        // Two of a thread's accesses at unrelated addresses make a run: split for the sweep.
        assert!(runs.iter().all(|r| r.count <= SPLIT_AT_MOST));
        let swept = swept_runs(&[block(runs.clone())]);
        assert!(swept.iter().all(|(_, r)| r.span().1 - r.span().0 == 4));
        assert!(first_race(&[block(runs)]).is_none());
        // Thread 200 also updates thread 9's slot: the race is at that slot, between them.
        slots[200][30] = slots[9][5];
        let race = first_race(&[block(scatter(&slots))]).expect("a race");
        assert_eq!(race.addr, 0x10_0000 + 4 * slots[9][5]);
        assert_eq!((race.first.thread, race.second.thread), (9, 200));
    }

    #[test]
    fn interleaved_strided_runs_share_no_byte_and_offset_ones_do() {
        // Threads 0 and 1 each walk a row with a stride of two elements.
        let walk = |t: u32, first: usize| {
            let mut l = GlobalLog::default();
            for i in 0..16 {
                l.record(
                    t,
                    0x1000 + 4 * (first + 2 * i),
                    4,
                    Access::Write,
                    Site::caller(),
                    0,
                    0,
                );
            }
            l.finish()
        };
        let (a, b) = (walk(0, 0), walk(1, 1));
        assert!(interleaved(&Item::new(0, &a[0]), &Item::new(0, &b[0])));
        assert!(first_race(&[block([a.clone(), b].concat())]).is_none());
        // Thread 1 starting on thread 0's second element: they share every element but one.
        let c = walk(1, 2);
        assert!(!interleaved(&Item::new(0, &a[0]), &Item::new(0, &c[0])));
        let race = first_race(&[block([a, c].concat())]).expect("a race");
        assert_eq!(race.addr, 0x1000 + 8);
    }

    #[test]
    fn races_across_warps_come_before_lanes_of_one_warp_and_each_pair_of_sites_once() {
        let lanes = Site::caller();
        let warps = Site::caller();
        let blocks = Site::caller();
        let mut l = GlobalLog::default();
        // Lanes 0 and 1 of warp 0 write one word: the race at the lowest address.
        l.record(0, 0x1000, 4, Access::Write, lanes, 0, 0);
        l.record(1, 0x1000, 4, Access::Write, lanes, 0, 0);
        // Thread 2 (warp 0) and thread 40 (warp 1) write one word, higher up.
        l.record(2, 0x2000, 4, Access::Write, warps, 0, 0);
        l.record(40, 0x2000, 4, Access::Write, warps, 0, 0);
        let a = block(l.finish());
        // Two blocks write two words, one pair of sites racing twice: one entry, the lower.
        let row = |t: u32| {
            let mut l = GlobalLog::default();
            l.record(t, 0x3000, 4, Access::Write, blocks, 0, 0);
            l.record(t, 0x3004, 4, Access::Write, blocks, 0, 0);
            block(l.finish())
        };
        let found = races(&[a, row(0), row(1)], crate::REPORTED_RACES);
        let got: Vec<(usize, u32, u32)> = found
            .iter()
            .map(|r| (r.addr, r.first.thread, r.second.thread))
            .collect();
        assert_eq!(
            got,
            [(0x2000, 2, 40), (0x3000, 0, 1), (0x1000, 0, 1)],
            "{found:?}"
        );
        assert_eq!((found[1].first.block, found[1].second.block), (1, 2));
    }

    /// The bug of a kernel that forgot `blockIdx`: every block reads and writes one word. The
    /// pairs of sites settle at the first two blocks, and the sweep skips them from then on (a
    /// sweep that compared each block with every block before took 17 s for 40 000 blocks).
    #[test]
    fn a_grid_whose_every_block_updates_one_word_reports_each_pair_of_sites_once() {
        let (read, write) = (Site::caller(), Site::caller());
        let blocks: Vec<BlockAccesses> = (0..20_000)
            .map(|_| {
                let mut l = GlobalLog::default();
                l.record(0, 0x1000, 4, Access::Read, read, 0, 0);
                l.record(0, 0x1000, 4, Access::Write, write, 0, 0);
                block(l.finish())
            })
            .collect();
        let found = races(&blocks, crate::REPORTED_RACES);
        let got: Vec<(Site, Site, usize, usize)> = found
            .iter()
            .map(|r| (r.first.site, r.second.site, r.first.block, r.second.block))
            .collect();
        assert_eq!(
            got,
            [(write, read, 0, 1), (write, write, 0, 1)],
            "{found:?}"
        );
    }
}
