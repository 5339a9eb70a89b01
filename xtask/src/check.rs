//! `cargo xtask check FILE.cu|FILE.ptx --entry NAME --grid X,Y,Z --block X,Y,Z --arg ...`: one
//! entry of any PTX module (NVRTC's output, a hand-written kernel) or CUDA C++ file (compiled to
//! PTX by NVRTC, fetched on first use: `crate::nvrtc`) run on the PTX backend with every
//! emulator check on (bounds, races in shared and global memory, barriers, warp collectives,
//! asserts), and the emulator's report. A thin shell over `host::foreign`; `--list` prints the
//! module's entries with their parameters and whether each decodes.

use std::path::PathBuf;

use half::{bf16, f16};
use host::embedded::Arch;
use host::foreign::{Arg, Module};
use host::predict::Sampled;
use host::{DeviceBuffer, Element, LaunchConfig, Runtime, dim3};
use perf::model::Machine;

#[derive(clap::Args)]
pub struct CheckArgs {
    /// The PTX module (`.ptx`) or CUDA C++ file (`.cu`, compiled by NVRTC).
    pub file: PathBuf,
    /// The entry to run: as the PTX names it, or for a `.cu` as C++ writes it (`softmax`, a
    /// template instance `reduce<float, 256>`).
    #[arg(long)]
    pub entry: Option<String>,
    /// An option for NVRTC when FILE is a `.cu` (repeatable): `-G`, `-use_fast_math`,
    /// `-arch=compute_80`, `-DN=256`, ... after the defaults -arch=compute_90 -std=c++17
    /// -lineinfo.
    #[arg(long = "nvrtc-opt", allow_hyphen_values = true)]
    pub nvrtc_opts: Vec<String>,
    /// Blocks in the grid: X or X,Y or X,Y,Z.
    #[arg(long, default_value = "1")]
    pub grid: String,
    /// Threads per block: X or X,Y or X,Y,Z.
    #[arg(long, default_value = "32")]
    pub block: String,
    /// Dynamic shared memory per block, in bytes.
    #[arg(long, default_value_t = 0)]
    pub shared: u32,
    /// One per parameter, in order: a scalar `TYPE:VALUE` (`i32:64`, `f32:0.5`, `u64:7`), a
    /// buffer `TYPE[N]:INIT` (TYPE f32, f64, f16, bf16, i32, u32, u8, u16, u64; INIT zeros, ones,
    /// rand (uniform in [-1, 1), integers in [0, 100)), iota, or a NumPy file `FILE.npy` of
    /// that type, N elements in all, or any number with `TYPE[..]`), or a view
    /// `view:K+OFFSET`: the buffer of argument K (from 0) from element OFFSET on.
    #[arg(long = "arg", allow_hyphen_values = true)]
    pub args: Vec<String>,
    /// Turn the shared-memory race check off, to see the numbers of a kernel whose races in
    /// shared memory are deliberate (reads of bytes nobody wrote are still reported). Stores
    /// of the same bytes are benign races, warned about without this.
    #[arg(long)]
    pub no_shared_races: bool,
    /// Turn the global-memory race check off.
    #[arg(long)]
    pub no_global_races: bool,
    /// After a clean launch, write each buffer argument K to DIR/argK.npy (NumPy's format;
    /// bf16 as its raw bits, `<u2`).
    #[arg(long, value_name = "DIR")]
    pub dump: Option<PathBuf>,
    /// The grid the model predicts the launch at (X, X,Y or X,Y,Z; default the launch's own),
    /// with the same block and arguments: a few of its blocks run on the buffers the arguments
    /// made, so size them for this grid.
    #[arg(long, value_name = "X,Y,Z")]
    pub predict_grid: Option<String>,
    /// The devices the model predicts for (comma-separated: h100, h200, a100, b200, a6000).
    #[arg(long, value_delimiter = ',', default_value = "h100")]
    pub device: Vec<String>,
    /// No prediction after the check.
    #[arg(long)]
    pub no_predict: bool,
    /// List the module's entries, their parameters and whether each decodes, and stop.
    #[arg(long)]
    pub list: bool,
    #[command(flatten)]
    pub(crate) deadline: crate::watchdog::Deadline,
}

pub fn run(args: &CheckArgs) -> Result<(), String> {
    let origin = args.file.display().to_string();
    let cuda = args.file.extension().is_some_and(|e| e == "cu");
    if !cuda && !args.nvrtc_opts.is_empty() {
        return Err("--nvrtc-opt is for a .cu file (a .ptx is compiled already)".into());
    }
    let compiled = if cuda {
        let extra: Vec<String> = args.entry.iter().cloned().collect();
        Some(crate::nvrtc::compile_file(
            &args.file,
            &args.nvrtc_opts,
            &extra,
        )?)
    } else {
        None
    };
    let module = match &compiled {
        Some(c) => Module::load(c.ptx.clone(), &origin),
        None => Module::file(&args.file),
    }
    .map_err(|e| e.to_string())?;
    let cpp_name = |entry: &str| compiled.as_ref().and_then(|c| c.cpp_name(entry));
    if args.list {
        print!("{}", list(&module, cpp_name));
        return Ok(());
    }
    let entry = args
        .entry
        .as_deref()
        .ok_or("--entry NAME is required (--list lists the module's entries)")?;
    let entry = compiled.as_ref().map_or(entry, |c| c.lowered(entry));
    let cfg = LaunchConfig {
        grid: dims(&args.grid, "--grid")?,
        block: dims(&args.block, "--block")?,
        dynamic_shared: args.shared,
    };
    // Every check on unless a flag says, whatever KERNELS_EMU_GLOBAL_RACES and
    // KERNELS_EMU_SHARED_RACES say.
    let module = module.with_options(|o| {
        o.global_races = !args.no_global_races;
        o.shared_races = !args.no_shared_races;
    });
    let rt = module.runtime();
    if !matches!(rt.backend(), host::runtime::Backend::Ptx(_)) {
        return Err("check runs on the PTX backend, which this runtime is not".into());
    }
    let off: Vec<&str> = [
        (args.no_shared_races, "the shared-memory race check"),
        (args.no_global_races, "the global-memory race check"),
    ]
    .into_iter()
    .filter_map(|(off, what)| off.then_some(what))
    .collect();
    let checks = match off.as_slice() {
        [] => "every emulator check on".to_string(),
        off => format!("every emulator check on but {}", off.join(" and ")),
    };
    let mut buffers: Vec<Option<Buffer>> = Vec::new();
    for (k, spec) in args.args.iter().enumerate() {
        let arg = parse_arg(spec, k).map_err(|e| format!("--arg {spec}: {e}"))?;
        buffers.push(match arg {
            Parsed::Buffer { ty, len, init } => Some(
                Buffer::new(rt, &ty, len, &init, k as u64)
                    .map_err(|e| format!("--arg {spec}: {e}"))?,
            ),
            _ => None,
        });
    }
    let mut launch_args = Vec::new();
    for (k, spec) in args.args.iter().enumerate() {
        let arg = match parse_arg(spec, k)? {
            Parsed::Scalar(a) => a,
            Parsed::Buffer { .. } => buffers[k].as_ref().expect("made above").arg(0)?,
            Parsed::View { of, offset } => match buffers.get(of) {
                Some(Some(b)) if of < k => b.arg(offset)?,
                _ => {
                    return Err(format!(
                        "--arg {spec}: argument {of} is not a buffer given before this one"
                    ));
                }
            },
        };
        launch_args.push(arg);
    }
    let threads = cfg.grid.volume() * cfg.block.volume();
    let shown = match cpp_name(entry) {
        Some(cpp) if cpp != entry => format!("`{cpp}` (PTX entry `{entry}`)"),
        _ => format!("`{entry}`"),
    };
    println!(
        "{origin}: {shown} on a grid of {} x {} x {} blocks of {} x {} x {} threads ({threads} threads), {checks}",
        cfg.grid.x, cfg.grid.y, cfg.grid.z, cfg.block.x, cfg.block.y, cfg.block.z
    );
    let (launched, observed) = module.observe(|m| m.launch(entry, &cfg, &launch_args));
    print_printed(module.take_printed());
    let counters = launched.map_err(|e| e.to_string())?;
    let benign = observed.benign_races.len();
    let races = match benign {
        0 => "no data race".to_string(),
        n => format!(
            "no data race but {n} benign one{} (stores of the same bytes: the warnings above)",
            if n == 1 { "" } else { "s" }
        ),
    };
    let barriers = match observed.divergent_barriers.len() {
        0 => "no barrier divergence".to_string(),
        n => format!(
            "no barrier deadlock but {n} pair{} of instructions at which the threads met one barrier (undefined in CUDA C++, counted by barrier id in PTX on sm_70 and later: the warnings above)",
            if n == 1 { "" } else { "s" }
        ),
    };
    println!(
        "no bug found: no out-of-bounds or misaligned access, {races}, {barriers}, no failed assert"
    );
    println!(
        "global memory: {} bytes read, {} written; shared memory: {} read, {} written; {} barriers, {} warp collectives",
        counters.global_read_bytes,
        counters.global_write_bytes,
        counters.shared_read_bytes,
        counters.shared_write_bytes,
        counters.barriers,
        counters.warp_collectives
    );
    if let Some(dir) = &args.dump {
        std::fs::create_dir_all(dir).map_err(|e| format!("--dump {}: {e}", dir.display()))?;
    }
    for (k, b) in buffers.iter().enumerate() {
        if let Some(b) = b {
            let mut line = format!("argument {k} after the launch: {}", b.summary(rt)?);
            if let Some(dir) = &args.dump {
                let path = dir.join(format!("arg{k}.npy"));
                let (descr, data) = b.raw(rt)?;
                let len = data.len() / crate::npy::element_size(descr)?;
                let file = crate::npy::to_bytes(descr, &[len], &data);
                std::fs::write(&path, file).map_err(|e| format!("{}: {e}", path.display()))?;
                line.push_str(&format!(", written to {}", path.display()));
            }
            println!("{line}");
        }
    }
    if args.no_predict {
        return Ok(());
    }
    let machines = args
        .device
        .iter()
        .map(|d| Machine::find(d).ok_or_else(|| crate::options::unknown_device(d)))
        .collect::<Result<Vec<_>, _>>()?;
    let at = LaunchConfig {
        grid: match &args.predict_grid {
            Some(g) => dims(g, "--predict-grid")?,
            None => cfg.grid,
        },
        ..cfg
    };
    let arch = if module.runtime().has_wgmma() {
        Arch::Sm90a
    } else {
        Arch::Sm90
    };
    let resources = match crate::nvidia_tools::module_resources("check", module.text(), arch) {
        Ok(r) => r,
        Err(why) => {
            println!("no prediction: ptxas gave no registers ({why})");
            return Ok(());
        }
    };
    match sampled(&module, entry, &at, &launch_args, &resources) {
        Ok(s) => print!("{}", prediction(&s, cfg.grid.volume(), &machines, arch)),
        Err(why) => println!("no prediction: {why}"),
    }
    Ok(())
}

/// The launch of `entry` at `at` as `cargo xtask predict --ptx` samples a project kernel: the
/// plan's blocks (`emu::sample::plan`, every check on) with the instruction mix the PTX backend
/// counts, and `resources` (registers per kernel from ptxas). A foreign kernel declares no
/// compulsory cost, so the bytes and FLOPs the sample counts stand for it: `next_step`'s ratio
/// then says how much of what the kernel accesses reaches DRAM.
fn sampled(
    module: &Module,
    entry: &str,
    at: &LaunchConfig,
    args: &[Arg],
    resources: &[(String, perf::model::KernelResources)],
) -> Result<Sampled, String> {
    let host::runtime::Backend::Ptx(device) = module.runtime().backend() else {
        return Err("the module's runtime is not the PTX backend".into());
    };
    let start = std::time::Instant::now();
    let sampling = module.with_options(|o| {
        o.sampling = Some(emu::Sampling {
            blocks: emu::sample::WHOLE_PLAN,
            budget: None,
            skip: None,
        });
        o.instruction_mix = true;
    });
    let (launched, observed) = sampling.observe(|m| m.launch(entry, at, args));
    let mix = device.mix(&observed);
    // The sampled blocks' printf is the check's again, for fewer blocks.
    module.take_printed();
    let samples = observed.samples;
    launched.map_err(|e| {
        format!(
            "the sample at a grid of {} x {} x {} blocks failed on the arguments' buffers (size them for --predict-grid): {e}",
            at.grid.x, at.grid.y, at.grid.z
        )
    })?;
    let launches: Vec<_> = samples
        .into_iter()
        .map(|s| host::predict::launch_input(s, Some(mix.as_slice()), resources))
        .collect();
    let first = launches.first().ok_or("the sample launched nothing")?;
    let s = &first.sample;
    let total = |f: fn(&emu::LaunchCounters) -> u64| {
        (s.mean(|b| f(&b.counters) as f64) * s.grid_blocks() as f64).round() as u64
    };
    let cost = perf::cost::Cost {
        bytes_read: total(|c| c.global_read_bytes),
        bytes_written: total(|c| c.global_write_bytes),
        flops: total(|c| c.flops),
        exps: first.exps.round() as u64,
        unit: perf::cost::ComputeUnit::CudaCoreF32,
        ..perf::cost::Cost::NONE
    };
    Ok(Sampled {
        shape: format!("{} x {} x {}", at.grid.x, at.grid.y, at.grid.z),
        backend: module.runtime().device_name(),
        launches,
        seconds: start.elapsed().as_secs_f64(),
        resources_note: String::new(),
        extended_from: None,
        work_spent: 0,
        cost,
    })
}

/// The prediction on each of `machines` (`launched_blocks`: the checked launch's grid), labelled MODELLED, with its limiter and the sentence
/// that says what to change (`perf::model::next_step`).
fn prediction(sampled: &Sampled, launched_blocks: u64, machines: &[Machine], arch: Arch) -> String {
    let first = &sampled.launches[0];
    let mut out = format!(
        "prediction at a grid of {} blocks, from {} of its blocks sampled with every check on; {} registers per thread and {} bytes of static shared memory (ptxas, {})\n",
        sampled.shape,
        first.sample.blocks.len(),
        first
            .resources
            .registers
            .map_or("unknown".to_string(), |r| r.to_string()),
        first.resources.static_shared,
        arch.name(),
    );
    out += &format!(
        "compulsory bytes (a foreign kernel declares none): the {} read and {} written that the sample counts, scaled to the grid\n",
        sampled.cost.bytes_read, sampled.cost.bytes_written,
    );
    if first.sample.grid_blocks() > launched_blocks {
        out += &format!(
            "note: a grid larger than the launch's {launched_blocks} blocks, on the same arguments: a kernel whose size arguments bound its work does no more here\n"
        );
    }
    for m in machines {
        out += &format!("{} (MODELLED):\n", m.spec.name);
        match host::predict::predict(m, sampled) {
            Ok(p) => {
                out += &crate::format::breakdown(&p);
                out += &format!("  {}\n", perf::model::next_step(&p, &sampled.cost, m));
            }
            Err(why) => out += &format!("  {why}\n"),
        }
    }
    out
}

/// The kernel's `printf` output, each line after the block and thread that printed it.
fn print_printed(printed: ptx::exec::Printed) {
    if printed.calls.is_empty() {
        return;
    }
    println!(
        "printf ({} calls, by block then thread: a GPU prints them in no set order):",
        printed.calls.len() + printed.dropped
    );
    for ([bx, by, bz], [tx, ty, tz], text) in &printed.calls {
        for line in text.lines() {
            println!("  block ({bx},{by},{bz}) thread ({tx},{ty},{tz}): {line}");
        }
    }
    if printed.dropped > 0 {
        println!(
            "  ... and {} calls more, dropped: the backend keeps {} per launch, as a GPU's printf buffer holds a fixed amount",
            printed.dropped,
            ptx::exec::Printed::LINES
        );
    }
}

/// `--list`: each entry (its C++ name first, if `cpp_name` knows it), its parameters, and why
/// it is refused if it is.
fn list<'a>(module: &Module, cpp_name: impl Fn(&str) -> Option<&'a str>) -> String {
    let mut out = String::new();
    for e in module.entries() {
        let params: Vec<String> = e
            .params
            .iter()
            .map(|(name, ty, bytes)| format!("{name}: .{ty} ({bytes} B)"))
            .collect();
        let name = match cpp_name(e.name) {
            Some(cpp) if cpp != e.name => format!("{cpp} = {}", e.name),
            _ => e.name.to_string(),
        };
        out.push_str(&format!("{name}({})\n", params.join(", ")));
        match &e.refused {
            None => out.push_str("    decodes: runs on the PTX backend\n"),
            Some(why) => out.push_str(&format!("    refused: {why}\n")),
        }
    }
    out
}

/// `X`, `X,Y` or `X,Y,Z`, each at least 1.
fn dims(text: &str, what: &str) -> Result<kernels::cuda::emu::Dim3, String> {
    let parts: Vec<u32> = text
        .split(',')
        .map(|p| p.trim().parse::<u32>().ok().filter(|&v| v > 0))
        .collect::<Option<_>>()
        .filter(|v: &Vec<u32>| (1..=3).contains(&v.len()))
        .ok_or_else(|| format!("{what} {text}: expected X, X,Y or X,Y,Z of positive integers"))?;
    let at = |i: usize| parts.get(i).copied().unwrap_or(1);
    Ok(dim3(at(0), at(1), at(2)))
}

/// One `--arg`, read.
enum Parsed {
    Scalar(Arg<'static>),
    Buffer {
        ty: String,
        /// `None` for `TYPE[..]`: the file's.
        len: Option<usize>,
        init: String,
    },
    View {
        of: usize,
        offset: usize,
    },
}

fn parse_arg(spec: &str, k: usize) -> Result<Parsed, String> {
    let (head, value) = spec
        .split_once(':')
        .ok_or("expected TYPE:VALUE, TYPE[N]:INIT or view:K+OFFSET")?;
    if head == "view" {
        let (of, offset) = value.split_once('+').ok_or("expected view:K+OFFSET")?;
        let of = of
            .parse()
            .map_err(|_| format!("`{of}` is not an argument number"))?;
        let offset = offset
            .parse()
            .map_err(|_| format!("`{offset}` is not an element offset"))?;
        if of >= k {
            return Err(format!("a view of argument {of} must come after it"));
        }
        return Ok(Parsed::View { of, offset });
    }
    if let Some((ty, len)) = head.strip_suffix(']').and_then(|h| h.split_once('[')) {
        let len = match len {
            ".." if value.ends_with(".npy") => None,
            ".." => {
                return Err("`[..]` takes its length from a .npy file (TYPE[..]:FILE.npy)".into());
            }
            n => Some(
                n.parse()
                    .map_err(|_| format!("`{n}` is not a number of elements"))?,
            ),
        };
        return Ok(Parsed::Buffer {
            ty: ty.to_string(),
            len,
            init: value.to_string(),
        });
    }
    fn number<T: std::str::FromStr>(value: &str, head: &str) -> Result<T, String> {
        value
            .parse()
            .map_err(|_| format!("`{value}` is not a {head}"))
    }
    let scalar = match head {
        "i32" => Arg::I32(number(value, head)?),
        "u32" => Arg::U32(number(value, head)?),
        "i64" => Arg::I64(number(value, head)?),
        "u64" => Arg::U64(number(value, head)?),
        "f32" => Arg::F32(number(value, head)?),
        "f64" => Arg::F64(number(value, head)?),
        other => {
            return Err(format!(
                "unknown scalar type `{other}` (i32, u32, i64, u64, f32, f64)"
            ));
        }
    };
    Ok(Parsed::Scalar(scalar))
}

/// A buffer an argument made, of its element type.
enum Buffer {
    F32(DeviceBuffer<f32>),
    F64(DeviceBuffer<f64>),
    F16(DeviceBuffer<f16>),
    Bf16(DeviceBuffer<bf16>),
    I32(DeviceBuffer<i32>),
    U32(DeviceBuffer<u32>),
    U8(DeviceBuffer<u8>),
    U16(DeviceBuffer<u16>),
    U64(DeviceBuffer<u64>),
}

/// The NumPy dtype a buffer of `ty` is written as and read from (bf16, which NumPy lacks, as
/// its raw bits).
fn npy_descr(ty: &str) -> Result<&'static str, String> {
    Ok(match ty {
        "f32" => "<f4",
        "f64" => "<f8",
        "f16" => "<f2",
        "bf16" | "u16" => "<u2",
        "i32" => "<i4",
        "u32" => "<u4",
        "u8" => "|u1",
        "u64" => "<u8",
        other => {
            return Err(format!(
                "unknown element type `{other}` (f32, f64, f16, bf16, i32, u32, u8, u16, u64)"
            ));
        }
    })
}

impl Buffer {
    /// `len` elements of `ty` initialised as `init` says (`rand` seeded by the argument's place),
    /// or read from the `.npy` file `init` names (`len` `None`: as many as it holds).
    fn new(
        rt: &Runtime,
        ty: &str,
        len: Option<usize>,
        init: &str,
        seed: u64,
    ) -> Result<Self, String> {
        if init.ends_with(".npy") {
            return Self::from_npy(rt, ty, len, init);
        }
        let len = len.expect("parse_arg takes `[..]` with a .npy file only");
        let values: Vec<f64> = match init {
            "zeros" => vec![0.0; len],
            "ones" => vec![1.0; len],
            "iota" => (0..len).map(|i| i as f64).collect(),
            "rand" => {
                let float = matches!(ty, "f32" | "f64" | "f16" | "bf16");
                let (lo, hi) = if float { (-1.0, 1.0) } else { (0.0, 100.0) };
                host::reference::uniform(len, seed + 1, lo, hi)
                    .into_iter()
                    .map(|x| {
                        if float {
                            f64::from(x)
                        } else {
                            f64::from(x).floor()
                        }
                    })
                    .collect()
            }
            other => {
                return Err(format!(
                    "unknown initialiser `{other}` (zeros, ones, rand, iota)"
                ));
            }
        };
        fn up<T: Element>(rt: &Runtime, v: Vec<T>) -> Result<DeviceBuffer<T>, String> {
            rt.upload(&v).map_err(|e| e.to_string())
        }
        let v = values.into_iter();
        Ok(match ty {
            "f32" => Self::F32(up(rt, v.map(|x| x as f32).collect())?),
            "f64" => Self::F64(up(rt, v.collect())?),
            "f16" => Self::F16(up(rt, v.map(f16::from_f64).collect())?),
            "bf16" => Self::Bf16(up(rt, v.map(bf16::from_f64).collect())?),
            "i32" => Self::I32(up(rt, v.map(|x| x as i32).collect())?),
            "u32" => Self::U32(up(rt, v.map(|x| x as u32).collect())?),
            "u8" => Self::U8(up(rt, v.map(|x| x as u8).collect())?),
            "u16" => Self::U16(up(rt, v.map(|x| x as u16).collect())?),
            "u64" => Self::U64(up(rt, v.map(|x| x as u64).collect())?),
            other => {
                return Err(format!(
                    "unknown element type `{other}` (f32, f64, f16, bf16, i32, u32, u8, u16, u64)"
                ));
            }
        })
    }

    /// The buffer the NumPy file at `path` holds, which must be of `ty` (f16 also as raw `<u2`)
    /// and, when `len` says, of that many elements.
    fn from_npy(rt: &Runtime, ty: &str, len: Option<usize>, path: &str) -> Result<Self, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
        let npy = crate::npy::from_bytes(&bytes).map_err(|e| format!("{path}: {e}"))?;
        let want = npy_descr(ty)?;
        if npy.descr != want && !(ty == "f16" && npy.descr == "<u2") {
            return Err(format!(
                "{path} holds {} elements, not {ty} ({want})",
                npy.descr
            ));
        }
        if let Some(len) = len.filter(|&n| n != npy.len()) {
            return Err(format!(
                "{path} holds {} elements (shape {:?}), not {len}",
                npy.len(),
                npy.shape
            ));
        }
        fn up<T: Element, const N: usize>(
            rt: &Runtime,
            data: &[u8],
            from: fn([u8; N]) -> T,
        ) -> Result<DeviceBuffer<T>, String> {
            let v: Vec<T> = data
                .chunks_exact(N)
                .map(|c| from(c.try_into().expect("chunks of N")))
                .collect();
            rt.upload(&v).map_err(|e| e.to_string())
        }
        let d = &npy.data;
        Ok(match ty {
            "f32" => Self::F32(up(rt, d, f32::from_le_bytes)?),
            "f64" => Self::F64(up(rt, d, f64::from_le_bytes)?),
            "f16" => Self::F16(up(rt, d, f16::from_le_bytes)?),
            "bf16" => Self::Bf16(up(rt, d, bf16::from_le_bytes)?),
            "i32" => Self::I32(up(rt, d, i32::from_le_bytes)?),
            "u32" => Self::U32(up(rt, d, u32::from_le_bytes)?),
            "u8" => Self::U8(up(rt, d, u8::from_le_bytes)?),
            "u16" => Self::U16(up(rt, d, u16::from_le_bytes)?),
            "u64" => Self::U64(up(rt, d, u64::from_le_bytes)?),
            other => unreachable!("npy_descr refused `{other}`"),
        })
    }

    /// The buffer's NumPy dtype and its elements' little-endian bytes, as `--dump` writes them.
    fn raw(&self, rt: &Runtime) -> Result<(&'static str, Vec<u8>), String> {
        fn bytes<T: Element, const N: usize>(
            rt: &Runtime,
            b: &DeviceBuffer<T>,
            to: fn(T) -> [u8; N],
        ) -> Result<Vec<u8>, String> {
            let v = rt.download(b).map_err(|e| e.to_string())?;
            Ok(v.into_iter().flat_map(to).collect())
        }
        let (ty, data) = match self {
            Self::F32(b) => ("f32", bytes(rt, b, f32::to_le_bytes)?),
            Self::F64(b) => ("f64", bytes(rt, b, f64::to_le_bytes)?),
            Self::F16(b) => ("f16", bytes(rt, b, f16::to_le_bytes)?),
            Self::Bf16(b) => ("bf16", bytes(rt, b, bf16::to_le_bytes)?),
            Self::I32(b) => ("i32", bytes(rt, b, i32::to_le_bytes)?),
            Self::U32(b) => ("u32", bytes(rt, b, u32::to_le_bytes)?),
            Self::U8(b) => ("u8", bytes(rt, b, u8::to_le_bytes)?),
            Self::U16(b) => ("u16", bytes(rt, b, u16::to_le_bytes)?),
            Self::U64(b) => ("u64", bytes(rt, b, u64::to_le_bytes)?),
        };
        Ok((npy_descr(ty)?, data))
    }

    /// `TYPE[N]: first four values ... last two (sum S)`: enough to see a kernel's result at a
    /// glance and to compare it with a pasted one.
    fn summary(&self, rt: &Runtime) -> Result<String, String> {
        fn show<T: Element + std::fmt::Display>(
            rt: &Runtime,
            ty: &str,
            b: &DeviceBuffer<T>,
            to_f64: impl Fn(T) -> f64,
        ) -> Result<String, String> {
            let v = rt.download(b).map_err(|e| e.to_string())?;
            let shown: Vec<String> = if v.len() <= 6 {
                v.iter().map(T::to_string).collect()
            } else {
                let ends = v[..4].iter().map(T::to_string);
                let tail = v[v.len() - 2..].iter().map(T::to_string);
                ends.chain(std::iter::once("...".to_string()))
                    .chain(tail)
                    .collect()
            };
            let sum: f64 = v.iter().map(|&x| to_f64(x)).sum();
            Ok(format!(
                "{ty}[{}]: {} (sum {sum})",
                v.len(),
                shown.join(" ")
            ))
        }
        match self {
            Self::F32(b) => show(rt, "f32", b, f64::from),
            Self::F64(b) => show(rt, "f64", b, |x| x),
            Self::F16(b) => show(rt, "f16", b, f64::from),
            Self::Bf16(b) => show(rt, "bf16", b, f64::from),
            Self::I32(b) => show(rt, "i32", b, f64::from),
            Self::U32(b) => show(rt, "u32", b, f64::from),
            Self::U8(b) => show(rt, "u8", b, f64::from),
            Self::U16(b) => show(rt, "u16", b, f64::from),
            Self::U64(b) => show(rt, "u64", b, |x| x as f64),
        }
    }

    /// The buffer from element `offset` on, as a launch argument.
    fn arg(&self, offset: usize) -> Result<Arg<'_>, String> {
        let view = match self {
            Self::F32(b) => Arg::view(b, offset),
            Self::F64(b) => Arg::view(b, offset),
            Self::F16(b) => Arg::view(b, offset),
            Self::Bf16(b) => Arg::view(b, offset),
            Self::I32(b) => Arg::view(b, offset),
            Self::U32(b) => Arg::view(b, offset),
            Self::U8(b) => Arg::view(b, offset),
            Self::U16(b) => Arg::view(b, offset),
            Self::U64(b) => Arg::view(b, offset),
        };
        view.map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A streaming kernel (c = a + b) checked on 2 blocks and predicted at 16384: the bytes the
    /// model moves are the check's counters per block times the grid, and DRAM limits it on an
    /// H100.
    #[test]
    fn a_streaming_foreign_kernel_is_predicted_dram_bound_from_its_counters() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/foreign/ptx/elementwise.default.ptx");
        let module = Module::file(&path).unwrap();
        let rt = module.runtime();
        let blocks = 16384u32;
        let n = blocks * 256;
        let zeros = vec![0f32; n as usize];
        let (a, b, c) = (
            rt.upload(&zeros).unwrap(),
            rt.upload(&zeros).unwrap(),
            rt.upload(&zeros).unwrap(),
        );
        let args = [
            Arg::buffer(&a),
            Arg::buffer(&b),
            Arg::buffer(&c),
            Arg::U32(n),
        ];
        let mut cfg = LaunchConfig {
            grid: dim3(2, 1, 1),
            block: dim3(256, 1, 1),
            dynamic_shared: 0,
        };
        let counters = module.launch("vector_add_f32", &cfg, &args).unwrap();
        cfg.grid = dim3(blocks, 1, 1);
        let s = sampled(&module, "vector_add_f32", &cfg, &args, &[]).unwrap();
        let per_block = (counters.global_read_bytes + counters.global_write_bytes) / 2;
        let bytes = per_block * u64::from(blocks);
        assert_eq!(s.cost.bytes(), bytes);
        let h100 = Machine::find("h100").unwrap();
        let p = host::predict::predict(&h100, &s).unwrap();
        assert_eq!(p.launches[0].totals.dram_bytes, bytes as f64);
        assert_eq!(p.limiter, perf::model::Limiter::Dram, "{p:?}");
    }

    /// A bf16 buffer read from a `.npy` file of raw bits (`TYPE[..]`: as many as it holds) is
    /// dumped as the same bits, and a file of another dtype or length is refused with why.
    #[test]
    fn a_buffer_from_a_npy_file_dumps_as_the_same_file() {
        let rt = Runtime::emulator();
        let values = [1.0f32, -2.5, 0.125, 3.0e5, 0.0];
        let bits: Vec<u8> = values
            .iter()
            .flat_map(|&x| bf16::from_f32(x).to_le_bytes())
            .collect();
        let path = std::env::temp_dir().join(format!("check-npy-{}.npy", std::process::id()));
        let file = crate::npy::to_bytes("<u2", &[values.len()], &bits);
        std::fs::write(&path, &file).unwrap();
        let name = path.to_str().unwrap();
        let buffer = Buffer::new(&rt, "bf16", None, name, 0).unwrap();
        assert_eq!(buffer.raw(&rt).unwrap(), ("<u2", bits));
        let refused = |ty: &str, len| Buffer::new(&rt, ty, len, name, 0).err().unwrap();
        assert!(refused("f32", None).contains("holds <u2 elements, not f32"));
        assert!(refused("bf16", Some(4)).contains("holds 5 elements"));
        std::fs::remove_file(&path).unwrap();
    }
}
