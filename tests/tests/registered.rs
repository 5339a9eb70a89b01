//! Every registered kernel (`kernels::registry`, docs/registry.md) against its CPU reference and
//! its cost model, on random sizes from 1 to its spec's `test_max` in each dimension, so edges
//! that are not multiples of a block or a tile are drawn. A kernel added with `cargo xtask new`
//! is tested here with no test of its own to write. Runs on the backend `KERNELS_BACKEND` picks.

use host::registry::{self, Spec};
use proptest::prelude::*;
use suite::runtime;

/// Runs `spec` at `dims` on inputs from `seed`: the output against the reference, the counts
/// against the cost model.
fn check(spec: &Spec, dims: registry::Dims, seed: u64) -> Result<(), TestCaseError> {
    let rt = runtime();
    let inputs = registry::inputs(spec, dims, seed);
    let buffers = registry::upload(&rt, spec, dims, &inputs).unwrap();
    let counters = registry::launch(&rt, spec, &buffers)
        .map_err(|e| TestCaseError::fail(format!("{} at {dims:?}: {e}", spec.name)))?;
    registry::check_output(
        &rt,
        spec,
        &buffers,
        &inputs,
        &registry::all_rows(spec, dims),
    )
    .map_err(|e| TestCaseError::fail(format!("at {dims:?}: {e}")))?;
    if let Some(c) = counters {
        let cost = (spec.cost)(dims);
        prop_assert_eq!(
            (c.global_read_bytes, c.global_write_bytes),
            (cost.bytes_read, cost.bytes_written),
            "{} at {:?}: HBM bytes counted vs the cost model",
            spec.name,
            dims
        );
        // On the tensor cores the emulator counts every `mma` issued, over partial and masked
        // tiles too, which a cost may leave out (attention's states the useful `4 d` per
        // visible pair, what its roofline reads): there the count covers the model. GEMM step
        // 4's cost states its padded FLOPs, and tests/tests/gemm.rs checks them exactly.
        let agree = match cost.unit {
            registry::ComputeUnit::TensorCore16 | registry::ComputeUnit::TensorCore8 => {
                c.flops >= cost.flops
            }
            registry::ComputeUnit::CudaCoreF32 => suite::flops_agree(c.flops, cost.flops),
        };
        prop_assert!(
            agree,
            "{} at {:?}: {} FLOPs counted, the cost model says {}",
            spec.name,
            dims,
            c.flops,
            cost.flops
        );
    }
    Ok(())
}

/// The specs tested here: all but the Hopper kernels' (`sm90a_only`), whose edges their own
/// tests draw (tests/tests/gemm.rs, attention.rs, ptx.rs): a block of theirs costs the emulator
/// a tenth to a third of a second, which these draws would multiply (13 s of CPU a run).
fn tested() -> impl Iterator<Item = &'static Spec> {
    registry::all().iter().copied().filter(|s| !s.sm90a_only)
}

/// Dimensions from 1 to `max` in each used axis (the others 1), drawn from `unit` in [0, 1),
/// each rounded up to the spec's multiple (`max` is one).
fn dims_within(spec: &Spec, unit: [f64; 5]) -> registry::Dims {
    let mut dims = [1; 5];
    for (axis, d) in dims.iter_mut().enumerate().take(spec.dims.len()) {
        let max = spec.shapes.test_max[axis];
        *d = (1 + (unit[axis] * max as f64) as usize % max)
            .next_multiple_of(spec.shapes.multiple[axis]);
    }
    dims
}

proptest! {
    #![proptest_config(suite::proptest_config(16))]

    #[test]
    fn every_registered_kernel_matches_its_reference_and_cost_model(
        unit in [0.0f64..1.0, 0.0f64..1.0, 0.0f64..1.0, 0.0f64..1.0, 0.0f64..1.0],
        seed in any::<u64>(),
    ) {
        for spec in tested() {
            check(spec, dims_within(spec, unit), seed)?;
        }
    }
}

/// One element (or the spec's smallest multiple) and one block exactly: the edges the random
/// sizes may miss.
#[test]
fn the_smallest_and_the_block_sized_problems_pass() {
    for spec in tested() {
        for dims in [[1; 5], [256, 256, 1, 1, 1]] {
            let mut d = [1; 5];
            for (axis, v) in d.iter_mut().enumerate().take(spec.dims.len()) {
                let multiple = spec.shapes.multiple[axis];
                *v = dims[axis]
                    .min(spec.shapes.test_max[axis])
                    .next_multiple_of(multiple);
            }
            check(spec, d, 7).unwrap();
        }
    }
}
