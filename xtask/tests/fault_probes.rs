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

/// `bash run.sh <args>` in the bundle at `dir`, on the emulator where it runs anything.
fn run_sh(dir: &std::path::Path, args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(dir.join("run.sh"))
        .args(args)
        .env("KERNELS_BACKEND", "emulator");
    cmd
}

#[test]
fn the_bundle_refuses_a_budget_that_is_not_a_number_of_seconds_and_an_unwritable_out() {
    let dir = common::bundle("bundle-args");
    let results = dir.join("results");
    let results = results.to_str().unwrap();
    for budget in ["abc", "-10", "0", ""] {
        let out = run_sh(&dir, &["--budget", budget, "--out", results])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--budget {budget:?}: {stderr}");
        assert!(stderr.contains("--budget"), "{stderr}");
        assert!(
            !dir.join("results").exists(),
            "nothing ran for --budget {budget:?}"
        );
    }
    // A file where the folder should be.
    std::fs::write(dir.join("file"), "").unwrap();
    let unwritable = dir.join("file/results");
    let out = run_sh(&dir, &["--out", unwritable.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot create or write"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// On a machine without a GPU the window produces none of what it is for: the stages fail
/// (they are not quietly run on the emulator) and the exit status says so.
#[test]
fn the_bundle_without_a_gpu_fails() {
    let dir = common::bundle("bundle-no-gpu");
    let results = dir.join("results");
    let out = run_sh(
        &dir,
        &["--budget", "60", "--out", results.to_str().unwrap()],
    )
    .env_remove("KERNELS_BACKEND")
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("the window fell short"),
        "{stdout}\n{stderr}"
    );
    assert!(stdout.contains("headline: failed"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The processes whose environment names `dir` as the bundle's output (every stage's).
fn processes_of(dir: &std::path::Path) -> Vec<String> {
    let needle = format!("XTASK_OUT={}", dir.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| {
            std::fs::read(e.path().join("environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == needle.as_bytes()))
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// run.sh's CPU-mode check with a long budget into `results`, as a command to start.
fn bundle_check(dir: &std::path::Path, results: &std::path::Path) -> std::process::Command {
    run_sh(
        dir,
        &[
            "--check",
            "--budget",
            "3000",
            "--out",
            results.to_str().unwrap(),
        ],
    )
}

/// Waits until the correctness stage's run has started its first case process (run.sh's
/// stage, its xtask and a case process all name `results`).
fn wait_for_the_stage(results: &std::path::Path) {
    let start = std::time::Instant::now();
    while processes_of(results).len() < 3 {
        assert!(start.elapsed().as_secs() < 60, "the stage did not start");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Waits up to `seconds` for every process of the bundle's run into `results` to end, and fails
/// naming those still running.
fn all_ended_within(results: &std::path::Path, seconds: u64) {
    let since = std::time::Instant::now();
    while !processes_of(results).is_empty() && since.elapsed().as_secs() < seconds {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let left = processes_of(results);
    assert!(left.is_empty(), "still running: {left:?}");
}

/// Ctrl-C during a stage: the stage and everything it started stop, what finished is summarised,
/// and the exit status is not 0 (run.sh went on while the stage's xtask kept running).
#[test]
fn ctrl_c_stops_the_running_stage_and_all_it_started_and_fails_the_run() {
    let dir = common::bundle("bundle-interrupt");
    let results = dir.join("results");
    let mut command = bundle_check(&dir, &results);
    // As from a terminal: a shell started with SIGINT ignored (a test harness run in the
    // background, nohup) cannot trap it (POSIX), so the child gets the default disposition back.
    // SAFETY: async-signal-safe `signal` between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            Ok(())
        });
    }
    let run = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_the_stage(&results);
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(run.id() as i32, libc::SIGINT) };
    let out = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let stages = std::fs::read_to_string(results.join("stages.txt")).unwrap();
    assert!(
        stages.contains("correctness: interrupted by SIGINT"),
        "{stages}"
    );
    assert!(results.join("summary.txt").exists(), "{stages}");
    // run.sh waited for the stage to end; its log's tee may take a moment to see the end.
    all_ended_within(&results, 5);
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGKILL of run.sh (no trap sees it): the running stage's xtask and its case processes notice
/// that run.sh is gone and end, instead of running on orphaned.
#[test]
fn killing_run_sh_outright_ends_the_stage_it_was_running() {
    let dir = common::bundle("bundle-kill");
    let results = dir.join("results");
    let mut run = bundle_check(&dir, &results)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for_the_stage(&results);
    run.kill().unwrap();
    run.wait().unwrap();
    // Each watches run.sh every 250 ms.
    all_ended_within(&results, 10);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_exit_with_that_is_not_a_live_process_is_refused() {
    refused(
        &ONE,
        &[("XTASK_EXIT_WITH", "abc")],
        &["XTASK_EXIT_WITH=abc: expected the process id of the bundle's run.sh"],
    );
    refused(
        &ONE,
        &[("XTASK_EXIT_WITH", "2147483646")],
        &["XTASK_EXIT_WITH=2147483646: no such process"],
    );
}
