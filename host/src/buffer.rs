//! Typed device buffers: HBM on a GPU, checked host memory in the emulator.

use std::alloc::{Layout, alloc_zeroed};
use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr, DeviceRepr, ValidAsZeroBits};
use kernels::cuda::GlobalPtr;

use emu::{Allocation, Emulator};

use crate::Result;

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

pub(crate) enum Storage<T: Element> {
    /// Global memory of the emulator.
    Emulated(Allocation, PhantomData<T>),
    Cuda(CudaSlice<T>),
}

/// `len` elements of `T` in device memory.
pub struct DeviceBuffer<T: Element> {
    len: usize,
    pub(crate) storage: Storage<T>,
}

impl<T: Element> DeviceBuffer<T> {
    /// A zeroed buffer of `len` elements in the emulator's memory, or `OutOfMemory` when the
    /// host does not have that much available.
    pub(crate) fn emulated(emu: &Arc<Emulator>, len: usize) -> Result<Self> {
        let elem = std::any::type_name::<T>()
            .rsplit("::")
            .next()
            .unwrap_or("?");
        let what = || format!("a buffer of {len} x {}", std::any::type_name::<T>());
        let memory = Allocation::zeroed(emu, len, (elem, size_of::<T>()), align_of::<T>(), what)?;
        Ok(Self {
            len,
            storage: Storage::Emulated(memory, PhantomData),
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
            Storage::Emulated(memory, _) => GlobalPtr::from_raw(memory.as_ptr().cast()),
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
            Storage::Emulated(memory, _) => {
                Some(unsafe { std::slice::from_raw_parts(memory.as_ptr().cast(), self.len) })
            }
            Storage::Cuda(_) => None,
        }
    }

    pub(crate) fn host_slice_mut(&mut self) -> Option<&mut [T]> {
        match &mut self.storage {
            // SAFETY: as for `host_slice`, with unique access through `&mut self`.
            Storage::Emulated(memory, _) => {
                Some(unsafe { std::slice::from_raw_parts_mut(memory.as_ptr().cast(), self.len) })
            }
            Storage::Cuda(_) => None,
        }
    }
}
