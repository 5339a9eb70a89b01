//! The benchmark cases of `cargo xtask run`: each kernel at a size for the backend, with its
//! inputs, its cost model and a check against the CPU reference.

use std::cell::RefCell;
use std::rc::Rc;

use half::f16;
use host::cost::Cost;
use host::ops::elementwise;
use host::ops::gemm::{self, Epilogue, GemmKernel, GemmOperands, GemmShape};
use host::reference;
use host::runtime::Launched;
use host::{DeviceBuffer, Runtime};

/// How big the problems are: realistic on a GPU (several times the L2, hundreds of MB), small
/// enough for the emulator on two cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    Gpu,
    Emulator,
}

impl Scale {
    fn pick(self, gpu: usize, emulator: usize) -> usize {
        match self {
            Scale::Gpu => gpu,
            Scale::Emulator => emulator,
        }
    }
}

type LaunchFn<'a> = Box<dyn FnMut(&Runtime) -> host::Result<Launched> + 'a>;
type CheckFn<'a> = Box<dyn Fn(&Runtime) -> Result<String, String> + 'a>;

/// One kernel at one shape, ready to run.
pub struct Case<'a> {
    pub kernel: &'static str,
    pub shape: String,
    pub cost: Cost,
    /// Enqueues the work (one or several launches).
    pub launch: LaunchFn<'a>,
    /// Compares the output with the CPU reference: a one-line summary, or what is wrong.
    pub check: CheckFn<'a>,
}

/// A case not yet built: building allocates its buffers, so cases are built one at a time.
pub struct CaseSpec {
    pub kernel: &'static str,
    pub build: for<'a> fn(&'a Runtime, Scale) -> host::Result<Case<'a>>,
}

/// Every case, in the order of the lessons.
pub fn all() -> Vec<CaseSpec> {
    vec![
        CaseSpec {
            kernel: "copy_words",
            build: copy,
        },
        CaseSpec {
            kernel: "vector_add_f32",
            build: vector_add_f32,
        },
        CaseSpec {
            kernel: "vector_add_f16",
            build: vector_add_f16,
        },
    ]
    .into_iter()
    .chain(gemm_cases())
    .collect()
}

fn elements(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{}M elements", n >> 20)
    } else {
        format!("{n} elements")
    }
}

fn exact(what: &str, got: &[f32], want: &[f32]) -> Result<String, String> {
    let diff = reference::max_abs_diff(got, want);
    if diff == 0.0 {
        Ok(format!("exact ({} values)", got.len()))
    } else {
        Err(format!("{what}: max |error| {diff:e}, expected exact"))
    }
}

fn copy(rt: &Runtime, scale: Scale) -> host::Result<Case<'_>> {
    // 256 Mi words = 1 GiB each way on a GPU; a word count that is not a multiple of 4 exercises
    // the kernel's scalar tail.
    let n = scale.pick(1 << 28, (1 << 20) + 3);
    let src_host: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let src = rt.upload(&src_host)?;
    let dst: DeviceBuffer<u32> = rt.alloc(n)?;
    let dst = Rc::new(RefCell::new(dst));
    Ok(Case {
        kernel: "copy_words",
        shape: elements(n),
        cost: elementwise::copy_cost(n),
        launch: Box::new({
            let dst = dst.clone();
            move |rt| elementwise::copy(rt, &src, &mut dst.borrow_mut())
        }),
        check: Box::new(move |rt| {
            let got = rt.download(&dst.borrow()).map_err(|e| e.to_string())?;
            if got == src_host {
                Ok(format!("exact ({n} words)"))
            } else {
                Err("copy differs from its source".into())
            }
        }),
    })
}

fn vector_add_f32(rt: &Runtime, scale: Scale) -> host::Result<Case<'_>> {
    let n = scale.pick(1 << 26, 1 << 20);
    let (a_host, b_host) = (
        reference::uniform(n, 1, -1.0, 1.0),
        reference::uniform(n, 2, -1.0, 1.0),
    );
    let want = reference::vector_add_f32(&a_host, &b_host);
    let (a, b) = (rt.upload(&a_host)?, rt.upload(&b_host)?);
    let c = Rc::new(RefCell::new(rt.alloc::<f32>(n)?));
    Ok(Case {
        kernel: "vector_add_f32",
        shape: elements(n),
        cost: elementwise::vector_add_cost(n, 4),
        launch: Box::new({
            let c = c.clone();
            move |rt| elementwise::vector_add_f32(rt, &a, &b, &mut c.borrow_mut())
        }),
        check: Box::new(move |rt| {
            exact(
                "vector_add_f32",
                &rt.download(&c.borrow()).map_err(|e| e.to_string())?,
                &want,
            )
        }),
    })
}

fn vector_add_f16(rt: &Runtime, scale: Scale) -> host::Result<Case<'_>> {
    let n = scale.pick(1 << 27, 1 << 20);
    let to_f16 = |v: Vec<f32>| v.into_iter().map(f16::from_f32).collect::<Vec<_>>();
    let (a_host, b_host) = (
        to_f16(reference::uniform(n, 3, -1.0, 1.0)),
        to_f16(reference::uniform(n, 4, -1.0, 1.0)),
    );
    let want: Vec<f32> = reference::vector_add_f16(&a_host, &b_host)
        .iter()
        .map(|x| x.to_f32())
        .collect();
    let (a, b) = (rt.upload(&a_host)?, rt.upload(&b_host)?);
    let c = Rc::new(RefCell::new(rt.alloc::<f16>(n)?));
    Ok(Case {
        kernel: "vector_add_f16",
        shape: elements(n),
        cost: elementwise::vector_add_cost(n, 2),
        launch: Box::new({
            let c = c.clone();
            move |rt| elementwise::vector_add_f16(rt, &a, &b, &mut c.borrow_mut())
        }),
        check: Box::new(move |rt| {
            let got: Vec<f32> = rt
                .download(&c.borrow())
                .map_err(|e| e.to_string())?
                .iter()
                .map(|x| x.to_f32())
                .collect();
            exact("vector_add_f16", &got, &want)
        }),
    })
}

/// The GEMM sweep, square sizes M = N = K: on a GPU up to 4096^3 (the benchmark size), on
/// the emulator up to 128^3 so that the whole run stays in seconds.
const GEMM_SIZES: [(usize, usize); 3] = [(1024, 32), (2048, 64), (4096, 128)];

/// Every GEMM step at every size of the sweep, size by size so that each size reads as the
/// progression from step 1 to step 4.
fn gemm_cases() -> Vec<CaseSpec> {
    macro_rules! at_size {
        ($size:literal) => {
            [
                gemm_spec(0, gemm_case::<0, $size>),
                gemm_spec(1, gemm_case::<1, $size>),
                gemm_spec(2, gemm_case::<2, $size>),
                gemm_spec(3, gemm_case::<3, $size>),
                gemm_spec(4, gemm_case::<4, $size>),
            ]
        };
    }
    const _: () = assert!(GemmKernel::ALL.len() == 5 && GEMM_SIZES.len() == 3);
    [at_size!(0), at_size!(1), at_size!(2)]
        .into_iter()
        .flatten()
        .collect()
}

fn gemm_spec(
    kernel: usize,
    build: for<'a> fn(&'a Runtime, Scale) -> host::Result<Case<'a>>,
) -> CaseSpec {
    CaseSpec {
        kernel: GemmKernel::ALL[kernel].name(),
        build,
    }
}

/// Rows of C checked against the CPU reference: all of them on the emulator; on a GPU, 16 spread
/// over the matrix (first and last included), since the f64 reference of a whole 4096^3 product
/// would take minutes on the CPU.
fn gemm_check_rows(m: usize, scale: Scale) -> Vec<usize> {
    match scale {
        Scale::Emulator => (0..m).collect(),
        Scale::Gpu => (0..16).map(|i| i * (m - 1) / 15).collect(),
    }
}

/// Step `KERNEL` of the GEMM sequence at size `SIZE` of the sweep, `C = A B`.
///
/// The cost the figures are read against differs by backend, and the shape says which. On a GPU
/// it is the compulsory traffic (A, B read once, C written), the true roofline: L2 serves many
/// of the tiles' re-reads. On the emulator the figure is modelled, and modelled with every byte
/// the kernel requests (the compulsory traffic plus the re-reads its tiling causes, which the
/// emulator counts exactly): the roofline of a GPU without L2 reuse, where each step's larger
/// tile shows as a higher intensity.
fn gemm_case<const KERNEL: usize, const SIZE: usize>(
    rt: &Runtime,
    scale: Scale,
) -> host::Result<Case<'_>> {
    let kernel = GemmKernel::ALL[KERNEL];
    let (gpu, emulator) = GEMM_SIZES[SIZE];
    let s = scale.pick(gpu, emulator);
    let shape = GemmShape::new(s, s, s);
    let model = kernel.cost(shape, Epilogue::Overwrite);
    let (cost, label) = match scale {
        Scale::Gpu => (model.compulsory, format!("{s}^3")),
        Scale::Emulator => (model.requested(), format!("{s}^3, no L2 reuse")),
    };
    let input = |seed| -> Vec<f32> {
        reference::uniform(s * s, seed, -1.0, 1.0)
            .into_iter()
            .map(|x| kernel.representable(x))
            .collect()
    };
    let (a_host, b_host) = (input(11), input(12));
    let rows = gemm_check_rows(s, scale);
    let want = reference::gemm_rows(&a_host, &b_host, None, (s, s), &rows);
    let operands = GemmOperands::upload(rt, kernel, &a_host, &b_host)?;
    let c = Rc::new(RefCell::new(rt.alloc::<f32>(s * s)?));
    Ok(Case {
        kernel: kernel.name(),
        shape: label,
        cost,
        launch: Box::new({
            let c = c.clone();
            move |rt| {
                gemm::gemm(
                    rt,
                    kernel,
                    &operands,
                    &mut c.borrow_mut(),
                    shape,
                    Epilogue::Overwrite,
                )
            }
        }),
        check: Box::new(move |rt| {
            let all = rt.download(&c.borrow()).map_err(|e| e.to_string())?;
            let got: Vec<f32> = rows
                .iter()
                .flat_map(|&i| all[i * s..(i + 1) * s].iter().copied())
                .collect();
            let error = reference::gemm_error(&got, &want);
            let bound = kernel.error_bound(s);
            if error <= bound {
                Ok(format!(
                    "{} rows within {:.0}% of the rounding bound",
                    rows.len(),
                    100.0 * error / bound
                ))
            } else {
                Err(format!(
                    "error {error:e} x magnitude, rounding bound {bound:e}"
                ))
            }
        }),
    })
}
