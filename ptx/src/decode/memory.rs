//! Decoding of memory accesses: `ld`, `st` (the parameter memory's vectors included) and
//! `atom`/`red`.

use super::ir::*;
use super::{DResult, Decoder, Ty, ty};
use crate::parse::{self, Operand};

impl Decoder<'_> {
    pub(super) fn mem(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let load = p[0] == "ld";
        let t = ty(p[p.len() - 1]).ok_or("unknown type")?;
        let (elem, signed) = match t {
            Ty::Int(it) => (it.bits / 8, it.signed),
            Ty::Float(Float::F32) => (4, false),
            Ty::Float(Float::F64) => (8, false),
            Ty::Half { .. } => (2, false),
            Ty::Pred => return Err("predicate loads are not PTX".into()),
        };
        let mut space = Space::Generic;
        let mut param = false;
        let mut n = 1u8;
        for part in &p[1..p.len() - 1] {
            match *part {
                "global" => space = Space::Global,
                "shared" | "shared::cta" => space = Space::Shared,
                "local" => space = Space::Local,
                // The module's `.const` variables live in (read-only) device memory.
                "const" if load => space = Space::Global,
                "const" => return Err("st.const: the constant space is read-only".into()),
                "param" => param = true,
                "v2" => n = 2,
                "v4" => n = 4,
                // Cache and ordering hints: this emulator runs one thread at a time, in order.
                "ca" | "cg" | "cs" | "lu" | "cv" | "wb" | "wt" | "nc" | "volatile" | "weak"
                | "relaxed" | "acquire" | "release" | "cta" | "gpu" | "sys" => {}
                other => return Err(format!("`.{other}` is not implemented")),
            }
        }
        let (data, address) = if load { (0, 1) } else { (1, 0) };
        let Operand::Address { base, offset } = &i.operands[address] else {
            return Err("expected an address".into());
        };
        if param {
            let Some(Operand::Symbol(name)) = base.as_deref() else {
                return Err("ld.param / st.param must name a parameter".into());
            };
            // A call's `.param` variable, or a callee's parameter: the thread's parameter memory.
            if let Some((at, size)) = self.pmem_var(name) {
                let bytes = u64::from(elem) * u64::from(n);
                if *offset < 0 || *offset as u64 + bytes > u64::from(size) {
                    return Err(format!("accesses past parameter `{name}` ({size} bytes)"));
                }
                let offset = at + *offset as u32;
                if n != 1 {
                    return self.pmem_vector(i, load, offset, elem, n, signed);
                }
                let op = if load {
                    Op::LdPmem {
                        d: self.dst(&i.operands[0])?,
                        offset,
                        bytes: elem,
                        signed,
                    }
                } else {
                    let float = match t {
                        Ty::Float(f) => Some(f),
                        _ => None,
                    };
                    Op::StPmem {
                        a: self.src(&i.operands[1], float)?,
                        offset,
                        bytes: elem,
                    }
                };
                return Ok((op, 0, Class::LdParam));
            }
            if !load || !self.function.entry {
                return Err(format!(
                    "`{name}` is not a parameter of `{}`",
                    self.function.name
                ));
            }
            if n != 1 {
                return Err("a vector ld.param of a kernel parameter is not implemented".into());
            }
            let (_, param) = self
                .function
                .param(name)
                .ok_or_else(|| format!("`{name}` is not a parameter of the kernel"))?;
            let offset = param.offset as i64 + offset;
            if offset < 0 || offset as u64 + u64::from(elem) > u64::from(param.offset + param.bytes)
            {
                return Err(format!("reads past parameter `{name}`"));
            }
            let d = self.dst(&i.operands[0])?;
            let op = Op::LdParam {
                d,
                offset: offset as u32,
                bytes: elem,
                signed,
            };
            return Ok((op, 0, Class::LdParam));
        }
        let addr = match base.as_deref() {
            Some(b) => self.src(b, None)?,
            None => self.constant(0),
        };
        let mut regs = [u32::MAX; 4];
        match &i.operands[data] {
            Operand::Vector(items) => {
                if items.len() != n as usize {
                    return Err("vector length does not match .v".into());
                }
                for (k, item) in items.iter().enumerate() {
                    regs[k] = if load {
                        match item {
                            Operand::Sink => u32::MAX,
                            o => self.dst(o)?,
                        }
                    } else {
                        self.src(item, None)?
                    };
                }
            }
            o if n == 1 => {
                regs[0] = if load {
                    self.dst(o)?
                } else {
                    self.src(o, None)?
                }
            }
            _ => return Err("expected a vector operand".into()),
        }
        let bytes = elem * n;
        let class = match (space, load) {
            (Space::Local, true) => Class::LdLocal(bytes),
            (Space::Local, false) => Class::StLocal(bytes),
            (Space::Global, true) => Class::LdGlobal(bytes),
            (Space::Global, false) => Class::StGlobal(bytes),
            (Space::Shared, true) => Class::LdShared(bytes),
            (Space::Shared, false) => Class::StShared(bytes),
            (Space::Generic, true) => Class::LdGeneric(bytes),
            (Space::Generic, false) => Class::StGeneric(bytes),
        };
        let mem = Box::new(Mem {
            space,
            elem,
            n,
            signed,
            regs,
            addr,
            offset: *offset,
        });
        Ok((if load { Op::Ld(mem) } else { Op::St(mem) }, 0, class))
    }

    /// `ld.param.vN` / `st.param.vN` of parameter memory at `offset`: `n` elements of `elem`
    /// bytes.
    pub(super) fn pmem_vector(
        &mut self,
        i: &parse::Instruction<'static>,
        load: bool,
        offset: u32,
        elem: u8,
        n: u8,
        signed: bool,
    ) -> DResult<(Op, u8, Class)> {
        let data = if load { 0 } else { 1 };
        let Operand::Vector(items) = &i.operands[data] else {
            return Err("expected a vector operand".into());
        };
        if items.len() != usize::from(n) {
            return Err("vector length does not match .v".into());
        }
        let mut regs = [u32::MAX; 4];
        for (k, item) in items.iter().enumerate() {
            regs[k] = match (load, item) {
                (true, Operand::Sink) => u32::MAX,
                (true, o) => self.dst(o)?,
                (false, o) => self.src(o, None)?,
            };
        }
        let v = Box::new(PmemVector {
            regs,
            n,
            offset,
            bytes: elem,
            signed,
        });
        let op = if load { Op::LdPmemV(v) } else { Op::StPmemV(v) };
        Ok((op, 0, Class::LdParam))
    }

    /// `atom` and `red`: `atom{.sem}{.scope}{.space}.op.type d, [a], b{, c}`.
    pub(super) fn atom(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let red = p[0] == "red";
        let mut space = Space::Generic;
        let mut op = None;
        for part in &p[1..p.len() - 1] {
            op = op.or(match *part {
                "and" => Some(AtomOp::And),
                "or" => Some(AtomOp::Or),
                "xor" => Some(AtomOp::Xor),
                "exch" => Some(AtomOp::Exch),
                "cas" => Some(AtomOp::Cas),
                "add" => Some(AtomOp::Add),
                "inc" => Some(AtomOp::Inc),
                "dec" => Some(AtomOp::Dec),
                "min" => Some(AtomOp::Min),
                "max" => Some(AtomOp::Max),
                _ => None,
            });
            match *part {
                "global" => space = Space::Global,
                "shared" | "shared::cta" => space = Space::Shared,
                // Orderings and scopes: the emulator's one thread at a time is sequentially
                // consistent, stronger than any of them.
                "relaxed" | "acquire" | "release" | "acq_rel" | "cta" | "gpu" | "sys"
                | "cluster" => {}
                // No flush of subnormals: what the f16/bf16 adds do (and must say).
                "noftz" => {}
                "and" | "or" | "xor" | "exch" | "cas" | "add" | "inc" | "dec" | "min" | "max" => {}
                other => return Err(format!("`.{other}` on an atomic is not implemented")),
            }
        }
        let op = op.ok_or("atomic without an operation")?;
        let last = p[p.len() - 1];
        let half = match last {
            "f16" | "f16x2" => Some(false),
            "bf16" | "bf16x2" => Some(true),
            _ => None,
        };
        let ty = match (half, ty(last)) {
            (Some(bf16), _) if op == AtomOp::Add && i.has("noftz") => AtomType::Half {
                bf16,
                pair: last.ends_with("x2"),
            },
            (Some(_), _) => {
                return Err("f16 and bf16 atomics are implemented as add.noftz only".into());
            }
            (None, Some(Ty::Int(t))) if t.bits >= 32 => AtomType::Int(t),
            (None, Some(Ty::Float(f))) if matches!(op, AtomOp::Add | AtomOp::Exch) => {
                AtomType::Float(f)
            }
            _ => {
                return Err(
                    "only 32- and 64-bit integer atomics, f32/f64 add and exch, and f16/bf16 add.noftz are implemented (no vector atomics)"
                        .into(),
                );
            }
        };
        if matches!(op, AtomOp::Inc | AtomOp::Dec) && p[p.len() - 1] != "u32" {
            return Err(".inc and .dec take .u32".into());
        }
        let ops = &i.operands;
        let (d, rest) = if red {
            (u32::MAX, &ops[..])
        } else {
            (self.dst(&ops[0])?, &ops[1..])
        };
        let (addr, offset) = match rest.first() {
            Some(Operand::Address { base, offset }) => (
                match base.as_deref() {
                    Some(b) => self.src(b, None)?,
                    None => self.constant(0),
                },
                *offset,
            ),
            _ => return Err("expected an address".into()),
        };
        let float = match ty {
            AtomType::Float(f) => Some(f),
            AtomType::Int(_) | AtomType::Half { .. } => None,
        };
        let b = self.src(rest.get(1).ok_or("operand b is missing")?, float)?;
        let c = match (op, rest.get(2)) {
            (AtomOp::Cas, Some(c)) => self.src(c, float)?,
            (AtomOp::Cas, None) => return Err("atom.cas takes b and c".into()),
            (_, None) => u32::MAX,
            (_, Some(_)) => {
                return Err("unexpected operand (cache hints are not implemented)".into());
            }
        };
        let atom = Atom {
            op,
            ty,
            space,
            d,
            addr,
            offset,
            b,
            c,
        };
        Ok((
            Op::Atom(Box::new(atom)),
            u8::from(float.is_some()),
            Class::Atomic,
        ))
    }
}
