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

// Issue 42, finding 2: writes only where asked. Each of these wrote outside what was asked (or
// into a folder of the user's) on the code before the fix.

/// `cargo xtask <args>` run in `dir` (a copy of the binary when `exe` says so), with nothing in
/// the environment pointing it at this checkout.
fn xtask_in(exe: &std::path::Path, dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    // A binary this test just copied can be "busy" for a moment: another test's thread may
    // fork while the copy's file is still open for writing, and the child holds it until it
    // execs (ETXTBSY). That is the test harness, not the command: try again.
    for _ in 0..50 {
        let out = std::process::Command::new(exe)
            .args(args)
            .current_dir(dir)
            .env("KERNELS_BACKEND", "emulator")
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("XTASK_OUT")
            .env_remove("CARGO_MANIFEST_DIR")
            .output();
        match out {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other.expect("xtask starts"),
        }
    }
    panic!("{} stayed busy (ETXTBSY) for a second", exe.display())
}

#[test]
fn device_bundle_refuses_a_folder_holding_a_users_file_and_leaves_it_untouched() {
    let dir = common::scratch("bundle-users-dir");
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    std::fs::write(dir.join("run.sh"), "my own script").unwrap();
    refused(
        &["device-bundle", "--out", dir.to_str().unwrap()],
        &[],
        &["notes.txt", "not part of a bundle"],
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "mine"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("run.sh")).unwrap(),
        "my own script"
    );
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "nothing added: {names:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn device_bundle_does_not_write_through_a_link() {
    let dir = common::scratch("bundle-link");
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let link = dir.join("link");
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
    refused(
        &["device-bundle", "--out", link.to_str().unwrap()],
        &[],
        &["link", "symbolic link"],
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A folder holding a link where the bundle puts a file of its own (`--out /`, whose `bin` leads
/// to `/usr/bin`): refused naming the link, nothing written where it leads.
#[test]
fn device_bundle_does_not_write_through_a_link_inside_its_folder() {
    let dir = common::scratch("bundle-bin-link");
    let out = dir.join("out");
    let elsewhere = dir.join("usr-bin");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, out.join("bin")).unwrap();
    refused(
        &["device-bundle", "--out", out.to_str().unwrap()],
        &[],
        &[out.join("bin").to_str().unwrap(), "not part of a bundle"],
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn device_bundle_replaces_its_own_previous_bundle() {
    let dir = common::scratch("bundle-again");
    let out = dir.join("bundle");
    for _ in 0..2 {
        let run = xtask(&["device-bundle", "--out", out.to_str().unwrap()], &[]);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
    assert!(out.join("run.sh").is_file() && out.join("bin/xtask").is_file());
    // Nothing left beside it.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A folder that looks like a checkout of the project to `cargo xtask`: the workspace's
/// Cargo.toml and the kernel crate's lib.rs.
fn fake_checkout(name: &str) -> std::path::PathBuf {
    let dir = common::scratch(name);
    std::fs::write(
        dir.join("Cargo.toml"),
        "[workspace]\nmembers = [\"kernels\"]\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("kernels/src")).unwrap();
    std::fs::write(
        dir.join("kernels/Cargo.toml"),
        "[package]\nname = \"kernels\"\n",
    )
    .unwrap();
    let lib = concat!(env!("CARGO_MANIFEST_DIR"), "/../kernels/src/lib.rs");
    std::fs::copy(lib, dir.join("kernels/src/lib.rs")).unwrap();
    dir
}

/// Undoes what a `cargo xtask new NAME` wrote into this checkout (the kernel's file, a changed
/// lib.rs), so that a failing test leaves it clean; whether it had written anything.
fn undo_new_here(name: &str, lib_before: &[u8]) -> bool {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels/src");
    let file = here.join(format!("{name}.rs"));
    let wrote = file.exists();
    let _ = std::fs::remove_file(file);
    let lib_changed = std::fs::read(here.join("lib.rs")).unwrap() != lib_before;
    if lib_changed {
        std::fs::write(here.join("lib.rs"), lib_before).unwrap();
    }
    wrote || lib_changed
}

/// The binary copied out of this checkout and run in another: `new` writes there, and nothing
/// into the checkout it was built in (it wrote both files here).
#[test]
fn a_copied_binary_writes_into_the_checkout_it_runs_in_not_the_one_it_was_built_in() {
    let other = fake_checkout("copied-binary");
    let exe = other.join("xtask-copy");
    std::fs::copy(env!("CARGO_BIN_EXE_xtask"), &exe).unwrap();
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels/src");
    let name = format!("probe_copied_{}", std::process::id());
    let lib_before = std::fs::read(here.join("lib.rs")).unwrap();
    let out = xtask_in(&exe, &other, &["new", &name, "--template", "elementwise"]);
    assert!(
        !undo_new_here(&name, &lib_before),
        "wrote into the build's checkout"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(other.join(format!("kernels/src/{name}.rs")).is_file());
    let lib = std::fs::read_to_string(other.join("kernels/src/lib.rs")).unwrap();
    assert!(lib.contains(&format!("    {name},\n")), "{lib}");
    let _ = std::fs::remove_dir_all(&other);
}

/// Outside any checkout, the commands whose default output is in the checkout refuse, naming
/// where they are, and write nothing.
#[test]
fn outside_a_checkout_the_default_outputs_are_refused() {
    let dir = common::scratch("not-a-checkout");
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_xtask"));
    let lib = concat!(env!("CARGO_MANIFEST_DIR"), "/../kernels/src/lib.rs");
    let lib_before = std::fs::read(lib).unwrap();
    for args in [
        &["figures"][..],
        &["new", "probe_outside", "--template", "warp"],
        &["run", "--only", "vector_add_f32", "--no-predict"],
        &["device-bundle"],
    ] {
        let out = xtask_in(exe, &dir, args);
        assert!(!undo_new_here("probe_outside", &lib_before), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("is not inside a checkout of this project"),
            "{args:?}: {stderr}"
        );
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "{args:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// Issue 42, findings 4 and 5: no false success from the bundle's run.sh or from `summarize`.
// Each of these exited 0 (or overwrote its input) on the code before the fix.

#[test]
fn the_bundle_fails_when_its_budget_leaves_every_stage_skipped() {
    let dir = common::bundle("bundle-all-skipped");
    let results = dir.join("results");
    let out = run_sh(
        &dir,
        &["--budget", "10", "--out", results.to_str().unwrap()],
    )
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("correctness: skipped, budget spent"),
        "{stdout}"
    );
    assert!(stderr.contains("no stage ran to its end"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--budget 0090` is 90 seconds (bash's arithmetic took it for octal, failed on the 9, and
/// skipped every stage).
#[test]
fn the_bundle_reads_a_budget_with_leading_zeros_as_decimal() {
    let dir = common::bundle("bundle-octal");
    let results = dir.join("results");
    let out = run_sh(
        &dir,
        &["--budget", "0090", "--out", results.to_str().unwrap()],
    )
    .env_remove("KERNELS_BACKEND")
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("value too great"), "{stderr}");
    assert!(stdout.contains("== correctness (up to 8s)"), "{stdout}");
    assert!(stdout.contains("of 90s)"), "{stdout}");
    // No GPU here: the stages that need one fail, and so does the window.
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run report as `cargo xtask run --json` writes one, with no rows.
const EMPTY_RUN: &str =
    r#"{"backend": "emulator", "rows": [], "failures": [], "complete": true, "not_run": []}"#;

/// `cargo xtask summarize` on files in `dir`: `--run RUN --baselines BASELINES --results
/// RESULTS --out OUT`, each a name in `dir` (or a path as given).
fn summarize(
    dir: &std::path::Path,
    run: &str,
    baselines: &str,
    results: &str,
    out: &str,
) -> Vec<String> {
    let p = |name: &str| dir.join(name).to_str().unwrap().to_string();
    vec![
        "summarize".into(),
        "--run".into(),
        p(run),
        "--baselines".into(),
        p(baselines),
        "--results".into(),
        p(results),
        "--out".into(),
        p(out),
    ]
}

#[track_caller]
fn summarize_refused(dir: &std::path::Path, args: &[String], expected: &[&str]) {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refused(&args, &[], expected);
    assert!(!dir.join("results.json").exists(), "no summary written");
}

#[test]
fn summarize_refuses_an_out_that_is_its_run_report() {
    let dir = common::scratch("summary-out-is-run");
    std::fs::write(dir.join("run.json"), EMPTY_RUN).unwrap();
    let args = summarize(&dir, "run.json", "baselines.json", ".", "run.json");
    summarize_refused(
        &dir,
        &args,
        &["--out", "is --run", "would overwrite its input"],
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("run.json")).unwrap(),
        EMPTY_RUN
    );
    // The same file by another name.
    std::fs::create_dir(dir.join("sub")).unwrap();
    let args = summarize(&dir, "run.json", "baselines.json", ".", "sub/../run.json");
    summarize_refused(&dir, &args, &["would overwrite its input"]);
    assert_eq!(
        std::fs::read_to_string(dir.join("run.json")).unwrap(),
        EMPTY_RUN
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--out` naming one of the files the summary reads in `--results` (issue 55: `RESULTS/
/// emulator.json` was overwritten, exit 0).
#[test]
fn summarize_refuses_an_out_that_is_one_of_its_results_inputs() {
    let dir = common::scratch("summary-out-in-results");
    std::fs::write(dir.join("run.json"), EMPTY_RUN).unwrap();
    std::fs::write(dir.join("emulator.json"), EMPTY_RUN).unwrap();
    for out in ["emulator.json", "sanitizer-memcheck.json"] {
        let args = summarize(&dir, "run.json", "baselines.json", ".", out);
        summarize_refused(&dir, &args, &["--out", "which the summary reads"]);
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("emulator.json")).unwrap(),
        EMPTY_RUN
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A user's folder whose names all happen to be a bundle's (`run.sh` and `bin`) is not taken
/// for a previous bundle (issue 55: it was deleted whole, exit 0): a bundle is known by the
/// marker it writes.
#[test]
fn device_bundle_refuses_a_folder_with_a_bundle_s_names_but_no_marker() {
    let dir = common::scratch("bundle-lookalike");
    std::fs::write(dir.join("run.sh"), "my own script").unwrap();
    std::fs::create_dir(dir.join("bin")).unwrap();
    std::fs::write(dir.join("bin/tool"), "mine").unwrap();
    refused(
        &["device-bundle", "--out", dir.to_str().unwrap()],
        &[],
        &["holds no .kernels-device-bundle"],
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("run.sh")).unwrap(),
        "my own script"
    );
    assert!(dir.join("bin/tool").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn summarize_refuses_a_run_that_is_not_a_run_report() {
    let dir = common::scratch("summary-not-a-run");
    for text in ["{}", "[]", r#"{"rows":"x"}"#] {
        std::fs::write(dir.join("run.json"), text).unwrap();
        let args = summarize(&dir, "run.json", "baselines.json", ".", "results.json");
        summarize_refused(&dir, &args, &["run.json: not a run report"]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn summarize_refuses_a_missing_run_file() {
    let dir = common::scratch("summary-no-run");
    let args = summarize(&dir, "nosuch.json", "baselines.json", ".", "results.json");
    summarize_refused(&dir, &args, &["nosuch.json: no such file"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn summarize_refuses_a_missing_results_folder() {
    let dir = common::scratch("summary-no-results");
    std::fs::write(dir.join("run.json"), EMPTY_RUN).unwrap();
    let args = summarize(&dir, "run.json", "baselines.json", "nosuch", "results.json");
    summarize_refused(&dir, &args, &["--results", "nosuch: no such folder"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn summarize_refuses_baselines_that_are_not_baselines() {
    let dir = common::scratch("summary-bad-baselines");
    std::fs::write(dir.join("run.json"), EMPTY_RUN).unwrap();
    std::fs::write(dir.join("baselines.json"), "{}").unwrap();
    let args = summarize(&dir, "run.json", "baselines.json", ".", "results.json");
    summarize_refused(&dir, &args, &["baselines.json: not a baselines file"]);
    // ... where a good run report and no baselines file at all (their stage skipped) pass.
    std::fs::remove_file(dir.join("baselines.json")).unwrap();
    let args: Vec<String> = summarize(&dir, "run.json", "baselines.json", ".", "results.json");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = xtask(&args, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 42, finding 6: `new` with a keyword, a crate's name or a name its template uses wrote a
/// kernel file that broke the kernel crate's build (all but `gen` were accepted before the fix).
#[test]
fn new_refuses_keywords_crate_names_and_clashes_with_a_clear_message() {
    let other = fake_checkout("new-names");
    let lib = std::fs::read(other.join("kernels/src/lib.rs")).unwrap();
    let here = concat!(env!("CARGO_MANIFEST_DIR"), "/../kernels/src/lib.rs");
    let here_before = std::fs::read(here).unwrap();
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_xtask"));
    for (name, says) in [
        ("try", "is a Rust keyword"),
        ("yield", "is a Rust keyword"),
        ("abstract", "is a Rust keyword"),
        ("gen", "is a Rust keyword"),
        ("become", "is a Rust keyword"),
        ("std", "the name of a crate"),
        ("core", "the name of a crate"),
        ("alloc", "the name of a crate"),
        ("index_1d", "template's code already uses that name"),
    ] {
        let out = xtask_in(exe, &other, &["new", name, "--template", "elementwise"]);
        assert!(!undo_new_here(name, &here_before), "{name}: wrote here");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("`{name}`")) && stderr.contains(says),
            "{name}: {stderr}"
        );
        assert!(
            !other.join(format!("kernels/src/{name}.rs")).exists(),
            "{name}"
        );
        assert_eq!(
            std::fs::read(other.join("kernels/src/lib.rs")).unwrap(),
            lib,
            "{name}"
        );
    }
    let _ = std::fs::remove_dir_all(&other);
}

/// Issue 42, finding 8: the forms `emu-speed --help` gives for `--only` were refused, and
/// `--runs 0` printed "0 run(s)" beside a time.
#[test]
fn emu_speed_only_takes_the_forms_its_help_gives() {
    for only in ["empty 4096 blocks", "softmax_fused_f32 64 x 1000"] {
        let out = xtask(&["emu-speed", "--size", "quick", "--only", only], &[]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "--only {only:?}: {stderr}");
        let (kernel, shape) = only.split_once(' ').unwrap();
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(kernel) && l.contains(shape)),
            "--only {only:?}: no line of it in:\n{stdout}"
        );
    }
}

#[test]
fn a_run_count_of_zero_is_refused() {
    refused(
        &["emu-speed", "--size", "tiny", "--runs", "0"],
        &[],
        &["--runs", "0 is not in 1.."],
    );
    refused(
        &["run", "--only", "vector_add_f32", "--runs", "0"],
        &[],
        &["--runs", "0 is not in 1.."],
    );
}

// Issue 42, finding 7: settings silently ignored (each ran the Rust source, or took the
// misspelt module, or the default, saying nothing, on the code before the fix).

#[test]
fn a_ptx_file_without_ptx_is_refused_by_inspect_predict_and_emu_speed() {
    for args in [
        &["inspect", "vector_add_f32", "--no-predict"][..],
        &["predict", "vector_add_f32"],
        &["emu-speed", "--size", "tiny"],
    ] {
        refused(
            args,
            &[("KERNELS_PTX", "my.ptx")],
            &["KERNELS_PTX=my.ptx", "the file would not be used", "--ptx"],
        );
    }
}

#[test]
fn inspect_under_the_ptx_backend_runs_the_ptx() {
    let out = xtask(
        &["inspect", "vector_add_f32", "--no-predict"],
        &[("KERNELS_BACKEND", "ptx")],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("on the PTX backend"), "{stdout}");
}

/// The embedded sm_90 module with `edit` applied, in a file of the test's own.
fn edited_ptx(name: &str, edit: impl Fn(&str) -> String) -> std::path::PathBuf {
    let dir = common::scratch(name);
    let path = dir.join("kernels.ptx");
    std::fs::write(&path, edit(host::embedded::Arch::Sm90.ptx())).unwrap();
    path
}

#[test]
fn misspelt_or_bad_ptx_header_directives_are_refused_with_their_line() {
    let version = |ptx: &str| {
        ptx.lines()
            .find(|l| l.starts_with(".version"))
            .unwrap()
            .to_string()
    };
    // The module's text and its `.version` line in, the edited text out.
    type Edit = fn(&str, &str) -> String;
    let cases: [(&str, Edit, &str); 5] = [
        (
            "vesion",
            |p, _| p.replacen(".version", ".vesion", 1),
            "unknown directive `.vesion` (did you mean `.version`?)",
        ),
        (
            "adress",
            |p, _| p.replacen(".address_size", ".adress_size", 1),
            "unknown directive `.adress_size` (did you mean `.address_size`?)",
        ),
        (
            "targte",
            |p, _| p.replacen(".target sm_90", ".targte sm_90", 1),
            "unknown directive `.targte` (did you mean `.target`?)",
        ),
        (
            "sm_9O",
            |p, _| p.replacen(".target sm_90", ".target sm_9O", 1),
            "`.target sm_9O`: expected a GPU architecture",
        ),
        (
            "99.9",
            |p, v| p.replacen(v, ".version 99.9", 1),
            "`.version 99.9`: expected a PTX ISA version",
        ),
    ];
    for (name, edit, says) in cases {
        let path = edited_ptx(&format!("ptx-header-{name}"), |p| edit(p, &version(p)));
        refused(
            &["run", "--only", "vector_add_f32", "--no-predict"],
            &[
                ("KERNELS_BACKEND", "ptx"),
                ("KERNELS_PTX", path.to_str().unwrap()),
            ],
            &["PTX line", says],
        );
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }
}

#[test]
fn a_setting_that_is_not_utf8_is_refused_naming_it() {
    use std::os::unix::ffi::OsStrExt;
    for var in [
        "KERNELS_BACKEND",
        "KERNELS_PTX_ARCH",
        "KERNELS_EMU_WATCHDOG_S",
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(["run", "--only", "vector_add_f32", "--no-predict"])
            .env("KERNELS_BACKEND", "ptx")
            .env(var, std::ffi::OsStr::from_bytes(b"pt\xffx"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{var}: {stderr}");
        assert!(
            stderr.contains(&format!("{var}=pt\u{fffd}x: not UTF-8")),
            "{var}: {stderr}"
        );
    }
}

// Issue 42, finding 10: messages. Each said something else on the code before the fix (a Rust
// panic with the interpreter's line, `operand Special("%r9")`, a raw NUL, "has no entry point",
// a link replaced by a file).

/// `run --only vector_add_f32` on the PTX backend from the module at `ptx`: exit status and
/// stdout and stderr together.
fn run_ptx_file(ptx: &std::path::Path) -> (Option<i32>, String) {
    let dir = ptx.parent().unwrap();
    let out = xtask(
        &[
            "run",
            "--only",
            "vector_add_f32",
            "--no-predict",
            "--json",
            dir.join("run.json").to_str().unwrap(),
        ],
        &[
            ("KERNELS_BACKEND", "ptx"),
            ("KERNELS_PTX", ptx.to_str().unwrap()),
        ],
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// The embedded module with `from` replaced by `to` once, in `vector_add_f32`'s body.
fn vector_add_edited(name: &str, from: &str, to: &str) -> std::path::PathBuf {
    edited_ptx(name, |ptx| {
        let start = ptx.find(".entry vector_add_f32(").unwrap();
        let (head, body) = ptx.split_at(start);
        assert!(body.contains(from), "no {from:?} in vector_add_f32");
        format!("{head}{}", body.replacen(from, to, 1))
    })
}

#[test]
fn a_ptx_trap_is_reported_as_a_trap_at_its_line() {
    let ptx = vector_add_edited("trap", "\tret;", "\ttrap;\n\tret;");
    let (code, text) = run_ptx_file(&ptx);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("executed `trap` at PTX line"), "{text}");
    assert!(
        !text.contains("panicked") && !text.contains("exec.rs"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(ptx.parent().unwrap());
}

#[test]
fn an_undeclared_register_is_named_as_a_register() {
    let ptx = vector_add_edited("undeclared", "%r8, %r6, %r7", "%r9, %r6, %r7");
    let (code, text) = run_ptx_file(&ptx);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("register `%r9` is not declared"), "{text}");
    assert!(!text.contains("Special("), "{text}");
    let _ = std::fs::remove_dir_all(ptx.parent().unwrap());
}

#[test]
fn a_nul_byte_in_a_message_is_escaped() {
    let ptx = edited_ptx("nul", |p| {
        p.replacen(".address_size 64\n", ".address_size 64\n.bo\0gus;\n", 1)
    });
    let (code, text) = run_ptx_file(&ptx);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("unknown directive `.bo\\u{0}gus`"), "{text}");
    assert!(!text.contains('\0'), "a raw NUL in: {text:?}");
    let _ = std::fs::remove_dir_all(ptx.parent().unwrap());
}

#[test]
fn an_empty_ptx_file_is_reported_as_empty() {
    let ptx = edited_ptx("empty", |_| String::new());
    refused(
        &["run", "--only", "vector_add_f32", "--no-predict"],
        &[
            ("KERNELS_BACKEND", "ptx"),
            ("KERNELS_PTX", ptx.to_str().unwrap()),
        ],
        &["kernels.ptx is empty"],
    );
    let _ = std::fs::remove_dir_all(ptx.parent().unwrap());
}

/// `--json` naming a link: the report is written to the file it leads to, and the link stays.
#[test]
fn a_json_report_through_a_link_is_written_through_it() {
    let dir = common::scratch("json-link");
    let target = dir.join("target.json");
    std::fs::write(&target, "old").unwrap();
    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = xtask(
        &[
            "run",
            "--only",
            "vector_add_f32",
            "--no-predict",
            "--json",
            link.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link was replaced"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&target).unwrap()).unwrap();
    assert_eq!(report["rows"][0]["kernel"], "vector_add_f32", "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

// Issue 42, finding 3: sizes a PTX module declares are checked against the ISA's limits and
// this machine's memory before anything is allocated. Each of these aborted the process ("memory
// allocation of ... failed", exit 134), read without end, or ran "ok", on the code before the
// fix; each runs under a 4 GiB address-space limit (`ulimit -v`), as the issue's probes did.

/// `cargo xtask run --only vector_add_f32 --no-predict` on the PTX backend from the module at
/// `ptx`, under a 4 GiB address-space limit: exit status, and stdout and stderr together.
fn run_ptx_limited(ptx: &std::path::Path) -> (Option<i32>, String) {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.args(["run", "--only", "vector_add_f32", "--no-predict", "--json"])
        .arg(std::env::temp_dir().join(format!("xtask-test-{}-limited.json", std::process::id())))
        .env("KERNELS_BACKEND", "ptx")
        .env("KERNELS_PTX", ptx);
    // SAFETY: setrlimit, async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 4 << 30,
                rlim_max: 4 << 30,
            };
            libc::setrlimit(libc::RLIMIT_AS, &limit);
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[track_caller]
fn refused_limited(ptx: &std::path::Path, expected: &[&str]) {
    let (code, text) = run_ptx_limited(ptx);
    // A message may quote the file: the first few lines say enough.
    let text: String = text.chars().take(4000).collect();
    assert_eq!(code, Some(1), "{text}");
    assert!(
        !text.contains("panicked") && !text.contains("memory allocation of"),
        "{text}"
    );
    for e in expected {
        assert!(text.contains(e), "no {e:?} in: {text}");
    }
}

/// The embedded module with `decl` declared at module scope, after its header.
fn with_module_variable(name: &str, decl: &str) -> std::path::PathBuf {
    edited_ptx(name, |p| {
        p.replacen(
            ".address_size 64\n",
            &format!(".address_size 64\n{decl}\n"),
            1,
        )
    })
}

#[test]
fn a_global_larger_than_this_machine_is_refused_before_it_is_allocated() {
    let ptx = with_module_variable("huge-global", ".global .align 4 .b8 g[68719476736];");
    refused_limited(
        &ptx,
        &["not enough device memory", "needs 68719476736 bytes"],
    );
    let _ = std::fs::remove_dir_all(ptx.parent().unwrap());
}

#[test]
fn a_const_past_the_64_kib_bank_is_refused() {
    let ptx = with_module_variable("huge-const", ".const .align 4 .b8 c[4294967296];");
    refused_limited(&ptx, &["PTX line", "past the 64 KiB constant bank"]);
    let _ = std::fs::remove_dir_all(ptx.parent().unwrap());
}

#[test]
fn a_local_array_past_512_kib_per_thread_is_refused() {
    let ptx = vector_add_edited(
        "huge-local",
        "\t.reg .b64 \t%rd<11>;\n",
        "\t.reg .b64 \t%rd<11>;\n\t.local .align 4 .b8 big[1073741824];\n",
    );
    refused_limited(
        &ptx,
        &[
            "vector_add_f32",
            "PTX line",
            "more than the 512 KiB of local memory a thread has",
        ],
    );
    let _ = std::fs::remove_dir_all(ptx.parent().unwrap());
}

#[test]
fn a_ptx_file_that_is_a_device_is_refused() {
    refused_limited(
        std::path::Path::new("/dev/zero"),
        &["/dev/zero is not a regular file"],
    );
}

#[test]
fn a_ptx_file_past_the_size_cap_is_refused_unread() {
    let dir = common::scratch("huge-file");
    let path = dir.join("huge.ptx");
    // Sparse: 300 MiB that take no disk.
    std::fs::File::create(&path)
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    refused_limited(
        &path,
        &["huge.ptx is 314572800 bytes, more than the 256 MiB"],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Finding 1: a loop in every block ends the launch within the watchdog's budget, not one budget
/// per block (4096 blocks of the PTX `vector_add_f32` with a `bra.uni` to itself before `ret`
/// ran past 180 s with a 3 s budget). The loop is named with its PTX line.
#[test]
fn a_ptx_loop_in_every_block_ends_within_the_watchdog_budget() {
    let path = edited_ptx("hang", |ptx| {
        let entry = ptx.find(".visible .entry vector_add_f32(").unwrap();
        let ret = entry + ptx[entry..].find("\tret;").unwrap();
        format!(
            "{}$L__hang:\n\tbra.uni $L__hang;\n{}",
            &ptx[..ret],
            &ptx[ret..]
        )
    });
    let start = std::time::Instant::now();
    refused(
        &["inspect", "--ptx", "--no-predict", "vector_add_f32"],
        &[
            ("KERNELS_EMU_WATCHDOG_S", "2"),
            ("KERNELS_BACKEND", "ptx"),
            ("KERNELS_PTX", path.to_str().unwrap()),
        ],
        &[
            "ran for 2.0 s",
            "bra.uni $L__hang",
            "KERNELS_EMU_WATCHDOG_S",
        ],
    );
    let took = start.elapsed();
    assert!(took < std::time::Duration::from_secs(12), "{took:?}");
}

// Issue 42, finding 1: a launch that never returns (`KERNELS_INJECT_FAULT=hang:`, as a deadlocked
// kernel on a GPU) held `inspect` and `predict` for ever; `run` alone bounded it, by its case
// process. Each now stops itself at `--timeout`, failing with why.

/// `cargo xtask <args>` with a hang planted in vector_add_f32 fails within its two-second
/// timeout plus the process's start, naming the timeout.
#[track_caller]
fn a_hang_ends_at_the_timeout(args: &[&str]) {
    let start = std::time::Instant::now();
    refused(
        args,
        &[("KERNELS_INJECT_FAULT", "hang:vector_add_f32")],
        &["no result within 2 s (--timeout)", "a hang?"],
    );
    let took = start.elapsed();
    assert!(
        took < std::time::Duration::from_secs(12),
        "{args:?} took {took:?}"
    );
}

#[test]
fn a_hung_launch_in_inspect_ends_at_its_timeout() {
    a_hang_ends_at_the_timeout(&[
        "inspect",
        "vector_add_f32",
        "--no-predict",
        "--timeout",
        "2",
    ]);
}

#[test]
fn a_hung_launch_in_predict_ends_at_its_timeout() {
    a_hang_ends_at_the_timeout(&[
        "predict",
        "vector_add_f32",
        "--device",
        "h100",
        "--timeout",
        "2",
    ]);
}

#[test]
fn a_timeout_of_zero_is_refused() {
    refused(
        &["inspect", "vector_add_f32", "--timeout", "0"],
        &[],
        &["--timeout"],
    );
}

/// Issue 42, finding 10: a negative value was taken for a flag ("unexpected argument '-1'
/// found"), naming neither the option nor what it takes.
#[test]
fn a_negative_value_is_refused_by_its_option_not_taken_for_a_flag() {
    refused(
        &["run", "--only", "vector_add_f32", "--case-timeout", "-1"],
        &[],
        &["'-1' for '--case-timeout"],
    );
    refused(&["roofline", "add", "-5"], &[], &["'-5' for '<N>'"]);
}
