//! `cargo xtask check` on NVRTC's output (`tests/foreign/ptx/refusals.*.ptx`, from
//! `tests/foreign/cuda/refusals.cu`): `--list`, a clean run, a failed assert and a race through
//! an offset view, each reported as the emulator reports it, with the exit status saying so.

mod common;

use common::xtask;

/// The committed NVRTC output of `refusals.cu` at `level`.
fn fixture(level: &str) -> String {
    in_repo(&format!("tests/foreign/ptx/refusals.{level}.ptx"))
}

/// `cargo xtask check <args>`: (exit status, stdout, stderr).
fn check(args: &[&str]) -> (Option<i32>, String, String) {
    check_with(args, &[])
}

/// [`check`] with the environment variables `envs` set.
fn check_with(args: &[&str], envs: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let out = xtask(&[&["check"], args].concat(), envs);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// The path of the repository's file `path` (from its root).
fn in_repo(path: &str) -> String {
    format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"))
}

/// `check` of `tests/foreign/ptx/elementwise.default.ptx`'s `vector_add_f32` (c = a + b over
/// `n` elements) on `--grid grid --block block`, its three buffers as `buffers` say, then `extra`.
fn vector_add(
    grid: &str,
    block: &str,
    buffers: [&str; 3],
    n: &str,
    extra: &[&str],
) -> (Option<i32>, String, String) {
    let file = in_repo("tests/foreign/ptx/elementwise.default.ptx");
    let n = format!("u32:{n}");
    let mut args = vec![
        file.as_str(),
        "--entry",
        "vector_add_f32",
        "--grid",
        grid,
        "--block",
        block,
    ];
    for b in &buffers {
        args.extend(["--arg", b]);
    }
    args.extend(["--arg", n.as_str()]);
    args.extend(extra);
    check(&args)
}

#[test]
fn list_names_every_entry_with_its_parameters_and_the_refused_one_with_its_cause() {
    let file = fixture("default");
    let (code, out, err) = check(&[&file, "--list"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains(
            "checked_scatter(checked_scatter_param_0: .u64 (8 B), checked_scatter_param_1: .u64 (8 B), checked_scatter_param_2: .u32 (4 B))\n    decodes"
        ),
        "{out}"
    );
    assert!(
        out.contains("apply_pointer(")
            && out.contains("refused: kernel `apply_pointer`")
            && out.contains("indirect call through register `%rd"),
        "{out}"
    );
    // The refused call on one line, as NVRTC's tabs and line breaks would split the report.
    let refused = out.lines().find(|l| l.contains("refused:")).unwrap();
    assert!(refused.contains("`call (retval0), %rd"), "{out}");
}

/// The entries in the order the module declares them, a name that begins another's included
/// (`reverse` is declared after `reverse_unsynced`).
#[test]
fn list_keeps_the_module_s_order() {
    let file = in_repo("tests/foreign/ptx/reverse.default.ptx");
    let (code, out, err) = check(&[&file, "--list"]);
    assert_eq!(code, Some(0), "{err}");
    let names: Vec<&str> = out
        .lines()
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split('(').next())
        .collect();
    assert_eq!(names, ["reverse_unsynced", "reverse"], "{out}");
}

/// `checked_scatter` on 128 threads writing slot t of 300, its bound given as `n`.
fn scatter(level: &str, n: &str) -> (Option<i32>, String, String) {
    let file = fixture(level);
    let bound = format!("i32:{n}");
    check(&[
        &file,
        "--entry",
        "checked_scatter",
        "--grid",
        "2",
        "--block",
        "64",
        "--arg",
        "i32[128]:iota",
        "--arg",
        "i32[300]:zeros",
        "--arg",
        &bound,
    ])
}

#[test]
fn a_clean_run_reports_its_traffic_and_a_failed_assert_fails_the_command() {
    for level in ["default", "G"] {
        let (code, out, err) = scatter(level, "300");
        assert_eq!(code, Some(0), "{level}: {err}");
        assert!(out.contains("no bug found"), "{level}: {out}");
        assert!(
            out.contains("512 bytes read, 512 written"),
            "{level}: {out}"
        );
        // Each buffer after the launch: the scatter wrote t into slot t (0 + 1 + ... + 127 =
        // 8128; slots 128 to 299 still 0), and left its input as it was.
        assert!(
            out.contains("argument 0 after the launch: i32[128]: 0 1 2 3 ... 126 127 (sum 8128)")
                && out
                    .contains("argument 1 after the launch: i32[300]: 0 1 2 3 ... 0 0 (sum 8128)"),
            "{level}: {out}"
        );
        // Slots 100 to 127 are out of the bound: the first thread to check one is thread
        // (36, 0, 0) of block 1, global index 100.
        let (code, _, err) = scatter(level, "100");
        assert_eq!(code, Some(1), "{level}: {err}");
        assert!(
            err.contains("block (1, 0, 0): thread (36, 0, 0) panicked: device-side assertion `s >= 0 && s < n` failed at refusals.cu:"),
            "{level}: {err}"
        );
    }
}

#[test]
fn a_view_that_overlaps_the_input_is_a_race_and_bad_arguments_are_refused() {
    let file = fixture("G");
    let quads = |out: &str| {
        check(&[
            &file,
            "--entry",
            "sum_of_quads",
            "--grid",
            "2",
            "--block",
            "64",
            "--arg",
            "f32[1000]:rand",
            "--arg",
            out,
        ])
    };
    // The sums written into the input's own tail, which other threads read: a race.
    let (code, _, err) = quads("view:0+488");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("data race on global memory"), "{err}");
    let (code, out, err) = quads("f32[128]:zeros");
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("no bug found"), "{out}");
    // A scalar where a pointer goes, and a view past the end, are refused with the cause.
    let (code, _, err) = quads("i32:5");
    assert_eq!(code, Some(1));
    assert!(
        err.contains("parameter 1 (`sum_of_quads_param_1`, .u64) is 8 bytes"),
        "{err}"
    );
    let (code, _, err) = quads("view:0+1001");
    assert_eq!(code, Some(1));
    assert!(err.contains("starts past its end"), "{err}");
    // NVRTC's options are for a .cu: on a .ptx they would be silently ignored.
    let (code, _, err) = check(&[&file, "--list", "--nvrtc-opt", "-G"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("--nvrtc-opt is for a .cu file"), "{err}");
}

/// The module file is read as `KERNELS_PTX`'s is: a device that never ends, or a folder, is
/// refused before it is read (read whole, `/dev/zero` ran the machine out of memory).
#[test]
fn a_file_that_is_not_a_regular_file_is_refused_before_it_is_read() {
    for path in ["/dev/zero", "/"] {
        let (code, _, err) = check(&[path, "--list"]);
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains("is not a regular file"), "{err}");
    }
}

/// The two halves of a block meeting barrier 0 each at its own `bar.sync`
/// (`tests/fixtures/ptx/double-buffered-halves.ptx`, a double-buffered tile loop): the check
/// runs it to its end, warns once naming both PTX lines and why, and says so in its summary.
#[test]
fn two_halves_meeting_one_barrier_at_their_own_lines_run_with_a_warning() {
    let file = in_repo("tests/fixtures/ptx/double-buffered-halves.ptx");
    let (code, out, err) = check(&[
        &file,
        "--entry",
        "halves_sum",
        "--grid",
        "2",
        "--block",
        "64",
        "--arg",
        "u32[320]:iota",
        "--arg",
        "u32[64]:zeros",
        "--arg",
        "u32:5",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("warning: kernel `halves_sum`, block (0, 0, 0): the threads met barrier 0 at different instructions: thread (0, 0, 0) at PTX line 63 ")
            && err.contains("and thread (32, 0, 0) at PTX line 69 ")
            && err.contains("CUDA C++ calls __syncthreads() in divergent code undefined"),
        "{err}"
    );
    assert_eq!(err.matches("met barrier 0").count(), 1, "{err}");
    assert!(
        out.contains("no bug found")
            && out.contains("1 pair of instructions at which the threads met one barrier")
            && out.contains("; 10 barriers,"),
        "{out}"
    );
    // The prediction samples the launch again: the warning does not stop it (without ptxas,
    // fetched from PyPI, there are no registers to predict with).
    assert!(
        out.contains("predicted ") || out.contains("no prediction: ptxas gave no registers"),
        "{out}"
    );
}

/// A check at a small size and a prediction at the real one in one command (`--predict-arg`):
/// vector_add_f32 checked on 512 elements (2 blocks) and predicted on 4 Mi (16384 blocks), whose
/// sample's bytes are the large launch's, with no note about a grid larger than the arguments.
/// A wrong count of them, or a device the model does not know, fails before the check launches.
#[test]
fn a_small_check_predicts_the_real_size_with_its_own_arguments() {
    let file = in_repo("tests/foreign/ptx/elementwise.default.ptx");
    let small = [
        "f32[512]:iota",
        "f32[512]:ones",
        "f32[512]:zeros",
        "u32:512",
    ];
    let large = [
        "f32[4194304]:zeros",
        "f32[4194304]:zeros",
        "f32[4194304]:zeros",
        "u32:4194304",
    ];
    let mut args = vec![
        file.as_str(),
        "--entry",
        "vector_add_f32",
        "--grid",
        "2",
        "--block",
        "256",
        "--predict-grid",
        "16384",
    ];
    for a in small {
        args.extend(["--arg", a]);
    }
    let only_check = args.clone();
    for a in large {
        args.extend(["--predict-arg", a]);
    }
    let (code, out, err) = check(&args);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("4096 bytes read, 2048 written"), "{out}");
    // 4 Mi elements: two f32 inputs read, one written, over the predicted grid.
    assert!(
        out.contains("the 33554432 read and 16777216 written that the sample counts"),
        "{out}"
    );
    assert!(!out.contains("note: a grid larger"), "{out}");
    let mut short = only_check.clone();
    short.extend(["--predict-arg", "u32:4194304"]);
    let (code, out, err) = check(&short);
    assert_eq!(code, Some(1), "{out}");
    assert!(err.contains("--predict-arg: 1 given for 4 --arg"), "{err}");
    assert!(
        !out.contains("no bug found"),
        "refused after the launch: {out}"
    );
    let mut nosuch = only_check;
    nosuch.extend(["--device", "nosuch"]);
    let (code, out, err) = check(&nosuch);
    assert_eq!(code, Some(1), "{out}");
    assert!(err.contains("nosuch"), "{err}");
    assert!(
        !out.contains("no bug found"),
        "refused after the launch: {out}"
    );
}

/// `--dump DIR` never writes through a link it finds in DIR (the linked file keeps its bytes),
/// leaves no earlier dump's buffer beside this one's, and a DIR that is a file is refused before
/// the launch.
#[cfg(unix)]
#[test]
fn a_dump_replaces_links_and_earlier_buffers_and_refuses_a_file() {
    let dir = std::env::temp_dir().join(format!("check-dump-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let victim = std::env::temp_dir().join(format!("check-dump-victim-{}", std::process::id()));
    std::fs::write(&victim, "keep me").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("arg0.npy")).unwrap();
    std::fs::write(dir.join("arg5.npy"), "an earlier dump's").unwrap();
    std::fs::write(dir.join("notes.txt"), "the user's").unwrap();
    let file = fixture("default");
    let d = dir.to_str().unwrap();
    let args = [
        file.as_str(),
        "--entry",
        "checked_scatter",
        "--grid",
        "2",
        "--block",
        "64",
        "--arg",
        "i32[128]:iota",
        "--arg",
        "i32[300]:zeros",
        "--arg",
        "i32:300",
        "--no-predict",
        "--dump",
        d,
    ];
    let (code, out, err) = check(&args);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    let arg0 = std::fs::symlink_metadata(dir.join("arg0.npy")).unwrap();
    assert!(arg0.file_type().is_file(), "{out}");
    assert!(dir.join("arg1.npy").exists());
    assert!(
        !dir.join("arg5.npy").exists(),
        "an earlier dump's arg5.npy stayed"
    );
    assert!(
        dir.join("notes.txt").exists(),
        "a file that is no dump's was removed"
    );
    // DIR a file: refused before the launch.
    let not_dir = dir.join("notes.txt");
    let mut on_file = args.to_vec();
    let last = on_file.len() - 1;
    on_file[last] = not_dir.to_str().unwrap();
    let (code, out, err) = check(&on_file);
    assert_eq!(code, Some(1), "{out}");
    assert!(err.contains("--dump"), "{err}");
    assert!(
        !out.contains("no bug found"),
        "refused after the launch: {out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&victim);
}

/// A misspelt entry is refused before any buffer is made, with the module's kernels listed.
#[test]
fn a_misspelt_entry_lists_the_kernels_there_are() {
    let file = in_repo("tests/foreign/ptx/reverse.default.ptx");
    let (code, out, err) = check(&[
        &file,
        "--entry",
        "revers",
        "--grid",
        "2",
        "--block",
        "256",
        "--arg",
        "f32[512]:zeros",
        "--arg",
        "f32[512]:iota",
    ]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        err.contains("--entry revers:")
            && err.contains("has no such kernel; its kernels: reverse_unsynced, reverse"),
        "{err}"
    );
    assert!(out.is_empty(), "{out}");
}

/// `--emit-ptx FILE` writes the PTX that runs, so that a reported PTX line can be opened.
#[test]
fn emit_ptx_writes_the_module_that_runs() {
    let file = fixture("default");
    let out_file = std::env::temp_dir().join(format!("check-emit-{}.ptx", std::process::id()));
    let (code, out, err) = check(&[&file, "--list", "--emit-ptx", out_file.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("PTX: "), "{out}");
    assert_eq!(
        std::fs::read_to_string(&out_file).unwrap(),
        std::fs::read_to_string(&file).unwrap()
    );
    let _ = std::fs::remove_file(&out_file);
}

/// A PTX loop around `bar.sync` for a flag nobody sets: each wait restarts a thread's watchdog.
const BARRIER_LOOP: &str = "\
.version 7.8
.target sm_90
.address_size 64

.visible .entry barrier_loop(.param .u64 flag)
{
\t.reg .pred %p<2>;
\t.reg .b32 %r<2>;
\t.reg .b64 %rd<3>;
\tld.param.u64 %rd1, [flag];
\tcvta.to.global.u64 %rd2, %rd1;
$L__loop:
\tbar.sync 0;
\tld.global.u32 %r1, [%rd2];
\tsetp.ne.s32 %p1, %r1, 1;
\t@%p1 bra $L__loop;
\tret;
}
";

/// Issue 55, finding 5: a loop that passes a barrier each time round ran until `--timeout`
/// (300 s), whose message named no kernel, block or line. The watchdog's budget now bounds a
/// block as a whole: it ends within the budget plus 10 s, naming all three.
#[test]
fn a_loop_around_a_barrier_ends_within_the_watchdog_s_budget_naming_kernel_block_and_line() {
    let dir = common::scratch("barrier-loop");
    let file = dir.join("loop.ptx");
    std::fs::write(&file, BARRIER_LOOP).unwrap();
    let start = std::time::Instant::now();
    let (code, _, err) = check_with(
        &[
            file.to_str().unwrap(),
            "--entry",
            "barrier_loop",
            "--grid",
            "4",
            "--block",
            "64",
            "--arg",
            "u32[1]:zeros",
        ],
        &[("KERNELS_EMU_WATCHDOG_S", "1")],
    );
    let took = start.elapsed();
    assert_eq!(code, Some(1), "{err}");
    assert!(took < std::time::Duration::from_secs(11), "{took:?}");
    assert!(
        err.contains("kernel `barrier_loop`, block (")
            && err.contains("the last barrier it passed is at PTX line 13 of barrier_loop"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 55, finding 2: a legal grid the emulator cannot run whole aborted on a 25.7 GB
/// allocation (or panicked with "capacity overflow", its banner printing a wrapped thread
/// count). Each is refused at once, with the thread count, and the way to predict it.
#[test]
fn a_grid_too_large_to_check_whole_is_refused_with_the_way_to_predict_it() {
    for (grid, block, threads) in [
        ("2147483647", "256", "549755813632 threads"),
        ("100000000", "32", "3200000000 threads"),
        (
            "2147483647,65535,65535",
            "1024",
            "9444444733164249676800 threads",
        ),
    ] {
        let (code, out, err) = vector_add(
            grid,
            block,
            ["f32[256]:ones", "f32[256]:ones", "f32[256]:zeros"],
            "256",
            &[],
        );
        assert_eq!(code, Some(1), "{out}{err}");
        assert!(
            err.contains(threads) && err.contains(&format!("--predict-grid {grid}")),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

/// Issue 55, finding 12: a module with no kernel (an empty `.cu`) listed nothing and exited 0.
#[test]
fn list_of_a_module_with_no_kernel_fails_saying_so() {
    let dir = common::scratch("no-entry");
    let file = dir.join("none.ptx");
    std::fs::write(&file, ".version 7.8\n.target sm_90\n.address_size 64\n").unwrap();
    let (code, out, err) = check(&[file.to_str().unwrap(), "--list"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        err.contains("has no kernel: no `.entry` in its PTX"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 55, finding 6: a dump that cannot be written whole leaves the earlier one as it was.
/// A folder where argument 1's file goes is refused before the launch, and the earlier
/// `arg0.npy` is untouched (it was overwritten before the failure, exit 1 after the launch).
#[test]
fn a_dump_that_cannot_be_written_whole_leaves_the_earlier_one_as_it_was() {
    let dir = common::scratch("dump-whole");
    std::fs::write(dir.join("arg0.npy"), "earlier").unwrap();
    std::fs::create_dir(dir.join("arg1.npy")).unwrap();
    let (code, out, err) = vector_add(
        "1",
        "256",
        ["f32[256]:ones", "f32[256]:ones", "f32[256]:zeros"],
        "256",
        &["--dump", dir.to_str().unwrap()],
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(
        err.contains("is a folder, where the dump writes argument 1"),
        "{err}"
    );
    assert!(out.is_empty(), "launched: {out}");
    assert_eq!(
        std::fs::read_to_string(dir.join("arg0.npy")).unwrap(),
        "earlier"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `check` of `tests/fixtures/ptx/recursion.ptx`'s `recurse`, `n` calls deep, with `envs`:
/// the exit status and everything it printed.
fn recurse(n: &str, envs: &[(&str, &str)]) -> (Option<i32>, String) {
    let depth = format!("i32:{n}");
    let (code, out, err) = check_with(
        &[
            &in_repo("tests/fixtures/ptx/recursion.ptx"),
            "--entry",
            "recurse",
            "--grid",
            "1",
            "--block",
            "32",
            "--arg",
            "i32[32]:zeros",
            "--arg",
            &depth,
            "--no-predict",
        ],
        envs,
    );
    (code, out + &err)
}

/// Issue 55, finding 11: a recursion 200 calls deep (about 51 KiB of frames per thread) was "no
/// bug found", where a GPU gives a recursive kernel `cudaLimitStackSize` (1 KiB by default)
/// and faults. Four frames of 256 bytes fit; the fifth does not; a raised limit lets 200 run.
#[test]
fn a_recursion_deeper_than_a_gpu_s_stack_is_the_fault_it_is_on_a_gpu() {
    let (code, out) = recurse("3", &[]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = recurse("200", &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("stack overflow on a GPU: calls nested 5 deep")
            && out.contains("take 1280 bytes of local frames")
            && out.contains("more than the 1024 bytes of stack")
            && out.contains("KERNELS_EMU_GPU_STACK_B"),
        "{out}"
    );
    let (code, out) = recurse("200", &[("KERNELS_EMU_GPU_STACK_B", "65536")]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("(sum 837888)"), "{out}");
}

/// Issue 54, item 1 and 2: a kernel file as people keep them (host headers, its own header with
/// host code, a `main`, launches with `<<<...>>>`, a template kernel) goes in without editing;
/// `--list` prints each kernel's C++ signature, and a template with how to name an instance.
/// The softmax it runs is compared with one computed here, row by row.
#[test]
fn a_whole_cu_with_host_code_is_checked_as_it_is() {
    let file = in_repo("tests/fixtures/cuda/llmc_style.cu");
    let (code, out, err) = check(&[&file, "--list"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("softmax_forward_kernel1(float* out, const float* inp, int N, int C)\n    PTX entry `_Z23softmax_forward_kernel1PfPKfii`: .u64 (8 B), .u64 (8 B), .u32 (4 B), .u32 (4 B)")
            && out.contains("template <int BLOCK> scale_kernel(float* out, float s, int n)\n    a template: check an instance"),
        "{out}"
    );
    let dir = common::scratch("whole-cu");
    let (code, out, err) = check(&[
        &file,
        "--entry",
        "softmax_forward_kernel1",
        "--grid",
        "1",
        "--block",
        "32",
        "--arg",
        "f32[32]:zeros",
        "--arg",
        "f32[32]:iota",
        "--arg",
        "i32:4",
        "--arg",
        "i32:8",
        "--no-predict",
        "--dump",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("no bug found"), "{out}");
    let bytes = std::fs::read(dir.join("arg0.npy")).unwrap();
    let got: Vec<f32> = bytes[bytes.len() - 128..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    for (row, values) in got.chunks(8).enumerate() {
        let x: Vec<f64> = (0..8).map(|j| (row * 8 + j) as f64).collect();
        let max = x.iter().cloned().fold(f64::MIN, f64::max);
        let sum: f64 = x.iter().map(|v| (v - max).exp()).sum();
        for (j, &g) in values.iter().enumerate() {
            let want = (x[j] - max).exp() / sum;
            assert!(
                (f64::from(g) - want).abs() < 1e-6,
                "row {row}, {j}: {g} vs {want}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 54, item 4: a check at a test size said "limited by launch: fuse the launches into one
/// kernel" (or "the last wave leaves SMs idle"), advice about the test, not the kernel. A grid
/// of fewer blocks than the device has SMs now says it is a test size and how to predict the
/// real one.
#[test]
fn a_grid_smaller_than_the_device_is_called_a_test_size_with_how_to_predict_the_real_one() {
    let (code, out, err) = vector_add(
        "2",
        "256",
        ["f32[512]:ones", "f32[512]:ones", "f32[512]:zeros"],
        "512",
        &["--device", "a100,h100"],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("A test size: its 2 blocks leave 106 of the 108 SMs idle")
            && out.contains("A test size: its 2 blocks leave 130 of the 132 SMs idle")
            && out.contains("give that grid as --predict-grid and its sizes as --predict-arg"),
        "{out}"
    );
    assert!(!out.contains("fuse the launches"), "{out}");
}

/// Issue 54, item 3: an access past the end of a buffer names which `--arg` it is and how many
/// elements the access needs.
#[test]
fn a_buffer_smaller_than_the_launch_reads_is_named_with_the_elements_it_needs() {
    let (code, _, err) = vector_add(
        "2",
        "256",
        ["f32[512]:ones", "f32[300]:ones", "f32[512]:zeros"],
        "512",
        &["--no-predict"],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(
            "hint: the buffer is argument 1 (--arg f32[300]:ones), 300 x f32; this access needs at least 301"
        ),
        "{err}"
    );
}

/// Issue 54, item 3: an `extern __shared__` array with `--shared` left at 0 was "lies outside
/// every allocation", without a word about the launch's 0 bytes; with the bytes it runs.
#[test]
fn dynamic_shared_memory_left_at_zero_says_to_give_its_size() {
    let file = in_repo("tests/fixtures/cuda/dynamic_shared.cu");
    let args = |shared: &'static str| {
        [
            file.as_str(),
            "--entry",
            "dyn",
            "--grid",
            "1",
            "--block",
            "32",
            "--arg",
            "f32[32]:zeros",
            "--no-predict",
            "--shared",
            shared,
        ]
    };
    let (code, _, err) = check(&args("0"));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("hint: the launch has 0 bytes of dynamic shared memory")
            && err.contains("--shared"),
        "{err}"
    );
    let (code, out, err) = check(&args("128"));
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("(sum 496)"), "{out}");
}

/// Issue 54, item 2: a report names the kernel as the source writes it, not the PTX's mangled
/// name (`_Z23softmax_forward_kernel1PfPKfii`).
#[test]
fn a_report_names_the_kernel_as_the_source_writes_it() {
    let file = in_repo("tests/fixtures/cuda/llmc_style.cu");
    let (code, _, err) = check(&[
        &file,
        "--entry",
        "softmax_forward_kernel1",
        "--grid",
        "1",
        "--block",
        "32",
        "--arg",
        "f32[16]:zeros",
        "--arg",
        "f32[32]:iota",
        "--arg",
        "i32:4",
        "--arg",
        "i32:8",
        "--no-predict",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("kernel `softmax_forward_kernel1`, block (0, 0, 0): out-of-bounds")
            && !err.contains("_Z23"),
        "{err}"
    );
}
