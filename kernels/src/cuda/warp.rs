//! Warp-level primitives: the 32 lanes of a warp exchange registers directly, with no trip
//! through shared memory.
//!
//! A warp is 32 consecutive threads of a block (by [`linear_thread_idx`]). The `_sync` PTX forms
//! name the participating lanes in `mask`; every lane in `mask` must execute the same
//! instruction, or the result is undefined on the GPU and an error in the emulator.
//!
//! [`linear_thread_idx`]: super::thread::linear_thread_idx

/// Lanes per warp on every NVIDIA GPU so far.
pub const WARP_SIZE: u32 = 32;
/// Every lane of the warp participates.
pub const FULL_MASK: u32 = 0xffff_ffff;

/// A 32-bit value that can travel through a shuffle.
pub trait ShuffleValue: Copy {
    /// The raw register bits.
    fn to_bits(self) -> u32;
    /// Back from the raw register bits.
    fn from_bits(bits: u32) -> Self;
}

impl ShuffleValue for u32 {
    fn to_bits(self) -> u32 {
        self
    }
    fn from_bits(bits: u32) -> Self {
        bits
    }
}
impl ShuffleValue for i32 {
    fn to_bits(self) -> u32 {
        self as u32
    }
    fn from_bits(bits: u32) -> Self {
        bits as i32
    }
}
impl ShuffleValue for f32 {
    fn to_bits(self) -> u32 {
        f32::to_bits(self)
    }
    fn from_bits(bits: u32) -> Self {
        f32::from_bits(bits)
    }
}

/// This thread's lane in its warp, 0..32 (`%laneid`).
#[inline(always)]
pub fn lane_id() -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let lane: u32;
        // SAFETY: reads a special register.
        unsafe { core::arch::asm!("mov.u32 {l}, %laneid;", l = out(reg32) lane) };
        lane
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        super::thread::linear_thread_idx() % WARP_SIZE
    }
}

/// How a shuffle picks its source lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShuffleMode {
    /// From lane `arg` (`shfl.sync.idx`).
    Idx,
    /// From lane `lane - arg`; lanes below `arg` keep their own value (`shfl.sync.up`).
    Up,
    /// From lane `lane + arg`; lanes past 31 keep their own value (`shfl.sync.down`).
    Down,
    /// From lane `lane ^ arg` (`shfl.sync.bfly`, the butterfly of a tree reduction).
    Bfly,
}

macro_rules! shuffle_fn {
    ($(#[$meta:meta])* $name:ident, $mode:ident, $ptx:literal, $clamp:literal) => {
        $(#[$meta])*
        #[inline(always)]
        #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
        pub fn $name<T: ShuffleValue>(mask: u32, value: T, arg: u32) -> T {
            #[cfg(target_arch = "nvptx64")]
            {
                let out: u32;
                // SAFETY: a register exchange; `mask` names the participating lanes.
                unsafe {
                    core::arch::asm!(
                        concat!("shfl.sync.", $ptx, ".b32 {d}, {a}, {b}, ", $clamp, ", {m};"),
                        d = out(reg32) out,
                        a = in(reg32) value.to_bits(),
                        b = in(reg32) arg,
                        m = in(reg32) mask,
                    )
                };
                T::from_bits(out)
            }
            #[cfg(not(target_arch = "nvptx64"))]
            {
                let site = super::emu::Site::caller();
                let op = super::emu::Collective::Shuffle {
                    mode: ShuffleMode::$mode,
                    value: value.to_bits(),
                    arg,
                };
                T::from_bits(super::emu::with(|gpu| gpu.warp_collective(mask, op, site))[0])
            }
        }
    };
}

shuffle_fn!(
    /// `__shfl_xor_sync(mask, value, lane_mask)`: the value held by lane `lane ^ lane_mask`.
    shuffle_xor, Bfly, "bfly", "0x1f");
shuffle_fn!(
    /// `__shfl_down_sync(mask, value, delta)`: the value held by lane `lane + delta`.
    shuffle_down, Down, "down", "0x1f");
shuffle_fn!(
    /// `__shfl_up_sync(mask, value, delta)`: the value held by lane `lane - delta`.
    shuffle_up, Up, "up", "0x0");
shuffle_fn!(
    /// `__shfl_sync(mask, value, src_lane)`: the value held by lane `src_lane` (a broadcast).
    shuffle_idx, Idx, "idx", "0x1f");

/// `__syncwarp(mask)` (`bar.warp.sync`): the lanes in `mask` wait for each other, and their
/// shared-memory writes become visible to each other.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn sync_warp(mask: u32) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: a warp barrier.
    unsafe {
        core::arch::asm!("bar.warp.sync {m};", m = in(reg32) mask)
    };
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let site = super::emu::Site::caller();
        super::emu::with(|gpu| gpu.warp_collective(mask, super::emu::Collective::SyncWarp, site));
    }
}

/// The sum of `value` over the 32 lanes, in every lane: five butterfly steps.
#[inline(always)]
pub fn reduce_sum(value: f32) -> f32 {
    reduce_sum_within(value, WARP_SIZE)
}

/// The sum of `value` over each aligned group of `lanes` lanes (a power of two up to 32), in
/// every lane of the group: `log2(lanes)` butterfly steps, each exchanging with a lane of the
/// same group (`lane ^ offset` with `offset < lanes`). Every lane of the warp must call it, as
/// for any full-warp shuffle; with `lanes = 16` the two half-warps get their own sums.
#[inline(always)]
pub fn reduce_sum_within(value: f32, lanes: u32) -> f32 {
    debug_assert!(lanes.is_power_of_two() && lanes <= WARP_SIZE);
    let mut v = value;
    let mut offset = lanes / 2;
    while offset > 0 {
        v += shuffle_xor(FULL_MASK, v, offset);
        offset /= 2;
    }
    v
}

/// The maximum of `value` over the 32 lanes, in every lane (NaN-ignoring, like `max.f32`).
#[inline(always)]
pub fn reduce_max(value: f32) -> f32 {
    let mut v = value;
    let mut offset = WARP_SIZE / 2;
    while offset > 0 {
        v = v.max(shuffle_xor(FULL_MASK, v, offset));
        offset /= 2;
    }
    v
}
