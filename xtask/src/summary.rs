//! `cargo xtask summarize`: the device bundle's last step. Each row of the benchmark runs beside
//! its vendor baseline at the same shape and element type (or why there is none), each case's
//! verdict under compute-sanitizer's tools, and the findings: a sanitizer report on a kernel the
//! emulator passes is a disagreement between the two, recorded in `results.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// compute-sanitizer's tools the bundle runs, most valuable first.
pub const SANITIZER_TOOLS: [&str; 3] = ["memcheck", "racecheck", "synccheck"];

#[derive(clap::Args)]
pub struct SummarizeArgs {
    /// A benchmark run's JSON (`cargo xtask run --json`); repeated for several stages.
    #[arg(long = "run")]
    runs: Vec<PathBuf>,
    /// The measurements of `baselines.py measure`.
    #[arg(long)]
    baselines: PathBuf,
    /// The folder holding `sanitizer-<tool>.json` (the run under the tool) and
    /// `sanitizer-<tool>.log` (the tool's report) for each tool, and `emulator.json`.
    #[arg(long)]
    results: PathBuf,
    /// Where to write the summary JSON.
    #[arg(long)]
    out: PathBuf,
    /// Fail if any row has no measured baseline (the bundle's check, against synthetic ones).
    #[arg(long)]
    require_baselines: bool,
}

pub fn run(args: &SummarizeArgs) -> Result<(), String> {
    let runs: Vec<(String, Option<Value>)> = args
        .runs
        .iter()
        .map(|p| (p.display().to_string(), load(p)))
        .collect();
    let baselines = load(&args.baselines);
    let rows: Vec<&Value> = runs
        .iter()
        .filter_map(|(_, r)| r.as_ref())
        .flat_map(|r| r["rows"].as_array().into_iter().flatten())
        .collect();
    let (summary, unmatched) = baseline_rows(&rows, baselines.as_ref());
    let emulator = load(&args.results.join("emulator.json"));
    let mut sanitizer = serde_json::Map::new();
    let mut findings = Vec::new();
    for tool in SANITIZER_TOOLS {
        let verdict = sanitizer_verdict(
            tool,
            load(&args.results.join(format!("sanitizer-{tool}.json"))).as_ref(),
            std::fs::read_to_string(args.results.join(format!("sanitizer-{tool}.log"))).ok(),
        );
        findings.extend(disagreements(tool, &verdict, emulator.as_ref()));
        sanitizer.insert(tool.to_string(), verdict);
    }
    print_summary(&summary, &sanitizer, &findings);
    let failures: Vec<&Value> = runs
        .iter()
        .filter_map(|(_, r)| r.as_ref())
        .flat_map(|r| r["failures"].as_array().into_iter().flatten())
        .collect();
    let missing: Vec<&String> = runs
        .iter()
        .filter(|(_, r)| r.is_none())
        .map(|(p, _)| p)
        .collect();
    let out = json!({
        "summary": summary,
        "failures": failures,
        "sanitizer": sanitizer,
        "findings": findings,
        "missing_runs": missing,
        "runs": runs.iter().map(|(_, r)| r).collect::<Vec<_>>(),
        "baselines": baselines,
    });
    std::fs::write(
        &args.out,
        serde_json::to_string_pretty(&out).expect("summary serialises"),
    )
    .map_err(|e| format!("cannot write {}: {e}", args.out.display()))?;
    println!("summary: {}", args.out.display());
    if args.require_baselines && (!unmatched.is_empty() || rows.is_empty()) {
        return Err(format!(
            "{} of {} rows have no measured baseline:\n  {}",
            unmatched.len(),
            rows.len(),
            unmatched.join("\n  ")
        ));
    }
    Ok(())
}

fn load(path: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

/// Each row with its baseline's time and the ratio baseline / ours (above 1: ours is faster),
/// and the rows left without one, with why.
fn baseline_rows(rows: &[&Value], baselines: Option<&Value>) -> (Vec<Value>, Vec<String>) {
    let measured = baselines.and_then(|b| b["baselines"].as_object());
    let skipped = baselines
        .and_then(|b| b["skipped"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| "no baselines file".to_string());
    let mut unmatched = Vec::new();
    let summary = rows
        .iter()
        .map(|row| {
            let seconds = row["roofline"]["seconds"].as_f64().unwrap_or(f64::NAN);
            let mut entry = json!({
                "kernel": row["kernel"],
                "shape": row["shape"],
                "measured": row["measured"],
                "check": row["check"],
                "seconds": seconds,
                "fraction_of_roofline": row["roofline"]["fraction_of_roofline"],
            });
            let baseline = match (row["baseline"].get("Ok"), measured) {
                (Some(request), Some(measured)) => {
                    let key = request["key"].as_str().unwrap_or_default();
                    match measured.get(key) {
                        Some(b) if b["seconds"].as_f64().is_some() => {
                            let theirs = b["seconds"].as_f64().unwrap();
                            Ok(json!({
                                "key": key,
                                "what": b["what"],
                                "seconds": theirs,
                                "ratio": theirs / seconds,
                                "synthetic": b["synthetic"],
                            }))
                        }
                        Some(b) => Err(format!(
                            "no baseline: `{key}` failed ({})",
                            b["error"].as_str().unwrap_or("no time")
                        )),
                        None => Err(format!("no baseline: `{key}` was not measured")),
                    }
                }
                (Some(request), None) => Err(format!(
                    "no baseline: `{}` not measured ({skipped})",
                    request["key"].as_str().unwrap_or_default()
                )),
                (None, _) => Err(row["baseline"]["Err"]
                    .as_str()
                    .unwrap_or("unmatched: the row names no baseline")
                    .to_string()),
            };
            match baseline {
                Ok(b) => entry["baseline"] = b,
                Err(why) => {
                    unmatched.push(format!(
                        "{} at {}: {why}",
                        row["kernel"].as_str().unwrap_or("?"),
                        row["shape"].as_str().unwrap_or("?")
                    ));
                    entry["no_baseline"] = Value::String(why);
                }
            }
            entry
        })
        .collect();
    (summary, unmatched)
}

/// One error a sanitizer reported: its first line, and the device functions it names.
#[derive(Debug, PartialEq)]
struct Report {
    message: String,
    functions: Vec<String>,
}

const PREFIX: &str = "=========";

/// The error blocks of a compute-sanitizer log: a block starts with an unindented line after the
/// `=========` prefix and goes on with the indented ones; `at NAME+0x...` names the device
/// function. The banner and the summary lines are not errors.
fn sanitizer_reports(log: &str) -> Vec<Report> {
    let mut reports: Vec<Report> = Vec::new();
    for line in log.lines() {
        let Some(rest) = line.strip_prefix(PREFIX) else {
            continue;
        };
        let indented = rest.starts_with("  ");
        let text = rest.trim();
        if text.is_empty()
            || text.starts_with("COMPUTE-SANITIZER")
            || text.contains("SUMMARY:")
            || (!indented && text.starts_with("Target application"))
        {
            continue;
        }
        if !indented {
            reports.push(Report {
                message: text.to_string(),
                functions: Vec::new(),
            });
        }
        if let Some(report) = reports.last_mut() {
            for (i, _) in text.match_indices("at ") {
                let name: String = text[i + 3..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let after = &text[i + 3 + name.len()..];
                if !name.is_empty()
                    && (after.starts_with("+0x") || after.starts_with('('))
                    && !report.functions.contains(&name)
                {
                    report.functions.push(name);
                }
            }
        }
    }
    reports
}

/// Whether the log reached the tool's final summary (a run stopped at its budget does not).
fn sanitizer_finished(log: &str) -> bool {
    log.lines()
        .any(|l| l.starts_with(PREFIX) && l.contains("ERROR SUMMARY:"))
}

/// The entry points a row or failure launched (`name<<<...>>>`).
fn launched(case: &Value) -> Vec<&str> {
    case["launches"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l.as_str()?.split("<<<").next())
        .collect()
}

/// Per case reached under `tool`: clean, or not with the first message naming one of its
/// kernels; and the reports that name no kernel of any case.
fn sanitizer_verdict(tool: &str, run: Option<&Value>, log: Option<String>) -> Value {
    let (Some(run), Some(log)) = (run, log) else {
        return json!({"status": format!("not run: no run or log of {tool} (stage skipped or tool missing: see stages.txt)")});
    };
    let reports = sanitizer_reports(&log);
    let cases: Vec<&Value> = ["rows", "failures"]
        .iter()
        .flat_map(|k| run[*k].as_array().into_iter().flatten())
        .collect();
    let mut attributed = vec![false; reports.len()];
    let verdicts: Vec<Value> = cases
        .iter()
        .map(|case| {
            let kernels = launched(case);
            let first = reports
                .iter()
                .enumerate()
                .find(|(_, r)| r.functions.iter().any(|f| kernels.contains(&f.as_str())));
            for (i, r) in reports.iter().enumerate() {
                if r.functions.iter().any(|f| kernels.contains(&f.as_str())) {
                    attributed[i] = true;
                }
            }
            let ran = case.get("error").is_none();
            json!({
                "kernel": case["kernel"],
                "ran": ran,
                "error": case.get("error"),
                "clean": first.is_none(),
                "first_message": first.map(|(_, r)| r.message.clone()),
            })
        })
        .collect();
    let unattributed: Vec<&str> = reports
        .iter()
        .zip(&attributed)
        .filter(|(_, a)| !**a)
        .map(|(r, _)| r.message.as_str())
        .collect();
    json!({
        "status": if sanitizer_finished(&log) { "finished" } else { "stopped before its summary (budget?): the cases listed are those reached" },
        "cases": verdicts,
        "unattributed": unattributed,
    })
}

/// A case the sanitizer reports on whose emulator row is correct: the emulator models the same
/// checks (bounds, shared-memory races, barriers), so one of the two is wrong.
fn disagreements(tool: &str, verdict: &Value, emulator: Option<&Value>) -> Vec<Value> {
    let emulator_ok: BTreeMap<&str, bool> = emulator
        .and_then(|e| e["rows"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|r| Some((r["kernel"].as_str()?, r["check"].get("Ok").is_some())))
        .collect();
    verdict["cases"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["clean"] == false)
        .map(|c| {
            let kernel = c["kernel"].as_str().unwrap_or("?");
            let emulator = match emulator_ok.get(kernel) {
                Some(true) => "the emulator runs it clean and correct: a disagreement",
                Some(false) => "the emulator reports it too",
                None => "no emulator row to compare",
            };
            json!({
                "tool": tool,
                "kernel": kernel,
                "message": c["first_message"],
                "emulator": emulator,
            })
        })
        .collect()
}

fn print_summary(rows: &[Value], sanitizer: &serde_json::Map<String, Value>, findings: &[Value]) {
    for r in rows {
        let how = if r["measured"] == true {
            "measured"
        } else {
            "MODELLED"
        };
        let status = if r["check"].get("Ok").is_some() {
            "ok"
        } else {
            "FAILED"
        };
        let baseline = match r.get("baseline") {
            Some(b) => format!(
                "{:.2}x {}{}",
                b["ratio"].as_f64().unwrap_or(f64::NAN),
                b["key"].as_str().unwrap_or("?"),
                if b["synthetic"] == true {
                    " (synthetic)"
                } else {
                    ""
                }
            ),
            None => r["no_baseline"].as_str().unwrap_or("?").to_string(),
        };
        println!(
            "{:<28} {:<26} {:>10.3} ms {how} {:>5.1}% roof  {status}  {baseline}",
            r["kernel"].as_str().unwrap_or("?"),
            r["shape"].as_str().unwrap_or("?"),
            r["seconds"].as_f64().unwrap_or(f64::NAN) * 1e3,
            100.0 * r["fraction_of_roofline"].as_f64().unwrap_or(f64::NAN),
        );
    }
    for (tool, v) in sanitizer {
        let cases = v["cases"].as_array().map_or(&[][..], Vec::as_slice);
        let dirty: Vec<String> = cases
            .iter()
            .filter(|c| c["clean"] == false)
            .map(|c| {
                format!(
                    "{}: {}",
                    c["kernel"].as_str().unwrap_or("?"),
                    c["first_message"].as_str().unwrap_or("?")
                )
            })
            .collect();
        println!(
            "compute-sanitizer {tool}: {}; {} cases, {} clean{}",
            v["status"].as_str().unwrap_or("?"),
            cases.len(),
            cases.len() - dirty.len(),
            dirty
                .iter()
                .map(|d| format!("\n  NOT CLEAN {d}"))
                .collect::<String>()
        );
    }
    for f in findings {
        println!(
            "FINDING ({}) {}: {} ({})",
            f["tool"].as_str().unwrap_or("?"),
            f["kernel"].as_str().unwrap_or("?"),
            f["message"].as_str().unwrap_or("?"),
            f["emulator"].as_str().unwrap_or("?")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A memcheck log in compute-sanitizer's layout, with one error in `transpose_naive` and one
    /// host-side error naming no kernel.
    const MEMCHECK: &str = "\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at transpose_naive+0x1a0
=========     by thread (31,0,0) in block (6,0,0)
=========     Address 0x7f00 is out of bounds
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to \"unspecified launch failure\" on CUDA API call to cuStreamSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: [0x2f] in libcuda.so.1
=========
========= ERROR SUMMARY: 2 errors
";

    fn run_with(kernels: &[&str]) -> Value {
        json!({"rows": kernels.iter().map(|k| json!({
            "kernel": k,
            "check": {"Ok": "exact"},
            "launches": [format!("{k}<<<(1, 1, 1), (32, 1, 1), 0 B dynamic shared>>>")],
        })).collect::<Vec<_>>(), "failures": []})
    }

    #[test]
    fn reads_sanitizer_errors_and_the_kernel_each_names() {
        let reports = sanitizer_reports(MEMCHECK);
        assert_eq!(reports.len(), 2, "{reports:?}");
        assert_eq!(
            reports[0].message,
            "Invalid __global__ write of size 4 bytes"
        );
        assert_eq!(reports[0].functions, ["transpose_naive"]);
        assert!(reports[1].functions.is_empty(), "{reports:?}");
        assert!(sanitizer_finished(MEMCHECK));
        assert!(!sanitizer_finished(&MEMCHECK[..200]));
    }

    #[test]
    fn a_sanitizer_error_on_a_kernel_the_emulator_passes_is_a_finding() {
        let run = run_with(&["transpose_naive", "transpose_shared"]);
        let verdict = sanitizer_verdict("memcheck", Some(&run), Some(MEMCHECK.to_string()));
        let cases = verdict["cases"].as_array().unwrap();
        assert_eq!(cases[0]["clean"], false);
        assert_eq!(
            cases[0]["first_message"],
            "Invalid __global__ write of size 4 bytes"
        );
        assert_eq!(cases[1]["clean"], true);
        assert_eq!(verdict["unattributed"].as_array().unwrap().len(), 1);
        let findings = disagreements("memcheck", &verdict, Some(&run));
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0]["kernel"], "transpose_naive");
        assert!(
            findings[0]["emulator"]
                .as_str()
                .unwrap()
                .contains("disagreement")
        );
        let missing = sanitizer_verdict("racecheck", Some(&run), None);
        assert!(missing["status"].as_str().unwrap().starts_with("not run"));
    }

    #[test]
    fn every_row_is_matched_or_listed_as_unmatched() {
        let request = |key: &str| json!({"Ok": {"key": key}});
        let rows = [
            json!({"kernel": "gemm_tiled_f32", "shape": "1024^3", "roofline": {"seconds": 2e-3},
                   "baseline": request("matmul f32 m=1024 n=1024 k=1024")}),
            json!({"kernel": "gemm_tiled_f32", "shape": "2048^3", "roofline": {"seconds": 1e-2},
                   "baseline": request("matmul f32 m=2048 n=2048 k=2048")}),
            json!({"kernel": "decode_gemv", "shape": "4096", "roofline": {"seconds": 1e-3},
                   "baseline": {"Err": "unmatched: no entry"}}),
        ];
        let baselines = json!({"baselines": {
            "matmul f32 m=1024 n=1024 k=1024": {"seconds": 1e-3, "what": "torch.matmul"},
            "matmul f32 m=4096 n=4096 k=4096": {"seconds": 1e-1, "what": "torch.matmul"},
        }});
        let refs: Vec<&Value> = rows.iter().collect();
        let (summary, unmatched) = baseline_rows(&refs, Some(&baselines));
        assert_eq!(summary[0]["baseline"]["ratio"], 0.5);
        // 2048^3 is not read against the 4096^3 measurement.
        assert!(summary[1].get("baseline").is_none());
        assert_eq!(unmatched.len(), 2, "{unmatched:?}");
        assert!(unmatched[0].contains("2048") && unmatched[1].contains("decode_gemv"));
        let (_, all_missing) = baseline_rows(&refs, Some(&json!({"skipped": "no PyTorch"})));
        assert!(all_missing[0].contains("no PyTorch"), "{all_missing:?}");
    }
}
