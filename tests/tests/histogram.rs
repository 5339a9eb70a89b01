//! The learner's histogram (`kernels::histogram`): its counts on whichever backend
//! `KERNELS_BACKEND` picks (run it with `KERNELS_BACKEND=ptx` too: the PTX backend then executes
//! the `.local` depot, the `call` and the atomics rustc emitted) against a plain CPU count, and
//! the PTX checked to still hold those three, so that a compiler that inlined or promoted them
//! away would be noticed rather than leave the PTX backend's paths untested.

use host::embedded::{Arch, entry_body};
use host::ops::histogram;
use host::reference::histogram_top_bits;
use kernels::histogram::{BIN_BITS, BINS};
use proptest::prelude::*;
use suite::runtime;

/// Runs the kernel `launches` times over `data` into one zeroed histogram.
fn device_histogram(data: &[u32], launches: u32) -> Vec<u32> {
    let rt = runtime();
    let src = rt.upload(data).unwrap();
    let mut hist = rt.alloc::<u32>(BINS).unwrap();
    for _ in 0..launches {
        histogram::histogram_u32(&rt, &src, &mut hist).unwrap();
    }
    rt.download(&hist).unwrap()
}

proptest! {
    #![proptest_config(suite::proptest_config(16))]

    /// Any values, any length (several blocks, a partial last one, none at all).
    #[test]
    fn counts_equal_the_cpu_count(data in proptest::collection::vec(any::<u32>(), 0..3000)) {
        prop_assert_eq!(device_histogram(&data, 1), histogram_top_bits(&data, BIN_BITS));
    }

    /// A few bins only: many threads of a block, and many blocks, add to the same words (the
    /// contention atomics exist for), and a second launch adds to the first's counts.
    #[test]
    fn contended_bins_and_a_second_launch_add_up(
        data in proptest::collection::vec(prop_oneof![Just(0u32), Just(u32::MAX), Just(0x8000_0000)], 1..70_000),
    ) {
        let want: Vec<u32> = histogram_top_bits(&data, BIN_BITS).iter().map(|c| 2 * c).collect();
        prop_assert_eq!(device_histogram(&data, 2), want);
    }
}

#[test]
fn a_histogram_of_the_wrong_size_is_refused() {
    let rt = runtime();
    let src = rt.upload(&[1u32, 2, 3]).unwrap();
    let mut hist = rt.alloc::<u32>(BINS - 1).unwrap();
    let err = histogram::histogram_u32(&rt, &src, &mut hist).unwrap_err();
    assert!(
        err.to_string().contains(&format!("needs {BINS} bins")),
        "{err}"
    );
}

/// What the kernel is for: in every architecture's PTX, the private counts are a `.local` depot
/// reached with `ld.local`/`st.local`, `bin_of` is a `.func` the entry `call`s, and the bins are
/// updated with shared and global atomics.
#[test]
fn the_ptx_has_local_memory_a_call_and_atomics() {
    for arch in Arch::ALL {
        let ptx = arch.ptx();
        let body = entry_body(ptx, "histogram_u32").expect("histogram_u32 in the PTX");
        let has = |needle: &str| body.contains(needle);
        let what = arch.name();
        assert!(
            has(".local .align") && has("__local_depot"),
            "{what}: no .local depot"
        );
        assert!(
            has("ld.local") && has("st.local"),
            "{what}: no local access"
        );
        assert!(has("atom.shared.add.u32"), "{what}: no shared atomic");
        assert!(has("atom.global.add.u32"), "{what}: no global atomic");
        let callee = body
            .lines()
            .find_map(|l| l.trim().strip_prefix("call.uni (retval0), "))
            .and_then(|rest| rest.split(',').next())
            .unwrap_or_else(|| panic!("{what}: histogram_u32 calls nothing"));
        assert!(callee.contains("bin_of"), "{what}: the call is to {callee}");
        assert!(
            ptx.lines()
                .any(|l| l.contains(".func") && l.contains(callee)),
            "{what}: {callee} is not a .func of the module"
        );
    }
}
