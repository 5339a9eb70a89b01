//! Data races the emulator must find, and orderings it must accept: global memory across blocks
//! (nothing orders two blocks), within a block (a barrier orders), and `__syncwarp` between the
//! lanes of its mask, in shared and in global memory.

use emu::EmuErrorKind;
use emu::LaunchConfig;
use kernels::cuda::GlobalPtr;
use kernels::cuda::emu::Access;
use kernels::cuda::thread::{block_idx_x, index_1d, sync_threads, thread_idx_x};
use kernels::cuda::warp::{FULL_MASK, sync_warp};
use kernels::{kernel, shared_array};
use suite::emu_error;

/// One side of a race: (blockIdx.x, threadIdx.x, access).
type Side = (u32, u32, Access);

/// A global race's address and offset, and its two sides, the earlier block first.
fn global_race(err: &emu::EmuError) -> ((usize, usize), [Side; 2]) {
    let EmuErrorKind::GlobalRace {
        addr,
        offset,
        first,
        second_block,
        second,
        ..
    } = &err.kind
    else {
        panic!("{err}")
    };
    (
        (*addr, *offset),
        [
            (err.block.x, first.thread.x, first.access),
            (second_block.x, second.thread.x, second.access),
        ],
    )
}

/// An emulator whose launches check for global races, whatever `KERNELS_EMU_GLOBAL_RACES`
/// says.
struct Checked(std::sync::Arc<emu::Emulator>);

impl Checked {
    fn options(&self) -> emu::LaunchOptions {
        emu::LaunchOptions {
            global_races: true,
            ..self.0.defaults()
        }
    }

    fn launch(
        &self,
        name: &'static str,
        cfg: &LaunchConfig,
        kernel: impl Fn() + Sync,
    ) -> emu::Result<emu::LaunchCounters> {
        self.0
            .launch_with(name, cfg, &self.options(), kernel)
            .map(|(counters, _)| counters)
    }
}

fn emulator() -> (host::Runtime, Checked) {
    let (rt, emu) = suite::emulator();
    (rt, Checked(emu))
}

kernel! {
    /// Broken: every block writes element 0.
    pub unsafe fn every_block_writes_one_element(out: GlobalPtr<u32>) {
        if thread_idx_x() == 0 {
            unsafe { out.write(0, block_idx_x()) };
        }
    }
}

#[test]
fn two_blocks_writing_one_element_is_a_race_naming_both_threads_and_the_address() {
    let (rt, emu) = emulator();
    let out = rt.alloc::<u32>(4).unwrap();
    let p = out.ptr();
    let err = emu_error(emu.launch(
        "every_block_writes_one_element",
        &LaunchConfig::linear(2, 32),
        || unsafe { every_block_writes_one_element(p) },
    ));
    let (place, sides) = global_race(&err);
    assert_eq!(place, (p.addr(), 0), "{err}");
    assert_eq!(
        sides,
        [(0, 0, Access::Write), (1, 0, Access::Write)],
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("data race on global memory") && msg.contains("block (1, 0, 0)"),
        "{msg}"
    );
}

kernel! {
    /// Broken: block 1 reads the element block 0 writes (and copies it next door).
    pub unsafe fn reads_another_blocks_write(buf: GlobalPtr<f32>) {
        if thread_idx_x() != 3 {
            return;
        }
        if block_idx_x() == 0 {
            unsafe { buf.write(5, 1.0) };
        } else {
            let v = unsafe { buf.read(5) };
            unsafe { buf.write(6, v) };
        }
    }
}

#[test]
fn reading_what_another_block_writes_is_a_race() {
    let (rt, emu) = emulator();
    let buf = rt.alloc::<f32>(8).unwrap();
    let p = buf.ptr();
    let err = emu_error(emu.launch(
        "reads_another_blocks_write",
        &LaunchConfig::linear(2, 32),
        || unsafe { reads_another_blocks_write(p) },
    ));
    let ((_, offset), sides) = global_race(&err);
    assert_eq!(offset, 5 * 4, "{err}");
    assert_eq!(
        sides,
        [(0, 3, Access::Write), (1, 3, Access::Read)],
        "{err}"
    );
}

kernel! {
    /// Thread `t` writes element `t`, then (after the barrier when `synced`) reads element `t + 1`,
    /// which its neighbour wrote: a race without the barrier.
    pub unsafe fn neighbour_in_global(buf: GlobalPtr<u32>, out: GlobalPtr<u32>, synced: bool) {
        let t = thread_idx_x() as usize;
        unsafe { buf.write(t, t as u32) };
        if synced {
            sync_threads();
        }
        let v = unsafe { buf.read((t + 1) % 64) };
        unsafe { out.write(t, v) };
    }
}

#[test]
fn within_a_block_a_barrier_orders_global_memory() {
    let (rt, emu) = emulator();
    let (buf, out) = (rt.alloc::<u32>(64).unwrap(), rt.alloc::<u32>(64).unwrap());
    let (b, o) = (buf.ptr(), out.ptr());
    let cfg = LaunchConfig::linear(1, 64);
    let err = emu_error(emu.launch("neighbour_in_global", &cfg, || unsafe {
        neighbour_in_global(b, o, false)
    }));
    let EmuErrorKind::GlobalRace { first, second, .. } = err.kind.clone() else {
        panic!("{err}")
    };
    assert_ne!(first.thread, second.thread, "{err}");
    emu.launch("neighbour_in_global", &cfg, || unsafe {
        neighbour_in_global(b, o, true)
    })
    .unwrap();
    let got = rt.download(&out).unwrap();
    assert_eq!(got, (0..64).map(|t| (t + 1) % 64).collect::<Vec<u32>>());
}

kernel! {
    /// A valid exchange within one warp: each lane writes its slot (shared and global), the warp
    /// passes `__syncwarp` (when `synced`), and each lane reads its partner's slot.
    pub unsafe fn warp_exchange(buf: GlobalPtr<u32>, out: GlobalPtr<u32>, synced: bool, global: bool) {
        let tile = shared_array![tile: [u32; 32]];
        let lane = thread_idx_x() as usize;
        if global {
            unsafe { buf.write(lane, lane as u32 * 10) };
        } else {
            unsafe { tile.write(lane, lane as u32 * 10) };
        }
        if synced {
            sync_warp(FULL_MASK);
        }
        let v = if global {
            unsafe { buf.read(lane ^ 1) }
        } else {
            unsafe { tile.read(lane ^ 1) }
        };
        unsafe { out.write(lane, v) };
    }
}

#[test]
fn an_exchange_after_syncwarp_is_valid_and_one_without_it_a_race() {
    let (rt, emu) = emulator();
    let (buf, out) = (rt.alloc::<u32>(32).unwrap(), rt.alloc::<u32>(32).unwrap());
    let (b, o) = (buf.ptr(), out.ptr());
    let cfg = LaunchConfig::linear(1, 32);
    let want: Vec<u32> = (0..32).map(|l| (l ^ 1) * 10).collect();
    for global in [false, true] {
        emu.launch("warp_exchange", &cfg, || unsafe {
            warp_exchange(b, o, true, global)
        })
        .unwrap_or_else(|e| panic!("global = {global}: {e}"));
        assert_eq!(rt.download(&out).unwrap(), want, "global = {global}");
        let err = emu_error(emu.launch("warp_exchange", &cfg, || unsafe {
            warp_exchange(b, o, false, global)
        }));
        let raced = match err.kind {
            EmuErrorKind::SharedRace { .. } => !global,
            EmuErrorKind::GlobalRace { .. } => global,
            _ => false,
        };
        assert!(raced, "global = {global}: {err}");
    }
}

kernel! {
    /// Lanes 0 and 1 exchange after a `__syncwarp` whose mask names only lanes 0 and 2: lane 1
    /// is not ordered after lane 0's write.
    pub unsafe fn syncwarp_without_the_reader(out: GlobalPtr<u32>) {
        let tile = shared_array![tile: [u32; 32]];
        let lane = thread_idx_x();
        if lane == 0 {
            unsafe { tile.write(0, 7) };
        }
        if lane == 0 || lane == 2 {
            sync_warp(0b101);
        }
        if lane == 1 {
            unsafe { out.write(0, tile.read(0)) };
        }
    }
}

#[test]
fn syncwarp_orders_only_the_lanes_of_its_mask() {
    let (rt, emu) = emulator();
    let out = rt.alloc::<u32>(1).unwrap();
    let o = out.ptr();
    let err = emu_error(emu.launch(
        "syncwarp_without_the_reader",
        &LaunchConfig::linear(1, 32),
        || unsafe { syncwarp_without_the_reader(o) },
    ));
    let EmuErrorKind::SharedRace { first, second, .. } = err.kind else {
        panic!("{err}")
    };
    assert_eq!((first.thread.x, second.thread.x), (0, 1), "{err}");
}

kernel! {
    /// Broken: every thread of every block adds itself into element 0 (a lost-update race).
    pub unsafe fn racy_sum(out: GlobalPtr<u32>) {
        let v = unsafe { out.read(0) };
        unsafe { out.write(0, v + 1) };
    }
}

#[test]
fn a_race_between_512_blocks_gives_the_same_report_every_run() {
    let (rt, emu) = emulator();
    let out = rt.alloc::<u32>(1).unwrap();
    let o = out.ptr();
    let report = || {
        emu_error(
            emu.launch("racy_sum", &LaunchConfig::linear(512, 32), || unsafe {
                racy_sum(o)
            }),
        )
        .to_string()
    };
    let first = report();
    assert!(first.contains("data race on global memory"), "{first}");
    for _ in 0..4 {
        assert_eq!(report(), first);
    }
}

kernel! {
    /// A scatter: thread `g` adds one into the 64 elements `slots[64 g ..][..64]` names, each
    /// with a read and then a write (a read-modify-write, as a histogram without atomics would).
    /// Race-free when no slot is named twice.
    pub unsafe fn scatter_add_one(buf: GlobalPtr<f32>, slots: GlobalPtr<u32>) {
        let g = index_1d() as usize;
        for i in 0..SCATTER_PER_THREAD {
            let slot = unsafe { slots.read(g * SCATTER_PER_THREAD + i) } as usize;
            let v = unsafe { buf.read(slot) };
            unsafe { buf.write(slot, v + 1.0) };
        }
    }
}

/// Read-modify-writes per thread of [`scatter_add_one`].
const SCATTER_PER_THREAD: usize = 64;

/// `count` distinct elements of `0..n` in a pseudo-random order (the first `count` of a
/// permutation sorted by deterministic uniform keys).
fn scattered_slots(n: usize, count: usize) -> Vec<u32> {
    let keys = host::reference::uniform(n, 7, 0.0, 1.0);
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by(|&a, &b| {
        keys[a as usize]
            .total_cmp(&keys[b as usize])
            .then(a.cmp(&b))
    });
    order.truncate(count);
    order
}

/// The scatter of issue 40: 768 threads (6 blocks of 128), 64 read-modify-writes each into a
/// 3 MB buffer. Logged access by access (no two of one thread form a progression), this is
/// ~100 000 short runs spread over the whole buffer; the check must not compare each with every
/// other. Times the launch with the check on: the quadratic sweep took tens of seconds here,
/// one over the accesses well under one (the bound is loose for a loaded machine).
#[test]
fn a_scatter_of_768_threads_into_3_mb_is_checked_in_time_and_a_repeated_slot_is_a_race() {
    let (rt, emu) = emulator();
    let n = 3 * 1024 * 1024 / 4;
    let threads = 768;
    let cfg = LaunchConfig::linear(6, 128);
    let mut slots = scattered_slots(n, threads * SCATTER_PER_THREAD);
    let buf = rt.upload(&vec![0.0f32; n]).unwrap();
    let index = rt.upload(&slots).unwrap();
    let (b, s) = (buf.ptr(), index.ptr());
    let start = std::time::Instant::now();
    emu.launch("scatter_add_one", &cfg, || unsafe { scatter_add_one(b, s) })
        .unwrap();
    let took = start.elapsed();
    eprintln!("scatter of {threads} x {SCATTER_PER_THREAD} with the global race check: {took:?}");
    assert!(took.as_secs_f64() < 10.0, "{took:?}");
    let got = rt.download(&buf).unwrap();
    let mut want = vec![0.0f32; n];
    for &slot in &slots {
        want[slot as usize] += 1.0;
    }
    assert_eq!(got, want);
    // Thread 700 (block 5) names thread 3's (block 0) tenth slot too: a race between them.
    let shared = slots[3 * SCATTER_PER_THREAD + 10];
    slots[700 * SCATTER_PER_THREAD + 20] = shared;
    let index = rt.upload(&slots).unwrap();
    let s = index.ptr();
    let err = emu_error(emu.launch("scatter_add_one", &cfg, || unsafe { scatter_add_one(b, s) }));
    let ((_, offset), [first, second]) = global_race(&err);
    assert_eq!(offset, 4 * shared as usize, "{err}");
    assert_eq!((first.0, first.1), (0, 3), "{err}");
    assert_eq!((second.0, second.1), (5, 700 - 5 * 128), "{err}");
}

kernel! {
    /// Every thread of the block stores into one shared flag (`same`: all the value 1, else
    /// each its own index) with no barrier between the stores; thread 0 copies the flag out
    /// after the barrier, plus 41, to its block's element.
    pub unsafe fn every_thread_sets_one_flag(out: GlobalPtr<u32>, same: bool) {
        let flag = shared_array![flag: [u32; 1]];
        let t = thread_idx_x();
        unsafe { flag.write(0, if same { 1 } else { t }) };
        sync_threads();
        if t == 0 {
            unsafe { out.write(block_idx_x() as usize, flag.read(0) + 41) };
        }
    }
}

#[test]
fn stores_of_the_same_value_to_one_shared_slot_are_a_benign_race_and_others_an_error() {
    let (rt, emu) = emulator();
    let out = rt.alloc::<u32>(2).unwrap();
    let o = out.ptr();
    let cfg = LaunchConfig::linear(2, 64);
    let launch_with = |same, options: &emu::LaunchOptions| {
        emu.0
            .launch_with("every_thread_sets_one_flag", &cfg, options, || unsafe {
                every_thread_sets_one_flag(o, same)
            })
    };
    let launch = |same| launch_with(same, &emu.options());
    let (_, observed) = launch(true).unwrap();
    assert_eq!(rt.download(&out).unwrap(), [42, 42]);
    let benign = observed.benign_races;
    // One pair of sites (the store with itself), the first block's.
    assert_eq!(benign.len(), 1, "{benign:?}");
    let b = &benign[0];
    assert_eq!((b.block.x, b.offset), (0, 0), "{b}");
    assert_eq!((b.first.thread.x, b.second.thread.x), (0, 1), "{b}");
    assert_eq!(b.first.site, b.second.site, "{b}");
    assert!(
        b.to_string().contains("benign data race on shared memory"),
        "{b}"
    );
    // Each thread its own value: a race, whatever lands last.
    let err = emu_error(launch(false));
    let EmuErrorKind::SharedRace { first, second, .. } = err.kind else {
        panic!("{err}")
    };
    assert_eq!((first.thread.x, second.thread.x), (0, 1), "{err}");
    // The check off: the racy kernel runs, and the last store (thread 63's) lands.
    let unchecked = emu::LaunchOptions {
        shared_races: false,
        ..emu.options()
    };
    launch_with(false, &unchecked).unwrap();
    assert_eq!(rt.download(&out).unwrap(), [63 + 41; 2]);
}
