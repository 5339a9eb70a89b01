//! The exercises' host side (docs/exercises.md). For each kernel of `kernels::exercises`: its
//! launch, an independent CPU reference with a tolerance, its cost model, the small shapes it is
//! checked at (edges included), the GPU shape its time is predicted at, and its performance
//! target. `cargo xtask exercise <n>` runs one; `tests/tests/exercises.rs` checks in CI that
//! every stub fails and every reference solution passes, on the backend `KERNELS_BACKEND` picks.
//!
//! Stub or solution is a property of the runtime ([`ExerciseRuntime`]): both modules have the
//! same entry names, so the source emulator calls `kernels::exercises::e01_map` or
//! `kernels::solutions::e01_map`, and the PTX backend or a GPU loads the stubs' or the
//! solutions' PTX module.

mod list;

use std::cell::Cell;
use std::sync::OnceLock;

use crate::runtime::{Launched, Runtime};
use crate::{DeviceBuffer, Result};
use perf::cost::Cost;
use perf::model::Limiter;
use ptx::exec::Program;

pub use list::all;

/// Which kernels run: the learner's stubs (`kernels/src/exercises/`) or the reference solutions
/// (`kernels/src/solutions/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    Stub,
    Solution,
}

impl Which {
    /// The source file of exercise `kernel` for this side.
    pub fn file(self, kernel: &str) -> String {
        match self {
            Which::Stub => format!("kernels/src/exercises/{kernel}.rs"),
            Which::Solution => format!("kernels/src/solutions/{kernel}.rs"),
        }
    }
}

/// A runtime that launches one side's exercise kernels.
pub struct ExerciseRuntime {
    rt: Runtime,
    which: Which,
    /// The order (`emu::StoreWatch::allocation`) of the buffer the last check downloaded as its
    /// output, on an emulator.
    output: Cell<Option<u64>>,
}

impl ExerciseRuntime {
    /// The backend `KERNELS_BACKEND` names (as [`Runtime::from_env`]), running `which`.
    pub fn from_env(which: Which) -> Result<Self> {
        let module = (
            program(which)?,
            crate::embedded::exercises_ptx(which == Which::Solution),
        );
        Ok(Self {
            rt: Runtime::from_env_with(Some(module))?,
            which,
            output: Cell::new(None),
        })
    }

    /// The source emulator, running `which` (the model's samples run there).
    pub fn emulator(which: Which) -> Self {
        Self {
            rt: Runtime::emulator(),
            which,
            output: Cell::new(None),
        }
    }

    /// The PTX backend on `which`'s embedded module.
    pub fn ptx(which: Which) -> Result<Self> {
        Ok(Self {
            rt: Runtime::ptx(program(which)?),
            which,
            output: Cell::new(None),
        })
    }

    /// A runtime of the same backend (the same PTX module) and side, with nothing allocated
    /// yet: a check rerun on it allocates its buffers in the same order as on a fresh one.
    /// `None` on a GPU.
    /// The same runtime, its emulator launches run with options `change` amends
    /// ([`Runtime::with_options`]).
    pub fn with_options(&self, change: impl FnOnce(&mut emu::LaunchOptions)) -> Self {
        self.on(self.rt.with_options(change))
    }

    /// This exercise side on `rt` (a view of this runtime's device): what a check handed it
    /// launches through `rt`, with `rt`'s options and observer.
    fn on(&self, rt: Runtime) -> Self {
        Self {
            rt,
            which: self.which,
            output: Cell::new(None),
        }
    }

    /// Runs `launches` on a view of this runtime and returns, beside their result, what their
    /// launches observed ([`Runtime::observe`]).
    pub fn observe<R>(&self, launches: impl FnOnce(&ExerciseRuntime) -> R) -> (R, emu::Observed) {
        let (rt, observer) = self.rt.observing();
        let result = launches(&self.on(rt));
        (result, self.rt.observed(&observer))
    }

    fn fresh(&self) -> Option<Self> {
        let rt = match self.rt.backend() {
            crate::runtime::Backend::Emulator(_) => Runtime::emulator(),
            crate::runtime::Backend::Ptx(ptx) => Runtime::ptx(ptx.program()),
            crate::runtime::Backend::Cuda(_) => return None,
        };
        Some(self.on(rt))
    }

    /// Downloads the output a check compares, noting which buffer it is, so that a wrong
    /// element can be watched in a rerun ([`check`]).
    pub fn download_output(&self, buf: &DeviceBuffer<f32>) -> Result<Vec<f32>> {
        let order = self
            .rt
            .emulated()
            .and_then(|emu| emu.allocation_order(buf.ptr().addr()));
        self.output.set(order);
        self.rt.download(buf)
    }

    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    pub fn which(&self) -> Which {
        self.which
    }
}

/// The decoded PTX module of `which`, once per process.
fn program(which: Which) -> Result<&'static Program> {
    static CACHE: [OnceLock<std::result::Result<&'static Program, String>>; 2] =
        [OnceLock::new(), OnceLock::new()];
    let solutions = which == Which::Solution;
    CACHE[usize::from(solutions)]
        .get_or_init(|| {
            let origin = format!(
                "embedded {} sm_80",
                if solutions { "solutions" } else { "exercises" }
            );
            Program::load(crate::embedded::exercises_ptx(solutions), origin)
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(crate::Error::Ptx)
}

/// Launches exercise kernel `$kernel` from the stubs or the solutions, as the runtime says:
/// `launch_exercise!(ert, cfg, e01_map(x, y, a, b, n))`.
macro_rules! launch_exercise {
    ($ert:expr, $cfg:expr, $kernel:ident ( $($arg:ident),* $(,)? )) => {{
        let ert: &$crate::exercises::ExerciseRuntime = $ert;
        let cfg: $crate::LaunchConfig = $cfg;
        match ert.which() {
            $crate::exercises::Which::Stub => {
                $crate::launch!(ert.runtime(), cfg, exercises::$kernel($($arg),*))
            }
            $crate::exercises::Which::Solution => {
                $crate::launch!(ert.runtime(), cfg, solutions::$kernel($($arg),*))
            }
        }
    }};
}
pub(crate) use launch_exercise;

/// A performance target: on `device` (a `perf::model::Machine` key), the resource the model
/// should find limiting and the least fraction of the roofline bound (the cost model's time at
/// the device's roofs over the predicted time) the kernel should reach. Predicted, never
/// measured: the model's figures are MODELLED.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    pub device: &'static str,
    pub limiter: Limiter,
    pub fraction: f64,
}

/// A problem size: up to three dimensions, as each exercise reads them (`[n, 1, 1]`,
/// `[rows, cols, 1]`, `[m, n, k]`).
pub type Shape = [usize; 3];

/// One exercise.
pub struct Exercise {
    /// 1, 2, ...: the order of the pyramid.
    pub number: u32,
    /// The kernel's name (its PTX entry and its file's stem): `e01_map`.
    pub kernel: &'static str,
    /// What to write, in a line.
    pub title: &'static str,
    /// The level of the pyramid it is about, in a line.
    pub why: &'static str,
    /// The chapter to read.
    pub chapter: &'static str,
    pub target: Target,
    /// The shapes the check runs at: small, with the edges (a partial last block, one element).
    pub shapes: &'static [Shape],
    /// The shape the time is predicted at.
    pub gpu_shape: Shape,
    /// The shape in words (`4097 elements`).
    pub describe: fn(Shape) -> String,
    /// Launches the kernel at `shape` on inputs drawn from `seed` and compares its output with
    /// the reference.
    pub check: fn(&ExerciseRuntime, Shape, u64) -> std::result::Result<Checked, Failure>,
    /// Launches the kernel at `shape` on cheap inputs (for a sampled prediction); its cost model.
    pub launch: fn(&ExerciseRuntime, Shape) -> Result<Cost>,
    /// The cost model at `shape`.
    pub cost: fn(Shape) -> Cost,
}

/// A check that passed: what was compared.
#[derive(Clone, Debug)]
pub struct Checked {
    pub summary: String,
}

/// Why a check failed.
#[derive(Debug)]
pub enum Failure {
    /// The launch failed: the emulator's report (a race, an access out of bounds, a barrier
    /// some threads skip...) or a refused launch.
    Launch(crate::Error),
    /// The output differs from the reference: what [`compare`] says, the index of the first
    /// wrong element in the output, and, from [`check`]'s rerun on an emulator, who last wrote
    /// it.
    Wrong {
        message: String,
        element: Option<usize>,
        writer: Option<String>,
    },
    /// The emulator counted other FLOPs, or more HBM bytes, than the exercise's cost model.
    Counters(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Launch(e) => write!(f, "{e}"),
            Failure::Wrong {
                message,
                writer: None,
                ..
            } => write!(f, "{message}"),
            Failure::Wrong {
                message,
                writer: Some(w),
                ..
            } => write!(f, "{message}; {w}"),
            Failure::Counters(s) => write!(f, "{s}"),
        }
    }
}

impl From<crate::Error> for Failure {
    fn from(e: crate::Error) -> Self {
        Failure::Launch(e)
    }
}

/// The exercise numbered `n`, or named `n` (`3`, `e03_block_sum`, `block_sum`).
pub fn find(n: &str) -> Option<&'static Exercise> {
    all().iter().find(|e| {
        n.parse::<u32>().is_ok_and(|k| k == e.number)
            || e.kernel == n
            || e.kernel.split_once('_').is_some_and(|(_, name)| name == n)
    })
}

/// Exercise `e`'s check at `shape`, as `e.check`; a wrong value also says who last wrote it:
/// the check is rerun on a fresh runtime of the same backend (so that it allocates its buffers
/// in the same order) with the stores to that element of the output recorded. A check that
/// passes, or fails otherwise, runs once.
pub fn check(
    e: &Exercise,
    ert: &ExerciseRuntime,
    shape: Shape,
    seed: u64,
) -> std::result::Result<Checked, Failure> {
    let first = ert.rt.emulated().map(|emu| emu.allocations_registered());
    ert.output.set(None);
    let (message, i) = match (e.check)(ert, shape, seed) {
        Err(Failure::Wrong {
            message,
            element: Some(i),
            writer: None,
        }) => (message, i),
        other => return other,
    };
    let writer = (|| {
        let allocation = ert.output.get()? - first?;
        let rerun = ert.fresh()?;
        let watch = emu::StoreWatch {
            allocation,
            offset: i * size_of::<f32>(),
            bytes: size_of::<f32>(),
        };
        rerun.rt.last_store(watch, |watched| {
            // On the watching view itself: its observer is where the watched store is left.
            let _ = (e.check)(&rerun.on(watched.clone()), shape, seed);
        })
    })();
    Err(Failure::Wrong {
        message,
        element: Some(i),
        writer,
    })
}

/// How far an output may be from its reference: each element's own bound.
#[derive(Clone, Copy, Debug)]
pub struct Want {
    pub value: f64,
    /// The largest `|got - value|` accepted.
    pub tolerance: f64,
}

/// The unit roundoff of f32 (`2^-24`): a correctly rounded f32 operation is off by at most this
/// times its result.
pub const F32_U: f64 = 1.0 / (1u64 << 24) as f64;

/// A sum of `terms` f32 values computed in f32 in any order is off by at most
/// `(terms - 1) u / (1 - (terms - 1) u)` times the sum of their magnitudes (Higham, Accuracy and
/// Stability of Numerical Algorithms, 4.2): the tolerance of every sum the exercises check,
/// with `magnitude` the sum of `|term|` (the terms themselves rounded once more for a product).
pub fn sum_tolerance(terms: usize, magnitude: f64) -> f64 {
    let nu = terms as f64 * F32_U;
    nu / (1.0 - nu) * magnitude
}

/// Compares `got` with `want` element by element; names the first element outside its bound.
pub fn compare(
    got: &[f32],
    want: &[Want],
    name: impl Fn(usize) -> String,
) -> std::result::Result<String, Failure> {
    if got.len() != want.len() {
        return Err(Failure::Wrong {
            message: format!("{} outputs, expected {}", got.len(), want.len()),
            element: None,
            writer: None,
        });
    }
    let mut worst = 0.0f64;
    for (i, (&g, w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w.value).abs();
        if err.is_nan() || err > w.tolerance {
            let wrong = got
                .iter()
                .zip(want)
                .filter(|(g, w)| {
                    let e = (f64::from(**g) - w.value).abs();
                    e.is_nan() || e > w.tolerance
                })
                .count();
            return Err(Failure::Wrong {
                message: format!(
                    "{} is {g}, expected {} (tolerance {:.1e}); {wrong} of {} outputs are wrong",
                    name(i),
                    w.value,
                    w.tolerance,
                    got.len()
                ),
                element: Some(i),
                writer: None,
            });
        }
        worst = worst.max(err);
    }
    let outputs = match got.len() {
        1 => "1 output".to_string(),
        n => format!("{n} outputs"),
    };
    Ok(format!(
        "{outputs} within tolerance (max |error| {worst:.1e})"
    ))
}

/// The global-memory bytes the launch's loads and stores asked for (the emulator's counters)
/// against what a kernel that touches each input once asks for: its loads at most `reads`
/// bytes (a kernel may read a little more: a halo, a tile's edge), its stores exactly `writes`.
/// Nothing to compare on a GPU, which counts nothing (`None`).
pub fn check_traffic(
    launched: &Launched,
    reads: u64,
    writes: u64,
) -> std::result::Result<&'static str, Failure> {
    let Some(c) = launched else {
        return Ok("");
    };
    if c.global_read_bytes > reads {
        return Err(Failure::Counters(format!(
            "the kernel's loads asked for {} bytes of global memory, {:.2}x the {reads} of a kernel that loads each input once: reuse the data from shared memory or registers instead of loading it again",
            c.global_read_bytes,
            c.global_read_bytes as f64 / reads.max(1) as f64
        )));
    }
    if c.global_write_bytes != writes {
        return Err(Failure::Counters(format!(
            "the kernel's stores wrote {} bytes of global memory, expected {writes} (each output once)",
            c.global_write_bytes
        )));
    }
    Ok("; global loads and stores within the exercise's traffic")
}
