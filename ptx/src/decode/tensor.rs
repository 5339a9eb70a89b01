//! Decoding of the tensor-core instructions: `ldmatrix`, `mma.sync`, `wgmma`, and the `wgmma`
//! accumulator registers every other instruction is checked against.

use kernels::cuda::emu::{MmaInput, WgmmaSync};

use super::ir::*;
use super::{DResult, Decoder, operand};
use crate::parse::{self, Operand};

impl Decoder<'_> {
    /// Tensor-core fragments: `ldmatrix` and `mma`.
    pub(super) fn matrix(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let n = |k: usize| operand(&i.operands, k);
        let last = *p.last().unwrap();
        let op0 = p[0];
        match op0 {
            "ldmatrix" => {
                if !(i.has("sync") && i.has("aligned") && i.has("m8n8") && i.has("x4"))
                    || last != "b16"
                {
                    return Err(
                        "only ldmatrix.sync.aligned.m8n8.x4[.trans].b16 is implemented".into(),
                    );
                }
                let space = if i.has("shared") || i.has("shared::cta") {
                    Space::Shared
                } else {
                    Space::Generic
                };
                let d = self.vector::<4>(n(0)?, true, None)?;
                let Operand::Address {
                    base: Some(base),
                    offset: 0,
                } = n(1)?
                else {
                    return Err("ldmatrix address must be [register]".into());
                };
                let addr = self.src(base, None)?;
                let op = Op::LdMatrix(LdMatrixArgs {
                    trans: i.has("trans"),
                    d,
                    addr,
                    space,
                });
                Ok((op, 0, Class::LdMatrix))
            }
            "mma" => {
                let shape = ["sync", "aligned", "m16n8k16", "row", "col", "f32"];
                let input = match &p[1..] {
                    [s @ .., "bf16", "bf16", "f32"] if s == shape => MmaInput::Bf16,
                    [s @ .., "f16", "f16", "f32"] if s == shape => MmaInput::F16,
                    _ => {
                        return Err("only mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.f32 is implemented".into());
                    }
                };
                let mma = Mma {
                    input,
                    d: self.vector::<4>(n(0)?, true, None)?,
                    a: self.vector::<4>(n(1)?, false, None)?,
                    b: self.vector::<2>(n(2)?, false, None)?,
                    c: self.vector::<4>(n(3)?, false, Some(Float::F32))?,
                };
                Ok((Op::Mma(Box::new(mma)), 0, Class::Mma))
            }
            _ => Err("instruction not implemented by the PTX backend".into()),
        }
    }

    pub(super) fn wgmma(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let ops = &i.operands;
        let sync = |op| Ok((Op::WgmmaSync(op), 0, Class::Wgmma));
        match &p[1..] {
            ["fence", "sync", "aligned"] => return sync(WgmmaSync::Fence),
            ["commit_group", "sync", "aligned"] => return sync(WgmmaSync::CommitGroup),
            ["wait_group", "sync", "aligned"] => {
                return match ops[..] {
                    [Operand::Int(n)] if (0..8).contains(&n) => {
                        sync(WgmmaSync::WaitGroup { pending: n as u32 })
                    }
                    _ => Err("wait_group takes a constant from 0 to 7".into()),
                };
            }
            _ => {}
        }
        let (shape, input) = match &p[1..] {
            ["mma_async", "sync", "aligned", shape, "f32", "bf16", "bf16"] => {
                (shape, MmaInput::Bf16)
            }
            ["mma_async", "sync", "aligned", shape, "f32", "f16", "f16"] => (shape, MmaInput::F16),
            _ => {
                return Err(
                    "only wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16} is implemented"
                        .into(),
                );
            }
        };
        let n: u32 = shape
            .strip_prefix("m64n")
            .and_then(|s| s.strip_suffix("k16"))
            .and_then(|s| s.parse().ok())
            .filter(|n| (8..=256).contains(n) && n % 8 == 0)
            .ok_or("the shape must be m64nNk16, N a multiple of 8 from 8 to 256")?;
        // Shared A: d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-a,
        // imm-trans-b. A from registers has no imm-trans-a (registers are K-major by definition).
        let (d, a, b, scale_d, scale_a, scale_b, trans_b) = match &ops[..] {
            [d, a, b, scale_d, scale_a, scale_b, trans_a, trans_b] => {
                if *trans_a != Operand::Int(0) {
                    return Err("imm-trans-a = 1 (A MN-major) is not implemented".into());
                }
                let a = WgmmaSource::Shared(self.src(a, None)?);
                (d, a, b, scale_d, scale_a, scale_b, trans_b)
            }
            [d, Operand::Vector(a), b, scale_d, scale_a, scale_b, trans_b] => {
                let [a0, a1, a2, a3] = &a[..] else {
                    return Err(format!(
                        "A from registers takes four .b32 registers (8 16-bit elements), not {}",
                        a.len()
                    ));
                };
                let a = [a0, a1, a2, a3].map(|r| self.src(r, None));
                let [a0, a1, a2, a3] = a;
                let a = WgmmaSource::Registers([a0?, a1?, a2?, a3?]);
                (d, a, b, scale_d, scale_a, scale_b, trans_b)
            }
            _ => {
                return Err(
                    "expected {d}, a-desc, b-desc, scale-d, 1, 1, 0, trans-b (A in shared memory) or {d}, {a0, a1, a2, a3}, b-desc, scale-d, 1, 1, trans-b (A from registers)"
                        .into(),
                );
            }
        };
        if *scale_a != Operand::Int(1) || *scale_b != Operand::Int(1) {
            return Err("imm-scale-a and imm-scale-b other than 1 are not implemented".into());
        }
        let trans_b = match trans_b {
            Operand::Int(0) => false,
            Operand::Int(1) => true,
            _ => return Err("imm-trans-b must be 0 or 1".into()),
        };
        let Operand::Vector(regs) = d else {
            return Err("the accumulator must be a vector of registers".into());
        };
        if regs.len() != n as usize / 2 {
            return Err(format!(
                "m64n{n}k16 with f32 accumulation takes {} accumulator registers, not {}",
                n / 2,
                regs.len()
            ));
        }
        let d = regs.iter().map(|r| self.dst(r)).collect::<DResult<_>>()?;
        let op = Wgmma {
            input,
            n,
            d,
            a,
            b: self.src(b, None)?,
            scale_d: self.src(scale_d, None)?,
            trans_b,
        };
        Ok((Op::Wgmma(Box::new(op)), 0, Class::Wgmma))
    }
}

/// Per instruction, the registers it names that some `wgmma.mma_async` of the kernel writes as
/// its accumulator or reads as its register A fragment. The ISA makes both kinds alike: an
/// ordinary access needs a `wgmma.fence` before the next `wgmma` that uses them, and accessing
/// them before the `wait_group` of the `wgmma` using them is undefined.
pub(super) fn accumulator_uses(
    instrs: &[&parse::Instruction<'static>],
    bases: &[u32],
    code: &[Inst],
) -> Vec<Box<[Slot]>> {
    let accumulators: std::collections::HashSet<Slot> = code
        .iter()
        .filter_map(|i| match &i.op {
            Op::Wgmma(w) => Some(w.d.iter().copied().chain(match &w.a {
                WgmmaSource::Registers(a) => a.to_vec(),
                WgmmaSource::Shared(_) => Vec::new(),
            })),
            _ => None,
        })
        .flatten()
        .collect();
    if accumulators.is_empty() {
        return Vec::new();
    }
    fn regs(o: &Operand<'static>, base: u32, out: &mut Vec<Slot>) {
        match o {
            Operand::Reg(r) => out.push(base + r.0),
            Operand::Address { base: Some(b), .. } | Operand::Not(b) => regs(b, base, out),
            Operand::Vector(items) => items.iter().for_each(|x| regs(x, base, out)),
            Operand::Pair(a, b) => {
                regs(a, base, out);
                regs(b, base, out);
            }
            Operand::Tensor { map, coords } => {
                regs(map, base, out);
                coords.iter().for_each(|x| regs(x, base, out));
            }
            _ => {}
        }
    }
    instrs
        .iter()
        .zip(bases)
        .zip(code)
        .map(|((i, &base), inst)| {
            if matches!(inst.op, Op::Wgmma(_)) {
                return Box::default();
            }
            let mut named = Vec::new();
            i.operands.iter().for_each(|o| regs(o, base, &mut named));
            named.retain(|s| accumulators.contains(s));
            named.dedup();
            named.into_boxed_slice()
        })
        .collect()
}
