//! Shared memory: the per-block scratchpad on the SM (up to 227 KB per block on Hopper).
//!
//! It is the level of the pyramid a kernel manages by hand: the block copies a tile from HBM
//! once, then every thread reads it many times at ~10x HBM's bandwidth. Its contents live as long
//! as the block and are visible only to that block's threads, after a [`sync_threads`].
//!
//! [`sync_threads`]: super::thread::sync_threads

use super::SharedPtr;

/// `__shared__ T name[N]`, written `shared_array![name: [T; N]]`: a statically sized shared
/// array, one per call site and per block.
///
/// Evaluates to a [`SharedPtr<T>`](SharedPtr) to the first of `N` elements. Every thread of a
/// block that evaluates the same call site gets the same array; its size counts towards the
/// kernel's static shared memory, which `ptxas` reports.
///
/// PTX declares `.shared` variables at module scope, so the array is declared in a module of its
/// own beside the call: `T` and `N` must be nameable there (literals, or types and constants of
/// the enclosing module). The PTX symbol is `name` plus the call's line and column, which keeps
/// it unique in practice; two call sites that still collide fail loudly at PTX assembly.
#[macro_export]
macro_rules! shared_array {
    [$name:ident : [$ty:ty; $len:expr]] => {{
        #[allow(unused_imports)]
        mod $name {
            use super::*;
            pub(super) const LEN: usize = $len;
            #[cfg(target_arch = "nvptx64")]
            ::core::arch::global_asm!(
                concat!(".shared .align 16 .b8 ", stringify!($name), "_", line!(), "_", column!(), "[{bytes}];"),
                bytes = const LEN * ::core::mem::size_of::<$ty>(),
            );
            #[cfg(not(target_arch = "nvptx64"))]
            pub(super) static SITE: u8 = 0;
            #[inline(always)]
            pub(super) fn ptr() -> *mut $ty {
                #[cfg(target_arch = "nvptx64")]
                {
                    let p: u64;
                    // SAFETY: `cvta` turns the array's shared-window address into a generic
                    // pointer; no memory is accessed.
                    unsafe {
                        ::core::arch::asm!(
                            concat!("cvta.shared.u64 {p}, ", stringify!($name), "_", line!(), "_", column!(), ";"),
                            p = out(reg64) p,
                        )
                    };
                    p as *mut $ty
                }
                #[cfg(not(target_arch = "nvptx64"))]
                {
                    $crate::cuda::emu::static_shared::<$ty>(
                        &SITE as *const u8 as usize,
                        LEN,
                        stringify!($name),
                        stringify!($ty),
                    )
                }
            }
        }
        $crate::cuda::SharedPtr::<$ty>::from_raw($name::ptr())
    }};
}

#[cfg(target_arch = "nvptx64")]
core::arch::global_asm!(".extern .shared .align 16 .b8 __dynamic_smem[];");

/// `extern __shared__ T name[]`: the block's dynamic shared memory, sized at launch.
///
/// The launch configuration's `dynamic_shared` sets its size; the host checks it against the
/// device's per-block limit before launching.
#[inline(always)]
pub fn dynamic_shared_mem<T: Copy>() -> SharedPtr<T> {
    #[cfg(target_arch = "nvptx64")]
    {
        let p: u64;
        // SAFETY: computes an address; no memory is accessed.
        unsafe { core::arch::asm!("cvta.shared.u64 {p}, __dynamic_smem;", p = out(reg64) p) };
        SharedPtr::from_raw(p as *mut T)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        SharedPtr::from_raw(super::emu::dynamic_shared::<T>())
    }
}

/// The block's dynamic shared memory from its first `align`-byte boundary of the `.shared`
/// window (the TMA's 128-byte swizzle needs 1024): the launch over-allocates by `align`.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn dynamic_shared_aligned(align: u32) -> SharedPtr<u8> {
    let smem = dynamic_shared_mem::<u8>();
    let misalignment = shared_address(smem) % align;
    smem.offset(((align - misalignment) % align) as usize)
}

/// `cvta.to.shared.u32`: the 32-bit `.shared` window address of `p`, the form the mbarrier, bulk
/// copy and wgmma instructions take (and that a wgmma matrix descriptor encodes). On the GPU the
/// window starts at 0 for the block's first shared byte; the emulator answers with the offset in
/// its shared arena, which is the same thing.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn shared_address<T: Copy>(p: SharedPtr<T>) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let a: u64;
        // SAFETY: computes an address; no memory is accessed.
        unsafe {
            core::arch::asm!("cvta.to.shared.u64 {a}, {p};", a = out(reg64) a, p = in(reg64) p.as_ptr() as u64)
        };
        a as u32
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let site = super::emu::Site::caller();
        super::emu::with(|gpu| gpu.shared_address(p.as_ptr() as usize, site))
    }
}
