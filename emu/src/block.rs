//! One block: its threads as coroutines, the scheduler, and the [`Gpu`] they call into.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::rc::Rc;
use std::time::{Duration, Instant};

use corosensei::stack::{DefaultStack, Stack};
use corosensei::{Coroutine, CoroutineResult, Yielder};
use kernels::cuda::emu::{
    self, Access, AsyncCopy, Collective, Gpu, MbarrierOp, Position, SharedArray, Site, TmaLoad,
    WgmmaOp, WgmmaSync,
};

use super::async_copy::{self, AsyncCopies};
use super::error::{
    BenignRace, DivergentBarrier, EmuError, EmuErrorKind, MemorySpace, ThreadAccess, Warning,
};
use super::faults::{self, StackOverflow, ThreadResult};
use super::global::{BlockAccesses, GlobalLog};
use super::hopper::{self, HopperState};
use super::monitor::{self, Slot};
use super::order::WarpOrder;
use super::profile::BlockProfile;
use super::shared::{Race, SharedArena, UninitRead};
use super::{LaunchCounters, Region, warp, wgmma};
use crate::launch::{DeviceLimits, Dim3, LaunchConfig, dim3};

/// How many threads of each kind an error report names.
const REPORT: usize = 4;

/// The thread the shared-memory shadow records every atomic as: one past the most a block has,
/// so that atomics are ordered with each other (one thread's program order) and race with every
/// real thread's plain access between the same barriers. (A thread's own plain access and its
/// atomic on the same byte in one interval are therefore reported too: a rare pattern.)
const ATOMIC_THREAD: u32 = 1024;

/// Everything the blocks of one launch share.
pub(super) struct Launch<'k> {
    pub name: &'static str,
    pub cfg: LaunchConfig,
    /// Live global allocations, sorted by start.
    pub regions: Vec<Region>,
    pub limits: DeviceLimits,
    pub kernel: &'k (dyn Fn() + Sync),
    /// Group accesses into warp-wide requests per site (the profiler).
    pub profile: bool,
    /// Log global accesses for the race check at the end of the launch (`global.rs`).
    pub global_races: bool,
    /// `[start, end)` of global memory whose last store each block keeps (`StoreWatch`).
    pub watch: Option<(usize, usize)>,
    /// Report races on shared memory (off: every recorded access counts as ordered before the
    /// next, so nothing races, and the shadow still finds reads of bytes nobody wrote).
    pub shared_races: bool,
    /// Coroutine stack per simulated thread.
    pub stack_bytes: usize,
    /// How long a thread may run without reaching a barrier, a warp collective or its end.
    pub watchdog: Option<Duration>,
    /// A sampled launch's budget of device calls (the performance model's: a count, so that
    /// whether a sample fits does not depend on this machine's speed), and the calls its threads
    /// made, added up as each one suspends (the launch checks the total at its end).
    pub work_budget: Option<u64>,
    pub work: std::sync::atomic::AtomicU64,
}

impl Launch<'_> {
    /// A sampled launch whose threads made more device calls than its budget fails with an
    /// error that names both counts.
    pub(super) fn check_work_budget(&self, blocks: &super::Blocks) -> Result<(), Box<EmuError>> {
        let Some(budget) = self.work_budget else {
            return Ok(());
        };
        let work = self.work.load(std::sync::atomic::Ordering::Relaxed);
        if work <= budget {
            return Ok(());
        }
        Err(Box::new(EmuError {
            kernel: self.name,
            block: blocks.get(0),
            kind: EmuErrorKind::Resources(format!(
                "the sampled launch made {work} device calls, more than its budget of {budget}"
            )),
        }))
    }
}

/// A finished block: its counters, its profile when profiling, its global accesses when
/// checking for races, its last store to the watched range (thread, site) when watching, its
/// benign shared-memory races, and its barriers met at different instructions.
pub(super) type BlockResult = (
    LaunchCounters,
    Option<BlockProfile>,
    Option<BlockAccesses>,
    Option<(u32, Site)>,
    Vec<BenignRace>,
    Vec<DivergentBarrier>,
);

/// The running thread's store that raced with another thread's store only, in shared memory:
/// benign if it stores the bytes already there. The emulator sees the store before its bytes
/// land (the kernel writes them once the access is checked), so it is judged at the thread's
/// next call that could change or reveal them: its next shared access, its next wait, its end.
/// Until then the block leaves the fast path, so that no shared access skips the judgement.
struct MaybeBenign {
    /// Arena offset and the bytes there before the store.
    offset: usize,
    before: Vec<u8>,
    /// The race, as reported if the bytes differ.
    race: EmuErrorKind,
}

thread_local! {
    /// Coroutine stacks, reused block after block on this OS thread (all of one size).
    static STACKS: RefCell<Vec<DefaultStack>> = const { RefCell::new(Vec::new()) };
    /// Shared-memory arena, reused likewise.
    static ARENA: RefCell<Option<Box<SharedArena>>> = const { RefCell::new(None) };
    /// The last block shape run on this OS thread and each of its threads' `threadIdx`, reused
    /// likewise: a kernel asks for its indices at every index computation (three calls for
    /// `blockIdx.x * blockDim.x + threadIdx.x`), and each answer would be two divisions.
    static INDICES: RefCell<(Dim3, Rc<[Dim3]>)> = RefCell::new((dim3(0, 0, 0), Rc::from([])));
}

/// `threadIdx` of every thread of a block of `shape`, by linear index.
fn thread_indices(shape: Dim3) -> Rc<[Dim3]> {
    INDICES.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.0 != shape {
            let indices = (0..shape.volume()).map(|t| super::index_in(shape, t));
            *cache = (shape, indices.collect());
        }
        Rc::clone(&cache.1)
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    Runnable,
    AtBarrier(Site),
    AtCollective,
    /// Blocked in `mbarrier.try_wait.parity` on the barrier at this arena offset.
    AtMbarrier {
        bar: usize,
        parity: u32,
    },
    Done,
}

/// A lane's half of a warp-collective instruction, waiting for the other lanes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pending {
    pub mask: u32,
    pub op: Collective,
    pub site: Site,
}

/// Why a simulated thread stopped early: carried by unwinding out of the kernel code.
struct Fault(EmuErrorKind);

/// What a thread that executes PTX's `trap` unwinds with (`std::panic::resume_unwind`, which
/// runs no panic hook): reported as [`EmuErrorKind::Trap`] at its site, not as a panic of the
/// interpreter.
pub struct Trapped(pub Site);

/// One simulated thread.
type Thread<'s> = Coroutine<(), (), ThreadResult, &'s mut DefaultStack>;

pub(super) struct Block<'a> {
    pub launch: &'a Launch<'a>,
    pub block: Dim3,
    pub threads: usize,
    /// `threadIdx` of each thread.
    indices: Rc<[Dim3]>,
    current: Cell<usize>,
    yielders: Vec<Cell<*const Yielder<(), ()>>>,
    pub states: RefCell<Vec<State>>,
    pub pending: RefCell<Vec<Option<Pending>>>,
    pub results: RefCell<Vec<[u32; 4]>>,
    pub arena: RefCell<Box<SharedArena>>,
    pub async_copies: RefCell<AsyncCopies>,
    pub hopper: RefCell<HopperState>,
    pub counters: RefCell<LaunchCounters>,
    /// The shared-memory part of the counters, in cells so that the checked access counts
    /// without a borrow; added to `counters` at the block's end.
    traffic: SharedTraffic,
    profile: Option<RefCell<BlockProfile>>,
    /// What `__syncwarp` has ordered between the lanes of each warp.
    pub order: RefCell<WarpOrder>,
    global_log: Option<RefCell<GlobalLog>>,
    /// The block's last store to the launch's watched range: thread and site.
    last_store: Cell<Option<(u32, Site)>>,
    /// A store of the running thread waiting to be judged benign or a race.
    maybe_benign: RefCell<Option<MaybeBenign>>,
    /// The block's benign races, one per pair of sites.
    benign: RefCell<Vec<BenignRace>>,
    /// The block's barriers met at different instructions, one per pair of sites.
    divergent: RefCell<Vec<DivergentBarrier>>,
    /// Whether [`shared_fast`](Self::shared_fast) may take a shared access: no profile, no
    /// `__syncwarp` yet in the block, no Hopper state, no `cp.async` in flight. One flag for the
    /// four, kept by the code that changes them ([`leave_fast_path`](Self::leave_fast_path),
    /// [`refresh_fast_path`](Self::refresh_fast_path)), so that the access reads one byte.
    fast_path: Cell<bool>,
    /// Whether a thread has reached a warp or warpgroup collective since the scheduler last
    /// tried to complete them: only an arrival can complete one (every group that could complete
    /// did at that try), so a round in which none arrived skips the look at every warp.
    arrived: Cell<bool>,
    /// The barrier the whole block last passed (`None` before the first): where the current
    /// barrier interval began, which a race report compares its accesses' lines with.
    last_barrier: Cell<Option<Site>>,
    /// `bar.red`: the threads that arrived at the pending barrier with a true predicate, and
    /// that count at the last release (what each thread reads as it leaves).
    barrier_true: Cell<u32>,
    barrier_popc: Cell<u32>,
    /// The watchdog: device calls of the running thread since it was resumed, and when that
    /// was; the slot (`monitor.rs`) holds the site of its last access, for both halves.
    ticks: Cell<u32>,
    resumed: Cell<Option<Instant>>,
    slot: std::sync::Arc<Slot>,
    /// Set while an asynchronous engine (a TMA copy, a wgmma's operand fetch) moves bytes, which
    /// the profile keeps apart from the load/store units' requests.
    pub engine: Cell<bool>,
}

/// Runs every thread of `block` to completion, or to the first bug.
pub(super) fn run_block(launch: &Launch, block: Dim3) -> Result<BlockResult, Box<EmuError>> {
    let threads = launch.cfg.block.volume() as usize;
    let mut arena = ARENA.with(|a| a.borrow_mut().take()).unwrap_or_default();
    arena.begin_block(launch.cfg.dynamic_shared as usize);
    let blk = Block {
        launch,
        block,
        threads,
        indices: thread_indices(launch.cfg.block),
        current: Cell::new(0),
        yielders: (0..threads).map(|_| Cell::new(std::ptr::null())).collect(),
        states: RefCell::new(vec![State::Runnable; threads]),
        pending: RefCell::new(vec![None; threads]),
        // Sized by the block's first warp collective (`warp.rs`): most blocks of most kernels
        // have none, and zeroing 16 bytes a thread is a cost of its own for small blocks.
        results: RefCell::new(Vec::new()),
        arena: RefCell::new(arena),
        async_copies: RefCell::new(AsyncCopies::new(threads)),
        hopper: RefCell::new(HopperState::new(threads)),
        counters: RefCell::new(LaunchCounters {
            threads: threads as u64,
            ..LaunchCounters::default()
        }),
        traffic: SharedTraffic::default(),
        profile: launch.profile.then(RefCell::default),
        order: RefCell::new(WarpOrder::new(threads)),
        global_log: launch.global_races.then(RefCell::default),
        last_store: Cell::new(None),
        maybe_benign: RefCell::new(None),
        benign: RefCell::new(Vec::new()),
        divergent: RefCell::new(Vec::new()),
        fast_path: Cell::new(!launch.profile),
        arrived: Cell::new(false),
        last_barrier: Cell::new(None),
        barrier_true: Cell::new(0),
        barrier_popc: Cell::new(0),
        ticks: Cell::new(0),
        resumed: Cell::new(None),
        slot: monitor::slot(),
        engine: Cell::new(false),
    };
    if let Some(budget) = launch.watchdog {
        let block_dim = launch.cfg.block;
        blk.slot.begin_block(launch.name, block, block_dim, budget);
    }
    let outcome = STACKS.with(|stacks| {
        let mut stacks = stacks.borrow_mut();
        let page = faults::page_size();
        // corosensei adds the guard page and rounds up to pages.
        let mapped = launch.stack_bytes.next_multiple_of(page) + page;
        if stacks
            .first()
            .is_some_and(|s| s.base().get() - s.limit().get() != mapped)
        {
            stacks.clear();
        }
        while stacks.len() < threads {
            match DefaultStack::new(launch.stack_bytes) {
                Ok(stack) => stacks.push(stack),
                Err(e) => {
                    return Err(EmuErrorKind::Resources(format!(
                        "cannot map {threads} coroutine stacks of {} KiB for the block's simulated threads: {e}",
                        launch.stack_bytes / 1024
                    )));
                }
            }
        }
        faults::install();
        // The guard page at the bottom of each stack, for the overflow handler.
        let guards: Vec<usize> = stacks[..threads].iter().map(|s| s.limit().get()).collect();
        let blk = &blk;
        let mut coroutines: Vec<Thread> = stacks[..threads]
            .iter_mut()
            .enumerate()
            .map(|(t, stack)| {
                let body = move |yielder: &Yielder<(), ()>, ()| {
                    blk.yielders[t].set(yielder);
                    catch_unwind(AssertUnwindSafe(blk.launch.kernel))
                };
                // SAFETY: the coroutine borrows `blk` and a stack of this scope, and is dropped
                // (unwinding it if suspended) before the end of the scope, below.
                unsafe { Coroutine::with_stack_unchecked(stack, body) }
            })
            .collect();
        let outcome = blk.schedule(&mut coroutines, &guards, page);
        emu::leave();
        // Dropping a suspended coroutine unwinds its stack (after an error, the other threads).
        drop(coroutines);
        outcome
    });
    blk.slot.end_block();
    let Block {
        arena,
        counters,
        traffic,
        profile,
        order,
        global_log,
        last_store,
        benign,
        divergent,
        ..
    } = blk;
    let mut counters = counters.into_inner();
    counters.shared_read_bytes += traffic.read_bytes.get();
    counters.shared_write_bytes += traffic.write_bytes.get();
    counters.shared_accesses += traffic.accesses.get();
    ARENA.with(|a| *a.borrow_mut() = Some(arena.into_inner()));
    let order = order.into_inner();
    let accesses = global_log.map(|log| BlockAccesses {
        runs: log.into_inner().finish(),
        // Only a block that used `__syncwarp` needs its clocks to judge its accesses.
        order: order.any_sync().then_some(order),
    });
    outcome
        .map(|()| {
            let profile = profile.map(RefCell::into_inner);
            (
                counters,
                profile,
                accesses,
                last_store.get(),
                benign.into_inner(),
                divergent.into_inner(),
            )
        })
        .map_err(|kind| {
            Box::new(EmuError {
                kernel: launch.name,
                block,
                kind,
            })
        })
}

impl Block<'_> {
    /// `threadIdx` of linear thread `t`.
    pub fn thread_dim3(&self, t: usize) -> Dim3 {
        if t == ATOMIC_THREAD as usize {
            return ThreadAccess::ATOMIC;
        }
        self.indices[t]
    }

    /// Thread `t`'s `access` at `site`, as reports name it.
    pub(super) fn thread_access(&self, t: usize, access: Access, site: Site) -> ThreadAccess {
        ThreadAccess {
            thread: self.thread_dim3(t),
            access,
            site,
        }
    }

    /// Ends the running thread with a bug report.
    pub fn fail(&self, kind: EmuErrorKind) -> ! {
        resume_unwind(Box::new(Fault(kind)))
    }

    /// A device call by the running thread: the emulator has control, so the watchdog looks at
    /// the clock. Only every 1024 calls, which keeps it off the profile: its clock starts at the
    /// first look, so a thread that waits within 1024 calls never reads it.
    #[inline]
    fn tick(&self, site: Option<Site>) {
        if self.tick_due(site) {
            self.watchdog_look();
        }
    }

    /// [`tick`](Self::tick)'s count alone: whether the watchdog is due for a look.
    #[inline(always)]
    fn tick_due(&self, site: Option<Site>) -> bool {
        if let Some(site) = site {
            self.slot.at(site);
        }
        let n = self.ticks.get().wrapping_add(1);
        self.ticks.set(n);
        n.is_multiple_of(1024)
    }

    /// The watchdog's look at the clock: ends the running thread once it has run past the
    /// launch's budget since it was resumed.
    #[inline(never)]
    fn watchdog_look(&self) {
        if let Some(budget) = self.launch.work_budget {
            let others = self.launch.work.load(std::sync::atomic::Ordering::Relaxed);
            if others + u64::from(self.ticks.get()) > budget {
                self.fail(EmuErrorKind::Resources(format!(
                    "the sampled launch made more than its budget of {budget} device calls"
                )));
            }
        }
        if let Some(budget) = self.launch.watchdog {
            match self.resumed.get() {
                None => self.resumed.set(Some(Instant::now())),
                Some(start) if start.elapsed() > budget => self.fail(self.watchdog_kind(budget)),
                Some(_) => {}
            }
        }
    }

    /// The running thread has gone `budget` without reaching a barrier, a collective or its end.
    fn watchdog_kind(&self, budget: Duration) -> EmuErrorKind {
        let running = self.current.get();
        EmuErrorKind::Watchdog {
            thread: self.thread_dim3(running),
            last_site: self.slot.last_site(),
            budget_ms: budget.as_millis() as u64,
            others: self.unfinished(Some(running), "has not run since the last barrier"),
        }
    }

    /// The block has run `budget` though its threads kept waiting: where each was.
    fn block_watchdog_kind(&self, budget: Duration) -> EmuErrorKind {
        EmuErrorKind::BlockWatchdog {
            budget_ms: budget.as_millis() as u64,
            last_barrier: self.last_barrier.get(),
            threads: self.unfinished(None, "is blocked elsewhere"),
        }
    }

    /// The first few threads that have not finished (`but` left out), each with where it waits
    /// (`otherwise` for one that waits at neither a barrier nor a warp instruction).
    fn unfinished(&self, but: Option<usize>, otherwise: &str) -> Vec<(Dim3, String)> {
        let states = self.states.borrow();
        (0..self.threads)
            .filter(|&t| Some(t) != but && states[t] != State::Done)
            .take(REPORT)
            .map(|t| {
                let what = match states[t] {
                    State::AtBarrier(site) => format!("waits at the barrier at {site}"),
                    State::AtCollective => "waits at a warp instruction".to_string(),
                    _ => otherwise.to_string(),
                };
                (self.thread_dim3(t), what)
            })
            .collect()
    }

    fn suspend(&self, state: State) {
        self.judge_store();
        let t = self.current.get();
        self.states.borrow_mut()[t] = state;
        // SAFETY: set by this thread's coroutine on entry; valid while it runs.
        let yielder = unsafe { &*self.yielders[t].get() };
        yielder.suspend(());
    }

    /// Round-robin until every thread is done: run each runnable thread until it blocks, then
    /// complete whatever can complete (warp collectives, the barrier), or report why nothing can.
    fn schedule(
        &self,
        coroutines: &mut [Thread],
        guards: &[usize],
        page: usize,
    ) -> Result<(), EmuErrorKind> {
        // Every thread this OS thread resumes until the block ends is one of this block's
        // (nothing else runs here meanwhile), so the device is installed once, not per resume.
        // SAFETY: `self` outlives the block's threads; `run_block` calls `leave` before it is
        // dropped.
        unsafe { emu::enter(self) };
        let started = Instant::now();
        loop {
            for (t, co) in coroutines.iter_mut().enumerate() {
                if self.states.borrow()[t] != State::Runnable {
                    continue;
                }
                self.current.set(t);
                self.ticks.set(0);
                self.resumed.set(None);
                self.slot.resume(t);
                faults::arm(co.trap_handler(), guards[t], page);
                let resumed = co.resume(());
                self.slot.suspended();
                if self.launch.work_budget.is_some() {
                    let calls = u64::from(self.ticks.get());
                    (self.launch.work).fetch_add(calls, std::sync::atomic::Ordering::Relaxed);
                }
                faults::disarm();
                match resumed {
                    CoroutineResult::Yield(()) => {}
                    CoroutineResult::Return(Ok(())) => {
                        if let Some(kind) = self.judged_store() {
                            return Err(kind);
                        }
                        self.states.borrow_mut()[t] = State::Done;
                        async_copy::finish_thread(self, t)?;
                    }
                    CoroutineResult::Return(Err(payload)) => {
                        return Err(self.panic_kind(t, payload));
                    }
                }
            }
            // Every thread has run until it waits. A thread's own budget restarts at each
            // wait, so a loop around a barrier or a warp instruction would never trip it: the
            // block as a whole gets the same budget.
            if let Some(budget) = self.launch.watchdog
                && started.elapsed() > budget
            {
                return Err(self.block_watchdog_kind(budget));
            }
            if self.arrived.replace(false)
                && (warp::complete_collectives(self)? | wgmma::complete_warpgroups(self)?)
            {
                continue;
            }
            let states = self.states.borrow();
            // A thread earlier in the order may have been woken by an mbarrier phase completing.
            if states.contains(&State::Runnable) {
                continue;
            }
            if states.iter().all(|s| *s == State::Done) {
                return self.end_interval();
            }
            if let Some(kind) = hopper::stuck(self, &states) {
                return Err(kind);
            }
            self.release_barrier(&states)?;
            drop(states);
            self.states.borrow_mut().fill(State::Runnable);
        }
    }

    /// Every thread is blocked and no collective can complete: the barrier releases if every
    /// thread of the block has arrived at it, and anything else is divergence (a deadlock on a
    /// GPU).
    ///
    /// The PTX ISA ("Parallel Synchronization and Communication Instructions: bar, barrier")
    /// counts the arrivals at a barrier by its id, up to its thread count (all the block's threads
    /// when none is given), wherever in the code each comes from: on sm_70 and later that is how
    /// the non-aligned `barrier.sync` is defined, while the aligned `bar.sync`
    /// (`barrier.sync.aligned`) reached at different instructions is undefined, as CUDA C++'s
    /// `__syncthreads()` in divergent code is. The emulator models barrier 0, the block barrier:
    /// it releases once every thread waits at a barrier, whichever instruction, and threads that
    /// did so at different instructions are reported as a warning ([`DivergentBarrier`]). (The
    /// PTX backend gives a non-aligned `barrier.sync` one site per id, so it is never reported.)
    fn release_barrier(&self, states: &[State]) -> Result<(), EmuErrorKind> {
        let first_site = states.iter().find_map(|s| match s {
            State::AtBarrier(site) => Some(*site),
            _ => None,
        });
        let agreed = first_site.filter(|_| states.iter().all(|s| matches!(s, State::AtBarrier(_))));
        if let Some(site) = agreed {
            self.note_divergent(states, site);
            self.last_barrier.set(agreed);
            self.barrier_popc.set(self.barrier_true.replace(0));
            self.counters.borrow_mut().barriers += 1;
            hopper::barrier_released(self);
            return self.end_interval();
        }
        if let Some(kind) = wgmma::stuck(self, states) {
            return Err(kind);
        }
        if let Some(kind) = warp::stuck_collective(self, states) {
            return Err(kind);
        }
        first_site.expect("blocked threads wait at a barrier or a collective");
        let waiting = (0..states.len())
            .filter_map(|t| match states[t] {
                State::AtBarrier(site) => Some((self.thread_dim3(t), site)),
                _ => None,
            })
            .take(REPORT)
            .collect();
        let elsewhere = (0..states.len())
            .filter(|&t| !matches!(states[t], State::AtBarrier(_)))
            .take(REPORT)
            .map(|t| {
                let what = match states[t] {
                    State::Done => "has exited".to_string(),
                    _ => "is blocked elsewhere".to_string(),
                };
                (self.thread_dim3(t), what)
            })
            .collect();
        Err(EmuErrorKind::BarrierDivergence { waiting, elsewhere })
    }

    /// Every thread waits at the barrier, the first at `first`: each other instruction some
    /// thread waits at is a [`DivergentBarrier`], kept once per pair of sites.
    fn note_divergent(&self, states: &[State], first: Site) {
        let mut last = first;
        for (t, state) in states.iter().enumerate() {
            let State::AtBarrier(site) = *state else {
                continue;
            };
            if site == first || site == last {
                continue;
            }
            last = site;
            let finding = DivergentBarrier {
                kernel: self.launch.name,
                block: self.block,
                first: (self.thread_dim3(0), first),
                second: (self.thread_dim3(t), site),
            };
            finding.add_to(&mut self.divergent.borrow_mut());
        }
    }

    /// Closes a barrier interval; a read of shared memory that nobody wrote during it is a bug.
    fn end_interval(&self) -> Result<(), EmuErrorKind> {
        match self.arena.borrow_mut().end_interval() {
            None => Ok(()),
            Some(UninitRead {
                offset,
                thread,
                site,
            }) => Err(EmuErrorKind::UninitializedShared {
                offset,
                by: ThreadAccess {
                    thread: self.thread_dim3(thread as usize),
                    access: Access::Read,
                    site,
                },
            }),
        }
    }

    fn panic_kind(&self, t: usize, payload: Box<dyn Any + Send>) -> EmuErrorKind {
        if payload.is::<StackOverflow>() {
            return EmuErrorKind::StackOverflow {
                thread: self.thread_dim3(t),
                stack_bytes: self.launch.stack_bytes,
            };
        }
        if let Some(Trapped(site)) = payload.downcast_ref::<Trapped>() {
            return EmuErrorKind::Trap {
                thread: self.thread_dim3(t),
                site: *site,
            };
        }
        match payload.downcast::<Fault>() {
            Ok(fault) => fault.0,
            Err(payload) => {
                let message = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "a panic with a non-text payload".into());
                let message = match faults::panic_location() {
                    Some(at) => format!("{message} (at {at})"),
                    None => message,
                };
                EmuErrorKind::Panic {
                    thread: self.thread_dim3(t),
                    message,
                }
            }
        }
    }

    /// Alignment: a GPU faults on an access not aligned to its width. `by` names the access for
    /// the report; it is built only for one (the checks below likewise), which keeps the
    /// divisions of [`Block::thread_dim3`] off the path every access takes.
    #[inline]
    pub(super) fn aligned(
        &self,
        space: MemorySpace,
        addr: usize,
        bytes: usize,
        by: impl FnOnce() -> ThreadAccess,
    ) -> Result<(), EmuErrorKind> {
        if addr.is_multiple_of(width_alignment(bytes)) {
            Ok(())
        } else {
            Err(EmuErrorKind::Misaligned {
                space,
                by: by(),
                addr,
                bytes,
            })
        }
    }

    /// Checks and counts thread `t`'s access to shared memory: bounds, alignment, races, reads
    /// of bytes never written. Used by the thread itself and, for `ldmatrix`, on a lane's behalf.
    ///
    /// Every shared access of every thread comes here, so the path an access that finds nothing
    /// wrong takes is kept short: one borrow of the arena, the bounds, a look at the copies in
    /// flight only when there are any, the shadow, the counters. Reports are built out of line,
    /// and the common access takes [`shared_fast`](Self::shared_fast) instead.
    pub fn shared_check(
        &self,
        t: usize,
        addr: usize,
        bytes: usize,
        access: Access,
        site: Site,
    ) -> Result<(), EmuErrorKind> {
        self.judge_store();
        let by = || self.thread_access(t, access, site);
        let offset = self.shared_offset(addr, bytes, by)?;
        if self.hopper.borrow().active {
            hopper::check_shared(self, t, offset, bytes, by)?;
        }
        if let Err(race) = self.shared_races(t, offset, bytes, access, site, None) {
            self.store_race(t, offset, bytes, access, site, race)?;
        }
        self.count(MemorySpace::Shared, access, site, t, addr, bytes);
        Ok(())
    }

    /// The whole of [`shared_check`](Self::shared_check) for the access nearly every one is,
    /// kept apart so that it compiles to a few dozen instructions: no profile, no copy in
    /// flight, no Hopper state, no `__syncwarp` yet in the block, inside an array, aligned, and
    /// whole words of one history that race with nothing (see [`SharedArena::check_fast`]).
    /// Returns whether it checked and counted the access; `false`, having changed nothing,
    /// sends it to `shared_check`, which finds the same and reports what is wrong.
    #[inline(always)]
    fn shared_fast(&self, t: usize, addr: usize, bytes: usize, access: Access, site: Site) -> bool {
        // (`Gpu::shared_access`, which every call comes through, asserts the flag.)
        if !self.fast_path.get() {
            return false;
        }
        // Aligned to the access's width as a GPU requires; that it is whole aligned words (what
        // the word shadow takes, and all a one-word access needs: the arena starts 16-aligned)
        // `check_fast` sees to.
        if bytes != 4 && !addr.is_multiple_of(width_alignment(bytes)) {
            return false;
        }
        // Not `borrow_mut`, whose panic would be a call on this path: a borrowed arena is a
        // bug the full check reports.
        let Ok(mut arena) = self.arena.try_borrow_mut() else {
            return false;
        };
        let Some(offset) = arena.offset_fast(addr, bytes) else {
            return false;
        };
        let checked = arena.check_fast(offset, bytes, t as u32, access, site);
        if checked {
            // The fast path runs without a profile, so counting is the traffic alone.
            self.traffic.add(access, bytes);
        }
        checked
    }

    /// The read of a read-shared word (see [`SharedArena::read_shared_at`]) on the fast path:
    /// the commonest access of a kernel whose threads all read one tile, checked in a handful
    /// of instructions and the caller's scratch registers.
    #[inline(always)]
    fn read_shared_fast(&self, addr: usize) -> bool {
        let Ok(arena) = self.arena.try_borrow() else {
            return false;
        };
        let shared = arena
            .offset_fast(addr, 4)
            .is_some_and(|offset| arena.read_shared_at(offset));
        if shared {
            self.traffic.add(Access::Read, 4);
        }
        shared
    }

    /// A one-word access on the fast path that is not a read-shared read: the rest of the fast
    /// path, else [`shared_rest`](Self::shared_rest). Out of line, so that its registers are
    /// saved only on its way.
    #[inline(never)]
    fn shared_word(&self, addr: usize, access: Access, site: Site) {
        if !self.shared_fast(self.current.get(), addr, 4, access, site) {
            self.shared_rest(addr, 4, access, site);
        }
    }

    /// The conditions [`fast_path`](Self::fast_path) stands for, read from the state itself.
    fn fast_path_applies(&self) -> bool {
        self.profile.is_none()
            && self.maybe_benign.borrow().is_none()
            && !self.order.borrow().any_sync()
            && !self.hopper.borrow().active
            && !self.async_copies.borrow().any_in_flight()
    }

    /// A `__syncwarp`, a Hopper instruction or a `cp.async` has made the fast path's shortcut
    /// wrong for this block (until [`refresh_fast_path`](Self::refresh_fast_path) says again).
    pub(super) fn leave_fast_path(&self) {
        self.fast_path.set(false);
    }

    /// Re-derives [`fast_path`](Self::fast_path) after a condition may have cleared (the last
    /// `cp.async` in flight landing).
    pub(super) fn refresh_fast_path(&self) {
        self.fast_path.set(self.fast_path_applies());
    }

    /// An access the one-word fast path did not take: the watchdog's look when due, the fast
    /// path for several words, else the full check. Out of line (and reached by a tail call),
    /// so that the fast path saves only the registers it uses.
    #[inline(never)]
    fn shared_rest(&self, addr: usize, bytes: usize, access: Access, site: Site) {
        let t = self.current.get();
        if self.ticks.get().is_multiple_of(1024) {
            self.watchdog_look();
        }
        if bytes != 4 && self.shared_fast(t, addr, bytes, access, site) {
            return;
        }
        if let Err(kind) = self.shared_check(t, addr, bytes, access, site) {
            self.fail(kind);
        }
    }

    /// Records thread `t`'s access to `bytes` bytes at arena `offset` in the race shadow, or
    /// reports the earlier access by another thread in this barrier interval that it races with.
    #[inline(always)]
    pub(super) fn shared_race_check(
        &self,
        t: usize,
        offset: usize,
        bytes: usize,
        access: Access,
        site: Site,
    ) -> Result<(), EmuErrorKind> {
        self.shared_races(t, offset, bytes, access, site, None)
            .map_err(|race| self.race_kind(race, t, access, site))
    }

    /// [`shared_race_check`](Self::shared_race_check)'s record, with thread `ordered` (when
    /// some) taken as ordered before this access, and the race unreported.
    #[inline(always)]
    fn shared_races(
        &self,
        t: usize,
        offset: usize,
        bytes: usize,
        access: Access,
        site: Site,
        ordered: Option<u32>,
    ) -> Result<(), Race> {
        let order = self.order.borrow();
        let epoch = order.epoch(t);
        let mut arena = self.arena.borrow_mut();
        let me = (t as u32, epoch);
        if !self.launch.shared_races {
            return arena.check(offset, bytes, me, access, site, |_, _| true);
        }
        if order.any_sync() || ordered.is_some() {
            let before = |other: u32, e: u32| {
                Some(other) == ordered || order.before(other as usize, e, t, epoch)
            };
            arena.check(offset, bytes, me, access, site, before)
        } else {
            // Before any `__syncwarp` only program order orders, and the shadow never asks
            // about the thread's own accesses: the same rule, with nothing to look up.
            arena.check(offset, bytes, me, access, site, |_, _| false)
        }
    }

    /// Thread `t`'s access raced with `race`: the report, unless it is a store whose only
    /// conflict is another thread's store (not an atomic), which may be benign: then it is
    /// recorded as ordered after that store and judged once its bytes land ([`MaybeBenign`]).
    #[cold]
    #[inline(never)]
    fn store_race(
        &self,
        t: usize,
        offset: usize,
        bytes: usize,
        access: Access,
        site: Site,
        race: Race,
    ) -> Result<(), EmuErrorKind> {
        let stores = access == Access::Write && race.access == Access::Write;
        let kind = self.race_kind(race.clone(), t, access, site);
        if !stores || race.thread == ATOMIC_THREAD {
            return Err(kind);
        }
        if self
            .shared_races(t, offset, bytes, access, site, Some(race.thread))
            .is_err()
        {
            return Err(kind);
        }
        let before = self.arena.borrow().bytes_at(offset, bytes).to_vec();
        *self.maybe_benign.borrow_mut() = Some(MaybeBenign {
            offset,
            before,
            race: kind,
        });
        self.leave_fast_path();
        Ok(())
    }

    /// Judges the running thread's store waiting in [`MaybeBenign`], if any: its bytes have
    /// landed. A benign race is kept for the launch's warnings; a race ends the thread.
    fn judge_store(&self) {
        if let Some(kind) = self.judged_store() {
            self.fail(kind);
        }
    }

    /// [`judge_store`](Self::judge_store)'s verdict: the race when the store changed the bytes.
    fn judged_store(&self) -> Option<EmuErrorKind> {
        let pending = self.maybe_benign.borrow_mut().take()?;
        self.refresh_fast_path();
        let now = self.arena.borrow();
        if now.bytes_at(pending.offset, pending.before.len()) != pending.before {
            return Some(pending.race);
        }
        let EmuErrorKind::SharedRace {
            offset,
            first,
            second,
            ..
        } = pending.race
        else {
            unreachable!("a store's race on shared memory is a SharedRace")
        };
        let race = BenignRace {
            kernel: self.launch.name,
            block: self.block,
            offset,
            first,
            second,
        };
        race.add_to(&mut self.benign.borrow_mut());
        None
    }

    /// The report of `race`, found at thread `t`'s `access` (kept out of the checked path).
    #[cold]
    #[inline(never)]
    fn race_kind(&self, race: Race, t: usize, access: Access, site: Site) -> EmuErrorKind {
        EmuErrorKind::SharedRace {
            offset: race.offset,
            first: ThreadAccess {
                thread: self.thread_dim3(race.thread as usize),
                access: race.access,
                site: race.site,
            },
            second: self.thread_access(t, access, site),
            after_barrier: self.last_barrier.get(),
        }
    }

    /// What every checked shared access (plain or atomic) checks first: alignment, that the
    /// bytes lie in one allocation, and that no `cp.async` still writes them; the arena offset.
    fn shared_offset(
        &self,
        addr: usize,
        bytes: usize,
        by: impl Fn() -> ThreadAccess + Copy,
    ) -> Result<usize, EmuErrorKind> {
        self.aligned(MemorySpace::Shared, addr, bytes, by)?;
        let Some(offset) = self.arena.borrow().offset_of(addr, bytes) else {
            return Err(EmuErrorKind::OutOfBounds {
                space: MemorySpace::Shared,
                by: by(),
                addr,
                bytes,
                near: self.arena.borrow().overrun(addr, bytes),
            });
        };
        if self.async_copies.borrow().any_in_flight() {
            async_copy::check_not_in_flight(self, offset, addr, bytes, by)?;
        }
        Ok(offset)
    }

    /// Thread `t`'s atomic on shared memory: checked as [`shared_check`](Self::shared_check)
    /// checks an access, recorded in the shadow as a write by [`ATOMIC_THREAD`], counted as one
    /// access that reads and writes its bytes.
    fn shared_atomic(
        &self,
        t: usize,
        addr: usize,
        bytes: usize,
        site: Site,
    ) -> Result<(), EmuErrorKind> {
        self.judge_store();
        let by = || self.thread_access(t, Access::Write, site);
        let offset = self.shared_offset(addr, bytes, by)?;
        let order = self.order.borrow();
        let epoch = order.epoch(t);
        // The atomic is ordered after what `__syncwarp` ordered before this thread.
        let before = |other: u32, e: u32| {
            !self.launch.shared_races
                || other != ATOMIC_THREAD
                    && order.any_sync()
                    && order.before(other as usize, e, t, epoch)
        };
        let me = (ATOMIC_THREAD, 0);
        let mut arena = self.arena.borrow_mut();
        // The atomic reads what it replaces, as thread `t`: never written, that is garbage.
        arena.note_atomic_read(offset, bytes, t as u32, site);
        let checked = arena.check(offset, bytes, me, Access::Write, site, before);
        drop(arena);
        drop(order);
        checked
            .map_err(|race| self.race_kind(race, ATOMIC_THREAD as usize, Access::Write, site))?;
        // One access, whose bytes are both read and written.
        self.count(MemorySpace::Shared, Access::Write, site, t, addr, bytes);
        let read = &self.traffic.read_bytes;
        read.set(read.get() + bytes as u64);
        Ok(())
    }

    /// Checks (alignment, bounds), logs for the race check and counts thread `t`'s access to
    /// global memory. Used by the thread itself and, for a `cp.async` completing, on its behalf.
    /// In line in the device call, with the log's record: every global access takes this path.
    #[inline(always)]
    pub(super) fn global_check(
        &self,
        t: usize,
        addr: usize,
        bytes: usize,
        access: Access,
        site: Site,
    ) -> Result<(), EmuErrorKind> {
        self.global_check_as(t, addr, bytes, access, false, site)
    }

    /// [`global_check`](Self::global_check), the access logged as an atomic when `atomic`.
    fn global_check_as(
        &self,
        t: usize,
        addr: usize,
        bytes: usize,
        access: Access,
        atomic: bool,
        site: Site,
    ) -> Result<(), EmuErrorKind> {
        let by = || self.thread_access(t, access, site);
        self.aligned(MemorySpace::Global, addr, bytes, by)?;
        let regions = &self.launch.regions;
        let i = regions.partition_point(|r| r.start <= addr);
        let inside = i > 0 && addr + bytes <= regions[i - 1].end;
        if !inside {
            return Err(EmuErrorKind::OutOfBounds {
                space: MemorySpace::Global,
                by: by(),
                addr,
                bytes,
                near: super::nearest_allocation(regions, addr, bytes),
            });
        }
        if let Some(log) = &self.global_log {
            let interval = self.counters.borrow().barriers as u32;
            let epoch = self.order.borrow().epoch(t);
            log.borrow_mut().record_as(
                t as u32,
                addr,
                bytes,
                (access, atomic),
                site,
                interval,
                epoch,
            );
        }
        if let Some((lo, hi)) = self.launch.watch
            && access == Access::Write
            && addr < hi
            && addr + bytes > lo
        {
            self.last_store.set(Some((t as u32, site)));
        }
        self.count(MemorySpace::Global, access, site, t, addr, bytes);
        Ok(())
    }

    /// Adds an access to the counters, and to the profile when profiling.
    #[inline(always)]
    pub(super) fn count(
        &self,
        space: MemorySpace,
        access: Access,
        site: Site,
        t: usize,
        addr: usize,
        bytes: usize,
    ) {
        self.tally(space, access, bytes);
        if let Some(p) = &self.profile {
            let mut p = p.borrow_mut();
            if self.engine.get() {
                p.record_engine(space, access, addr, bytes);
            } else {
                p.record(space, access, site, t, addr, bytes);
            }
        }
    }

    /// Adds an access to the counters only (what [`count`](Self::count) does without a profile).
    #[inline(always)]
    fn tally(&self, space: MemorySpace, access: Access, bytes: usize) {
        if space == MemorySpace::Shared {
            self.traffic.add(access, bytes);
            return;
        }
        let mut c = self.counters.borrow_mut();
        match access {
            Access::Read => c.global_read_bytes += bytes as u64,
            Access::Write => c.global_write_bytes += bytes as u64,
        }
        c.global_accesses += 1;
    }
}

/// What a block's threads moved through shared memory (see [`LaunchCounters`]).
#[derive(Default)]
struct SharedTraffic {
    read_bytes: Cell<u64>,
    write_bytes: Cell<u64>,
    accesses: Cell<u64>,
}

impl SharedTraffic {
    #[inline(always)]
    fn add(&self, access: Access, bytes: usize) {
        let counter = match access {
            Access::Read => &self.read_bytes,
            Access::Write => &self.write_bytes,
        };
        counter.set(counter.get() + bytes as u64);
        self.accesses.set(self.accesses.get() + 1);
    }
}

/// The alignment a GPU requires of an access of `bytes` bytes: its width, up to 16.
#[inline]
fn width_alignment(bytes: usize) -> usize {
    1 << bytes.trailing_zeros().min(4)
}

impl Gpu for Block<'_> {
    fn position(&self) -> Position {
        self.tick(None);
        Position {
            thread: self.thread_dim3(self.current.get()),
            block: self.block,
            block_dim: self.launch.cfg.block,
            grid_dim: self.launch.cfg.grid,
        }
    }

    fn sync_threads(&self, site: Site) {
        self.suspend(State::AtBarrier(site));
    }

    fn sync_threads_count(&self, site: Site, value: bool) -> u32 {
        self.barrier_true
            .set(self.barrier_true.get() + u32::from(value));
        self.suspend(State::AtBarrier(site));
        // No thread can reach the next release before every thread has left this one.
        self.barrier_popc.get()
    }

    fn warp_collective(&self, mask: u32, op: Collective, site: Site) -> [u32; 4] {
        let t = self.current.get();
        let lane = t % 32;
        if mask & (1 << lane) == 0 {
            self.fail(EmuErrorKind::WarpCollective {
                warp: (t / 32) as u32,
                mask,
                site,
                detail: format!("lane {lane} executes it but is not in its own mask"),
            });
        }
        self.pending.borrow_mut()[t] = Some(Pending { mask, op, site });
        self.arrived.set(true);
        self.suspend(State::AtCollective);
        self.results.borrow()[t]
    }

    fn global_access(&self, addr: usize, bytes: usize, access: Access, site: Site) {
        self.tick(Some(site));
        if let Err(kind) = self.global_check(self.current.get(), addr, bytes, access, site) {
            self.fail(kind);
        }
    }

    fn shared_access(&self, addr: usize, bytes: usize, access: Access, site: Site) {
        // Nearly every access is one word. The read of a read-shared word (a tile all threads
        // read) is checked right here, calling nothing, in the caller's scratch registers (and
        // one saved); any other one-word access leaves by a tail call to the rest of the fast
        // path, and everything else (every bug included) by one to the full check.
        let due = self.tick_due(Some(site));
        debug_assert_eq!(self.fast_path.get(), self.fast_path_applies());
        if bytes == 4 && !due && self.fast_path.get() {
            if access == Access::Read && self.read_shared_fast(addr) {
                return;
            }
            return self.shared_word(addr, access, site);
        }
        self.shared_rest(addr, bytes, access, site);
    }

    fn static_shared(&self, key: usize, bytes: usize, align: usize, array: SharedArray) -> *mut u8 {
        let limit = self.launch.limits.max_shared_mem_per_block as usize;
        let result = self
            .arena
            .borrow_mut()
            .static_ptr(key, bytes, align, limit, array);
        result.unwrap_or_else(|requested| {
            self.fail(EmuErrorKind::SharedMemoryLimit { requested, limit })
        })
    }

    fn dynamic_shared(&self) -> *mut u8 {
        self.arena.borrow().dynamic_ptr()
    }

    fn progress(&self, site: Site) {
        // Called only every few thousand instructions: the clock is read at each call.
        self.slot.at(site);
        self.watchdog_look();
    }

    fn count_flops(&self, n: u64) {
        self.tick(None);
        self.counters.borrow_mut().flops += n;
    }

    fn count_exps(&self, n: u64) {
        self.counters.borrow_mut().exps += n;
    }

    fn async_copy(&self, op: AsyncCopy, site: Site) {
        if let Err(kind) = async_copy::execute(self, self.current.get(), op, site) {
            self.fail(kind);
        }
    }

    fn atomic_access(&self, addr: usize, bytes: usize, shared: bool, site: Site) {
        self.tick(Some(site));
        let t = self.current.get();
        let checked = if shared {
            self.shared_atomic(t, addr, bytes, site)
        } else {
            self.global_check_as(t, addr, bytes, Access::Write, true, site)
                .map(|()| self.counters.borrow_mut().global_read_bytes += bytes as u64)
        };
        if let Err(kind) = checked {
            self.fail(kind);
        }
    }

    fn shared_address(&self, addr: usize, site: Site) -> u32 {
        match self.arena.borrow().window_offset(addr) {
            Some(offset) => offset as u32,
            None => self.fail(EmuErrorKind::OutOfBounds {
                space: MemorySpace::Shared,
                by: self.thread_access(self.current.get(), Access::Read, site),
                addr,
                bytes: 0,
                near: None,
            }),
        }
    }

    fn mbarrier(&self, bar: usize, op: MbarrierOp, site: Site) -> bool {
        let t = self.current.get();
        loop {
            match hopper::mbarrier(self, t, bar, op, site) {
                Ok(true) => return true,
                Ok(false) => {
                    hopper::note_wait(self, t, site);
                    self.suspend(hopper::wait_state(self, bar, op));
                    hopper::woke(self, t);
                }
                Err(kind) => self.fail(kind),
            }
        }
    }

    fn tma_load(&self, op: TmaLoad, site: Site) {
        self.engine.set(true);
        let loaded = hopper::tma_load(self, self.current.get(), op, site);
        self.engine.set(false);
        if let Err(kind) = loaded {
            self.fail(kind);
        }
    }

    fn wgmma(&self, op: WgmmaOp, site: Site) -> u64 {
        let t = self.current.get();
        // A Hopper instruction, like the fence before it: the per-thread Hopper state from now on.
        self.hopper.borrow_mut().activate();
        self.leave_fast_path();
        let mask = u32::MAX;
        let op = Collective::Wgmma(op);
        self.pending.borrow_mut()[t] = Some(Pending { mask, op, site });
        self.arrived.set(true);
        self.suspend(State::AtCollective);
        wgmma::token(self, t)
    }

    fn wgmma_sync(&self, op: WgmmaSync, _site: Site) {
        wgmma::sync(self, self.current.get(), op);
    }

    fn wgmma_read(&self, token: u64, site: Site) {
        if let Err(kind) = wgmma::read(self, self.current.get(), token, site) {
            self.fail(kind);
        }
    }
}
