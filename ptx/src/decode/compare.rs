//! Decoding of comparison and selection: `testp`, `setp`, `selp`.

use super::ir::*;
use super::{DResult, Decoder, Ty, operand, ty};
use crate::parse::{self, Operand};

impl Decoder<'_> {
    /// Comparisons and selection: `testp`, `setp`, `selp`.
    pub(super) fn compare(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let n = |k: usize| operand(&i.operands, k);
        let last = *p.last().unwrap();
        let ftz = i.has("ftz");
        let op0 = p[0];
        match op0 {
            "testp" => {
                let Some(Ty::Float(f)) = ty(last) else {
                    return Err("testp takes .f32 or .f64".into());
                };
                let test = match p.get(1).copied() {
                    Some("finite") => Testp::Finite,
                    Some("infinite") => Testp::Infinite,
                    Some("number") => Testp::Number,
                    Some("notanumber") => Testp::NotANumber,
                    Some("normal") => Testp::Normal,
                    Some("subnormal") => Testp::Subnormal,
                    _ => return Err("unknown testp class".into()),
                };
                let a = self.src(n(1)?, Some(f))?;
                let d = self.dst(n(0)?)?;
                Ok((Op::Testp { test, ty: f, d, a }, 0, Class::Compare))
            }
            "setp" => {
                let t = ty(last).ok_or("unknown type")?;
                let cmp = match p.get(1).copied().unwrap_or("") {
                    "eq" => Cmp::Eq,
                    "ne" => Cmp::Ne,
                    "lt" | "lo" => Cmp::Lt,
                    "le" | "ls" => Cmp::Le,
                    "gt" | "hi" => Cmp::Gt,
                    "ge" | "hs" => Cmp::Ge,
                    "equ" => Cmp::Equ,
                    "neu" => Cmp::Neu,
                    "ltu" => Cmp::Ltu,
                    "leu" => Cmp::Leu,
                    "gtu" => Cmp::Gtu,
                    "geu" => Cmp::Geu,
                    "num" => Cmp::Num,
                    "nan" => Cmp::Nan,
                    other => return Err(format!("comparison `{other}` is not implemented")),
                };
                let unsigned_forms = matches!(p[1], "lo" | "ls" | "hi" | "hs");
                let (cty, float) = match t {
                    Ty::Float(f) => (CmpType::Float(f, ftz), Some(f)),
                    Ty::Int(mut it) => {
                        if unsigned_forms {
                            it.signed = false;
                        }
                        (CmpType::Int(it), None)
                    }
                    _ => return Err("setp on this type is not implemented".into()),
                };
                if matches!(cty, CmpType::Int(_)) && cmp as u8 >= Cmp::Equ as u8 {
                    return Err("unordered comparison of integers".into());
                }
                let combine_op = p.get(2).and_then(|b| match *b {
                    "and" => Some(BoolOp::And),
                    "or" => Some(BoolOp::Or),
                    "xor" => Some(BoolOp::Xor),
                    _ => None,
                });
                let (d, d2) = match n(0)? {
                    Operand::Pair(a, b) => (self.dst(a)?, self.dst(b)?),
                    o => (self.dst(o)?, u32::MAX),
                };
                let a = self.src(n(1)?, float)?;
                let b = self.src(n(2)?, float)?;
                let combine = match combine_op {
                    None => None,
                    Some(op) => match n(3)? {
                        Operand::Not(c) => Some((op, self.src(c, None)?, true)),
                        c => Some((op, self.src(c, None)?, false)),
                    },
                };
                let flops = u8::from(float.is_some());
                let op = Op::Setp(SetpArgs {
                    cmp,
                    ty: cty,
                    d,
                    d2,
                    a,
                    b,
                    combine,
                });
                Ok((op, flops, Class::Compare))
            }
            "selp" => {
                let t = ty(last).ok_or("unknown type")?;
                let float = match t {
                    Ty::Float(f) => Some(f),
                    _ => None,
                };
                let (a, b, c) = (
                    self.src(n(1)?, float)?,
                    self.src(n(2)?, float)?,
                    self.src(n(3)?, None)?,
                );
                let d = self.dst(n(0)?)?;
                Ok((Op::Selp { d, a, b, p: c }, 0, Class::Compare))
            }
            _ => Err("instruction not implemented by the PTX backend".into()),
        }
    }
}
