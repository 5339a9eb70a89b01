//! `cargo xtask validate`: the performance model against published measurements
//! (`perf::validation::ROWS`). Each row's kernel follows the published algorithm: a CUDA C++
//! entry of tests/validation/ (compiled by NVRTC, sampled on the PTX backend as `cargo xtask
//! check --predict-grid` samples it) or a registered project kernel (sampled as `cargo xtask
//! predict` samples it), at the published size; a few blocks of the full-size launch are
//! emulated, never a smaller problem. Prints per row the published figure and its source, the
//! prediction (MODELLED) in the same unit, their ratio and the limiter; then per progression the
//! rank correlation and the direction of each step; then the median |error| and the worst ratio
//! against the targets of issue 51.

use std::path::Path;
use std::time::Instant;

use host::cases;
use host::foreign::Module;
use host::predict::{SampleLimits, Sampled, extended_along_keys, predict, sample, sample_foreign};
use host::{LaunchConfig, dim3};
use perf::model::{Machine, Prediction};
use perf::validation::{self, Kernel, Row, Scored};

#[derive(clap::Args)]
pub struct ValidateArgs {
    /// Only the rows whose kernel name contains this (the overall figures are then of those
    /// rows only).
    #[arg(long)]
    only: Option<String>,
    /// Blocks emulated per launch of a CUDA C++ row (the anchor first; its blocks all do the
    /// same work, so one stands for the grid).
    #[arg(long, default_value_t = 1)]
    blocks: usize,
    #[command(flatten)]
    pub(crate) deadline: crate::watchdog::Deadline,
}

pub fn run(args: &ValidateArgs) -> Result<(), String> {
    let start = Instant::now();
    print!("{}", render(args)?);
    eprintln!(
        "validate: {:.1} s on this machine",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The module as ptxas assembled it for each architecture the model knows: machine code and
/// registers (`crate::machine_code`).
type Registers = Vec<host::predict::Assembled>;

/// One row's prediction.
struct Predicted {
    row: &'static Row,
    prediction: Prediction,
    value: f64,
    /// What the prediction's last sentence advises.
    advice: perf::model::Advice,
}

/// What `cargo xtask validate` prints.
pub fn render(args: &ValidateArgs) -> Result<String, String> {
    let rows: Vec<&'static Row> = validation::ROWS
        .iter()
        .filter(|r| {
            args.only
                .as_ref()
                .is_none_or(|o| r.kernel.name().contains(o.as_str()))
        })
        .collect();
    if rows.is_empty() {
        return Err(format!(
            "no row's kernel contains `{}`",
            args.only.as_deref().unwrap_or_default()
        ));
    }
    let root = crate::checkout::checkout()?;
    let mut modules: Vec<(&str, Module, Registers)> = Vec::new();
    let mut predicted = Vec::new();
    for &row in &rows {
        let machine =
            Machine::find(row.device).ok_or_else(|| crate::options::unknown_device(row.device))?;
        // A CUDA C++ row's bytes are what its sample moved; a registered kernel's are compulsory.
        let bytes = match row.kernel {
            Kernel::Cuda { .. } => perf::model::CostBytes::Sampled,
            Kernel::Registered { .. } => perf::model::CostBytes::Compulsory,
        };
        let sampled = match row.kernel {
            Kernel::Cuda { file, .. } => {
                if !modules.iter().any(|(f, ..)| *f == file) {
                    let (module, resources) = load(&root.join(file), file)?;
                    modules.push((file, module, resources));
                }
                let (_, module, resources) = modules.iter().find(|(f, ..)| *f == file).unwrap();
                sample_cuda(row, module, resources, args.blocks)?
            }
            Kernel::Registered { kernel, shape } => sample_registered(kernel, shape)?,
        };
        let prediction = predict(&machine, &sampled)
            .map_err(|e| format!("{} on {}: {e}", row.kernel.name(), row.device))?;
        let value = row.unit.rate(row.work, prediction.seconds);
        let advice = perf::model::next_step(&prediction, &sampled.cost, bytes, &machine).advice;
        predicted.push(Predicted {
            row,
            prediction,
            value,
            advice,
        });
    }
    Ok(table(&predicted))
}

/// The module of a CUDA C++ file compiled by NVRTC, every emulator check on, and its machine code
/// and registers for each device the model knows (ptxas for sm_80, sm_86, sm_90 and sm_100), so
/// that each row is predicted from what its own GPU runs.
fn load(path: &Path, name: &str) -> Result<(Module, Registers), String> {
    let compiled = crate::nvrtc::compile_file(path, &[], &[])?;
    let module = Module::load(compiled.ptx.clone(), name).map_err(|e| e.to_string())?;
    let module = module.with_options(|o| {
        o.global_races = true;
        o.shared_races = true;
    });
    let code = crate::machine_code::for_devices(module.text(), &Machine::all(), false);
    if let Some(failed) = code.iter().find(|f| f.assembled.is_err()) {
        let why = failed.assembled.as_ref().err().cloned().unwrap_or_default();
        return Err(format!("{name}: ptxas for {} failed ({why})", failed.arch));
    }
    Ok((module, crate::machine_code::assembled(&code)))
}

/// A CUDA C++ row's launch at its published grid, `blocks` of it emulated.
fn sample_cuda(
    row: &Row,
    module: &Module,
    assembled: &[host::predict::Assembled],
    blocks: usize,
) -> Result<Sampled, String> {
    let Kernel::Cuda {
        entry,
        grid,
        block,
        args,
        ..
    } = row.kernel
    else {
        unreachable!("a CUDA C++ row")
    };
    let specs: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let buffers = crate::kernel_args::buffers(module.runtime(), &specs)?;
    let launch_args = crate::kernel_args::launch_args(&specs, &buffers)?;
    let cfg = LaunchConfig {
        grid: dim3(grid[0], grid[1], grid[2]),
        block: dim3(block[0], block[1], block[2]),
        dynamic_shared: 0,
    };
    sample_foreign(module, entry, &cfg, &launch_args, assembled, blocks)
        .map_err(|e| format!("{entry}: {e}"))
}

/// A registered kernel at the first of its GPU shapes that contains `shape`, sampled as
/// `cargo xtask predict KERNEL --shape SHAPE` samples it.
fn sample_registered(kernel: &str, shape: &str) -> Result<Sampled, String> {
    let all = cases::all();
    let mut shapes = Vec::new();
    for spec in all.iter().filter(|c| c.kernel == kernel) {
        let limits = SampleLimits::default();
        let resources = crate::nvidia_tools::resources();
        let s = match cases::affine_keys(spec, false) {
            Some(affine) => {
                extended_along_keys(resources, spec, None, Some(shape), limits, affine)?
            }
            None => sample(resources, spec, None, Some(shape), limits)?,
        };
        match s {
            Ok(s) => return Ok(s),
            Err(other) => shapes.push(other),
        }
    }
    Err(format!(
        "{kernel} has no case at a shape containing `{shape}` (its shapes: {})",
        shapes.join(", ")
    ))
}

/// A figure with three significant digits at most (no digits after the point above 100).
fn figure(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// The table, the sources, the progressions and the overall figures.
fn table(rows: &[Predicted]) -> String {
    let mut sources: Vec<&validation::Source> = Vec::new();
    for p in rows {
        if !sources.contains(&&p.row.source) {
            sources.push(&p.row.source);
        }
    }
    let mut out = rows_table(rows, &sources);
    out += &sources_list(rows, &sources);
    let scored: Vec<Scored> = rows
        .iter()
        .map(|p| Scored {
            predicted: p.value,
            published: p.row.published,
            progression: p.row.progression,
            advice: p.advice,
            change: p.row.change,
        })
        .collect();
    let score = validation::score(&scored);
    out += &progressions(rows, &score);
    out += &overall(rows, &score);
    out
}

/// The rows, one line each: step, kernel, GPU, the published figure and the prediction, their
/// ratio, the limiter and the source's number in `sources`.
fn rows_table(rows: &[Predicted], sources: &[&validation::Source]) -> String {
    let header = [
        "step",
        "kernel",
        "GPU",
        "published",
        "predicted (MODELLED)",
        "ratio",
        "limiter",
        "source",
    ];
    let mut cells: Vec<[String; 8]> = vec![header.map(str::to_string)];
    for p in rows {
        let r = p.row;
        let unit = r.unit.name();
        let source = 1 + sources.iter().position(|s| **s == r.source).unwrap();
        let device = perf::specs::GpuSpec::find(r.device).map_or(r.device, |s| s.name);
        cells.push([
            r.label.to_string(),
            r.kernel.name().to_string(),
            device.to_string(),
            format!("{} {unit}", figure(r.published)),
            format!("{} {unit}", figure(p.value)),
            format!("{:.2}", p.value / r.published),
            p.prediction.limiter.name().to_string(),
            format!("[{source}]"),
        ]);
    }
    let widths: Vec<usize> = (0..8)
        .map(|c| cells.iter().map(|r| r[c].chars().count()).max().unwrap())
        .collect();
    let mut out = String::from(
        "Published measurements against the model's predictions (MODELLED: no GPU ran here)\n",
    );
    for r in &cells {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| {
                // Figures right-aligned, words left.
                if (3..=5).contains(&c) {
                    format!("{cell:>w$}")
                } else {
                    format!("{cell:<w$}")
                }
            })
            .collect();
        out += line.join("  ").trim_end();
        out.push('\n');
    }
    out
}

/// The sources, numbered as the table cites them, with the sizes their figures were measured at.
fn sources_list(rows: &[Predicted], sources: &[&validation::Source]) -> String {
    let mut out = String::new();
    out += "\nsources (and the size each figure was measured at, which the prediction is at):\n";
    for (i, s) in sources.iter().enumerate() {
        let hand = s
            .second_hand
            .map(|w| format!("; second-hand: {w}"))
            .unwrap_or_default();
        let mut shapes: Vec<&str> = Vec::new();
        for p in rows.iter().filter(|p| p.row.source == **s) {
            if !shapes.contains(&p.row.shape) {
                shapes.push(p.row.shape);
            }
        }
        out += &format!(
            "[{}] \"{}\", {}, {}{hand}; size: {}\n",
            i + 1,
            s.title,
            s.address,
            s.place,
            shapes.join("; ")
        );
    }
    out
}

/// Per progression: its rank correlation, the steps whose direction the model got wrong, and
/// the advice that pointed against the next step.
fn progressions(rows: &[Predicted], score: &validation::Score) -> String {
    let mut out = String::new();
    out += "\nprogressions (the source's steps in order):\n";
    for g in &score.progressions {
        let steps: Vec<&Predicted> = rows
            .iter()
            .filter(|p| p.row.progression.is_some_and(|(n, _)| n == g.name))
            .collect();
        let wrong: Vec<String> = g
            .directions
            .iter()
            .enumerate()
            .filter(|(_, right)| !**right)
            .map(|(i, _)| steps[i + 1].row.label.to_string())
            .collect();
        let right = g.directions.iter().filter(|r| **r).count();
        let wrong = if wrong.is_empty() {
            String::new()
        } else {
            format!(" (wrong: {})", wrong.join("; "))
        };
        out += &format!(
            "  {}: {} steps, Spearman rank correlation {:.2} (target >= {}), directions right {right} of {}{wrong}\n",
            g.name,
            g.steps,
            g.spearman,
            validation::TARGET_SPEARMAN,
            g.directions.len(),
        );
        let misled: Vec<String> = g
            .misleading_advice
            .iter()
            .map(|&i| {
                format!(
                    "{} advises {:?}, which {} did and measured slower",
                    steps[i].row.label,
                    steps[i].advice,
                    steps[i + 1].row.label
                )
            })
            .collect();
        out += &format!(
            "    advice against the next step: {}\n",
            if misled.is_empty() {
                "none points the wrong way".to_string()
            } else {
                misled.join("; ")
            }
        );
    }
    out
}

/// The overall figures (median error, worst ratio) and which of the five targets are met.
fn overall(rows: &[Predicted], score: &validation::Score) -> String {
    let mut out = String::new();
    let worst = rows
        .iter()
        .find(|p| p.value / p.row.published == score.worst_ratio)
        .expect("the worst ratio is a row's");
    let ratio = |x: f64| {
        if x >= 1.0 {
            format!("{x:.2}x too fast")
        } else {
            format!("{:.2}x too slow", 1.0 / x)
        }
    };
    out += &format!(
        "\noverall, {} rows: median |error| {:.0} % (target <= {:.0} %); worst ratio {:.2}, {} ({} on the {}; target within {}x)\n",
        rows.len(),
        score.median_error * 100.0,
        validation::TARGET_MEDIAN_ERROR * 100.0,
        score.worst_ratio,
        ratio(score.worst_ratio),
        worst.row.kernel.name(),
        worst.row.device,
        validation::TARGET_WORST_RATIO,
    );
    let met = [
        score.median_error <= validation::TARGET_MEDIAN_ERROR,
        score.worst_ratio.ln().abs() <= validation::TARGET_WORST_RATIO.ln(),
        score
            .progressions
            .iter()
            .all(|g| g.spearman >= validation::TARGET_SPEARMAN),
        score
            .progressions
            .iter()
            .all(|g| g.directions.iter().all(|d| *d)),
        score
            .progressions
            .iter()
            .all(|g| g.misleading_advice.is_empty()),
    ];
    out += &format!(
        "targets met: {} of 5 (median, worst ratio, rank correlation, directions, advice: {})\n",
        met.iter().filter(|m| **m).count(),
        met.map(|m| if m { "met" } else { "missed" }).join(", ")
    );
    out
}

#[cfg(test)]
mod tests {
    use host::foreign::Arg;

    use super::*;

    fn module(file: &str) -> Module {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let compiled = crate::nvrtc::compile_file(&root.join(file), &[], &[]).unwrap();
        Module::load(compiled.ptx.clone(), file)
            .unwrap()
            .with_options(|o| {
                o.global_races = true;
                o.shared_races = true;
            })
    }

    /// A CUDA C++ row's entry, grid, block and `--arg`s.
    type CudaRow = (&'static str, [u32; 3], [u32; 3], &'static [&'static str]);

    /// The suite's rows that run an entry of `file`, in the table's order.
    fn rows_of(file: &str) -> Vec<CudaRow> {
        validation::ROWS
            .iter()
            .filter_map(|row| match row.kernel {
                Kernel::Cuda {
                    file: f,
                    entry,
                    grid,
                    block,
                    args,
                } if f == file => Some((entry, grid, block, args)),
                _ => None,
            })
            .collect()
    }

    /// `entry` of `module` on `grid` blocks of the row's `block`, every check on; a failure
    /// names the entry.
    fn launch(module: &Module, entry: &str, grid: emu::Dim3, block: [u32; 3], args: &[Arg]) {
        let cfg = LaunchConfig {
            grid,
            block: dim3(block[0], block[1], block[2]),
            dynamic_shared: 0,
        };
        module
            .launch(entry, &cfg, args)
            .unwrap_or_else(|e| panic!("{entry}: {e}"));
    }

    /// Every SGEMM step of the suite, at M = 128, N = 256, K = 64 (multiples of every step's
    /// tiles) with its row's block and tiles, computes alpha A B + beta C as a CPU GEMM does,
    /// with every emulator check on (bounds, races, barriers).
    #[test]
    fn every_sgemm_step_matches_a_cpu_gemm() {
        let module = module("tests/validation/sgemm.cu");
        let rt = module.runtime();
        let (m, n, k) = (128usize, 256usize, 64usize);
        let (alpha, beta) = (1.5f32, -0.5f32);
        let a = host::reference::uniform(m * k, 1, -1.0, 1.0);
        let b = host::reference::uniform(k * n, 2, -1.0, 1.0);
        let c0 = host::reference::uniform(m * n, 3, -1.0, 1.0);
        let mut want = vec![0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k)
                    .map(|p| f64::from(a[i * k + p]) * f64::from(b[p * n + j]))
                    .sum();
                want[i * n + j] =
                    f64::from(alpha) * dot + f64::from(beta) * f64::from(c0[i * n + j]);
            }
        }
        let (da, db) = (rt.upload(&a).unwrap(), rt.upload(&b).unwrap());
        let mut steps = 0;
        for (entry, grid, block, _) in rows_of("tests/validation/sgemm.cu") {
            // The row's grid is at 4096 x 4096: its tiles are 4096 / grid. Steps 1 to 3 put
            // the rows of C along blockIdx.x, the others its columns.
            let (tx, ty) = (4096 / grid[0] as usize, 4096 / grid[1] as usize);
            let rows_along_x = ["sgemm_naive", "sgemm_coalesced", "sgemm_shared"].contains(&entry);
            let small = if rows_along_x {
                dim3((m / tx) as u32, (n / ty) as u32, 1)
            } else {
                dim3((n / tx) as u32, (m / ty) as u32, 1)
            };
            let dc = rt.upload(&c0).unwrap();
            let args = [
                Arg::I32(m as i32),
                Arg::I32(n as i32),
                Arg::I32(k as i32),
                Arg::F32(alpha),
                Arg::buffer(&da),
                Arg::buffer(&db),
                Arg::F32(beta),
                Arg::buffer(&dc),
            ];
            launch(&module, entry, small, block, &args);
            let got = rt.download(&dc).unwrap();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (f64::from(*g) - w).abs() <= 1e-4 * (1.0 + w.abs()),
                    "{entry}: C[{}][{}] = {g}, want {w}",
                    i / n,
                    i % n
                );
            }
            steps += 1;
        }
        assert_eq!(steps, 11);
    }

    /// The size a row's last argument (`i32:N`) gives.
    fn last_size(args: &[&str]) -> usize {
        let last = args.last().expect("a row has arguments");
        last.strip_prefix("i32:").unwrap().parse().unwrap()
    }

    /// The copy and every transpose at 128 x 128 with their rows' blocks and tiles.
    #[test]
    fn the_transposes_transpose_and_the_copy_copies() {
        let module = module("tests/validation/transpose.cu");
        let rt = module.runtime();
        let n = 128usize;
        let input = host::reference::uniform(n * n, 4, -1.0, 1.0);
        let din = rt.upload(&input).unwrap();
        let mut entries = std::collections::BTreeSet::new();
        for (entry, grid, block, args) in rows_of("tests/validation/transpose.cu") {
            let dout = rt.upload(&vec![0f32; n * n]).unwrap();
            let transpose_args = [Arg::buffer(&din), Arg::buffer(&dout), Arg::I32(n as i32)];
            // The row's grid covers its size, `full`: the copy's along x, the transposes' as
            // tiles.
            let full = last_size(args);
            let small = if grid[1] == 1 {
                dim3((grid[0] as usize * n * n / (full * full)) as u32, 1, 1)
            } else {
                let scale = |g: u32| (g as usize * n / full) as u32;
                dim3(scale(grid[0]), scale(grid[1]), 1)
            };
            launch(&module, entry, small, block, &transpose_args);
            let got = rt.download(&dout).unwrap();
            for i in 0..n {
                for j in 0..n {
                    let want = if entry == "copy" {
                        input[i * n + j]
                    } else {
                        input[j * n + i]
                    };
                    assert_eq!(got[i * n + j], want, "{entry} at ({i}, {j})");
                }
            }
            entries.insert(entry);
        }
        assert_eq!(entries.len(), 9, "{entries:?}");
    }

    /// Every gpu-stream kernel over 3000 elements (three blocks, the last one partly past the
    /// end) writes what its formula says, and only where the source's does.
    #[test]
    fn every_stream_kernel_computes_its_formula() {
        let module = module("tests/validation/stream.cu");
        let rt = module.runtime();
        let n = 3000usize;
        let b: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
        let c: Vec<f64> = (0..n).map(|i| (i as f64 * 0.11).cos()).collect();
        let (db, dc) = (rt.upload(&b).unwrap(), rt.upload(&c).unwrap());
        let mut entries = std::collections::BTreeSet::new();
        for (entry, _, block, _) in rows_of("tests/validation/stream.cu") {
            let a0 = vec![-7.0f64; n];
            let da = rt.upload(&a0).unwrap();
            let args = [
                Arg::buffer(&da),
                Arg::buffer(&db),
                Arg::buffer(&dc),
                Arg::I32(n as i32),
            ];
            launch(
                &module,
                entry,
                dim3((n / block[0] as usize + 1) as u32, 1, 1),
                block,
                &args,
            );
            let got = rt.download(&da).unwrap();
            for i in 0..n {
                let inner = |r: usize| i >= r && i + r < n;
                let want = match entry {
                    "stream_read" => -7.0,
                    "stream_scale" => b[i] * 1.2,
                    "stream_triad" => b[i] + 1.2 * c[i],
                    "stream_3pt" if inner(1) => 0.5 * b[i - 1] - b[i] + 0.5 * b[i + 1],
                    "stream_5pt" if inner(2) => {
                        0.25 * b[i - 2] + 0.25 * b[i - 1] - b[i] + 0.5 * b[i + 1] + 0.5 * b[i + 2]
                    }
                    "stream_3pt" | "stream_5pt" => -7.0,
                    other => panic!("no formula for {other}"),
                };
                assert!(
                    (got[i] - want).abs() < 1e-12,
                    "{entry}[{i}] = {}, want {want}",
                    got[i]
                );
            }
            entries.insert(entry);
        }
        assert_eq!(entries.len(), 5, "{entries:?}");
    }

    /// Every width of the memcpy copies 5000 bytes (not a multiple of 16, so that the bytes past
    /// the wide elements are copied one at a time too) with its row's block, on a grid a quarter
    /// of what one element a thread needs (so that the grid-stride loop turns).
    #[test]
    fn every_memcpy_width_copies_every_byte() {
        let module = module("tests/validation/memcpy.cu");
        let rt = module.runtime();
        let n = 5000usize;
        let src: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
        let dsrc = rt.upload(&src).unwrap();
        let mut entries = std::collections::BTreeSet::new();
        for (entry, _, block, _) in rows_of("tests/validation/memcpy.cu") {
            let ddst = rt.upload(&vec![0u8; n]).unwrap();
            let args = [Arg::buffer(&ddst), Arg::buffer(&dsrc), Arg::U64(n as u64)];
            let quarter = [block[0] / 4, block[1], block[2]];
            launch(&module, entry, dim3(1, 1, 1), quarter, &args);
            assert_eq!(rt.download(&ddst).unwrap(), src, "{entry}");
            entries.insert(entry);
        }
        assert_eq!(entries.len(), 5, "{entries:?}");
    }

    /// Both CUDA-core GEMMs at M = 96, N = 64, K = 160 (multiples of their tiles) compute A B as
    /// a CPU GEMM does.
    #[test]
    fn both_simt_gemms_match_a_cpu_gemm() {
        let module = module("tests/validation/gemm_simt.cu");
        let rt = module.runtime();
        let (m, n, k) = (96usize, 64usize, 160usize);
        let a = host::reference::uniform(m * k, 5, -1.0, 1.0);
        let b = host::reference::uniform(k * n, 6, -1.0, 1.0);
        let (da, db) = (rt.upload(&a).unwrap(), rt.upload(&b).unwrap());
        let mut entries = std::collections::BTreeSet::new();
        for (entry, _, block, _) in rows_of("tests/validation/gemm_simt.cu") {
            let dc = rt.upload(&vec![0f32; m * n]).unwrap();
            let args = [
                Arg::buffer(&da),
                Arg::buffer(&db),
                Arg::buffer(&dc),
                Arg::I32(m as i32),
                Arg::I32(n as i32),
                Arg::I32(k as i32),
            ];
            launch(
                &module,
                entry,
                dim3(n as u32 / block[0], m as u32 / block[1], 1),
                block,
                &args,
            );
            let got = rt.download(&dc).unwrap();
            for i in 0..m {
                for j in 0..n {
                    let want: f64 = (0..k)
                        .map(|p| f64::from(a[i * k + p]) * f64::from(b[p * n + j]))
                        .sum();
                    let g = f64::from(got[i * n + j]);
                    assert!(
                        (g - want).abs() <= 1e-4 * (1.0 + want.abs()),
                        "{entry}: C[{i}][{j}] = {g}, want {want}"
                    );
                }
            }
            entries.insert(entry);
        }
        assert_eq!(entries.len(), 2, "{entries:?}");
    }
}
