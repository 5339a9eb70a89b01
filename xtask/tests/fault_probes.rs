//! Issue 25's fault probes of the commands, one test each, typed as a new user would: a bad
//! setting or flag is refused with one error that names it and what it takes (no panic, no
//! run), and a selection that runs nothing fails saying why. Every one of these
//! panicked, ran everything, or exited 0 on the code before it. (The probes of the runtime and
//! the emulator are `tests/tests/fault_probes.rs`.)

mod common;

use common::xtask;

/// `cargo xtask <args>` with `envs` must fail, without a panic (exit status 1, or 2 for a flag
/// clap refuses), saying each of `expected`.
#[track_caller]
fn refused(args: &[&str], envs: &[(&str, &str)], expected: &[&str]) {
    let out = xtask(args, envs);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(1 | 2)),
        "{args:?} {envs:?}: {:?}: {stderr}",
        out.status
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    for e in expected {
        assert!(
            stderr.contains(e),
            "{args:?} {envs:?}: no {e:?} in: {stderr}"
        );
    }
}

/// A run that would be quick if it started: one small kernel.
const ONE: [&str; 3] = ["run", "--only", "vector_add_f32"];

#[test]
fn a_watchdog_that_is_not_a_number_is_refused() {
    refused(
        &ONE,
        &[("KERNELS_EMU_WATCHDOG_S", "abc")],
        &["KERNELS_EMU_WATCHDOG_S=abc: expected a whole number from 0 to 86400"],
    );
}

#[test]
fn a_negative_stack_is_refused() {
    refused(
        &ONE,
        &[("KERNELS_EMU_STACK_KIB", "-1")],
        &["KERNELS_EMU_STACK_KIB=-1: expected a whole number from 16 to 65536"],
    );
}

#[test]
fn a_stack_of_zero_is_refused() {
    refused(
        &ONE,
        &[("KERNELS_EMU_STACK_KIB", "0")],
        &["KERNELS_EMU_STACK_KIB=0: expected a whole number from 16"],
    );
}

#[test]
fn a_race_check_that_is_neither_on_nor_off_is_refused() {
    refused(
        &ONE,
        &[("KERNELS_EMU_GLOBAL_RACES", "maybe")],
        &["KERNELS_EMU_GLOBAL_RACES=maybe: expected on or off"],
    );
}

#[test]
fn a_ptx_file_on_the_source_emulator_is_refused() {
    refused(
        &ONE,
        &[("KERNELS_PTX", "my.ptx")],
        &["KERNELS_PTX=my.ptx", "set KERNELS_BACKEND=ptx"],
    );
}

#[test]
fn a_fault_injected_into_no_kernel_is_refused() {
    refused(
        &ONE,
        &[("KERNELS_INJECT_FAULT", "hang:nosuchkernel")],
        &["KERNELS_INJECT_FAULT=hang:nosuchkernel: no kernel is named `nosuchkernel`"],
    );
}

#[test]
fn an_empty_only_is_refused_not_taken_for_everything() {
    refused(
        &["run", "--only", ""],
        &[],
        &["--only \"\": an empty name matches every kernel"],
    );
}

#[test]
fn a_case_timeout_of_zero_is_refused() {
    refused(
        &["run", "--only", "vector_add_f32", "--case-timeout", "0"],
        &[],
        &["--case-timeout", "0 is not in 1.."],
    );
}

#[test]
fn a_skip_that_leaves_nothing_says_so_without_an_empty_only() {
    // Every kernel's name has an underscore.
    let out = xtask(&["run", "--skip", "_"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--skip _ leaves no kernel") && !stderr.contains("--only"),
        "{stderr}"
    );
}

#[test]
fn an_only_of_kernels_the_backend_cannot_run_names_them_and_why() {
    refused(
        &["run", "--only", "wgmma"],
        &[("KERNELS_BACKEND", "ptx"), ("KERNELS_PTX_ARCH", "sm_80")],
        &["selects", "gemm_wgmma_bf16", "need sm_90a"],
    );
}

#[test]
fn emu_speed_of_no_kernel_fails() {
    refused(
        &["emu-speed", "--only", "nosuch"],
        &[],
        &["--only nosuch names no kernel of the realistic set"],
    );
}

#[test]
fn a_crossover_too_large_for_64_bits_is_an_error_not_never() {
    let out = xtask(
        &[
            "roofline",
            "crossover",
            "--k",
            "4294967296",
            "--n",
            "4294967296",
        ],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(!stdout.contains("never"), "{stdout}");
    assert!(stderr.contains("overflows"), "{stderr}");
}

#[test]
fn summarize_refuses_a_truncated_run_report() {
    let dir = common::scratch("truncated");
    let run = dir.join("run.json");
    std::fs::write(&run, "{\"backend\": \"x\", \"rows\": [").unwrap();
    let out = dir.join("results.json");
    refused(
        &[
            "summarize",
            "--run",
            run.to_str().unwrap(),
            "--baselines",
            dir.join("baselines.json").to_str().unwrap(),
            "--results",
            dir.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
        &["run.json is not a whole JSON report", "truncated"],
    );
    assert!(!out.exists(), "no summary of a broken input");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run killed while a case hangs: its report keeps the finished rows and says what it did not
/// run (it said nothing of the sort).
#[test]
fn a_killed_run_leaves_a_whole_report_that_says_it_is_incomplete() {
    let dir = common::scratch("killed");
    let json = dir.join("run.json");
    let mut run = std::process::Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["run", "--only", "copy_strided,transpose_shared", "--json"])
        .arg(&json)
        .env("KERNELS_BACKEND", "emulator")
        .env("KERNELS_INJECT_FAULT", "hang:transpose_shared")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let read = || -> Option<serde_json::Value> {
        serde_json::from_str(&std::fs::read_to_string(&json).ok()?).ok()
    };
    let start = std::time::Instant::now();
    // Until every copy_strided row is in: transpose_shared hangs (for its 300 s timeout).
    let left = serde_json::json!(["transpose_shared"]);
    while read().is_none_or(|r| r["not_run"] != left) {
        assert!(start.elapsed().as_secs() < 120, "no row after 2 minutes");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    run.kill().unwrap();
    run.wait().unwrap();
    let report = read().expect("a whole report");
    assert_eq!(report["complete"], false, "{report}");
    assert_eq!(report["not_run"], left, "{report}");
    assert_eq!(report["rows"][0]["kernel"], "copy_strided", "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}
