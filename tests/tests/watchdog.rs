//! A kernel that never ends and a kernel whose locals outgrow the stack end with errors naming
//! the kernel and the thread, instead of hanging or dying of SIGSEGV.

use std::time::{Duration, Instant};

use host::emu::EmuErrorKind;
use host::launch::LaunchConfig;
use kernels::cuda::GlobalPtr;
use kernels::cuda::thread::{sync_threads, thread_idx_x};
use kernels::kernel;
use suite::{emu_error, emulator};

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
    let (rt, emu) = emulator();
    emu.set_watchdog(Some(Duration::from_millis(200)));
    let flag = rt.alloc::<u32>(1).unwrap();
    let f = flag.ptr();
    let start = Instant::now();
    let err = emu_error(
        emu.launch("spins_forever", &LaunchConfig::linear(1, 64), || unsafe {
            spins_forever(f)
        }),
    );
    assert!(start.elapsed() < Duration::from_secs(30));
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
    assert!(site.contains("watchdog.rs"), "{err}");
    // Thread 0 runs first, so the others have not run yet.
    assert!(!others.is_empty(), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("spins_forever") && msg.contains("KERNELS_EMU_WATCHDOG_S"),
        "{msg}"
    );
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
    emu.set_stack_bytes(1024 * 1024);
    emu.launch("huge_locals", &cfg, || unsafe { huge_locals(o) })
        .unwrap();
    let want: Vec<u32> = (0..4).map(|t| t + HUGE as u32).collect();
    assert_eq!(rt.download(&out).unwrap(), want);
}
