//! A probe of the device math library (`cuda::intrinsics`, and `core`'s own `max`, `min`,
//! `abs`): one kernel applies each function to each input, so that a test can hold the source
//! emulator and the PTX backend (which runs the instruction each function compiles to) to one
//! independent reference (`tests/tests/device_math.rs`).

use crate::cuda::GlobalPtr;
use crate::cuda::intrinsics::{cos, exp, exp2, ln, log2, rsqrt, sin, sqrt, tanh};
use crate::cuda::thread::index_1d;
use crate::kernel;

/// The functions, in the order of the output's rows.
pub const FUNCTIONS: [&str; 12] = [
    "sqrt", "rsqrt", "exp", "exp2", "ln", "log2", "tanh", "sin", "cos", "max", "min", "abs",
];

/// The second operand of `max` and `min`.
pub const BOUND: f32 = 0.5;

kernel! {
    /// `out[f * n + i] = FUNCTIONS[f](x[i])` for every function `f` and every `i < n`.
    pub unsafe fn device_math(x: GlobalPtr<f32>, out: GlobalPtr<f32>, n: u32) {
        let i = index_1d();
        if i < n {
            let v = unsafe { x.read(i as usize) };
            // One store per function, written out: a loop over a `match` compiles to a jump
            // table (`brx.idx`), which would test the branch rather than the math.
            let values = [
                sqrt(v),
                rsqrt(v),
                exp(v),
                exp2(v),
                ln(v),
                log2(v),
                tanh(v),
                sin(v),
                cos(v),
                v.max(BOUND),
                v.min(BOUND),
                v.abs(),
            ];
            for (f, value) in values.into_iter().enumerate() {
                unsafe { out.write(f * n as usize + i as usize, value) };
            }
        }
    }
}
