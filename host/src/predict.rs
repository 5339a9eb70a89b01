//! The prediction pipeline: a case ([`crate::cases`]) run at its GPU shape with sampled launches
//! on the emulator (or the PTX backend, which also counts every instruction), extended along the
//! keys where a block is too long to emulate, and handed to the performance model
//! ([`perf::model`]) with each kernel's registers. It launches and reads counts; the model only
//! reads them. The registers come from ptxas, which the CLI runs and hands in ([`Resources`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use emu::sample::SampledLaunch;
use perf::model::{self, KernelResources, LaunchInput, Machine, Prediction};
use ptx::decode::Class;
use ptx::exec::Program;

use crate::Runtime;
use crate::cases::{self, CaseSpec, Scale};
use crate::runtime::Backend;

/// What the model needs of each kernel that no launch counts: its registers and static shared
/// memory as ptxas assembled it (the CLI runs ptxas and hands them in; none known, occupancy
/// counts threads and shared memory only), and a note of where they came from.
#[derive(Clone, Copy, Debug)]
pub struct Resources<'a> {
    pub kernels: &'a [(String, KernelResources)],
    pub note: &'a str,
}

/// One launch of a sampled case, with what the model needs besides the sample.
#[derive(Clone)]
pub struct SampledLaunchInput {
    pub sample: emu::sample::SampledLaunch,
    pub resources: KernelResources,
    /// The kernel's registers and static shared memory as ptxas assembled it for each
    /// architecture (`sm_86`), where known: a device's prediction reads its own
    /// ([`resources_for`]), else `resources`.
    pub resources_by_arch: Vec<(String, KernelResources)>,
    pub warp_instructions: Option<f64>,
    /// Of those, the ones on a tensor-core product's result (`ptx::analysis::dataflow`).
    pub on_products: Option<f64>,
    pub exps: f64,
}

/// A case's launches at its GPU shape, sampled.
pub struct Sampled {
    pub shape: String,
    pub backend: String,
    pub launches: Vec<SampledLaunchInput>,
    /// Wall seconds the sample took here.
    pub seconds: f64,
    /// Where the registers came from.
    pub resources_note: String,
    /// The two key lengths whose samples were extended to the case's
    /// ([`extended_along_keys`]), if they were.
    pub extended_from: Option<(usize, usize)>,
    /// Device calls emulated for it, every sample together (with a budget set; 0 without):
    /// what it cost here, where an extended launch's own `work` is what its anchor would cost.
    pub work_spent: u64,
    /// The case's compulsory cost at the sampled shape (its bytes without the re-reads an L2
    /// serves, its FLOPs), which the prediction's last sentence ([`perf::model::next_step`])
    /// measures it against.
    pub cost: perf::cost::Cost,
}

impl Sampled {
    /// What was sampled, where and how long it took: the line above a prediction.
    pub fn header(&self, kernel: &str) -> String {
        let first = self.launches.first();
        let extended = self.extended_from.map_or(String::new(), |(a, b)| {
            format!(", extended along the keys from samples at {a} and {b} keys")
        });
        format!(
            "{kernel} at {} ({}): {} of {} blocks emulated per launch in {:.1} s, every check on{extended}",
            self.shape,
            self.backend,
            first.map_or(0, |l| l.sample.blocks.len()),
            first.map_or(0, |l| l.sample.grid_blocks()),
            self.seconds
        )
    }
}

/// How much of a launch a sample may emulate.
#[derive(Clone, Copy, Debug, Default)]
pub struct SampleLimits {
    /// At most this many blocks of the plan per launch.
    pub blocks: Option<usize>,
    /// Stop (with an error) past this many device calls per launch.
    pub budget: Option<u64>,
    /// Run no block of this kernel's launches (`emu::Sampling::skip`).
    pub skip: Option<&'static str>,
}

/// Runs `spec`'s case at its GPU shape with sampled launches, on the source emulator or, given a
/// program, on the PTX backend; `Ok(Err(shape))` when the case's shape does not contain `shape`.
pub fn sample(
    resources: Resources<'_>,
    spec: &CaseSpec,
    program: Option<&'static Program>,
    shape: Option<&str>,
    limits: SampleLimits,
) -> Result<Result<Sampled, String>, String> {
    sample_at_keys(resources, spec, program, shape, limits, None)
}

/// [`sample`] with `keys` keys per head in place of the case's (`cases::Scale::Model`).
pub fn sample_at_keys(
    resources: Resources<'_>,
    spec: &CaseSpec,
    program: Option<&'static Program>,
    shape: Option<&str>,
    limits: SampleLimits,
    keys: Option<usize>,
) -> Result<Result<Sampled, String>, String> {
    let rt = match program {
        Some(p) => Runtime::ptx(p),
        None => Runtime::emulator(),
    };
    let device = match rt.backend() {
        Backend::Emulator(_) => None,
        Backend::Ptx(ptx) => Some(ptx),
        Backend::Cuda(_) => unreachable!("built on the CPU"),
    };
    if !cases::runs_on(&rt, spec) {
        return Err(format!(
            "{} needs sm_90a: run the PTX backend on the sm_90a module (KERNELS_PTX_ARCH=sm_90a)",
            spec.kernel
        ));
    }
    let start = Instant::now();
    let mut case = spec
        .build(&rt, Scale::Model { keys })
        .map_err(|e| e.to_string())?;
    if shape.is_some_and(|want| !case.gpu.shape.contains(want)) {
        return Ok(Err(case.gpu.shape.clone()));
    }
    let sampling = rt.with_options(|o| {
        o.sampling = Some(emu::Sampling {
            blocks: limits.blocks.unwrap_or(emu::sample::WHOLE_PLAN),
            budget: limits.budget,
            skip: limits.skip,
        });
        o.instruction_mix = device.is_some();
    });
    let (launched, observed) = sampling.observe(|rt| (case.launch)(rt));
    launched.map_err(|e| e.to_string())?;
    let mix = device.map(|d| d.mix(&observed));
    let samples = observed.samples;
    let work_spent = samples.iter().map(|s| s.work).sum();
    let launches = samples
        .into_iter()
        .map(|sample| launch_input(sample, mix.as_deref(), resources.kernels))
        .collect();
    Ok(Ok(Sampled {
        shape: case.gpu.shape.clone(),
        backend: rt.device_name(),
        launches,
        seconds: start.elapsed().as_secs_f64(),
        resources_note: resources.note.to_string(),
        extended_from: None,
        work_spent,
        cost: case.cost,
    }))
}

/// A PTX module as ptxas assembled it for one architecture (the CLI runs ptxas and nvdisasm):
/// its machine code's loads and stores per PTX line, and each kernel's registers and static
/// shared memory.
#[derive(Clone, Debug)]
pub struct Assembled {
    pub code: emu::machine_code::MachineCode,
    pub resources: Vec<(String, KernelResources)>,
}

/// The launch of `entry` of a foreign module (`cargo xtask check`'s, `validate`'s) at `at`,
/// sampled as `cargo xtask predict --ptx` samples a project kernel: the plan's blocks
/// (`emu::sample::plan`, every check on) with the instruction mix the PTX backend counts, each
/// block's requests also counted as each of `assembled`'s machine code issues them, and its
/// registers per architecture ([`predict`] reads the device's own). A foreign kernel declares no
/// compulsory cost, so the bytes and FLOPs the sample counts stand for it: `next_step` reads them
/// as bytes moved, no lower bound. `blocks`: at most that many of the plan's blocks (check
/// samples the whole plan).
pub fn sample_foreign(
    module: &crate::foreign::Module,
    entry: &str,
    at: &crate::LaunchConfig,
    args: &[crate::foreign::Arg],
    assembled: &[Assembled],
    blocks: usize,
) -> Result<Sampled, String> {
    let Backend::Ptx(device) = module.runtime().backend() else {
        return Err("the module's runtime is not the PTX backend".into());
    };
    let start = Instant::now();
    let sampling = module.with_options(|o| {
        o.sampling = Some(emu::Sampling {
            blocks,
            budget: None,
            skip: None,
        });
        o.instruction_mix = true;
        // Leaked, as the PTX backend's sites are: a launch option is `Copy`, and a command
        // samples a module a few times per process.
        let codes: Vec<_> = assembled.iter().map(|a| a.code.clone()).collect();
        o.machine_code = (!codes.is_empty()).then(|| &*Box::leak(codes.into_boxed_slice()));
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
        .map(|s| {
            // The first architecture's registers stand for a device with none of its own.
            let first = assembled
                .first()
                .map_or(&[][..], |a| a.resources.as_slice());
            let mut input = launch_input(s, Some(mix.as_slice()), first);
            input.resources_by_arch = assembled
                .iter()
                .map(|a| {
                    let r = resources_of_kernel(&a.resources, input.sample.kernel);
                    (a.code.arch.clone(), r)
                })
                .collect();
            input
        })
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

/// One sampled launch with what the model needs besides it: the PTX backend's instruction
/// `mix` of the sampled blocks, scaled to the grid (`None` on the source emulator, whose
/// kernels count their exponentials themselves), and the kernel's registers from `resources`.
pub fn launch_input(
    sample: SampledLaunch,
    mix: Option<&[ptx::exec::KernelMix]>,
    resources: &[(String, KernelResources)],
) -> SampledLaunchInput {
    let scale = sample.grid_blocks() as f64 / sample.blocks.len().max(1) as f64;
    let kernel_mix = mix.and_then(|m| m.iter().find(|k| k.kernel == sample.kernel));
    // The mix counts per thread (a warp-wide instruction 32 times) over the sampled
    // blocks: to warp instructions over the grid.
    let warp_instructions =
        kernel_mix.map(|k| k.per_instruction.iter().sum::<u64>() as f64 / 32.0 * scale);
    let on_products = kernel_mix.map(|k| k.on_products(None) as f64 / 32.0 * scale);
    let exps = match kernel_mix {
        Some(k) => {
            k.classes()
                .iter()
                .filter(|(c, _)| *c == Class::Ex2)
                .map(|(_, n)| *n as f64)
                .sum::<f64>()
                * scale
        }
        None => sample.mean(|b| b.counters.exps as f64) * sample.grid_blocks() as f64,
    };
    let resources = resources_of_kernel(resources, sample.kernel);
    SampledLaunchInput {
        sample,
        resources,
        resources_by_arch: Vec::new(),
        warp_instructions,
        on_products,
        exps,
    }
}

/// `spec`'s case at `affine.keys` keys per head (`cases::affine_keys`), from two samples of its
/// anchor blocks at the shorter lengths `affine.short`, each launch extended along the line
/// through them (`SampledLaunch::extended`): what a block too long to emulate at the GPU shape
/// would count. Where only one launch of the case is affine in the keys (`affine.only`: the
/// causal naive flow's P V, whose masked P entries are zeros it multiplies all the same), the
/// case is also sampled at the GPU shape with that launch's blocks skipped, and the extension
/// takes that launch's place: the other launches (the mask's) at their own size, within
/// `limits`.
pub fn extended_along_keys(
    resources: Resources<'_>,
    spec: &CaseSpec,
    program: Option<&'static Program>,
    shape: Option<&str>,
    limits: SampleLimits,
    affine: cases::AffineKeys,
) -> Result<Result<Sampled, String>, String> {
    let anchor = SampleLimits {
        blocks: Some(1),
        ..limits
    };
    let at = |k| sample_at_keys(resources, spec, program, shape, anchor, Some(k));
    let a = match at(affine.short.0)? {
        Ok(a) => a,
        Err(other) => return Ok(Err(other)),
    };
    let b = at(affine.short.1)?.map_err(|other| format!("{} at {other}", spec.kernel))?;
    let Some(only) = affine.only else {
        return extend(a, b, affine).map(Ok);
    };
    let skipping = SampleLimits {
        skip: Some(only),
        ..limits
    };
    let direct = sample_at_keys(resources, spec, program, shape, skipping, Some(affine.keys))?
        .map_err(|other| format!("{} at {other}", spec.kernel))?;
    mix(direct, a, b, only, affine).map(Ok)
}

/// Two samples of one case at `affine.short.0` and `affine.short.1` keys, every launch extended
/// to `affine.keys`.
fn extend(a: Sampled, b: Sampled, affine: cases::AffineKeys) -> Result<Sampled, String> {
    let short = affine.short;
    if a.launches.len() != b.launches.len() {
        return Err(format!(
            "{} launches at {} keys and {} at {}: not one case along the keys",
            a.launches.len(),
            short.0,
            b.launches.len(),
            short.1
        ));
    }
    let launches = a
        .launches
        .iter()
        .zip(&b.launches)
        .map(|(la, lb)| extend_launch(la, lb, affine))
        .collect::<Result<_, String>>()?;
    // The cost is affine in the keys too (each key's bytes and FLOPs once per query).
    let line = emu::sample::along_line(short, affine.keys);
    let along = |x: u64, y: u64| line(x as f64, y as f64).round() as u64;
    let cost = perf::cost::Cost {
        bytes_read: along(a.cost.bytes_read, b.cost.bytes_read),
        bytes_written: along(a.cost.bytes_written, b.cost.bytes_written),
        flops: along(a.cost.flops, b.cost.flops),
        exps: along(a.cost.exps, b.cost.exps),
        unit: a.cost.unit,
        ..perf::cost::Cost::NONE
    };
    Ok(Sampled {
        launches,
        seconds: a.seconds + b.seconds,
        extended_from: Some(short),
        work_spent: a.work_spent + b.work_spent,
        cost,
        ..a
    })
}

/// One launch of two samples, extended to `affine.keys` with everything the model reads
/// besides the sample (warp instructions and exponentials, on the same line).
fn extend_launch(
    la: &SampledLaunchInput,
    lb: &SampledLaunchInput,
    affine: cases::AffineKeys,
) -> Result<SampledLaunchInput, String> {
    let (short, keys) = (affine.short, affine.keys);
    let line = emu::sample::along_line(short, keys);
    Ok(SampledLaunchInput {
        sample: SampledLaunch::extended(&la.sample, &lb.sample, short, keys)?,
        resources: la.resources,
        resources_by_arch: la.resources_by_arch.clone(),
        warp_instructions: la
            .warp_instructions
            .zip(lb.warp_instructions)
            .map(|(x, y)| line(x, y)),
        on_products: la.on_products.zip(lb.on_products).map(|(x, y)| line(x, y)),
        exps: line(la.exps, lb.exps),
    })
}

/// `direct`, sampled at the GPU shape with the launches of `only` skipped, with those launches
/// replaced by the extension of their samples in `a` and `b`.
fn mix(
    direct: Sampled,
    a: Sampled,
    b: Sampled,
    only: &str,
    affine: cases::AffineKeys,
) -> Result<Sampled, String> {
    fn one<'s>(s: &'s Sampled, only: &str, at: usize) -> Result<&'s SampledLaunchInput, String> {
        let mut of = s.launches.iter().filter(|l| l.sample.kernel == only);
        match (of.next(), of.next()) {
            (Some(l), None) => Ok(l),
            _ => Err(format!("{only}: not launched once at {at} keys")),
        }
    }
    let (la, lb) = (
        one(&a, only, affine.short.0)?,
        one(&b, only, affine.short.1)?,
    );
    let extended = extend_launch(la, lb, affine)?;
    let mut launches = Vec::with_capacity(direct.launches.len());
    for l in direct.launches {
        if l.sample.kernel != only {
            launches.push(l);
            continue;
        }
        if l.sample.config.grid != extended.sample.config.grid {
            return Err(format!(
                "{only}: the extension's grid {:?} is not the launch's {:?} at {} keys",
                extended.sample.config.grid, l.sample.config.grid, affine.keys
            ));
        }
        launches.push(extended.clone());
    }
    Ok(Sampled {
        launches,
        seconds: direct.seconds + a.seconds + b.seconds,
        extended_from: Some(affine.short),
        work_spent: direct.work_spent + a.work_spent + b.work_spent,
        ..direct
    })
}

/// The model's prediction of a sampled case on `machine`: each launch's traffic as the
/// machine's own architecture's machine code issues it, where the sample counted it
/// (`emu::LaunchOptions::machine_code`), else as the PTX does.
pub fn predict(machine: &Machine, sampled: &Sampled) -> Result<Prediction, String> {
    let launches = sampled
        .launches
        .iter()
        .map(|l| {
            let issued = l.sample.as_issued_by(|a| machine.spec.runs_code_for(a));
            model::predict_launch(
                machine,
                &LaunchInput {
                    sample: issued.as_ref().unwrap_or(&l.sample),
                    resources: resources_for(l, machine),
                    warp_instructions: l.warp_instructions,
                    on_products: l.on_products,
                    exps: l.exps,
                },
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let p = Prediction::of(machine, launches).ok_or("the case launched nothing")?;
    Ok(Prediction {
        extended_from: sampled.extended_from,
        ..p
    })
}

/// A launch's registers and static shared memory on `machine`: ptxas's for the machine's
/// architecture (sm_90a's for a Hopper kernel that needs it) where the input has them, else the
/// one set it has.
pub fn resources_for(input: &SampledLaunchInput, machine: &Machine) -> KernelResources {
    input
        .resources_by_arch
        .iter()
        .find(|(a, _)| machine.spec.runs_code_for(a))
        .map_or(input.resources, |(_, r)| *r)
}

/// `kernel`'s resources in a list of them, or none known (occupancy then counts threads and
/// shared memory only).
pub fn resources_of_kernel(list: &[(String, KernelResources)], kernel: &str) -> KernelResources {
    list.iter()
        .find(|(name, _)| name == kernel)
        .map(|(_, r)| *r)
        .unwrap_or_default()
}

/// Device calls (accesses, barriers, collectives: the emulator's unit of work, about 200 ns
/// each sampled and profiled on this machine) the predictions of `cargo xtask run` may make, all
/// rows together, and one row's sample. Counts rather than seconds, so that which rows are
/// predicted does not depend on the machine's speed or load.
const RUN_BUDGET: u64 = 250_000_000;
const ROW_BUDGET: u64 = 12_000_000;

/// What the predictions of one run have spent of its budget, in device calls
/// ([`within_budget`]): made by the run and handed to each row's prediction.
#[derive(Debug, Default)]
pub struct RunBudget {
    spent: AtomicU64,
}

impl RunBudget {
    fn spend(&self, calls: u64) {
        self.spent.fetch_add(calls, Ordering::Relaxed);
    }

    /// Whether one more row's budget fits in what is left.
    fn has_room_for_a_row(&self) -> bool {
        RUN_BUDGET.saturating_sub(self.spent.load(Ordering::Relaxed)) >= ROW_BUDGET
    }
}

/// One `cargo xtask run` row sampled for the run's device, within the run's budget: the anchor
/// block first; then the whole plan (edge blocks and trends) where the anchor's cost times the
/// plan's blocks fits the row's budget, else the anchor alone; or why not (and the command that
/// predicts it anyway). A row whose one block is over the budget costs the budget once. On the
/// source emulator, or on `program`'s PTX, whose counted instructions add the issue limit (the
/// run's own backend). [`predict`] reads it on any device; [`below_the_roofline`] checks it on
/// all of them.
pub fn within_budget(
    resources: Resources<'_>,
    run: &RunBudget,
    spec: &CaseSpec,
    shape: &str,
    gpu: &perf::specs::GpuSpec,
    program: Option<&'static Program>,
) -> Result<Sampled, String> {
    let machine = Machine::find(gpu.key).ok_or_else(|| format!("no model of {}", gpu.name))?;
    if spec.spec.sm90a_only && !machine.has_wgmma {
        // Known before any block runs: nothing to sample.
        return Err(perf::model::no_wgmma(&machine));
    }
    let later = format!(
        "cargo xtask predict {} --shape '{shape}'{}",
        spec.kernel,
        if program.is_some() { " --ptx" } else { "" }
    );
    // Counts what a sample emulated against the run's budget: a sample stopped by its row's
    // budget cost the whole budget.
    let spend =
        |sampled: Result<Result<Sampled, String>, String>| -> Result<Option<Sampled>, String> {
            match sampled {
                Ok(Ok(s)) => {
                    run.spend(s.work_spent);
                    Ok(Some(s))
                }
                Ok(Err(_)) => Err(format!("no case of {} at {shape}", spec.kernel)),
                Err(_) => {
                    run.spend(ROW_BUDGET);
                    Ok(None)
                }
            }
        };
    if !run.has_room_for_a_row() {
        return Err(format!(
            "the run's budget of {RUN_BUDGET} emulated device calls for predictions is spent: {later}"
        ));
    }
    let budget = |blocks| SampleLimits {
        blocks: Some(blocks),
        budget: Some(ROW_BUDGET),
        ..SampleLimits::default()
    };
    let too_long = |what: &str| {
        format!("its sample makes more than {ROW_BUDGET} device calls even {what}: {later}")
    };
    let whole_plan = budget(emu::sample::WHOLE_PLAN);
    if let Some(affine) = cases::affine_keys(spec, program.is_some()) {
        // Two short samples extended along the keys stand for the anchor at the GPU shape,
        // exactly (`extending_along_the_keys_agrees_with_a_direct_sample`) and at a fraction of
        // its cost (the f32 rows: about 67 million calls a block at 4096 keys); a launch that
        // is not affine (the causal mask's) is sampled at the GPU shape, its whole plan.
        let sampled =
            extended_along_keys(resources, spec, program, Some(shape), whole_plan, affine);
        return spend(sampled)?.ok_or_else(|| too_long("at the shorter key lengths"));
    }
    let Some(anchor) = spend(sample(resources, spec, program, Some(shape), budget(1)))? else {
        return Err(too_long("with one block"));
    };
    let plan = emu::sample::WHOLE_PLAN as u64;
    if anchor.work_spent.saturating_mul(plan) <= ROW_BUDGET
        && let Some(whole) = spend(sample(resources, spec, program, Some(shape), whole_plan))?
    {
        return Ok(whole);
    }
    Ok(anchor)
}

/// The roofline's law, checked on every device the model knows: no prediction of a case may be
/// faster than the roofline bound of its compulsory cost at the GPU shape (`bound`: the
/// compulsory bytes at the datasheet's HBM bandwidth, the FLOPs and exponentials at their
/// peaks). A prediction below it is a bug in the model, never a kernel that beats the roofline:
/// the first such device, with both times. Devices the case cannot run on (wgmma) are skipped.
pub fn below_the_roofline(sampled: &Sampled, bound: &perf::cost::Cost) -> Option<String> {
    use perf::cost::CostRoofline;
    Machine::all().iter().find_map(|m| {
        let p = predict(m, sampled).ok()?;
        let floor = bound.bound_seconds(m.spec);
        // A relative slack of 1e-9: the two sides are sums of the same figures in another order.
        (p.seconds < floor * (1.0 - 1e-9)).then(|| {
            format!(
                "predicted {:.4e} s on {}, below its roofline bound {:.4e} s: the model breaks the roofline",
                p.seconds, m.spec.name, floor
            )
        })
    })
}
