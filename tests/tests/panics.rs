//! A launch whose threads panic is one error, printed once by whoever reports it: not one
//! panic message per simulated thread. (Its own test binary: it installs a panic hook, which is
//! process-wide.)

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use emu::EmuErrorKind;
use emu::LaunchConfig;
use kernels::cuda::GlobalPtr;
use kernels::cuda::thread::block_idx_x;
use kernels::kernel;
use suite::{emu_error, emulator};

kernel! {
    /// Broken: every thread fails an assertion.
    pub unsafe fn always_panics(out: GlobalPtr<u32>) {
        let b = block_idx_x();
        assert!(b > u32::MAX - 1, "block {b} is not the last possible block");
        unsafe { out.write(0, b) };
    }
}

#[test]
fn two_hundred_and_fifty_six_panicking_blocks_are_one_error_and_print_nothing() {
    // Count what reaches the process's hook (the test harness's, which prints).
    let printed = Arc::new(AtomicUsize::new(0));
    let seen = printed.clone();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        seen.fetch_add(1, Ordering::SeqCst);
        previous(info);
    }));
    let (rt, emu) = emulator();
    let out = rt.alloc::<u32>(1).unwrap();
    let o = out.ptr();
    let err = emu_error(
        emu.launch("always_panics", &LaunchConfig::linear(256, 32), || unsafe {
            always_panics(o)
        }),
    );
    let EmuErrorKind::Panic { thread, message } = &err.kind else {
        panic!("{err}")
    };
    assert_eq!((err.block.x, thread.x), (0, 0), "{err}");
    assert!(message.contains("is not the last possible block"), "{err}");
    assert!(message.contains("panics.rs"), "the location: {err}");
    assert_eq!(printed.load(Ordering::SeqCst), 0, "panic messages printed");
}
