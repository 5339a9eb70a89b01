use core::marker::PhantomData;

/// A pointer into global memory (HBM, cached by L2), as a kernel receives it: CUDA C's `T*`.
///
/// It carries no length, exactly as on the GPU; the host checks buffer sizes before launch, and
/// the emulator checks every access against the buffers it allocated. The layout is one 64-bit
/// address, so the host passes a device address for it unchanged.
///
/// Every read and write here crosses the HBM boundary in the roofline's accounting (unless L2
/// happens to hold the line): it is the traffic that a kernel's cost model counts.
#[repr(transparent)]
pub struct GlobalPtr<T> {
    ptr: *mut T,
    _marker: PhantomData<T>,
}

impl<T> Clone for GlobalPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for GlobalPtr<T> {}

// SAFETY: a GlobalPtr is an address, like a CUDA `T*`; what may be done through it is governed
// by the kernel's own contract, checked by the emulator on the host.
unsafe impl<T> Send for GlobalPtr<T> {}
// SAFETY: see `Send`.
unsafe impl<T> Sync for GlobalPtr<T> {}

impl<T: Copy> GlobalPtr<T> {
    /// Wraps a raw address. On the GPU this is a device address; in the emulator a host one.
    pub const fn from_raw(ptr: *mut T) -> Self {
        Self {
            ptr,
            _marker: PhantomData,
        }
    }

    /// The address, for the host's bookkeeping.
    pub fn addr(self) -> usize {
        self.ptr as usize
    }

    /// The pointer `count` elements further on (no access happens).
    #[inline(always)]
    pub fn offset(self, count: usize) -> Self {
        Self::from_raw(self.ptr.wrapping_add(count))
    }

    /// Reinterprets the element type, e.g. `f32` as a 16-byte vector for wide loads.
    #[inline(always)]
    pub fn cast<U: Copy>(self) -> GlobalPtr<U> {
        GlobalPtr::from_raw(self.ptr.cast())
    }

    /// Loads element `i` (`ld.global`).
    ///
    /// # Safety
    /// `i` must be inside the buffer and no other thread may write it during the launch.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn read(self, i: usize) -> T {
        let p = self.ptr.wrapping_add(i);
        #[cfg(not(target_arch = "nvptx64"))]
        super::emu::global_access(p, super::emu::Access::Read);
        // SAFETY: the caller's contract; the emulator has just checked bounds and alignment.
        unsafe { p.read() }
    }

    /// Stores `value` at element `i` (`st.global`).
    ///
    /// # Safety
    /// `i` must be inside the buffer and no other thread may touch it during the launch.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn write(self, i: usize, value: T) {
        let p = self.ptr.wrapping_add(i);
        #[cfg(not(target_arch = "nvptx64"))]
        super::emu::global_access(p, super::emu::Access::Write);
        // SAFETY: the caller's contract; the emulator has just checked bounds and alignment.
        unsafe { p.write(value) }
    }
}
