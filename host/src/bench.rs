//! Timing on a GPU: warm-up runs, then timed runs between CUDA events (created with timing
//! enabled), each after the L2 is flushed, reported as median and spread.
//!
//! A wall clock around an asynchronous launch measures only the enqueue, so it is never used.

use serde::{Deserialize, Serialize};

use crate::runtime::{Backend, Runtime};
use crate::{Error, Result};

/// The distribution of one kernel's run times.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Median seconds per run.
    pub median: f64,
    /// Fastest run.
    pub min: f64,
    /// Slowest run.
    pub max: f64,
    /// Timed runs.
    pub runs: usize,
}

impl Timing {
    /// Summarises individual run times.
    pub fn from_samples(mut samples: Vec<f64>) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_by(f64::total_cmp);
        let n = samples.len();
        let median = if n % 2 == 1 {
            samples[n / 2]
        } else {
            0.5 * (samples[n / 2 - 1] + samples[n / 2])
        };
        Some(Self {
            median,
            min: samples[0],
            max: samples[n - 1],
            runs: n,
        })
    }
}

/// How many runs to make.
#[derive(Clone, Copy, Debug)]
pub struct BenchConfig {
    /// Untimed runs first (module load, clocks ramping, TLB warm-up).
    pub warmup: usize,
    /// Timed runs.
    pub runs: usize,
}

impl Default for BenchConfig {
    fn default() -> Self {
        Self {
            warmup: 3,
            runs: 20,
        }
    }
}

/// Times `launch` on the runtime's GPU. `launch` must enqueue the work (one or several kernels)
/// and return without synchronising. Refuses on the emulator, whose wall time means nothing
/// for a GPU.
pub fn time_gpu(
    rt: &Runtime,
    cfg: BenchConfig,
    mut launch: impl FnMut() -> Result<()>,
) -> Result<Timing> {
    if cfg.runs == 0 {
        return Err(Error::Config(
            "timing needs at least one timed run (runs = 0)".into(),
        ));
    }
    let Backend::Cuda(gpu) = rt.backend() else {
        return Err(Error::NoDevice(
            "timing needs a GPU; the emulator reports modelled figures instead".into(),
        ));
    };
    // Twice the L2, so that writing it evicts everything the previous run left there.
    let scratch = rt.alloc::<u32>((2 * gpu.properties().l2_bytes / 4) as usize)?;
    for _ in 0..cfg.warmup {
        launch()?;
    }
    let (start, end) = (gpu.timing_event()?, gpu.timing_event()?);
    let mut samples = Vec::with_capacity(cfg.runs);
    let err = |call: &str| {
        let call = call.to_string();
        move |e: cudarc::driver::DriverError| Error::Driver {
            call: call.clone(),
            message: e.to_string(),
        }
    };
    for _ in 0..cfg.runs {
        gpu.flush_l2(&scratch)?;
        start.record(gpu.stream()).map_err(err("cuEventRecord"))?;
        launch()?;
        end.record(gpu.stream()).map_err(err("cuEventRecord"))?;
        end.synchronize().map_err(err("cuEventSynchronize"))?;
        let ms = start.elapsed_ms(&end).map_err(err("cuEventElapsedTime"))?;
        samples.push(f64::from(ms) * 1e-3);
    }
    Ok(Timing::from_samples(samples).expect("at least one run"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_even_and_odd_counts() {
        let t = Timing::from_samples(vec![3.0, 1.0, 2.0]).unwrap();
        assert_eq!((t.median, t.min, t.max), (2.0, 1.0, 3.0));
        assert_eq!(
            Timing::from_samples(vec![4.0, 1.0, 2.0, 3.0])
                .unwrap()
                .median,
            2.5
        );
        assert!(Timing::from_samples(vec![]).is_none());
    }

    #[test]
    fn timing_refuses_the_emulator() {
        let rt = Runtime::emulator();
        assert!(time_gpu(&rt, BenchConfig::default(), || Ok(())).is_err());
    }
}
