//! Memory pictures: shared-memory banks, the blocks' rasterisation over C, the memory pyramid
//! to scale, and the bytes one decode step reads.

use kernels::gemm::{ELEMS_PER_CHUNK, TC_GROUP_M, raster, swizzled};
use perf::specs::GpuSpec;

use super::Svg;

/// A colour per bank group of four banks (one 16-byte chunk).
fn bank_colour(bank: usize) -> String {
    format!("hsl({}, 65%, 78%)", (bank / 4) * 45)
}

// ---- Shared-memory banks -----------------------------------------------------------------------

const BANKS: usize = 32;

/// The bank of a 4-byte word offset.
fn bank(word: usize) -> usize {
    word % BANKS
}

/// A warp reading one column of the 32 x 32 f32 transpose tile: the bank of each of its 32
/// elements, with row pitch `pitch` words.
fn column_banks(pitch: usize) -> Vec<usize> {
    (0..kernels::transpose::TILE)
        .map(|ty| bank(ty * pitch))
        .collect()
}

/// How many lanes of a request land in the busiest bank (distinct words; 1 is conflict-free).
fn conflict_degree(banks: &[usize]) -> usize {
    (0..BANKS)
        .map(|b| banks.iter().filter(|&&x| x == b).count())
        .max()
        .unwrap_or(0)
}

fn degree_text(degree: usize) -> String {
    if degree == 1 {
        "no conflict".to_string()
    } else {
        format!("{degree}-way conflict")
    }
}

pub(super) fn banks_transpose() -> String {
    use kernels::transpose::{PADDED_PITCH, TILE};
    let mut svg = Svg::new(840.0, 250.0);
    svg.text(10.0, 20.0, 15.0, "start", "transpose: a warp reads one column of the 32 x 32 f32 tile (lane i reads row i); the cell is the bank");
    for (i, (pitch, name)) in [
        (TILE, "transpose_shared"),
        (PADDED_PITCH, "transpose_padded"),
    ]
    .into_iter()
    .enumerate()
    {
        let banks = column_banks(pitch);
        let y = 60.0 + i as f64 * 90.0;
        svg.text(
            10.0,
            y - 8.0,
            12.0,
            "start",
            &format!(
                "{name}: pitch {pitch} words, bank = (lane x {pitch}) mod 32: {}",
                degree_text(conflict_degree(&banks))
            ),
        );
        for (lane, &b) in banks.iter().enumerate() {
            let x = 10.0 + lane as f64 * 23.0;
            svg.rect(x, y, 23.0, 24.0, &bank_colour(b), "#555");
            svg.text(x + 11.5, y + 16.0, 9.0, "middle", &b.to_string());
            svg.text(x + 11.5, y + 36.0, 7.0, "middle", &format!("L{lane}"));
        }
    }
    svg.text(10.0, 240.0, 11.0, "start", "Pitches from kernels::transpose (TILE, PADDED_PITCH): one word of padding per row spreads a column over all 32 banks. cargo xtask figures.");
    svg.finish()
}

/// One 8 x 8 grid of 16-byte chunks: eight rows of a tile as an `ldmatrix` phase sees them, each
/// cell the bank group of chunk `chunk` of that row; the chunks of logical column chunk 0 (the
/// ones one phase reads) are outlined.
fn chunk_panel(
    svg: &mut Svg,
    (x0, y0): (f64, f64),
    title: &str,
    word_of: impl Fn(u32, u32) -> usize,
) {
    svg.text(x0, y0 - 8.0, 12.0, "start", title);
    let (cw, ch) = (40.0, 22.0);
    let mut first_chunk_banks = Vec::new();
    for row in 0..8u32 {
        for chunk in 0..8u32 {
            let word = word_of(row, chunk);
            let b = bank(word);
            let slot = (b / 4) as f64;
            let (x, y) = (x0 + slot * cw, y0 + f64::from(row) * ch);
            let stroke = if chunk == 0 { "black" } else { "#bbb" };
            svg.rect(x, y, cw, ch, &bank_colour(b), stroke);
            if chunk == 0 {
                svg.rect(x + 1.0, y + 1.0, cw - 2.0, ch - 2.0, "none", "black");
                first_chunk_banks.extend((0..4).map(|i| b + i));
            }
            svg.text(
                x + cw / 2.0,
                y + 15.0,
                9.0,
                "middle",
                &format!("r{row} c{chunk}"),
            );
        }
    }
    let degree = conflict_degree(&first_chunk_banks);
    svg.text(
        x0,
        y0 + 8.0 * ch + 14.0,
        10.0,
        "start",
        &format!(
            "outlined, chunk 0 of 8 rows (one ldmatrix phase): {}",
            degree_text(degree)
        ),
    );
}

pub(super) fn banks_tiles() -> String {
    use kernels::attention::flash_mma::ROW_PAD;
    let mut svg = Svg::new(1010.0, 300.0);
    svg.text(10.0, 20.0, 15.0, "start", "Where each 16-byte chunk (r row, c chunk) of a bf16 tile lands in the 32 banks: columns are bank groups 0-3, 4-7, ..., 28-31");
    // The GEMM's A tile: 64 bf16 per row (128 bytes, one bank line), chunk c of row r.
    let cols = 64u32;
    let words = |elem: usize| elem * 2 / 4;
    chunk_panel(
        &mut svg,
        (10.0, 60.0),
        "GEMM tile, 64 bf16 per row, no swizzle",
        |r, c| words((r * cols + c * ELEMS_PER_CHUNK) as usize),
    );
    chunk_panel(
        &mut svg,
        (345.0, 60.0),
        "GEMM tile with kernels::gemm::swizzled",
        |r, c| words(swizzled(r, c * ELEMS_PER_CHUNK, cols)),
    );
    let stride = 64 + ROW_PAD as u32;
    chunk_panel(
        &mut svg,
        (680.0, 60.0),
        &format!("attention tile, d = 64 + ROW_PAD = {stride} per row"),
        |r, c| words((r * stride + c * ELEMS_PER_CHUNK) as usize),
    );
    svg.text(10.0, 290.0, 11.0, "start", "Unswizzled rows of one 128-byte line put a column's chunks in one bank group; the XOR swizzle and the 16-byte row padding spread them over all eight. cargo xtask figures.");
    svg.finish()
}

// ---- Block rasterisation -----------------------------------------------------------------------

/// Tiles of C visited by blocks `0..blocks` of a `blocks_m x blocks_n` grid under `order`.
fn raster_panel(
    svg: &mut Svg,
    (x0, y0): (f64, f64),
    (blocks_m, blocks_n): (u32, u32),
    wave: u32,
    title: &str,
    order: impl Fn(u32) -> (u32, u32),
) {
    let cell = 26.0;
    let mut rows = std::collections::BTreeSet::new();
    let mut cols = std::collections::BTreeSet::new();
    for pid in 0..blocks_m * blocks_n {
        let (r, c) = order(pid);
        let (x, y) = (x0 + f64::from(c) * cell, y0 + f64::from(r) * cell);
        let fill = if pid < wave {
            rows.insert(r);
            cols.insert(c);
            "hsl(30, 90%, 70%)"
        } else {
            "hsl(210, 30%, 94%)"
        };
        svg.rect(x, y, cell, cell, fill, "#888");
        svg.text(x + cell / 2.0, y + 17.0, 9.0, "middle", &pid.to_string());
    }
    svg.text(x0, y0 - 24.0, 12.0, "start", title);
    svg.text(
        x0,
        y0 - 8.0,
        11.0,
        "start",
        &format!(
            "first {wave} blocks read {} strips of A and {} of B: {} in all",
            rows.len(),
            cols.len(),
            rows.len() + cols.len()
        ),
    );
}

pub(super) fn raster_order() -> String {
    let (blocks_m, blocks_n, wave) = (16u32, 12u32, 32u32);
    let mut svg = Svg::new(740.0, 520.0);
    svg.text(
        10.0,
        20.0,
        15.0,
        "start",
        "Block order over 16 x 12 tiles of C (number: block index; orange: the first 32 blocks)",
    );
    raster_panel(
        &mut svg,
        (10.0, 70.0),
        (blocks_m, blocks_n),
        wave,
        "row by row",
        |pid| (pid / blocks_n, pid % blocks_n),
    );
    raster_panel(
        &mut svg,
        (370.0, 70.0),
        (blocks_m, blocks_n),
        wave,
        &format!("kernels::gemm::raster, groups of {TC_GROUP_M} rows"),
        |pid| raster(pid, blocks_m, blocks_n, TC_GROUP_M),
    );
    svg.text(10.0, 510.0, 11.0, "start", "Blocks running together share strips in L2: fewer distinct strips, fewer HBM reads. cargo xtask figures.");
    svg.finish()
}

// ---- The memory pyramid ------------------------------------------------------------------------

/// A horizontal bar chart on a log10 axis from `lo` to `hi` decades.
fn log_bars(
    svg: &mut Svg,
    (x0, y0): (f64, f64),
    title: &str,
    unit: &str,
    (lo, hi): (f64, f64),
    bars: &[(&str, f64, String)],
) {
    let width = 300.0;
    svg.text(x0, y0 - 10.0, 13.0, "start", title);
    let scale = |v: f64| (v.log10() - lo) / (hi - lo) * width;
    for d in (lo as i32)..=(hi as i32) {
        let x = x0 + 110.0 + scale(10f64.powi(d));
        svg.line((x, y0), (x, y0 + 30.0 * bars.len() as f64), "#ddd", 1.0);
        svg.text(
            x,
            y0 + 30.0 * bars.len() as f64 + 12.0,
            9.0,
            "middle",
            &format!("1e{d}"),
        );
    }
    for (i, (name, value, text)) in bars.iter().enumerate() {
        let y = y0 + 30.0 * i as f64 + 5.0;
        svg.text(x0 + 105.0, y + 14.0, 11.0, "end", name);
        svg.rect(
            x0 + 110.0,
            y,
            scale(*value),
            20.0,
            "hsl(210, 60%, 70%)",
            "#557",
        );
        svg.text(x0 + 114.0 + scale(*value), y + 14.0, 10.0, "start", text);
    }
    svg.text(
        x0 + 110.0 + width / 2.0,
        y0 + 30.0 * bars.len() as f64 + 26.0,
        10.0,
        "middle",
        unit,
    );
}

pub(super) fn pyramid() -> String {
    let g = GpuSpec::find("h100").expect("in the table");
    let sms = f64::from(g.sms);
    let shared_bw = g.shared_bytes_per_clock * sms * g.boost_clock_hz;
    let size = |b: f64| {
        if b >= 1e9 {
            format!("{:.0} GB", b / 1e9)
        } else {
            format!("{:.1} MB", b / 1e6)
        }
    };
    let rate = |b: f64| {
        if b >= 1e12 {
            format!("{:.2} TB/s", b / 1e12)
        } else {
            format!("{:.0} GB/s", b / 1e9)
        }
    };
    let sizes = [
        ("registers", g.registers_per_sm * sms),
        ("shared memory", g.shared_per_sm * sms),
        ("L2", g.l2_bytes),
        ("HBM", g.hbm_bytes),
    ];
    let rates = [
        ("shared memory", shared_bw),
        ("HBM", g.hbm_bandwidth),
        ("NVLink", g.nvlink_bandwidth),
        ("PCIe", g.pcie_bandwidth),
        ("network", g.network_bandwidth),
    ];
    let mut svg = Svg::new(960.0, 260.0);
    svg.text(
        10.0,
        20.0,
        15.0,
        "start",
        &format!(
            "The memory pyramid of the {}, to scale (vendor figures, log axes)",
            g.name
        ),
    );
    let sized: Vec<(&str, f64, String)> = sizes.iter().map(|&(n, b)| (n, b, size(b))).collect();
    log_bars(
        &mut svg,
        (10.0, 60.0),
        "capacity, whole GPU",
        "bytes",
        (7.0, 11.0),
        &sized,
    );
    let rated: Vec<(&str, f64, String)> = rates.iter().map(|&(n, b)| (n, b, rate(b))).collect();
    log_bars(
        &mut svg,
        (470.0, 60.0),
        "bandwidth (links: per direction)",
        "bytes per second",
        (10.0, 14.0),
        &rated,
    );
    svg.text(10.0, 250.0, 11.0, "start", "From perf::specs (shared memory: 128 B per clock per SM x SMs x boost clock; no vendor figure for the register file or L2 bandwidth). cargo xtask figures.");
    svg.finish()
}

// ---- Decode: bytes per token --------------------------------------------------------------------

pub(super) fn decode_bytes() -> String {
    let (h100, h200) = (
        GpuSpec::find("h100").expect("in the table"),
        GpuSpec::find("h200").expect("in the table"),
    );
    let steps = crate::decode::token_steps(h100);
    let faster = crate::decode::token_steps(h200);
    let most = steps
        .iter()
        .map(|t| t.weight_bytes + t.kv_bytes)
        .max()
        .unwrap_or(1) as f64;
    let (x0, width, row) = (70.0, 560.0, 28.0);
    let px = |b: u64| b as f64 / most * width;
    let mut svg = Svg::new(960.0, 70.0 + row * steps.len() as f64 + 50.0);
    svg.text(
        10.0,
        20.0,
        15.0,
        "start",
        "One decode step of Llama-3-8B at batch 1: every weight and the whole KV cache, read once (modelled)",
    );
    let legend = [
        ("weights (bf16)", "hsl(210, 60%, 70%)"),
        ("KV cache", "hsl(30, 85%, 65%)"),
    ];
    for (i, (name, colour)) in legend.iter().enumerate() {
        let x = x0 + 160.0 * i as f64;
        svg.rect(x, 34.0, 14.0, 14.0, colour, "#557");
        svg.text(x + 20.0, 46.0, 11.0, "start", name);
    }
    svg.text(
        x0 + width + 10.0,
        46.0,
        11.0,
        "start",
        "per token: H100 SXM / H200",
    );
    for (i, (t, f)) in steps.iter().zip(&faster).enumerate() {
        let y = 60.0 + row * i as f64;
        svg.text(
            x0 - 8.0,
            y + 15.0,
            11.0,
            "end",
            &format!("{}k", t.context / 1024),
        );
        svg.rect(x0, y, px(t.weight_bytes), row - 8.0, legend[0].1, "#557");
        svg.rect(
            x0 + px(t.weight_bytes),
            y,
            px(t.kv_bytes),
            row - 8.0,
            legend[1].1,
            "#557",
        );
        let gb = |b: u64| b as f64 / 1e9;
        svg.text(
            x0 + 4.0,
            y + 14.0,
            10.0,
            "start",
            &format!("{:.1} GB", gb(t.weight_bytes)),
        );
        svg.text(
            x0 + width + 10.0,
            y + 14.0,
            11.0,
            "start",
            &format!(
                "{:.1} GB of cache: {} / {}",
                gb(t.kv_bytes),
                crate::format::duration(t.seconds),
                crate::format::duration(f.seconds)
            ),
        );
    }
    let y = 60.0 + row * steps.len() as f64;
    svg.text(x0 - 8.0, y + 2.0, 10.0, "end", "context");
    svg.text(
        10.0,
        y + 26.0,
        11.0,
        "start",
        "Bytes from the GEMV and split-KV attention cost models; time = bytes / HBM bandwidth (perf::specs). cargo xtask figures.",
    );
    svg.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pictures' claims, computed independently: pitch 32 puts a column in one bank, 33
    /// spreads it; the swizzle and the attention padding make an ldmatrix phase conflict-free.
    #[test]
    fn the_bank_pictures_show_what_the_chapters_say() {
        assert_eq!(conflict_degree(&column_banks(32)), 32);
        assert_eq!(conflict_degree(&column_banks(33)), 1);
        let phase = |word_of: &dyn Fn(u32) -> usize| {
            let banks: Vec<usize> = (0..8)
                .flat_map(|r| (0..4).map(move |i| (r, i)))
                .map(|(r, i)| bank(word_of(r)) + i)
                .collect();
            conflict_degree(&banks)
        };
        assert_eq!(phase(&|r| (r * 64) as usize / 2), 8);
        assert_eq!(phase(&|r| swizzled(r, 0, 64) / 2), 1);
        assert_eq!(
            phase(&|r| (r as usize * (64 + kernels::attention::flash_mma::ROW_PAD)) / 2),
            1
        );
    }
}
