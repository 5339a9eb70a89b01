//! `cp.async` in the emulator (emu/src/async_copy.rs), with small kernels written for the
//! purpose: the copy completes only when its thread waits for its group (a barrier completes
//! nothing), bytes in flight may not be touched, `wait_group N` leaves exactly the N newest groups
//! in flight, short copies zero-fill, and completed copies are checked and counted like loads.

use emu::LaunchConfig;
use emu::{EmuErrorKind, MemorySpace};
use kernels::cuda::GlobalPtr;
use kernels::cuda::emu::Access;
use kernels::cuda::pipeline::{
    cp_async_16, cp_async_commit_group, cp_async_wait_all, cp_async_wait_group,
};
use kernels::cuda::thread::{sync_threads, thread_idx_x};
use kernels::{kernel, shared_array};
use suite::{emu_error, emu_error_kind, emulator};

/// Threads per block in these tests, one 16-byte chunk (4 words) each.
const THREADS: u32 = 32;

kernel! {
    /// Each thread copies its chunk of `src` into shared memory asynchronously, then the block
    /// synchronises and each thread copies its neighbour's chunk to `out`. Correct with `wait`
    /// set; without it, the barrier alone leaves the copies in flight: the classic pipeline bug.
    pub unsafe fn neighbour_through_cp_async(src: GlobalPtr<u32>, out: GlobalPtr<u32>, wait: u32) {
        let tile = shared_array![tile: [u32; 128]];
        let t = thread_idx_x() as usize;
        unsafe { cp_async_16(tile.offset(4 * t), src.offset(4 * t), 16) };
        cp_async_commit_group();
        if wait != 0 {
            cp_async_wait_all();
        }
        sync_threads();
        let from = 4 * ((t + 1) % 32);
        for w in 0..4 {
            unsafe { out.write(4 * t + w, tile.read(from + w)) };
        }
    }
}

#[test]
fn data_arrives_after_wait_and_barrier_and_is_counted_like_a_load() {
    let (rt, emu) = emulator();
    let src_host: Vec<u32> = (0..128).map(|i| i * 7 + 1).collect();
    let src = rt.upload(&src_host).unwrap();
    let out = rt.alloc::<u32>(128).unwrap();
    let (s, o) = (src.ptr(), out.ptr());
    let counters = emu
        .launch(
            "neighbour_through_cp_async",
            &LaunchConfig::linear(1, THREADS),
            || unsafe { neighbour_through_cp_async(s, o, 1) },
        )
        .unwrap();
    let got = rt.download(&out).unwrap();
    let want: Vec<u32> = (0..128).map(|i| src_host[(i + 4) % 128]).collect();
    assert_eq!(got, want);
    assert_eq!(counters.global_read_bytes, 16 * u64::from(THREADS));
    assert_eq!(counters.shared_write_bytes, 16 * u64::from(THREADS));
    assert_eq!(counters.shared_read_bytes, 16 * u64::from(THREADS));
}

#[test]
fn reading_a_tile_before_waiting_names_both_threads_and_the_address() {
    let (rt, emu) = emulator();
    let src = rt.upload(&[5u32; 128]).unwrap();
    let out = rt.alloc::<u32>(128).unwrap();
    let (s, o) = (src.ptr(), out.ptr());
    // No wait: the barrier passes with every copy still in flight. Thread 0 reads first, the
    // chunk thread 1 is copying: byte 16 of the array.
    let err = emu_error(emu.launch(
        "neighbour_through_cp_async",
        &LaunchConfig::linear(1, THREADS),
        || unsafe { neighbour_through_cp_async(s, o, 0) },
    ));
    let EmuErrorKind::AsyncCopyInFlight {
        offset, by, copy, ..
    } = &err.kind
    else {
        panic!("{err}")
    };
    assert_eq!(*offset, 16, "{err}");
    assert_eq!((by.thread.x, by.access), (0, Access::Read));
    assert_eq!((copy.thread.x, copy.access), (1, Access::Write));
    let msg = err.to_string();
    assert!(
        msg.contains("neighbour_through_cp_async")
            && msg.contains("cp.async still in flight")
            && msg.contains("cp_async_wait_group"),
        "{msg}"
    );
}

kernel! {
    /// Thread 0 commits three groups of one chunk each (chunks 0, 1, 2), optionally starts a
    /// fourth copy (chunk 3) without committing it, waits until at most one group is in flight,
    /// and reads chunk `probe`.
    pub unsafe fn groups(src: GlobalPtr<u32>, out: GlobalPtr<u32>, probe: u32, uncommitted: u32) {
        let tile = shared_array![tile: [u32; 16]];
        if thread_idx_x() == 0 {
            for chunk in 0..3 {
                unsafe { cp_async_16(tile.offset(4 * chunk), src.offset(4 * chunk), 16) };
                cp_async_commit_group();
            }
            if uncommitted != 0 {
                unsafe { cp_async_16(tile.offset(12), src.offset(12), 16) };
            }
            cp_async_wait_group::<1>();
            unsafe { out.write(0, tile.read(4 * probe as usize)) };
        }
    }
}

#[test]
fn wait_group_leaves_exactly_the_newest_groups_in_flight() {
    let (rt, emu) = emulator();
    let src_host: Vec<u32> = (100..116).collect();
    let src = rt.upload(&src_host).unwrap();
    let out = rt.alloc::<u32>(1).unwrap();
    let (s, o) = (src.ptr(), out.ptr());
    let run = |probe: u32, uncommitted: u32| {
        emu.launch("groups", &LaunchConfig::linear(1, THREADS), || unsafe {
            groups(s, o, probe, uncommitted)
        })
    };
    // Groups 0 and 1 have completed; group 2, the newest, may still be in flight.
    for probe in [0, 1] {
        run(probe, 0).unwrap();
        assert_eq!(
            rt.download(&out).unwrap(),
            vec![src_host[4 * probe as usize]]
        );
    }
    let kind = emu_error_kind(run(2, 0));
    assert!(
        matches!(kind, EmuErrorKind::AsyncCopyInFlight { offset: 32, .. }),
        "{kind:?}"
    );
    // A copy not yet committed belongs to no group, so no wait_group completes it.
    let kind = emu_error_kind(run(3, 1));
    assert!(
        matches!(kind, EmuErrorKind::AsyncCopyInFlight { offset: 48, .. }),
        "{kind:?}"
    );
}

kernel! {
    /// Thread t copies 16 bytes of which only `t % 17` come from `src`, the rest zero-filled.
    pub unsafe fn short_copies(src: GlobalPtr<u8>, out: GlobalPtr<u8>) {
        let tile = shared_array![tile: [u8; 512]];
        let t = thread_idx_x() as usize;
        unsafe { cp_async_16(tile.offset(16 * t), src.offset(16 * t), (t % 17) as u32) };
        cp_async_wait_all();
        for i in 0..16 {
            unsafe { out.write(16 * t + i, tile.read(16 * t + i)) };
        }
    }
}

#[test]
fn short_copies_zero_fill_and_read_only_their_bytes() {
    let (rt, emu) = emulator();
    // Bytes, held in 4-byte words (the buffers' element type).
    let src = rt.upload(&[0xabab_ababu32; 128]).unwrap();
    let out = rt.upload(&[0x1111_1111u32; 128]).unwrap();
    let (s, o) = (src.ptr().cast::<u8>(), out.ptr().cast::<u8>());
    let counters = emu
        .launch(
            "short_copies",
            &LaunchConfig::linear(1, THREADS),
            || unsafe { short_copies(s, o) },
        )
        .unwrap();
    let got: Vec<u8> = rt
        .download(&out)
        .unwrap()
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    for t in 0..THREADS as usize {
        let n = t % 17;
        let want: Vec<u8> = (0..16).map(|i| if i < n { 0xab } else { 0 }).collect();
        assert_eq!(got[16 * t..16 * t + 16], want[..], "thread {t}");
    }
    let read: usize = (0..THREADS as usize).map(|t| t % 17).sum();
    assert_eq!(counters.global_read_bytes, read as u64);
}

kernel! {
    /// Thread 0 copies 16 bytes starting `offset` words into `src`, and waits.
    pub unsafe fn copy_from(src: GlobalPtr<u32>, offset: u32) {
        let tile = shared_array![tile: [u32; 4]];
        if thread_idx_x() == 0 {
            unsafe { cp_async_16(tile, src.offset(offset as usize), 16) };
            cp_async_wait_all();
        }
    }
}

#[test]
fn the_global_read_is_checked_when_the_copy_completes() {
    let (rt, emu) = emulator();
    let src = rt.alloc::<u32>(8).unwrap();
    let s = src.ptr();
    let run = |offset: u32| {
        emu.launch("copy_from", &LaunchConfig::linear(1, THREADS), || unsafe {
            copy_from(s, offset)
        })
    };
    run(4).unwrap();
    // 16 bytes from word 8 of 8: past the end.
    let kind = emu_error_kind(run(8));
    let EmuErrorKind::OutOfBounds { space, by, .. } = kind else {
        panic!("{kind:?}")
    };
    assert_eq!(
        (space, by.thread.x, by.access),
        (MemorySpace::Global, 0, Access::Read)
    );
    // The source must be 16-byte aligned.
    let kind = emu_error_kind(run(1));
    assert!(
        matches!(
            kind,
            EmuErrorKind::Misaligned {
                space: MemorySpace::Global,
                bytes: 16,
                ..
            }
        ),
        "{kind:?}"
    );
}

kernel! {
    /// Each thread copies its chunk, waits for it itself, but reads its neighbour's with no
    /// barrier: the neighbour's copy has not even started when thread 0 looks.
    pub unsafe fn waits_but_no_barrier(src: GlobalPtr<u32>, out: GlobalPtr<u32>) {
        let tile = shared_array![tile: [u32; 128]];
        let t = thread_idx_x() as usize;
        unsafe { cp_async_16(tile.offset(4 * t), src.offset(4 * t), 16) };
        cp_async_wait_all();
        unsafe { out.write(t, tile.read(4 * ((t + 1) % 32))) };
    }
}

kernel! {
    /// Each thread starts a copy and exits without waiting.
    pub unsafe fn never_waits(src: GlobalPtr<u32>) {
        let tile = shared_array![tile: [u32; 128]];
        let t = thread_idx_x() as usize;
        unsafe { cp_async_16(tile.offset(4 * t), src.offset(4 * t), 16) };
        cp_async_commit_group();
    }
}

#[test]
fn completion_is_per_thread_and_a_copy_lands_even_if_nobody_waits() {
    let (rt, emu) = emulator();
    let src = rt.upload(&[1u32; 128]).unwrap();
    let out = rt.alloc::<u32>(32).unwrap();
    let (s, o) = (src.ptr(), out.ptr());
    // Thread 0's own wait makes its chunk complete for thread 0 only; thread 1 then starts a copy
    // into the bytes thread 0 has read in the same barrier interval: a race.
    let kind = emu_error_kind(emu.launch(
        "waits_but_no_barrier",
        &LaunchConfig::linear(1, THREADS),
        || unsafe { waits_but_no_barrier(s, o) },
    ));
    let EmuErrorKind::SharedRace { first, second, .. } = kind else {
        panic!("{kind:?}")
    };
    assert_eq!((first.thread.x, first.access), (0, Access::Read));
    assert_eq!((second.thread.x, second.access), (1, Access::Write));
    // Copies left in flight by exiting threads complete (and are counted) all the same.
    let counters = emu
        .launch(
            "never_waits",
            &LaunchConfig::linear(1, THREADS),
            || unsafe { never_waits(s) },
        )
        .unwrap();
    assert_eq!(counters.global_read_bytes, 16 * u64::from(THREADS));
}
