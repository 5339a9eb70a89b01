//! Arithmetic with a direct PTX instruction behind it.

/// `2^x` with the special-function unit (`ex2.approx.ftz.f32`): one instruction, max relative
/// error 2^-22, subnormal results flushed to zero. `ex2(-inf) = +0`, `ex2(+inf) = +inf`,
/// `ex2(NaN) = NaN`.
///
/// The emulator computes the correctly rounded `exp2` and flushes subnormals, so it can differ
/// from the GPU in the last couple of bits; tests allow for that.
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
    /// bf16 is the top half of an f32, and `cvt.f32.bf16` needs sm_90 while the PTX is also
    /// built for sm_80. Narrowing is `cvt.rn.bf16.f32` (sm_80).
    Bf16, "{{ .reg .b32 t; cvt.u32.u16 t, {x}; shl.b32 {y}, t, 16; }}", "cvt.rn.bf16.f32 {y}, {x};");
