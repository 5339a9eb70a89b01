//! The exercises (docs/exercises.md, `host::exercises`) on the backend `KERNELS_BACKEND` picks:
//! every stub as committed fails its check (a learner starts from a failing test), and every
//! reference solution passes it, at the exercise's own shapes and at random ones.

use host::exercises::{self, Exercise, ExerciseRuntime, Shape, Which};
use proptest::prelude::*;

fn runtime(which: Which) -> ExerciseRuntime {
    ExerciseRuntime::from_env(which).expect("the exercises' runtime")
}

#[test]
fn every_stub_fails_its_check() {
    let ert = runtime(Which::Stub);
    for e in exercises::all() {
        let passed: Vec<Shape> = e
            .shapes
            .iter()
            .copied()
            .filter(|&s| (e.check)(&ert, s, 1).is_ok())
            .collect();
        assert!(
            passed.len() < e.shapes.len(),
            "the stub of exercise {} ({}) passes its check at every shape: a stub must fail",
            e.number,
            e.kernel
        );
    }
}

/// A stub stores nothing: its wrong value says so, from a rerun watching that element.
#[test]
fn a_value_no_store_reached_says_the_kernel_never_wrote_it() {
    let ert = runtime(Which::Stub);
    let map = exercises::find("1").unwrap();
    let err = exercises::check(map, &ert, [300, 1, 1], 1)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("y[0] is 0") && err.contains("never written by the kernel"),
        "{err}"
    );
}

#[test]
fn every_solution_passes_at_its_shapes() {
    let ert = runtime(Which::Solution);
    for e in exercises::all() {
        for &s in e.shapes {
            if let Err(f) = (e.check)(&ert, s, 7) {
                panic!(
                    "exercise {} ({}) at {}: {f}",
                    e.number,
                    e.kernel,
                    (e.describe)(s)
                );
            }
        }
    }
}

/// A random shape no larger than twice the exercise's largest check shape in each dimension.
fn random_shape(e: &Exercise, draw: [usize; 3]) -> Shape {
    std::array::from_fn(|d| {
        let largest = e.shapes.iter().map(|s| s[d]).max().unwrap_or(1);
        1 + draw[d] % (2 * largest)
    })
}

#[test]
fn exercises_are_numbered_in_order_and_found_by_number_and_name() {
    for (i, e) in exercises::all().iter().enumerate() {
        assert_eq!(e.number as usize, i + 1, "{}", e.kernel);
        let name = e.kernel.split_once('_').unwrap().1;
        for key in [e.number.to_string(), e.kernel.to_string(), name.to_string()] {
            assert_eq!(
                exercises::find(&key).map(|f| f.kernel),
                Some(e.kernel),
                "{key}"
            );
        }
    }
    assert!(exercises::find("0").is_none() && exercises::find("no_such").is_none());
}

proptest! {
    #![proptest_config(suite::proptest_config(3))]

    /// Each solution against its reference at random shapes and inputs (3 cases per exercise:
    /// the exercise's own shapes above hold the edges).
    #[test]
    fn every_solution_matches_its_reference(draw in any::<[usize; 3]>(), seed in any::<u64>()) {
        let ert = runtime(Which::Solution);
        for e in exercises::all() {
            let s = random_shape(e, draw);
            if let Err(f) = (e.check)(&ert, s, seed) {
                prop_assert!(false, "exercise {} ({}) at {}: {}", e.number, e.kernel, (e.describe)(s), f);
            }
        }
    }
}

/// The PTX modules themselves, whatever the backend: the stubs' fails exercise 1, the solutions'
/// passes it (the entries have the same names; the module decides).
#[test]
fn the_ptx_modules_hold_the_stubs_and_the_solutions() {
    let e = exercises::find("1").unwrap();
    let (stub, solution) = (
        ExerciseRuntime::ptx(Which::Stub).unwrap(),
        ExerciseRuntime::ptx(Which::Solution).unwrap(),
    );
    assert!(stub.runtime().device_name().contains("exercises"));
    assert!(solution.runtime().device_name().contains("solutions"));
    assert!((e.check)(&stub, e.shapes[0], 1).is_err());
    (e.check)(&solution, e.shapes[0], 1).unwrap();
}
