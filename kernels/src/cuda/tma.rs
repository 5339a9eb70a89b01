//! The Tensor Memory Accelerator (TMA): `cp.async.bulk.tensor`, one instruction that copies a
//! whole tile (a *box*) of a tensor from global to shared memory and signals an
//! [`mbarrier`](super::mbarrier) when its bytes have landed.
//!
//! Before Hopper a tile load was hundreds of `cp.async` (16 bytes each, one address per thread)
//! plus the bounds arithmetic for each. The TMA takes a *tensor map* that the host encodes once
//! (`cuTensorMapEncodeTiled`: base address, sizes, row pitch, box size, swizzle mode) and box
//! coordinates; the copy engine computes every address, zero-fills every element of the box that
//! lies outside the tensor, writes the box in shared memory in the map's swizzle pattern, and
//! counts its bytes against the barrier's tx-count. One thread issues it; no registers hold data.
//!
//! The map is 128 opaque bytes. The GPU's encoding is the driver's; the emulator's is
//! [`EmuTensorMap`], built by the host from the same parameters, so a kernel receives "a tensor
//! map" either way. Kernels here take it from global memory (a [`GlobalPtr`] to the 128 bytes),
//! one of the three places the ISA allows.

use super::{GlobalPtr, SharedPtr};

/// A `CUtensorMap`: 128 bytes, 64-byte aligned, opaque to the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct TensorMap {
    /// The encoded map: the driver's on a GPU, [`EmuTensorMap::encode`]'s on the emulator.
    pub opaque: [u64; 16],
}

/// How the TMA lays a box's rows out in shared memory (`CUtensorMapSwizzle`).
///
/// With `B128`, each 16-byte chunk `c` of each 128-byte row `r` of the box lands at chunk
/// `c ^ (r % 8)` of its row (CUTLASS's `Swizzle<3, 4, 3>` on byte addresses): the pattern a
/// 128-byte-swizzled wgmma descriptor reads, and one that spreads any column of 16-byte chunks
/// over all 32 banks. The pattern is a function of the shared address, repeating every 1024
/// bytes, so a box must start on a 1024-byte boundary to begin at row 0 of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum TmaSwizzle {
    /// Rows packed as they are.
    None = 0,
    /// 128-byte swizzle: rows of at most 128 bytes.
    B128 = 3,
}

/// The parameters of a two-dimensional tiled tensor map, dimension 0 innermost (contiguous).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmuTensorMap {
    /// Global address of element (0, 0).
    pub base: u64,
    /// Elements along dimensions 0 and 1.
    pub dims: [u64; 2],
    /// Bytes from one dimension-1 index to the next (a multiple of 16).
    pub row_pitch: u64,
    /// Elements of the box along dimensions 0 and 1.
    pub box_dims: [u32; 2],
    /// Bytes per element.
    pub elem_bytes: u32,
    /// The shared-memory layout of the box.
    pub swizzle: TmaSwizzle,
}

/// Word 0 of an emulator tensor map, so that 128 bytes of anything else are refused.
const EMU_MAGIC: u64 = 0x544d_4150_454d_5531; // "TMAPEMU1"

impl EmuTensorMap {
    /// The 128 bytes the emulator reads.
    pub const fn encode(&self) -> TensorMap {
        let mut opaque = [0u64; 16];
        opaque[0] = EMU_MAGIC;
        opaque[1] = self.base;
        opaque[2] = self.dims[0];
        opaque[3] = self.dims[1];
        opaque[4] = self.row_pitch;
        opaque[5] = self.box_dims[0] as u64 | (self.box_dims[1] as u64) << 32;
        opaque[6] = self.elem_bytes as u64 | (self.swizzle as u64) << 32;
        TensorMap { opaque }
    }

    /// The parameters back, or `None` for bytes that [`encode`](Self::encode) did not make.
    pub const fn decode(map: &TensorMap) -> Option<Self> {
        let o = &map.opaque;
        if o[0] != EMU_MAGIC {
            return None;
        }
        let swizzle = match o[6] >> 32 {
            0 => TmaSwizzle::None,
            3 => TmaSwizzle::B128,
            _ => return None,
        };
        Some(Self {
            base: o[1],
            dims: [o[2], o[3]],
            row_pitch: o[4],
            box_dims: [o[5] as u32, (o[5] >> 32) as u32],
            elem_bytes: o[6] as u32,
            swizzle,
        })
    }

    /// Bytes of one box in shared memory, out-of-bounds elements included (zero-filled, and
    /// counted by `complete_tx` like the rest).
    pub const fn box_bytes(&self) -> u32 {
        self.box_dims[0] * self.box_dims[1] * self.elem_bytes
    }
}

/// A bulk tensor copy, as the emulator receives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmaLoad {
    /// Generic address of the box's destination in shared memory.
    pub dst: usize,
    /// Generic address of the tensor map in global memory.
    pub map: usize,
    /// Box origin: element coordinates along dimensions 0 and 1 (may be negative or past the end).
    pub coords: [i32; 2],
    /// Generic address of the mbarrier that `complete_tx` signals.
    pub bar: usize,
}

/// `cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [map,
/// {c0, c1}], [bar]`: copies the box at element coordinates (`c0`, `c1`) of the tensor `map`
/// describes into shared memory at `dst`, and counts its bytes against `bar`'s current phase.
///
/// The box lands in the map's swizzle layout; elements outside the tensor are written as zeros.
/// Until the phase completes (seen through an mbarrier wait) nobody may read or write `dst`.
///
/// # Safety
/// `map` points to a tensor map in global memory whose box fits at `dst` in this block's shared
/// memory (1024-byte aligned with a 128-byte swizzle, 128-byte aligned otherwise); `bar` is an
/// initialised mbarrier whose phase expects these bytes (`mbarrier_arrive_expect_tx`).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn tma_load_2d<T: Copy>(
    dst: SharedPtr<T>,
    map: GlobalPtr<TensorMap>,
    c0: i32,
    c1: i32,
    bar: SharedPtr<u64>,
) {
    #[cfg(target_arch = "nvptx64")]
    // SAFETY: the caller's contract. Without a cluster launch, a block's own `.shared::cta`
    // addresses are valid `.shared::cluster` addresses.
    unsafe {
        core::arch::asm!(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{m}, {{{x}, {y}}}], [{b}];",
            d = in(reg32) super::shared::shared_address(dst),
            m = in(reg64) map.addr() as u64,
            x = in(reg32) c0,
            y = in(reg32) c1,
            b = in(reg32) super::shared::shared_address(bar),
        )
    };
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let site = super::emu::Site::caller();
        let op = TmaLoad {
            dst: dst.as_ptr() as usize,
            map: map.addr(),
            coords: [c0, c1],
            bar: bar.as_ptr() as usize,
        };
        super::emu::with(|gpu| gpu.tma_load(op, site));
    }
}
