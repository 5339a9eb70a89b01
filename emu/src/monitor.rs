//! The watchdog's outer half: a thread that watches the simulated threads from outside.
//!
//! The inner half ([`Block::tick`](super::block::Block)) looks at the clock at device calls, so
//! it cannot see a source kernel that spins in pure arithmetic (`while x != 0 { x += 2 }`): that
//! loop is native host code that never calls into the emulator. Nothing can end such a loop
//! soundly from outside, short of ending the process: unwinding it from a signal handler would
//! abandon whatever lock or allocation the interrupted code held.
//!
//! So every OS thread that runs blocks publishes, in a [`Slot`] of plain atomics, which
//! simulated thread it is running (a counter that is odd while one runs and changes at every
//! resume and return) and where that thread's last device call was. One monitor thread per
//! process wakes every [`PERIOD`]; a slot whose counter has not moved for the launch's budget
//! plus a grace (long enough for the inner half to have ended the launch with an error if it
//! could) is a thread that runs native code without end. The monitor prints the kernel, block,
//! thread and last site, and ends the process with [`WATCHDOG_EXIT_CODE`]: a hang becomes an
//! error that names its kernel, in `cargo xtask run` (whose cases run in child processes) as in
//! a test.
//!
//! The cost on the emulator's paths: two stores per resume of a simulated thread and one per
//! device call with a site, all to this OS thread's own slot.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use kernels::cuda::emu::Site;

use crate::launch::Dim3;

/// The exit status of a process the monitor ended.
pub const WATCHDOG_EXIT_CODE: i32 = 3;

/// How often the monitor looks.
const PERIOD: Duration = Duration::from_millis(100);

/// What one OS thread running blocks publishes for the monitor.
#[derive(Default)]
pub(super) struct Slot {
    /// Odd while a simulated thread runs on this OS thread; moves at every resume and return.
    /// Written only by its OS thread (so a load and a store, no read-modify-write).
    seq: AtomicU64,
    /// The running simulated thread, linear in its block.
    thread: AtomicU64,
    /// Its last device call's [`Site`] ([`Site::to_word`]), 0 for none since it was resumed.
    last_site: AtomicUsize,
    /// The block being run: written once per block, read when the monitor reports.
    block: Mutex<Option<BlockInfo>>,
}

/// The block an OS thread is running, as the monitor's report names it.
#[derive(Clone, Copy)]
struct BlockInfo {
    kernel: &'static str,
    block: Dim3,
    block_dim: Dim3,
    budget: Duration,
}

impl Slot {
    /// The block `block` of `kernel` starts on this OS thread, with watchdog `budget`.
    pub(super) fn begin_block(
        &self,
        kernel: &'static str,
        block: Dim3,
        block_dim: Dim3,
        budget: Duration,
    ) {
        *self.block.lock().unwrap() = Some(BlockInfo {
            kernel,
            block,
            block_dim,
            budget,
        });
        start_monitor();
    }

    /// The block ended: nothing here to watch.
    pub(super) fn end_block(&self) {
        *self.block.lock().unwrap() = None;
    }

    /// Simulated thread `t` is about to run.
    #[inline]
    pub(super) fn resume(&self, t: usize) {
        self.thread.store(t as u64, Ordering::Relaxed);
        self.last_site.store(0, Ordering::Relaxed);
        self.seq
            .store(self.seq.load(Ordering::Relaxed) | 1, Ordering::Release);
    }

    /// The running simulated thread stopped (waits, ended or failed).
    #[inline]
    pub(super) fn suspended(&self) {
        self.seq
            .store(self.seq.load(Ordering::Relaxed) + 1, Ordering::Release);
    }

    /// The running thread made a device call at `site`.
    #[inline(always)]
    pub(super) fn at(&self, site: Site) {
        self.last_site.store(site.to_word(), Ordering::Relaxed);
    }

    /// The running thread's last device call with a site, since it was resumed.
    pub(super) fn last_site(&self) -> Option<Site> {
        // SAFETY: only `at` stores a nonzero word, from a `Site`.
        unsafe { Site::from_word(self.last_site.load(Ordering::Relaxed)) }
    }
}

/// Every OS thread's slot (a slot outlives its thread only until the monitor's next look).
static SLOTS: Mutex<Vec<Arc<Slot>>> = Mutex::new(Vec::new());

thread_local! {
    static SLOT: Arc<Slot> = {
        let slot = Arc::new(Slot::default());
        SLOTS.lock().unwrap().push(slot.clone());
        slot
    };
}

/// This OS thread's slot.
pub(super) fn slot() -> Arc<Slot> {
    SLOT.with(Arc::clone)
}

/// Starts the monitor thread, once per process.
fn start_monitor() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        std::thread::Builder::new()
            .name("emulator watchdog".into())
            .spawn(watch)
            .expect("the watchdog's thread starts");
    });
}

/// The budget plus the grace the inner half of the watchdog gets to end the launch first.
fn deadline(budget: Duration) -> Duration {
    budget + (budget / 2).max(Duration::from_secs(1))
}

/// The monitor: per slot, the counter it last saw and since when.
fn watch() {
    let mut seen: Vec<(std::sync::Weak<Slot>, u64, Instant)> = Vec::new();
    loop {
        std::thread::sleep(PERIOD);
        let slots: Vec<Arc<Slot>> = {
            let mut all = SLOTS.lock().unwrap();
            // A slot only the registry holds belongs to an OS thread that has ended.
            all.retain(|s| Arc::strong_count(s) > 1);
            all.clone()
        };
        let now = Instant::now();
        seen.retain(|(w, ..)| w.strong_count() > 0);
        for slot in &slots {
            let seq = slot.seq.load(Ordering::Acquire);
            let entry = seen
                .iter_mut()
                .find(|(w, ..)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(slot)));
            let since = match entry {
                Some((_, last, since)) if *last == seq => *since,
                Some(entry) => {
                    (entry.1, entry.2) = (seq, now);
                    now
                }
                None => {
                    seen.push((Arc::downgrade(slot), seq, now));
                    now
                }
            };
            if seq % 2 == 0 {
                continue;
            }
            let Some(info) = *slot.block.lock().unwrap() else {
                continue;
            };
            if info.budget.is_zero() || now - since < deadline(info.budget) {
                continue;
            }
            // Still the same simulated thread, still running: end the process.
            if slot.seq.load(Ordering::Acquire) == seq {
                stop(slot, &info, now - since);
            }
        }
    }
}

/// Reports the thread that `slot` has run for `ran` without a device call the emulator could
/// stop it at, and ends the process.
fn stop(slot: &Slot, info: &BlockInfo, ran: Duration) -> ! {
    let t = slot.thread.load(Ordering::Relaxed);
    let thread = super::index_in(info.block_dim, t);
    let d = |v: Dim3| format!("({}, {}, {})", v.x, v.y, v.z);
    let site = match slot.last_site() {
        Some(site) => format!("its last device call was at {site}"),
        None => "it made no device call since it last waited".to_string(),
    };
    eprintln!(
        "error: kernel `{}`, block {}, thread {} has run for {:.1} s without reaching a barrier, a warp instruction or its end, and without a device call where the emulator could stop it (a loop of pure arithmetic that never ends?); {site}. The emulator cannot end native code from outside, so it ends the process (exit status {WATCHDOG_EXIT_CODE}); the budget is {} in seconds ({:.1} s here).",
        info.kernel,
        d(info.block),
        d(thread),
        ran.as_secs_f64(),
        super::WATCHDOG_VAR,
        info.budget.as_secs_f64(),
    );
    std::process::exit(WATCHDOG_EXIT_CODE)
}
