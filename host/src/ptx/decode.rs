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

use std::collections::HashMap;

use kernels::cuda::emu::{MmaInput, PtxSite, ShuffleMode, Site, WgmmaSync};

use super::parse::{self, Function, Operand, Statement};

/// A slot in the per-thread array.
pub type Slot = u32;

/// An integer type's width and signedness (`.b` and `.u` are unsigned).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Int {
    pub bits: u8,
    pub signed: bool,
}

/// A float type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Float {
    F32,
    F64,
}

/// Binary integer (and predicate) operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOp {
    Add,
    Sub,
    MulLo,
    MulHi,
    MulWide,
    Div,
    Rem,
    Min,
    Max,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

/// Unary integer operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntUnary {
    Neg,
    Not,
    Abs,
    Popc,
    Clz,
    Brev,
}

/// Binary float operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatOp {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
}

/// Unary float operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatUnary {
    Neg,
    Abs,
    Rcp,
    Sqrt,
    Rsqrt,
    Ex2,
    Lg2,
}

/// `setp` comparisons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// Unordered forms (true when either float operand is NaN).
    Equ,
    Neu,
    Ltu,
    Leu,
    Gtu,
    Geu,
    Num,
    Nan,
}

/// What `setp` compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpType {
    Int(Int),
    Float(Float, bool),
}

/// `setp`'s optional `.and/.or/.xor` with a third predicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoolOp {
    And,
    Or,
    Xor,
}

/// A conversion, with everything `cvt` needs decided at decode time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conv {
    /// Integer to integer: sign- or zero-extend from `from`, optionally saturate, wrap to `to`.
    Int {
        from: Int,
        to: Int,
        sat: bool,
    },
    /// f32 to f16 or bf16, rounding to nearest even.
    F32ToHalf {
        bf16: bool,
    },
    /// f16 or bf16 to f32 (exact).
    HalfToF32 {
        bf16: bool,
    },
    /// f32 to f64 (exact) or f64 to f32 (nearest even).
    F32ToF64,
    F64ToF32,
    /// Float to float of the same type, rounded to an integral value.
    RoundInt {
        ty: Float,
        mode: Round,
    },
    /// Float to integer, rounded, saturating, NaN to 0.
    FloatToInt {
        from: Float,
        to: Int,
        mode: Round,
    },
    /// Integer to float, nearest even.
    IntToFloat {
        from: Int,
        to: Float,
    },
}

/// Rounding to an integral value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Round {
    Nearest,
    Zero,
    Down,
    Up,
}

/// A state space of a load or store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    Global,
    Shared,
    /// Resolved per access: inside the block's shared window is shared, anything else global.
    Generic,
}

/// A decoded operation. `d` is a destination slot; other fields are source slots unless noted.
#[derive(Clone, Debug)]
pub enum Op {
    /// `d = a & mask`.
    Mov {
        d: Slot,
        a: Slot,
        mask: u64,
    },
    /// `mov.b64 d, {a, b}` (and .b32 from two .b16): packs `n` parts of `bits` each.
    Pack {
        d: Slot,
        parts: [Slot; 4],
        n: u8,
        bits: u8,
    },
    /// `mov.b64 {a, b}, s`: the reverse.
    Unpack {
        ds: [Slot; 4],
        s: Slot,
        n: u8,
        bits: u8,
    },
    Int {
        op: IntOp,
        ty: Int,
        d: Slot,
        a: Slot,
        b: Slot,
    },
    /// `mad.lo/hi/wide`: `d = mul(a, b) + c`.
    Mad {
        mul: IntOp,
        ty: Int,
        d: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
    },
    IntUnary {
        op: IntUnary,
        ty: Int,
        d: Slot,
        a: Slot,
    },
    /// `bfe`: `len` bits of `a` from bit `pos`.
    Bfe {
        ty: Int,
        d: Slot,
        a: Slot,
        pos: Slot,
        len: Slot,
    },
    Float {
        op: FloatOp,
        ty: Float,
        ftz: bool,
        sat: bool,
        d: Slot,
        a: Slot,
        b: Slot,
    },
    Fma {
        ty: Float,
        ftz: bool,
        sat: bool,
        d: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
    },
    FloatUnary {
        op: FloatUnary,
        ty: Float,
        ftz: bool,
        d: Slot,
        a: Slot,
    },
    Setp {
        cmp: Cmp,
        ty: CmpType,
        d: Slot,
        /// `p|q`: `q` gets the complement (`u32::MAX` when absent).
        d2: Slot,
        a: Slot,
        b: Slot,
        /// `.and/.or/.xor` with predicate `c`, negated when the flag says so.
        combine: Option<(BoolOp, Slot, bool)>,
    },
    Selp {
        d: Slot,
        a: Slot,
        b: Slot,
        p: Slot,
    },
    Cvt {
        conv: Conv,
        ftz: bool,
        sat: bool,
        d: Slot,
        a: Slot,
    },
    /// `d = a + shared base` (`cvta.shared`) or `a - shared base` (`cvta.to.shared`).
    CvtaShared {
        to: bool,
        d: Slot,
        a: Slot,
    },
    /// `ld.param`: `bytes` at `offset` in the parameter buffer, extended to the register.
    LdParam {
        d: Slot,
        offset: u32,
        bytes: u8,
        signed: bool,
    },
    Ld(Box<Mem>),
    St(Box<Mem>),
    Bra {
        target: u32,
    },
    Exit,
    Trap,
    /// A block barrier, matched by the site it carries.
    Bar {
        site: Site,
    },
    Shfl {
        mode: ShuffleMode,
        d: Slot,
        p: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
        mask: Slot,
    },
    WarpSync {
        mask: Slot,
    },
    LdMatrix {
        trans: bool,
        d: [Slot; 4],
        addr: Slot,
        space: Space,
    },
    Mma(Box<Mma>),
    CpAsync {
        dst: Slot,
        src: Slot,
        src_bytes: Slot,
    },
    CpCommit,
    CpWait {
        pending: u32,
    },
    /// `mbarrier.{init,arrive,arrive.expect_tx,try_wait.parity}` on the barrier at `addr`
    /// (a `.shared` address when `shared`, else generic); `arg` the count, bytes or parity
    /// (`u32::MAX` for none); `d` the state or try_wait's predicate (`u32::MAX` for none).
    Mbarrier {
        kind: MbarrierKind,
        d: Slot,
        addr: Slot,
        shared: bool,
        arg: Slot,
    },
    /// `cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes`:
    /// `.shared` addresses `dst` and `bar`, the tensor map's generic address `map`.
    Tma {
        dst: Slot,
        map: Slot,
        coords: [Slot; 2],
        bar: Slot,
    },
    Wgmma(Box<Wgmma>),
    WgmmaSync(WgmmaSync),
    /// Executes as nothing here: the fences that order the asynchronous proxy (the emulator
    /// has one view of memory) and `setmaxnreg` (no register file; its count is checked at
    /// decode).
    Nop,
}

/// Which mbarrier operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MbarrierKind {
    Init,
    Arrive,
    ArriveExpectTx,
    TryWait,
}

/// `wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}.{bf16,f16}`: `d` the N / 2
/// accumulator registers in the order the PTX lists them (the ISA's fragment order), `a` A's
/// descriptor or its four registers, `b` B's descriptor, `scale_d` the predicate (false:
/// D = A B).
#[derive(Clone, Debug)]
pub struct Wgmma {
    pub input: MmaInput,
    pub n: u32,
    pub d: Vec<Slot>,
    pub a: WgmmaSource,
    pub b: Slot,
    pub scale_d: Slot,
    pub trans_b: bool,
}

/// Where a `wgmma`'s A comes from.
#[derive(Clone, Debug)]
pub enum WgmmaSource {
    /// Shared memory, through the descriptor in this register.
    Shared(Slot),
    /// Registers: four `.b32` of two 16-bit elements each, laid out as the ISA's figure of the
    /// register A fragment says (the emulator's `a_fragment`).
    Registers([Slot; 4]),
}

/// A load or store of `n` elements of `elem` bytes at `[addr + offset]`.
#[derive(Clone, Debug)]
pub struct Mem {
    pub space: Space,
    pub elem: u8,
    pub n: u8,
    /// Sign-extend loaded values into the register (`.s` types).
    pub signed: bool,
    /// Destinations of a load, sources of a store.
    pub regs: [Slot; 4],
    pub addr: Slot,
    pub offset: i64,
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32`.
#[derive(Clone, Debug)]
pub struct Mma {
    pub input: MmaInput,
    pub d: [Slot; 4],
    pub a: [Slot; 4],
    pub b: [Slot; 2],
    pub c: [Slot; 4],
}

/// The instruction classes the dynamic mix reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    LdParam,
    LdGlobal(u8),
    StGlobal(u8),
    LdShared(u8),
    StShared(u8),
    /// Generic loads and stores (resolved to a space per access).
    LdGeneric(u8),
    StGeneric(u8),
    Mma,
    LdMatrix,
    CpAsync,
    Mbarrier,
    Tma,
    Wgmma,
    Fence,
    Ex2,
    Lg2,
    Rcp,
    Shfl,
    Bar,
    IntArith,
    FloatArith,
    Convert,
    Compare,
    Branch,
    Move,
    Other,
}

impl Class {
    /// A short name for tables.
    pub fn name(self) -> String {
        match self {
            Class::LdParam => "ld.param".into(),
            Class::LdGlobal(b) => format!("ld.global {b}B"),
            Class::StGlobal(b) => format!("st.global {b}B"),
            Class::LdShared(b) => format!("ld.shared {b}B"),
            Class::StShared(b) => format!("st.shared {b}B"),
            Class::LdGeneric(b) => format!("ld (generic) {b}B"),
            Class::StGeneric(b) => format!("st (generic) {b}B"),
            Class::Mma => "mma".into(),
            Class::LdMatrix => "ldmatrix".into(),
            Class::CpAsync => "cp.async".into(),
            Class::Mbarrier => "mbarrier".into(),
            Class::Tma => "cp.async.bulk.tensor".into(),
            Class::Wgmma => "wgmma".into(),
            Class::Fence => "fence/setmaxnreg".into(),
            Class::Ex2 => "ex2".into(),
            Class::Lg2 => "lg2".into(),
            Class::Rcp => "rcp".into(),
            Class::Shfl => "shfl".into(),
            Class::Bar => "bar".into(),
            Class::IntArith => "integer arithmetic".into(),
            Class::FloatArith => "float arithmetic".into(),
            Class::Convert => "conversion".into(),
            Class::Compare => "compare/select".into(),
            Class::Branch => "branch".into(),
            Class::Move => "move".into(),
            Class::Other => "other".into(),
        }
    }
}

/// One decoded instruction.
#[derive(Clone, Debug)]
pub struct Inst {
    pub op: Op,
    /// Guard predicate slot, `u32::MAX` for none.
    pub guard: Slot,
    /// Run when the guard is false (`@!%p`).
    pub negated: bool,
    /// Floating-point operations it performs (fma 2; add, mul, compare, ex2... 1; `mma` is
    /// counted by the emulator when the warp completes it).
    pub flops: u8,
}

/// What a thread fills in when it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    Tid(u8),
    Ntid(u8),
    Ctaid(u8),
    Nctaid(u8),
    LaneId,
    WarpId,
    /// A counter the emulator has no cycles for: 0, as the source emulator's `clock64`.
    Zero,
    /// The shared-space address of module shared variable `i` (`None` in `shared` for dynamic).
    SharedVar(usize),
    /// The generic address of the block's shared window (offset 0 of the shared space).
    SharedBase,
}

/// A decoded entry point.
#[derive(Debug)]
pub struct Kernel {
    pub name: &'static str,
    /// (name, type, bytes, offset) of each parameter, in order.
    pub params: Vec<parse::Param<'static>>,
    /// Size of the parameter buffer.
    pub param_bytes: usize,
    pub code: Vec<Inst>,
    /// `sites[i]` is instruction `i`'s PTX site.
    pub sites: &'static [PtxSite],
    pub classes: Vec<Class>,
    /// Initial slot values: zeros for registers, the constants.
    pub template: Vec<u64>,
    /// Slots a thread fills when it starts.
    pub fills: Vec<(Slot, Fill)>,
    /// The shared-window base slot.
    pub shared_base: Slot,
    /// Per instruction other than `wgmma.mma_async`, the `wgmma` accumulator and A-fragment
    /// registers it reads or writes (empty for most): each such access is checked against the
    /// thread's `wait_group`s and `wgmma.fence`s. Empty when the kernel has no `wgmma`.
    pub acc_uses: Vec<Box<[Slot]>>,
    /// `.maxntid`, if the entry declares it.
    pub maxntid: Option<[u32; 3]>,
}

/// A module shared variable as the interpreter allocates it.
#[derive(Debug)]
pub struct SharedSlot {
    pub name: &'static str,
    /// `None`: the dynamic shared memory array.
    pub bytes: Option<u64>,
    pub align: u32,
}

struct Decoder<'m> {
    function: &'m Function<'static>,
    shared: &'m [SharedSlot],
    template: Vec<u64>,
    constants: HashMap<u64, Slot>,
    fills: Vec<(Slot, Fill)>,
    labels: HashMap<&'static str, u32>,
    barrier_sites: &'m mut HashMap<u32, Site>,
    shared_base: Slot,
}

type DResult<T> = Result<T, String>;

/// Decodes entry `function`; `Err` names the first instruction it cannot run.
pub fn decode(
    function: &Function<'static>,
    shared: &[SharedSlot],
    files: &[(u32, &'static str)],
) -> Result<Kernel, String> {
    let name = function.name;
    // The PTX sites, one per instruction, leaked so that reports and profiles can hold them.
    let instrs: Vec<&parse::Instruction<'static>> = function.instructions().collect();
    let sites: &'static [PtxSite] = Box::leak(
        instrs
            .iter()
            .map(|i| PtxSite {
                function: name,
                line: i.line,
                text: if i.text.contains(['\t', '\n']) || i.text.contains("  ") {
                    let words: Vec<&str> = i.text.split_whitespace().collect();
                    Box::leak(words.join(" ").into_boxed_str())
                } else {
                    i.text
                },
                source: i.loc.and_then(|(file, line)| {
                    files
                        .iter()
                        .find(|(n, _)| *n == file)
                        .map(|(_, path)| (*path, line))
                }),
            })
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    // Labels name the index of the next instruction.
    let mut labels = HashMap::new();
    let mut next = 0u32;
    for s in &function.body {
        match s {
            Statement::Label { name, .. } => {
                labels.insert(*name, next);
            }
            Statement::Instruction(_) => next += 1,
            _ => {}
        }
    }
    let nregs = function.registers.len();
    let mut barrier_sites = HashMap::new();
    let mut d = Decoder {
        function,
        shared,
        template: vec![0; nregs + 1],
        constants: HashMap::new(),
        fills: Vec::new(),
        labels,
        barrier_sites: &mut barrier_sites,
        shared_base: nregs as Slot,
    };
    d.fills.push((d.shared_base, Fill::SharedBase));
    let mut code = Vec::with_capacity(instrs.len());
    let mut classes = Vec::with_capacity(instrs.len());
    for (k, instr) in instrs.iter().enumerate() {
        let site = Site::ptx(&sites[k]);
        let (op, flops, class) = d.instruction(instr, site).map_err(|why| {
            format!(
                "kernel `{name}`, PTX line {}: `{}`: {why}",
                instr.line, instr.text
            )
        })?;
        let (guard, negated) = match instr.guard {
            Some(g) => (g.reg.0, g.negated),
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
    let param_bytes = function
        .params
        .last()
        .map_or(0, |p| (p.offset + p.bytes) as usize);
    let (template, fills, shared_base) = (d.template, d.fills, d.shared_base);
    let acc_uses = accumulator_uses(&instrs, &code);
    Ok(Kernel {
        name,
        params: function.params.clone(),
        param_bytes,
        code,
        sites,
        classes,
        template,
        fills,
        shared_base,
        acc_uses,
        maxntid: function.maxntid,
    })
}

/// Per instruction, the registers it names that some `wgmma.mma_async` of the kernel writes as
/// its accumulator or reads as its register A fragment. The ISA makes both kinds alike: an
/// ordinary access needs a `wgmma.fence` before the next `wgmma` that uses them, and accessing
/// them before the `wait_group` of the `wgmma` using them is undefined.
fn accumulator_uses(instrs: &[&parse::Instruction<'static>], code: &[Inst]) -> Vec<Box<[Slot]>> {
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
    fn regs(o: &Operand<'static>, out: &mut Vec<Slot>) {
        match o {
            Operand::Reg(r) => out.push(r.0),
            Operand::Address { base: Some(b), .. } | Operand::Not(b) => regs(b, out),
            Operand::Vector(items) => items.iter().for_each(|x| regs(x, out)),
            Operand::Pair(a, b) => {
                regs(a, out);
                regs(b, out);
            }
            Operand::Tensor { map, coords } => {
                regs(map, out);
                coords.iter().for_each(|x| regs(x, out));
            }
            _ => {}
        }
    }
    instrs
        .iter()
        .zip(code)
        .map(|(i, inst)| {
            if matches!(inst.op, Op::Wgmma(_)) {
                return Box::default();
            }
            let mut named = Vec::new();
            i.operands.iter().for_each(|o| regs(o, &mut named));
            named.retain(|s| accumulators.contains(s));
            named.dedup();
            named.into_boxed_slice()
        })
        .collect()
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

/// All-ones in the low `bits`.
pub fn mask(bits: u8) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
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
            Operand::Reg(r) => Ok(r.0),
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
                        "%clock" | "%clock64" | "%globaltimer" => Some(Fill::Zero),
                        _ => None,
                    },
                    _ => None,
                };
                let fill =
                    fill.ok_or_else(|| format!("special register `{name}` is not implemented"))?;
                Ok(self.fill(fill))
            }
            Operand::Symbol(name) => {
                let i = self
                    .shared
                    .iter()
                    .position(|v| v.name == *name)
                    .ok_or_else(|| format!("`{name}` is not a shared variable"))?;
                Ok(self.fill(Fill::SharedVar(i)))
            }
            other => Err(format!("operand {other:?} where a value was expected")),
        }
    }

    fn dst(&self, o: &Operand<'static>) -> DResult<Slot> {
        match o {
            Operand::Reg(r) => Ok(r.0),
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
        let ops = &i.operands;
        let n = |k: usize| -> DResult<&Operand<'static>> {
            ops.get(k)
                .ok_or_else(|| format!("operand {} is missing", k + 1))
        };
        let last = *p.last().unwrap();
        let modifiers = if p.len() > 2 {
            &p[1..p.len() - 1]
        } else {
            &[][..]
        };
        let ftz = i.has("ftz");
        let sat = i.has("sat");
        let op0 = p[0];
        // Float rounding: only round-to-nearest-even is implemented for arithmetic.
        let rounding_ok = || -> DResult<()> {
            for r in ["rz", "rm", "rp"] {
                if i.has(r) {
                    return Err(format!("rounding mode .{r} is not implemented"));
                }
            }
            Ok(())
        };
        let int_of = |t: Ty| -> DResult<Int> {
            match t {
                Ty::Int(i) => Ok(i),
                Ty::Pred => Ok(Int {
                    bits: 1,
                    signed: false,
                }),
                _ => Err("not an integer type".into()),
            }
        };
        match op0 {
            "mov" => {
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
            "add" | "sub" | "mul" | "div" | "rem" | "min" | "max" | "and" | "or" | "xor"
            | "shl" | "shr" => {
                let t = ty(last).ok_or("unknown type")?;
                if let Ty::Float(f) = t {
                    rounding_ok()?;
                    let op = match op0 {
                        "add" => FloatOp::Add,
                        "sub" => FloatOp::Sub,
                        "mul" => FloatOp::Mul,
                        "div" => FloatOp::Div,
                        "min" => FloatOp::Min,
                        "max" => FloatOp::Max,
                        _ => return Err("not a float operation".into()),
                    };
                    if i.has("NaN") || i.has("xorsign") || i.has("abs") {
                        return Err("min/max variant not implemented".into());
                    }
                    let a = self.src(n(1)?, Some(f))?;
                    let b = self.src(n(2)?, Some(f))?;
                    let d = self.dst(n(0)?)?;
                    let op = Op::Float {
                        op,
                        ty: f,
                        ftz,
                        sat,
                        d,
                        a,
                        b,
                    };
                    return Ok((op, 1, Class::FloatArith));
                }
                let ty = int_of(t)?;
                if sat || i.has("cc") {
                    return Err("saturating or carry integer arithmetic is not implemented".into());
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
            "mad" | "fma" => {
                let t = ty(last).ok_or("unknown type")?;
                let a = n(1)?;
                if let Ty::Float(f) = t {
                    // `mad.rn.f32` is `fma.rn.f32` (one rounding) since sm_20.
                    rounding_ok()?;
                    let (a, b, c) = (
                        self.src(a, Some(f))?,
                        self.src(n(2)?, Some(f))?,
                        self.src(n(3)?, Some(f))?,
                    );
                    let d = self.dst(n(0)?)?;
                    let op = Op::Fma {
                        ty: f,
                        ftz,
                        sat,
                        d,
                        a,
                        b,
                        c,
                    };
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
                    Op::Mad {
                        mul,
                        ty,
                        d,
                        a,
                        b,
                        c,
                    },
                    0,
                    Class::IntArith,
                ))
            }
            "neg" | "not" | "abs" | "popc" | "clz" | "brev" | "rcp" | "sqrt" | "rsqrt" | "ex2"
            | "lg2" => {
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
                        _ => return Err("not a float operation".into()),
                    };
                    let approx = i.has("approx");
                    match op {
                        FloatUnary::Rcp | FloatUnary::Sqrt if !approx => rounding_ok()?,
                        FloatUnary::Ex2 | FloatUnary::Lg2 | FloatUnary::Rsqrt if !approx => {
                            return Err(".approx is required".into());
                        }
                        _ => {}
                    }
                    let a = self.src(n(1)?, Some(f))?;
                    let (flops, class) = match op {
                        FloatUnary::Ex2 => (1, Class::Ex2),
                        FloatUnary::Lg2 => (1, Class::Lg2),
                        FloatUnary::Rcp => (1, Class::Rcp),
                        FloatUnary::Neg | FloatUnary::Abs => (0, Class::FloatArith),
                        _ => (1, Class::FloatArith),
                    };
                    let op = Op::FloatUnary {
                        op,
                        ty: f,
                        ftz,
                        d,
                        a,
                    };
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
                let op = Op::Setp {
                    cmp,
                    ty: cty,
                    d,
                    d2,
                    a,
                    b,
                    combine,
                };
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
            "cvt" => self.cvt(i),
            "cvta" => {
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
                    _ => Err("cvta for this state space is not implemented".into()),
                }
            }
            "ld" | "st" => self.mem(i),
            "bra" => {
                let Operand::Symbol(label) = n(0)? else {
                    return Err("branch without a label".into());
                };
                let target = *self
                    .labels
                    .get(label)
                    .ok_or_else(|| format!("label `{label}` is not in the function"))?;
                Ok((Op::Bra { target }, 0, Class::Branch))
            }
            "ret" | "exit" => Ok((Op::Exit, 0, Class::Branch)),
            "trap" => Ok((Op::Trap, 0, Class::Other)),
            "bar" | "barrier" => {
                if i.has("warp") {
                    let mask = self.src(n(0)?, None)?;
                    return Ok((Op::WarpSync { mask }, 0, Class::Bar));
                }
                if !i.has("sync") {
                    return Err("only bar.sync / barrier.sync are implemented".into());
                }
                if ops.len() != 1 {
                    return Err("barriers with a thread count are not implemented".into());
                }
                let Operand::Int(id) = ops[0] else {
                    return Err("the barrier id must be a constant".into());
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
                Ok((Op::Bar { site }, 0, Class::Bar))
            }
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
                let op = Op::Shfl {
                    mode,
                    d,
                    p: pd,
                    a,
                    b,
                    c,
                    mask,
                };
                Ok((op, 0, Class::Shfl))
            }
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
                let op = Op::LdMatrix {
                    trans: i.has("trans"),
                    d,
                    addr,
                    space,
                };
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
            "cp" if p.get(2) == Some(&"bulk") => self.tma(i),
            "cp" => match p.get(2).copied() {
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
                    let op = Op::CpAsync {
                        dst,
                        src,
                        src_bytes,
                    };
                    Ok((op, 0, Class::CpAsync))
                }
                _ => Err("this cp form is not implemented".into()),
            },
            "mbarrier" => self.mbarrier(i),
            "wgmma" => self.wgmma(i),
            "fence" => match &p[1..] {
                ["proxy", "async"] | ["proxy", "async", "shared::cta"] => {
                    Ok((Op::Nop, 0, Class::Fence))
                }
                ["mbarrier_init", "release", "cluster"] => Ok((Op::Nop, 0, Class::Fence)),
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

    fn mbarrier(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
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
        let op = Op::Mbarrier {
            kind,
            d,
            addr,
            shared,
            arg,
        };
        Ok((op, 0, Class::Mbarrier))
    }

    fn tma(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
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
        let op = Op::Tma {
            dst: self.register_address(dst)?,
            map: self.src(map, None)?,
            coords: [self.src(c0, None)?, self.src(c1, None)?],
            bar: self.register_address(bar)?,
        };
        Ok((op, 0, Class::Tma))
    }

    fn wgmma(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
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

    fn cvt(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        if p.len() < 3 {
            return Err("cvt needs two types".into());
        }
        let (dt, st) = (p[p.len() - 2], p[p.len() - 1]);
        let (dty, sty) = (ty(dt).ok_or("unknown type")?, ty(st).ok_or("unknown type")?);
        let mode = |i: &parse::Instruction| -> Option<Round> {
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
        let float_round_ok = || -> DResult<()> {
            for r in ["rz", "rm", "rp", "rna", "rs"] {
                if i.has(r) {
                    return Err(format!("rounding mode .{r} is not implemented"));
                }
            }
            Ok(())
        };
        let conv = match (&dty, &sty) {
            (Ty::Int(to), Ty::Int(from)) => Conv::Int {
                from: *from,
                to: *to,
                sat: i.has("sat"),
            },
            (Ty::Half { bf16 }, Ty::Float(Float::F32)) => {
                float_round_ok()?;
                Conv::F32ToHalf { bf16: *bf16 }
            }
            (Ty::Float(Float::F32), Ty::Half { bf16 }) => Conv::HalfToF32 { bf16: *bf16 },
            (Ty::Float(Float::F64), Ty::Float(Float::F32)) => Conv::F32ToF64,
            (Ty::Float(Float::F32), Ty::Float(Float::F64)) => {
                float_round_ok()?;
                Conv::F64ToF32
            }
            (Ty::Float(a), Ty::Float(b)) if a == b => Conv::RoundInt {
                ty: *a,
                mode: mode(i).ok_or("same-type cvt needs an integer rounding mode")?,
            },
            (Ty::Int(to), Ty::Float(from)) => Conv::FloatToInt {
                from: *from,
                to: *to,
                mode: mode(i).ok_or("float-to-integer cvt needs a rounding mode")?,
            },
            (Ty::Float(to), Ty::Int(from)) => {
                float_round_ok()?;
                Conv::IntToFloat {
                    from: *from,
                    to: *to,
                }
            }
            _ => return Err("this conversion is not implemented".into()),
        };
        let a = self.src(&i.operands[1], None)?;
        let d = self.dst(&i.operands[0])?;
        let op = Op::Cvt {
            conv,
            ftz: i.has("ftz"),
            sat: i.has("sat"),
            d,
            a,
        };
        Ok((op, 0, Class::Convert))
    }

    fn mem(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
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
            if !load || n != 1 {
                return Err("only scalar ld.param is implemented".into());
            }
            let Some(Operand::Symbol(name)) = base.as_deref() else {
                return Err("ld.param must name a parameter".into());
            };
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
}
