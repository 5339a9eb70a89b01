//! Issue 25's fault probes on the host runtime and the emulator, one test each: every one of
//! them hung, panicked or wrapped on the code before it. (The probes of the commands, `cargo
//! xtask ...` as a user types them, are `xtask/tests/fault_probes.rs`.)
//!
//! - a source kernel spinning in pure arithmetic, which never calls into the emulator, is named
//!   by the watchdog's monitor, which ends the process (tested in a child process);
//! - a PTX `bra` back to itself is stopped by the watchdog at its line;
//! - an mbarrier arrival past the barrier's count is an error naming the barrier and thread;
//! - lazily mapped buffers count against the free memory (three of 14.3 GB were accepted with
//!   23.9 GB free);
//! - the public cost and shape helpers saturate at the extremes of `u32`/`u64`/`usize` instead
//!   of panicking in a debug build (or wrapping to a small number in a release one).

use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};

use emu::{EmuErrorKind, WATCHDOG_EXIT_CODE};
use emu::{LaunchConfig, LaunchOptions};
use host::ops::attention::{self, AttentionShape, Flow};
use host::ops::decode::{self, DecodeShape};
use host::ops::elementwise::{copy_cost, vector_add_cost};
use host::ops::gemm::{Epilogue, GemmKernel, GemmShape};
use host::ops::softmax::{fused_cost, naive_cost, online_cost};
use host::ops::transpose::transpose_cost;
use kernels::cuda::GlobalPtr;
use kernels::cuda::emu::SiteKind;
use kernels::cuda::mbarrier::{mbarrier_arrive, mbarrier_arrive_expect_tx, mbarrier_init};
use kernels::cuda::shared::dynamic_shared_mem;
use kernels::cuda::thread::thread_idx_x;
use kernels::kernel;
use perf::cost::Cost;
use proptest::prelude::*;
use ptx::exec::Program;
use suite::{emu_error, emulator};

/// Set in the child process a test starts (the child runs one test of this binary).
const CHILD_VAR: &str = "FAULT_PROBES_CHILD";

/// Runs test `name` of this binary alone in a child process marked by [`CHILD_VAR`]; kills it
/// after a minute (a hang is this test's failure, not the suite's).
fn in_child(name: &str) -> std::process::Output {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_VAR, "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the test binary starts");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

kernel! {
    /// Broken: spins in pure arithmetic (`x` stays odd, so never 0), calling nothing the
    /// emulator could regain control at.
    pub unsafe fn spins_in_arithmetic(out: GlobalPtr<u32>) {
        let mut x = black_box(1u32);
        while black_box(x) != 0 {
            x = x.wrapping_add(2);
        }
        unsafe { out.write(0, x) };
    }
}

/// The child's half of the test below: launches the spin with a half-second watchdog.
#[test]
fn child_launches_a_spin_in_pure_arithmetic() {
    if std::env::var_os(CHILD_VAR).is_none() {
        return;
    }
    let (rt, emu) = emulator();
    let options = LaunchOptions {
        watchdog: Some(Duration::from_millis(500)),
        ..emu.defaults()
    };
    let out = rt.alloc::<u32>(1).unwrap();
    let o = out.ptr();
    let cfg = LaunchConfig::linear(1, 32);
    let result = emu.launch_with("spins_in_arithmetic", &cfg, &options, || unsafe {
        spins_in_arithmetic(o)
    });
    panic!("the spin returned: {result:?}");
}

#[test]
fn a_source_loop_of_pure_arithmetic_ends_the_process_naming_kernel_block_and_thread() {
    let start = Instant::now();
    let out = in_child("child_launches_a_spin_in_pure_arithmetic");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(start.elapsed() < Duration::from_secs(60), "{stderr}");
    assert_eq!(out.status.code(), Some(WATCHDOG_EXIT_CODE), "{stderr}");
    assert!(
        stderr.contains("kernel `spins_in_arithmetic`, block (0, 0, 0), thread (0, 0, 0)")
            && stderr.contains("KERNELS_EMU_WATCHDOG_S"),
        "{stderr}"
    );
}

/// `bra` back to itself, forever.
const SPIN_PTX: &str = "\
.version 7.8
.target sm_90
.address_size 64

.visible .entry spins_on_a_branch()
{
$L__spin:
	bra.uni 	$L__spin;
	ret;
}
";

#[test]
fn a_ptx_branch_to_itself_is_stopped_by_the_watchdog_at_its_line() {
    let program = Program::load(SPIN_PTX, "spin.ptx".into()).unwrap();
    let rt = host::Runtime::ptx(program);
    let host::runtime::Backend::Ptx(device) = rt.backend() else {
        unreachable!()
    };
    let options = LaunchOptions {
        watchdog: Some(Duration::from_millis(200)),
        ..device.emulator().defaults()
    };
    let cfg = LaunchConfig::linear(1, 32);
    let start = Instant::now();
    // SAFETY: the entry takes no parameters.
    let err =
        emu_error(unsafe { device.launch_with("spins_on_a_branch", &cfg, &[], &[], &options) });
    assert!(start.elapsed() < Duration::from_secs(30), "{err}");
    let EmuErrorKind::Watchdog {
        thread, last_site, ..
    } = &err.kind
    else {
        panic!("{err}")
    };
    assert_eq!(thread.x, 0, "{err}");
    let SiteKind::Ptx(site) = last_site.expect("the branch's site").kind() else {
        panic!("{err}")
    };
    let line = SPIN_PTX
        .lines()
        .position(|l| l.contains("bra.uni"))
        .unwrap()
        + 1;
    assert_eq!(site.line as usize, line, "{err}");
    assert!(site.text.starts_with("bra"), "{err}");
}

kernel! {
    /// Broken: a barrier initialised for one arrival, which thread 0 makes twice (the first
    /// announcing 16 bytes that never come, so that the phase stays open).
    pub unsafe fn arrives_twice() {
        let bar = dynamic_shared_mem::<u64>();
        if thread_idx_x() == 0 {
            unsafe {
                mbarrier_init(bar, 1);
                mbarrier_arrive_expect_tx(bar, 16);
                mbarrier_arrive(bar);
            }
        }
    }
}

#[test]
fn an_mbarrier_arrival_past_its_count_names_the_barrier_and_the_thread() {
    let (_, emu) = emulator();
    let cfg = LaunchConfig::linear(1, 32).with_dynamic_shared(8);
    let err = emu_error(emu.launch("arrives_twice", &cfg, || unsafe { arrives_twice() }));
    let EmuErrorKind::Mbarrier { thread, detail, .. } = &err.kind else {
        panic!("{err}")
    };
    assert_eq!(thread.x, 0, "{err}");
    assert!(
        detail.contains("barrier at byte 0") && detail.contains("all 1 arrivals"),
        "{err}"
    );
}

/// Sizes at the edges of the integer types, and some ordinary ones.
fn extreme() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(0usize),
        Just(1),
        Just(u32::MAX as usize),
        Just(u32::MAX as usize + 1),
        Just(usize::MAX / 2),
        Just(usize::MAX),
        0usize..5000,
        any::<usize>(),
    ]
}

/// The exact product, clamped to `u64::MAX`: what the helpers must give.
fn clamped(factors: &[usize]) -> u64 {
    if factors.contains(&0) {
        return 0;
    }
    let exact = factors
        .iter()
        .try_fold(1u128, |acc, &f| acc.checked_mul(f as u128));
    exact.map_or(u64::MAX, |p| p.min(u64::MAX as u128) as u64)
}

/// Every count of a cost, for checking that none panics (each is read).
fn counts(c: &Cost) -> [u64; 4] {
    [c.bytes_read, c.bytes_written, c.flops, c.exps]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn elementwise_and_transpose_costs_saturate_at_the_extremes(
        n in extreme(), e in extreme(), cols in extreme()
    ) {
        let add = vector_add_cost(n, e);
        prop_assert_eq!(add.bytes_read, clamped(&[2, n, e]));
        prop_assert_eq!(add.bytes_written, clamped(&[n, e]));
        prop_assert_eq!(copy_cost(n).bytes_read, clamped(&[4, n]));
        prop_assert_eq!(transpose_cost(n, cols).bytes_written, clamped(&[n, cols, 4]));
        prop_assert_eq!(add.bytes(), clamped(&[3, n, e]));
        let twice = add.times(u64::MAX).plus(add);
        prop_assert!(counts(&twice).iter().zip(counts(&add)).all(|(t, a)| *t >= a));
    }

    #[test]
    fn gemm_and_softmax_costs_saturate_at_the_extremes(
        m in extreme(), n in extreme(), k in extreme(), e in 1usize..5
    ) {
        let shape = GemmShape::new(m, n, k);
        prop_assert_eq!(shape.flops(), clamped(&[2, m, n, k]));
        for kernel in GemmKernel::ALL {
            let c = kernel.cost(shape, Epilogue::Accumulate);
            prop_assert!(c.bytes_written == 0 || c.bytes_written >= clamped(&[m, n]));
        }
        let g = decode::gemv_cost(shape);
        prop_assert_eq!(g.flops, if m == 0 || n == 0 { 0 } else { clamped(&[2, m, n, k]) });
        for cost in [naive_cost(m, n, e), online_cost(m, n, e), fused_cost(m, n, e)] {
            prop_assert!(cost.bytes_read >= clamped(&[m, n, e]));
        }
    }

    #[test]
    fn decode_shapes_and_costs_saturate_at_the_extremes(
        batch in extreme(), heads in extreme(), ctx in extreme(), lens in any::<[u32; 3]>()
    ) {
        let shape = DecodeShape::new(batch, heads, heads.max(1), ctx);
        prop_assert_eq!(shape.kv_elems() as u64, clamped(&[batch, heads.max(1), ctx, 128]).min(usize::MAX as u64));
        prop_assert_eq!(shape.q_elems() as u64, clamped(&[batch, heads, 128]).min(usize::MAX as u64));
        let keys: u64 = lens.iter().map(|&l| u64::from(l)).sum();
        prop_assert_eq!(decode::kv_bytes(&shape, &lens), clamped(&[keys as usize, heads.max(1), 2 * 128 * 2]));
        let t = decode::attention_traffic(&shape, &lens, 4);
        prop_assert!(t.compulsory().bytes_read >= decode::kv_bytes(&shape, &lens));
        prop_assert!(counts(&decode::merge_cost(batch, u32::MAX)).iter().all(|&c| c > 0 || batch == 0));
    }

    #[test]
    fn attention_memory_and_the_longest_sequence_saturate_at_the_extremes(
        batch in extreme(), heads in extreme(), d in extreme(), free in any::<u64>()
    ) {
        for flow in [Flow::Naive, Flow::Fused] {
            let shape = AttentionShape::new(batch, heads, 1000, d);
            let bytes = attention::device_bytes(flow, &shape);
            prop_assert!(bytes >= clamped(&[batch, heads, 1000, d]).min(u64::MAX / 4));
            for free in [free, 0, u64::MAX] {
                let n = attention::max_sequence_len(flow, free, batch, heads, d);
                let fits = |n: usize| {
                    attention::device_bytes(flow, &AttentionShape::new(batch, heads, n, d)) <= free
                };
                prop_assert!(n == 0 || fits(n));
                prop_assert!(n == usize::MAX || !fits(n + 1));
            }
        }
    }
}

#[test]
fn a_stride_of_zero_is_refused_as_such() {
    let (rt, _) = emulator();
    let src = rt.upload(&[1.0f32; 6]).unwrap();
    let mut dst = rt.alloc::<f32>(6).unwrap();
    let err = host::ops::transpose::copy_strided(&rt, &src, 0, &mut dst)
        .unwrap_err()
        .to_string();
    // It said "needs a source of at least 6 elements, got 6".
    assert!(err.contains("stride must be at least 1"), "{err}");
}

#[test]
fn wgmma_on_a_module_without_it_is_not_called_a_missing_gpu() {
    let rt = host::Runtime::ptx(host::embedded::program(host::embedded::Arch::Sm80));
    let shape = GemmShape::new(64, 128, 64);
    let a = rt.upload(&vec![half::bf16::ZERO; 64 * 64]).unwrap();
    let b = rt.upload(&vec![half::bf16::ZERO; 64 * 128]).unwrap();
    let mut c = rt.alloc::<f32>(64 * 128).unwrap();
    let err = host::ops::gemm::gemm_wgmma_bf16(&rt, &a, &b, &mut c, shape, Epilogue::Overwrite)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("not available on this device") && err.contains("sm_90a"),
        "{err}"
    );
}

#[test]
fn lazily_mapped_buffers_count_against_free_memory() {
    let (rt, emu) = emulator();
    let free = emu.free_memory();
    // 60% of it, in words.
    let big = (free / 10 * 6 / 4) as usize;
    // Mapped, never touched: the host's available memory does not move.
    let first = rt.alloc::<u32>(big).unwrap();
    assert!(
        emu.free_memory() < free - free / 2,
        "{free} -> {}",
        emu.free_memory()
    );
    let second = rt.alloc::<u32>(big);
    assert!(
        matches!(second, Err(host::Error::OutOfMemory { .. })),
        "a second buffer of 60% of {free} bytes was accepted"
    );
    drop(first);
    assert!(
        emu.free_memory() > free / 10 * 9,
        "freed: {}",
        emu.free_memory()
    );
}
