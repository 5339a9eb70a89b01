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

use half::bf16;
use host::Runtime;
use host::emu::LaunchCounters;
use host::ops::attention::{self, AttentionParams, AttentionShape, FlashElement};
use host::ops::gemm::{self, Epilogue, GemmKernel, GemmOperands, GemmShape};
use host::ops::softmax;

use crate::run::{duration, wall_clock_runs};

#[derive(clap::Args)]
pub struct EmuSpeedArgs {
    /// Shapes of the realistic set: `full` (issue 18's: GEMM 1024^3, attention N = 4096,
    /// softmax 4096 x 4096), `quick` (GEMM 256^3, attention N = 1024, softmax 1024 x 4096) or
    /// `tiny` (GEMM 128^3, attention N = 256, softmax 128 x 1024: the callgrind workload; skips
    /// the README's two small figures).
    #[arg(long, default_value = "full", value_parser = ["full", "quick", "tiny"])]
    size: String,
    /// Run only the realistic shapes whose kernel name contains this.
    #[arg(long)]
    only: Option<String>,
    /// Timed runs per realistic shape (the median is printed).
    #[arg(long, default_value_t = 1)]
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
    if let Some(only) = &args.only {
        crate::run::check_names("--only", std::slice::from_ref(only))?;
        if !realistic().iter().any(|k| k.contains(only.as_str())) {
            return Err(format!(
                "--only {only} names no kernel of the realistic set: {}",
                realistic().join(", ")
            ));
        }
    }
    if args.size != "tiny" && args.only.is_none() {
        crate::run::emu_speed()?;
    }
    let sizes = Sizes::named(&args.size);
    // `KERNELS_BACKEND=ptx`: the same shapes from the kernels' PTX, on the same checked memory.
    let ptx = std::env::var(host::runtime::BACKEND_VAR).is_ok_and(|b| b == "ptx");
    let (rt, backend) = if ptx {
        let rt = Runtime::ptx_from_env().map_err(|e| e.to_string())?;
        (rt, "PTX backend")
    } else {
        (Runtime::emulator(), "source emulator")
    };
    println!(
        "\nrealistic shapes ({} set), {backend} on {} OS threads, every check on, {} run(s) each:",
        args.size,
        host::emu::os_threads(),
        args.runs
    );
    println!(
        "{:<28} {:<26} {:>12} {:>14} {:>16} {:>12}",
        "kernel", "shape", "wall", "threads/s", "accesses/s", "per access"
    );
    let wanted = |name: &str| args.only.as_deref().is_none_or(|o| name.contains(o));
    let g = sizes.gemm;
    for kernel in [
        GemmKernel::Tiled,
        GemmKernel::RegisterBlocked,
        GemmKernel::TensorCoreBf16,
    ] {
        if wanted(kernel.name()) {
            gemm_speed(&rt, kernel, g, args.runs)?;
        }
    }
    let shape = AttentionShape::new(1, 1, sizes.attention_n, 128);
    if wanted("flash_attention_f32_d128") {
        attention_speed(&rt, "flash_attention_f32_d128", &shape, args.runs, |x| x)?;
    }
    if wanted("flash_attention_bf16_d128") {
        attention_speed(
            &rt,
            "flash_attention_bf16_d128",
            &shape,
            args.runs,
            bf16::from_f32,
        )?;
    }
    if wanted("softmax_fused_f32") {
        softmax_speed(&rt, sizes.softmax_rows, sizes.softmax_cols, args.runs)?;
    }
    Ok(())
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
    let label = format!("1 head, N = {}, d = {}", shape.n_q, shape.head_dim);
    report(kernel, label, runs, || {
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
    report(
        "softmax_fused_f32",
        format!("{rows} x {cols}"),
        runs,
        || {
            softmax::fused(rt, &x, &mut y, rows, cols)
                .map_err(err)?
                .ok_or_else(|| "no launch".to_string())
        },
    )
}
