//! Host side of `kernels::softmax`: row softmax of a row-major `rows x cols` matrix, three ways,
//! each with its cost model. The defined results on `-inf`, `+inf` and NaN are documented on
//! `kernels::softmax`; [`crate::reference::softmax_f32`] implements them independently.
//!
//! ```
//! use host::{Runtime, ops::softmax};
//! let rt = Runtime::emulator();
//! let x = rt.upload(&[1.0f32, 2.0, 3.0, 0.0, 0.0, f32::NEG_INFINITY]).unwrap();
//! let mut y = rt.alloc::<f32>(6).unwrap();
//! softmax::fused(&rt, &x, &mut y, 2, 3).unwrap();
//! let y = rt.download(&y).unwrap();
//! assert!((y[0] + y[1] + y[2] - 1.0).abs() < 1e-6);
//! assert_eq!(&y[3..], &[0.5, 0.5, 0.0]);
//! ```

use half::bf16;
use kernels::softmax::{
    EXP_SUM_FLOPS, FUSED_ON_CHIP_COLS, MAX_FLOPS, NORMALISE_FLOPS, ONLINE_FLOPS, RESCALE_FLOPS,
};

use super::{elements, len_u32};
use crate::buffer::{DeviceBuffer, Element};
use crate::registry::{Spec, SpecElement};
use crate::runtime::{Launched, Runtime};
use crate::{Error, Result};
use perf::cost::{ComputeUnit, Cost, product, sum};

/// The three implementations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Variant {
    /// Three kernels: row max, row sum of `exp(x - max)`, normalise. Reads the row three times.
    Naive,
    /// Two kernels: the online `(m, l)` pass, then normalise. Reads the row twice.
    Online,
    /// One kernel. Reads the row once when it fits on chip ([`FUSED_ON_CHIP_COLS`]), else twice.
    Fused,
}

impl Variant {
    /// All three, slowest first.
    pub const ALL: [Variant; 3] = [Variant::Naive, Variant::Online, Variant::Fused];

    /// Lower-case name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Naive => "naive",
            Variant::Online => "online",
            Variant::Fused => "fused",
        }
    }

    /// This variant's cost model for a `rows x cols` matrix of `elem_bytes`-byte elements.
    pub fn cost(self, rows: usize, cols: usize, elem_bytes: usize) -> Cost {
        match self {
            Variant::Naive => naive_cost(rows, cols, elem_bytes),
            Variant::Online => online_cost(rows, cols, elem_bytes),
            Variant::Fused => fused_cost(rows, cols, elem_bytes),
        }
    }

    /// Runs this variant (`stats` is the naive and online kernels' workspace; fused ignores it).
    pub fn run<T: SoftmaxElement>(
        self,
        rt: &Runtime,
        x: &DeviceBuffer<T>,
        y: &mut DeviceBuffer<T>,
        stats: &mut RowStats,
        rows: usize,
        cols: usize,
    ) -> Result<Launched> {
        match self {
            Variant::Naive => naive(rt, x, y, stats, rows, cols),
            Variant::Online => online(rt, x, y, stats, rows, cols),
            Variant::Fused => fused(rt, x, y, rows, cols),
        }
    }
}

/// Per-row `(m, l)` in HBM: what the naive and online variants pass from one kernel to the next.
/// Allocate it once and reuse it, so that timed runs do not include an allocation.
pub struct RowStats {
    /// `m` of each row.
    pub max: DeviceBuffer<f32>,
    /// `l = sum exp(x - m)` of each row.
    pub sum: DeviceBuffer<f32>,
}

impl RowStats {
    /// Room for `rows` rows.
    pub fn new(rt: &Runtime, rows: usize) -> Result<Self> {
        Ok(Self {
            max: rt.alloc(rows)?,
            sum: rt.alloc(rows)?,
        })
    }
}

/// An element type the softmax kernels take, `f32` or `bf16` (computed in f32 either way), with
/// its kernels' specs (`kernels::registry`, docs/registry.md), which write their launches.
pub trait SoftmaxElement: SpecElement {
    /// The naive, online and fused flows' specs at this type, in [`Variant::ALL`]'s order.
    const SPECS: [&'static Spec; 3];
}

impl SoftmaxElement for f32 {
    const SPECS: [&'static Spec; 3] = [
        &kernels::softmax::SOFTMAX_NAIVE_F32,
        &kernels::softmax::SOFTMAX_ONLINE_F32,
        &kernels::softmax::SOFTMAX_FUSED_F32,
    ];
}

impl SoftmaxElement for bf16 {
    const SPECS: [&'static Spec; 3] = [
        &kernels::softmax::SOFTMAX_NAIVE_BF16,
        &kernels::softmax::SOFTMAX_ONLINE_BF16,
        &kernels::softmax::SOFTMAX_FUSED_BF16,
    ];
}

impl Variant {
    /// This variant's registered spec at element type `T`.
    pub fn spec<T: SoftmaxElement>(self) -> &'static Spec {
        T::SPECS[self as usize]
    }
}

/// Launches `variant` on buffers [`check_shape`] checked, `stats` the workspace of naive and
/// online (fused takes none), through its spec.
fn launch_checked<T: SoftmaxElement>(
    rt: &Runtime,
    variant: Variant,
    x: &DeviceBuffer<T>,
    y: &DeviceBuffer<T>,
    stats: Option<&RowStats>,
    (rows, cols): (u32, u32),
) -> Result<Launched> {
    let workspaces: Vec<&DeviceBuffer<f32>> = stats.map_or_else(Vec::new, |s| vec![&s.max, &s.sum]);
    let dims = [rows as usize, cols as usize, 1, 1, 1];
    crate::registry::launch_on(rt, variant.spec::<T>(), &[x], y, &workspaces, dims, false)
}

/// Checks a `rows x cols` softmax's inputs: at least one column, `x` and `y` of `rows * cols`
/// elements, `stats` (when used) of `rows`. Returns `(rows, cols)` as the kernels take them.
fn check_shape<T: Element>(
    what: &str,
    x: &DeviceBuffer<T>,
    y: &DeviceBuffer<T>,
    stats: Option<&RowStats>,
    rows: usize,
    cols: usize,
) -> Result<(u32, u32)> {
    if cols == 0 {
        return Err(Error::Shape(format!(
            "{what}: cols must be at least 1 (an empty row has no softmax), got {rows} x 0"
        )));
    }
    let n = elements(what, &[("rows", rows), ("cols", cols)])?;
    for (name, len) in [("x", x.len()), ("y", y.len())] {
        if len != n {
            return Err(Error::Shape(format!(
                "{what}: {name} has {len} elements, but {rows} x {cols} needs {n}"
            )));
        }
    }
    if let Some(stats) = stats {
        for (name, len) in [
            ("stats.max", stats.max.len()),
            ("stats.sum", stats.sum.len()),
        ] {
            if len != rows {
                return Err(Error::Shape(format!(
                    "{what}: {name} has {len} elements, but there are {rows} rows"
                )));
            }
        }
    }
    Ok((len_u32(what, rows)?, len_u32(what, cols)?))
}

/// What naive and online share: passes that leave `(m, l)` in `stats`, then the normalisation,
/// which reads them with the row once more. Reports the launches' total counts.
fn stats_then_normalise<T: SoftmaxElement>(
    variant: Variant,
    rt: &Runtime,
    x: &DeviceBuffer<T>,
    y: &mut DeviceBuffer<T>,
    stats: &mut RowStats,
    (rows, cols): (usize, usize),
) -> Result<Launched> {
    let what = format!("softmax::{}", variant.name());
    let (rows, cols) = check_shape(&what, x, y, Some(stats), rows, cols)?;
    if rows == 0 {
        return Ok(None);
    }
    launch_checked(rt, variant, x, y, Some(stats), (rows, cols))
}

/// Naive softmax: three kernels (row max, row sum of `exp(x - m)`, normalise), each reading the
/// whole matrix from HBM.
pub fn naive<T: SoftmaxElement>(
    rt: &Runtime,
    x: &DeviceBuffer<T>,
    y: &mut DeviceBuffer<T>,
    stats: &mut RowStats,
    rows: usize,
    cols: usize,
) -> Result<Launched> {
    stats_then_normalise(Variant::Naive, rt, x, y, stats, (rows, cols))
}

/// Online softmax: one pass for `(m, l)` (Milakov and Gimelshein), one to normalise.
pub fn online<T: SoftmaxElement>(
    rt: &Runtime,
    x: &DeviceBuffer<T>,
    y: &mut DeviceBuffer<T>,
    stats: &mut RowStats,
    rows: usize,
    cols: usize,
) -> Result<Launched> {
    stats_then_normalise(Variant::Online, rt, x, y, stats, (rows, cols))
}

/// Fused softmax: one kernel, the row kept on chip between its read and its write.
pub fn fused<T: SoftmaxElement>(
    rt: &Runtime,
    x: &DeviceBuffer<T>,
    y: &mut DeviceBuffer<T>,
    rows: usize,
    cols: usize,
) -> Result<Launched> {
    let (rows, cols) = check_shape("softmax::fused", x, y, None, rows, cols)?;
    if rows == 0 {
        return Ok(None);
    }
    launch_checked(rt, Variant::Fused, x, y, None, (rows, cols))
}

/// One kernel's traffic and arithmetic: `reads` and `writes` whole-matrix sweeps of
/// `elem_bytes`-byte elements, `stat_reads` and `stat_writes` f32 per row, `flops` and `exps`
/// (exponentials) per element.
fn sweep_cost(
    (rows, cols, elem_bytes): (usize, usize, usize),
    (reads, writes): (usize, usize),
    (stat_reads, stat_writes): (usize, usize),
    (flops, exps): (u32, u32),
) -> Cost {
    let n = product(&[rows as u64, cols as u64]);
    let stat = product(&[size_of::<f32>() as u64, rows as u64]);
    let e = elem_bytes as u64;
    let bytes = |matrix: usize, stats: usize| {
        sum(&[
            product(&[matrix as u64, n, e]),
            product(&[stats as u64, stat]),
        ])
    };
    Cost {
        bytes_read: bytes(reads, stat_reads),
        bytes_written: bytes(writes, stat_writes),
        flops: product(&[n, u64::from(flops)]),
        exps: product(&[n, u64::from(exps)]),
        unit: ComputeUnit::CudaCoreF32,
        ..Cost::NONE
    }
}

/// The normalisation kernel that ends naive and online: reads `x`, `m` and `l`, writes `y`.
fn normalise_cost(shape: (usize, usize, usize)) -> Cost {
    sweep_cost(shape, (1, 1), (2, 0), (NORMALISE_FLOPS, 1))
}

/// Naive: pass 1 reads x and writes m; pass 2 reads x and m, writes l; pass 3 reads x, m and l,
/// writes y. Three reads and one write of the matrix, plus 20 bytes per row of statistics.
pub fn naive_cost(rows: usize, cols: usize, elem_bytes: usize) -> Cost {
    let shape = (rows, cols, elem_bytes);
    sweep_cost(shape, (1, 0), (0, 1), (MAX_FLOPS, 0))
        .plus(sweep_cost(shape, (1, 0), (1, 1), (EXP_SUM_FLOPS, 1)))
        .plus(normalise_cost(shape))
}

/// Online: the `(m, l)` pass reads x and writes m and l; then the normalisation. Two reads and
/// one write of the matrix, plus 16 bytes per row.
pub fn online_cost(rows: usize, cols: usize, elem_bytes: usize) -> Cost {
    let shape = (rows, cols, elem_bytes);
    sweep_cost(shape, (1, 0), (0, 2), (ONLINE_FLOPS, 1)).plus(normalise_cost(shape))
}

/// Fused: one read and one write of the matrix, nothing else, when a row fits on chip
/// (`cols <= FUSED_ON_CHIP_COLS`); longer rows are read a second time to be normalised.
pub fn fused_cost(rows: usize, cols: usize, elem_bytes: usize) -> Cost {
    let shape = (rows, cols, elem_bytes);
    let read_flops = MAX_FLOPS + EXP_SUM_FLOPS;
    if cols <= FUSED_ON_CHIP_COLS as usize {
        // One exponential per element, kept in registers for the write.
        sweep_cost(shape, (1, 1), (0, 0), (read_flops + RESCALE_FLOPS, 1))
    } else {
        // Taken again when the row is read the second time.
        sweep_cost(shape, (2, 1), (0, 0), (read_flops + NORMALISE_FLOPS, 2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exponentials per element: naive takes them twice (for the sum, then for the output),
    /// online twice (in the merge, then for the output), fused once when the row stays on chip.
    #[test]
    fn fusion_halves_the_exponentials_when_the_row_fits() {
        let (rows, n) = (3, 3 * 1000);
        assert_eq!(naive_cost(rows, 1000, 2).exps, 2 * n as u64);
        assert_eq!(online_cost(rows, 1000, 2).exps, 2 * n as u64);
        assert_eq!(fused_cost(rows, 1000, 2).exps, n as u64);
        let long = FUSED_ON_CHIP_COLS as usize + 1;
        assert_eq!(fused_cost(1, long, 2).exps, 2 * long as u64);
    }

    /// The registered specs (f32 and bf16) state the costs this module computes (the kernel crate cannot
    /// call it), at each of their sizes, at one element, and past the fused kernel's on-chip
    /// columns.
    #[test]
    fn the_specs_declare_these_costs() {
        let long = FUSED_ON_CHIP_COLS as usize + 1;
        for variant in Variant::ALL {
            for (spec, bytes) in [(variant.spec::<f32>(), 4), (variant.spec::<bf16>(), 2)] {
                for dims in spec.shapes.every().chain([[3, long, 1, 1, 1]]) {
                    let want = variant.cost(dims[0], dims[1], bytes);
                    assert_eq!(crate::registry::cost(spec, dims), want, "{}", spec.name);
                }
            }
        }
    }

    #[test]
    fn fusion_removes_sweeps_of_the_matrix() {
        // bf16, 8192 x 8192: 2 bytes per element per sweep.
        let n = 8192 * 8192;
        let bytes = |v: Variant| v.cost(8192, 8192, 2).bytes();
        assert_eq!(bytes(Variant::Naive), (4 * 2 * n + 20 * 8192) as u64);
        assert_eq!(bytes(Variant::Online), (3 * 2 * n + 16 * 8192) as u64);
        assert_eq!(bytes(Variant::Fused), (2 * 2 * n) as u64);
        let long = FUSED_ON_CHIP_COLS as usize + 1;
        assert_eq!(fused_cost(1, long, 4).bytes(), (3 * 4 * long) as u64);
    }
}
