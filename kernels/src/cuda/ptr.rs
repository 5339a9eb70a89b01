use core::marker::PhantomData;

/// A PTX state space a pointer points into: what an access through it means, and what the
/// emulator checks about it.
pub trait StateSpace: Copy {
    /// Checks and counts an access of `size_of::<T>()` bytes at `p` (host target only).
    #[cfg(not(target_arch = "nvptx64"))]
    #[track_caller]
    fn access<T>(p: *mut T, access: super::emu::Access);

    /// One 16-byte vector load (`ld.<space>.v4.b32`) from a 16-byte aligned generic address.
    ///
    /// # Safety
    /// `p` is 16-byte aligned, points into this state space, and 16 bytes are readable there.
    #[cfg(target_arch = "nvptx64")]
    unsafe fn load_v4(p: *const u8) -> [u32; 4];

    /// One 16-byte vector store (`st.<space>.v4.b32`) to a 16-byte aligned generic address.
    ///
    /// # Safety
    /// As [`load_v4`](Self::load_v4), for writing.
    #[cfg(target_arch = "nvptx64")]
    unsafe fn store_v4(p: *mut u8, v: [u32; 4]);

    /// Whether this is shared memory (the emulator's atomics check either space).
    const SHARED: bool;

    /// Checks and counts an atomic read-modify-write of `size_of::<T>()` bytes at `p`, which
    /// races with plain accesses of the bytes but not with other atomics (host target only).
    #[cfg(not(target_arch = "nvptx64"))]
    #[track_caller]
    #[inline]
    fn atomic_access<T>(p: *mut T) {
        let site = super::emu::Site::caller();
        super::emu::with(|gpu| gpu.atomic_access(p as usize, size_of::<T>(), Self::SHARED, site));
    }

    /// `atom.<space>.add.u32`: adds `v` to the word at generic address `p`, returns the old value.
    ///
    /// # Safety
    /// `p` is 4-byte aligned, points into this state space, and 4 bytes are writable there.
    #[cfg(target_arch = "nvptx64")]
    unsafe fn atomic_add_u32(p: *mut u32, v: u32) -> u32;
}

/// The PTX for a 16-byte vector load and store in one state space: convert the generic address
/// to the space's own (`cvta.to.<space>`), then one `v4` instruction. LLVM splits a 16-byte
/// struct copy into two 8-byte accesses; one instruction per 16 bytes is the widest access a
/// thread can make, and halves the load/store instructions of a streaming kernel.
#[cfg(target_arch = "nvptx64")]
macro_rules! vector_access {
    ($space:literal) => {
        unsafe fn load_v4(p: *const u8) -> [u32; 4] {
            let (a, b, c, d): (u32, u32, u32, u32);
            // SAFETY: the caller's contract.
            unsafe {
                core::arch::asm!(
                    concat!("{{ .reg .u64 s; cvta.to.", $space, ".u64 s, {p}; ld.", $space, ".v4.b32 {{{a}, {b}, {c}, {d}}}, [s]; }}"),
                    p = in(reg64) p, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c, d = out(reg32) d,
                    options(nostack),
                )
            };
            [a, b, c, d]
        }

        unsafe fn store_v4(p: *mut u8, v: [u32; 4]) {
            // SAFETY: the caller's contract.
            unsafe {
                core::arch::asm!(
                    concat!("{{ .reg .u64 s; cvta.to.", $space, ".u64 s, {p}; st.", $space, ".v4.b32 [s], {{{a}, {b}, {c}, {d}}}; }}"),
                    p = in(reg64) p, a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2], d = in(reg32) v[3],
                    options(nostack),
                )
            };
        }

        unsafe fn atomic_add_u32(p: *mut u32, v: u32) -> u32 {
            let old: u32;
            // SAFETY: the caller's contract.
            unsafe {
                core::arch::asm!(
                    concat!("{{ .reg .u64 s; cvta.to.", $space, ".u64 s, {p}; atom.", $space, ".add.u32 {old}, [s], {v}; }}"),
                    p = in(reg64) p, v = in(reg32) v, old = out(reg32) old,
                    options(nostack),
                )
            };
            old
        }
    };
}

/// Global memory (HBM, cached by L2): `ld.global` / `st.global`. Every byte read or written here
/// crosses the HBM boundary in the roofline's accounting (unless L2 happens to hold the line): it
/// is the traffic a kernel's cost model counts. The emulator checks every access against the
/// buffers it allocated.
#[derive(Clone, Copy, Debug)]
pub struct Global;

/// This block's shared memory (`.shared`): `ld.shared` / `st.shared`, on the SM. The emulator
/// checks every access against the block's shared allocations, and for data races between
/// barriers and reads of bytes nobody wrote.
#[derive(Clone, Copy, Debug)]
pub struct Shared;

impl StateSpace for Global {
    const SHARED: bool = false;

    #[cfg(target_arch = "nvptx64")]
    vector_access!("global");

    #[cfg(not(target_arch = "nvptx64"))]
    #[track_caller]
    #[inline]
    fn access<T>(p: *mut T, access: super::emu::Access) {
        let site = super::emu::Site::caller();
        super::emu::with(|gpu| gpu.global_access(p as usize, size_of::<T>(), access, site));
    }
}

impl StateSpace for Shared {
    const SHARED: bool = true;

    #[cfg(target_arch = "nvptx64")]
    vector_access!("shared");

    #[cfg(not(target_arch = "nvptx64"))]
    #[track_caller]
    #[inline]
    fn access<T>(p: *mut T, access: super::emu::Access) {
        let site = super::emu::Site::caller();
        super::emu::with(|gpu| gpu.shared_access(p as usize, size_of::<T>(), access, site));
    }
}

/// A pointer into state space `S`, as a kernel holds it: CUDA C's `T*`.
///
/// It carries no length, exactly as on the GPU; the host checks buffer sizes before launch, and
/// the emulator checks every access. The layout is one 64-bit address, so the host passes a
/// device address for a [`GlobalPtr`] unchanged.
#[repr(transparent)]
pub struct Ptr<T, S: StateSpace> {
    ptr: *mut T,
    _marker: PhantomData<(T, S)>,
}

/// A pointer into global memory: what kernels receive for their buffers.
pub type GlobalPtr<T> = Ptr<T, Global>;
/// A pointer into this block's shared memory: what [`shared_array!`](crate::shared_array) and
/// [`dynamic_shared_mem`](super::shared::dynamic_shared_mem) give.
pub type SharedPtr<T> = Ptr<T, Shared>;

impl<T, S: StateSpace> Clone for Ptr<T, S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, S: StateSpace> Copy for Ptr<T, S> {}

// SAFETY: a pointer is an address, like a CUDA `T*`; what may be done through it is governed by
// the kernel's own contract, checked by the emulator on the host.
unsafe impl<T, S: StateSpace> Send for Ptr<T, S> {}
// SAFETY: see `Send`.
unsafe impl<T, S: StateSpace> Sync for Ptr<T, S> {}

impl<T: Copy, S: StateSpace> Ptr<T, S> {
    /// Wraps a raw (generic-address-space) address. For global memory on the GPU this is a
    /// device address; in the emulator a host one.
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

    /// The generic address (e.g. for `ldmatrix` and `cp.async`, which take a shared address).
    pub fn as_ptr(self) -> *mut T {
        self.ptr
    }

    /// The pointer `count` elements further on (no access happens).
    #[inline(always)]
    pub fn offset(self, count: usize) -> Self {
        Self::from_raw(self.ptr.wrapping_add(count))
    }

    /// Reinterprets the element type, e.g. `f32` as a 16-byte vector for wide loads.
    #[inline(always)]
    pub fn cast<U: Copy>(self) -> Ptr<U, S> {
        Ptr::from_raw(self.ptr.cast())
    }

    /// Loads element `i` (`ld.global` / `ld.shared`).
    ///
    /// # Safety
    /// `i` must be inside the allocation, and no other thread may write it during the launch
    /// (global) or since the last barrier (shared).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn read(self, i: usize) -> T {
        let p = self.ptr.wrapping_add(i);
        #[cfg(not(target_arch = "nvptx64"))]
        S::access(p, super::emu::Access::Read);
        #[cfg(target_arch = "nvptx64")]
        if is_vector::<T>() {
            // SAFETY: the caller's contract; `T` is 16 bytes with 16-byte alignment.
            return unsafe { core::mem::transmute_copy(&S::load_v4(p as *const u8)) };
        }
        // SAFETY: the caller's contract; the emulator has just checked it on the host.
        unsafe { p.read() }
    }

    /// Stores `value` at element `i` (`st.global` / `st.shared`).
    ///
    /// # Safety
    /// `i` must be inside the allocation, and no other thread may touch it during the launch
    /// (global) or since the last barrier (shared).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn write(self, i: usize, value: T) {
        let p = self.ptr.wrapping_add(i);
        #[cfg(not(target_arch = "nvptx64"))]
        S::access(p, super::emu::Access::Write);
        #[cfg(target_arch = "nvptx64")]
        if is_vector::<T>() {
            // SAFETY: the caller's contract; `T` is 16 bytes with 16-byte alignment.
            return unsafe { S::store_v4(p as *mut u8, core::mem::transmute_copy(&value)) };
        }
        // SAFETY: the caller's contract; the emulator has just checked it on the host.
        unsafe { p.write(value) }
    }
}

impl<S: StateSpace> Ptr<u32, S> {
    /// `atomicAdd(&p[i], v)`: adds `v` to element `i` as one indivisible read-modify-write
    /// (`atom.global.add.u32` / `atom.shared.add.u32`) and returns the value it replaced.
    ///
    /// Atomics from any number of threads to the same word never race with each other: the
    /// memory system (L2 for global memory, the SM for shared) serialises them, which is also
    /// their cost when many threads hit one word. Plain loads and stores of the word during the
    /// launch (global) or since the last barrier (shared) still race with them.
    ///
    /// # Safety
    /// `i` must be inside the allocation.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn atomic_add(self, i: usize, v: u32) -> u32 {
        let p = self.ptr.wrapping_add(i);
        #[cfg(not(target_arch = "nvptx64"))]
        {
            S::atomic_access(p);
            // SAFETY: the emulator has just checked 4 aligned bytes at `p` in a live buffer or
            // this block's shared memory; blocks run in parallel on the host's cores, so the
            // add is the host's atomic.
            unsafe { core::sync::atomic::AtomicU32::from_ptr(p) }
                .fetch_add(v, core::sync::atomic::Ordering::Relaxed)
        }
        // SAFETY: the caller's contract.
        #[cfg(target_arch = "nvptx64")]
        unsafe {
            S::atomic_add_u32(p, v)
        }
    }
}

/// Whether `T` is a 16-byte, 16-byte aligned value (such as `elementwise::Words4`), which one
/// `v4` instruction moves. Decided at compile time: the branch costs nothing.
#[cfg(target_arch = "nvptx64")]
const fn is_vector<T>() -> bool {
    size_of::<T>() == 16 && align_of::<T>() >= 16
}
