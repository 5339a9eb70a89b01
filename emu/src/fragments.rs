//! The PTX ISA's fragment layouts, as the emulator implements `ldmatrix` and `mma.m16n8k16`
//! (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type" and "ldmatrix").
//! With `g = lane / 4` and `t = lane % 4`, each 32-bit register holds two 16-bit elements, the
//! lower column (or row, for B) in the low half.
//!
//! These are the emulator's own reading of the ISA, written apart from the kernels' helpers
//! (`kernels::gemm::ldmatrix_x4_lane`, `accumulator_position`) so that a kernel whose layout is
//! wrong disagrees with the emulator; `cargo xtask figures` draws them.

/// Element (row, column) of the 16 x 16 A tile in half `half` (0 low, 1 high) of register `reg`
/// (0..4) of `lane`: `a0` rows `g`, `a1` rows `g + 8`, `a2` and `a3` the same rows 8 columns on.
pub const fn mma_a(lane: usize, reg: usize, half: usize) -> (usize, usize) {
    let (g, t) = (lane / 4, lane % 4);
    (g + 8 * (reg % 2), 2 * t + 8 * (reg / 2) + half)
}

/// Element (k, n) of the 16 x 8 B tile in half `half` of register `reg` (0..2) of `lane`: two
/// consecutive k of column `g`.
pub const fn mma_b(lane: usize, reg: usize, half: usize) -> (usize, usize) {
    let (g, t) = (lane / 4, lane % 4);
    (2 * t + 8 * reg + half, g)
}

/// Element (row, column) of the 16 x 8 f32 accumulator (C and D) in register `reg` (0..4) of
/// `lane`: one element per register.
pub const fn mma_c(lane: usize, reg: usize) -> (usize, usize) {
    let (g, t) = (lane / 4, lane % 4);
    (g + 8 * (reg / 2), 2 * t + reg % 2)
}

/// Element (row, column) of 8 x 8 matrix `reg` that half `half` of register `reg` of `lane`
/// receives from `ldmatrix.x4`: row `lane / 4`, columns `2 (lane % 4)` and one more; with
/// `.trans` the matrix is read down its columns instead.
pub const fn ldmatrix(lane: usize, half: usize, trans: bool) -> (usize, usize) {
    let (r, c) = (lane / 4, 2 * (lane % 4) + half);
    if trans { (c, r) } else { (r, c) }
}

/// The lane whose address supplies row `row` of 8 x 8 matrix `matrix` of an `ldmatrix.x4`.
pub const fn ldmatrix_row_lane(matrix: usize, row: usize) -> usize {
    8 * matrix + row
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each layout puts every element of its tile in exactly one (lane, register, half).
    #[test]
    fn every_fragment_covers_its_tile_once() {
        let mut a = [[0; 16]; 16];
        let mut b = [[0; 8]; 16];
        let mut c = [[0; 8]; 16];
        for lane in 0..32 {
            for half in 0..2 {
                for reg in 0..4 {
                    let (r, k) = mma_a(lane, reg, half);
                    a[r][k] += 1;
                }
                for reg in 0..2 {
                    let (k, n) = mma_b(lane, reg, half);
                    b[k][n] += 1;
                }
            }
            for reg in 0..4 {
                let (r, n) = mma_c(lane, reg);
                c[r][n] += 1;
            }
        }
        assert!(a.iter().flatten().all(|&n| n == 1));
        assert!(b.iter().flatten().all(|&n| n == 1));
        assert!(c.iter().flatten().all(|&n| n == 1));
    }

    /// The PTX ISA's figures: lane 5 holds A(1, 2..4) in a0 and A(9, 10..12) in a3; B(2..4, 1)
    /// in b0; C(9, 3) in c3. `.trans` swaps an ldmatrix element's row and column.
    #[test]
    fn spot_checks_against_the_isa_figures() {
        assert_eq!((mma_a(5, 0, 0), mma_a(5, 0, 1)), ((1, 2), (1, 3)));
        assert_eq!(mma_a(5, 3, 0), (9, 10));
        assert_eq!(mma_b(5, 0, 0), (2, 1));
        assert_eq!(mma_b(5, 1, 1), (11, 1));
        assert_eq!(mma_c(5, 3), (9, 3));
        assert_eq!(ldmatrix(5, 1, false), (1, 3));
        assert_eq!(ldmatrix(5, 1, true), (3, 1));
        assert_eq!(ldmatrix_row_lane(2, 3), 19);
    }
}
