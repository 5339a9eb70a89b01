//! The seam between kernel source and the CPU emulator (host target only).
//!
//! On the host every device-support call lands here and is forwarded to the [`Gpu`] that the
//! emulator installed for the simulated thread now running. The emulator itself lives in the
//! `host` crate; this crate only defines what it must provide, so the kernels stay free of it.

use core::cell::Cell;
use core::fmt;
use core::num::NonZeroUsize;
use core::panic::Location;

pub use super::mbarrier::MbarrierOp;
pub use super::mma::MmaInput;
pub use super::pipeline::AsyncCopy;
pub use super::tma::TmaLoad;
pub use super::warp::ShuffleMode;
pub use super::wgmma::{WgmmaA, WgmmaOp, WgmmaSync};

/// A three-component index or size, as `dim3`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// Fastest-varying component.
    pub x: u32,
    /// Middle component.
    pub y: u32,
    /// Slowest-varying component.
    pub z: u32,
}

impl Dim3 {
    /// `x * y * z`.
    pub fn volume(self) -> u64 {
        u64::from(self.x) * u64::from(self.y) * u64::from(self.z)
    }
}

/// Where the running thread is: the four built-in variables of CUDA C.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Position {
    /// `threadIdx`.
    pub thread: Dim3,
    /// `blockIdx`.
    pub block: Dim3,
    /// `blockDim`.
    pub block_dim: Dim3,
    /// `gridDim`.
    pub grid_dim: Dim3,
}

/// Where a memory access, barrier or warp collective is: a line of kernel source (the source
/// emulator runs the kernels' Rust) or one instruction of the PTX (the PTX backend runs what the
/// GPU runs). Barriers are matched by site, so on the PTX backend two `bar.sync` instructions are
/// two barriers even when rustc made both from one line of source.
///
/// One machine word, compared by identity: the shared-memory shadow keeps three per byte.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Site(NonZeroUsize);

/// A [`Site`], unpacked.
#[derive(Clone, Copy, Debug)]
pub enum SiteKind {
    /// A line of Rust source, from `#[track_caller]`.
    Source(&'static Location<'static>),
    /// A PTX instruction.
    Ptx(&'static PtxSite),
}

/// One instruction of a PTX module, as error reports and profiles name it.
#[derive(Debug)]
pub struct PtxSite {
    /// The `.entry` or `.func` the instruction is in.
    pub function: &'static str,
    /// 1-based line in the PTX text.
    pub line: u32,
    /// The instruction as written, without its `;`.
    pub text: &'static str,
    /// The Rust source line the PTX's line table (`.loc`) gives for it, if the PTX has one.
    pub source: Option<(&'static str, u32)>,
}

// Both pointees are at least 4-aligned, so the low bit of the address is free for the tag.
const PTX_TAG: usize = 1;

impl Site {
    /// The caller's source line (the site of a device-support call in a kernel).
    #[track_caller]
    pub fn caller() -> Self {
        Self::source(Location::caller())
    }

    /// A line of source.
    pub fn source(location: &'static Location<'static>) -> Self {
        let addr = location as *const Location<'static> as usize;
        Self(NonZeroUsize::new(addr).expect("a reference is not null"))
    }

    /// A PTX instruction.
    pub fn ptx(site: &'static PtxSite) -> Self {
        let addr = site as *const PtxSite as usize;
        debug_assert_eq!(addr & PTX_TAG, 0);
        Self(NonZeroUsize::new(addr | PTX_TAG).expect("a reference is not null"))
    }

    /// The site as one machine word, for an atomic (the emulator's watchdog reads the last site
    /// of a running thread from another OS thread).
    pub fn to_word(self) -> usize {
        self.0.get()
    }

    /// The site [`to_word`](Self::to_word) gave `word`; `None` for 0.
    ///
    /// # Safety
    /// `word` is 0 or came from `to_word`.
    pub unsafe fn from_word(word: usize) -> Option<Self> {
        NonZeroUsize::new(word).map(Self)
    }

    /// Where the site is, for sorting: (file, line, column) of source, (function, line, 0) of PTX.
    pub fn position(self) -> (&'static str, u32, u32) {
        match self.kind() {
            SiteKind::Source(l) => (l.file(), l.line(), l.column()),
            SiteKind::Ptx(p) => (p.function, p.line, 0),
        }
    }

    /// What the site is.
    pub fn kind(self) -> SiteKind {
        let addr = self.0.get();
        // SAFETY: built by `source` or `ptx` from a `&'static` of the type the tag names.
        unsafe {
            if addr & PTX_TAG == 0 {
                SiteKind::Source(&*(addr as *const Location<'static>))
            } else {
                SiteKind::Ptx(&*((addr & !PTX_TAG) as *const PtxSite))
            }
        }
    }
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind() {
            SiteKind::Source(location) => write!(f, "{location}"),
            SiteKind::Ptx(p) => {
                write!(f, "PTX line {} of {} (`{}`)", p.line, p.function, p.text)?;
                if let Some((file, line)) = p.source {
                    write!(f, ", from {file}:{line}")?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Debug for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A load or a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// A load.
    Read,
    /// A store.
    Write,
}

/// A warp-wide instruction: every lane in its mask must execute it before any lane goes on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Collective {
    /// `shfl.sync`: each lane offers `value` and receives one lane's value, chosen by `mode`.
    Shuffle {
        /// How the source lane is chosen.
        mode: ShuffleMode,
        /// This lane's offered register.
        value: u32,
        /// The lane, delta or xor mask.
        arg: u32,
    },
    /// `bar.warp.sync`.
    SyncWarp,
    /// `wgmma.mma_async`: a *warpgroup* collective (four warps, 128 threads), this thread's
    /// share of it.
    Wgmma(WgmmaOp),
    /// `ldmatrix...x4`: this lane's row address in shared memory.
    LdMatrix {
        /// Generic address of the row this lane supplies.
        addr: usize,
        /// `.trans`.
        trans: bool,
    },
    /// `vote.sync` and `redux.sync`: this lane's predicate (0 or 1) or value, combined over the
    /// lanes of the mask; every lane receives the same result.
    Reduce {
        /// What is computed.
        op: WarpReduce,
        /// This lane's operand.
        value: u32,
    },
    /// `activemask`: completes once no lane of the warp can run on (each waits somewhere or has
    /// exited: the emulator runs a warp's lanes one after another, so this is its moment of
    /// convergence), and gives every lane that waits here the mask of those lanes. Its own
    /// mask is not used.
    ActiveMask,
    /// `mma.sync.m16n8k16` with f32 accumulation: this lane's fragments.
    Mma {
        /// A and B element type.
        input: MmaInput,
        /// A fragment.
        a: [u32; 4],
        /// B fragment.
        b: [u32; 2],
        /// C fragment.
        c: [f32; 4],
    },
}

/// What a [`Collective::Reduce`] computes over its lanes' operands (PTX ISA, "Parallel
/// Synchronization and Communication Instructions: vote.sync" and "redux.sync").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WarpReduce {
    /// `vote.sync.ballot.b32`: bit `l` set where lane `l`'s predicate is true.
    Ballot,
    /// `vote.sync.all.pred`: 1 when every lane's predicate is true.
    All,
    /// `vote.sync.any.pred`: 1 when some lane's predicate is true.
    Any,
    /// `vote.sync.uni.pred`: 1 when the lanes' predicates are all equal.
    Uni,
    /// `redux.sync.add.{u32,s32}` (wrapping).
    Add,
    /// `redux.sync.min.u32` / `max.u32`.
    MinU,
    MaxU,
    /// `redux.sync.min.s32` / `max.s32`.
    MinS,
    MaxS,
    /// `redux.sync.{and,or,xor}.b32`.
    And,
    Or,
    Xor,
}

/// What the emulator provides to the thread it is running.
///
/// Every method is called from inside a simulated thread. A method that finds a bug (an access
/// out of bounds, a race, a divergent barrier) does not return: it ends the launch with an error
/// that names the kernel, block, thread and address.
pub trait Gpu {
    /// The running thread's built-in index variables.
    fn position(&self) -> Position;
    /// Block-wide barrier (barrier 0) at `site`; returns once every thread of the block has
    /// arrived at barrier 0, from whichever site: the PTX ISA counts arrivals by barrier id
    /// ("bar, barrier"), and the emulator warns when they come from different sites.
    fn sync_threads(&self, site: Site);
    /// `bar.red` on barrier 0: a block-wide barrier at `site` that also counts the threads whose
    /// predicate `value` is true; returns that count (`.popc`; `.and` and `.or` follow from it
    /// and the block's size). Every thread of the block must arrive, as at `sync_threads`.
    fn sync_threads_count(&self, site: Site, value: bool) -> u32 {
        let _ = (site, value);
        panic!("this backend does not model bar.red")
    }
    /// A warp-collective instruction over the lanes in `mask`; returns this lane's result
    /// registers (one for a shuffle, four for `ldmatrix.x4` and `mma`).
    fn warp_collective(&self, mask: u32, op: Collective, site: Site) -> [u32; 4];
    /// Checks and counts an access of `bytes` at `addr` in global memory.
    fn global_access(&self, addr: usize, bytes: usize, access: Access, site: Site);
    /// Checks (bounds, races) and counts an access in this block's shared memory.
    fn shared_access(&self, addr: usize, bytes: usize, access: Access, site: Site);
    /// The block's instance of the static shared array identified by `key` (`array` names it in
    /// reports).
    fn static_shared(&self, key: usize, bytes: usize, align: usize, array: SharedArray) -> *mut u8;
    /// The block's dynamic shared memory.
    fn dynamic_shared(&self) -> *mut u8;
    /// Adds `n` to the launch's floating-point operation count.
    fn count_flops(&self, n: u64);
    /// Adds `n` to the launch's count of special-function exponentials (`ex2.approx`), which
    /// have a throughput of their own (the performance model's MUFU limit).
    fn count_exps(&self, n: u64) {
        let _ = n;
    }
    /// `cp.async` and its group operations, for the running thread: a copy is started (and its
    /// destination marked in flight), a commit closes a group, a wait completes groups.
    fn async_copy(&self, op: AsyncCopy, site: Site);
    /// A point where a thread that runs long without any other device call gives the emulator
    /// control, with the site it is at: the PTX backend calls it every few thousand
    /// instructions, so that the watchdog can end a loop of pure arithmetic (a `bra` back to
    /// itself) and name its line. A backend without a watchdog ignores it.
    fn progress(&self, site: Site) {
        let _ = site;
    }

    // Hopper (sm_90/sm_90a). A backend that does not model these refuses them by panicking,
    // which the emulator reports as the kernel's panic.

    /// An atomic read-modify-write (`atom`, `red`) of `bytes` at generic address `addr`, in this
    /// block's shared memory when `shared`, else global memory: checked (bounds, alignment) and
    /// counted like an access (it reads and writes the bytes), and known to the race checks as
    /// an atomic, which races with plain loads and stores of the bytes but not with other
    /// atomics. The caller performs the operation once this returns.
    fn atomic_access(&self, addr: usize, bytes: usize, shared: bool, site: Site) {
        let _ = (addr, bytes, shared, site);
        panic!("this backend does not model atomics")
    }
    /// `cvta.to.shared`: the `.shared` window address of the generic shared address `addr`.
    fn shared_address(&self, addr: usize, site: Site) -> u32 {
        let _ = (addr, site);
        panic!("this backend does not model .shared window addresses (cvta.to.shared)")
    }
    /// An mbarrier operation on the barrier at generic address `bar`; returns the result of a
    /// `try_wait` (true: the phase completed), and true for the others.
    fn mbarrier(&self, bar: usize, op: MbarrierOp, site: Site) -> bool {
        let _ = (bar, op, site);
        panic!("this backend does not model mbarrier")
    }
    /// `cp.async.bulk.tensor.2d` from global to shared memory, completing on an mbarrier.
    fn tma_load(&self, op: TmaLoad, site: Site) {
        let _ = (op, site);
        panic!("this backend does not model the TMA (cp.async.bulk.tensor)")
    }
    /// `wgmma.mma_async`, a warpgroup collective: returns once all 128 threads of the warpgroup
    /// issued it, with a token naming this operation for [`wgmma_read`](Self::wgmma_read).
    fn wgmma(&self, op: WgmmaOp, site: Site) -> u64 {
        let _ = (op, site);
        panic!("this backend does not model wgmma")
    }
    /// `wgmma.fence`, `commit_group`, `wait_group`.
    fn wgmma_sync(&self, op: WgmmaSync, site: Site) {
        let _ = (op, site);
        panic!("this backend does not model wgmma")
    }
    /// A read of accumulator registers last written by the `wgmma` that `token` names (0: by
    /// ordinary instructions): refused until this thread has waited for its group.
    fn wgmma_read(&self, token: u64, site: Site) {
        let _ = (token, site);
        panic!("this backend does not model wgmma")
    }
}

std::thread_local! {
    static CURRENT: Cell<Option<*const (dyn Gpu + 'static)>> = const { Cell::new(None) };
}

/// Makes `gpu` the device of the simulated thread about to run on this OS thread.
///
/// # Safety
/// `gpu` must stay valid until [`leave`] is called or another `enter` replaces it.
pub unsafe fn enter(gpu: &dyn Gpu) {
    // SAFETY: the lifetime is erased; the caller keeps `gpu` alive while it is installed.
    let erased: *const (dyn Gpu + 'static) = unsafe { core::mem::transmute(gpu as *const dyn Gpu) };
    CURRENT.with(|c| c.set(Some(erased)));
}

/// Uninstalls the current device.
pub fn leave() {
    CURRENT.with(|c| c.set(None));
}

/// Runs `f` with the device of the running simulated thread.
///
/// # Panics
/// When called outside a kernel launched by the emulator (e.g. calling a kernel function
/// directly from host code): there is no thread, block or grid to answer with.
#[track_caller]
pub fn with<R>(f: impl FnOnce(&dyn Gpu) -> R) -> R {
    let gpu = CURRENT.with(Cell::get).expect(
        "a device function was called outside an emulated launch: launch kernels through the host runtime",
    );
    // SAFETY: `enter`'s contract keeps the pointee alive while installed.
    f(unsafe { &*gpu })
}

/// Calls `f` with the running simulated thread's device, or does nothing outside an emulated
/// launch: for device helpers that host code calls too (a CPU reference's `exp2_approx`).
pub fn with_running(f: impl FnOnce(&dyn Gpu)) {
    if let Some(gpu) = CURRENT.with(Cell::get) {
        // SAFETY: `enter`'s contract keeps the pointee alive while installed.
        f(unsafe { &*gpu })
    }
}

/// Whether this x86-64 host has the FMA instructions (see [`kernel!`](crate::kernel)); the
/// answer is cached after the first call.
#[cfg(target_arch = "x86_64")]
#[doc(hidden)]
#[inline]
pub fn host_has_fma() -> bool {
    std::is_x86_feature_detected!("fma")
}

/// A static shared array as the kernel declared it, for reports: `shared_array![sums: [f32;
/// 256]]` is `sums`, `f32`, 4 bytes each (the PTX backend knows only a `.shared` variable's name
/// and its bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedArray {
    pub name: &'static str,
    pub elem: &'static str,
    pub elem_bytes: usize,
    /// Whether the block finds it zeroed, as by the driver before the block starts (the
    /// reserved shared memory the PTX backend models), rather than uninitialised, as a kernel's
    /// own arrays are.
    pub zeroed: bool,
}

#[doc(hidden)]
pub fn static_shared<T>(key: usize, len: usize, name: &'static str, elem: &'static str) -> *mut T {
    let elem_bytes = core::mem::size_of::<T>();
    let array = SharedArray {
        name,
        elem,
        elem_bytes,
        zeroed: false,
    };
    with(|gpu| gpu.static_shared(key, len * elem_bytes, 16, array)).cast()
}

pub(crate) fn dynamic_shared<T>() -> *mut T {
    with(|gpu| gpu.dynamic_shared()).cast()
}
