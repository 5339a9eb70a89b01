//! Decoding of the asynchronous copies and what orders them: `cp.async`, `cp.async.bulk.tensor`
//! (TMA), `mbarrier`, and the proxy fences (`fence`, `setmaxnreg`).

use super::ir::*;
use super::{DResult, Decoder, operand};
use crate::parse::{self, Operand};

impl Decoder<'_> {
    /// `cp.async` and its groups (the bulk copies are [`Self::tma`]).
    pub(super) fn cp_async(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let ops = &i.operands;
        let n = |k: usize| operand(&i.operands, k);
        match p.get(2).copied() {
            Some("commit_group") => Ok((Op::CpCommit, 0, Class::CpAsync)),
            Some("wait_group") => {
                let Operand::Int(pending) = n(0)? else {
                    return Err("wait_group needs a constant".into());
                };
                Ok((
                    Op::CpWait {
                        pending: *pending as u32,
                    },
                    0,
                    Class::CpAsync,
                ))
            }
            Some("wait_all") => Ok((Op::CpWait { pending: 0 }, 0, Class::CpAsync)),
            Some("cg" | "ca") if p[1] == "async" && i.has("global") => {
                let dst = self.register_address(n(0)?)?;
                let src = self.register_address(n(1)?)?;
                if n(2)? != &Operand::Int(16) {
                    return Err("only 16-byte cp.async is implemented".into());
                }
                let src_bytes = match ops.get(3) {
                    Some(o) => self.src(o, None)?,
                    None => self.constant(16),
                };
                let op = Op::CpAsync(CpAsyncArgs {
                    dst,
                    src,
                    src_bytes,
                });
                Ok((op, 0, Class::CpAsync))
            }
            _ => Err("this cp form is not implemented".into()),
        }
    }

    pub(super) fn mbarrier(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        if p.last() != Some(&"b64") {
            return Err("only .b64 mbarriers are implemented".into());
        }
        let shared = matches!(p[p.len() - 2], "shared::cta" | "shared");
        let form = &p[1..p.len() - 1 - usize::from(shared)];
        let kind = match form {
            ["init"] => MbarrierKind::Init,
            ["arrive"] => MbarrierKind::Arrive,
            ["arrive", "expect_tx"] => MbarrierKind::ArriveExpectTx,
            ["try_wait", "parity"] => MbarrierKind::TryWait,
            _ => return Err("this mbarrier form is not implemented".into()),
        };
        let ops = &i.operands;
        // init: [addr], count; arrive: state, [addr]; expect_tx: state, [addr], bytes;
        // try_wait: pred, [addr], parity.
        let (d, at, arg) = match (kind, ops.len()) {
            (MbarrierKind::Init, 2) => (None, 0, Some(1)),
            (MbarrierKind::Arrive, 2) => (Some(0), 1, None),
            (MbarrierKind::ArriveExpectTx | MbarrierKind::TryWait, 3) => (Some(0), 1, Some(2)),
            _ => return Err("unexpected operands (hints and counts are not implemented)".into()),
        };
        let Operand::Address {
            base: Some(base),
            offset,
        } = &ops[at]
        else {
            return Err("the mbarrier address must be [register]".into());
        };
        if *offset != 0 {
            return Err("the mbarrier address must be [register]".into());
        }
        let addr = self.src(base, None)?;
        let d = match d.map(|k| &ops[k]) {
            None | Some(Operand::Sink) => u32::MAX,
            Some(o) => self.dst(o)?,
        };
        let arg = match arg {
            Some(k) => self.src(&ops[k], None)?,
            None => u32::MAX,
        };
        let op = Op::Mbarrier(MbarrierArgs {
            kind,
            d,
            addr,
            shared,
            arg,
        });
        Ok((op, 0, Class::Mbarrier))
    }

    pub(super) fn tma(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let form = [
            "cp",
            "async",
            "bulk",
            "tensor",
            "2d",
            "shared::cluster",
            "global",
            "mbarrier::complete_tx::bytes",
        ];
        if i.parts[..] != form[..] {
            return Err(format!(
                "only {} is implemented (no im2col, multicast or cache hint)",
                form.join(".")
            ));
        }
        let [dst, tensor, bar] = &i.operands[..] else {
            return Err("expected [dst], [map, {c0, c1}], [mbarrier]".into());
        };
        let Operand::Tensor { map, coords } = tensor else {
            return Err("expected [map, {c0, c1}]".into());
        };
        let [c0, c1] = &coords[..] else {
            return Err("a 2-D copy takes two coordinates".into());
        };
        let op = Op::Tma(TmaArgs {
            dst: self.register_address(dst)?,
            map: self.src(map, None)?,
            coords: [self.src(c0, None)?, self.src(c1, None)?],
            bar: self.register_address(bar)?,
        });
        Ok((op, 0, Class::Tma))
    }

    /// Fences and register reallocation, which order or change nothing here.
    pub(super) fn fence(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let ops = &i.operands;
        let op0 = p[0];
        match op0 {
            "fence" => match &p[1..] {
                ["proxy", "async"] | ["proxy", "async", "shared::cta"] => {
                    Ok((Op::Nop, 0, Class::Fence))
                }
                ["mbarrier_init", "release", "cluster"] => Ok((Op::Nop, 0, Class::Fence)),
                ["sc" | "acq_rel", "cta" | "cluster" | "gpu" | "sys"] => {
                    Ok((Op::Nop, 0, Class::Fence))
                }
                _ => Err("this fence is not implemented".into()),
            },
            "setmaxnreg" => {
                if !matches!(&p[1..], ["inc" | "dec", "sync", "aligned", "u32"]) {
                    return Err("only setmaxnreg.{inc,dec}.sync.aligned.u32 is PTX".into());
                }
                match ops[..] {
                    [Operand::Int(n)] if (24..=256).contains(&n) && n % 8 == 0 => {
                        Ok((Op::Nop, 0, Class::Fence))
                    }
                    _ => Err("the count must be a constant multiple of 8 from 24 to 256".into()),
                }
            }
            _ => Err("instruction not implemented by the PTX backend".into()),
        }
    }
}
