//! Decoding of the bit-field and permute instructions: `bfi`, `prmt`, `lop3`, `bfind`, `bfe`,
//! `shf`.

use super::ir::*;
use super::{DResult, Decoder, int_of, operand, ty, width};
use crate::parse::{self, Operand};

/// `prmt`'s named modes (PTX ISA, "prmt", its table) as the generic form's selectors, one per
/// value of c[1:0]: nibble k is the source byte of `{b, a}` for byte k of the result.
const PRMT_MODES: [(&str, [u16; 4]); 6] = [
    ("f4e", [0x3210, 0x4321, 0x5432, 0x6543]), // forward 4 extract
    ("b4e", [0x5670, 0x6701, 0x7012, 0x0123]), // backward 4 extract
    ("rc8", [0x0000, 0x1111, 0x2222, 0x3333]), // replicate a byte
    ("ecl", [0x3210, 0x3211, 0x3222, 0x3333]), // edge clamp left
    ("ecr", [0x0000, 0x1110, 0x2210, 0x3210]), // edge clamp right
    ("rc16", [0x1010, 0x3232, 0x1010, 0x3232]), // replicate a half
];

impl Decoder<'_> {
    /// Bit fields and permutations: `bfi`, `prmt`, `lop3`, `bfind`, `bfe`.
    pub(super) fn bits(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let n = |k: usize| operand(&i.operands, k);
        let last = *p.last().unwrap();
        let op0 = p[0];
        match op0 {
            "bfi" => {
                let bits = width(&ty(last).ok_or("unknown type")?);
                let (a, b, pos, len) = (
                    self.src(n(1)?, None)?,
                    self.src(n(2)?, None)?,
                    self.src(n(3)?, None)?,
                    self.src(n(4)?, None)?,
                );
                let d = self.dst(n(0)?)?;
                Ok((
                    Op::Bfi(BfiArgs {
                        bits,
                        d,
                        a,
                        b,
                        pos,
                        len,
                    }),
                    0,
                    Class::IntArith,
                ))
            }
            "prmt" => {
                let mode = match p.len() {
                    2 => Some(None),
                    3 => PRMT_MODES
                        .iter()
                        .find(|(name, _)| *name == p[2])
                        .map(|(_, row)| Some(*row)),
                    _ => None,
                };
                // `prmt.b32.f4e`: the type comes before the mode.
                let Some(mode) = mode.filter(|_| p[1] == "b32") else {
                    return Err("unknown prmt form".into());
                };
                let (a, b, c) = (
                    self.src(n(1)?, None)?,
                    self.src(n(2)?, None)?,
                    self.src(n(3)?, None)?,
                );
                let d = self.dst(n(0)?)?;
                Ok((Op::Prmt { mode, d, a, b, c }, 0, Class::IntArith))
            }
            "shf" => {
                let (left, clamp) = (i.has("l"), i.has("clamp"));
                if left == i.has("r") || clamp == i.has("wrap") || last != "b32" {
                    return Err("only shf.{l,r}.{wrap,clamp}.b32 exists".into());
                }
                let (a, b, c) = (
                    self.src(n(1)?, None)?,
                    self.src(n(2)?, None)?,
                    self.src(n(3)?, None)?,
                );
                let d = self.dst(n(0)?)?;
                let op = Op::Shf {
                    left,
                    clamp,
                    d,
                    a,
                    b,
                    c,
                };
                Ok((op, 0, Class::IntArith))
            }
            "lop3" => {
                let bits = width(&ty(last).ok_or("unknown type")?);
                if p.len() != 2 {
                    return Err("only lop3.b32 d, a, b, c, immLut is implemented".into());
                }
                let Operand::Int(lut) = *n(4)? else {
                    return Err("lop3's immLut must be a constant".into());
                };
                let (a, b, c) = (
                    self.src(n(1)?, None)?,
                    self.src(n(2)?, None)?,
                    self.src(n(3)?, None)?,
                );
                let d = self.dst(n(0)?)?;
                let lut = lut as u8;
                Ok((
                    Op::Lop3(Lop3Args {
                        bits,
                        lut,
                        d,
                        a,
                        b,
                        c,
                    }),
                    0,
                    Class::IntArith,
                ))
            }
            "bfind" => {
                let ty = int_of(ty(last).ok_or("unknown type")?)?;
                let a = self.src(n(1)?, None)?;
                let d = self.dst(n(0)?)?;
                let shiftamt = i.has("shiftamt");
                Ok((Op::Bfind { ty, shiftamt, d, a }, 0, Class::IntArith))
            }
            "bfe" => {
                let ty = int_of(ty(last).ok_or("unknown type")?)?;
                let (a, pos, len) = (
                    self.src(n(1)?, None)?,
                    self.src(n(2)?, None)?,
                    self.src(n(3)?, None)?,
                );
                let d = self.dst(n(0)?)?;
                Ok((Op::Bfe { ty, d, a, pos, len }, 0, Class::IntArith))
            }
            _ => Err("instruction not implemented by the PTX backend".into()),
        }
    }
}
