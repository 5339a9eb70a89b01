//! Warp-level tensor-core instructions: `ldmatrix` and `mma.sync.m16n8k16`.
//!
//! A tensor-core MMA is a *warp* instruction: the 16x16 A tile, the 16x8 B tile and the 16x8
//! accumulator are spread over the 32 lanes' registers in fixed "fragment" layouts defined by
//! the PTX ISA (section "Matrix Fragments for mma.m16n8k16"). `ldmatrix` loads 8x8 tiles of
//! 16-bit elements from shared memory straight into those layouts. The emulator implements both
//! fragment-exactly, so a kernel that gets a layout wrong fails on the CPU as it would on the GPU.

use super::SharedPtr;

/// Element type of an `mma` operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmaInput {
    /// bfloat16 A and B.
    Bf16,
    /// IEEE f16 A and B.
    F16,
}

/// `ldmatrix.sync.aligned.m8n8.x4.shared.b16`: four 8x8 matrices of 16-bit elements.
///
/// Lane `l` supplies `row`, the address of row `l % 8` of matrix `l / 8` (16 contiguous bytes,
/// 16-byte aligned). Afterwards register `j` of lane `l` holds elements `2 * (l % 4)` and
/// `2 * (l % 4) + 1` of row `l / 4` of matrix `j`: the A-fragment layout of `mma.m16n8k16`.
/// With `trans`, each matrix is transposed on the way (`.trans`), which gives the B fragment of
/// a row-major K x N tile.
///
/// # Safety
/// All 32 lanes must call it together, each with a valid, aligned shared-memory row.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn ldmatrix_x4<T: Copy>(row: SharedPtr<T>, trans: bool) -> [u32; 4] {
    #[cfg(target_arch = "nvptx64")]
    {
        let (mut r0, mut r1, mut r2, mut r3): (u32, u32, u32, u32);
        let addr = row.as_ptr() as u64;
        // SAFETY: the caller's contract.
        unsafe {
            if trans {
                core::arch::asm!(
                    "{{ .reg .u64 s; cvta.to.shared.u64 s, {a}; ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{r0}, {r1}, {r2}, {r3}}}, [s]; }}",
                    a = in(reg64) addr, r0 = out(reg32) r0, r1 = out(reg32) r1, r2 = out(reg32) r2, r3 = out(reg32) r3,
                );
            } else {
                core::arch::asm!(
                    "{{ .reg .u64 s; cvta.to.shared.u64 s, {a}; ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{r0}, {r1}, {r2}, {r3}}}, [s]; }}",
                    a = in(reg64) addr, r0 = out(reg32) r0, r1 = out(reg32) r1, r2 = out(reg32) r2, r3 = out(reg32) r3,
                );
            }
        }
        [r0, r1, r2, r3]
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let site = super::emu::Site::caller();
        let op = super::emu::Collective::LdMatrix {
            addr: row.as_ptr() as usize,
            trans,
        };
        super::emu::with(|gpu| gpu.warp_collective(super::warp::FULL_MASK, op, site))
    }
}

/// `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32`: `D = A B + C` for a 16x16
/// A (row-major), a 16x8 B (column-major) and a 16x8 f32 accumulator, across the warp.
///
/// Fragments, with `g = lane / 4` and `t = lane % 4` (two 16-bit elements per `u32`, the lower
/// column index in the low half):
/// - `a[0]`: A[g][2t..2t+2], `a[1]`: A[g+8][2t..], `a[2]`: A[g][2t+8..], `a[3]`: A[g+8][2t+8..]
/// - `b[0]`: B[2t..2t+2][g], `b[1]`: B[2t+8..2t+10][g]
/// - `c[0..2]`: C[g][2t..2t+2], `c[2..4]`: C[g+8][2t..2t+2]; `D` likewise.
///
/// Products are exact and summed in f32; the emulator sums in f64 then rounds once, which
/// matches the tensor core to within its (unspecified) accumulation order.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn mma_m16n8k16(input: MmaInput, a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
    #[cfg(target_arch = "nvptx64")]
    {
        let mut d = c;
        // SAFETY: a warp-synchronous register operation; all lanes call it together.
        unsafe {
            match input {
                MmaInput::Bf16 => core::arch::asm!(
                    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{d0}, {d1}, {d2}, {d3}}};",
                    d0 = inout(reg32) d[0], d1 = inout(reg32) d[1], d2 = inout(reg32) d[2], d3 = inout(reg32) d[3],
                    a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
                    b0 = in(reg32) b[0], b1 = in(reg32) b[1],
                ),
                MmaInput::F16 => core::arch::asm!(
                    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{d0}, {d1}, {d2}, {d3}}};",
                    d0 = inout(reg32) d[0], d1 = inout(reg32) d[1], d2 = inout(reg32) d[2], d3 = inout(reg32) d[3],
                    a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
                    b0 = in(reg32) b[0], b1 = in(reg32) b[1],
                ),
            }
        }
        d
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let site = super::emu::Site::caller();
        let op = super::emu::Collective::Mma { input, a, b, c };
        let d = super::emu::with(|gpu| gpu.warp_collective(super::warp::FULL_MASK, op, site));
        d.map(f32::from_bits)
    }
}
