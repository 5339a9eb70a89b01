//! The CPU emulator: runs the kernels' own source with a GPU's execution model.
//!
//! - **Blocks** run independently, spread over the machine's cores with rayon, exactly as a GPU
//!   spreads them over SMs: nothing may depend on their order.
//! - **Threads** of a block run as stackful coroutines on one OS thread, in a fixed round-robin
//!   order. A thread runs until it reaches a barrier or a warp-collective instruction, then the
//!   next thread runs. `sync_threads` releases when every thread of the block waits at the same
//!   barrier; a shuffle, `ldmatrix` or `mma` completes when every lane of its mask has arrived.
//!   Because the order is fixed, a run gives the same result every time (docs/emulator.md says
//!   why coroutines rather than OS threads).
//! - **Memory**: global memory is host memory ([`Allocation`], which the runtime's device
//!   buffers hold); every access is checked against the live allocations and counted. Shared memory is a per-block
//!   arena with a shadow that records, per 4-byte word (per byte where a narrower access split
//!   the word), who wrote and read it since the last barrier.
//!   `cp.async` copies stay in flight, per thread and per commit group, until the thread waits
//!   for them (`async_copy.rs`); their destination bytes may not be touched until then.
//!
//! Bugs are reported as an [`EmuError`] naming the kernel, block, thread(s) and address or lane:
//! out-of-bounds or misaligned accesses, data races on shared memory (per barrier interval) and on
//! global memory (logged per block, checked at the end of the launch: `global.rs`), reads of
//! never-written shared memory, barrier divergence, warp collectives that not every lane of the
//! mask executes, a thread that runs past the watchdog's budget without waiting, and a thread that
//! overflows its stack (`faults.rs`).
//!
//! The crate knows nothing of the runtime above it or of PTX: it takes a launch (a kernel
//! function, a [`LaunchConfig`], the device's [`DeviceLimits`], the launch's [`LaunchOptions`])
//! and returns what it counted or the bug it found. The PTX interpreter (crate `ptx`) runs on
//! its scheduler; the performance model (crate `perf`) reads its samples ([`sample`]).

mod async_copy;
mod block;
mod error;
mod faults;
pub mod fragments;
mod global;
mod hopper;
pub mod launch;
mod launch_error;
pub mod machine_code;
mod memory;
mod monitor;
mod observed;
mod order;
mod profile;
pub mod sample;
mod shared;
mod warp;
mod wgmma;

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use kernels::cuda::emu::Site;
use rayon::prelude::*;

use error::Warning;

pub use block::Trapped;
pub use error::{
    BenignRace, DivergentBarrier, EmuError, EmuErrorKind, MemorySpace, Overrun, RacingPair,
    ThreadAccess,
};
pub use hopper::validate_map;
pub use launch::{DeviceLimits, Dim3, LaunchConfig, dim3};
pub use launch_error::{Error, Result};
pub use memory::Allocation;
pub use monitor::WATCHDOG_EXIT_CODE;
pub use observed::Observed;
pub use profile::{Profile, SiteStats};
pub use wgmma::Descriptor;

/// Bytes of a block's shared window: every generic address from the window's base
/// ([`kernels::cuda::emu::Gpu::dynamic_shared`]) up to this many bytes past it is shared memory.
pub const SHARED_WINDOW: usize = shared::CAPACITY;

/// What one launch did, counted access by access.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LaunchCounters {
    /// Bytes loaded from global memory.
    pub global_read_bytes: u64,
    /// Bytes stored to global memory.
    pub global_write_bytes: u64,
    /// Bytes loaded from shared memory (including by `ldmatrix`).
    pub shared_read_bytes: u64,
    /// Bytes stored to shared memory.
    pub shared_write_bytes: u64,
    /// Floating-point operations the kernel marked with `count_flops` (an `mma` counts its
    /// 2 * 16 * 8 * 16 itself).
    pub flops: u64,
    /// The part of `flops` done by warp-level `mma.sync` (tensor cores at the rate `mma.sync`
    /// reaches).
    pub mma_flops: u64,
    /// The part of `flops` done by warpgroup `wgmma` (Hopper's tensor-core instruction).
    pub wgmma_flops: u64,
    /// Special-function exponentials (`ex2.approx`) the source backend's kernels took (the PTX
    /// backend counts them per instruction in its mix instead).
    pub exps: u64,
    /// Block-wide barriers completed, summed over blocks.
    pub barriers: u64,
    /// Warp-collective instructions completed (per warp, not per lane).
    pub warp_collectives: u64,
    /// Simulated GPU threads run (the launch's threads per block times its blocks).
    pub threads: u64,
    /// Checked accesses to global memory (each load or store of one thread, any width).
    pub global_accesses: u64,
    /// Checked accesses to shared memory (an `ldmatrix` counts one per row a lane supplies).
    pub shared_accesses: u64,
}

impl LaunchCounters {
    /// Adds `other`'s counts to these (a launch's blocks, or the launches of one operation).
    pub fn add(&mut self, other: &Self) {
        *self = self.zip_with(other, |a, b| a + b);
    }

    /// Every count `f(self's, other's)`.
    pub fn zip_with(&self, other: &Self, f: impl Fn(u64, u64) -> u64) -> Self {
        Self {
            global_read_bytes: f(self.global_read_bytes, other.global_read_bytes),
            global_write_bytes: f(self.global_write_bytes, other.global_write_bytes),
            shared_read_bytes: f(self.shared_read_bytes, other.shared_read_bytes),
            shared_write_bytes: f(self.shared_write_bytes, other.shared_write_bytes),
            flops: f(self.flops, other.flops),
            mma_flops: f(self.mma_flops, other.mma_flops),
            wgmma_flops: f(self.wgmma_flops, other.wgmma_flops),
            exps: f(self.exps, other.exps),
            barriers: f(self.barriers, other.barriers),
            warp_collectives: f(self.warp_collectives, other.warp_collectives),
            threads: f(self.threads, other.threads),
            global_accesses: f(self.global_accesses, other.global_accesses),
            shared_accesses: f(self.shared_accesses, other.shared_accesses),
        }
    }
}

/// How many OS threads run blocks: rayon's pool, one per core unless `RAYON_NUM_THREADS` says
/// otherwise.
pub fn os_threads() -> usize {
    rayon::current_num_threads()
}

/// Turns the global-memory race check off (`off`) or on (`on`, the default) for every emulator
/// made afterwards, as its default; [`LaunchOptions::global_races`] does the same for one launch.
pub const GLOBAL_RACES_VAR: &str = "KERNELS_EMU_GLOBAL_RACES";

/// Turns the shared-memory race check off (`off`) or on (`on`, the default) for every emulator
/// made afterwards, as its default; [`LaunchOptions::shared_races`] does the same for one launch.
/// Off, no access
/// to shared memory races with another (reads of bytes nobody wrote are still reported): for a
/// kernel whose races are deliberate, to see its numbers.
pub const SHARED_RACES_VAR: &str = "KERNELS_EMU_SHARED_RACES";

/// The most racing pairs of instructions a global race report lists (see
/// [`EmuErrorKind::GlobalRace`]): enough to see a pattern, few enough to read.
pub const REPORTED_RACES: usize = 8;

/// Seconds a simulated thread may run without reaching a barrier, a warp collective or its end
/// before the launch ends with [`EmuErrorKind::Watchdog`], and a block may run in all (a loop
/// around a barrier restarts every thread's count at each wait) before it ends with
/// [`EmuErrorKind::BlockWatchdog`]; `0` turns the watchdog off. Default
/// [`DEFAULT_WATCHDOG`]. The emulator regains control at device calls (memory accesses, index
/// registers, `count_flops`; every few thousand instructions on the PTX backend); a source
/// kernel's loop that makes none is native code that nothing can stop soundly, so past the
/// budget and a grace the watchdog's monitor names it and ends the process with
/// [`WATCHDOG_EXIT_CODE`] (`monitor.rs`).
pub const WATCHDOG_VAR: &str = "KERNELS_EMU_WATCHDOG_S";
/// Generous: the longest legitimate stretch between two barriers in the suite takes well under
/// a second.
pub const DEFAULT_WATCHDOG: Duration = Duration::from_secs(60);

/// Bytes of stack a GPU gives each thread of a kernel whose calls recurse: ptxas cannot size
/// the stack of a call graph with a cycle (it warns "Stack size for entry function ... cannot be
/// statically determined"), so the thread has what `cudaLimitStackSize` says, 1 KiB unless the
/// program's `cudaDeviceSetLimit` raised it; deeper, the GPU faults. The PTX backend counts each
/// frame's `.local` bytes (ptxas's frames also save registers, so a GPU fills its stack sooner).
/// Default [`DEFAULT_GPU_STACK_BYTES`].
pub const GPU_STACK_VAR: &str = "KERNELS_EMU_GPU_STACK_B";
/// `cudaLimitStackSize`'s default.
pub const DEFAULT_GPU_STACK_BYTES: u64 = 1024;
/// The largest value [`GPU_STACK_VAR`] takes: a bound on the setting, not a device's figure.
const MAX_GPU_STACK_BYTES: u64 = 512 * 1024;

/// KiB of coroutine stack per simulated thread. Kernels keep their registers in locals, so this
/// bounds how large a per-thread array (an attention row's accumulator, say) can be; the default,
/// [`DEFAULT_STACK_BYTES`], is far above any real kernel's register budget and costs only address
/// space until touched. A thread that overflows it is reported as [`EmuErrorKind::StackOverflow`].
pub const STACK_VAR: &str = "KERNELS_EMU_STACK_KIB";
/// 256 KiB.
pub const DEFAULT_STACK_BYTES: usize = 256 * 1024;

/// The largest [`STACK_VAR`] accepted: 64 MiB per simulated thread (a 1024-thread block maps
/// 64 GiB of address space); a larger value is a typo, not a kernel's need.
const MAX_STACK_KIB: u64 = 64 * 1024;
/// The largest [`WATCHDOG_VAR`] accepted: a day (a larger one is as good as none: use `0`).
const MAX_WATCHDOG_S: u64 = 24 * 60 * 60;

/// The value of environment variable `var` as a whole number in `accepted`, `default` when
/// unset, or the error that names the variable and what it takes (`what`: the unit and the
/// meaning of the accepted range, for the message).
fn env_number(
    var: &str,
    default: u64,
    accepted: std::ops::RangeInclusive<u64>,
    what: &str,
) -> Result<u64, String> {
    match std::env::var(var).as_deref() {
        Err(std::env::VarError::NotPresent) | Ok("") => Ok(default),
        Err(std::env::VarError::NotUnicode(v)) => Err(format!(
            "{var}={}: not UTF-8; expected a whole number from {} to {} ({what}; default {default})",
            v.to_string_lossy().escape_debug(),
            accepted.start(),
            accepted.end()
        )),
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|n| accepted.contains(n))
            .ok_or_else(|| {
                format!(
                    "{var}={v}: expected a whole number from {} to {} ({what}; default {default})",
                    accepted.start(),
                    accepted.end()
                )
            }),
    }
}

/// The value of the on/off environment variable `var`, `default` when unset, or the error that
/// names it: a mistyped setting should not silently mean the default.
fn env_switch(var: &str, default: bool) -> Result<bool, String> {
    match std::env::var(var).as_deref() {
        Err(std::env::VarError::NotPresent) | Ok("") => Ok(default),
        Err(std::env::VarError::NotUnicode(v)) => Err(format!(
            "{var}={}: not UTF-8; expected on or off (or 1/0, true/false)",
            v.to_string_lossy().escape_debug()
        )),
        Ok("on" | "1" | "true") => Ok(true),
        Ok("off" | "0" | "false") => Ok(false),
        Ok(other) => Err(format!(
            "{var}={other}: expected on or off (or 1/0, true/false)"
        )),
    }
}

/// This process's resident memory (`/proc/self/statm`), in bytes.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages.checked_mul(u64::try_from(page).ok()?)
}

/// `MemAvailable` from `/proc/meminfo`, in bytes.
fn host_available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Bytes of one global allocation whose stores the following launches record, to say which
/// thread and line last wrote a wrong output ([`LaunchOptions::watch`]). The allocation is
/// named by its order (the emulator's count of buffers registered before it), so that a rerun of
/// a check on a fresh emulator, which allocates in the same order, watches the same buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreWatch {
    pub allocation: u64,
    pub offset: usize,
    pub bytes: usize,
}

/// The last store to a watched range: who made it, and at which line.
#[derive(Clone, Copy, Debug)]
pub struct LastStore {
    pub kernel: &'static str,
    pub block: Dim3,
    pub thread: Dim3,
    pub site: kernels::cuda::emu::Site,
}

impl std::fmt::Display for LastStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "last written by `{}` block {} thread {} at {}",
            self.kernel,
            error::d(self.block),
            error::d(self.thread),
            self.site
        )
    }
}

/// Which blocks a sampled launch runs, and what stops it ([`LaunchOptions::sampling`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sampling {
    /// At most the first this many blocks of [`sample::plan`] (at least one is run);
    /// [`sample::EVERY_BLOCK`]: every block of the grid.
    pub blocks: usize,
    /// Stops a sampled launch whose blocks make more device calls (accesses, barriers,
    /// collectives) than this, with an error saying so; the calls it made are in
    /// [`sample::SampledLaunch::work`].
    pub budget: Option<u64>,
    /// Launches of this kernel run no block: their samples keep the launch's configuration and
    /// allocations with no block, for a caller that has that launch's counts from elsewhere
    /// (`SampledLaunch::extended`) and needs the other launches of the same sequence at their
    /// full size. The outputs such a launch would write stay as they were.
    pub skip: Option<&'static str>,
}

impl Sampling {
    /// The blocks a launch runs, in the order their results are read: none for a skipped
    /// kernel, the first [`Sampling::blocks`] of [`sample::plan`] for a sampled one, else every
    /// block of the grid in launch order.
    fn blocks_of(sampling: Option<Sampling>, name: &str, grid: Dim3) -> Blocks {
        match sampling {
            Some(s) if s.skip == Some(name) => Blocks::List(Vec::new()),
            Some(s) if s.blocks != sample::EVERY_BLOCK => {
                let mut plan = sample::plan(grid);
                plan.truncate(s.blocks.max(1));
                Blocks::List(plan)
            }
            _ => Blocks::Grid(grid),
        }
    }
}

/// The most threads a launch may have for the emulator to run every block of it: about 2^30,
/// some minutes at the few million simulated threads a second that two cores run of a small
/// kernel. A larger grid is refused before any block runs, never listed or allocated whole: its
/// checks need few of its blocks, so the caller runs a smaller grid or samples it
/// ([`LaunchOptions::sampling`]).
pub const MAX_WHOLE_GRID_THREADS: u64 = 1 << 30;

/// The threads of a launch of `cfg`, if the emulator runs that many whole; else, as the error,
/// their count past [`MAX_WHOLE_GRID_THREADS`] (up to 2^95, so in 128 bits).
pub fn threads_run_whole(cfg: &LaunchConfig) -> std::result::Result<u64, u128> {
    let threads = u128::from(cfg.grid.volume()) * u128::from(cfg.block.volume());
    u64::try_from(threads)
        .ok()
        .filter(|&t| t <= MAX_WHOLE_GRID_THREADS)
        .ok_or(threads)
}

/// How many blocks run between two folds of their results: a launch's memory grows with the
/// blocks it has folded (their race logs), not with every block's result held at once.
const BLOCKS_PER_ROUND: u64 = 4096;

/// The blocks a launch runs: every block of a grid in launch order (never listed: a legal grid
/// has up to 2^63 blocks), or a list (a sampled launch's plan).
enum Blocks {
    Grid(Dim3),
    List(Vec<Dim3>),
}

impl Blocks {
    fn len(&self) -> u64 {
        match self {
            Blocks::Grid(grid) => grid.volume(),
            Blocks::List(list) => list.len() as u64,
        }
    }

    /// The `i`-th block run.
    fn get(&self, i: u64) -> Dim3 {
        match self {
            Blocks::Grid(grid) => index_in(*grid, i),
            Blocks::List(list) => list[i as usize],
        }
    }

    /// The blocks of one round, `BLOCKS_PER_ROUND` from the `round`-th on.
    fn round(&self, round: u64) -> Vec<Dim3> {
        let start = round * BLOCKS_PER_ROUND;
        (start..self.len().min(start + BLOCKS_PER_ROUND))
            .map(|i| self.get(i))
            .collect()
    }
}

/// How one launch runs: handed to [`Emulator::launch_with`] rather than set on the emulator
/// around a launch, so that what a launch checks and records is read at its call. The
/// defaults ([`Emulator::defaults`]) come from the environment variables read when the
/// emulator was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchOptions {
    /// `Some`: a sampled launch. It runs only the blocks of [`sample::plan`] (a few of a
    /// full-size grid, every check on, profiled) and keeps, per block, its counters and traffic
    /// in what the launch observed ([`Observed::samples`]); its counters are those blocks' alone, so outputs and byte
    /// counts are partial by design.
    pub sampling: Option<Sampling>,
    /// Every access grouped into warp-wide requests per source line, in what the launch
    /// observed ([`Observed::profile`]; slower: see the README for how much).
    pub profiling: bool,
    /// The global-memory race check: every block logs its global accesses and the launch checks
    /// them once it has ended (`global.rs`); see the README for what it costs
    /// ([`GLOBAL_RACES_VAR`]).
    pub global_races: bool,
    /// The shared-memory race check ([`SHARED_RACES_VAR`]).
    pub shared_races: bool,
    /// The coroutine stack of each simulated thread ([`STACK_VAR`]).
    pub stack_bytes: usize,
    /// How long a simulated thread may run without reaching a barrier, a warp collective or its
    /// end ([`WATCHDOG_VAR`]); `None` for no limit.
    pub watchdog: Option<Duration>,
    /// The stack a GPU gives each thread of a kernel whose calls recurse, in bytes
    /// ([`GPU_STACK_VAR`]): read by the PTX backend, which alone runs calls.
    pub gpu_stack_bytes: u64,
    /// Record the last store to this range ([`Observed::last_store`]). Off by default: only a
    /// check that found a wrong value reruns its launches with a watch.
    pub watch: Option<StoreWatch>,
    /// Count the executions of each PTX instruction ([`Observed::instruction_mix`]): read by
    /// the PTX backend, which alone runs instructions; the source emulator ignores it.
    pub instruction_mix: bool,
    /// The module's machine code for some architectures (ptxas's line table): a sampled block's
    /// traffic is also counted as each of them issues it
    /// ([`sample::SampledBlock::machine`], `machine_code::regroup`).
    pub machine_code: Option<&'static [machine_code::MachineCode]>,
}

impl Default for LaunchOptions {
    /// The defaults with no environment variable set.
    fn default() -> Self {
        Self {
            sampling: None,
            profiling: false,
            global_races: true,
            shared_races: true,
            stack_bytes: DEFAULT_STACK_BYTES,
            watchdog: Some(DEFAULT_WATCHDOG),
            gpu_stack_bytes: DEFAULT_GPU_STACK_BYTES,
            watch: None,
            instruction_mix: false,
            machine_code: None,
        }
    }
}

/// A region of host memory standing in for a device allocation.
#[derive(Clone, Copy, Debug)]
struct Region {
    start: usize,
    end: usize,
    /// The order of the buffer's allocation (the emulator's count of buffers registered before
    /// it), which a later run of the same case repeats whatever addresses the host hands out.
    serial: u64,
    /// The element type's name and size, for reports.
    elem: (&'static str, usize),
}

/// Bytes the emulator leaves unallocated after every global allocation (`memory.rs`), so that an
/// access just past one's end lands in no other allocation and is reported as out of bounds
/// (with [`nearest_allocation`]), never as a race in a neighbour.
const GLOBAL_RED_ZONE: usize = 256;

/// The allocation whose red zone `[addr, addr + bytes)` starts in (`regions` sorted by start).
fn nearest_allocation(regions: &[Region], addr: usize, bytes: usize) -> Option<error::Overrun> {
    let i = regions.partition_point(|r| r.start <= addr);
    let r = regions.get(i.checked_sub(1)?)?;
    // Starting inside and ending past the end counts as 0 bytes past it.
    let past_end = addr.saturating_sub(r.end);
    (addr + bytes > r.end && past_end < GLOBAL_RED_ZONE).then_some(error::Overrun {
        array: None,
        start: r.start,
        bytes: r.end - r.start,
        elem: r.elem,
        past_end,
    })
}

/// The emulated device.
pub struct Emulator {
    limits: DeviceLimits,
    regions: Mutex<BTreeMap<usize, Region>>,
    /// What [`launch`](Self::launch) runs with.
    defaults: LaunchOptions,
    /// The pairs of sites whose benign races or divergent barriers were printed as warnings:
    /// each is printed once.
    warned: Mutex<Vec<(Site, Site)>>,
    /// Bytes of the live buffers mapped lazily from the kernel: promised, but taken from the
    /// host's available memory only as they are touched.
    mapped_bytes: AtomicU64,
    /// Buffers registered so far ([`Region::serial`]).
    registered: AtomicU64,
    /// The environment variables whose values were refused, with why: every launch fails with
    /// them (`new` cannot fail, and a launch is where the settings are used).
    refused: Vec<(&'static str, String)>,
}

impl Default for Emulator {
    fn default() -> Self {
        Self::new()
    }
}

impl Emulator {
    /// An emulated device with the launch limits of an H100/H200 (compute capability 9.0).
    pub fn new() -> Self {
        let mut refused = Vec::new();
        let mut setting = |var: &'static str, value: Result<u64, String>, default: u64| {
            value.unwrap_or_else(|why| {
                refused.push((var, why));
                default
            })
        };
        let global_races = env_switch(GLOBAL_RACES_VAR, true).map(u64::from);
        let global_races = setting(GLOBAL_RACES_VAR, global_races, 1) != 0;
        let shared_races = env_switch(SHARED_RACES_VAR, true).map(u64::from);
        let shared_races = setting(SHARED_RACES_VAR, shared_races, 1) != 0;
        let default_kib = DEFAULT_STACK_BYTES as u64 / 1024;
        let stack_kib = env_number(STACK_VAR, default_kib, 16..=MAX_STACK_KIB, "KiB per thread");
        let stack_kib = setting(STACK_VAR, stack_kib, default_kib);
        let default_s = DEFAULT_WATCHDOG.as_secs();
        let watchdog_s = env_number(
            WATCHDOG_VAR,
            default_s,
            0..=MAX_WATCHDOG_S,
            "seconds; 0 turns the watchdog off",
        );
        let watchdog_s = setting(WATCHDOG_VAR, watchdog_s, default_s);
        let gpu_stack = env_number(
            GPU_STACK_VAR,
            DEFAULT_GPU_STACK_BYTES,
            0..=MAX_GPU_STACK_BYTES,
            "bytes per thread, as cudaDeviceSetLimit(cudaLimitStackSize, ...) sets",
        );
        let gpu_stack_bytes = setting(GPU_STACK_VAR, gpu_stack, DEFAULT_GPU_STACK_BYTES);
        Self {
            limits: DeviceLimits::SM90,
            regions: Mutex::new(BTreeMap::new()),
            registered: AtomicU64::new(0),
            defaults: LaunchOptions {
                global_races,
                shared_races,
                stack_bytes: stack_kib as usize * 1024,
                watchdog: (watchdog_s > 0).then(|| Duration::from_secs(watchdog_s)),
                gpu_stack_bytes,
                ..LaunchOptions::default()
            },
            warned: Mutex::new(Vec::new()),
            mapped_bytes: AtomicU64::new(0),
            refused,
        }
    }

    /// The options [`launch`](Self::launch) runs with: [`LaunchOptions::default`] as the
    /// environment variables ([`WATCHDOG_VAR`], [`STACK_VAR`], [`GLOBAL_RACES_VAR`],
    /// [`SHARED_RACES_VAR`]) read when this emulator was made amend it. A caller that wants
    /// other options changes a copy of these and passes it to [`launch_with`](Self::launch_with).
    pub fn defaults(&self) -> LaunchOptions {
        self.defaults
    }

    /// The first refused environment variable ([`WATCHDOG_VAR`], [`STACK_VAR`],
    /// [`GLOBAL_RACES_VAR`], [`SHARED_RACES_VAR`]) as the error every launch returns.
    pub fn check_settings(&self) -> Result<()> {
        match self.refused.first() {
            None => Ok(()),
            Some((_, why)) => Err(Error::Config(why.clone())),
        }
    }

    /// Bytes the emulator can still allocate: the host's available memory (`MemAvailable` in
    /// `/proc/meminfo`: free memory plus what the kernel can reclaim), since every emulated
    /// buffer is host memory. Where that cannot be read (not Linux), the 141 GB of the H200
    /// whose limits the emulator has.
    ///
    /// A buffer mapped lazily (1 MiB and more) takes host memory only as its pages are touched,
    /// so `MemAvailable` does not see one not yet written: the mapped bytes beyond this
    /// process's resident memory (at least that much is untouched) count as taken too, or three
    /// buffers of 14 GB would be accepted with 24 GB free.
    pub fn free_memory(&self) -> u64 {
        let available = host_available_memory().unwrap_or(141 * 1_000_000_000);
        let mapped = self.mapped_bytes.load(Ordering::Relaxed);
        let untouched = mapped.saturating_sub(resident_bytes().unwrap_or(mapped));
        available.saturating_sub(untouched)
    }

    /// How many buffers this emulator has registered: the order the next one will have.
    pub fn allocations_registered(&self) -> u64 {
        self.registered.load(Ordering::Relaxed)
    }

    /// The order ([`StoreWatch::allocation`]) of the live buffer that holds `addr`.
    pub fn allocation_order(&self, addr: usize) -> Option<u64> {
        let regions = self.regions.lock().unwrap();
        let (_, r) = regions.range(..=addr).next_back()?;
        (addr < r.end).then_some(r.serial)
    }

    /// The limits launches are checked against.
    pub fn limits(&self) -> &DeviceLimits {
        &self.limits
    }

    /// Registers a buffer of `bytes` at `start` holding elements of `elem` (name, size), `mapped`
    /// lazily (see [`free_memory`](Self::free_memory)).
    pub(crate) fn register(
        &self,
        start: usize,
        bytes: usize,
        elem: (&'static str, usize),
        mapped: bool,
    ) {
        if mapped {
            self.mapped_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        }
        let region = Region {
            start,
            end: start + bytes,
            serial: self.registered.fetch_add(1, Ordering::Relaxed),
            elem,
        };
        self.regions.lock().unwrap().insert(start, region);
    }

    pub(crate) fn unregister(&self, start: usize, mapped: bool) {
        let region = self.regions.lock().unwrap().remove(&start);
        if let (true, Some(r)) = (mapped, region) {
            self.mapped_bytes
                .fetch_sub((r.end - r.start) as u64, Ordering::Relaxed);
        }
    }

    /// Runs `kernel` once per thread of the grid `cfg` describes, with the
    /// [`defaults`](Self::defaults).
    ///
    /// `kernel` is the body of one thread: typically a closure that calls a `kernels::` entry
    /// point with the launch's arguments. Returns what the launch counted, or the first bug found
    /// (in block order, so the report is the same on every run). With the defaults a launch
    /// observes nothing but benign races, which it prints as warnings;
    /// [`launch_with`](Self::launch_with) returns them.
    pub fn launch<F>(
        &self,
        name: &'static str,
        cfg: &LaunchConfig,
        kernel: F,
    ) -> Result<LaunchCounters>
    where
        F: Fn() + Sync,
    {
        self.launch_with(name, cfg, &self.defaults, kernel)
            .map(|(counters, _)| counters)
    }

    /// [`launch`](Self::launch) with `options` instead of the defaults; returns, beside the
    /// counters, what the launch observed as `options` asked ([`Observed`]).
    pub fn launch_with<F>(
        &self,
        name: &'static str,
        cfg: &LaunchConfig,
        options: &LaunchOptions,
        kernel: F,
    ) -> Result<(LaunchCounters, Observed)>
    where
        F: Fn() + Sync,
    {
        self.check_settings()?;
        self.limits.check(name, cfg)?;
        let regions: Vec<Region> = self.regions.lock().unwrap().values().copied().collect();
        let watch = options.watch.and_then(|w| {
            let r = regions.iter().find(|r| r.serial == w.allocation)?;
            let lo = r.start + w.offset;
            Some((lo, lo + w.bytes))
        });
        let launch = block::Launch {
            name,
            cfg: *cfg,
            regions,
            limits: self.limits,
            kernel: &kernel,
            profile: options.sampling.is_some() || options.profiling,
            global_races: options.global_races,
            watch,
            shared_races: options.shared_races,
            stack_bytes: options.stack_bytes,
            work_budget: options.sampling.and_then(|s| s.budget).filter(|&n| n > 0),
            work: AtomicU64::new(0),
            // A budget under a millisecond is kept at one: zero would mean none.
            watchdog: options.watchdog.map(|b| b.max(Duration::from_millis(1))),
        };
        let blocks = Sampling::blocks_of(options.sampling, name, cfg.grid);
        if let (Blocks::Grid(_), Err(threads)) = (&blocks, threads_run_whole(cfg)) {
            return Err(Error::Shape(format!(
                "{name}: a grid of {} blocks of {} threads is {threads} threads, more than the {MAX_WHOLE_GRID_THREADS} the emulator runs whole (some minutes' work); its checks need few blocks: run a smaller grid, or sample this one",
                cfg.grid.volume(),
                cfg.block.volume()
            )));
        }
        let mut gathered = Gathered::new(options);
        for round in 0..blocks.len().div_ceil(BLOCKS_PER_ROUND) {
            let these = blocks.round(round);
            let results = run_blocks(&launch, &these);
            gathered.fold(&launch, &these, results, options)?;
        }
        gathered.finish(options);
        self.warn(&gathered.benign_races);
        self.warn(&gathered.divergent_barriers);
        let races = global::races(&gathered.accesses, REPORTED_RACES);
        if !races.is_empty() {
            return Err(Error::Emulator(Box::new(
                self.race_error(&launch, &blocks, &races),
            )));
        }
        launch.check_work_budget(&blocks).map_err(Error::Emulator)?;
        let mut observed = Observed {
            benign_races: gathered.benign_races,
            divergent_barriers: gathered.divergent_barriers,
            last_store: gathered.last_store,
            ..Observed::default()
        };
        if let Some(sampled) = gathered.sampled {
            observed.samples.push(sample::SampledLaunch {
                kernel: name,
                config: *cfg,
                work: launch.work.load(Ordering::Relaxed),
                allocations: launch
                    .regions
                    .iter()
                    .map(|r| (r.end - r.start) as u64)
                    .collect(),
                allocation_order: launch.regions.iter().map(|r| r.serial).collect(),
                blocks: sampled,
            });
        }
        if let Some(sites) = gathered.profile {
            observed.profile.kernels.insert(name.to_string(), sites);
        }
        Ok((gathered.total, observed))
    }

    /// Prints a launch's warnings (benign races, barriers met at different instructions) of the
    /// pairs of sites not printed before.
    fn warn<W: error::Warning + std::fmt::Display>(&self, found: &[W]) {
        if found.is_empty() {
            return;
        }
        let mut warned = self.warned.lock().unwrap();
        for finding in found {
            if !warned.contains(&finding.sites()) {
                warned.push(finding.sites());
                eprintln!("warning: {finding}");
            }
        }
    }

    /// The report of the global-memory races found by [`global::races`] (at least one), which
    /// name blocks by their place in `blocks`.
    fn race_error(
        &self,
        launch: &block::Launch,
        blocks: &Blocks,
        races: &[global::GlobalRace],
    ) -> EmuError {
        let side = |s: &global::Side| ThreadAccess {
            thread: index_in(launch.cfg.block, u64::from(s.thread)),
            access: s.access,
            site: s.site,
        };
        let pair = |race: &global::GlobalRace| {
            let i = launch.regions.partition_point(|r| r.start <= race.addr);
            RacingPair {
                addr: race.addr,
                offset: race.addr - launch.regions[i.saturating_sub(1)].start,
                first_block: blocks.get(race.first.block as u64),
                first: side(&race.first),
                second_block: blocks.get(race.second.block as u64),
                second: side(&race.second),
            }
        };
        let first = pair(&races[0]);
        EmuError {
            kernel: launch.name,
            block: first.first_block,
            kind: EmuErrorKind::GlobalRace {
                addr: first.addr,
                offset: first.offset,
                first: first.first,
                second_block: first.second_block,
                second: first.second,
                more: races[1..].iter().map(pair).collect(),
            },
        }
    }
}

/// A block's result: `None` for a block left out after an earlier one failed.
type BlockOutcome = Option<std::result::Result<block::BlockResult, Box<EmuError>>>;

/// Runs `blocks` of `launch` on rayon's pool, in parallel; the results in the order of `blocks`.
///
/// The launch reports its first failed block in block order. Every block before the first that
/// failed so far still runs (one of them may fail too, and the report must be the same on every
/// run); the blocks after it need not. That also bounds a kernel whose every block loops: the
/// launch ends within one watchdog budget, not one per block.
fn run_blocks(launch: &block::Launch, blocks: &[Dim3]) -> Vec<BlockOutcome> {
    let first_failed = AtomicUsize::new(usize::MAX);
    blocks
        .par_iter()
        .enumerate()
        .map(|(i, &b)| {
            if i > first_failed.load(Ordering::Relaxed) {
                return None;
            }
            let r = block::run_block(launch, b);
            if r.is_err() {
                first_failed.fetch_min(i, Ordering::Relaxed);
            }
            Some(r)
        })
        .collect()
}

/// A launch's blocks folded together, in block order: what the launch returns once its
/// end-of-launch checks pass.
struct Gathered {
    total: LaunchCounters,
    /// Per site, when profiling.
    profile: Option<Vec<SiteStats>>,
    /// The profile's sums so far, per site, when profiling.
    stats: HashMap<profile::SiteKey, SiteStats>,
    /// Per block, its counters and traffic, when sampling.
    sampled: Option<Vec<sample::SampledBlock>>,
    /// Every block's logged global accesses, for the race check.
    accesses: Vec<global::BlockAccesses>,
    last_store: Option<LastStore>,
    benign_races: Vec<BenignRace>,
    divergent_barriers: Vec<DivergentBarrier>,
}

impl Gathered {
    /// Nothing folded yet.
    fn new(options: &LaunchOptions) -> Self {
        Self {
            total: LaunchCounters::default(),
            profile: None,
            stats: HashMap::new(),
            sampled: options.sampling.map(|_| Vec::new()),
            accesses: Vec::new(),
            last_store: None,
            benign_races: Vec::new(),
            divergent_barriers: Vec::new(),
        }
    }

    /// Folds one round's `results` (of `blocks`, as [`run_blocks`] returns them, rounds in
    /// launch order), or the first block's error in block order.
    fn fold(
        &mut self,
        launch: &block::Launch,
        blocks: &[Dim3],
        results: Vec<BlockOutcome>,
        options: &LaunchOptions,
    ) -> Result<()> {
        let allocation_of = |addr: usize| {
            let i = launch.regions.partition_point(|r| r.start <= addr);
            (i > 0 && addr < launch.regions[i - 1].end).then(|| i - 1)
        };
        for (r, &b) in results.into_iter().zip(blocks) {
            // A block left out comes after a failed one, whose error has returned already.
            let Some(r) = r else { break };
            let (counters, profile, logged, stored, block_benign, block_divergent) =
                r.map_err(Error::Emulator)?;
            for race in block_benign {
                race.add_to(&mut self.benign_races);
            }
            for finding in block_divergent {
                finding.add_to(&mut self.divergent_barriers);
            }
            self.total.add(&counters);
            // Blocks are unordered: two that store to one byte race (reported by the launch),
            // so the last in block order stands for "last".
            if let Some((thread, site)) = stored {
                self.last_store = Some(LastStore {
                    kernel: launch.name,
                    block: b,
                    thread: index_in(launch.cfg.block, u64::from(thread)),
                    site,
                });
            }
            if let Some(p) = profile {
                if let Some(sampled) = &mut self.sampled {
                    let traffic = p.traffic(allocation_of, None);
                    let machine = options
                        .machine_code
                        .unwrap_or_default()
                        .iter()
                        .filter_map(|code| {
                            let kernel = code.kernels.get(launch.name)?;
                            Some((code.arch.clone(), p.traffic(allocation_of, Some(kernel))))
                        })
                        .collect();
                    sampled.push(sample::SampledBlock {
                        block: b,
                        counters,
                        traffic,
                        machine,
                    });
                }
                if options.profiling {
                    p.fold_into(&mut self.stats);
                }
            }
            self.accesses.extend(logged);
        }
        Ok(())
    }

    /// Once every round is folded: the profile per site, when profiling.
    fn finish(&mut self, options: &LaunchOptions) {
        let stats = std::mem::take(&mut self.stats);
        self.profile = options.profiling.then(|| profile::finish(stats));
    }
}

/// The index of the `i`-th block of a grid `dims` (or thread of a block), x fastest: the order
/// blocks are run and reported in, and threads are numbered in.
fn index_in(dims: Dim3, i: u64) -> Dim3 {
    Dim3 {
        x: (i % u64::from(dims.x)) as u32,
        y: (i / u64::from(dims.x) % u64::from(dims.y)) as u32,
        z: (i / (u64::from(dims.x) * u64::from(dims.y))) as u32,
    }
}
