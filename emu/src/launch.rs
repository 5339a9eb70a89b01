//! The launch configuration (`kernels::cuda::launch`'s, re-exported) and the device limits it is
//! checked against before launch.

use crate::Error;
pub use kernels::cuda::emu::Dim3;
/// The one launch geometry, declared in `kernels` (where the registered kernels' specs state
/// it) and checked here against the device's limits.
pub use kernels::cuda::launch::{LaunchConfig, dim3};

/// What a device accepts in one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    /// `cudaDevAttrMaxThreadsPerBlock`.
    pub max_threads_per_block: u32,
    /// `cudaDevAttrMaxBlockDimX/Y/Z`.
    pub max_block_dim: Dim3,
    /// `cudaDevAttrMaxGridDimX/Y/Z`.
    pub max_grid_dim: Dim3,
    /// Shared memory one block may use, static and dynamic together, with the opt-in
    /// (`cudaDevAttrMaxSharedMemoryPerBlockOptin`): 227 KB on Hopper.
    pub max_shared_mem_per_block: u32,
}

impl DeviceLimits {
    /// The limits of compute capability 9.0 (H100, H200), which the emulator enforces.
    pub const SM90: Self = Self {
        max_threads_per_block: 1024,
        max_block_dim: dim3(1024, 1024, 64),
        max_grid_dim: dim3(i32::MAX as u32, 65535, 65535),
        max_shared_mem_per_block: 227 * 1024,
    };

    /// Refuses a launch the device cannot run, naming the limit and the request.
    pub fn check(&self, kernel: &str, cfg: &LaunchConfig) -> Result<(), Error> {
        let refuse = |what, requested, limit| refusal(kernel, what, requested, limit);
        let threads = cfg.block.volume();
        if threads == 0 || cfg.grid.volume() == 0 {
            return Err(Error::Shape(format!(
                "{kernel}: a launch needs at least one block of one thread (grid {:?}, block {:?})",
                cfg.grid, cfg.block
            )));
        }
        if threads > u64::from(self.max_threads_per_block) {
            return refuse(
                "threads per block",
                threads,
                self.max_threads_per_block.into(),
            );
        }
        let axes = [
            ("block x", cfg.block.x, self.max_block_dim.x),
            ("block y", cfg.block.y, self.max_block_dim.y),
            ("block z", cfg.block.z, self.max_block_dim.z),
            ("grid x", cfg.grid.x, self.max_grid_dim.x),
            ("grid y", cfg.grid.y, self.max_grid_dim.y),
            ("grid z", cfg.grid.z, self.max_grid_dim.z),
        ];
        for (what, requested, limit) in axes {
            if requested > limit {
                return refuse(what, requested.into(), limit.into());
            }
        }
        if cfg.dynamic_shared > self.max_shared_mem_per_block {
            return refuse(
                "shared memory per block (bytes)",
                cfg.dynamic_shared.into(),
                self.max_shared_mem_per_block.into(),
            );
        }
        Ok(())
    }

    /// What a compiled kernel adds to [`check`](Self::check): its registers per thread can cap
    /// its threads per block below the device's (`max_threads`, from the driver), and its static
    /// shared memory (`static_shared`) shares the per-block limit with the launch's dynamic part.
    pub fn check_compiled(
        &self,
        kernel: &str,
        cfg: &LaunchConfig,
        max_threads: u32,
        static_shared: u32,
    ) -> Result<(), Error> {
        let threads = cfg.block.volume();
        if threads > u64::from(max_threads) {
            return refusal(
                kernel,
                "threads per block for this kernel (its registers per thread limit it)",
                threads,
                max_threads.into(),
            );
        }
        let shared = u64::from(cfg.dynamic_shared) + u64::from(static_shared);
        if shared > u64::from(self.max_shared_mem_per_block) {
            return refusal(
                kernel,
                "shared memory per block, static and dynamic (bytes)",
                shared,
                self.max_shared_mem_per_block.into(),
            );
        }
        Ok(())
    }
}

fn refusal(kernel: &str, what: &'static str, requested: u64, limit: u64) -> Result<(), Error> {
    Err(Error::LaunchLimit {
        kernel: kernel.to_string(),
        what,
        requested,
        limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_whose_registers_cap_its_block_is_refused_before_launch() {
        let limits = DeviceLimits::SM90;
        let cfg = LaunchConfig::linear(1, 512);
        limits.check("k", &cfg).unwrap();
        let err = limits
            .check_compiled("k", &cfg, 256, 0)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("requested 512, but the device allows at most 256")
                && err.contains("registers"),
            "{err}"
        );
        let big = LaunchConfig::linear(1, 128).with_dynamic_shared(200 * 1024);
        limits.check("k", &big).unwrap();
        let err = limits
            .check_compiled("k", &big, 1024, 40 * 1024)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&(240 * 1024).to_string()) && err.contains(&(227 * 1024).to_string()),
            "{err}"
        );
    }
}
