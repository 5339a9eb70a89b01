//! Typed device buffers: HBM on a GPU, checked host memory in the emulator.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr, DeviceRepr, ValidAsZeroBits};
use kernels::cuda::GlobalPtr;

use crate::emu::Emulator;
use crate::error::{Error, Result};

/// A type that can live in a device buffer and be passed to kernels: a plain integer or float,
/// with no padding and every bit pattern a valid value, which is what lets the emulator view a
/// buffer as bytes ([`bytes_of`]). Sealed: `elements!` below lists the whole set.
pub trait Element:
    sealed::Plain
    + Copy
    + Default
    + Send
    + Sync
    + DeviceRepr
    + ValidAsZeroBits
    + std::fmt::Debug
    + 'static
{
}

mod sealed {
    /// Implemented for the types `elements!` lists, and no others.
    pub trait Plain {}
}

/// The element types, each listed once: sealed and an [`Element`].
macro_rules! elements {
    ($($t:ty),* $(,)?) => {
        $(
            impl sealed::Plain for $t {}
            impl Element for $t {}
        )*
    };
}
elements!(f32, f64, u32, u8, u16, i32, u64, half::f16, half::bf16);

/// `len` zeros of `T` in host memory that no page holds until it is written: the allocator
/// maps large zeroed blocks from the kernel lazily, like an emulated buffer, so a model input of
/// hundreds of MB of zeros costs nothing here and, uploaded ([`crate::Runtime::copy_to_device`]
/// skips equal pages), nothing in the emulator.
pub fn zeroed_vec<T: Element>(len: usize) -> Vec<T> {
    let Ok(layout) = Layout::array::<T>(len) else {
        panic!(
            "{len} x {} overflows the address space",
            std::any::type_name::<T>()
        );
    };
    if layout.size() == 0 {
        return vec![T::default(); len];
    }
    // SAFETY: a non-zero size; zeroed bytes are a valid T (ValidAsZeroBits); the pointer comes
    // from the global allocator with `layout`, which is what `Vec::from_raw_parts` frees.
    unsafe {
        let ptr = alloc_zeroed(layout).cast::<T>();
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Vec::from_raw_parts(ptr, len, len)
    }
}

/// The bytes of `data`. Every [`Element`] is a primitive or a newtype of one (the trait is
/// sealed): no padding, so every byte is initialised.
pub(crate) fn bytes_of<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: as above; u8 has alignment 1 and the length covers exactly the slice.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// [`bytes_of`], mutably: any bytes are a valid value of every [`Element`] (each is a plain
/// integer or float).
pub(crate) fn bytes_of_mut<T: Element>(data: &mut [T]) -> &mut [u8] {
    // SAFETY: as for `bytes_of`, and every bit pattern is a valid Element.
    unsafe {
        std::slice::from_raw_parts_mut(data.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(data))
    }
}

/// Copies `src` into `dst` a page at a time, writing only the pages that differ: an emulated
/// buffer's untouched pages read as the kernel's shared zero page, so uploading zeros (or
/// anything already there) dirties no page and allocates no memory.
pub(crate) fn copy_changed_pages(dst: &mut [u8], src: &[u8]) {
    const PAGE: usize = 4096;
    for (d, s) in dst.chunks_mut(PAGE).zip(src.chunks(PAGE)) {
        if d != s {
            d.copy_from_slice(s);
        }
    }
}

/// The device allocations' alignment: `cudaMalloc` returns 256-byte aligned addresses, and the
/// emulator does the same so that vectorised kernels see the same alignment on both.
const ALIGN: usize = 256;

/// From this size on an emulated buffer is mapped straight from the kernel, whose pages are
/// zero until touched: the zeroing costs nothing up front and untouched pages no memory. (The
/// allocator zeroes eagerly at the 256-byte alignment: it cannot use calloc.)
const MAP_BYTES: usize = 1 << 20;

pub(crate) enum Storage<T: Element> {
    Emulated {
        ptr: NonNull<T>,
        /// The allocator's layout (for a mapping, its size).
        layout: Layout,
        /// Mapped from the kernel (`MAP_BYTES` and more) rather than allocated.
        mapped: bool,
        emu: Arc<Emulator>,
    },
    Cuda(CudaSlice<T>),
}

/// `len` elements of `T` in device memory.
pub struct DeviceBuffer<T: Element> {
    len: usize,
    pub(crate) storage: Storage<T>,
}

// SAFETY: the emulated storage is a uniquely owned allocation, like a Vec.
unsafe impl<T: Element> Send for DeviceBuffer<T> {}
// SAFETY: shared access only reads through the pointer or hands it to a kernel launch.
unsafe impl<T: Element> Sync for DeviceBuffer<T> {}

impl<T: Element> DeviceBuffer<T> {
    /// A zeroed buffer of `len` elements in host memory, or `OutOfMemory` when the host does not
    /// have that much available (refused up front rather than found by the OOM killer later).
    pub(crate) fn emulated(emu: &Arc<Emulator>, len: usize) -> Result<Self> {
        let what = || format!("a buffer of {len} x {}", std::any::type_name::<T>());
        let free = emu.free_memory();
        let size = len
            .checked_mul(size_of::<T>())
            .filter(|&b| b as u64 <= free)
            .ok_or_else(|| Error::OutOfMemory {
                what: what(),
                needed: (len as u128 * size_of::<T>() as u128).min(u64::MAX as u128) as u64,
                free,
            })?;
        // The red zone after the buffer: allocated, never registered, so that a kernel's
        // access just past the end is out of bounds rather than in the next buffer.
        let bytes = size.max(1) + crate::emu::GLOBAL_RED_ZONE;
        let layout = Layout::from_size_align(bytes, ALIGN.max(align_of::<T>())).map_err(|_| {
            Error::OutOfMemory {
                what: what(),
                needed: bytes as u64,
                free,
            }
        })?;
        let mapped = bytes >= MAP_BYTES;
        let raw = if mapped {
            // SAFETY: an anonymous private mapping; the kernel returns page-aligned memory
            // (page >= ALIGN) that reads as zero, a valid T (ValidAsZeroBits).
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                std::ptr::null_mut()
            } else {
                // 2 MiB pages where the kernel has them: a buffer filled at a GPU shape (hundreds
                // of MB) takes a fault every 2 MiB rather than every 4 KiB. Advice only: a
                // refusal changes nothing.
                // SAFETY: the range is the mapping just made.
                unsafe { libc::madvise(p, bytes, libc::MADV_HUGEPAGE) };
                p.cast::<u8>()
            }
        } else {
            // SAFETY: non-zero size; zeroed bytes are a valid T (ValidAsZeroBits).
            unsafe { alloc_zeroed(layout) }
        };
        let ptr = NonNull::new(raw.cast::<T>()).ok_or_else(|| Error::OutOfMemory {
            what: what(),
            needed: bytes as u64,
            free,
        })?;
        let elem = std::any::type_name::<T>()
            .rsplit("::")
            .next()
            .unwrap_or("?");
        emu.register(ptr.as_ptr() as usize, size, (elem, size_of::<T>()), mapped);
        Ok(Self {
            len,
            storage: Storage::Emulated {
                ptr,
                layout,
                mapped,
                emu: emu.clone(),
            },
        })
    }

    pub(crate) fn cuda(slice: CudaSlice<T>) -> Self {
        Self {
            len: slice.len(),
            storage: Storage::Cuda(slice),
        }
    }

    /// A zero-length buffer still owns a one-element allocation (the driver refuses size 0).
    pub(crate) fn set_len(&mut self, len: usize) {
        self.len = len;
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn bytes(&self) -> u64 {
        (self.len * size_of::<T>()) as u64
    }

    /// The device address, as a kernel argument.
    pub fn ptr(&self) -> GlobalPtr<T> {
        match &self.storage {
            Storage::Emulated { ptr, .. } => GlobalPtr::from_raw(ptr.as_ptr()),
            Storage::Cuda(slice) => {
                let (addr, _sync) = slice.device_ptr(slice.stream());
                GlobalPtr::from_raw(addr as usize as *mut T)
            }
        }
    }

    /// The emulated contents, read in place.
    pub(crate) fn host_slice(&self) -> Option<&[T]> {
        match &self.storage {
            // SAFETY: `len` initialised elements; no launch runs while `&self` is borrowed here,
            // since launches are synchronous in the emulator.
            Storage::Emulated { ptr, .. } => {
                Some(unsafe { std::slice::from_raw_parts(ptr.as_ptr(), self.len) })
            }
            Storage::Cuda(_) => None,
        }
    }

    pub(crate) fn host_slice_mut(&mut self) -> Option<&mut [T]> {
        match &mut self.storage {
            // SAFETY: as for `host_slice`, with unique access through `&mut self`.
            Storage::Emulated { ptr, .. } => {
                Some(unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), self.len) })
            }
            Storage::Cuda(_) => None,
        }
    }
}

impl<T: Element> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if let Storage::Emulated {
            ptr,
            layout,
            mapped,
            emu,
        } = &self.storage
        {
            emu.unregister(ptr.as_ptr() as usize, *mapped);
            if *mapped {
                // SAFETY: mapped in `emulated` with this size.
                unsafe { libc::munmap(ptr.as_ptr().cast(), layout.size()) };
            } else {
                // SAFETY: allocated in `emulated` with this layout.
                unsafe { dealloc(ptr.as_ptr().cast(), *layout) };
            }
        }
    }
}
