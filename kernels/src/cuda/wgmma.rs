//! Warpgroup MMA (`wgmma`, sm_90a): the tensor-core instruction of Hopper, issued by a
//! *warpgroup* of four consecutive warps (128 threads, the first warp's index a multiple of 4).
//!
//! `mma.sync` (see [`mma`](super::mma)) multiplies 16 x 8 x 16 from registers that every lane
//! first loaded with `ldmatrix`. `wgmma.mma_async.m64nNk16` multiplies a 64 x 16 A by a 16 x N B
//! *straight from shared memory*: each operand is named by a 64-bit [`MatrixDescriptor`] (its
//! address, two strides and a swizzle mode), so no thread spends registers or instructions
//! staging operands, and the 64 x N f32 accumulator is spread over the warpgroup's registers
//! (N / 2 per thread, see [`accumulator_position`]).
//!
//! It is asynchronous: `mma_async` only starts the multiply. The sequence is
//! [`wgmma_fence`] (accumulator registers written by ordinary instructions are ready), any number
//! of `mma_async`, [`wgmma_commit_group`] (they form one group), and later
//! [`wgmma_wait_group`]`::<N>()` (all but the newest N groups are done). Until then the
//! accumulator registers may not be read, and the shared memory the group reads may not be
//! written. The emulator enforces both: reading an [`Accumulator`] is a checked operation.

use super::mma::MmaInput;

/// The swizzle field of a matrix descriptor (bits 62-63).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum WgmmaSwizzle {
    /// No swizzle (interleaved core matrices).
    None = 0,
    /// 128-byte swizzle: the layout `TmaSwizzle::B128` writes.
    B128 = 1,
    /// 64-byte swizzle.
    B64 = 2,
    /// 32-byte swizzle.
    B32 = 3,
}

/// A shared-memory matrix descriptor, as the PTX ISA's "Matrix Descriptor Format" defines it:
/// bits 0-13 the start address, 16-29 the leading-dimension byte offset (LBO), 32-45 the
/// stride-dimension byte offset (SBO), each stored as `(x & 0x3FFFF) >> 4`; bits 49-51 the base
/// offset (0 here: every swizzled tile starts on a pattern boundary); bits 62-63 the swizzle.
///
/// What LBO and SBO mean depends on the layout (PTX ISA, "Canonical Layouts", in elements of
/// `T = 8` 16-bit values per 16 bytes):
/// - K-major, 128-byte swizzle: `((8, m), (T, 2k)) : ((8T, SBO), (1, T))`: rows of 128 bytes,
///   SBO from one group of 8 rows to the next; LBO unused.
/// - MN-major, 128-byte swizzle: `((T, 8, m), (8, k)) : ((1, T, LBO), (8T, SBO))`: rows along K
///   of 64 contiguous M (or N) elements, LBO from one 64-element column block to the next, SBO
///   from one group of 8 K rows to the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct MatrixDescriptor(pub u64);

impl MatrixDescriptor {
    /// The descriptor of a matrix at `.shared` address `start`, with `lbo` and `sbo` in bytes.
    #[inline(always)]
    pub const fn new(start: u32, lbo: u32, sbo: u32, swizzle: WgmmaSwizzle) -> Self {
        Self(encode(start) | encode(lbo) << 16 | encode(sbo) << 32 | (swizzle as u64) << 62)
    }
}

/// Bytes of one row of a 128-byte-swizzled operand (64 16-bit elements), and of the 8-row group
/// its pattern repeats over: the SBO of every 128-byte-swizzled layout below.
pub const B128_ROW_BYTES: u32 = 128;
/// See [`B128_ROW_BYTES`].
pub const B128_ATOM_BYTES: u32 = 8 * B128_ROW_BYTES;

/// The descriptor of K slice `kk` (0..4, 16 deep) of a K-major, 128-byte-swizzled operand at
/// `.shared` address `start` (on a 1024-byte boundary): rows (M or N) of 128 bytes, 64 K
/// elements each, 8-row groups 1024 bytes apart (SBO); slice `kk` starts `32 kk` bytes into
/// each row, and the hardware applies the swizzle to the resulting addresses, as the TMA did
/// when it wrote them. LBO is unused (1). A's form in every kernel here, and B's when B is
/// stored N x K (attention's K).
#[inline(always)]
pub const fn k_major_b128(start: u32, kk: u32) -> MatrixDescriptor {
    MatrixDescriptor::new(start + kk * 16 * 2, 16, B128_ATOM_BYTES, WgmmaSwizzle::B128)
}

/// The descriptor of K slice `kk` (16 rows) of an MN-major, 128-byte-swizzled B at `.shared`
/// address `start`: a row-major K x N matrix stored as column blocks of 64 N elements (one
/// 128-byte row per K index), `block_bytes` from one block to the next (LBO), 8-row groups
/// 1024 bytes apart (SBO); slice `kk` is rows `16 kk..`, `16 kk * 128` bytes on. Used with
/// `imm-trans-b = 1`: the GEMM's B and attention's V.
#[inline(always)]
pub const fn mn_major_b128(start: u32, kk: u32, block_bytes: u32) -> MatrixDescriptor {
    MatrixDescriptor::new(
        start + kk * 16 * B128_ROW_BYTES,
        block_bytes,
        B128_ATOM_BYTES,
        WgmmaSwizzle::B128,
    )
}

/// The ISA's `matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4`.
#[inline(always)]
const fn encode(x: u32) -> u64 {
    ((x & 0x3_FFFF) >> 4) as u64
}

/// The (row, column) of the 64 x N accumulator that register `i` of thread `t` (0..128) of the
/// warpgroup holds: warp `t / 32` owns rows `16 (t / 32)..+16`, and within them each 8 columns
/// repeat `mma.m16n8`'s C layout (registers `4j..4j + 4` for columns `8j..8j + 8`).
#[inline(always)]
pub const fn accumulator_position(t: u32, i: u32) -> (u32, u32) {
    let (warp, lane) = (t / 32, t % 32);
    let j = i / 4;
    let r = i % 4;
    (
        16 * warp + lane / 4 + 8 * (r / 2),
        8 * j + 2 * (lane % 4) + r % 2,
    )
}

/// Where a `wgmma`'s A comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WgmmaA {
    /// Shared memory, K-major, through this descriptor (CUTLASS's `_SS` forms).
    Shared(u64),
    /// Registers: this thread's four words of the 64 x 16 A fragment (`_RS`), laid out per warp
    /// as `mma.m16n8k16`'s A ([`a_fragment_position`]).
    Registers([u32; 4]),
}

/// The (row, column) of the 64 x 16 A that 16-bit element `e` (0..8; word `e / 2`, low half
/// first) of thread `t` holds in the register form of `wgmma`: warp `t / 32` holds rows
/// `16 (t / 32)..+16`, in `mma.m16n8k16`'s A layout (words: rows `g`, `g + 8`, `g`, `g + 8`;
/// columns `2 (l % 4)` for words 0-1 and `+8` for words 2-3).
#[inline(always)]
pub const fn a_fragment_position(t: u32, e: u32) -> (u32, u32) {
    let (warp, lane) = (t / 32, t % 32);
    let word = e / 2;
    (
        16 * warp + lane / 4 + 8 * (word % 2),
        2 * (lane % 4) + 8 * (word / 2) + e % 2,
    )
}

/// A `wgmma.mma_async` as the emulator receives it: one thread's share of the instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WgmmaOp {
    /// A and B element type.
    pub input: MmaInput,
    /// N of m64nNk16.
    pub n: u32,
    /// A's source.
    pub a: WgmmaA,
    /// B's descriptor.
    pub b: u64,
    /// `imm-trans-b`: B is MN-major (N contiguous) instead of K-major.
    pub trans_b: bool,
    /// Address of this thread's N / 2 accumulator registers (f32).
    pub acc: usize,
}

/// The group bookkeeping of `wgmma`, as the emulator receives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WgmmaSync {
    /// `wgmma.fence.sync.aligned`.
    Fence,
    /// `wgmma.commit_group.sync.aligned`.
    CommitGroup,
    /// `wgmma.wait_group.sync.aligned N`.
    WaitGroup {
        /// Groups that may stay in flight.
        pending: u32,
    },
}

/// A thread's accumulator registers for one `wgmma` tile (`R = N / 2` f32).
///
/// On the GPU just the registers. In the emulator it also remembers which `mma_async` last wrote
/// it, so that [`read`](Self::read) can report a read before the matching `wait_group`.
#[derive(Clone, Copy, Debug)]
pub struct Accumulator<const R: usize> {
    regs: [f32; R],
    #[cfg(not(target_arch = "nvptx64"))]
    token: u64,
}

impl<const R: usize> Accumulator<R> {
    /// All zeros, written by ordinary instructions (so a [`wgmma_fence`] must come before the
    /// first `mma_async` that accumulates into it).
    #[inline(always)]
    pub const fn zero() -> Self {
        Self {
            regs: [0.0; R],
            #[cfg(not(target_arch = "nvptx64"))]
            token: 0,
        }
    }

    /// The registers, once the `wgmma` group that last wrote them has been waited for.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub fn read(&self) -> [f32; R] {
        #[cfg(not(target_arch = "nvptx64"))]
        {
            let site = super::emu::Site::caller();
            super::emu::with(|gpu| gpu.wgmma_read(self.token, site));
        }
        self.regs
    }

    /// CUTLASS's `warpgroup_fence_operand`: pins the registers in place for the compiler, so
    /// that no ordinary instruction that writes them (a zeroing, a rescale) is moved after the
    /// next [`wgmma_fence`], and none that reads them is moved before the last
    /// [`wgmma_wait_group`]. The `wgmma` asm only names the registers, so without this the
    /// compiler may legally sink `mov %r, 0` between `wgmma.fence` and `mma_async` (it does),
    /// which the ISA leaves undefined. Call it before `wgmma_fence` and after `wait_group`.
    /// On the emulator the order is the program's: nothing to do.
    #[inline(always)]
    pub fn fence_operand(&mut self) {
        #[cfg(target_arch = "nvptx64")]
        crate::unroll!(j in 0..16 {
            crate::unroll!(q in 0..8 {
                if 8 * j + q < R {
                    // SAFETY: an empty asm statement: the register is only named.
                    unsafe { core::arch::asm!("/* {r} */", r = inout(reg32) self.regs[8 * j + q]) };
                }
            });
        });
    }

    /// Replaces the registers by values computed with ordinary instructions (attention's
    /// rescaling of O between two `wgmma`s): like [`read`](Self::read), only once the `wgmma`
    /// group that last wrote them has been waited for, and a [`wgmma_fence`] must come before
    /// the next `mma_async` that accumulates into them.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub fn write(&mut self, regs: [f32; R]) {
        #[cfg(not(target_arch = "nvptx64"))]
        {
            let site = super::emu::Site::caller();
            super::emu::with(|gpu| gpu.wgmma_read(self.token, site));
        }
        self.regs = regs;
    }
}

/// `wgmma.fence.sync.aligned`: accumulator (and A) registers written by ordinary instructions
/// are ready for the next `mma_async`. Required before the first `mma_async` and whenever the
/// warpgroup touched the accumulators between `wgmma`s. All 128 threads execute it.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn wgmma_fence() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: warpgroup-synchronous ordering; all threads call it together.
    unsafe {
        core::arch::asm!("wgmma.fence.sync.aligned;")
    };
    #[cfg(not(target_arch = "nvptx64"))]
    sync_op(WgmmaSync::Fence);
}

/// [`Accumulator::fence_operand`] for the four registers of a register A fragment (attention's
/// P), written by ordinary instructions before the `wgmma` that reads them.
#[inline(always)]
pub fn fence_a_fragment(a: &mut [u32; 4]) {
    #[cfg(target_arch = "nvptx64")]
    crate::unroll!(w in 0..4 {
        // SAFETY: an empty asm statement: the register is only named.
        unsafe { core::arch::asm!("/* {r} */", r = inout(reg32) a[w]) };
    });
    #[cfg(not(target_arch = "nvptx64"))]
    let _ = a;
}

/// `wgmma.commit_group.sync.aligned`: this thread's `mma_async`s since the last commit become one
/// group.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn wgmma_commit_group() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: bookkeeping of the warpgroup's own wgmmas.
    unsafe {
        core::arch::asm!("wgmma.commit_group.sync.aligned;")
    };
    #[cfg(not(target_arch = "nvptx64"))]
    sync_op(WgmmaSync::CommitGroup);
}

/// `wgmma.wait_group.sync.aligned N`: waits until at most the `N` newest groups are in flight.
/// Their accumulators may then be read and their shared memory overwritten.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn wgmma_wait_group<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: waits for the warpgroup's own wgmmas; a memory clobber for the compiler.
    unsafe {
        core::arch::asm!("wgmma.wait_group.sync.aligned {n};", n = const N)
    };
    #[cfg(not(target_arch = "nvptx64"))]
    sync_op(WgmmaSync::WaitGroup { pending: N });
}

/// The register list `{r0, r1, ...}` of an asm template, from operand numbers.
#[cfg(target_arch = "nvptx64")]
macro_rules! reg_list {
    ($first:literal $($rest:literal)*) => { concat!("{{{", $first, "}", $(", {", $rest, "}",)* "}}") };
}

/// One `wgmma.mma_async.m64n{N}k16` with `scale-d = 1` (accumulate): `ss` with A's descriptor,
/// `rs` with A's four registers; `$d` the accumulator array, operands `0..N/2`.
#[cfg(target_arch = "nvptx64")]
macro_rules! wgmma_asm {
    (ss, $n:literal, $ty:literal, $trans_b:literal, $d:ident, $a:expr, $b:expr; $($i:literal)*) => {
        core::arch::asm!(
            concat!(
                "{{ .reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, ".", $ty, " ",
                reg_list!($($i)*), ", {a}, {b}, p, 1, 1, 0, ", $trans_b, "; }}"
            ),
            $(inout(reg32) $d[$i],)*
            a = in(reg64) $a,
            b = in(reg64) $b,
        )
    };
    (rs, $n:literal, $ty:literal, $trans_b:literal, $d:ident, $a:expr, $b:expr; $($i:literal)*) => {
        core::arch::asm!(
            concat!(
                "{{ .reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n", $n, "k16.f32.", $ty, ".", $ty, " ",
                reg_list!($($i)*), ", {{{a0}, {a1}, {a2}, {a3}}}, {b}, p, 1, 1, ", $trans_b, "; }}"
            ),
            $(inout(reg32) $d[$i],)*
            a0 = in(reg32) $a[0],
            a1 = in(reg32) $a[1],
            a2 = in(reg32) $a[2],
            a3 = in(reg32) $a[3],
            b = in(reg64) $b,
        )
    };
}

/// [`wgmma_asm`] for the accumulator `acc` of `R` = N / 2 registers (N = 64, 128 or 256): the
/// arm of `R` is the one compiled in (the others, whose indices are out of bounds for it, fold
/// away). Expands to unsafe operations: used inside an `unsafe` block.
#[cfg(target_arch = "nvptx64")]
macro_rules! wgmma_n {
    ($form:ident, $ty:literal, $trans_b:literal, $acc:expr, $a:expr, $b:expr) => {{
        match R {
            32 => {
                let d = &mut $acc.regs;
                wgmma_asm!($form, "64", $ty, $trans_b, d, $a, $b;
                    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31)
            }
            64 => {
                let d = &mut $acc.regs;
                wgmma_asm!($form, "128", $ty, $trans_b, d, $a, $b;
                    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
                    32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63)
            }
            _ => {
                let d = &mut $acc.regs;
                wgmma_asm!($form, "256", $ty, $trans_b, d, $a, $b;
                    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
                    32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
                    64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95
                    96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127)
            }
        }
    }};
}

/// N of a `wgmma` whose accumulator is `R` registers per thread: 64, 128 or 256 here (the ISA
/// allows every multiple of 8 to 256; these are the tile widths the kernels use).
const fn accumulator_regs<const R: usize>() -> u32 {
    assert!(
        R == 32 || R == 64 || R == 128,
        "wgmma accumulators: 32, 64 or 128 registers (N = 64, 128, 256)"
    );
    2 * R as u32
}

/// `wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}` with A and B in shared memory
/// (CUTLASS's `SM90_64xNx16_F32BF16BF16_SS`): `D += A B` for the warpgroup's 64 x N f32
/// accumulator, N = 2 R, A (64 x 16, K-major) and B (16 x N) read from shared memory through
/// their descriptors; `b_mn_major` selects `imm-trans-b = 1`, B stored with N contiguous (a
/// row-major K x N matrix), instead of K contiguous.
///
/// All 128 threads of the warpgroup execute it with the same descriptors; `acc` is this thread's
/// registers ([`accumulator_position`]). It only starts the multiply: see the module docs.
///
/// # Safety
/// The descriptors describe initialised shared memory of this block that nobody writes until the
/// group of this instruction has been waited for.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn wgmma_ss<const R: usize>(
    input: MmaInput,
    a: MatrixDescriptor,
    b: MatrixDescriptor,
    b_mn_major: bool,
    acc: &mut Accumulator<R>,
) {
    let n = const { accumulator_regs::<R>() };
    #[cfg(target_arch = "nvptx64")]
    {
        let _ = n;
        // SAFETY: the caller's contract; warpgroup-synchronous.
        unsafe {
            match (input, b_mn_major) {
                (MmaInput::Bf16, true) => wgmma_n!(ss, "bf16", "1", acc, a.0, b.0),
                (MmaInput::Bf16, false) => wgmma_n!(ss, "bf16", "0", acc, a.0, b.0),
                (MmaInput::F16, true) => wgmma_n!(ss, "f16", "1", acc, a.0, b.0),
                (MmaInput::F16, false) => wgmma_n!(ss, "f16", "0", acc, a.0, b.0),
            }
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    emulate(input, n, WgmmaA::Shared(a.0), b, b_mn_major, acc);
}

/// [`wgmma_ss`] with A from registers (`SM90_64xNx16_F32BF16BF16_RS`): `a` is this thread's part
/// of the 64 x 16 A, four words of two 16-bit elements laid out as [`a_fragment_position`] says;
/// an accumulator of one `wgmma` converted to 16 bits is already in this layout, which is how
/// attention feeds P into `O += P V` without a trip through shared memory.
///
/// # Safety
/// As [`wgmma_ss`] for B.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn wgmma_rs<const R: usize>(
    input: MmaInput,
    a: [u32; 4],
    b: MatrixDescriptor,
    b_mn_major: bool,
    acc: &mut Accumulator<R>,
) {
    let n = const { accumulator_regs::<R>() };
    #[cfg(target_arch = "nvptx64")]
    {
        let _ = n;
        // SAFETY: the caller's contract; warpgroup-synchronous.
        unsafe {
            match (input, b_mn_major) {
                (MmaInput::Bf16, true) => wgmma_n!(rs, "bf16", "1", acc, a, b.0),
                (MmaInput::Bf16, false) => wgmma_n!(rs, "bf16", "0", acc, a, b.0),
                (MmaInput::F16, true) => wgmma_n!(rs, "f16", "1", acc, a, b.0),
                (MmaInput::F16, false) => wgmma_n!(rs, "f16", "0", acc, a, b.0),
            }
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    emulate(input, n, WgmmaA::Registers(a), b, b_mn_major, acc);
}

#[cfg(not(target_arch = "nvptx64"))]
#[track_caller]
fn emulate<const R: usize>(
    input: MmaInput,
    n: u32,
    a: WgmmaA,
    b: MatrixDescriptor,
    trans_b: bool,
    acc: &mut Accumulator<R>,
) {
    let site = super::emu::Site::caller();
    let op = WgmmaOp {
        input,
        n,
        a,
        b: b.0,
        trans_b,
        acc: acc.regs.as_mut_ptr() as usize,
    };
    acc.token = super::emu::with(|gpu| gpu.wgmma(op, site));
}

/// `setmaxnreg.inc.sync.aligned.u32 N`: raises this warpgroup's registers per thread to `N`
/// (24 to 256, a multiple of 8), taking them from the pool that `setmaxnreg.dec` returned to.
/// Warp specialisation's other half: the producer gives registers up, the consumers, which hold
/// the accumulators, take them.
///
/// The emulator has no register file; it checks `N`.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn setmaxnreg_inc<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: all threads of the warpgroup execute it.
    unsafe {
        core::arch::asm!("setmaxnreg.inc.sync.aligned.u32 {n};", n = const N)
    };
    #[cfg(not(target_arch = "nvptx64"))]
    max_nreg(N);
}

/// `setmaxnreg.dec.sync.aligned.u32 N`: lowers this warpgroup's registers per thread to `N`,
/// returning the rest to the block's pool. See [`setmaxnreg_inc`].
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn setmaxnreg_dec<const N: u32>() {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: all threads of the warpgroup execute it.
    unsafe {
        core::arch::asm!("setmaxnreg.dec.sync.aligned.u32 {n};", n = const N)
    };
    #[cfg(not(target_arch = "nvptx64"))]
    max_nreg(N);
}

#[cfg(not(target_arch = "nvptx64"))]
#[track_caller]
fn max_nreg(n: u32) {
    assert!(
        (24..=256).contains(&n) && n.is_multiple_of(8),
        "setmaxnreg {n}: the count must be a multiple of 8 from 24 to 256"
    );
}

#[cfg(not(target_arch = "nvptx64"))]
#[track_caller]
fn sync_op(op: WgmmaSync) {
    let site = super::emu::Site::caller();
    super::emu::with(|gpu| gpu.wgmma_sync(op, site));
}
