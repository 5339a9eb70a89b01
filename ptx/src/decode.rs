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

use kernels::cuda::emu::{MmaInput, PtxSite, ShuffleMode, Site, WarpReduce, WgmmaSync};

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

/// How deep calls may nest (recursion included) before the thread is stopped with a report:
/// a GPU's call stack is its local memory (`cudaLimitStackSize`, 1 KiB a thread by default),
/// which a runaway recursion overflows.
pub const MAX_CALL_DEPTH: usize = 256;

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

/// An instruction's text on one line: NVRTC spreads a `call`'s operands over several, with tabs.
fn one_line(text: &'static str) -> &'static str {
    if text.contains(['\t', '\n']) || text.contains("  ") {
        let words: Vec<&str> = text.split_whitespace().collect();
        Box::leak(words.join(" ").into_boxed_str())
    } else {
        text
    }
}

/// The functions a kernel's code reaches: the entry first, then every `.func` its `call`s
/// name, in the order first named. A callee that is only declared, or whose body could not be
/// read, is an error naming the call.
fn reachable<'m>(
    entry: &'m Function<'static>,
    module: &ModuleRef<'m>,
) -> DResult<Vec<&'m Function<'static>>> {
    let mut order = vec![entry];
    let mut k = 0;
    while k < order.len() {
        let f = order[k];
        for i in f.instructions().filter(|i| i.parts[0] == "call") {
            let at = |why: String| {
                format!(
                    "kernel `{}`, PTX line {}: `{}`: {why}",
                    entry.name,
                    i.line,
                    one_line(i.text)
                )
            };
            let callee = callee(f, &i.operands).map_err(at)?;
            if [ASSERT_FAIL, VPRINTF].contains(&callee) || order.iter().any(|g| g.name == callee) {
                continue;
            }
            if let Some(b) = module.broken.iter().find(|b| b.name == callee) {
                return Err(at(format!(
                    "calls `{callee}`, which cannot be read: {}",
                    b.error
                )));
            }
            let Some(g) = module.functions.iter().find(|g| g.name == callee) else {
                return Err(at(format!(
                    "calls `{callee}`, which is only declared in the module (an external function the driver would supply): not implemented"
                )));
            };
            order.push(g);
        }
        k += 1;
    }
    Ok(order)
}

/// The function CUDA's `assert` calls when its condition is false (declared `.extern` in the
/// module; the driver supplies it): run as [`Op::AssertFail`].
const ASSERT_FAIL: &str = "__assertfail";

/// The function CUDA's `printf` calls (declared `.extern`; the driver supplies it): run as
/// [`Op::Printf`].
const VPRINTF: &str = "vprintf";

/// The function a `call` names: `call{.uni} {(ret, ...),} callee, (arg, ...){, prototype}`.
/// A register there is an indirect call (through a function pointer), named by its register.
fn callee(f: &Function<'static>, ops: &[Operand<'static>]) -> DResult<&'static str> {
    let at = usize::from(matches!(ops.first(), Some(Operand::Vector(_))));
    match ops.get(at) {
        Some(Operand::Symbol(name)) => Ok(*name),
        Some(Operand::Reg(r)) => {
            let prototype = match ops.last() {
                Some(Operand::Symbol(p)) => format!(" (prototype `{p}`)"),
                _ => String::new(),
            };
            Err(format!(
                "an indirect call through register `{}`{prototype}, a function pointer: not implemented (the backend calls functions by name only)",
                f.registers[r.0 as usize].name
            ))
        }
        other => Err(format!("expected the called function, got {other:?}")),
    }
}

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

/// The PTX sites, one per instruction of every function in code order (`owner[k]`: the index in
/// `order` of instruction `k`'s function), leaked so that reports and profiles can hold them.
///
/// An instruction's source is its `.loc`, but for code rustc inlined from Rust's own library
/// (`ptr::read` behind a load): rustc's PTX gives no `inlined_at`, so such an instruction takes
/// the kernel's own line nearest before it in its function, the line that called the library.
fn ptx_sites(
    order: &[&Function<'static>],
    instrs: &[&parse::Instruction<'static>],
    owner: &[usize],
    module: &ModuleRef,
) -> &'static [PtxSite] {
    let mut own: Option<(&'static str, u32)> = None;
    let mut function = usize::MAX;
    let mut sites = Vec::with_capacity(instrs.len());
    for (i, &k) in instrs.iter().zip(owner) {
        if k != function {
            (function, own) = (k, None);
        }
        let loc = i.loc.and_then(|(file, line)| {
            let (_, path) = module.files.iter().find(|(n, _)| *n == file)?;
            Some((*path, line))
        });
        let source = match loc {
            Some((path, _)) if path.contains(RUST_LIBRARY) => own.or(loc),
            Some(_) => {
                own = loc;
                loc
            }
            None => None,
        };
        sites.push(PtxSite {
            function: order[k].name,
            line: i.line,
            text: one_line(i.text),
            source,
        });
    }
    Box::leak(sites.into_boxed_slice())
}

/// Where a toolchain keeps the sources of Rust's own library (`core`, `alloc`), as `.file` names
/// them.
const RUST_LIBRARY: &str = "/lib/rustlib/src/rust/library/";

/// Each function's place in the thread's state: its code, registers, parameter memory and
/// frame. The callees' registers and `.local` addresses are slots appended to `template`.
fn layouts<'m>(
    name: &str,
    order: &[&'m Function<'static>],
    template: &mut Vec<u64>,
) -> DResult<Vec<Layout<'m>>> {
    let mut layouts = Vec::with_capacity(order.len());
    let (mut code_start, mut pmem) = (0u32, 0u32);
    for (k, f) in order.iter().enumerate() {
        let reg_base = if k == 0 {
            0
        } else {
            let base = template.len() as u32;
            template.resize(template.len() + f.registers.len(), 0);
            base
        };
        let pmem_start = pmem;
        let mut place = |v: (u32, u32)| {
            let at = pmem.next_multiple_of(v.1.max(1));
            pmem = at + v.0;
            at
        };
        let params = if k == 0 {
            Vec::new()
        } else {
            f.params.iter().map(|p| place((p.bytes, p.align))).collect()
        };
        let returns = f
            .returns
            .iter()
            .map(|p| place((p.bytes, p.align)))
            .collect();
        let param_vars = f
            .param_vars
            .iter()
            .map(|v| place((v.bytes.unwrap_or(0) as u32, v.align)))
            .collect();
        let (mut frame, mut frame_align) = (0u32, 1u32);
        let mut locals = Vec::new();
        for v in &f.locals {
            let bytes = v
                .bytes
                .ok_or_else(|| format!("kernel `{name}`: `.local {}` has no size", v.name))?;
            frame = frame.next_multiple_of(v.align.max(1));
            // 512 KiB of local memory per thread (sm_90): checked before a thread's frame is
            // allocated, for every thread of a launch.
            if u64::from(frame) + bytes > 512 * 1024 {
                return Err(format!(
                    "kernel `{name}`, PTX line {}: `.local {}` takes the frame past the 512 KiB of local memory a thread has (sm_90)",
                    v.line, v.name
                ));
            }
            locals.push((template.len() as Slot, frame));
            template.push(0);
            frame += bytes as u32;
            frame_align = frame_align.max(v.align);
        }
        layouts.push(Layout {
            function: f,
            code_start,
            reg_base,
            params,
            returns,
            param_vars,
            pmem: (pmem_start, pmem),
            locals,
            frame: (frame, frame_align),
        });
        code_start += f.instructions().count() as u32;
    }
    Ok(layouts)
}

/// Whether some function of `order` can reach itself through calls.
fn has_cycle(order: &[&Function<'static>]) -> bool {
    let index = |name: &str| order.iter().position(|f| f.name == name);
    let callees: Vec<Vec<usize>> = order
        .iter()
        .map(|f| {
            f.instructions()
                .filter(|i| i.parts[0] == "call")
                .filter_map(|i| {
                    i.operands.iter().find_map(|o| match o {
                        Operand::Symbol(n) => index(n),
                        _ => None,
                    })
                })
                .collect()
        })
        .collect();
    // Depth-first, colouring: 1 on the path, 2 done.
    fn visit(v: usize, callees: &[Vec<usize>], colour: &mut [u8]) -> bool {
        colour[v] = 1;
        for &w in &callees[v] {
            if colour[w] == 1 || (colour[w] == 0 && visit(w, callees, colour)) {
                return true;
            }
        }
        colour[v] = 2;
        false
    }
    let mut colour = vec![0u8; order.len()];
    (0..order.len()).any(|v| colour[v] == 0 && visit(v, &callees, &mut colour))
}

/// Per instruction, the registers it names that some `wgmma.mma_async` of the kernel writes as
/// its accumulator or reads as its register A fragment. The ISA makes both kinds alike: an
/// ordinary access needs a `wgmma.fence` before the next `wgmma` that uses them, and accessing
/// them before the `wait_group` of the `wgmma` using them is undefined.
fn accumulator_uses(
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

    /// `mov`: a register, a constant or an address; packs and unpacks vectors.
    fn mov(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let n = |k: usize| operand(&i.operands, k);
        let last = *p.last().unwrap();
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

    /// `add`, `sub`, `mul` and `fma` on packed halves (`.f16x2`, `.bf16x2`).
    fn half2(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let n = |k: usize| operand(&i.operands, k);
        let last = *p.last().unwrap();
        let ftz = i.has("ftz");
        let sat = i.has("sat");
        let op0 = p[0];
        // PTX ISA, "Half Precision Floating-Point Instructions": round to nearest even
        // only; .ftz and .sat for f16x2, .relu for fma.
        let bf16 = last == "bf16x2";
        let relu = i.has("relu");
        if [Round::Zero, Round::Down, Round::Up].contains(&float_round(i)) {
            return Err("packed half arithmetic rounds to nearest only (.rn)".into());
        }
        if (bf16 && (ftz || sat)) || (relu && (op0 != "fma" || sat)) {
            return Err("this packed half form does not exist".into());
        }
        let op = match op0 {
            "add" => Half2Op::Add,
            "sub" => Half2Op::Sub,
            "mul" => Half2Op::Mul,
            _ => Half2Op::Fma,
        };
        let (a, b) = (self.src(n(1)?, None)?, self.src(n(2)?, None)?);
        let c = if op == Half2Op::Fma {
            self.src(n(3)?, None)?
        } else {
            a
        };
        let d = self.dst(n(0)?)?;
        let op = Op::Half2(Half2Args {
            op,
            bf16,
            ftz,
            sat,
            relu,
            d,
            a,
            b,
            c,
        });
        Ok((op, 2, Class::FloatArith))
    }

    /// Two-operand arithmetic and logic, float and integer (`add` ... `copysign`).
    fn binary(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let n = |k: usize| operand(&i.operands, k);
        let last = *p.last().unwrap();
        let modifiers = if p.len() > 2 {
            &p[1..p.len() - 1]
        } else {
            &[][..]
        };
        let ftz = i.has("ftz");
        let sat = i.has("sat");
        let op0 = p[0];
        let t = ty(last).ok_or("unknown type")?;
        if let Ty::Float(f) = t {
            let round = rounding(i, f)?;
            let op = match op0 {
                "add" => FloatOp::Add,
                "sub" => FloatOp::Sub,
                "mul" => FloatOp::Mul,
                "div" if i.has("approx") && f == Float::F32 => FloatOp::DivApprox,
                "div" if i.has("approx") => {
                    return Err("div.approx is .f32 only".into());
                }
                // `div.full.f32` (within 2 ulp) is computed correctly rounded.
                "div" => FloatOp::Div,
                "min" => FloatOp::Min,
                "max" => FloatOp::Max,
                "copysign" => FloatOp::CopySign,
                _ => return Err("not a float operation".into()),
            };
            if i.has("NaN") || i.has("xorsign") || i.has("abs") {
                return Err("min/max variant not implemented".into());
            }
            let a = self.src(n(1)?, Some(f))?;
            let b = self.src(n(2)?, Some(f))?;
            let d = self.dst(n(0)?)?;
            let op = Op::Float(FloatArgs {
                op,
                ty: f,
                ftz,
                sat,
                round,
                d,
                a,
                b,
            });
            return Ok((op, 1, Class::FloatArith));
        }
        let ty = int_of(t)?;
        if i.has("cc") && matches!(op0, "add" | "sub") {
            return self.carry(i);
        }
        if sat || i.has("cc") {
            return Err("saturating integer arithmetic and mad.cc are not implemented".into());
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

    /// `mad` and `fma`, float and integer.
    fn mad(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let n = |k: usize| operand(&i.operands, k);
        let last = *p.last().unwrap();
        let modifiers = if p.len() > 2 {
            &p[1..p.len() - 1]
        } else {
            &[][..]
        };
        let ftz = i.has("ftz");
        let sat = i.has("sat");
        let t = ty(last).ok_or("unknown type")?;
        let a = n(1)?;
        if let Ty::Float(f) = t {
            // `mad.rn.f32` is `fma.rn.f32` (one rounding) since sm_20.
            let round = rounding(i, f)?;
            let (a, b, c) = (
                self.src(a, Some(f))?,
                self.src(n(2)?, Some(f))?,
                self.src(n(3)?, Some(f))?,
            );
            let d = self.dst(n(0)?)?;
            let op = Op::Fma(FmaArgs {
                ty: f,
                ftz,
                sat,
                round,
                d,
                a,
                b,
                c,
            });
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
            Op::Mad(MadArgs {
                mul,
                ty,
                d,
                a,
                b,
                c,
            }),
            0,
            Class::IntArith,
        ))
    }

    /// One-operand operations, float and integer (`neg` ... `tanh`).
    fn unary(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let n = |k: usize| operand(&i.operands, k);
        let last = *p.last().unwrap();
        let ftz = i.has("ftz");
        let op0 = p[0];
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
                "sin" => FloatUnary::Sin,
                "cos" => FloatUnary::Cos,
                "tanh" => FloatUnary::Tanh,
                _ => return Err("not a float operation".into()),
            };
            let approx = i.has("approx");
            let round = match op {
                FloatUnary::Rcp | FloatUnary::Sqrt if !approx => rounding(i, f)?,
                FloatUnary::Neg | FloatUnary::Abs => Round::Nearest,
                _ if !approx => return Err(".approx is required".into()),
                FloatUnary::Sin | FloatUnary::Cos | FloatUnary::Tanh if f != Float::F32 => {
                    return Err("sin, cos and tanh.approx are .f32 only".into());
                }
                _ => Round::Nearest,
            };
            let a = self.src(n(1)?, Some(f))?;
            let (flops, class) = match op {
                FloatUnary::Ex2 => (1, Class::Ex2),
                FloatUnary::Lg2 => (1, Class::Lg2),
                FloatUnary::Rcp => (1, Class::Rcp),
                FloatUnary::Neg | FloatUnary::Abs => (0, Class::FloatArith),
                _ => (1, Class::FloatArith),
            };
            let op = Op::FloatUnary(FloatUnaryArgs {
                op,
                ty: f,
                ftz,
                round,
                d,
                a,
            });
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

    /// Bit fields and permutations: `bfi`, `prmt`, `lop3`, `bfind`, `bfe`.
    fn bits(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
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

    /// Comparisons and selection: `testp`, `setp`, `selp`.
    fn compare(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
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

    /// `cvta`: between generic addresses and a state space's.
    fn cvta(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
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

    /// Control flow within a function: `bra`, `ret`, `exit`.
    fn control(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let n = |k: usize| operand(&i.operands, k);
        let op0 = p[0];
        match op0 {
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
            "ret" => Ok((Op::Ret, 0, Class::Call)),
            "exit" => Ok((Op::Exit, 0, Class::Branch)),
            _ => Err("instruction not implemented by the PTX backend".into()),
        }
    }

    /// Warp-wide operations: `vote`, `redux`, `activemask`, `shfl`.
    fn warp(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
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
    fn barrier(&mut self, i: &parse::Instruction<'static>, site: Site) -> DResult<(Op, u8, Class)> {
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

    /// Tensor-core fragments: `ldmatrix` and `mma`.
    fn matrix(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
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

    /// `cp.async` and its groups (the bulk copies are [`Self::tma`]).
    fn cp_async(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
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

    /// Fences and register reallocation, which order or change nothing here.
    fn fence(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
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
        let op = Op::Mbarrier(MbarrierArgs {
            kind,
            d,
            addr,
            shared,
            arg,
        });
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
        let op = Op::Tma(TmaArgs {
            dst: self.register_address(dst)?,
            map: self.src(map, None)?,
            coords: [self.src(c0, None)?, self.src(c1, None)?],
            bar: self.register_address(bar)?,
        });
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

    /// `add.cc`, `addc{.cc}`, `sub.cc`, `subc{.cc}` on `.u32/.s32/.u64/.s64` (PTX ISA,
    /// "Extended-Precision Integer Arithmetic Instructions"): the carry flag is one slot per
    /// thread, as CC.CF is one register.
    fn carry(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let p = &i.parts;
        let ty = match ty(p[p.len() - 1]) {
            Some(Ty::Int(t)) if t.bits >= 32 => t,
            _ => return Err("extended-precision arithmetic takes 32- or 64-bit integers".into()),
        };
        let carry_in = matches!(p[0], "addc" | "subc");
        let op = Op::Carry(CarryArgs {
            sub: p[0].starts_with("sub"),
            carry_in,
            carry_out: i.has("cc"),
            ty,
            d: self.dst(&i.operands[0])?,
            a: self.src(&i.operands[1], None)?,
            b: self.src(&i.operands[2], None)?,
            cc: self.fill(Fill::Carry),
        });
        Ok((op, 0, Class::IntArith))
    }

    /// The parameter-memory offset and size of `name`: a `.param` variable of the current
    /// function's body, or (in a `.func`) one of its parameters or return parameters.
    fn pmem_var(&self, name: &str) -> Option<(u32, u32)> {
        let layout = &self.layouts[self.current];
        let f = layout.function;
        if let Some(k) = f.param_vars.iter().position(|v| v.name == name) {
            return Some((
                layout.param_vars[k],
                f.param_vars[k].bytes.unwrap_or(0) as u32,
            ));
        }
        if let Some(k) = f.returns.iter().position(|p| p.name == name) {
            return Some((layout.returns[k], f.returns[k].bytes));
        }
        if f.entry {
            return None;
        }
        let k = f.params.iter().position(|p| p.name == name)?;
        Some((layout.params[k], f.params[k].bytes))
    }

    /// `call{.uni} (r...), f, (a...)`: the arguments and returns are `.param` variables of the
    /// caller, copied to and from the callee's parameters (whose layout `decode` fixed).
    fn call(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
        let ops = &i.operands;
        let callee = callee(self.function, ops)?;
        let at = usize::from(matches!(ops.first(), Some(Operand::Vector(_))));
        let list = |o: Option<&Operand<'static>>| -> DResult<Vec<&'static str>> {
            match o {
                None => Ok(Vec::new()),
                Some(Operand::Vector(items)) => items
                    .iter()
                    .map(|x| match x {
                        Operand::Symbol(n) => Ok(*n),
                        other => Err(format!(
                            "call arguments other than .param variables are not implemented: {other:?}"
                        )),
                    })
                    .collect(),
                Some(other) => Err(format!("expected a list of .param variables, got {other:?}")),
            }
        };
        let rets = list(if at == 1 { ops.first() } else { None })?;
        let args = list(ops.get(at + 1))?;
        if ops.len() > at + 2 {
            return Err("a call with a prototype to a named function is not implemented".into());
        }
        if callee == ASSERT_FAIL {
            return self.assert_fail(&args);
        }
        if callee == VPRINTF {
            return self.printf(&args, &rets);
        }
        let k = self
            .layouts
            .iter()
            .position(|l| l.function.name == callee)
            .expect("reachable laid out every callee");
        let g = &self.layouts[k];
        if args.len() != g.function.params.len() || rets.len() != g.function.returns.len() {
            return Err(format!(
                "`{callee}` takes {} parameters and {} return values, the call passes {} and {}",
                g.function.params.len(),
                g.function.returns.len(),
                args.len(),
                rets.len()
            ));
        }
        let copies = |names: &[&'static str], theirs: &[u32], sizes: Vec<u32>, inward: bool| {
            names
                .iter()
                .zip(theirs)
                .zip(sizes)
                .map(|((name, &their), size)| {
                    let (mine, my_size) = self.pmem_var(name).ok_or_else(|| {
                        format!("`{name}` is not a .param variable of the caller")
                    })?;
                    let bytes = size.min(my_size);
                    Ok(if inward {
                        (mine, their, bytes)
                    } else {
                        (their, mine, bytes)
                    })
                })
                .collect::<DResult<Vec<_>>>()
        };
        let g = &self.layouts[k];
        let (params, returns) = (g.params.clone(), g.returns.clone());
        let param_sizes = g.function.params.iter().map(|p| p.bytes).collect();
        let return_sizes = g.function.returns.iter().map(|p| p.bytes).collect();
        let args = copies(&args, &params, param_sizes, true)?;
        let rets = copies(&rets, &returns, return_sizes, false)?;
        let g = &self.layouts[k];
        let call = Call {
            target: g.code_start,
            regs: (g.reg_base, g.function.registers.len() as u32),
            pmem: g.pmem,
            args,
            rets,
            locals: g.locals.clone(),
            frame: g.frame,
            callee,
        };
        Ok((Op::Call(Box::new(call)), 0, Class::Call))
    }

    /// Where `.param` variable `name` of this function lies in its parameter memory, if it holds
    /// at least `bytes`: an argument the call of a driver-supplied function passes.
    fn pmem_arg(&self, name: &str, bytes: u32) -> DResult<u32> {
        self.pmem_var(name)
            .filter(|&(_, size)| size >= bytes)
            .map(|(at, _)| at)
            .ok_or_else(|| format!("`{name}` is not a .param variable of {bytes} bytes"))
    }

    /// `call.uni __assertfail, (message, file, line, function, char_size)`: where each argument
    /// lies in this function's parameter memory.
    fn assert_fail(&mut self, args: &[&'static str]) -> DResult<(Op, u8, Class)> {
        let [message, file, line, function, _] = args else {
            return Err(format!(
                "`{ASSERT_FAIL}` takes 5 arguments (message, file, line, function, char size), the call passes {}",
                args.len()
            ));
        };
        let offset = |name: &str, bytes: u32| self.pmem_arg(name, bytes);
        let assert = AssertFail {
            message: offset(message, 8)?,
            file: offset(file, 8)?,
            line: offset(line, 4)?,
            function: offset(function, 8)?,
        };
        Ok((Op::AssertFail(Box::new(assert)), 0, Class::Call))
    }

    /// `call.uni (ret), vprintf, (format, args)`: where each argument lies in this function's
    /// parameter memory.
    fn printf(&mut self, args: &[&'static str], rets: &[&'static str]) -> DResult<(Op, u8, Class)> {
        let ([format, buffer], [] | [_]) = (args, rets) else {
            return Err(format!(
                "`{VPRINTF}` takes 2 arguments (format, argument buffer) and returns one value, the call passes {} and takes {}",
                args.len(),
                rets.len()
            ));
        };
        let offset = |name: &str, bytes: u32| self.pmem_arg(name, bytes);
        let printf = Printf {
            format: offset(format, 8)?,
            args: offset(buffer, 8)?,
            ret: rets.first().map(|r| offset(r, 4)).transpose()?,
        };
        Ok((Op::Printf(Box::new(printf)), 0, Class::Call))
    }

    /// `atom` and `red`: `atom{.sem}{.scope}{.space}.op.type d, [a], b{, c}`.
    fn atom(&mut self, i: &parse::Instruction<'static>) -> DResult<(Op, u8, Class)> {
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
    fn pmem_vector(
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
