//! `cargo xtask check FILE.cu|FILE.ptx --entry NAME --grid X,Y,Z --block X,Y,Z --arg ...`: one
//! entry of any PTX module (NVRTC's output, a hand-written kernel) or CUDA C++ file (compiled to
//! PTX by NVRTC, fetched on first use: `crate::nvrtc`) run on the PTX backend with every
//! emulator check on (bounds, races in shared and global memory, barriers, warp collectives,
//! asserts), and the emulator's report. A thin shell over `host::foreign`; `--list` prints the
//! module's entries with their parameters and whether each decodes.

use std::path::PathBuf;

use host::foreign::Module;
use host::predict::Sampled;
use host::{LaunchConfig, dim3};
use perf::model::Machine;

use crate::kernel_args;

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
    /// The arguments of the predicted launch, one per parameter as `--arg` takes them (default:
    /// the check's own): check at a small size, predict at the real one in the same command
    /// (`--arg i32:64 ... --predict-arg i32:4096 ... --predict-grid 32,32`). Only a few blocks
    /// of the predicted launch run; its buffers are made whole (zeros cost nothing until touched).
    #[arg(long = "predict-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub predict_args: Vec<String>,
    /// The devices the model predicts for (comma-separated: h100, h200, a100, b200, a6000).
    #[arg(long, value_delimiter = ',', default_value = "h100")]
    pub device: Vec<String>,
    /// No prediction after the check.
    #[arg(long)]
    pub no_predict: bool,
    /// Write the PTX that runs (NVRTC's, for a `.cu`) to FILE, so that the PTX lines a report
    /// cites can be opened.
    #[arg(long, value_name = "FILE")]
    pub emit_ptx: Option<PathBuf>,
    /// List the module's entries, their parameters and whether each decodes, and stop.
    #[arg(long)]
    pub list: bool,
    #[command(flatten)]
    pub(crate) deadline: crate::watchdog::Deadline,
}

pub fn run(args: &CheckArgs) -> Result<(), String> {
    let origin = args.file.display().to_string();
    let cuda = is_cuda_source(&args.file);
    if !cuda && !args.nvrtc_opts.is_empty() {
        return Err("--nvrtc-opt is for a .cu file (a .ptx is compiled already)".into());
    }
    let compiled = if cuda { Some(compile(args)?) } else { None };
    let module = match &compiled {
        Some(c) => Module::load(c.ptx.clone(), &origin),
        None => Module::file(&args.file),
    }
    .map_err(|e| e.to_string())?;
    if let Some(path) = &args.emit_ptx {
        crate::atomic::write(path, module.text()).map_err(|e| format!("--emit-ptx: {e}"))?;
        println!("PTX: {} (the lines reports cite)", path.display());
    }
    if args.list {
        return print_list(&module, compiled.as_ref(), &origin);
    }
    let cpp_name = |entry: &str| compiled.as_ref().and_then(|c| c.cpp_name(entry));
    let entry = entry_of(args, &module, compiled.as_ref(), &origin)?;
    let cfg = launch_config(args)?;
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
    if let Some(e) = module.entries().iter().find(|e| e.name == entry) {
        kernel_args::check_scalar_types(&args.args, &e.params)?;
        kernel_args::check_scalar_types(&args.predict_args, &e.params)
            .map_err(|why| why.replacen("--arg", "--predict-arg", 1))?;
    }
    let buffers = kernel_args::buffers(rt, &args.args)?;
    let launch_args = kernel_args::launch_args(&args.args, &buffers)?;
    // Held until the dump is written: two checks never dump into one folder at once.
    let _dumping = match &args.dump {
        Some(dir) => Some(prepare_dump(dir, &buffers)?),
        None => None,
    };
    // What the prediction needs, read before the check launches: a wrong device, grid or
    // argument fails now, not after a long launch.
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
    if !args.predict_args.is_empty() && args.predict_args.len() != args.args.len() {
        return Err(format!(
            "--predict-arg: {} given for {} --arg: one per parameter, as --arg",
            args.predict_args.len(),
            args.args.len()
        ));
    }
    let predict_buffers =
        kernel_args::buffers(rt, &args.predict_args).map_err(|e| format!("--predict-arg: {e}"))?;
    let predict_args = kernel_args::launch_args(&args.predict_args, &predict_buffers)
        .map_err(|e| format!("--predict-arg: {e}"))?;
    let shown = match cpp_name(entry) {
        Some(cpp) if cpp != entry => format!("`{cpp}` (PTX entry `{entry}`)"),
        _ => format!("`{entry}`"),
    };
    println!(
        "{origin}: {shown} on a grid of {} x {} x {} blocks of {} x {} x {} threads ({} threads), {}",
        cfg.grid.x,
        cfg.grid.y,
        cfg.grid.z,
        cfg.block.x,
        cfg.block.y,
        cfg.block.z,
        cfg.grid.volume() * cfg.block.volume(),
        checks_on(args)
    );
    let (launched, observed) = module.observe(|m| m.launch(entry, &cfg, &launch_args));
    print_printed(module.take_printed());
    let counters = launched.map_err(|e| {
        let hint = buffer_too_small(&e, &args.args, &launch_args)
            .or_else(|| no_dynamic_shared(&e, &cfg, module.text()));
        // The kernel as the user wrote it, where the report has the PTX's mangled name.
        let report = match cpp_name(entry) {
            Some(cpp) if cpp != entry => e.to_string().replace(entry, cpp),
            _ => e.to_string(),
        };
        match hint {
            Some(hint) => format!("{report}\n{hint}"),
            None => report,
        }
    })?;
    print!("{}", verdict(&observed, &counters));
    if let Some(dir) = &args.dump {
        dump(dir, rt, &buffers)?;
    }
    for (k, b) in buffers.iter().enumerate() {
        if let Some(b) = b {
            let mut line = format!("argument {k} after the launch: {}", b.summary(rt)?);
            if let Some(dir) = &args.dump {
                let path = dir.join(format!("arg{k}.npy"));
                line.push_str(&format!(", written to {}", path.display()));
            }
            println!("{line}");
        }
    }
    if args.no_predict {
        return Ok(());
    }
    // The note on a larger grid applies only to the check's own arguments.
    let (args_predicted, launched) = if args.predict_args.is_empty() {
        (&launch_args, cfg.grid.volume())
    } else {
        (&predict_args, u64::MAX)
    };
    let code =
        crate::machine_code::for_devices(module.text(), &machines, module.runtime().has_wgmma());
    let assembled = crate::machine_code::assembled(&code);
    match host::predict::sample_foreign(
        &module,
        entry,
        &at,
        args_predicted,
        &assembled,
        emu::sample::WHOLE_PLAN,
    ) {
        Ok(s) => print!("{}", prediction(&s, launched, &machines, &code)),
        Err(why) => println!("no prediction: {why}"),
    }
    Ok(())
}

/// `--list`, or an error for a module with no kernel.
fn print_list(
    module: &Module,
    compiled: Option<&crate::nvrtc::Compiled>,
    origin: &str,
) -> Result<(), String> {
    if module.entries().is_empty() {
        return Err(format!(
            "{origin} has no kernel: no `.entry` in its PTX{}",
            if compiled.is_some() {
                " (a kernel is a `__global__` function; a template is listed once an instance is named with --entry)"
            } else {
                ""
            }
        ));
    }
    print!("{}", list(module, compiled));
    Ok(())
}

/// The PTX entry `--entry` names (as C++ writes it, for a `.cu`). A name the module does not
/// have (misspelt, or a C++ name where the PTX's was meant) is refused with the entries there
/// are, before any buffer is made.
fn entry_of<'a>(
    args: &'a CheckArgs,
    module: &Module,
    compiled: Option<&'a crate::nvrtc::Compiled>,
    origin: &str,
) -> Result<&'a str, String> {
    let entry = args
        .entry
        .as_deref()
        .ok_or("--entry NAME is required (--list lists the module's entries)")?;
    let entry = compiled.map_or(entry, |c| c.lowered(entry));
    let entries = module.entries();
    if entries.iter().any(|e| e.name == entry) {
        return Ok(entry);
    }
    let names: Vec<String> = entries
        .iter()
        .map(|e| match compiled.and_then(|c| c.cpp_name(e.name)) {
            Some(cpp) if cpp != e.name => format!("{cpp} (PTX `{}`)", e.name),
            _ => e.name.to_string(),
        })
        .collect();
    Err(format!(
        "--entry {entry}: {origin} has no such kernel; its kernels: {} (a template's instance is named as C++ writes it: `name<float, 256>`)",
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    ))
}

/// `--grid`, `--block` and `--shared` as a launch. A legal grid can have 2^63 blocks; the
/// emulator runs every block of the checked grid, so one past what it runs whole is refused
/// here, before any buffer is made.
fn launch_config(args: &CheckArgs) -> Result<LaunchConfig, String> {
    let cfg = LaunchConfig {
        grid: dims(&args.grid, "--grid")?,
        block: dims(&args.block, "--block")?,
        dynamic_shared: args.shared,
    };
    if let Err(threads) = emu::threads_run_whole(&cfg) {
        return Err(format!(
            "--grid {} --block {}: {threads} threads, more than the {} a check runs (every block, on the emulator); a check needs few blocks: give a smaller --grid, and --predict-grid {} for the model's time at this one",
            args.grid,
            args.block,
            emu::MAX_WHOLE_GRID_THREADS,
            args.grid
        ));
    }
    Ok(cfg)
}

/// Which of the emulator's checks are on, as the banner says it.
fn checks_on(args: &CheckArgs) -> String {
    let off: Vec<&str> = [
        (args.no_shared_races, "the shared-memory race check"),
        (args.no_global_races, "the global-memory race check"),
    ]
    .into_iter()
    .filter_map(|(off, what)| off.then_some(what))
    .collect();
    match off.as_slice() {
        [] => "every emulator check on".to_string(),
        off => format!("every emulator check on but {}", off.join(" and ")),
    }
}

/// A clean launch's verdict (with its benign races and barriers met at two instructions) and
/// the bytes it moved.
fn verdict(observed: &emu::Observed, counters: &emu::LaunchCounters) -> String {
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
    format!(
        "no bug found: no out-of-bounds or misaligned access, {races}, {barriers}, no failed assert\nglobal memory: {} bytes read, {} written; shared memory: {} read, {} written; {} barriers, {} warp collectives\n",
        counters.global_read_bytes,
        counters.global_write_bytes,
        counters.shared_read_bytes,
        counters.shared_write_bytes,
        counters.barriers,
        counters.warp_collectives
    )
}

/// `--dump DIR` checked before the launch: a folder (made if missing), with no folder where a
/// buffer's `argK.npy` goes (a file named DIR is refused here, not after the launch), and its
/// lock, which this check holds until its dump is written.
fn prepare_dump(
    dir: &std::path::Path,
    buffers: &[Option<kernel_args::Buffer>],
) -> Result<crate::atomic::Lock, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("--dump {}: {e}", dir.display()))?;
    let lock = crate::atomic::lock(&dir.join("dump")).map_err(|_| {
        format!(
            "--dump {}: another check is dumping into this folder now; wait for it, or give another folder",
            dir.display()
        )
    })?;
    for (k, _) in buffers.iter().enumerate().filter(|(_, b)| b.is_some()) {
        let path = dir.join(format!("arg{k}.npy"));
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            return Err(format!(
                "--dump: {} is a folder, where the dump writes argument {k}",
                path.display()
            ));
        }
    }
    Ok(lock)
}

/// Writes each buffer to `DIR/argK.npy` as one set ([`crate::atomic::replace_all`]: all of them
/// or none, never through a link someone left in DIR), then removes an earlier dump's `argK.npy`
/// of an argument that is no buffer now, so that DIR holds this launch's dump alone.
fn dump(
    dir: &std::path::Path,
    rt: &host::Runtime,
    buffers: &[Option<kernel_args::Buffer>],
) -> Result<(), String> {
    let dumped: Vec<(usize, &kernel_args::Buffer)> = buffers
        .iter()
        .enumerate()
        .filter_map(|(k, b)| Some((k, b.as_ref()?)))
        .collect();
    let paths: Vec<PathBuf> = dumped
        .iter()
        .map(|(k, _)| dir.join(format!("arg{k}.npy")))
        .collect();
    crate::atomic::replace_all(&paths, |i| {
        let (descr, data) = dumped[i].1.raw(rt)?;
        let len = data.len() / crate::npy::element_size(descr)?;
        Ok(crate::npy::to_bytes(descr, &[len], &data))
    })
    .map_err(|e| format!("--dump: {e}"))?;
    let entries = std::fs::read_dir(dir).map_err(|e| format!("--dump {}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let earlier = name
            .strip_prefix("arg")
            .and_then(|n| n.strip_suffix(".npy"))
            .and_then(|k| k.parse::<usize>().ok());
        if let Some(k) = earlier
            && buffers.get(k).is_none_or(Option::is_none)
        {
            std::fs::remove_file(entry.path())
                .map_err(|e| format!("--dump: cannot remove the earlier {name}: {e}"))?;
        }
    }
    Ok(())
}

/// The `.cu` compiled by NVRTC. The entry is handed to NVRTC only when it names a template's
/// instance (`reduce<float, 256>`), which NVRTC instantiates on request; a plain name is one of
/// the file's kernels or an error that lists them, never NVRTC's failure on an unknown name.
fn compile(args: &CheckArgs) -> Result<crate::nvrtc::Compiled, String> {
    let extra: Vec<String> = args
        .entry
        .iter()
        .filter(|e| e.contains('<'))
        .cloned()
        .collect();
    crate::nvrtc::compile_file(&args.file, &args.nvrtc_opts, &extra)
}

/// The prediction on each of `machines` (`launched_blocks`: the checked launch's grid), labelled
/// MODELLED, each with its architecture's machine code and registers (or why there are none), its
/// limiter and the sentence that says what to change (`perf::model::next_step`).
fn prediction(
    sampled: &Sampled,
    launched_blocks: u64,
    machines: &[Machine],
    code: &[crate::machine_code::ForArch],
) -> String {
    let first = &sampled.launches[0];
    let mut out = format!(
        "prediction at a grid of {} blocks, from {} of its blocks sampled with every check on, the requests counted as each device's machine code issues them (ptxas)\n",
        sampled.shape,
        first.sample.blocks.len(),
    );
    out += &format!(
        "bytes moved (sampled; a foreign kernel declares no compulsory bytes): the {} read and {} written that the sample counts, scaled to the grid\n",
        sampled.cost.bytes_read, sampled.cost.bytes_written,
    );
    if first.sample.grid_blocks() > launched_blocks {
        out += &format!(
            "note: a grid larger than the launch's {launched_blocks} blocks, on the same arguments: a kernel whose size arguments bound its work does no more here\n"
        );
    }
    for m in machines {
        let arch = code
            .iter()
            .find(|f| m.spec.runs_code_for(&f.arch))
            .expect("one per machine");
        let what = match &arch.assembled {
            Ok(_) => {
                let r = host::predict::resources_for(first, m);
                format!(
                    "{} machine code: {} registers per thread, {} bytes of static shared memory",
                    arch.arch,
                    r.registers.map_or("unknown".to_string(), |r| r.to_string()),
                    r.static_shared
                )
            }
            Err(why) => format!("no {} machine code, the PTX's requests: {why}", arch.arch),
        };
        out += &format!("{} (MODELLED; {what}):\n", m.spec.name);
        match host::predict::predict(m, sampled) {
            Ok(p) => {
                out += &crate::format::breakdown(&p);
                out += &format!("  {}\n", advice(&p, sampled, m));
            }
            Err(why) => out += &format!("  {why}\n"),
        }
    }
    out
}

/// For an access past the end of a buffer argument: which `--arg` it is and how many elements
/// the launch reads of it, at least (a buffer smaller than the launch reads is the usual cause:
/// a size argument larger than the buffer, or a grid with more threads than elements).
fn buffer_too_small(
    err: &host::Error,
    specs: &[String],
    launch_args: &[host::foreign::Arg],
) -> Option<String> {
    let host::Error::Emulator(e) = err else {
        return None;
    };
    let emu::EmuErrorKind::OutOfBounds {
        space: emu::MemorySpace::Global,
        addr,
        bytes,
        near: Some(o),
        ..
    } = &e.kind
    else {
        return None;
    };
    let k = launch_args
        .iter()
        .position(|a| matches!(a, host::foreign::Arg::Buffer { addr, .. } if *addr == o.start))?;
    let (elem, size) = o.elem;
    let size = size.max(1);
    let holds = o.bytes / size;
    let needed = (addr + bytes - o.start).div_ceil(size);
    Some(format!(
        "hint: the buffer is argument {k} (--arg {}), {holds} x {elem}; this access needs at least {needed}: give a larger buffer, or size arguments and a grid that match it",
        specs[k]
    ))
}

/// For a shared access outside every allocation of a launch with no dynamic shared memory, by
/// a module that declares an `extern __shared__` array: that array is the launch's dynamic
/// shared memory, 0 bytes unless `--shared` gives some.
fn no_dynamic_shared(err: &host::Error, cfg: &LaunchConfig, ptx: &str) -> Option<String> {
    let host::Error::Emulator(e) = err else {
        return None;
    };
    let shared_miss = matches!(
        &e.kind,
        emu::EmuErrorKind::OutOfBounds {
            space: emu::MemorySpace::Shared,
            near: None,
            ..
        }
    );
    (shared_miss && cfg.dynamic_shared == 0 && ptx.contains(".extern .shared")).then(|| {
        "hint: the launch has 0 bytes of dynamic shared memory, and the kernel declares an `extern __shared__` array, which is that memory: give its size in bytes as --shared (the third parameter of <<<grid, block, bytes>>>)".to_string()
    })
}

/// What to do next: the model's next step, or, for a grid of fewer blocks than the device has
/// SMs (a test size), that its time is the launch's and one block's, with how to predict the
/// real size; "fuse the launches" or "fill the waves" would be advice about the test, not the
/// kernel.
fn advice(p: &perf::model::Prediction, sampled: &Sampled, m: &Machine) -> String {
    let sms = u64::from(m.spec.sms);
    match p.launches.iter().map(|l| l.grid_blocks).max() {
        Some(blocks) if blocks < sms => format!(
            "A test size: its {blocks} block{} leave {} of the {sms} SMs idle, so the time is the launch's and one block's, not the kernel's. For its time at the real size, give that grid as --predict-grid{}.",
            if blocks == 1 { "" } else { "s" },
            sms - blocks,
            if sampled.launches.len() > 1 {
                ""
            } else {
                " and its sizes as --predict-arg"
            },
        ),
        _ => perf::model::next_step(p, &sampled.cost, perf::model::CostBytes::Sampled, m).sentence,
    }
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

/// `--list`: each entry with its parameters and why it is refused if it is. From a `.cu`
/// (`compiled`), each kernel's C++ signature as the source writes it, its PTX entry and the PTX
/// types `--arg` fills, then each template no `--entry` instantiated, with how to name one.
fn list(module: &Module, compiled: Option<&crate::nvrtc::Compiled>) -> String {
    let mut out = String::new();
    for e in module.entries() {
        let types: Vec<String> = e
            .params
            .iter()
            .map(|(_, ty, bytes)| format!(".{ty} ({bytes} B)"))
            .collect();
        let cpp = compiled.and_then(|c| {
            let name = c.cpp_name(e.name)?;
            let bare = name.split('<').next().unwrap_or(name);
            let k = c.kernels.iter().find(|k| k.name == bare)?;
            Some((name, k))
        });
        match cpp {
            Some((name, k)) => {
                let signature = match &k.template {
                    Some(_) => format!("{name}({})", k.params),
                    None => k.signature(),
                };
                out.push_str(&format!(
                    "{signature}\n    PTX entry `{}`: {}\n",
                    e.name,
                    types.join(", ")
                ));
            }
            None => {
                let params: Vec<String> = e
                    .params
                    .iter()
                    .map(|(name, ty, bytes)| format!("{name}: .{ty} ({bytes} B)"))
                    .collect();
                out.push_str(&format!("{}({})\n", e.name, params.join(", ")));
            }
        }
        match &e.refused {
            None => out.push_str("    decodes: runs on the PTX backend\n"),
            Some(why) => out.push_str(&format!("    refused: {why}\n")),
        }
    }
    for k in compiled.iter().flat_map(|c| &c.kernels) {
        let instantiated = compiled.is_some_and(|c| {
            c.names
                .iter()
                .any(|(cpp, _)| cpp.split('<').next() == Some(k.name.as_str()))
        });
        if k.template.is_some() && !instantiated {
            out.push_str(&format!(
                "{}\n    a template: check an instance, named as C++ writes it: --entry '{}<...>'\n",
                k.signature(),
                k.name
            ));
        }
    }
    out
}

/// Whether `file` is CUDA C++ for NVRTC rather than PTX: `.cu` in any case (`KERNEL.CU` was
/// read as PTX).
fn is_cuda_source(file: &std::path::Path) -> bool {
    file.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("cu"))
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

#[cfg(test)]
mod tests {
    use host::foreign::Arg;

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
        let s = host::predict::sample_foreign(
            &module,
            "vector_add_f32",
            &cfg,
            &args,
            &[],
            emu::sample::WHOLE_PLAN,
        )
        .unwrap();
        let per_block = (counters.global_read_bytes + counters.global_write_bytes) / 2;
        let bytes = per_block * u64::from(blocks);
        assert_eq!(s.cost.bytes(), bytes);
        let h100 = Machine::find("h100").unwrap();
        let p = host::predict::predict(&h100, &s).unwrap();
        assert_eq!(p.launches[0].totals.dram_bytes, bytes as f64);
        assert_eq!(p.limiter, perf::model::Limiter::Dram, "{p:?}");
    }

    /// A thread's four neighbouring 32-bit shared loads and stores, which ptxas merges into one
    /// LDS.128 and one STS.128 (tests/fixtures/ptx/four_words_scalar.ptx): counted as the PTX
    /// writes them, 8 requests a warp, each 4-way bank-conflicted; as the sm_86 and sm_90
    /// machine code issues them, 2 a warp, conflict-free. The registers are that architecture's
    /// ptxas's.
    #[test]
    fn a_prediction_counts_the_machine_code_s_requests_not_the_ptx_s() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/ptx/four_words_scalar.ptx");
        let module = Module::file(&path).unwrap();
        let rt = module.runtime();
        let input: Vec<f32> = (0..2048).map(|v| v as f32).collect();
        let (input, out) = (rt.upload(&input).unwrap(), rt.upload(&[0f32; 512]).unwrap());
        let args = [Arg::buffer(&input), Arg::buffer(&out)];
        let cfg = LaunchConfig {
            grid: dim3(2, 1, 1),
            block: dim3(256, 1, 1),
            dynamic_shared: 0,
        };
        let machines = ["a6000", "h100"].map(|d| Machine::find(d).unwrap());
        let code = crate::machine_code::for_devices(module.text(), &machines, false);
        for f in &code {
            assert!(
                f.assembled.is_ok(),
                "{}: {:?}",
                f.arch,
                f.assembled.as_ref().err()
            );
        }
        let sample = |assembled: &[host::predict::Assembled]| {
            host::predict::sample_foreign(
                &module,
                "four_words",
                &cfg,
                &args,
                assembled,
                emu::sample::WHOLE_PLAN,
            )
            .unwrap()
        };
        let as_ptx = sample(&[]);
        let as_machine = sample(&crate::machine_code::assembled(&code));
        // 16 warps.
        for m in &machines {
            let shared = |s: &Sampled| {
                let t = &host::predict::predict(m, s).unwrap().launches[0].totals;
                (t.shared_requests, t.shared_wavefronts)
            };
            assert_eq!(
                shared(&as_ptx),
                (16.0 * 8.0, 16.0 * 8.0 * 4.0),
                "{}",
                m.spec.name
            );
            assert_eq!(
                shared(&as_machine),
                (16.0 * 2.0, 16.0 * 2.0 * 4.0),
                "{}",
                m.spec.name
            );
            let arch = &code.iter().find(|f| f.arch == m.spec.arch).unwrap().arch;
            assert_eq!(arch, m.spec.arch);
        }
        // Each device reads its own architecture's registers: the A6000 sm_86's, the H100
        // sm_90's, each what that architecture's ptxas reported for the kernel.
        let input = &as_machine.launches[0];
        assert_eq!(input.resources_by_arch.len(), 2);
        for m in &machines {
            let f = code.iter().find(|f| f.arch == m.spec.arch).unwrap();
            let resources = &f.assembled.as_ref().unwrap().resources;
            let own = host::predict::resources_of_kernel(resources, "four_words");
            assert!(own.registers.is_some());
            assert_eq!(
                host::predict::resources_for(input, m),
                own,
                "{}",
                m.spec.name
            );
        }
    }

    /// Issue 55, finding 12: `KERNEL.CU` was parsed as PTX.
    #[test]
    fn a_cuda_file_is_known_by_its_extension_in_any_case() {
        for (name, cuda) in [
            ("a.cu", true),
            ("A.CU", true),
            ("b.Cu", true),
            ("c.ptx", false),
            ("cu", false),
            ("d.cuh", false),
        ] {
            assert_eq!(is_cuda_source(std::path::Path::new(name)), cuda, "{name}");
        }
    }
}
