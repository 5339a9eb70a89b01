//! Host side of `kernels::gemm`: `C = A B` or `C = A B + C`, five steps (steps 4 and 5 in bf16
//! and f16).
//!
//! Every matrix is **row-major**: A is M x K, B is K x N, C is M x N, element (i, j) of an R x C
//! matrix at `i * C + j`. Each function validates the buffers against the shape and launches
//! through the step's registered spec (`kernels::gemm::GEMM_NAIVE_F32`, ..., docs/registry.md),
//! whose launch is the kernel's only one; step 5 on the tensor maps its spec declares, kept from
//! one launch to the next. [`GemmKernel::cost`] is the cost
//! model of each, with the re-reads its tiling causes stated as a term of their own.

use half::{bf16, f16};
use kernels::gemm::{
    self as k, NAIVE_BLOCK, REGISTER_BLOCKED, TC_ROW_MULTIPLE, TENSOR_CORE, TILED, Tile, WGMMA,
};

use crate::buffer::DeviceBuffer;
use crate::runtime::{Launched, Runtime};
use crate::tensor_map::TensorMaps2d;
use crate::{Error, Result};
use emu::LaunchConfig;
use perf::cost::{ComputeUnit, Cost, product, sum};

use super::{GridAxis, elements, grid_blocks};

/// The problem size: A is `m` x `k`, B is `k` x `n`, C is `m` x `n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    /// Rows of A and C.
    pub m: usize,
    /// Columns of B and C.
    pub n: usize,
    /// Columns of A, rows of B: the length of every dot product.
    pub k: usize,
}

impl GemmShape {
    /// `m` x `n` x `k`.
    pub const fn new(m: usize, n: usize, k: usize) -> Self {
        Self { m, n, k }
    }

    /// `2 m n k`: one multiply and one add per term of every dot product.
    pub fn flops(&self) -> u64 {
        product(&[2, self.m as u64, self.n as u64, self.k as u64])
    }
}

/// What happens to C's previous contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Epilogue {
    /// `C = A B`.
    Overwrite,
    /// `C = A B + C`: C is read as well as written.
    Accumulate,
}

/// The five steps (seven kernels: steps 4 and 5 take bf16 or f16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmKernel {
    /// Step 1: one thread per element of C, f32.
    Naive,
    /// Step 2: 32 x 32 tiles in shared memory, f32.
    Tiled,
    /// Step 3: 128 x 128 block tiles, 8 x 8 per thread in registers, f32.
    RegisterBlocked,
    /// Step 4: tensor cores, bf16 inputs, f32 accumulation and output.
    TensorCoreBf16,
    /// Step 4 with f16 inputs.
    TensorCoreF16,
    /// Step 5 (Hopper, sm_90a): TMA, mbarrier pipeline, wgmma; bf16 inputs.
    WgmmaBf16,
    /// Step 5 with f16 inputs.
    WgmmaF16,
}

impl GemmKernel {
    /// Every kernel, in the order of the steps.
    pub const ALL: [GemmKernel; 7] = [
        GemmKernel::Naive,
        GemmKernel::Tiled,
        GemmKernel::RegisterBlocked,
        GemmKernel::TensorCoreBf16,
        GemmKernel::TensorCoreF16,
        GemmKernel::WgmmaBf16,
        GemmKernel::WgmmaF16,
    ];

    /// The kernel's entry point name (also the name of its host function in this module).
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The tile of C whose strips of A and B are read from global memory once. For the naive
    /// kernel that is one element: each thread reads its own row of A and column of B, and no
    /// thread shares what it read.
    pub fn reuse_tile(self) -> Tile {
        match self {
            GemmKernel::Naive => k::NAIVE_REUSE,
            GemmKernel::Tiled => TILED,
            GemmKernel::RegisterBlocked => REGISTER_BLOCKED,
            GemmKernel::TensorCoreBf16 | GemmKernel::TensorCoreF16 => TENSOR_CORE,
            GemmKernel::WgmmaBf16 | GemmKernel::WgmmaF16 => WGMMA,
        }
    }

    /// Bytes per element of A and B.
    pub fn input_bytes(self) -> usize {
        match self {
            GemmKernel::Naive | GemmKernel::Tiled | GemmKernel::RegisterBlocked => 4,
            _ => 2,
        }
    }

    /// The element type of A and B.
    pub fn input_type(self) -> &'static str {
        match self {
            GemmKernel::Naive | GemmKernel::Tiled | GemmKernel::RegisterBlocked => "f32",
            GemmKernel::TensorCoreBf16 | GemmKernel::WgmmaBf16 => "bf16",
            GemmKernel::TensorCoreF16 | GemmKernel::WgmmaF16 => "f16",
        }
    }

    /// `x` rounded to the kernel's input type and back: the value the kernel multiplies.
    pub fn representable(self, x: f32) -> f32 {
        match self {
            GemmKernel::TensorCoreBf16 | GemmKernel::WgmmaBf16 => bf16::from_f32(x).to_f32(),
            GemmKernel::TensorCoreF16 | GemmKernel::WgmmaF16 => f16::from_f32(x).to_f32(),
            _ => x,
        }
    }

    /// How far an element of C may be from the exact result, as a multiple of the reference's
    /// magnitude `sum_k |a_ik b_kj| (+ |c_ij|)` ([`GemmEntry`](crate::reference::GemmEntry)).
    ///
    /// - f32 kernels: [`kernels::gemm::f32_error_bound`], `gamma_(K+1)`: K fused multiply-adds
    ///   and an accumulation's addition, one rounding each (their registered specs' tolerance).
    /// - tensor cores: [`kernels::gemm::tensor_core_error_bound`], twice that (the hardware's
    ///   accumulation may truncate).
    pub fn error_bound(self, k: usize) -> f64 {
        if self.is_tensor_core() {
            k::tensor_core_error_bound(k)
        } else {
            k::f32_error_bound(k)
        }
    }

    /// The step's registered spec (`kernels::registry`), through which it launches.
    pub fn spec(self) -> &'static kernels::registry::Spec {
        match self {
            GemmKernel::Naive => &k::GEMM_NAIVE_F32,
            GemmKernel::Tiled => &k::GEMM_TILED_F32,
            GemmKernel::RegisterBlocked => &k::GEMM_REGISTER_BLOCKED_F32,
            GemmKernel::TensorCoreBf16 => &k::GEMM_TENSOR_CORE_BF16,
            GemmKernel::TensorCoreF16 => &k::GEMM_TENSOR_CORE_F16,
            GemmKernel::WgmmaBf16 => &k::GEMM_WGMMA_BF16,
            GemmKernel::WgmmaF16 => &k::GEMM_WGMMA_F16,
        }
    }

    /// Steps 4 and 5: bf16/f16 inputs on the tensor cores.
    pub fn is_tensor_core(self) -> bool {
        !matches!(
            self,
            GemmKernel::Naive | GemmKernel::Tiled | GemmKernel::RegisterBlocked
        )
    }

    /// Step 5: wgmma fed by the TMA, which only an sm_90a device (or the emulator) runs (its
    /// spec's `sm90a_only`).
    pub fn is_wgmma(self) -> bool {
        self.spec().sm90a_only
    }

    /// Whether `rt` can run this kernel: its spec's rule (`registry::runs_on`), steps 1 to 4
    /// everywhere, step 5 where [`Runtime::has_wgmma`].
    pub fn runs_on(self, rt: &Runtime) -> bool {
        crate::registry::runs_on(rt, self.spec())
    }

    /// FLOPs the kernel executes, which the emulator counts. The f32 kernels execute exactly
    /// the useful `2 M N K` ([`GemmShape::flops`]); the tensor-core kernels also multiply the
    /// padding of partial tiles, since every `mma` (4096 FLOPs) or `wgmma` runs for every K tile:
    /// `2 * (tiles of M * tile.m) * (tiles of N * tile.n) * (tiles of K * tile.k)`.
    pub fn executed_flops(self, shape: GemmShape) -> u64 {
        if !self.is_tensor_core() {
            return shape.flops();
        }
        k::padded_flops(self.reuse_tile(), [shape.m, shape.n, shape.k, 1, 1])
    }

    /// Where the FLOPs run.
    pub fn unit(self) -> ComputeUnit {
        if self.is_tensor_core() {
            ComputeUnit::TensorCore16
        } else {
            ComputeUnit::CudaCoreF32
        }
    }

    /// FLOPs per byte of A and B loaded by a block: `2 tm tn / (bytes (tm + tn))` for a
    /// `tm` x `tn` reuse tile (`tm tn / (tm + tn)` for 2-byte inputs, the seeds' formula).
    pub fn tile_intensity(self) -> f64 {
        let t = self.reuse_tile();
        let (tm, tn) = (f64::from(t.m), f64::from(t.n));
        2.0 * tm * tn / (self.input_bytes() as f64 * (tm + tn))
    }

    /// The cost model: compulsory traffic (A and B read once, C written once and read once when
    /// accumulating, `2 m n k` FLOPs: the least any kernel must move across the HBM boundary,
    /// the roofline's bound, [`Cost::compulsory`]), plus the re-reads exactly as the kernel
    /// makes them ([`Cost::rereads`]: each of the `ceil(N / tile.n)` block columns reads all of
    /// A, each of the `ceil(M / tile.m)` block rows all of B; on a GPU some of these hit in L2,
    /// which rasterisation helps, and the emulator counts them all). Its `bytes_read` is every
    /// byte the kernel asks global memory for: what the emulator counts, and the roofline of a
    /// GPU with no L2 reuse at all.
    ///
    /// The kernels load A and B element by element (or 16-byte chunk by chunk, with the tensor
    /// core's K and N multiples of 8) and only inside the matrices, so each block column reads
    /// exactly `m k` elements of A and each block row exactly `k n` of B.
    pub fn cost(self, shape: GemmShape, epilogue: Epilogue) -> Cost {
        // The kernel crate's model (the registered steps' cost), plus C read once when
        // accumulating (none when C is empty: no block is launched).
        let GemmShape { m, n, k } = shape;
        let c = k::tiled_cost(
            self.reuse_tile(),
            self.input_bytes() as u64,
            [m, n, k, 1, 1],
        );
        let c_read = match epilogue {
            Epilogue::Overwrite => 0,
            Epilogue::Accumulate => c.bytes_written,
        };
        Cost {
            bytes_read: sum(&[c.bytes_read, c_read]),
            unit: self.unit(),
            ..c
        }
    }

    /// The launch configuration: its registered spec's geometry.
    pub fn launch_config(self, m: u32, n: u32) -> LaunchConfig {
        match self {
            GemmKernel::Naive => k::naive_geometry(m, n),
            GemmKernel::Tiled => k::tiled_geometry(m, n),
            GemmKernel::RegisterBlocked => k::register_blocked_geometry(m, n),
            GemmKernel::TensorCoreBf16 | GemmKernel::TensorCoreF16 => k::tensor_core_geometry(m, n),
            GemmKernel::WgmmaBf16 | GemmKernel::WgmmaF16 => k::wgmma_geometry(m, n),
        }
    }

    /// Checks the buffers against the shape (and the shape against the kernel), and returns the
    /// launch with the shape as `u32`s, or `None` when C is empty and nothing needs launching.
    fn validate(
        self,
        shape: GemmShape,
        (a_len, b_len, c_len): (usize, usize, usize),
    ) -> Result<Option<(LaunchConfig, u32, u32, u32)>> {
        let GemmShape { m, n, k } = shape;
        let name = self.name();
        for (matrix, len, rows, cols, (r, c)) in [
            ("A", a_len, m, k, ("M", "K")),
            ("B", b_len, k, n, ("K", "N")),
            ("C", c_len, m, n, ("M", "N")),
        ] {
            let want = elements(name, &[(r, rows), (c, cols)])?;
            if len != want {
                return Err(Error::Shape(format!(
                    "{name}: {matrix} has {len} elements, but a row-major {r} x {c} {matrix} has {rows} x {cols} = {want}"
                )));
            }
        }
        // Indices are u32 in the kernels, and a thread's FLOP count 2 K must fit one too.
        let limit = i32::MAX as usize;
        if m > limit || n > limit || k > limit {
            return Err(Error::Shape(format!(
                "{name}: M, N, K = {m}, {n}, {k}; each must be below 2^31"
            )));
        }
        if self.is_tensor_core() {
            let multiple = TC_ROW_MULTIPLE as usize;
            let why = if self.is_wgmma() {
                "a tensor map's row pitch must be a multiple of 16 bytes"
            } else {
                "every row of A and B must start on a 16-byte boundary for cp.async"
            };
            if !k.is_multiple_of(multiple) || !n.is_multiple_of(multiple) {
                return Err(Error::Shape(format!(
                    "{name} needs K and N to be multiples of {multiple} ({why}), but K = {k} and N = {n}: pad them with zeros to the next multiple of {multiple}"
                )));
            }
        }
        if m == 0 || n == 0 {
            return Ok(None);
        }
        // The grid must cover the shape: say which dimension is too long, not which axis.
        let t = self.reuse_tile();
        let (tile_m, tile_n) = match self {
            GemmKernel::Naive => (NAIVE_BLOCK as usize, NAIVE_BLOCK as usize),
            _ => (t.m as usize, t.n as usize),
        };
        if self.is_tensor_core() {
            // One dimension: every tile of C is one block along x.
            let tiles = elements(
                name,
                &[
                    ("M tiles", m.div_ceil(tile_m)),
                    ("N tiles", n.div_ceil(tile_n)),
                ],
            )?;
            grid_blocks(name, ("M x N in tiles", tiles), 1, GridAxis::X)?;
        } else {
            grid_blocks(name, ("N", n), tile_n, GridAxis::X)?;
            grid_blocks(name, ("M", m), tile_m, GridAxis::Y)?;
        }
        let (m, n, k) = (m as u32, n as u32, k as u32);
        Ok(Some((self.launch_config(m, n), m, n, k)))
    }
}

/// Defines the host function of one GEMM kernel: validate the buffers against the shape, then
/// launch through its registered spec ([`registered`]). One definition, so that the five cannot
/// drift apart.
macro_rules! gemm_op {
    ($(#[$doc:meta])* $name:ident, $variant:ident, $input:ty) => {
        $(#[$doc])*
        pub fn $name(
            rt: &Runtime,
            a: &DeviceBuffer<$input>,
            b: &DeviceBuffer<$input>,
            c: &mut DeviceBuffer<f32>,
            shape: GemmShape,
            epilogue: Epilogue,
        ) -> Result<Launched> {
            registered(rt, GemmKernel::$variant, (a, b, c), shape, epilogue)
        }
    };
}

/// Steps 1 to 4: validate, then launch the kernel's registered spec on the buffers, its launch the
/// kernel's only one (C added to when accumulating: the spec `accumulates`).
fn registered<T: crate::registry::SpecElement>(
    rt: &Runtime,
    kernel: GemmKernel,
    (a, b, c): (&DeviceBuffer<T>, &DeviceBuffer<T>, &DeviceBuffer<f32>),
    shape: GemmShape,
    epilogue: Epilogue,
) -> Result<Launched> {
    let Some((_, m, n, k)) = kernel.validate(shape, (a.len(), b.len(), c.len()))? else {
        return Ok(None);
    };
    let spec = kernel.spec();
    let dims = [m, n, k, 1, 1].map(|d| d as usize);
    let accumulate = epilogue == Epilogue::Accumulate;
    crate::registry::launch_on(rt, spec, &[a, b], c, &[], dims, accumulate)
}

gemm_op!(
    /// Step 1, `C = A B (+ C)` in f32 with one thread per element of C.
    gemm_naive_f32, Naive, f32
);
gemm_op!(
    /// Step 2, `C = A B (+ C)` in f32 with 32 x 32 tiles in shared memory.
    gemm_tiled_f32, Tiled, f32
);
gemm_op!(
    /// Step 3, `C = A B (+ C)` in f32 with 128 x 128 block tiles and 8 x 8 register tiles.
    gemm_register_blocked_f32, RegisterBlocked, f32
);
gemm_op!(
    /// Step 4, `C = A B (+ C)` on the tensor cores: A and B bf16, C f32. K and N must be
    /// multiples of 8 (the error says so otherwise); M is free.
    gemm_tensor_core_bf16, TensorCoreBf16, bf16
);
gemm_op!(
    /// Step 4 with f16 inputs.
    gemm_tensor_core_f16, TensorCoreF16, f16
);

/// Step 5, `C = A B (+ C)` with TMA and wgmma on Hopper: A and B bf16, C f32. K and N must be
/// multiples of 8 (a tensor map's rows are a multiple of 16 bytes); M, N, K are otherwise free,
/// the TMA zero-filling whatever a box has outside A or B. Runs on an sm_90a device (H100,
/// H200) or the emulator, and says so on any other GPU. Each call builds the two tensor maps;
/// [`gemm`] keeps them in the operands for the next launch.
pub fn gemm_wgmma_bf16(
    rt: &Runtime,
    a: &DeviceBuffer<bf16>,
    b: &DeviceBuffer<bf16>,
    c: &mut DeviceBuffer<f32>,
    shape: GemmShape,
    epilogue: Epilogue,
) -> Result<Launched> {
    wgmma(rt, GemmKernel::WgmmaBf16, (a, b), None, c, shape, epilogue)
}

/// Step 5 with f16 inputs.
pub fn gemm_wgmma_f16(
    rt: &Runtime,
    a: &DeviceBuffer<f16>,
    b: &DeviceBuffer<f16>,
    c: &mut DeviceBuffer<f32>,
    shape: GemmShape,
    epilogue: Epilogue,
) -> Result<Launched> {
    wgmma(rt, GemmKernel::WgmmaF16, (a, b), None, c, shape, epilogue)
}

/// Step 5's two tensor maps, for one shape: its spec's (`kernels::gemm`'s `wgmma_maps`: A in
/// 128 x 64 boxes, B in 64 x 64 boxes, both 128-byte swizzled). Building them takes a driver call
/// and an upload each, so [`gemm`] keeps them in its [`GemmOperands`] from one launch to the next.
pub struct WgmmaMaps {
    shape: GemmShape,
    maps: Vec<TensorMaps2d>,
}

impl WgmmaMaps {
    /// The maps of `a` (M x K) and `b` (K x N) for `shape`.
    pub fn new<T: crate::registry::SpecElement>(
        rt: &Runtime,
        a: &DeviceBuffer<T>,
        b: &DeviceBuffer<T>,
        shape: GemmShape,
    ) -> Result<Self> {
        let GemmShape { m, n, k } = shape;
        // Both steps' specs declare the same maps, of either element type.
        let spec = GemmKernel::WgmmaBf16.spec();
        let maps = if k == 0 || m == 0 || n == 0 {
            // No box is ever copied (no K tile, or no block at all), but a map needs non-empty
            // dimensions: maps of an 8 x 8 stand-in.
            let one = rt.alloc::<T>(64)?;
            crate::registry::tensor_maps(rt, spec, [1, 8, 8, 1, 1], &[&one, &one])?
        } else {
            crate::registry::tensor_maps(rt, spec, [m, n, k, 1, 1], &[a, b])?
        };
        Ok(Self { shape, maps })
    }
}

/// Both step-5 kernels: validate, refuse a GPU without wgmma, build the maps (or take `maps` when
/// they are for this shape), launch through the spec.
fn wgmma<T: crate::registry::SpecElement>(
    rt: &Runtime,
    kernel: GemmKernel,
    (a, b): (&DeviceBuffer<T>, &DeviceBuffer<T>),
    maps: Option<&MapCache>,
    c: &mut DeviceBuffer<f32>,
    shape: GemmShape,
    epilogue: Epilogue,
) -> Result<Launched> {
    let Some((_, m, n, k)) = kernel.validate(shape, (a.len(), b.len(), c.len()))? else {
        return Ok(None);
    };
    crate::registry::refuse_unless_runs_on(rt, kernel.spec())?;
    let fresh;
    let mut cached;
    let maps: &WgmmaMaps = match maps {
        Some(cache) => {
            cached = cache.lock().unwrap();
            if cached.as_ref().is_none_or(|mp| mp.shape != shape) {
                *cached = Some(WgmmaMaps::new(rt, a, b, shape)?);
            }
            cached.as_ref().expect("just filled")
        }
        None => {
            fresh = WgmmaMaps::new(rt, a, b, shape)?;
            &fresh
        }
    };
    let dims = [m, n, k, 1, 1].map(|d| d as usize);
    let accumulate = epilogue == Epilogue::Accumulate;
    crate::registry::launch_on_maps(
        rt,
        kernel.spec(),
        (&[a, b], &maps.maps),
        c,
        dims,
        accumulate,
    )
}

/// A and B in the element type of the kernel that takes them.
pub enum GemmOperands {
    /// For the f32 kernels (steps 1 to 3).
    F32(DeviceBuffer<f32>, DeviceBuffer<f32>),
    /// For [`gemm_tensor_core_bf16`] and [`gemm_wgmma_bf16`] (with step 5's tensor maps, built
    /// on its first launch).
    Bf16(DeviceBuffer<bf16>, DeviceBuffer<bf16>, MapCache),
    /// For [`gemm_tensor_core_f16`] and [`gemm_wgmma_f16`].
    F16(DeviceBuffer<f16>, DeviceBuffer<f16>, MapCache),
}

/// Step 5's tensor maps of a pair of operands, for the shape last launched.
pub type MapCache = std::sync::Mutex<Option<WgmmaMaps>>;

impl GemmOperands {
    /// Uploads `a` and `b` in the element type `kernel` takes, rounding to bf16/f16 for the
    /// tensor-core kernels (pass values from [`GemmKernel::representable`] to round nothing).
    pub fn upload(rt: &Runtime, kernel: GemmKernel, a: &[f32], b: &[f32]) -> Result<Self> {
        Ok(match kernel {
            GemmKernel::Naive | GemmKernel::Tiled | GemmKernel::RegisterBlocked => {
                GemmOperands::F32(rt.upload(a)?, rt.upload(b)?)
            }
            GemmKernel::TensorCoreBf16 | GemmKernel::WgmmaBf16 => {
                let to = |v: &[f32]| v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>();
                GemmOperands::Bf16(rt.upload(&to(a))?, rt.upload(&to(b))?, MapCache::default())
            }
            GemmKernel::TensorCoreF16 | GemmKernel::WgmmaF16 => {
                let to = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
                GemmOperands::F16(rt.upload(&to(a))?, rt.upload(&to(b))?, MapCache::default())
            }
        })
    }
}

/// Runs any step: `kernel` on `operands` of its element type.
pub fn gemm(
    rt: &Runtime,
    kernel: GemmKernel,
    operands: &GemmOperands,
    c: &mut DeviceBuffer<f32>,
    shape: GemmShape,
    epilogue: Epilogue,
) -> Result<Launched> {
    match (kernel, operands) {
        (GemmKernel::Naive, GemmOperands::F32(a, b)) => {
            gemm_naive_f32(rt, a, b, c, shape, epilogue)
        }
        (GemmKernel::Tiled, GemmOperands::F32(a, b)) => {
            gemm_tiled_f32(rt, a, b, c, shape, epilogue)
        }
        (GemmKernel::RegisterBlocked, GemmOperands::F32(a, b)) => {
            gemm_register_blocked_f32(rt, a, b, c, shape, epilogue)
        }
        (GemmKernel::TensorCoreBf16, GemmOperands::Bf16(a, b, _)) => {
            gemm_tensor_core_bf16(rt, a, b, c, shape, epilogue)
        }
        (GemmKernel::TensorCoreF16, GemmOperands::F16(a, b, _)) => {
            gemm_tensor_core_f16(rt, a, b, c, shape, epilogue)
        }
        (GemmKernel::WgmmaBf16, GemmOperands::Bf16(a, b, maps)) => {
            wgmma(rt, kernel, (a, b), Some(maps), c, shape, epilogue)
        }
        (GemmKernel::WgmmaF16, GemmOperands::F16(a, b, maps)) => {
            wgmma(rt, kernel, (a, b), Some(maps), c, shape, epilogue)
        }
        _ => Err(Error::Shape(format!(
            "{} takes {} operands",
            kernel.name(),
            kernel.input_type()
        ))),
    }
}

/// Bytes of A and B that cross the HBM boundary for the tensor-core kernel under a simple L2
/// model, with its blocks in rasterised order in groups of `group` tile rows (1: row-major).
///
/// The model: blocks run in waves of `wave` (SMs times blocks per SM) in the order the kernel's
/// [`raster`](kernels::gemm::raster) gives them; a strip of A (128 rows by K) or of B (K by 128
/// columns) that any block of a wave reads crosses the boundary once in that wave, L2 serving its
/// other readers, and nothing survives from one wave to the next. At its limits it is the cost
/// model's two terms: a wave of one block reuses nothing (the requested bytes), one wave of every
/// block reuses everything (the compulsory bytes).
pub fn wave_model_ab_bytes(shape: GemmShape, group: u32, wave: u32) -> u64 {
    let GemmShape { m, n, k } = shape;
    if m == 0 || n == 0 {
        return 0;
    }
    let t = TENSOR_CORE;
    let (blocks_m, blocks_n) = t.blocks(m as u32, n as u32);
    // Bytes of the strip of tile row `tm` of A, or tile column `tn` of B: the part inside.
    let strip = |tile: u32, size: u32, extent: usize| {
        u64::from(k::inside(tile * size, size, extent as u32)) * k as u64 * 2
    };
    let mut bytes = 0;
    let blocks = blocks_m * blocks_n;
    for first in (0..blocks).step_by(wave.max(1) as usize) {
        let (mut rows, mut cols) = (
            vec![false; blocks_m as usize],
            vec![false; blocks_n as usize],
        );
        for pid in first..blocks.min(first + wave.max(1)) {
            let (tm, tn) = k::raster(pid, blocks_m, blocks_n, group);
            rows[tm as usize] = true;
            cols[tn as usize] = true;
        }
        let touched = |seen: &[bool], size, extent| -> u64 {
            (0..seen.len() as u32)
                .filter(|&i| seen[i as usize])
                .map(|i| strip(i, size, extent))
                .sum()
        };
        bytes += touched(&rows, t.m, m) + touched(&cols, t.n, n);
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile_intensity_is_the_seeds_formula() {
        // m n / (m + n) for 2-byte inputs: 64 for 128 x 128.
        assert_eq!(GemmKernel::TensorCoreBf16.tile_intensity(), 64.0);
        // f32 (4 bytes) halves it: 32 x 32 gives 8, 128 x 128 gives 32, one element 1/4.
        assert_eq!(GemmKernel::Tiled.tile_intensity(), 8.0);
        assert_eq!(GemmKernel::RegisterBlocked.tile_intensity(), 32.0);
        assert_eq!(GemmKernel::Naive.tile_intensity(), 0.25);
    }

    #[test]
    fn requested_intensity_of_a_and_b_is_the_tile_intensity_on_whole_tiles() {
        // With M, N multiples of every tile, FLOPs per byte of A and B requested (C left out) is
        // exactly the tile intensity: the re-read term is the whole story of the tiling.
        let shape = GemmShape::new(1024, 512, 4096);
        for kernel in GemmKernel::ALL {
            let cost = kernel.cost(shape, Epilogue::Overwrite);
            let ab = cost.bytes_read as f64;
            let got = shape.flops() as f64 / ab;
            assert!(
                (got - kernel.tile_intensity()).abs() < 1e-9,
                "{kernel:?}: {got}"
            );
        }
    }

    /// The figures docs/gemm.md quotes (`cargo test --workspace --release --lib modelled -- --nocapture` prints them):
    /// each step requests fewer bytes for the same FLOPs, so its no-L2-reuse bound only improves.
    #[test]
    fn modelled_figures_at_4096_improve_step_by_step() {
        use perf::cost::Roofline;
        use perf::specs::GpuSpec;
        let shape = GemmShape::new(4096, 4096, 4096);
        let h100 = GpuSpec::find("h100").unwrap();
        let mut last = f64::INFINITY;
        for kernel in GemmKernel::ALL {
            let cost = kernel.cost(shape, Epilogue::Overwrite);
            let no_l2 = Roofline::modelled(&cost, h100);
            let perfect = Roofline::modelled(&cost.compulsory(), h100);
            println!(
                "{:<26} tile I {:>6.2}  requested {:>8.3} GB  I {:>7.2}  {:>9.3} ms {:>7.1} TFLOP/s {:?} | compulsory {:.3} GB  I {:.1}  {:.3} ms {:.1} TFLOP/s {:?}",
                kernel.name(),
                kernel.tile_intensity(),
                cost.bytes() as f64 / 1e9,
                no_l2.intensity,
                no_l2.seconds * 1e3,
                no_l2.flops_per_second / 1e12,
                no_l2.bound,
                cost.compulsory().bytes() as f64 / 1e9,
                perfect.intensity,
                perfect.seconds * 1e3,
                perfect.flops_per_second / 1e12,
                perfect.bound,
            );
            assert!(no_l2.seconds <= last, "{kernel:?}");
            last = no_l2.seconds;
        }
    }

    #[test]
    fn the_wave_model_spans_the_cost_models_two_terms() {
        for shape in [GemmShape::new(300, 520, 64), GemmShape::new(1024, 2048, 8)] {
            let cost = GemmKernel::TensorCoreBf16.cost(shape, Epilogue::Overwrite);
            let (bm, bn) = TENSOR_CORE.blocks(shape.m as u32, shape.n as u32);
            for group in [1, 3, 8] {
                // One block per wave: nothing reused, every requested byte from HBM.
                assert_eq!(wave_model_ab_bytes(shape, group, 1), cost.bytes_read);
                // Every block in one wave: every strip read once.
                assert_eq!(
                    wave_model_ab_bytes(shape, group, bm * bn),
                    cost.compulsory().bytes_read
                );
            }
        }
    }

    #[test]
    fn rasterisation_pays_once_the_grid_is_wider_than_a_wave_covers() {
        // 132 SMs x 2 blocks (126 registers x 256 threads, 96 KiB of shared memory each).
        let wave = 264;
        let wide = GemmShape::new(8192, 8192, 8192);
        let (row_major, grouped) = (
            wave_model_ab_bytes(wide, 1, wave),
            wave_model_ab_bytes(wide, kernels::gemm::TC_GROUP_M, wave),
        );
        println!("8192^3: row-major {row_major} B, grouped {grouped} B");
        assert!(grouped * 3 < row_major * 2, "{grouped} vs {row_major}");
        let narrow = GemmShape::new(4096, 4096, 4096);
        println!(
            "4096^3: row-major {} B, grouped {} B",
            wave_model_ab_bytes(narrow, 1, wave),
            wave_model_ab_bytes(narrow, kernels::gemm::TC_GROUP_M, wave)
        );
    }

    #[test]
    fn accumulating_reads_c_once_and_an_empty_c_costs_nothing() {
        let shape = GemmShape::new(3, 5, 7);
        let over = GemmKernel::Tiled.cost(shape, Epilogue::Overwrite);
        let acc = GemmKernel::Tiled.cost(shape, Epilogue::Accumulate);
        assert_eq!(
            acc.compulsory().bytes_read - over.compulsory().bytes_read,
            4 * 15
        );
        let empty = GemmKernel::Naive.cost(GemmShape::new(0, 5, 7), Epilogue::Accumulate);
        assert_eq!(empty.bytes(), 0);
    }
}
