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
//! - **Memory**: global memory is host memory behind the same [`DeviceBuffer`] type the GPU uses;
//!   every access is checked against the live buffers and counted. Shared memory is a per-block
//!   arena with a shadow that records, per byte, who wrote and read it since the last barrier.
//!   `cp.async` copies stay in flight, per thread and per commit group, until the thread waits
//!   for them (`async_copy.rs`); their destination bytes may not be touched until then.
//!
//! Bugs are reported as an [`EmuError`] naming the kernel, block, thread(s) and address or lane:
//! out-of-bounds or misaligned accesses, shared-memory data races, reads of never-written shared
//! memory, barrier divergence, and warp collectives that not every lane of the mask executes.
//!
//! [`DeviceBuffer`]: crate::buffer::DeviceBuffer

mod async_copy;
mod block;
mod error;
mod hopper;
mod profile;
mod shared;
mod warp;
mod wgmma;

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

pub use error::{EmuError, EmuErrorKind, MemorySpace, ThreadAccess};
pub use hopper::validate_map;
pub use profile::{Profile, SiteStats};
pub use wgmma::Descriptor;

use crate::error::{Error, Result};
use crate::launch::{DeviceLimits, Dim3, LaunchConfig};

/// Bytes of a block's shared window: every generic address from the window's base
/// ([`kernels::cuda::emu::Gpu::dynamic_shared`]) up to this many bytes past it is shared memory.
pub(crate) const SHARED_WINDOW: usize = shared::CAPACITY;

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
    /// Block-wide barriers completed, summed over blocks.
    pub barriers: u64,
    /// Warp-collective instructions completed (per warp, not per lane).
    pub warp_collectives: u64,
}

impl LaunchCounters {
    /// Adds `other`'s counts to these (a launch's blocks, or the launches of one operation).
    pub fn add(&mut self, other: &Self) {
        self.global_read_bytes += other.global_read_bytes;
        self.global_write_bytes += other.global_write_bytes;
        self.shared_read_bytes += other.shared_read_bytes;
        self.shared_write_bytes += other.shared_write_bytes;
        self.flops += other.flops;
        self.barriers += other.barriers;
        self.warp_collectives += other.warp_collectives;
    }
}

/// A region of host memory standing in for a device allocation.
#[derive(Clone, Copy, Debug)]
struct Region {
    start: usize,
    end: usize,
}

/// The emulated device.
pub struct Emulator {
    limits: DeviceLimits,
    regions: Mutex<BTreeMap<usize, Region>>,
    profiling: AtomicBool,
    profile: Mutex<Profile>,
}

impl Default for Emulator {
    fn default() -> Self {
        Self::new()
    }
}

impl Emulator {
    /// An emulated device with the launch limits of an H100/H200 (compute capability 9.0).
    pub fn new() -> Self {
        Self {
            limits: DeviceLimits::SM90,
            regions: Mutex::new(BTreeMap::new()),
            profiling: AtomicBool::new(false),
            profile: Mutex::new(Profile::default()),
        }
    }

    /// Turns the profiler on or off for the following launches. With it on, every access is
    /// grouped into warp-wide requests per source line (slower: see the README for how much).
    pub fn set_profiling(&self, on: bool) {
        self.profiling.store(on, Ordering::Relaxed);
    }

    /// The profile gathered since the last call, per kernel and access site.
    pub fn take_profile(&self) -> Profile {
        std::mem::take(&mut *self.profile.lock().unwrap())
    }

    /// The limits launches are checked against.
    pub fn limits(&self) -> &DeviceLimits {
        &self.limits
    }

    pub(crate) fn register(&self, start: usize, bytes: usize) {
        let region = Region {
            start,
            end: start + bytes,
        };
        self.regions.lock().unwrap().insert(start, region);
    }

    pub(crate) fn unregister(&self, start: usize) {
        self.regions.lock().unwrap().remove(&start);
    }

    /// Runs `kernel` once per thread of the grid `cfg` describes.
    ///
    /// `kernel` is the body of one thread: typically a closure that calls a `kernels::` entry
    /// point with the launch's arguments. Returns what the launch did, or the first bug found
    /// (in block order, so the report is the same on every run).
    pub fn launch<F>(
        &self,
        name: &'static str,
        cfg: &LaunchConfig,
        kernel: F,
    ) -> Result<LaunchCounters>
    where
        F: Fn() + Sync,
    {
        self.limits.check(name, cfg)?;
        let regions: Vec<Region> = self.regions.lock().unwrap().values().copied().collect();
        let launch = block::Launch {
            name,
            cfg: *cfg,
            regions,
            limits: self.limits,
            kernel: &kernel,
            profile: self.profiling.load(Ordering::Relaxed),
        };
        let grid = cfg.grid;
        let blocks = grid.volume();
        let results: Vec<std::result::Result<block::BlockResult, Box<EmuError>>> = (0..blocks)
            .into_par_iter()
            .map(|b| {
                let block = Dim3 {
                    x: (b % u64::from(grid.x)) as u32,
                    y: (b / u64::from(grid.x) % u64::from(grid.y)) as u32,
                    z: (b / (u64::from(grid.x) * u64::from(grid.y))) as u32,
                };
                block::run_block(&launch, block)
            })
            .collect();
        let mut total = LaunchCounters::default();
        let mut stats = HashMap::new();
        for r in results {
            let (counters, profile) = r.map_err(Error::Emulator)?;
            total.add(&counters);
            if let Some(p) = profile {
                p.fold_into(&mut stats);
            }
        }
        if launch.profile {
            let mut all = self.profile.lock().unwrap();
            let entry = all.kernels.entry(name.to_string()).or_default();
            profile::merge(entry, profile::finish(stats));
        }
        Ok(total)
    }
}
