//! The PTX backend: runs a module's entries on the emulator's block scheduler.
//!
//! A [`Program`] is a parsed and decoded module, made once per process and leaked so that its
//! instruction sites are `&'static` (error reports and profiles hold them). A launch is an
//! ordinary [`Emulator::launch`] whose per-thread body interprets the entry: every barrier, warp
//! collective, memory access and `cp.async` goes through the same `Gpu` calls the kernels' Rust
//! source makes, so the scheduler, the checks and the counters are the emulator's own.
//!
//! State spaces: a global address is the host address of the emulated buffer. A shared-space
//! address is an offset in the block's shared window (0 is the dynamic shared memory), and the
//! generic address of shared byte `s` is `window + s`, so `cvta.shared`/`cvta.to.shared` add and
//! subtract the window's base, and a generic access inside the window is a shared access.

use std::collections::HashMap;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};

use kernels::cuda::emu::{self, Access, AsyncCopy, Collective, Gpu, Site};

use crate::decode::{
    self, AssertFail, Atom, AtomType, Call, Class, Cmp, Fill, Float, Int, IntOp, Kernel,
    MAX_CALL_DEPTH, Mem, Op, Reserved, SharedSlot, Space, mask,
};
use crate::parse;

mod arith;
mod collective;
mod numeric;
mod printf;
use ::emu::{Allocation, Emulator, Error, LaunchConfig, LaunchCounters, Result, SHARED_WINDOW};
use numeric::{atom_op, cvt, norm, sext};

/// Instructions a thread executes between two calls to the watchdog ([`Gpu::progress`]).
const PROGRESS_EVERY: u64 = 4096;

/// A parsed, decoded PTX module.
pub struct Program {
    /// Where it came from: `embedded sm_90` or the file's path.
    pub origin: String,
    /// Its `.target`.
    pub target: &'static str,
    shared: Vec<SharedSlot>,
    /// The module's `.global` and `.const` variables: each device allocates and initialises
    /// its own copy.
    globals: Vec<parse::GlobalVar<'static>>,
    kernels: HashMap<&'static str, std::result::Result<Kernel, String>>,
    /// What its kernels' `printf` calls printed, until [`Program::take_printed`].
    printed: Mutex<Printed>,
}

/// The lines of `printf` a module's launches printed, at most [`Printed::LINES`] (a GPU's printf
/// buffer is finite too: what does not fit is lost), and how many more were dropped.
#[derive(Debug, Default)]
pub struct Printed {
    /// (block, thread, text) of each call, in the order the emulator ran them.
    pub calls: Vec<([u32; 3], [u32; 3], String)>,
    pub dropped: usize,
}

impl Printed {
    /// The most calls kept between two [`Program::take_printed`].
    pub const LINES: usize = 4096;

    /// The calls in block order, then thread order (x fastest), each thread's in the order it
    /// made them: a GPU prints them in no set order, this is one that reads well.
    pub fn sorted(mut self) -> Self {
        let key = |d: &[u32; 3]| (d[2], d[1], d[0]);
        self.calls.sort_by_key(|(b, t, _)| (key(b), key(t)));
        self
    }
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Program({})", self.origin)
    }
}

/// The text of the PTX module in the file at `path`, refused before it is read when it is not a
/// regular file (a device such as `/dev/zero`, a FIFO or a folder would be read without end, or
/// block), when it is larger than a PTX module may be here, or when it is empty.
pub fn read_module_text(path: &Path) -> Result<String> {
    let cannot = |e: std::io::Error| Error::Ptx(format!("cannot read {}: {e}", path.display()));
    let meta = std::fs::metadata(path).map_err(cannot)?;
    if !meta.is_file() {
        return Err(Error::Ptx(format!(
            "{} is not a regular file: give a PTX file",
            path.display()
        )));
    }
    if meta.len() > MAX_PTX_FILE {
        return Err(Error::Ptx(format!(
            "{} is {} bytes, more than the {} MiB a PTX module may be here",
            path.display(),
            meta.len(),
            MAX_PTX_FILE >> 20
        )));
    }
    let mut text = String::new();
    {
        use std::io::Read;
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_PTX_FILE).read_to_string(&mut text))
            .map_err(cannot)?;
    }
    if text.trim().is_empty() {
        return Err(Error::Ptx(format!(
            "{} is empty: no PTX module in it",
            path.display()
        )));
    }
    Ok(text)
}

impl Program {
    /// Parses and decodes `text` (leaked: a program lives as long as the process).
    pub fn load(text: &'static str, origin: String) -> Result<&'static Program> {
        let module = parse::parse(text).map_err(|e| Error::Ptx(format!("{origin}: {e}")))?;
        // The module's variables are allocated on every device that runs it: refused here,
        // before any allocation, if this machine cannot hold them.
        let needed = module
            .globals
            .iter()
            .map(|g| g.bytes)
            .fold(0, u64::saturating_add);
        if needed > 64 << 20 {
            let free = memory_for_variables();
            if needed > free {
                return Err(Error::OutOfMemory {
                    what: format!("{origin}'s .global and .const variables"),
                    needed,
                    free,
                });
            }
        }
        // Module-scope shared variables, then each function's own (a `__shared__` array
        // declared in a kernel): one allocation per block each.
        let scoped = module
            .functions
            .iter()
            .flat_map(|f| f.shared.iter().map(move |v| (v, Some(f.name))));
        let shared: Vec<SharedSlot> = module
            .shared
            .iter()
            .map(|v| (v, None))
            .chain(scoped)
            .map(|(v, function)| SharedSlot {
                name: v.name,
                bytes: v.bytes,
                align: v.align,
                function,
            })
            .collect();
        let linked = decode::ModuleRef {
            functions: &module.functions,
            globals: &module.globals,
            broken: &module.broken,
            shared: &shared,
            files: &module.files,
        };
        // Each entry decodes on its own: one that uses what the backend does not implement (or
        // whose text cannot be read) is refused at its launch, naming it; the others run.
        let mut kernels: HashMap<&'static str, std::result::Result<Kernel, String>> = module
            .functions
            .iter()
            .filter(|f| f.entry)
            .map(|f| (f.name, decode::decode(f, &linked)))
            .collect();
        for b in module.broken.iter().filter(|b| b.entry) {
            let why = format!("kernel `{}`, {}", b.name, b.error);
            kernels.insert(b.name, Err(why));
        }
        Ok(Box::leak(Box::new(Program {
            origin,
            target: module.target,
            shared,
            globals: module.globals.clone(),
            kernels,
            printed: Mutex::default(),
        })))
    }

    /// What the module's kernels printed with `printf` since the last call, in block and
    /// thread order ([`Printed::sorted`]).
    pub fn take_printed(&self) -> Printed {
        std::mem::take(&mut *self.printed.lock().unwrap()).sorted()
    }

    /// The module in the file at `path`, loaded once per process.
    pub fn file(path: &Path) -> Result<&'static Program> {
        static CACHE: Mutex<Vec<(PathBuf, &'static Program)>> = Mutex::new(Vec::new());
        let mut cache = CACHE.lock().unwrap();
        if let Some((_, p)) = cache.iter().find(|(q, _)| q == path) {
            return Ok(p);
        }
        let text = read_module_text(path)?;
        let program = Program::load(Box::leak(text.into_boxed_str()), path.display().to_string())?;
        cache.push((path.to_path_buf(), program));
        Ok(program)
    }

    /// The decoded entry `name`, or why it cannot run.
    pub fn kernel(&self, name: &str) -> Result<&Kernel> {
        match self.kernels.get(name) {
            Some(Ok(k)) => Ok(k),
            Some(Err(why)) => Err(Error::Ptx(format!("{}: {why}", self.origin))),
            // The host knows the kernel, so the module is older than the kernel's source.
            None => Err(Error::Ptx(format!(
                "{} has no entry point `{name}`: the module was built before this kernel was; rebuild it (`cargo build --release`, which every `cargo xtask` command runs, rebuilds the embedded modules; a `KERNELS_PTX` file, the command that wrote it)",
                self.origin
            ))),
        }
    }

    /// Every entry point, with the reason if it cannot run.
    pub fn entries(
        &self,
    ) -> impl Iterator<Item = (&'static str, std::result::Result<&Kernel, &str>)> {
        self.kernels
            .iter()
            .map(|(n, k)| (*n, k.as_ref().map_err(String::as_str)))
    }
}

/// The memory the emulator may give a module's variables: what the host has free, within this
/// process's address-space limit (`ulimit -v`).
fn memory_for_variables() -> u64 {
    let free = Emulator::new().free_memory();
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0;
    if got && limit.rlim_cur != libc::RLIM_INFINITY {
        free.min(limit.rlim_cur)
    } else {
        free
    }
}

/// The largest PTX file `KERNELS_PTX` may name (the kernels' own modules are under 4 MiB).
const MAX_PTX_FILE: u64 = 256 << 20;

/// The PTX device: the emulator's memory and scheduler, a program, and what launches executed.
pub struct PtxDevice {
    emu: std::sync::Arc<Emulator>,
    program: &'static Program,
    instructions: AtomicU64,
    threads: AtomicU64,
    /// The program's `.global`/`.const` variables on this device.
    globals: Vec<Allocation>,
}

impl PtxDevice {
    /// A device running `program`.
    pub fn new(program: &'static Program) -> Self {
        let emu = std::sync::Arc::new(Emulator::new());
        // The module's variables, in this device's memory (checked like any buffer), with
        // their initial values.
        let globals = program
            .globals
            .iter()
            .map(|v| {
                let what = || format!("module variable `{}`", v.name);
                let mut memory = Allocation::zeroed(&emu, v.bytes as usize, ("u8", 1), 1, what)
                    .expect("a module variable fits the host's memory");
                memory.bytes_mut()[..v.init.len()].copy_from_slice(&v.init);
                memory
            })
            .collect();
        Self {
            emu,
            program,
            instructions: AtomicU64::new(0),
            threads: AtomicU64::new(0),
            globals,
        }
    }

    /// The emulator that holds the memory and runs the blocks.
    pub fn emulator(&self) -> &std::sync::Arc<Emulator> {
        &self.emu
    }

    /// The program.
    pub fn program(&self) -> &'static Program {
        self.program
    }

    /// PTX instructions and threads executed since the device was made (guarded-off
    /// instructions count: they are issued).
    pub fn executed(&self) -> (u64, u64) {
        (
            self.instructions.load(Ordering::Relaxed),
            self.threads.load(Ordering::Relaxed),
        )
    }

    /// Per kernel, the executions per instruction that launches of this device's program
    /// counted ([`Observed::instruction_mix`](::emu::Observed::instruction_mix), with
    /// [`LaunchOptions::instruction_mix`](::emu::LaunchOptions::instruction_mix) on), with each
    /// instruction's class and site, in kernel-name order.
    pub fn mix(&self, observed: &::emu::Observed) -> Vec<KernelMix> {
        observed
            .instruction_mix
            .iter()
            .map(|(&name, counts)| {
                let kernel = self.program.kernel(name).expect("it ran");
                KernelMix {
                    kernel: name,
                    instruction_classes: &kernel.classes,
                    on_products: &kernel.on_products,
                    per_instruction: counts.clone(),
                    sites: kernel.sites,
                }
            })
            .collect()
    }

    /// Launches entry `name` with the driver's parameter array (`params[i]` points at argument
    /// `i`, of `sizes[i]` bytes), with the emulator's defaults.
    ///
    /// # Safety
    /// Each pointer must point at `sizes[i]` readable bytes; pointer arguments must be
    /// addresses of this device's buffers (the emulator checks every access through them).
    pub unsafe fn launch(
        &self,
        name: &'static str,
        cfg: &LaunchConfig,
        params: &[*mut c_void],
        sizes: &[usize],
    ) -> Result<LaunchCounters> {
        let options = self.emu.defaults();
        // SAFETY: the caller's contract.
        unsafe { self.launch_with(name, cfg, params, sizes, &options) }
            .map(|(counters, _)| counters)
    }

    /// [`launch`](Self::launch) with `options` instead of the emulator's defaults; returns,
    /// beside the counters, what the launch observed (as [`Emulator::launch_with`], with the
    /// executions per instruction when `options` ask for them).
    ///
    /// # Safety
    /// As for [`launch`](Self::launch).
    pub unsafe fn launch_with(
        &self,
        name: &'static str,
        cfg: &LaunchConfig,
        params: &[*mut c_void],
        sizes: &[usize],
        options: &::emu::LaunchOptions,
    ) -> Result<(LaunchCounters, ::emu::Observed)> {
        let kernel = self.program.kernel(name)?;
        if params.len() != kernel.params.len() || sizes.len() != params.len() {
            return Err(Error::Ptx(format!(
                "kernel `{name}` takes {} parameters in {}, the launch passes {}",
                kernel.params.len(),
                self.program.origin,
                params.len()
            )));
        }
        if let Some([x, y, z]) = kernel.maxntid {
            // ptxas makes the product the entry's maxThreadsPerBlock; the driver refuses more.
            let most = u64::from(x) * u64::from(y) * u64::from(z);
            if cfg.block.volume() > most {
                return Err(Error::Ptx(format!(
                    "kernel `{name}` declares .maxntid {x}, {y}, {z} ({most} threads) in {}, the launch asks for a block of {} x {} x {}",
                    self.program.origin, cfg.block.x, cfg.block.y, cfg.block.z
                )));
            }
        }
        let mut buffer = vec![0u8; kernel.param_bytes];
        for (k, (p, (&ptr, &size))) in kernel
            .params
            .iter()
            .zip(params.iter().zip(sizes))
            .enumerate()
        {
            if size != p.bytes as usize {
                return Err(Error::Ptx(format!(
                    "kernel `{name}` parameter {k} (`{}`, .{}) is {} bytes in the PTX, the launch passes {size}",
                    p.name, p.ty, p.bytes
                )));
            }
            let at = p.offset as usize;
            // SAFETY: the caller's contract: `size` readable bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr as *const u8, buffer[at..].as_mut_ptr(), size)
            };
        }
        let recording = options.instruction_mix;
        let counts: Vec<AtomicU64> = if recording {
            (0..kernel.code.len()).map(|_| AtomicU64::new(0)).collect()
        } else {
            Vec::new()
        };
        let globals: Vec<u64> = self
            .globals
            .iter()
            .map(|m| m.as_ptr().addr() as u64)
            .collect();
        let env = Env {
            kernel,
            globals: &globals,
            program: self.program,
            params: &buffer,
            instructions: &self.instructions,
            counts: recording.then_some(&counts[..]),
            gpu_stack: options.gpu_stack_bytes,
        };
        let (counters, mut observed) = self.emu.launch_with(name, cfg, options, || env.thread())?;
        self.threads
            .fetch_add(cfg.grid.volume() * cfg.block.volume(), Ordering::Relaxed);
        if recording {
            let executed = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
            observed.instruction_mix.insert(name, executed);
        }
        Ok((counters, observed))
    }
}

/// One kernel's dynamic instruction mix.
pub struct KernelMix {
    pub kernel: &'static str,
    /// Per instruction, its class and whether it computes on a tensor-core product's result
    /// (`Kernel::classes`, `Kernel::on_products`).
    pub instruction_classes: &'static [Class],
    pub on_products: &'static [bool],
    /// Executions per instruction.
    pub per_instruction: Vec<u64>,
    /// The instructions' sites.
    pub sites: &'static [kernels::cuda::emu::PtxSite],
}

impl KernelMix {
    /// Executions per class, in class order (the classes executed).
    pub fn classes(&self) -> Vec<(Class, u64)> {
        let mut classes: HashMap<Class, u64> = HashMap::new();
        for (&class, &n) in self.instruction_classes.iter().zip(&self.per_instruction) {
            *classes.entry(class).or_default() += n;
        }
        let mut classes: Vec<(Class, u64)> = classes.into_iter().collect();
        classes.sort();
        classes
    }

    /// Executions of the instructions that compute on a tensor-core product's result, of
    /// `class` only where given.
    pub fn on_products(&self, class: Option<Class>) -> u64 {
        self.per_instruction
            .iter()
            .zip(self.on_products)
            .enumerate()
            .filter(|&(i, (_, &on))| on && class.is_none_or(|c| self.instruction_classes[i] == c))
            .map(|(_, (&n, _))| n)
            .sum()
    }
}

/// What every thread of one launch shares.
struct Env<'a> {
    kernel: &'a Kernel,
    /// The device addresses of the module's variables.
    globals: &'a [u64],
    program: &'static Program,
    params: &'a [u8],
    instructions: &'a AtomicU64,
    counts: Option<&'a [AtomicU64]>,
    /// [`LaunchOptions::gpu_stack_bytes`](::emu::LaunchOptions::gpu_stack_bytes).
    gpu_stack: u64,
}

impl Env<'_> {
    /// The body of one simulated thread: fill the slots the thread owns, run, count.
    fn thread(&self) {
        emu::with(|gpu| {
            let mut r = self.kernel.template.clone();
            let base = gpu.dynamic_shared() as usize;
            let pos = gpu.position();
            let (t, b) = (pos.thread, pos.block_dim);
            let linear = t.x + b.x * (t.y + b.y * t.z);
            let dim = |d: kernels::cuda::emu::Dim3, c: u8| match c {
                0 => d.x,
                1 => d.y,
                _ => d.z,
            };
            for &(slot, fill) in &self.kernel.fills {
                r[slot as usize] = match fill {
                    Fill::Tid(c) => u64::from(dim(pos.thread, c)),
                    Fill::Ntid(c) => u64::from(dim(pos.block_dim, c)),
                    Fill::Ctaid(c) => u64::from(dim(pos.block, c)),
                    Fill::Nctaid(c) => u64::from(dim(pos.grid_dim, c)),
                    Fill::LaneId => u64::from(linear % 32),
                    Fill::WarpId => u64::from(linear / 32),
                    Fill::Zero | Fill::Carry => 0,
                    Fill::LaneMask(cmp) => u64::from(lane_mask(cmp, linear % 32)),
                    Fill::SharedBase => base as u64,
                    Fill::GlobalVar(i) => self.globals[i],
                    Fill::Reserved(which) => {
                        // One array per block, whichever thread asks first: keyed by a static's
                        // address, which no module variable shares.
                        static KEY: u8 = 0;
                        let array = kernels::cuda::emu::SharedArray {
                            name: "the driver's reserved shared memory (%reserved_smem_offset_*)",
                            elem: "b8",
                            elem_bytes: 1,
                            zeroed: true,
                        };
                        let bytes = Reserved::BYTES as usize;
                        let p = gpu.static_shared(&KEY as *const u8 as usize, bytes, 16, array);
                        u64::from(which.value((p as usize - base) as u32))
                    }
                    Fill::SharedVar(i) => {
                        let v = &self.program.shared[i];
                        match v.bytes {
                            None => 0,
                            Some(bytes) => {
                                let key = v as *const SharedSlot as usize;
                                let array = kernels::cuda::emu::SharedArray {
                                    name: v.name,
                                    elem: "b8",
                                    elem_bytes: 1,
                                    zeroed: false,
                                };
                                let p =
                                    gpu.static_shared(key, bytes as usize, v.align as usize, array);
                                (p as usize - base) as u64
                            }
                        }
                    }
                };
            }
            let acc_tokens = if self.kernel.acc_uses.is_empty() {
                Vec::new()
            } else {
                vec![0; r.len()]
            };
            // Local memory: the entry's frame at `.local` address 0, callees' frames above it.
            let local = vec![0u8; self.kernel.local_bytes].into_boxed_slice();
            for &(slot, offset) in &self.kernel.entry_locals {
                r[slot as usize] = u64::from(offset);
            }
            let mut thread = Thread {
                kernel: self.kernel,
                gpu,
                r,
                params: self.params,
                base,
                lane: linear % 32,
                acc_tokens,
                acc: Vec::new(),
                local_top: self.kernel.entry_frame as usize,
                local,
                pmem: vec![0u8; self.kernel.pmem_bytes],
                calls: Vec::new(),
                saved: Vec::new(),
                saved_pmem: Vec::new(),
                globals: self.globals,
                program: self.program,
                gpu_stack: self.gpu_stack,
            };
            let (executed, flops) = match self.counts {
                None => thread.run::<false>(&[]),
                Some(counts) => thread.run::<true>(counts),
            };
            gpu.count_flops(flops);
            self.instructions.fetch_add(executed, Ordering::Relaxed);
        })
    }
}

/// One simulated thread's state.
struct Thread<'a> {
    kernel: &'a Kernel,
    gpu: &'a dyn Gpu,
    r: Vec<u64>,
    params: &'a [u8],
    /// Generic address of the shared window.
    base: usize,
    lane: u32,
    /// Per slot, the token of the `wgmma` that last wrote it (0: ordinary instructions), for
    /// kernels with `wgmma`; empty otherwise.
    acc_tokens: Vec<u64>,
    /// The accumulator a `wgmma` reads and writes while this thread waits for its warpgroup.
    acc: Vec<f32>,
    /// Local memory (`.local` address `a` is `local[a]`, its generic address `&local[a]`), and
    /// the first byte past the frames on the stack now: an access beyond it is out of bounds.
    local: Box<[u8]>,
    local_top: usize,
    /// Parameter memory: calls' `.param` variables and callees' parameters.
    pmem: Vec<u8>,
    /// The calls in progress, innermost last, and what each saved of its callee's registers
    /// and parameter memory (restored at `ret`, so that a recursive call has its own).
    calls: Vec<Frame>,
    /// The stack a GPU gives a thread whose calls recurse (`cudaLimitStackSize`).
    gpu_stack: u64,
    saved: Vec<u64>,
    saved_pmem: Vec<u8>,
    /// The device addresses of the module's variables, and the program (their initial values).
    globals: &'a [u64],
    program: &'static Program,
}

/// A call in progress.
struct Frame {
    /// The `call` instruction.
    call: usize,
    /// The caller's stack top.
    local_top: usize,
}

/// `%lanemask_*` of `lane`: the lanes `l` with `l cmp lane`.
fn lane_mask(cmp: Cmp, lane: u32) -> u32 {
    let below = (1u32 << lane) - 1;
    match cmp {
        Cmp::Eq => 1 << lane,
        Cmp::Lt => below,
        Cmp::Le => below | (1 << lane),
        Cmp::Gt => !(below | (1 << lane)),
        _ => !below,
    }
}

/// The little-endian integer of `bytes` bytes at `offset` in `memory` (a parameter buffer),
/// sign-extended when `signed`.
fn read_le(memory: &[u8], offset: u32, bytes: u8, signed: bool) -> u64 {
    let (at, n) = (offset as usize, usize::from(bytes));
    let mut raw = [0u8; 8];
    raw[..n].copy_from_slice(&memory[at..at + n]);
    let v = u64::from_le_bytes(raw);
    if signed { sext(v, bytes * 8) } else { v }
}

impl Thread<'_> {
    #[inline(always)]
    fn get(&self, s: u32) -> u64 {
        self.r[s as usize]
    }

    #[inline(always)]
    fn set(&mut self, s: u32, v: u64) {
        self.r[s as usize] = v;
    }

    fn site(&self, pc: usize) -> Site {
        Site::ptx(&self.kernel.sites[pc])
    }

    /// Runs to `exit`/`ret`; returns (instructions issued, FLOPs).
    fn run<const MIX: bool>(&mut self, counts: &[AtomicU64]) -> (u64, u64) {
        let code = &self.kernel.code;
        let mut pc = 0usize;
        let (mut issued, mut flops) = (0u64, 0u64);
        loop {
            let Some(inst) = code.get(pc) else {
                panic!(
                    "kernel `{}` ran past its last instruction without `ret` or `exit`",
                    self.kernel.name
                );
            };
            let here = pc;
            pc += 1;
            issued += 1;
            // The watchdog's look, for a loop that makes no other device call (a `bra` to itself).
            if issued.is_multiple_of(PROGRESS_EVERY) {
                self.gpu.progress(self.site(here));
            }
            if MIX {
                counts[here].fetch_add(1, Ordering::Relaxed);
            }
            if inst.guard != u32::MAX && ((self.get(inst.guard) & 1 != 0) == inst.negated) {
                continue;
            }
            flops += u64::from(inst.flops);
            if !self.acc_tokens.is_empty() {
                for &s in &self.kernel.acc_uses[here] {
                    self.gpu
                        .wgmma_read(self.acc_tokens[s as usize], self.site(here));
                }
            }
            match &inst.op {
                Op::Mov { d, a, mask } => self.set(*d, self.get(*a) & mask),
                Op::Pack { d, parts, n, bits } => self.pack(d, parts, n, bits),
                Op::Unpack { ds, s, n, bits } => self.unpack(ds, s, n, bits),
                Op::Int { op, ty, d, a, b } => {
                    let v = self.int(*op, *ty, self.get(*a), self.get(*b), here);
                    self.set(*d, v);
                }
                Op::Mad(args) => self.mad(args, here),
                Op::IntUnary { op, ty, d, a } => self.int_unary(op, ty, d, a),
                Op::Bfe { ty, d, a, pos, len } => self.bfe(ty, d, a, pos, len),
                Op::Float(args) => self.float(args),
                Op::Fma(args) => self.fma(args),
                Op::FloatUnary(args) => self.float_unary(args),
                Op::Bfi(args) => self.bfi(args),
                Op::Prmt { mode, d, a, b, c } => self.prmt(mode, d, a, b, c),
                Op::Lop3(args) => self.lop3(args),
                &Op::Shf {
                    left,
                    clamp,
                    d,
                    a,
                    b,
                    c,
                } => self.shf(left, clamp, d, a, b, c),
                Op::Bfind { ty, shiftamt, d, a } => self.bfind(ty, shiftamt, d, a),
                Op::Testp { test, ty, d, a } => self.testp(test, ty, d, a),
                Op::Carry(args) => self.carry(args),
                Op::Setp(args) => self.setp(args),
                Op::Selp { d, a, b, p } => self.selp(d, a, b, p),
                Op::Cvt {
                    conv,
                    ftz,
                    sat,
                    d,
                    a,
                } => {
                    let v = cvt(*conv, *ftz, *sat, self.get(*a));
                    self.set(*d, v);
                }
                Op::Cvt2 { conv, d, a, b } => self.cvt2(conv, d, a, b),
                Op::CvtaShared { to, d, a } => self.cvta_shared(to, d, a),
                Op::LdParam {
                    d,
                    offset,
                    bytes,
                    signed,
                } => self.set(*d, read_le(self.params, *offset, *bytes, *signed)),
                Op::LdPmem {
                    d,
                    offset,
                    bytes,
                    signed,
                } => self.set(*d, read_le(&self.pmem, *offset, *bytes, *signed)),
                Op::StPmem { a, offset, bytes } => self.st_pmem(*a, *offset, *bytes),
                Op::LdPmemV(v) => self.ld_pmem_v(v),
                Op::StPmemV(v) => self.st_pmem_v(v),
                Op::Ld(m) => self.load(m, here),
                Op::St(m) => self.store(m, here),
                Op::Atom(a) => self.atom(a, here),
                Op::CvtaLocal { to, d, a } => self.cvta_local(to, d, a),
                Op::Bra { target } => pc = *target as usize,
                Op::Call(c) => {
                    self.call(c, here);
                    pc = c.target as usize;
                }
                Op::Ret => match self.ret() {
                    Some(back) => pc = back,
                    None => return (issued, flops),
                },
                Op::Exit => return (issued, flops),
                Op::Trap => std::panic::resume_unwind(Box::new(::emu::Trapped(self.site(here)))),
                Op::AssertFail(a) => self.assert_fail(a, here),
                Op::Printf(p) => self.printf(p, here),
                Op::Bar { site } => self.gpu.sync_threads(*site),
                Op::BarById { id, site } => match self.get(*id) as u32 {
                    0 => self.gpu.sync_threads(*site),
                    other => std::panic::resume_unwind(Box::new(format!(
                        "named barrier {other} ({}): only barrier 0 is implemented by the PTX backend",
                        self.site(here)
                    ))),
                },
                Op::Half2(args) => self.half2(args),
                Op::BarRed(args) => self.bar_red(args),
                Op::Shfl(args) => self.shfl(args, here),
                Op::WarpReduce(args) => self.warp_reduce(args, here),
                Op::ActiveMask { d } => {
                    let op = Collective::ActiveMask;
                    let result = self.gpu.warp_collective(u32::MAX, op, self.site(here));
                    self.set(*d, u64::from(result[0]));
                }
                Op::WarpSync { mask } => self.warp_sync(mask, here),
                Op::LdMatrix(args) => self.ld_matrix(args, here),
                Op::Mma(m) => self.mma(m, here),
                Op::CpAsync(args) => self.cp_async(args, here),
                Op::CpCommit => self.gpu.async_copy(AsyncCopy::CommitGroup, self.site(here)),
                Op::CpWait { pending } => self
                    .gpu
                    .async_copy(AsyncCopy::WaitGroup { pending: *pending }, self.site(here)),
                Op::Mbarrier(args) => self.mbarrier(args, here),
                Op::Tma(args) => self.tma(args, here),
                Op::Wgmma(w) => self.wgmma(w, here),
                Op::WgmmaSync(op) => self.gpu.wgmma_sync(*op, self.site(here)),
                Op::Nop => {}
            }
        }
    }
}

impl Thread<'_> {
    /// [`Op::StPmem`]: a store to the thread's parameter or local frame.
    #[inline(always)]
    fn st_pmem(&mut self, a: decode::Slot, offset: u32, bytes: u8) {
        let at = offset as usize;
        let v = self.get(a).to_le_bytes();
        self.pmem[at..at + bytes as usize].copy_from_slice(&v[..bytes as usize]);
    }

    /// [`Op::LdPmemV`]: a vector load from the frame; a `_` lane (`u32::MAX`) is not written.
    #[inline(always)]
    fn ld_pmem_v(&mut self, v: &decode::PmemVector) {
        for k in 0..u32::from(v.n) {
            let at = v.offset + k * u32::from(v.bytes);
            if v.regs[k as usize] != u32::MAX {
                let x = read_le(&self.pmem, at, v.bytes, v.signed);
                self.set(v.regs[k as usize], x);
            }
        }
    }

    /// [`Op::StPmemV`]: a vector store to the frame.
    #[inline(always)]
    fn st_pmem_v(&mut self, v: &decode::PmemVector) {
        for k in 0..usize::from(v.n) {
            let at = v.offset as usize + k * usize::from(v.bytes);
            let x = self.get(v.regs[k]).to_le_bytes();
            self.pmem[at..at + usize::from(v.bytes)].copy_from_slice(&x[..usize::from(v.bytes)]);
        }
    }
}

impl Thread<'_> {
    fn int(&self, op: IntOp, t: Int, a: u64, b: u64, here: usize) -> u64 {
        let (x, y) = (norm(a, t), norm(b, t));
        let w = u32::from(t.bits);
        let m = mask(t.bits);
        let v = match op {
            IntOp::Add => x.wrapping_add(y),
            IntOp::Sub => x.wrapping_sub(y),
            IntOp::MulLo => x.wrapping_mul(y),
            IntOp::MulHi => {
                if t.signed {
                    ((i128::from(x as i64) * i128::from(y as i64)) >> w) as u64
                } else {
                    ((u128::from(x) * u128::from(y)) >> w) as u64
                }
            }
            // The full 2w-bit product (w <= 32, checked at decode).
            IntOp::MulWide => return x.wrapping_mul(y) & mask(t.bits * 2),
            IntOp::Div | IntOp::Rem => {
                if y & m == 0 {
                    panic!(
                        "integer division by zero at {} (the result is unspecified in PTX)",
                        self.site(here)
                    );
                }
                match (op, t.signed) {
                    (IntOp::Div, true) => (x as i64).wrapping_div(y as i64) as u64,
                    (IntOp::Div, false) => x / y,
                    (_, true) => (x as i64).wrapping_rem(y as i64) as u64,
                    (_, false) => x % y,
                }
            }
            IntOp::Min | IntOp::Max => {
                let less = if t.signed {
                    (x as i64) < (y as i64)
                } else {
                    x < y
                };
                if less == (op == IntOp::Min) { x } else { y }
            }
            IntOp::And => x & y,
            IntOp::Or => x | y,
            IntOp::Xor => x ^ y,
            // Shift amounts are unsigned and clamp at the width.
            IntOp::Shl => {
                let s = b & 0xffff_ffff;
                if s >= u64::from(w) { 0 } else { x << s }
            }
            IntOp::Shr => {
                let s = (b & 0xffff_ffff).min(u64::from(w));
                if t.signed {
                    ((x as i64) >> s.min(63)) as u64
                } else if s >= u64::from(w) {
                    0
                } else {
                    x >> s
                }
            }
        };
        v & m
    }

    /// The generic address and checked access of `m` at instruction `here`.
    fn access(&self, m: &Mem, here: usize, access: Access) -> usize {
        let a = self.get(m.addr).wrapping_add(m.offset as u64) as usize;
        let bytes = usize::from(m.elem) * usize::from(m.n);
        self.checked(m.space, a, bytes, here, access)
    }

    /// [`Thread::access`] of `bytes` at address `a` of `space`.
    fn checked(&self, space: Space, a: usize, bytes: usize, here: usize, access: Access) -> usize {
        let site = self.site(here);
        match space {
            Space::Global => {
                self.gpu.global_access(a, bytes, access, site);
                a
            }
            Space::Shared => {
                let g = self.base.wrapping_add(a);
                self.gpu.shared_access(g, bytes, access, site);
                g
            }
            Space::Local => self.local_access(a, bytes, here),
            Space::Generic => {
                if a.wrapping_sub(self.base) < SHARED_WINDOW {
                    self.gpu.shared_access(a, bytes, access, site);
                } else if a.wrapping_sub(self.local.as_ptr() as usize) < self.local.len() {
                    return self.local_access(a - self.local.as_ptr() as usize, bytes, here);
                } else {
                    self.gpu.global_access(a, bytes, access, site);
                }
                a
            }
        }
    }

    /// The generic address of `.local` address `a`, checked: inside the frames on the stack
    /// (the thread's own memory, so nothing races), aligned to the width.
    fn local_access(&self, a: usize, bytes: usize, here: usize) -> usize {
        if a.checked_add(bytes).is_none_or(|end| end > self.local_top) {
            panic!(
                "out-of-bounds local memory access: {bytes} bytes at .local address {a:#x}, past the {} bytes of this thread's stack frames, at {}",
                self.local_top,
                self.site(here)
            );
        }
        if !a.is_multiple_of(bytes.min(16).next_power_of_two()) {
            panic!(
                "misaligned local memory access: {bytes} bytes at .local address {a:#x}, at {}",
                self.site(here)
            );
        }
        self.local.as_ptr() as usize + a
    }

    /// `call`: the callee's registers and parameter memory saved, the arguments copied in, its
    /// frame opened on the local stack.
    fn call(&mut self, c: &Call, here: usize) {
        if self.calls.len() >= MAX_CALL_DEPTH {
            panic!(
                "calls nested more than {MAX_CALL_DEPTH} deep (runaway recursion?) calling `{}` at {}",
                c.callee,
                self.site(here)
            );
        }
        let (start, len) = (c.regs.0 as usize, c.regs.1 as usize);
        self.saved.extend_from_slice(&self.r[start..start + len]);
        let (from, to) = (c.pmem.0 as usize, c.pmem.1 as usize);
        self.saved_pmem.extend_from_slice(&self.pmem[from..to]);
        for &(src, dst, bytes) in &c.args {
            let (src, dst) = (src as usize, dst as usize);
            self.pmem.copy_within(src..src + bytes as usize, dst);
        }
        let frame = self.local_top.next_multiple_of(c.frame.1.max(1) as usize);
        if frame + c.frame.0 as usize > self.local.len() {
            panic!(
                "local memory exhausted calling `{}` at {} ({} bytes of stack)",
                c.callee,
                self.site(here),
                self.local.len()
            );
        }
        let top = frame + c.frame.0 as usize;
        if top as u64 > self.gpu_stack && self.recursing(c.callee) {
            panic!(
                "stack overflow on a GPU: calls nested {} deep, `{}` recursing, take {top} bytes of local frames per thread calling it at {}, more than the {} bytes of stack a GPU gives a thread of a recursive kernel (cudaLimitStackSize: ptxas cannot size the stack of a call graph with a cycle); a GPU faults here. Recurse less deep, or raise the limit with cudaDeviceSetLimit and {} to match",
                self.calls.len() + 1,
                c.callee,
                self.site(here),
                self.gpu_stack,
                ::emu::GPU_STACK_VAR
            );
        }
        for &(slot, offset) in &c.locals {
            self.set(slot, (frame + offset as usize) as u64);
        }
        self.calls.push(Frame {
            call: here,
            local_top: self.local_top,
        });
        self.local_top = frame + c.frame.0 as usize;
    }

    /// Whether `callee` is already on the stack of calls: a recursion, whose depth ptxas cannot
    /// bound, so that the thread's stack is `cudaLimitStackSize`.
    fn recursing(&self, callee: &str) -> bool {
        self.calls
            .iter()
            .any(|f| matches!(&self.kernel.code[f.call].op, Op::Call(c) if c.callee == callee))
    }

    /// `ret` from a callee: its return values to the caller's variables, its saved state back;
    /// the instruction after the call, or `None` at the entry's `ret`.
    fn ret(&mut self) -> Option<usize> {
        let frame = self.calls.pop()?;
        let kernel: &Kernel = self.kernel;
        let Op::Call(c) = &kernel.code[frame.call].op else {
            unreachable!("a frame is pushed by a call")
        };
        // The values first (the callee's parameter memory is restored below, and a recursive
        // callee's is the caller's).
        let values: Vec<u8> = c
            .rets
            .iter()
            .flat_map(|&(src, _, bytes)| self.pmem[src as usize..(src + bytes) as usize].to_vec())
            .collect();
        let (start, len) = (c.regs.0 as usize, c.regs.1 as usize);
        let at = self.saved.len() - len;
        self.r[start..start + len].copy_from_slice(&self.saved[at..]);
        self.saved.truncate(at);
        let (from, to) = (c.pmem.0 as usize, c.pmem.1 as usize);
        let at = self.saved_pmem.len() - (to - from);
        self.pmem[from..to].copy_from_slice(&self.saved_pmem[at..]);
        self.saved_pmem.truncate(at);
        let mut k = 0;
        for &(_, dst, bytes) in &c.rets {
            let (dst, bytes) = (dst as usize, bytes as usize);
            self.pmem[dst..dst + bytes].copy_from_slice(&values[k..k + bytes]);
            k += bytes;
        }
        self.local_top = frame.local_top;
        Some(frame.call + 1)
    }

    /// `atom` / `red`: checked as an atomic access, then performed with the host's atomics
    /// (blocks run in parallel on the host's cores, as on the GPU's SMs).
    fn atom(&mut self, a: &Atom, here: usize) {
        let at = self.get(a.addr).wrapping_add(a.offset as u64) as usize;
        let bytes = match a.ty {
            AtomType::Int(t) => usize::from(t.bits / 8),
            AtomType::Float(Float::F32) => 4,
            AtomType::Float(Float::F64) => 8,
            AtomType::Half { pair, .. } => 2 + 2 * usize::from(pair),
        };
        let site = self.site(here);
        let (addr, shared) = match a.space {
            Space::Shared => (self.base.wrapping_add(at), true),
            Space::Global => (at, false),
            _ if at.wrapping_sub(self.base) < SHARED_WINDOW => (at, true),
            _ if at.wrapping_sub(self.local.as_ptr() as usize) < self.local.len() => {
                panic!("an atomic on local memory is undefined in PTX, at {site}")
            }
            _ => (at, false),
        };
        self.gpu.atomic_access(addr, bytes, shared, site);
        let b = self.get(a.b);
        let c = if a.c == u32::MAX { 0 } else { self.get(a.c) };
        // SAFETY: the emulator checked `bytes` at `addr`, aligned to them, in a live buffer or
        // this block's shared memory.
        let old = unsafe {
            if bytes == 2 {
                let cell = AtomicU16::from_ptr(addr as *mut u16);
                let f = |old: u16| atom_op(a.op, a.ty, u64::from(old), b, c) as u16;
                u64::from(
                    cell.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |o| Some(f(o)))
                        .unwrap(),
                )
            } else if bytes == 4 {
                let cell = AtomicU32::from_ptr(addr as *mut u32);
                let f = |old: u32| atom_op(a.op, a.ty, u64::from(old), b, c) as u32;
                u64::from(
                    cell.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |o| Some(f(o)))
                        .unwrap(),
                )
            } else {
                let cell = AtomicU64::from_ptr(addr as *mut u64);
                let f = |old: u64| atom_op(a.op, a.ty, old, b, c);
                cell.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |o| Some(f(o)))
                    .unwrap()
            }
        };
        if a.d != u32::MAX {
            self.set(a.d, old);
        }
    }

    /// [`Op::AssertFail`]: the launch ends as a failed device-side `assert` ends it on a GPU
    /// (`cudaErrorAssert`), reported as the thread's panic with the assertion's own words.
    fn assert_fail(&self, a: &AssertFail, here: usize) -> ! {
        let pointer = |at: u32| read_le(&self.pmem, at, 8, false);
        let line = read_le(&self.pmem, a.line, 4, false);
        let message = format!(
            "device-side assertion `{}` failed at {}:{line} in `{}` ({}; a GPU ends the launch with cudaErrorAssert)",
            self.c_string(pointer(a.message)),
            self.c_string(pointer(a.file)),
            self.c_string(pointer(a.function)),
            self.site(here),
        );
        std::panic::resume_unwind(Box::new(message))
    }

    /// [`Op::Printf`]: the format string and the argument buffer read (every read checked as a
    /// load of the thread's is), the text kept in the program's [`Printed`], the number of
    /// arguments returned.
    fn printf(&mut self, p: &decode::Printf, here: usize) {
        let format = self.c_string(read_le(&self.pmem, p.format, 8, false));
        let buffer = read_le(&self.pmem, p.args, 8, false) as usize;
        let mut arg = |offset: usize, bytes: usize| {
            let at = self.checked(Space::Generic, buffer + offset, bytes, here, Access::Read);
            let mut raw = [0u8; 8];
            // SAFETY: `checked` found `bytes` readable bytes at `at` (or failed the launch).
            unsafe { std::ptr::copy_nonoverlapping(at as *const u8, raw.as_mut_ptr(), bytes) };
            Ok(u64::from_le_bytes(raw))
        };
        let (text, consumed) = printf::format(&format, &mut arg, &|s| self.c_string(s))
            .unwrap_or_else(|e| panic!("printf at {}: {e}", self.site(here)));
        let pos = self.gpu.position();
        let dim = |d: kernels::cuda::emu::Dim3| [d.x, d.y, d.z];
        let mut printed = self.program.printed.lock().unwrap();
        if printed.calls.len() < Printed::LINES {
            printed.calls.push((dim(pos.block), dim(pos.thread), text));
        } else {
            printed.dropped += 1;
        }
        drop(printed);
        if let Some(ret) = p.ret {
            let at = ret as usize;
            self.pmem[at..at + 4].copy_from_slice(&(consumed as u32).to_le_bytes());
        }
    }

    /// The C string at generic address `p`, read from the initial value of the module variable
    /// that holds it (`$str`: what `assert` passes are the module's constant strings), or the
    /// address when no module variable holds it.
    fn c_string(&self, p: u64) -> String {
        let held = self
            .globals
            .iter()
            .zip(&self.program.globals)
            .find_map(|(&at, v)| {
                (p >= at && p - at < v.bytes)
                    .then(|| &v.init[(p - at).min(v.init.len() as u64) as usize..])
            });
        match held {
            Some(bytes) => {
                let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
                String::from_utf8_lossy(&bytes[..end]).into_owned()
            }
            None => format!("(a string at {p:#x})"),
        }
    }

    fn load(&mut self, m: &Mem, here: usize) {
        let at = self.access(m, here, Access::Read);
        let elem = usize::from(m.elem);
        for k in 0..usize::from(m.n) {
            let p = at + k * elem;
            // SAFETY: the emulator checked `n * elem` bytes at `at` (a live buffer or this
            // block's shared memory) just above.
            let v = unsafe {
                match elem {
                    1 => u64::from((p as *const u8).read()),
                    2 => u64::from((p as *const u16).read_unaligned()),
                    4 => u64::from((p as *const u32).read_unaligned()),
                    _ => (p as *const u64).read_unaligned(),
                }
            };
            let v = if m.signed { sext(v, m.elem * 8) } else { v };
            if m.regs[k] != u32::MAX {
                self.set(m.regs[k], v);
            }
        }
    }

    fn store(&mut self, m: &Mem, here: usize) {
        let at = self.access(m, here, Access::Write);
        let elem = usize::from(m.elem);
        for k in 0..usize::from(m.n) {
            let (p, v) = (at + k * elem, self.get(m.regs[k]));
            // SAFETY: checked as in `load`; the value is truncated to the element's width.
            unsafe {
                match elem {
                    1 => (p as *mut u8).write(v as u8),
                    2 => (p as *mut u16).write_unaligned(v as u16),
                    4 => (p as *mut u32).write_unaligned(v as u32),
                    _ => (p as *mut u64).write_unaligned(v),
                }
            }
        }
    }
}
