//! Decoding of conversions: `cvt` between types and `cvta` between state spaces.

use super::ir::*;
use super::{DResult, Decoder, Ty, float_round, operand, ty};
use crate::parse::{self, Operand};

impl Decoder<'_> {
    pub(super) fn cvt(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        if p.len() < 3 {
            return Err("cvt needs two types".into());
        }
        let (dt, st) = (p[p.len() - 2], p[p.len() - 1]);
        let packed = match dt {
            "f16x2" => Some(false),
            "bf16x2" => Some(true),
            _ => None,
        };
        let dty = match packed {
            Some(bf16) => Ty::Half { bf16 },
            None => ty(dt).ok_or("unknown type")?,
        };
        let sty = ty(st).ok_or("unknown type")?;
        let int_mode = |i: &parse::Instruction| -> Option<Round> {
            for (m, r) in [
                ("rni", Round::Nearest),
                ("rzi", Round::Zero),
                ("rmi", Round::Down),
                ("rpi", Round::Up),
            ] {
                if i.has(m) {
                    return Some(r);
                }
            }
            None
        };
        for r in ["rna", "rs"] {
            if i.has(r) {
                return Err(format!("rounding mode .{r} is not implemented"));
            }
        }
        let mode = float_round(i);
        let (relu, satfinite) = (i.has("relu"), i.has("satfinite"));
        let nearest_only = || -> DResult<()> {
            match mode {
                Round::Nearest => Ok(()),
                _ => Err("directed rounding of this conversion is not implemented".into()),
            }
        };
        let conv = match (&dty, &sty) {
            (Ty::Int(to), Ty::Int(from)) => {
                let reg = match &i.operands[0] {
                    Operand::Reg(r) => self.function.registers[r.0 as usize].bits() as u8,
                    _ => to.bits,
                };
                Conv::Int {
                    from: *from,
                    to: *to,
                    sat: i.has("sat"),
                    reg: reg.max(to.bits),
                }
            }
            (Ty::Half { bf16 }, Ty::Float(Float::F32)) => {
                nearest_only()?;
                match packed {
                    Some(_) => Conv::F32x2ToHalf2 {
                        bf16: *bf16,
                        relu,
                        satfinite,
                    },
                    None => Conv::F32ToHalf {
                        bf16: *bf16,
                        relu,
                        satfinite,
                    },
                }
            }
            (Ty::Float(Float::F32), Ty::Half { bf16 }) => Conv::HalfToF32 { bf16: *bf16 },
            (Ty::Float(Float::F64), Ty::Float(Float::F32)) => Conv::F32ToF64,
            (Ty::Float(Float::F32), Ty::Float(Float::F64)) => Conv::F64ToF32(mode),
            (Ty::Float(a), Ty::Float(b)) if a == b => match int_mode(i) {
                Some(mode) => Conv::RoundInt { ty: *a, mode },
                // `cvt{.rn}{.ftz}{.sat}.f32.f32`: the flush and the clamp.
                None => Conv::Same(*a),
            },
            (Ty::Int(to), Ty::Float(from)) => Conv::FloatToInt {
                from: *from,
                to: *to,
                mode: int_mode(i).ok_or("float-to-integer cvt needs a rounding mode")?,
            },
            (Ty::Half { bf16 }, Ty::Int(from)) if packed.is_none() => {
                nearest_only()?;
                Conv::IntToHalf {
                    from: *from,
                    bf16: *bf16,
                }
            }
            (Ty::Float(to), Ty::Int(from)) => {
                if *to == Float::F64 {
                    nearest_only()?;
                }
                Conv::IntToFloat {
                    from: *from,
                    to: *to,
                    mode,
                }
            }
            _ => return Err("this conversion is not implemented".into()),
        };
        if (relu || satfinite)
            && !matches!(conv, Conv::F32ToHalf { .. } | Conv::F32x2ToHalf2 { .. })
        {
            return Err(".relu and .satfinite are implemented on cvt to f16/bf16 only".into());
        }
        let a = self.src(&i.operands[1], None)?;
        let d = self.dst(&i.operands[0])?;
        if let Conv::F32x2ToHalf2 { .. } = conv {
            let b = self.src(
                i.operands.get(2).ok_or("cvt to a pair takes a and b")?,
                None,
            )?;
            let op = Op::Cvt2 { conv, d, a, b };
            return Ok((op, 0, Class::Convert));
        }
        let op = Op::Cvt {
            conv,
            ftz: i.has("ftz"),
            sat: i.has("sat"),
            d,
            a,
        };
        Ok((op, 0, Class::Convert))
    }

    /// `cvta`: between generic addresses and a state space's.
    pub(super) fn cvta(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let n = |k: usize| operand(&i.operands, k);
        let last = *p.last().unwrap();
        let to = i.has("to");
        if last != "u64" {
            return Err("only 64-bit cvta is implemented".into());
        }
        let space = if to { p.get(2) } else { p.get(1) };
        let a = self.src(n(1)?, None)?;
        let d = self.dst(n(0)?)?;
        match space.copied() {
            Some("global") => Ok((
                Op::Mov {
                    d,
                    a,
                    mask: u64::MAX,
                },
                0,
                Class::Move,
            )),
            Some("shared") => Ok((Op::CvtaShared { to, d, a }, 0, Class::IntArith)),
            Some("local") => Ok((Op::CvtaLocal { to, d, a }, 0, Class::IntArith)),
            // `.const` variables are device memory at their own addresses.
            Some("const") => Ok((
                Op::Mov {
                    d,
                    a,
                    mask: u64::MAX,
                },
                0,
                Class::Move,
            )),
            _ => Err("cvta for this state space is not implemented".into()),
        }
    }
}
