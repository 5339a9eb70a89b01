//! `cargo xtask emu-speed`: how fast the emulator runs, every check on.
//!
//! First the two small figures the README quotes (vector add, a small attention head), then the
//! realistic shapes of issue 18: the three GEMM steps at 1024^3, one fused attention head of
//! N = 4096, d = 128 in f32 and bf16, and a 4096 x 4096 softmax. Each prints its wall time on
//! this machine's cores, the simulated GPU threads per second, the checked accesses (global and
//! shared, each bounds-, race-, initialisation- and cp.async-checked and counted) per second,
//! and the wall time per checked access (the whole run's time divided by its accesses, so the
//! arithmetic between accesses is in it too). `KERNELS_BACKEND=ptx` runs the realistic shapes
//! from the kernels' PTX instead of their source.
//!
//! With `--size quick` (and `full`) it first times the small launches every test and exercise is
//! made of (issue 27: `vector_add_f32` 1M, `transpose_shared` 200 x 300 and 1024 x 1024,
//! `softmax_fused_f32` 64 x 1000, `gemm_tiled_f32` 128^3, median of at least three runs) and the
//! fixed cost of a launch apart from any kernel's work: an empty thread body at 1, 64 and 4096
//! blocks of 256 threads, per launch, per block and per thread.
//!
//! Wall time on a shared machine is noisy. For a figure a change can be judged by, count
//! instructions instead, on the `tiny` set with one OS thread (callgrind counts the same total
//! run after run):
//!
//! ```text
//! cargo build --release -p xtask
//! RAYON_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file=target/emu.callgrind \
//!     target/release/xtask emu-speed --size tiny
//! callgrind_annotate target/emu.callgrind | head -40
//! ```
//!
//! (`--size quick --only 'transpose_shared 200'` and the like for one small launch: `--only`
//! matches the kernel name or the name and shape as printed.)

use std::time::Instant;

use emu::LaunchConfig;
use emu::{Emulator, LaunchCounters};
use half::bf16;
use host::bench::Timing;
use host::ops::attention::{self, AttentionParams, AttentionShape, FlashElement};
use host::ops::gemm::{self, Epilogue, GemmKernel, GemmOperands, GemmShape};
use host::ops::softmax;
use host::ops::transpose::{self, Variant};
use host::runtime::Backend;
use host::{Runtime, ops};

use crate::format::duration;

#[derive(clap::Args)]
pub struct EmuSpeedArgs {
    /// Shapes of the realistic set: `full` (issue 18's: GEMM 1024^3, attention N = 4096,
    /// softmax 4096 x 4096), `quick` (GEMM 256^3, attention N = 1024, softmax 1024 x 4096) or
    /// `tiny` (GEMM 128^3, attention N = 256, softmax 128 x 1024: the callgrind workload; skips
    /// the README's two small figures).
    #[arg(long, default_value = "full", value_parser = ["full", "quick", "tiny"])]
    size: String,
    /// Run only the lines whose kernel name, or name and shape as printed ("softmax_fused_f32
    /// 64 x 1000", "empty 4096 blocks"), contains this.
    #[arg(long)]
    only: Option<String>,
    /// Timed runs per realistic shape (the median is printed).
    #[arg(long, default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    runs: usize,
}

/// The realistic set's sizes.
struct Sizes {
    gemm: usize,
    attention_n: usize,
    softmax_rows: usize,
    softmax_cols: usize,
}

impl Sizes {
    fn named(size: &str) -> Self {
        let (gemm, attention_n, softmax_rows, softmax_cols) = match size {
            "full" => (1024, 4096, 4096, 4096),
            "quick" => (256, 1024, 1024, 4096),
            _ => (128, 256, 128, 1024),
        };
        Self {
            gemm,
            attention_n,
            softmax_rows,
            softmax_cols,
        }
    }
}

/// The kernels of the realistic set, in the order they run (for `--only`'s check).
fn realistic() -> [&'static str; 6] {
    [
        GemmKernel::Tiled.name(),
        GemmKernel::RegisterBlocked.name(),
        GemmKernel::TensorCoreBf16.name(),
        "flash_attention_f32_d128",
        "flash_attention_bf16_d128",
        "softmax_fused_f32",
    ]
}

pub fn run(args: &EmuSpeedArgs) -> Result<(), String> {
    // `KERNELS_BACKEND=ptx`: the same shapes from the kernels' PTX, on the same checked memory.
    let ptx = crate::options::ptx_requested("emu-speed", false)?;
    let sizes = Sizes::named(&args.size);
    if let Some(only) = &args.only {
        crate::options::check_names("--only", std::slice::from_ref(only))?;
        // As `wanted` below matches: a kernel's name, or its name and shape as printed.
        let lines = lines(&args.size, &sizes);
        if !lines.iter().any(|(k, shape)| {
            k.contains(only.as_str()) || format!("{k} {shape}").contains(only.as_str())
        }) {
            let printed: Vec<String> = lines.iter().map(|(k, s)| format!("'{k} {s}'")).collect();
            return Err(format!(
                "--only {only} names no kernel of the realistic set or the small launches of --size {}: {}",
                args.size,
                printed.join(", ")
            ));
        }
    }
    if args.size != "tiny" && args.only.is_none() {
        readme_figures()?;
    }
    let (rt, backend) = if ptx {
        let rt = Runtime::ptx_from_env().map_err(|e| e.to_string())?;
        (rt, "PTX backend")
    } else {
        (Runtime::emulator(), "source emulator")
    };
    let wanted = |name: &str, shape: &str| {
        args.only
            .as_deref()
            .is_none_or(|o| name.contains(o) || format!("{name} {shape}").contains(o))
    };
    if args.size != "tiny" {
        small_launches(&rt, backend, &wanted, args.runs.max(3))?;
    }
    println!(
        "\nrealistic shapes ({} set), {backend} on {} OS threads, every check on, {} run(s) each:",
        args.size,
        emu::os_threads(),
        args.runs
    );
    print_header();
    let g = sizes.gemm;
    for kernel in [
        GemmKernel::Tiled,
        GemmKernel::RegisterBlocked,
        GemmKernel::TensorCoreBf16,
    ] {
        if wanted(kernel.name(), &format!("{g}^3")) {
            gemm_speed(&rt, kernel, g, args.runs)?;
        }
    }
    let shape = AttentionShape::new(1, 1, sizes.attention_n, 128);
    let label = attention_label(&shape);
    if wanted("flash_attention_f32_d128", &label) {
        attention_speed(&rt, "flash_attention_f32_d128", &shape, args.runs, |x| x)?;
    }
    if wanted("flash_attention_bf16_d128", &label) {
        attention_speed(
            &rt,
            "flash_attention_bf16_d128",
            &shape,
            args.runs,
            bf16::from_f32,
        )?;
    }
    let (rows, cols) = (sizes.softmax_rows, sizes.softmax_cols);
    if wanted("softmax_fused_f32", &softmax_label(rows, cols)) {
        softmax_speed(&rt, rows, cols, args.runs)?;
    }
    Ok(())
}

/// Every line `--size size` prints, as kernel name and shape: the small launches and the
/// empty ones (but with `tiny`), then the realistic set.
fn lines(size: &str, sizes: &Sizes) -> Vec<(String, String)> {
    let mut lines: Vec<(String, String)> = Vec::new();
    if size != "tiny" {
        for (k, s) in [
            ("vector_add_f32", "1M elements".to_string()),
            ("transpose_shared", "200 x 300".into()),
            ("transpose_shared", "1024 x 1024".into()),
            ("softmax_fused_f32", softmax_label(64, 1000)),
            (GemmKernel::Tiled.name(), "128^3".into()),
            ("empty", "1 block".into()),
            ("empty", "64 blocks".into()),
            ("empty", "4096 blocks".into()),
        ] {
            lines.push((k.to_string(), s));
        }
    }
    let [gemms @ .., a32, a16, softmax] = realistic();
    for k in gemms {
        lines.push((k.to_string(), format!("{}^3", sizes.gemm)));
    }
    let attention = attention_label(&AttentionShape::new(1, 1, sizes.attention_n, 128));
    lines.push((a32.to_string(), attention.clone()));
    lines.push((a16.to_string(), attention));
    lines.push((
        softmax.to_string(),
        softmax_label(sizes.softmax_rows, sizes.softmax_cols),
    ));
    lines
}

/// Times `f` (one launch or a few), and prints its line from the counters of its last run.
fn report(
    kernel: &str,
    shape: String,
    runs: usize,
    mut f: impl FnMut() -> Result<LaunchCounters, String>,
) -> Result<(), String> {
    let mut counters = LaunchCounters::default();
    let t = wall_clock_runs(runs, || {
        counters = f()?;
        Ok(())
    })?;
    let accesses = (counters.global_accesses + counters.shared_accesses) as f64;
    println!(
        "{kernel:<28} {shape:<26} {:>12} {:>14.0} {:>14.1} M {:>9.1} ns",
        duration(t.median),
        counters.threads as f64 / t.median,
        accesses / t.median / 1e6,
        t.median / accesses * 1e9,
    );
    Ok(())
}

fn gemm_speed(rt: &Runtime, kernel: GemmKernel, n: usize, runs: usize) -> Result<(), String> {
    let err = |e: host::Error| e.to_string();
    let shape = GemmShape { m: n, n, k: n };
    let a = host::reference::uniform(n * n, 1, -1.0, 1.0);
    let b = host::reference::uniform(n * n, 2, -1.0, 1.0);
    let operands = GemmOperands::upload(rt, kernel, &a, &b).map_err(err)?;
    let mut c = rt.alloc::<f32>(n * n).map_err(err)?;
    report(kernel.name(), format!("{n}^3"), runs, || {
        gemm::gemm(rt, kernel, &operands, &mut c, shape, Epilogue::Overwrite)
            .map_err(err)?
            .ok_or_else(|| "no launch".to_string())
    })
}

fn attention_speed<T: FlashElement>(
    rt: &Runtime,
    kernel: &str,
    shape: &AttentionShape,
    runs: usize,
    from_f32: fn(f32) -> T,
) -> Result<(), String> {
    let err = |e: host::Error| e.to_string();
    let upload = |n, seed| {
        let x: Vec<T> = host::reference::uniform(n, seed, -1.0, 1.0)
            .into_iter()
            .map(from_f32)
            .collect();
        rt.upload(&x).map_err(err)
    };
    let (q, k, v) = (
        upload(shape.q_elems(), 1)?,
        upload(shape.kv_elems(), 2)?,
        upload(shape.kv_elems(), 3)?,
    );
    let mut o = rt.alloc::<T>(shape.q_elems()).map_err(err)?;
    let mut lse = rt.alloc::<f32>(shape.lse_elems()).map_err(err)?;
    let params = AttentionParams::standard(shape.head_dim, false);
    report(kernel, attention_label(shape), runs, || {
        attention::fused(rt, &q, &k, &v, &mut o, &mut lse, shape, &params)
            .map_err(err)?
            .ok_or_else(|| "no launch".to_string())
    })
}

fn softmax_speed(rt: &Runtime, rows: usize, cols: usize, runs: usize) -> Result<(), String> {
    let err = |e: host::Error| e.to_string();
    let x = rt
        .upload(&host::reference::uniform(rows * cols, 1, -4.0, 4.0))
        .map_err(err)?;
    let mut y = rt.alloc::<f32>(rows * cols).map_err(err)?;
    report("softmax_fused_f32", softmax_label(rows, cols), runs, || {
        softmax::fused(rt, &x, &mut y, rows, cols)
            .map_err(err)?
            .ok_or_else(|| "no launch".to_string())
    })
}

fn attention_label(shape: &AttentionShape) -> String {
    format!("1 head, N = {}, d = {}", shape.n_q, shape.head_dim)
}

fn softmax_label(rows: usize, cols: usize) -> String {
    format!("{rows} x {cols}")
}

/// The small launches of issue 27, at the sizes of its table (`cargo xtask run`'s and the
/// tests' kind of launch: a few ms each, where the fixed cost of a launch and of a block
/// shows), each the median of `runs`; then that fixed cost alone.
fn small_launches(
    rt: &Runtime,
    backend: &str,
    wanted: &dyn Fn(&str, &str) -> bool,
    runs: usize,
) -> Result<(), String> {
    let err = |e: host::Error| e.to_string();
    let launched = |l: host::Result<host::runtime::Launched>| {
        l.map_err(err)?.ok_or_else(|| "no launch".to_string())
    };
    // Printed before the first line `--only` keeps.
    let mut heading = Some(format!(
        "\nsmall launches, {backend} on {} OS threads, every check on, median of {runs} runs:",
        emu::os_threads(),
    ));
    let mut head = || {
        if let Some(h) = heading.take() {
            println!("{h}");
            print_header();
        }
    };
    if wanted("vector_add_f32", "1M elements") {
        head();
        let (a, b, mut c) = vector_add_operands(rt, 1 << 20)?;
        report("vector_add_f32", "1M elements".into(), runs, || {
            launched(ops::elementwise::vector_add_f32(rt, &a, &b, &mut c))
        })?;
    }
    for (rows, cols) in [(200, 300), (1024, 1024)] {
        let shape = format!("{rows} x {cols}");
        if wanted("transpose_shared", &shape) {
            head();
            let input = rt
                .upload(&host::reference::uniform(rows * cols, 1, -1.0, 1.0))
                .map_err(err)?;
            let mut out = rt.alloc::<f32>(rows * cols).map_err(err)?;
            report("transpose_shared", shape, runs, || {
                launched(transpose::transpose(
                    rt,
                    Variant::Shared,
                    &input,
                    rows,
                    cols,
                    &mut out,
                ))
            })?;
        }
    }
    if wanted("softmax_fused_f32", &softmax_label(64, 1000)) {
        head();
        softmax_speed(rt, 64, 1000, runs)?;
    }
    if wanted(GemmKernel::Tiled.name(), "128^3") {
        head();
        gemm_speed(rt, GemmKernel::Tiled, 128, runs)?;
    }
    let emu = match rt.backend() {
        Backend::Emulator(emu) => emu,
        Backend::Ptx(p) => p.emulator(),
        Backend::Cuda(_) => unreachable!("emu-speed runs an emulator"),
    };
    empty_launches(emu, wanted, runs)
}

/// The fixed cost of a launch and of a block: an empty thread body (every block's threads,
/// stacks, arena and checks set up and torn down, nothing run) at 1, 64 and 4096 blocks of
/// [`EMPTY_BLOCK`] threads. Each timed run launches 4096 blocks in all (4096 launches of one
/// block, 64 of 64, one of 4096), so that the one-block figure is not a single microsecond
/// reading; the line gives the median run's time per launch, per block and per thread.
fn empty_launches(
    emu: &Emulator,
    wanted: &dyn Fn(&str, &str) -> bool,
    runs: usize,
) -> Result<(), String> {
    const TOTAL_BLOCKS: u32 = 4096;
    let grid = |blocks: u32| match blocks {
        1 => "1 block".to_string(),
        b => format!("{b} blocks"),
    };
    let grids: Vec<u32> = [1, 64, TOTAL_BLOCKS]
        .into_iter()
        .filter(|&b| wanted("empty", &grid(b)))
        .collect();
    if grids.is_empty() {
        return Ok(());
    }
    println!(
        "\nfixed cost of a launch: an empty thread body, blocks of {EMPTY_BLOCK} threads, {TOTAL_BLOCKS} blocks a run:"
    );
    println!(
        "{:<28} {:<26} {:>12} {:>14} {:>16}",
        "kernel", "grid", "per launch", "per block", "per thread"
    );
    for blocks in grids {
        let cfg = LaunchConfig::linear(blocks, EMPTY_BLOCK);
        let launches = TOTAL_BLOCKS / blocks;
        let t = wall_clock_runs(runs, || {
            for _ in 0..launches {
                emu.launch("empty", &cfg, || {})
                    .map_err(|e| e.to_string())?;
            }
            Ok(())
        })?;
        let launch = t.median / f64::from(launches);
        println!(
            "{:<28} {:<26} {:>12} {:>14} {:>13.1} ns",
            "empty",
            grid(blocks),
            duration(launch),
            duration(launch / f64::from(blocks)),
            launch / f64::from(blocks * EMPTY_BLOCK) * 1e9,
        );
    }
    Ok(())
}

/// Threads per block of the empty launches: the elementwise kernels' block.
const EMPTY_BLOCK: u32 = kernels::elementwise::BLOCK_SIZE;

fn print_header() {
    println!(
        "{:<28} {:<26} {:>12} {:>14} {:>16} {:>12}",
        "kernel", "shape", "wall", "threads/s", "accesses/s", "per access"
    );
}
/// The two small figures the README quotes: a vector add and a small attention head, on the
/// source emulator and the PTX backend, with the global race check on and off.
fn readme_figures() -> Result<(), String> {
    let program = host::embedded::program_from_env().map_err(|e| e.to_string())?;
    for rt in [Runtime::emulator(), Runtime::ptx(program)] {
        let name = match rt.backend() {
            Backend::Ptx(p) => format!("PTX backend ({})", p.program().origin),
            Backend::Emulator(_) => "source emulator".to_string(),
            Backend::Cuda(_) => unreachable!("both runtimes are emulated"),
        };
        for races in [true, false] {
            let rt = rt.with_options(|o| o.global_races = races);
            let on = if races { "on" } else { "off" };
            let backend = format!("{name}, global race check {on}");
            vector_add_speed(&rt, &backend)?;
            attention_head_speed(&rt, &backend)?;
        }
    }
    Ok(())
}

/// Times `f`; on the PTX backend also what one of its runs executed, per second of its median.
fn ptx_rates(
    rt: &Runtime,
    f: impl FnOnce() -> Result<Timing, String>,
) -> Result<(Timing, String), String> {
    let before = match rt.backend() {
        Backend::Ptx(p) => Some(p.executed()),
        _ => None,
    };
    let t = f()?;
    let rates = match (rt.backend(), before) {
        (Backend::Ptx(p), Some((i0, t0))) => {
            let (i1, t1) = p.executed();
            let runs = t.runs as f64;
            let per_run = ((i1 - i0) as f64 / runs, (t1 - t0) as f64 / runs);
            let secs = t.median;
            format!(
                "; {:.0} PTX instructions and {:.0} threads per run: {:.1} M PTX instructions/s, {:.0} threads/s",
                per_run.0,
                per_run.1,
                per_run.0 / secs / 1e6,
                per_run.1 / secs
            )
        }
        _ => String::new(),
    };
    Ok((t, rates))
}

/// `vector_add_f32` of 1M elements: 1M simulated threads.
fn vector_add_speed(rt: &Runtime, backend: &str) -> Result<(), String> {
    let n = 1 << 20;
    let err = |e: host::Error| e.to_string();
    let (a, b, mut c) = vector_add_operands(rt, n)?;
    let (t, rates) = ptx_rates(rt, || {
        wall_clock(|| {
            host::ops::elementwise::vector_add_f32(rt, &a, &b, &mut c)
                .map(|_| ())
                .map_err(err)
        })
    })?;
    println!(
        "{backend}, {} threads: vector_add_f32 of 1M elements (1M simulated GPU threads): median {} over {} runs ({:.1} M threads/s{rates})",
        rayon_threads(),
        duration(t.median),
        t.runs,
        n as f64 / t.median / 1e6
    );
    Ok(())
}

/// `vector_add_f32`'s two inputs and its output.
type VectorAddOperands = (
    host::DeviceBuffer<f32>,
    host::DeviceBuffer<f32>,
    host::DeviceBuffer<f32>,
);

/// `vector_add_f32`'s inputs (uniform in [-1, 1]) and output, `n` elements each.
fn vector_add_operands(rt: &Runtime, n: usize) -> Result<VectorAddOperands, String> {
    let err = |e: host::Error| e.to_string();
    let upload = |seed| rt.upload(&host::reference::uniform(n, seed, -1.0, 1.0));
    Ok((
        upload(1).map_err(err)?,
        upload(2).map_err(err)?,
        rt.alloc::<f32>(n).map_err(err)?,
    ))
}

/// Median wall-clock time of three runs of `f` on the emulator, whose launches are synchronous
/// (on a GPU a wall clock would time only the enqueue: see `host::bench`).
fn wall_clock(f: impl FnMut() -> Result<(), String>) -> Result<Timing, String> {
    wall_clock_runs(3, f)
}

/// Median wall-clock time of `runs` runs of `f` on the emulator.
fn wall_clock_runs(
    runs: usize,
    mut f: impl FnMut() -> Result<(), String>,
) -> Result<Timing, String> {
    let mut samples = Vec::new();
    for _ in 0..runs.max(1) {
        let start = Instant::now();
        f()?;
        samples.push(start.elapsed().as_secs_f64());
    }
    Ok(Timing::from_samples(samples).expect("at least one sample"))
}

/// One attention head through the fused f32 kernel on the emulator: 256 queries over 256 keys,
/// d = 64 (4 blocks of 64 threads, 16 K/V tiles each), median of 3 runs.
fn attention_head_speed(rt: &Runtime, backend: &str) -> Result<(), String> {
    use host::ops::attention::{self, AttentionParams, AttentionShape};
    let shape = AttentionShape::new(1, 1, 256, 64);
    let params = AttentionParams::standard(64, false);
    let upload = |n, seed| rt.upload(&host::reference::uniform(n, seed, -1.0, 1.0));
    let err = |e: host::Error| e.to_string();
    let (q, k, v) = (
        upload(shape.q_elems(), 1).map_err(err)?,
        upload(shape.kv_elems(), 2).map_err(err)?,
        upload(shape.kv_elems(), 3).map_err(err)?,
    );
    let mut o = rt.alloc::<f32>(shape.q_elems()).map_err(err)?;
    let mut lse = rt.alloc::<f32>(shape.lse_elems()).map_err(err)?;
    let (t, rates) = ptx_rates(rt, || {
        wall_clock(|| {
            attention::fused(rt, &q, &k, &v, &mut o, &mut lse, &shape, &params)
                .map(|_| ())
                .map_err(err)
        })
    })?;
    println!(
        "{backend}, {} threads: one attention head (256 queries x 256 keys, d = 64) through flash_attention_f32_d64: median {} over {} runs{rates}",
        rayon_threads(),
        duration(t.median),
        t.runs
    );
    Ok(())
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
