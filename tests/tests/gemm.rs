//! The GEMM kernels (kernels/src/gemm/) against the f64 reference on random shapes, edges
//! included (M, N, K not multiples of any tile, 1 x 1 x 1), with their counted global traffic and
//! FLOPs against their cost models; exact results on small integers; the shared index helpers
//! (rasterisation, swizzle, fragment positions) on the CPU; and the shapes that are refused.
//! Runs on the backend `KERNELS_BACKEND` picks: the emulator in CI, a GPU when one is present.
//!
//! Shapes are small (the emulator runs every simulated thread as a coroutine on two cores); the
//! tensor-core shapes reach K = 264, i.e. 5 tiles of K, so the 3-stage pipeline wraps around its
//! ring of stages at least once.

use host::ops::gemm::{self, Epilogue, GemmKernel, GemmOperands, GemmShape};
use host::reference::{self, GemmEntry};
use host::runtime::Launched;
use host::{Error, Runtime};
use kernels::gemm::{
    ELEMS_PER_CHUNK, TC_ROW_MULTIPLE, TC_THREADS, TC_WARPS_N, TENSOR_CORE, accumulator_position,
    ldmatrix_x4_lane, raster, swizzled,
};
use proptest::prelude::*;
use suite::runtime;

/// Inputs of the kernel's element type: random values in [-1, 1], or small integers in [-2, 2]
/// (whose products and sums are exact in f32 for any K here), rounded to bf16/f16 for the tensor
/// cores so that the reference multiplies exactly what the kernel does.
fn input(kernel: GemmKernel, len: usize, seed: u64, integers: bool) -> Vec<f32> {
    reference::uniform(len, seed, -1.0, 1.0)
        .into_iter()
        .map(|x| kernel.representable(if integers { (2.0 * x).round() } else { x }))
        .collect()
}

/// Runs `kernel` on A, B (and C's old contents `c0`), returning C and what the launch counted.
fn launch(
    rt: &Runtime,
    kernel: GemmKernel,
    shape: GemmShape,
    epilogue: Epilogue,
    (a, b, c0): (&[f32], &[f32], &[f32]),
) -> host::Result<(Vec<f32>, Launched)> {
    let operands = GemmOperands::upload(rt, kernel, a, b)?;
    let mut c = rt.upload(c0)?;
    let launched = gemm::gemm(rt, kernel, &operands, &mut c, shape, epilogue)?;
    Ok((rt.download(&c)?, launched))
}

/// What a check found: the worst error in units of the magnitude, and the reference.
struct Checked {
    error: f64,
    got: Vec<f32>,
    want: Vec<GemmEntry>,
}

/// Runs `kernel` against the reference, and checks the emulator's counts against the cost model:
/// global bytes exactly (compulsory traffic plus the stated re-reads), FLOPs exactly.
fn check(
    kernel: GemmKernel,
    shape: GemmShape,
    epilogue: Epilogue,
    seed: u64,
    integers: bool,
) -> Result<Checked, TestCaseError> {
    let rt = runtime();
    let GemmShape { m, n, k } = shape;
    if !kernel.runs_on(&rt) {
        eprintln!("{kernel:?} skipped: {} cannot run it", rt.device_name());
        return Ok(Checked {
            error: 0.0,
            got: Vec::new(),
            want: Vec::new(),
        });
    }
    let a = input(kernel, m * k, seed, integers);
    let b = input(kernel, k * n, seed ^ 0xb, integers);
    let c0 = input(GemmKernel::Naive, m * n, seed ^ 0xc, integers);
    let (got, launched) = launch(&rt, kernel, shape, epilogue, (&a, &b, &c0))
        .unwrap_or_else(|e| panic!("{kernel:?} {shape:?} {epilogue:?}: {e}"));
    let old = (epilogue == Epilogue::Accumulate).then_some(&c0[..]);
    let want = reference::gemm(&a, &b, old, (m, n, k));
    if let Some(counted) = launched {
        let model = kernel.cost(shape, epilogue);
        prop_assert_eq!(
            (counted.global_read_bytes, counted.global_write_bytes),
            (model.bytes_read, model.bytes_written),
            "{:?} {:?} {:?}: counted global bytes (read, written) against the model's compulsory {:?} + re-read {}",
            kernel,
            shape,
            epilogue,
            model.compulsory(),
            model.reread_bytes()
        );
        let flops = kernel.executed_flops(shape);
        prop_assert!(
            suite::flops_agree(counted.flops, flops),
            "{:?} {:?}: counted {} FLOPs, model {}",
            kernel,
            shape,
            counted.flops,
            flops
        );
    }
    Ok(Checked {
        error: reference::gemm_error(&got, &want),
        got,
        want,
    })
}

fn within_tolerance(
    kernel: GemmKernel,
    shape: GemmShape,
    epilogue: Epilogue,
    seed: u64,
) -> Result<(), TestCaseError> {
    let checked = check(kernel, shape, epilogue, seed, false)?;
    // A rounding-error bound, justified at `GemmKernel::error_bound`: K + 1 roundings for f32
    // FMA chains, twice that for the tensor cores' unspecified accumulation.
    let tol = kernel.error_bound(shape.k);
    prop_assert!(
        checked.error <= tol,
        "{:?} {:?} {:?}: error {:e} x magnitude, tolerance {:e}",
        kernel,
        shape,
        epilogue,
        checked.error,
        tol
    );
    Ok(())
}

fn epilogue(accumulate: bool) -> Epilogue {
    if accumulate {
        Epilogue::Accumulate
    } else {
        Epilogue::Overwrite
    }
}

proptest! {
    #![proptest_config(suite::proptest_config(12))]

    #[test]
    fn naive_matches_the_reference(m in 1usize..40, n in 1usize..40, k in 1usize..40, acc: bool, seed: u64) {
        within_tolerance(GemmKernel::Naive, GemmShape::new(m, n, k), epilogue(acc), seed)?;
    }

    /// Up to 70: up to 3 x 3 tiles of 32, the last ones partial, and K not a multiple of 32.
    #[test]
    fn tiled_matches_the_reference(m in 1usize..70, n in 1usize..70, k in 1usize..70, acc: bool, seed: u64) {
        within_tolerance(GemmKernel::Tiled, GemmShape::new(m, n, k), epilogue(acc), seed)?;
    }

    /// Up to 2 x 2 tiles of 128, partial; N both a multiple of 4 (16-byte loads of B and C)
    /// and not; K likewise for A.
    #[test]
    fn register_blocked_matches_the_reference(m in 1usize..200, n in 1usize..200, k in 1usize..40, acc: bool, seed: u64) {
        within_tolerance(GemmKernel::RegisterBlocked, GemmShape::new(m, n, k), epilogue(acc), seed)?;
    }

    /// M free; N and K multiples of 8 (the kernel's requirement), K up to 5 tiles of 64.
    #[test]
    fn tensor_core_bf16_matches_the_reference(m in 1usize..150, n8 in 1usize..20, k8 in 1usize..34, acc: bool, seed: u64) {
        let shape = GemmShape::new(m, 8 * n8, 8 * k8);
        within_tolerance(GemmKernel::TensorCoreBf16, shape, epilogue(acc), seed)?;
    }

    #[test]
    fn tensor_core_f16_matches_the_reference(m in 1usize..150, n8 in 1usize..20, k8 in 1usize..34, acc: bool, seed: u64) {
        let shape = GemmShape::new(m, 8 * n8, 8 * k8);
        within_tolerance(GemmKernel::TensorCoreF16, shape, epilogue(acc), seed)?;
    }

    /// Step 5 on the emulator: M free, N and K multiples of 8, up to 3 x 2 tiles of 128 x 256
    /// and K up to 6 tiles of 64, so that the 4-stage ring wraps and every box edge is partial.
    #[test]
    fn wgmma_bf16_matches_the_reference(m in 1usize..260, n8 in 1usize..41, k8 in 1usize..48, acc: bool, seed: u64) {
        let shape = GemmShape::new(m, 8 * n8, 8 * k8);
        within_tolerance(GemmKernel::WgmmaBf16, shape, epilogue(acc), seed)?;
    }

    #[test]
    fn wgmma_f16_matches_the_reference(m in 1usize..260, n8 in 1usize..41, k8 in 1usize..48, acc: bool, seed: u64) {
        let shape = GemmShape::new(m, 8 * n8, 8 * k8);
        within_tolerance(GemmKernel::WgmmaF16, shape, epilogue(acc), seed)?;
    }
}

/// The smallest shapes and shapes one past a tile, for every kernel, on small integers: every
/// product and sum is exact in f32 (|values| <= 2, K <= 330, so sums stay below 2^24), so the
/// result must equal the reference exactly, whatever the order of the additions. Any element
/// taken from the wrong place (a fragment layout, a swizzle, a stage of the ring) shows.
#[test]
fn edge_shapes_are_exact_on_small_integers() {
    for kernel in GemmKernel::ALL {
        let shapes: &[(usize, usize, usize)] = if kernel.is_tensor_core() {
            // 330 / 8 rounds to 41 x 8 = 328: six tiles of K, the last one partial.
            // (3, 264, 16): one column past step 5's 256-wide tile.
            &[
                (1, 8, 8),
                (129, 136, 72),
                (17, 8, 328),
                (257, 8, 8),
                (3, 264, 16),
            ]
        } else {
            &[(1, 1, 1), (33, 17, 9), (129, 5, 3), (2, 131, 33)]
        };
        for (&(m, n, k), seed) in shapes.iter().zip(1..) {
            for acc in [false, true] {
                let shape = GemmShape::new(m, n, k);
                let checked = check(kernel, shape, epilogue(acc), seed, true).unwrap();
                let exact: Vec<f32> = checked.want.iter().map(|w| w.value as f32).collect();
                assert_eq!(checked.got, exact, "{kernel:?} {shape:?} accumulate {acc}");
            }
        }
    }
}

#[test]
fn zero_length_k_gives_zero_or_c() {
    let rt = runtime();
    for kernel in GemmKernel::ALL.into_iter().filter(|k| k.runs_on(&rt)) {
        let shape = GemmShape::new(3, 8, 0);
        let c0: Vec<f32> = (0..24).map(|i| i as f32).collect();
        let (got, _) = launch(&rt, kernel, shape, Epilogue::Accumulate, (&[], &[], &c0)).unwrap();
        assert_eq!(got, c0, "{kernel:?}: C + A B with K = 0 is C");
        let (got, _) = launch(&rt, kernel, shape, Epilogue::Overwrite, (&[], &[], &c0)).unwrap();
        assert_eq!(got, vec![0.0; 24], "{kernel:?}: A B with K = 0 is 0");
    }
}

#[test]
fn shapes_the_tensor_core_kernel_cannot_take_are_refused_naming_the_multiple() {
    let rt = runtime();
    for (n, k) in [(8, 12), (20, 16)] {
        let shape = GemmShape::new(4, n, k);
        let (a, b, c) = (vec![0.0; 4 * k], vec![0.0; k * n], vec![0.0; 4 * n]);
        for kernel in GemmKernel::ALL
            .into_iter()
            .filter(|k| k.is_tensor_core() && k.runs_on(&rt))
        {
            let err = launch(&rt, kernel, shape, Epilogue::Overwrite, (&a, &b, &c)).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, Error::Shape(_)), "{msg}");
            assert!(
                msg.contains(&format!("multiples of {TC_ROW_MULTIPLE}"))
                    && msg.contains(&format!("K = {k} and N = {n}")),
                "{msg}"
            );
        }
    }
}

#[test]
fn buffers_that_do_not_match_the_shape_are_refused_with_their_lengths() {
    let rt = runtime();
    let shape = GemmShape::new(3, 5, 4);
    let err = launch(
        &rt,
        GemmKernel::Tiled,
        shape,
        Epilogue::Overwrite,
        (&[0.0; 11], &[0.0; 20], &[0.0; 15]),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("A has 11 elements") && err.contains("M x K A has 3 x 4 = 12"),
        "{err}"
    );
}

/// Rasterisation visits every tile exactly once, and walks down a group of rows first.
#[test]
fn raster_is_a_bijection_that_walks_down_groups_of_rows() {
    for blocks_m in 1..20 {
        for blocks_n in 1..12 {
            for group in [1, 3, 8] {
                let mut seen = vec![false; (blocks_m * blocks_n) as usize];
                for pid in 0..blocks_m * blocks_n {
                    let (tm, tn) = raster(pid, blocks_m, blocks_n, group);
                    assert!(tm < blocks_m && tn < blocks_n, "{pid} -> ({tm}, {tn})");
                    let i = (tm * blocks_n + tn) as usize;
                    assert!(!seen[i], "({tm}, {tn}) visited twice");
                    seen[i] = true;
                }
                let first_rows = group.min(blocks_m);
                for pid in 0..first_rows {
                    assert_eq!(raster(pid, blocks_m, blocks_n, group), (pid, 0));
                }
            }
        }
    }
}

/// Which of the 8 groups of 4 banks (16 bytes) a byte offset of shared memory falls in.
fn bank_group(byte: usize) -> usize {
    byte / 16 % 8
}

/// The worst number of lanes of one 8-lane phase that hit the same bank group (1: no conflict).
/// A 16-byte access per lane is served 8 lanes at a time, one 128-byte line's worth.
fn conflict_degree(offsets: impl Iterator<Item = usize>) -> usize {
    let mut count = [0usize; 8];
    offsets.for_each(|o| count[bank_group(o)] += 1);
    count.into_iter().max().unwrap()
}

/// The swizzle makes every `ldmatrix` phase and every `cp.async` phase of the tensor-core kernel
/// conflict-free; the plain row-major layout would make the `ldmatrix` reads 8-way conflicts.
#[test]
fn the_swizzled_layout_is_free_of_bank_conflicts() {
    let (bm, bn, bk) = (TENSOR_CORE.m, TENSOR_CORE.n, TENSOR_CORE.k);
    let bytes = |elements: usize| 2 * elements;
    let plain = |row: u32, col: u32, cols: u32| (row * cols + col) as usize;
    type Layout = fn(u32, u32, u32) -> usize;
    let layouts: [(&str, Layout); 2] = [("swizzled", swizzled), ("plain", plain)];
    for (name, layout) in layouts {
        let mut worst_read = 0;
        for phase in 0..4 {
            let lanes = 8 * phase..8 * phase + 8;
            for k0 in (0..bk).step_by(16) {
                // A fragments: 16-row strips at every k step.
                for row0 in (0..bm).step_by(16) {
                    let offs = lanes.clone().map(|l| {
                        let (r, c) = ldmatrix_x4_lane(l);
                        bytes(layout(row0 + r, k0 + c, bk))
                    });
                    worst_read = worst_read.max(conflict_degree(offs));
                }
                // B fragments, transposed: 16 k-rows by pairs of 8-column strips.
                for col0 in (0..bn).step_by(16) {
                    let offs = lanes.clone().map(|l| {
                        let (r, c) = ldmatrix_x4_lane(l);
                        bytes(layout(k0 + r, col0 + c, bn))
                    });
                    worst_read = worst_read.max(conflict_degree(offs));
                }
            }
        }
        // cp.async writes: consecutive threads take consecutive 16-byte chunks of a tile.
        let mut worst_write = 0;
        for (rows, cols) in [(bm, bk), (bk, bn)] {
            let per_row = cols / ELEMS_PER_CHUNK;
            for first in (0..rows * per_row).step_by(8) {
                let offs = (first..first + 8).map(|q| {
                    let (r, c) = (q / per_row, q % per_row * ELEMS_PER_CHUNK);
                    bytes(layout(r, c, cols))
                });
                worst_write = worst_write.max(conflict_degree(offs));
            }
        }
        match name {
            "swizzled" => assert_eq!((worst_read, worst_write), (1, 1), "{name}"),
            _ => assert_eq!((worst_read, worst_write), (8, 1), "{name}"),
        }
    }
    assert_eq!(TC_THREADS, 32 * 2 * TC_WARPS_N, "8 warps, 2 x 4");
}

/// The accumulator layout of `mma.m16n8k16`: the 32 lanes' 4 registers cover the 16 x 8 tile
/// once each.
#[test]
fn accumulator_positions_cover_the_tile_once() {
    let mut seen = [[false; 8]; 16];
    for lane in 0..32 {
        for i in 0..4 {
            let (r, c) = accumulator_position(lane, i);
            assert!(!seen[r as usize][c as usize], "lane {lane} register {i}");
            seen[r as usize][c as usize] = true;
        }
    }
    assert!(seen.iter().flatten().all(|&s| s));
}
