//! The mistakes learners make, planted in the exercises' kernels (docs/exercises.md), and what
//! the emulator says about each: the mistake in the learner's terms, the Rust line (each planted
//! line is marked `// <- the mistake`, and the report must point at it) and, where it helps, the
//! chapter. docs/exercises.md pastes these reports; the last test keeps the pastes current.

use emu::EmuErrorKind;
use emu::LaunchConfig;
use kernels::cuda::thread::{block_idx_x, index_1d, sync_threads, thread_idx_x};
use kernels::cuda::warp::{WARP_SIZE, shuffle_down};
use kernels::cuda::{GlobalPtr, SharedPtr};
use kernels::exercises::shapes::{
    ATT_D, ATT_KEYS, ATT_ROWS, BLOCK_THREADS, MAP_THREADS, STENCIL_RADIUS,
};
use kernels::{kernel, shared_array};
use suite::emu_error;

/// The line of this file that holds the `n`th (from 0) `// <- the mistake` marker.
fn mistake_line(n: usize) -> u32 {
    let marker = concat!("// <- the", " mistake");
    include_str!("mistakes.rs")
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(marker) && !l.trim_start().starts_with("//"))
        .nth(n)
        .map(|(i, _)| i as u32 + 1)
        .expect("a marked line")
}

/// `tests/tests/mistakes.rs:LINE:`, as a report names the planted line.
fn at_line(n: usize) -> String {
    format!("tests/tests/mistakes.rs:{}:", mistake_line(n))
}

/// The emulator's report of one launch of a planted kernel: `blocks` blocks of `threads`.
fn report(
    emu: &emu::Emulator,
    name: &'static str,
    (blocks, threads): (u32, u32),
    kernel: impl Fn() + Sync,
) -> emu::EmuError {
    emu_error(emu.launch(name, &LaunchConfig::linear(blocks, threads), kernel))
}

fn buffer(rt: &host::Runtime, n: usize) -> host::DeviceBuffer<f32> {
    rt.upload(&vec![1.0f32; n]).unwrap()
}

kernel! {
    /// Exercise 3 without the barrier between the writes of the shared array and the first reads.
    pub unsafe fn sum_without_the_first_barrier(x: GlobalPtr<f32>, partial: GlobalPtr<f32>) {
        let sums: SharedPtr<f32> = shared_array![sums: [f32; BLOCK_THREADS as usize]];
        let t = thread_idx_x() as usize;
        unsafe { sums.write(t, x.read(index_1d() as usize)) }; // <- the mistake
        let mut stride = BLOCK_THREADS as usize / 2;
        while stride > 0 {
            if t < stride {
                unsafe { sums.write(t, sums.read(t) + sums.read(t + stride)) };
            }
            sync_threads();
            stride /= 2;
        }
        if t == 0 {
            unsafe { partial.write(block_idx_x() as usize, sums.read(0)) };
        }
    }
}

/// The report of `sum_without_the_first_barrier`.
fn sum_without_the_first_barrier_report() -> emu::EmuError {
    let (rt, emu) = suite::emulator();
    let (x, p) = (buffer(&rt, 256), buffer(&rt, 1));
    let (x, p) = (x.ptr(), p.ptr());
    report(&emu, "sum_without_the_first_barrier", (1, 256), || unsafe {
        sum_without_the_first_barrier(x, p)
    })
}

#[test]
fn a_missing_barrier_between_shared_writes_and_reads_names_both_lines() {
    let err = sum_without_the_first_barrier_report();
    let msg = err.to_string();
    assert!(matches!(err.kind, EmuErrorKind::SharedRace { .. }), "{msg}");
    assert!(
        msg.contains("no sync_threads between them")
            && msg.contains(&at_line(0))
            && msg.contains("a sync_threads() between the write and the read"),
        "{msg}"
    );
}

kernel! {
    /// Exercise 3 with its barrier inside `if t < stride`.
    pub unsafe fn sum_with_the_barrier_in_the_if(x: GlobalPtr<f32>, partial: GlobalPtr<f32>) {
        let sums: SharedPtr<f32> = shared_array![sums: [f32; BLOCK_THREADS as usize]];
        let t = thread_idx_x() as usize;
        unsafe { sums.write(t, x.read(index_1d() as usize)) };
        sync_threads();
        let mut stride = BLOCK_THREADS as usize / 2;
        while stride > 0 {
            if t < stride {
                unsafe { sums.write(t, sums.read(t) + sums.read(t + stride)) };
                sync_threads(); // <- the mistake
            }
            stride /= 2;
        }
        if t == 0 {
            unsafe { partial.write(block_idx_x() as usize, sums.read(0)) };
        }
    }
}

/// The report of `sum_with_the_barrier_in_the_if`.
fn sum_with_the_barrier_in_the_if_report() -> emu::EmuError {
    let (rt, emu) = suite::emulator();
    let (x, p) = (buffer(&rt, 256), buffer(&rt, 1));
    let (x, p) = (x.ptr(), p.ptr());
    report(
        &emu,
        "sum_with_the_barrier_in_the_if",
        (1, 256),
        || unsafe { sum_with_the_barrier_in_the_if(x, p) },
    )
}

#[test]
fn a_barrier_inside_if_tid_below_n_is_divergence_at_its_line() {
    let err = sum_with_the_barrier_in_the_if_report();
    let msg = err.to_string();
    assert!(
        matches!(err.kind, EmuErrorKind::BarrierDivergence { .. }),
        "{msg}"
    );
    assert!(
        msg.contains(&at_line(1)) && msg.contains("inside an `if` on the thread index"),
        "{msg}"
    );
}

kernel! {
    /// Exercise 4 with a tile one element short: room for one halo element, not two.
    pub unsafe fn stencil_with_a_short_tile(x: GlobalPtr<f32>, out: GlobalPtr<f32>, n: u32) {
        const R: usize = STENCIL_RADIUS;
        let tile: SharedPtr<f32> = shared_array![tile: [f32; MAP_THREADS as usize + STENCIL_RADIUS]];
        let t = thread_idx_x() as usize;
        let i = index_1d() as usize;
        unsafe { tile.write(t + R, x.read(i)) };
        if t < R {
            let right = (i + MAP_THREADS as usize).min(n as usize - 1);
            unsafe { tile.write(t + MAP_THREADS as usize + R, x.read(right)) }; // <- the mistake
        }
        sync_threads();
        let sum = unsafe { tile.read(t) + tile.read(t + 1) + tile.read(t + 2) };
        unsafe { out.write(i, sum * (1.0 / 3.0)) };
    }
}

/// The report of `stencil_with_a_short_tile`.
fn stencil_with_a_short_tile_report() -> emu::EmuError {
    let (rt, emu) = suite::emulator();
    let (x, out) = (buffer(&rt, 256), buffer(&rt, 256));
    let (x, out) = (x.ptr(), out.ptr());
    report(&emu, "stencil_with_a_short_tile", (1, 256), || unsafe {
        stencil_with_a_short_tile(x, out, 256)
    })
}

#[test]
fn an_index_one_past_a_shared_array_names_the_array_its_size_and_the_line() {
    let err = stencil_with_a_short_tile_report();
    let msg = err.to_string();
    assert!(
        matches!(err.kind, EmuErrorKind::OutOfBounds { .. }),
        "{msg}"
    );
    assert!(
        msg.contains("index 257 of shared array `tile` ([f32; 257], 1028 bytes), whose last index is 256: one past the end")
            && msg.contains(&at_line(2)),
        "{msg}"
    );
}

/// Exercise 5's warp sum, with the mask of half the warp where all 32 lanes take part.
#[inline(always)]
fn warp_sum_half_mask(mut v: f32) -> f32 {
    let mut offset = WARP_SIZE / 2;
    while offset > 0 {
        v += shuffle_down(0x0000_ffff, v, offset); // <- the mistake
        offset /= 2;
    }
    v
}

kernel! {
    /// Exercise 5's first step with the wrong mask.
    pub unsafe fn dot_with_half_a_mask(x: GlobalPtr<f32>, partial: GlobalPtr<f32>) {
        let i = index_1d() as usize;
        let s = warp_sum_half_mask(unsafe { x.read(i) * x.read(i) });
        if thread_idx_x() == 0 {
            unsafe { partial.write(0, s) };
        }
    }
}

/// The report of `dot_with_half_a_mask`.
fn dot_with_half_a_mask_report() -> emu::EmuError {
    let (rt, emu) = suite::emulator();
    let (x, p) = (buffer(&rt, 32), buffer(&rt, 1));
    let (x, p) = (x.ptr(), p.ptr());
    report(&emu, "dot_with_half_a_mask", (1, 32), || unsafe {
        dot_with_half_a_mask(x, p)
    })
}

#[test]
fn a_shuffle_whose_mask_leaves_out_a_lane_that_executes_it_names_the_lane() {
    let err = dot_with_half_a_mask_report();
    let msg = err.to_string();
    assert!(
        matches!(err.kind, EmuErrorKind::WarpCollective { .. }),
        "{msg}"
    );
    assert!(
        msg.contains("lane 16 executes it but is not in its own mask")
            && msg.contains(&at_line(3))
            && msg.contains("FULL_MASK when all 32 do"),
        "{msg}"
    );
}

kernel! {
    /// Exercise 3 finished in one launch: each block adds its sum to one total, unordered.
    pub unsafe fn every_block_adds_to_one_total(x: GlobalPtr<f32>, total: GlobalPtr<f32>) {
        if thread_idx_x() == 0 {
            let mine = unsafe { x.read(block_idx_x() as usize) };
            unsafe { total.write(0, total.read(0) + mine) }; // <- the mistake
        }
    }
}

/// The report of `every_block_adds_to_one_total`.
fn every_block_adds_to_one_total_report() -> emu::EmuError {
    let (rt, emu) = suite::emulator();
    let (x, total) = (buffer(&rt, 2), buffer(&rt, 1));
    let (x, total) = (x.ptr(), total.ptr());
    report(&emu, "every_block_adds_to_one_total", (2, 32), || unsafe {
        every_block_adds_to_one_total(x, total)
    })
}

#[test]
fn blocks_adding_to_one_global_total_is_a_race_that_says_how_to_combine_blocks() {
    let err = every_block_adds_to_one_total_report();
    let msg = err.to_string();
    assert!(matches!(err.kind, EmuErrorKind::GlobalRace { .. }), "{msg}");
    assert!(
        msg.contains("nothing orders two blocks")
            && msg.contains("give each block its own output")
            && msg.contains(&at_line(4)),
        "{msg}"
    );
}

#[test]
fn a_block_larger_than_the_shared_array_it_fills_names_the_array_and_its_size() {
    // Exercise 3's solution, launched with 512 threads per block: its array holds 256.
    let (rt, emu) = suite::emulator();
    let (x, p) = (buffer(&rt, 512), buffer(&rt, 1));
    let (x, p) = (x.ptr(), p.ptr());
    let msg = report(&emu, "e03_block_sum", (1, 512), || unsafe {
        kernels::solutions::e03_block_sum(x, p, 512)
    })
    .to_string();
    assert!(
        msg.contains("thread (256, 0, 0) write")
            && msg.contains("index 256 of shared array `sums` ([f32; 256], 1024 bytes), whose last index is 255: one past the end")
            && msg.contains("kernels/src/solutions/e03_block_sum.rs:"),
        "{msg}"
    );
}

kernel! {
    /// Sums `tiles` tiles of 256 with one shared tile, without the barrier at the end of the
    /// loop body: the next iteration's writes race with this iteration's reads.
    pub unsafe fn tiles_without_the_second_barrier(x: GlobalPtr<f32>, total: GlobalPtr<f32>, tiles: u32) {
        let tile: SharedPtr<f32> = shared_array![tile: [f32; BLOCK_THREADS as usize]];
        let t = thread_idx_x() as usize;
        let mut acc = 0.0f32;
        for k in 0..tiles as usize {
            unsafe { tile.write(t, x.read(k * BLOCK_THREADS as usize + t)) }; // <- the mistake
            sync_threads();
            if t == 0 {
                for j in 0..BLOCK_THREADS as usize {
                    acc += unsafe { tile.read(j) };
                }
            }
        }
        if t == 0 {
            unsafe { total.write(0, acc) };
        }
    }
}

/// The report of `tiles_without_the_second_barrier`.
fn tiles_without_the_second_barrier_report() -> emu::EmuError {
    let (rt, emu) = suite::emulator();
    let (x, total) = (buffer(&rt, 512), buffer(&rt, 1));
    let (x, total) = (x.ptr(), total.ptr());
    report(
        &emu,
        "tiles_without_the_second_barrier",
        (1, 256),
        || unsafe { tiles_without_the_second_barrier(x, total, 2) },
    )
}

#[test]
fn a_race_across_two_iterations_of_a_loop_says_so() {
    let err = tiles_without_the_second_barrier_report();
    let msg = err.to_string();
    assert!(matches!(err.kind, EmuErrorKind::SharedRace { .. }), "{msg}");
    assert!(
        msg.contains(&format!("the write at {}", at_line(5)))
            && msg.contains("had gone round a loop: it is the next iteration's")
            && msg.contains("at the end of the loop body"),
        "{msg}"
    );
}

kernel! {
    /// Exercise 12's loop over key tiles, loading each tile of `k` without the guard on its
    /// rows: the last tile of 17 keys holds one key and 15 rows past the end of `k`.
    pub unsafe fn key_tiles_without_the_guard(k: GlobalPtr<f32>, n_k: u32) {
        let k_tile: SharedPtr<f32> = shared_array![k_tile: [f32; ATT_KEYS * ATT_D]];
        let mut j0 = 0;
        while j0 < n_k as usize {
            sync_threads();
            let mut e = thread_idx_x() as usize;
            while e < ATT_KEYS * ATT_D {
                unsafe { k_tile.write(e, k.read(j0 * ATT_D + e)) }; // <- the mistake
                e += ATT_ROWS as usize;
            }
            sync_threads();
            j0 += ATT_KEYS;
        }
    }
}

/// The report of `key_tiles_without_the_guard`: 17 keys, two tiles.
fn key_tiles_without_the_guard_report() -> emu::EmuError {
    let (rt, emu) = suite::emulator();
    let k = buffer(&rt, 17 * ATT_D);
    let k = k.ptr();
    report(
        &emu,
        "key_tiles_without_the_guard",
        (1, ATT_ROWS),
        || unsafe { key_tiles_without_the_guard(k, 17) },
    )
}

#[test]
fn a_partial_last_tile_loaded_without_a_guard_names_the_buffer_and_the_element() {
    let err = key_tiles_without_the_guard_report();
    let msg = err.to_string();
    assert!(
        matches!(
            err.kind,
            EmuErrorKind::OutOfBounds {
                space: emu::MemorySpace::Global,
                ..
            }
        ),
        "{msg}"
    );
    // Thread 0's second load of the second tile: row 18 of a 17-row `k`.
    assert!(
        msg.contains(&at_line(6))
            && msg.contains("past the end of the buffer of 544 x f32")
            && msg.contains("element 576 of it, one past its last is 544"),
        "{msg}"
    );
}

// Below the reports docs/exercises.md pastes, whose line numbers this would move.
use host::exercises::{self, Checked, Exercise, ExerciseRuntime, Failure, Shape, Want, Which};
use host::registry;

kernel! {
    /// Exercise 1 reading `x` at the thread's index in its block instead of the element's: block
    /// 0 is right, every later block stores values computed from block 0's inputs.
    pub unsafe fn map_reading_the_thread_index(x: GlobalPtr<f32>, y: GlobalPtr<f32>, a: f32, b: f32, n: u32) {
        let (i, t) = (index_1d() as usize, thread_idx_x() as usize);
        if i < n as usize {
            unsafe { y.write(i, a * x.read(t) + b) }; // <- the mistake
        }
    }
}

/// What a wrong element's report says of a store by the first thread of block 1 at the `n`th
/// marked line.
fn first_of_block_1(kernel: &str, n: usize) -> String {
    format!(
        "last written by `{kernel}` block (1, 0, 0) thread (0, 0, 0) at {}",
        at_line(n)
    )
}

/// Exercise 1's check on `map_reading_the_thread_index` (on the emulator under either backend:
/// the planted kernel has no PTX), its output downloaded as the exercises' checks do, so that
/// `host::exercises::check` can rerun it watching the wrong element.
fn check_map_reading_the_thread_index(
    ert: &ExerciseRuntime,
    s: Shape,
    _seed: u64,
) -> Result<Checked, Failure> {
    let rt = ert.runtime();
    let n = s[0];
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let (dx, dy) = (rt.upload(&x)?, rt.alloc::<f32>(n)?);
    let (xp, yp) = (dx.ptr(), dy.ptr());
    let emu = rt.emulated().expect("an emulator");
    let cfg = LaunchConfig::for_elements(n as u32, MAP_THREADS);
    // The runtime's options: the rerun's carry the store watch.
    let (_, observed) = emu
        .launch_with(
            "map_reading_the_thread_index",
            &cfg,
            &rt.options(),
            || unsafe { map_reading_the_thread_index(xp, yp, 2.0, 1.0, n as u32) },
        )
        .map_err(Failure::Launch)?;
    // The rerun's store watch reports through the runtime, as its own launches' do.
    rt.record(observed);
    let got = ert.download_output(&dy)?;
    let want: Vec<Want> = x
        .iter()
        .map(|&v| Want {
            value: 2.0 * f64::from(v) + 1.0,
            tolerance: 0.0,
        })
        .collect();
    let summary = exercises::compare(&got, &want, |i| format!("y[{i}]"))?;
    Ok(Checked { summary })
}

#[test]
fn a_wrong_value_names_the_block_thread_and_line_that_stored_it() {
    let planted = Exercise {
        check: check_map_reading_the_thread_index,
        ..*exercises::find("1").unwrap()
    };
    let ert = ExerciseRuntime::from_env(Which::Stub).unwrap();
    let err = exercises::check(&planted, &ert, [300, 1, 1], 1)
        .unwrap_err()
        .to_string();
    // Element 256, the first of block 1, read x[0].
    let stored = first_of_block_1("map_reading_the_thread_index", 7);
    assert!(
        err.contains("y[256] is 1, expected 513") && err.contains(&stored),
        "{err}"
    );
}

kernel! {
    /// `scaffold_elementwise` (`y[i] = 2 x[i] + 1`) reading `x` at the thread's index in its
    /// block, as `map_reading_the_thread_index`.
    pub unsafe fn scaffold_reading_the_thread_index(x: GlobalPtr<f32>, y: GlobalPtr<f32>, n: u32) {
        let (i, t) = (index_1d() as usize, thread_idx_x() as usize);
        if i < n as usize {
            unsafe { y.write(i, 2.0 * x.read(t) + 1.0) }; // <- the mistake
        }
    }
}

#[test]
fn a_registered_kernels_wrong_value_names_the_block_thread_and_line_that_stored_it() {
    let planted = registry::Spec {
        launch: |launcher, buffers, [n, ..]| {
            let (x, y, n) = (buffers.input::<f32>(0)?, buffers.output::<f32>()?, n as u32);
            kernels::launch_registered!(
                launcher,
                kernels::registry::LaunchConfig::for_elements(n, MAP_THREADS),
                scaffold_reading_the_thread_index(x, y, n)
            )
        },
        ..*registry::find("scaffold_elementwise").unwrap()
    };
    // The planted kernel has no PTX: the source emulator, whatever KERNELS_BACKEND says.
    let (rt, _) = suite::emulator();
    let dims = [300, 1, 1, 1, 1];
    let inputs = registry::inputs(&planted, dims, 1);
    let buffers = registry::upload(&rt, &planted, dims, &inputs).unwrap();
    registry::launch(&rt, &planted, &buffers).unwrap();
    let err = registry::check_output(&rt, &planted, &buffers, &inputs, &[0]).unwrap_err();
    let stored = first_of_block_1("scaffold_reading_the_thread_index", 8);
    assert!(
        err.contains("element 256 is") && err.contains(&stored),
        "{err}"
    );
}

#[test]
fn a_launch_larger_than_the_device_allows_is_refused_naming_the_limit() {
    // Exercise 1's solution with blocks of 2048 threads: refused before any thread runs.
    let ert = host::exercises::ExerciseRuntime::emulator(host::exercises::Which::Solution);
    let rt = ert.runtime();
    let (x, y) = (buffer(rt, 4096), buffer(rt, 4096));
    let (x, y, a, b, n) = (x.ptr(), y.ptr(), 1.0f32, 0.0f32, 4096u32);
    let err = host::launch!(
        rt,
        LaunchConfig::linear(2, 2048),
        solutions::e01_map(x, y, a, b, n)
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("threads per block requested 2048, but the device allows at most 1024"),
        "{err}"
    );
}

/// A report with the host addresses (which change from run to run) written `0x...`: a `0x` and
/// nine or more hex digits (masks and offsets have fewer).
fn normalised(report: &str) -> String {
    let mut out = String::new();
    let mut rest = report;
    while let Some(at) = rest.find("0x") {
        out.push_str(&rest[..at]);
        let digits = rest[at + 2..]
            .chars()
            .take_while(char::is_ascii_hexdigit)
            .count();
        if digits >= 9 {
            out.push_str("0x...");
        } else {
            out.push_str(&rest[at..at + 2 + digits]);
        }
        rest = &rest[at + 2 + digits..];
    }
    out + rest
}

/// docs/exercises.md pastes the reports of the planted mistakes, each in the first `text` block
/// after a `<!-- mistake: NAME -->` line: they must be what the emulator prints today.
#[test]
fn the_chapter_pastes_the_reports_as_the_emulator_prints_them() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/exercises.md");
    let chapter = std::fs::read_to_string(path).expect("docs/exercises.md");
    let reports = [
        (
            "sum_without_the_first_barrier",
            sum_without_the_first_barrier_report(),
        ),
        (
            "sum_with_the_barrier_in_the_if",
            sum_with_the_barrier_in_the_if_report(),
        ),
        (
            "stencil_with_a_short_tile",
            stencil_with_a_short_tile_report(),
        ),
        ("dot_with_half_a_mask", dot_with_half_a_mask_report()),
        (
            "every_block_adds_to_one_total",
            every_block_adds_to_one_total_report(),
        ),
        (
            "tiles_without_the_second_barrier",
            tiles_without_the_second_barrier_report(),
        ),
        (
            "key_tiles_without_the_guard",
            key_tiles_without_the_guard_report(),
        ),
    ];
    let mut stale = Vec::new();
    for (name, err) in reports {
        let marker = format!("<!-- mistake: {name} -->");
        let report = normalised(&err.to_string());
        let pasted = chapter.find(&marker).and_then(|at| {
            chapter[at..]
                .split("```text\n")
                .nth(1)
                .and_then(|b| b.split("\n```").next())
        });
        if pasted != Some(report.as_str()) {
            stale.push(format!("{marker}\n```text\n{report}\n```"));
        }
    }
    assert!(
        stale.is_empty(),
        "docs/exercises.md: each marker below must be followed by this block:\n\n{}",
        stale.join("\n\n")
    );
}
