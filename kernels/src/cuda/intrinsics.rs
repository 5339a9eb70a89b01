//! Arithmetic with a direct PTX instruction behind it.

/// `2^x` with the special-function unit (`ex2.approx.ftz.f32`): one instruction, max relative
/// error 2^-22, subnormal results flushed to zero. `ex2(-inf) = +0`, `ex2(+inf) = +inf`,
/// `ex2(NaN) = NaN`.
///
/// The emulator computes the host libm's `exp2f` (under 1 ulp) and flushes subnormals, so it can
/// differ from the GPU in the last couple of bits; tests allow for that.
#[inline(always)]
pub fn exp2_approx(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let y: f32;
        // SAFETY: pure arithmetic.
        unsafe {
            core::arch::asm!("ex2.approx.ftz.f32 {y}, {x};", y = out(reg32) y, x = in(reg32) x)
        };
        y
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        super::emu::with_running(|gpu| gpu.count_exps(1));
        let y = x.exp2();
        if y != 0.0 && y.abs() < f32::MIN_POSITIVE {
            0.0
        } else {
            y
        }
    }
}

/// `e^x` as CUDA's `__expf` computes it: `ex2.approx(x * log2(e))`.
///
/// Softmax and attention use this form; kernels that already hold scores in base 2 (scaled by
/// `log2(e)` once, up front) call [`exp2_approx`] directly and save the multiply.
#[inline(always)]
pub fn exp_approx(x: f32) -> f32 {
    exp2_approx(x * core::f32::consts::LOG2_E)
}

/// `log2(x)` with the special-function unit (`lg2.approx.ftz.f32`): max absolute error 2^-22
/// for x in [0.5, 2], relative elsewhere; subnormal inputs are flushed to zero, so
/// `lg2(0) = -inf`, `lg2(+inf) = +inf`, and a negative or NaN input gives NaN.
///
/// The emulator computes the correctly rounded `log2` (after the same flush).
#[inline(always)]
pub fn log2_approx(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let y: f32;
        // SAFETY: pure arithmetic.
        unsafe {
            core::arch::asm!("lg2.approx.ftz.f32 {y}, {x};", y = out(reg32) y, x = in(reg32) x)
        };
        y
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        if x != 0.0 && x.abs() < f32::MIN_POSITIVE {
            f32::NEG_INFINITY
        } else {
            x.log2()
        }
    }
}

// The device math library: what `f32`'s `std` methods give a host program, for a kernel (the
// GPU build has `core` alone, which keeps `max`, `min`, `abs` and `copysign` but not these).
// Named as rust-cuda's `cuda_std::GpuFloat` names them, as free functions: a method would be
// shadowed on the host by `std`'s own and run something else there. `host/build.rs` turns
// rustc's "no method named `sqrt` found for type `f32`" into a line naming the function here.

/// `e^x`: [`exp_approx`] (CUDA's `__expf`, `ex2.approx` of `x log2(e)`), `cuda_std`'s name.
pub use self::exp_approx as exp;
/// `2^x`: [`exp2_approx`] (`ex2.approx.ftz.f32`), `cuda_std`'s name.
pub use self::exp2_approx as exp2;
/// `log2(x)`: [`log2_approx`] (`lg2.approx.ftz.f32`), `cuda_std`'s name.
pub use self::log2_approx as log2;

/// Declares a one-operand `f32` function that is one PTX instruction on the GPU and `$host` on
/// the host (the source emulator).
macro_rules! unary_f32 {
    ($(#[$meta:meta])* $name:ident, $ptx:literal, |$x:ident| $host:expr) => {
        $(#[$meta])*
        #[inline(always)]
        pub fn $name($x: f32) -> f32 {
            #[cfg(target_arch = "nvptx64")]
            {
                let y: f32;
                // SAFETY: pure arithmetic.
                unsafe { core::arch::asm!($ptx, y = out(reg32) y, x = in(reg32) $x) };
                y
            }
            #[cfg(not(target_arch = "nvptx64"))]
            {
                $host
            }
        }
    };
}

unary_f32!(
    /// `sqrt(x)`, correctly rounded (`sqrt.rn.f32`, CUDA's `sqrtf`): the same bits on the GPU
    /// and on the host. `sqrt(-0) = -0`, a negative `x` gives NaN.
    sqrt, "sqrt.rn.f32 {y}, {x};", |x| x.sqrt());
unary_f32!(
    /// `1 / sqrt(x)` with the special-function unit (`rsqrt.approx.f32`, CUDA's `rsqrtf`): one
    /// instruction instead of a square root and a division, the usual scale of a norm. An
    /// approximation (within a few units in the last place); the emulators compute the
    /// correctly rounded value, so tests allow for the difference. `rsqrt(0) = +inf`.
    rsqrt, "rsqrt.approx.f32 {y}, {x};", |x| (1.0 / f64::from(x).sqrt()) as f32);
unary_f32!(
    /// `tanh(x)` with the special-function unit (`tanh.approx.f32`, sm_75 on): relative error
    /// near 2^-11, enough for an activation, not for a reference. The emulators compute the
    /// correctly rounded value.
    tanh, "tanh.approx.f32 {y}, {x};", |x| x.tanh());
unary_f32!(
    /// `sin(x)` with the special-function unit (`sin.approx.f32`, CUDA's `__sinf`): absolute
    /// error near 2^-20 for `x` in [-pi, pi], growing outside it. The emulators compute the
    /// correctly rounded value.
    sin, "sin.approx.f32 {y}, {x};", |x| x.sin());
unary_f32!(
    /// `cos(x)` with the special-function unit (`cos.approx.f32`, CUDA's `__cosf`), as [`sin`].
    cos, "cos.approx.f32 {y}, {x};", |x| x.cos());

/// `ln(x)`, the natural logarithm, as CUDA's `__logf`: [`log2_approx`] times `ln 2`
/// (`cuda_std`'s name; C's is `logf`).
#[inline(always)]
pub fn ln(x: f32) -> f32 {
    log2_approx(x) * core::f32::consts::LN_2
}

/// `fmaf(a, b, c) = a * b + c` with one rounding (`fma.rn.f32`).
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let d: f32;
        // SAFETY: pure arithmetic.
        unsafe {
            core::arch::asm!("fma.rn.f32 {d}, {a}, {b}, {c};", d = out(reg32) d, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c)
        };
        d
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        a.mul_add(b, c)
    }
}

/// `clock64()`: the SM's cycle counter (`%clock64`), for timing a stretch of one thread's code.
///
/// The emulator has no cycles to count: it returns 0 there, so durations read as 0.
#[inline(always)]
pub fn clock64() -> u64 {
    #[cfg(target_arch = "nvptx64")]
    {
        let c: u64;
        // SAFETY: reads a special register. `volatile` (the default) keeps it in program order.
        unsafe { core::arch::asm!("mov.u64 {c}, %clock64;", c = out(reg64) c) };
        c
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        0
    }
}

/// Tells the emulator's counters that this thread just did `n` floating-point operations.
///
/// Compiles to nothing on the GPU. Kernels mark their arithmetic with it so that the counted
/// FLOPs can be checked against the cost model that the roofline figures rest on.
#[inline(always)]
pub fn count_flops(n: u32) {
    #[cfg(not(target_arch = "nvptx64"))]
    super::emu::with(|gpu| gpu.count_flops(u64::from(n)));
    #[cfg(target_arch = "nvptx64")]
    let _ = n;
}

macro_rules! half_type {
    ($(#[$meta:meta])* $name:ident, $to:literal, $from:literal) => {
        $(#[$meta])*
        #[cfg(target_arch = "nvptx64")]
        #[derive(Clone, Copy, Default, PartialEq)]
        #[repr(transparent)]
        pub struct $name(u16);

        #[cfg(target_arch = "nvptx64")]
        impl $name {
            /// Widens to f32 (exact).
            #[inline(always)]
            pub fn to_f32(self) -> f32 {
                let y: f32;
                // SAFETY: pure arithmetic.
                unsafe { core::arch::asm!($to, y = out(reg32) y, x = in(reg16) self.0) };
                y
            }
            /// Narrows from f32, rounding to nearest even.
            #[inline(always)]
            pub fn from_f32(x: f32) -> Self {
                let y: u16;
                // SAFETY: pure arithmetic.
                unsafe { core::arch::asm!($from, y = out(reg16) y, x = in(reg32) x) };
                Self(y)
            }
            /// The raw bits.
            pub fn to_bits(self) -> u16 {
                self.0
            }
        }
    };
}

half_type!(
    /// IEEE half precision on the GPU, converted with `cvt` (the host uses `half::f16`).
    F16, "cvt.f32.f16 {y}, {x};", "cvt.rn.f16.f32 {y}, {x};");
half_type!(
    /// bfloat16 on the GPU (the host uses `half::bf16`). Widening is a shift, not `cvt`:
    /// bf16 is the top half of an f32, so the shift is exact. `cvt.f32.bf16` runs on sm_80 but
    /// needs PTX ISA 7.1 (PTX ISA, "cvt": only its `.ftz` form needs sm_90), and rustc writes
    /// the sm_80 module as PTX ISA 7.0. Narrowing is `cvt.rn.bf16.f32` (sm_80, PTX ISA 7.0).
    Bf16, "{{ .reg .b32 t; cvt.u32.u16 t, {x}; shl.b32 {y}, t, 16; }}", "cvt.rn.bf16.f32 {y}, {x};");
