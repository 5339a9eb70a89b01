//! Foreign PTX that uses what the project's own kernels never do, and the PTX backend once
//! refused: `warpSize` (`mov.u32 %r, WARP_SZ`), `assert` (`call.uni __assertfail`), bf16 atomics
//! (`atom.add.noftz.bf16x2`) and conversions (`cvt.rn.bf16.s32`), and under `-G` a helper that
//! returns a 16-byte vector (`ld.param.v4.f32` of its return value). The sources are
//! `tests/foreign/cuda/refusals.cu`, compiled by NVRTC at the option levels of `foreign.rs`
//! (`tests/foreign/generate.py`; the PTX is committed, so this test needs no NVRTC).

use emu::EmuErrorKind;
use half::bf16;
use host::runtime::{Backend, param};
use host::{LaunchConfig, Runtime};
use ptx::exec::Program;

/// NVRTC's option levels, as `generate.py` names the files.
const LEVELS: [&str; 6] = ["default", "G", "lineinfo", "fastmath", "nofma", "Ofc"];

/// The committed PTX of `refusals.cu` at `level`.
fn fixture(level: &str) -> &'static str {
    let path = format!(
        "{}/foreign/ptx/refusals.{level}.ptx",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    Box::leak(text.into_boxed_str())
}

/// The PTX backend on `level`'s module, and its program.
fn runtime(level: &str) -> (Runtime, &'static Program) {
    let program = Program::load(fixture(level), format!("refusals.{level}"))
        .unwrap_or_else(|e| panic!("{level}: {e}"));
    (Runtime::ptx(program), program)
}

/// Launches `name` with pointer arguments `ptrs` and then the 4-byte scalars `ints`.
fn launch(
    rt: &Runtime,
    name: &'static str,
    cfg: LaunchConfig,
    ptrs: &[usize],
    ints: &[i32],
) -> host::Result<emu::LaunchCounters> {
    let Backend::Ptx(device) = rt.backend() else {
        unreachable!()
    };
    let mut params: Vec<*mut std::ffi::c_void> = ptrs.iter().map(param).collect();
    params.extend(ints.iter().map(param));
    let mut sizes = vec![8; ptrs.len()];
    sizes.extend(ints.iter().map(|_| 4));
    // SAFETY: each pointer argument is 8 bytes and points into a live buffer of the runtime of
    // the length the kernel reads (the emulator checks every access anyway); each int 4 bytes.
    unsafe { device.launch(name, &cfg, &params, &sizes) }
}

#[test]
fn every_entry_decodes_at_every_level_but_a_call_through_a_pointer_which_names_its_register() {
    for level in LEVELS {
        let (_, program) = runtime(level);
        for (name, kernel) in program.entries() {
            match (name, kernel) {
                (_, Ok(_)) => {}
                ("apply_pointer", Err(why)) => assert!(
                    why.contains("indirect call through register `%rd")
                        && why.contains("prototype"),
                    "{level}: {why}"
                ),
                (name, Err(why)) => panic!("{level}: {name} is refused: {why}"),
            }
        }
    }
}

#[test]
fn warp_size_is_32() {
    let cfg = LaunchConfig::linear(2, 96);
    let want: Vec<i32> = (0..192).map(|t| (t % 96 / 32) * 100 + t % 32).collect();
    for level in LEVELS {
        let (rt, _) = runtime(level);
        let out = rt.alloc::<i32>(192).unwrap();
        launch(&rt, "warp_and_lane", cfg, &[out.ptr().addr()], &[]).unwrap();
        assert_eq!(rt.download(&out).unwrap(), want, "{level}");
    }
}

/// The line of `refusals.cu` that holds `text`, 1-based.
fn source_line(text: &str) -> usize {
    let path = format!("{}/foreign/cuda/refusals.cu", env!("CARGO_MANIFEST_DIR"));
    let source = std::fs::read_to_string(&path).unwrap();
    1 + source.lines().position(|l| l.contains(text)).unwrap()
}

#[test]
fn a_failed_assert_ends_the_launch_with_its_message_file_and_line() {
    let (n, threads) = (300usize, 128u32);
    let line = source_line("check(s >= 0 && s < n);");
    for level in LEVELS {
        let (rt, _) = runtime(level);
        // Thread t writes itself to slot 2t: every slot in range, the assert holds.
        let mut slots: Vec<i32> = (0..threads as i32).map(|t| 2 * t).collect();
        let out = rt.upload(&vec![-1i32; n]).unwrap();
        let run = |slots: &[i32]| {
            let s = rt.upload(slots).unwrap();
            let ptrs = [s.ptr().addr(), out.ptr().addr()];
            launch(
                &rt,
                "checked_scatter",
                LaunchConfig::linear(1, threads),
                &ptrs,
                &[n as i32],
            )
        };
        run(&slots).unwrap_or_else(|e| panic!("{level}: {e}"));
        let got = rt.download(&out).unwrap();
        for t in 0..threads as usize {
            assert_eq!(got[2 * t], t as i32, "{level}");
        }
        // Thread 37's slot is past the end: its assert fails and the launch ends.
        slots[37] = n as i32;
        let err = suite::emu_error(run(&slots));
        let EmuErrorKind::Panic { thread, message } = &err.kind else {
            panic!("{level}: {err}")
        };
        assert_eq!(thread.x, 37, "{level}: {err}");
        let want = format!(
            "device-side assertion `s >= 0 && s < n` failed at refusals.cu:{line} in `checked_scatter`"
        );
        assert!(message.contains(&want), "{level}: {message}");
    }
}

#[test]
fn bf16x2_atomic_adds_sum_each_half() {
    // 256 threads add (1, 0.5) to one of 8 bin pairs, thread t to pair t % 8 (32 each: exact
    // in bf16, as are the halves' 16).
    let (bins, threads) = (8usize, 256usize);
    let index: Vec<i32> = (0..threads as i32).map(|t| t % bins as i32).collect();
    let pair = |lo: f32, hi: f32| {
        u32::from(bf16::from_f32(lo).to_bits()) | (u32::from(bf16::from_f32(hi).to_bits()) << 16)
    };
    let count = (threads / bins) as f32;
    for level in LEVELS {
        let (rt, _) = runtime(level);
        let idx = rt.upload(&index).unwrap();
        let hist = rt.upload(&vec![pair(0.0, 0.0); bins]).unwrap();
        let ptrs = [idx.ptr().addr(), hist.ptr().addr()];
        launch(
            &rt,
            "bf16x2_histogram",
            LaunchConfig::linear(4, 64),
            &ptrs,
            &[],
        )
        .unwrap();
        assert_eq!(
            rt.download(&hist).unwrap(),
            vec![pair(count, count / 2.0); bins],
            "{level}"
        );
    }
}

#[test]
fn integers_convert_to_bf16_rounded_to_nearest_even() {
    // Exact values, ties both ways (257 between 256 and 258 goes to 256, 259 to 260), the
    // extremes (|i32::MIN| is a power of two; i32::MAX rounds up to it).
    let mut input = vec![0, 1, -1, 255, 256, 257, 259, -259, 1 << 24, (1 << 24) + 1];
    input.extend([
        16_777_217 * 3,
        i32::MAX,
        i32::MIN,
        123_456_789,
        -987_654_321,
    ]);
    input.resize(64, 7);
    let want: Vec<u16> = input
        .iter()
        .map(|&x| bf16::from_f64(f64::from(x)).to_bits())
        .collect();
    assert_eq!(want[5], bf16::from_f32(256.0).to_bits());
    assert_eq!(want[6], bf16::from_f32(260.0).to_bits());
    for level in LEVELS {
        let (rt, _) = runtime(level);
        let a = rt.upload(&input).unwrap();
        let out = rt.alloc::<u16>(64).unwrap();
        let ptrs = [a.ptr().addr(), out.ptr().addr()];
        launch(&rt, "int_to_bf16", LaunchConfig::linear(1, 64), &ptrs, &[]).unwrap();
        assert_eq!(rt.download(&out).unwrap(), want, "{level}");
    }
}

#[test]
fn a_helper_returning_a_float4_is_read_back_as_one_vector() {
    let n = 256;
    let input = host::reference::uniform(4 * n, 3, -1.0, 1.0);
    let want: Vec<f32> = input.chunks(4).map(|q| q[0] + q[1] + q[2] + q[3]).collect();
    for level in LEVELS {
        let (rt, _) = runtime(level);
        let a = rt.upload(&input).unwrap();
        let out = rt.alloc::<f32>(n).unwrap();
        let ptrs = [a.ptr().addr(), out.ptr().addr()];
        launch(
            &rt,
            "sum_of_quads",
            LaunchConfig::linear(2, 128),
            &ptrs,
            &[],
        )
        .unwrap();
        assert_eq!(rt.download(&out).unwrap(), want, "{level}");
    }
}
