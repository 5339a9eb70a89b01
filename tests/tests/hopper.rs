//! Hopper's asynchronous instructions in the emulator (emu/src/hopper.rs, wgmma.rs), with
//! small kernels written for the purpose, and the layouts they rely on checked against the PTX
//! ISA's own definitions, derived here independently of the kernels' helpers and of the
//! emulator:
//!
//! - the TMA writes a box zero-filled outside the tensor, in CuTe's `Swizzle<3, 4, 3>` on byte
//!   addresses (the ISA's 128-byte swizzle), and counts only the bytes inside as global reads;
//! - a TMA destination read before its mbarrier phase was waited for, an mbarrier wait no thread
//!   can complete, a write to a `wgmma` operand in flight, an accumulator read before its
//!   `wait_group`, a `wgmma` without `wgmma.fence` or without a whole warpgroup: each reported;
//! - the matrix descriptor's bit fields, the canonical shared-memory layouts (the ISA's worked
//!   examples, evaluated as CuTe layouts), and the accumulator fragment (CUTLASS's `CLayout_64xN`).

use emu::LaunchConfig;
use emu::{Descriptor, EmuErrorKind};
use kernels::cuda::emu::Access;
use kernels::cuda::mbarrier::{
    fence_mbarrier_init, fence_proxy_async, mbarrier_arrive, mbarrier_arrive_expect_tx,
    mbarrier_init, mbarrier_wait_parity,
};
use kernels::cuda::mma::MmaInput;
use kernels::cuda::shared::{dynamic_shared_mem, shared_address};
use kernels::cuda::thread::{sync_threads, thread_idx_x};
use kernels::cuda::tma::{TensorMap, TmaSwizzle, tma_load_2d};
use kernels::cuda::wgmma::{
    Accumulator, MatrixDescriptor, WgmmaSwizzle, accumulator_position, wgmma_commit_group,
    wgmma_fence, wgmma_rs, wgmma_ss, wgmma_wait_group,
};
use kernels::cuda::{Bf16, GlobalPtr};
use kernels::kernel;
use suite::{emu_error, emu_error_kind, emulator};

// ---- Independent definitions -----------------------------------------------------------------

/// CuTe's `Swizzle<B, M, S>` (cute/swizzle.hpp): XOR the `B` bits at `M + S` into the `B` bits at
/// `M`. The PTX ISA's 128-, 64- and 32-byte swizzles are `B` = 3, 2, 1 with `M = 4`, `S = 3`,
/// applied to byte addresses.
fn cute_swizzle(b: u32, m: u32, s: u32, x: usize) -> usize {
    let yyy = ((1usize << b) - 1) << (m + s);
    x ^ ((x & yyy) >> s)
}

/// A CuTe layout mode, flattened: `(shape, stride)` pairs, the first fastest (colexicographic).
fn cute(coord: usize, modes: &[(usize, usize)]) -> usize {
    let mut rest = coord;
    let mut offset = 0;
    for &(shape, stride) in modes {
        offset += rest % shape * stride;
        rest /= shape;
    }
    assert_eq!(rest, 0, "coordinate {coord} outside the mode");
    offset
}

// ---- TMA: zero fill, swizzle, counting, and reads before the phase ---------------------------

/// The test box: 16 rows of 64 two-byte elements (128 bytes, one swizzled line each).
const BOX_ROWS: u32 = 16;
const BOX_COLS: u32 = 64;
const BOX_ELEMS: usize = (BOX_ROWS * BOX_COLS) as usize;
const BOX_BYTES: u32 = BOX_ROWS * BOX_COLS * 2;

kernel! {
    /// Thread 0 copies the box at (`c0`, `c1`) into dynamic shared memory (offset 0, 1024-byte
    /// aligned) with the TMA, waits for the barrier's phase 0 if `wait`, then copies the 2048
    /// bytes as they lie in shared memory (swizzled) to `out`.
    pub unsafe fn tma_box(map: GlobalPtr<TensorMap>, out: GlobalPtr<u16>, c0: i32, c1: i32, wait: u32) {
        let smem = dynamic_shared_mem::<u16>();
        let bar = smem.offset(BOX_ELEMS).cast::<u64>();
        if thread_idx_x() == 0 {
            unsafe {
                mbarrier_init(bar, 1);
                fence_mbarrier_init();
                mbarrier_arrive_expect_tx(bar, BOX_BYTES);
                tma_load_2d(smem, map, c0, c1, bar);
                if wait != 0 {
                    mbarrier_wait_parity(bar, 0);
                }
                for i in 0..BOX_ELEMS {
                    out.write(i, smem.read(i));
                }
            }
        }
    }
}

/// A `rows` x `cols` tensor of u16 with every element nonzero and distinct.
fn tensor(rows: usize, cols: usize) -> Vec<u16> {
    (0..rows * cols).map(|i| (i + 1) as u16).collect()
}

fn box_config() -> LaunchConfig {
    LaunchConfig::linear(1, 32).with_dynamic_shared(BOX_BYTES + 8)
}

#[test]
fn a_tma_box_is_swizzled_zero_filled_outside_the_tensor_and_counts_only_what_it_reads() {
    let (rt, emu) = emulator();
    let (rows, cols) = (40usize, 72usize);
    let host_tensor = tensor(rows, cols);
    let src = rt.upload(&host_tensor).unwrap();
    let map = rt
        .tensor_map_2d(&src, (rows, cols), (BOX_ROWS, BOX_COLS), TmaSwizzle::B128)
        .unwrap();
    let out = rt.alloc::<u16>(BOX_ELEMS).unwrap();
    let (m, o) = (map.ptr(), out.ptr());
    // Inside; past the right and bottom edges; before the top-left corner.
    for (c0, c1) in [(0i32, 0i32), (40, 30), (-8, -4), (72, 0)] {
        let counters = emu
            .launch("tma_box", &box_config(), || unsafe {
                tma_box(m, o, c0, c1, 1)
            })
            .unwrap();
        let got = rt.download(&out).unwrap();
        let mut inside = 0;
        for (i, &value) in got.iter().enumerate() {
            // The byte at shared offset 2i holds, un-swizzled, box element (r, c).
            let linear = cute_swizzle(3, 4, 3, 2 * i);
            let (r, c) = (linear / 128, linear % 128 / 2);
            let (y, x) = (c1 as i64 + r as i64, c0 as i64 + c as i64);
            let want = if (0..rows as i64).contains(&y) && (0..cols as i64).contains(&x) {
                inside += 1;
                host_tensor[y as usize * cols + x as usize]
            } else {
                0
            };
            assert_eq!(
                value, want,
                "box at ({c0}, {c1}), shared element {i} = box ({r}, {c})"
            );
        }
        assert_eq!(counters.global_read_bytes, 2 * inside, "({c0}, {c1})");
        assert_eq!(counters.shared_write_bytes, u64::from(BOX_BYTES));
    }
}

#[test]
fn reading_a_tma_destination_before_waiting_for_its_phase_is_reported() {
    let (rt, emu) = emulator();
    let src = rt.upload(&tensor(16, 64)).unwrap();
    let map = rt
        .tensor_map_2d(&src, (16, 64), (BOX_ROWS, BOX_COLS), TmaSwizzle::B128)
        .unwrap();
    let out = rt.alloc::<u16>(BOX_ELEMS).unwrap();
    let (m, o) = (map.ptr(), out.ptr());
    let err = emu_error(emu.launch("tma_box", &box_config(), || unsafe {
        tma_box(m, o, 0, 0, 0)
    }));
    let EmuErrorKind::TmaInFlight {
        offset,
        by,
        copy,
        phase,
    } = &err.kind
    else {
        panic!("{err}")
    };
    assert_eq!(
        (*offset, by.access, by.thread.x, copy.thread.x, *phase),
        (0, Access::Read, 0, 0, 0)
    );
    let msg = err.to_string();
    assert!(
        msg.contains("phase 0") && msg.contains("mbarrier_wait_parity"),
        "{msg}"
    );
}

kernel! {
    /// Thread 0 copies a box with the TMA and waits for it (if `wait`); after a barrier, thread
    /// 1, which never waited on the mbarrier itself, reads the box: the barrier orders it.
    pub unsafe fn tma_then_barrier(map: GlobalPtr<TensorMap>, out: GlobalPtr<u16>, wait: u32) {
        let smem = dynamic_shared_mem::<u16>();
        let bar = smem.offset(BOX_ELEMS).cast::<u64>();
        let t = thread_idx_x();
        unsafe {
            if t == 0 {
                mbarrier_init(bar, 1);
                fence_mbarrier_init();
                mbarrier_arrive_expect_tx(bar, BOX_BYTES);
                tma_load_2d(smem, map, 0, 0, bar);
                if wait != 0 {
                    mbarrier_wait_parity(bar, 0);
                }
            }
            sync_threads();
            if t == 1 {
                out.write(0, smem.read(0));
            }
        }
    }
}

#[test]
fn a_barrier_after_one_threads_wait_orders_the_tma_bytes_for_every_thread() {
    let (rt, emu) = emulator();
    let src = rt.upload(&tensor(16, 64)).unwrap();
    let map = rt
        .tensor_map_2d(&src, (16, 64), (BOX_ROWS, BOX_COLS), TmaSwizzle::B128)
        .unwrap();
    let out = rt.alloc::<u16>(1).unwrap();
    let (m, o) = (map.ptr(), out.ptr());
    emu.launch("tma_then_barrier", &box_config(), || unsafe {
        tma_then_barrier(m, o, 1)
    })
    .unwrap();
    assert_eq!(rt.download(&out).unwrap(), vec![1]);
    // Nobody waited: the barrier orders nothing the mbarrier did not.
    let kind = emu_error_kind(emu.launch("tma_then_barrier", &box_config(), || unsafe {
        tma_then_barrier(m, o, 0)
    }));
    assert!(
        matches!(kind, EmuErrorKind::TmaInFlight { by, .. } if by.thread.x == 1),
        "{kind:?}"
    );
}

#[test]
fn a_tensor_map_the_driver_would_refuse_is_refused_on_the_host() {
    let (rt, _) = emulator();
    let src = rt.upload(&tensor(16, 60)).unwrap();
    // 60 two-byte columns: rows of 120 bytes, not a multiple of 16.
    let err = rt
        .tensor_map_2d(&src, (16, 60), (BOX_ROWS, BOX_COLS), TmaSwizzle::B128)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("row pitch 120 bytes"), "{err}");
}

// ---- mbarrier: a wait that can never complete -------------------------------------------------

kernel! {
    /// A barrier of 2 arrivals; every thread waits for parity 1 (the phase "before" phase 0,
    /// which passes at once on a fresh barrier), thread 0 arrives (with `tx` expected bytes when
    /// nonzero), thread 1 arrives if `second`, then every thread waits for phase 0 (parity 0).
    pub unsafe fn two_arrivals(second: u32, tx: u32) {
        let bar = dynamic_shared_mem::<u64>();
        let t = thread_idx_x();
        unsafe {
            if t == 0 {
                mbarrier_init(bar, 2);
            }
            sync_threads();
            mbarrier_wait_parity(bar, 1);
            // Without this barrier a slow thread would wait for parity 1 after phase 0 completed,
            // i.e. for phase 1, which never comes: the emulator reports exactly that.
            sync_threads();
            if t == 0 {
                if tx != 0 {
                    mbarrier_arrive_expect_tx(bar, tx);
                } else {
                    mbarrier_arrive(bar);
                }
            }
            if t == 1 && second != 0 {
                mbarrier_arrive(bar);
            }
            mbarrier_wait_parity(bar, 0);
        }
    }
}

#[test]
fn an_mbarrier_phase_completes_with_its_arrivals_and_a_missing_one_is_a_reported_deadlock() {
    let (_, emu) = emulator();
    let cfg = LaunchConfig::linear(1, 32).with_dynamic_shared(8);
    emu.launch("two_arrivals", &cfg, || unsafe { two_arrivals(1, 0) })
        .unwrap();
    let err = emu_error(emu.launch("two_arrivals", &cfg, || unsafe { two_arrivals(0, 0) }));
    let EmuErrorKind::MbarrierDeadlock { waiting, .. } = &err.kind else {
        panic!("{err}")
    };
    assert_eq!(waiting.len(), 4, "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("parity 0") && msg.contains("1 of 2 arrivals"),
        "{msg}"
    );
    // Both arrivals, but 64 announced bytes that no copy brings.
    let err =
        emu_error(emu.launch("two_arrivals", &cfg, || unsafe { two_arrivals(1, 64) })).to_string();
    assert!(
        err.contains("0 of 2 arrivals and 64 transaction bytes"),
        "{err}"
    );
}

// ---- wgmma: one m64n128k16 from shared memory --------------------------------------------------

/// The operands in shared memory: A (64 x 16 of a 64 x 64 K-major tile, 128-byte rows) at 0, B
/// (16 x 128, N-major, two 64-column halves of 16 rows) at `B_AT`.
const B_AT: usize = 8192;
const B_HALF: usize = 16 * 128;
/// With B K-major instead: 128 rows (one per column n) of 128 bytes, 16 K values used in each.
const WGMMA_SHARED: u32 = (B_AT + 128 * 128) as u32;

/// Byte offset of A's element (m, k): the 128-byte-swizzled K-major layout, written from the
/// ISA's canonical form `((8, m), (T, 2k)) : ((8T, SBO), (1, T))`, T = 8, SBO = 1024 bytes.
fn a_offset(m: usize, k: usize) -> usize {
    cute_swizzle(
        3,
        4,
        3,
        2 * (cute(m, &[(8, 64), (8, 512)]) + cute(k, &[(8, 1), (2, 8)])),
    )
}

/// Byte offset of B's element (k, n): the MN-major form `((T, 8, m), (8, k)) : ((1, T, LBO),
/// (8T, SBO))`, LBO = one half (2048 bytes), SBO = 1024 bytes.
fn b_offset(k: usize, n: usize) -> usize {
    let elems = cute(n, &[(8, 1), (8, 8), (4, B_HALF / 2)]) + cute(k, &[(8, 64), (2, 512)]);
    B_AT + cute_swizzle(3, 4, 3, 2 * elems)
}

/// Byte offset of B's element (k, n) stored K-major (`imm-trans-b = 0`): the K-major form of
/// [`a_offset`] with n as the row.
fn b_offset_k_major(k: usize, n: usize) -> usize {
    B_AT + cute_swizzle(
        3,
        4,
        3,
        2 * (cute(n, &[(8, 64), (16, 512)]) + cute(k, &[(8, 1), (2, 8)])),
    )
}

/// What a `wgmma_tile` launch does wrong, if anything.
#[derive(Clone, Copy, PartialEq)]
enum Misuse {
    None,
    ReadBeforeWait,
    OverwriteOperand,
    NoFence,
}

kernel! {
    /// The warpgroup stores A (64 x 16) and B (16 x 128), row-major bf16 in `a` and `b`, into
    /// shared memory at [`a_offset`] and [`b_offset`], multiplies them with one wgmma, and
    /// writes each thread's 64 accumulator registers to `out[64 t..]`; `misuse` breaks a rule.
    pub unsafe fn wgmma_tile(a: GlobalPtr<Bf16>, b: GlobalPtr<Bf16>, out: GlobalPtr<f32>, misuse: u32, b_k_major: u32) {
        let misuse = [Misuse::None, Misuse::ReadBeforeWait, Misuse::OverwriteOperand, Misuse::NoFence][misuse as usize];
        let smem = dynamic_shared_mem::<u8>();
        let t = thread_idx_x() as usize;
        unsafe {
            for i in (t..64 * 16).step_by(128) {
                let (m, k) = (i / 16, i % 16);
                smem.offset(a_offset(m, k)).cast::<Bf16>().write(0, a.read(i));
            }
            for i in (t..16 * 128).step_by(128) {
                let (k, n) = (i / 128, i % 128);
                let at = if b_k_major != 0 { b_offset_k_major(k, n) } else { b_offset(k, n) };
                smem.offset(at).cast::<Bf16>().write(0, b.read(i));
            }
        }
        // Ordinary stores, read next by the tensor cores: the async-proxy fence, then a barrier.
        fence_proxy_async();
        sync_threads();
        let base = shared_address(smem);
        let da = MatrixDescriptor::new(base, 16, 1024, WgmmaSwizzle::B128);
        let db = if b_k_major != 0 {
            MatrixDescriptor::new(base + B_AT as u32, 16, 1024, WgmmaSwizzle::B128)
        } else {
            MatrixDescriptor::new(base + B_AT as u32, B_HALF as u32, 1024, WgmmaSwizzle::B128)
        };
        let mut acc = Accumulator::<64>::zero();
        if misuse != Misuse::NoFence {
            wgmma_fence();
        }
        unsafe { wgmma_ss(MmaInput::Bf16, da, db, b_k_major == 0, &mut acc) };
        wgmma_commit_group();
        if misuse == Misuse::OverwriteOperand && t == 0 {
            unsafe { smem.offset(B_AT).cast::<Bf16>().write(0, Bf16::from_f32(1.0)) };
        }
        if misuse != Misuse::ReadBeforeWait {
            wgmma_wait_group::<0>();
        }
        let regs = acc.read();
        for (r, v) in regs.iter().enumerate() {
            unsafe { out.write(64 * t + r, *v) };
        }
    }
}

/// CUTLASS's register layout of A for the `_RS` forms, `ALayout_64x16`
/// (cute/atom/mma_traits_sm90_gmma.hpp): `((4, 8, 4), (2, 2, 2)) : ((128, 1, 16), (64, 8, 512))`,
/// (thread, element) to a column-major index of the 64 x 16 A.
fn alayout(t: usize, e: usize) -> (usize, usize) {
    let idx = cute(t, &[(4, 128), (8, 1), (4, 16)]) + cute(e, &[(2, 64), (2, 8), (2, 512)]);
    (idx % 64, idx / 64)
}

/// One `wgmma` of N = 2 R columns, A from shared memory or (`rs`) from registers, B N-major.
unsafe fn wgmma_shape<const R: usize>(
    a: GlobalPtr<Bf16>,
    b: GlobalPtr<Bf16>,
    out: GlobalPtr<f32>,
    rs: bool,
) {
    let n = 2 * R;
    let smem = dynamic_shared_mem::<u8>();
    let t = thread_idx_x() as usize;
    unsafe {
        for i in (t..64 * 16).step_by(128) {
            smem.offset(a_offset(i / 16, i % 16))
                .cast::<Bf16>()
                .write(0, a.read(i));
        }
        for i in (t..16 * n).step_by(128) {
            smem.offset(b_offset(i / n, i % n))
                .cast::<Bf16>()
                .write(0, b.read(i));
        }
    }
    fence_proxy_async();
    sync_threads();
    let base = shared_address(smem);
    let da = MatrixDescriptor::new(base, 16, 1024, WgmmaSwizzle::B128);
    let db = MatrixDescriptor::new(base + B_AT as u32, B_HALF as u32, 1024, WgmmaSwizzle::B128);
    let mut acc = Accumulator::<R>::zero();
    wgmma_fence();
    if rs {
        let element = |e: usize| {
            let (row, col) = alayout(t, e);
            u32::from(unsafe { a.read(row * 16 + col) }.to_bits())
        };
        let words: [u32; 4] = core::array::from_fn(|j| element(2 * j) | element(2 * j + 1) << 16);
        unsafe { wgmma_rs(MmaInput::Bf16, words, db, true, &mut acc) };
    } else {
        unsafe { wgmma_ss(MmaInput::Bf16, da, db, true, &mut acc) };
    }
    wgmma_commit_group();
    wgmma_wait_group::<0>();
    for (r, v) in acc.read().iter().enumerate() {
        unsafe { out.write(R * t + r, *v) };
    }
}

kernel! {
    /// [`wgmma_shape`] for N = `n` (64, 128 or 256), A from registers if `rs`.
    pub unsafe fn wgmma_shapes(a: GlobalPtr<Bf16>, b: GlobalPtr<Bf16>, out: GlobalPtr<f32>, n: u32, rs: u32) {
        unsafe {
            match n {
                64 => wgmma_shape::<32>(a, b, out, rs != 0),
                128 => wgmma_shape::<64>(a, b, out, rs != 0),
                _ => wgmma_shape::<128>(a, b, out, rs != 0),
            }
        }
    }
}

#[test]
fn wgmma_of_64_and_256_columns_and_with_a_from_registers_matches_the_reference() {
    let (rt, emu) = emulator();
    for (n, rs) in [(64usize, false), (256, false), (64, true), (128, true)] {
        let (a, b) = (operand(64 * 16, 3), operand(16 * n, 4));
        let to = |v: &[f32]| v.iter().map(|&x| Bf16::from_f32(x)).collect::<Vec<_>>();
        let (da, db) = (rt.upload(&to(&a)).unwrap(), rt.upload(&to(&b)).unwrap());
        let out = rt.alloc::<f32>(64 * n).unwrap();
        let (pa, pb, po) = (da.ptr(), db.ptr(), out.ptr());
        let cfg = LaunchConfig::linear(1, 128).with_dynamic_shared(WGMMA_SHARED);
        let counters = emu
            .launch("wgmma_shapes", &cfg, || unsafe {
                wgmma_shapes(pa, pb, po, n as u32, rs as u32)
            })
            .unwrap();
        assert_eq!(counters.flops, (2 * 64 * n * 16) as u64);
        let got = rt.download(&out).unwrap();
        let regs = n / 2;
        for t in 0..128 {
            for r in 0..regs {
                let idx = cute(t, &[(4, 128), (8, 1), (4, 16)])
                    + cute(r, &[(2, 64), (2, 8), (n / 8, 512)]);
                let (row, col) = (idx % 64, idx / 64);
                let want: f32 = (0..16).map(|k| a[row * 16 + k] * b[k * n + col]).sum();
                assert_eq!(
                    got[regs * t + r],
                    want,
                    "N {n}, A from registers {rs}: thread {t} register {r}"
                );
            }
        }
    }
}

/// The kernels' `a_fragment_position` is CUTLASS's register layout of A.
#[test]
fn the_a_fragment_helper_is_cutlass_alayout() {
    use kernels::cuda::wgmma::a_fragment_position;
    for t in 0..128 {
        for e in 0..8 {
            let (row, col) = a_fragment_position(t as u32, e as u32);
            assert_eq!(
                (row as usize, col as usize),
                alayout(t, e),
                "thread {t} element {e}"
            );
        }
    }
}

/// Small integers, exact in bf16 and in every f32 sum here.
fn operand(len: usize, seed: usize) -> Vec<f32> {
    (0..len)
        .map(|i| ((i * 7 + seed * 3) % 5) as f32 - 2.0)
        .collect()
}

/// CUTLASS's accumulator layout `CLayout_64xN` (cute/atom/mma_traits_sm90_gmma.hpp), for
/// N = 128: `((4, 8, 4), (2, 2, N / 8)) : ((128, 1, 16), (64, 8, 512))`, (thread, register) to
/// a column-major index of the 64 x N tile.
fn clayout(t: usize, r: usize) -> (usize, usize) {
    let idx = cute(t, &[(4, 128), (8, 1), (4, 16)]) + cute(r, &[(2, 64), (2, 8), (16, 512)]);
    (idx % 64, idx / 64)
}

/// What one `wgmma_tile` launch gave: its result, A, B, and the accumulators written out.
type WgmmaRun = (
    host::Result<emu::LaunchCounters>,
    Vec<f32>,
    Vec<f32>,
    Vec<f32>,
);

fn wgmma_launch(misuse: Misuse, threads: u32, b_k_major: bool) -> WgmmaRun {
    let (rt, emu) = emulator();
    let (a, b) = (operand(64 * 16, 1), operand(16 * 128, 2));
    let to = |v: &[f32]| v.iter().map(|&x| Bf16::from_f32(x)).collect::<Vec<_>>();
    let (da, db) = (rt.upload(&to(&a)).unwrap(), rt.upload(&to(&b)).unwrap());
    let out = rt.alloc::<f32>(128 * 64).unwrap();
    let (pa, pb, po) = (da.ptr(), db.ptr(), out.ptr());
    let cfg = LaunchConfig::linear(1, threads).with_dynamic_shared(WGMMA_SHARED);
    let result = emu.launch("wgmma_tile", &cfg, || unsafe {
        wgmma_tile(pa, pb, po, misuse as u32, b_k_major as u32)
    });
    let got = rt.download(&out).unwrap();
    (result, a, b, got)
}

#[test]
fn one_wgmma_multiplies_from_the_canonical_layouts_into_the_accumulator_fragment() {
    for b_k_major in [false, true] {
        let (result, a, b, got) = wgmma_launch(Misuse::None, 128, b_k_major);
        let counters = result.unwrap();
        assert_eq!(counters.flops, 2 * 64 * 128 * 16);
        for t in 0..128 {
            for r in 0..64 {
                let (row, col) = clayout(t, r);
                let want: f32 = (0..16).map(|k| a[row * 16 + k] * b[k * 128 + col]).sum();
                let what =
                    format!("B K-major {b_k_major}: thread {t} register {r} = D[{row}][{col}]");
                assert_eq!(got[64 * t + r], want, "{what}");
            }
        }
    }
}

#[test]
fn reading_the_accumulators_before_wait_group_is_reported() {
    let kind = emu_error_kind(wgmma_launch(Misuse::ReadBeforeWait, 128, false).0);
    assert!(
        matches!(kind, EmuErrorKind::WgmmaAccumulatorInFlight { .. }),
        "{kind:?}"
    );
}

#[test]
fn writing_an_operand_of_a_wgmma_in_flight_is_reported() {
    let err = emu_error(wgmma_launch(Misuse::OverwriteOperand, 128, false).0);
    let EmuErrorKind::WgmmaOperandInFlight { offset, by, .. } = &err.kind else {
        panic!("{err}")
    };
    assert_eq!((*offset, by.thread.x, by.access), (B_AT, 0, Access::Write));
    assert!(err.to_string().contains("wgmma_wait_group"), "{err}");
}

#[test]
fn a_wgmma_without_fence_or_without_a_whole_warpgroup_is_reported() {
    let err = emu_error(wgmma_launch(Misuse::NoFence, 128, false).0).to_string();
    assert!(err.contains("wgmma_fence"), "{err}");
    let err = emu_error(wgmma_launch(Misuse::None, 96, false).0).to_string();
    assert!(
        err.contains("a warpgroup is 128 threads") && err.contains("only 96"),
        "{err}"
    );
}

// ---- Layouts against the PTX ISA ------------------------------------------------------------------

/// PTX ISA, "Matrix Descriptor Format": bits 13-0 start address >> 4, 29-16 LBO >> 4, 45-32
/// SBO >> 4, 51-49 base offset, 63-62 swizzle (0 none, 1 128-byte, 2 64-byte, 3 32-byte); each
/// address field `(x & 0x3FFFF) >> 4`. Values: the ISA's worked examples (MN-major 64-byte bf16:
/// LBO 512 -> 32, SBO 1024 -> 64; K-major tf32 without swizzle: LBO 256 -> 16, SBO 128 -> 8).
#[test]
fn descriptor_fields_follow_the_isa_table() {
    let field = |x: u32| u64::from((x & 0x3FFFF) >> 4);
    for (start, lbo, sbo, swizzle, code) in [
        (0x1_2400u32, 512u32, 1024u32, WgmmaSwizzle::B64, 2u64),
        (0x400, 256, 128, WgmmaSwizzle::None, 0),
        (0x3_fc00, 16, 1024, WgmmaSwizzle::B128, 1),
        (0x4_0010, 8192, 1024, WgmmaSwizzle::B32, 3),
    ] {
        let want = field(start) | field(lbo) << 16 | field(sbo) << 32 | code << 62;
        let d = MatrixDescriptor::new(start, lbo, sbo, swizzle);
        assert_eq!(d.0, want, "{start:#x} {lbo} {sbo} {swizzle:?}");
        assert_eq!((d.0 >> 16) & 0x3FFF, u64::from(lbo >> 4));
        let back = Descriptor::decode(d.0);
        let wrapped = (start & 0x3FFFF) as usize;
        assert_eq!(
            (back.start, back.lbo, back.sbo, back.base_offset),
            (wrapped, lbo as usize, sbo as usize, 0)
        );
        assert_eq!(u64::from(back.swizzle), code);
    }
}

/// The emulator's descriptor addressing against the ISA's worked examples of MN-major bf16
/// layouts ("exact layout" column, strides in elements, swizzle on byte addresses) and the
/// K-major 128-byte canonical form, every element of each.
#[test]
fn descriptor_addressing_matches_the_isa_examples() {
    /// One worked example: the descriptor's swizzle code, B of `Swizzle<B, 4, 3>`, LBO and SBO
    /// in bytes, the layout's MN and K modes (strides in elements), and its extent.
    struct Example {
        code: u32,
        b: u32,
        lbo: usize,
        sbo: usize,
        mn_modes: &'static [(usize, usize)],
        k_modes: &'static [(usize, usize)],
        extent: (usize, usize),
    }
    let example = |code, b, lbo, sbo, mn_modes, k_modes, extent| Example {
        code,
        b,
        lbo,
        sbo,
        mn_modes,
        k_modes,
        extent,
    };
    let mn_major = [
        example(
            0,
            0,
            256,
            128,
            &[(8, 1), (1, 8), (2, 64)],
            &[(8, 8), (2, 128)],
            (16, 16),
        ),
        example(
            3,
            1,
            256,
            512,
            &[(8, 1), (2, 8), (2, 128)],
            &[(8, 16), (2, 256)],
            (32, 16),
        ),
        example(
            2,
            2,
            512,
            1024,
            &[(8, 1), (4, 8), (2, 256)],
            &[(8, 32), (2, 512)],
            (64, 16),
        ),
        // 128-byte, from the canonical form with m = 2, k = 2, LBO = 1024, SBO = 2048 elements.
        example(
            1,
            3,
            2048,
            4096,
            &[(8, 1), (8, 8), (2, 1024)],
            &[(8, 64), (2, 2048)],
            (128, 16),
        ),
    ];
    for e in mn_major {
        let d = Descriptor {
            start: 4096,
            lbo: e.lbo,
            sbo: e.sbo,
            base_offset: 0,
            swizzle: e.code,
        };
        for mn in 0..e.extent.0 {
            for k in 0..e.extent.1 {
                let want =
                    4096 + cute_swizzle(e.b, 4, 3, 2 * (cute(mn, e.mn_modes) + cute(k, e.k_modes)));
                assert_eq!(
                    d.swizzle(d.mn_major(mn, k)),
                    want,
                    "MN-major swizzle {}: ({mn}, {k})",
                    e.code
                );
            }
        }
    }
    // K-major 128-byte: ((8, m), (T, 2k)) : ((8T, SBO), (1, T)), m = 4, SBO = 512 elements.
    let d = Descriptor {
        start: 8192,
        lbo: 16,
        sbo: 1024,
        base_offset: 0,
        swizzle: 1,
    };
    for mn in 0..32 {
        for k in 0..16 {
            let want = 8192
                + cute_swizzle(
                    3,
                    4,
                    3,
                    2 * (cute(mn, &[(8, 64), (4, 512)]) + cute(k, &[(8, 1), (2, 8)])),
                );
            assert_eq!(
                d.swizzle(d.k_major(mn, k)),
                want,
                "K-major 128B ({mn}, {k})"
            );
        }
    }
}

/// The GEMM kernel's descriptors read what its TMA boxes wrote: A's box (128 rows of 64 K
/// elements, 128-byte swizzled) through `a_descriptor` for each 16-deep slice, B's two boxes (64
/// K rows of 64 N elements each) through `b_descriptor`, element by element.
#[test]
fn the_step_5_descriptors_address_the_tma_boxes() {
    use kernels::gemm::wgmma::{a_descriptor, b_descriptor};
    let (a0, b0) = (0x4000u32, 0x8000u32);
    for kk in 0..4 {
        for wg in 0..2u32 {
            let d = Descriptor::decode(a_descriptor(a0 + wg * 64 * 128, kk).0);
            for m in 0..64 {
                for k in 0..16 {
                    // Box row 64 wg + m, column 16 kk + k, as the TMA placed it.
                    let linear = (64 * wg as usize + m) * 128 + (16 * kk as usize + k) * 2;
                    let want = a0 as usize + cute_swizzle(3, 4, 3, linear);
                    assert_eq!(d.swizzle(d.k_major(m, k)), want, "A slice {kk}, ({m}, {k})");
                }
            }
        }
        // Two descriptors per slice, one per 128-column half (two boxes each).
        for half in 0..2usize {
            let d = Descriptor::decode(b_descriptor(b0 + (half * 2 * 64 * 128) as u32, kk).0);
            for k in 0..16 {
                for n in 0..128 {
                    let (by, col) = (2 * half + n / 64, n % 64);
                    let linear = by * 64 * 128 + (16 * kk as usize + k) * 128 + col * 2;
                    let want = b0 as usize + cute_swizzle(3, 4, 3, linear);
                    assert_eq!(
                        d.swizzle(d.mn_major(n, k)),
                        want,
                        "B slice {kk}, half {half}, ({k}, {n})"
                    );
                }
            }
        }
    }
}

/// The kernels' `accumulator_position` is CUTLASS's accumulator layout.
#[test]
fn the_accumulator_helper_is_cutlass_clayout() {
    for t in 0..128 {
        for r in 0..64 {
            let (row, col) = accumulator_position(t as u32, r as u32);
            assert_eq!(
                (row as usize, col as usize),
                clayout(t, r),
                "thread {t} register {r}"
            );
        }
    }
}

/// Attention on wgmma hands P from `S`'s accumulator to `O += P V` as the register A operand
/// without moving a value: for every thread, key slice `kk` and element, the accumulator register
/// `p_register` names holds (CUTLASS's `CLayout_64x128`) the row and key that element of the A
/// fragment must hold (CUTLASS's register `ALayout`, keys offset by `16 kk`).
#[test]
fn p_in_the_s_accumulator_is_the_register_a_fragment() {
    use kernels::attention::flash_wgmma::p_register;
    for t in 0..128 {
        for kk in 0..8 {
            for e in 0..8 {
                let reg = p_register(kk, e / 2) + e % 2;
                let (row, col) = alayout(t, e);
                assert_eq!(
                    clayout(t, reg),
                    (row, 16 * kk + col),
                    "thread {t}, key slice {kk}, element {e} (S register {reg})"
                );
            }
        }
    }
}

/// Attention on wgmma's descriptors read what its TMA boxes wrote, at d = 128 (two 64-column
/// boxes per tile, each 128 rows of 128 swizzled bytes): Q (K-major A, consumer `wg`'s rows),
/// K (K-major B: keys are N, d is the reduction) and V (MN-major B: keys are the reduction, d
/// is N), every element of every 16-deep slice.
#[test]
fn the_attention_descriptors_address_the_tma_boxes() {
    use kernels::attention::flash_wgmma::{k_descriptor, q_descriptor, v_descriptor};
    let box_bytes = 128 * 128;
    let base = 0x8000u32;
    // Element (row, col) of a 128 x 128 tile stored as two boxes of 64 columns.
    let at = |row: usize, col: usize| {
        let linear = (col / 64) * box_bytes + row * 128 + (col % 64) * 2;
        base as usize + cute_swizzle(3, 4, 3, linear)
    };
    for kk in 0..8u32 {
        for wg in 0..2u32 {
            let d = Descriptor::decode(q_descriptor(base, wg, kk).0);
            for m in 0..64 {
                for k in 0..16 {
                    let want = at(64 * wg as usize + m, 16 * kk as usize + k);
                    assert_eq!(
                        d.swizzle(d.k_major(m, k)),
                        want,
                        "Q slice {kk}, wg {wg}, ({m}, {k})"
                    );
                }
            }
        }
        let d = Descriptor::decode(k_descriptor(base, kk).0);
        for key in 0..128 {
            for k in 0..16 {
                let want = at(key, 16 * kk as usize + k);
                assert_eq!(
                    d.swizzle(d.k_major(key, k)),
                    want,
                    "K slice {kk}, key {key}, d {k}"
                );
            }
        }
        let d = Descriptor::decode(v_descriptor(base, kk).0);
        for k in 0..16 {
            for n in 0..128 {
                let want = at(16 * kk as usize + k, n);
                assert_eq!(
                    d.swizzle(d.mn_major(n, k)),
                    want,
                    "V slice {kk}, key {k}, d {n}"
                );
            }
        }
    }
}
