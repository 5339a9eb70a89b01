//! The CUDA backend, over the driver API through cudarc with dynamic loading: the binary builds
//! and starts on machines without CUDA, and says so in one sentence when it needs a GPU.

use std::collections::HashMap;
use std::ffi::{CString, c_void};
use std::sync::{Arc, Mutex};

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys::{self, CUdevice_attribute as Attr};
use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream};

use crate::buffer::{DeviceBuffer, Element, Storage};
use crate::embedded::Arch;
use crate::{Error, Result};
use emu::{DeviceLimits, LaunchConfig, dim3};

/// Shared memory a block gets without opting in (`cudaFuncAttributeMaxDynamicSharedMemorySize`).
const DEFAULT_SHARED_MEM: u32 = 48 * 1024;

fn driver(call: &str) -> impl Fn(DriverError) -> Error + '_ {
    move |e| Error::Driver {
        call: call.to_string(),
        message: e.to_string(),
    }
}

/// The dynamic shared memory a launch must opt in to, if any. Without the opt-in a block gets
/// 48 KiB of shared memory, static and dynamic together; past that the kernel's
/// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` must allow the dynamic part (the driver
/// checks static + that attribute against the device's opt-in limit).
fn shared_opt_in(static_shared: u32, dynamic: u32) -> Option<u32> {
    let total = u64::from(static_shared) + u64::from(dynamic);
    (dynamic > 0 && total > u64::from(DEFAULT_SHARED_MEM)).then_some(dynamic)
}

/// A kernel's handle and what the compiled kernel itself allows.
#[derive(Clone, Copy)]
struct Function {
    handle: sys::CUfunction,
    /// Threads per block this kernel can launch with: below the device's 1024 when its registers
    /// per thread would not fit (`CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`).
    max_threads: u32,
    /// Its statically declared shared memory (`shared_array!`), which counts against the same
    /// per-block limit as the dynamic shared memory of the launch.
    static_shared: u32,
}

/// An opened CUDA device with the kernels' module loaded.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    module: sys::CUmodule,
    functions: Mutex<HashMap<&'static str, Function>>,
    name: String,
    arch: Arch,
    limits: DeviceLimits,
    properties: DeviceProperties,
}

// SAFETY: the raw module and function handles are only used with the context bound, and the
// driver API is thread-safe.
unsafe impl Send for Gpu {}
// SAFETY: see `Send`; the function cache is behind a mutex.
unsafe impl Sync for Gpu {}

/// The measured device's properties that the roofline and benchmarks use.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct DeviceProperties {
    /// Streaming multiprocessors.
    pub sms: u32,
    /// L2 cache in bytes.
    pub l2_bytes: u64,
    /// Total device memory in bytes.
    pub memory_bytes: u64,
    /// Compute capability.
    pub compute_capability: (i32, i32),
    /// Peak SM clock in kHz (`cudaDevAttrClockRate`), to turn `clock64` cycles into time.
    pub clock_khz: u32,
}

impl Gpu {
    /// Opens device `ordinal` and loads the PTX built for its architecture.
    pub fn new(ordinal: usize) -> Result<Self> {
        Self::with_module(ordinal, None)
    }

    /// Opens device `ordinal` and loads `module` (PTX text) instead of the kernels' build for its
    /// architecture: the exercises' modules. `KERNELS_PTX` still wins over either.
    pub fn with_module(ordinal: usize, module: Option<&str>) -> Result<Self> {
        // SAFETY: only tries to dlopen libcuda.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::NoDriver);
        }
        let count = CudaContext::device_count()
            .map_err(|e| Error::NoDevice(format!("the driver found no device ({e})")))?;
        if ordinal >= count.max(0) as usize {
            return Err(Error::NoDevice(format!(
                "device {ordinal} requested, the driver sees {count}"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(driver("cuCtxCreate"))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(driver("cuDeviceGetAttribute"))?;
        let arch = Arch::for_compute_capability(major, minor).ok_or_else(|| {
            Error::NoDevice(format!(
                "compute capability {major}.{minor} is older than the 8.0 these kernels need"
            ))
        })?;
        let attr = |a: Attr| {
            ctx.attribute(a)
                .map_err(driver("cuDeviceGetAttribute"))
                .map(|v| v as u32)
        };
        let limits = DeviceLimits {
            max_threads_per_block: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_block_dim: dim3(
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ),
            max_grid_dim: dim3(
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ),
            max_shared_mem_per_block: attr(
                Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )?,
        };
        let properties = DeviceProperties {
            sms: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            l2_bytes: u64::from(attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?),
            memory_bytes: ctx.total_mem().map_err(driver("cuDeviceTotalMem"))? as u64,
            compute_capability: (major, minor),
            clock_khz: attr(Attr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?,
        };
        let name = ctx.name().map_err(driver("cuDeviceGetName"))?;
        // `KERNELS_PTX` names a (hand-edited) PTX file to load instead of the embedded build.
        let text = match std::env::var_os(crate::embedded::PTX_FILE_VAR).filter(|p| !p.is_empty()) {
            Some(path) => std::fs::read_to_string(&path).map_err(|e| {
                Error::Ptx(format!(
                    "cannot read {}: {e}",
                    std::path::Path::new(&path).display()
                ))
            })?,
            None => module.unwrap_or(arch.ptx()).to_string(),
        };
        let ptx = CString::new(text)
            .map_err(|_| Error::Ptx("the PTX file contains a NUL byte".into()))?;
        ctx.bind_to_thread().map_err(driver("cuCtxSetCurrent"))?;
        // SAFETY: a NUL-terminated PTX image; the context is current.
        let module = unsafe { result::module::load_data(ptx.as_ptr() as *const c_void) }
            .map_err(driver("cuModuleLoadData"))?;
        let stream = ctx.default_stream();
        Ok(Self {
            ctx,
            stream,
            module,
            functions: Mutex::new(HashMap::new()),
            name,
            arch,
            limits,
            properties,
        })
    }

    /// The device's name, as the driver gives it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The PTX build this device runs.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// Launch limits, read from the device.
    pub fn limits(&self) -> DeviceLimits {
        self.limits
    }

    /// SM count, L2 size, memory size, compute capability.
    pub fn properties(&self) -> DeviceProperties {
        self.properties
    }

    /// The stream every launch and copy goes to.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Free device memory.
    pub fn free_memory(&self) -> Result<u64> {
        let (free, _total) = self.ctx.mem_get_info().map_err(driver("cuMemGetInfo"))?;
        Ok(free as u64)
    }

    pub(crate) fn alloc<T: Element>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let needed = (len * size_of::<T>()) as u64;
        let free = self.free_memory()?;
        if needed > free {
            return Err(Error::OutOfMemory {
                what: format!("a buffer of {len} x {}", std::any::type_name::<T>()),
                needed,
                free,
            });
        }
        let slice: CudaSlice<T> = self
            .stream
            .alloc_zeros(len.max(1))
            .map_err(driver("cuMemAlloc"))?;
        let mut buf = DeviceBuffer::cuda(slice);
        buf.set_len(len);
        Ok(buf)
    }

    pub(crate) fn copy_to_device<T: Element>(
        &self,
        data: &[T],
        buf: &mut DeviceBuffer<T>,
    ) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let Storage::Cuda(slice) = &mut buf.storage else {
            unreachable!("a GPU runtime's buffer")
        };
        self.stream
            .memcpy_htod(data, &mut slice.slice_mut(..data.len()))
            .map_err(driver("cuMemcpyHtoD"))
    }

    pub(crate) fn download<T: Element>(&self, buf: &DeviceBuffer<T>) -> Result<Vec<T>> {
        if buf.is_empty() {
            return Ok(Vec::new());
        }
        let Storage::Cuda(slice) = &buf.storage else {
            unreachable!("a GPU runtime's buffer")
        };
        self.stream
            .clone_dtoh(&slice.slice(..buf.len()))
            .map_err(driver("cuMemcpyDtoH"))
    }

    /// Waits for the stream.
    pub fn synchronize(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(driver("cuStreamSynchronize"))
    }

    /// The error cudarc recorded from a call that could not return it (the free and the
    /// synchronisation in `CudaSlice::drop`), if any; it would otherwise surface from the next,
    /// unrelated call.
    pub fn deferred_error(&self) -> Result<()> {
        self.ctx.check_err().map_err(driver(
            "a call deferred by cudarc (a buffer's free or synchronisation)",
        ))
    }

    fn function(&self, name: &'static str) -> Result<Function> {
        let mut functions = self.functions.lock().unwrap();
        if let Some(f) = functions.get(name) {
            return Ok(*f);
        }
        self.ctx
            .bind_to_thread()
            .map_err(driver("cuCtxSetCurrent"))?;
        // SAFETY: the module is loaded and lives as long as `self`.
        let handle =
            unsafe { result::module::get_function(self.module, CString::new(name).unwrap()) }
                .map_err(|e| Error::Driver {
                    call: format!("cuModuleGetFunction({name})"),
                    message: format!(
                        "{e}: no kernel of that name in the {} PTX",
                        self.arch.name()
                    ),
                })?;
        let attribute = |a| {
            // SAFETY: a valid function handle.
            unsafe { result::function::get_function_attribute(handle, a) }
                .map(|v| v as u32)
                .map_err(driver("cuFuncGetAttribute"))
        };
        let f = Function {
            handle,
            max_threads: attribute(
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            )?,
            static_shared: attribute(
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
            )?,
        };
        functions.insert(name, f);
        Ok(f)
    }

    /// Launches PTX entry point `name` asynchronously on the stream.
    ///
    /// # Safety
    /// `params` must point to values of exactly the kernel's parameter types, in order, and the
    /// buffers they name must be large enough for what the kernel does with this configuration.
    pub unsafe fn launch(
        &self,
        name: &'static str,
        cfg: &LaunchConfig,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        self.limits.check(name, cfg)?;
        let function = self.function(name)?;
        self.limits
            .check_compiled(name, cfg, function.max_threads, function.static_shared)?;
        let f = function.handle;
        if let Some(dynamic) = shared_opt_in(function.static_shared, cfg.dynamic_shared) {
            // SAFETY: a valid function handle; the total was checked against the opt-in limit.
            unsafe {
                result::function::set_function_attribute(
                    f,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    dynamic as i32,
                )
            }
            .map_err(driver("cuFuncSetAttribute"))?;
        }
        self.ctx
            .bind_to_thread()
            .map_err(driver("cuCtxSetCurrent"))?;
        let (g, b) = (cfg.grid, cfg.block);
        // SAFETY: the caller's contract.
        unsafe {
            result::launch_kernel(
                f,
                (g.x, g.y, g.z),
                (b.x, b.y, b.z),
                cfg.dynamic_shared,
                self.stream.cu_stream(),
                params,
            )
        }
        .map_err(|e| Error::Driver {
            call: format!("cuLaunchKernel({name})"),
            message: e.to_string(),
        })
    }

    /// `cuTensorMapEncodeTiled` for a two-dimensional map with the emulator's parameters: no
    /// interleave, out-of-bounds elements filled with zeros, L2 promotion of 128 bytes.
    pub(crate) fn encode_tensor_map(
        &self,
        m: &kernels::cuda::tma::EmuTensorMap,
    ) -> Result<kernels::cuda::tma::TensorMap> {
        use kernels::cuda::tma::TmaSwizzle;
        use sys::CUtensorMapDataType_enum as D;
        let dtype = match m.elem_bytes {
            1 => D::CU_TENSOR_MAP_DATA_TYPE_UINT8,
            2 => D::CU_TENSOR_MAP_DATA_TYPE_UINT16,
            4 => D::CU_TENSOR_MAP_DATA_TYPE_UINT32,
            _ => D::CU_TENSOR_MAP_DATA_TYPE_UINT64,
        };
        let swizzle = match m.swizzle {
            TmaSwizzle::None => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
            TmaSwizzle::B128 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        };
        let dims = m.dims;
        // Strides of every dimension but the innermost, in bytes.
        let strides = [m.row_pitch];
        let element_strides = [1u32, 1];
        let mut map = std::mem::MaybeUninit::<sys::CUtensorMap>::uninit();
        // SAFETY: every pointer is to a live array of the rank's length (2, or 1 for strides).
        let status = unsafe {
            sys::cuTensorMapEncodeTiled(
                map.as_mut_ptr(),
                dtype,
                2,
                m.base as *mut c_void,
                dims.as_ptr(),
                strides.as_ptr(),
                m.box_dims.as_ptr(),
                element_strides.as_ptr(),
                sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                swizzle,
                sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        };
        status.result().map_err(driver("cuTensorMapEncodeTiled"))?;
        // SAFETY: initialised by the successful call.
        let map = unsafe { map.assume_init() };
        Ok(kernels::cuda::tma::TensorMap { opaque: map.opaque })
    }

    /// An event that records timestamps (cudarc's default event disables timing).
    pub fn timing_event(&self) -> Result<CudaEvent> {
        self.ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(driver("cuEventCreate"))
    }

    /// Seconds for one host-to-device and one device-to-host copy of all of `buf` through
    /// page-locked (pinned) host memory. The copy engines read and write pinned pages directly;
    /// from pageable memory ([`copy_to_device`](Self::copy_to_device)) the driver stages each
    /// chunk through a pinned buffer of its own first, which is why the two differ.
    pub fn pinned_copy_seconds(&self, buf: &mut DeviceBuffer<u32>) -> Result<(f64, f64)> {
        let len = buf.len();
        let Storage::Cuda(slice) = &mut buf.storage else {
            unreachable!("a GPU runtime's buffer")
        };
        // SAFETY: the memory is filled before anything reads it. Flags 0: plain pinned memory
        // (write-combined pages would make the device-to-host copy's host reads slow).
        let mut host = unsafe { self.ctx.alloc_pinned_with_flags::<u32>(len.max(1), 0) }
            .map_err(driver("cuMemHostAlloc"))?;
        host.as_mut_slice()
            .map_err(driver("cuEventSynchronize"))?
            .fill(1);
        let time = |copy: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
            let (start, end) = (self.timing_event()?, self.timing_event()?);
            start
                .record(&self.stream)
                .map_err(driver("cuEventRecord"))?;
            copy()?;
            end.record(&self.stream).map_err(driver("cuEventRecord"))?;
            end.synchronize().map_err(driver("cuEventSynchronize"))?;
            let ms = start
                .elapsed_ms(&end)
                .map_err(driver("cuEventElapsedTime"))?;
            Ok(f64::from(ms) * 1e-3)
        };
        let h2d = time(&mut || {
            self.stream
                .memcpy_htod(&host, &mut slice.slice_mut(..len))
                .map_err(driver("cuMemcpyHtoDAsync"))
        })?;
        let d2h = time(&mut || {
            self.stream
                .memcpy_dtoh(&slice.slice(..len), &mut host)
                .map_err(driver("cuMemcpyDtoHAsync"))
        })?;
        Ok((h2d, d2h))
    }

    /// Overwrites `scratch` so the next timed launch finds none of its data in L2.
    pub fn flush_l2(&self, scratch: &DeviceBuffer<u32>) -> Result<()> {
        let Storage::Cuda(slice) = &scratch.storage else {
            unreachable!("a GPU runtime's buffer")
        };
        let (ptr, _sync) = cudarc::driver::DevicePtr::device_ptr(slice, &self.stream);
        // SAFETY: writes within the scratch buffer's own allocation.
        unsafe {
            result::memset_d8_async(ptr, 0x5a, scratch.bytes() as usize, self.stream.cu_stream())
        }
        .map_err(driver("cuMemsetD8Async"))
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: the module was loaded by `new` and no function handle outlives `self`.
            let _ = unsafe { sys::cuModuleUnload(self.module) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{DEFAULT_SHARED_MEM, shared_opt_in};

    #[test]
    fn opts_in_when_static_and_dynamic_shared_memory_exceed_the_default() {
        const KIB: u32 = 1024;
        // 40 KiB static + 16 KiB dynamic: each under 48 KiB, together over it.
        assert_eq!(shared_opt_in(40 * KIB, 16 * KIB), Some(16 * KIB));
        assert_eq!(shared_opt_in(0, 64 * KIB), Some(64 * KIB));
        assert_eq!(shared_opt_in(DEFAULT_SHARED_MEM - KIB, KIB), None);
        assert_eq!(shared_opt_in(0, DEFAULT_SHARED_MEM), None);
        assert_eq!(shared_opt_in(8 * KIB, 0), None);
        assert_eq!(shared_opt_in(u32::MAX, u32::MAX), Some(u32::MAX));
    }
}
