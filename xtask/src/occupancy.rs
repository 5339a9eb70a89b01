//! Occupancy in `cargo xtask ptxas`: for every kernel, from ptxas's registers and static shared
//! memory and the block it is launched with, the blocks and warps one SM holds and the resource
//! that limits them; for the memory-bound kernels, the bytes their resident warps keep in flight
//! against what Little's law asks for HBM bandwidth (`perf::occupancy`).
//!
//! The launches come from the ops' own launch functions and the kernel crate's constants, so a
//! block size is defined once, where the kernel is launched.

use half::bf16;
use host::embedded::Arch;
use host::ops::attention::{self, AttentionShape};
use kernels::attention::HEAD_DIMS;
use perf::occupancy::{self, BlockResources, HBM_LATENCY_CYCLES, SmLimits};
use perf::specs::GpuSpec;

use crate::ptxas::KernelReport;

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

fn from_config(cfg: emu::LaunchConfig) -> Launch {
    launch(cfg.block.volume() as u32, cfg.shared_mem_bytes, None)
}

/// The launch of the kernel named `name`, or `None` for a kernel nobody declares: a registered
/// kernel's from its spec (`kernels::registry`), any other's from [`table`].
pub fn launch_of(name: &str) -> Option<Launch> {
    match host::registry::find(name) {
        Some(spec) => {
            let o = spec.occupancy;
            Some(launch(o.threads, o.dynamic_shared, o.in_flight_per_thread))
        }
        None => table(name),
    }
}

/// The launches of the PTX entries no spec is named after (the kernels that are not registered,
/// and those a registered spec launches under another name), read off the ops and the kernel
/// crate's constants.
fn table(name: &str) -> Option<Launch> {
    use kernels::elementwise::BLOCK_SIZE;
    use kernels::softmax::ROW_THREADS;
    let elem = |name: &str| if name.ends_with("bf16") { 2 } else { 4 };
    // The entries a registered spec picks from by its dimensions, as the spec launches them
    // (its `occupancy`): the GEMV's row tiles, and pass 1 of decode attention, one entry per
    // group tile (pass 2, the merge, has a launch of its own, below).
    let picked_by_a_spec = [
        ("gemv_bf16_m", &kernels::decode::GEMV_BF16),
        (
            "decode_attention_split_bf16_g",
            &kernels::decode::DECODE_ATTENTION_BF16,
        ),
        (
            "decode_attention_paged_bf16_g",
            &kernels::decode::DECODE_ATTENTION_PAGED_BF16,
        ),
    ];
    if let Some((_, spec)) = picked_by_a_spec.iter().find(|(p, _)| name.starts_with(p)) {
        let o = spec.occupancy;
        return Some(launch(o.threads, o.dynamic_shared, o.in_flight_per_thread));
    }
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
        // The row kernels fold one element per step into a running max or sum.
        n if [
            "softmax_row_max_",
            "softmax_row_sum_exp_",
            "softmax_normalise_",
            "softmax_online_stats_",
        ]
        .iter()
        .any(|pass| n.starts_with(pass)) =>
        {
            launch(ROW_THREADS, 0, Some(elem(n)))
        }
        "attention_scores_f32" | "attention_pv_f32_d64" | "attention_pv_f32_d128" => {
            from_config(attention::naive_config(1, 1, 1))
        }
        // The naive flow's tensor-core products: 4 warps, Q and K tiles (scores) or one V tile
        // (P V) of padded 16-bit rows.
        n if n.starts_with("attention_scores_") || n.starts_with("attention_pv_") => {
            use kernels::attention::{flash_mma, naive_mma};
            let d = HEAD_DIMS
                .into_iter()
                .find(|d| n.ends_with(&format!("_d{d}")))? as usize;
            let shared = if n.starts_with("attention_scores_") {
                naive_mma::scores_shared_bytes(d)
            } else {
                naive_mma::pv_shared_bytes(d)
            };
            launch(flash_mma::THREADS as u32, shared as u32, None)
        }
        n if n.starts_with("flash_attention_") => {
            let d = HEAD_DIMS
                .into_iter()
                .find(|d| n.ends_with(&format!("_d{d}")))? as usize;
            let shape = AttentionShape::new(1, 1, 1, d);
            // f16 and bf16 share the tensor-core kernel's tiles (and the Hopper kernel's).
            from_config(if n.starts_with("flash_attention_wgmma_") {
                attention::fused_wgmma_config(&shape)
            } else if n.contains("_f32_") {
                attention::fused_config::<f32>(&shape)
            } else {
                attention::fused_config::<bf16>(&shape)
            })
        }
        "decode_attention_merge_bf16" => launch(kernels::decode::attention::MERGE_THREADS, 0, None),
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
                "{:<34} (launch neither registered nor in xtask/src/occupancy.rs's table)",
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
                    "{name}: add its launch to xtask/src/occupancy.rs"
                );
            }
        }
    }

    /// A registered kernel's launch is its spec's, and the old table does not also list it (so
    /// the two cannot disagree).
    #[test]
    fn a_registered_kernel_launches_as_its_spec_says() {
        for spec in host::registry::all() {
            assert_eq!(table(spec.name), None, "{}: in both", spec.name);
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
}
