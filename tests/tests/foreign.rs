//! Foreign PTX: CUDA C kernels written to the project's entry names and parameter lists
//! (`tests/foreign/cuda/`), compiled by NVIDIA's NVRTC at six option levels
//! (`tests/foreign/generate.py`; the PTX is committed in `tests/foreign/ptx/`, so this test needs
//! no NVRTC), run on the PTX backend against the project's CPU references and counters, and with
//! bugs planted in them reported as the emulator reports them in the project's own kernels.

use emu::{EmuErrorKind, LaunchCounters, MemorySpace};
use host::ops::gemm::{self, Epilogue, GemmKernel, GemmOperands, GemmShape};
use host::ops::softmax::{RowStats, Variant as Softmax};
use host::ops::transpose::{self, Variant};
use host::ops::{elementwise, softmax};
use host::runtime::{Backend, param};
use host::{LaunchConfig, Runtime, reference};
use ptx::exec::Program;

/// NVRTC's option levels, as `generate.py` names the files.
const LEVELS: [&str; 6] = ["default", "G", "lineinfo", "fastmath", "nofma", "Ofc"];

/// The committed PTX of `source` at `level`.
fn fixture(source: &str, level: &str) -> &'static str {
    let path = format!(
        "{}/foreign/ptx/{source}.{level}.ptx",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    Box::leak(text.into_boxed_str())
}

/// The PTX backend on `text` (every entry of it decodes: nothing in the corpus is refused).
fn runtime(what: &str, text: &'static str) -> Runtime {
    let program = Program::load(text, what.to_string()).unwrap_or_else(|e| panic!("{what}: {e}"));
    for (name, kernel) in program.entries() {
        if let Err(why) = kernel {
            panic!("{what}: {name} is refused: {why}");
        }
    }
    Runtime::ptx(program)
}

fn counters(launched: host::runtime::Launched) -> LaunchCounters {
    launched.expect("an emulated launch reports its counters")
}

/// The counters of the memory the kernels move: global and shared bytes.
fn traffic(c: &LaunchCounters) -> [u64; 4] {
    [
        c.global_read_bytes,
        c.global_write_bytes,
        c.shared_read_bytes,
        c.shared_write_bytes,
    ]
}

fn vector_add(rt: &Runtime, n: usize) -> host::Result<(Vec<f32>, LaunchCounters)> {
    let a = reference::uniform(n, 1, -1.0, 1.0);
    let b = reference::uniform(n, 2, -1.0, 1.0);
    let (da, db) = (rt.upload(&a)?, rt.upload(&b)?);
    let mut dc = rt.alloc::<f32>(n)?;
    let c = counters(elementwise::vector_add_f32(rt, &da, &db, &mut dc)?);
    Ok((rt.download(&dc)?, c))
}

#[test]
fn vector_add_at_every_level_matches_the_reference_and_the_projects_counters() {
    let n = 1000;
    let (_, ours) = vector_add(&Runtime::emulator(), n).unwrap();
    let want = reference::vector_add_f32(
        &reference::uniform(n, 1, -1.0, 1.0),
        &reference::uniform(n, 2, -1.0, 1.0),
    );
    for level in LEVELS {
        let rt = runtime(level, fixture("elementwise", level));
        let (got, c) = vector_add(&rt, n).unwrap();
        assert_eq!(got, want, "{level}");
        assert_eq!(traffic(&c), traffic(&ours), "{level}");
        assert_eq!(c.threads, ours.threads, "{level}");
    }
}

fn transpose_run(
    rt: &Runtime,
    rows: usize,
    cols: usize,
) -> host::Result<(Vec<f32>, LaunchCounters)> {
    let x = reference::uniform(rows * cols, 3, -1.0, 1.0);
    let dx = rt.upload(&x)?;
    let mut dy = rt.alloc::<f32>(rows * cols)?;
    let c = counters(transpose::transpose(
        rt,
        Variant::Padded,
        &dx,
        rows,
        cols,
        &mut dy,
    )?);
    Ok((rt.download(&dy)?, c))
}

#[test]
fn transpose_through_a_shared_tile_declared_in_the_kernel() {
    let (rows, cols) = (70, 45);
    let (want, ours) = transpose_run(&Runtime::emulator(), rows, cols).unwrap();
    assert_eq!(
        want,
        reference::transpose(&reference::uniform(rows * cols, 3, -1.0, 1.0), rows, cols)
    );
    for level in LEVELS {
        let rt = runtime(level, fixture("transpose", level));
        let (got, c) = transpose_run(&rt, rows, cols).unwrap();
        assert_eq!(got, want, "{level}");
        assert_eq!(traffic(&c), traffic(&ours), "{level}");
        assert_eq!(c.barriers, ours.barriers, "{level}");
    }
}

#[test]
fn naive_softmax_with_precise_and_fast_exponentials() {
    let (rows, cols) = (5, 700);
    let x = reference::uniform(rows * cols, 4, -4.0, 4.0);
    let want = reference::softmax_f32(&x, cols);
    let cost = softmax::naive_cost(rows, cols, 4);
    for level in LEVELS {
        let rt = runtime(level, fixture("softmax", level));
        let dx = rt.upload(&x).unwrap();
        let mut dy = rt.alloc::<f32>(rows * cols).unwrap();
        let mut stats = RowStats::new(&rt, rows).unwrap();
        let launched = Softmax::Naive.run(&rt, &dx, &mut dy, &mut stats, rows, cols);
        let c = counters(launched.unwrap_or_else(|e| panic!("{level}: {e}")));
        let got = rt.download(&dy).unwrap();
        // Precise expf is within 2 ulp; -use_fast_math's ex2.approx.ftz and div.approx within
        // 2^-21 or so of each value, all below 1.
        let err = reference::max_abs_diff(&got, &want);
        assert!(err <= 2e-6, "{level}: max |error| {err}");
        // The bytes are the project's cost model's: three reads and one write of the matrix and
        // the rows' statistics.
        assert_eq!(
            (c.global_read_bytes, c.global_write_bytes),
            (cost.bytes_read, cost.bytes_written),
            "{level}"
        );
    }
}

/// `kernel` of `rt` on a random A, B and C (values its element type represents), accumulating
/// into C: C, the reference, and what the launch counted.
fn gemm_run(
    rt: &Runtime,
    kernel: GemmKernel,
    shape: GemmShape,
) -> (Vec<f32>, Vec<reference::GemmEntry>, LaunchCounters) {
    let GemmShape { m, n, k } = shape;
    let input = |len, seed| -> Vec<f32> {
        reference::uniform(len, seed, -1.0, 1.0)
            .into_iter()
            .map(|x| kernel.representable(x))
            .collect()
    };
    let (a, b, c0) = (input(m * k, 6), input(k * n, 7), input(m * n, 8));
    let operands = GemmOperands::upload(rt, kernel, &a, &b).unwrap();
    let mut c = rt.upload(&c0).unwrap();
    let launched = gemm::gemm(rt, kernel, &operands, &mut c, shape, Epilogue::Accumulate);
    let counted = counters(launched.unwrap_or_else(|e| panic!("{kernel:?}: {e}")));
    let want = reference::gemm(&a, &b, Some(&c0), (m, n, k));
    (rt.download(&c).unwrap(), want, counted)
}

/// The tiled f32 GEMM (its tiles in function-scope shared memory) and a tensor-core GEMM whose
/// every product is an inline `mma.sync.m16n8k16` with fragments gathered from global memory as
/// the PTX ISA lays them out: written from the ISA's tables, independently of the project's
/// fragment helpers and of the emulator's, so a layout both got wrong the same way fails here.
/// Edges in every dimension (K = 40 is not a multiple of the mma's 16).
#[test]
fn gemm_tiled_and_on_inline_mma_at_every_level() {
    let shape = GemmShape::new(70, 48, 40);
    let (_, _, ours) = gemm_run(&Runtime::emulator(), GemmKernel::Tiled, shape);
    for level in LEVELS {
        let rt = runtime(level, fixture("gemm", level));
        for kernel in [GemmKernel::Tiled, GemmKernel::TensorCoreBf16] {
            let (got, want, c) = gemm_run(&rt, kernel, shape);
            // GemmKernel::error_bound: K + 1 roundings of an f32 chain, twice that for the
            // tensor cores' unspecified order of accumulation.
            let (err, tol) = (
                reference::gemm_error(&got, &want),
                kernel.error_bound(shape.k),
            );
            assert!(
                err <= tol,
                "{level} {kernel:?}: error {err:e}, tolerance {tol:e}"
            );
            if kernel == GemmKernel::Tiled {
                // The same tiles as the project's kernel: the same global and shared bytes.
                assert_eq!(traffic(&c), traffic(&ours), "{level}");
                assert_eq!(c.barriers, ours.barriers, "{level}");
            } else {
                // Gathered from global memory (no shared tiles): every element of A and B
                // read by the mma's fragments, C read and written once.
                assert_eq!(c.shared_read_bytes + c.shared_write_bytes, 0, "{level}");
                assert_eq!(c.global_write_bytes, (shape.m * shape.n * 4) as u64);
                // One block of 8 warps, each 16 mma (4 x 4 tiles of 16 x 8) per 16 of K, 3
                // steps for K = 40: 384 warp-wide m16n8k16, 2 * 16 * 8 * 16 FLOPs each.
                assert_eq!(c.mma_flops, 8 * 16 * 3 * 2 * 16 * 8 * 16, "{level}");
            }
        }
    }
}

/// Launches entry `name` of `rt`'s PTX program with pointer and u32 arguments.
fn launch(
    rt: &Runtime,
    name: &'static str,
    cfg: LaunchConfig,
    ptrs: &[usize],
    n: u32,
) -> host::Result<LaunchCounters> {
    let Backend::Ptx(device) = rt.backend() else {
        unreachable!()
    };
    let mut params: Vec<*mut std::ffi::c_void> = ptrs.iter().map(param).collect();
    params.push(param(&n));
    let mut sizes = vec![8; ptrs.len()];
    sizes.push(4);
    // SAFETY: each pointer argument is 8 bytes and points into a live buffer of the runtime,
    // of the length the kernel reads (the emulator checks every access anyway); n is 4 bytes.
    unsafe { device.launch(name, &cfg, &params, &sizes) }
}

/// Bytes in [0, 256) of a deterministic pseudo-random stream, `n` of them as u32 words.
fn bytes(n: usize) -> Vec<u32> {
    reference::uniform(n / 4, 5, 0.0, 1.0)
        .iter()
        .map(|x| (x * 4_294_967_000.0) as u32)
        .collect()
}

#[test]
fn histogram_with_shared_and_global_atomics() {
    let n = 4 * 3000;
    let words = bytes(n);
    let mut want = vec![0u32; 256];
    for w in &words {
        for k in 0..4 {
            want[((w >> (8 * k)) & 0xff) as usize] += 1;
        }
    }
    let (blocks, threads) = (4u32, 256u32);
    // Per block, the bins it adds to the global ones (a global atomic each, 4 bytes read and
    // written): a grid-stride loop gives block b the words b * 256 + t + k * 1024.
    let mut atomics = 0u64;
    for b in 0..blocks as usize {
        let mut bins = [false; 256];
        for (i, w) in words.iter().enumerate() {
            if i / threads as usize % blocks as usize == b {
                for k in 0..4 {
                    bins[((w >> (8 * k)) & 0xff) as usize] = true;
                }
            }
        }
        atomics += bins.iter().filter(|&&x| x).count() as u64;
    }
    for level in LEVELS {
        let rt = runtime(level, fixture("histogram", level));
        let data = rt.upload(&words).unwrap();
        let out = rt.upload(&[0u32; 256]).unwrap();
        let cfg = LaunchConfig::linear(blocks, threads);
        let ptrs = [data.ptr().addr(), out.ptr().addr()];
        let c = launch(&rt, "histogram_u8", cfg, &ptrs, n as u32)
            .unwrap_or_else(|e| panic!("{level}: {e}"));
        assert_eq!(rt.download(&out).unwrap(), want, "{level}");
        assert_eq!(c.global_read_bytes, n as u64 + 4 * atomics, "{level}");
        assert_eq!(c.global_write_bytes, 4 * atomics, "{level}");
        assert_eq!(c.barriers, 2 * u64::from(blocks), "{level}");
    }
}

#[test]
fn warp_votes_and_reductions_count_and_sum() {
    let n = 1000;
    let data: Vec<i32> = reference::uniform(n, 6, -50.0, 50.0)
        .iter()
        .map(|&x| x as i32)
        .collect();
    let positive = data.iter().filter(|&&v| v > 0);
    let want = [
        positive.clone().count() as u32,
        positive.map(|&v| v as u32).sum::<u32>(),
    ];
    let (blocks, threads) = (4u32, 256u32);
    let warps = u64::from(blocks * threads / 32);
    for level in LEVELS {
        let rt = runtime(level, fixture("reduce", level));
        let d = rt.upload(&data).unwrap();
        let out = rt.upload(&[0u32; 2]).unwrap();
        let ptrs = [d.ptr().addr(), out.ptr().addr()];
        let cfg = LaunchConfig::linear(blocks, threads);
        let c = launch(&rt, "count_sum_u32", cfg, &ptrs, n as u32)
            .unwrap_or_else(|e| panic!("{level}: {e}"));
        assert_eq!(rt.download(&out).unwrap(), want, "{level}");
        // activemask, the ballot and the reduction: three per warp; two atomics per warp.
        assert_eq!(c.warp_collectives, 3 * warps, "{level}");
        assert_eq!(c.global_read_bytes, 4 * n as u64 + 2 * 4 * warps, "{level}");
        assert_eq!(c.global_write_bytes, 2 * 4 * warps, "{level}");
    }
}

/// `text` with the first occurrence of `from` replaced by `to` (which must exist).
fn plant(text: &str, from: &str, to: &str) -> &'static str {
    assert!(text.contains(from), "`{from}` is not in the PTX");
    Box::leak(text.replacen(from, to, 1).into_boxed_str())
}

#[test]
fn planted_bugs_are_reported_as_in_the_projects_kernels() {
    // A store one element past the end: out of bounds, naming the buffer and the distance.
    let text = plant(
        fixture("elementwise", "default"),
        "st.global.f32 \t[%rd10], %f3;",
        "st.global.f32 \t[%rd10+4], %f3;",
    );
    let err = suite::emu_error(vector_add(&runtime("past-end", text), 1000));
    let EmuErrorKind::OutOfBounds { space, near, .. } = &err.kind else {
        panic!("{err}")
    };
    assert_eq!(*space, MemorySpace::Global, "{err}");
    let near = near.expect("the buffer it overran");
    assert_eq!((near.bytes, near.past_end), (4000, 0), "{err}");
    assert!(
        err.to_string()
            .contains("0 bytes past the end of the buffer of 1000 x f32"),
        "{err}"
    );
    // The same at a size the emulator maps from the kernel (1 MiB and up), where buffers used
    // to sit back to back and the store landed in the next one as a race.
    let err = suite::emu_error(vector_add(&runtime("past-end", text), 1 << 18));
    let EmuErrorKind::OutOfBounds { near, .. } = &err.kind else {
        panic!("{err}")
    };
    assert_eq!(near.map(|o| o.past_end), Some(0), "{err}");
    // The transpose without its barrier: a shared-memory race on the tile.
    let text = plant(fixture("transpose", "default"), "bar.sync \t0;", "");
    let err = suite::emu_error(transpose_run(&runtime("no-barrier", text), 70, 45));
    assert!(matches!(err.kind, EmuErrorKind::SharedRace { .. }), "{err}");
    // A barrier only the threads with an element reach: divergence in the last block.
    let text = plant(
        fixture("elementwise", "default"),
        "cvta.to.global.u64 \t%rd4, %rd1;",
        "bar.sync 0;\n\tcvta.to.global.u64 \t%rd4, %rd1;",
    );
    let err = suite::emu_error(vector_add(&runtime("divergent-barrier", text), 1000));
    assert!(
        matches!(err.kind, EmuErrorKind::BarrierDivergence { .. }),
        "{err}"
    );
    // The histogram's global atomic made a plain store: blocks race on the bins.
    let histogram = fixture("histogram", "default");
    let line = histogram
        .lines()
        .find(|l| l.contains("atom.global.add.u32"))
        .expect("the global atomic");
    let operands: Vec<&str> = line.split_whitespace().skip(2).collect();
    let store = format!("st.global.u32 \t{} {}", operands[0], operands[1]);
    let text = plant(histogram, line.trim(), &store);
    let rt = runtime("racy-histogram", text);
    let words = bytes(4 * 3000);
    let data = rt.upload(&words).unwrap();
    let out = rt.upload(&[0u32; 256]).unwrap();
    let ptrs = [data.ptr().addr(), out.ptr().addr()];
    let err = suite::emu_error(launch(
        &rt,
        "histogram_u8",
        LaunchConfig::linear(4, 256),
        &ptrs,
        4 * 3000,
    ));
    assert!(matches!(err.kind, EmuErrorKind::GlobalRace { .. }), "{err}");
}

/// The example of docs/own-kernels.md (`tests/foreign/cuda/reverse.cu`) through the safe API,
/// `host::foreign`, at every option level: the kernel without its barrier is a shared-memory
/// race between two warps, the fixed one reverses each block's slice as the CPU does.
#[test]
fn the_chapters_example_through_the_safe_api() {
    use host::foreign::{Arg, Module};
    for level in LEVELS {
        let ptx = fixture("reverse", level).to_string();
        let run = |entry: &str| -> host::Result<Vec<f32>> {
            let module = Module::load(ptx.clone(), "reverse.ptx")?;
            let rt = module.runtime();
            let input: Vec<f32> = (0..512).map(|i| i as f32).collect();
            let (out, inp) = (rt.alloc::<f32>(512)?, rt.upload(&input)?);
            let args = [Arg::buffer(&out), Arg::buffer(&inp)];
            module.launch(entry, &LaunchConfig::linear(2, 256), &args)?;
            rt.download(&out)
        };
        // Each block's 256 elements, last first.
        let expected: Vec<f32> = (0..512)
            .map(|i| (i / 256 * 256 + 255 - i % 256) as f32)
            .collect();
        assert_eq!(run("reverse").unwrap(), expected, "{level}");
        let err = run("reverse_unsynced").unwrap_err().to_string();
        assert!(
            err.contains("data race on shared memory")
                && err.contains("thread (127, 0, 0) read")
                && err.contains("thread (128, 0, 0) write"),
            "{level}: {err}"
        );
    }
}

/// Cooperative groups at every level: a block of tiles of 32 reducing with `cg::reduce`
/// (shuffles), syncing through the group; under -G and -Ofc=max it also takes the address of
/// the driver's reserved shared memory (`%reserved_smem_offset_1`), and under -G syncs through
/// `barrier.sync` on a register.
#[test]
fn cooperative_groups_reduce_at_every_level() {
    use host::foreign::{Arg, Module};
    let n = 1000;
    let input = reference::uniform(n, 9, -1.0, 1.0);
    let (blocks, threads) = (4usize, 256usize);
    let want: Vec<f32> = (0..blocks)
        .map(|b| input.iter().skip(b * threads).take(threads).sum())
        .collect();
    for level in LEVELS {
        let text = fixture("cooperative", level);
        assert_eq!(
            ["G", "Ofc"].contains(&level),
            text.contains("%reserved_smem_offset_1"),
            "{level}: the least optimised builds read the reserved shared memory"
        );
        let module = Module::load(text.to_string(), "cooperative.ptx").unwrap();
        let rt = module.runtime();
        let (out, inp) = (rt.alloc::<f32>(blocks).unwrap(), rt.upload(&input).unwrap());
        let args = [Arg::buffer(&out), Arg::buffer(&inp), Arg::I32(n as i32)];
        let cfg = LaunchConfig::linear(blocks as u32, threads as u32);
        module
            .launch("tile_sums", &cfg, &args)
            .unwrap_or_else(|e| panic!("{level}: {e}"));
        for (got, want) in rt.download(&out).unwrap().iter().zip(&want) {
            // 256 terms of magnitude <= 1 summed in two different orders, in f32.
            assert!((got - want).abs() <= 1e-4, "{level}: {got} against {want}");
        }
    }
}

/// `printf` at every level: the text as C formats it, each call's count of arguments returned
/// to the kernel, the calls in block and thread order.
#[test]
fn printf_prints_as_c_and_returns_its_argument_count() {
    use host::foreign::{Arg, Module};
    for level in LEVELS {
        let module = Module::load(fixture("cooperative", level).to_string(), "say.ptx").unwrap();
        let rt = module.runtime();
        let printed = rt.alloc::<i32>(64).unwrap();
        let args = [Arg::buffer(&printed), Arg::I32(3), Arg::F32(1.5)];
        module
            .launch("say", &LaunchConfig::linear(2, 32), &args)
            .unwrap_or_else(|e| panic!("{level}: {e}"));
        let counts = rt.download(&printed).unwrap();
        assert_eq!(counts[..4], [8, 8, 8, 0], "{level}");
        let out = module.take_printed();
        let lines: Vec<&str> = out.calls.iter().map(|(_, _, t)| t.as_str()).collect();
        assert_eq!(
            lines,
            [
                "thread 0:  1.50 1.500000e+03 1.5|0   |0000|ok|A\n",
                "thread 1:  1.50 1.500000e+03 1.5|1   |00ff|ok|B\n",
                "thread 2:  1.50 1.500000e+03 1.5|2   |01fe|ok|C\n",
            ],
            "{level}"
        );
        assert_eq!(
            out.calls[2].1,
            [2, 0, 0],
            "{level}: thread 2 printed the third line"
        );
    }
}

/// A module whose every thread stores one shared flag (`same` nonzero: all the value 1, else
/// each its `%tid.x`) with no barrier between the stores, then thread 0 copies it out plus 41.
const FLAG_PTX: &str = "
.version 8.0
.target sm_90
.address_size 64

.visible .entry set_flag(.param .u64 out, .param .u32 same)
{
    .reg .pred %p<3>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<3>;
    .shared .align 4 .b8 flag[4];

    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [same];
    mov.u32 %r2, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    selp.b32 %r3, 1, %r2, %p1;
    st.shared.u32 [flag], %r3;
    bar.sync 0;
    setp.ne.u32 %p2, %r2, 0;
    @%p2 bra DONE;
    ld.shared.u32 %r4, [flag];
    add.s32 %r5, %r4, 41;
    cvta.to.global.u64 %rd2, %rd1;
    st.global.u32 [%rd2], %r5;
DONE:
    ret;
}
";

/// The benign race and the shared race check's switch on the PTX backend, where the emulator
/// sees each store before the interpreter writes its bytes.
#[test]
fn same_value_stores_are_a_benign_race_on_the_ptx_backend_and_the_switch_lets_a_race_run() {
    use host::foreign::{Arg, Module};
    let module = Module::load(FLAG_PTX.to_string(), "flag.ptx").unwrap();
    let rt = module.runtime();
    let out = rt.alloc::<u32>(1).unwrap();
    let run = |module: &Module, same: u32| -> host::Result<u32> {
        let args = [Arg::buffer(&out), Arg::U32(same)];
        module.launch("set_flag", &LaunchConfig::linear(1, 64), &args)?;
        Ok(rt.download(&out)?[0])
    };
    let (flag, observed) = module.observe(|m| run(m, 1));
    assert_eq!(flag.unwrap(), 42);
    let benign = observed.benign_races;
    assert_eq!(benign.len(), 1, "{benign:?}");
    assert_eq!(
        (benign[0].first.thread.x, benign[0].second.thread.x),
        (0, 1)
    );
    let err = run(&module, 0).unwrap_err().to_string();
    assert!(err.contains("data race on shared memory"), "{err}");
    let unchecked = module.with_options(|o| o.shared_races = false);
    let args = [Arg::buffer(&out), Arg::U32(0)];
    unchecked
        .launch("set_flag", &LaunchConfig::linear(1, 64), &args)
        .unwrap();
    assert_eq!(rt.download(&out).unwrap()[0], 63 + 41);
}
