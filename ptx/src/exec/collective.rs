//! What a thread hands to the emulator's scheduler: barriers, warp collectives, the tensor-core
//! operations (`ldmatrix`, `mma`, `wgmma`) and the asynchronous copies with their `mbarrier`s. Each
//! goes through the same `Gpu` call the kernels' Rust source makes.

use kernels::cuda::emu::{
    AsyncCopy, Collective, MbarrierOp, ShuffleMode, TmaLoad, WgmmaA, WgmmaOp,
};

use super::Thread;
use crate::decode::{
    self, BarRedArgs, BarRedOp, CpAsyncArgs, LdMatrixArgs, MbarrierArgs, MbarrierKind, ShflArgs,
    Space, TmaArgs, WarpReduceArgs, Wgmma, WgmmaSource,
};

impl Thread<'_> {
    /// [`Op::BarRed`](decode::Op::BarRed).
    #[inline(always)]
    pub(super) fn bar_red(&mut self, args: &BarRedArgs) {
        let BarRedArgs {
            site,
            op,
            d,
            a,
            negate,
        } = args;
        let value = (self.get(*a) != 0) ^ *negate;
        let count = self.gpu.sync_threads_count(*site, value);
        let threads = self.gpu.position().block_dim.volume();
        self.set(
            *d,
            match op {
                BarRedOp::Popc => u64::from(count),
                BarRedOp::And => u64::from(u64::from(count) == threads),
                BarRedOp::Or => u64::from(count != 0),
            },
        );
    }

    /// [`Op::Shfl`](decode::Op::Shfl).
    #[inline(always)]
    pub(super) fn shfl(&mut self, args: &ShflArgs, here: usize) {
        let ShflArgs {
            mode,
            d,
            p,
            a,
            b,
            c,
            mask,
        } = args;
        // PTX ISA, "shfl.sync": the source lane from b[4:0] and c's clamp value
        // c[4:0] and segment mask c[12:8] (sub-warp widths); out of range, the
        // lane reads its own value and p is false.
        let (b, c) = (self.get(*b) as u32, self.get(*c) as u32);
        let lane = self.lane;
        let (bval, cval, seg) = (b & 31, c & 31, (c >> 8) & 31);
        let max_lane = (lane & seg) | (cval & !seg);
        let min_lane = lane & seg;
        let (j, valid) = match mode {
            ShuffleMode::Up => {
                let j = lane as i32 - bval as i32;
                (j, j >= max_lane as i32)
            }
            ShuffleMode::Down => ((lane + bval) as i32, lane + bval <= max_lane),
            ShuffleMode::Bfly => ((lane ^ bval) as i32, lane ^ bval <= max_lane),
            ShuffleMode::Idx => {
                let j = min_lane | (bval & !seg);
                (j as i32, j <= max_lane)
            }
        };
        // The emulator's shuffle reads the lane it is given (its `idx` mode).
        let op = Collective::Shuffle {
            mode: ShuffleMode::Idx,
            value: self.get(*a) as u32,
            arg: if valid { j as u32 } else { lane },
        };
        let result = self
            .gpu
            .warp_collective(self.get(*mask) as u32, op, self.site(here));
        self.set(*d, u64::from(result[0]));
        if *p != u32::MAX {
            self.set(*p, u64::from(valid));
        }
    }

    /// [`Op::WarpReduce`](decode::Op::WarpReduce).
    #[inline(always)]
    pub(super) fn warp_reduce(&mut self, args: &WarpReduceArgs, here: usize) {
        let WarpReduceArgs {
            op,
            d,
            a,
            negate,
            mask,
        } = args;
        let value = (self.get(*a) as u32) ^ u32::from(*negate);
        let op = Collective::Reduce { op: *op, value };
        let result = self
            .gpu
            .warp_collective(self.get(*mask) as u32, op, self.site(here));
        self.set(*d, u64::from(result[0]));
    }

    /// [`Op::WarpSync`](decode::Op::WarpSync).
    #[inline(always)]
    pub(super) fn warp_sync(&mut self, mask: &decode::Slot, here: usize) {
        self.gpu.warp_collective(
            self.get(*mask) as u32,
            Collective::SyncWarp,
            self.site(here),
        );
    }

    /// [`Op::LdMatrix`](decode::Op::LdMatrix).
    #[inline(always)]
    pub(super) fn ld_matrix(&mut self, args: &LdMatrixArgs, here: usize) {
        let LdMatrixArgs {
            trans,
            d,
            addr,
            space,
        } = args;
        let a = self.get(*addr) as usize;
        let addr = match space {
            Space::Shared => self.base.wrapping_add(a),
            _ => a,
        };
        let op = Collective::LdMatrix {
            addr,
            trans: *trans,
        };
        let result = self.gpu.warp_collective(u32::MAX, op, self.site(here));
        for (k, &dk) in d.iter().enumerate() {
            self.set(dk, u64::from(result[k]));
        }
    }

    /// [`Op::Mma`](decode::Op::Mma).
    #[inline(always)]
    pub(super) fn mma(&mut self, m: &decode::Mma, here: usize) {
        let op = Collective::Mma {
            input: m.input,
            a: m.a.map(|s| self.get(s) as u32),
            b: m.b.map(|s| self.get(s) as u32),
            c: m.c.map(|s| f32::from_bits(self.get(s) as u32)),
        };
        let result = self.gpu.warp_collective(u32::MAX, op, self.site(here));
        for (k, &dk) in m.d.iter().enumerate() {
            self.set(dk, u64::from(result[k]));
        }
    }

    /// [`Op::CpAsync`](decode::Op::CpAsync).
    #[inline(always)]
    pub(super) fn cp_async(&mut self, args: &CpAsyncArgs, here: usize) {
        let CpAsyncArgs {
            dst,
            src,
            src_bytes,
        } = args;
        let src_bytes = self.get(*src_bytes) as u32;
        if src_bytes > 16 {
            panic!(
                "cp.async with src-size {src_bytes} > cp-size 16 (undefined), at {}",
                self.site(here)
            );
        }
        let op = AsyncCopy::Copy {
            dst: self.base.wrapping_add(self.get(*dst) as usize),
            src: self.get(*src) as usize,
            src_bytes,
        };
        self.gpu.async_copy(op, self.site(here));
    }

    /// [`Op::Mbarrier`](decode::Op::Mbarrier).
    #[inline(always)]
    pub(super) fn mbarrier(&mut self, args: &MbarrierArgs, here: usize) {
        let MbarrierArgs {
            kind,
            d,
            addr,
            shared,
            arg,
        } = args;
        let a = self.get(*addr) as usize;
        let bar = if *shared {
            self.base.wrapping_add(a)
        } else {
            a
        };
        let arg = if *arg == u32::MAX {
            0
        } else {
            self.get(*arg) as u32
        };
        let op = match kind {
            MbarrierKind::Init => MbarrierOp::Init { count: arg },
            MbarrierKind::Arrive => MbarrierOp::Arrive,
            MbarrierKind::ArriveExpectTx => MbarrierOp::ArriveExpectTx { bytes: arg },
            MbarrierKind::TryWait => MbarrierOp::TryWait { parity: arg },
        };
        // The emulator returns from a try_wait only once the phase completed (or
        // reports a wait that never can): the kernel's spin loop runs once.
        let done = self.gpu.mbarrier(bar, op, self.site(here));
        if *d != u32::MAX {
            // try_wait's predicate; arrive's state is opaque (0 here).
            let v = *kind == MbarrierKind::TryWait && done;
            self.set(*d, u64::from(v));
        }
    }

    /// [`Op::Tma`](decode::Op::Tma).
    #[inline(always)]
    pub(super) fn tma(&mut self, args: &TmaArgs, here: usize) {
        let TmaArgs {
            dst,
            map,
            coords,
            bar,
        } = args;
        let op = TmaLoad {
            dst: self.base.wrapping_add(self.get(*dst) as usize),
            map: self.get(*map) as usize,
            coords: coords.map(|c| self.get(c) as u32 as i32),
            bar: self.base.wrapping_add(self.get(*bar) as usize),
        };
        self.gpu.tma_load(op, self.site(here));
    }

    /// `wgmma.mma_async`: the accumulator registers go to a buffer the emulator updates when
    /// the whole warpgroup has issued the instruction, and come back tagged with its token.
    pub(super) fn wgmma(&mut self, w: &Wgmma, here: usize) {
        let accumulate = self.get(w.scale_d) & 1 != 0;
        self.acc.clear();
        for &s in &w.d {
            // scale-d false: D = A B, i.e. the product added to zeros.
            let v = if accumulate { self.get(s) as u32 } else { 0 };
            self.acc.push(f32::from_bits(v));
        }
        let op = WgmmaOp {
            input: w.input,
            n: w.n,
            a: match &w.a {
                WgmmaSource::Shared(desc) => WgmmaA::Shared(self.get(*desc)),
                WgmmaSource::Registers(regs) => WgmmaA::Registers(regs.map(|r| self.get(r) as u32)),
            },
            b: self.get(w.b),
            trans_b: w.trans_b,
            acc: self.acc.as_mut_ptr() as usize,
        };
        let token = self.gpu.wgmma(op, self.site(here));
        for (k, &s) in w.d.iter().enumerate() {
            self.set(s, u64::from(self.acc[k].to_bits()));
            self.acc_tokens[s as usize] = token;
        }
        // A's registers are the wgmma's until its group completes, as the accumulator is.
        if let WgmmaSource::Registers(a) = &w.a {
            for &s in a {
                self.acc_tokens[s as usize] = token;
            }
        }
    }
}
