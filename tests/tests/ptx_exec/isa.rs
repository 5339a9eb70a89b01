// The PTX ISA's edge cases, and the instructions NVIDIA's compiler emits that rustc's does not,
// each checked against what the ISA text says (the section is named in each test). Each runs a
// one-entry module ([`module`]): a thread loads words 0..3 into %r1..%r3, runs the body, and
// stores %r4 at word 3 + tid.

// (Included in `exec.rs`'s tests, whose helpers it uses.)

/// `eval` of `body`, its %r4 read as f32 bits.
fn evalf(body: &str, a: f32, b: f32, c: f32) -> u32 {
    eval(body, f(a), f(b), f(c))
}

/// A 16-bit result: `body` leaves it in %rs1, widened into %r4.
fn eval16(body: &str, a: u32) -> u32 {
    eval(&format!("{body}\n\tcvt.u32.u16 %r4, %rs1;"), a, 0, 0)
}

/// The canonical NaN of f32 arithmetic on the GPU.
const CANONICAL: u32 = 0x7fff_ffff;

#[test]
fn a_narrowing_signed_cvt_sign_extends_into_a_wider_register() {
    // PTX ISA, "Operand Size Exceeding Instruction-Type Size": for cvt, a destination register
    // wider than the destination type is sign-extended when the type is signed, zero-extended
    // when it is unsigned.
    assert_eq!(eval("\tcvt.s8.s32 %r4, %r1;", 0x80, 0, 0), 0xffff_ff80);
    assert_eq!(eval("\tcvt.s8.s32 %r4, %r1;", 0x17f, 0, 0), 0x7f);
    assert_eq!(eval("\tcvt.s16.s32 %r4, %r1;", 0x1_8000, 0, 0), 0xffff_8000);
    assert_eq!(eval("\tcvt.u8.s32 %r4, %r1;", u32::MAX, 0, 0), 0xff);
    // Saturating to the type first, then extending: -1000 clamps to -128.
    assert_eq!(
        eval("\tcvt.sat.s8.s32 %r4, %r1;", (-1000i32) as u32, 0, 0),
        0xffff_ff80
    );
    // Into a 64-bit register: the upper word is the sign too.
    let wide = "\tcvt.s16.s32 %rd4, %r1;\n\tshr.u64 %rd5, %rd4, 32;\n\tcvt.u32.u64 %r4, %rd5;";
    assert_eq!(eval(wide, 0x8000, 0, 0), u32::MAX);
}

#[test]
fn relu_and_satfinite_on_cvt_to_half_types() {
    // PTX ISA, "cvt": .relu clamps a negative result to 0; .satfinite clamps an infinite or
    // out-of-range result to the destination's largest finite value (MAX_NORM) of its sign;
    // with either, a NaN result is the canonical NaN.
    let bf16 = |m: &str, x: u32| eval16(&format!("\tcvt.rn{m}.bf16.f32 %rs1, %r1;"), x);
    let f16 = |m: &str, x: u32| eval16(&format!("\tcvt.rn{m}.f16.f32 %rs1, %r1;"), x);
    assert_eq!(bf16(".relu", f(-2.0)), 0);
    assert_eq!(bf16(".relu", f(2.0)), 0x4000);
    assert_eq!(bf16(".relu", 0xffc0_0001), 0x7fff);
    assert_eq!(f16(".relu", f(-0.5)), 0);
    assert_eq!(f16(".satfinite", f(1e6)), 0x7bff);
    assert_eq!(f16(".satfinite", f(f32::NEG_INFINITY)), 0xfbff);
    assert_eq!(f16(".satfinite", f(65520.0)), 0x7bff);
    assert_eq!(f16(".satfinite", f(1.0)), 0x3c00);
    assert_eq!(f16(".satfinite", 0x7fc0_1234), 0x7fff);
    assert_eq!(bf16(".satfinite", f(f32::INFINITY)), 0x7f7f);
    assert_eq!(f16(".relu.satfinite", f(-1e6)), 0);
    // Without them, infinity stays infinity.
    assert_eq!(f16("", f(1e6)), 0x7c00);
    // The packed form: a to the upper half, b to the lower.
    let pair = "\tcvt.rn.bf16x2.f32 %r4, %r1, %r2;";
    assert_eq!(eval(pair, f(1.0), f(-2.0), 0), 0x3f80_c000);
    let pair = "\tcvt.rn.relu.f16x2.f32 %r4, %r1, %r2;";
    assert_eq!(eval(pair, f(-1.0), f(1.0), 0), 0x0000_3c00);
}

#[test]
fn cvt_sat_f32_f32_clamps_to_the_unit_interval() {
    // PTX ISA, "cvt": .sat on a float destination clamps to [0.0, 1.0], NaN to 0; with the same
    // type and no integer rounding the value is otherwise unchanged (.ftz flushes).
    let sat = "\tcvt.sat.f32.f32 %r4, %r1;";
    assert_eq!(evalf(sat, 1.5, 0.0, 0.0), f(1.0));
    assert_eq!(evalf(sat, -0.5, 0.0, 0.0), 0);
    assert_eq!(evalf(sat, 0.25, 0.0, 0.0), f(0.25));
    assert_eq!(eval(sat, 0x7fc0_0000, 0, 0), 0);
    assert_eq!(eval("\tcvt.ftz.f32.f32 %r4, %r1;", 1, 0, 0), 0);
    assert_eq!(eval("\tcvt.f32.f32 %r4, %r1;", 1, 0, 0), 1);
}

/// The 32 lanes' %r4 after `shfl.sync.<mode>.b32 %r6|%p1, %r5, <b>, <c>, -1` where lane l
/// offers 100 + l: (value, predicate) per lane.
fn shuffle(mode: &str, b: u32, c: u32) -> Vec<(u32, bool)> {
    let body = format!(
        "\tadd.s32 %r5, %r9, 100;\n\tshfl.sync.{mode}.b32 %r6|%p1, %r5, {b}, {c}, -1;\n\tselp.u32 %r7, 1000, 0, %p1;\n\tadd.s32 %r4, %r6, %r7;"
    );
    run(&body, [0; 3], 32)
        .unwrap()
        .into_iter()
        .map(|w| (w % 1000, w >= 1000))
        .collect()
}

#[test]
fn shuffles_take_b_4_0_and_the_clamp_and_segment_mask_of_c() {
    // PTX ISA, "shfl.sync": lane = laneid, bval = b[4:0], cval = c[4:0], segmask = c[12:8];
    // maxLane = (lane & segmask) | (cval & ~segmask), minLane = lane & segmask;
    // up: j = lane - bval, p = j >= maxLane; down: j = lane + bval, p = j <= maxLane;
    // bfly: j = lane ^ bval, p = j <= maxLane; idx: j = minLane | (bval & ~segmask),
    // p = j <= maxLane; a lane with p false reads its own value.
    let reference = |mode: &str, b: u32, c: u32, lane: u32| -> (u32, bool) {
        let (bval, cval, seg) = (b & 31, c & 31, (c >> 8) & 31);
        let max_lane = (lane & seg) | (cval & !seg);
        let min_lane = lane & seg;
        let (j, p) = match mode {
            "up" => (lane as i32 - bval as i32, lane as i32 - bval as i32 >= max_lane as i32),
            "down" => ((lane + bval) as i32, lane + bval <= max_lane),
            "bfly" => ((lane ^ bval) as i32, lane ^ bval <= max_lane),
            _ => ((min_lane | (bval & !seg)) as i32, min_lane | (bval & !seg) <= max_lane),
        };
        (100 + if p { j as u32 } else { lane }, p)
    };
    // Whole warps (c = 0x1f, up's 0), b wider than five bits, and sub-warp widths 8 and 16
    // as CUDA's __shfl_*_sync(mask, v, b, width) encodes them: c = ((32 - width) << 8) | clamp.
    let cases = [
        ("down", 1, 0x1f),
        ("up", 33, 0),
        ("down", 34, 0x1f),
        ("down", 1, 0x181f),
        ("up", 2, 0x1800),
        ("bfly", 4, 0x181f),
        ("bfly", 16, 0x101f),
        ("idx", 2, 0x181f),
        ("idx", 37, 0x1f),
    ];
    for (mode, b, c) in cases {
        let got = shuffle(mode, b, c);
        for (lane, &g) in got.iter().enumerate() {
            assert_eq!(g, reference(mode, b, c, lane as u32), "{mode} b={b} c={c:#x} lane {lane}");
        }
    }
    // Spot values: width 8, down 1: lane 7 keeps its own value; idx 2 reads its segment's lane 2.
    assert_eq!(shuffle("down", 1, 0x181f)[7], (107, false));
    assert_eq!(shuffle("idx", 2, 0x181f)[13], (110, true));
    assert_eq!(shuffle("up", 33, 0)[5], (104, true));
}

#[test]
fn div_approx_follows_the_range_rule() {
    // PTX ISA, "div": div.approx.f32 computes a * (1 / b); for 2^126 < |b| < 2^128 it returns 0,
    // or NaN if a is infinite. div.full.f32 is within 2 ulp over the whole range.
    let approx = "\tdiv.approx.f32 %r4, %r1, %r2;";
    let big = 2f32.powi(127);
    assert_eq!(evalf(approx, 1.0, big, 0.0), 0);
    assert_eq!(evalf(approx, -1.0, big, 0.0), 0x8000_0000);
    assert_eq!(evalf(approx, f32::INFINITY, big, 0.0), CANONICAL);
    assert_eq!(evalf(approx, 3.0, 1.5, 0.0), f(2.0));
    // Just inside the range the reciprocal is normal: an ordinary quotient.
    let inside = 2f32.powi(125);
    assert_eq!(evalf(approx, 1.0, inside, 0.0), f(2f32.powi(-125)));
    let full = "\tdiv.full.f32 %r4, %r1, %r2;";
    assert_eq!(evalf(full, 1.0, big, 0.0), f(2f32.powi(-127)));
}

#[test]
fn nan_results_of_f32_arithmetic_are_canonical() {
    // PTX ISA, "Floating-Point Instructions": NaN results are the canonical NaN, whatever the
    // inputs' payloads (0x7fffffff for f32); min/max of two NaNs return it too. neg and abs flip
    // or clear the sign bit alone.
    let payload = 0x7fc0_1234;
    assert_eq!(eval("\tadd.f32 %r4, %r1, %r2;", payload, f(1.0), 0), CANONICAL);
    assert_eq!(evalf("\tmul.f32 %r4, %r1, %r2;", f32::INFINITY, 0.0, 0.0), CANONICAL);
    assert_eq!(eval("\tfma.rn.f32 %r4, %r1, %r2, %r3;", f(1.0), f(1.0), payload), CANONICAL);
    assert_eq!(evalf("\tsqrt.rn.f32 %r4, %r1;", -1.0, 0.0, 0.0), CANONICAL);
    assert_eq!(eval("\tmax.f32 %r4, %r1, %r2;", payload, payload, 0), CANONICAL);
    assert_eq!(eval("\tadd.sat.f32 %r4, %r1, %r2;", payload, 0, 0), 0);
    assert_eq!(eval("\tneg.f32 %r4, %r1;", payload, 0, 0), payload | 0x8000_0000);
    assert_eq!(eval("\tabs.f32 %r4, %r1;", payload | 0x8000_0000, 0, 0), payload);
}

/// The f32 that rounding the exact rational `num * 2^exp` in `mode` gives, by integer
/// arithmetic: the independent reference of the directed-rounding tests.
fn round_exact(num: i128, exp: i32, mode: &str) -> f32 {
    if num == 0 {
        return 0.0;
    }
    let negative = num < 0;
    let mut m = num.unsigned_abs();
    let mut e = exp;
    // Normalise to a 24-bit significand, keeping whether bits were dropped.
    let bits = 128 - m.leading_zeros() as i32;
    let mut sticky = false;
    if bits > 24 {
        let drop = bits - 24;
        sticky = m & ((1u128 << drop) - 1) != 0;
        m >>= drop;
        e += drop;
    } else {
        m <<= 24 - bits;
        e -= 24 - bits;
    }
    // Magnitude rounding: away from zero when the mode rounds the sign's way.
    let away = match mode {
        "rz" => false,
        "rm" => negative,
        _ => !negative, // rp
    };
    if sticky && away {
        m += 1;
        if m == 1 << 24 {
            m >>= 1;
            e += 1;
        }
    }
    let magnitude = (m as f64 * 2f64.powi(e)) as f32; // exact: 24 bits, in range
    if negative { -magnitude } else { magnitude }
}

/// (significand, exponent) of `x` (`x == s * 2^e`).
fn split(x: f32) -> (i128, i32) {
    let bits = x.to_bits();
    let (sign, exp, frac) = (bits >> 31, ((bits >> 23) & 0xff) as i32, bits & 0x7f_ffff);
    let m = i128::from(frac | 0x80_0000);
    let m = if sign == 1 { -m } else { m };
    (m, exp - 127 - 23)
}

#[test]
fn directed_rounding_is_exact() {
    // PTX ISA, "Floating-Point Instructions: fma, add, mul": .rz, .rm, .rp round the infinitely
    // precise result toward zero, -infinity, +infinity (IEEE 754). The backend computes them
    // with error-free transformations in f64; the reference here is integer arithmetic.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..300 {
        let mut value = || {
            let r = next();
            let m = (r as u32 & 0x7f_ffff) | 0x80_0000;
            let e = (r >> 32) as i32 % 12;
            let x = m as f32 * 2f32.powi(e - 23);
            if r >> 63 == 1 { -x } else { x }
        };
        let (a, b, c) = (value(), value(), value());
        let ((ma, ea), (mb, eb), (mc, ec)) = (split(a), split(b), split(c));
        for mode in ["rz", "rm", "rp"] {
            // a * b + c exactly: both terms scaled to the smaller exponent.
            let (ep, low) = (ea + eb, (ea + eb).min(ec));
            let fma = ma * mb * (1i128 << (ep - low)) + mc * (1i128 << (ec - low));
            let got = evalf(&format!("\tfma.{mode}.f32 %r4, %r1, %r2, %r3;"), a, b, c);
            assert_eq!(got, f(round_exact(fma, low, mode)), "fma.{mode}({a}, {b}, {c})");
            let low = ea.min(eb);
            let sum = ma * (1i128 << (ea - low)) + mb * (1i128 << (eb - low));
            let got = evalf(&format!("\tadd.{mode}.f32 %r4, %r1, %r2;"), a, b, 0.0);
            assert_eq!(got, f(round_exact(sum, low, mode)), "add.{mode}({a}, {b})");
            let got = evalf(&format!("\tmul.{mode}.f32 %r4, %r1, %r2;"), a, b, 0.0);
            assert_eq!(got, f(round_exact(ma * mb, ea + eb, mode)), "mul.{mode}({a}, {b})");
        }
    }
    // What a precise expf does: fma.rm of an exact product plus a constant.
    let x = evalf("\tfma.rm.f32 %r4, %r1, %r2, %r3;", 1.0, 1.0, 2f32.powi(-30));
    assert_eq!(x, f(1.0));
    let x = evalf("\tfma.rp.f32 %r4, %r1, %r2, %r3;", 1.0, 1.0, 2f32.powi(-30));
    assert_eq!(x, f(1.0) + 1);
    // An exact zero sum is -0 rounding down, +0 otherwise (IEEE 754 6.3).
    assert_eq!(evalf("\tadd.rm.f32 %r4, %r1, %r2;", 1.0, -1.0, 0.0), 0x8000_0000);
    assert_eq!(evalf("\tadd.rz.f32 %r4, %r1, %r2;", 1.0, -1.0, 0.0), 0);
    // Overflow: toward zero stops at the largest finite value.
    let max = f32::MAX;
    assert_eq!(evalf("\tadd.rz.f32 %r4, %r1, %r2;", max, max, 0.0), f(max));
    assert_eq!(evalf("\tadd.rp.f32 %r4, %r1, %r2;", max, max, 0.0), f(f32::INFINITY));
    // Division and square root by their remainders: 1/3 lies between two f32.
    let third = evalf("\tdiv.rz.f32 %r4, %r1, %r2;", 1.0, 3.0, 0.0);
    assert_eq!(evalf("\tdiv.rp.f32 %r4, %r1, %r2;", 1.0, 3.0, 0.0), third + 1);
    assert_eq!(evalf("\tsqrt.rm.f32 %r4, %r1;", 4.0, 0.0, 0.0), f(2.0));
    let root2 = evalf("\tsqrt.rm.f32 %r4, %r1;", 2.0, 0.0, 0.0);
    assert_eq!(evalf("\tsqrt.rp.f32 %r4, %r1;", 2.0, 0.0, 0.0), root2 + 1);
    assert_eq!(
        evalf("\tcvt.rz.f32.s32 %r4, %r1;", f32::from_bits(16_777_217), 0.0, 0.0),
        f(16_777_216.0)
    );
}

/// A module with a helper `.func` (and whatever `funcs` adds) before entry `t`, whose body
/// calls it: the shape of a `-G` build.
fn with_funcs(funcs: &str, body: &str) -> String {
    let entry = module(body);
    let at = entry.find(".visible .entry").unwrap();
    format!("{}{funcs}\n{}", &entry[..at], &entry[at..])
}

/// `fact(n)`, recursive, as NVVM calls a device function: `.param` variables in a call scope.
const FACT: &str = "\
.func  (.param .b32 func_retval0) fact(
\t.param .b32 fact_param_0
)
{
\t.reg .pred %p<2>;
\t.reg .b32 %r<6>;
\tld.param.u32 %r1, [fact_param_0];
\tsetp.le.u32 %p1, %r1, 1;
\tmov.u32 %r5, 1;
\t@%p1 bra $L__done;
\tadd.s32 %r2, %r1, -1;
\t{ // callseq 0, 0
\t.param .b32 param0;
\tst.param.b32 [param0+0], %r2;
\t.param .b32 retval0;
\tcall.uni (retval0), 
\tfact, 
\t(
\tparam0
\t);
\tld.param.b32 %r3, [retval0+0];
\t} // callseq 0
\tmul.lo.s32 %r5, %r3, %r1;
$L__done:
\tst.param.b32 [func_retval0+0], %r5;
\tret;
}
";

const CALL_FACT: &str = "\t{\n\t.param .b32 param0;\n\tst.param.b32 [param0+0], %r1;\n\t.param .b32 retval0;\n\tcall.uni (retval0), fact, (param0);\n\tld.param.b32 %r4, [retval0+0];\n\t}";

#[test]
fn calls_pass_parameters_and_recurse_to_a_checked_depth() {
    // PTX ISA, "Control Flow Instructions: call, ret" and "Parameter State Space": the caller's
    // .param variables are the callee's parameters; a recursive call has its own registers.
    let text = with_funcs(FACT, CALL_FACT);
    let out = run_words(&text, [10, 0, 0], 1, 2).unwrap();
    assert_eq!(out[3..], [3_628_800, 3_628_800]);
    let out = run_words(&text, [1, 0, 0], 1, 1).unwrap();
    assert_eq!(out[3], 1);
    // Past the depth limit, a report naming the call instead of a host stack overflow.
    let err = run_words(&text, [100_000, 0, 0], 1, 1).unwrap_err().to_string();
    assert!(
        err.contains("calls nested more than") && err.contains("`fact`"),
        "{err}"
    );
}

#[test]
fn local_arrays_are_per_thread_and_checked() {
    // PTX ISA, "Local State Space": per-thread memory, here a function's stack frame
    // (`__local_depot`) indexed at run time, through its generic address as NVVM writes it.
    let body = "\
\tmov.u64 %SPL, __local_depot0;
\tcvta.local.u64 %SP, %SPL;
\tmov.u32 %r5, 0;
$L__fill:
\tmul.wide.u32 %rd5, %r5, 4;
\tadd.s64 %rd6, %SP, %rd5;
\tadd.s32 %r6, %r5, %r9;
\tst.u32 [%rd6], %r6;
\tadd.s32 %r5, %r5, 1;
\tsetp.lt.u32 %p1, %r5, 8;
\t@%p1 bra $L__fill;
\tmul.wide.u32 %rd5, %r1, 4;
\tadd.s64 %rd6, %SPL, %rd5;
\tld.local.u32 %r4, [%rd6];";
    let text = module(body).replace(
        "\t.reg .b64 %rd<8>;\n",
        "\t.reg .b64 %rd<8>;\n\t.reg .b64 %SP;\n\t.reg .b64 %SPL;\n\t.local .align 4 .b8 __local_depot0[32];\n",
    );
    // Element 5 of each thread's own array: 5 + tid.
    let out = run_words(&text, [5, 0, 0], 1, 4).unwrap();
    assert_eq!(out[3..], [5, 6, 7, 8]);
    // Element 8 is past the 32-byte frame.
    let err = run_words(&text, [8, 0, 0], 1, 1).unwrap_err().to_string();
    assert!(err.contains("out-of-bounds local memory access"), "{err}");
    assert!(err.contains(&format!("PTX line {}", line_of(&text, "ld.local"))), "{err}");
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn a_shared_array_declared_in_the_kernel_body_is_shared_memory() {
    // What NVVM emits for `__shared__ float tile[32];` inside a kernel: a function-scope
    // .shared variable (PTX ISA, "Shared State Space": visible to the block's threads).
    let body = "\
\tmov.u64 %rd5, tile;
\tcvta.shared.u64 %rd6, %rd5;
\tmul.wide.u32 %rd4, %r9, 4;
\tadd.s64 %rd7, %rd6, %rd4;
\tst.u32 [%rd7], %r9;
\tbar.sync 0;
\tsub.s32 %r5, 31, %r9;
\tmul.wide.u32 %rd4, %r5, 4;
\tadd.s64 %rd7, %rd6, %rd4;
\tld.u32 %r4, [%rd7];";
    let text = module(body).replace(
        "\t.reg .b64 %rd<8>;\n",
        "\t.reg .b64 %rd<8>;\n\t.shared .align 4 .b8 tile[128];\n",
    );
    let out = run_words(&text, [0; 3], 1, 32).unwrap();
    assert!(out[3..].iter().enumerate().all(|(t, &w)| w == 31 - t as u32), "{out:?}");
    // Without the barrier, the read races with another thread's write.
    let racy = text.replace("\tbar.sync 0;\n", "");
    let err = run_words(&racy, [0; 3], 1, 32).unwrap_err().to_string();
    assert!(err.contains("data race on shared memory"), "{err}");
}

#[test]
fn one_kernel_the_backend_cannot_run_does_not_stop_the_others() {
    let good = module("\tadd.s32 %r4, %r1, %r2;");
    let bad = good
        .replace(".entry t(", ".entry bad(")
        .replace("t_param_0", "bad_param_0")
        .replace("add.s32 %r4, %r1, %r2", "mul24.lo.u32 %r4, %r1, %r2");
    let unreadable = good
        .replace(".entry t(", ".entry unreadable(")
        .replace("t_param_0", "unreadable_param_0")
        .replace("add.s32 %r4, %r1, %r2", "add.s32 %r4, %r1, ?what");
    let body = |m: &str| m[m.find(".visible").unwrap()..].to_string();
    let text = format!("{good}{}{}", body(&bad), body(&unreadable));
    let text: &'static str = Box::leak(text.into_boxed_str());
    let program = Program::load(text, "test".into()).unwrap();
    assert!(program.kernel("t").is_ok());
    let why = program.kernel("bad").unwrap_err().to_string();
    let line = line_of(text, "mul24");
    assert!(
        why.contains("kernel `bad`") && why.contains(&format!("PTX line {line}")) && why.contains("mul24.lo.u32"),
        "{why}"
    );
    let why = program.kernel("unreadable").unwrap_err().to_string();
    let line = line_of(text, "?what");
    assert!(
        why.contains("kernel `unreadable`") && why.contains(&format!("PTX line {line}")) && why.contains("?what"),
        "{why}"
    );
    // The good entry still runs.
    assert_eq!(run_words(text, [2, 3, 0], 1, 1).unwrap()[3], 5);
    // A call to a function that is only declared refuses its caller, naming the callee.
    let proto = ".extern .func (.param .b32 func_retval0) elsewhere(.param .b64 a, .param .b64 b);\n";
    let text = with_funcs(proto, "\t{\n\t.param .b64 param0;\n\tst.param.b64 [param0+0], %rd1;\n\t.param .b64 param1;\n\tst.param.b64 [param1+0], %rd1;\n\t.param .b32 retval0;\n\tcall.uni (retval0), elsewhere, (param0, param1);\n\t}");
    let err = run_words(&text, [0; 3], 1, 1).unwrap_err().to_string();
    assert!(err.contains("`elsewhere`") && err.contains("only declared"), "{err}");
}

/// [`module`] without its loads of words 0..3 (which would race with atomics on them).
fn no_loads(body: &str) -> String {
    module(body).replace(
        "\tld.global.b32 %r1, [%rd1];\n\tld.global.b32 %r2, [%rd1+4];\n\tld.global.b32 %r3, [%rd1+8];\n",
        "",
    )
}

#[test]
fn atomics_on_global_and_shared_memory() {
    // PTX ISA, "atom" and "red": the operation's old value to d (atom), none (red).
    // Global: 64 threads in 2 blocks (run in parallel, as on two SMs) add 1 to word 0 (atom),
    // 2 to word 2 (red), and take the max of the global thread index on word 1. The atom and
    // the red are on different words: on one word, another block's atom may fall between a
    // thread's atom and its red, so its old values need not be multiples of 3.
    let body = "\
\tatom.global.add.u32 %r5, [%rd1], 1;
\tred.global.add.u32 [%rd1+8], 2;
\tmov.u32 %r6, %ctaid.x;
\tmad.lo.s32 %r7, %r6, 32, %r9;
\tatom.global.max.s32 %r8, [%rd1+4], %r7;
\tmov.u32 %r4, %r5;
\tmad.lo.s32 %r9, %r6, 32, %r9;";
    let out = run_words(&no_loads(body), [0, (-5i32) as u32, 0], 2, 32).unwrap();
    assert_eq!(out[0], 64);
    assert_eq!(out[1], 63);
    assert_eq!(out[2], 64 * 2);
    // Each atom saw a distinct old value: they are a permutation of 0..64.
    let mut old: Vec<u32> = out[3..].to_vec();
    old.sort();
    assert_eq!(old, (0..64).collect::<Vec<_>>());
    // cas, exch, inc, dec, and, or, xor, min on one thread, from the ISA's definitions:
    // inc: old >= b ? 0 : old + 1; dec: old == 0 || old > b ? b : old - 1.
    let one = |op: &str, start: u32, b: u32| -> (u32, u32) {
        let body = format!("\tatom.global.{op} %r4, [%rd1], {b};");
        let out = run_words(&no_loads(&body), [start, 0, 0], 1, 1).unwrap();
        (out[3], out[0])
    };
    assert_eq!(one("inc.u32", 5, 5), (5, 0));
    assert_eq!(one("inc.u32", 4, 5), (4, 5));
    assert_eq!(one("dec.u32", 0, 7), (0, 7));
    assert_eq!(one("dec.u32", 9, 7), (9, 7));
    assert_eq!(one("dec.u32", 3, 7), (3, 2));
    assert_eq!(one("exch.b32", 3, 9), (3, 9));
    assert_eq!(one("and.b32", 6, 3), (6, 2));
    assert_eq!(one("or.b32", 6, 3), (6, 7));
    assert_eq!(one("xor.b32", 6, 3), (6, 5));
    assert_eq!(one("min.s32", 1, u32::MAX), (1, u32::MAX));
    assert_eq!(one("min.u32", 1, u32::MAX), (1, 1));
    let cas = "\tatom.global.cas.b32 %r4, [%rd1], 7, 9;";
    assert_eq!(run_words(&no_loads(cas), [7, 0, 0], 1, 1).unwrap()[0], 9);
    assert_eq!(run_words(&no_loads(cas), [8, 0, 0], 1, 1).unwrap()[0], 8);
    // f32 add: rounds to nearest, flushes subnormals (PTX ISA, "atom": atom.add.f32).
    let fadd = "\tatom.global.add.f32 %r4, [%rd1], 0f3F800000;";
    assert_eq!(run_words(&no_loads(fadd), [f(0.5), 0, 0], 1, 4).unwrap()[0], f(4.5));
    let flush = "\tatom.global.add.f32 %r4, [%rd1], %r9;";
    assert_eq!(run_words(&no_loads(flush), [1, 0, 0], 1, 1).unwrap()[0], 0);
    // Shared: a counter in a function-scope array, every thread adding its tid.
    let shared = "\
\tmov.u32 %r5, 0;
\tsetp.ne.s32 %p1, %r9, 0;
\t@%p1 bra $L__zeroed;
\tst.shared.u32 [count], %r5;
$L__zeroed:
\tbar.sync 0;
\tatom.shared.add.u32 %r6, [count], %r9;
\tbar.sync 0;
\tld.shared.u32 %r4, [count];";
    let text = module(shared).replace(
        "\t.reg .b64 %rd<8>;\n",
        "\t.reg .b64 %rd<8>;\n\t.shared .align 4 .b32 count;\n",
    );
    let out = run_words(&text, [0; 3], 1, 64).unwrap();
    assert!(out[3..].iter().all(|&w| w == 64 * 63 / 2), "{out:?}");
}

#[test]
fn atomics_do_not_race_with_each_other_but_do_with_plain_accesses() {
    // Global: an atomic and another thread's plain load of the word, with no barrier between.
    let racy = "\tatom.global.add.u32 %r5, [%rd1], 1;";
    let err = run_words(&module(racy), [0; 3], 1, 2).unwrap_err().to_string();
    assert!(err.contains("data race on global memory"), "{err}");
    // Atomics alone, across blocks: no race (the test above ran them).
    // Shared: thread 0's plain store and thread 1's atomic in one interval.
    let shared = "\
\tsetp.eq.u32 %p1, %r9, 0;
\t@%p1 st.shared.u32 [count], %r9;
\t@!%p1 atom.shared.add.u32 %r6, [count], 1;
\tmov.u32 %r4, 0;";
    let text = module(shared).replace(
        "\t.reg .b64 %rd<8>;\n",
        "\t.reg .b64 %rd<8>;\n\t.shared .align 4 .b32 count;\n",
    );
    let err = run_words(&text, [0; 3], 1, 2).unwrap_err().to_string();
    assert!(
        err.contains("data race on shared memory") && err.contains("an atomic at"),
        "{err}"
    );
}

/// An atomic reads the word it replaces: on a shared word no thread wrote since the block
/// began (shared memory starts as garbage), that read is reported as a load of it would be, by
/// the thread that made it. (Issue 42, finding 9: it passed, with the sum of garbage.)
#[test]
fn an_atomic_on_never_written_shared_memory_is_an_uninitialised_read() {
    let unzeroed = "\
\tatom.shared.add.u32 %r6, [count], %r9;
\tbar.sync 0;
\tld.shared.u32 %r4, [count];";
    let text = module(unzeroed).replace(
        "\t.reg .b64 %rd<8>;\n",
        "\t.reg .b64 %rd<8>;\n\t.shared .align 4 .b32 count;\n",
    );
    let err = run_words(&text, [0; 3], 1, 64).unwrap_err().to_string();
    assert!(
        err.contains("read of uninitialised shared memory at byte 0")
            && err.contains("thread (0, 0, 0)"),
        "{err}"
    );
}

#[test]
fn warp_votes_reductions_and_the_active_mask() {
    // PTX ISA, "vote.sync", "redux.sync", "activemask".
    let ballot = "\tand.b32 %r5, %r9, 1;\n\tsetp.eq.u32 %p1, %r5, 1;\n\tvote.sync.ballot.b32 %r4, %p1, -1;";
    assert!(run(ballot, [0; 3], 32).unwrap().iter().all(|&w| w == 0xaaaa_aaaa));
    let any = "\tsetp.eq.u32 %p1, %r9, 7;\n\tvote.sync.any.pred %p2, %p1, -1;\n\tvote.sync.all.pred %p3, !%p1, -1;\n\tselp.u32 %r5, 1, 0, %p2;\n\tselp.u32 %r6, 2, 0, %p3;\n\tor.b32 %r4, %r5, %r6;";
    assert!(run(any, [0; 3], 32).unwrap().iter().all(|&w| w == 1));
    let uni = "\tsetp.lt.u32 %p1, %r9, 100;\n\tvote.sync.uni.pred %p2, %p1, -1;\n\tselp.u32 %r4, 1, 0, %p2;";
    assert!(run(uni, [0; 3], 32).unwrap().iter().all(|&w| w == 1));
    let sum = "\tredux.sync.add.u32 %r4, %r9, -1;";
    assert!(run(sum, [0; 3], 32).unwrap().iter().all(|&w| w == 31 * 32 / 2));
    let min = "\tsub.s32 %r5, 10, %r9;\n\tredux.sync.min.s32 %r4, %r5, -1;";
    assert!(run(min, [0; 3], 32).unwrap().iter().all(|&w| w == (-21i32) as u32));
    let xor = "\tredux.sync.xor.b32 %r4, %r9, -1;";
    assert!(run(xor, [0; 3], 32).unwrap().iter().all(|&w| w == 0));
    // 40 threads: the second warp has 8 lanes.
    let active = "\tactivemask.b32 %r4;";
    let out = run(active, [0; 3], 40).unwrap();
    assert!(out[..32].iter().all(|&w| w == u32::MAX) && out[32..].iter().all(|&w| w == 0xff));
    // %lanemask_lt: the lanes below this one.
    let lt = "\tmov.u32 %r4, %lanemask_lt;";
    let out = run(lt, [0; 3], 32).unwrap();
    assert!(out.iter().enumerate().all(|(l, &w)| w == (1u32 << l) - 1));
    let ge = "\tmov.u32 %r4, %lanemask_ge;";
    assert_eq!(run(ge, [0; 3], 32).unwrap()[3], !0b111);
}

#[test]
fn bit_field_permute_logic_and_class_instructions() {
    // PTX ISA, "bfi": insert len bits of a at pos of b.
    assert_eq!(eval("\tbfi.b32 %r4, %r1, %r2, 8, 4;", 0xf, 0x1234_5678, 0), 0x1234_5f78);
    assert_eq!(eval("\tbfi.b32 %r4, %r1, %r2, 28, 8;", 0xff, 0, 0), 0xf000_0000);
    // "prmt": selector nibbles pick bytes of {b, a} (a bytes 0-3, b bytes 4-7).
    assert_eq!(eval("\tprmt.b32 %r4, %r1, %r2, 0x3210;", 0x4433_2211, 0x8877_6655, 0), 0x4433_2211);
    assert_eq!(eval("\tprmt.b32 %r4, %r1, %r2, 0x7654;", 0x4433_2211, 0x8877_6655, 0), 0x8877_6655);
    assert_eq!(eval("\tprmt.b32 %r4, %r1, %r2, 0x0123;", 0x4433_2211, 0, 0), 0x1122_3344);
    // msb of a selector nibble: the byte's sign replicated (0x88 is negative).
    assert_eq!(eval("\tprmt.b32 %r4, %r1, %r2, 0x000f;", 0, 0x8800_0000, 0), 0xff);
    // "lop3": immLut = F(0xF0, 0xCC, 0xAA): 0x96 is a ^ b ^ c, 0xE8 the majority.
    assert_eq!(eval("\tlop3.b32 %r4, %r1, %r2, %r3, 0x96;", 0b1100, 0b1010, 0b0110), 0);
    assert_eq!(eval("\tlop3.b32 %r4, %r1, %r2, %r3, 0xE8;", 0b1100, 0b1010, 0b0110), 0b1110);
    assert_eq!(eval("\tlop3.b32 %r4, %r1, %r2, %r3, 0x80;", u32::MAX, 0xf0, 0x3c), 0x30);
    // "shf": the funnel shift of b:a (b the upper word); .wrap takes c mod 32, .clamp caps it
    // at 32; .l keeps the upper word, .r the lower.
    assert_eq!(eval("\tshf.l.wrap.b32 %r4, %r1, %r2, %r3;", 0x8000_0001, 0x1234_5678, 4), 0x2345_6788);
    assert_eq!(eval("\tshf.l.wrap.b32 %r4, %r1, %r2, %r3;", 0x8000_0001, 0x1234_5678, 36), 0x2345_6788);
    assert_eq!(eval("\tshf.l.clamp.b32 %r4, %r1, %r2, %r3;", 0x8000_0001, 0x1234_5678, 40), 0x8000_0001);
    assert_eq!(eval("\tshf.r.wrap.b32 %r4, %r1, %r2, %r3;", 0x8000_0001, 0x1234_5678, 4), 0x8800_0000);
    assert_eq!(eval("\tshf.r.clamp.b32 %r4, %r1, %r2, %r3;", 0x8000_0001, 0x1234_5678, 40), 0x1234_5678);
    // "bfind": the most significant non-sign bit; 0xffffffff when none; .shiftamt counts from
    // the top.
    assert_eq!(eval("\tbfind.u32 %r4, %r1;", 0x100, 0, 0), 8);
    assert_eq!(eval("\tbfind.u32 %r4, %r1;", 0, 0, 0), u32::MAX);
    assert_eq!(eval("\tbfind.s32 %r4, %r1;", (-256i32) as u32, 0, 0), 7);
    assert_eq!(eval("\tbfind.s32 %r4, %r1;", u32::MAX, 0, 0), u32::MAX);
    assert_eq!(eval("\tbfind.shiftamt.u32 %r4, %r1;", 0x100, 0, 0), 23);
    // "copysign": b's magnitude with a's sign.
    assert_eq!(evalf("\tcopysign.f32 %r4, %r1, %r2;", -1.0, 3.0, 0.0), f(-3.0));
    // "testp".
    let testp = |class: &str, x: u32| eval(&format!("\ttestp.{class}.f32 %p1, %r1;\n\tselp.u32 %r4, 1, 0, %p1;"), x, 0, 0);
    assert_eq!(testp("subnormal", 1), 1);
    assert_eq!(testp("normal", 1), 0);
    assert_eq!(testp("normal", f(1.0)), 1);
    assert_eq!(testp("infinite", f(f32::INFINITY)), 1);
    assert_eq!(testp("finite", f(f32::INFINITY)), 0);
    assert_eq!(testp("notanumber", 0x7fc0_0000), 1);
    assert_eq!(testp("number", f(0.0)), 1);
}

#[test]
fn extended_precision_arithmetic_carries() {
    // PTX ISA, "Extended-Precision Integer Arithmetic": add.cc writes the carry-out to CC.CF,
    // addc adds it in; sub.cc / subc the borrow. A 64-bit add and subtract from 32-bit halves.
    let add = "\tadd.cc.u32 %r5, %r1, %r2;\n\taddc.u32 %r4, 0, 0;";
    assert_eq!(eval(add, u32::MAX, 1, 0), 1);
    assert_eq!(eval(add, 5, 1, 0), 0);
    let chain = "\tadd.cc.u32 %r5, %r1, %r2;\n\taddc.cc.u32 %r6, %r3, 0;\n\taddc.u32 %r4, 0, 0;";
    assert_eq!(eval(chain, u32::MAX, 1, u32::MAX), 1);
    let sub = "\tsub.cc.u32 %r5, %r1, %r2;\n\tsubc.u32 %r4, %r3, 0;";
    assert_eq!(eval(sub, 0, 1, 10), 9);
    assert_eq!(eval(sub, 1, 0, 10), 10);
}

#[test]
fn mufu_approximations_are_within_the_isas_error() {
    // PTX ISA, "sin", "cos": maximum absolute error 2^-20.9 in [-pi, pi]; "tanh": maximum
    // relative error 2^-11; "rsqrt.approx": 2^-22.9 relative; "ex2.approx": 2^-22 relative.
    for k in -100..=100 {
        let x = k as f32 * std::f32::consts::PI / 100.0;
        let sin = f32::from_bits(evalf("\tsin.approx.f32 %r4, %r1;", x, 0.0, 0.0));
        assert!((f64::from(sin) - f64::from(x).sin()).abs() <= 2f64.powf(-20.9), "sin({x})");
        let cos = f32::from_bits(evalf("\tcos.approx.ftz.f32 %r4, %r1;", x, 0.0, 0.0));
        assert!((f64::from(cos) - f64::from(x).cos()).abs() <= 2f64.powf(-20.9), "cos({x})");
        let t = f32::from_bits(evalf("\ttanh.approx.f32 %r4, %r1;", x, 0.0, 0.0));
        let exact = f64::from(x).tanh();
        assert!(exact == 0.0 || ((f64::from(t) - exact) / exact).abs() <= 2f64.powi(-11), "tanh({x})");
        let y = (k as f32).abs() + 0.5;
        let r = f32::from_bits(evalf("\trsqrt.approx.f32 %r4, %r1;", y, 0.0, 0.0));
        let exact = 1.0 / f64::from(y).sqrt();
        assert!(((f64::from(r) - exact) / exact).abs() <= 2f64.powf(-22.9), "rsqrt({y})");
    }
}

#[test]
fn global_and_const_variables_start_with_their_initialisers() {
    // PTX ISA, "Variable Declarations: Initializers": a .global or .const variable holds its
    // initial value when the module is loaded; `ld.const` reads the constant bank, and the
    // address of a .global variable is an ordinary global address.
    let vars = ".global .align 4 .u32 table[4] = {10, 20, 30, 40};\n.const .align 4 .b32 k[2] = {0f3F800000, 0f40000000};\n.visible .global .align 4 .u32 counter;\n";
    let body = "\
\tmov.u64 %rd5, table;
\tmul.wide.u32 %rd6, %r1, 4;
\tadd.s64 %rd7, %rd5, %rd6;
\tld.global.u32 %r5, [%rd7];
\tld.const.b32 %r6, [k+4];
\tatom.global.add.u32 %r7, [counter], 1;
\tadd.s32 %r4, %r5, %r7;
\tmov.u32 %r8, %r6;";
    let text = module(body).replace(".address_size 64\n", &format!(".address_size 64\n{vars}"));
    let out = run_words(&text, [2, 0, 0], 1, 3).unwrap();
    // table[2] plus the counter's old value, 0, 1, 2 in thread order.
    assert_eq!(out[3..], [30, 31, 32]);
    let check = module("\tld.const.b32 %r4, [k+4];")
        .replace(".address_size 64\n", &format!(".address_size 64\n{vars}"));
    assert_eq!(run_words(&check, [0; 3], 1, 1).unwrap()[3], f(2.0));
    // Past the end of a variable is out of bounds, like any buffer.
    let past = module("\tld.const.b32 %r4, [k+8];")
        .replace(".address_size 64\n", &format!(".address_size 64\n{vars}"));
    let err = run_words(&past, [0; 3], 1, 1).unwrap_err().to_string();
    assert!(err.contains("out-of-bounds Global memory access"), "{err}");
    // A constant cannot be stored to.
    let store = module("\tst.const.b32 [k], %r1;\n\tmov.u32 %r4, 0;")
        .replace(".address_size 64\n", &format!(".address_size 64\n{vars}"));
    let err = run_words(&store, [0; 3], 1, 1).unwrap_err().to_string();
    assert!(err.contains("read-only"), "{err}");
}

#[test]
fn bar_red_combines_every_threads_predicate_at_the_barrier() {
    // PTX ISA, "bar, barrier": `bar.red.popc.u32 d, a, {!}c` is a barrier on `a` that writes to
    // every thread the number of threads whose predicate c (or !c) is true; `.and.pred` whether
    // all are, `.or.pred` whether any is. The expectations are counted from the predicate here.
    let threads = 40u32; // a whole warp and a partial one
    let popc = |setp: &str, c: &str| {
        let body = format!("\t{setp}\n\tbar.red.popc.u32 %r4, 0, {c};");
        run(&body, [0; 3], threads).unwrap_or_else(|e| panic!("{body}: {e}"))
    };
    let odd = "and.b32 %r5, %r9, 1;\n\tsetp.eq.u32 %p1, %r5, 1;";
    assert_eq!(popc(odd, "%p1"), vec![threads / 2; threads as usize]);
    let below7 = "setp.lt.u32 %p1, %r9, 7;";
    assert_eq!(popc(below7, "%p1"), vec![7; threads as usize]);
    assert_eq!(popc(below7, "!%p1"), vec![threads - 7; threads as usize]);
    let pred = |op: &str, setp: &str| {
        let body = format!(
            "\t{setp}\n\tbar.red.{op}.pred %p2, 0, %p1;\n\tselp.u32 %r4, 1, 0, %p2;"
        );
        let out = run(&body, [0; 3], threads).unwrap_or_else(|e| panic!("{body}: {e}"));
        assert!(out.iter().all(|&w| w == out[0]), "{body}: {out:?}");
        out[0]
    };
    assert_eq!(pred("and", "setp.lt.u32 %p1, %r9, 100;"), 1);
    assert_eq!(pred("and", "setp.ne.u32 %p1, %r9, 39;"), 0);
    assert_eq!(pred("or", "setp.eq.u32 %p1, %r9, 39;"), 1);
    assert_eq!(pred("or", "setp.gt.u32 %p1, %r9, 100;"), 0);
    // Two in a row: the second counts afresh (tid < 7, then tid < 30: 7 + 30).
    let twice = "\tsetp.lt.u32 %p1, %r9, 7;\n\tbar.red.popc.u32 %r5, 0, %p1;\n\tsetp.lt.u32 %p1, %r9, 30;\n\tbar.red.popc.u32 %r6, 0, %p1;\n\tadd.u32 %r4, %r5, %r6;";
    assert_eq!(run(twice, [0; 3], threads).unwrap(), vec![37; threads as usize]);
    // Per block: two blocks of 32 each count their own threads below 3.
    // (%r9 becomes the global index for the store.)
    let text = module("\tsetp.lt.u32 %p1, %r9, 3;\n\tbar.red.popc.u32 %r4, 0, %p1;\n\tmov.u32 %r5, %ctaid.x;\n\tmad.lo.u32 %r9, %r5, 32, %r9;");
    let words = run_words(&text, [0; 3], 2, 32).unwrap();
    assert_eq!(&words[3..], &[3; 64]);
}

#[test]
fn bar_red_is_a_barrier_divergence_and_thread_counts_are_checked_as_bar_sync() {
    // Only thread 0 reaches the bar.red: the others exit, as at a divergent bar.sync.
    let body = "\tsetp.ne.u32 %p1, %r9, 0;\n\t@%p1 bra $L__skip;\n\tbar.red.popc.u32 %r4, 0, %p1;\n$L__skip:";
    let err = run(body, [0; 3], 64).unwrap_err();
    let Error::Emulator(e) = err else {
        panic!("{err}")
    };
    assert!(
        matches!(e.kind, EmuErrorKind::BarrierDivergence { .. }),
        "{e}"
    );
    // Forms outside the subset are refused at decode, naming the instruction.
    for (form, why) in [
        ("bar.red.popc.u32 %r4, 0, 64, %p1;", "thread count"),
        ("bar.red.popc.u32 %r4, 1, %p1;", "named barriers"),
        ("bar.red.and.u32 %r4, 0, %p1;", "bar.red.popc.u32"),
    ] {
        let body = format!("\tsetp.eq.u32 %p1, %r9, 0;\n\t{form}");
        let err = run(&body, [0; 3], 32).unwrap_err().to_string();
        assert!(err.contains(why), "{form}: {err}");
    }
}

/// Two 16-bit lanes in one register: `lo` is the first element (bits 0-15).
fn pack(lo: u16, hi: u16) -> u32 {
    u32::from(lo) | (u32::from(hi) << 16)
}

fn h(x: f32) -> u16 {
    half::f16::from_f32(x).to_bits()
}

fn hb(x: f32) -> u16 {
    half::bf16::from_f32(x).to_bits()
}

#[test]
fn packed_half_arithmetic_is_lane_wise_and_rounded_once() {
    // PTX ISA, "Half Precision Floating-Point Instructions" (add, sub, mul, fma): each half of
    // the registers independently, rounded to nearest even. Expectations: f32 arithmetic on each
    // lane (exact for these operands) rounded with `half`, or f64 with the reference's rounding.
    let two = |op: &str, a: [f32; 2], b: [f32; 2]| {
        eval(
            &format!("\t{op} %r4, %r1, %r2;"),
            pack(h(a[0]), h(a[1])),
            pack(h(b[0]), h(b[1])),
            0,
        )
    };
    assert_eq!(
        two("add.rn.f16x2", [1.0, 2.5], [0.5, -0.25]),
        pack(h(1.5), h(2.25))
    );
    // 2048 + 1 is a tie between 2048 and 2050: to even. The default rounding is .rn.
    assert_eq!(two("add.f16x2", [2048.0, 2048.0], [1.0, 3.0]), pack(h(2049.0), h(2051.0)));
    assert_eq!(h(2049.0), h(2048.0));
    assert_eq!(
        two("sub.rn.f16x2", [1.0, -3.0], [0.25, 1.0]),
        pack(h(1.0 - 0.25), h(-3.0 - 1.0))
    );
    // 300 * 300 overflows f16 (max 65504) to infinity.
    assert_eq!(two("mul.rn.f16x2", [3.0, 300.0], [1.5, 300.0]), pack(h(4.5), 0x7c00));
    // inf - inf in the high lane only: the canonical NaN there, the low lane untouched.
    let inf = pack(h(1.0), 0x7c00);
    assert_eq!(eval("\tsub.rn.f16x2 %r4, %r1, %r2;", inf, inf, 0), pack(0, 0x7fff));

    // fma: one rounding of a * b + c. (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20; with c = 2^-11 - 2^-20
    // the sum is the midpoint of 1 + 2^-9 and 1 + 3 * 2^-10 (to even, 0x3c02); with c = 2^-11 -
    // 2^-21 it is just above it (up, 0x3c03).
    let a = 1.0 + 2f64.powi(-10);
    let c_tie = 2f64.powi(-11) - 2f64.powi(-20);
    let c_up = 2f64.powi(-11) - 2f64.powi(-21);
    let want = |c: f64| host::reference::f16_nearest(a * a + c).to_bits();
    assert_eq!((want(c_tie), want(c_up)), (0x3c02, 0x3c03));
    let ha = h(a as f32);
    let fma = eval(
        "\tfma.rn.f16x2 %r4, %r1, %r2, %r3;",
        pack(ha, ha),
        pack(ha, ha),
        pack(h(c_tie as f32), h(c_up as f32)),
    );
    assert_eq!(fma, pack(want(c_tie), want(c_up)));
    assert_eq!(
        eval(
            "\tfma.rn.f16x2 %r4, %r1, %r2, %r3;",
            pack(h(1.5), h(-2.0)),
            pack(h(2.0), h(0.5)),
            pack(h(0.25), h(4.0)),
        ),
        pack(h(1.5f32.mul_add(2.0, 0.25)), h((-2.0f32).mul_add(0.5, 4.0)))
    );

    // bf16x2: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 (to even, 1); 3 * 3 = 9.
    let b2 = |op: &str, a: [f32; 2], b: [f32; 2]| {
        eval(
            &format!("\t{op} %r4, %r1, %r2;"),
            pack(hb(a[0]), hb(a[1])),
            pack(hb(b[0]), hb(b[1])),
            0,
        )
    };
    let eighth = 2f32.powi(-8);
    assert_eq!(
        b2("add.rn.bf16x2", [1.0, 1.0], [eighth, 3.0 * eighth]),
        pack(hb(1.0 + eighth), hb(1.0 + 3.0 * eighth))
    );
    assert_eq!(hb(1.0 + eighth), hb(1.0));
    assert_eq!(b2("mul.rn.bf16x2", [3.0, -0.5], [3.0, 6.0]), pack(hb(9.0), hb(-3.0)));
    assert_eq!(b2("sub.rn.bf16x2", [1.0, 0.0], [2.0, 0.0]), pack(hb(-1.0), 0));
    assert_eq!(
        eval(
            "\tfma.rn.bf16x2 %r4, %r1, %r2, %r3;",
            pack(hb(2.0), hb(1.5)),
            pack(hb(3.0), hb(-4.0)),
            pack(hb(0.5), hb(1.0)),
        ),
        pack(hb(6.5), hb(-5.0))
    );
}

#[test]
fn packed_half_ftz_sat_and_relu() {
    // .ftz: a subnormal f16 (exponent field 0) input or result is a sign-preserving zero.
    let tiny = 0x0001; // 2^-24
    // (+0 in the low lane, -0 in the high: -0 + -0 keeps its sign, -0 + +0 would not.)
    let zeros = pack(0, 0x8000);
    assert_eq!(eval("\tadd.rn.f16x2 %r4, %r1, %r2;", pack(tiny, 0x8001), zeros, 0), pack(tiny, 0x8001));
    assert_eq!(eval("\tadd.rn.ftz.f16x2 %r4, %r1, %r2;", pack(tiny, 0x8001), zeros, 0), pack(0, 0x8000));
    // 2^-14 (the smallest normal) * 0.5 is subnormal, 0x0200.
    let min_normal = 0x0400;
    let half_lane = pack(h(0.5), h(0.5));
    assert_eq!(eval("\tmul.rn.f16x2 %r4, %r1, %r2;", pack(min_normal, min_normal), half_lane, 0), pack(0x0200, 0x0200));
    assert_eq!(eval("\tmul.rn.ftz.f16x2 %r4, %r1, %r2;", pack(min_normal, min_normal), half_lane, 0), 0);
    // .sat: clamped to [0, 1], NaN to +0.
    let sat = |a: u32, b: u32| eval("\tadd.rn.sat.f16x2 %r4, %r1, %r2;", a, b, 0);
    assert_eq!(sat(pack(h(0.75), h(-1.0)), pack(h(0.5), h(0.5))), pack(h(1.0), 0));
    assert_eq!(sat(pack(h(0.25), 0x7c00), pack(h(0.5), 0xfc00)), pack(h(0.75), 0));
    // A negative fma result clamps to +0 however small; one above 1 to 1.
    let fma_sat = eval(
        "\tfma.rn.sat.f16x2 %r4, %r1, %r2, %r3;",
        pack(0x8001, h(1.0)),
        pack(h(1.0), h(1.0)),
        pack(0, 0x0001),
    );
    assert_eq!(fma_sat, pack(0, h(1.0)));
    // .relu (fma only): a negative result is +0, a NaN the canonical NaN.
    let relu = |a: u32, b: u32, c: u32| eval("\tfma.rn.relu.f16x2 %r4, %r1, %r2, %r3;", a, b, c);
    assert_eq!(relu(pack(h(1.0), h(1.0)), pack(h(-2.0), h(2.0)), pack(h(0.5), h(0.5))), pack(0, h(2.5)));
    assert_eq!(relu(pack(0x7c00, h(1.0)), pack(0, h(1.0)), 0), pack(0x7fff, h(1.0)));
    let brelu = eval(
        "\tfma.rn.relu.bf16x2 %r4, %r1, %r2, %r3;",
        pack(hb(1.0), hb(1.0)),
        pack(hb(-2.0), hb(2.0)),
        0,
    );
    assert_eq!(brelu, pack(0, hb(2.0)));
    // Forms the ISA does not have are refused at decode.
    for form in [
        "add.rz.f16x2 %r4, %r1, %r2;",
        "add.rn.ftz.bf16x2 %r4, %r1, %r2;",
        "add.rn.relu.f16x2 %r4, %r1, %r2;",
    ] {
        let err = run(&format!("\t{form}"), [0; 3], 1).unwrap_err().to_string();
        assert!(err.contains("packed half"), "{form}: {err}");
    }
}

#[test]
fn prmt_named_modes_follow_the_isa_table() {
    // PTX ISA, "prmt": with a mode, c[1:0] picks a row of the mode's table, which names the
    // source byte of {b, a} (a bytes 0-3, b bytes 4-7) for result bytes 0, 1, 2, 3. Written
    // here from the table, low result byte first; other bits of c are ignored.
    let table: [(&str, [[u64; 4]; 4]); 6] = [
        ("f4e", [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]]),
        ("b4e", [[0, 7, 6, 5], [1, 0, 7, 6], [2, 1, 0, 7], [3, 2, 1, 0]]),
        ("rc8", [[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]]),
        ("ecl", [[0, 1, 2, 3], [1, 1, 2, 3], [2, 2, 2, 3], [3, 3, 3, 3]]),
        ("ecr", [[0, 0, 0, 0], [0, 1, 1, 1], [0, 1, 2, 2], [0, 1, 2, 3]]),
        ("rc16", [[0, 1, 0, 1], [2, 3, 2, 3], [0, 1, 0, 1], [2, 3, 2, 3]]),
    ];
    // Bytes with their sign bits set (0x8N): a mode must copy them, never sign-extend.
    let (a, b) = (0x8382_8180u32, 0x8786_8584u32);
    let source = (u64::from(b) << 32) | u64::from(a);
    for (mode, rows) in table {
        for (sel, row) in rows.iter().enumerate() {
            let want = row
                .iter()
                .enumerate()
                .fold(0u32, |v, (k, &src)| v | ((((source >> (8 * src)) & 0xff) as u32) << (8 * k)));
            let c = 0xfff0 | sel as u32;
            let got = eval(&format!("\tprmt.b32.{mode} %r4, %r1, %r2, %r3;"), a, b, c);
            assert_eq!(got, want, "prmt.b32.{mode} with c[1:0] = {sel}: {got:#x}");
        }
    }
    let err = run("\tprmt.b32.xyz %r4, %r1, %r2, %r3;", [0; 3], 1).unwrap_err().to_string();
    assert!(err.contains("unknown prmt form"), "{err}");
}

/// An instruction rustc inlined from Rust's own library (its `.loc` names a file under the
/// toolchain's `lib/rustlib/src/rust/library/`, with no `inlined_at`) is reported at the
/// kernel's own line nearest before it: here the out-of-bounds load inside `ptr::read` at line
/// 7 of the kernel's file, not at `core`'s line 1721.
#[test]
fn an_access_inlined_from_rusts_library_is_reported_at_the_kernels_own_line() {
    let files = "\t.file\t1 \"/toolchain/lib/rustlib/src/rust/library/core/src/ptr/mod.rs\"\n\
                 \t.file\t2 \"/src/kernels/src/mine.rs\"\n";
    let body = "\t.loc\t2 7 5\n\tadd.s64 %rd4, %rd1, 4096;\n\t.loc\t1 1721 9\n\tld.global.b32 %r4, [%rd4];";
    let text = with_funcs(files, body);
    let err = run_words(&text, [0; 3], 1, 1).unwrap_err().to_string();
    assert!(err.contains("mine.rs:7") && !err.contains("ptr/mod.rs"), "{err}");
}
