//! Occupancy in `cargo xtask ptxas`: for every kernel, from ptxas's registers and static shared
//! memory and the block it is launched with, the blocks and warps one SM holds and the resource
//! that limits them; for the memory-bound kernels, the bytes their resident warps keep in flight
//! against what Little's law asks for HBM bandwidth (`perf::occupancy`).
//!
//! The launches come from the registry: a spec's `occupancy`, or the geometry its launch function
//! gives an entry it launches under another name (recorded, not run); the few kernels no spec
//! launches are listed here by name. A block size is defined once, where the kernel is launched.

use host::embedded::Arch;
use perf::occupancy::{self, BlockResources, HBM_LATENCY_CYCLES, SmLimits};
use perf::specs::GpuSpec;

use crate::nvidia_tools::KernelReport;

/// How a kernel is launched: threads per block, dynamic shared memory, and, for the kernels
/// that stream HBM, the bytes of global loads each thread issues before it waits on the first
/// (read off the kernel's source).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    pub threads: u32,
    pub dynamic_shared: u32,
    pub in_flight_per_thread: Option<u32>,
}

fn launch(threads: u32, dynamic_shared: u32, in_flight: Option<u32>) -> Launch {
    Launch {
        threads,
        dynamic_shared,
        in_flight_per_thread: in_flight,
    }
}

/// The launch of the PTX entry named `name`, or `None` for an entry nobody declares: a
/// registered kernel's from its spec's `occupancy` (`kernels::registry`); an entry a spec
/// launches under another name (its passes, or the one it picks by its dimensions) as the spec
/// launches it ([`launched_by_a_spec`]); the few kernels no spec launches from [`unregistered`].
pub fn launch_of(name: &str) -> Option<Launch> {
    match host::registry::find(name) {
        Some(spec) => Some(from_occupancy(spec.occupancy)),
        None => launched_by_a_spec(name).or_else(|| unregistered(name)),
    }
}

fn from_occupancy(o: kernels::registry::Occupancy) -> Launch {
    launch(o.threads, o.dynamic_shared, o.in_flight_per_thread)
}

/// The entry `name` as the first spec that launches it does, at one of the sizes it names or
/// its property test draws ([`sizes`]; `host::registry::launches` runs nothing). The spec's
/// `occupancy` describes its first launch, whose bytes in flight it states; a later launch of
/// the same geometry is another pass of the same walk over the rows (a softmax's passes) and
/// keeps them, one of another geometry (decode attention's merge) states none.
fn launched_by_a_spec(name: &str) -> Option<Launch> {
    host::registry::all().iter().find_map(|spec| {
        sizes(spec).find_map(|dims| {
            let launches = host::registry::launches(spec, dims).ok()?;
            let (_, first) = *launches.first()?;
            let (_, g) = launches.into_iter().find(|(entry, _)| *entry == name)?;
            let in_flight = spec.occupancy.in_flight_per_thread.filter(|_| g == first);
            Some(launch(g.block.volume() as u32, g.dynamic_shared, in_flight))
        })
    })
}

/// The spec's sizes ([`kernels::registry::Shapes::every`]), then its property test's largest
/// with one dimension at a time taken down through powers of two of its multiple: the sizes at
/// which a spec that picks its kernel by a dimension (the GEMV's rows, decode attention's
/// group) launches each of them.
fn sizes(spec: &kernels::registry::Spec) -> impl Iterator<Item = kernels::registry::Dims> + '_ {
    let (max, multiple) = (spec.shapes.test_max, spec.shapes.multiple);
    let halvings = (0..max.len()).flat_map(move |axis| {
        std::iter::successors(Some(multiple[axis].max(1)), |v| Some(v * 2))
            .take_while(move |v| *v < max[axis])
            .map(move |v| {
                let mut dims = max;
                dims[axis] = v;
                dims
            })
    });
    spec.shapes.every().chain(halvings)
}

/// The launches of the kernels no spec launches: the memory hierarchy's probes, the device math
/// library's probe and the histogram, read off the kernel crate's constants.
fn unregistered(name: &str) -> Option<Launch> {
    use kernels::elementwise::BLOCK_SIZE;
    let l = match name {
        // One 16-byte load per grid-stride step.
        "stream_read" => launch(BLOCK_SIZE, 0, Some(16)),
        "shared_read" | "shared_pointer_chase" => launch(kernels::hierarchy::BLOCK_SIZE, 0, None),
        "pointer_chase" => launch(kernels::hierarchy::CHASE_THREADS, 0, None),
        // Stores only: nothing loaded, nothing to keep in flight but the stores themselves.
        "store_tiles" => launch(kernels::hierarchy::BLOCK_SIZE, 0, None),
        // The device math library's probe: one warp over a handful of inputs
        // (tests/tests/device_math.rs), never a workload.
        "device_math" => launch(32, 0, None),
        // Latency-bound on its atomics and local memory, not a streaming kernel.
        "histogram_u32" => launch(kernels::histogram::THREADS, 0, None),
        _ => return None,
    };
    Some(l)
}

/// The occupancy table `cargo xtask ptxas` prints after ptxas's own, for one SM of the
/// architecture assembled for (sm_80: an A100's; sm_90 and sm_90a: an H100's).
pub fn print(reports: &[KernelReport], arch: Arch) {
    let (sm, gpu) = match arch {
        Arch::Sm80 => (SmLimits::SM80, "a100"),
        Arch::Sm90 | Arch::Sm90a => (SmLimits::SM90, "h100"),
    };
    let gpu = GpuSpec::find(gpu).expect("in the table");
    let need = occupancy::bytes_in_flight_needed(gpu, HBM_LATENCY_CYCLES);
    println!(
        "\noccupancy on one {} SM (max {} warps, {} blocks; shared memory at the largest carve-out):",
        arch.name(),
        sm.max_warps(),
        sm.max_blocks
    );
    println!(
        "{:<34} {:>7} {:>10} {:>6} {:>6} {:>6}  {:<24} {:>17}",
        "kernel",
        "threads",
        "smem (B)",
        "blocks",
        "warps",
        "occ.",
        "limited by",
        "in flight (÷ need)"
    );
    for r in reports {
        let Some(l) = launch_of(&r.name) else {
            println!(
                "{:<34} (no spec launches it, and xtask/src/ptxas/occupancy.rs does not list it)",
                r.name
            );
            continue;
        };
        let block = BlockResources {
            threads: l.threads,
            registers: r.registers,
            shared_bytes: r.shared_bytes + l.dynamic_shared,
        };
        match occupancy::occupancy(&sm, &block) {
            Ok(o) => {
                let in_flight = l
                    .in_flight_per_thread
                    .map(|b| {
                        let bytes = f64::from(o.warps * 32 * b);
                        format!("{:.1} kB ({:.1}x)", bytes / 1e3, bytes / need)
                    })
                    .unwrap_or_default();
                println!(
                    "{:<34} {:>7} {:>10} {:>6} {:>6} {:>5.0}%  {:<24} {:>17}",
                    r.name,
                    l.threads,
                    block.shared_bytes,
                    o.blocks,
                    o.warps,
                    100.0 * o.fraction(&sm),
                    o.limiter_names(),
                    in_flight
                );
            }
            Err(e) => println!("{:<34} cannot launch: {e}", r.name),
        }
    }
    println!(
        "in flight: the loads a memory-bound kernel's resident warps have outstanding per SM; \
         Little's law asks for {:.1} kB per SM to reach {:.2} TB/s on an {} ({:.1} GB/s per SM x \
         {HBM_LATENCY_CYCLES:.0} cycles at {:.2} GHz, the teaching material's unloaded HBM \
         latency; modelled, and more under load)",
        need / 1e3,
        gpu.hbm_bandwidth / 1e12,
        gpu.name,
        gpu.hbm_bandwidth / f64::from(gpu.sms) / 1e9,
        gpu.boost_clock_hz / 1e9
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel the PTX holds has its launch in the table (a new kernel must be added).
    #[test]
    fn every_kernel_has_its_launch() {
        for arch in Arch::ALL {
            for name in host::embedded::entry_points(arch.ptx()) {
                assert!(
                    launch_of(name).is_some(),
                    "{name}: add its launch to xtask/src/ptxas/occupancy.rs"
                );
            }
        }
    }

    /// A registered kernel's launch is its spec's, and the old table does not also list it (so
    /// the two cannot disagree).
    #[test]
    fn a_registered_kernel_launches_as_its_spec_says() {
        for spec in host::registry::all() {
            assert_eq!(unregistered(spec.name), None, "{}: in both", spec.name);
            let l = launch_of(spec.name).unwrap();
            assert_eq!(l.threads, spec.occupancy.threads);
        }
        assert_eq!(launch_of("scaffold_tiled").unwrap().threads, 256);
    }

    /// The table reads the ops' launches: the tensor-core GEMM's 256 threads and dynamic shared
    /// tiles, the fused attention kernels' dynamic shared memory per head dimension.
    #[test]
    fn the_table_is_the_ops_launches() {
        let tc = launch_of("gemm_tensor_core_bf16").unwrap();
        assert_eq!(tc.threads, kernels::gemm::TC_THREADS);
        assert_eq!(tc.dynamic_shared, kernels::gemm::TC_SHARED_BYTES);
        let d64 = launch_of("flash_attention_bf16_d64").unwrap();
        let d128 = launch_of("flash_attention_f16_d128").unwrap();
        assert_eq!(d64.threads, kernels::attention::flash_mma::THREADS as u32);
        assert!(d128.dynamic_shared > d64.dynamic_shared);
        assert_eq!(
            launch_of("flash_attention_f32_d64").unwrap().threads,
            kernels::attention::flash_f32::THREADS as u32
        );
        assert_eq!(
            launch_of("softmax_fused_bf16")
                .unwrap()
                .in_flight_per_thread,
            Some(32)
        );
        let hopper = launch_of("flash_attention_wgmma_bf16_d128").unwrap();
        assert_eq!(
            hopper.threads,
            kernels::attention::flash_wgmma::THREADS as u32
        );
        assert_eq!(
            hopper.dynamic_shared as usize,
            kernels::attention::flash_wgmma::shared_bytes(128)
        );
        assert_eq!(launch_of("no_such_kernel"), None);
    }

    /// An entry a spec launches under another name takes the geometry of that launch: one the
    /// GEMV picks only below its largest M (its property test's sizes), decode attention's merge
    /// (a second pass of another grid: no bytes in flight of its own), the softmax's passes (one
    /// walk over the rows: the spec's bytes in flight each).
    #[test]
    fn an_entry_launched_under_another_name_takes_its_launch() {
        let gemv = &kernels::decode::GEMV_BF16;
        for m in ["gemv_bf16_m2", "gemv_bf16_m8"] {
            assert_eq!(
                launch_of(m),
                Some(from_occupancy(gemv.occupancy)),
                "{m}: its spec's launch"
            );
        }
        let merge = launch_of("decode_attention_merge_bf16").unwrap();
        assert_eq!(merge.threads, kernels::decode::attention::MERGE_THREADS);
        assert_eq!(merge.in_flight_per_thread, None);
        let pass = launch_of("softmax_normalise_f32").unwrap();
        assert_eq!(pass.threads, kernels::softmax::ROW_THREADS);
        assert_eq!(pass.in_flight_per_thread, Some(4));
    }
}
