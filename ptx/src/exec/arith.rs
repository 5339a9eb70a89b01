//! The arithmetic a thread runs: integer, float and packed-half operations, bit fields and
//! permutes, comparisons, conversions and the shared and local windows' address arithmetic. Pure
//! register work: each reads its source slots and writes its destination.

use super::Thread;
use super::numeric::{
    cvt, f32_directed, f32_fma_directed, f32_unary_directed, f32ops, f64ops, half_lane, norm,
};
use crate::decode::{
    self, BfiArgs, BoolOp, CarryArgs, Cmp, CmpType, Conv, Float, FloatArgs, FloatOp, FloatUnary,
    FloatUnaryArgs, FmaArgs, Half2Args, Int, IntOp, IntUnary, Lop3Args, MadArgs, Round, SetpArgs,
    mask,
};

impl Thread<'_> {
    /// [`Op::Shf`](decode::Op::Shf): the funnel shift of `b:a` (64 bits) by `c`, clamped at 32
    /// or taken mod 32.
    #[inline(always)]
    pub(super) fn shf(
        &mut self,
        left: bool,
        clamp: bool,
        d: decode::Slot,
        a: decode::Slot,
        b: decode::Slot,
        c: decode::Slot,
    ) {
        let wide = (self.get(b) as u32 as u64) << 32 | self.get(a) as u32 as u64;
        let by = self.get(c) as u32;
        let by = if clamp { by.min(32) } else { by & 31 };
        let v = if left { (wide << by) >> 32 } else { wide >> by };
        self.set(d, v & 0xffff_ffff);
    }

    /// [`Op::Pack`](decode::Op::Pack).
    #[inline(always)]
    pub(super) fn pack(&mut self, d: &decode::Slot, parts: &[decode::Slot; 4], n: &u8, bits: &u8) {
        let m = mask(*bits);
        let v = (0..*n as usize).fold(0u64, |v, k| {
            v | ((self.get(parts[k]) & m) << (k * *bits as usize))
        });
        self.set(*d, v);
    }

    /// [`Op::Unpack`](decode::Op::Unpack).
    #[inline(always)]
    pub(super) fn unpack(&mut self, ds: &[decode::Slot; 4], s: &decode::Slot, n: &u8, bits: &u8) {
        let v = self.get(*s);
        for (k, &d) in ds.iter().enumerate().take(*n as usize) {
            if d != u32::MAX {
                self.set(d, (v >> (k * *bits as usize)) & mask(*bits));
            }
        }
    }

    /// [`Op::Mad`](decode::Op::Mad).
    #[inline(always)]
    pub(super) fn mad(&mut self, args: &MadArgs, here: usize) {
        let MadArgs {
            mul,
            ty,
            d,
            a,
            b,
            c,
        } = args;
        let m = self.int(*mul, *ty, self.get(*a), self.get(*b), here);
        let bits = if *mul == IntOp::MulWide {
            ty.bits * 2
        } else {
            ty.bits
        };
        self.set(*d, m.wrapping_add(self.get(*c)) & mask(bits));
    }

    /// [`Op::IntUnary`](decode::Op::IntUnary).
    #[inline(always)]
    pub(super) fn int_unary(
        &mut self,
        op: &IntUnary,
        ty: &Int,
        d: &decode::Slot,
        a: &decode::Slot,
    ) {
        let x = norm(self.get(*a), *ty);
        let w = u32::from(ty.bits);
        let v = match op {
            IntUnary::Neg => x.wrapping_neg(),
            IntUnary::Not => !x,
            IntUnary::Abs => (x as i64).unsigned_abs(),
            IntUnary::Popc => u64::from((x & mask(ty.bits)).count_ones()),
            IntUnary::Clz => u64::from((x & mask(ty.bits)).leading_zeros() - (64 - w)),
            IntUnary::Brev => (x & mask(ty.bits)).reverse_bits() >> (64 - w),
        };
        self.set(*d, v & mask(ty.bits));
    }

    /// [`Op::Bfe`](decode::Op::Bfe).
    #[inline(always)]
    pub(super) fn bfe(
        &mut self,
        ty: &Int,
        d: &decode::Slot,
        a: &decode::Slot,
        pos: &decode::Slot,
        len: &decode::Slot,
    ) {
        let x = self.get(*a) & mask(ty.bits);
        let (pos, len) = (self.get(*pos) & 0xff, self.get(*len) & 0xff);
        let w = u64::from(ty.bits);
        let field = if len == 0 || pos >= w {
            0
        } else {
            (x >> pos) & mask(len.min(64) as u8)
        };
        let v = if ty.signed && len > 0 {
            let msb = (pos + len - 1).min(w - 1);
            let sign = (x >> msb) & 1;
            let keep = len.min(w - pos.min(w));
            if sign == 1 && keep < 64 {
                field | (!0u64 << keep)
            } else {
                field
            }
        } else {
            field
        };
        self.set(*d, v & mask(ty.bits));
    }

    /// [`Op::Float`](decode::Op::Float).
    #[inline(always)]
    pub(super) fn float(&mut self, args: &FloatArgs) {
        let FloatArgs {
            op,
            ty,
            ftz,
            sat,
            round,
            d,
            a,
            b,
        } = args;
        let v = match ty {
            Float::F32 => {
                let (x, y) = (
                    f32ops::get(self.get(*a), *ftz),
                    f32ops::get(self.get(*b), *ftz),
                );
                let r = match round {
                    Round::Nearest => f32ops::binary(*op, x, y),
                    mode => f32_directed(*op, x, y, *mode),
                };
                match op {
                    // Sign operations, not arithmetic: the payload is kept.
                    FloatOp::CopySign => f32ops::put(r, false, false),
                    _ => f32ops::arith(r, *ftz, *sat),
                }
            }
            Float::F64 => {
                let (x, y) = (
                    f64ops::get(self.get(*a), *ftz),
                    f64ops::get(self.get(*b), *ftz),
                );
                f64ops::arith(f64ops::binary(*op, x, y), *ftz, *sat)
            }
        };
        self.set(*d, v);
    }

    /// [`Op::Fma`](decode::Op::Fma).
    #[inline(always)]
    pub(super) fn fma(&mut self, args: &FmaArgs) {
        let FmaArgs {
            ty,
            ftz,
            sat,
            round,
            d,
            a,
            b,
            c,
        } = args;
        let v = match ty {
            Float::F32 => {
                let g = |s| f32ops::get(self.get(s), *ftz);
                let r = match round {
                    Round::Nearest => g(*a).mul_add(g(*b), g(*c)),
                    mode => f32_fma_directed(g(*a), g(*b), g(*c), *mode),
                };
                f32ops::arith(r, *ftz, *sat)
            }
            Float::F64 => {
                let g = |s| f64ops::get(self.get(s), *ftz);
                f64ops::arith(g(*a).mul_add(g(*b), g(*c)), *ftz, *sat)
            }
        };
        self.set(*d, v);
    }

    /// [`Op::FloatUnary`](decode::Op::FloatUnary).
    #[inline(always)]
    pub(super) fn float_unary(&mut self, args: &FloatUnaryArgs) {
        let FloatUnaryArgs {
            op,
            ty,
            ftz,
            round,
            d,
            a,
        } = args;
        // `neg` and `abs` change the sign bit alone (a NaN keeps its payload).
        let sign_only = matches!(op, FloatUnary::Neg | FloatUnary::Abs);
        let v = match ty {
            Float::F32 => {
                let x = f32ops::get(self.get(*a), *ftz);
                let r = match round {
                    Round::Nearest => f32ops::unary(*op, x),
                    mode => f32_unary_directed(*op, x, *mode),
                };
                if sign_only {
                    f32ops::put(r, *ftz, false)
                } else {
                    f32ops::arith(r, *ftz, false)
                }
            }
            Float::F64 => {
                let r = f64ops::unary(*op, f64ops::get(self.get(*a), *ftz));
                f64ops::put(r, *ftz, false)
            }
        };
        self.set(*d, v);
    }

    /// [`Op::Bfi`](decode::Op::Bfi).
    #[inline(always)]
    pub(super) fn bfi(&mut self, args: &BfiArgs) {
        let BfiArgs {
            bits,
            d,
            a,
            b,
            pos,
            len,
        } = args;
        // PTX ISA, "bfi": pos and len are c[7:0] and d[7:0]; bits of the field past
        // the type's width are dropped.
        let w = u64::from(*bits);
        let (pos, len) = (self.get(*pos) & 0xff, self.get(*len) & 0xff);
        let b = self.get(*b) & mask(*bits);
        let v = if len == 0 || pos >= w {
            b
        } else {
            let field = mask(len.min(w - pos) as u8) << pos;
            (b & !field) | ((self.get(*a) << pos) & field)
        };
        self.set(*d, v & mask(*bits));
    }

    /// [`Op::Prmt`](decode::Op::Prmt).
    #[inline(always)]
    pub(super) fn prmt(
        &mut self,
        mode: &Option<[u16; 4]>,
        d: &decode::Slot,
        a: &decode::Slot,
        b: &decode::Slot,
        c: &decode::Slot,
    ) {
        let bytes = (self.get(*a) & 0xffff_ffff) | (self.get(*b) << 32);
        // A named mode picks a generic selector by c[1:0], without sign extension.
        let sel = match mode {
            None => self.get(*c),
            Some(row) => u64::from(row[(self.get(*c) & 3) as usize]),
        };
        let v = (0..4).fold(0u64, |v, k| {
            let s = (sel >> (4 * k)) & 0xf;
            let byte = (bytes >> (8 * (s & 7))) & 0xff;
            // msb of the selector: the chosen byte's sign, replicated.
            let byte = if s & 8 != 0 {
                if byte & 0x80 != 0 { 0xff } else { 0 }
            } else {
                byte
            };
            v | (byte << (8 * k))
        });
        self.set(*d, v);
    }

    /// [`Op::Lop3`](decode::Op::Lop3).
    #[inline(always)]
    pub(super) fn lop3(&mut self, args: &Lop3Args) {
        let Lop3Args {
            bits,
            lut,
            d,
            a,
            b,
            c,
        } = args;
        let (x, y, z) = (self.get(*a), self.get(*b), self.get(*c));
        // The LUT's index bit 2 is a (0xF0), bit 1 b (0xCC), bit 0 c (0xAA).
        let v = (0..8).filter(|k| lut >> k & 1 != 0).fold(0u64, |v, k| {
            let pick = |bit: u32, w: u64| if k >> bit & 1 != 0 { w } else { !w };
            v | (pick(2, x) & pick(1, y) & pick(0, z))
        });
        self.set(*d, v & mask(*bits));
    }

    /// [`Op::Bfind`](decode::Op::Bfind).
    #[inline(always)]
    pub(super) fn bfind(&mut self, ty: &Int, shiftamt: &bool, d: &decode::Slot, a: &decode::Slot) {
        let x = norm(self.get(*a), *ty);
        // Signed: the most significant bit that differs from the sign.
        let x = if ty.signed && (x as i64) < 0 { !x } else { x } & mask(ty.bits);
        let v = if x == 0 {
            0xffff_ffff
        } else {
            let pos = 63 - u64::from(x.leading_zeros());
            if *shiftamt {
                u64::from(ty.bits) - 1 - pos
            } else {
                pos
            }
        };
        self.set(*d, v);
    }

    /// [`Op::Testp`](decode::Op::Testp).
    #[inline(always)]
    pub(super) fn testp(
        &mut self,
        test: &decode::Testp,
        ty: &Float,
        d: &decode::Slot,
        a: &decode::Slot,
    ) {
        let x = match ty {
            Float::F32 => f64::from(f32ops::get(self.get(*a), false)),
            Float::F64 => f64::from_bits(self.get(*a)),
        };
        let subnormal = match ty {
            Float::F32 => f32ops::get(self.get(*a), false).is_subnormal(),
            Float::F64 => x.is_subnormal(),
        };
        let v = match test {
            decode::Testp::Finite => x.is_finite(),
            decode::Testp::Infinite => x.is_infinite(),
            decode::Testp::Number => !x.is_nan(),
            decode::Testp::NotANumber => x.is_nan(),
            decode::Testp::Normal => x.is_finite() && x != 0.0 && !subnormal,
            decode::Testp::Subnormal => subnormal,
        };
        self.set(*d, u64::from(v));
    }

    /// [`Op::Carry`](decode::Op::Carry).
    #[inline(always)]
    pub(super) fn carry(&mut self, args: &CarryArgs) {
        let CarryArgs {
            sub,
            carry_in,
            carry_out,
            ty,
            d,
            a,
            b,
            cc,
        } = args;
        let m = u128::from(mask(ty.bits));
        let (x, y) = (u128::from(self.get(*a)) & m, u128::from(self.get(*b)) & m);
        let cf = if *carry_in {
            u128::from(self.get(*cc) & 1)
        } else {
            0
        };
        // Subtraction's flag is the borrow that subc takes.
        let (v, out) = if *sub {
            let sub = y + cf;
            (x.wrapping_sub(sub) & m, u64::from(x < sub))
        } else {
            let sum = x + y + cf;
            (sum & m, (sum >> ty.bits) as u64 & 1)
        };
        self.set(*d, v as u64);
        if *carry_out {
            self.set(*cc, out);
        }
    }

    /// [`Op::Setp`](decode::Op::Setp).
    #[inline(always)]
    pub(super) fn setp(&mut self, args: &SetpArgs) {
        let SetpArgs {
            cmp,
            ty,
            d,
            d2,
            a,
            b,
            combine,
        } = args;
        let (x, y) = (self.get(*a), self.get(*b));
        let t = match ty {
            CmpType::Float(Float::F32, ftz) => {
                f32ops::compare(*cmp, f32ops::get(x, *ftz), f32ops::get(y, *ftz))
            }
            CmpType::Float(Float::F64, ftz) => {
                f64ops::compare(*cmp, f64ops::get(x, *ftz), f64ops::get(y, *ftz))
            }
            CmpType::Int(it) => {
                let (x, y) = (norm(x, *it), norm(y, *it));
                let (lt, eq) = if it.signed {
                    ((x as i64) < (y as i64), x == y)
                } else {
                    (x < y, x == y)
                };
                match cmp {
                    Cmp::Eq => eq,
                    Cmp::Ne => !eq,
                    Cmp::Lt => lt,
                    Cmp::Le => lt || eq,
                    Cmp::Gt => !lt && !eq,
                    Cmp::Ge => !lt,
                    _ => unreachable!("refused at decode"),
                }
            }
        };
        let (p, q) = match combine {
            None => (t, !t),
            Some((op, c, neg)) => {
                let c = (self.get(*c) & 1 != 0) != *neg;
                let f = |v: bool| match op {
                    BoolOp::And => v && c,
                    BoolOp::Or => v || c,
                    BoolOp::Xor => v != c,
                };
                (f(t), f(!t))
            }
        };
        self.set(*d, u64::from(p));
        if *d2 != u32::MAX {
            self.set(*d2, u64::from(q));
        }
    }

    /// [`Op::Selp`](decode::Op::Selp).
    #[inline(always)]
    pub(super) fn selp(
        &mut self,
        d: &decode::Slot,
        a: &decode::Slot,
        b: &decode::Slot,
        p: &decode::Slot,
    ) {
        let v = if self.get(*p) & 1 != 0 {
            self.get(*a)
        } else {
            self.get(*b)
        };
        self.set(*d, v);
    }

    /// [`Op::Cvt2`](decode::Op::Cvt2).
    #[inline(always)]
    pub(super) fn cvt2(
        &mut self,
        conv: &Conv,
        d: &decode::Slot,
        a: &decode::Slot,
        b: &decode::Slot,
    ) {
        let (hi, lo) = (
            cvt(*conv, false, false, self.get(*a)),
            cvt(*conv, false, false, self.get(*b)),
        );
        self.set(*d, (hi << 16) | lo);
    }

    /// [`Op::CvtaShared`](decode::Op::CvtaShared).
    #[inline(always)]
    pub(super) fn cvta_shared(&mut self, to: &bool, d: &decode::Slot, a: &decode::Slot) {
        let x = self.get(*a);
        let v = if *to {
            x.wrapping_sub(self.base as u64)
        } else {
            x.wrapping_add(self.base as u64)
        };
        self.set(*d, v);
    }

    /// [`Op::CvtaLocal`](decode::Op::CvtaLocal).
    #[inline(always)]
    pub(super) fn cvta_local(&mut self, to: &bool, d: &decode::Slot, a: &decode::Slot) {
        let base = self.local.as_ptr() as u64;
        let x = self.get(*a);
        self.set(
            *d,
            if *to {
                x.wrapping_sub(base)
            } else {
                x.wrapping_add(base)
            },
        );
    }

    /// [`Op::Half2`](decode::Op::Half2).
    #[inline(always)]
    pub(super) fn half2(&mut self, args: &Half2Args) {
        let Half2Args {
            op,
            bf16,
            ftz,
            sat,
            relu,
            d,
            a,
            b,
            c,
        } = args;
        let (a, b, c) = (self.get(*a), self.get(*b), self.get(*c));
        let lane = |k: u32| {
            let h = |v: u64| (v >> (16 * k)) as u16;
            u64::from(half_lane(*op, *bf16, *ftz, *sat, *relu, h(a), h(b), h(c)))
        };
        self.set(*d, lane(0) | (lane(1) << 16));
    }
}
