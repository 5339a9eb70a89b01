//! `wgmma` in the emulator: a warpgroup collective that reads its operands from shared memory
//! through matrix descriptors, lane-exact as the PTX ISA defines the layouts.
//!
//! The multiply happens when all 128 threads of the warpgroup have issued the same `mma_async`:
//! the operands are read then (checked like loads: bounds, initialisation, TMA phases) and the
//! accumulators written. What stays *in flight* until each thread's `wait_group` retires the
//! group is the bookkeeping: the shared chunks the instruction read (a write to one of them is
//! reported, by a thread or a TMA copy) and, per thread, the accumulator registers (an
//! [`Accumulator::read`](kernels::cuda::wgmma::Accumulator::read) before the wait is reported).

use std::collections::{HashMap, VecDeque};
use std::ops::Range;

use half::{bf16, f16};
use kernels::cuda::emu::{Access, Collective, MmaInput, Site, WgmmaA, WgmmaOp, WgmmaSync};

use super::block::{Block, State};
use super::error::EmuErrorKind;
use super::hopper::{CHUNK, swizzle_128b};

/// Threads of a warpgroup.
pub(super) const WARPGROUP: usize = 128;
/// Rows of A and D per `wgmma` (m64).
const M: usize = 64;
/// Depth of one `wgmma` (k16).
const K: usize = 16;
/// 16-bit elements per 16-byte chunk (the ISA's `T`).
const T: usize = 8;

/// A `wgmma` a thread issued, until its group retires.
#[derive(Clone, Copy)]
struct Issued {
    /// The thread's own count of `wgmma`s, the token its accumulator carries.
    token: u64,
    /// The warpgroup-wide operation.
    op: u64,
}

#[derive(Default)]
struct ThreadWgmma {
    issued: u64,
    retired: u64,
    /// Registers were written by ordinary instructions since the last `wgmma.fence`.
    needs_fence: bool,
    open: Vec<Issued>,
    committed: VecDeque<Vec<Issued>>,
    /// Token -> site of the `wgmma`s not yet retired, for reports.
    sites: HashMap<u64, Site>,
}

/// The shared chunks one warpgroup-wide `wgmma` read, while any of its threads has it in flight.
struct OpReads {
    chunks: Vec<usize>,
    refs: usize,
    site: Site,
}

/// The `wgmma` state of one block (`Default`: no threads, until [`HopperState::activate`]).
///
/// [`HopperState::activate`]: super::hopper::HopperState::activate
#[derive(Default)]
pub(super) struct WgmmaState {
    threads: Vec<ThreadWgmma>,
    ops: HashMap<u64, OpReads>,
    next_op: u64,
    /// Per 16-byte chunk of the arena: in-flight `wgmma`s reading it.
    readers: Vec<u32>,
}

impl WgmmaState {
    pub(super) fn new(threads: usize) -> Self {
        Self {
            threads: (0..threads)
                .map(|_| ThreadWgmma {
                    needs_fence: true,
                    ..Default::default()
                })
                .collect(),
            ops: HashMap::new(),
            next_op: 0,
            readers: Vec::new(),
        }
    }

    /// The first chunk of `chunks` that an in-flight `wgmma` reads, and that `wgmma`'s site.
    pub(super) fn reader_of(&self, chunks: Range<usize>) -> Option<(usize, Site)> {
        let c = chunks
            .into_iter()
            .find(|&c| self.readers.get(c).is_some_and(|&n| n > 0))?;
        let op = self.ops.values().find(|o| o.chunks.contains(&c))?;
        Some((c, op.site))
    }

    fn retire(&mut self, t: usize, issued: Issued) {
        let thread = &mut self.threads[t];
        thread.retired = issued.token;
        thread.sites.remove(&issued.token);
        let op = self.ops.get_mut(&issued.op).expect("an op in flight");
        op.refs -= 1;
        if op.refs == 0 {
            let op = self.ops.remove(&issued.op).expect("just found");
            for c in op.chunks {
                self.readers[c] -= 1;
            }
        }
    }
}

fn wgmma_error(t: usize, site: Site, detail: String) -> EmuErrorKind {
    EmuErrorKind::Wgmma {
        warpgroup: (t / WARPGROUP) as u32,
        site,
        detail,
    }
}

/// Thread `t` executes `wgmma.fence`, `commit_group` or `wait_group`.
pub(super) fn sync(block: &Block, t: usize, op: WgmmaSync) {
    let mut h = block.hopper.borrow_mut();
    h.activate();
    block.leave_fast_path();
    let w = &mut h.wgmma;
    match op {
        WgmmaSync::Fence => w.threads[t].needs_fence = false,
        WgmmaSync::CommitGroup => {
            let thread = &mut w.threads[t];
            let group = std::mem::take(&mut thread.open);
            thread.committed.push_back(group);
        }
        WgmmaSync::WaitGroup { pending } => {
            while w.threads[t].committed.len() > pending as usize {
                let group = w.threads[t].committed.pop_front().expect("checked");
                for issued in group {
                    w.retire(t, issued);
                }
            }
        }
    }
}

/// Thread `t` reads accumulator registers that the `wgmma` numbered `token` wrote.
pub(super) fn read(block: &Block, t: usize, token: u64, site: Site) -> Result<(), EmuErrorKind> {
    let mut h = block.hopper.borrow_mut();
    let Some(thread) = h.wgmma.threads.get_mut(t) else {
        // No Hopper instruction yet in this block: no wgmma wrote the registers (token 0), and
        // a thread's state starts out needing a fence.
        return Ok(());
    };
    // Registers read by ordinary instructions need a fence before the next wgmma touches them.
    thread.needs_fence = true;
    if token <= thread.retired {
        return Ok(());
    }
    let wgmma = thread.sites.get(&token).copied().unwrap_or(site);
    Err(EmuErrorKind::WgmmaAccumulatorInFlight {
        thread: block.thread_dim3(t),
        site,
        wgmma,
    })
}

/// Thread `t`'s token for the `wgmma` it just completed.
pub(super) fn token(block: &Block, t: usize) -> u64 {
    block.hopper.borrow().wgmma.threads[t].issued
}

fn pending_wgmma(block: &Block, t: usize) -> Option<(WgmmaOp, Site)> {
    if block.states.borrow()[t] != State::AtCollective {
        return None;
    }
    match block.pending.borrow()[t] {
        Some(p) => match p.op {
            Collective::Wgmma(op) => Some((op, p.site)),
            _ => None,
        },
        None => None,
    }
}

/// Completes every `wgmma` whose warpgroup has fully arrived. Returns whether any did.
pub(super) fn complete_warpgroups(block: &Block) -> Result<bool, EmuErrorKind> {
    // Issuing a wgmma activates the Hopper state: a block that has not has none waiting.
    if !block.hopper.borrow().active {
        return Ok(false);
    }
    let mut progressed = false;
    for base in (0..block.threads).step_by(WARPGROUP) {
        let Some((op, site)) =
            (base..block.threads.min(base + WARPGROUP)).find_map(|t| pending_wgmma(block, t))
        else {
            continue;
        };
        if base + WARPGROUP > block.threads {
            return Err(wgmma_error(
                base,
                site,
                format!(
                    "a warpgroup is 128 threads, but this block of {} threads has only {} in warpgroup {}",
                    block.threads,
                    block.threads - base,
                    base / WARPGROUP
                ),
            ));
        }
        let ops: Option<Vec<(WgmmaOp, Site)>> = (base..base + WARPGROUP)
            .map(|t| pending_wgmma(block, t))
            .collect();
        let Some(ops) = ops else { continue };
        if let Some(i) = ops
            .iter()
            .position(|(o, s)| *s != site || operands(o) != operands(&op))
        {
            return Err(wgmma_error(
                base,
                site,
                format!(
                    "thread {} of the warpgroup issues a different wgmma ({:?} at {}) than thread 0 ({op:?}): all 128 threads must issue the same instruction with the same descriptors",
                    i, ops[i].0, ops[i].1
                ),
            ));
        }
        // The tensor cores read the operands from shared memory themselves, not through the
        // load/store units: the profile keeps those bytes apart.
        block.engine.set(true);
        let executed = execute(block, base, &ops, site);
        block.engine.set(false);
        executed?;
        let mut states = block.states.borrow_mut();
        let mut pending = block.pending.borrow_mut();
        for t in base..base + WARPGROUP {
            states[t] = State::Runnable;
            pending[t] = None;
        }
        block.counters.borrow_mut().warp_collectives += 1;
        progressed = true;
    }
    Ok(progressed)
}

/// What every thread of the warpgroup must agree on: the instruction and its descriptors, not
/// its own registers.
fn operands(op: &WgmmaOp) -> WgmmaOp {
    let a = match op.a {
        WgmmaA::Registers(_) => WgmmaA::Registers([0; 4]),
        shared => shared,
    };
    WgmmaOp { acc: 0, a, ..*op }
}

/// The (row, column) of A that element `e` (0..8) of thread `t`'s A registers holds, as the PTX
/// ISA's figure "WGMMA .m64nNk16 register fragment layout for matrix A" draws it: warp `t / 32`
/// holds rows 16 (t / 32)..; lane `l`'s word 0 is row `l / 4`, columns `2 (l % 4)` and `+1`; word
/// 1 the same 8 rows down; words 2 and 3 the same, 8 columns right.
fn a_fragment(t: usize, e: usize) -> (usize, usize) {
    let (warp, lane, word) = (t / 32, t % 32, e / 2);
    let row = 16 * warp + lane / 4 + if word % 2 == 1 { 8 } else { 0 };
    let col = 2 * (lane % 4) + if word >= 2 { 8 } else { 0 } + e % 2;
    (row, col)
}

/// When nothing can progress: a thread waiting at a `wgmma` its warpgroup never completes.
pub(super) fn stuck(block: &Block, states: &[State]) -> Option<EmuErrorKind> {
    if !block.hopper.borrow().active {
        return None;
    }
    let t = (0..block.threads).find(|&t| pending_wgmma(block, t).is_some())?;
    let (_, site) = pending_wgmma(block, t).expect("just found");
    let base = t / WARPGROUP * WARPGROUP;
    let absent: Vec<String> = (base..block.threads.min(base + WARPGROUP))
        .filter(|&u| pending_wgmma(block, u).is_none())
        .take(4)
        .map(|u| {
            let what = match states[u] {
                State::Done => "has exited".to_string(),
                State::AtBarrier(s) => format!("waits at the barrier at {s}"),
                _ => "is blocked elsewhere".to_string(),
            };
            format!("thread {u} {what}")
        })
        .collect();
    Some(wgmma_error(
        t,
        site,
        format!(
            "not issued by every thread of the warpgroup: {}",
            absent.join(", ")
        ),
    ))
}

/// The (row, column) of the 64 x N accumulator in register `r` of thread `t` of the warpgroup,
/// as the PTX ISA's figure "WGMMA .m64nNk16 register fragment layout for accumulator matrix D"
/// draws it: warp `t / 32` holds rows 16 (t / 32) to +16; in each 8-column block `r / 4`, lane
/// `l` holds row `l / 4` in registers 0-1 and row `l / 4 + 8` in registers 2-3 of the block, at
/// columns `2 (l % 4)` and `+1`.
fn d_fragment(t: usize, r: usize) -> (usize, usize) {
    let (warp, lane) = (t / 32, t % 32);
    let (block, within) = (r / 4, r % 4);
    let row = 16 * warp + lane / 4 + if within >= 2 { 8 } else { 0 };
    let col = 8 * block + 2 * (lane % 4) + within % 2;
    (row, col)
}

/// A matrix descriptor's fields (PTX ISA, "Matrix Descriptor Format").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// `.shared` start address, in bytes.
    pub start: usize,
    /// Leading-dimension byte offset.
    pub lbo: usize,
    /// Stride-dimension byte offset.
    pub sbo: usize,
    /// Matrix base offset (bits 49-51).
    pub base_offset: u32,
    /// Swizzle: 0 none, 1 128-byte, 2 64-byte, 3 32-byte.
    pub swizzle: u32,
}

impl Descriptor {
    /// Unpacks the 64 bits: each 14-bit address field holds bytes / 16.
    pub fn decode(d: u64) -> Self {
        let field = |shift: u32| ((d >> shift) & 0x3FFF) as usize * 16;
        Self {
            start: field(0),
            lbo: field(16),
            sbo: field(32),
            base_offset: ((d >> 49) & 7) as u32,
            swizzle: (d >> 62) as u32,
        }
    }

    /// Bytes of a swizzle row (the span the pattern repeats over in one line): 16 with none.
    fn swizzle_bytes(&self) -> usize {
        match self.swizzle {
            1 => 128,
            2 => 64,
            3 => 32,
            _ => 16,
        }
    }

    /// `.shared` address of the 16-bit element at (`mn`, `k`) of a K-major matrix (PTX ISA,
    /// "Canonical Layouts": `((8, m), (T, 2k)) : ((S T, SBO), (1, T))` for a swizzle of `S`
    /// 16-byte units, `((8, m), (T, 2k)) : ((1T, SBO), (1, LBO))` without), before the swizzle.
    pub fn k_major(&self, mn: usize, k: usize) -> usize {
        let (r0, r1) = (mn % 8, mn / 8);
        let unswizzled = if self.swizzle == 0 {
            r0 * 16 + r1 * self.sbo + (k % T) * 2 + (k / T) * self.lbo
        } else {
            r0 * self.swizzle_bytes() + r1 * self.sbo + k * 2
        };
        self.start + unswizzled
    }

    /// `.shared` address of the 16-bit element at (`mn`, `k`) of an MN-major matrix:
    /// `((T, S, m), (8, k)) : ((1, T, LBO), (S T, SBO))` for a swizzle of `S` 16-byte units,
    /// `((T, 1, m), (8, k)) : ((1, T, SBO), (1T, LBO))` without, before the swizzle.
    pub fn mn_major(&self, mn: usize, k: usize) -> usize {
        let (k0, k1) = (k % 8, k / 8);
        let unswizzled = if self.swizzle == 0 {
            (mn % T) * 2 + (mn / T) * self.sbo + k0 * 16 + k1 * self.lbo
        } else {
            let span = self.swizzle_bytes() / 2;
            (mn % span) * 2 + (mn / span) * self.lbo + k0 * self.swizzle_bytes() + k1 * self.sbo
        };
        self.start + unswizzled
    }

    /// Where the byte at `.shared` address `addr` of the layout really is: the swizzle
    /// (`Swizzle<B, 4, 3>` on byte addresses, B = 3, 2, 1 for 128, 64, 32 bytes).
    pub fn swizzle(&self, addr: usize) -> usize {
        match self.swizzle {
            1 => swizzle_128b(addr),
            2 => addr ^ ((addr >> 3) & 0x30),
            3 => addr ^ ((addr >> 3) & 0x10),
            _ => addr,
        }
    }
}

/// Reads 8 consecutive 16-bit elements (one 16-byte chunk) at `.shared` address `at` on thread
/// `t`'s behalf, checked like a load.
fn chunk(
    block: &Block,
    t: usize,
    at: usize,
    site: Site,
    input: MmaInput,
    chunks: &mut Vec<usize>,
) -> Result<[f64; 8], EmuErrorKind> {
    let addr = block.arena.borrow().ptr_at(at) as usize;
    block.shared_check(t, addr, CHUNK, Access::Read, site)?;
    chunks.push(at / CHUNK);
    // SAFETY: checked just above: 16 readable bytes of this block's shared memory.
    let raw = unsafe { (addr as *const [u16; 8]).read() };
    Ok(raw.map(|bits| to_f64(input, bits)))
}

/// A 16-bit element's value.
fn to_f64(input: MmaInput, bits: u16) -> f64 {
    match input {
        MmaInput::Bf16 => f64::from(bf16::from_bits(bits).to_f32()),
        MmaInput::F16 => f64::from(f16::from_bits(bits).to_f32()),
    }
}

/// The warpgroup at `base` executes `wgmma.mma_async` (every thread's share in `ops`).
fn execute(
    block: &Block,
    base: usize,
    ops: &[(WgmmaOp, Site)],
    site: Site,
) -> Result<(), EmuErrorKind> {
    let op = ops[0].0;
    let n = op.n as usize;
    let fail = |detail: String| wgmma_error(base, site, detail);
    if !(8..=256).contains(&n) || !n.is_multiple_of(8) {
        return Err(fail(format!("N = {n}: a multiple of 8 from 8 to 256")));
    }
    if let Some(t) =
        (base..base + WARPGROUP).find(|&t| block.hopper.borrow().wgmma.threads[t].needs_fence)
    {
        return Err(fail(format!(
            "thread {} wrote or read its accumulator or A-fragment registers with ordinary instructions and issued no wgmma_fence since",
            t - base
        )));
    }
    let db = Descriptor::decode(op.b);
    let da = match op.a {
        WgmmaA::Shared(d) => Some(Descriptor::decode(d)),
        WgmmaA::Registers(_) => None,
    };
    for (name, d) in [("A", da), ("B", Some(db))] {
        if let Some(d) = d
            && d.base_offset != 0
        {
            return Err(fail(format!(
                "{name}'s descriptor has base offset {}: the emulator models swizzle patterns that start on their own boundary (base offset 0)",
                d.base_offset
            )));
        }
    }
    let mut chunks = Vec::new();
    let mut read = |t: usize, at: usize| chunk(block, t, at, site, op.input, &mut chunks);
    // A: 64 x 16, K-major; rows 16w.. are read for warp w (attributed to its lane 0).
    let mut a = vec![[0f64; K]; M];
    match da {
        Some(da) => {
            for (m, row) in a.iter_mut().enumerate() {
                let reader = base + m / 16 * 32;
                for kc in 0..K / T {
                    let at = da.swizzle(da.k_major(m, kc * T));
                    row[kc * T..][..T].copy_from_slice(&read(reader, at)?);
                }
            }
        }
        // From registers: each thread's 8 elements to their places.
        None => {
            for (i, (o, _)) in ops.iter().enumerate() {
                let WgmmaA::Registers(words) = o.a else {
                    unreachable!("every thread issues the same form")
                };
                for e in 0..8 {
                    let bits = (words[e / 2] >> (16 * (e % 2))) as u16;
                    let (row, col) = a_fragment(i, e);
                    a[row][col] = to_f64(op.input, bits);
                }
            }
        }
    }
    // B: 16 x N, K-major or (trans-b) N-major; read for the warpgroup (its thread 0).
    let mut b = vec![vec![0f64; n]; K];
    if op.trans_b {
        for (k, row) in b.iter_mut().enumerate() {
            for nc in 0..n / T {
                let at = db.swizzle(db.mn_major(nc * T, k));
                row[nc * T..][..T].copy_from_slice(&read(base, at)?);
            }
        }
    } else {
        // K-major B: each column's 16 K values are two chunks; transposed into b afterwards.
        let mut columns = vec![[0f64; K]; n];
        for (col, column) in columns.iter_mut().enumerate() {
            for kc in 0..K / T {
                let at = db.swizzle(db.k_major(col, kc * T));
                column[kc * T..][..T].copy_from_slice(&read(base, at)?);
            }
        }
        for (k, row) in b.iter_mut().enumerate() {
            for (x, column) in row.iter_mut().zip(&columns) {
                *x = column[k];
            }
        }
    }
    // D = A B + C, each thread's registers in the accumulator layout.
    let regs = n / 2;
    for (i, (o, _)) in ops.iter().enumerate() {
        // SAFETY: the thread is suspended inside `wgmma_ss` or `wgmma_rs`, whose `&mut` accumulator of
        // N / 2 f32 this points to.
        let acc = unsafe { std::slice::from_raw_parts_mut(o.acc as *mut f32, regs) };
        for (r, v) in acc.iter_mut().enumerate() {
            let (row, col) = d_fragment(i, r);
            let dot: f64 = (0..K).map(|k| a[row][k] * b[k][col]).sum();
            *v = (dot + f64::from(*v)) as f32;
        }
    }
    let mut counters = block.counters.borrow_mut();
    counters.flops += (2 * M * n * K) as u64;
    counters.wgmma_flops += (2 * M * n * K) as u64;
    drop(counters);
    let mut h = block.hopper.borrow_mut();
    h.activate();
    block.leave_fast_path();
    let w = &mut h.wgmma;
    chunks.sort_unstable();
    chunks.dedup();
    if let Some(&last) = chunks.last()
        && w.readers.len() <= last
    {
        w.readers.resize(last + 1, 0);
    }
    for &c in &chunks {
        w.readers[c] += 1;
    }
    let id = w.next_op;
    w.next_op += 1;
    w.ops.insert(
        id,
        OpReads {
            chunks,
            refs: WARPGROUP,
            site,
        },
    );
    for t in base..base + WARPGROUP {
        let thread = &mut w.threads[t];
        thread.issued += 1;
        let token = thread.issued;
        thread.open.push(Issued { token, op: id });
        thread.sites.insert(token, site);
    }
    Ok(())
}
