//! Occupancy and latency hiding: how many blocks of a kernel an SM holds at once, which resource
//! stops it holding more, and whether that many warps keep enough bytes in flight to reach HBM
//! bandwidth (Little's law).
//!
//! An SM holds a block only when it can give it all of its registers, shared memory, threads and
//! one of its block slots at once, so the resident blocks are the smallest of four quotients. The
//! rules are the CUDA occupancy calculator's (CUDA programming guide, "Compute capabilities",
//! and its occupancy section): registers are allocated per warp in units of 256 and split over the
//! SM's four sub-partitions; shared memory per block is rounded up to 128 bytes, plus 1 KiB the
//! system reserves per block on compute capability 8.0 and later.
//!
//! Little's law: to stream at bandwidth `B` with latency `L`, `B × L` bytes must be in flight.
//! Per SM that is the SM's share of HBM bandwidth times the load latency; a memory-bound kernel
//! reaches the bandwidth only if its resident warps have that many bytes of loads outstanding.

use crate::specs::GpuSpec;

/// One SM's limits (compute capability 9.0: H100, H200).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmLimits {
    /// Resident threads per SM.
    pub max_threads: u32,
    /// Resident blocks per SM.
    pub max_blocks: u32,
    /// 32-bit registers per SM.
    pub registers: u32,
    /// Registers one block may use.
    pub registers_per_block: u32,
    /// Registers one thread may use.
    pub max_registers_per_thread: u32,
    /// Registers are given to a warp in multiples of this.
    pub register_unit: u32,
    /// The register file is split into this many sub-partitions (one per warp scheduler); a
    /// warp's registers come from one of them.
    pub sub_partitions: u32,
    /// Shared memory per SM at the largest carve-out, bytes.
    pub shared_bytes: u32,
    /// Shared memory one block may use (with the opt-in), bytes.
    pub shared_per_block: u32,
    /// Shared memory the system reserves for each resident block, bytes.
    pub reserved_shared_per_block: u32,
    /// Shared memory is given to a block in multiples of this, bytes.
    pub shared_unit: u32,
}

impl SmLimits {
    /// Compute capability 9.0 (CUDA programming guide, table of technical specifications).
    pub const SM90: Self = Self {
        max_threads: 2048,
        max_blocks: 32,
        registers: 64 * 1024,
        registers_per_block: 64 * 1024,
        max_registers_per_thread: 255,
        register_unit: 256,
        sub_partitions: 4,
        shared_bytes: 228 * 1024,
        shared_per_block: 227 * 1024,
        reserved_shared_per_block: 1024,
        shared_unit: 128,
    };

    /// Compute capability 8.0 (A100): the same register file and thread limits, 164 KiB of
    /// shared memory per SM, 163 KiB per block.
    pub const SM80: Self = Self {
        shared_bytes: 164 * 1024,
        shared_per_block: 163 * 1024,
        ..Self::SM90
    };

    /// Resident warps per SM.
    pub fn max_warps(&self) -> u32 {
        self.max_threads / WARP
    }
}

const WARP: u32 = 32;

/// What a compiled kernel asks of an SM per block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockResources {
    /// Threads per block.
    pub threads: u32,
    /// Registers per thread (ptxas).
    pub registers: u32,
    /// Static shared memory (ptxas) plus the launch's dynamic shared memory, bytes.
    pub shared_bytes: u32,
}

/// The resource that stops an SM from holding one more block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limiter {
    Registers,
    SharedMemory,
    Threads,
    BlockSlots,
}

impl Limiter {
    /// The name reports print.
    pub fn name(self) -> &'static str {
        match self {
            Limiter::Registers => "registers",
            Limiter::SharedMemory => "shared memory",
            Limiter::Threads => "threads",
            Limiter::BlockSlots => "block slots",
        }
    }
}

/// Resident blocks and warps of one kernel on one SM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Occupancy {
    /// Blocks resident at once.
    pub blocks: u32,
    /// Warps resident at once.
    pub warps: u32,
    /// Every resource whose own limit equals `blocks` (ties are all named).
    pub limiters: Vec<Limiter>,
    /// The blocks each resource alone would allow, in [`Limiter`] order.
    pub by_resource: [u32; 4],
}

impl Occupancy {
    /// Resident warps as a fraction of the SM's maximum.
    pub fn fraction(&self, sm: &SmLimits) -> f64 {
        f64::from(self.warps) / f64::from(sm.max_warps())
    }

    /// The limiters' names, joined.
    pub fn limiter_names(&self) -> String {
        let names: Vec<&str> = self.limiters.iter().map(|l| l.name()).collect();
        names.join(" + ")
    }
}

/// The resident blocks of `block` on an SM with limits `sm`, or why not even one fits.
pub fn occupancy(sm: &SmLimits, block: &BlockResources) -> Result<Occupancy, String> {
    let BlockResources {
        threads,
        registers,
        shared_bytes,
    } = *block;
    if threads == 0 || threads > sm.max_threads.min(1024) {
        return Err(format!(
            "a block of {threads} threads cannot launch (1 to 1024)"
        ));
    }
    if registers > sm.max_registers_per_thread {
        return Err(format!(
            "{registers} registers per thread exceed the limit of {}",
            sm.max_registers_per_thread
        ));
    }
    if shared_bytes > sm.shared_per_block {
        return Err(format!(
            "{shared_bytes} bytes of shared memory exceed the {} a block may use",
            sm.shared_per_block
        ));
    }
    let warps_per_block = threads.div_ceil(WARP);
    // Registers: a warp gets `registers x 32` rounded up to the allocation unit, all from one
    // sub-partition; a sub-partition holds as many such warps as fit in its quarter of the file.
    let per_warp = (registers.max(1) * WARP).next_multiple_of(sm.register_unit);
    if per_warp * warps_per_block > sm.registers_per_block {
        return Err(format!(
            "{registers} registers x {threads} threads exceed the {} registers a block may use",
            sm.registers_per_block
        ));
    }
    let warps_by_registers = (sm.registers / sm.sub_partitions / per_warp) * sm.sub_partitions;
    let by_registers = warps_by_registers / warps_per_block;
    // Shared memory: the block's bytes plus the system's reservation, in allocation units.
    let per_block = (shared_bytes + sm.reserved_shared_per_block).next_multiple_of(sm.shared_unit);
    let by_shared = sm.shared_bytes / per_block;
    let by_threads = sm.max_warps() / warps_per_block;
    let by_resource = [by_registers, by_shared, by_threads, sm.max_blocks];
    let blocks = *by_resource.iter().min().expect("four limits");
    if blocks == 0 {
        return Err(format!(
            "not one block fits an SM: {registers} registers x {threads} threads"
        ));
    }
    let order = [
        Limiter::Registers,
        Limiter::SharedMemory,
        Limiter::Threads,
        Limiter::BlockSlots,
    ];
    let limiters = order
        .into_iter()
        .zip(by_resource)
        .filter(|&(_, b)| b == blocks)
        .map(|(l, _)| l)
        .collect();
    Ok(Occupancy {
        blocks,
        warps: blocks * warps_per_block,
        limiters,
        by_resource,
    })
}

/// HBM load latency assumed for Little's law, in SM clock cycles: the teaching material's "about
/// 600 cycles" unloaded (`cargo xtask hierarchy` measures it on a GPU). Under load it grows, and
/// so does the bytes in flight needed.
pub const HBM_LATENCY_CYCLES: f64 = 600.0;

/// Little's law per SM: the bytes of loads that must be outstanding on one SM for the GPU to
/// stream at its HBM bandwidth, `(bandwidth / SMs) x latency`.
pub fn bytes_in_flight_needed(gpu: &GpuSpec, latency_cycles: f64) -> f64 {
    gpu.hbm_bandwidth / f64::from(gpu.sms) * latency_cycles / gpu.boost_clock_hz
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(threads: u32, registers: u32, shared_bytes: u32) -> BlockResources {
        BlockResources {
            threads,
            registers,
            shared_bytes,
        }
    }

    fn sm90(threads: u32, registers: u32, shared_bytes: u32) -> Occupancy {
        occupancy(&SmLimits::SM90, &block(threads, registers, shared_bytes)).unwrap()
    }

    /// The CUDA C++ Best Practices Guide's example (its register rules are the same on 7.0 and
    /// 9.0): 37 registers per thread take 37 x 32 = 1184, rounded to 1280 per warp; a quarter
    /// of the register file, 16384, holds 12 such warps, so the SM holds 48. Blocks of 128
    /// threads (4 warps): 12 blocks, 75%; blocks of 320 threads (10 warps): 4 blocks.
    #[test]
    fn the_best_practices_guides_37_register_example() {
        let small = sm90(128, 37, 0);
        assert_eq!((small.blocks, small.warps), (12, 48));
        assert_eq!(small.limiters, vec![Limiter::Registers]);
        assert!((small.fraction(&SmLimits::SM90) - 0.75).abs() < 1e-12);
        let large = sm90(320, 37, 0);
        assert_eq!((large.blocks, large.warps), (4, 40));
        assert_eq!(large.limiters, vec![Limiter::Registers]);
    }

    /// 256 threads of 32 registers: 1024 registers per warp, 16 warps per sub-partition, 64
    /// warps: 8 blocks, which is also all the threads an SM holds (2048): both limit.
    #[test]
    fn full_occupancy_is_limited_by_threads_and_registers_together() {
        let o = sm90(256, 32, 0);
        assert_eq!((o.blocks, o.warps), (8, 64));
        assert_eq!(o.limiters, vec![Limiter::Registers, Limiter::Threads]);
    }

    /// 48 KiB per block plus the 1 KiB reserve is 50176 bytes; 228 KiB (233472) holds 4.
    #[test]
    fn shared_memory_limits_big_tiles() {
        let o = sm90(128, 32, 48 * 1024);
        assert_eq!((o.blocks, o.warps), (4, 16));
        assert_eq!(o.limiters, vec![Limiter::SharedMemory]);
        // 100 bytes round up to 1152 with the reserve (9 units of 128): 202 blocks by shared
        // memory, 32 by block slots.
        assert_eq!(sm90(32, 16, 100).by_resource[1], 233472 / 1152);
    }

    /// One warp per block: 64 would fit by threads, but an SM has 32 block slots.
    #[test]
    fn tiny_blocks_run_out_of_block_slots() {
        let o = sm90(32, 16, 0);
        assert_eq!((o.blocks, o.warps), (32, 32));
        assert_eq!(o.limiters, vec![Limiter::BlockSlots]);
    }

    /// 225 registers: 7200 per warp, rounded to 7424; a sub-partition holds 2 warps, the SM 8,
    /// two blocks of 4 warps (the project's d = 128 tensor-core attention).
    #[test]
    fn many_registers_leave_two_blocks() {
        let o = sm90(128, 225, 0);
        assert_eq!((o.blocks, o.warps), (2, 8));
        assert_eq!(o.limiters, vec![Limiter::Registers]);
    }

    /// An A100 SM has 164 KiB of shared memory: 48 KiB blocks fit 3 (50176 bytes each with the
    /// reserve), where an H100's 228 KiB fit 4.
    #[test]
    fn an_a100_holds_fewer_shared_memory_heavy_blocks() {
        let o = occupancy(&SmLimits::SM80, &block(128, 32, 48 * 1024)).unwrap();
        assert_eq!(
            (o.blocks, o.limiters.clone()),
            (3, vec![Limiter::SharedMemory])
        );
    }

    #[test]
    fn impossible_blocks_are_errors_not_zero() {
        let sm = SmLimits::SM90;
        assert!(occupancy(&sm, &block(0, 32, 0)).is_err());
        assert!(occupancy(&sm, &block(2048, 32, 0)).is_err());
        assert!(occupancy(&sm, &block(128, 256, 0)).is_err());
        assert!(occupancy(&sm, &block(128, 32, 228 * 1024)).is_err());
        // 1024 threads x 72 registers: 72 x 32 = 2304 per warp x 32 warps > 65536.
        let err = occupancy(&sm, &block(1024, 72, 0)).unwrap_err();
        assert!(err.contains("a block may use"), "{err}");
    }

    /// H100: 3.35 TB/s over 132 SMs is 25.4 GB/s per SM; 600 cycles at 1.98 GHz are 303 ns, so
    /// about 7.7 kB must be in flight on every SM.
    #[test]
    fn littles_law_on_an_h100() {
        let h100 = GpuSpec::find("h100").unwrap();
        let need = bytes_in_flight_needed(h100, HBM_LATENCY_CYCLES);
        let by_hand = 3.35e12 / 132.0 * (600.0 / 1.98e9);
        assert!((need - by_hand).abs() < 1e-6, "{need}");
        assert!((7600.0..7800.0).contains(&need), "{need}");
    }
}
