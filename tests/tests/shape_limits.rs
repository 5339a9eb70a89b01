//! Shapes too large for memory or for the launch grid are refused with errors that name the
//! user's dimensions (not an arithmetic-overflow panic, not a grid axis).

use host::ops::attention::{self, AttentionParams, AttentionShape};
use host::ops::gemm::{self, Epilogue, GemmKernel, GemmOperands, GemmShape};
use host::ops::transpose::{self, Variant};
use suite::emulator;

fn shape_error<T: std::fmt::Debug>(result: host::Result<T>) -> String {
    match result {
        Err(e @ host::Error::Shape(_)) => e.to_string(),
        other => panic!("expected a shape error, got {other:?}"),
    }
}

#[test]
fn a_transpose_whose_element_count_overflows_is_a_shape_error() {
    let (rt, _) = emulator();
    let (input, mut out) = (rt.alloc::<f32>(1).unwrap(), rt.alloc::<f32>(1).unwrap());
    let msg = shape_error(transpose::transpose(
        &rt,
        Variant::Shared,
        &input,
        1 << 33,
        1 << 31,
        &mut out,
    ));
    assert!(
        msg.contains("rows x cols") && msg.contains("8589934592 x 2147483648"),
        "{msg}"
    );
}

#[test]
fn a_transpose_taller_than_the_grid_names_rows() {
    let (rt, _) = emulator();
    // 2^22 rows of one column: 131072 tiles of 32 rows along y, more than 65535.
    let rows = 1 << 22;
    let (input, mut out) = (
        rt.alloc::<f32>(rows).unwrap(),
        rt.alloc::<f32>(rows).unwrap(),
    );
    let msg = shape_error(transpose::transpose(
        &rt,
        Variant::Naive,
        &input,
        rows,
        1,
        &mut out,
    ));
    assert!(msg.contains(&format!("rows = {rows}")), "{msg}");
}

#[test]
fn a_gemm_of_two_to_the_forty_cubed_is_a_shape_error() {
    let (rt, _) = emulator();
    let ops = GemmOperands::upload(&rt, GemmKernel::Tiled, &[0.0], &[0.0]).unwrap();
    let mut c = rt.alloc::<f32>(1).unwrap();
    let n = 1 << 40;
    let shape = GemmShape::new(n, n, n);
    let msg = shape_error(gemm::gemm(
        &rt,
        GemmKernel::Tiled,
        &ops,
        &mut c,
        shape,
        Epilogue::Overwrite,
    ));
    assert!(
        msg.contains("M x K") && msg.contains(&format!("{n} x {n}")),
        "{msg}"
    );
}

#[test]
fn a_gemm_with_more_rows_than_the_grid_covers_names_m() {
    let (rt, _) = emulator();
    let m = 1 << 21;
    let a = vec![0.0; m];
    // 16-row tiles: 131072 along y. (The register-blocked step's 128-row tiles cover it.)
    for kernel in [GemmKernel::Naive, GemmKernel::Tiled] {
        let ops = GemmOperands::upload(&rt, kernel, &a, &[0.0]).unwrap();
        let mut c = rt.alloc::<f32>(m).unwrap();
        let shape = GemmShape::new(m, 1, 1);
        let msg = shape_error(gemm::gemm(
            &rt,
            kernel,
            &ops,
            &mut c,
            shape,
            Epilogue::Overwrite,
        ));
        assert!(
            msg.contains(&format!("M = {m}")) && msg.contains("split"),
            "{}: {msg}",
            kernel.name()
        );
    }
}

#[test]
fn attention_with_two_to_the_twenty_heads_is_refused_naming_them() {
    let (rt, _) = emulator();
    let params = AttentionParams::standard(64, false);
    let one = || rt.alloc::<f32>(1).unwrap();
    let (q, k, v) = (one(), one(), one());
    let (mut o, mut lse) = (one(), one());
    // Too many elements for the address space: the shape helpers saturate, the op refuses.
    let huge = AttentionShape::new(1 << 20, 1 << 20, 1 << 20, 64);
    let msg = shape_error(attention::fused(
        &rt, &q, &k, &v, &mut o, &mut lse, &huge, &params,
    ));
    assert!(msg.contains("batch x heads x n_q x head_dim"), "{msg}");
    // Addressable, but more heads than the grid's y axis holds.
    let shape = AttentionShape::new(1, 1 << 20, 1, 64);
    let (q, k, v) = (
        rt.alloc::<f32>(shape.q_elems()).unwrap(),
        rt.alloc::<f32>(shape.kv_elems()).unwrap(),
        rt.alloc::<f32>(shape.kv_elems()).unwrap(),
    );
    let mut o = rt.alloc::<f32>(shape.q_elems()).unwrap();
    let mut lse = rt.alloc::<f32>(shape.lse_elems()).unwrap();
    let msg = shape_error(attention::fused(
        &rt, &q, &k, &v, &mut o, &mut lse, &shape, &params,
    ));
    assert!(msg.contains("batch x heads = 1048576"), "{msg}");
}

#[test]
fn hopper_attention_refuses_tensor_maps_built_for_other_buffers() {
    // The kernel reads Q, K and V through the tensor maps, so maps of other buffers would read
    // those (or freed memory): refused, while the maps of the same buffers launch.
    let (rt, _) = emulator();
    let shape = AttentionShape::new(1, 1, 64, 64);
    let params = AttentionParams::standard(64, false);
    let qkv = || {
        let x = vec![half::bf16::ZERO; shape.q_elems()];
        [
            rt.upload(&x).unwrap(),
            rt.upload(&x).unwrap(),
            rt.upload(&x).unwrap(),
        ]
    };
    let (built_for, other) = (qkv(), qkv());
    let maps =
        attention::WgmmaMaps::new(&rt, [&built_for[0], &built_for[1], &built_for[2]], &shape)
            .unwrap();
    let mut o = rt.alloc::<half::bf16>(shape.q_elems()).unwrap();
    let mut lse = rt.alloc::<f32>(shape.lse_elems()).unwrap();
    let mut launch = |[q, k, v]: &[host::DeviceBuffer<half::bf16>; 3]| {
        attention::fused_wgmma_with(&rt, &maps, [q, k, v], &mut o, &mut lse, &shape, &params)
    };
    assert!(launch(&built_for).is_ok());
    let msg = shape_error(launch(&other));
    assert!(
        msg.contains("tensor maps built for other Q, K, V buffers"),
        "{msg}"
    );
}

#[test]
fn a_strided_copy_whose_last_index_overflows_is_a_shape_error() {
    let (rt, _) = emulator();
    let src = rt.alloc::<f32>(4).unwrap();
    let mut dst = rt.alloc::<f32>(3).unwrap();
    let msg = shape_error(transpose::copy_strided(
        &rt,
        &src,
        usize::MAX / 2 + 1,
        &mut dst,
    ));
    assert!(msg.contains("stride"), "{msg}");
}
