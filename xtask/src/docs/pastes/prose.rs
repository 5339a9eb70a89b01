//! Numbers the prose quotes from the run: a sentence that names a kernel of the run (in
//! backticks) and says it is *predicted* at a time must quote a time the run printed for one of
//! the kernels it names, as printed or rounded to fewer digits. The prediction moves whenever a
//! kernel or the model changes; a paste of the table is checked by its excerpt, and this is the
//! same check for the numbers a chapter copies into a sentence.
//!
//! A table row that names a kernel of the run is held to the same rule in its columns whose
//! header says "predicted".
//!
//! A sentence that quotes a figure from elsewhere (another device, a published measurement)
//! says so with `--device` or names the source, and is left alone: the rule applies to sentences
//! that name a run kernel, say "predicted" and name no other device.

use std::collections::BTreeMap;

/// A time as printed: its digits and its unit (`µs` or `ms`).
#[derive(Clone, Debug, PartialEq)]
struct Time {
    digits: String,
    unit: &'static str,
}

impl Time {
    /// Half a unit in the last digit written: how far the value may be from what it rounds.
    fn half_ulp(&self) -> f64 {
        let decimals = self.digits.split_once('.').map_or(0, |(_, d)| d.len());
        0.5 * 10f64.powi(-(decimals as i32))
    }

    /// Whether `self`, as quoted, may be `printed` rounded to fewer digits: the same unit, and
    /// both could round the same value (the printed one is itself rounded: 234.5 may be quoted
    /// as 235).
    fn quotes(&self, printed: &Time) -> bool {
        let (Ok(q), Ok(p)) = (self.digits.parse::<f64>(), printed.digits.parse::<f64>()) else {
            return false;
        };
        self.unit == printed.unit && (q - p).abs() <= self.half_ulp() + printed.half_ulp() + 1e-9
    }
}

/// Every time written `12.3 µs` or `4.5 ms` in `text`, in order.
fn times(text: &str) -> Vec<Time> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out = Vec::new();
    for pair in words.windows(2) {
        let number = pair[0].trim_start_matches(['(', '~']);
        let unit = pair[1].trim_end_matches(|c: char| !c.is_alphabetic());
        let unit = match unit {
            "µs" => "µs",
            "ms" => "ms",
            _ => continue,
        };
        if !number.is_empty() && number.chars().all(|c| c.is_ascii_digit() || c == '.') {
            out.push(Time {
                digits: number.to_string(),
                unit,
            });
        }
    }
    out
}

/// The times each kernel's row of the run's table prints (bound, predicted, measured).
fn printed_times(run_output: &str) -> BTreeMap<String, Vec<Time>> {
    let mut rows = BTreeMap::new();
    for line in run_output.lines() {
        let Some(kernel) = line.split_whitespace().next() else {
            continue;
        };
        let is_name = kernel.contains('_')
            && kernel
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        let found = times(line);
        if is_name && !found.is_empty() {
            rows.entry(kernel.to_string())
                .or_insert_with(Vec::new)
                .extend(found);
        }
    }
    rows
}

/// The sentences of a markdown text's prose: fenced blocks, tables and headings left out,
/// paragraphs joined, split after `.`, `;` or `:` followed by a space.
fn sentences(markdown: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut paragraph = String::new();
    let mut start = 0;
    let mut fenced = false;
    fn flush(paragraph: &mut String, start: usize, out: &mut Vec<(usize, String)>) {
        for s in paragraph
            .split_inclusive(". ")
            .flat_map(|s| s.split_inclusive("; "))
        {
            out.push((start, s.trim().to_string()));
        }
        paragraph.clear();
    }
    for (n, line) in markdown.lines().enumerate() {
        if line.starts_with("```") {
            fenced = !fenced;
            flush(&mut paragraph, start, &mut out);
            continue;
        }
        let prose =
            !fenced && !line.trim().is_empty() && !line.starts_with('|') && !line.starts_with('#');
        if !prose {
            flush(&mut paragraph, start, &mut out);
            continue;
        }
        if paragraph.is_empty() {
            start = n + 1;
        }
        paragraph.push_str(line.trim());
        paragraph.push(' ');
    }
    flush(&mut paragraph, start, &mut out);
    out
}

/// Every body row of every markdown table in `markdown` (fenced blocks left out), with its
/// table's header: (line, the header's cells, the row as written, the row's cells).
pub(super) fn table_rows(markdown: &str) -> Vec<(usize, Vec<String>, String, Vec<String>)> {
    let cells = |line: &str| -> Vec<String> {
        let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
        inner.split('|').map(|c| c.trim().to_string()).collect()
    };
    let mut out = Vec::new();
    let mut header = Vec::new();
    let mut fenced = false;
    let mut previous_was_table = false;
    for (n, line) in markdown.lines().enumerate() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        let table = !fenced && line.trim_start().starts_with('|');
        if table && !previous_was_table {
            header = cells(line);
        } else if table && !line.contains("---") {
            out.push((n + 1, header.clone(), line.to_string(), cells(line)));
        }
        previous_was_table = table;
    }
    out
}

/// The cells of a markdown table's `predicted` columns, each with its row's text: (line, the
/// row, the cell). A column is a `predicted` one when its header says so and names no other
/// device and no other backend (`PTX`: the PTX backend's predictions are another run's).
fn predicted_cells(markdown: &str) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    for (line, header, row, cells) in table_rows(markdown) {
        for (c, h) in header.iter().enumerate() {
            let predicted = h.to_lowercase().contains("predicted")
                && !OTHER_DEVICES.iter().any(|d| h.contains(d))
                && !h.contains("PTX");
            if let (true, Some(cell)) = (predicted, cells.get(c)) {
                out.push((line, row.clone(), cell.clone()));
            }
        }
    }
    out
}

/// Devices other than the run's (the run's table is modelled for the H100 SXM).
const OTHER_DEVICES: [&str; 5] = ["--device", "A100", "A6000", "B200", "H200"];

/// The times the run printed for the kernels `text` names in backticks, or `None` when the text
/// is not held to them: it names none of the run's kernels, or one of `kernels` the run left out
/// (`run --only`: its numbers may be that kernel's), or another device.
fn printed_for<'r>(
    text: &str,
    rows: &'r BTreeMap<String, Vec<Time>>,
    kernels: &[&str],
) -> Option<Vec<&'r Time>> {
    if OTHER_DEVICES.iter().any(|d| text.contains(d)) {
        return None;
    }
    let names: Vec<&str> = text.split('`').skip(1).step_by(2).collect();
    let left_out = names
        .iter()
        .any(|n| kernels.contains(n) && !rows.contains_key(*n));
    let printed: Vec<&Time> = names
        .iter()
        .filter_map(|n| rows.get(*n))
        .flatten()
        .collect();
    (!printed.is_empty() && !left_out).then_some(printed)
}

/// The times quoted in `text` that are none of `printed`.
fn unprinted(text: &str, printed: &[&Time]) -> Vec<Time> {
    times(text)
        .into_iter()
        .filter(|quoted| !printed.iter().any(|p| quoted.quotes(p)))
        .collect()
}

/// `Err` listing each sentence and table row of `markdown` (named `file`) that quotes a predicted
/// time for a kernel of `run_output` that the run did not print; `Ok` with how many were
/// checked. `kernels` are every kernel a run may print.
pub fn check(
    file: &str,
    markdown: &str,
    run_output: &str,
    kernels: &[&str],
) -> Result<usize, String> {
    let rows = printed_times(run_output);
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (line, sentence) in sentences(markdown) {
        if !sentence.contains("predicted") {
            continue;
        }
        let Some(printed) = printed_for(&sentence, &rows, kernels) else {
            continue;
        };
        checked += 1;
        for quoted in unprinted(&sentence, &printed) {
            wrong.push(format!(
                "{file}:{line}: {} {} is not a time the run printed for the kernels this sentence names:\n  {sentence}",
                quoted.digits, quoted.unit
            ));
        }
    }
    for (line, row, cell) in predicted_cells(markdown) {
        let Some(printed) = printed_for(&row, &rows, kernels) else {
            continue;
        };
        checked += 1;
        for quoted in unprinted(&cell, &printed) {
            wrong.push(format!(
                "{file}:{line}: {} {} in the table's predicted column is not a time the run printed for its kernel:\n  {row}",
                quoted.digits, quoted.unit
            ));
        }
    }
    if wrong.is_empty() {
        Ok(checked)
    } else {
        Err(wrong.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`check`] with the kernels of [`RUN`] and one it leaves out.
    fn check_all(file: &str, markdown: &str, run: &str) -> Result<usize, String> {
        let kernels = ["attention_naive_f32", "transpose_naive", "left_out_f32"];
        check(file, markdown, run, &kernels)
    }

    const RUN: &str = "\
kernel                       shape                                   bound         predicted limiter           check
attention_naive_f32          4x16x4096x128 f32                    8.285 ms compute 34.908 ms shared wavefronts ok
transpose_naive              8192 x 8192 f32                      160.3 µs memory   251.6 µs L2                ok
";

    #[test]
    fn a_quoted_prediction_must_be_what_the_run_printed_rounded_or_not() {
        let ok = "Prose. `attention_naive_f32` is predicted at 34.9 ms, its bound 8.285 ms.\n";
        // 251.6 may have been 251.55: 252 quotes it; 253 does not.
        let rounded = "`transpose_naive` is predicted at 252 µs.\n";
        assert_eq!(check_all("r.md", rounded, RUN), Ok(1));
        assert!(check_all("r.md", &rounded.replace("252", "253"), RUN).is_err());
        // A sentence that also names a kernel this run left out may be quoting that one.
        let partial = "`transpose_naive` at 251.6 µs, `left_out_f32` at 9 µs, both predicted.\n";
        assert_eq!(check_all("p.md", partial, RUN), Ok(0));
        assert_eq!(check_all("a.md", ok, RUN), Ok(1));
        // The planted drift: the model moved, the sentence did not.
        let stale = "Then `transpose_naive` is predicted at 252.6 µs.\n";
        let err = check_all("b.md", stale, RUN).unwrap_err();
        assert!(
            err.contains("b.md:1: 252.6 µs is not a time the run printed"),
            "{err}"
        );
        // The same digits in another unit are another time.
        let unit = "`transpose_naive` is predicted at 251.6 ms.\n";
        assert!(check_all("c.md", unit, RUN).is_err());
    }

    #[test]
    fn a_table_row_of_a_run_kernel_quotes_the_run_in_its_predicted_column() {
        let table = "\
| kernel | predicted | limiter |
|---|---|---|
| `transpose_naive` | 252 µs | L2 |
| `attention_naive_f32` | 34.91 ms | shared |
";
        assert_eq!(check_all("e.md", table, RUN), Ok(2));
        // The planted drift: a row left at an old prediction.
        let stale = table.replace("252 µs", "288 µs");
        let err = check_all("f.md", &stale, RUN).unwrap_err();
        assert!(
            err.contains("f.md:3: 288 µs in the table's predicted column"),
            "{err}"
        );
        // Another device's column, and a column that is not a prediction, are left alone.
        let other = "| kernel | bound | predicted (A6000) |\n|---|---|---|\n| `transpose_naive` | 1 µs | 2 µs |\n";
        assert_eq!(check_all("g.md", other, RUN), Ok(0));
    }

    #[test]
    fn sentences_about_other_devices_code_and_tables_are_left_alone() {
        let text = "\
`transpose_naive` is predicted at 99 µs on the A6000 (`--device a6000`).

```
`transpose_naive` is predicted at 1 µs
```

| `transpose_naive` | 2 µs |
";
        assert_eq!(check_all("d.md", text, RUN), Ok(0));
    }
}
