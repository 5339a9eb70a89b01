//! The profiler's view of the GEMM steps: the reuse the tile-intensity formula predicts, counted
//! access by access. On whole tiles, a block loads each element of its A and B strips from global
//! memory once and reads it from shared memory (or registers) many times: FLOPs per global byte
//! of A and B equal `GemmKernel::tile_intensity`, and shared reads per staged element equal the
//! tile's width.

use host::ops::gemm::{Epilogue, GemmKernel, GemmOperands, GemmShape, gemm};
use host::reference;
use suite::counting;

/// Global bytes of A and B a launch read (no C is read with `Epilogue::Overwrite`), and the
/// shared bytes it read, from the profile's per-site totals.
fn profiled_bytes(kernel: GemmKernel, shape: GemmShape) -> (u64, u64) {
    let (rt, _) = counting();
    let a = reference::uniform(shape.m * shape.k, 1, -1.0, 1.0);
    let b = reference::uniform(shape.k * shape.n, 2, -1.0, 1.0);
    let ops = GemmOperands::upload(&rt, kernel, &a, &b).unwrap();
    let mut c = rt.alloc::<f32>(shape.m * shape.n).unwrap();
    let profiled = rt.with_options(|o| o.profiling = true);
    let (multiplied, observed) =
        profiled.observe(|rt| gemm(rt, kernel, &ops, &mut c, shape, Epilogue::Overwrite));
    multiplied.unwrap();
    let profile = observed.profile;
    let sites = &profile.kernels[kernel.name()];
    let sum = |space: &str| {
        sites
            .iter()
            .filter(|s| s.space == space && s.access == "read")
            .map(|s| s.bytes)
            .sum::<u64>()
    };
    (sum("global"), sum("shared"))
}

#[test]
fn tiled_steps_read_a_and_b_at_the_tile_intensity() {
    let shape = GemmShape::new(128, 128, 64);
    for kernel in [
        GemmKernel::Naive,
        GemmKernel::Tiled,
        GemmKernel::RegisterBlocked,
    ] {
        let (global, _) = profiled_bytes(kernel, shape);
        let intensity = shape.flops() as f64 / global as f64;
        assert!(
            (intensity - kernel.tile_intensity()).abs() < 1e-9,
            "{}: {intensity} FLOP/B counted, formula {}",
            kernel.name(),
            kernel.tile_intensity()
        );
    }
}

#[test]
fn each_staged_element_is_read_from_shared_memory_tile_width_times() {
    let shape = GemmShape::new(64, 64, 64);
    let (global, shared) = profiled_bytes(GemmKernel::Tiled, shape);
    let tile = GemmKernel::Tiled.reuse_tile();
    assert_eq!(tile.m, tile.n, "the formula below assumes a square tile");
    // Every A element staged is read by the tile's n threads of its row, every B element by the
    // m threads of its column.
    assert_eq!(shared, global * u64::from(tile.n));
}
