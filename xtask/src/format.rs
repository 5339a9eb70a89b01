//! How the commands print numbers and text: durations, counts, a prediction's breakdown, and
//! lines wrapped to a terminal's width. Shared by every command that prints them, so that a
//! number reads the same in `run`, `predict`, `check`, `exercise` and the docs' pastes.

use perf::model::Prediction;

/// The widest line of the default table (and of the lines around it): a terminal's width.
pub const NARROW: usize = 120;

/// Seconds as the tables print them: milliseconds from 1 ms up, else microseconds.
pub(crate) fn duration(s: f64) -> String {
    if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

/// `text` broken between words into lines of at most `width` characters (a longer word keeps
/// its own line).
pub(crate) fn wrap(text: &str, width: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split(' ') {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines.join("\n")
}

/// Per launch: the time, the limiter, each resource's time and the totals behind them.
pub(crate) fn breakdown(p: &Prediction) -> String {
    let mut out = format!(
        "  predicted {}, limited by {}\n",
        duration(p.seconds),
        p.limiter.name()
    );
    for l in &p.launches {
        out.push_str(&format!(
            "  {}: {} ({}), {} blocks per SM ({}), {:.2} waves (tail x{:.2}); {} of {} blocks sampled\n",
            l.kernel,
            duration(l.seconds),
            l.limiter.name(),
            l.blocks_per_sm,
            l.occupancy_limiter,
            l.waves,
            l.tail_factor,
            l.sampled_blocks,
            l.grid_blocks
        ));
        for c in &l.components {
            if c.seconds > 0.0 {
                let bar = "#".repeat(((c.seconds / l.seconds) * 30.0).round() as usize);
                out.push_str(&format!(
                    "    {:<18} {:>12}  {bar}\n",
                    c.limiter.name(),
                    duration(c.seconds)
                ));
            }
        }
        let t = &l.totals;
        out.push_str(&format!(
            "    global: {:.3e} load / {:.3e} store requests, {:.2} / {:.2} sectors per request; shared: {} requests, conflict degree {:.2}\n",
            t.load_requests,
            t.store_requests,
            t.load_sectors / t.load_requests.max(1.0),
            t.store_sectors / t.store_requests.max(1.0),
            count(t.shared_requests),
            t.shared_wavefronts / t.shared_ideal_wavefronts.max(1.0)
        ));
        out.push_str(&format!(
            "    bytes: L2 {}, DRAM {}; FLOPs: FP32 {}, mma.sync {}, wgmma {}; ex2 {}{}\n",
            count(t.l2_bytes),
            count(t.dram_bytes),
            count(t.fp32_flops),
            count(t.mma_flops),
            count(t.wgmma_flops),
            count(t.exps),
            t.warp_instructions
                .map(|n| match t.on_products {
                    Some(p) if p > 0.0 => {
                        format!("; {n:.3e} warp instructions, {p:.3e} on the products' results")
                    }
                    _ => format!("; {n:.3e} warp instructions"),
                })
                .unwrap_or_default()
        ));
    }
    out
}

/// A count as the breakdown prints it: `0` for none (a sum of sampled means can come out as
/// `-0`, and `0.000e0` reads as a measurement), else three significant digits.
fn count(x: f64) -> String {
    if x == 0.0 {
        "0".to_string()
    } else {
        format!("{x:.3e}")
    }
}
