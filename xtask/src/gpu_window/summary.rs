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
    #[arg(long = "run", required = true)]
    runs: Vec<PathBuf>,
    /// A `--run` file that is not there is a stage that did not run (the summary says so),
    /// not an error: the device bundle's, whose stages may be skipped.
    #[arg(long)]
    allow_missing_runs: bool,
    /// The measurements of `baselines.py measure`.
    #[arg(long)]
    baselines: PathBuf,
    /// The folder holding `sanitizer-<tool>.json` (the run under the tool) and
    /// `sanitizer-<tool>.report` (the tool's own log) for each tool, and `emulator.json`.
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
    check_paths(args)?;
    let runs: Vec<(String, Option<Value>)> = args
        .runs
        .iter()
        .map(|p| {
            let run = load(p)?;
            match &run {
                None if !args.allow_missing_runs => {
                    return Err(format!(
                        "--run {}: no such file (give a report `cargo xtask run --json` wrote)",
                        p.display()
                    ));
                }
                Some(r) if !r["rows"].is_array() => {
                    return Err(format!(
                        "--run {}: not a run report (no list of \"rows\"): give a report `cargo xtask run --json` wrote",
                        p.display()
                    ));
                }
                _ => {}
            }
            Ok((p.display().to_string(), run))
        })
        .collect::<Result<_, String>>()?;
    let baselines = load(&args.baselines)?;
    if let Some(b) = &baselines
        && !b["baselines"].is_object()
    {
        return Err(format!(
            "--baselines {}: not a baselines file (no \"baselines\" object): give the file `baselines.py measure` wrote",
            args.baselines.display()
        ));
    }
    // A run that was stopped before its last case (`complete: false`, from `cargo xtask run`).
    let incomplete: Vec<Value> = runs
        .iter()
        .filter_map(|(p, r)| {
            let r = r.as_ref().filter(|r| r["complete"] == false)?;
            Some(json!({"run": p, "not_run": r["not_run"]}))
        })
        .collect();
    let rows: Vec<&Value> = runs
        .iter()
        .filter_map(|(_, r)| r.as_ref())
        .flat_map(|r| r["rows"].as_array().into_iter().flatten())
        .collect();
    let (summary, unmatched) = baseline_rows(&rows, baselines.as_ref());
    let emulator = load(&args.results.join("emulator.json"))?;
    let mut sanitizer = serde_json::Map::new();
    let mut findings = Vec::new();
    for tool in SANITIZER_TOOLS {
        let verdict = sanitizer_verdict(
            tool,
            load(&args.results.join(format!("sanitizer-{tool}.json")))?.as_ref(),
            std::fs::read_to_string(args.results.join(format!("sanitizer-{tool}.report"))).ok(),
        );
        findings.extend(disagreements(tool, &verdict, emulator.as_ref()));
        sanitizer.insert(tool.to_string(), verdict);
    }
    let profiler = profiler_comparison(&args.results)?;
    let ptx_predictions = load(&args.results.join("emulator-ptx.json"))?;
    let model = model_comparison(&rows, emulator.as_ref(), ptx_predictions.as_ref());
    let failures: Vec<&Value> = runs
        .iter()
        .filter_map(|(_, r)| r.as_ref())
        .flat_map(|r| r["failures"].as_array().into_iter().flatten())
        .collect();
    print_summary(&summary, &sanitizer, &findings);
    // The cases that could not run: a fault, a crash, a hang, a refused launch.
    for f in &failures {
        println!(
            "{:<28} FAILED: {} {}",
            f["kernel"].as_str().unwrap_or("?"),
            f["error"].as_str().unwrap_or("?"),
            f["launches"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    print_profiler(&profiler);
    print_model(&model);
    for run in &incomplete {
        let not_run: Vec<&str> = run["not_run"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        println!(
            "{}: INTERRUPTED before its end: {} case(s) not run: {}",
            run["run"].as_str().unwrap_or("?"),
            not_run.len(),
            not_run.join(", ")
        );
    }
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
        "profiler": profiler,
        "model": model,
        "missing_runs": missing,
        "incomplete_runs": incomplete,
        "runs": runs.iter().map(|(_, r)| r).collect::<Vec<_>>(),
        "baselines": baselines,
    });
    crate::atomic::write(
        &args.out,
        serde_json::to_string_pretty(&out).expect("summary serialises"),
    )?;
    println!("summary: {}", args.out.display());
    if args.require_baselines && rows.is_empty() {
        return Err(
            "no benchmark row to match with a baseline: the benchmark runs wrote none (see stages.txt for why)".into(),
        );
    }
    if args.require_baselines && !unmatched.is_empty() {
        return Err(format!(
            "{} of {} rows have no measured baseline:\n  {}",
            unmatched.len(),
            rows.len(),
            unmatched.join("\n  ")
        ));
    }
    Ok(())
}

/// Refuses a `--results` that is not a folder and an `--out` that would overwrite an input.
fn check_paths(args: &SummarizeArgs) -> Result<(), String> {
    if !args.results.is_dir() {
        return Err(format!(
            "--results {}: no such folder (the one holding the stages' reports)",
            args.results.display()
        ));
    }
    // Compared as the files they name: the parent folder resolved, the name as given.
    let resolved = |p: &Path| -> Option<PathBuf> {
        let parent = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        Some(parent.canonicalize().ok()?.join(p.file_name()?))
    };
    let out = resolved(&args.out);
    // The files the summary reads in --results are inputs too.
    if let (Some(o), Some(results)) = (&out, args.results.canonicalize().ok())
        && o.parent() == Some(results.as_path())
        && let Some(name) = o.file_name().and_then(|n| n.to_str())
        && (name == "emulator.json" || name.starts_with("sanitizer-"))
    {
        return Err(format!(
            "--out {} is {name} of --results {}, which the summary reads: the summary would overwrite its input; give --out another file",
            args.out.display(),
            args.results.display()
        ));
    }
    let inputs = args.runs.iter().map(|r| ("--run", r));
    for (flag, input) in inputs.chain([("--baselines", &args.baselines)]) {
        let same = match (&out, resolved(input)) {
            (Some(o), Some(i)) => *o == i || same_file(o, &i),
            _ => args.out == *input,
        };
        if same {
            return Err(format!(
                "--out {} is {flag} {}: the summary would overwrite its input; give --out another file",
                args.out.display(),
                input.display()
            ));
        }
    }
    Ok(())
}

/// Whether `a` and `b` are one file (a link, a second name).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// The JSON report at `path`; `None` when there is no file (its stage did not run: the summary
/// says so). A file that is there but cannot be read or parsed is an error: a truncated or
/// garbled report summarised as missing would hide what went wrong.
fn load(path: &Path) -> Result<Option<Value>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        format!(
            "{} is not a whole JSON report ({e}): truncated or garbled; run the stage that writes it again, or remove the file",
            path.display()
        )
    })
}

/// Each row with its baseline's time and the ratio baseline / ours (above 1: ours is faster),
/// and the rows left without one, with why.
fn baseline_rows(rows: &[&Value], baselines: Option<&Value>) -> (Vec<Value>, Vec<String>) {
    let measured = baselines.and_then(|b| b["baselines"].as_object());
    let skipped = match baselines {
        None => "no baselines file".to_string(),
        Some(b) => b["skipped"]
            .as_str()
            .unwrap_or("its stage did not reach it")
            .to_string(),
    };
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
                        None => Err(format!("no baseline: `{key}` not measured ({skipped})")),
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
                    // A kernel that declares no vendor baseline is reported as such, not failed.
                    if !why.starts_with(crate::baseline::NONE_DECLARED) {
                        unmatched.push(format!(
                            "{} at {}: {why}",
                            row["kernel"].as_str().unwrap_or("?"),
                            row["shape"].as_str().unwrap_or("?")
                        ));
                    }
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

/// The ncu metrics the bundle collects, by what they measure.
const NCU_METRICS: [(&str, &str); 8] = [
    (
        "global_load_sectors",
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    ),
    (
        "global_load_requests",
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    ),
    (
        "global_store_sectors",
        "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    ),
    (
        "global_store_requests",
        "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    ),
    (
        "shared_load_bank_conflicts",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    ),
    (
        "shared_store_bank_conflicts",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    ),
    ("dram_bytes_read", "dram__bytes_read.sum"),
    ("dram_bytes_written", "dram__bytes_write.sum"),
];

/// The fields of one line of a CSV whose fields are all quoted (ncu's `--csv`).
fn csv_fields(line: &str) -> Option<Vec<String>> {
    let inner = line.trim().strip_prefix('"')?.strip_suffix('"')?;
    Some(inner.split("\",\"").map(str::to_string).collect())
}

/// Per kernel, ncu's figures for its first profiled launch (from `ncu --csv`'s one metric a line).
fn ncu_figures(csv: &str) -> BTreeMap<String, BTreeMap<String, f64>> {
    let mut lines = csv.lines().filter_map(csv_fields);
    let Some(header) = lines.next() else {
        return BTreeMap::new();
    };
    let col = |name: &str| header.iter().position(|h| h == name);
    let (Some(id), Some(kernel), Some(metric), Some(value)) = (
        col("ID"),
        col("Kernel Name"),
        col("Metric Name"),
        col("Metric Value"),
    ) else {
        return BTreeMap::new();
    };
    let mut first_launch: BTreeMap<String, String> = BTreeMap::new();
    let mut figures: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    for fields in lines {
        let (Some(launch), Some(name), Some(m), Some(v)) = (
            fields.get(id),
            fields.get(kernel),
            fields.get(metric),
            fields.get(value),
        ) else {
            continue;
        };
        let name = name.split('(').next().unwrap_or(name).to_string();
        if first_launch
            .entry(name.clone())
            .or_insert_with(|| launch.clone())
            != launch
        {
            continue;
        }
        let Some((what, _)) = NCU_METRICS.iter().find(|(_, n)| n == m) else {
            continue;
        };
        if let Ok(v) = v.replace(',', "").parse::<f64>() {
            figures.entry(name).or_default().insert(what.to_string(), v);
        }
    }
    figures
}

/// The emulator profiler's figures for the same quantities, from `cargo xtask inspect --json`.
fn inspect_figures(inspect: &Value) -> BTreeMap<String, BTreeMap<String, f64>> {
    let mut figures = BTreeMap::new();
    for (kernel, sites) in inspect["profile"]["kernels"]
        .as_object()
        .into_iter()
        .flatten()
    {
        let sum = |space: &str, access: &str, field: &str| -> f64 {
            sites
                .as_array()
                .into_iter()
                .flatten()
                .filter(|s| s["space"] == space && s["access"] == access)
                .map(|s| s[field].as_f64().unwrap_or(0.0))
                .sum()
        };
        let conflicts = |access| {
            sum("shared", access, "wavefronts") - sum("shared", access, "ideal_wavefronts")
        };
        let f: BTreeMap<String, f64> = [
            ("global_load_sectors", sum("global", "read", "sectors")),
            ("global_load_requests", sum("global", "read", "requests")),
            ("global_store_sectors", sum("global", "write", "sectors")),
            ("global_store_requests", sum("global", "write", "requests")),
            ("shared_load_bank_conflicts", conflicts("read")),
            ("shared_store_bank_conflicts", conflicts("write")),
            (
                "requested_bytes_read",
                inspect["counters"]["global_read_bytes"]
                    .as_f64()
                    .unwrap_or(0.0),
            ),
            (
                "requested_bytes_written",
                inspect["counters"]["global_write_bytes"]
                    .as_f64()
                    .unwrap_or(0.0),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        figures.insert(kernel.clone(), f);
    }
    figures
}

/// ncu's counters beside the emulator's for each kernel profiled: the first check of the
/// emulator's profiler against a GPU. The emulator counts the bytes requested, ncu the DRAM
/// bytes after the caches.
fn profiler_comparison(results: &Path) -> Result<Value, String> {
    let Ok(csv) = std::fs::read_to_string(results.join("ncu.csv")) else {
        return Ok(
            json!({"status": "not run: no ncu.csv (stage skipped or ncu missing: see stages.txt)"}),
        );
    };
    let ncu = ncu_figures(&csv);
    let mut emulator = BTreeMap::new();
    for entry in std::fs::read_dir(results).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with("inspect-")
            && name.ends_with(".json")
            && let Some(v) = load(&entry.path())?
        {
            emulator.extend(inspect_figures(&v));
        }
    }
    let kernels: std::collections::BTreeSet<&String> = ncu.keys().chain(emulator.keys()).collect();
    let rows: Vec<Value> = kernels
        .into_iter()
        .map(|k| json!({"kernel": k, "ncu": ncu.get(k), "emulator": emulator.get(k)}))
        .collect();
    Ok(
        json!({"status": if ncu.is_empty() { "ncu reported no kernel" } else { "ran" }, "kernels": rows}),
    )
}

fn print_profiler(profiler: &Value) {
    println!(
        "profiler, Nsight Compute (ncu) beside the emulator's (cargo xtask inspect): {}",
        profiler["status"].as_str().unwrap_or("?")
    );
    for k in profiler["kernels"].as_array().into_iter().flatten() {
        let ratio =
            |side: &str, num: &str, den: &str| match (k[side][num].as_f64(), k[side][den].as_f64())
            {
                (Some(n), Some(d)) if d > 0.0 => format!("{:.2}", n / d),
                _ => "-".to_string(),
            };
        let figure = |side: &str, what: &str| {
            k[side][what]
                .as_f64()
                .map_or("-".to_string(), |v| format!("{v:.0}"))
        };
        println!(
            "  {:<24} sectors/request load {} (ncu {}), store {} (ncu {}); shared bank conflicts load {} (ncu {}), store {} (ncu {}); bytes read {} requested (ncu DRAM {}), written {} (ncu {})",
            k["kernel"].as_str().unwrap_or("?"),
            ratio("emulator", "global_load_sectors", "global_load_requests"),
            ratio("ncu", "global_load_sectors", "global_load_requests"),
            ratio("emulator", "global_store_sectors", "global_store_requests"),
            ratio("ncu", "global_store_sectors", "global_store_requests"),
            figure("emulator", "shared_load_bank_conflicts"),
            figure("ncu", "shared_load_bank_conflicts"),
            figure("emulator", "shared_store_bank_conflicts"),
            figure("ncu", "shared_store_bank_conflicts"),
            figure("emulator", "requested_bytes_read"),
            figure("ncu", "dram_bytes_read"),
            figure("emulator", "requested_bytes_written"),
            figure("ncu", "dram_bytes_written"),
        );
    }
}

/// Each measured row beside the performance model's prediction for the same kernel and shape
/// (the emulator stage's `predicted`, made on the GPU machine's CPUs before any measurement):
/// `error` is predicted over measured, minus one. Nothing here is calibrated: the window shows
/// where the model is wrong. `ptx`, where the results hold `emulator-ptx.json` (the same
/// predictions from the sm_90a PTX's counts, which add the issue limit: made on any machine,
/// run.sh and the README say how), gives each row's second prediction beside the first.
fn model_comparison(rows: &[&Value], emulator: Option<&Value>, ptx: Option<&Value>) -> Vec<Value> {
    rows.iter()
        .filter(|r| r["measured"] == true)
        .filter_map(|r| {
            let measured = r["roofline"]["seconds"].as_f64()?;
            let against = |p: &Value| {
                let seconds = p["seconds"].as_f64().unwrap_or(f64::NAN);
                json!({
                    "predicted_seconds": seconds, "limiter": p["limiter"],
                    "error": seconds / measured - 1.0,
                })
            };
            let mut row = prediction_for(emulator, r)
                .map_or_else(|| json!({"predicted_seconds": null}), against);
            row["kernel"] = r["kernel"].clone();
            row["shape"] = r["shape"].clone();
            row["measured_seconds"] = json!(measured);
            if let Some(p) = prediction_for(ptx, r) {
                row["ptx"] = against(p);
            }
            Some(row)
        })
        .collect()
}

/// The prediction in a run's JSON (`predictions`) for a measured row's kernel and shape. A GPU
/// row's shape is the case's (`4096^3`); the emulator's row names the same shape, sometimes with
/// a note (`4096^3 (no L2)`).
fn prediction_for<'p>(predictions: Option<&'p Value>, row: &Value) -> Option<&'p Value> {
    predictions?["rows"].as_array()?.iter().find(|p| {
        p["kernel"] == row["kernel"]
            && p["shape"]
                .as_str()
                .zip(row["shape"].as_str())
                .is_some_and(|(predicted, measured)| predicted.starts_with(measured))
    })?["predicted"]
        .get("Ok")
}

fn print_model(model: &[Value]) {
    if model.is_empty() {
        return;
    }
    println!("performance model (predicted before the window) against measured:");
    for m in model {
        let measured = m["measured_seconds"].as_f64().unwrap_or(f64::NAN);
        let ptx = m["ptx"]["predicted_seconds"]
            .as_f64()
            .map(|p| {
                format!(
                    "; from the PTX's counts {:.3} ms ({}): {:+.0}%",
                    p * 1e3,
                    m["ptx"]["limiter"].as_str().unwrap_or("?"),
                    100.0 * m["ptx"]["error"].as_f64().unwrap_or(f64::NAN)
                )
            })
            .unwrap_or_default();
        match m["predicted_seconds"].as_f64() {
            Some(p) => println!(
                "  {:<28} {:<26} predicted {:>10.3} ms ({}), measured {:>10.3} ms: {:+.0}%{ptx}",
                m["kernel"].as_str().unwrap_or("?"),
                m["shape"].as_str().unwrap_or("?"),
                p * 1e3,
                m["limiter"].as_str().unwrap_or("?"),
                measured * 1e3,
                100.0 * m["error"].as_f64().unwrap_or(f64::NAN)
            ),
            None => println!(
                "  {:<28} {:<26} not predicted (see the emulator stage's run.json)",
                m["kernel"].as_str().unwrap_or("?"),
                m["shape"].as_str().unwrap_or("?")
            ),
        }
    }
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

    /// A measured row finds the emulator stage's prediction at its kernel and shape, and the
    /// error is predicted over measured; a row without one says so.
    #[test]
    fn measured_rows_meet_their_predictions() {
        let measured = |k: &str, s: &str, t: f64| json!({"kernel": k, "shape": s, "measured": true, "roofline": {"seconds": t}});
        let rows = [
            measured("transpose_naive", "8192 x 8192 f32", 4e-4),
            measured("softmax_fused_f32", "8192 x 8192 f32", 2e-4),
        ];
        let emulator = json!({"rows": [
            {"kernel": "transpose_naive", "shape": "8192 x 8192 f32",
             "predicted": {"Ok": {"seconds": 2.5e-4, "limiter": "L2"}}},
            {"kernel": "transpose_naive", "shape": "200 x 300 f32",
             "predicted": {"Ok": {"seconds": 1.0, "limiter": "DRAM"}}},
        ]});
        let rows: Vec<&Value> = rows.iter().collect();
        let model = model_comparison(&rows, Some(&emulator), None);
        assert_eq!(model.len(), 2);
        assert_eq!(model[0]["limiter"], "L2");
        assert!((model[0]["error"].as_f64().unwrap() + 0.375).abs() < 1e-12);
        assert!(model[0]["ptx"].is_null());
        assert!(model[1]["predicted_seconds"].is_null());
        // The PTX's predictions, where they were made, beside the source emulator's.
        let ptx = json!({"rows": [
            {"kernel": "softmax_fused_f32", "shape": "8192 x 8192 f32",
             "predicted": {"Ok": {"seconds": 3e-4, "limiter": "issue"}}},
        ]});
        let both = model_comparison(&rows, Some(&emulator), Some(&ptx));
        assert_eq!(both[0]["limiter"], "L2");
        assert!(both[0]["ptx"].is_null());
        assert!(both[1]["predicted_seconds"].is_null());
        assert_eq!(both[1]["ptx"]["limiter"], "issue");
        assert!((both[1]["ptx"]["error"].as_f64().unwrap() - 0.5).abs() < 1e-12);
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
    fn reads_ncu_csv_beside_the_emulator_profile() {
        let csv = "==PROF== Connected to process 1\n\
\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\
\"0\",\"transpose_naive\",\"l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum\",\"sector\",\"1,920,000\"\n\
\"0\",\"transpose_naive\",\"dram__bytes_read.sum\",\"byte\",\"240000\"\n\
\"1\",\"transpose_naive\",\"dram__bytes_read.sum\",\"byte\",\"999\"\n";
        let ncu = ncu_figures(csv);
        assert_eq!(ncu["transpose_naive"]["global_store_sectors"], 1_920_000.0);
        // The first launch's figure, not a later one's.
        assert_eq!(ncu["transpose_naive"]["dram_bytes_read"], 240_000.0);
        let inspect = json!({"counters": {"global_read_bytes": 240000, "global_write_bytes": 240000},
        "profile": {"kernels": {"transpose_shared": [
            {"space": "global", "access": "read", "requests": 10, "sectors": 40},
            {"space": "shared", "access": "read", "requests": 10, "wavefronts": 320, "ideal_wavefronts": 10},
        ]}}});
        let emu = inspect_figures(&inspect);
        assert_eq!(emu["transpose_shared"]["global_load_sectors"], 40.0);
        assert_eq!(emu["transpose_shared"]["shared_load_bank_conflicts"], 310.0);
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
            // A kernel that declares no baseline: reported, not unmatched.
            json!({"kernel": "scaffold_warp", "shape": "64M elements", "roofline": {"seconds": 1e-3},
                   "baseline": {"Err": format!("{}: declares none", crate::baseline::NONE_DECLARED)}}),
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
        assert!(
            summary[3]["no_baseline"]
                .as_str()
                .unwrap()
                .starts_with("no vendor baseline")
        );
        let (_, all_missing) = baseline_rows(
            &refs,
            Some(&json!({"baselines": {}, "skipped": "no PyTorch"})),
        );
        assert!(all_missing[0].contains("no PyTorch"), "{all_missing:?}");
    }
}
