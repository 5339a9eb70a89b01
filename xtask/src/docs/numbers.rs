//! Numbers the chapters state in their tables, computed again from the code that makes them: a
//! table of GEMM steps with a `no-cache time` column (docs/gemm.md's no-cache roofline,
//! docs/hopper.md's modelled figures) must give, in every column it has, what
//! `GemmKernel::cost` and `perf::cost::Roofline::modelled` give for that kernel on the H100 SXM,
//! docs/softmax.md's traffic table what `softmax::Variant::cost` gives, and docs/attention.md's
//! traffic tables and memory table what `attention::naive_traffic`, `fused_traffic`,
//! `device_bytes` and `max_sequence_len` give, each number as printed or rounded to fewer digits. A cost model or a vendor figure that changes fails the
//! chapter's table here, not in a reader's head.

use std::path::PathBuf;

use half::bf16;
use host::ops::attention::{
    AttentionShape, Flow, device_bytes, fused_traffic, max_sequence_len, naive_traffic,
};
use host::ops::gemm::{Epilogue, GemmKernel, GemmShape};
use host::ops::softmax::Variant;
use perf::cost::{Bound, Roofline};
use perf::specs::GpuSpec;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The cells of a markdown table row, trimmed; `None` for a line that is not one.
fn cells(line: &str) -> Option<Vec<String>> {
    let inner = line.trim().strip_prefix('|')?.strip_suffix('|')?;
    Some(inner.split('|').map(|c| c.trim().to_string()).collect())
}

/// Whether `quoted` (digits, as a chapter writes them) may be `value` rounded: within half a
/// unit of its last digit.
fn quotes(quoted: &str, value: f64) -> bool {
    let Ok(q) = quoted.parse::<f64>() else {
        return false;
    };
    let decimals = quoted.split_once('.').map_or(0, |(_, d)| d.len());
    (q - value).abs() <= 0.5 * 10f64.powi(-(decimals as i32)) + 1e-9
}

/// The problem size `N^3` a table is for: its `shape` cell, or the last line above the table that
/// names one (docs/gemm.md's "The no-cache roofline, 4096^3, ...").
fn cube(text: &str) -> Option<usize> {
    let at = text.find("^3")?;
    let digits: String = text[..at]
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.chars().rev().collect::<String>().parse().ok()
}

/// Every cell of every GEMM table of `markdown` (a header with a `no-cache time` column) that is
/// not what the code computes, as `line: kernel column: quoted, computed`; and how many rows were
/// read.
fn stale_cells(markdown: &str) -> (Vec<String>, usize) {
    let h100 = GpuSpec::find("h100").unwrap();
    let lines: Vec<&str> = markdown.lines().collect();
    let (mut out, mut rows) = (Vec::new(), 0);
    let mut i = 0;
    while i < lines.len() {
        let header = match cells(lines[i]) {
            Some(h) if h.iter().any(|c| c.starts_with("no-cache time")) => h,
            _ => {
                i += 1;
                continue;
            }
        };
        let above = lines[..i].iter().rev().find_map(|l| cube(l));
        let mut row = i + 2; // past the header's separator
        while let Some(cell) = lines.get(row).and_then(|l| cells(l)) {
            let line = row + 1;
            row += 1;
            rows += 1;
            let get = |name: &str| {
                header
                    .iter()
                    .position(|h| h.trim_end_matches(" (modelled)") == name)
                    .and_then(|c| cell.get(c))
                    .map(String::as_str)
            };
            let Some(name) = get("kernel") else { continue };
            let name = name.split('`').find(|s| !s.trim().is_empty()).unwrap_or("");
            let Some(kernel) = GemmKernel::ALL.into_iter().find(|k| k.name() == name) else {
                out.push(format!("{line}: no GEMM kernel is called {name}"));
                continue;
            };
            let Some(n) = get("shape").and_then(cube).or(above) else {
                out.push(format!("{line}: the table names no N^3"));
                continue;
            };
            let cost = kernel.cost(GemmShape::new(n, n, n), Epilogue::Overwrite);
            let roof = Roofline::modelled(&cost, h100);
            let bound = match roof.bound {
                Bound::Memory => "memory",
                Bound::Compute => "compute",
                Bound::Exponential => "exponentials",
            };
            for (head, quoted) in header.iter().zip(&cell) {
                let number = quoted.split_whitespace().next().unwrap_or("");
                let unit = quoted.split_whitespace().nth(1).unwrap_or("");
                let computed = match head.trim_end_matches(" (modelled)") {
                    "tile intensity" => Some(kernel.tile_intensity()),
                    "requested" => Some(cost.bytes() as f64 / 1e9),
                    "intensity" | "FLOP/B" => Some(roof.intensity),
                    "no-cache time" if unit == "ms" => Some(roof.seconds * 1e3),
                    "no-cache time" if unit == "µs" => Some(roof.seconds * 1e6),
                    "no-cache time" => None,
                    "no-cache TFLOP/s" => Some(roof.flops_per_second / 1e12),
                    "roof" => {
                        if quoted != bound {
                            out.push(format!(
                                "{line}: {name} roof: the chapter says {quoted}, the code {bound}"
                            ));
                        }
                        continue;
                    }
                    _ => continue,
                };
                if !computed.is_some_and(|v| quotes(number, v)) {
                    out.push(format!(
                        "{line}: {name} {head}: the chapter says {quoted}, the code {computed:?}"
                    ));
                }
            }
        }
        i = row;
    }
    (out, rows)
}

/// Every cell of a softmax traffic table of `markdown` (headed `shape, dtype | variant | bytes
/// moved | modelled time | vs naive`) that is not what `Variant::cost` and `Roofline::modelled`
/// give on the H100 SXM; and how many rows were read. A row with an empty first cell is the
/// shape above it.
fn stale_softmax_cells(markdown: &str) -> (Vec<String>, usize) {
    let h100 = GpuSpec::find("h100").unwrap();
    let lines: Vec<&str> = markdown.lines().collect();
    let (mut out, mut rows) = (Vec::new(), 0);
    let Some(header) = lines
        .iter()
        .position(|l| cells(l).is_some_and(|c| c.first().is_some_and(|h| h == "shape, dtype")))
    else {
        return (out, rows);
    };
    let mut shape = None;
    for (i, line) in lines.iter().enumerate().skip(header + 2) {
        let Some(cell) = cells(line) else { break };
        let line = i + 1;
        rows += 1;
        if !cell[0].is_empty() {
            // `8192 x 8192, bf16`
            let parsed = cell[0].split_once(", ").and_then(|(dims, dtype)| {
                let (r, c) = dims.split_once(" x ")?;
                let bytes = match dtype {
                    "bf16" | "f16" => 2,
                    "f32" => 4,
                    _ => return None,
                };
                Some((r.parse::<usize>().ok()?, c.parse::<usize>().ok()?, bytes))
            });
            if parsed.is_none() {
                out.push(format!("{line}: no shape in `{}`", cell[0]));
            }
            shape = parsed;
        }
        let Some((r, c, b)) = shape else { continue };
        let variant = match cell.get(1).and_then(|v| v.split_whitespace().next()) {
            Some("naive") => Variant::Naive,
            Some("online") => Variant::Online,
            Some("fused") => Variant::Fused,
            other => {
                out.push(format!("{line}: no softmax variant is called {other:?}"));
                continue;
            }
        };
        let seconds = |v: Variant| Roofline::modelled(&v.cost(r, c, b), h100).seconds;
        let cost = variant.cost(r, c, b);
        let computed = [
            ("bytes moved", "MB", cost.bytes() as f64 / 1e6),
            ("modelled time", "µs", seconds(variant) * 1e6),
            ("vs naive", "x", seconds(Variant::Naive) / seconds(variant)),
        ];
        for (column, (name, unit, value)) in cell.iter().skip(2).zip(computed) {
            let number = column
                .trim_end_matches('x')
                .split_whitespace()
                .next()
                .unwrap_or("");
            let quoted_unit = if column.ends_with('x') {
                "x"
            } else {
                column.split_whitespace().nth(1).unwrap_or("")
            };
            if quoted_unit != unit || !quotes(number, value) {
                out.push(format!(
                    "{line}: {} {r} x {c} {name}: the chapter says {column}, the code {value:.4} {unit}",
                    variant.name()
                ));
            }
        }
    }
    (out, rows)
}

/// The batch, heads and head dimension of docs/attention.md's memory table ("at batch 4, 16
/// heads, d = 128, f32").
const ATTENTION_MEMORY: (usize, usize, usize) = (4, 16, 128);

/// Every cell of docs/attention.md's memory table (headed `N | naive (...) | fused (...)`) that is
/// not what `device_bytes` gives at `N`, or, on a row `largest N in X GB`, what
/// `max_sequence_len` gives for X GB; and how many rows were read.
fn stale_memory_cells(markdown: &str) -> (Vec<String>, usize) {
    let (batch, heads, d) = ATTENTION_MEMORY;
    let lines: Vec<&str> = markdown.lines().collect();
    let (mut out, mut rows) = (Vec::new(), 0);
    let Some(header) = lines.iter().position(|l| {
        cells(l).is_some_and(|c| {
            c.len() == 3
                && c[0] == "N"
                && c[1].starts_with("naive (")
                && c[2].starts_with("fused (")
        })
    }) else {
        return (out, rows);
    };
    for (i, line) in lines.iter().enumerate().skip(header + 2) {
        let Some(cell) = cells(line) else { break };
        let line = i + 1;
        rows += 1;
        let flows = [(Flow::Naive, &cell[1]), (Flow::Fused, &cell[2])];
        if let Ok(n) = cell[0].parse::<usize>() {
            let shape = AttentionShape::new(batch, heads, n, d);
            for (flow, quoted) in flows {
                let gb = device_bytes(flow, &shape) as f64 / 1e9;
                let number = quoted.strip_suffix(" GB").unwrap_or("");
                if !quotes(number, gb) {
                    out.push(format!(
                        "{line}: {flow:?} at N = {n}: the chapter says {quoted}, the code {gb:.3} GB"
                    ));
                }
            }
        } else if let Some(gb) = cell[0]
            .strip_prefix("largest N in ")
            .and_then(|rest| rest.split(" GB").next())
            .and_then(|gb| gb.parse::<u64>().ok())
        {
            for (flow, quoted) in flows {
                let n = max_sequence_len(flow, gb * 1_000_000_000, batch, heads, d);
                if quoted.replace(',', "") != n.to_string() {
                    out.push(format!(
                        "{line}: {flow:?} in {gb} GB: the chapter says {quoted}, the code {n}"
                    ));
                }
            }
        } else {
            out.push(format!(
                "{line}: `{}` is neither an N nor a memory size",
                cell[0]
            ));
        }
    }
    (out, rows)
}

/// A size as a chapter writes it (`**17.72 GB**`, `403 MB`): its digits and bytes per unit.
fn size(cell: &str) -> Option<(&str, f64)> {
    let (number, unit) = cell.trim_matches('*').split_once(' ')?;
    let scale = match unit {
        "GB" => 1e9,
        "MB" => 1e6,
        _ => return None,
    };
    Some((number, scale))
}

/// The rows of docs/attention.md's traffic tables at the benchmark's shape (batch 4, 16 heads,
/// N = 4096, d = 128) that are not what the traffic models give: the naive f32 flow's compulsory
/// bytes and re-reads, and the fused kernels' compulsory bytes, re-reads and causal re-reads in
/// f32 and in bf16; and how many cells were read.
fn stale_attention_traffic(markdown: &str) -> (Vec<String>, usize) {
    let shape = AttentionShape::new(4, 16, 4096, 128);
    let naive = naive_traffic(&shape);
    let fused = |causal: bool| {
        (
            fused_traffic::<f32>(&shape, causal),
            fused_traffic::<bf16>(&shape, causal),
        )
    };
    let ((f32_fused, bf16_fused), (f32_causal, bf16_causal)) = (fused(false), fused(true));
    // The re-reads, whichever field of the cost holds them: every byte read but the compulsory.
    let rereads = |c: &kernels::registry::Cost| c.bytes() - c.compulsory().bytes();
    let (mut out, mut read) = (Vec::new(), 0);
    for (i, line) in markdown.lines().enumerate() {
        let Some(cell) = cells(line) else { continue };
        let first = cell[0].trim_matches('*');
        // (the cell, the bytes the code gives)
        let expected: Vec<(&String, u64)> = match (first, cell.len()) {
            ("compulsory", 4) => vec![(&cell[3], naive.compulsory().bytes())],
            ("re-reads", 4) => vec![(&cell[3], rereads(&naive))],
            ("compulsory", 3) => vec![
                (&cell[1], f32_fused.compulsory().bytes()),
                (&cell[2], bf16_fused.compulsory().bytes()),
            ],
            (f, 3) if f.starts_with("K, V re-read per extra query tile") => vec![
                (&cell[1], rereads(&f32_fused)),
                (&cell[2], rereads(&bf16_fused)),
            ],
            (f, 3) if f.starts_with("causal: re-reads") => vec![
                (&cell[1], rereads(&f32_causal)),
                (&cell[2], rereads(&bf16_causal)),
            ],
            _ => continue,
        };
        for (quoted, bytes) in expected {
            read += 1;
            let ok = size(quoted).is_some_and(|(n, scale)| quotes(n, bytes as f64 / scale));
            if !ok {
                out.push(format!(
                    "{}: {first}: the chapter says {quoted}, the code {bytes} bytes",
                    i + 1
                ));
            }
        }
    }
    (out, read)
}

#[test]
fn the_gemm_tables_state_what_the_cost_models_give() {
    // docs/gemm.md's no-cache roofline (4 rows) and docs/hopper.md's modelled figures (2).
    for (chapter, rows) in [("docs/gemm.md", 4), ("docs/hopper.md", 2)] {
        let text = std::fs::read_to_string(repo().join(chapter)).unwrap();
        let (stale, read) = stale_cells(&text);
        assert!(stale.is_empty(), "{chapter}:\n{}", stale.join("\n"));
        assert_eq!(read, rows, "{chapter}: the GEMM table's rows");
    }
}

#[test]
fn a_stale_number_in_a_gemm_table_is_found() {
    let table = "The no-cache roofline, 4096^3, H100 SXM:\n\n\
        | step | kernel | requested | roof | no-cache time | no-cache TFLOP/s |\n\
        |---|---|---|---|---|---|\n\
        | 4 | `gemm_tensor_core_bf16` / `_f16` | 2.21 GB | memory | 0.661 ms | 208 |\n";
    assert_eq!(stale_cells(table), (Vec::new(), 1));
    // The bytes a digit off, a time in the wrong unit, the other roof, a kernel that is not one.
    for (original, planted, column) in [
        ("2.21 GB", "2.22 GB", "requested"),
        ("0.661 ms", "0.661 µs", "no-cache time"),
        ("| memory |", "| compute |", "roof"),
        (
            "`gemm_tensor_core_bf16`",
            "`gemm_tensor_cores_bf16`",
            "no GEMM kernel",
        ),
    ] {
        let (stale, _) = stale_cells(&table.replace(original, planted));
        assert!(
            stale.len() == 1 && stale[0].contains(column),
            "{planted}: {stale:?}"
        );
    }
    // A shape column overrides the size named above the table: 661.1 µs is 4096^3's time.
    let other = "| kernel | shape | no-cache time |\n|---|---|---|\n| gemm_tensor_core_bf16 | 2048^3 | 661.1 µs |\n";
    assert_eq!(stale_cells(other).0.len(), 1);
    assert!(stale_cells(&other.replace("2048^3", "4096^3")).0.is_empty());
}

#[test]
fn the_softmax_traffic_table_states_what_the_cost_models_give() {
    let text = std::fs::read_to_string(repo().join("docs/softmax.md")).unwrap();
    let (stale, rows) = stale_softmax_cells(&text);
    assert!(stale.is_empty(), "docs/softmax.md:\n{}", stale.join("\n"));
    assert_eq!(
        rows, 12,
        "docs/softmax.md's traffic table: four shapes, three variants each"
    );
}

#[test]
fn a_stale_number_in_the_softmax_table_is_found() {
    let table = "| shape, dtype | variant | bytes moved | modelled time | vs naive |\n\
        |---|---|---|---|---|\n\
        | 8192 x 8192, bf16 | naive | 537.0 MB | 160.3 µs | 1.0x |\n\
        | | fused | 268.4 MB | 80.1 µs | 2.0x |\n";
    assert_eq!(stale_softmax_cells(table), (Vec::new(), 2));
    for (original, planted, found) in [
        ("537.0 MB", "536.0 MB", "naive 8192 x 8192 bytes moved"),
        ("80.1 µs", "80.1 ms", "fused 8192 x 8192 modelled time"),
        ("2.0x", "2.5x", "fused 8192 x 8192 vs naive"),
        ("| | fused", "| | fast", "no softmax variant"),
    ] {
        let (stale, _) = stale_softmax_cells(&table.replace(original, planted));
        assert!(
            stale.len() == 1 && stale[0].contains(found),
            "{planted}: {stale:?}"
        );
    }
}

#[test]
fn the_attention_memory_table_states_what_device_bytes_gives() {
    let text = std::fs::read_to_string(repo().join("docs/attention.md")).unwrap();
    let (stale, rows) = stale_memory_cells(&text);
    assert!(stale.is_empty(), "docs/attention.md:\n{}", stale.join("\n"));
    assert_eq!(
        rows, 7,
        "docs/attention.md's memory table: five N and two memory sizes"
    );
}

#[test]
fn a_stale_number_in_the_attention_memory_table_is_found() {
    let table = "| N | naive (Q, K, V, O, S, P) | fused (Q, K, V, O, LSE) |\n|---|---|---|\n\
        | 4096 | 9.13 GB | 0.54 GB |\n| largest N in 80 GB (H100) | 12,372 | 609,161 |\n";
    assert_eq!(stale_memory_cells(table), (Vec::new(), 2));
    for (original, planted, found) in [
        ("9.13 GB", "9.31 GB", "Naive at N = 4096"),
        ("| 609,161 |", "| 609,162 |", "Fused in 80 GB"),
        ("80 GB (H100)", "94 GB (H100)", "Naive in 94 GB"),
    ] {
        let (stale, _) = stale_memory_cells(&table.replace(original, planted));
        assert!(
            !stale.is_empty() && stale[0].contains(found),
            "{planted}: {stale:?}"
        );
    }
}

#[test]
fn the_attention_traffic_tables_state_what_the_traffic_models_give() {
    let text = std::fs::read_to_string(repo().join("docs/attention.md")).unwrap();
    let (stale, read) = stale_attention_traffic(&text);
    assert!(stale.is_empty(), "docs/attention.md:\n{}", stale.join("\n"));
    // The naive table's two totals, the fused table's three rows of two.
    assert_eq!(read, 8, "docs/attention.md's traffic tables");
}

#[test]
fn a_stale_number_in_an_attention_traffic_table_is_found() {
    let table = "| tensor | size | moved | bytes |\n|---|---|---|---|\n\
        | **compulsory** | | | **17.72 GB** |\n\
        | | f32 | bf16 |\n|---|---|---|\n\
        | causal: re-reads up to each tile's diagonal | 8.46 GB | 2.08 GB |\n";
    assert_eq!(stale_attention_traffic(table), (Vec::new(), 3));
    for (original, planted) in [
        ("**17.72 GB**", "**17.27 GB**"),
        ("| 2.08 GB |", "| 2.08 MB |"),
    ] {
        let (stale, _) = stale_attention_traffic(&table.replace(original, planted));
        assert_eq!(stale.len(), 1, "{planted}: {stale:?}");
    }
}
