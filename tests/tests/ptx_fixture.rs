//! The PTX backend on the kept fixture of issue 12: `softmax_normalise_f32` as rustc compiled it
//! before the fix, with `broadcast_from_thread0`'s barrier copied into both arms of
//! `if tid.x == 0` (tests/fixtures/ptx/softmax_normalise_f32-duplicated-barrier.ptx says how).
//! Thread 0 waits at one `bar.sync 0`, every other thread at the other: the backend must report
//! barrier divergence with both PTX lines. (`cargo xtask ptxas`'s static check, ptx/src/analysis/convergence.rs,
//! flags the same two lines: the last test.)

use std::path::Path;

use emu::EmuErrorKind;
use host::runtime::{Backend, param};
use host::{LaunchConfig, Runtime};
use kernels::cuda::emu::SiteKind;
use kernels::softmax::ROW_THREADS;
use ptx::analysis::convergence::check_text;
use ptx::exec::Program;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/fixtures/ptx/softmax_normalise_f32-duplicated-barrier.ptx"
);

#[test]
fn the_duplicated_barrier_is_reported_as_barrier_divergence_at_both_ptx_lines() {
    let text = std::fs::read_to_string(FIXTURE).unwrap();
    // The two barriers' lines, found in the text (comments excluded).
    let barriers: Vec<u32> = (1..)
        .zip(text.lines())
        .filter(|(_, l)| !l.trim_start().starts_with("//") && l.contains("bar.sync"))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(barriers.len(), 2, "{barriers:?}");

    let rt = Runtime::ptx(Program::file(Path::new(FIXTURE)).unwrap());
    let Backend::Ptx(device) = rt.backend() else {
        unreachable!("Runtime::ptx")
    };
    let (rows, cols) = (2usize, 300u32);
    let x = rt.upload(&vec![0.5f32; rows * cols as usize]).unwrap();
    let row_max = rt.upload(&vec![0.5f32; rows]).unwrap();
    let row_sum = rt.upload(&vec![cols as f32; rows]).unwrap();
    let y = rt.alloc::<f32>(rows * cols as usize).unwrap();
    let pointers = [x.ptr(), row_max.ptr(), row_sum.ptr(), y.ptr()];
    let params = [
        param(&pointers[0]),
        param(&pointers[1]),
        param(&pointers[2]),
        param(&pointers[3]),
        param(&cols),
    ];
    let cfg = LaunchConfig::linear(rows as u32, ROW_THREADS);
    // SAFETY: the entry's five parameters (four pointers into live buffers of the sizes the
    // kernel reads and writes, and the column count), with their sizes.
    let result = unsafe { device.launch("softmax_normalise_f32", &cfg, &params, &[8, 8, 8, 8, 4]) };
    let err = suite::emu_error(result);
    let EmuErrorKind::BarrierDivergence { waiting, elsewhere } = &err.kind else {
        panic!("{err}")
    };
    assert_eq!(err.kernel, "softmax_normalise_f32", "{err}");
    // Thread 0 alone went through the `tid.x == 0` arm, to the second barrier; the others wait
    // at the first.
    assert_eq!(waiting.len(), 1, "{err}");
    assert_eq!(waiting[0].0.x, 0, "{err}");
    let SiteKind::Ptx(at) = waiting[0].1.kind() else {
        panic!("a PTX barrier: {err}")
    };
    assert_eq!(
        (at.function, at.line),
        ("softmax_normalise_f32", barriers[1])
    );
    assert!(!elsewhere.is_empty(), "{err}");
    for (thread, what) in elsewhere {
        assert_ne!(thread.x, 0, "{err}");
        assert!(
            what.starts_with("waits at a different barrier")
                && what.contains(&format!("PTX line {} ", barriers[0])),
            "{err}"
        );
    }
    let message = err.to_string();
    for line in barriers {
        assert!(message.contains(&format!("PTX line {line}")), "{message}");
    }
}

/// The static convergence check (`cargo xtask ptxas`'s first step) on the fixture: both of its barriers reached from
/// `@%p1 bra` on %tid.x != 0.
#[test]
fn the_static_check_flags_both_barriers_of_the_fixture() {
    let text = std::fs::read_to_string(FIXTURE).unwrap();
    let line_where = |pred: &dyn Fn(&str) -> bool| -> Vec<u32> {
        (1..)
            .zip(text.lines())
            .filter(|(_, l)| !l.trim_start().starts_with("//") && pred(l))
            .map(|(n, _)| n)
            .collect()
    };
    let barriers = line_where(&|l| l.contains("bar.sync"));
    let branch = line_where(&|l| l.contains("@%p1 bra"));
    assert_eq!((barriers.len(), branch.len()), (2, 1));
    let report = check_text(&text, &[]).unwrap();
    let got: Vec<(&str, u32, u32)> = report
        .findings
        .iter()
        .map(|f| (f.kernel.as_str(), f.op_line, f.branch_line))
        .collect();
    let expected: Vec<(&str, u32, u32)> = barriers
        .iter()
        .map(|&b| ("softmax_normalise_f32", b, branch[0]))
        .collect();
    assert_eq!(got, expected);
    // docs/toolchain.md pastes the findings as `cargo xtask ptxas` prints them.
    let doc = include_str!("../../docs/toolchain.md");
    for f in &report.findings {
        assert!(
            doc.contains(&f.to_string()),
            "docs/toolchain.md lacks:\n{f}"
        );
    }
}
