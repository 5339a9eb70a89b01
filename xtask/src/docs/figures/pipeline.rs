//! Pictures of a kernel over time: GEMM step 5's mbarrier ring, the online-softmax
//! recurrence and one FlashAttention query tile's journey through the memories.

use super::Svg;

// ---- Hopper: the mbarrier ring ------------------------------------------------------------------

/// When each K tile of GEMM step 5 is issued by the producer, lands in shared memory, is
/// multiplied and is released, in units of one K tile's `wgmma`s, if a TMA takes `latency` units
/// from issue to its `full` barrier's phase completing. The ring follows the kernel: tile `kt`
/// waits for its stage's previous round to be released, and a consumer releases tile `kt` once
/// `wgmma.wait_group 1` after committing `kt + 1` returns.
struct RingEvent {
    kt: u32,
    issued: f64,
    full: f64,
    multiplied: f64,
    released: f64,
}

fn ring_schedule(tiles: u32, stages: u32, latency: f64) -> Vec<RingEvent> {
    let mut ev: Vec<RingEvent> = Vec::new();
    for kt in 0..tiles {
        let previous_round = (kt >= stages).then(|| (kt - stages) as usize);
        // The stage is empty once the consumers released the tile that used it a round ago.
        let empty = previous_round.map_or(0.0, |j| ev[j].released);
        let issued = ev.last().map_or(0.0, |e| e.issued + 0.25).max(empty);
        let full = issued + latency;
        let multiplied = ev.last().map_or(full, |e| full.max(e.multiplied + 1.0));
        if let Some(e) = ev.last_mut() {
            e.released = multiplied.max(e.multiplied + 1.0);
        }
        ev.push(RingEvent {
            kt,
            issued,
            full,
            multiplied,
            released: multiplied + 1.0,
        });
    }
    ev
}

pub(super) fn wgmma_pipeline() -> String {
    use kernels::gemm::WG_STAGES;
    use kernels::gemm::wgmma::stage_of;
    let (tiles, latency) = (12, 3.0);
    let ev = ring_schedule(tiles, WG_STAGES, latency);
    let end = ev.last().map_or(1.0, |e| e.released);
    let (x0, unit) = (150.0, 760.0 / end);
    let x = |t: f64| x0 + t * unit;
    let colour = |kt: u32| format!("hsl({}, 60%, 72%)", (kt * 47) % 360);
    let rows = 2 + WG_STAGES as usize;
    let row_y = |r: usize| 50.0 + 34.0 * r as f64;
    let mut svg = Svg::new(940.0, row_y(rows) + 62.0);
    svg.text(
        10.0,
        20.0,
        15.0,
        "start",
        &format!(
            "GEMM step 5: the producer fills a ring of {WG_STAGES} stages, the consumers drain it (schematic)"
        ),
    );
    svg.text(x0 - 8.0, row_y(0) + 16.0, 11.0, "end", "producer: TMA");
    for s in 0..WG_STAGES {
        svg.text(
            x0 - 8.0,
            row_y(1 + s as usize) + 16.0,
            11.0,
            "end",
            &format!("stage {s} (full/empty[{s}])"),
        );
    }
    svg.text(
        x0 - 8.0,
        row_y(rows - 1) + 16.0,
        11.0,
        "end",
        "consumers: wgmma",
    );
    for e in &ev {
        let (s, parity) = stage_of(e.kt);
        let c = colour(e.kt);
        // The producer's issue: one thread, arrive.expect_tx then five TMA boxes.
        svg.rect(x(e.issued), row_y(0), 0.25 * unit, 24.0, &c, "#557");
        svg.text(
            x(e.issued) + 2.0,
            row_y(0) + 16.0,
            9.0,
            "start",
            &e.kt.to_string(),
        );
        // The stage: bytes in flight, then full (read by the tensor cores) until released.
        let y = row_y(1 + s as usize);
        svg.rect(
            x(e.issued),
            y + 8.0,
            (e.full - e.issued) * unit,
            8.0,
            &c,
            "none",
        );
        svg.rect(x(e.full), y, (e.released - e.full) * unit, 24.0, &c, "#557");
        svg.text(
            x(e.full) + 3.0,
            y + 16.0,
            9.0,
            "start",
            &format!("kt {} p{parity}", e.kt),
        );
        svg.rect(x(e.multiplied), row_y(rows - 1), unit, 24.0, &c, "#557");
        svg.text(
            x(e.multiplied) + 3.0,
            row_y(rows - 1) + 16.0,
            9.0,
            "start",
            &e.kt.to_string(),
        );
    }
    let notes = [
        "Thin bar: a TMA's bytes in flight, until full[s] completes the phase whose parity (p) the consumers wait on.".to_string(),
        "Wide bar: the stage is full and read by wgmma, until every consumer thread arrives on empty[s] (after wgmma.wait_group 1).".to_string(),
        format!(
            "Schematic, not measured: a TMA takes {latency} units from issue to full, one K tile of wgmma 1; stage and parity from kernels::gemm::wgmma::stage_of."
        ),
    ];
    for (i, n) in notes.iter().enumerate() {
        svg.text(10.0, row_y(rows) + 14.0 + 15.0 * i as f64, 11.0, "start", n);
    }
    svg.finish()
}

// ---- Online softmax ----------------------------------------------------------------------------

pub(super) fn online_softmax() -> String {
    let scores = [1.0, 3.0, 2.0, 3.5, 0.5, 4.0];
    let values: Vec<Vec<f64>> = (1..=scores.len()).map(|v| vec![v as f64]).collect();
    let steps = crate::trace_softmax::online_trace(&scores, &values);
    let direct = crate::trace_softmax::direct_average(&scores, &values)[0];
    let mut svg = Svg::new(820.0, 360.0);
    svg.text(10.0, 20.0, 15.0, "start", "Online softmax, one score at a time: running max m, sum l and average o / l (values 1, 2, 3, ...)");
    let (x0, y0, w, h) = (60.0, 50.0, 520.0, 250.0);
    let y_max = 6.0;
    let px = |i: usize| x0 + w * i as f64 / (scores.len() - 1) as f64;
    let py = |v: f64| y0 + h - h * v / y_max;
    svg.line((x0, y0 + h), (x0 + w, y0 + h), "#333", 1.0);
    svg.line((x0, y0), (x0, y0 + h), "#333", 1.0);
    for v in 0..=6 {
        svg.text(
            x0 - 6.0,
            py(f64::from(v)) + 4.0,
            10.0,
            "end",
            &v.to_string(),
        );
        svg.line(
            (x0, py(f64::from(v))),
            (x0 + w, py(f64::from(v))),
            "#eee",
            1.0,
        );
    }
    for (i, s) in steps.iter().enumerate() {
        svg.text(
            px(i),
            y0 + h + 16.0,
            10.0,
            "middle",
            &format!("s{} = {}", i + 1, s.score),
        );
        if s.rescale < 1.0 && i > 0 {
            svg.text(
                px(i),
                y0 + h + 30.0,
                9.0,
                "middle",
                &format!("rescale {:.3}", s.rescale),
            );
        }
    }
    let series = [
        (
            "running max m",
            "hsl(0, 70%, 50%)",
            steps.iter().map(|s| s.m).collect::<Vec<_>>(),
        ),
        (
            "sum l = Σ exp(s - m)",
            "hsl(120, 50%, 35%)",
            steps.iter().map(|s| s.l).collect(),
        ),
        (
            "average o / l",
            "hsl(220, 70%, 45%)",
            steps.iter().map(|s| s.o[0] / s.l).collect(),
        ),
    ];
    for (k, (name, colour, ys)) in series.iter().enumerate() {
        let pts: Vec<(f64, f64)> = ys
            .iter()
            .enumerate()
            .map(|(i, &v)| (px(i), py(v)))
            .collect();
        svg.polyline(&pts, colour);
        let ly = 70.0 + 22.0 * k as f64;
        svg.line((600.0, ly), (625.0, ly), colour, 3.0);
        svg.text(630.0, ly + 4.0, 11.0, "start", name);
    }
    svg.text(
        600.0,
        150.0,
        11.0,
        "start",
        &format!("direct softmax average: {direct:.4}"),
    );
    let last = steps.last().expect("scores");
    svg.text(
        600.0,
        168.0,
        11.0,
        "start",
        &format!("online, last step: {:.4}", last.o[0] / last.l),
    );
    svg.text(10.0, 350.0, 11.0, "start", "From trace_softmax::online_trace (cargo xtask trace-softmax 1 3 2 3.5 0.5 4 --values 1 2 3 4 5 6). cargo xtask figures.");
    svg.finish()
}

// ---- FlashAttention over time -----------------------------------------------------------------

pub(super) fn flash_tiling() -> String {
    use kernels::attention::flash_mma::{BC, BR, KEYS, STAGES, q_in_registers};
    use kernels::attention::{HEAD_DIMS, kv_end};
    // The head dimensions at which a warp keeps Q's A fragments for the whole loop, and the others.
    let dims = |held: bool| {
        HEAD_DIMS
            .iter()
            .filter(|&&d| q_in_registers(d as usize) == held)
            .map(|d| format!("d = {d}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    // One head of n = 4 key tiles; the query tile two before its end (rows tile BR ..), causal:
    // it needs key tiles up to its diagonal only.
    let n = 4 * BC;
    let tile = (n / BR).saturating_sub(2);
    let steps = kv_end(tile * BR, BR, n, n, true).div_ceil(BC);
    let all_steps = n.div_ceil(BC);
    let mut svg = Svg::new(980.0, 486.0);
    svg.text(10.0, 20.0, 15.0, "start", &format!("FlashAttention (tensor cores), query tile {tile} of a {n}-key head, causal: where each tile lives at each step"));
    // The registers' band holds a fourth row, Q's fragments.
    let bands = [
        ("HBM", 50.0, 100.0),
        ("shared memory", 160.0, 100.0),
        ("registers", 270.0, 126.0),
    ];
    for (name, y, height) in bands {
        svg.rect(10.0, y, 960.0, height, "hsl(210, 30%, 97%)", "#ccc");
        svg.text(16.0, y + 16.0, 12.0, "start", name);
    }
    let (x0, col) = (130.0, 165.0);
    let box_ = |svg: &mut Svg, x: f64, y: f64, w: f64, text: &str, fill: &str| {
        svg.rect(x, y, w, 22.0, fill, "#555");
        svg.text(x + w / 2.0, y + 15.0, 9.0, "middle", text);
    };
    let (now, soon, idle) = ("hsl(30, 90%, 72%)", "hsl(50, 90%, 82%)", "white");
    for j in 0..all_steps {
        let x = x0 + j as f64 * col;
        let active = j < steps;
        svg.text(
            x + col / 2.0 - 8.0,
            44.0,
            11.0,
            "middle",
            &if active {
                format!("step j = {j}")
            } else {
                format!("j = {j}: skipped (masked)")
            },
        );
        // HBM: all of K and V; this step's tile is being read (it was prefetched a step ago).
        for t in 0..all_steps {
            let fill = if active && t == j {
                now
            } else if active && t == j + 1 && t < steps {
                soon
            } else {
                idle
            };
            box_(
                &mut svg,
                x + t as f64 * 36.0,
                70.0,
                34.0,
                &format!("K{t} V{t}"),
                fill,
            );
        }
        if j == 0 {
            box_(
                &mut svg,
                x,
                100.0,
                70.0,
                &format!("Q{tile} (read once)"),
                now,
            );
        }
        if !active {
            continue;
        }
        // Shared memory: Q_i for the whole loop, and STAGES stages of K, V.
        box_(
            &mut svg,
            x,
            180.0,
            60.0,
            &format!("Q{tile} [{BR} x d]"),
            "hsl(120, 40%, 85%)",
        );
        for stage in 0..STAGES {
            let held = if stage == j % STAGES { j } else { j + 1 };
            let (fill, text) = if held == j {
                (now, format!("K{held} V{held} [{BC} x d]"))
            } else if held < steps {
                (soon, format!("K{held} V{held} loading"))
            } else {
                (idle, "—".to_string())
            };
            box_(&mut svg, x, 206.0 + stage as f64 * 26.0, 140.0, &text, fill);
        }
        // Registers: the scores, probabilities and the running O, m, l of the tile's rows.
        box_(
            &mut svg,
            x,
            290.0,
            140.0,
            &format!("S = Q{tile} K{j}ᵀ, {KEYS} keys at a time"),
            now,
        );
        box_(&mut svg, x, 316.0, 140.0, "P = exp2(S - m) → bf16", now);
        box_(
            &mut svg,
            x,
            342.0,
            140.0,
            "O += P V, m, l (rescaled)",
            "hsl(120, 40%, 85%)",
        );
        // At d = 64 each warp keeps its rows of Q as mma A fragments for the whole loop; at
        // d = 128 they do not fit beside O and come from shared memory again at every step.
        box_(
            &mut svg,
            x,
            368.0,
            140.0,
            &format!("Q{tile} A fragments ({})", dims(true)),
            "hsl(120, 40%, 85%)",
        );
    }
    svg.text(10.0, 421.0, 11.0, "start", &format!("Orange: this step; yellow: the next K, V tile arriving by cp.async ({STAGES} stages); green: held for the whole loop. S and P never leave the registers;"));
    svg.text(10.0, 437.0, 11.0, "start", &format!("O goes to HBM once, after step {}; Q's A fragments stay in registers at {}, and at {} come from shared memory again each step;", steps - 1, dims(true), dims(false)));
    svg.text(10.0, 453.0, 11.0, "start", &format!("S is f32, P bf16, each for {KEYS} of the tile's {BC} keys at a time (two steps of the recurrence per K, V tile)."));
    svg.text(10.0, 469.0, 11.0, "start", &format!("Tile sizes BR = {BR}, BC = {BC}, KEYS = {KEYS} and the causal end from kernels::attention. cargo xtask figures."));
    svg.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ring's schedule obeys the kernel's rules: a stage is refilled only after the tile
    /// of its previous round was released, a tile is multiplied only once full and after the
    /// previous one, and once the ring is primed the consumers never wait.
    #[test]
    fn the_ring_schedule_keeps_the_kernels_rules() {
        let stages = kernels::gemm::WG_STAGES;
        let ev = ring_schedule(16, stages, 3.0);
        for (i, e) in ev.iter().enumerate() {
            assert!(e.full <= e.multiplied && e.multiplied < e.released);
            if i >= stages as usize {
                assert!(e.issued >= ev[i - stages as usize].released, "tile {i}");
            }
            if i > 0 {
                assert!(e.multiplied >= ev[i - 1].multiplied + 1.0);
            }
        }
        let steady = &ev[stages as usize..];
        assert!(
            steady
                .windows(2)
                .all(|w| w[1].multiplied == w[0].multiplied + 1.0)
        );
    }
}
