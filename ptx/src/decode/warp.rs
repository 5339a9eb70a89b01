//! Decoding of the warp collectives (`vote`, `redux`, `activemask`, `shfl`) and the block
//! barriers (`bar`, `barrier`, `bar.red`).

use kernels::cuda::emu::{ShuffleMode, Site, WarpReduce};

use super::ir::*;
use super::{DResult, Decoder, operand};
use crate::parse::{self, Operand};

impl Decoder<'_> {
    /// Warp-wide operations: `vote`, `redux`, `activemask`, `shfl`.
    pub(super) fn warp(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let n = |k: usize| operand(&i.operands, k);
        let last = *p.last().unwrap();
        let op0 = p[0];
        match op0 {
            "vote" => {
                let op = match (p.get(2).copied(), last) {
                    (Some("ballot"), "b32") => WarpReduce::Ballot,
                    (Some("all"), "pred") => WarpReduce::All,
                    (Some("any"), "pred") => WarpReduce::Any,
                    (Some("uni"), "pred") => WarpReduce::Uni,
                    _ => {
                        return Err(
                            "only vote.sync.{ballot.b32,all,any,uni.pred} is implemented".into(),
                        );
                    }
                };
                if !i.has("sync") {
                    return Err("vote without .sync (pre-sm_70) is not implemented".into());
                }
                let (a, negate) = match n(1)? {
                    Operand::Not(q) => (self.src(q, None)?, true),
                    q => (self.src(q, None)?, false),
                };
                let mask = self.src(n(2)?, None)?;
                let d = self.dst(n(0)?)?;
                Ok((
                    Op::WarpReduce(WarpReduceArgs {
                        op,
                        d,
                        a,
                        negate,
                        mask,
                    }),
                    0,
                    Class::Shfl,
                ))
            }
            "redux" => {
                let op = match (p.get(2).copied(), last) {
                    (Some("add"), "u32" | "s32") => WarpReduce::Add,
                    (Some("min"), "u32") => WarpReduce::MinU,
                    (Some("max"), "u32") => WarpReduce::MaxU,
                    (Some("min"), "s32") => WarpReduce::MinS,
                    (Some("max"), "s32") => WarpReduce::MaxS,
                    (Some("and"), "b32") => WarpReduce::And,
                    (Some("or"), "b32") => WarpReduce::Or,
                    (Some("xor"), "b32") => WarpReduce::Xor,
                    _ => return Err("only the integer redux.sync forms are implemented".into()),
                };
                let a = self.src(n(1)?, None)?;
                let mask = self.src(n(2)?, None)?;
                let d = self.dst(n(0)?)?;
                Ok((
                    Op::WarpReduce(WarpReduceArgs {
                        op,
                        d,
                        a,
                        negate: false,
                        mask,
                    }),
                    0,
                    Class::Shfl,
                ))
            }
            "activemask" => Ok((
                Op::ActiveMask {
                    d: self.dst(n(0)?)?,
                },
                0,
                Class::Shfl,
            )),
            "shfl" => {
                if !i.has("sync") || last != "b32" {
                    return Err("only shfl.sync.*.b32 is implemented".into());
                }
                let mode = match p.get(2).copied() {
                    Some("idx") => ShuffleMode::Idx,
                    Some("up") => ShuffleMode::Up,
                    Some("down") => ShuffleMode::Down,
                    Some("bfly") => ShuffleMode::Bfly,
                    _ => return Err("unknown shuffle mode".into()),
                };
                let (d, pd) = match n(0)? {
                    Operand::Pair(a, b) => (self.dst(a)?, self.dst(b)?),
                    o => (self.dst(o)?, u32::MAX),
                };
                let a = self.src(n(1)?, None)?;
                let b = self.src(n(2)?, None)?;
                let c = self.src(n(3)?, None)?;
                let mask = self.src(n(4)?, None)?;
                let op = Op::Shfl(ShflArgs {
                    mode,
                    d,
                    p: pd,
                    a,
                    b,
                    c,
                    mask,
                });
                Ok((op, 0, Class::Shfl))
            }
            _ => Err("instruction not implemented by the PTX backend".into()),
        }
    }

    /// `bar` and `barrier`: block barriers, `bar.red`, and `bar.warp.sync`.
    pub(super) fn barrier(
        &mut self,
        i: &parse::Instruction<'static>,
        site: Site,
    ) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let ops = &i.operands;
        let n = |k: usize| operand(&i.operands, k);
        let last = *p.last().unwrap();
        let op0 = p[0];
        if i.has("warp") {
            let mask = self.src(n(0)?, None)?;
            return Ok((Op::WarpSync { mask }, 0, Class::Bar));
        }
        // `bar.red.op.type d, a{, b}, {!}c` (PTX ISA, "bar, barrier"): `a` the
        // barrier, `b` a thread count, `c` the predicate.
        let red = i.has("red");
        if !i.has("sync") && !red {
            return Err("only bar.sync / barrier.sync and bar.red are implemented".into());
        }
        let id_at = usize::from(red);
        if ops.len() != 1 + 2 * id_at {
            return Err("barriers with a thread count are not implemented".into());
        }
        let id = match ops[id_at] {
            Operand::Int(id) => id,
            Operand::Reg(_) if !red && !i.has("aligned") && op0 == "barrier" => {
                let site = *self.barrier_sites.entry(0).or_insert(site);
                let id = self.src(&ops[id_at], None)?;
                return Ok((Op::BarById { id, site }, 0, Class::Bar));
            }
            _ => return Err(
                "the barrier id must be a constant (or a register in a non-aligned `barrier.sync`)"
                    .into(),
            ),
        };
        if id != 0 {
            return Err("named barriers other than 0 are not implemented".into());
        }
        // `bar.sync` is `barrier.sync.aligned`: matched by instruction. A non-aligned
        // `barrier.sync` may be reached at different instructions: matched by id.
        let aligned = op0 == "bar" || i.has("aligned");
        let site = if aligned {
            site
        } else {
            *self.barrier_sites.entry(id as u32).or_insert(site)
        };
        if !red {
            return Ok((Op::Bar { site }, 0, Class::Bar));
        }
        let op = match (i.has("popc"), i.has("and"), i.has("or"), last) {
            (true, false, false, "u32") => BarRedOp::Popc,
            (false, true, false, "pred") => BarRedOp::And,
            (false, false, true, "pred") => BarRedOp::Or,
            _ => {
                return Err(
                    "only bar.red.popc.u32, bar.red.and.pred and bar.red.or.pred exist".into(),
                );
            }
        };
        let (a, negate) = match n(2)? {
            Operand::Not(q) => (self.src(q, None)?, true),
            q => (self.src(q, None)?, false),
        };
        let d = self.dst(n(0)?)?;
        Ok((
            Op::BarRed(BarRedArgs {
                site,
                op,
                d,
                a,
                negate,
            }),
            0,
            Class::Bar,
        ))
    }
}
