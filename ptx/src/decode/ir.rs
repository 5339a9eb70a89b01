//! The decoded form the interpreter runs: slots, operations and their operands, the kernel.

use kernels::cuda::emu::{MmaInput, PtxSite, ShuffleMode, Site, WarpReduce, WgmmaSync};

use crate::parse::{self, Function};

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
    /// `div.approx.f32`: `a * (1 / b)` with the reciprocal flushed (the ISA's range rule).
    DivApprox,
    Min,
    Max,
    /// `copysign.f32 d, a, b`: `b` with `a`'s sign.
    CopySign,
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
    /// `sin.approx`, `cos.approx`, `tanh.approx` (the MUFU approximations).
    Sin,
    Cos,
    Tanh,
}

/// `testp`'s classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Testp {
    Finite,
    Infinite,
    Number,
    NotANumber,
    Normal,
    Subnormal,
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
    /// Integer to integer: sign- or zero-extend from `from`, optionally saturate, wrap to `to`,
    /// then sign- or zero-extend (as `to` is signed) to the destination register's `reg` bits.
    Int {
        from: Int,
        to: Int,
        sat: bool,
        reg: u8,
    },
    /// f32 to f16 or bf16, rounding to nearest even; `.relu` clamps a negative result to +0,
    /// `.satfinite` an infinite or out-of-range one to the largest finite value (both make a NaN
    /// the canonical NaN).
    F32ToHalf {
        bf16: bool,
        relu: bool,
        satfinite: bool,
    },
    /// `cvt.rn{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, a, b`: `a` to the upper half, `b` to
    /// the lower (the second source is the instruction's `b`).
    F32x2ToHalf2 {
        bf16: bool,
        relu: bool,
        satfinite: bool,
    },
    /// A float to its own type: the `.ftz` flush and `.sat` clamp alone (`cvt.sat.f32.f32`,
    /// what a precise `expf` uses to clamp its argument's fraction).
    Same(Float),
    /// f16 or bf16 to f32 (exact).
    HalfToF32 {
        bf16: bool,
    },
    /// f32 to f64 (exact) or f64 to f32 (in the rounding mode).
    F32ToF64,
    F64ToF32(Round),
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
    /// Integer to float, in the rounding mode (directed modes to f32 only).
    IntToFloat {
        from: Int,
        to: Float,
        mode: Round,
    },
    /// Integer to f16 or bf16, rounded to nearest even (`cvt.rn.bf16.s32`, what
    /// `__int2bfloat16_rn` compiles to).
    IntToHalf {
        from: Int,
        bf16: bool,
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
    /// The thread's own local memory (its stack frames).
    Local,
    /// Resolved per access: inside the block's shared window is shared, anything else global.
    Generic,
}

/// A packed half operation (`add/sub/mul/fma .f16x2/.bf16x2`), done lane by lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Half2Op {
    Add,
    Sub,
    Mul,
    Fma,
}

/// What `bar.red` combines the block's predicates into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarRedOp {
    /// `.popc.u32`: how many are true.
    Popc,
    /// `.and.pred`: whether all are.
    And,
    /// `.or.pred`: whether any is.
    Or,
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
    Mad(MadArgs),
    IntUnary {
        op: IntUnary,
        ty: Int,
        d: Slot,
        a: Slot,
    },
    /// `bfi`: `b` with its `len` bits from `pos` replaced by `a`'s low bits.
    Bfi(BfiArgs),
    /// `prmt.b32{.mode}`: each byte of `d` picked from the eight of `{b, a}` by a nibble of a
    /// selector: `c` itself in the generic form (a nibble may also replicate that byte's sign),
    /// or, for a named mode (`.f4e .b4e .rc8 .ecl .ecr .rc16`), the mode's row of
    /// `PRMT_MODES` at c[1:0].
    Prmt {
        mode: Option<[u16; 4]>,
        d: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
    },
    /// `lop3.b32`: bit `i` of `d` is bit `(a_i << 2) | (b_i << 1) | c_i` of `lut`.
    Lop3(Lop3Args),
    /// `shf.{l,r}.{wrap,clamp}.b32 d, a, b, c`: the funnel shift of the 64-bit `b:a` (`b` the
    /// upper half) by `c` (`.wrap`: `c & 31`; `.clamp`: `min(c, 32)`), `d` the upper half of
    /// the result for `.l`, the lower for `.r`.
    Shf {
        left: bool,
        clamp: bool,
        d: Slot,
        a: Slot,
        b: Slot,
        c: Slot,
    },
    /// `bfind{.shiftamt}`: the most significant non-sign bit's position (all ones for none).
    Bfind {
        ty: Int,
        shiftamt: bool,
        d: Slot,
        a: Slot,
    },
    /// `testp.op`: which class of float `a` is.
    Testp {
        test: Testp,
        ty: Float,
        d: Slot,
        a: Slot,
    },
    /// `add.cc`, `addc{.cc}`, `sub.cc`, `subc{.cc}`: with the thread's carry flag `cc`.
    Carry(CarryArgs),
    /// `bfe`: `len` bits of `a` from bit `pos`.
    Bfe {
        ty: Int,
        d: Slot,
        a: Slot,
        pos: Slot,
        len: Slot,
    },
    Float(FloatArgs),
    Fma(FmaArgs),
    FloatUnary(FloatUnaryArgs),
    Setp(SetpArgs),
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
    /// A conversion of two sources into one packed register (`cvt.rn.bf16x2.f32 d, a, b`).
    Cvt2 {
        conv: Conv,
        d: Slot,
        a: Slot,
        b: Slot,
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
    /// `ld.param` / `st.param` of a `.param` variable of a call or a callee's parameter:
    /// `bytes` at `offset` in the thread's parameter memory.
    LdPmem {
        d: Slot,
        offset: u32,
        bytes: u8,
        signed: bool,
    },
    StPmem {
        a: Slot,
        offset: u32,
        bytes: u8,
    },
    /// `ld.param.v2/.v4` / `st.param.v2/.v4` of a call's `.param` variable (a returned
    /// 16-byte struct, read as one vector): `n` elements of `bytes` from `offset` on.
    LdPmemV(Box<PmemVector>),
    StPmemV(Box<PmemVector>),
    Ld(Box<Mem>),
    St(Box<Mem>),
    /// `atom` (`d` the old value) and `red` (`d` `u32::MAX`).
    Atom(Box<Atom>),
    /// `cvta.local` (`to` false) and `cvta.to.local`: between `.local` and generic addresses.
    CvtaLocal {
        to: bool,
        d: Slot,
        a: Slot,
    },
    Bra {
        target: u32,
    },
    Call(Box<Call>),
    /// `ret`: back to the caller, or the thread's end in the entry.
    Ret,
    Exit,
    Trap,
    /// A call of `__assertfail` (what CUDA's `assert` compiles to): the launch ends with the
    /// assertion's message, file, line and function.
    AssertFail(Box<AssertFail>),
    /// A call of `vprintf` (what CUDA's `printf` compiles to): the text formatted and kept for
    /// the launch's report, the count of arguments returned.
    Printf(Box<Printf>),
    /// A block barrier, matched by the site it carries.
    Bar {
        site: Site,
    },
    /// `barrier.sync a` with the barrier's id in register `a` (what a `-G` build's
    /// `__barrier_sync(id)` helper runs): barrier 0, matched as the non-aligned `barrier.sync 0`
    /// is, at `site`; another id is refused when the thread gets there.
    BarById {
        id: Slot,
        site: Site,
    },
    /// `{add,sub,mul,fma}.rn{.ftz}{.sat}{.relu}.{f16x2,bf16x2} d, a, b{, c}`: each 16-bit lane
    /// of `d` from the same lane of the sources (`c` unused but by `fma`).
    Half2(Half2Args),
    /// `bar.red` on barrier 0: a block barrier (matched by `site`) that also combines every
    /// thread's predicate `a` (negated when `negate`) into `d`: the count of true predicates
    /// (`.popc.u32`), or whether all (`.and.pred`) or any (`.or.pred`) is true.
    BarRed(BarRedArgs),
    Shfl(ShflArgs),
    WarpSync {
        mask: Slot,
    },
    /// `vote.sync` / `redux.sync`: `d` gets the reduction of `a` over the mask (a predicate
    /// result for `.all/.any/.uni`, written as 0 or 1; `negate` for `vote`'s `!p`).
    WarpReduce(WarpReduceArgs),
    /// `activemask.b32 d`.
    ActiveMask {
        d: Slot,
    },
    LdMatrix(LdMatrixArgs),
    Mma(Box<Mma>),
    CpAsync(CpAsyncArgs),
    CpCommit,
    CpWait {
        pending: u32,
    },
    /// `mbarrier.{init,arrive,arrive.expect_tx,try_wait.parity}` on the barrier at `addr`
    /// (a `.shared` address when `shared`, else generic); `arg` the count, bytes or parity
    /// (`u32::MAX` for none); `d` the state or try_wait's predicate (`u32::MAX` for none).
    Mbarrier(MbarrierArgs),
    /// `cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes`:
    /// `.shared` addresses `dst` and `bar`, the tensor map's generic address `map`.
    Tma(TmaArgs),
    Wgmma(Box<Wgmma>),
    WgmmaSync(WgmmaSync),
    /// Executes as nothing here: the fences that order the asynchronous proxy (the emulator
    /// has one view of memory) and `setmaxnreg` (no register file; its count is checked at
    /// decode).
    Nop,
}

/// The operands and modifiers of [`Op::Mad`].
#[derive(Clone, Debug)]
pub struct MadArgs {
    pub mul: IntOp,
    pub ty: Int,
    pub d: Slot,
    pub a: Slot,
    pub b: Slot,
    pub c: Slot,
}

/// The operands and modifiers of [`Op::Float`].
#[derive(Clone, Debug)]
pub struct FloatArgs {
    pub op: FloatOp,
    pub ty: Float,
    pub ftz: bool,
    pub sat: bool,
    pub round: Round,
    pub d: Slot,
    pub a: Slot,
    pub b: Slot,
}

/// The operands and modifiers of [`Op::Fma`].
#[derive(Clone, Debug)]
pub struct FmaArgs {
    pub ty: Float,
    pub ftz: bool,
    pub sat: bool,
    pub round: Round,
    pub d: Slot,
    pub a: Slot,
    pub b: Slot,
    pub c: Slot,
}

/// The operands and modifiers of [`Op::FloatUnary`].
#[derive(Clone, Debug)]
pub struct FloatUnaryArgs {
    pub op: FloatUnary,
    pub ty: Float,
    pub ftz: bool,
    pub round: Round,
    pub d: Slot,
    pub a: Slot,
}

/// The operands and modifiers of [`Op::Bfi`].
#[derive(Clone, Debug)]
pub struct BfiArgs {
    pub bits: u8,
    pub d: Slot,
    pub a: Slot,
    pub b: Slot,
    pub pos: Slot,
    pub len: Slot,
}

/// The operands and modifiers of [`Op::Lop3`].
#[derive(Clone, Debug)]
pub struct Lop3Args {
    pub bits: u8,
    pub lut: u8,
    pub d: Slot,
    pub a: Slot,
    pub b: Slot,
    pub c: Slot,
}

/// The operands and modifiers of [`Op::Carry`].
#[derive(Clone, Debug)]
pub struct CarryArgs {
    pub sub: bool,
    pub carry_in: bool,
    pub carry_out: bool,
    pub ty: Int,
    pub d: Slot,
    pub a: Slot,
    pub b: Slot,
    pub cc: Slot,
}

/// The operands and modifiers of [`Op::Setp`].
#[derive(Clone, Debug)]
pub struct SetpArgs {
    pub cmp: Cmp,
    pub ty: CmpType,
    pub d: Slot,
    /// `p|q`: `q` gets the complement (`u32::MAX` when absent).
    pub d2: Slot,
    pub a: Slot,
    pub b: Slot,
    /// `.and/.or/.xor` with predicate `c`, negated when the flag says so.
    pub combine: Option<(BoolOp, Slot, bool)>,
}

/// The operands and modifiers of [`Op::Half2`].
#[derive(Clone, Debug)]
pub struct Half2Args {
    pub op: Half2Op,
    pub bf16: bool,
    pub ftz: bool,
    pub sat: bool,
    pub relu: bool,
    pub d: Slot,
    pub a: Slot,
    pub b: Slot,
    pub c: Slot,
}

/// The operands and modifiers of [`Op::BarRed`].
#[derive(Clone, Debug)]
pub struct BarRedArgs {
    pub site: Site,
    pub op: BarRedOp,
    pub d: Slot,
    pub a: Slot,
    pub negate: bool,
}

/// The operands and modifiers of [`Op::Shfl`].
#[derive(Clone, Debug)]
pub struct ShflArgs {
    pub mode: ShuffleMode,
    pub d: Slot,
    pub p: Slot,
    pub a: Slot,
    pub b: Slot,
    pub c: Slot,
    pub mask: Slot,
}

/// The operands and modifiers of [`Op::WarpReduce`].
#[derive(Clone, Debug)]
pub struct WarpReduceArgs {
    pub op: WarpReduce,
    pub d: Slot,
    pub a: Slot,
    pub negate: bool,
    pub mask: Slot,
}

/// The operands and modifiers of [`Op::LdMatrix`].
#[derive(Clone, Debug)]
pub struct LdMatrixArgs {
    pub trans: bool,
    pub d: [Slot; 4],
    pub addr: Slot,
    pub space: Space,
}

/// The operands and modifiers of [`Op::CpAsync`].
#[derive(Clone, Debug)]
pub struct CpAsyncArgs {
    pub dst: Slot,
    pub src: Slot,
    pub src_bytes: Slot,
}

/// The operands and modifiers of [`Op::Mbarrier`].
#[derive(Clone, Debug)]
pub struct MbarrierArgs {
    pub kind: MbarrierKind,
    pub d: Slot,
    pub addr: Slot,
    pub shared: bool,
    pub arg: Slot,
}

/// The operands and modifiers of [`Op::Tma`].
#[derive(Clone, Debug)]
pub struct TmaArgs {
    pub dst: Slot,
    pub map: Slot,
    pub coords: [Slot; 2],
    pub bar: Slot,
}

/// An atomic operation (PTX ISA, "Parallel Synchronization and Communication Instructions:
/// atom" and "red").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomOp {
    And,
    Or,
    Xor,
    Exch,
    Cas,
    Add,
    /// `.inc`: `old >= b ? 0 : old + 1`; `.dec`: `old == 0 || old > b ? b : old - 1`.
    Inc,
    Dec,
    Min,
    Max,
}

/// The operand type of an atomic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomType {
    Int(Int),
    Float(Float),
    /// `.f16`, `.bf16` (`pair` false) or `.f16x2`, `.bf16x2` (two packed in 32 bits): `add`
    /// only, with `.noftz`, each element rounded to nearest even.
    Half {
        bf16: bool,
        pair: bool,
    },
}

/// `n` elements of parameter memory, `bytes` each from `offset` on, and their registers (a
/// load's `u32::MAX` for a `_` sink).
#[derive(Clone, Debug)]
pub struct PmemVector {
    pub regs: [Slot; 4],
    pub n: u8,
    pub offset: u32,
    pub bytes: u8,
    pub signed: bool,
}

/// Where a call of `__assertfail(message, file, line, function, char_size)` passed its
/// arguments: offsets in the caller's parameter memory (message, file and function are
/// generic addresses of C strings, line a 32-bit integer).
#[derive(Clone, Debug)]
pub struct AssertFail {
    pub message: u32,
    pub file: u32,
    pub line: u32,
    pub function: u32,
}

/// Where a call of `vprintf(format, args)` passed its arguments and wants its result: offsets
/// in the caller's parameter memory (`format` the generic address of the C format string,
/// `args` that of the argument buffer, `ret` the 32-bit result, if the call takes it).
#[derive(Clone, Debug)]
pub struct Printf {
    pub format: u32,
    pub args: u32,
    pub ret: Option<u32>,
}

/// `atom{.sem}{.scope}{.space}.op.type d, [a], b{, c}` / `red...op.type [a], b`.
#[derive(Clone, Debug)]
pub struct Atom {
    pub op: AtomOp,
    pub ty: AtomType,
    pub space: Space,
    /// The old value's register; `u32::MAX` for `red`.
    pub d: Slot,
    pub addr: Slot,
    pub offset: i64,
    pub b: Slot,
    /// `cas`'s new value (`u32::MAX` otherwise).
    pub c: Slot,
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
    LdLocal(u8),
    StLocal(u8),
    Atomic,
    Call,
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
            Class::LdLocal(b) => format!("ld.local {b}B"),
            Class::StLocal(b) => format!("st.local {b}B"),
            Class::Atomic => "atom/red".into(),
            Class::Call => "call/ret".into(),
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
    /// `%lanemask_eq/le/lt/ge/gt`: the lanes whose index compares so with this lane's.
    LaneMask(Cmp),
    /// The carry flag of `add.cc` and friends (starts at 0).
    Carry,
    /// The address of the module's `.global`/`.const` variable `i` on the device.
    GlobalVar(usize),
    /// One of the `%reserved_smem_offset_*` registers: where the block's reserved shared memory
    /// lies in its shared window ([`Reserved`]).
    Reserved(Reserved),
}

/// The shared memory the driver reserves for system software in every block, which the PTX
/// ISA's `%reserved_smem_offset_begin`, `_end`, `_cap` and `%reserved_smem_offset<2>` locate
/// and whose layout it leaves to the driver. The CUDA C++ Programming Guide gives 1 KB per
/// block from compute capability 8.0; cooperative groups keeps the scratch of its multi-warp
/// tiles at `%reserved_smem_offset_1` and counts on 288 bytes there. Modelled as a 1 KiB array
/// of the block's shared memory (every check applies to it, as to the kernel's own), its first
/// half at offset 0, its second at offset 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reserved {
    Begin,
    End,
    Cap,
    Offset0,
    Offset1,
}

impl Reserved {
    /// Bytes of the reserved region.
    pub const BYTES: u32 = 1024;

    /// The register's value when the region starts at shared-space offset `begin`.
    pub fn value(self, begin: u32) -> u32 {
        match self {
            Reserved::Begin | Reserved::Offset0 => begin,
            Reserved::Offset1 => begin + Self::BYTES / 2,
            Reserved::End => begin + Self::BYTES,
            Reserved::Cap => Self::BYTES,
        }
    }
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
    /// Per instruction, whether it computes on a tensor-core product's result
    /// ([`crate::analysis::dataflow`]): the softmax's share of an attention kernel's instructions.
    pub on_products: Vec<bool>,
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
    /// Bytes of per-thread parameter memory: the `.param` variables of calls, and the callees'
    /// parameters (0 for a kernel that calls nothing).
    pub pmem_bytes: usize,
    /// Bytes of per-thread local memory the kernel's frames can take (the stack).
    pub local_bytes: usize,
    /// The entry's own frame: its size, and its `.local` arrays (slot, offset).
    pub entry_frame: u32,
    pub entry_locals: Vec<(Slot, u32)>,
}

/// A shared variable as the interpreter allocates it: module scope, or declared in a function
/// body (`function`).
#[derive(Debug)]
pub struct SharedSlot {
    pub name: &'static str,
    /// `None`: the dynamic shared memory array.
    pub bytes: Option<u64>,
    pub align: u32,
    /// The function whose body declares it (`None`: module scope).
    pub function: Option<&'static str>,
}

/// The module a kernel is decoded from: what its `call`s and names can reach.
pub struct ModuleRef<'m> {
    pub functions: &'m [Function<'static>],
    /// The module's `.global` and `.const` variables, by name (their addresses are the
    /// device's: [`Fill::GlobalVar`]).
    pub globals: &'m [parse::GlobalVar<'static>],
    pub broken: &'m [parse::Broken<'static>],
    pub shared: &'m [SharedSlot],
    pub files: &'m [(u32, &'static str)],
}

/// How deep calls may nest (recursion included) before the thread is stopped with a report:
/// a GPU's call stack is its local memory (`cudaLimitStackSize`, 1 KiB a thread by default),
/// which a runaway recursion overflows.
pub const MAX_CALL_DEPTH: usize = 256;

/// `call`: save the callee's registers and parameter memory, copy the arguments in, open its
/// frame of local memory, jump; `ret` undoes it (`exec.rs`).
#[derive(Clone, Debug)]
pub struct Call {
    pub target: u32,
    /// The callee's registers `[start, start + len)`.
    pub regs: (Slot, u32),
    /// The callee's parameter memory `[start, end)`.
    pub pmem: (u32, u32),
    /// (from, to, bytes) in parameter memory: the caller's argument variables to the callee's
    /// parameters.
    pub args: Vec<(u32, u32, u32)>,
    /// (from, to, bytes): the callee's return parameters to the caller's variables, at `ret`.
    pub rets: Vec<(u32, u32, u32)>,
    /// The callee's `.local` arrays (slot, offset in the frame) and its frame (size, align).
    pub locals: Vec<(Slot, u32)>,
    pub frame: (u32, u32),
    /// The callee's name, for reports.
    pub callee: &'static str,
}

/// All-ones in the low `bits`.
pub fn mask(bits: u8) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}
