//! What a roofline command prints: sections of named values, rendered as aligned plain-text
//! tables or as JSON with the same fields.
//!
//! A value keeps its number in SI base units (bytes, FLOPs, seconds) for JSON and knows how to
//! print itself with an SI prefix for the table, so the two outputs cannot drift apart.

use std::borrow::Cow;

use serde_json::{Map, Value as Json};

/// One number (or word) with its unit.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A count: printed with thousands separators.
    Count(u64),
    /// Bytes: SI prefix, plus the binary size when it is a whole number of KiB, MiB or GiB.
    Bytes(f64),
    /// Bytes per second.
    ByteRate(f64),
    /// Floating-point operations.
    Flops(f64),
    /// FLOP per second.
    FlopRate(f64),
    /// Exponentials (special-function unit operations).
    Exps(f64),
    /// Exponentials per second.
    ExpRate(f64),
    /// FLOPs per HBM byte.
    Intensity(f64),
    /// Seconds, printed in ns, µs, ms, s, min, h or days.
    Seconds(f64),
    /// Clock frequency, Hz.
    Hertz(f64),
    /// A plain number with this many decimals.
    Number(f64, usize),
    /// A ratio, printed `33.0×` (or `1/7.4` below one).
    Ratio(f64),
    /// A fraction, printed as a percentage.
    Percent(f64),
    /// A word or phrase.
    Text(String),
    /// Not applicable or not published: `—` in tables, `null` in JSON.
    None,
}

/// One named value: `key` is the JSON field, `label` the table header.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub key: &'static str,
    pub label: Cow<'static, str>,
    pub value: Value,
}

/// Shorthand for a [`Field`].
pub fn field(key: &'static str, label: impl Into<Cow<'static, str>>, value: Value) -> Field {
    Field {
        key,
        label: label.into(),
        value,
    }
}

/// A byte count as a [`Value`].
pub fn bytes(n: u64) -> Value {
    Value::Bytes(n as f64)
}

/// A FLOP count as a [`Value`].
pub fn flops(n: u64) -> Value {
    Value::Flops(n as f64)
}

/// How a section prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// One record, one `label  value` line per field; JSON: an object.
    List,
    /// Records as rows under a header of labels; JSON: an array of objects.
    Table,
    /// Records as columns headed by their first field, one line per other field (a spec
    /// sheet); JSON: an array of objects.
    Columns,
}

/// A titled group of records with the same fields.
#[derive(Clone, Debug, PartialEq)]
pub struct Section {
    pub key: &'static str,
    pub title: String,
    pub layout: Layout,
    pub rows: Vec<Vec<Field>>,
}

impl Section {
    /// A single record printed as a list.
    pub fn list(key: &'static str, title: impl Into<String>, fields: Vec<Field>) -> Self {
        Self {
            key,
            title: title.into(),
            layout: Layout::List,
            rows: vec![fields],
        }
    }

    /// Records printed as a table.
    pub fn table(key: &'static str, title: impl Into<String>, rows: Vec<Vec<Field>>) -> Self {
        Self {
            key,
            title: title.into(),
            layout: Layout::Table,
            rows,
        }
    }

    /// Records printed side by side as columns.
    pub fn columns(key: &'static str, title: impl Into<String>, rows: Vec<Vec<Field>>) -> Self {
        Self {
            key,
            title: title.into(),
            layout: Layout::Columns,
            rows,
        }
    }
}

/// Everything one command prints.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The subcommand, e.g. `matmul`.
    pub command: &'static str,
    /// One line saying what was modelled.
    pub headline: String,
    pub sections: Vec<Section>,
    /// Assumptions and caveats, printed last.
    pub notes: Vec<String>,
}

/// Every figure is computed from vendor datasheet numbers, never measured; say so on each report.
pub const PROVENANCE: &str = "modelled from vendor figures in perf/src/specs.rs, not measured";

impl Report {
    /// The aligned plain-text rendering.
    pub fn to_text(&self) -> String {
        let mut out = format!("{}\n({PROVENANCE})\n", self.headline);
        for section in &self.sections {
            out.push('\n');
            out.push_str(&section.title);
            out.push('\n');
            match section.layout {
                Layout::List => {
                    for row in &section.rows {
                        let width = row.iter().map(|f| chars(&f.label)).max().unwrap_or(0);
                        for f in row {
                            let pad = width - chars(&f.label);
                            out.push_str(&format!(
                                "  {}{}  {}\n",
                                f.label,
                                " ".repeat(pad),
                                f.value.text()
                            ));
                        }
                    }
                }
                Layout::Table => out.push_str(&table_text(&section.rows)),
                Layout::Columns => out.push_str(&table_text(&transpose(&section.rows))),
            }
        }
        if !self.notes.is_empty() {
            out.push('\n');
            for note in &self.notes {
                out.push_str(&wrap(&format!("note: {note}"), NOTE_WIDTH, "      "));
            }
        }
        out
    }

    /// The JSON rendering: the same fields, numbers in SI base units.
    pub fn to_json(&self) -> Json {
        let mut top = Map::new();
        top.insert("command".into(), Json::from(self.command));
        top.insert("headline".into(), Json::from(self.headline.clone()));
        top.insert("provenance".into(), Json::from(PROVENANCE));
        for section in &self.sections {
            let records: Vec<Json> = section.rows.iter().map(|r| record_json(r)).collect();
            let value = match section.layout {
                Layout::List => records.into_iter().next().unwrap_or(Json::Null),
                Layout::Table | Layout::Columns => Json::Array(records),
            };
            top.insert(section.key.into(), value);
        }
        top.insert("notes".into(), Json::from(self.notes.clone()));
        Json::Object(top)
    }
}

/// Notes wrap at this many characters so that pasted output stays readable.
const NOTE_WIDTH: usize = 96;

/// `text` broken at spaces into lines of at most `width` characters (a longer word stays whole),
/// continuation lines starting with `indent`.
fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && chars(&line) + 1 + chars(word) > width {
            out.push_str(&line);
            out.push('\n');
            line = indent.to_string();
        } else if !line.is_empty() && line != indent {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

fn record_json(row: &[Field]) -> Json {
    Json::Object(
        row.iter()
            .map(|f| (f.key.to_string(), f.value.json()))
            .collect(),
    )
}

/// Records as columns: the first field of each record heads its column, and each other field
/// becomes a row labelled with its label.
fn transpose(rows: &[Vec<Field>]) -> Vec<Vec<Field>> {
    let Some(first) = rows.first() else {
        return Vec::new();
    };
    (1..first.len())
        .map(|i| {
            let name = field("quantity", "", Value::Text(first[i].label.to_string()));
            let cells = rows
                .iter()
                .map(|r| field(r[i].key, r[0].value.text(), r[i].value.clone()));
            std::iter::once(name).chain(cells).collect()
        })
        .collect()
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Columns padded to their widest cell: text left-aligned, numbers right-aligned.
fn table_text(rows: &[Vec<Field>]) -> String {
    let Some(first) = rows.first() else {
        return String::new();
    };
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|f| f.value.text()).collect())
        .collect();
    let widths: Vec<usize> = (0..first.len())
        .map(|c| {
            cells
                .iter()
                .map(|r| chars(&r[c]))
                .chain([chars(&first[c].label)])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let left = |c: usize| matches!(first[c].value, Value::Text(_));
    let line = |texts: Vec<&str>| {
        let padded: Vec<String> = texts
            .iter()
            .enumerate()
            .map(|(c, t)| {
                let pad = " ".repeat(widths[c] - chars(t));
                if left(c) {
                    format!("{t}{pad}")
                } else {
                    format!("{pad}{t}")
                }
            })
            .collect();
        format!("  {}\n", padded.join("  ").trim_end())
    };
    let mut out = line(first.iter().map(|f| f.label.as_ref()).collect());
    let rules: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    out.push_str(&line(rules.iter().map(String::as_str).collect()));
    for row in &cells {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

impl Value {
    /// The table text, with unit.
    pub fn text(&self) -> String {
        match self {
            Value::Count(n) => thousands(*n),
            Value::Bytes(b) => bytes_text(*b),
            Value::ByteRate(r) => si(*r, "B/s"),
            Value::Flops(f) => si(*f, "FLOP"),
            Value::FlopRate(f) => si(*f, "FLOP/s"),
            Value::Exps(e) => si(*e, "exp"),
            Value::ExpRate(e) => si(*e, "exp/s"),
            Value::Intensity(i) if *i >= 0.95 => format!("{i:.1} FLOP/B"),
            Value::Intensity(i) => format!("{i:.3} FLOP/B"),
            Value::Seconds(s) => seconds_text(*s),
            Value::Hertz(h) => si(*h, "Hz"),
            Value::Number(x, decimals) => format!("{x:.decimals$}"),
            Value::Ratio(r) => ratio_text(*r),
            Value::Percent(p) => format!("{:.1}%", p * 100.0),
            Value::Text(t) => t.clone(),
            Value::None => "—".to_string(),
        }
    }

    /// The JSON value: the bare number in SI base units (integers where exact).
    pub fn json(&self) -> Json {
        match self {
            Value::Count(n) => Json::from(*n),
            Value::Text(t) => Json::from(t.clone()),
            Value::None => Json::Null,
            Value::Bytes(x)
            | Value::ByteRate(x)
            | Value::Flops(x)
            | Value::FlopRate(x)
            | Value::Exps(x)
            | Value::ExpRate(x)
            | Value::Intensity(x)
            | Value::Seconds(x)
            | Value::Hertz(x)
            | Value::Number(x, _)
            | Value::Ratio(x)
            | Value::Percent(x) => number_json(*x),
        }
    }
}

fn number_json(x: f64) -> Json {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        Json::from(x as i64)
    } else {
        serde_json::Number::from_f64(x).map_or(Json::Null, Json::Number)
    }
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A value with an SI prefix: one decimal from 10 up, two below, so there are always three
/// significant figures (`7.70 T`, `41.3 µ`, `500.8 µ`).
pub fn si(value: f64, unit: &str) -> String {
    const UP: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
    if value == 0.0 || !value.is_finite() {
        return format!("{value} {unit}");
    }
    let mut scaled = value;
    let mut prefix = 0;
    while scaled.abs() >= 999.95 {
        if prefix + 1 == UP.len() {
            return format!("{value:.2e} {unit}");
        }
        scaled /= 1000.0;
        prefix += 1;
    }
    let decimals = if scaled.abs() >= 9.995 { 1 } else { 2 };
    format!("{scaled:.decimals$} {}{unit}", UP[prefix])
}

/// Bytes in SI, with the binary size alongside when the count is a whole number (below 1024) of
/// KiB, MiB or GiB: `131.1 kB = 128 KiB`, because vendors and the teaching material quote both.
pub fn bytes_text(bytes: f64) -> String {
    let decimal = si(bytes, "B");
    for (unit, size) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        let whole = bytes.fract() == 0.0 && bytes >= size as f64 && bytes < (1u64 << 62) as f64;
        if whole && (bytes as u64).is_multiple_of(size) && (bytes as u64) / size < 1024 {
            return format!("{decimal} = {} {unit}", bytes as u64 / size);
        }
    }
    decimal
}

/// Seconds in the unit that reads best: `0.95 µs`, `41.3 µs`, `7.78 ms`, `2.28 min`, `69.5 days`.
pub fn seconds_text(s: f64) -> String {
    const MINUTE: f64 = 60.0;
    const HOUR: f64 = 3600.0;
    const DAY: f64 = 86400.0;
    let (scaled, unit) = if s >= DAY {
        (s / DAY, "days")
    } else if s >= HOUR {
        (s / HOUR, "h")
    } else if s >= MINUTE {
        (s / MINUTE, "min")
    } else if s >= 1.0 {
        (s, "s")
    } else if s >= 1e-3 {
        (s * 1e3, "ms")
    } else if s >= 1e-8 || s == 0.0 {
        (s * 1e6, "µs")
    } else {
        (s * 1e9, "ns")
    };
    let decimals = if scaled >= 9.995 { 1 } else { 2 };
    format!("{scaled:.decimals$} {unit}")
}

/// `33.0×` from 1 up, `0.95×` down to a half, `1/7.4` below that (a seventh), `250,000×`
/// from 10,000 up.
pub fn ratio_text(r: f64) -> String {
    if !r.is_finite() {
        "new".to_string()
    } else if r >= 10_000.0 {
        format!("{}×", thousands(r.round() as u64))
    } else if r >= 1.0 {
        format!("{r:.1}×")
    } else if r >= 0.5 {
        format!("{r:.2}×")
    } else if r > 0.0 {
        format!("1/{:.1}", 1.0 / r)
    } else {
        "0×".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn si_keeps_three_significant_figures() {
        assert_eq!(si(7.696e12, "FLOP"), "7.70 TFLOP");
        assert_eq!(si(469_909_504.0, "B"), "469.9 MB");
        assert_eq!(si(32.768e9, "B"), "32.8 GB");
        assert_eq!(si(3.35e12, "B/s"), "3.35 TB/s");
        assert_eq!(si(999.96e9, "B"), "1.00 TB");
        assert_eq!(si(12.0, "B"), "12.0 B");
        assert_eq!(si(3.8e25, "FLOP"), "3.80e25 FLOP");
    }

    #[test]
    fn bytes_show_the_binary_size_only_when_whole() {
        assert_eq!(bytes_text(131_072.0), "131.1 kB = 128 KiB");
        assert_eq!(bytes_text(4_194_304.0), "4.19 MB = 4 MiB");
        assert_eq!(bytes_text(2_147_483_648.0), "2.15 GB = 2 GiB");
        assert_eq!(bytes_text(1_677_721_600.0), "1.68 GB");
        assert_eq!(bytes_text(100.0), "100.0 B");
    }

    #[test]
    fn times_pick_a_readable_unit() {
        assert_eq!(seconds_text(140.27e-6), "140.3 µs");
        assert_eq!(seconds_text(0.94997e-6), "0.95 µs");
        assert_eq!(seconds_text(7.7822e-3), "7.78 ms");
        assert_eq!(seconds_text(136.8), "2.28 min");
        assert_eq!(seconds_text(6.0e6), "69.4 days");
    }

    #[test]
    fn notes_wrap_at_spaces() {
        assert_eq!(wrap("aa bb cc", 5, "  "), "aa bb\n  cc\n");
        assert_eq!(wrap("short", 80, "  "), "short\n");
    }

    #[test]
    fn ratios_read_as_multiples_or_fractions() {
        assert_eq!(ratio_text(33.0), "33.0×");
        assert_eq!(ratio_text(450.0 / 3350.0), "1/7.4");
        assert_eq!(ratio_text(281.25 / 295.2), "0.95×");
        assert_eq!(ratio_text(250_000.0), "250,000×");
        assert_eq!(ratio_text(f64::INFINITY), "new");
        assert_eq!(thousands(131_072), "131,072");
        assert_eq!(thousands(7), "7");
    }

    #[test]
    fn table_columns_align_and_json_has_the_same_fields() {
        let report = Report {
            command: "t",
            headline: "h".into(),
            sections: vec![Section::table(
                "rows",
                "title",
                vec![
                    vec![
                        field("gpu", "GPU", Value::Text("H100 SXM".into())),
                        field("bytes", "bytes", Value::Bytes(12.0)),
                    ],
                    vec![
                        field("gpu", "GPU", Value::Text("B200".into())),
                        field("bytes", "bytes", Value::Bytes(1.5e9)),
                    ],
                ],
            )],
            notes: vec!["n".into()],
        };
        let text = report.to_text();
        assert!(text.contains("  GPU         bytes\n"), "{text}");
        assert!(text.contains("  H100 SXM   12.0 B\n"), "{text}");
        assert!(text.contains("  B200      1.50 GB\n"), "{text}");
        assert!(text.ends_with("note: n\n"));
        let json = report.to_json();
        assert_eq!(json["rows"][1]["bytes"], 1_500_000_000);
        assert_eq!(json["rows"][0]["gpu"], "H100 SXM");
    }
}
