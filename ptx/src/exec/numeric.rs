//! The numbers of the ISA: integer widths (sign extension, saturation), floats as each width
//! rounds and flushes them, the directed roundings, packed half lanes, atomics' new values and
//! every `cvt`. Pure functions of bits: no thread, no memory; `Thread` calls them.

use half::{bf16, f16};

use crate::decode::{
    AtomOp, AtomType, Cmp, Conv, Float, FloatOp, FloatUnary, Half2Op, Int, Round, mask,
};

pub(super) fn sext(v: u64, bits: u8) -> u64 {
    if bits >= 64 {
        v
    } else {
        let s = 64 - u32::from(bits);
        (((v << s) as i64) >> s) as u64
    }
}

/// `v` read as an integer of type `t`: masked, or sign-extended to 64 bits.
pub(super) fn norm(v: u64, t: Int) -> u64 {
    if t.signed {
        sext(v, t.bits)
    } else {
        v & mask(t.bits)
    }
}

/// Floats as the ISA handles them, one module per width.
macro_rules! float_ops {
    ($m:ident, $f:ty, $bits:ty, $canonical:expr) => {
        pub(super) mod $m {
            use super::{Cmp, FloatOp, FloatUnary};

            /// The NaN a GPU's arithmetic returns whatever its inputs' payloads (PTX ISA,
            /// "Floating-Point Instructions": NaN results are canonical; for f32 0x7fffffff).
            /// `None` keeps the host's (f64).
            const CANONICAL: Option<$bits> = $canonical;

            /// An arithmetic result: a NaN made canonical, then [`put`].
            pub fn arith(x: $f, ftz: bool, sat: bool) -> u64 {
                match CANONICAL {
                    Some(bits) if x.is_nan() && !sat => bits as u64,
                    _ => put(x, ftz, sat),
                }
            }

            pub fn get(v: u64, ftz: bool) -> $f {
                let x = <$f>::from_bits(v as $bits);
                if ftz && x.is_subnormal() {
                    <$f>::from_bits(x.to_bits() & (1 << (<$bits>::BITS - 1)))
                } else {
                    x
                }
            }

            pub fn put(x: $f, ftz: bool, sat: bool) -> u64 {
                let x = if sat {
                    if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
                } else {
                    x
                };
                let x = if ftz && x.is_subnormal() {
                    <$f>::from_bits(x.to_bits() & (1 << (<$bits>::BITS - 1)))
                } else {
                    x
                };
                x.to_bits() as u64
            }

            /// `min`/`max`: a NaN operand gives the other operand, two NaNs the canonical NaN,
            /// and -0 orders below +0.
            fn minmax(a: $f, b: $f, max: bool) -> $f {
                match (a.is_nan(), b.is_nan()) {
                    (true, true) => CANONICAL.map_or(<$f>::NAN, <$f>::from_bits),
                    (true, false) => b,
                    (false, true) => a,
                    _ if a == b => {
                        // Equal: only zeros can differ (in sign).
                        if (a.is_sign_negative() == max) { b } else { a }
                    }
                    _ => {
                        if (a > b) == max {
                            a
                        } else {
                            b
                        }
                    }
                }
            }

            pub fn binary(op: FloatOp, a: $f, b: $f) -> $f {
                match op {
                    FloatOp::Add => a + b,
                    FloatOp::Sub => a - b,
                    FloatOp::Mul => a * b,
                    FloatOp::Div => a / b,
                    // PTX ISA, "div": `div.approx.f32` is `a * (1 / b)`; for
                    // 2^126 < |b| < 2^128 it returns 0, or NaN when a is infinite: the
                    // reciprocal, subnormal there, is flushed to zero.
                    FloatOp::DivApprox => {
                        let r = 1.0 / b;
                        a * if r.is_subnormal() { 0.0 } else { r }
                    }
                    FloatOp::Min => minmax(a, b, false),
                    FloatOp::Max => minmax(a, b, true),
                    FloatOp::CopySign => b.copysign(a),
                }
            }

            /// `ex2.approx` and `lg2.approx` are computed correctly rounded-or-nearly by the
            /// host's libm (`exp2`, `log2`: under 1 ulp, inside the ISA's 2^-22 bound), after
            /// the `.ftz` flush of the input.
            pub fn unary(op: FloatUnary, a: $f) -> $f {
                match op {
                    FloatUnary::Neg => -a,
                    FloatUnary::Abs => a.abs(),
                    FloatUnary::Rcp => 1.0 / a,
                    FloatUnary::Sqrt => a.sqrt(),
                    FloatUnary::Rsqrt => 1.0 / a.sqrt(),
                    FloatUnary::Ex2 => a.exp2(),
                    FloatUnary::Lg2 => a.log2(),
                    // The MUFU approximations, computed correctly rounded (or nearly) by the
                    // host's libm: inside the ISA's bounds (sin, cos: absolute error 2^-20.9
                    // in [-pi, pi]; tanh: relative error 2^-11).
                    FloatUnary::Sin => a.sin(),
                    FloatUnary::Cos => a.cos(),
                    FloatUnary::Tanh => a.tanh(),
                }
            }

            pub fn compare(cmp: Cmp, a: $f, b: $f) -> bool {
                let nan = a.is_nan() || b.is_nan();
                match cmp {
                    Cmp::Eq => a == b,
                    Cmp::Ne => !nan && a != b,
                    Cmp::Lt => a < b,
                    Cmp::Le => a <= b,
                    Cmp::Gt => a > b,
                    Cmp::Ge => a >= b,
                    Cmp::Equ => nan || a == b,
                    Cmp::Neu => a != b,
                    Cmp::Ltu => nan || a < b,
                    Cmp::Leu => nan || a <= b,
                    Cmp::Gtu => nan || a > b,
                    Cmp::Geu => nan || a >= b,
                    Cmp::Num => !nan,
                    Cmp::Nan => nan,
                }
            }
        }
    };
}

float_ops!(f32ops, f32, u32, Some(0x7fff_ffff));
float_ops!(f64ops, f64, u64, None);

/// `a + b` exactly, as the rounded sum and its error (Knuth's TwoSum): `s + t == a + b`.
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    if !s.is_finite() {
        return (s, 0.0);
    }
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// The f32 that rounding `s + t` in `mode` gives, where `s` is an f64 and `t` a much smaller
/// correction (only its sign matters): how the directed modes are computed exactly. The
/// operation is first done in f64 with its error kept by an error-free transformation (a sum's
/// TwoSum, a product of two f32 being exact in f64, a quotient's or a square root's remainder by
/// fma); then `s` lies strictly between two neighbouring f32 (any error cannot move the exact
/// value across one), or on one, where the error's sign decides.
fn round_f32(s: f64, t: f64, mode: Round) -> f32 {
    let nearest = s as f32;
    if mode == Round::Nearest || s.is_nan() || s.is_infinite() {
        return nearest;
    }
    let up = |x: f32| -> f32 {
        if x == f32::INFINITY {
            x
        } else if x == 0.0 {
            f32::from_bits(1)
        } else if x > 0.0 {
            f32::from_bits(x.to_bits() + 1)
        } else {
            f32::from_bits(x.to_bits() - 1)
        }
    };
    let down = |x: f32| -> f32 { -up(-x) };
    // [lo, hi]: the f32 around s (equal when s is one, ignoring t).
    let n = f64::from(nearest);
    let (lo, hi) = if n > s || (n == s && t < 0.0) {
        (down(nearest), nearest)
    } else if n < s || t > 0.0 {
        (nearest, up(nearest))
    } else {
        return nearest;
    };
    // Overflow: the round-to-nearest infinity stands for values past f32::MAX.
    let (lo, hi) = (
        if lo == f32::NEG_INFINITY && s > f64::from(f32::MIN) {
            f32::MIN
        } else {
            lo
        },
        if hi == f32::INFINITY && s < f64::from(f32::MAX) {
            f32::MAX
        } else {
            hi
        },
    );
    let positive = s > 0.0 || (s == 0.0 && t > 0.0);
    match mode {
        Round::Down => lo,
        Round::Up => hi,
        _ if positive => {
            if lo == 0.0 {
                0.0
            } else {
                lo
            }
        }
        _ => {
            if hi == 0.0 {
                -0.0
            } else {
                hi
            }
        }
    }
}

/// An exact zero sum's sign in `mode` (IEEE 754 6.3): -0 rounding down unless both addends are
/// +0, +0 otherwise unless both are -0.
fn zero_sum_sign(a: f64, b: f64, r: f32, mode: Round) -> f32 {
    if r != 0.0 || a + b != 0.0 || (a != 0.0 && a != -b) {
        return r;
    }
    let both_negative = a.is_sign_negative() && b.is_sign_negative();
    let both_positive = a.is_sign_positive() && b.is_sign_positive();
    match mode {
        Round::Down if !both_positive => -0.0,
        _ if both_negative => -0.0,
        _ => 0.0,
    }
}

/// `op` on f32 operands in a directed rounding mode (see [`round_f32`]).
pub(super) fn f32_directed(op: FloatOp, a: f32, b: f32, mode: Round) -> f32 {
    let (x, y) = (f64::from(a), f64::from(b));
    match op {
        FloatOp::Add | FloatOp::Sub => {
            let y = if op == FloatOp::Sub { -y } else { y };
            let (s, t) = two_sum(x, y);
            zero_sum_sign(x, y, round_f32(s, t, mode), mode)
        }
        // 24 + 24 significant bits: the product is exact in f64.
        FloatOp::Mul => round_f32(x * y, 0.0, mode),
        FloatOp::Div => {
            let q = x / y;
            // The remainder x - q y is exact by fma, and has the sign of (x / y - q) y.
            let r = (-q).mul_add(y, x);
            let t = if q.is_finite() && q != 0.0 {
                r / y
            } else {
                0.0
            };
            round_f32(q, t, mode)
        }
        _ => f32ops::binary(op, a, b),
    }
}

/// One 16-bit lane of packed half arithmetic (PTX ISA, "Half Precision Floating-Point
/// Instructions": add, sub, mul, fma): the exact result rounded once to nearest even. The
/// operands widen exactly to f64, where a sum, a difference or a product of two halves is exact;
/// `fma`'s sum keeps its error by TwoSum. `.ftz` flushes subnormal inputs and results to
/// sign-preserving zero, `.sat` clamps to [0, 1] with NaN to +0, `.relu` clamps a negative
/// result to +0; any other NaN result is the canonical NaN, 0x7fff.
#[allow(clippy::too_many_arguments)]
pub(super) fn half_lane(
    op: Half2Op,
    is_bf16: bool,
    ftz: bool,
    sat: bool,
    relu: bool,
    a: u16,
    b: u16,
    c: u16,
) -> u16 {
    let subnormal = |h: u16| h & 0x7c00 == 0 && h & 0x03ff != 0;
    let widen = |h: u16| -> f64 {
        if is_bf16 {
            bf16::from_bits(h).to_f64()
        } else if ftz && subnormal(h) {
            if h & 0x8000 != 0 { -0.0 } else { 0.0 }
        } else {
            f16::from_bits(h).to_f64()
        }
    };
    let (x, y, z) = (widen(a), widen(b), widen(c));
    let (s, t) = match op {
        Half2Op::Add => (x + y, 0.0),
        Half2Op::Sub => (x - y, 0.0),
        Half2Op::Mul => (x * y, 0.0),
        Half2Op::Fma => two_sum(x * y, z),
    };
    if s.is_nan() {
        return if sat { 0 } else { 0x7fff };
    }
    let (s, t) = if sat {
        // The exact value `s + t` against the bounds (`t` decides on one).
        if s < 0.0 || (s == 0.0 && t <= 0.0) {
            (0.0, 0.0)
        } else if s > 1.0 || (s == 1.0 && t > 0.0) {
            (1.0, 0.0)
        } else {
            (s, t)
        }
    } else if relu && (s < 0.0 || (s == 0.0 && t < 0.0)) {
        (0.0, 0.0)
    } else {
        (s, t)
    };
    // Round to odd in f32 (toward zero, the last bit set when inexact), then to nearest even
    // in the half type: exact, as f32 keeps two more bits than either (Boldo and Melquiond).
    let rz = round_f32(s, t, Round::Zero);
    let odd = if f64::from(rz) == s && t == 0.0 || rz.is_infinite() {
        rz
    } else {
        f32::from_bits(rz.to_bits() | 1)
    };
    let h = if is_bf16 {
        bf16::from_f32(odd).to_bits()
    } else {
        f16::from_f32(odd).to_bits()
    };
    if ftz && !is_bf16 && subnormal(h) {
        h & 0x8000
    } else {
        h
    }
}

/// `fma.{rz,rm,rp}.f32`: the product exact in f64, the sum by TwoSum.
pub(super) fn f32_fma_directed(a: f32, b: f32, c: f32, mode: Round) -> f32 {
    let p = f64::from(a) * f64::from(b);
    let (s, t) = two_sum(p, f64::from(c));
    zero_sum_sign(p, f64::from(c), round_f32(s, t, mode), mode)
}

/// `rcp` and `sqrt` in a directed mode, by their remainders.
pub(super) fn f32_unary_directed(op: FloatUnary, a: f32, mode: Round) -> f32 {
    let x = f64::from(a);
    match op {
        FloatUnary::Rcp => f32_directed(FloatOp::Div, 1.0, a, mode),
        FloatUnary::Sqrt => {
            let q = x.sqrt();
            let t = if q.is_finite() && q > 0.0 {
                (-q).mul_add(q, x)
            } else {
                0.0
            };
            round_f32(q, t, mode)
        }
        _ => f32ops::unary(op, a),
    }
}

fn round(x: f64, mode: Round) -> f64 {
    match mode {
        Round::Nearest => x.round_ties_even(),
        Round::Zero => x.trunc(),
        Round::Down => x.floor(),
        Round::Up => x.ceil(),
    }
}

/// The new value of an atomic's location, from its `old` value and operands `b` (and `c` for
/// `cas`), as the ISA defines each operation. `atom.add.f32` flushes subnormal inputs and
/// results to sign-preserving zero and rounds to nearest even; `add.f64` does not flush.
pub(super) fn atom_op(op: AtomOp, ty: AtomType, old: u64, b: u64, c: u64) -> u64 {
    match ty {
        // `atom.add.noftz.{f16,bf16}{x2}`: each 16-bit element added and rounded to nearest
        // even, as `add` on packed halves, without flushing subnormals (only add decodes).
        AtomType::Half {
            bf16: is_bf16,
            pair,
        } => {
            let lane = |k: u32| {
                let h = |v: u64| (v >> (16 * k)) as u16;
                let add = Half2Op::Add;
                u64::from(half_lane(
                    add,
                    is_bf16,
                    false,
                    false,
                    false,
                    h(old),
                    h(b),
                    0,
                ))
            };
            if pair {
                lane(0) | (lane(1) << 16)
            } else {
                lane(0)
            }
        }
        AtomType::Float(Float::F32) => match op {
            AtomOp::Add => {
                let (x, y) = (f32ops::get(old, true), f32ops::get(b, true));
                f32ops::put(x + y, true, false)
            }
            _ => b & 0xffff_ffff,
        },
        AtomType::Float(Float::F64) => match op {
            AtomOp::Add => (f64::from_bits(old) + f64::from_bits(b)).to_bits(),
            _ => b,
        },
        AtomType::Int(t) => {
            let m = mask(t.bits);
            let (x, y) = (norm(old, t), norm(b, t));
            let less = |x: u64, y: u64| {
                if t.signed {
                    (x as i64) < (y as i64)
                } else {
                    x < y
                }
            };
            let v = match op {
                AtomOp::And => x & y,
                AtomOp::Or => x | y,
                AtomOp::Xor => x ^ y,
                AtomOp::Exch => y,
                AtomOp::Cas => {
                    if x & m == y & m {
                        c
                    } else {
                        x
                    }
                }
                AtomOp::Add => x.wrapping_add(y),
                AtomOp::Inc => {
                    if x & m >= y & m {
                        0
                    } else {
                        x + 1
                    }
                }
                AtomOp::Dec => {
                    if x & m == 0 || x & m > y & m {
                        y
                    } else {
                        x - 1
                    }
                }
                AtomOp::Min => {
                    if less(y, x) {
                        y
                    } else {
                        x
                    }
                }
                AtomOp::Max => {
                    if less(x, y) {
                        y
                    } else {
                        x
                    }
                }
            };
            v & m
        }
    }
}

/// `cvt`, as the ISA defines each pair of types.
pub(super) fn cvt(conv: Conv, ftz: bool, sat: bool, v: u64) -> u64 {
    match conv {
        Conv::Int { from, to, sat, reg } => cvt_int(v, from, to, sat, reg),
        Conv::F32ToHalf {
            bf16: is_bf16,
            relu,
            satfinite,
        }
        | Conv::F32x2ToHalf2 {
            bf16: is_bf16,
            relu,
            satfinite,
        } => cvt_f32_to_half(f32ops::get(v, ftz), sat, is_bf16, relu, satfinite),
        Conv::Same(Float::F32) => f32ops::put(f32ops::get(v, ftz), ftz, sat),
        Conv::Same(Float::F64) => f64ops::put(f64::from_bits(v), false, sat),
        Conv::HalfToF32 { bf16: is_bf16 } => {
            let h = v as u16;
            let x = if is_bf16 {
                bf16::from_bits(h).to_f32()
            } else {
                f16::from_bits(h).to_f32()
            };
            f32ops::put(x, ftz, sat)
        }
        Conv::F32ToF64 => f64ops::put(f64::from(f32ops::get(v, ftz)), false, sat),
        Conv::F64ToF32(mode) => f32ops::put(round_f32(f64::from_bits(v), 0.0, mode), ftz, sat),
        Conv::RoundInt { ty, mode } => match ty {
            Float::F32 => {
                let x = f32ops::get(v, ftz);
                f32ops::put(round(f64::from(x), mode) as f32, ftz, sat)
            }
            Float::F64 => f64ops::put(round(f64::from_bits(v), mode), false, sat),
        },
        Conv::FloatToInt { from, to, mode } => {
            let x = match from {
                Float::F32 => f64::from(f32ops::get(v, ftz)),
                Float::F64 => f64::from_bits(v),
            };
            // Saturating, NaN to 0 (the ISA's rule for float-to-integer cvt).
            let r = round(x, mode);
            let out = if r.is_nan() {
                0
            } else if to.signed {
                let lo = -(2f64.powi(i32::from(to.bits) - 1));
                let hi = -lo - 1.0;
                (r.clamp(lo, hi) as i64) as u64
            } else {
                r.clamp(0.0, mask(to.bits) as f64) as u64
            };
            out & mask(to.bits)
        }
        Conv::IntToHalf {
            from,
            bf16: is_bf16,
        } => cvt_int_to_half(norm(v, from), from, is_bf16),
        Conv::IntToFloat { from, to, mode } => {
            cvt_int_to_float(norm(v, from), from, to, mode, ftz, sat)
        }
    }
}

/// `cvt` between integer types: truncated, or clamped with `.sat`; a destination register
/// wider than the type is sign-extended for a signed type (PTX ISA, "Operand Size Exceeding
/// Instruction-Type Size": cvt).
fn cvt_int(v: u64, from: Int, to: Int, sat: bool, reg: u8) -> u64 {
    let x = norm(v, from);
    let v = if sat {
        let x = if from.signed {
            i128::from(x as i64)
        } else {
            i128::from(x)
        };
        let (lo, hi) = if to.signed {
            (-(1i128 << (to.bits - 1)), (1i128 << (to.bits - 1)) - 1)
        } else {
            (0, (1i128 << to.bits) - 1)
        };
        (x.clamp(lo, hi) as u64) & mask(to.bits)
    } else {
        x & mask(to.bits)
    };
    if to.signed {
        sext(v, to.bits) & mask(reg)
    } else {
        v
    }
}

/// `cvt.rn{.relu}{.satfinite}.{f16,bf16}.f32` of `x` (one lane of the `x2` form).
fn cvt_f32_to_half(x: f32, sat: bool, is_bf16: bool, relu: bool, satfinite: bool) -> u64 {
    let x = if sat {
        if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
    } else {
        x
    };
    // PTX ISA, "cvt": .relu clamps a negative result to 0, .satfinite an infinite or
    // out-of-range one to the largest finite value of its sign; with either, a NaN
    // result is the canonical NaN (0x7fff).
    if x.is_nan() && (relu || satfinite) {
        return 0x7fff;
    }
    let x = if relu && x < 0.0 { 0.0 } else { x };
    let h = if is_bf16 {
        bf16::from_f32(x).to_bits()
    } else {
        f16::from_f32(x).to_bits()
    };
    let (infinity, max) = if is_bf16 {
        (0x7f80, 0x7f7f)
    } else {
        (0x7c00, 0x7bff)
    };
    u64::from(if satfinite && h & 0x7fff == infinity {
        (h & 0x8000) | max
    } else {
        h
    })
}

/// `cvt.rn.{f16,bf16}.<int>` of `x` (already read as `from`): one rounding, as the ISA's.
fn cvt_int_to_half(x: u64, from: Int, is_bf16: bool) -> u64 {
    let exact = if from.signed {
        i128::from(x as i64)
    } else {
        i128::from(x)
    };
    // To f64 rounded to odd (exact for 32-bit integers), then once to nearest even: a
    // 64-bit integer is rounded once, as the ISA's single rounding does.
    let nearest = exact as f64;
    let f = if nearest as i128 == exact {
        nearest
    } else {
        let toward_zero = if (nearest as i128).abs() > exact.abs() {
            nearest.to_bits() - 1
        } else {
            nearest.to_bits()
        };
        f64::from_bits(toward_zero | 1)
    };
    u64::from(if is_bf16 {
        bf16::from_f64(f).to_bits()
    } else {
        f16::from_f64(f).to_bits()
    })
}

/// `cvt.<mode>.{f32,f64}.<int>` of `x` (already read as `from`), rounded as `mode` says.
fn cvt_int_to_float(x: u64, from: Int, to: Float, mode: Round, ftz: bool, sat: bool) -> u64 {
    match to {
        Float::F32 => {
            // The integer as f64 and the exact remainder's sign (a 64-bit integer may
            // not fit f64's 53 bits).
            let exact = if from.signed {
                i128::from(x as i64)
            } else {
                i128::from(x)
            };
            let s = exact as f64;
            let t = (exact - s as i128).signum() as f64;
            let f = match mode {
                Round::Nearest if from.signed => x as i64 as f32,
                Round::Nearest => x as f32,
                mode => round_f32(s, t, mode),
            };
            f32ops::put(f, ftz, sat)
        }
        Float::F64 => {
            let f = if from.signed {
                x as i64 as f64
            } else {
                x as f64
            };
            f64ops::put(f, false, sat)
        }
    }
}
