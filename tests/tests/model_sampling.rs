//! The performance model's sampling against the emulator running the real kernels: a sampled
//! launch estimates the whole launch's traffic, and a skipped kernel runs no block.

use std::collections::BTreeMap;

use emu::Sampling;
use emu::sample::{self, BlockTraffic, SampledLaunch};
use host::Runtime;
use host::ops::transpose::{Variant, transpose};
use perf::model::{Machine, dram_bytes};

/// `emu::Sampling::skip`: the named kernel's launches run no block (their outputs
/// stay as they were) but keep their configuration in the samples, and every other launch
/// is sampled as before.
#[test]
fn a_skipped_kernel_runs_no_block_and_the_others_are_sampled() {
    let rt = Runtime::emulator();
    let (rows, cols) = (64, 96);
    let input = rt.upload(&vec![1.0f32; rows * cols]).unwrap();
    let mut out = rt.alloc::<f32>(rows * cols).unwrap();
    let sampled = rt.with_options(|o| {
        o.sampling = Some(Sampling {
            blocks: sample::WHOLE_PLAN,
            budget: None,
            skip: Some("transpose_padded"),
        })
    });
    let ((), observed) = sampled.observe(|rt| {
        transpose(rt, Variant::Padded, &input, rows, cols, &mut out).unwrap();
        let untouched = rt.download(&out).unwrap().iter().all(|&x| x == 0.0);
        assert!(untouched, "a skipped launch wrote its output");
        transpose(rt, Variant::Naive, &input, rows, cols, &mut out).unwrap();
    });
    let samples = observed.samples;
    assert_eq!(samples.len(), 2);
    assert_eq!(samples[0].kernel, "transpose_padded");
    assert!(samples[0].blocks.is_empty());
    assert_eq!(samples[0].grid_blocks(), samples[1].grid_blocks());
    assert_eq!(samples[1].kernel, "transpose_naive");
    assert!(!samples[1].blocks.is_empty());
    assert!(rt.download(&out).unwrap().contains(&1.0));
}

/// The sample's per-block counts against the same launch with every block emulated: a
/// transpose of a shape that is not a multiple of its tile (edge blocks on both sides).
#[test]
fn a_sampled_transpose_estimates_the_whole_launch() {
    let rt = Runtime::emulator();
    let (rows, cols) = (200, 300);
    let input = rt.upload(&vec![1.0f32; rows * cols]).unwrap();
    let mut out = rt.alloc::<f32>(rows * cols).unwrap();
    let mut run = |blocks: usize| {
        let sampled = rt.with_options(|o| {
            o.sampling = Some(Sampling {
                blocks,
                budget: None,
                skip: None,
            })
        });
        let (transposed, mut observed) =
            sampled.observe(|rt| transpose(rt, Variant::Padded, &input, rows, cols, &mut out));
        transposed.unwrap();
        observed.samples.remove(0)
    };
    let (sampled, every) = (run(sample::WHOLE_PLAN), run(sample::EVERY_BLOCK));
    assert!(sampled.blocks.len() < every.blocks.len());
    let m = Machine::find("h100").unwrap();
    let total = |s: &SampledLaunch, f: fn(&BlockTraffic) -> u64| {
        s.mean(|b| f(&b.traffic) as f64) * s.grid_blocks() as f64
    };
    let sum = |f: fn(&BlockTraffic) -> u64| {
        every.blocks.iter().map(|b| f(&b.traffic)).sum::<u64>() as f64
    };
    for f in [
        (|t: &BlockTraffic| t.load_sectors) as fn(&BlockTraffic) -> u64,
        |t| t.store_sectors,
        |t| t.shared_wavefronts,
    ] {
        let (est, exact) = (total(&sampled, f), sum(f));
        assert!((est - exact).abs() <= 0.02 * exact, "{est} vs {exact}");
    }
    // Each element read once and written once: what every block touches, in whole sectors.
    let exact: BTreeMap<usize, std::collections::BTreeSet<u64>> =
        every.blocks.iter().fold(BTreeMap::new(), |mut acc, b| {
            for (side, sets) in [(0, &b.traffic.loaded), (1, &b.traffic.stored)] {
                for (&a, s) in sets {
                    acc.entry(2 * a + side)
                        .or_default()
                        .extend(s.iter().copied());
                }
            }
            acc
        });
    let exact: f64 = exact.values().map(|s| s.len() as f64 * 32.0).sum();
    let est = dram_bytes(&m, &sampled, 8);
    assert!((est - exact).abs() <= 0.02 * exact, "{est} vs {exact}");
}
