//! Decoding a parsed PTX entry into the compact form the interpreter runs.
//!
//! Every operand becomes an index into one flat per-thread array of 64-bit slots: the function's
//! registers first, then one slot per distinct constant, per special register it reads (`%tid.x`,
//! ...), per shared variable it names, and one for the base of the block's shared window. So the
//! interpreter never matches on operand kinds, parses names or hashes anything: constants live in
//! the slot array's template, copied once per thread, and the rest is filled when a thread starts.
//!
//! An instruction this backend does not implement is a decode error naming the instruction, the
//! kernel and the PTX line: the kernel refuses to launch rather than run with a hole in it.
//!
//! The decoded form is `ir.rs`'s (re-exported here). `Decoder::instruction` sends each opcode to
//! its family's module: `arith` (moves and arithmetic), `bits`, `compare`, `convert`, `memory`,
//! `control` (branches and calls), `warp` (collectives and barriers), `tensor` (`ldmatrix`,
//! `mma`, `wgmma`) and `async_copy` (`cp.async`, TMA, `mbarrier`, fences); `layout` places a
//! kernel's functions in the thread's state.

mod arith;
mod async_copy;
mod bits;
mod compare;
mod control;
mod convert;
mod ir;
mod layout;
mod memory;
mod tensor;
mod warp;

pub use ir::*;

use std::collections::HashMap;

use kernels::cuda::emu::{PtxSite, Site};

use crate::parse::{self, Function, Operand, Statement};

use layout::{has_cycle, layouts, ptx_sites, reachable};
use tensor::accumulator_uses;

/// Where one function of a kernel lives in the thread's state.
#[derive(Debug)]
struct Layout<'m> {
    function: &'m Function<'static>,
    /// Its first instruction's index in the kernel's code.
    code_start: u32,
    /// Its registers' first slot (the entry's are slots 0..).
    reg_base: u32,
    /// The formal parameters', return parameters' and body `.param`s' offsets in the thread's
    /// parameter memory (for the entry, its formal parameters are the launch's buffer instead).
    params: Vec<u32>,
    returns: Vec<u32>,
    param_vars: Vec<u32>,
    /// `[start, end)` of its part of the parameter memory.
    pmem: (u32, u32),
    /// Per `.local` array: the slot that holds its `.local` address in the running frame, and
    /// its offset in the frame.
    locals: Vec<(Slot, u32)>,
    /// The frame's size and alignment.
    frame: (u32, u32),
}

struct Decoder<'m> {
    function: &'m Function<'static>,
    module: &'m ModuleRef<'m>,
    template: Vec<u64>,
    constants: HashMap<u64, Slot>,
    fills: Vec<(Slot, Fill)>,
    labels: HashMap<&'static str, u32>,
    barrier_sites: &'m mut HashMap<u32, Site>,
    shared_base: Slot,
    layouts: Vec<Layout<'m>>,
    /// The layout of the function being decoded.
    current: usize,
}

type DResult<T> = Result<T, String>;

/// Decodes entry `function` and the functions it calls; `Err` names the first instruction it
/// cannot run.
pub fn decode<'m>(
    function: &'m Function<'static>,
    module: &'m ModuleRef<'m>,
) -> Result<Kernel, String> {
    let name = function.name;
    let order = reachable(function, module)?;
    // Every function's instructions in code order, and the function (its index in `order`)
    // each belongs to.
    let instrs: Vec<&parse::Instruction<'static>> =
        order.iter().flat_map(|f| f.instructions()).collect();
    let mut owner = Vec::with_capacity(instrs.len());
    for (k, f) in order.iter().enumerate() {
        owner.extend(std::iter::repeat_n(k, f.instructions().count()));
    }
    let sites = ptx_sites(&order, &instrs, &owner, module);
    // Slots: the entry's registers, the shared-window base, then each callee's registers (and
    // its `.local` arrays' frame addresses); constants and fills follow as they are met.
    let mut template = vec![0; function.registers.len() + 1];
    let shared_base = function.registers.len() as Slot;
    let layouts = layouts(name, &order, &mut template)?;
    let mut barrier_sites = HashMap::new();
    let mut d = Decoder {
        function,
        module,
        template,
        constants: HashMap::new(),
        fills: Vec::new(),
        labels: HashMap::new(),
        barrier_sites: &mut barrier_sites,
        shared_base,
        layouts,
        current: 0,
    };
    d.fills.push((d.shared_base, Fill::SharedBase));
    let (code, classes) = d.code(name, &order, &instrs, &owner, sites)?;
    let param_bytes = function
        .params
        .last()
        .map_or(0, |p| (p.offset + p.bytes) as usize);
    let bases: Vec<u32> = owner.iter().map(|&k| d.layouts[k].reg_base).collect();
    // Local memory: the entry's frame, then at most one frame of each callee on the stack at
    // a time, unless a function recurses (a cycle of calls), where up to MAX_CALL_DEPTH.
    let callee_frames: u32 = d.layouts[1..]
        .iter()
        .map(|l| l.frame.0.next_multiple_of(16))
        .sum();
    let recursive = has_cycle(&order);
    let entry = &d.layouts[0];
    let local_bytes = entry.frame.0.next_multiple_of(16) as usize
        + callee_frames as usize * if recursive { MAX_CALL_DEPTH } else { 1 };
    let (entry_frame, entry_locals, pmem_bytes) = (
        entry.frame.0,
        entry.locals.clone(),
        d.layouts.last().map_or(0, |l| l.pmem.1) as usize,
    );
    let (template, fills, shared_base) = (d.template, d.fills, d.shared_base);
    let acc_uses = accumulator_uses(&instrs, &bases, &code);
    // Each function's own registers: the analysis runs function by function, in code order.
    let mut on_products = Vec::with_capacity(instrs.len());
    for f in &order {
        let start = on_products.len();
        let n = f.instructions().count();
        on_products.extend(crate::analysis::dataflow::on_products(
            f,
            &classes[start..start + n],
        ));
    }
    Ok(Kernel {
        name,
        params: function.params.clone(),
        param_bytes,
        code,
        sites,
        classes,
        on_products,
        template,
        fills,
        shared_base,
        acc_uses,
        maxntid: function.maxntid,
        pmem_bytes,
        local_bytes,
        entry_frame,
        entry_locals,
    })
}

/// The type named by an opcode part.
enum Ty {
    Int(Int),
    Float(Float),
    Half { bf16: bool },
    Pred,
}

fn ty(part: &str) -> Option<Ty> {
    let int = |bits, signed| Some(Ty::Int(Int { bits, signed }));
    match part {
        "pred" => Some(Ty::Pred),
        "b8" | "u8" => int(8, false),
        "s8" => int(8, true),
        "b16" | "u16" => int(16, false),
        "s16" => int(16, true),
        "b32" | "u32" => int(32, false),
        "s32" => int(32, true),
        "b64" | "u64" => int(64, false),
        "s64" => int(64, true),
        "f32" => Some(Ty::Float(Float::F32)),
        "f64" => Some(Ty::Float(Float::F64)),
        "f16" => Some(Ty::Half { bf16: false }),
        "bf16" => Some(Ty::Half { bf16: true }),
        _ => None,
    }
}

/// The float rounding modifier of `i`: `.rn` (the default), `.rz`, `.rm`, `.rp`.
fn float_round(i: &parse::Instruction) -> Round {
    if i.has("rz") {
        Round::Zero
    } else if i.has("rm") {
        Round::Down
    } else if i.has("rp") {
        Round::Up
    } else {
        Round::Nearest
    }
}

/// Operand `k` of an instruction, or an error naming it (1-based) if it is missing.
fn operand<'a>(ops: &'a [Operand<'static>], k: usize) -> DResult<&'a Operand<'static>> {
    ops.get(k)
        .ok_or_else(|| format!("operand {} is missing", k + 1))
}

/// Float rounding: every mode for f32, nearest even for f64.
fn rounding(i: &parse::Instruction, f: Float) -> DResult<Round> {
    let mode = float_round(i);
    if f == Float::F64 && mode != Round::Nearest {
        return Err("directed rounding (.rz, .rm, .rp) of f64 is not implemented".into());
    }
    Ok(mode)
}

/// An integer type (a predicate is a 1-bit unsigned one).
fn int_of(t: Ty) -> DResult<Int> {
    match t {
        Ty::Int(i) => Ok(i),
        Ty::Pred => Ok(Int {
            bits: 1,
            signed: false,
        }),
        _ => Err("not an integer type".into()),
    }
}

fn width(t: &Ty) -> u8 {
    match t {
        Ty::Int(i) => i.bits,
        Ty::Float(Float::F32) => 32,
        Ty::Float(Float::F64) => 64,
        Ty::Half { .. } => 16,
        Ty::Pred => 1,
    }
}

impl Decoder<'_> {
    /// Decodes the instructions of every function in code order (`owner[k]`: the index in
    /// `order` of instruction `k`'s function): an error names the first it cannot run.
    fn code(
        &mut self,
        name: &str,
        order: &[&Function<'static>],
        instrs: &[&parse::Instruction<'static>],
        owner: &[usize],
        sites: &'static [PtxSite],
    ) -> DResult<(Vec<Inst>, Vec<Class>)> {
        let mut code = Vec::with_capacity(instrs.len());
        let mut classes = Vec::with_capacity(instrs.len());
        for (k, instr) in instrs.iter().enumerate() {
            if k == 0 || owner[k] != owner[k - 1] {
                self.enter(owner[k]);
            }
            let site = Site::ptx(&sites[k]);
            let (op, flops, class) = self.instruction(instr, site).map_err(|why| {
                let f = order[owner[k]].name;
                let inside = if f == name {
                    String::new()
                } else {
                    format!(" (in `{f}`, which it calls)")
                };
                format!(
                    "kernel `{name}`, PTX line {}{inside}: `{}`: {why}",
                    instr.line, instr.text
                )
            })?;
            let (guard, negated) = match instr.guard {
                Some(g) => (self.reg(g.reg), g.negated),
                None => (u32::MAX, false),
            };
            code.push(Inst {
                op,
                guard,
                negated,
                flops,
            });
            classes.push(class);
        }
        Ok((code, classes))
    }

    /// Starts decoding the function of layout `k`: its registers, its labels.
    fn enter(&mut self, k: usize) {
        self.current = k;
        let layout = &self.layouts[k];
        self.function = layout.function;
        // Labels name the index of the next instruction.
        self.labels.clear();
        let mut next = layout.code_start;
        for s in &layout.function.body {
            match s {
                Statement::Label { name, .. } => {
                    self.labels.insert(*name, next);
                }
                Statement::Instruction(_) => next += 1,
                _ => {}
            }
        }
    }

    /// The slot of the current function's register `r`.
    fn reg(&self, r: parse::RegId) -> Slot {
        self.layouts[self.current].reg_base + r.0
    }

    fn constant(&mut self, bits: u64) -> Slot {
        if let Some(&s) = self.constants.get(&bits) {
            return s;
        }
        let s = self.template.len() as Slot;
        self.template.push(bits);
        self.constants.insert(bits, s);
        s
    }

    fn fill(&mut self, fill: Fill) -> Slot {
        if let Some(&(s, _)) = self.fills.iter().find(|(_, f)| *f == fill) {
            return s;
        }
        let s = self.template.len() as Slot;
        self.template.push(0);
        self.fills.push((s, fill));
        s
    }

    /// The slot of an address operand that must be a bare register, `[%rd]` (the asynchronous
    /// copies' operands: `cp.async`, `cp.async.bulk.tensor` and its mbarrier).
    fn register_address(&mut self, o: &Operand<'static>) -> DResult<Slot> {
        match o {
            Operand::Address {
                base: Some(b),
                offset: 0,
            } => self.src(b, None),
            _ => Err("this address must be [register], without an offset".into()),
        }
    }

    /// A source operand's slot. `float` says how an integer literal is read (PTX lets an
    /// integer literal stand for a float operand).
    fn src(&mut self, o: &Operand<'static>, float: Option<Float>) -> DResult<Slot> {
        match o {
            Operand::Reg(r) => Ok(self.reg(*r)),
            Operand::Int(v) => Ok(self.constant(match float {
                Some(Float::F32) => u64::from((*v as f32).to_bits()),
                Some(Float::F64) => (*v as f64).to_bits(),
                None => *v as u64,
            })),
            Operand::F32(bits) => Ok(self.constant(match float {
                Some(Float::F64) => f64::from(f32::from_bits(*bits)).to_bits(),
                _ => u64::from(*bits),
            })),
            Operand::F64(bits) => Ok(self.constant(match float {
                Some(Float::F32) => u64::from((f64::from_bits(*bits) as f32).to_bits()),
                _ => *bits,
            })),
            Operand::Special(name) => {
                let dim = |s: &str| match s {
                    "x" => Some(0),
                    "y" => Some(1),
                    "z" => Some(2),
                    _ => None,
                };
                let fill = match name.split_once('.') {
                    Some(("%tid", c)) => dim(c).map(Fill::Tid),
                    Some(("%ntid", c)) => dim(c).map(Fill::Ntid),
                    Some(("%ctaid", c)) => dim(c).map(Fill::Ctaid),
                    Some(("%nctaid", c)) => dim(c).map(Fill::Nctaid),
                    None => match *name {
                        "%laneid" => Some(Fill::LaneId),
                        "%warpid" => Some(Fill::WarpId),
                        "%lanemask_eq" => Some(Fill::LaneMask(Cmp::Eq)),
                        "%lanemask_le" => Some(Fill::LaneMask(Cmp::Le)),
                        "%lanemask_lt" => Some(Fill::LaneMask(Cmp::Lt)),
                        "%lanemask_ge" => Some(Fill::LaneMask(Cmp::Ge)),
                        "%lanemask_gt" => Some(Fill::LaneMask(Cmp::Gt)),
                        "%clock" | "%clock64" | "%globaltimer" => Some(Fill::Zero),
                        "%reserved_smem_offset_begin" => Some(Fill::Reserved(Reserved::Begin)),
                        "%reserved_smem_offset_end" => Some(Fill::Reserved(Reserved::End)),
                        "%reserved_smem_offset_cap" => Some(Fill::Reserved(Reserved::Cap)),
                        "%reserved_smem_offset_0" => Some(Fill::Reserved(Reserved::Offset0)),
                        "%reserved_smem_offset_1" => Some(Fill::Reserved(Reserved::Offset1)),
                        _ => None,
                    },
                    _ => None,
                };
                let fill = fill.ok_or_else(|| undeclared_or_special(name))?;
                Ok(self.fill(fill))
            }
            // The PTX ISA's predefined constant for the warp size, what `warpSize` compiles to.
            Operand::Symbol("WARP_SZ") => Ok(self.constant(32)),
            Operand::Symbol(name) => {
                // A `.local` array of this function: its address in the running frame.
                let layout = &self.layouts[self.current];
                if let Some(k) = layout.function.locals.iter().position(|v| v.name == *name) {
                    return Ok(layout.locals[k].0);
                }
                if let Some(i) = self.module.globals.iter().position(|v| v.name == *name) {
                    return Ok(self.fill(Fill::GlobalVar(i)));
                }
                // A shared variable: this function's own first, then the module's.
                let f = Some(self.function.name);
                let shared = self.module.shared;
                let i = shared
                    .iter()
                    .position(|v| v.name == *name && v.function == f)
                    .or_else(|| {
                        shared
                            .iter()
                            .position(|v| v.name == *name && v.function.is_none())
                    })
                    .ok_or_else(|| {
                        format!(
                            "`{name}` is not a variable of `{}` nor of the module",
                            self.function.name
                        )
                    })?;
                Ok(self.fill(Fill::SharedVar(i)))
            }
            other => Err(format!("operand {other:?} where a value was expected")),
        }
    }

    fn dst(&self, o: &Operand<'static>) -> DResult<Slot> {
        match o {
            Operand::Reg(r) => Ok(self.reg(*r)),
            Operand::Special(name) => Err(undeclared_or_special(name)),
            other => Err(format!("operand {other:?} where a register was expected")),
        }
    }

    fn vector<const N: usize>(
        &mut self,
        o: &Operand<'static>,
        dst: bool,
        float: Option<Float>,
    ) -> DResult<[Slot; N]> {
        let Operand::Vector(items) = o else {
            return Err(format!("expected a vector of {N} registers, got {o:?}"));
        };
        if items.len() != N {
            return Err(format!("expected {N} registers, got {}", items.len()));
        }
        let mut out = [0; N];
        for (k, item) in items.iter().enumerate() {
            out[k] = if dst {
                self.dst(item)?
            } else {
                self.src(item, float)?
            };
        }
        Ok(out)
    }

    fn instruction(
        &mut self,
        i: &parse::Instruction<'static>,
        site: Site,
    ) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let last = *p.last().unwrap();
        match p[0] {
            "mov" => self.mov(i),
            "add" | "sub" | "mul" | "fma" if matches!(last, "f16x2" | "bf16x2") => self.half2(i),
            "add" | "sub" | "mul" | "div" | "rem" | "min" | "max" | "and" | "or" | "xor"
            | "shl" | "shr" | "copysign" => self.binary(i),
            "mad" | "fma" => self.mad(i),
            "neg" | "not" | "abs" | "popc" | "clz" | "brev" | "rcp" | "sqrt" | "rsqrt" | "ex2"
            | "lg2" | "sin" | "cos" | "tanh" => self.unary(i),
            "bfi" | "prmt" | "lop3" | "bfind" | "bfe" | "shf" => self.bits(i),
            "testp" | "setp" | "selp" => self.compare(i),
            "addc" | "subc" => self.carry(i),
            "cvt" => self.cvt(i),
            "cvta" => self.cvta(i),
            "ld" | "st" => self.mem(i),
            "bra" | "ret" | "exit" => self.control(i),
            "call" => self.call(i),
            "atom" | "red" => self.atom(i),
            "vote" | "redux" | "activemask" | "shfl" => self.warp(i),
            // The emulator runs a block's threads one at a time and checks global races by the
            // memory model without fences: a fence orders nothing more here.
            "membar" => Ok((Op::Nop, 0, Class::Fence)),
            "trap" => Ok((Op::Trap, 0, Class::Other)),
            "bar" | "barrier" => self.barrier(i, site),
            "ldmatrix" | "mma" => self.matrix(i),
            "cp" if p.get(2) == Some(&"bulk") => self.tma(i),
            "cp" => self.cp_async(i),
            "mbarrier" => self.mbarrier(i),
            "wgmma" => self.wgmma(i),
            "fence" | "setmaxnreg" => self.fence(i),
            _ => Err("instruction not implemented by the PTX backend".into()),
        }
    }
}

/// Why `%name`, which no `.reg` declares, cannot be read or written: a register the function
/// does not declare (`%r9` past `.reg .b32 %r<9>`), or a special register the backend lacks.
fn undeclared_or_special(name: &str) -> String {
    let special = [
        "%tid",
        "%ntid",
        "%ctaid",
        "%nctaid",
        "%laneid",
        "%warpid",
        "%nwarpid",
        "%smid",
        "%nsmid",
        "%gridid",
        "%lanemask",
        "%clock",
        "%globaltimer",
        "%pm",
        "%envreg",
        "%dynamic_smem_size",
        "%total_smem_size",
        "%aggr_smem_size",
        "%cluster",
        "%is_explicit",
        "%reserved_smem",
    ];
    if special.iter().any(|s| name.starts_with(s)) {
        format!("special register `{name}` is not implemented")
    } else {
        format!("register `{name}` is not declared (no `.reg` of this function declares it)")
    }
}
