//! CPU references, in one place for tests and xtask: rayon-parallel, written for clarity, and
//! independent of the kernels (no shared code path), so that agreement means something.

use half::f16;
use rayon::prelude::*;

/// `a + b` in f32.
pub fn vector_add_f32(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.par_iter().zip(b).map(|(x, y)| x + y).collect()
}

/// `a + b` for f16, computed in f64 and rounded once to f16. The sum of two f16 values is exact in
/// f32, so this equals the kernel's f32-then-round result bit for bit.
pub fn vector_add_f16(a: &[f16], b: &[f16]) -> Vec<f16> {
    a.par_iter()
        .zip(b)
        .map(|(x, y)| f16::from_f64(x.to_f64() + y.to_f64()))
        .collect()
}
