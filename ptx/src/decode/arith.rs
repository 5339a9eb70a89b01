//! Decoding of moves and arithmetic: `mov`, integer and float arithmetic (`add` ... `copysign`,
//! `mad`/`fma`, the unary operations), the packed `f16x2`/`bf16x2` forms and the carry chain.

use super::ir::*;
use super::{DResult, Decoder, Ty, float_round, int_of, operand, rounding, ty, width};
use crate::parse::{self, Operand};

impl Decoder<'_> {
    /// `mov`: a register, a constant or an address; packs and unpacks vectors.
    pub(super) fn mov(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let n = |k: usize| operand(&i.operands, k);
        let last = *p.last().unwrap();
        let t = ty(last).ok_or("unknown type")?;
        let float = match t {
            Ty::Float(f) => Some(f),
            _ => None,
        };
        let bits = width(&t);
        match (n(0)?, n(1)?) {
            (Operand::Vector(parts), src) if !matches!(src, Operand::Vector(_)) => {
                let k = parts.len();
                if !(2..=4).contains(&k) || !(bits as usize).is_multiple_of(k) {
                    return Err("bad unpack".into());
                }
                let mut ds = [u32::MAX; 4];
                for (j, part) in parts.iter().enumerate() {
                    ds[j] = match part {
                        Operand::Sink => u32::MAX,
                        o => self.dst(o)?,
                    };
                }
                let s = self.src(src, None)?;
                let op = Op::Unpack {
                    ds,
                    s,
                    n: k as u8,
                    bits: (bits as usize / k) as u8,
                };
                Ok((op, 0, Class::Move))
            }
            (dst, Operand::Vector(parts)) => {
                let k = parts.len();
                if !(2..=4).contains(&k) || !(bits as usize).is_multiple_of(k) {
                    return Err("bad pack".into());
                }
                let mut ps = [0; 4];
                for (j, part) in parts.iter().enumerate() {
                    ps[j] = self.src(part, None)?;
                }
                let op = Op::Pack {
                    d: self.dst(dst)?,
                    parts: ps,
                    n: k as u8,
                    bits: (bits as usize / k) as u8,
                };
                Ok((op, 0, Class::Move))
            }
            (dst, src) => {
                let a = self.src(src, float)?;
                Ok((
                    Op::Mov {
                        d: self.dst(dst)?,
                        a,
                        mask: mask(bits),
                    },
                    0,
                    Class::Move,
                ))
            }
        }
    }

    /// `add`, `sub`, `mul` and `fma` on packed halves (`.f16x2`, `.bf16x2`).
    pub(super) fn half2(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let n = |k: usize| operand(&i.operands, k);
        let last = *p.last().unwrap();
        let ftz = i.has("ftz");
        let sat = i.has("sat");
        let op0 = p[0];
        // PTX ISA, "Half Precision Floating-Point Instructions": round to nearest even
        // only; .ftz and .sat for f16x2, .relu for fma.
        let bf16 = last == "bf16x2";
        let relu = i.has("relu");
        if [Round::Zero, Round::Down, Round::Up].contains(&float_round(i)) {
            return Err("packed half arithmetic rounds to nearest only (.rn)".into());
        }
        if (bf16 && (ftz || sat)) || (relu && (op0 != "fma" || sat)) {
            return Err("this packed half form does not exist".into());
        }
        let op = match op0 {
            "add" => Half2Op::Add,
            "sub" => Half2Op::Sub,
            "mul" => Half2Op::Mul,
            _ => Half2Op::Fma,
        };
        let (a, b) = (self.src(n(1)?, None)?, self.src(n(2)?, None)?);
        let c = if op == Half2Op::Fma {
            self.src(n(3)?, None)?
        } else {
            a
        };
        let d = self.dst(n(0)?)?;
        let op = Op::Half2(Half2Args {
            op,
            bf16,
            ftz,
            sat,
            relu,
            d,
            a,
            b,
            c,
        });
        Ok((op, 2, Class::FloatArith))
    }

    /// Two-operand arithmetic and logic, float and integer (`add` ... `copysign`).
    pub(super) fn binary(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let n = |k: usize| operand(&i.operands, k);
        let last = *p.last().unwrap();
        let modifiers = if p.len() > 2 {
            &p[1..p.len() - 1]
        } else {
            &[][..]
        };
        let ftz = i.has("ftz");
        let sat = i.has("sat");
        let op0 = p[0];
        let t = ty(last).ok_or("unknown type")?;
        if let Ty::Float(f) = t {
            let round = rounding(i, f)?;
            let op = match op0 {
                "add" => FloatOp::Add,
                "sub" => FloatOp::Sub,
                "mul" => FloatOp::Mul,
                "div" if i.has("approx") && f == Float::F32 => FloatOp::DivApprox,
                "div" if i.has("approx") => {
                    return Err("div.approx is .f32 only".into());
                }
                // `div.full.f32` (within 2 ulp) is computed correctly rounded.
                "div" => FloatOp::Div,
                "min" => FloatOp::Min,
                "max" => FloatOp::Max,
                "copysign" => FloatOp::CopySign,
                _ => return Err("not a float operation".into()),
            };
            if i.has("NaN") || i.has("xorsign") || i.has("abs") {
                return Err("min/max variant not implemented".into());
            }
            let a = self.src(n(1)?, Some(f))?;
            let b = self.src(n(2)?, Some(f))?;
            let d = self.dst(n(0)?)?;
            let op = Op::Float(FloatArgs {
                op,
                ty: f,
                ftz,
                sat,
                round,
                d,
                a,
                b,
            });
            return Ok((op, 1, Class::FloatArith));
        }
        let ty = int_of(t)?;
        if i.has("cc") && matches!(op0, "add" | "sub") {
            return self.carry(i);
        }
        if sat || i.has("cc") {
            return Err("saturating integer arithmetic and mad.cc are not implemented".into());
        }
        let op = match (op0, modifiers) {
            ("add", []) => IntOp::Add,
            ("sub", []) => IntOp::Sub,
            ("mul", ["lo"]) => IntOp::MulLo,
            ("mul", ["hi"]) => IntOp::MulHi,
            ("mul", ["wide"]) if ty.bits <= 32 => IntOp::MulWide,
            ("div", []) => IntOp::Div,
            ("rem", []) => IntOp::Rem,
            ("min", []) => IntOp::Min,
            ("max", []) => IntOp::Max,
            ("and", []) => IntOp::And,
            ("or", []) => IntOp::Or,
            ("xor", []) => IntOp::Xor,
            ("shl", []) => IntOp::Shl,
            ("shr", []) => IntOp::Shr,
            _ => return Err("this form is not implemented".into()),
        };
        let a = self.src(n(1)?, None)?;
        let b = self.src(n(2)?, None)?;
        let d = self.dst(n(0)?)?;
        Ok((Op::Int { op, ty, d, a, b }, 0, Class::IntArith))
    }

    /// `mad` and `fma`, float and integer.
    pub(super) fn mad(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let n = |k: usize| operand(&i.operands, k);
        let last = *p.last().unwrap();
        let modifiers = if p.len() > 2 {
            &p[1..p.len() - 1]
        } else {
            &[][..]
        };
        let ftz = i.has("ftz");
        let sat = i.has("sat");
        let t = ty(last).ok_or("unknown type")?;
        let a = n(1)?;
        if let Ty::Float(f) = t {
            // `mad.rn.f32` is `fma.rn.f32` (one rounding) since sm_20.
            let round = rounding(i, f)?;
            let (a, b, c) = (
                self.src(a, Some(f))?,
                self.src(n(2)?, Some(f))?,
                self.src(n(3)?, Some(f))?,
            );
            let d = self.dst(n(0)?)?;
            let op = Op::Fma(FmaArgs {
                ty: f,
                ftz,
                sat,
                round,
                d,
                a,
                b,
                c,
            });
            return Ok((op, 2, Class::FloatArith));
        }
        let ty = int_of(t)?;
        let mul = match modifiers {
            ["lo"] => IntOp::MulLo,
            ["hi"] => IntOp::MulHi,
            ["wide"] if ty.bits <= 32 => IntOp::MulWide,
            _ => return Err("this form is not implemented".into()),
        };
        let (a, b, c) = (
            self.src(a, None)?,
            self.src(n(2)?, None)?,
            self.src(n(3)?, None)?,
        );
        let d = self.dst(n(0)?)?;
        Ok((
            Op::Mad(MadArgs {
                mul,
                ty,
                d,
                a,
                b,
                c,
            }),
            0,
            Class::IntArith,
        ))
    }

    /// One-operand operations, float and integer (`neg` ... `tanh`).
    pub(super) fn unary(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let n = |k: usize| operand(&i.operands, k);
        let last = *p.last().unwrap();
        let ftz = i.has("ftz");
        let op0 = p[0];
        let t = ty(last).ok_or("unknown type")?;
        let d = self.dst(n(0)?)?;
        if let Ty::Float(f) = t {
            let op = match op0 {
                "neg" => FloatUnary::Neg,
                "abs" => FloatUnary::Abs,
                "rcp" => FloatUnary::Rcp,
                "sqrt" => FloatUnary::Sqrt,
                "rsqrt" => FloatUnary::Rsqrt,
                "ex2" => FloatUnary::Ex2,
                "lg2" => FloatUnary::Lg2,
                "sin" => FloatUnary::Sin,
                "cos" => FloatUnary::Cos,
                "tanh" => FloatUnary::Tanh,
                _ => return Err("not a float operation".into()),
            };
            let approx = i.has("approx");
            let round = match op {
                FloatUnary::Rcp | FloatUnary::Sqrt if !approx => rounding(i, f)?,
                FloatUnary::Neg | FloatUnary::Abs => Round::Nearest,
                _ if !approx => return Err(".approx is required".into()),
                FloatUnary::Sin | FloatUnary::Cos | FloatUnary::Tanh if f != Float::F32 => {
                    return Err("sin, cos and tanh.approx are .f32 only".into());
                }
                _ => Round::Nearest,
            };
            let a = self.src(n(1)?, Some(f))?;
            let (flops, class) = match op {
                FloatUnary::Ex2 => (1, Class::Ex2),
                FloatUnary::Lg2 => (1, Class::Lg2),
                FloatUnary::Rcp => (1, Class::Rcp),
                FloatUnary::Neg | FloatUnary::Abs => (0, Class::FloatArith),
                _ => (1, Class::FloatArith),
            };
            let op = Op::FloatUnary(FloatUnaryArgs {
                op,
                ty: f,
                ftz,
                round,
                d,
                a,
            });
            return Ok((op, flops, class));
        }
        let ty = int_of(t)?;
        let op = match op0 {
            "neg" => IntUnary::Neg,
            "not" => IntUnary::Not,
            "abs" => IntUnary::Abs,
            "popc" => IntUnary::Popc,
            "clz" => IntUnary::Clz,
            "brev" => IntUnary::Brev,
            _ => return Err("not an integer operation".into()),
        };
        let a = self.src(n(1)?, None)?;
        Ok((Op::IntUnary { op, ty, d, a }, 0, Class::IntArith))
    }

    /// `add.cc`, `addc{.cc}`, `sub.cc`, `subc{.cc}` on `.u32/.s32/.u64/.s64` (PTX ISA,
    /// "Extended-Precision Integer Arithmetic Instructions"): the carry flag is one slot per
    /// thread, as CC.CF is one register.
    pub(super) fn carry(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let ty = match ty(p[p.len() - 1]) {
            Some(Ty::Int(t)) if t.bits >= 32 => t,
            _ => return Err("extended-precision arithmetic takes 32- or 64-bit integers".into()),
        };
        let carry_in = matches!(p[0], "addc" | "subc");
        let op = Op::Carry(CarryArgs {
            sub: p[0].starts_with("sub"),
            carry_in,
            carry_out: i.has("cc"),
            ty,
            d: self.dst(&i.operands[0])?,
            a: self.src(&i.operands[1], None)?,
            b: self.src(&i.operands[2], None)?,
            cc: self.fill(Fill::Carry),
        });
        Ok((op, 0, Class::IntArith))
    }
}
