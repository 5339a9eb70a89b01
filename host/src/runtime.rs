//! One runtime over three backends: a CUDA GPU, the CPU emulator running the kernels' Rust
//! source, or the CPU emulator running the kernels' PTX (what the GPU runs).

use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use crate::buffer::{DeviceBuffer, Element};
use crate::gpu::Gpu;
use crate::{Error, Result};
use emu::DeviceLimits;
use emu::{Emulator, LaunchCounters, Observed};
use ptx::exec::{Program, PtxDevice};

/// Where kernels run.
pub enum Backend {
    /// The CPU emulator.
    Emulator(Arc<Emulator>),
    /// A CUDA device.
    Cuda(Gpu),
    /// The CPU emulator executing the PTX module (`KERNELS_BACKEND=ptx`).
    Ptx(PtxDevice),
}

/// The environment variable that picks the backend: `emulator`, `gpu`, `ptx`, or unset/`auto`
/// for a GPU when one is present and the emulator otherwise.
pub const BACKEND_VAR: &str = "KERNELS_BACKEND";

/// The fault-injection switch: `KERNELS_INJECT_FAULT=<kernel>` makes every launch of that PTX
/// entry point fail as an illegal address does on a GPU, with a sticky error: from then on every
/// launch in the process fails the same way, as CUDA's do until the process ends. It exists to
/// test that a run survives a fault (`cargo xtask run` isolates cases in processes), on the
/// emulator as on a GPU. `KERNELS_INJECT_FAULT=abort:<kernel>` aborts the process there instead,
/// as a crash in the driver would, and `hang:<kernel>` never returns, as a deadlocked kernel.
pub const INJECT_FAULT_VAR: &str = "KERNELS_INJECT_FAULT";

/// A launch as the runtime was asked for it: the kernel and its configuration, which a fault
/// report names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchRecord {
    /// The PTX entry point.
    pub kernel: &'static str,
    /// `<<<grid, block, shared>>>`.
    pub config: emu::LaunchConfig,
}

impl std::fmt::Display for LaunchRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (g, b) = (self.config.grid, self.config.block);
        write!(
            f,
            "{}<<<({}, {}, {}), ({}, {}, {}), {} B dynamic shared>>>",
            self.kernel, g.x, g.y, g.z, b.x, b.y, b.z, self.config.dynamic_shared
        )
    }
}

/// Distinct launches remembered between two [`take_launches`] (a timing loop repeats the same
/// few).
const LAUNCHES_KEPT: usize = 16;

std::thread_local! {
    /// The distinct launches this thread asked for since the last `take_launches`, oldest first.
    static LAUNCHES: std::cell::RefCell<Vec<LaunchRecord>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The distinct launches this thread asked for since the last call, oldest first: what a fault
/// report names (on a GPU a fault surfaces at a later call, not at the launch that caused it).
pub fn take_launches() -> Vec<LaunchRecord> {
    LAUNCHES.with(|l| std::mem::take(&mut *l.borrow_mut()))
}

/// Called by [`dispatch`] before each launch: remembers it, and fails it if the process has a
/// (injected) sticky fault.
fn before_launch(kernel: &'static str, config: &emu::LaunchConfig) -> Result<()> {
    let record = LaunchRecord {
        kernel,
        config: *config,
    };
    LAUNCHES.with(|l| {
        let mut launches = l.borrow_mut();
        if !launches.contains(&record) {
            if launches.len() == LAUNCHES_KEPT {
                launches.remove(0);
            }
            launches.push(record);
        }
    });
    injected_fault(kernel)
}

/// Loads kernels, owns device memory, launches. A clone is a view of the same device, with the
/// same launch options and observer ([`Runtime::with_options`], [`Runtime::observe`]).
#[derive(Clone)]
pub struct Runtime {
    backend: Arc<Backend>,
    /// What this runtime's emulator launches run with; `None`: the emulator's defaults. A
    /// runtime with other options is a view of the same device ([`Runtime::with_options`]).
    options: Option<emu::LaunchOptions>,
    /// Where this view's emulator launches leave what they observed ([`Runtime::observe`]);
    /// `None`: nobody asked, and it is dropped.
    observer: Option<Arc<Mutex<Observed>>>,
}

impl Runtime {
    fn new(backend: Backend) -> Self {
        Self {
            backend: Arc::new(backend),
            options: None,
            observer: None,
        }
    }

    /// The CPU emulator.
    pub fn emulator() -> Self {
        Self::new(Backend::Emulator(Arc::new(Emulator::new())))
    }

    /// The CPU emulator executing `program`'s PTX.
    pub fn ptx(program: &'static Program) -> Self {
        Self::new(Backend::Ptx(PtxDevice::new(program)))
    }

    /// The same device (its buffers are this runtime's), whose emulator launches run with this
    /// runtime's options as `change` amends them: how a caller profiles, samples, watches
    /// stores or turns a check off for the launches of an operation, which takes a runtime.
    /// A GPU ignores the options.
    pub fn with_options(&self, change: impl FnOnce(&mut emu::LaunchOptions)) -> Self {
        let mut options = self.options();
        change(&mut options);
        Self {
            backend: Arc::clone(&self.backend),
            options: Some(options),
            observer: self.observer.clone(),
        }
    }

    /// Runs `launches` on a view of this runtime and returns, beside their result, everything
    /// their emulator launches observed, merged in launch order ([`Observed`]: the profile,
    /// samples, benign races, last store and instruction mix the view's options ask for;
    /// nothing on a GPU). An operation makes several launches and returns its own result, so
    /// what they observed is gathered on the view it is handed rather than returned by it.
    /// Inside another `observe`, the outer one sees the same observations too.
    pub fn observe<R>(&self, launches: impl FnOnce(&Runtime) -> R) -> (R, Observed) {
        let (view, observer) = self.observing();
        let result = launches(&view);
        (result, self.observed(&observer))
    }

    /// A view of this runtime whose launches leave what they observed in the returned
    /// observer, for [`observed`](Self::observed): the two halves of
    /// [`observe`](Self::observe), for a type that wraps a runtime.
    pub(crate) fn observing(&self) -> (Self, Arc<Mutex<Observed>>) {
        let observer = Arc::new(Mutex::new(Observed::default()));
        let view = Self {
            backend: Arc::clone(&self.backend),
            options: self.options,
            observer: Some(Arc::clone(&observer)),
        };
        (view, observer)
    }

    /// What the launches of an [`observing`](Self::observing) view observed, passed on to this
    /// runtime's own observer if it has one.
    pub(crate) fn observed(&self, observer: &Mutex<Observed>) -> Observed {
        let observed = std::mem::take(&mut *observer.lock().unwrap());
        if self.observer.is_some() {
            self.record(observed.clone());
        }
        observed
    }

    /// Leaves what a launch observed with this view's observer (dropped without one): done by
    /// every launch of the runtime, and by a caller that launches on its emulator
    /// ([`emulated`](Self::emulated)) directly, so that [`observe`](Self::observe) sees it too.
    pub fn record(&self, observed: Observed) {
        if let Some(observer) = &self.observer {
            observer.lock().unwrap().merge(observed);
        }
    }

    /// What this runtime's emulator launches run with (the defaults on a GPU).
    pub fn options(&self) -> emu::LaunchOptions {
        self.options.unwrap_or_else(|| {
            self.emulated()
                .map_or_else(emu::LaunchOptions::default, |emu| emu.defaults())
        })
    }

    /// The PTX backend on the module the environment names (`KERNELS_PTX`, else the embedded
    /// build for `KERNELS_PTX_ARCH`, default sm_90).
    pub fn ptx_from_env() -> Result<Self> {
        Ok(Self::ptx(crate::embedded::program_from_env()?))
    }

    /// CUDA device `ordinal`, or an error that says in one sentence why there is none.
    pub fn gpu(ordinal: usize) -> Result<Self> {
        Ok(Self::new(Backend::Cuda(Gpu::new(ordinal)?)))
    }

    /// The backend named by `KERNELS_BACKEND`; with `auto` (the default) a GPU if one can be
    /// opened, else the emulator.
    ///
    /// Refuses a setting the chosen backend would silently ignore or misread: `KERNELS_PTX` on
    /// the source emulator (only the PTX backend and a GPU load PTX), and a
    /// `KERNELS_INJECT_FAULT` that names no kernel (the run it was meant to break would pass).
    pub fn from_env() -> Result<Self> {
        Self::from_env_with(None)
    }

    /// [`from_env`](Self::from_env), with the PTX backend and a GPU loading `module` (a decoded
    /// program and its text) instead of the kernels' embedded build, unless `KERNELS_PTX` names
    /// a file: how the exercises' modules run (`host::exercises`).
    pub fn from_env_with(module: Option<(&'static Program, &'static str)>) -> Result<Self> {
        check_injected_fault()?;
        let ptx = || match module {
            Some((program, _)) if ptx_file_from_env().is_none() => Ok(Self::ptx(program)),
            _ => Self::ptx_from_env(),
        };
        let gpu = || -> Result<Self> {
            Ok(Self::new(Backend::Cuda(Gpu::with_module(
                0,
                module.map(|m| m.1),
            )?)))
        };
        let backend = match std::env::var(BACKEND_VAR) {
            Ok(b) => b,
            Err(std::env::VarError::NotPresent) => String::new(),
            Err(std::env::VarError::NotUnicode(v)) => {
                return Err(Error::Config(format!(
                    "{BACKEND_VAR}={}: not UTF-8; expected emulator, ptx, gpu or auto",
                    v.to_string_lossy().escape_debug()
                )));
            }
        };
        let rt = match backend.as_str() {
            "emulator" | "emu" | "cpu" => Self::emulator(),
            "gpu" | "cuda" => gpu()?,
            "ptx" => ptx()?,
            "" | "auto" => gpu().unwrap_or_else(|_| Self::emulator()),
            other => {
                return Err(Error::Config(format!(
                    "{BACKEND_VAR}={other}: expected emulator, ptx, gpu or auto"
                )));
            }
        };
        // A refused emulator setting fails every launch; said once, here, it fails the command.
        if let Some(emu) = rt.emulated() {
            emu.check_settings()?;
        }
        if let (Backend::Emulator(_), Some(path)) = (rt.backend(), ptx_file_from_env()) {
            return Err(Error::Config(format!(
                "{}={path}: the source emulator runs the kernels' Rust, not PTX, so the file would not be used; set {BACKEND_VAR}=ptx to run it on the emulator (or unset {})",
                crate::embedded::PTX_FILE_VAR,
                crate::embedded::PTX_FILE_VAR
            )));
        }
        Ok(rt)
    }

    /// The backend.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Whether kernels run on a real GPU.
    pub fn is_gpu(&self) -> bool {
        matches!(*self.backend, Backend::Cuda(_))
    }

    /// Whether this runtime runs the Hopper kernels (GEMM step 5, attention on wgmma): the
    /// source emulator always; a GPU only if it is sm_90a (H100, H200); the PTX backend only with
    /// an sm_90a module (`KERNELS_PTX_ARCH=sm_90a`: the sm_80 and sm_90 builds have trap stubs in
    /// their place).
    pub fn has_wgmma(&self) -> bool {
        let sm90a = crate::embedded::Arch::Sm90a;
        match self.backend() {
            Backend::Emulator(_) => true,
            Backend::Cuda(gpu) => gpu.arch() == sm90a,
            Backend::Ptx(ptx) => ptx.program().target == sm90a.name(),
        }
    }

    /// A human-readable name for the device.
    pub fn device_name(&self) -> String {
        match self.backend() {
            Backend::Emulator(_) => "CPU emulator (sm_90 limits)".to_string(),
            Backend::Cuda(gpu) => gpu.name().to_string(),
            Backend::Ptx(ptx) => format!(
                "CPU emulator running PTX ({}, sm_90 limits)",
                ptx.program().origin
            ),
        }
    }

    /// The emulator a CPU backend runs on (the source emulator, or the one under the PTX
    /// backend); `None` on a GPU.
    pub fn emulated(&self) -> Option<&Arc<Emulator>> {
        match self.backend() {
            Backend::Emulator(emu) => Some(emu),
            Backend::Ptx(ptx) => Some(ptx.emulator()),
            Backend::Cuda(_) => None,
        }
    }

    /// Runs `rerun` recording the stores to `watch`: the last one (the kernel, block, thread and
    /// line), or that none reached it; `None` on a GPU, which records nothing. What a wrong
    /// output element's report adds, from a rerun of the launches that wrote it.
    pub fn last_store(
        &self,
        watch: emu::StoreWatch,
        rerun: impl FnOnce(&Runtime),
    ) -> Option<String> {
        self.emulated()?;
        let ((), observed) = self.with_options(|o| o.watch = Some(watch)).observe(rerun);
        Some(observed.last_store.map_or_else(
            || "never written by the kernel (no store reached it)".to_string(),
            |s| s.to_string(),
        ))
    }

    /// What a launch may ask for.
    pub fn limits(&self) -> DeviceLimits {
        match self.backend() {
            Backend::Emulator(emu) => *emu.limits(),
            Backend::Cuda(gpu) => gpu.limits(),
            Backend::Ptx(ptx) => *ptx.emulator().limits(),
        }
    }

    /// Free device memory in bytes; for the emulator, whose buffers are host memory, the host's
    /// available memory (see [`Emulator::free_memory`]).
    pub fn free_memory(&self) -> Result<u64> {
        match self.backend() {
            Backend::Emulator(emu) => Ok(emu.free_memory()),
            Backend::Ptx(ptx) => Ok(ptx.emulator().free_memory()),
            Backend::Cuda(gpu) => gpu.free_memory(),
        }
    }

    /// A zeroed buffer of `len` elements.
    pub fn alloc<T: Element>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        match self.backend() {
            Backend::Emulator(emu) => DeviceBuffer::emulated(emu, len),
            Backend::Ptx(ptx) => DeviceBuffer::emulated(ptx.emulator(), len),
            Backend::Cuda(gpu) => gpu.alloc(len),
        }
    }

    /// A buffer holding a copy of `data` (host to device).
    pub fn upload<T: Element>(&self, data: &[T]) -> Result<DeviceBuffer<T>> {
        let mut buf = self.alloc(data.len())?;
        self.copy_to_device(data, &mut buf)?;
        Ok(buf)
    }

    /// Copies `data` into `buf` (host to device); the lengths must match.
    pub fn copy_to_device<T: Element>(&self, data: &[T], buf: &mut DeviceBuffer<T>) -> Result<()> {
        if data.len() != buf.len() {
            return Err(Error::Shape(format!(
                "copy of {} elements into a buffer of {}",
                data.len(),
                buf.len()
            )));
        }
        match self.backend() {
            Backend::Emulator(_) | Backend::Ptx(_) => {
                let dst = buf.host_slice_mut().expect("emulated buffer");
                crate::buffer::copy_changed_pages(
                    crate::buffer::bytes_of_mut(dst),
                    crate::buffer::bytes_of(data),
                );
                Ok(())
            }
            Backend::Cuda(gpu) => gpu.copy_to_device(data, buf),
        }
    }

    /// The buffer's contents (device to host).
    pub fn download<T: Element>(&self, buf: &DeviceBuffer<T>) -> Result<Vec<T>> {
        match self.backend() {
            Backend::Emulator(_) | Backend::Ptx(_) => {
                Ok(buf.host_slice().expect("emulated buffer").to_vec())
            }
            Backend::Cuda(gpu) => gpu.download(buf),
        }
    }

    /// Waits for every launch to finish (a no-op in the emulator, whose launches are synchronous).
    pub fn synchronize(&self) -> Result<()> {
        match self.backend() {
            Backend::Emulator(_) | Backend::Ptx(_) => Ok(()),
            Backend::Cuda(gpu) => gpu.synchronize(),
        }
    }

    /// Waits for every launch, then reports any error the driver deferred: cudarc keeps the
    /// errors of the frees and synchronisations in a buffer's `drop` and returns them from a later,
    /// unrelated call. Called after a piece of work (a benchmark case) so that its errors are
    /// blamed on it and not on the next one.
    pub fn settle(&self) -> Result<()> {
        self.synchronize()?;
        if let Backend::Cuda(gpu) = self.backend() {
            gpu.deferred_error()?;
        }
        Ok(())
    }
}

/// `KERNELS_PTX`, when set to something.
fn ptx_file_from_env() -> Option<String> {
    std::env::var_os(crate::embedded::PTX_FILE_VAR)
        .filter(|p| !p.is_empty())
        .map(|p| p.to_string_lossy().into_owned())
}

/// Refuses a `KERNELS_INJECT_FAULT` that names no kernel of the embedded modules.
fn check_injected_fault() -> Result<()> {
    let target = match std::env::var(INJECT_FAULT_VAR) {
        Ok(target) => target,
        Err(std::env::VarError::NotPresent) => return Ok(()),
        Err(std::env::VarError::NotUnicode(v)) => {
            return Err(Error::Config(format!(
                "{INJECT_FAULT_VAR}={}: not UTF-8; expected a kernel's PTX entry point",
                v.to_string_lossy().escape_debug()
            )));
        }
    };
    let kernel = ["abort:", "hang:"]
        .iter()
        .find_map(|p| target.strip_prefix(p))
        .unwrap_or(&target);
    let known = |k: &str| {
        crate::embedded::Arch::ALL
            .iter()
            .any(|a| crate::embedded::entry_points(a.ptx()).contains(&k))
    };
    if target.is_empty() || known(kernel) {
        return Ok(());
    }
    Err(Error::Config(format!(
        "{INJECT_FAULT_VAR}={target}: no kernel is named `{kernel}`; expected a kernel's PTX entry point (e.g. transpose_shared), optionally after abort: or hang:"
    )))
}

/// The fault `KERNELS_INJECT_FAULT` plants: an illegal address at the named kernel's first
/// launch, sticky for the rest of the process.
fn injected_fault(kernel: &str) -> Result<()> {
    use std::sync::OnceLock;
    static TARGET: OnceLock<Option<String>> = OnceLock::new();
    static FAULTED: OnceLock<String> = OnceLock::new();
    let faulted = match FAULTED.get() {
        Some(first) => first,
        None => {
            let target = TARGET.get_or_init(|| {
                std::env::var(INJECT_FAULT_VAR)
                    .ok()
                    .filter(|k| !k.is_empty())
            });
            match target.as_deref() {
                Some(t) if t == kernel => {}
                Some(t) if t.strip_prefix("abort:") == Some(kernel) => {
                    eprintln!("{INJECT_FAULT_VAR}={t}: aborting the process at this launch");
                    std::process::abort()
                }
                Some(t) if t.strip_prefix("hang:") == Some(kernel) => loop {
                    std::thread::sleep(std::time::Duration::from_secs(1));
                },
                _ => return Ok(()),
            }
            FAULTED.get_or_init(|| kernel.to_string())
        }
    };
    Err(Error::Driver {
        call: format!("cuLaunchKernel({kernel})"),
        message: format!(
            "CUDA_ERROR_ILLEGAL_ADDRESS, an illegal memory access was encountered (injected at `{faulted}` by {INJECT_FAULT_VAR}; sticky: every later launch in this process fails)"
        ),
    })
}

/// What a launch reports: the emulator's counts, or nothing from an asynchronous GPU launch.
pub type Launched = Option<LaunchCounters>;

/// A kernel argument as the driver wants it: a pointer to its bytes.
#[doc(hidden)]
pub fn param<T>(value: &T) -> *mut c_void {
    value as *const T as *mut c_void
}

/// Launches a kernel on the runtime's backend:
/// `launch!(&rt, cfg, elementwise::vector_add_f32(a, b, c, n))`.
///
/// The arguments are named once. In the emulator arm they are passed to the kernel function
/// itself, so the compiler checks them against its signature; the GPU arm passes the same values,
/// in the same order, to the PTX entry point of the same name, and the PTX arm hands the same
/// pointer array (with each argument's size, which it checks against the entry's `.param` list)
/// to the PTX backend.
#[macro_export]
macro_rules! launch {
    ($rt:expr, $cfg:expr, $module:ident :: $kernel:ident ( $($arg:ident),* $(,)? )) => {{
        let rt: &$crate::runtime::Runtime = $rt;
        let cfg: $crate::LaunchConfig = $cfg;
        let mut params = [$($crate::runtime::param(&$arg)),*];
        let sizes: &[usize] = &[$(::core::mem::size_of_val(&$arg)),*];
        // SAFETY (of the kernel call): the op that calls `launch!` has checked sizes and shapes.
        let thread = || unsafe { ::kernels::$module::$kernel($($arg),*) };
        // SAFETY: the emulator's thread calls the kernel function itself with these arguments,
        // so the compiler checks them against its signature, and `params` and `sizes` hold the
        // same values in the same order.
        let kernel = stringify!($kernel);
        unsafe { $crate::runtime::dispatch(rt, kernel, &cfg, &thread, &mut params, sizes) }
    }};
}

/// The one launch path, behind [`launch!`] and the registry's launcher: remembers the launch
/// (for a fault report), then sends it to the backend. The emulator runs `thread` once per
/// simulated thread; the GPU gets `params`, a pointer to each argument's bytes in the entry's
/// order; the PTX backend gets the same pointers and each argument's size in `sizes`, which it
/// checks against the entry's `.param` list.
///
/// # Safety
/// `params` and `sizes` must describe the arguments `thread` passes to the kernel function, in
/// order, and every buffer they point at must be large enough for the launch: the GPU reads
/// through them unchecked.
#[doc(hidden)]
pub unsafe fn dispatch(
    rt: &Runtime,
    kernel: &'static str,
    cfg: &emu::LaunchConfig,
    thread: &(dyn Fn() + Sync),
    params: &mut [*mut c_void],
    sizes: &[usize],
) -> Result<Launched> {
    before_launch(kernel, cfg)?;
    match rt.backend() {
        Backend::Emulator(emu) => {
            let (counters, observed) = emu.launch_with(kernel, cfg, &rt.options(), thread)?;
            rt.record(observed);
            Ok(Some(counters))
        }
        // SAFETY: the caller's contract.
        Backend::Cuda(gpu) => unsafe { gpu.launch(kernel, cfg, params) }.map(|()| None),
        // SAFETY: the caller's contract; the PTX backend also checks every access it makes.
        Backend::Ptx(ptx) => {
            let (counters, observed) =
                unsafe { ptx.launch_with(kernel, cfg, params, sizes, &rt.options()) }?;
            rt.record(observed);
            Ok(Some(counters))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Runtime, take_launches};
    use crate::ops::elementwise::vector_add_f32;

    /// A fault report names the launches since the last report, each once, oldest first.
    #[test]
    fn remembers_each_distinct_launch_once() {
        let rt = Runtime::emulator();
        let upload = |n| rt.upload(&vec![1.0f32; n]).unwrap();
        let (a, b, mut c) = (upload(64), upload(64), upload(64));
        vector_add_f32(&rt, &a, &b, &mut c).unwrap();
        vector_add_f32(&rt, &a, &b, &mut c).unwrap();
        let (x, y, mut z) = (upload(300), upload(300), upload(300));
        vector_add_f32(&rt, &x, &y, &mut z).unwrap();
        let launches = take_launches();
        assert_eq!(launches.len(), 2, "{launches:?}");
        assert!(launches.iter().all(|l| l.kernel == "vector_add_f32"));
        let (small, large) = (launches[0].config, launches[1].config);
        assert!(small.grid.x < large.grid.x, "{launches:?}");
        assert_eq!(small.block, large.block);
        assert!(
            launches[1]
                .to_string()
                .starts_with(&format!("vector_add_f32<<<({}, 1, 1), (", large.grid.x)),
            "{}",
            launches[1]
        );
        assert!(take_launches().is_empty());
    }

    /// An upload skips the pages that already hold its bytes, so it must still write every page
    /// that differs, in bits: -0.0 over 0.0 included, and a last, partial page. Into a buffer
    /// already written (ones), and into a fresh one from a lazily zeroed vector.
    #[test]
    fn an_upload_writes_every_page_whose_bits_differ() {
        let rt = Runtime::emulator();
        let n = 3 * 1024 + 5; // three 4 KiB pages of f32 and five words
        let mut data = crate::buffer::zeroed_vec::<f32>(n);
        data[1] = -0.0;
        data[2048] = 5.0;
        data[n - 1] = 7.0;
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let mut written = rt.upload(&vec![1.0f32; n]).unwrap();
        rt.copy_to_device(&data, &mut written).unwrap();
        assert_eq!(bits(&rt.download(&written).unwrap()), bits(&data));
        let fresh = rt.upload(&data).unwrap();
        assert_eq!(bits(&rt.download(&fresh).unwrap()), bits(&data));
        let zeros = rt
            .upload(&crate::buffer::zeroed_vec::<f32>(1 << 20))
            .unwrap();
        assert!(
            rt.download(&zeros)
                .unwrap()
                .iter()
                .all(|x| x.to_bits() == 0)
        );
    }
}
