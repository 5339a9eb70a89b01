//! The profiler's view of the transposes and the strided copy: the lesson of coalescing and bank
//! conflicts, checked number by number. Their outputs against the CPU reference and their bytes
//! against the cost model are `registered.rs`'s: they are registered kernels.

use emu::{Profile, SiteStats};
use host::ops::transpose::{self, Variant};
use host::reference;
use suite::{counting, runtime};

#[test]
fn a_source_too_short_for_the_stride_is_refused() {
    let rt = runtime();
    let src = rt.alloc::<f32>(10).unwrap();
    let mut dst = rt.alloc::<f32>(4).unwrap();
    let err = transpose::copy_strided(&rt, &src, 4, &mut dst)
        .unwrap_err()
        .to_string();
    assert!(err.contains("at least 13 elements, got 10"), "{err}");
}

fn sites<'p>(profile: &'p Profile, kernel: &str, space: &str, access: &str) -> Vec<&'p SiteStats> {
    profile.kernels[kernel]
        .iter()
        .filter(|s| s.space == space && s.access == access)
        .collect()
}

#[test]
fn a_strided_read_touches_32_sectors_per_request_and_a_contiguous_one_4() {
    let (rt, _) = counting();
    let n = 1024;
    let src = rt.upload(&reference::uniform(n * 32, 1, 0.0, 1.0)).unwrap();
    let mut dst = rt.alloc::<f32>(n).unwrap();
    for (stride, sectors) in [(1usize, 4.0), (2, 8.0), (8, 32.0), (32, 32.0)] {
        let profiled = rt.with_options(|o| o.profiling = true);
        let (copied, observed) =
            profiled.observe(|rt| transpose::copy_strided(rt, &src, stride, &mut dst));
        copied.unwrap();
        let profile = observed.profile;
        let read = sites(&profile, "copy_strided", "global", "read");
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].requests, (n / 32) as u64);
        assert_eq!(read[0].sectors_per_request(), sectors, "stride {stride}");
        assert_eq!(
            read[0].ideal_sectors,
            4 * (n / 32) as u64,
            "each request asks for 128 bytes"
        );
        let write = sites(&profile, "copy_strided", "global", "write");
        assert_eq!(
            write[0].sectors_per_request(),
            4.0,
            "the writes stay contiguous"
        );
    }
}

#[test]
fn a_column_read_of_a_32_wide_tile_is_32_way_and_padding_removes_it() {
    let (rt, _) = counting();
    let (rows, cols) = (64, 96);
    let d_in = rt
        .upload(&reference::uniform(rows * cols, 2, -1.0, 1.0))
        .unwrap();
    let mut out = rt.alloc::<f32>(rows * cols).unwrap();
    let profiled = rt.with_options(|o| o.profiling = true);
    let ((), observed) = profiled.observe(|rt| {
        for v in Variant::ALL {
            transpose::transpose(rt, v, &d_in, rows, cols, &mut out).unwrap();
        }
    });
    let profile = observed.profile;
    let conflict =
        |kernel: &str, access: &str| sites(&profile, kernel, "shared", access)[0].conflict_degree();
    assert_eq!(
        conflict("transpose_shared", "write"),
        1.0,
        "tile rows are written conflict-free"
    );
    assert_eq!(
        conflict("transpose_shared", "read"),
        32.0,
        "a column of a 32-wide f32 tile is one bank"
    );
    assert_eq!(
        conflict("transpose_padded", "read"),
        1.0,
        "pitch 33 spreads the column over 32 banks"
    );
    let stores = |kernel: &str| sites(&profile, kernel, "global", "write")[0].sectors_per_request();
    assert_eq!(
        stores("transpose_naive"),
        32.0,
        "each lane stores into its own output row"
    );
    assert_eq!(stores("transpose_shared"), 4.0);
    assert_eq!(stores("transpose_padded"), 4.0);
}

#[test]
fn profiling_changes_no_result() {
    let (rt, _) = counting();
    let (rows, cols) = (33, 65);
    let input = reference::uniform(rows * cols, 3, -1.0, 1.0);
    let d_in = rt.upload(&input).unwrap();
    let mut out = rt.alloc::<f32>(rows * cols).unwrap();
    let profiled = rt.with_options(|o| o.profiling = true);
    transpose::transpose(&profiled, Variant::Shared, &d_in, rows, cols, &mut out).unwrap();
    assert_eq!(
        rt.download(&out).unwrap(),
        reference::transpose(&input, rows, cols)
    );
}

/// Options are the launch's own: the runtime a view was made from still runs with the
/// defaults, so its launches are not profiled.
#[test]
fn a_profiled_view_leaves_the_runtime_it_came_from_unprofiled() {
    let (rt, _) = counting();
    let (rows, cols) = (32, 32);
    let d_in = rt.upload(&vec![1.0f32; rows * cols]).unwrap();
    let mut out = rt.alloc::<f32>(rows * cols).unwrap();
    let profiled = rt.with_options(|o| o.profiling = true);
    let mut run = |rt: &host::Runtime| {
        let (ran, observed) =
            rt.observe(|rt| transpose::transpose(rt, Variant::Naive, &d_in, rows, cols, &mut out));
        ran.unwrap();
        observed.profile
    };
    assert!(run(&profiled).kernels.contains_key("transpose_naive"));
    assert!(run(&rt).kernels.is_empty());
}
