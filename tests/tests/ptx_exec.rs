//! The PTX interpreter instruction by instruction: hand-written modules run through the
//! runtime's PTX backend, each instruction's result against the PTX ISA's definition, and the
//! forms the backend refuses named with their line.

use emu::EmuErrorKind;
use host::embedded::{self, Arch};
use host::runtime::{Backend, param};
use host::{Error, LaunchConfig, Result, Runtime};
use ptx::exec::Program;

/// The ISA's edge cases and the instructions NVIDIA's compiler emits, one test each.
mod isa {
    use super::*;
    include!("ptx_exec/isa.rs");
}

#[test]
fn every_entry_of_every_arch_decodes() {
    for arch in Arch::ALL {
        let program = embedded::program(arch);
        let entries: Vec<_> = program.entries().collect();
        assert_eq!(entries.len(), embedded::entry_points(arch.ptx()).len());
        for (name, kernel) in entries {
            if let Err(why) = kernel {
                panic!("{} {name}: {why}", arch.name());
            }
        }
    }
}

/// A one-entry module: `threads` threads each load words 0..3 of the buffer into %r1..%r3,
/// run `body` (which leaves its result in %r4) and store %r4 at word `3 + tid`.
fn module(body: &str) -> String {
    format!(
        ".version 7.8\n.target sm_90\n.address_size 64\n\
         .visible .entry t(\n\t.param .u64 .ptr .align 1 t_param_0\n)\n{{\n\
         \t.reg .pred %p<4>;\n\t.reg .b16 %rs<4>;\n\t.reg .b32 %r<10>;\n\t.reg .b64 %rd<8>;\n\
         \tld.param.b64 %rd1, [t_param_0];\n\
         \tld.global.b32 %r1, [%rd1];\n\tld.global.b32 %r2, [%rd1+4];\n\tld.global.b32 %r3, [%rd1+8];\n\
         \tmov.u32 %r9, %tid.x;\n\
         {body}\n\
         \tmul.wide.u32 %rd2, %r9, 4;\n\tadd.s64 %rd3, %rd1, %rd2;\n\tst.global.b32 [%rd3+12], %r4;\n\tret;\n}}\n"
    )
}

/// The PTX line a one-line `body` of [`module`] is on.
fn body_line() -> usize {
    module("BODY").lines().position(|l| l == "BODY").unwrap() + 1
}

fn run(body: &str, inputs: [u32; 3], threads: u32) -> Result<Vec<u32>> {
    Ok(run_words(&module(body), inputs, 1, threads)?[3..].to_vec())
}

/// Entry `t` of `text` on a buffer of the three `inputs` and a word per thread of the grid
/// of `blocks` blocks of `threads`: the whole buffer after the launch.
fn run_words(text: &str, inputs: [u32; 3], blocks: u32, threads: u32) -> Result<Vec<u32>> {
    let text: &'static str = Box::leak(text.to_string().into_boxed_str());
    let rt = Runtime::ptx(Program::load(text, "test".into())?);
    let Backend::Ptx(device) = rt.backend() else {
        unreachable!()
    };
    let mut words = vec![0u32; 3 + (blocks * threads) as usize];
    words[..3].copy_from_slice(&inputs);
    let buf = rt.upload(&words)?;
    let ptr = buf.ptr();
    let cfg = LaunchConfig::linear(blocks, threads);
    // SAFETY: one 8-byte pointer argument, to a live buffer of 3 + blocks * threads words.
    unsafe { device.launch("t", &cfg, &[param(&ptr)], &[8]) }?;
    rt.download(&buf)
}

/// `body` on (a, b, c) in one thread: its %r4.
fn eval(body: &str, a: u32, b: u32, c: u32) -> u32 {
    run(body, [a, b, c], 1).unwrap_or_else(|e| panic!("{body}: {e}"))[0]
}

fn f(x: f32) -> u32 {
    x.to_bits()
}

const NAN: u32 = 0x7fc0_0000;
const NEG_ZERO: u32 = 0x8000_0000;

#[test]
fn hopper_forms_the_backend_does_not_model_are_refused_naming_the_line() {
    let refused = [
        (
            "\tsetmaxnreg.inc.sync.aligned.u32 20;",
            "multiple of 8 from 24 to 256",
        ),
        (
            "\twgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%r4, %r5, %r6, %r7}, %rd1, %rd2, %p1, -1, 1, 0, 0;",
            "imm-scale-a",
        ),
        (
            "\twgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%r4, %r5}, %rd1, %rd2, %p1, 1, 1, 0, 0;",
            "takes 4 accumulator registers",
        ),
        (
            "\twgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%r4, %r5, %r6, %r7}, %rd1, %rd2, %p1, 1, 1, 1, 0;",
            "MN-major",
        ),
        (
            "\twgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%r4, %r5, %r6, %r7}, {%r1, %r2, %r3}, %rd2, %p1, 1, 1, 0;",
            "four .b32 registers",
        ),
        (
            "\tmbarrier.test_wait.shared::cta.b64 %p1, [%r1], %rd1;",
            "mbarrier form",
        ),
        (
            "\tcp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%r1], [%rd1, {%r2, %r3}], [%r1], %rs1;",
            "no im2col, multicast",
        ),
        ("\tfence.proxy.alias;", "fence"),
    ];
    let line = format!("PTX line {}", body_line());
    for (body, why) in refused {
        let err = run(body, [0; 3], 1).expect_err(body).to_string();
        assert!(err.contains(&line) && err.contains(why), "{body}: {err}");
    }
}

#[test]
fn a_block_larger_than_the_entrys_maxntid_is_refused() {
    let text = module("\tmov.u32 %r4, %r1;").replace(")\n{", ")\n.maxntid 32, 1, 1\n{");
    let text: &'static str = Box::leak(text.into_boxed_str());
    let program = Program::load(text, "test".into()).unwrap();
    assert_eq!(program.kernel("t").unwrap().maxntid, Some([32, 1, 1]));
    // The warp-specialised step 5 declares its block (rustc's launch_bounds).
    let step5 = embedded::program(Arch::Sm90a).kernel("gemm_wgmma_bf16");
    assert!(step5.unwrap().maxntid.is_some());
    let rt = Runtime::ptx(program);
    let Backend::Ptx(device) = rt.backend() else {
        unreachable!()
    };
    let buf = rt.upload(&[0u32; 3 + 64]).unwrap();
    let ptr = buf.ptr();
    for (threads, ok) in [(32, true), (64, false)] {
        let cfg = LaunchConfig::linear(1, threads);
        // SAFETY: one 8-byte pointer argument, to a live buffer of 3 + 64 words.
        let result = unsafe { device.launch("t", &cfg, &[param(&ptr)], &[8]) };
        match result {
            Ok(_) => assert!(ok, "{threads} threads"),
            Err(e) => {
                assert!(!ok, "{threads} threads: {e}");
                assert!(e.to_string().contains(".maxntid 32, 1, 1"), "{e}");
            }
        }
    }
}

#[test]
fn an_mbarrier_outside_shared_memory_is_the_emulators_error_at_its_line() {
    // Parsed as one instruction (no `shared:` label), executed by the emulator's mbarrier:
    // offset 8 of a launch without shared memory is no barrier.
    let err = run("\tmbarrier.init.shared::cta.b64 [%r1], %r2;", [8, 1, 0], 1).unwrap_err();
    let Error::Emulator(e) = &err else {
        panic!("{err}")
    };
    assert!(matches!(e.kind, EmuErrorKind::Mbarrier { .. }), "{err}");
    let text = err.to_string();
    let line = format!("PTX line {}", body_line());
    assert!(
        text.contains(&line) && text.contains("not in this block's shared memory"),
        "{text}"
    );
}

#[test]
fn min_max_take_the_number_over_a_nan_and_order_minus_zero_first() {
    let max = "\tmax.f32 %r4, %r1, %r2;";
    let min = "\tmin.f32 %r4, %r1, %r2;";
    assert_eq!(eval(max, NAN, f(1.0), 0), f(1.0));
    assert_eq!(eval(max, f(-3.0), NAN, 0), f(-3.0));
    assert!(f32::from_bits(eval(max, NAN, NAN, 0)).is_nan());
    assert_eq!(eval(max, NEG_ZERO, 0, 0), 0);
    assert_eq!(eval(max, 0, NEG_ZERO, 0), 0);
    assert_eq!(eval(min, 0, NEG_ZERO, 0), NEG_ZERO);
    assert_eq!(eval(min, f(2.0), f(-5.0), 0), f(-5.0));
}

#[test]
fn setp_ordered_compares_are_false_on_nan_and_unordered_true() {
    let cmp = |op: &str, a: u32, b: u32| {
        let body = format!("\tsetp.{op}.f32 %p1, %r1, %r2;\n\tselp.u32 %r4, 1, 0, %p1;");
        eval(&body, a, b, 0)
    };
    for op in ["eq", "ne", "lt", "le", "gt", "ge", "num"] {
        assert_eq!(cmp(op, NAN, f(1.0)), 0, "{op}");
    }
    for op in ["equ", "neu", "ltu", "leu", "gtu", "geu", "nan"] {
        assert_eq!(cmp(op, f(1.0), NAN), 1, "{op}");
    }
    assert_eq!(cmp("lt", f(1.0), f(2.0)), 1);
    assert_eq!(cmp("gtu", f(1.0), f(2.0)), 0);
    assert_eq!(cmp("ne", f(1.0), f(2.0)), 1);
    // Signed against unsigned: -1 < 1 as s32, not as u32 (`lo` is the unsigned less-than).
    let int = |ty: &str, op: &str| {
        eval(
            &format!("\tsetp.{op}.{ty} %p1, %r1, %r2;\n\tselp.u32 %r4, 1, 0, %p1;"),
            u32::MAX,
            1,
            0,
        )
    };
    assert_eq!(
        (int("s32", "lt"), int("u32", "lt"), int("s32", "lo")),
        (1, 0, 0)
    );
    // `p|q` and `.and` with a negated third predicate.
    let both = "\tsetp.lt.u32 %p1|%p2, %r1, %r2;\n\tsetp.eq.and.u32 %p3, %r1, %r1, !%p2;\n\tselp.u32 %r4, 1, 0, %p3;";
    assert_eq!(eval(both, 1, 2, 0), 1);
    assert_eq!(eval(both, 2, 1, 0), 0);
}

#[test]
fn conversions_round_to_nearest_even_and_saturate() {
    let bf16 = "\tcvt.rn.bf16.f32 %rs1, %r1;\n\tcvt.u32.u16 %r4, %rs1;";
    // Ties: 1 + 2^-8 lies halfway between bf16 1.0 (0x3f80) and 0x3f81: the even one.
    assert_eq!(eval(bf16, 0x3f80_8000, 0, 0), 0x3f80);
    assert_eq!(eval(bf16, 0x3f81_8000, 0, 0), 0x3f82);
    assert_eq!(eval(bf16, 0x3f80_8001, 0, 0), 0x3f81);
    let f16 = "\tcvt.rn.f16.f32 %rs1, %r1;\n\tcvt.u32.u16 %r4, %rs1;";
    // 65520 is halfway between the largest f16 (65504) and 2^16: even is 2^16, infinity.
    assert_eq!(eval(f16, f(65520.0), 0, 0), 0x7c00);
    assert_eq!(eval(f16, f(65519.0), 0, 0), 0x7bff);
    assert_eq!(eval(f16, f(1.0), 0, 0), 0x3c00);
    let to_int =
        |mode: &str, x: f32| eval(&format!("\tcvt.{mode}.s32.f32 %r4, %r1;"), f(x), 0, 0) as i32;
    assert_eq!(to_int("rzi", -2.7), -2);
    assert_eq!(to_int("rni", 2.5), 2);
    assert_eq!(to_int("rni", 3.5), 4);
    assert_eq!(to_int("rmi", -2.1), -3);
    assert_eq!(to_int("rpi", 2.1), 3);
    assert_eq!(to_int("rzi", 3e9), i32::MAX);
    assert_eq!(to_int("rzi", -3e9), i32::MIN);
    assert_eq!(to_int("rzi", f32::NAN), 0);
    assert_eq!(eval("\tcvt.rzi.u32.f32 %r4, %r1;", f(-5.0), 0, 0), 0);
    // Integer widening by the source type's signedness; narrowing wraps, or clamps with .sat.
    let wide = "\tcvt.s64.s32 %rd4, %r1;\n\tshr.u64 %rd5, %rd4, 32;\n\tcvt.u32.u64 %r4, %rd5;";
    assert_eq!(eval(wide, u32::MAX, 0, 0), u32::MAX);
    assert_eq!(
        eval(
            "\tcvt.u16.u32 %rs1, %r1;\n\tcvt.u32.u16 %r4, %rs1;",
            0x12345,
            0,
            0
        ),
        0x2345
    );
    assert_eq!(
        eval(
            "\tcvt.sat.u16.u32 %rs1, %r1;\n\tcvt.u32.u16 %r4, %rs1;",
            0x12345,
            0,
            0
        ),
        0xffff
    );
    assert_eq!(
        eval("\tcvt.rn.f32.s32 %r4, %r1;", (-7i32) as u32, 0, 0),
        f(-7.0)
    );
}

#[test]
fn integer_shifts_clamp_and_fields_extend() {
    assert_eq!(
        eval("\tshr.s32 %r4, %r1, %r2;", (-8i32) as u32, 40, 0),
        u32::MAX
    );
    assert_eq!(eval("\tshr.u32 %r4, %r1, %r2;", 0x8000_0000, 40, 0), 0);
    assert_eq!(
        eval("\tshr.s32 %r4, %r1, %r2;", (-8i32) as u32, 1, 0),
        (-4i32) as u32
    );
    assert_eq!(eval("\tshl.b32 %r4, %r1, %r2;", 1, 32, 0), 0);
    assert_eq!(eval("\tshl.b32 %r4, %r1, %r2;", 1, 31, 0), 0x8000_0000);
    assert_eq!(eval("\tbfe.u32 %r4, %r1, %r2, %r3;", 0xf0f0, 4, 8), 0x0f);
    assert_eq!(
        eval("\tbfe.s32 %r4, %r1, %r2, %r3;", 0x80, 4, 4),
        (-8i32) as u32
    );
    assert_eq!(eval("\tbfe.u32 %r4, %r1, %r2, %r3;", 0xffff_ffff, 40, 8), 0);
    assert_eq!(
        eval("\tmul.hi.u32 %r4, %r1, %r2;", u32::MAX, u32::MAX, 0),
        0xffff_fffe
    );
    assert_eq!(
        eval(
            "\tmul.hi.s32 %r4, %r1, %r2;",
            (-2i32) as u32,
            0x4000_0000,
            0
        ),
        u32::MAX
    );
    let wide =
        "\tmul.wide.s32 %rd4, %r1, %r2;\n\tshr.u64 %rd5, %rd4, 32;\n\tcvt.u32.u64 %r4, %rd5;";
    assert_eq!(eval(wide, (-1i32) as u32, 2, 0), u32::MAX);
    assert_eq!(eval("\tmad.lo.s32 %r4, %r1, %r2, %r3;", 3, 4, 5), 17);
    assert_eq!(
        eval("\tdiv.s32 %r4, %r1, %r2;", (-7i32) as u32, 2, 0),
        (-3i32) as u32
    );
    assert_eq!(
        eval("\trem.s32 %r4, %r1, %r2;", (-7i32) as u32, 2, 0),
        (-1i32) as u32
    );
    assert_eq!(eval("\tmin.s32 %r4, %r1, %r2;", u32::MAX, 1, 0), u32::MAX);
    assert_eq!(eval("\tmin.u32 %r4, %r1, %r2;", u32::MAX, 1, 0), 1);
}

#[test]
fn integer_division_by_zero_is_reported() {
    let err = run("\tdiv.u32 %r4, %r1, %r2;", [1, 0, 0], 1).unwrap_err();
    let Error::Emulator(e) = err else {
        panic!("{err}")
    };
    let EmuErrorKind::Panic { message, .. } = &e.kind else {
        panic!("{e}")
    };
    assert!(
        message.contains("division by zero") && message.contains("div.u32"),
        "{e}"
    );
}

#[test]
fn float_flush_saturation_and_special_functions() {
    let tiny = 0x0000_0001; // the smallest subnormal
    assert_eq!(eval("\tadd.ftz.f32 %r4, %r1, %r2;", tiny, 0, 0), 0);
    assert_eq!(eval("\tadd.f32 %r4, %r1, %r2;", tiny, 0, 0), tiny);
    assert_eq!(
        eval("\tadd.sat.f32 %r4, %r1, %r2;", f(0.7), f(0.7), 0),
        f(1.0)
    );
    assert_eq!(eval("\tadd.sat.f32 %r4, %r1, %r2;", NAN, 0, 0), 0);
    assert_eq!(
        eval(
            "\tfma.rn.f32 %r4, %r1, %r2, %r3;",
            f(3.0),
            f(1.0 / 3.0),
            f(-1.0)
        ),
        f(3.0f32.mul_add(1.0 / 3.0, -1.0))
    );
    assert_eq!(eval("\trcp.rn.f32 %r4, %r1;", f(3.0), 0, 0), 0x3eaa_aaab);
    let ex2 = "\tex2.approx.ftz.f32 %r4, %r1;";
    assert_eq!(eval(ex2, f(3.0), 0, 0), f(8.0));
    // 2^-127 is subnormal: flushed to +0.
    assert_eq!(eval(ex2, f(-127.0), 0, 0), 0);
    assert_eq!(eval(ex2, f(f32::NEG_INFINITY), 0, 0), 0);
    assert_eq!(eval(ex2, f(f32::INFINITY), 0, 0), f(f32::INFINITY));
    // Within the ISA's 2^-22 relative error of the exact 2^x, on a spread of inputs.
    for k in -200..200 {
        let x = k as f32 * 0.37;
        let got = f32::from_bits(eval(ex2, f(x), 0, 0)) as f64;
        let exact = (x as f64).exp2();
        assert!(
            ((got - exact) / exact).abs() <= 2f64.powi(-22),
            "ex2({x}) = {got}"
        );
    }
    let lg2 = "\tlg2.approx.ftz.f32 %r4, %r1;";
    assert_eq!(eval(lg2, tiny, 0, 0), f(f32::NEG_INFINITY));
    assert_eq!(eval(lg2, 0, 0, 0), f(f32::NEG_INFINITY));
    assert!(f32::from_bits(eval(lg2, f(-1.0), 0, 0)).is_nan());
    assert_eq!(eval(lg2, f(8.0), 0, 0), f(3.0));
}

/// Two arms of `if (tid.x == 0)`, each ending in a barrier of the given form.
fn two_barriers(form: &str) -> String {
    format!(
        "\tsetp.ne.b32 %p1, %r9, 0;\n\t@%p1 bra $L__else;\n\tmov.u32 %r4, 1;\n\t{form};\n\tbra.uni $L__end;\n$L__else:\n\tmov.u32 %r4, 2;\n\t{form};\n$L__end:"
    )
}

/// `body` of [`module`] on one block of `threads`: the words the threads stored, and what the
/// launch observed.
fn run_observed(body: &str, threads: u32) -> Result<(Vec<u32>, emu::Observed)> {
    let text: &'static str = Box::leak(module(body).into_boxed_str());
    let rt = Runtime::ptx(Program::load(text, "test".into())?);
    let Backend::Ptx(device) = rt.backend() else {
        unreachable!()
    };
    let buf = rt.upload(&vec![0u32; 3 + threads as usize])?;
    let ptr = buf.ptr();
    let cfg = LaunchConfig::linear(1, threads);
    // SAFETY: one 8-byte pointer argument, to a live buffer of 3 + threads words.
    let (_, observed) =
        unsafe { device.launch_with("t", &cfg, &[param(&ptr)], &[8], &rt.options()) }?;
    Ok((rt.download(&buf)?[3..].to_vec(), observed))
}

#[test]
fn a_barrier_counts_arrivals_by_id_and_an_aligned_one_at_two_instructions_is_warned_about() {
    // PTX ISA, "bar, barrier": a barrier releases once its thread count (here the block) has
    // arrived, whichever instruction each thread executed. For the non-aligned
    // `barrier.sync` that is defined (sm_70 and later); `bar.sync` is
    // `barrier.sync.aligned`, undefined unless every thread executes the same instruction:
    // the block runs, with a warning that names both lines.
    for form in ["barrier.sync 0", "bar.sync 0", "barrier.sync.aligned 0"] {
        let text = module(&two_barriers(form));
        let (out, observed) = run_observed(&two_barriers(form), 64).unwrap();
        assert_eq!(out[0], 1, "{form}");
        assert!(out[1..].iter().all(|&w| w == 2), "{form}");
        let found = &observed.divergent_barriers;
        if form == "barrier.sync 0" {
            assert!(found.is_empty(), "{form}: {found:?}");
            continue;
        }
        let lines: Vec<u32> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| l.contains(form))
            .map(|(n, _)| n as u32 + 1)
            .collect();
        assert_eq!(found.len(), 1, "{form}: {found:?}");
        let line = |site: kernels::cuda::emu::Site| {
            let kernels::cuda::emu::SiteKind::Ptx(at) = site.kind() else {
                panic!("{form}: {site}")
            };
            at.line
        };
        let (first, second) = (found[0].first, found[0].second);
        assert_eq!((first.0.x, line(first.1)), (0, lines[0]), "{form}");
        assert_eq!((second.0.x, line(second.1)), (1, lines[1]), "{form}");
    }
}

#[test]
fn shuffles_follow_the_isa_lanes() {
    // Each lane offers tid * 10; `down 1` reads lane + 1, the last lane keeps its own and its
    // predicate is false.
    let body = "\tmul.lo.s32 %r5, %r9, 10;\n\tshfl.sync.down.b32 %r6|%p1, %r5, 1, 0x1f, -1;\n\tselp.u32 %r7, 1000, 0, %p1;\n\tadd.s32 %r4, %r6, %r7;";
    let out = run(body, [0; 3], 32).unwrap();
    for (lane, &w) in out.iter().enumerate() {
        let want = if lane < 31 {
            (lane as u32 + 1) * 10 + 1000
        } else {
            310
        };
        assert_eq!(w, want, "lane {lane}");
    }
    let bfly = "\tshfl.sync.bfly.b32 %r4, %r9, 5, 0x1f, -1;";
    let out = run(bfly, [0; 3], 32).unwrap();
    assert!(out.iter().enumerate().all(|(l, &w)| w == l as u32 ^ 5));
}
