//! The elementwise kernels against their CPU references, on random sizes including the edges
//! (1 element, sizes that are not a multiple of the block, of 4 for the copy's vector loads);
//! `vector_add_f32`, a registered kernel, is `registered.rs`'s. Runs on the backend
//! `KERNELS_BACKEND` picks: the emulator in CI, a GPU when one is present.

use half::f16;
use host::ops::elementwise;
use host::reference;
use proptest::prelude::*;
use suite::runtime;

proptest! {
    #![proptest_config(suite::proptest_config(24))]

    /// Exact: a sum of two f16 values is exact in f32, so rounding once to f16 matches the
    /// reference's f64 sum rounded once.
    #[test]
    fn vector_add_f16_matches_the_reference(n in 1usize..5000, seed in any::<u64>()) {
        let rt = runtime();
        let to_f16 = |v: Vec<f32>| v.into_iter().map(f16::from_f32).collect::<Vec<_>>();
        let (a, b) = (to_f16(reference::uniform(n, seed, -6e4, 6e4)), to_f16(reference::uniform(n, seed ^ 1, -6e4, 6e4)));
        let (da, db) = (rt.upload(&a).unwrap(), rt.upload(&b).unwrap());
        let mut dc = rt.alloc::<f16>(n).unwrap();
        let counters = elementwise::vector_add_f16(&rt, &da, &db, &mut dc).unwrap();
        let got = rt.download(&dc).unwrap();
        let want = reference::vector_add_f16(&a, &b);
        prop_assert_eq!(got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), want.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
        if let Some(c) = counters {
            let cost = elementwise::vector_add_cost(n, 2);
            prop_assert_eq!((c.global_read_bytes, c.global_write_bytes, c.flops), (cost.bytes_read, cost.bytes_written, cost.flops));
        }
    }

    #[test]
    fn copy_is_exact_and_moves_each_byte_once(n in 1usize..5000, seed in any::<u32>()) {
        let rt = runtime();
        let src: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(seed | 1)).collect();
        let dsrc = rt.upload(&src).unwrap();
        let mut ddst = rt.alloc::<u32>(n).unwrap();
        let counters = elementwise::copy(&rt, &dsrc, &mut ddst).unwrap();
        prop_assert_eq!(rt.download(&ddst).unwrap(), src);
        if let Some(c) = counters {
            let cost = elementwise::copy_cost(n);
            prop_assert_eq!((c.global_read_bytes, c.global_write_bytes), (cost.bytes_read, cost.bytes_written));
        }
    }
}

#[test]
fn mismatched_lengths_are_refused_with_the_lengths() {
    let rt = runtime();
    let (a, b) = (
        rt.upload(&[1.0f32; 3]).unwrap(),
        rt.upload(&[1.0f32; 4]).unwrap(),
    );
    let mut c = rt.alloc::<f32>(3).unwrap();
    let err = elementwise::vector_add_f32(&rt, &a, &b, &mut c)
        .unwrap_err()
        .to_string();
    assert!(err.contains("[3, 4, 3]"), "{err}");
}

#[test]
fn empty_inputs_launch_nothing() {
    let rt = runtime();
    let (a, b) = (rt.alloc::<f32>(0).unwrap(), rt.alloc::<f32>(0).unwrap());
    let mut c = rt.alloc::<f32>(0).unwrap();
    assert!(
        elementwise::vector_add_f32(&rt, &a, &b, &mut c)
            .unwrap()
            .is_none()
    );
    assert!(rt.download(&c).unwrap().is_empty());
}
