//! The PTX backend on the kept fixture of issue 12: `softmax_normalise_f32` as rustc compiled it
//! before the fix, with `broadcast_from_thread0`'s barrier copied into both arms of
//! `if tid.x == 0` (tests/fixtures/ptx/softmax_normalise_f32-duplicated-barrier.ptx says how).
//! Thread 0 waits at one `bar.sync 0`, every other thread at the other. A barrier counts
//! arrivals by its id (PTX ISA, "bar, barrier"), so the block runs, but an aligned barrier at two
//! instructions is undefined: the backend must warn, with both PTX lines. (`cargo xtask ptxas`'s
//! static check, ptx/src/analysis/convergence.rs, flags the same two lines: the second test.)
//! Then the hand-written fixture of issue 51, the two halves of a double-buffered block each
//! with its own barrier: the right sums with the warning, a race when one half's barrier is
//! misplaced, and barrier divergence when one half skips it.

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
fn the_duplicated_barrier_runs_with_a_warning_at_both_ptx_lines() {
    let text = std::fs::read_to_string(FIXTURE).unwrap();
    // The two barriers' lines, found in the text (comments excluded).
    let barriers = lines_with(&text, "bar.sync");
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
    let (_, observed) = unsafe {
        device.launch_with(
            "softmax_normalise_f32",
            &cfg,
            &params,
            &[8, 8, 8, 8, 4],
            &rt.options(),
        )
    }
    .unwrap();
    // Thread 0's row maximum and sum reached every thread: exp(0.5 - 0.5) / 300 everywhere.
    for (i, v) in rt.download(&y).unwrap().into_iter().enumerate() {
        assert!((v - 1.0 / cols as f32).abs() < 1e-7, "y[{i}] = {v}");
    }
    // Thread 0 alone went through the `tid.x == 0` arm, to the second barrier; the others wait
    // at the first. One warning per pair of lines, from the first block.
    let found = &observed.divergent_barriers;
    assert_eq!(found.len(), 1, "{found:?}");
    let warning = &found[0];
    assert_eq!(warning.kernel, "softmax_normalise_f32", "{warning}");
    let at = |(thread, site): (emu::Dim3, kernels::cuda::emu::Site)| {
        let SiteKind::Ptx(at) = site.kind() else {
            panic!("a PTX barrier: {warning}")
        };
        (thread.x, at.function, at.line)
    };
    assert_eq!(at(warning.first), (0, "softmax_normalise_f32", barriers[1]));
    assert_eq!(
        at(warning.second),
        (1, "softmax_normalise_f32", barriers[0])
    );
    let message = warning.to_string();
    for line in barriers {
        assert!(message.contains(&format!("PTX line {line} ")), "{message}");
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

/// The hand-written fixture of issue 51: the two halves of a block meeting barrier 0 at their
/// own `bar.sync` (tests/fixtures/ptx/double-buffered-halves.ptx says how).
const HALVES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/fixtures/ptx/double-buffered-halves.ptx"
);

/// The lines of `text` (comments excluded) that contain `what`.
fn lines_with(text: &str, what: &str) -> Vec<u32> {
    (1..)
        .zip(text.lines())
        .filter(|(_, l)| !l.trim_start().starts_with("//") && l.contains(what))
        .map(|(n, _)| n)
        .collect()
}

/// `halves_sum` of `text` on `blocks` blocks of 64 threads and `tiles` tiles of 32 words per
/// block (word i of x is i * 7 + 1): y, and what the launch observed.
fn halves_sum(text: String, blocks: u32, tiles: u32) -> host::Result<(Vec<u32>, emu::Observed)> {
    let text: &'static str = Box::leak(text.into_boxed_str());
    let rt = Runtime::ptx(Program::load(text, "double-buffered-halves.ptx".into())?);
    let Backend::Ptx(device) = rt.backend() else {
        unreachable!("Runtime::ptx")
    };
    let x: Vec<u32> = (0..blocks * tiles * 32).map(|i| i * 7 + 1).collect();
    let x = rt.upload(&x)?;
    let y = rt.alloc::<u32>((blocks * 32) as usize)?;
    let pointers = [x.ptr(), y.ptr()];
    let params = [param(&pointers[0]), param(&pointers[1]), param(&tiles)];
    let cfg = LaunchConfig::linear(blocks, 64);
    // SAFETY: the entry's three parameters (x of blocks * tiles * 32 words, y of blocks * 32
    // words, the tile count), with their sizes.
    let (_, observed) =
        unsafe { device.launch_with("halves_sum", &cfg, &params, &[8, 8, 4], &rt.options()) }?;
    Ok((rt.download(&y)?, observed))
}

/// The CPU's `halves_sum`: per block and lane j, acc = acc * 3 + x[(b * tiles + t) * 32 + j]
/// over the tiles in order.
fn halves_sum_reference(blocks: u32, tiles: u32) -> Vec<u32> {
    let mut y = Vec::new();
    for b in 0..blocks {
        for j in 0..32 {
            let tile = |t: u32| ((b * tiles + t) * 32 + j) * 7 + 1;
            y.push((0..tiles).fold(0u32, |acc, t| acc.wrapping_mul(3).wrapping_add(tile(t))));
        }
    }
    y
}

#[test]
fn the_two_halves_of_a_block_meet_barrier_0_at_their_own_lines_and_sum_right_with_a_warning() {
    let text = std::fs::read_to_string(HALVES).unwrap();
    let [producer, consumer] = lines_with(&text, "bar.sync")[..] else {
        panic!("two barriers in {HALVES}")
    };
    let (blocks, tiles) = (2, 5);
    let (y, observed) = halves_sum(text, blocks, tiles).unwrap();
    assert_eq!(y, halves_sum_reference(blocks, tiles));
    assert!(observed.benign_races.is_empty());
    // One pair of instructions, found in the first block: thread 0 at the producer's barrier,
    // the first consumer, thread 32, at its own.
    let found = &observed.divergent_barriers;
    assert_eq!(found.len(), 1, "{found:?}");
    let warning = &found[0];
    assert_eq!((warning.kernel, warning.block.x), ("halves_sum", 0));
    let at = |(thread, site): (emu::Dim3, kernels::cuda::emu::Site)| {
        let SiteKind::Ptx(at) = site.kind() else {
            panic!("a PTX barrier: {warning}")
        };
        (thread.x, at.function, at.line)
    };
    assert_eq!(at(warning.first), (0, "halves_sum", producer));
    assert_eq!(at(warning.second), (32, "halves_sum", consumer));
    let message = warning.to_string();
    for needle in [
        format!("thread (0, 0, 0) at PTX line {producer} "),
        format!("thread (32, 0, 0) at PTX line {consumer} "),
        "CUDA C++ calls __syncthreads() in divergent code undefined".to_string(),
        "on sm_70 and later the PTX ISA counts arrivals at a barrier by its id".to_string(),
    ] {
        assert!(message.contains(&needle), "{needle}: {message}");
    }
}

#[test]
fn the_consumers_barrier_after_its_read_is_a_race_across_the_halves() {
    let text = std::fs::read_to_string(HALVES).unwrap();
    let barrier = "\tbar.sync \t0; // the consumer's\n";
    let read = "\tadd.s32 \t%r5, %r5, %r8;\n";
    assert!(text.contains(barrier) && text.contains(read));
    // The consumer now reads a buffer in the interval in which the producer writes it.
    let misplaced = text
        .replace(barrier, "")
        .replace(read, &format!("{read}{barrier}"));
    let err = suite::emu_error(halves_sum(misplaced, 1, 3));
    let EmuErrorKind::SharedRace { first, second, .. } = &err.kind else {
        panic!("{err}")
    };
    // A producer's store (threads 0-31) and a consumer's load (threads 32-63) of one word.
    let mut threads = [first.thread.x, second.thread.x];
    threads.sort();
    assert!(threads[0] < 32 && threads[1] >= 32, "{err}");
}

#[test]
fn a_half_that_skips_its_barrier_leaves_the_other_waiting_as_barrier_divergence() {
    let text = std::fs::read_to_string(HALVES).unwrap();
    let consumer = lines_with(&text, "bar.sync")[1];
    let barrier = "\tbar.sync \t0; // the producer's\n";
    assert!(text.contains(barrier));
    // The producer never arrives and exits: on a GPU the consumer would wait forever.
    let err = suite::emu_error(halves_sum(text.replace(barrier, "\n"), 1, 3));
    let EmuErrorKind::BarrierDivergence { waiting, elsewhere } = &err.kind else {
        panic!("{err}")
    };
    assert_eq!(waiting[0].0.x, 32, "{err}");
    let SiteKind::Ptx(at) = waiting[0].1.kind() else {
        panic!("a PTX barrier: {err}")
    };
    assert_eq!(at.line, consumer, "{err}");
    assert!(
        elsewhere
            .iter()
            .all(|(t, what)| t.x < 32 && what == "has exited"),
        "{err}"
    );
}
