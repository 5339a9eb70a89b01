//! The emulator refuses instead of hanging or crashing: a kernel that never ends and a kernel
//! whose locals outgrow the stack end with errors naming the kernel and the thread (not a hang,
//! not SIGSEGV); memory the host does not have is refused with the size (not the OOM killer).

use std::time::{Duration, Instant};

use emu::EmuErrorKind;
use emu::{LaunchConfig, LaunchOptions};
use kernels::cuda::GlobalPtr;
use kernels::cuda::thread::{sync_threads, thread_idx_x};
use kernels::cuda::warp::sync_warp;
use kernels::kernel;
use suite::{emu_error, emulator};

/// Launches `kernel` (registered as `name`) on `cfg`, its flag never set, with the watchdog at
/// `budget`: the emulator's error and how long the launch took.
fn stopped_by_the_watchdog(
    name: &'static str,
    cfg: LaunchConfig,
    budget: Duration,
    kernel: unsafe fn(GlobalPtr<u32>),
) -> (emu::EmuError, Duration) {
    let (rt, emu) = emulator();
    let options = LaunchOptions {
        watchdog: Some(budget),
        ..emu.defaults()
    };
    let flag = rt.alloc::<u32>(1).unwrap();
    let f = flag.ptr();
    let start = Instant::now();
    let err = emu_error(emu.launch_with(name, &cfg, &options, || unsafe { kernel(f) }));
    (err, start.elapsed())
}

kernel! {
    /// Broken: thread 0 spins until a flag nobody sets becomes 1 (the others wait at a barrier).
    pub unsafe fn spins_forever(flag: GlobalPtr<u32>) {
        if thread_idx_x() == 0 {
            while unsafe { flag.read(0) } != 1 {}
        }
        sync_threads();
    }
}

#[test]
fn a_loop_that_never_ends_is_stopped_by_the_watchdog() {
    let (err, took) = stopped_by_the_watchdog(
        "spins_forever",
        LaunchConfig::linear(1, 64),
        Duration::from_millis(200),
        spins_forever,
    );
    assert!(took < Duration::from_secs(30));
    let EmuErrorKind::Watchdog {
        thread,
        last_site,
        others,
        ..
    } = &err.kind
    else {
        panic!("{err}")
    };
    assert_eq!(thread.x, 0, "{err}");
    let site = last_site.expect("the loop reads global memory").to_string();
    assert!(site.contains("emulator_limits.rs"), "{err}");
    // Thread 0 runs first, so the others have not run yet.
    assert!(!others.is_empty(), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("spins_forever") && msg.contains("KERNELS_EMU_WATCHDOG_S"),
        "{msg}"
    );
}

kernel! {
    /// Broken: every thread of every block spins until a flag nobody sets becomes 1.
    pub unsafe fn every_block_spins(flag: GlobalPtr<u32>) {
        while unsafe { flag.read(0) } != 1 {}
    }
}

/// The watchdog bounds the launch, not each block: a loop in every one of 256 blocks ends the
/// launch within about one budget (it took a budget per block, 256 of them, before), and the
/// report is the first block's, as on every run.
#[test]
fn a_loop_in_every_block_ends_the_launch_within_one_budget() {
    let budget = Duration::from_millis(200);
    let (err, took) = stopped_by_the_watchdog(
        "every_block_spins",
        LaunchConfig::linear(256, 32),
        budget,
        every_block_spins,
    );
    assert!(matches!(err.kind, EmuErrorKind::Watchdog { .. }), "{err}");
    assert_eq!(err.block.x, 0, "{err}");
    // One budget per block worker (the blocks run in parallel), and slack for a loaded machine.
    assert!(took < 20 * budget, "{took:?}: a budget per block?");
}

kernel! {
    /// Broken: every thread waits at the barrier, over and over, for a flag nobody sets. Each
    /// wait restarts a thread's own budget, so only the block's budget can end it.
    pub unsafe fn barrier_loop(flag: GlobalPtr<u32>) {
        while unsafe { flag.read(0) } != 1 {
            sync_threads();
        }
    }
}

/// A loop around a barrier (issue 55, finding 5: only the command's `--timeout` of 300 s ended
/// it, naming no kernel, block or line) is ended by the watchdog within about its budget,
/// naming the barrier's line.
#[test]
fn a_loop_around_a_barrier_is_stopped_by_the_block_s_budget_at_the_barrier_s_line() {
    let budget = Duration::from_millis(300);
    let (err, took) = stopped_by_the_watchdog(
        "barrier_loop",
        LaunchConfig::linear(2, 64),
        budget,
        barrier_loop,
    );
    let EmuErrorKind::BlockWatchdog {
        last_barrier,
        threads,
        ..
    } = &err.kind
    else {
        panic!("{err}")
    };
    assert!(took < 20 * budget, "{took:?}");
    let line = last_barrier
        .expect("the block passed the barrier")
        .to_string();
    assert!(line.contains("emulator_limits.rs"), "{err}");
    assert!(
        threads
            .iter()
            .all(|(_, s)| s.contains("waits at the barrier")),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("kernel `barrier_loop`, block (0, 0, 0)")
            && msg.contains("KERNELS_EMU_WATCHDOG_S"),
        "{msg}"
    );
}

kernel! {
    /// Broken: the same loop around a warp barrier (`__syncwarp`).
    pub unsafe fn warp_barrier_loop(flag: GlobalPtr<u32>) {
        while unsafe { flag.read(0) } != 1 {
            sync_warp(u32::MAX);
        }
    }
}

#[test]
fn a_loop_around_a_warp_instruction_is_stopped_by_the_block_s_budget() {
    let budget = Duration::from_millis(300);
    let (err, took) = stopped_by_the_watchdog(
        "warp_barrier_loop",
        LaunchConfig::linear(1, 32),
        budget,
        warp_barrier_loop,
    );
    assert!(took < 20 * budget);
    assert!(
        matches!(err.kind, EmuErrorKind::BlockWatchdog { .. }),
        "{err}"
    );
}

kernel! {
    /// Writes its block's index to its own word.
    pub unsafe fn block_ids(out: GlobalPtr<u32>) {
        if thread_idx_x() == 0 {
            let b = kernels::cuda::thread::block_idx_x();
            unsafe { out.write(b as usize, b + 1) };
        }
    }
}

/// A grid of more blocks than one round runs (the launch runs and folds them a round at a
/// time, never listing the whole grid) runs each block once.
#[test]
fn a_grid_of_many_rounds_runs_every_block_once() {
    let (rt, emu) = emulator();
    let n = 10_000u32;
    let out = rt.alloc::<u32>(n as usize).unwrap();
    let o = out.ptr();
    emu.launch("block_ids", &LaunchConfig::linear(n, 32), || unsafe {
        block_ids(o)
    })
    .unwrap();
    let got = rt.download(&out).unwrap();
    assert!(
        got.iter().zip(1..).all(|(&g, want)| g == want),
        "a block ran twice or never"
    );
}

fn dim3(x: u32, y: u32, z: u32) -> emu::Dim3 {
    emu::Dim3 { x, y, z }
}

/// A legal grid too large to run whole (issue 55, finding 2: the emulator listed every block
/// first, 25.7 GB for 2^31 - 1 of them, and aborted; a 2^31 x 2^16 x 2^16 grid overflowed) is
/// refused at once, with its thread count, before any block runs.
#[test]
fn a_grid_too_large_to_run_whole_is_refused_before_any_block_runs() {
    let (rt, emu) = emulator();
    let out = rt.alloc::<u32>(1).unwrap();
    let o = out.ptr();
    for (grid, threads) in [
        (dim3(2_147_483_647, 1, 1), 256),
        (dim3(2_147_483_647, 65_535, 65_535), 1024),
    ] {
        let cfg = LaunchConfig {
            grid,
            block: dim3(threads, 1, 1),
            dynamic_shared: 0,
        };
        let start = Instant::now();
        let err = emu
            .launch("block_ids", &cfg, || unsafe { block_ids(o) })
            .expect_err("refused");
        assert!(start.elapsed() < Duration::from_secs(5));
        let msg = err.to_string();
        assert!(
            msg.contains("the emulator runs whole") && msg.contains("threads"),
            "{msg}"
        );
    }
    assert_eq!(rt.download(&out).unwrap(), [0], "a block ran");
}

/// A per-thread array larger than the default 256 KiB stack.
const HUGE: usize = 400 * 1024;

kernel! {
    /// Broken on the default stack: 400 KB of locals per thread.
    pub unsafe fn huge_locals(out: GlobalPtr<u32>) {
        let mut local = [0u8; HUGE];
        let t = thread_idx_x() as usize;
        local[t * 1000] = t as u8;
        let local = core::hint::black_box(&mut local);
        unsafe { out.write(t, u32::from(local[t * 1000]) + local.len() as u32) };
    }
}

#[test]
fn a_stack_overflow_names_the_kernel_and_thread_and_a_larger_stack_fixes_it() {
    let (rt, emu) = emulator();
    let out = rt.alloc::<u32>(4).unwrap();
    let o = out.ptr();
    let cfg = LaunchConfig::linear(1, 4);
    let err = emu_error(emu.launch("huge_locals", &cfg, || unsafe { huge_locals(o) }));
    let EmuErrorKind::StackOverflow {
        thread,
        stack_bytes,
    } = err.kind
    else {
        panic!("{err}")
    };
    assert_eq!((thread.x, stack_bytes), (0, 256 * 1024), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("huge_locals") && msg.contains("KERNELS_EMU_STACK_KIB"),
        "{msg}"
    );
    // The emulator is still usable, and with a stack that fits the kernel runs.
    let options = LaunchOptions {
        stack_bytes: 1024 * 1024,
        ..emu.defaults()
    };
    emu.launch_with("huge_locals", &cfg, &options, || unsafe { huge_locals(o) })
        .unwrap();
    let want: Vec<u32> = (0..4).map(|t| t + HUGE as u32).collect();
    assert_eq!(rt.download(&out).unwrap(), want);
}

/// `MemAvailable` from /proc/meminfo, read independently of the emulator.
fn mem_available() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").expect("Linux");
    let kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a MemAvailable line");
    kib * 1024
}

#[test]
fn the_emulators_free_memory_is_the_hosts_available_memory() {
    let (rt, _) = emulator();
    let (before, free, after) = (mem_available(), rt.free_memory().unwrap(), mem_available());
    // Other processes allocate meanwhile: within 1 GiB of the readings around it.
    let (lo, hi) = (before.min(after), before.max(after));
    assert!(
        free + (1 << 30) >= lo && free <= hi + (1 << 30),
        "free {free}, MemAvailable {before}..{after}"
    );
}

#[test]
fn an_allocation_larger_than_the_host_has_is_refused_with_its_size() {
    let (rt, _) = emulator();
    let free = rt.free_memory().unwrap();
    let len = (free / 4 + (1 << 28)) as usize;
    let Err(err) = rt.alloc::<f32>(len) else {
        panic!("{len} f32 allocated with {free} bytes free");
    };
    let msg = err.to_string();
    assert!(matches!(err, host::Error::OutOfMemory { .. }), "{msg}");
    assert!(msg.contains(&(len as u64 * 4).to_string()), "{msg}");
    // A length whose byte count overflows is the same refusal, not an arithmetic panic.
    assert!(matches!(
        rt.alloc::<f64>(usize::MAX / 4),
        Err(host::Error::OutOfMemory { .. })
    ));
}

/// Resident set size of this process, from /proc/self/statm.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("Linux");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn a_large_buffer_is_zeroed_lazily() {
    let (rt, _) = emulator();
    let gib = 1usize << 30;
    if rt.free_memory().unwrap() < 2 * gib as u64 {
        return; // Not enough memory on this host to tell.
    }
    let before = resident_bytes();
    let buf = rt.alloc::<u32>(gib / 4).unwrap();
    let grew = resident_bytes().saturating_sub(before);
    // Eager zeroing would make the whole GiB resident.
    assert!(
        grew < (gib / 4) as u64,
        "allocating 1 GiB made {grew} bytes resident"
    );
    drop(buf);
}

/// Naive attention at N = 65536: S and P are 2 x 65536^2 f32, 34 GB. Refused with both sizes
/// where the host has less available; where it has more, the (lazily zeroed) workspace is
/// allocated without touching it.
#[test]
fn naive_attention_that_does_not_fit_the_host_is_refused() {
    use host::ops::attention::{AttentionShape, NaiveWorkspace};
    let (rt, _) = emulator();
    let shape = AttentionShape::new(1, 1, 65536, 64);
    let needed = 2 * 65536u64 * 65536 * 4;
    let free = rt.free_memory().unwrap();
    match NaiveWorkspace::new(&rt, &shape) {
        Err(err) => {
            let msg = err.to_string();
            assert!(needed > free, "refused with {free} free: {msg}");
            assert!(msg.contains(&needed.to_string()), "{msg}");
            assert!(matches!(err, host::Error::OutOfMemory { .. }), "{msg}");
        }
        Ok(_) => assert!(needed <= free, "{needed} bytes allocated with {free} free"),
    }
}

/// Under `KERNELS_BACKEND=gpu` on a machine without a GPU, a test binary says why once, in the
/// error's own sentence, and exits (run here as a child process of this test).
#[test]
fn a_missing_gpu_is_one_sentence_for_the_whole_test_binary() {
    const CHILD: &str = "SUITE_MISSING_GPU_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let _ = suite::runtime();
        let _ = suite::runtime();
        return;
    }
    if host::Runtime::gpu(0).is_ok() {
        return; // A GPU is present: nothing is missing.
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_missing_gpu_is_one_sentence_for_the_whole_test_binary",
        ])
        .env(CHILD, "1")
        .env("KERNELS_BACKEND", "gpu")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("KERNELS_BACKEND=gpu"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        !stderr.contains("NoDriver") && !stderr.contains("panicked"),
        "{stderr}"
    );
}
