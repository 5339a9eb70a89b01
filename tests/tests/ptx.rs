//! The PTX backend against the source emulator, kernel by kernel, and on hand-made PTX bugs.
//!
//! Differential tests: every entry point of the module runs on both backends with the same
//! inputs (shapes that are not tile multiples). Both do the same arithmetic: the PTX's `fma.rn`,
//! `add.rn`, `mul.rn` are the IEEE operations the host does for the source's `fma`, `+`, `*`;
//! `ex2.approx.ftz`/`lg2.approx.ftz` are computed by the PTX backend with the same libm `exp2`
//! and `log2` (plus the same flush) that the source's `exp2_approx`/`log2_approx` call on the
//! host; `cvt.rn.bf16.f32`/`cvt.rn.f16.f32` and the source's `from_f32` both round to nearest
//! even; and `mma` is completed by the one implementation in the emulator. So outputs must be
//! bit-identical, and so must the counted global and shared bytes, barriers and warp collectives.
//! (A GPU's `ex2.approx` may differ from both by its stated 2^-22 relative error; the reference
//! tests' tolerances cover that.) FLOPs are not compared for equality: the PTX backend counts
//! executed FP instructions, the source emulator the kernels' `count_flops` marks.
//!
//! Hand-made bugs: a PTX file (the code path of `KERNELS_PTX`) with a store moved one element
//! past the end of its buffer, and one with a barrier under `if (tid == 0)`, each reported with
//! its PTX line.

use std::path::PathBuf;

use emu::{EmuErrorKind, LaunchCounters, MemorySpace};
use half::{bf16, f16};
use host::embedded::Arch;
use host::ops::attention::{
    self, AttentionParams, AttentionShape, FlashElement, FusedOp, NaiveWorkspace,
};
use host::ops::gemm::{self, Epilogue, GemmKernel, GemmOperands, GemmShape};
use host::ops::softmax::{RowStats, SoftmaxElement, Variant as Softmax};
use host::ops::{elementwise, hierarchy, transpose};
use host::runtime::Launched;
use host::{Element, Runtime, reference};
use kernels::cuda::emu::SiteKind;
use ptx::exec::Program;

/// What one run of an op gives: its output, as bits, and what the launches counted.
type Run = (Vec<u64>, LaunchCounters);

fn add(total: &mut LaunchCounters, launched: Launched) {
    total.add(&launched.expect("an emulated launch reports its counters"));
}

/// Bits of a downloaded buffer, for exact comparison (NaN payloads included).
trait Bits: Element {
    fn bits(self) -> u64;
}
impl Bits for f32 {
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
}
impl Bits for bf16 {
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
}
impl Bits for f16 {
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
}
impl Bits for u32 {
    fn bits(self) -> u64 {
        u64::from(self)
    }
}

fn bits<T: Bits>(rt: &Runtime, buf: &host::DeviceBuffer<T>) -> Vec<u64> {
    rt.download(buf)
        .unwrap()
        .into_iter()
        .map(Bits::bits)
        .collect()
}

/// Runs `op` on the source emulator and on the PTX backend (`arch`), and checks that outputs
/// and counters agree.
#[track_caller]
fn same(what: &str, arch: Arch, op: impl Fn(&Runtime) -> host::Result<Run>) {
    let source = op(&Runtime::emulator()).unwrap_or_else(|e| panic!("{what} (source): {e}"));
    let ptx = op(&Runtime::ptx(host::embedded::program(arch)))
        .unwrap_or_else(|e| panic!("{what} ({}): {e}", arch.name()));
    let (s, p) = (&source.1, &ptx.1);
    let first_diff = source.0.iter().zip(&ptx.0).position(|(a, b)| a != b);
    assert_eq!(source.0.len(), ptx.0.len(), "{what}: output lengths differ");
    assert!(
        first_diff.is_none(),
        "{what} on {}: outputs differ first at element {} ({:#x} from the source, {:#x} from the PTX)",
        arch.name(),
        first_diff.unwrap(),
        source.0[first_diff.unwrap()],
        ptx.0[first_diff.unwrap()]
    );
    let counted = |c: &LaunchCounters| {
        (
            c.global_read_bytes,
            c.global_write_bytes,
            c.shared_read_bytes,
            c.shared_write_bytes,
            c.barriers,
            c.warp_collectives,
        )
    };
    assert_eq!(
        counted(s),
        counted(p),
        "{what} on {}: (global read, global written, shared read, shared written, barriers, warp collectives)",
        arch.name()
    );
    assert!(
        p.flops >= s.flops,
        "{what}: the PTX executed {} FLOPs, fewer than the {} the source marks",
        p.flops,
        s.flops
    );
}

#[test]
fn elementwise_copy_and_strided_copy() {
    let n = 1000 + 3;
    let a = reference::uniform(n, 1, -1.0, 1.0);
    let b = reference::uniform(n, 2, -1.0, 1.0);
    same("vector_add_f32", Arch::Sm90, |rt| {
        let (da, db, mut dc) = (rt.upload(&a)?, rt.upload(&b)?, rt.alloc::<f32>(n)?);
        let mut c = LaunchCounters::default();
        add(&mut c, elementwise::vector_add_f32(rt, &da, &db, &mut dc)?);
        Ok((bits(rt, &dc), c))
    });
    let to_f16 = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
    let (ah, bh) = (to_f16(&a), to_f16(&b));
    same("vector_add_f16", Arch::Sm90, |rt| {
        let (da, db, mut dc) = (rt.upload(&ah)?, rt.upload(&bh)?, rt.alloc::<f16>(n)?);
        let mut c = LaunchCounters::default();
        add(&mut c, elementwise::vector_add_f16(rt, &da, &db, &mut dc)?);
        Ok((bits(rt, &dc), c))
    });
    let words: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    same("copy_words", Arch::Sm90, |rt| {
        let (src, mut dst) = (rt.upload(&words)?, rt.alloc::<u32>(n)?);
        let mut c = LaunchCounters::default();
        add(&mut c, elementwise::copy(rt, &src, &mut dst)?);
        Ok((bits(rt, &dst), c))
    });
    same("copy_strided", Arch::Sm90, |rt| {
        let (src, mut dst) = (rt.upload(&a)?, rt.alloc::<f32>(n / 3)?);
        let mut c = LaunchCounters::default();
        add(&mut c, transpose::copy_strided(rt, &src, 3, &mut dst)?);
        Ok((bits(rt, &dst), c))
    });
}

#[test]
fn transposes() {
    let (rows, cols) = (45, 70);
    let x = reference::uniform(rows * cols, 3, -1.0, 1.0);
    for variant in [
        transpose::Variant::Naive,
        transpose::Variant::Shared,
        transpose::Variant::Padded,
    ] {
        same(variant.kernel(), Arch::Sm90, |rt| {
            let (input, mut out) = (rt.upload(&x)?, rt.alloc::<f32>(rows * cols)?);
            let mut c = LaunchCounters::default();
            add(
                &mut c,
                transpose::transpose(rt, variant, &input, rows, cols, &mut out)?,
            );
            Ok((bits(rt, &out), c))
        });
    }
}

/// Softmax in `T`: rows with -inf, large values, and (tall) rows longer than the fused kernel
/// keeps on chip.
fn softmax<T: SoftmaxElement + Bits>(from: fn(f32) -> T) {
    for (rows, cols) in [(3, 300), (2, 5000)] {
        let mut x: Vec<f32> = reference::uniform(rows * cols, 4, -30.0, 30.0);
        x[7] = f32::NEG_INFINITY;
        let x: Vec<T> = x.into_iter().map(from).collect();
        for variant in Softmax::ALL {
            let what = format!("softmax {} {rows}x{cols}", variant.name());
            let run = |rt: &Runtime| -> host::Result<Run> {
                let (dx, mut y) = (rt.upload(&x)?, rt.alloc::<T>(rows * cols)?);
                let mut stats = RowStats::new(rt, rows)?;
                let mut c = LaunchCounters::default();
                add(
                    &mut c,
                    variant.run(rt, &dx, &mut y, &mut stats, rows, cols)?,
                );
                Ok((bits(rt, &y), c))
            };
            same(&what, Arch::Sm90, run);
        }
    }
}

#[test]
fn softmax_f32() {
    softmax::<f32>(|x| x);
}

#[test]
fn softmax_bf16() {
    softmax::<bf16>(bf16::from_f32);
}

/// `C = A B + C` by `kernel` on `rt`, with operands in [-1, 1) drawn from `seed`.
fn gemm_run(rt: &Runtime, kernel: GemmKernel, shape: GemmShape, seed: u64) -> host::Result<Run> {
    let a = reference::uniform(shape.m * shape.k, seed, -1.0, 1.0);
    let b = reference::uniform(shape.k * shape.n, seed + 1, -1.0, 1.0);
    let c0 = reference::uniform(shape.m * shape.n, seed + 2, -1.0, 1.0);
    let operands = GemmOperands::upload(rt, kernel, &a, &b)?;
    let mut out = rt.upload(&c0)?;
    let mut c = LaunchCounters::default();
    add(
        &mut c,
        gemm::gemm(rt, kernel, &operands, &mut out, shape, Epilogue::Accumulate)?,
    );
    Ok((bits(rt, &out), c))
}

#[test]
fn gemms_on_sm80_and_sm90() {
    // Not tile multiples; N and K multiples of 8, as the tensor-core kernels require.
    let shape = GemmShape::new(37, 48, 72);
    // Step 5 is sm_90a's alone (`gemm_step_5_on_sm90a`).
    for kernel in GemmKernel::ALL.into_iter().filter(|k| !k.is_wgmma()) {
        let arches: &[Arch] = if kernel.is_tensor_core() {
            &[Arch::Sm80, Arch::Sm90]
        } else {
            &[Arch::Sm90]
        };
        for &arch in arches {
            same(kernel.name(), arch, |rt| gemm_run(rt, kernel, shape, 5));
        }
    }
}

#[test]
fn gemm_step_5_on_sm90a() {
    // Two M tiles of 128, a partial N tile of 256 and a partial K tile of 64: the TMA's
    // zero-fill, the mbarrier pipeline's wrap and both consumer warpgroups are exercised.
    let shape = GemmShape::new(130, 72, 80);
    for kernel in [GemmKernel::WgmmaBf16, GemmKernel::WgmmaF16] {
        same(kernel.name(), Arch::Sm90a, |rt| {
            gemm_run(rt, kernel, shape, 8)
        });
    }
}

#[test]
fn step_5_is_refused_on_the_sm80_and_sm90_modules() {
    let shape = GemmShape::new(64, 64, 64);
    let a = vec![1.0f32; shape.m * shape.k];
    for arch in [Arch::Sm80, Arch::Sm90] {
        let rt = Runtime::ptx(host::embedded::program(arch));
        let kernel = GemmKernel::WgmmaBf16;
        assert!(!kernel.runs_on(&rt), "{}", arch.name());
        let operands = GemmOperands::upload(&rt, kernel, &a, &a).unwrap();
        let mut out = rt.alloc::<f32>(shape.m * shape.n).unwrap();
        let err = gemm::gemm(&rt, kernel, &operands, &mut out, shape, Epilogue::Overwrite)
            .expect_err("step 5 on a module without wgmma");
        assert!(err.to_string().contains("KERNELS_PTX_ARCH=sm_90a"), "{err}");
    }
}

#[test]
fn a_wgmma_without_its_mbarrier_wait_is_reported_at_its_ptx_line() {
    // gemm_wgmma_bf16 with the consumers' wait on the "full" barrier replaced by a predicate
    // that says the phase completed: the wgmma reads a TMA box whose phase it never observed.
    let ptx = Arch::Sm90a.ptx();
    let start = ptx.find(".entry gemm_wgmma_bf16(").unwrap();
    let consumers = start + ptx[start..].find("setmaxnreg.inc").unwrap();
    let wait = consumers + ptx[consumers..].find("mbarrier.try_wait.parity").unwrap();
    let end = wait + ptx[wait..].find(';').unwrap();
    let edited = format!("{}setp.ne.b32 p, 1, 0{}", &ptx[..wait], &ptx[end..]);
    let wgmma = wait + ptx[wait..].find("wgmma.mma_async").unwrap();
    let line = ptx[..wgmma].lines().count() as u32;
    let err = wgmma_gemm_error("wgmma-without-wait", &edited);
    let EmuErrorKind::TmaInFlight { by, phase, .. } = &err.kind else {
        panic!("{err}")
    };
    assert_eq!(*phase, 0, "{err}");
    let SiteKind::Ptx(site) = by.site.kind() else {
        panic!("{err}")
    };
    assert_eq!(
        (site.function, site.line),
        ("gemm_wgmma_bf16", line),
        "{err}"
    );
    assert!(site.text.contains("wgmma.mma_async"), "{err}");
}

/// The shared pieces of the hand-edited step-5 tests: `edited` (gemm_wgmma_bf16's PTX with one
/// change) run on a 64 x 64 x 64 GEMM, which must fail with an emulator error.
fn wgmma_gemm_error(name: &str, edited: &str) -> emu::EmuError {
    let rt = Runtime::ptx(ptx_file(name, edited));
    let kernel = GemmKernel::WgmmaBf16;
    let shape = GemmShape::new(64, 64, 64);
    let a = reference::uniform(shape.m * shape.k, 11, -1.0, 1.0);
    let operands = GemmOperands::upload(&rt, kernel, &a, &a).unwrap();
    let mut out = rt.alloc::<f32>(shape.m * shape.n).unwrap();
    suite::emu_error(gemm::gemm(
        &rt,
        kernel,
        &operands,
        &mut out,
        shape,
        Epilogue::Overwrite,
    ))
}

#[test]
fn a_phase_that_expects_bytes_no_copy_brings_is_a_deadlock_at_the_ptx_waits() {
    // The producer announces 64 KiB, more than one stage's copies bring: the "full" phase never
    // completes, and every consumer waits on it.
    let ptx = Arch::Sm90a.ptx();
    let start = ptx.find(".entry gemm_wgmma_bf16(").unwrap();
    let expect = start + ptx[start..].find("mbarrier.arrive.expect_tx").unwrap();
    let bytes = expect + ptx[expect..].find(';').unwrap();
    let operand = ptx[..bytes].rfind(' ').unwrap() + 1;
    let edited = format!("{}65536{}", &ptx[..operand], &ptx[bytes..]);
    let err = wgmma_gemm_error("expect-tx-too-many", &edited);
    let EmuErrorKind::MbarrierDeadlock { waiting, .. } = &err.kind else {
        panic!("{err}")
    };
    let consumers = start + ptx[start..].find("setmaxnreg.inc").unwrap();
    let wait = consumers + ptx[consumers..].find("mbarrier.try_wait.parity").unwrap();
    let wait_line = ptx[..wait].lines().count() as u32;
    assert!(!waiting.is_empty(), "{err}");
    for (thread, site, _) in waiting {
        let SiteKind::Ptx(site) = site.kind() else {
            panic!("{err}")
        };
        assert!(thread.x >= 128, "{err}");
        assert_eq!(site.line, wait_line, "{err}");
    }
}

#[test]
fn accumulators_read_before_their_wait_group_are_reported_at_their_ptx_line() {
    // gemm_wgmma_bf16 with its last `wait_group 0` made `wait_group 1`: the epilogue reads
    // accumulator registers that the newest group may still be writing.
    let ptx = Arch::Sm90a.ptx();
    let start = ptx.find(".entry gemm_wgmma_bf16(").unwrap();
    let needle = "wgmma.wait_group.sync.aligned 0";
    let wait = start + ptx[start..].find(needle).unwrap();
    let edited = format!(
        "{}wgmma.wait_group.sync.aligned 1{}",
        &ptx[..wait],
        &ptx[wait + needle.len()..]
    );
    let wait_line = ptx[..wait].lines().count() as u32;
    let err = wgmma_gemm_error("read-before-wait-group", &edited);
    let EmuErrorKind::WgmmaAccumulatorInFlight { site, wgmma, .. } = &err.kind else {
        panic!("{err}")
    };
    let (SiteKind::Ptx(read), SiteKind::Ptx(wgmma)) = (site.kind(), wgmma.kind()) else {
        panic!("{err}")
    };
    assert!(read.line > wait_line, "{err}");
    assert!(wgmma.text.contains("wgmma.mma_async"), "{err}");
    assert!(
        err.to_string().contains(&format!("PTX line {}", read.line)),
        "{err}"
    );
}

#[test]
fn naive_attention_both_head_dims() {
    for (d, causal) in [(64, false), (128, true)] {
        let shape = AttentionShape::new(1, 2, 37, d).with_n_kv(45);
        let params = AttentionParams::standard(d, causal);
        let q = reference::uniform(shape.q_elems(), 8, -2.0, 2.0);
        let k = reference::uniform(shape.kv_elems(), 9, -2.0, 2.0);
        let v = reference::uniform(shape.kv_elems(), 10, -1.0, 1.0);
        // The softmax in the middle is the fused one: no issue-12 kernel.
        same(&format!("naive attention d{d}"), Arch::Sm90, |rt| {
            let (dq, dk, dv) = (rt.upload(&q)?, rt.upload(&k)?, rt.upload(&v)?);
            let mut o = rt.alloc::<f32>(shape.q_elems())?;
            let mut ws = NaiveWorkspace::new(rt, &shape)?;
            let mut c = LaunchCounters::default();
            add(
                &mut c,
                attention::naive(rt, &dq, &dk, &dv, &mut o, &mut ws, &shape, &params)?,
            );
            let mut out = bits(rt, &o);
            out.extend(bits(rt, &ws.s));
            Ok((out, c))
        });
    }
}

/// `op` on both backends (`arch`), two heads of `n_q` queries over `n_kv` keys, causal at
/// d = 64 and not at d = 128; Q, K, V rounded to `T` by `from`. O and LSE compared bit for bit.
fn fused_attention_both<T: Bits>(
    what: &str,
    op: FusedOp<T>,
    from: fn(f32) -> T,
    arch: Arch,
    (n_q, n_kv, seed): (usize, usize, u64),
) {
    for (d, causal) in [(64, true), (128, false)] {
        let shape = AttentionShape::new(1, 2, n_q, d).with_n_kv(n_kv);
        let params = AttentionParams::standard(d, causal);
        let round = |v: Vec<f32>| v.into_iter().map(from).collect::<Vec<T>>();
        let q = round(reference::uniform(shape.q_elems(), seed, -2.0, 2.0));
        let k = round(reference::uniform(shape.kv_elems(), seed + 1, -2.0, 2.0));
        let v = round(reference::uniform(shape.kv_elems(), seed + 2, -1.0, 1.0));
        let what = format!("{what} {} d{d}", std::any::type_name::<T>());
        same(&what, arch, |rt| {
            let (dq, dk, dv) = (rt.upload(&q)?, rt.upload(&k)?, rt.upload(&v)?);
            let mut o = rt.alloc::<T>(shape.q_elems())?;
            let mut lse = rt.alloc::<f32>(shape.lse_elems())?;
            let mut c = LaunchCounters::default();
            add(
                &mut c,
                op(rt, &dq, &dk, &dv, &mut o, &mut lse, &shape, &params)?,
            );
            let mut out = bits(rt, &o);
            out.extend(bits(rt, &lse));
            Ok((out, c))
        });
    }
}

fn fused_attention<T: FlashElement + Bits>(from: fn(f32) -> T, arch: Arch) {
    fused_attention_both(
        "fused attention",
        attention::fused::<T>,
        from,
        arch,
        (37, 70, 11),
    );
}

#[test]
fn fused_attention_f32() {
    fused_attention::<f32>(|x| x, Arch::Sm90);
}

#[test]
fn fused_attention_bf16_on_sm90a() {
    fused_attention::<bf16>(bf16::from_f32, Arch::Sm90a);
}

#[test]
fn fused_attention_f16_on_sm80() {
    fused_attention::<f16>(f16::from_f32, Arch::Sm80);
}

/// Attention on wgmma (sm_90a alone): two heads of 150 queries over 300 keys, so that both
/// query blocks run, the two-stage K/V ring wraps (three key tiles) and every tile edge is
/// zero-filled by the TMA. P reaches `O += P V` through the register form of `wgmma`, which the
/// PTX backend decodes from the kernel's own PTX.
fn wgmma_attention<T: attention::WgmmaFlashElement + Bits>(from: fn(f32) -> T) {
    let op = attention::fused_wgmma::<T>;
    fused_attention_both("wgmma attention", op, from, Arch::Sm90a, (150, 300, 21));
}

#[test]
fn wgmma_attention_bf16_on_sm90a() {
    wgmma_attention::<bf16>(bf16::from_f32);
}

#[test]
fn wgmma_attention_f16_on_sm90a() {
    wgmma_attention::<f16>(f16::from_f32);
}

#[test]
fn a_write_of_p_between_wgmma_fence_and_its_wgmma_is_reported() {
    // flash_attention_wgmma_bf16_d64 with one more write of P's first register (the A fragment
    // of `O += P V`) just before the first wgmma that reads it from registers: the ISA wants a
    // wgmma.fence between an ordinary access of those registers and the wgmma.
    let ptx = Arch::Sm90a.ptx();
    let start = ptx.find(".entry flash_attention_wgmma_bf16_d64(").unwrap();
    let body = &ptx[start..];
    let (offset, a0) = body
        .lines()
        .scan(0, |at, l| {
            let here = *at;
            *at += l.len() + 1;
            Some((here, l))
        })
        .find_map(|(at, l)| {
            let rs = l.contains("wgmma.mma_async") && l.contains("}, {%r");
            let a = l.split("}, {").nth(1)?.split(',').next()?;
            rs.then(|| (at, a.to_string()))
        })
        .expect("attention's P V wgmma takes A from registers");
    let wgmma = start + offset;
    let edited = format!(
        "{}\tmov.b32 \t{a0}, {a0};\n{}",
        &ptx[..wgmma],
        &ptx[wgmma..]
    );
    let wgmma_line = ptx[..wgmma].lines().count() as u32 + 2;
    let rt = Runtime::ptx(ptx_file("write-p-after-fence", &edited));
    let shape = AttentionShape::new(1, 1, 64, 64);
    let input = |seed| {
        reference::uniform(shape.q_elems(), seed, -1.0, 1.0)
            .into_iter()
            .map(bf16::from_f32)
            .collect::<Vec<_>>()
    };
    let (q, k, v) = (
        rt.upload(&input(1)).unwrap(),
        rt.upload(&input(2)).unwrap(),
        rt.upload(&input(3)).unwrap(),
    );
    let mut o = rt.alloc::<bf16>(shape.q_elems()).unwrap();
    let mut lse = rt.alloc::<f32>(shape.lse_elems()).unwrap();
    let params = AttentionParams::standard(64, false);
    let err = suite::emu_error(attention::fused_wgmma(
        &rt, &q, &k, &v, &mut o, &mut lse, &shape, &params,
    ));
    let EmuErrorKind::Wgmma { site, detail, .. } = &err.kind else {
        panic!("{err}")
    };
    assert!(detail.contains("A-fragment registers"), "{err}");
    assert!(detail.contains("no wgmma_fence since"), "{err}");
    let SiteKind::Ptx(site) = site.kind() else {
        panic!("{err}")
    };
    assert_eq!(site.line, wgmma_line, "{err}");
}

#[test]
fn wgmma_attention_is_refused_on_the_sm80_and_sm90_modules() {
    let shape = AttentionShape::new(1, 1, 64, 64);
    for arch in [Arch::Sm80, Arch::Sm90] {
        let rt = Runtime::ptx(host::embedded::program(arch));
        let buf = |n| rt.alloc::<bf16>(n).unwrap();
        let (q, k, v, mut o) = (buf(4096), buf(4096), buf(4096), buf(4096));
        let mut lse = rt.alloc::<f32>(64).unwrap();
        let params = AttentionParams::standard(64, false);
        let err = attention::fused_wgmma(&rt, &q, &k, &v, &mut o, &mut lse, &shape, &params)
            .expect_err("wgmma attention on a module without wgmma");
        assert!(err.to_string().contains("KERNELS_PTX_ARCH=sm_90a"), "{err}");
    }
}

#[test]
fn memory_hierarchy_probes() {
    let words: Vec<u32> = (0..4096u32).map(|i| i.wrapping_mul(0x9e37_79b9)).collect();
    same("stream_read", Arch::Sm90, |rt| {
        let (src, mut out) = (rt.upload(&words)?, rt.alloc::<u32>(1)?);
        let mut c = LaunchCounters::default();
        add(&mut c, hierarchy::stream_read(rt, &src, 2, &mut out)?);
        Ok((bits(rt, &out), c))
    });
    same("shared_read", Arch::Sm90, |rt| {
        let mut out = rt.alloc::<u32>(4)?;
        let mut c = LaunchCounters::default();
        add(&mut c, hierarchy::shared_read(rt, 4, 256, 2, &mut out)?);
        Ok((bits(rt, &out), c))
    });
    // A cycle through 1000 links in a scrambled order.
    let n = 1000u32;
    let chain: Vec<u32> = (0..n).map(|i| (i * 367 + 1) % n).collect();
    let chase = |rt: &Runtime, shared: bool| -> host::Result<Run> {
        let src = rt.upload(&chain)?;
        let (mut end, mut cycles) = (rt.alloc::<u32>(1)?, rt.alloc::<u64>(1)?);
        let mut c = LaunchCounters::default();
        let launched = if shared {
            hierarchy::shared_pointer_chase(rt, &src, 500, &mut end, &mut cycles)?
        } else {
            hierarchy::pointer_chase(rt, &src, 10, 500, &mut end, &mut cycles)?
        };
        add(&mut c, launched);
        Ok((bits(rt, &end), c))
    };
    same("pointer_chase", Arch::Sm90, |rt| chase(rt, false));
    same("shared_pointer_chase", Arch::Sm90, |rt| chase(rt, true));
}

/// `text` written to a file of the test's own, loaded as `KERNELS_PTX` loads it, and the file
/// removed once loaded (the program keeps its text): a test run leaves no PTX behind.
fn ptx_file(name: &str, text: &str) -> &'static Program {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("{name}-{}.ptx", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let program = Program::file(&path);
    std::fs::remove_file(&path).unwrap();
    program.unwrap()
}

/// What `ptx_file` loads stays loaded, and the file it wrote is gone (issue 55: test runs left
/// their PTX in target/tmp).
#[test]
fn a_loaded_test_module_leaves_no_file() {
    let program = ptx_file("leaves-no-file", Arch::Sm90.ptx());
    assert!(program.entries().next().is_some());
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("leaves-no-file-{}.ptx", std::process::id()));
    assert!(!path.exists(), "{} left behind", path.display());
}

/// The 1-based line of the first line of `text` that contains `needle`.
fn line_of(text: &str, needle: &str) -> u32 {
    text.lines()
        .position(|l| l.contains(needle))
        .expect("needle in the PTX") as u32
        + 1
}

#[test]
fn a_store_moved_past_the_end_is_reported_at_its_ptx_line() {
    // vector_add_f32 with its store moved one element on: the last thread writes c[n].
    let ptx = Arch::Sm90.ptx();
    let start = ptx.find(".entry vector_add_f32(").unwrap();
    let store = start + ptx[start..].find("st.global.b32").unwrap();
    let end = store + ptx[store..].find(']').unwrap();
    let edited = format!("{}+4{}", &ptx[..end], &ptx[end..]);
    let line = ptx[..store].lines().count() as u32;
    let rt = Runtime::ptx(ptx_file("store-past-end", &edited));
    let n = 100;
    let a = rt.upload(&vec![1.0f32; n]).unwrap();
    let b = rt.upload(&vec![2.0f32; n]).unwrap();
    let mut c = rt.alloc::<f32>(n).unwrap();
    let err = suite::emu_error(elementwise::vector_add_f32(&rt, &a, &b, &mut c));
    let EmuErrorKind::OutOfBounds {
        space,
        by,
        bytes,
        near,
        ..
    } = &err.kind
    else {
        panic!("{err}")
    };
    assert_eq!((*space, *bytes), (MemorySpace::Global, 4), "{err}");
    // In the red zone after c: the report names it and the distance past its end.
    let near = near.expect("the buffer the store overran");
    assert_eq!(
        (near.start, near.bytes, near.past_end),
        (c.ptr().addr(), 4 * n, 0),
        "{err}"
    );
    assert_eq!(
        by.thread.x as usize + kernels::elementwise::BLOCK_SIZE as usize * err.block.x as usize,
        n - 1,
        "{err}"
    );
    let SiteKind::Ptx(site) = by.site.kind() else {
        panic!("{err}")
    };
    assert_eq!(site.line, line, "{err}");
    assert!(
        err.to_string().contains(&format!("PTX line {line}")),
        "{err}"
    );
}

/// A kernel whose only barrier only thread 0 reaches.
const BARRIER_UNDER_TID0: &str = "\
.version 7.8
.target sm_90
.address_size 64

.visible .entry barrier_under_tid0(
	.param .u64 .ptr .align 1 barrier_under_tid0_param_0
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<3>;
	.reg .b64 	%rd<4>;

	ld.param.b64 	%rd1, [barrier_under_tid0_param_0];
	mov.u32 	%r1, %tid.x;
	setp.ne.b32 	%p1, %r1, 0;
	@%p1 bra 	$L__skip;
	bar.sync 	0;
$L__skip:
	mul.wide.u32 	%rd2, %r1, 4;
	add.s64 	%rd3, %rd1, %rd2;
	st.global.b32 	[%rd3], %r1;
	ret;
}
";

#[test]
fn a_barrier_under_tid_0_is_reported_at_its_ptx_line() {
    let program = ptx_file("barrier-under-tid0", BARRIER_UNDER_TID0);
    let rt = Runtime::ptx(program);
    let out = rt.alloc::<u32>(64).unwrap();
    let host::runtime::Backend::Ptx(device) = rt.backend() else {
        unreachable!()
    };
    let ptr = out.ptr();
    let params = [host::runtime::param(&ptr)];
    let cfg = host::LaunchConfig::linear(1, 64);
    // SAFETY: one pointer argument of 8 bytes, into a live buffer of 64 words.
    let result = unsafe { device.launch("barrier_under_tid0", &cfg, &params, &[8]) };
    let err = suite::emu_error(result);
    let EmuErrorKind::BarrierDivergence { waiting, elsewhere } = &err.kind else {
        panic!("{err}")
    };
    let SiteKind::Ptx(site) = waiting[0].1.kind() else {
        panic!("{err}")
    };
    assert_eq!(waiting.len(), 1, "{err}");
    assert_eq!(waiting[0].0.x, 0, "{err}");
    assert_eq!(site.line, line_of(BARRIER_UNDER_TID0, "bar.sync"), "{err}");
    assert_eq!(site.function, "barrier_under_tid0");
    assert!(
        elsewhere.iter().all(|(_, what)| what == "has exited"),
        "{err}"
    );
}

#[test]
fn launches_that_do_not_match_the_entry_are_refused() {
    let program = ptx_file("barrier-under-tid0-params", BARRIER_UNDER_TID0);
    let rt = Runtime::ptx(program);
    let host::runtime::Backend::Ptx(device) = rt.backend() else {
        unreachable!()
    };
    let cfg = host::LaunchConfig::linear(1, 32);
    let word = 0u32;
    let p = [host::runtime::param(&word)];
    // SAFETY: refused before anything is read through the pointer.
    let wrong_size = unsafe { device.launch("barrier_under_tid0", &cfg, &p, &[4]) };
    let msg = wrong_size.unwrap_err().to_string();
    assert!(
        msg.contains("barrier_under_tid0")
            && msg.contains("parameter 0")
            && msg.contains("8 bytes"),
        "{msg}"
    );
    // SAFETY: as above.
    let wrong_count = unsafe { device.launch("barrier_under_tid0", &cfg, &[], &[]) };
    assert!(
        wrong_count
            .unwrap_err()
            .to_string()
            .contains("takes 1 parameters")
    );
    // SAFETY: as above.
    let missing = unsafe { device.launch("no_such_kernel", &cfg, &p, &[4]) };
    // A module without the entry is older than the kernel: the error says to rebuild.
    let missing = missing.unwrap_err().to_string();
    assert!(
        missing.contains("no entry point `no_such_kernel`") && missing.contains("rebuild it"),
        "{missing}"
    );
}

#[test]
fn an_unimplemented_instruction_is_refused_with_kernel_and_line() {
    let text = BARRIER_UNDER_TID0.replace("mul.wide.u32", "mul24.lo.u32");
    let rt = Runtime::ptx(ptx_file("unimplemented", &text));
    let host::runtime::Backend::Ptx(device) = rt.backend() else {
        unreachable!()
    };
    let out = rt.alloc::<u32>(32).unwrap();
    let ptr = out.ptr();
    let cfg = host::LaunchConfig::linear(1, 32);
    // SAFETY: refused before it runs.
    let err = unsafe {
        device.launch(
            "barrier_under_tid0",
            &cfg,
            &[host::runtime::param(&ptr)],
            &[8],
        )
    };
    let msg = err.unwrap_err().to_string();
    let line = line_of(&text, "mul24");
    assert!(
        msg.contains("barrier_under_tid0")
            && msg.contains(&format!("PTX line {line}"))
            && msg.contains("mul24.lo.u32"),
        "{msg}"
    );
}
