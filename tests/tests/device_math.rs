//! The device math library (`kernels::cuda::intrinsics`: `sqrt`, `rsqrt`, `exp`, ...; `core`'s
//! `max`, `min`, `abs`) on both backends: the source emulator runs each function's host side,
//! the PTX backend the instruction it compiles to (the test also finds each instruction in the
//! PTX), and both are held to an f64 reference within the accuracy the PTX ISA gives that
//! instruction.

use host::embedded::{Arch, entry_body, program};
use host::{LaunchConfig, Runtime, launch};
use kernels::device_math::{BOUND, FUNCTIONS};

/// Inputs within every function's domain and its edges: zero, one, powers of two, a negative
/// (NaN for `sqrt`, `rsqrt`, `ln`), values up to pi (where `sin.approx` keeps its bound), larger
/// ones for `exp` and the logarithms, infinities and NaN.
const INPUTS: [f32; 16] = [
    0.0,
    1.0,
    2.0,
    0.25,
    4.0,
    0.7,
    -1.5,
    3.0,
    -3.1,
    1e-3,
    12.5,
    -20.0,
    80.0,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
];

/// Each function's value in f64, and how far the device may be from it: (absolute, relative).
fn reference(f: &str, x: f64) -> (f64, f64, f64) {
    const U: f64 = 1.0 / (1u64 << 23) as f64; // 2^-23, one unit in the last place of an f32 at 1
    match f {
        // Correctly rounded on both backends (sqrt.rn): the f32 rounding alone.
        "sqrt" => (x.sqrt(), 0.0, U / 2.0),
        // An approximation of a couple of units in the last place.
        "rsqrt" => (1.0 / x.sqrt(), 0.0, 4.0 * U),
        // __expf: ex2.approx of x log2(e), whose rounding scales the error with |x|.
        "exp" => (x.exp(), 0.0, 4.0 * U + x.abs() * U),
        "exp2" => (x.exp2(), 0.0, 4.0 * U),
        // lg2.approx: absolute error near 1 (where the logarithm crosses 0), relative elsewhere.
        "ln" => (x.ln(), 4.0 * U, 4.0 * U),
        "log2" => (x.log2(), 4.0 * U, 4.0 * U),
        "tanh" => (x.tanh(), 0.0, 1.0 / 2048.0),
        "sin" => (x.sin(), 8.0 * U, 0.0),
        "cos" => (x.cos(), 8.0 * U, 0.0),
        "max" => (x.max(f64::from(BOUND)), 0.0, 0.0),
        "min" => (x.min(f64::from(BOUND)), 0.0, 0.0),
        "abs" => (x.abs(), 0.0, 0.0),
        other => panic!("no reference for {other}"),
    }
}

/// Every function of every input on `rt`, row by row as the kernel writes them.
fn run(rt: &Runtime) -> Vec<f32> {
    let n = INPUTS.len();
    let x = rt.upload(&INPUTS).unwrap();
    let out = rt.alloc::<f32>(FUNCTIONS.len() * n).unwrap();
    let (xp, op, n32) = (x.ptr(), out.ptr(), n as u32);
    launch!(
        rt,
        LaunchConfig::for_elements(n32, 32),
        device_math::device_math(xp, op, n32)
    )
    .unwrap();
    rt.download(&out).unwrap()
}

fn check(backend: &str, got: &[f32]) {
    let mut wrong = Vec::new();
    for (fi, f) in FUNCTIONS.iter().enumerate() {
        for (i, &x) in INPUTS.iter().enumerate() {
            // sin.approx and cos.approx keep their bound on [-pi, pi] only.
            if matches!(*f, "sin" | "cos") && x.is_finite() && x.abs() > std::f32::consts::PI {
                continue;
            }
            let (want, abs, rel) = reference(f, f64::from(x));
            let g = f64::from(got[fi * INPUTS.len() + i]);
            let ok = if want.is_nan() || g.is_nan() {
                want.is_nan() && g.is_nan()
            } else if want.is_infinite() || want.abs() > f64::from(f32::MAX) {
                g == want || (g.is_infinite() && g.signum() == want.signum())
            } else {
                // (The relative part is left out at 0, where `exp`'s grows without bound.)
                let rel = if want == 0.0 { 0.0 } else { rel * want.abs() };
                (g - want).abs() <= abs + rel
            };
            if !ok {
                wrong.push(format!("{f}({x}) = {g}, want {want}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{backend}: {}", wrong.join("; "));
}

#[test]
fn every_function_is_within_its_bound_on_the_source_emulator() {
    check("source emulator", &run(&Runtime::emulator()));
}

#[test]
fn every_function_is_within_its_bound_on_the_ptx_backend() {
    check("PTX backend", &run(&Runtime::ptx(program(Arch::Sm90))));
}

/// Each function is the instruction its docs name, in every architecture's build.
#[test]
fn each_function_is_its_ptx_instruction() {
    for arch in Arch::ALL {
        let body = entry_body(arch.ptx(), "device_math").expect("device_math is built");
        for op in [
            "sqrt.rn.f32",
            "rsqrt.approx.f32",
            "ex2.approx.ftz.f32",
            "lg2.approx.ftz.f32",
            "tanh.approx.f32",
            "sin.approx.f32",
            "cos.approx.f32",
            "max.f32",
            "min.f32",
            "abs.f32",
        ] {
            assert!(body.contains(op), "{}: no {op} in device_math", arch.name());
        }
    }
}
