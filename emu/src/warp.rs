//! Completing warp-collective instructions: shuffles, `ldmatrix` and `mma`, lane-exact as the
//! PTX ISA defines them.

use half::{bf16, f16};
use kernels::cuda::emu::{Access, Collective, MmaInput, ShuffleMode, Site, WarpReduce};

use super::block::{Block, Pending, State};
use super::error::EmuErrorKind;
use super::fragments;

const WARP: usize = 32;
/// FLOPs of one `mma.m16n8k16`: 16 x 8 outputs, each 16 multiply-adds.
pub(super) const MMA_FLOPS: u64 = 2 * 16 * 8 * 16;

/// Lanes of warp `w` that exist in a block of `threads` threads, as a mask.
fn existing_lanes(threads: usize, w: usize) -> u32 {
    let n = threads.saturating_sub(w * WARP).min(WARP);
    if n == WARP { u32::MAX } else { (1u32 << n) - 1 }
}

fn lanes(mask: u32) -> impl Iterator<Item = usize> {
    (0..WARP).filter(move |l| mask & (1 << l) != 0)
}

/// Completes every warp collective whose lanes have all arrived. Returns whether any did.
pub(super) fn complete_collectives(block: &Block) -> Result<bool, EmuErrorKind> {
    let mut progressed = false;
    for w in 0..block.threads.div_ceil(WARP) {
        let base = w * WARP;
        // The first waiting lane's mask decides the group; groups are completed one at a time.
        loop {
            let group = {
                let states = block.states.borrow();
                let pending = block.pending.borrow();
                ready_group(block, &states, &pending, w)
            };
            let Some((mask, op, site)) = group else { break };
            let ops: Vec<Pending> = {
                let pending = block.pending.borrow();
                lanes(mask)
                    .map(|l| pending[base + l].expect("lane in a ready group"))
                    .collect()
            };
            let results = complete(block, base, mask, &ops, op, site)?;
            let mut states = block.states.borrow_mut();
            let mut pending = block.pending.borrow_mut();
            let mut out = block.results.borrow_mut();
            if out.is_empty() {
                out.resize(block.threads, [0; 4]);
            }
            for (l, r) in lanes(mask).zip(results) {
                out[base + l] = r;
                pending[base + l] = None;
                states[base + l] = State::Runnable;
            }
            block.counters.borrow_mut().warp_collectives += 1;
            progressed = true;
        }
    }
    Ok(progressed)
}

/// A mask whose lanes all wait at the same collective instruction with that mask.
fn ready_group(
    block: &Block,
    states: &[State],
    pending: &[Option<Pending>],
    w: usize,
) -> Option<(u32, Collective, Site)> {
    let base = w * WARP;
    let exist = existing_lanes(block.threads, w);
    for l in lanes(exist) {
        let Some(p) = pending[base + l] else { continue };
        // A wgmma is a warpgroup instruction, completed by wgmma.rs.
        if matches!(p.op, Collective::Wgmma(_)) {
            continue;
        }
        if states[base + l] != State::AtCollective {
            continue;
        }
        if let Collective::ActiveMask = p.op {
            // Once no lane of the warp can run on: the lanes waiting at this one.
            if lanes(exist).any(|m| states[base + m] == State::Runnable) {
                return None;
            }
            let here = lanes(exist)
                .filter(|&m| {
                    states[base + m] == State::AtCollective
                        && pending[base + m]
                            .is_some_and(|q| q.site == p.site && same_kind(&q.op, &p.op))
                })
                .fold(0, |mask, m| mask | (1 << m));
            return Some((here, p.op, p.site));
        }
        if p.mask & !exist != 0 {
            continue;
        }
        let all_here = lanes(p.mask).all(|m| {
            states[base + m] == State::AtCollective
                && pending[base + m].is_some_and(|q| {
                    q.mask == p.mask && q.site == p.site && same_kind(&q.op, &p.op)
                })
        });
        if all_here {
            return Some((p.mask, p.op, p.site));
        }
    }
    None
}

fn same_kind(a: &Collective, b: &Collective) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// Called when nothing can progress: a lane waiting at a collective that cannot complete.
pub(super) fn stuck_collective(block: &Block, states: &[State]) -> Option<EmuErrorKind> {
    let pending = block.pending.borrow();
    let t = (0..block.threads).find(|&t| states[t] == State::AtCollective)?;
    let p = pending[t].expect("a lane at a collective has a pending op");
    let (w, base) = (t / WARP, t / WARP * WARP);
    let exist = existing_lanes(block.threads, w);
    let missing = p.mask & !exist;
    let detail = if missing != 0 {
        format!(
            "its mask names lanes {:?}, which do not exist in this block of {} threads",
            lanes(missing).collect::<Vec<_>>(),
            block.threads
        )
    } else {
        let absent: Vec<String> = lanes(p.mask)
            .filter(|&m| {
                !(states[base + m] == State::AtCollective
                    && pending[base + m].is_some_and(|q| q.site == p.site && q.mask == p.mask))
            })
            .take(4)
            .map(|m| {
                let what = match (states[base + m], pending[base + m]) {
                    (State::Done, _) => "has exited".to_string(),
                    (State::AtBarrier(s), _) => format!("waits at the barrier at {s}"),
                    (_, Some(q)) => format!(
                        "executes a different warp instruction at {} with mask {:#010x}",
                        q.site, q.mask
                    ),
                    _ => "never arrives".to_string(),
                };
                format!("lane {m} {what}")
            })
            .collect();
        format!(
            "not executed by every lane of its mask: {}",
            absent.join(", ")
        )
    };
    Some(EmuErrorKind::WarpCollective {
        warp: w as u32,
        mask: p.mask,
        site: p.site,
        detail,
    })
}

/// `vote.sync` / `redux.sync` over the (lane, operand) pairs of the mask, as the ISA defines each.
fn reduce(op: WarpReduce, values: &[(usize, u32)]) -> u32 {
    let all = || values.iter().map(|&(_, v)| v);
    let first = all().next().unwrap_or(0);
    match op {
        WarpReduce::Ballot => values.iter().fold(0, |m, &(l, p)| m | ((p & 1) << l)),
        WarpReduce::All => u32::from(all().all(|p| p & 1 != 0)),
        WarpReduce::Any => u32::from(all().any(|p| p & 1 != 0)),
        WarpReduce::Uni => u32::from(all().all(|p| p & 1 == first & 1)),
        WarpReduce::Add => all().fold(0u32, u32::wrapping_add),
        WarpReduce::MinU => all().min().unwrap_or(0),
        WarpReduce::MaxU => all().max().unwrap_or(0),
        WarpReduce::MinS => all().map(|v| v as i32).min().unwrap_or(0) as u32,
        WarpReduce::MaxS => all().map(|v| v as i32).max().unwrap_or(0) as u32,
        WarpReduce::And => all().fold(u32::MAX, |a, v| a & v),
        WarpReduce::Or => all().fold(0, |a, v| a | v),
        WarpReduce::Xor => all().fold(0, |a, v| a ^ v),
    }
}

/// Computes every lane's result registers for one completed collective.
fn complete(
    block: &Block,
    base: usize,
    mask: u32,
    ops: &[Pending],
    op: Collective,
    site: Site,
) -> Result<Vec<[u32; 4]>, EmuErrorKind> {
    let lane_ids: Vec<usize> = lanes(mask).collect();
    // Lane -> its index in `ops` (a table, not a search: every lane looks up others).
    let mut index = [usize::MAX; WARP];
    for (i, &l) in lane_ids.iter().enumerate() {
        index[l] = i;
    }
    let reg = |lane: usize| -> Option<&Collective> { ops.get(index[lane]).map(|p| &p.op) };
    let fail = |detail: String| EmuErrorKind::WarpCollective {
        warp: (base / WARP) as u32,
        mask,
        site,
        detail,
    };
    match op {
        Collective::SyncWarp => {
            block.order.borrow_mut().sync(base, mask);
            block.leave_fast_path();
            Ok(vec![[0; 4]; lane_ids.len()])
        }
        Collective::Wgmma(_) => unreachable!("ready_group leaves warpgroup instructions to wgmma.rs"),
        Collective::Shuffle { mode, .. } => lane_ids
            .iter()
            .map(|&lane| {
                let Some(Collective::Shuffle { value: own, arg, .. }) = reg(lane) else { unreachable!() };
                let src = match mode {
                    ShuffleMode::Idx => Some((*arg & 31) as usize),
                    ShuffleMode::Bfly => Some(lane ^ (*arg & 31) as usize),
                    ShuffleMode::Down => Some(lane + *arg as usize).filter(|&s| s < WARP),
                    ShuffleMode::Up => lane.checked_sub(*arg as usize),
                };
                let value = match src {
                    // Out of range for up/down: the lane keeps its own value (PTX `shfl` clamp).
                    None => *own,
                    Some(s) => match reg(s) {
                        Some(Collective::Shuffle { value, .. }) => *value,
                        _ => return Err(fail(format!("lane {lane} reads lane {s}, which is not in the mask (undefined on a GPU)"))),
                    },
                };
                Ok([value, 0, 0, 0])
            })
            .collect(),
        Collective::ActiveMask => Ok(vec![[mask, 0, 0, 0]; lane_ids.len()]),
        Collective::Reduce { op, .. } => {
            let values: Vec<(usize, u32)> = lane_ids
                .iter()
                .map(|&lane| match reg(lane) {
                    Some(Collective::Reduce { value, .. }) => (lane, *value),
                    _ => unreachable!("ready_group matched the kind"),
                })
                .collect();
            let result = reduce(op, &values);
            Ok(vec![[result, 0, 0, 0]; lane_ids.len()])
        }
        Collective::LdMatrix { trans, .. } => {
            if mask != u32::MAX {
                return Err(fail("ldmatrix is `.aligned`: all 32 lanes must execute it".into()));
            }
            // m[j][r][c]: element (r, c) of 8x8 matrix j, row r supplied by lane 8j + r.
            let mut m = [[[0u16; 8]; 8]; 4];
            for (j, matrix) in m.iter_mut().enumerate() {
                for (r, row) in matrix.iter_mut().enumerate() {
                    let lane = fragments::ldmatrix_row_lane(j, r);
                    let Some(Collective::LdMatrix { addr, .. }) = reg(lane) else { unreachable!() };
                    block.shared_check(base + lane, *addr, 16, Access::Read, ops[lane].site)?;
                    // SAFETY: checked just above: 16 readable bytes of this block's shared memory.
                    *row = unsafe { (*addr as *const [u16; 8]).read() };
                }
            }
            Ok((0..WARP)
                .map(|lane| {
                    let ((r0, c0), (r1, c1)) = (fragments::ldmatrix(lane, 0, trans), fragments::ldmatrix(lane, 1, trans));
                    std::array::from_fn(|j| u32::from(m[j][r0][c0]) | (u32::from(m[j][r1][c1]) << 16))
                })
                .collect())
        }
        Collective::Mma { input, .. } => {
            if mask != u32::MAX {
                return Err(fail("mma.sync.aligned needs all 32 lanes".into()));
            }
            let to_f64 = |bits: u16| -> f64 {
                match input {
                    MmaInput::Bf16 => f64::from(bf16::from_bits(bits).to_f32()),
                    MmaInput::F16 => f64::from(f16::from_bits(bits).to_f32()),
                }
            };
            let (mut a, mut b, mut c) = ([[0f64; 16]; 16], [[0f64; 8]; 16], [[0f64; 8]; 16]);
            for lane in 0..WARP {
                let Some(Collective::Mma { a: fa, b: fb, c: fc, .. }) = reg(lane) else { unreachable!() };
                for (i, &word) in fa.iter().enumerate() {
                    for (half, bits) in [word as u16, (word >> 16) as u16].into_iter().enumerate() {
                        let (row, col) = fragments::mma_a(lane, i, half);
                        a[row][col] = to_f64(bits);
                    }
                }
                for (i, &word) in fb.iter().enumerate() {
                    for (half, bits) in [word as u16, (word >> 16) as u16].into_iter().enumerate() {
                        let (k, n) = fragments::mma_b(lane, i, half);
                        b[k][n] = to_f64(bits);
                    }
                }
                for (i, &v) in fc.iter().enumerate() {
                    let (row, col) = fragments::mma_c(lane, i);
                    c[row][col] = f64::from(v);
                }
            }
            let mut counters = block.counters.borrow_mut();
            counters.flops += MMA_FLOPS;
            counters.mma_flops += MMA_FLOPS;
            drop(counters);
            Ok((0..WARP)
                .map(|lane| {
                    std::array::from_fn(|i| {
                        let (row, col) = fragments::mma_c(lane, i);
                        let dot: f64 = (0..16).map(|k| a[row][k] * b[k][col]).sum();
                        ((dot + c[row][col]) as f32).to_bits()
                    })
                })
                .collect())
        }
    }
}
