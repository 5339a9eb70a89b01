//! The host side of the kernel registry (`kernels::registry`, docs/registry.md): one harness for
//! every registered kernel, which sizes and fills its buffers from its [`Spec`], launches it on
//! the runtime's backend, and checks the output against the spec's reference and the emulator's
//! counts against its cost model. `cargo xtask run` and the property test
//! `tests/tests/registered.rs` both go through it.

use std::cell::RefCell;

use half::{bf16, f16};
use kernels::cuda::GlobalPtr;
use kernels::cuda::tma::TensorMap;
pub use kernels::registry::{Baseline, Buffer, ComputeUnit, Cost, Dims, Elem, Spec};
use kernels::registry::{TensorMaps, Untyped};

use crate::buffer::DeviceBuffer;
use crate::runtime::{Launched, Runtime, dispatch};
use crate::tensor_map::TensorMaps2d;
use crate::{Error, Result};
use emu::LaunchConfig;

/// Every registered kernel, in the order of `kernels/src/lib.rs`'s `registry!` block.
pub fn all() -> &'static [&'static Spec] {
    kernels::REGISTRY
}

/// The registered kernel named `name` (its PTX entry point).
pub fn find(name: &str) -> Option<&'static Spec> {
    all().iter().copied().find(|s| s.name == name)
}

/// The spec's cost model at `dims`, on the spec's compute unit: every byte the kernel
/// requests, its re-reads included, which is what the emulator counts.
pub fn cost(spec: &Spec, dims: Dims) -> Cost {
    (spec.cost)(dims)
}

/// [`cost`] without the re-reads that a GPU's L2 may serve (`Cost::rereads`) or keeps
/// (`Cost::resident_rereads`, `Cost::l2_rereads`): the compulsory traffic, which a GPU's
/// measurement is read against.
pub fn compulsory_cost(spec: &Spec, dims: Dims) -> Cost {
    cost(spec, dims).compulsory()
}

/// [`cost`] with no cache between the SMs and HBM but the certain one: every byte requested,
/// re-reads included, but those of a buffer a GPU's L2 keeps for the whole launch
/// (`Cost::resident_rereads`) and those a block reads again right after the first read
/// (`Cost::l2_rereads`). A modelled row shows its time as `no-cache` (`--wide`) where it is more
/// than the compulsory bytes' (a tiled GEMM's); it is never the roofline bound.
pub fn modelled_cost(spec: &Spec, dims: Dims) -> Cost {
    cost(spec, dims).modelled()
}

/// `dims` as a row's shape: `1048583 elements`, `200 x 300 f32`. A first dimension named `n`
/// counts elements, and the others are its parameters: `16M elements at stride 8`. A matrix
/// product's (`m`, `n`, `k`) of equal sides is a cube, as the GEMM lessons name their sizes:
/// `4096^3`.
pub fn describe(spec: &Spec, dims: Dims) -> String {
    let used = &dims[..spec.dims.len().clamp(1, 5)];
    match (spec.dims, used) {
        (_, [n]) => elements(*n),
        (["m", "n", "k"], [m, n, k]) if m == n && n == k => format!("{m}^3"),
        // A projection of M rows of K features to N (the GEMV's `Y = X W^T`).
        (["m", "k", "n"], [m, k, n]) => {
            format!("M={m}: {k} -> {n} {}", (spec.output)(dims).elem.name())
        }
        // Attention: `4x16x4096x128 bf16`, self-attention's one sequence length; ` causal` for a
        // masked spec (named `_causal`), as the rows and the vendor baseline read it.
        (["batch", "heads", "n_q", "n_kv", "d"], [b, h, q, kv, d]) => {
            let keys = if q == kv {
                String::new()
            } else {
                format!(" over {kv} keys")
            };
            let mask = if spec.name.ends_with("_causal") {
                " causal"
            } else {
                ""
            };
            let elem = (spec.output)(dims).elem.name();
            format!("{b}x{h}x{q}x{d}{keys} {elem}{mask}")
        }
        // Decode attention: `1x32q/8kv ctx [4096]`, the query and KV heads and each sequence's
        // keys (`kernels::decode::attention::context_lengths`), ` pages of 16` on a paged cache.
        (["batch", "kv_heads", "group", "ctx", paged @ ..], [b, kv, g, _, page @ ..]) => {
            let lens = kernels::decode::attention::context_lengths(dims);
            let mut text = format!("{b}x{}q/{kv}kv ctx {lens:?}", g * kv);
            if let ([_], [page]) = (paged, page) {
                text.push_str(&format!(" pages of {page}"));
            }
            text
        }
        (["n", params @ ..], [n, values @ ..]) => {
            let mut text = elements(*n);
            for (name, v) in params.iter().zip(values) {
                text.push_str(&format!(" at {name} {v}"));
            }
            text
        }
        _ => {
            let parts: Vec<String> = used.iter().map(usize::to_string).collect();
            format!("{} {}", parts.join(" x "), (spec.output)(dims).elem.name())
        }
    }
}

/// `n` elements as a row's shape says them: `64M elements` for a whole number of Mi, else the
/// count.
pub fn elements(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{}M elements", n >> 20)
    } else {
        format!("{n} elements")
    }
}

/// `v` rounded to the nearest value of `elem`, widened back to f32: what a kernel reading a
/// buffer of `elem` sees.
pub fn round_to(elem: Elem, v: f32) -> f32 {
    match elem {
        Elem::F32 => v,
        Elem::F16 => f16::from_f32(v).to_f32(),
        Elem::Bf16 => bf16::from_f32(v).to_f32(),
        Elem::U32 => v.floor().max(0.0),
    }
}

/// The spec's inputs at `dims`, uniform in its `input_range` from `seed` (`reference::uniform`),
/// each rounded to its buffer's element type.
pub fn inputs(spec: &Spec, dims: Dims, seed: u64) -> Vec<Vec<f32>> {
    let (lo, hi) = spec.input_range;
    (spec.inputs)(dims)
        .into_iter()
        .enumerate()
        .map(|(i, b)| {
            let mut x = crate::reference::uniform(b.len, seed.wrapping_add(i as u64), lo, hi);
            x.iter_mut().for_each(|v| *v = round_to(b.elem, *v));
            x
        })
        .collect()
}

/// A device buffer of one of the element types a spec declares.
pub enum TypedBuffer {
    F32(DeviceBuffer<f32>),
    F16(DeviceBuffer<f16>),
    Bf16(DeviceBuffer<bf16>),
    U32(DeviceBuffer<u32>),
}

impl TypedBuffer {
    /// `values` as `elem` on the device, each rounded to nearest.
    fn upload(rt: &Runtime, elem: Elem, values: &[f32]) -> Result<Self> {
        Ok(match elem {
            Elem::F32 => Self::F32(rt.upload(values)?),
            Elem::F16 => {
                Self::F16(rt.upload(&values.iter().map(|&v| f16::from_f32(v)).collect::<Vec<_>>())?)
            }
            Elem::Bf16 => Self::Bf16(
                rt.upload(
                    &values
                        .iter()
                        .map(|&v| bf16::from_f32(v))
                        .collect::<Vec<_>>(),
                )?,
            ),
            // Whole numbers below 2^24 ([`round_to`]): `as` converts them exactly.
            Elem::U32 => {
                Self::U32(rt.upload(&values.iter().map(|&v| v as u32).collect::<Vec<_>>())?)
            }
        })
    }

    /// `buffer.len` zeros of its type.
    fn alloc(rt: &Runtime, buffer: Buffer) -> Result<Self> {
        Ok(match buffer.elem {
            Elem::F32 => Self::F32(rt.alloc(buffer.len)?),
            Elem::F16 => Self::F16(rt.alloc(buffer.len)?),
            Elem::Bf16 => Self::Bf16(rt.alloc(buffer.len)?),
            Elem::U32 => Self::U32(rt.alloc(buffer.len)?),
        })
    }

    /// The buffer's values, widened to f32 (exactly; words up to 2^24, past which a kernel's
    /// output of words is not what its inputs were, and no f32 tells the difference).
    pub fn download(&self, rt: &Runtime) -> Result<Vec<f32>> {
        Ok(match self {
            Self::F32(b) => rt.download(b)?,
            Self::F16(b) => rt.download(b)?.iter().map(|v| v.to_f32()).collect(),
            Self::Bf16(b) => rt.download(b)?.iter().map(|v| v.to_f32()).collect(),
            Self::U32(b) => rt.download(b)?.iter().map(|&v| v as f32).collect(),
        })
    }

    /// The tensor maps `maps` declares over this buffer ([`encode`]).
    fn tensor_maps(&self, rt: &Runtime, maps: &TensorMaps) -> Result<TensorMaps2d> {
        match self {
            Self::F32(b) => encode(rt, b, maps),
            Self::F16(b) => encode(rt, b, maps),
            Self::Bf16(b) => encode(rt, b, maps),
            Self::U32(b) => encode(rt, b, maps),
        }
    }

    fn untyped(&self) -> Untyped {
        match self {
            Self::F32(b) => untyped(b),
            Self::F16(b) => untyped(b),
            Self::Bf16(b) => untyped(b),
            Self::U32(b) => untyped(b),
        }
    }
}

/// The tensor maps `maps` declares over `buffer`, encoded for `rt` (a driver call each on a GPU).
fn encode<T: crate::buffer::Element>(
    rt: &Runtime,
    buffer: &DeviceBuffer<T>,
    maps: &TensorMaps,
) -> Result<TensorMaps2d> {
    let (shape, boxes) = ((maps.rows, maps.cols), (maps.box_rows, maps.box_cols));
    rt.tensor_maps_2d(buffer, maps.slabs, shape, boxes, maps.swizzle)
}

/// The error of a spec whose tensor maps view an input it does not have.
fn no_input(spec: &Spec, maps: &TensorMaps, inputs: usize) -> Error {
    Error::Config(format!(
        "{}: tensor maps over input {}, the launch has {inputs}",
        spec.name, maps.input
    ))
}

/// The spec's tensor maps at `dims` over `inputs` (its inputs in order, all of `T`), encoded for
/// `rt`: what [`upload`] encodes, for an op of `host::ops` that keeps them from one launch to
/// the next ([`launch_on_maps`], [`launch_with`]).
pub fn tensor_maps<T: SpecElement>(
    rt: &Runtime,
    spec: &Spec,
    dims: Dims,
    inputs: &[&DeviceBuffer<T>],
) -> Result<Vec<TensorMaps2d>> {
    (spec.tensor_maps)(dims)
        .iter()
        .map(|maps| match inputs.get(maps.input) {
            Some(buffer) => encode(rt, buffer, maps),
            None => Err(no_input(spec, maps, inputs.len())),
        })
        .collect()
}

/// A buffer of `T` as the kernel crate's [`Untyped`]: its address and its element type.
fn untyped<T: SpecElement>(b: &DeviceBuffer<T>) -> Untyped {
    Untyped {
        ptr: b.ptr().cast::<u8>(),
        elem: T::ELEM,
    }
}

/// The element types a spec's buffers hold, as host buffers hold them (`half`'s f16 and bf16
/// are the kernel crate's `F16` and `Bf16` on the host).
pub trait SpecElement: kernels::registry::Element + crate::buffer::Element {}
impl<T: kernels::registry::Element + crate::buffer::Element> SpecElement for T {}

/// One launch's buffers on the device.
pub struct Uploaded {
    pub dims: Dims,
    pub inputs: Vec<TypedBuffer>,
    pub output: TypedBuffer,
    /// The spec's scratch buffers, zeroed.
    pub workspaces: Vec<DeviceBuffer<f32>>,
    /// The spec's index inputs, as its `indices` computes them from the dimensions.
    pub indices: Vec<DeviceBuffer<u32>>,
    /// The spec's tensor maps over the inputs, encoded once (a timed launch repeats on them).
    pub tensor_maps: Vec<TensorMaps2d>,
}

/// Uploads `inputs` (as [`inputs`] makes them, each converted to its buffer's element type) and
/// the spec's index inputs, encodes its tensor maps over them, and allocates the output and the
/// workspaces, after checking that `dims` are what the spec launches: each at least 1 and at
/// most `u32::MAX`, a multiple of the spec's `multiple`, and the inputs the lengths the spec
/// asks for.
pub fn upload(rt: &Runtime, spec: &Spec, dims: Dims, inputs: &[Vec<f32>]) -> Result<Uploaded> {
    for ((name, &d), &multiple) in spec.dims.iter().zip(&dims).zip(&spec.shapes.multiple) {
        if d == 0 || u32::try_from(d).is_err() {
            return Err(Error::Shape(format!(
                "{}: {name} = {d}; a registered kernel's dimensions are 1 to {}",
                spec.name,
                u32::MAX
            )));
        }
        if !d.is_multiple_of(multiple) {
            return Err(Error::Shape(format!(
                "{}: {name} = {d}, the spec takes multiples of {multiple}",
                spec.name
            )));
        }
    }
    let declared = (spec.inputs)(dims);
    let lens: Vec<usize> = declared.iter().map(|b| b.len).collect();
    let got: Vec<usize> = inputs.iter().map(Vec::len).collect();
    if got != lens {
        return Err(Error::Shape(format!(
            "{}: inputs of lengths {got:?}, the spec asks for {lens:?} at {dims:?}",
            spec.name
        )));
    }
    let inputs: Vec<TypedBuffer> = declared
        .iter()
        .zip(inputs)
        .map(|(b, x)| TypedBuffer::upload(rt, b.elem, x))
        .collect::<Result<_>>()?;
    let tensor_maps = (spec.tensor_maps)(dims)
        .iter()
        .map(|maps| match inputs.get(maps.input) {
            Some(buffer) => buffer.tensor_maps(rt, maps),
            None => Err(no_input(spec, maps, inputs.len())),
        })
        .collect::<Result<_>>()?;
    Ok(Uploaded {
        dims,
        inputs,
        tensor_maps,
        output: TypedBuffer::alloc(rt, (spec.output)(dims))?,
        workspaces: (spec.workspaces)(dims)
            .into_iter()
            .map(|n| rt.alloc(n))
            .collect::<Result<_>>()?,
        indices: (spec.indices)(dims)
            .iter()
            .map(|x| rt.upload(x))
            .collect::<Result<_>>()?,
    })
}

/// Launches the spec's kernel on `buffers`: the emulator's counts, or `None` from a GPU.
pub fn launch(rt: &Runtime, spec: &Spec, buffers: &Uploaded) -> Result<Launched> {
    let inputs: Vec<Untyped> = buffers.inputs.iter().map(TypedBuffer::untyped).collect();
    let workspaces: Vec<&DeviceBuffer<f32>> = buffers.workspaces.iter().collect();
    let indices: Vec<&DeviceBuffer<u32>> = buffers.indices.iter().collect();
    let maps: Vec<GlobalPtr<TensorMap>> = buffers.tensor_maps.iter().map(|m| m.ptr()).collect();
    launch_untyped(
        rt,
        spec,
        &inputs,
        buffers.output.untyped(),
        (&workspaces, &indices, &maps),
        buffers.dims,
        false,
        &spec.launch,
    )
}

/// Launches the spec's kernels on buffers its caller sized for `dims` (an op of `host::ops` that
/// checked its arguments), the inputs and the workspaces in the spec's order; an error if their
/// element type is not the spec's. The spec's launch is the kernel's launch, or its kernels' in
/// order: the op writes none of its own. `accumulate`: add to the output's contents
/// (`C = A B + C`), which only a spec that `accumulates` does; the others refuse it.
pub fn launch_on<I: SpecElement, O: SpecElement>(
    rt: &Runtime,
    spec: &Spec,
    inputs: &[&DeviceBuffer<I>],
    output: &DeviceBuffer<O>,
    workspaces: &[&DeviceBuffer<f32>],
    dims: Dims,
    accumulate: bool,
) -> Result<Launched> {
    let inputs: Vec<Untyped> = inputs.iter().map(|b| untyped(*b)).collect();
    let output = untyped(output);
    launch_untyped(
        rt,
        spec,
        &inputs,
        output,
        (workspaces, &[], &[]),
        dims,
        accumulate,
        &spec.launch,
    )
}

/// [`launch_on`] for a spec that reads its inputs through tensor maps (its `tensor_maps`):
/// `maps` are [`tensor_maps`]' of the same inputs at the same dimensions, which the op keeps from
/// one launch to the next (GEMM step 5's `host::ops::gemm::GemmOperands`).
pub fn launch_on_maps<I: SpecElement, O: SpecElement>(
    rt: &Runtime,
    spec: &Spec,
    (inputs, maps): (&[&DeviceBuffer<I>], &[TensorMaps2d]),
    output: &DeviceBuffer<O>,
    dims: Dims,
    accumulate: bool,
) -> Result<Launched> {
    let inputs: Vec<Untyped> = inputs.iter().map(|b| untyped(*b)).collect();
    let maps: Vec<GlobalPtr<TensorMap>> = maps.iter().map(TensorMaps2d::ptr).collect();
    launch_untyped(
        rt,
        spec,
        &inputs,
        untyped(output),
        (&[], &[], &maps),
        dims,
        accumulate,
        &spec.launch,
    )
}

/// [`launch_on`] for an op whose arguments the spec fixes and its caller chooses (attention's
/// softmax scale and mask, decode attention's lengths and splits): `launch` takes the spec's
/// place, a launch function of the kernel crate that the spec's own launch calls with its
/// values (`kernels::attention::launch_fused`). The buffers are checked against the spec's as
/// [`launch_on`] checks them; `indices` are the op's own index inputs, in the spec's order
/// (`kernels::registry::Spec::indices`: decode attention's lengths and page table), and `maps`
/// its tensor maps ([`tensor_maps`] of the same inputs: attention on wgmma's).
#[allow(clippy::too_many_arguments)]
pub fn launch_with<I: SpecElement, O: SpecElement>(
    rt: &Runtime,
    spec: &Spec,
    inputs: &[&DeviceBuffer<I>],
    output: &DeviceBuffer<O>,
    (workspaces, indices, maps): (
        &[&DeviceBuffer<f32>],
        &[&DeviceBuffer<u32>],
        &[TensorMaps2d],
    ),
    dims: Dims,
    launch: &LaunchWith,
) -> Result<Launched> {
    let inputs: Vec<Untyped> = inputs.iter().map(|b| untyped(*b)).collect();
    let maps: Vec<GlobalPtr<TensorMap>> = maps.iter().map(TensorMaps2d::ptr).collect();
    launch_untyped(
        rt,
        spec,
        &inputs,
        untyped(output),
        (workspaces, indices, &maps),
        dims,
        false,
        launch,
    )
}

/// A launch in place of a spec's ([`launch_with`]).
pub type LaunchWith<'a> = dyn Fn(
        &dyn kernels::registry::Launcher,
        &kernels::registry::Buffers,
        Dims,
    ) -> std::result::Result<(), kernels::registry::LaunchError>
    + 'a;

/// The buffers [`launch_untyped`] hands a launch beside its inputs and output: the workspaces,
/// the index inputs and the tensor maps.
type Extra<'a> = (
    &'a [&'a DeviceBuffer<f32>],
    &'a [&'a DeviceBuffer<u32>],
    &'a [GlobalPtr<TensorMap>],
);

/// [`launch`], [`launch_on`] and [`launch_with`]: refuses a kernel of the sm_90a build on a
/// runtime without it and a spec's tensor maps not given, checks each buffer's element type
/// against the spec's, then launches with `launch` (the spec's, but for [`launch_with`]) on the
/// inputs, the output, the workspaces, the index inputs and the tensor maps.
#[allow(clippy::too_many_arguments)]
fn launch_untyped(
    rt: &Runtime,
    spec: &Spec,
    inputs: &[Untyped],
    output: Untyped,
    (workspaces, indices, tensor_maps): Extra,
    dims: Dims,
    accumulate: bool,
    launch: &LaunchWith,
) -> Result<Launched> {
    if accumulate && !spec.accumulates {
        return Err(Error::Config(format!(
            "{}: asked to add to its output, which its spec does not (`accumulates: false`)",
            spec.name
        )));
    }
    refuse_unless_runs_on(rt, spec)?;
    let maps = (spec.tensor_maps)(dims).len();
    if tensor_maps.len() != maps {
        return Err(Error::Config(format!(
            "{}: reads its inputs through {maps} tensor maps, {} given (`registry::upload` encodes them)",
            spec.name,
            tensor_maps.len()
        )));
    }
    let declared = (spec.inputs)(dims);
    let given = inputs.iter().map(|b| b.elem).chain([output.elem]);
    let wanted = declared
        .iter()
        .map(|b| b.elem)
        .chain([(spec.output)(dims).elem]);
    if !given.clone().eq(wanted.clone()) {
        return Err(Error::Config(format!(
            "{}: buffers of {} given, the spec declares {} (inputs, then the output)",
            spec.name,
            given.map(Elem::name).collect::<Vec<_>>().join(", "),
            wanted.map(Elem::name).collect::<Vec<_>>().join(", ")
        )));
    }
    let scratch: Vec<_> = workspaces.iter().map(|b| b.ptr()).collect();
    let indices: Vec<_> = indices.iter().map(|b| b.ptr()).collect();
    let args = kernels::registry::Buffers {
        inputs,
        output,
        workspaces: &scratch,
        indices: &indices,
        accumulate,
        tensor_maps,
    };
    let launcher = RuntimeLauncher {
        rt,
        counters: RefCell::new(None),
    };
    match launch(&launcher, &args, dims) {
        Ok(()) => Ok(launcher.counters.into_inner().flatten()),
        Err(e) => Err(match e.downcast::<Error>() {
            Ok(e) => *e,
            Err(other) => Error::Config(format!("{}: {other}", spec.name)),
        }),
    }
}

/// Whether `rt` runs the spec's kernels: every runtime, but for a kernel of the sm_90a build
/// only ([`Spec`]'s `sm90a_only`), which needs [`Runtime::has_wgmma`].
pub fn runs_on(rt: &Runtime, spec: &Spec) -> bool {
    !spec.sm90a_only || rt.has_wgmma()
}

/// [`runs_on`] as the launch's refusal, saying what would run the spec.
pub fn refuse_unless_runs_on(rt: &Runtime, spec: &Spec) -> Result<()> {
    if runs_on(rt, spec) {
        return Ok(());
    }
    Err(Error::Unsupported(format!(
        "{} needs wgmma and the TMA: an sm_90a GPU (H100, H200), the source emulator or the PTX backend with KERNELS_PTX_ARCH=sm_90a, not {}",
        spec.name,
        rt.device_name()
    )))
}

/// The launches the spec makes at `dims`, in order, each PTX entry with its geometry, recorded
/// without running anything: the launch function is handed buffers of the declared types at
/// address 0, which no recorded launch reads. A spec that launches several kernels (a softmax's
/// passes, the naive attention flow) or picks one by its dimensions (the GEMV's row tiles) says
/// here which, and how: `cargo xtask ptxas`'s occupancy table reads them.
pub fn launches(spec: &Spec, dims: Dims) -> Result<Vec<(&'static str, LaunchConfig)>> {
    let null = |elem| Untyped {
        ptr: GlobalPtr::from_raw(std::ptr::null_mut()),
        elem,
    };
    let inputs: Vec<_> = (spec.inputs)(dims).iter().map(|b| null(b.elem)).collect();
    let workspaces = vec![GlobalPtr::from_raw(std::ptr::null_mut()); (spec.workspaces)(dims).len()];
    let indices = vec![GlobalPtr::from_raw(std::ptr::null_mut()); (spec.indices)(dims).len()];
    let maps = vec![GlobalPtr::from_raw(std::ptr::null_mut()); (spec.tensor_maps)(dims).len()];
    let args = kernels::registry::Buffers {
        inputs: &inputs,
        output: null((spec.output)(dims).elem),
        workspaces: &workspaces,
        indices: &indices,
        accumulate: false,
        tensor_maps: &maps,
    };
    let recorder = Recorder(RefCell::new(Vec::new()));
    (spec.launch)(&recorder, &args, dims)
        .map_err(|e| Error::Config(format!("{}: {e}", spec.name)))?;
    Ok(recorder.0.into_inner())
}

/// [`kernels::registry::Launcher`] that remembers each launch it is asked for and runs none.
struct Recorder(RefCell<Vec<(&'static str, LaunchConfig)>>);

impl kernels::registry::Launcher for Recorder {
    fn launch(
        &self,
        kernel: &'static str,
        geometry: LaunchConfig,
        _: &(dyn Fn() + Sync),
        _: &[*mut std::ffi::c_void],
        _: &[usize],
    ) -> std::result::Result<(), kernels::registry::LaunchError> {
        self.0.borrow_mut().push((kernel, geometry));
        Ok(())
    }
}

/// Every row of the spec's output at `dims` ([`Spec`]'s `rows`): what the emulator's shapes and
/// the tests check.
pub fn all_rows(spec: &Spec, dims: Dims) -> Vec<usize> {
    (0..(spec.rows)(dims)).collect()
}

/// The rows checked at a GPU shape: [`all_rows`], or as many as the spec's `gpu_rows_checked`
/// says, spread evenly from the first to the last.
pub fn gpu_rows(spec: &Spec, dims: Dims) -> Vec<usize> {
    let rows = (spec.rows)(dims);
    match spec.shapes.gpu_rows_checked {
        Some(k) if k < rows && k >= 2 => (0..k).map(|i| i * (rows - 1) / (k - 1)).collect(),
        _ => all_rows(spec, dims),
    }
}

/// Compares the listed `rows` of `got` (the whole output) with the spec's reference for
/// `inputs`: a one-line summary, or the first element out of tolerance (a NaN where the
/// reference has a number is out of it). The tolerance is absolute, or a multiple of each
/// element's magnitude where the reference states magnitudes.
pub fn check(
    spec: &Spec,
    dims: Dims,
    inputs: &[Vec<f32>],
    got: &[f32],
    rows: &[usize],
) -> std::result::Result<String, String> {
    compare(spec, dims, inputs, got, rows).map_err(|(message, _)| message)
}

/// [`check`] of the output `buffers` hold after [`launch`]; a wrong element also says who last
/// wrote it (the kernel, block, thread and line, or that no store reached it), from the launch
/// rerun on the same buffers with the stores to that element recorded (on an emulator; a GPU
/// records none). A right output costs no rerun.
pub fn check_output(
    rt: &Runtime,
    spec: &Spec,
    buffers: &Uploaded,
    inputs: &[Vec<f32>],
    rows: &[usize],
) -> std::result::Result<String, String> {
    let got = buffers.output.download(rt).map_err(|e| e.to_string())?;
    let (message, i) = match compare(spec, buffers.dims, inputs, &got, rows) {
        Err((message, Some(i))) => (message, i),
        other => return other.map_err(|(message, _)| message),
    };
    let output = buffers.output.untyped();
    let writer = rt.emulated().and_then(|emu| {
        let bytes = output.elem.bytes();
        let watch = emu::StoreWatch {
            allocation: emu.allocation_order(output.ptr.addr())?,
            offset: i * bytes,
            bytes,
        };
        rt.last_store(watch, |watched| {
            let _ = launch(watched, spec, buffers);
        })
    });
    Err(match writer {
        Some(w) => format!("{message}; {w}"),
        None => message,
    })
}

/// [`check`], the error with the index in `got` of the wrong element it names.
fn compare(
    spec: &Spec,
    dims: Dims,
    inputs: &[Vec<f32>],
    got: &[f32],
    rows: &[usize],
) -> std::result::Result<String, (String, Option<usize>)> {
    let refs: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
    let want = (spec.reference)(&refs, dims, rows);
    let tolerance = (spec.tolerance)(dims);
    let total = (spec.rows)(dims);
    let row_len = got.len() / total.max(1);
    if row_len * total != got.len() || want.values.len() != rows.len() * row_len {
        return Err((
            format!(
                "{}: {} rows of the reference hold {} values, the output {} in {total} rows",
                spec.name,
                rows.len(),
                want.values.len(),
                got.len(),
            ),
            None,
        ));
    }
    if want
        .magnitudes
        .as_ref()
        .is_some_and(|m| m.len() != want.values.len())
    {
        return Err((
            format!(
                "{}: the reference states a magnitude for some values, not each",
                spec.name
            ),
            None,
        ));
    }
    let got_rows = rows
        .iter()
        .flat_map(|&r| (r * row_len..(r + 1) * row_len).map(move |i| (i, got[i])));
    // A reference that states each element's bound as its magnitude, with a tolerance of 1
    // (`kernels::registry::Expected`): the messages say "bound".
    let states_bounds = want.magnitudes.is_some() && tolerance == 1.0;
    let mut worst = 0.0f64;
    for (e, (i, g)) in got_rows.enumerate() {
        let (w, magnitude) = (
            want.values[e],
            want.magnitudes.as_ref().map_or(1.0, |m| m[e]),
        );
        let err = (f64::from(g) - w).abs();
        if err.is_nan() || err > tolerance * magnitude {
            let bound = match want.magnitudes {
                None => format!("tolerance {tolerance:e}"),
                Some(_) if states_bounds => format!("its bound {magnitude:e}"),
                Some(_) => format!("tolerance {tolerance:e} x magnitude {magnitude:e}"),
            };
            // Where it is in the output's rows (a matrix's row and column), for a learner to
            // find the index arithmetic that wrote it.
            let at = if total > 1 {
                format!(" (row {}, column {})", i / row_len, i % row_len)
            } else {
                String::new()
            };
            return Err((
                format!(
                    "{}: element {i}{at} is {g:e}, the reference says {w:e} (|error| {err:e} > {bound})",
                    spec.name
                ),
                Some(i),
            ));
        }
        if err > 0.0 {
            worst = worst.max(err / magnitude);
        }
    }
    let sampled = if rows.len() < total {
        format!("{} of {total} rows: ", rows.len())
    } else {
        String::new()
    };
    Ok(match want.magnitudes {
        _ if tolerance == 0.0 => format!("{sampled}exact ({} values)", want.values.len()),
        None => format!("{sampled}max |error| {worst:.1e} <= {tolerance:.1e}"),
        Some(_) if states_bounds => format!(
            "{sampled}max |error| {:.0}% of each element's bound",
            100.0 * worst
        ),
        Some(_) => format!("{sampled}max |error| {worst:.1e} x magnitude <= {tolerance:.1e}"),
    })
}

/// [`kernels::registry::Launcher`] on a [`Runtime`]: each launch goes where the host's
/// `launch!` sends it, and its counts add up.
struct RuntimeLauncher<'a> {
    rt: &'a Runtime,
    counters: RefCell<Option<Launched>>,
}

impl kernels::registry::Launcher for RuntimeLauncher<'_> {
    fn launch(
        &self,
        kernel: &'static str,
        cfg: LaunchConfig,
        thread: &(dyn Fn() + Sync),
        params: &[*mut std::ffi::c_void],
        sizes: &[usize],
    ) -> std::result::Result<(), kernels::registry::LaunchError> {
        let mut params = params.to_vec();
        // SAFETY: `launch_registered!` built `params` and `sizes` from the arguments `thread`
        // passes to the kernel function itself, so they match its signature; the harness sized
        // every buffer from the spec.
        let launched = unsafe { dispatch(self.rt, kernel, &cfg, thread, &mut params, sizes) }?;
        let mut counters = self.counters.borrow_mut();
        *counters = Some(match counters.take() {
            None => launched,
            Some(before) => crate::ops::then(before, launched),
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perf::cost::CostRoofline;

    /// Each spec launches entries of every build; one that launches one kernel is named after it
    /// (its row, `inspect` and the occupancy table name the same thing), one that launches
    /// several (softmax_naive_f32) after none of them.
    #[test]
    fn names_are_unique_and_each_launches_entries_of_every_build() {
        let mut names: Vec<&str> = all().iter().map(|s| s.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "two registered kernels share a name");
        for spec in all() {
            let launched: Vec<&str> = launches(spec, spec.shapes.multiple)
                .unwrap()
                .into_iter()
                .map(|(name, _)| name)
                .collect();
            match launched[..] {
                // Its kernel, or one of a family it picks from by the dimensions (the GEMV's
                // row tiles, `gemv_bf16_m1` to `_m16`), or, for a row the lessons name
                // (`attention_fused_f32`, which launches `flash_attention_f32_d128`), a kernel
                // that is no spec's name, whose occupancy row is its own.
                [one] => assert!(
                    one == spec.name
                        || one.starts_with(&format!("{}_", spec.name))
                        || find(one).is_none(),
                    "{} launches {one}",
                    spec.name
                ),
                _ => assert!(launched.len() > 1 && !launched.contains(&spec.name)),
            }
            for arch in crate::embedded::Arch::ALL {
                let entries = crate::embedded::entry_points(arch.ptx());
                for name in &launched {
                    assert!(entries.contains(name), "{name} is not an entry of {arch:?}");
                }
            }
        }
    }

    /// A kernel of the sm_90a build is refused where no module has it (the PTX backend on the
    /// sm_80 module), saying what runs it; where it runs, a launch without the tensor maps its
    /// spec declares is refused, saying who encodes them; with them (`upload`'s), it passes.
    #[test]
    fn an_sm90a_kernel_needs_its_build_and_its_tensor_maps() {
        let spec = find("gemm_wgmma_bf16").unwrap();
        let dims = [8, 8, 8, 1, 1];
        let sm80 = Runtime::ptx(crate::embedded::program(crate::embedded::Arch::Sm80));
        assert!(!runs_on(&sm80, spec));
        let up = upload(&sm80, spec, dims, &inputs(spec, dims, 1)).unwrap();
        let err = launch(&sm80, spec, &up).unwrap_err().to_string();
        assert!(err.contains("KERNELS_PTX_ARCH=sm_90a"), "{err}");
        let rt = Runtime::emulator();
        let x = rt.upload(&[half::bf16::ZERO; 64]).unwrap();
        let c = rt.alloc::<f32>(64).unwrap();
        let err = launch_on(&rt, spec, &[&x, &x], &c, &[], dims, false).unwrap_err();
        assert!(
            err.to_string()
                .contains("through 2 tensor maps, 0 given (`registry::upload` encodes them)"),
            "{err}"
        );
        let x = inputs(spec, dims, 1);
        let up = upload(&rt, spec, dims, &x).unwrap();
        launch(&rt, spec, &up).unwrap();
        let got = up.output.download(&rt).unwrap();
        check(spec, dims, &x, &got, &all_rows(spec, dims)).unwrap();
    }

    #[test]
    fn a_wrong_output_names_the_element_and_the_tolerance() {
        let spec = find("scaffold_elementwise").unwrap();
        let dims = [3, 1, 1, 1, 1];
        let x = inputs(spec, dims, 1);
        let mut got: Vec<f32> = x[0].iter().map(|v| 2.0 * v + 1.0).collect();
        assert!(
            check(spec, dims, &x, &got, &[0])
                .unwrap()
                .starts_with("exact")
        );
        got[2] += 1e-3;
        let err = check(spec, dims, &x, &got, &[0]).unwrap_err();
        assert!(
            err.contains("element 2") && err.contains("tolerance 0e0"),
            "{err}"
        );
        got[2] = f32::NAN;
        assert!(check(spec, dims, &x, &got, &[0]).is_err());
        // A matrix's wrong element names its row and column: the transpose's output is
        // cols x rows, so element 7 of a 3 x 5 input's transpose is row 2, column 1.
        let spec = find("transpose_naive").unwrap();
        let dims = [3, 5, 1, 1, 1];
        let x = inputs(spec, dims, 1);
        let mut got: Vec<f32> = (0..15).map(|i| x[0][(i % 3) * 5 + i / 3]).collect();
        let rows = all_rows(spec, dims);
        assert!(check(spec, dims, &x, &got, &rows).is_ok());
        got[7] += 1.0;
        let err = check(spec, dims, &x, &got, &rows).unwrap_err();
        assert!(err.contains("element 7 (row 2, column 1) is"), "{err}");
    }

    /// An RMSNorm reads each row twice (the sum of squares, then the scaling), the second time
    /// from L2: declared in `l2_rereads`, the roofline bound counts the row once, so it is not
    /// above the model's prediction (which charges DRAM the first read only), and a modelled row
    /// has no no-cache figure beside its bound.
    #[test]
    fn a_re_read_from_l2_counts_once_in_the_bound() {
        let rmsnorm = Spec {
            cost: |[n, ..]| kernels::registry::Cost {
                bytes_read: 2 * 4 * n as u64,
                bytes_written: 4 * n as u64,
                flops: 3 * n as u64,
                l2_rereads: 4 * n as u64,
                ..kernels::registry::Cost::NONE
            },
            ..*find("scaffold_warp").unwrap()
        };
        let dims = [1 << 20, 1, 1, 1, 1];
        assert_eq!(
            cost(&rmsnorm, dims).bytes_read,
            8 << 20,
            "the emulator's count"
        );
        for c in [
            modelled_cost(&rmsnorm, dims),
            compulsory_cost(&rmsnorm, dims),
        ] {
            assert_eq!(c.bytes_read, 4 << 20, "one read of each row");
            let h100 = perf::specs::GpuSpec::find("h100").unwrap();
            assert_eq!(c.bound_seconds(h100), (8 << 20) as f64 / h100.hbm_bandwidth);
        }
        assert_eq!(
            modelled_cost(&rmsnorm, dims),
            compulsory_cost(&rmsnorm, dims)
        );
    }

    /// Device buffers of a type the spec does not declare are refused before any launch, and
    /// so is a launch asking for a declared buffer as another type.
    #[test]
    fn a_buffer_of_another_element_type_is_refused() {
        let rt = Runtime::emulator();
        let spec = find("vector_add_f16").unwrap();
        let x = rt.upload(&[1.0f32; 4]).unwrap();
        let err = launch_on(&rt, spec, &[&x, &x], &x, &[], [4, 1, 1, 1, 1], false).unwrap_err();
        assert!(
            err.to_string()
                .contains("f32, f32, f32 given, the spec declares f16, f16, f16"),
            "{err}"
        );
        let up = upload(
            &rt,
            spec,
            [4, 1, 1, 1, 1],
            &inputs(spec, [4, 1, 1, 1, 1], 1),
        )
        .unwrap();
        let ptrs: Vec<_> = up.inputs.iter().map(TypedBuffer::untyped).collect();
        let args = kernels::registry::Buffers {
            inputs: &ptrs,
            output: up.output.untyped(),
            workspaces: &[],
            indices: &[],
            accumulate: false,
            tensor_maps: &[],
        };
        let err = args.input::<f32>(1).err().unwrap().to_string();
        assert_eq!(err, "input 1 is f16, the launch asks for it as f32");
        assert!(args.input::<half::f16>(2).is_err());
        assert!(args.output::<half::f16>().is_ok());
    }

    /// Words are drawn as whole numbers that f32 holds exactly, from every spec that declares
    /// them, and a copy of them checks exact; a word off by one does not.
    #[test]
    fn words_are_whole_numbers_f32_holds_exactly() {
        let (lo, hi) = kernels::registry::U32_EXACT_IN_F32;
        for spec in all() {
            let dims = spec.shapes.test_max;
            let words = (spec.inputs)(dims)
                .into_iter()
                .chain([(spec.output)(dims)])
                .any(|b| b.elem == Elem::U32);
            if words {
                let (a, b) = spec.input_range;
                assert!(lo <= a && b <= hi, "{}: {a} to {b}", spec.name);
            }
        }
        let rt = Runtime::emulator();
        let spec = find("copy_words").unwrap();
        let dims = [1000, 1, 1, 1, 1];
        let x = inputs(spec, dims, 5);
        assert!(
            x[0].iter()
                .all(|&v| v.fract() == 0.0 && (lo..=hi).contains(&v))
        );
        let up = upload(&rt, spec, dims, &x).unwrap();
        launch(&rt, spec, &up).unwrap();
        let mut got = up.output.download(&rt).unwrap();
        assert_eq!(got, x[0]);
        assert!(
            check(spec, dims, &x, &got, &[0])
                .unwrap()
                .starts_with("exact")
        );
        got[999] += 1.0;
        assert!(check(spec, dims, &x, &got, &[0]).is_err());
    }

    /// An f16 spec's inputs are f16 values, and its output is checked widened.
    #[test]
    fn inputs_are_rounded_to_their_type_and_the_output_widened() {
        let rt = Runtime::emulator();
        let spec = find("vector_add_f16").unwrap();
        let dims = [1000, 1, 1, 1, 1];
        let x = inputs(spec, dims, 3);
        assert!(x.iter().flatten().all(|&v| f16::from_f32(v).to_f32() == v));
        let up = upload(&rt, spec, dims, &x).unwrap();
        launch(&rt, spec, &up).unwrap();
        let got = up.output.download(&rt).unwrap();
        assert!(
            check(spec, dims, &x, &got, &[0])
                .unwrap()
                .starts_with("exact")
        );
        // The sum before its rounding to f16 is not what the kernel wrote.
        let unrounded: Vec<f32> = x[0].iter().zip(&x[1]).map(|(a, b)| a + b).collect();
        assert!(check(spec, dims, &x, &unrounded, &[0]).is_err());
    }

    #[test]
    fn a_dimension_of_zero_or_past_u32_is_refused() {
        let rt = Runtime::emulator();
        let spec = find("scaffold_tiled").unwrap();
        let err = upload(&rt, spec, [0, 5, 1, 1, 1], &[vec![]]).err().unwrap();
        assert!(err.to_string().contains("rows = 0"), "{err}");
        // Every dimension of a spec is a multiple of its `multiple`, which the test draws.
        for spec in all() {
            let m = spec.shapes.multiple;
            for dims in spec.shapes.every() {
                assert!(
                    dims.iter().zip(m).all(|(d, m)| d % m == 0),
                    "{}: {dims:?}",
                    spec.name
                );
            }
        }
        let err = upload(&rt, spec, [2, 2, 1, 1, 1], &[vec![0.0; 3]])
            .err()
            .unwrap();
        assert!(err.to_string().contains("[3]"), "{err}");
    }

    /// A GEMM's tolerance is a multiple of each element's magnitude `sum_k |a_ik b_kj|`: an
    /// error within it passes, one just past it fails and says so.
    #[test]
    fn a_relative_tolerance_scales_with_each_elements_magnitude() {
        let spec = find("gemm_tiled_f32").unwrap();
        let dims = [3, 4, 5, 1, 1];
        let x = inputs(spec, dims, 2);
        let all = all_rows(spec, dims);
        let want = (spec.reference)(&[&x[0], &x[1]], dims, &all);
        let magnitudes = want.magnitudes.clone().unwrap();
        let bound = (spec.tolerance)(dims) * magnitudes[7];
        let mut got: Vec<f32> = want.values.iter().map(|&v| v as f32).collect();
        assert!(
            check(spec, dims, &x, &got, &all)
                .unwrap()
                .contains("x magnitude")
        );
        got[7] = (want.values[7] + 2.0 * bound) as f32;
        let err = check(spec, dims, &x, &got, &all).unwrap_err();
        assert!(
            err.contains("element 7") && err.contains("x magnitude"),
            "{err}"
        );
        // Checked on row 0 alone, element 7 (row 1) is not looked at.
        assert!(
            check(spec, dims, &x, &got, &[0])
                .unwrap()
                .starts_with("1 of 3 rows")
        );
    }

    /// The GEMV states each element's bound (its sum's error scales with the magnitude, its
    /// bf16 rounding with the value): within it the check says how close, past it the element
    /// and its bound. The bound is the value's bf16 half-ulp and more: a wrong term is not.
    #[test]
    fn a_reference_may_state_each_elements_bound() {
        let spec = find("gemv_bf16").unwrap();
        let dims = [2, 40, 5, 1, 1];
        let x = inputs(spec, dims, 3);
        let all = all_rows(spec, dims);
        let want = (spec.reference)(&[&x[0], &x[1]], dims, &all);
        let bounds = want.magnitudes.clone().unwrap();
        for (v, b) in want.values.iter().zip(&bounds) {
            assert!(
                *b >= v.abs() / 256.0 && *b < v.abs() / 256.0 + 1e-4,
                "{v} {b}"
            );
        }
        let mut got: Vec<f32> = want.values.iter().map(|&v| v as f32).collect();
        let ok = check(spec, dims, &x, &got, &all).unwrap();
        assert!(ok.contains("of each element's bound"), "{ok}");
        got[6] = (want.values[6] + 1.5 * bounds[6]) as f32;
        let err = check(spec, dims, &x, &got, &all).unwrap_err();
        assert!(
            err.contains("element 6") && err.contains("its bound"),
            "{err}"
        );
    }

    /// At a GPU shape a GEMM checks 16 rows from the first to the last; a spec that says
    /// nothing checks every row.
    #[test]
    fn a_gpu_shape_checks_the_rows_its_spec_says() {
        let gemm = find("gemm_naive_f32").unwrap();
        let rows = gpu_rows(gemm, [4096, 4096, 4096, 1, 1]);
        assert_eq!((rows.len(), rows[0], rows[15]), (16, 0, 4095));
        assert_eq!(
            gpu_rows(gemm, [10, 4, 4, 1, 1]),
            all_rows(gemm, [10, 4, 4, 1, 1])
        );
        let transpose = find("transpose_naive").unwrap();
        assert_eq!(gpu_rows(transpose, [8192, 8192, 1, 1, 1]).len(), 8192);
    }

    /// A GEMM's re-reads are in its requested bytes (what the emulator counts) and in the
    /// no-cache figure, not in the compulsory ones, which bound its modelled row.
    #[test]
    fn rereads_are_requested_not_compulsory() {
        let spec = find("gemm_tiled_f32").unwrap();
        let dims = [4096, 4096, 4096, 1, 1];
        let (requested, compulsory) = (cost(spec, dims), compulsory_cost(spec, dims));
        let a_and_b = 2 * 4 * 4096 * 4096;
        assert_eq!(compulsory.bytes_read, a_and_b);
        assert_eq!(requested.bytes_read, a_and_b * 4096 / 32);
        assert_eq!(describe(spec, dims), "4096^3");
        assert_eq!(describe(spec, [64, 32, 16, 1, 1]), "64 x 32 x 16 f32");
        let copy = find("copy_strided").unwrap();
        assert_eq!(
            compulsory_cost(copy, [64, 8, 1, 1, 1]),
            cost(copy, [64, 8, 1, 1, 1])
        );
        assert_eq!(modelled_cost(spec, dims), requested);
        // The GEMV's X (8 KiB at M = 1) is read by each of its 3584 blocks, from an L2 that
        // keeps it: the emulator counts every read, a modelled row and a GPU one.
        let gemv = find("gemv_bf16").unwrap();
        let dims = [1, 4096, 14336, 1, 1];
        let (w, x) = (2 * 4096 * 14336, 2 * 4096);
        assert_eq!(cost(gemv, dims).bytes_read, w + x * 3584);
        assert_eq!(modelled_cost(gemv, dims).bytes_read, w + x);
        assert_eq!(compulsory_cost(gemv, dims).bytes_read, w + x);
        assert_eq!(describe(gemv, dims), "M=1: 4096 -> 14336 bf16");
    }

    /// Only a spec that accumulates is asked to add to its output.
    #[test]
    fn a_spec_that_does_not_accumulate_refuses_to() {
        let rt = Runtime::emulator();
        let x = rt.upload(&[1.0f32; 4]).unwrap();
        let spec = find("vector_add_f32").unwrap();
        let err = launch_on(&rt, spec, &[&x, &x], &x, &[], [4, 1, 1, 1, 1], true).unwrap_err();
        assert!(err.to_string().contains("accumulates: false"), "{err}");
        let gemm = find("gemm_naive_f32").unwrap();
        let c = rt.upload(&[1.0f32; 4]).unwrap();
        launch_on(&rt, gemm, &[&x, &x], &c, &[], [2, 2, 2, 1, 1], true).unwrap();
        // 1 + (1 x 1 + 1 x 1): C added to.
        assert_eq!(rt.download(&c).unwrap(), [3.0; 4]);
    }

    /// A spec's index inputs are uploaded as its rule computes them from the dimensions (decode
    /// attention's lengths and page table); a launch given fewer says which one it asked for.
    #[test]
    fn index_inputs_follow_from_the_dimensions() {
        let rt = Runtime::emulator();
        let spec = find("decode_attention_paged_bf16").unwrap();
        let dims = [2, 2, 4, 300, 16];
        let up = upload(&rt, spec, dims, &inputs(spec, dims, 1)).unwrap();
        let got: Vec<Vec<u32>> = up.indices.iter().map(|b| rt.download(b).unwrap()).collect();
        assert_eq!(got, (spec.indices)(dims));
        assert_eq!(got[0], [300, 77]);
        let (
            [
                TypedBuffer::Bf16(q),
                TypedBuffer::Bf16(k),
                TypedBuffer::Bf16(v),
            ],
            TypedBuffer::Bf16(o),
        ) = (&up.inputs[..], &up.output)
        else {
            panic!("decode attention's buffers are bf16");
        };
        let workspaces: Vec<&DeviceBuffer<f32>> = up.workspaces.iter().collect();
        let lengths_only = [&up.indices[0]];
        let err = launch_with(
            &rt,
            spec,
            &[q, k, v],
            o,
            (&workspaces, &lengths_only, &[]),
            dims,
            &|l, b, d| (spec.launch)(l, b, d),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("index input 1 asked for, the launch has 1"),
            "{err}"
        );
    }

    #[test]
    fn shapes_read_as_the_run_table_writes_them() {
        let (e, t) = (
            find("scaffold_elementwise").unwrap(),
            find("scaffold_tiled").unwrap(),
        );
        assert_eq!(describe(e, [1 << 26, 1, 1, 1, 1]), "64M elements");
        assert_eq!(describe(e, [1000, 1, 1, 1, 1]), "1000 elements");
        assert_eq!(describe(t, [200, 300, 1, 1, 1]), "200 x 300 f32");
        let strided = find("copy_strided").unwrap();
        assert_eq!(
            describe(strided, [1 << 24, 8, 1, 1, 1]),
            "16M elements at stride 8"
        );
        let decode = find("decode_attention_paged_bf16").unwrap();
        assert_eq!(
            describe(decode, [2, 2, 4, 300, 16]),
            "2x8q/2kv ctx [300, 77] pages of 16"
        );
        let contiguous = find("decode_attention_bf16").unwrap();
        assert_eq!(
            describe(contiguous, [1, 8, 4, 4096, 1]),
            "1x32q/8kv ctx [4096]"
        );
    }
}
