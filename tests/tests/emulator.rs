//! The emulator's GPU semantics, shown with small kernels written for the purpose: four kinds of
//! deliberately broken kernel and the errors that name them, warp shuffles and the tensor-core
//! fragment layouts lane by lane, determinism, and launch limits.

use emu::{EmuErrorKind, MemorySpace};
use emu::{LaunchConfig, dim3};
use half::bf16;
use kernels::cuda::emu::Access;
use kernels::cuda::mma::{MmaInput, ldmatrix_x4, mma_m16n8k16};
use kernels::cuda::thread::{sync_threads, thread_idx_x};
use kernels::cuda::warp::{FULL_MASK, lane_id, shuffle_down, shuffle_idx, shuffle_up, shuffle_xor};
use kernels::cuda::{GlobalPtr, shared::dynamic_shared_mem};
use kernels::{kernel, shared_array};
use suite::{emu_error, emu_error_kind, emulator};

const BLOCK: u32 = 64;

kernel! {
    /// Broken: each thread reads its neighbour's slot without a barrier after the writes.
    pub unsafe fn racy_neighbour(out: GlobalPtr<f32>) {
        let tile = shared_array![tile: [f32; 64]];
        let t = thread_idx_x() as usize;
        unsafe { tile.write(t, t as f32) };
        // Missing: sync_threads();
        let v = unsafe { tile.read((t + 1) % 64) };
        unsafe { out.write(t, v) };
    }
}

kernel! {
    /// Fixed: the same with the barrier.
    pub unsafe fn synced_neighbour(out: GlobalPtr<f32>) {
        let tile = shared_array![tile: [f32; 64]];
        let t = thread_idx_x() as usize;
        unsafe { tile.write(t, t as f32) };
        sync_threads();
        let v = unsafe { tile.read((t + 1) % 64) };
        unsafe { out.write(t, v) };
    }
}

#[test]
fn a_shared_memory_race_names_both_threads_and_the_offset() {
    let (rt, emu) = emulator();
    let out = rt.alloc::<f32>(64).unwrap();
    let p = out.ptr();
    let err = emu_error(emu.launch(
        "racy_neighbour",
        &LaunchConfig::linear(1, BLOCK),
        || unsafe { racy_neighbour(p) },
    ));
    let EmuErrorKind::SharedRace {
        offset,
        first,
        second,
        ..
    } = err.kind.clone()
    else {
        panic!("{err}")
    };
    // Thread 0 wrote slot 0 and read slot 1 first; thread 1's write to slot 1 is the conflict.
    assert_eq!(offset, 4, "{err}");
    assert_eq!((first.thread.x, first.access), (0, Access::Read));
    assert_eq!((second.thread.x, second.access), (1, Access::Write));
    let msg = err.to_string();
    assert!(
        msg.contains("racy_neighbour")
            && msg.contains("data race")
            && msg.contains("block (0, 0, 0)"),
        "{msg}"
    );

    emu.launch(
        "synced_neighbour",
        &LaunchConfig::linear(1, BLOCK),
        || unsafe { synced_neighbour(p) },
    )
    .unwrap();
    let got = rt.download(&out).unwrap();
    assert_eq!(
        got,
        (0..64).map(|t| ((t + 1) % 64) as f32).collect::<Vec<_>>()
    );
}

kernel! {
    /// Broken: half the block skips the barrier.
    pub unsafe fn divergent_barrier(out: GlobalPtr<u32>) {
        let t = thread_idx_x();
        if t < 16 {
            sync_threads();
        }
        unsafe { out.write(t as usize, t) };
    }
}

kernel! {
    /// Broken: threads past the end return early, then the rest wait at a barrier.
    pub unsafe fn early_return_then_barrier(out: GlobalPtr<u32>, n: u32) {
        let t = thread_idx_x();
        if t >= n {
            return;
        }
        sync_threads();
        unsafe { out.write(t as usize, t) };
    }
}

#[test]
fn barrier_divergence_is_reported_not_hung() {
    let (rt, emu) = emulator();
    let out = rt.alloc::<u32>(64).unwrap();
    let p = out.ptr();
    let err = emu_error(emu.launch(
        "divergent_barrier",
        &LaunchConfig::linear(1, BLOCK),
        || unsafe { divergent_barrier(p) },
    ));
    let EmuErrorKind::BarrierDivergence { waiting, elsewhere } = &err.kind else {
        panic!("{err}")
    };
    assert_eq!(waiting[0].0.x, 0);
    assert_eq!(elsewhere[0].0.x, 16, "{err}");
    assert!(err.to_string().contains("has exited"), "{err}");

    let n = 40;
    let kind = emu_error_kind(emu.launch(
        "early_return_then_barrier",
        &LaunchConfig::linear(1, BLOCK),
        || unsafe { early_return_then_barrier(p, n) },
    ));
    let EmuErrorKind::BarrierDivergence { elsewhere, .. } = kind else {
        panic!("{kind:?}")
    };
    assert_eq!(elsewhere[0].0.x, n);
}

kernel! {
    /// Each half of the block at its own `sync_threads()`, as in a double-buffered GEMM: the
    /// first half writes the tile, the second reads it after its own barrier.
    pub unsafe fn halves_at_their_own_barriers(out: GlobalPtr<u32>) {
        let tile = shared_array![tile: [u32; 32]];
        let t = thread_idx_x();
        if t < 32 {
            unsafe { tile.write(t as usize, t * 3) };
            sync_threads();
        } else {
            sync_threads();
            let j = (t - 32) as usize;
            unsafe { out.write(j, tile.read(j)) };
        }
    }
}

/// The source kernel's barrier is `bar.sync 0` on a GPU: it counts arrivals by id (PTX ISA,
/// "bar, barrier"), so the halves meet, with a warning that names both source lines.
#[test]
fn halves_at_their_own_sync_threads_meet_with_a_warning_at_both_lines() {
    let (rt, emu) = emulator();
    let out = rt.alloc::<u32>(32).unwrap();
    let p = out.ptr();
    let (_, observed) = emu
        .launch_with(
            "halves_at_their_own_barriers",
            &LaunchConfig::linear(1, BLOCK),
            &emu.defaults(),
            || unsafe { halves_at_their_own_barriers(p) },
        )
        .unwrap();
    let want: Vec<u32> = (0..32).map(|t| t * 3).collect();
    assert_eq!(rt.download(&out).unwrap(), want);
    let found = &observed.divergent_barriers;
    assert_eq!(found.len(), 1, "{found:?}");
    let at = |(thread, site): (emu::Dim3, kernels::cuda::emu::Site)| {
        let kernels::cuda::emu::SiteKind::Source(l) = site.kind() else {
            panic!("a source site: {site}")
        };
        assert!(l.file().ends_with("emulator.rs"), "{site}");
        (thread.x, l.line())
    };
    let (first, second) = (at(found[0].first), at(found[0].second));
    assert_eq!((first.0, second.0), (0, 32));
    // The second half's barrier is two lines below the first half's.
    assert_eq!(second.1, first.1 + 2, "{}", found[0]);
}

kernel! {
    /// Broken: the classic off-by-one, no bounds check.
    pub unsafe fn unguarded_copy(src: GlobalPtr<f32>, dst: GlobalPtr<f32>) {
        let i = kernels::cuda::thread::index_1d() as usize;
        unsafe { dst.write(i, src.read(i)) };
    }
}

kernel! {
    /// Broken: indexes one past a shared array.
    pub unsafe fn shared_overrun(out: GlobalPtr<f32>) {
        let tile = shared_array![tile: [f32; 64]];
        let t = thread_idx_x() as usize;
        unsafe { tile.write(t + 1, 1.0) };
        sync_threads();
        unsafe { out.write(t, 0.0) };
    }
}

#[test]
fn out_of_bounds_accesses_name_the_thread_and_address() {
    let (rt, emu) = emulator();
    // 100 elements, two blocks of 64: threads 100..128 of block 1 read past the end.
    let src = rt.upload(&vec![1.0f32; 100]).unwrap();
    let dst = rt.alloc::<f32>(100).unwrap();
    let (s, d) = (src.ptr(), dst.ptr());
    let err = emu_error(emu.launch(
        "unguarded_copy",
        &LaunchConfig::linear(2, BLOCK),
        || unsafe { unguarded_copy(s, d) },
    ));
    let EmuErrorKind::OutOfBounds {
        space,
        by,
        addr,
        bytes,
        near,
    } = err.kind
    else {
        panic!("{err}")
    };
    assert_eq!(
        (space, by.access, bytes),
        (MemorySpace::Global, Access::Read, 4)
    );
    // The first read past the end is in src's red zone: named, 0 bytes past its end (the
    // threads run in order, so thread 36 of block 1 is the first to read src[100]).
    let near = near.expect("the buffer the read overran");
    assert_eq!((near.start, near.bytes, near.past_end), (s.addr(), 400, 0));
    assert!(
        err.to_string()
            .contains("0 bytes past the end of the buffer of 100 x f32"),
        "{err}"
    );
    assert_eq!(
        (err.block.x, by.thread.x),
        (1, 36),
        "global thread 100 is block 1, thread 36"
    );
    assert_eq!(addr, s.addr() + 400);

    let kind = emu_error_kind(emu.launch(
        "shared_overrun",
        &LaunchConfig::linear(1, BLOCK),
        || unsafe { shared_overrun(d) },
    ));
    let EmuErrorKind::OutOfBounds { space, by, .. } = kind else {
        panic!("{kind:?}")
    };
    assert_eq!(
        (space, by.thread.x, by.access),
        (MemorySpace::Shared, 63, Access::Write)
    );
}

kernel! {
    /// Broken: only half the warp executes a full-mask shuffle.
    pub unsafe fn half_warp_shuffle(out: GlobalPtr<u32>) {
        let lane = lane_id();
        let mut v = lane;
        if lane < 16 {
            v = shuffle_xor(FULL_MASK, v, 1);
        }
        unsafe { out.write(thread_idx_x() as usize, v) };
    }
}

#[test]
fn a_collective_missing_lanes_of_its_mask_is_reported() {
    let (rt, emu) = emulator();
    let out = rt.alloc::<u32>(64).unwrap();
    let p = out.ptr();
    let err = emu_error(emu.launch(
        "half_warp_shuffle",
        &LaunchConfig::linear(1, BLOCK),
        || unsafe { half_warp_shuffle(p) },
    ));
    let EmuErrorKind::WarpCollective {
        warp, mask, detail, ..
    } = &err.kind
    else {
        panic!("{err}")
    };
    assert_eq!((*warp, *mask), (0, FULL_MASK));
    assert!(detail.contains("lane 16 has exited"), "{err}");
}

kernel! {
    /// Broken: reads shared memory nobody wrote.
    pub unsafe fn uninitialised_read(out: GlobalPtr<f32>) {
        let tile = shared_array![tile: [f32; 64]];
        let t = thread_idx_x() as usize;
        unsafe { out.write(t, tile.read(t)) };
    }
}

kernel! {
    /// Broken: an f32 load from an address that is not a multiple of 4.
    pub unsafe fn misaligned_load(src: GlobalPtr<u8>, out: GlobalPtr<f32>) {
        let t = thread_idx_x() as usize;
        unsafe { out.write(t, src.offset(1).cast::<f32>().read(t)) };
    }
}

#[test]
fn uninitialised_and_misaligned_accesses_are_reported() {
    let (rt, emu) = emulator();
    let out = rt.alloc::<f32>(64).unwrap();
    let bytes = rt.alloc::<u32>(128).unwrap();
    let (o, b) = (out.ptr(), bytes.ptr().cast::<u8>());
    let kind = emu_error_kind(emu.launch(
        "uninitialised_read",
        &LaunchConfig::linear(1, BLOCK),
        || unsafe { uninitialised_read(o) },
    ));
    assert!(
        matches!(kind, EmuErrorKind::UninitializedShared { offset: 0, .. }),
        "{kind:?}"
    );
    let kind = emu_error_kind(emu.launch(
        "misaligned_load",
        &LaunchConfig::linear(1, BLOCK),
        || unsafe { misaligned_load(b, o) },
    ));
    assert!(
        matches!(kind, EmuErrorKind::Misaligned { bytes: 4, .. }),
        "{kind:?}"
    );
}

kernel! {
    /// Writes each lane's result of the four shuffle modes.
    pub unsafe fn shuffles(out: GlobalPtr<u32>, arg: u32) {
        let t = thread_idx_x() as usize;
        let v = 100 + t as u32;
        unsafe {
            out.write(4 * t, shuffle_xor(FULL_MASK, v, arg));
            out.write(4 * t + 1, shuffle_down(FULL_MASK, v, arg));
            out.write(4 * t + 2, shuffle_up(FULL_MASK, v, arg));
            out.write(4 * t + 3, shuffle_idx(FULL_MASK, v, arg));
        }
    }
}

#[test]
fn shuffles_follow_the_ptx_definitions_lane_by_lane() {
    let (rt, emu) = emulator();
    let out = rt.alloc::<u32>(4 * 64).unwrap();
    let p = out.ptr();
    for arg in [0u32, 1, 5, 16, 31] {
        emu.launch("shuffles", &LaunchConfig::linear(1, BLOCK), || unsafe {
            shuffles(p, arg)
        })
        .unwrap();
        let got = rt.download(&out).unwrap();
        for t in 0..64u32 {
            let (warp, lane) = (t / 32 * 32, t % 32);
            let value_of = |l: u32| 100 + warp + l;
            let want = [
                value_of(lane ^ arg),
                if lane + arg < 32 {
                    value_of(lane + arg)
                } else {
                    value_of(lane)
                },
                if lane >= arg {
                    value_of(lane - arg)
                } else {
                    value_of(lane)
                },
                value_of(arg),
            ];
            assert_eq!(
                got[4 * t as usize..4 * t as usize + 4],
                want,
                "thread {t}, arg {arg}"
            );
        }
    }
}

kernel! {
    /// One warp: A (16x16, row-major) and B (16x8, row-major, i.e. K x N) go through shared
    /// memory, `ldmatrix` builds the fragments (B with `.trans`), one `mma` computes D = A B + C.
    pub unsafe fn one_mma(a: GlobalPtr<u16>, b: GlobalPtr<u16>, c: GlobalPtr<f32>, d: GlobalPtr<f32>) {
        let sa = shared_array![sa: [u16; 256]];
        // B padded to 16 x 16 so that one x4 load with `.trans` fetches it (columns 8..16 unused).
        let sb = shared_array![sb: [u16; 256]];
        let lane = lane_id() as usize;
        for i in 0..8 {
            let e = lane * 8 + i;
            unsafe {
                sa.write(e, a.read(e));
                let (k, n) = (e / 16, e % 16);
                sb.write(e, if n < 8 { b.read(k * 8 + n) } else { 0 });
            }
        }
        sync_threads();
        // A: lanes 0..16 give rows 0..16 at column 0 (matrices 0, 1), lanes 16..32 the same rows
        // at column 8 (matrices 2, 3): a[0..4] in the mma's A order.
        let a_row = (lane % 16) * 16 + (lane / 16) * 8;
        let fa = unsafe { ldmatrix_x4(sa.offset(a_row), false) };
        // B (K x N row-major) transposed on load: matrices 0 and 1 are k = 0..8 and 8..16 of
        // columns 0..8.
        let b_row = (lane % 16) * 16 + (lane / 16) * 8;
        let fb = unsafe { ldmatrix_x4(sb.offset(b_row), true) };
        let (g, t) = (lane / 4, lane % 4);
        let mut fc = [0.0f32; 4];
        for (i, v) in fc.iter_mut().enumerate() {
            *v = unsafe { c.read((g + 8 * (i / 2)) * 8 + 2 * t + i % 2) };
        }
        let fd = mma_m16n8k16(MmaInput::Bf16, fa, [fb[0], fb[1]], fc);
        for (i, v) in fd.iter().enumerate() {
            unsafe { d.write((g + 8 * (i / 2)) * 8 + 2 * t + i % 2, *v) };
        }
    }
}

#[test]
fn ldmatrix_and_mma_fragments_compute_a_matrix_product() {
    let (rt, emu) = emulator();
    let vals = |n: usize, seed: u64| {
        host::reference::uniform(n, seed, -2.0, 2.0)
            .into_iter()
            .map(bf16::from_f32)
            .collect::<Vec<_>>()
    };
    let (a, b) = (vals(256, 7), vals(128, 8));
    let c = host::reference::uniform(128, 9, -1.0, 1.0);
    let bits = |v: &[bf16]| v.iter().map(|x| x.to_bits()).collect::<Vec<u16>>();
    let (da, db, dc) = (
        rt.upload(&bits(&a)).unwrap(),
        rt.upload(&bits(&b)).unwrap(),
        rt.upload(&c).unwrap(),
    );
    let dd = rt.alloc::<f32>(128).unwrap();
    let (pa, pb, pc, pd) = (da.ptr(), db.ptr(), dc.ptr(), dd.ptr());
    let counters = emu
        .launch("one_mma", &LaunchConfig::linear(1, 32), || unsafe {
            one_mma(pa, pb, pc, pd)
        })
        .unwrap();
    let got = rt.download(&dd).unwrap();
    for i in 0..16 {
        for j in 0..8 {
            let want: f64 = (0..16)
                .map(|k| a[i * 16 + k].to_f64() * b[k * 8 + j].to_f64())
                .sum::<f64>()
                + f64::from(c[i * 8 + j]);
            // Products of bf16 are exact in f32; the only rounding is the final one to f32.
            assert!(
                (f64::from(got[i * 8 + j]) - want).abs() <= want.abs() * 1e-6 + 1e-6,
                "D[{i}][{j}] = {} want {want}",
                got[i * 8 + j]
            );
        }
    }
    assert_eq!(counters.flops, 2 * 16 * 8 * 16);
    assert_eq!(counters.warp_collectives, 2 + 1, "two ldmatrix and one mma");
    assert_eq!(
        counters.shared_read_bytes,
        2 * 32 * 16,
        "each ldmatrix reads 32 rows of 16 bytes"
    );
}

kernel! {
    /// Sums a block's values through dynamic shared memory and a tree of barriers.
    pub unsafe fn block_sum(src: GlobalPtr<f32>, out: GlobalPtr<f32>) {
        let s = dynamic_shared_mem::<f32>();
        let t = thread_idx_x() as usize;
        let n = kernels::cuda::thread::block_dim_x() as usize;
        let base = kernels::cuda::thread::block_idx_x() as usize * n;
        unsafe { s.write(t, src.read(base + t)) };
        sync_threads();
        let mut stride = n / 2;
        while stride > 0 {
            if t < stride {
                unsafe { s.write(t, s.read(t) + s.read(t + stride)) };
            }
            sync_threads();
            stride /= 2;
        }
        if t == 0 {
            unsafe { out.write(kernels::cuda::thread::block_idx_x() as usize, s.read(0)) };
        }
    }
}

#[test]
fn runs_are_bit_identical_and_counted_the_same() {
    let (rt, emu) = emulator();
    let threads = 256;
    let blocks = 37;
    let src = rt
        .upload(&host::reference::uniform(threads * blocks, 11, -1.0, 1.0))
        .unwrap();
    let out = rt.alloc::<f32>(blocks).unwrap();
    let (s, o) = (src.ptr(), out.ptr());
    let cfg =
        LaunchConfig::linear(blocks as u32, threads as u32).with_dynamic_shared(4 * threads as u32);
    let first = emu
        .launch("block_sum", &cfg, || unsafe { block_sum(s, o) })
        .unwrap();
    let first_out = rt.download(&out).unwrap();
    let second = emu
        .launch("block_sum", &cfg, || unsafe { block_sum(s, o) })
        .unwrap();
    let second_out = rt.download(&out).unwrap();
    assert_eq!(first, second);
    assert_eq!(
        first_out.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        second_out.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
    assert_eq!(
        first.barriers,
        blocks as u64 * (1 + 8),
        "one barrier after the load, one per halving"
    );
    assert_eq!(first.global_read_bytes, 4 * (threads * blocks) as u64);
}

#[test]
fn launches_beyond_the_device_limits_are_refused_naming_the_limit() {
    let (rt, emu) = emulator();
    let out = rt.alloc::<f32>(1).unwrap();
    let o = out.ptr();
    let too_much = 228 * 1024;
    let err = emu
        .launch(
            "block_sum",
            &LaunchConfig::linear(1, 32).with_dynamic_shared(too_much),
            || unsafe { block_sum(o, o) },
        )
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("shared memory per block")
            && msg.contains(&too_much.to_string())
            && msg.contains(&(227 * 1024).to_string()),
        "{msg}"
    );
    let err = emu
        .launch("block_sum", &LaunchConfig::linear(1, 2048), || unsafe {
            block_sum(o, o)
        })
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("threads per block requested 2048, but the device allows at most 1024"),
        "{err}"
    );
    let cfg = LaunchConfig {
        grid: dim3(1, 1, 1),
        block: dim3(0, 1, 1),
        dynamic_shared: 0,
    };
    assert!(
        emu.launch("block_sum", &cfg, || unsafe { block_sum(o, o) })
            .is_err()
    );
}

kernel! {
    /// Broken: an assertion that fails in one thread.
    pub unsafe fn asserting(out: GlobalPtr<u32>) {
        let t = thread_idx_x();
        assert!(t != 5, "thread five is not welcome");
        unsafe { out.write(t as usize, t) };
    }
}

#[test]
fn a_panicking_kernel_reports_its_thread_and_message() {
    let (rt, emu) = emulator();
    let out = rt.alloc::<u32>(64).unwrap();
    let o = out.ptr();
    let kind = emu_error_kind(emu.launch(
        "asserting",
        &LaunchConfig::linear(1, BLOCK),
        || unsafe { asserting(o) },
    ));
    let EmuErrorKind::Panic { thread, message } = &kind else {
        panic!("{kind:?}")
    };
    assert_eq!(*thread, dim3(5, 0, 0));
    // The message, then where the kernel panicked.
    assert!(
        message.starts_with("thread five is not welcome (at ") && message.contains("emulator.rs"),
        "{message}"
    );
}

kernel! {
    /// `mma` alone, with fragments gathered from global memory by the PTX ISA's formulas
    /// (no `ldmatrix`), so the layout of `mma` is checked independently of `ldmatrix`'s.
    pub unsafe fn mma_from_formulas(a: GlobalPtr<u16>, b: GlobalPtr<u16>, d: GlobalPtr<f32>) {
        let lane = lane_id() as usize;
        let (g, t) = (lane / 4, lane % 4);
        let pair = |lo: u16, hi: u16| u32::from(lo) | (u32::from(hi) << 16);
        // A is 16 x 16 row-major; B is 16 x 8 row-major (K x N).
        let fa = core::array::from_fn(|i| {
            let (row, col) = (g + 8 * (i % 2), 2 * t + 8 * (i / 2));
            unsafe { pair(a.read(row * 16 + col), a.read(row * 16 + col + 1)) }
        });
        let fb = core::array::from_fn(|i| {
            let k = 2 * t + 8 * i;
            unsafe { pair(b.read(k * 8 + g), b.read((k + 1) * 8 + g)) }
        });
        let fd = mma_m16n8k16(MmaInput::F16, fa, fb, [0.0; 4]);
        for (i, v) in fd.iter().enumerate() {
            unsafe { d.write((g + 8 * (i / 2)) * 8 + 2 * t + i % 2, *v) };
        }
    }
}

#[test]
fn mma_fragment_layout_matches_the_ptx_isa_formulas() {
    use half::f16;
    let (rt, emu) = emulator();
    // Small integers are exact in f16 and their products and sums exact in f32: D must be exact.
    let a: Vec<f16> = (0..256)
        .map(|i| f16::from_f32(((i * 7) % 11) as f32 - 5.0))
        .collect();
    let b: Vec<f16> = (0..128)
        .map(|i| f16::from_f32(((i * 5) % 13) as f32 - 6.0))
        .collect();
    let bits = |v: &[f16]| v.iter().map(|x| x.to_bits()).collect::<Vec<u16>>();
    let (da, db) = (rt.upload(&bits(&a)).unwrap(), rt.upload(&bits(&b)).unwrap());
    let dd = rt.alloc::<f32>(128).unwrap();
    let (pa, pb, pd) = (da.ptr(), db.ptr(), dd.ptr());
    emu.launch(
        "mma_from_formulas",
        &LaunchConfig::linear(1, 32),
        || unsafe { mma_from_formulas(pa, pb, pd) },
    )
    .unwrap();
    let got = rt.download(&dd).unwrap();
    for i in 0..16 {
        for j in 0..8 {
            let want: f32 = (0..16)
                .map(|k| a[i * 16 + k].to_f32() * b[k * 8 + j].to_f32())
                .sum();
            assert_eq!(got[i * 8 + j], want, "D[{i}][{j}]");
        }
    }
}

/// Two runs of a kernel with barriers, shared memory and shuffles give the same bits and the
/// same counts: the emulator's thread order is fixed, and blocks never depend on each other.
#[test]
fn a_softmax_run_twice_is_bit_identical() {
    use host::ops::softmax::{RowStats, Variant};
    let (rt, _emu) = emulator();
    let (rows, cols) = (37, 1500);
    let x: Vec<bf16> = host::reference::uniform(rows * cols, 21, -30.0, 30.0)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let dx = rt.upload(&x).unwrap();
    let mut stats = RowStats::new(&rt, rows).unwrap();
    for variant in Variant::ALL {
        let mut runs = Vec::new();
        for _ in 0..2 {
            let mut y = rt.alloc::<bf16>(rows * cols).unwrap();
            let counters = variant
                .run(&rt, &dx, &mut y, &mut stats, rows, cols)
                .unwrap();
            let bits: Vec<u16> = rt
                .download(&y)
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect();
            runs.push((bits, counters));
        }
        assert_eq!(runs[0], runs[1], "{variant:?}");
    }
}
