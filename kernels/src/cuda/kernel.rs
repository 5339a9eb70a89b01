/// Declares a kernel: on the GPU an `extern "ptx-kernel"` entry point with an unmangled name, so
/// the host finds it in the PTX by the function's own name; on the host a plain `unsafe fn` that
/// the emulator calls once per simulated thread.
///
/// ```
/// kernels::kernel! {
///     /// Writes `i` to `out[i]`.
///     pub unsafe fn iota(out: kernels::cuda::GlobalPtr<u32>, n: u32) {
///         let i = kernels::cuda::thread::index_1d();
///         if i < n {
///             unsafe { out.write(i as usize, i) };
///         }
///     }
/// }
/// ```
#[macro_export]
macro_rules! kernel {
    ($(#[$meta:meta])* pub unsafe fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $body:block) => {
        $(#[$meta])*
        ///
        /// # Safety
        /// A kernel entry point: launch it through the host runtime, which checks the arguments
        /// (buffer sizes, shapes, launch limits) before any thread starts.
        #[cfg(target_arch = "nvptx64")]
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name($($arg: $ty),*) $body

        $(#[$meta])*
        ///
        /// # Safety
        /// A kernel entry point: launch it through the host runtime, which checks the arguments
        /// (buffer sizes, shapes, launch limits) before any thread starts.
        #[cfg(not(target_arch = "nvptx64"))]
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $name($($arg: $ty),*) {
            // `fma` (`fma.rn.f32`) is `f32::mul_add`, which on an x86-64 host without the FMA
            // instructions in its baseline is a call into libm per multiply-add. Where the CPU
            // has them, the body runs compiled with them, so that each is one instruction: the
            // same correctly rounded result, and nothing else changes (Rust never fuses a
            // multiply and an add on its own).
            #[cfg(target_arch = "x86_64")]
            if $crate::cuda::emu::host_has_fma() {
                #[target_feature(enable = "fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn with_fma($($arg: $ty),*) $body
                // SAFETY: the CPU has the instructions `with_fma` is compiled with.
                return unsafe { with_fma($($arg),*) };
            }
            $body
        }
    };
}

/// CUDA C's `__launch_bounds__(threads, min_blocks)` for the kernel `name`: at most `threads`
/// threads per block, and registers capped so that `min_blocks` blocks fit on an SM. The PTX has
/// no way to say it from Rust source, so this leaves a marker comment in the PTX, and
/// `host/build.rs` turns it into the entry's `.maxntid` and `.minnctapersm` directives.
///
/// Besides occupancy, a register cap at entry is what lets `setmaxnreg` work: without one,
/// `ptxas` ignores it (warning C7508). On the host it does nothing.
#[macro_export]
macro_rules! launch_bounds {
    ($name:ident, $threads:expr, $min_blocks:expr) => {
        #[cfg(target_arch = "nvptx64")]
        ::core::arch::global_asm!(
            concat!("// launch_bounds ", stringify!($name), " {threads} {blocks}"),
            threads = const $threads,
            blocks = const $min_blocks,
        );
    };
}
