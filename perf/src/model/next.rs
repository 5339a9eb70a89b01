//! The one sentence a prediction ends with: what limits the kernel, how far it is from the
//! compulsory bytes (a memory limiter) or from the peak (a compute limiter), and the next thing
//! to change, or that nothing is left to gain.
//!
//! It reads only what a [`Prediction`] already holds, the kernel's declared [`Cost`] (its
//! compulsory bytes and FLOPs) and the device, so any command that has a prediction can print it
//! (`cargo xtask predict` does).

use super::{Limiter, Machine, Prediction};
use crate::cost::{Cost, CostRoofline};

/// Within this factor of the compulsory bytes (or of the peak), a kernel is "at" them: the
/// sampled counts and the model's cache estimate are not finer than a few percent.
const AT: f64 = 1.1;

/// What a cost's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CostBytes {
    /// The compulsory traffic a registered kernel declares (docs/registry.md): the least that
    /// must cross the HBM boundary.
    Compulsory,
    /// What a sample of a kernel that declares none requested (`cargo xtask check`): every load
    /// and store, re-reads included, which caches may serve. No lower bound.
    Sampled,
}

/// What the sentence recommends, as a kind of change to the kernel: what `perf::validation`
/// holds against a worklog's next step (advice that a published step measured slower is a
/// failing case).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Advice {
    /// Nothing left to gain here but fewer bytes or operations.
    Nothing,
    /// Declare the kernel's bytes.
    Declare,
    /// Read each byte from DRAM once: keep what is re-read on chip, or fuse the passes.
    ReadOnce,
    /// Coalesce the global accesses (a shared tile where a warp walks a column).
    Coalesce,
    /// Fewer, wider memory instructions (vector accesses).
    WiderAccesses,
    /// Pad or swizzle a shared tile against bank conflicts.
    PadOrSwizzle,
    /// Fewer shared-memory accesses: reused values in registers (more outputs per thread).
    FewerSharedAccesses,
    /// Fewer instructions around each FMA, or the products on the tensor cores.
    FewerInstructions,
    /// Fewer exponentials.
    FewerExponentials,
    /// Overlap the phases: more warps, or asynchronous copies (double buffering).
    Overlap,
    /// More bytes in flight: more resident warps or independent loads.
    MoreInFlight,
    /// A block count that fills the waves.
    FillWaves,
    /// Fuse the launches.
    Fuse,
}

/// The sentence a prediction ends with, and what it recommends.
#[derive(Clone, Debug, PartialEq)]
pub struct NextStep {
    pub advice: Advice,
    pub sentence: String,
}

impl std::fmt::Display for NextStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.sentence)
    }
}

/// The sentence: the limiter, the distance, and the next step. `cost` is the kernel's cost at
/// the predicted shape, its bytes as `bytes` says; `p` its prediction on `machine`.
pub fn next_step(p: &Prediction, cost: &Cost, bytes: CostBytes, machine: &Machine) -> NextStep {
    let (advice, sentence) = advice(p, cost, bytes, machine);
    NextStep { advice, sentence }
}

fn advice(p: &Prediction, cost: &Cost, bytes: CostBytes, machine: &Machine) -> (Advice, String) {
    let spec = machine.spec;
    let sum = |f: fn(&super::Totals) -> f64| p.launches.iter().map(|l| f(&l.totals)).sum::<f64>();
    let limiter = p.limiter.name();
    match p.limiter {
        Limiter::Dram if bytes == CostBytes::Sampled => {
            let moved = cost.bytes() as f64;
            (
                Advice::Nothing,
                format!(
                    "Limited by {limiter}: {:.3e} bytes reach DRAM, {:.2}x the {moved:.3e} bytes the sampled requests moved; with no compulsory bytes declared there is no lower bound to measure them against: compare them with the size of the kernel's inputs and outputs.",
                    sum(|t| t.dram_bytes),
                    sum(|t| t.dram_bytes) / moved.max(1.0),
                ),
            )
        }
        Limiter::Dram => {
            let compulsory = cost.bytes() as f64;
            if compulsory <= 0.0 {
                return (
                    Advice::Declare,
                    format!(
                        "Limited by {limiter}; the cost declares no bytes, so there is nothing to compare: declare them (docs/registry.md)."
                    ),
                );
            }
            let times = sum(|t| t.dram_bytes) / compulsory;
            if times <= AT {
                (
                    Advice::Nothing,
                    format!(
                        "Limited by {limiter} at {times:.2}x the compulsory bytes: nothing left to gain here but fewer bytes (a narrower type, or fusing with the next kernel)."
                    ),
                )
            } else {
                (
                    Advice::ReadOnce,
                    format!(
                        "Limited by {limiter} at {times:.2}x the compulsory bytes: next, read each byte from DRAM once (keep what is re-read in shared memory or registers, or fuse the passes)."
                    ),
                )
            }
        }
        Limiter::L2 | Limiter::L1 | Limiter::LsuIssue => {
            let requests = sum(|t| t.load_requests) + sum(|t| t.store_requests);
            let sectors = sum(|t| t.load_sectors) + sum(|t| t.store_sectors);
            let per = sectors / requests.max(1.0);
            let (advice, next) = if per > 4.0 * AT {
                (
                    Advice::Coalesce,
                    "coalesce the global accesses (consecutive threads on consecutive addresses, a shared-memory tile where a warp must walk a column)",
                )
            } else {
                (
                    Advice::WiderAccesses,
                    "issue fewer, wider memory instructions (vector loads, or more work per thread)",
                )
            };
            (
                advice,
                format!(
                    "Limited by {limiter} ({per:.2} sectors per global request, 4 when a warp's 32 words are contiguous): next, {next}."
                ),
            )
        }
        Limiter::SharedWavefronts => {
            let degree = sum(|t| t.shared_wavefronts) / sum(|t| t.shared_ideal_wavefronts).max(1.0);
            if degree > AT {
                (
                    Advice::PadOrSwizzle,
                    format!(
                        "Limited by {limiter} at conflict degree {degree:.2} (1 is none): next, pad or swizzle the shared tile so a warp's accesses fall in distinct banks (`cargo xtask inspect` names the line)."
                    ),
                )
            } else {
                (
                    Advice::FewerSharedAccesses,
                    format!(
                        "Limited by {limiter} without bank conflicts: next, fewer shared-memory accesses (keep reused values in registers, or wider accesses)."
                    ),
                )
            }
        }
        Limiter::Fp32 | Limiter::Tensor | Limiter::Mufu | Limiter::Issue | Limiter::Phases => {
            let (roof, what) = if p.limiter == Limiter::Mufu {
                (cost.exp_seconds(spec), "exponential rate")
            } else {
                (cost.compute_seconds(spec), "peak")
            };
            let fraction = roof / p.seconds.max(f64::MIN_POSITIVE);
            if fraction * AT >= 1.0 {
                (
                    Advice::Nothing,
                    format!(
                        "Limited by {limiter} at {:.0}% of the {what}: nothing left to gain here but fewer operations.",
                        100.0 * fraction
                    ),
                )
            } else {
                let (advice, next) = match p.limiter {
                    Limiter::Fp32 | Limiter::Issue => (
                        Advice::FewerInstructions,
                        "cut the instructions around each FMA (more outputs per thread from the same loads), or move the products onto the tensor cores",
                    ),
                    Limiter::Mufu => (
                        Advice::FewerExponentials,
                        "take fewer exponentials (rescale once per row, not per element)",
                    ),
                    _ => (
                        Advice::Overlap,
                        "overlap the products with the softmax (more warps, or asynchronous copies)",
                    ),
                };
                (
                    advice,
                    format!(
                        "Limited by {limiter} at {:.0}% of the {what}: next, {next}.",
                        100.0 * fraction,
                    ),
                )
            }
        }
        Limiter::Latency => (
            Advice::MoreInFlight,
            format!(
                "Limited by {limiter}: too few bytes in flight to reach the bandwidth; next, more resident warps or more independent loads per thread."
            ),
        ),
        Limiter::Tail => (
            Advice::FillWaves,
            format!(
                "Limited by the {limiter}: the last wave leaves SMs idle; next, a block count that fills the waves (smaller blocks, or more work per block)."
            ),
        ),
        Limiter::Launch => (
            Advice::Fuse,
            format!("Limited by the {limiter} overhead: next, fuse the launches into one kernel."),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{LaunchPrediction, Totals};
    use super::*;
    use crate::cost::ComputeUnit;

    fn h100() -> Machine {
        Machine::find("h100").unwrap()
    }

    /// A memory-bound cost: 1 GB read, 1 GB written, 1 FLOP per 4 bytes.
    fn cost() -> Cost {
        Cost {
            bytes_read: 1 << 30,
            bytes_written: 1 << 30,
            flops: 1 << 29,
            exps: 0,
            unit: ComputeUnit::CudaCoreF32,
            ..Cost::NONE
        }
    }

    fn prediction(limiter: Limiter, seconds: f64, totals: Totals) -> Prediction {
        Prediction {
            device: "h100".into(),
            seconds,
            limiter,
            launches: vec![LaunchPrediction {
                kernel: "planted".into(),
                seconds,
                limiter,
                components: Vec::new(),
                totals,
                blocks_per_sm: 1,
                occupancy_limiter: "threads".into(),
                waves: 1.0,
                tail_factor: 1.0,
                sampled_blocks: 1,
                grid_blocks: 1,
                sample_work: 0,
                phases: None,
            }],
            extended_from: None,
        }
    }

    #[test]
    fn memory_bound_at_the_compulsory_bytes_has_nothing_left() {
        let c = cost();
        let totals = Totals {
            dram_bytes: c.bytes() as f64,
            ..Totals::default()
        };
        let s = next_step(
            &prediction(Limiter::Dram, 1e-3, totals),
            &c,
            CostBytes::Compulsory,
            &h100(),
        )
        .sentence;
        assert!(s.contains("1.00x the compulsory bytes"), "{s}");
        let advice = next_step(
            &prediction(Limiter::Dram, 1e-3, totals),
            &c,
            CostBytes::Compulsory,
            &h100(),
        )
        .advice;
        assert_eq!(advice, Advice::Nothing);
        assert!(s.contains("nothing left to gain here"), "{s}");
    }

    /// A foreign kernel's sampled bytes are no lower bound: DRAM at a third of them is caches
    /// at work, never "nothing left to gain".
    #[test]
    fn sampled_bytes_are_not_called_compulsory() {
        let c = cost();
        let totals = Totals {
            dram_bytes: c.bytes() as f64 / 3.0,
            ..Totals::default()
        };
        let p = prediction(Limiter::Dram, 1e-3, totals);
        let s = next_step(&p, &c, CostBytes::Sampled, &h100()).sentence;
        assert!(
            s.contains("0.33x the") && s.contains("sampled requests moved"),
            "{s}"
        );
        assert!(
            !s.contains("x the compulsory") && !s.contains("nothing left"),
            "{s}"
        );
        let s = next_step(&p, &c, CostBytes::Compulsory, &h100()).sentence;
        assert!(s.contains("0.33x the compulsory bytes"), "{s}");
    }

    #[test]
    fn memory_bound_at_twice_the_bytes_says_to_read_once() {
        let c = cost();
        let totals = Totals {
            dram_bytes: 2.0 * c.bytes() as f64,
            ..Totals::default()
        };
        let s = next_step(
            &prediction(Limiter::Dram, 2e-3, totals),
            &c,
            CostBytes::Compulsory,
            &h100(),
        )
        .sentence;
        assert!(s.contains("2.00x the compulsory bytes"), "{s}");
        assert!(s.contains("read each byte from DRAM once"), "{s}");
        assert!(!s.contains("nothing left"), "{s}");
    }

    #[test]
    fn compute_bound_far_from_the_peak_says_how_far_and_what_next() {
        let m = h100();
        let c = Cost {
            flops: 1 << 40,
            ..cost()
        };
        // Ten times the FP32 roof's time: 10% of the peak.
        let seconds = 10.0 * c.compute_seconds(m.spec);
        let s = next_step(
            &prediction(Limiter::Fp32, seconds, Totals::default()),
            &c,
            CostBytes::Compulsory,
            &m,
        )
        .sentence;
        assert!(s.contains("FP32 at 10% of the peak"), "{s}");
        assert!(s.contains("next, cut the instructions"), "{s}");
        // At the peak, nothing is left.
        let at = next_step(
            &prediction(Limiter::Fp32, c.compute_seconds(m.spec), Totals::default()),
            &c,
            CostBytes::Compulsory,
            &m,
        )
        .sentence;
        assert!(at.contains("100% of the peak: nothing left"), "{at}");
    }

    #[test]
    fn shared_wavefront_limited_names_the_conflict_degree_and_the_padding() {
        let totals = Totals {
            shared_wavefronts: 16.5e6,
            shared_ideal_wavefronts: 1e6,
            ..Totals::default()
        };
        let s = next_step(
            &prediction(Limiter::SharedWavefronts, 1e-3, totals),
            &cost(),
            CostBytes::Compulsory,
            &h100(),
        )
        .sentence;
        assert!(s.contains("conflict degree 16.50"), "{s}");
        assert!(s.contains("pad or swizzle"), "{s}");
        let advice = next_step(
            &prediction(Limiter::SharedWavefronts, 1e-3, totals),
            &cost(),
            CostBytes::Compulsory,
            &h100(),
        )
        .advice;
        assert_eq!(advice, Advice::PadOrSwizzle);
    }
}
