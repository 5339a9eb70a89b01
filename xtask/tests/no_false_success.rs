//! `cargo xtask` as a user runs it: a fault costs one row, nothing-ran is an error, a closed pipe
//! ends quietly. Each test runs the built binary on the emulator, on small cases.

mod common;

use std::process::{Command, Stdio};

use common::{scratch, xtask};

/// The run of five small cases with `KERNELS_INJECT_FAULT=fault` (no predictions): its report,
/// and its stderr.
fn run_with_fault(name: &str, fault: &str, extra: &[&str]) -> (serde_json::Value, String) {
    let dir = scratch(name);
    let json = dir.join("run.json");
    let out = xtask(
        &[
            "run",
            "--only",
            "copy_strided,transpose,softmax_online_f32",
            "--json",
            json.to_str().unwrap(),
            // The model's samples at the GPU shapes take seconds on a loaded machine, inside
            // the case's time: the short case timeouts here are for the faults alone.
            "--no-predict",
        ]
        .iter()
        .chain(extra)
        .copied()
        .collect::<Vec<_>>(),
        &[("KERNELS_INJECT_FAULT", fault)],
    );
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "a failed case fails the run");
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (report, stderr)
}

/// Every case but the faulting `transpose_shared` is measured and correct, in order, and the
/// one failure names `transpose_shared`.
fn assert_only_transpose_shared_lost(report: &serde_json::Value, stderr: &str) {
    let rows: Vec<(&str, bool)> = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["kernel"].as_str().unwrap(),
                r["check"].get("Ok").is_some(),
            )
        })
        .collect();
    let expected_rows = [
        "copy_strided",
        "transpose_naive",
        "transpose_padded",
        "softmax_online_f32",
    ];
    assert_eq!(
        rows,
        expected_rows.map(|k| (k, true)).to_vec(),
        "every case but the faulting one is measured and correct; stderr:\n{stderr}"
    );
    let failures = report["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["kernel"], "transpose_shared");
    assert!(stderr.contains("transpose_shared: FAILED"), "{stderr}");
}

/// A sticky fault injected into the middle of a run: the faulting case is one failure naming
/// its kernel and launch configuration, and every later case is still measured and correct
/// (in one process the injected fault fails every later launch, as CUDA's do).
#[test]
fn a_fault_costs_only_its_own_row() {
    let (report, stderr) = run_with_fault("fault", "transpose_shared", &[]);
    assert_only_transpose_shared_lost(&report, &stderr);
    let failure = &report["failures"][0];
    assert!(
        failure["error"]
            .as_str()
            .unwrap()
            .contains("CUDA_ERROR_ILLEGAL_ADDRESS"),
        "{failure}"
    );
    let launches = failure["launches"].as_array().unwrap();
    assert!(
        launches.len() == 1
            && launches[0]
                .as_str()
                .unwrap()
                .starts_with("transpose_shared<<<("),
        "{launches:?}"
    );
}

/// A case that hangs: stopped at the case timeout, reported, and the run goes on.
#[test]
fn a_hang_costs_only_its_own_row() {
    let (report, stderr) =
        run_with_fault("hang", "hang:transpose_shared", &["--case-timeout", "2"]);
    assert_only_transpose_shared_lost(&report, &stderr);
    let error = report["failures"][0]["error"].as_str().unwrap();
    assert!(error.contains("no result within 2 s"), "{error}");
}

/// A case whose process crashes (aborts) mid-run: the case is one failure saying so, and the
/// later cases run in a fresh process.
#[test]
fn a_crash_costs_only_its_own_row() {
    let (report, stderr) = run_with_fault("crash", "abort:transpose_shared", &[]);
    assert_only_transpose_shared_lost(&report, &stderr);
    let error = report["failures"][0]["error"].as_str().unwrap();
    assert!(error.contains("ended without a result"), "{error}");
}

#[test]
fn an_empty_selection_is_an_error_naming_the_kernels() {
    let dir = scratch("empty");
    let json = dir.join("run.json");
    let out = xtask(
        &[
            "run",
            "--only",
            "nosuchkernel",
            "--json",
            json.to_str().unwrap(),
        ],
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("nosuchkernel") && stderr.contains("copy_words, vector_add_f32"),
        "{stderr}"
    );
    assert!(!json.exists(), "no report is written for nothing");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The reader is gone before the first line is written: every write fails with EPIPE.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["roofline", "gpus"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.is_empty(),
        "nothing on stderr ({:?}): {stderr}",
        out.status
    );
}

/// The bundle's entry script, in check mode, with a budget that leaves every stage skipped: the
/// check must fail, not report success for a run in which nothing ran.
#[test]
fn a_bundle_check_that_skipped_stages_fails() {
    let dir = common::bundle("bundle");
    let out = Command::new("bash")
        .arg(dir.join("run.sh"))
        .args(["--check", "--budget", "1", "--out"])
        .arg(dir.join("results"))
        .env("KERNELS_BACKEND", "emulator")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("correctness: skipped, budget spent") && stderr.contains("check FAILED"),
        "{stdout}\n{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
