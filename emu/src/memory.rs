//! Global memory: each device allocation is zeroed host memory that the emulator registers, so
//! that every access a kernel makes is checked against the live allocations, with a red zone
//! after each one that no allocation ever occupies.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;
use std::sync::Arc;

use crate::{Emulator, Error, GLOBAL_RED_ZONE, Result};

/// The device allocations' alignment: `cudaMalloc` returns 256-byte aligned addresses, and the
/// emulator does the same so that vectorised kernels see the same alignment on both.
const ALIGN: usize = 256;

/// From this size on an allocation is mapped straight from the kernel, whose pages are zero
/// until touched: the zeroing costs nothing up front and untouched pages no memory. (The
/// allocator zeroes eagerly at the 256-byte alignment: it cannot use calloc.)
const MAP_BYTES: usize = 1 << 20;

/// `bytes` of zeroed, registered global memory in the emulator (plus an unregistered red zone),
/// freed and unregistered on drop.
pub struct Allocation {
    ptr: NonNull<u8>,
    /// The bytes a kernel may touch (the red zone excluded).
    size: usize,
    /// The allocator's layout (for a mapping, its size).
    layout: Layout,
    /// Mapped from the kernel (`MAP_BYTES` and more) rather than allocated.
    mapped: bool,
    emu: Arc<Emulator>,
}

// SAFETY: a uniquely owned allocation, like a Vec's.
unsafe impl Send for Allocation {}
// SAFETY: shared access only reads through the pointer or hands it to a kernel launch.
unsafe impl Sync for Allocation {}

impl Allocation {
    /// `len` zeroed elements of `elem` (its name and size in bytes, `align` its alignment) in
    /// `emu`'s memory, or `OutOfMemory` when the host does not have that much available (refused
    /// up front rather than found by the OOM killer later). `what` names the buffer in that error.
    pub fn zeroed(
        emu: &Arc<Emulator>,
        len: usize,
        elem: (&'static str, usize),
        align: usize,
        what: impl Fn() -> String,
    ) -> Result<Self> {
        let free = emu.free_memory();
        let size = len
            .checked_mul(elem.1)
            .filter(|&b| b as u64 <= free)
            .ok_or_else(|| Error::OutOfMemory {
                what: what(),
                needed: (len as u128 * elem.1 as u128).min(u64::MAX as u128) as u64,
                free,
            })?;
        // The red zone after the buffer: allocated, never registered, so that a kernel's
        // access just past the end is out of bounds rather than in the next buffer.
        let bytes = size.max(1) + GLOBAL_RED_ZONE;
        let layout =
            Layout::from_size_align(bytes, ALIGN.max(align)).map_err(|_| Error::OutOfMemory {
                what: what(),
                needed: bytes as u64,
                free,
            })?;
        let mapped = bytes >= MAP_BYTES;
        let raw = if mapped {
            // SAFETY: an anonymous private mapping; the kernel returns page-aligned memory
            // (page >= ALIGN) that reads as zero.
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
            // SAFETY: non-zero size.
            unsafe { alloc_zeroed(layout) }
        };
        let ptr = NonNull::new(raw).ok_or_else(|| Error::OutOfMemory {
            what: what(),
            needed: bytes as u64,
            free,
        })?;
        emu.register(ptr.as_ptr() as usize, size, elem, mapped);
        Ok(Self {
            ptr,
            size,
            layout,
            mapped,
            emu: emu.clone(),
        })
    }

    /// The first byte's address.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The bytes a kernel may touch.
    pub fn len(&self) -> usize {
        self.size
    }

    /// Whether the allocation holds no byte a kernel may touch.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The bytes, read in place. No launch runs while they are borrowed: launches are
    /// synchronous in the emulator.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `size` zero-initialised (or since written) bytes of a live allocation.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.size) }
    }

    /// The bytes, written in place.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `bytes`, with unique access through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.size) }
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        self.emu.unregister(self.ptr.as_ptr() as usize, self.mapped);
        if self.mapped {
            // SAFETY: mapped in `zeroed` with this size.
            unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.layout.size()) };
        } else {
            // SAFETY: allocated in `zeroed` with this layout.
            unsafe { dealloc(self.ptr.as_ptr(), self.layout) };
        }
    }
}
