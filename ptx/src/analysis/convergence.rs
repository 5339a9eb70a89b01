//! The static convergence check (`cargo xtask ptxas` runs it first): no block barrier and no warp collective is
//! executed by only some of the threads that must meet there.
//!
//! `bar.sync` waits for every thread of the block, `shfl.sync`, `ldmatrix` and `mma.sync` for
//! every lane of the warp; the PTX ISA leaves it undefined when some of those threads take a
//! branch around the instruction, or wait at a different copy of it. So for every kernel entry this
//! module finds each such instruction that is *control-dependent on a lane-varying branch*: one
//! that lies between a conditional branch whose predicate differs between threads and that
//! branch's immediate post-dominator (the first block every path from the branch goes through).
//! That is the bug rustc's MIR JumpThreading once put in four softmax kernels
//! (tests/fixtures/ptx/softmax_normalise_f32-duplicated-barrier.ptx; docs/toolchain.md).
//!
//! The analysis, per entry, over the PTX that `ptx::parse` reads:
//! 1. **CFG**: basic blocks split at labels and after `bra`/`ret`/`exit`/`trap`, plus one virtual
//!    exit block; `@p bra` has two successors, `@p ret` goes to the exit or falls through.
//! 2. **Post-dominators** of every block (Cooper, Harvey and Kennedy's iterative algorithm on the
//!    reversed CFG), and for each conditional branch its *region*: the blocks reachable from its
//!    successors without passing through its immediate post-dominator.
//! 3. **Uniformity** of every register, a forward taint to a fixpoint: `%tid.*` and `%laneid`
//!    vary per lane, `%ctaid.*`, `%ntid.*` and the kernel parameters are uniform, an arithmetic
//!    result is as varying as its most varying operand, and a register written inside the region
//!    of a varying branch (or under a varying guard) is varying too (different lanes took
//!    different paths to the join, or left a loop after different trip counts). `%tid.x / 32`
//!    (`shr` by 5 or more, `div` by a multiple of 32, `and` with the low 5 bits clear) is
//!    *warp-uniform*: the same in every lane of a warp, but not across the block. That assumes
//!    a warp is 32 consecutive `%tid.x`, i.e. a one-dimensional block or `blockDim.x` a multiple of
//!    32, as every launch of this project has.
//!
//!    Through memory: a load takes the uniformity of its address, so a value every thread reads
//!    from one shared-memory slot after a barrier (`broadcast_from_thread0`) is uniform. That is
//!    sound for race-free code: if all threads of the block (or warp) execute the same load at the
//!    same address between the same two barriers, a write to it by any thread in that interval
//!    would race with another thread's read (a race the emulator reports in shared memory); so
//!    they all read one value. It does not hold for per-thread memory, so addresses derived from the local depot
//!    (`__local_depot`, `ld.local`) are varying, nor for loads that may see concurrent writes
//!    (`.volatile`, `.relaxed`, `.acquire`, atomics), whose results are varying.
//! 4. **Findings**: a block barrier (`bar.*`, `barrier.*`) must not be under any branch that is not
//!    block-uniform; a warp collective (`shfl.sync`, `vote.sync`, `match.sync`, `redux.sync`,
//!    `bar.warp.sync`, `ldmatrix`, `stmatrix`, `mma`, `wmma`, `wgmma`, `elect.sync`, and anything
//!    `.aligned`) not under a lane-varying one (a warp-uniform branch keeps whole warps
//!    together). A named barrier with an explicit thread count (`bar.sync 1, 64`) is for a subset
//!    of warps, so it is held to the warp rule. `cp.async.wait_group` is per thread and needs no convergence. Calls are not
//!    followed: the kernels inline everything, and the parser refuses a `call`, so one would stop
//!    the check with an error rather than pass unseen.
//!
//! A finding names the kernel, the PTX lines of the instruction and of the branch, and their Rust
//! source lines where the PTX carries line tables (`.loc`).
//!
//! A kernel that diverges on purpose (e.g. a collective with a partial member mask that exactly
//! names the lanes that take the branch) opts out with an [`Allowance`] and its reason (the
//! project's list is `ALLOWED` in xtask/src/ptxas/mod.rs); an allowance that no longer matches
//! anything is an error, so the list cannot go stale.

use std::collections::{HashMap, HashSet};
use std::fmt;

use crate::parse::{self, Function, Instruction, Module, Operand, RegId, Statement};

/// A kernel's stated reason to execute one kind of convergent instruction under a lane-varying
/// branch.
pub struct Allowance {
    /// The entry's name.
    pub kernel: &'static str,
    /// The opcode's prefix the allowance covers, e.g. `"shfl.sync"`.
    pub op: &'static str,
    /// Why it is correct there.
    pub reason: &'static str,
}

/// How far a value (or a branch decided by it) may differ between the threads of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Uniformity {
    /// The same in every thread of the block.
    Block,
    /// The same in every lane of a warp; may differ between warps.
    Warp,
    /// May differ between lanes of one warp.
    Lane,
}

/// A register's abstract value while the taint runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value {
    /// No definition seen yet.
    Unset,
    /// Exactly `%tid.x` (or a widened or narrowed copy): varies per lane, but its quotient by 32
    /// is warp-uniform.
    TidX,
    /// Anything else, by how uniform it is.
    Known(Uniformity),
}

impl Value {
    fn uniformity(self) -> Uniformity {
        match self {
            Value::Unset => Uniformity::Block,
            Value::TidX => Uniformity::Lane,
            Value::Known(u) => u,
        }
    }

    /// The value of a register with both `self` and `other` among its definitions.
    fn join(self, other: Value) -> Value {
        match (self, other) {
            (Value::Unset, v) | (v, Value::Unset) => v,
            (a, b) if a == b => a,
            (a, b) => Value::Known(a.uniformity().max(b.uniformity())),
        }
    }
}

/// Which threads a convergent instruction needs together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every thread of the block (`bar.sync`).
    Block,
    /// Every lane of the warp, or of the member mask (`shfl.sync`, `mma.sync`).
    Warp,
}

impl Scope {
    /// Whether a branch of uniformity `u` splits the threads this scope needs together.
    fn split_by(self, u: Uniformity) -> bool {
        match self {
            Scope::Block => u > Uniformity::Block,
            Scope::Warp => u == Uniformity::Lane,
        }
    }
}

/// One convergent instruction that only some of its threads may reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The entry.
    pub kernel: String,
    /// The convergent instruction's opcode.
    pub op: String,
    /// Its PTX line (1-based).
    pub op_line: u32,
    /// Block barrier or warp collective.
    pub scope: Scope,
    /// The PTX line of the branch it depends on (its own line when it is guarded itself).
    pub branch_line: u32,
    /// The branch (or guarded instruction) as written.
    pub branch: String,
    /// How varying the branch's predicate is.
    pub branch_uniformity: Uniformity,
    /// The Rust source positions (`file:line`) of the instruction and of the branch, where the
    /// PTX has line tables (`.loc`).
    pub op_source: Option<String>,
    pub branch_source: Option<String>,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, who) = match self.scope {
            Scope::Block => ("block barrier", "the threads of a block"),
            Scope::Warp => ("warp collective", "the lanes of a warp"),
        };
        let how = match self.branch_uniformity {
            Uniformity::Lane => "lane-varying",
            _ => "warp-varying",
        };
        let at = |line: u32, source: &Option<String>| match source {
            Some(s) => format!("PTX line {line} ({s})"),
            None => format!("PTX line {line}"),
        };
        let op_at = at(self.op_line, &self.op_source);
        if self.branch_line == self.op_line {
            write!(
                f,
                "{}: {what} `{}` at {op_at} is guarded by a {how} predicate (`{}`): {who} do not all execute it",
                self.kernel, self.op, self.branch
            )
        } else {
            write!(
                f,
                "{}: {what} `{}` at {op_at} is control-dependent on the {how} branch at {} (`{}`): {who} do not all reach it together",
                self.kernel,
                self.op,
                at(self.branch_line, &self.branch_source),
                self.branch
            )
        }
    }
}

/// What the check found in one module.
#[derive(Debug, Default)]
pub struct Report {
    /// Kernel entries checked.
    pub kernels: usize,
    /// Block barriers checked.
    pub barriers: usize,
    /// Warp collectives (and named barriers for a subset of warps) checked.
    pub collectives: usize,
    /// Divergent ones that no allowance covers.
    pub findings: Vec<Finding>,
    /// Divergent ones that an allowance covers, with its reason.
    pub allowed: Vec<(Finding, &'static str)>,
}

/// Checks every kernel entry of a PTX text, with the opt-outs `allowed`.
pub fn check_text(ptx: &str, allowed: &[Allowance]) -> Result<Report, String> {
    let module = parse::parse(ptx).map_err(|e| format!("cannot parse the PTX: {e}"))?;
    check_module(&module, allowed)
}

/// Checks every kernel entry of `module`. An allowance that matches no finding is an error.
pub fn check_module(module: &Module, allowed: &[Allowance]) -> Result<Report, String> {
    let mut report = Report::default();
    for function in module.functions.iter().filter(|f| f.entry) {
        report.kernels += 1;
        let analysis = Analysis::new(function);
        for finding in analysis.findings(&module.files, &mut report) {
            match allowed
                .iter()
                .find(|a| a.kernel == finding.kernel && finding.op.starts_with(a.op))
            {
                Some(a) => report.allowed.push((finding, a.reason)),
                None => report.findings.push(finding),
            }
        }
    }
    let stale: Vec<String> = allowed
        .iter()
        .filter(|a| {
            !report
                .allowed
                .iter()
                .any(|(f, _)| f.kernel == a.kernel && f.op.starts_with(a.op))
        })
        .map(|a| format!("{} ({})", a.kernel, a.op))
        .collect();
    if !stale.is_empty() {
        return Err(format!(
            "these allowances of the PTX check match nothing any more; remove them from the list of allowances (ALLOWED in xtask/src/ptxas/mod.rs): {}",
            stale.join(", ")
        ));
    }
    Ok(report)
}

/// What a convergent instruction needs, or `None` for an ordinary one.
fn convergent_scope(i: &Instruction) -> Option<Scope> {
    let head = i.parts[0];
    match head {
        "bar" if i.has("warp") => Some(Scope::Warp),
        // `bar.sync a, b`: b threads, in whole warps, meet at barrier a.
        "bar" | "barrier" if has_thread_count(i) => Some(Scope::Warp),
        "bar" | "barrier" => Some(Scope::Block),
        "shfl" | "vote" | "match" | "redux" | "elect" | "ldmatrix" | "stmatrix" | "mma"
        | "wmma" | "wgmma" => Some(Scope::Warp),
        // `.aligned` (`wgmma.fence.sync.aligned`, `setmaxnreg.sync.aligned`...): every thread of
        // the warp must execute the same instruction.
        _ if i.has("aligned") => Some(Scope::Warp),
        _ => None,
    }
}

/// Whether a block barrier names how many threads take part: `bar.sync a, b`, `bar.arrive a, b`,
/// `bar.red.op d, a, b, p` (without `b`, every thread of the block does).
fn has_thread_count(i: &Instruction) -> bool {
    let operands_without_count = if i.has("red") { 3 } else { 1 };
    i.operands.len() > operands_without_count
}

/// A basic block: instructions `start..end` of [`Analysis::instrs`], and the blocks control can
/// go to next (`blocks.len()` stands for the virtual exit).
struct Block {
    start: usize,
    end: usize,
    succs: Vec<usize>,
}

/// One entry's CFG, post-dominators, branch regions and register uniformity.
struct Analysis<'f, 'a> {
    function: &'f Function<'a>,
    instrs: Vec<&'f Instruction<'a>>,
    blocks: Vec<Block>,
    /// For each block ending in a conditional branch: the blocks control-dependent on it.
    regions: Vec<(usize, Vec<usize>)>,
    values: Vec<Value>,
    scopes: Vec<Option<Scope>>,
}

fn is_branch(i: &Instruction) -> bool {
    matches!(i.parts[0], "bra" | "brx")
}

fn ends_thread(i: &Instruction) -> bool {
    matches!(i.parts[0], "ret" | "exit" | "trap")
}

impl<'f, 'a> Analysis<'f, 'a> {
    fn new(function: &'f Function<'a>) -> Self {
        let instrs: Vec<&Instruction> = function.instructions().collect();
        let blocks = basic_blocks(function, &instrs);
        let ipdom = post_dominators(&blocks);
        let exit = blocks.len();
        let regions = blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b.succs.len() > 1)
            .map(|(k, b)| {
                let stop = ipdom[k];
                let mut seen = vec![false; exit + 1];
                let mut stack: Vec<usize> = b.succs.clone();
                let mut region = Vec::new();
                while let Some(n) = stack.pop() {
                    if n == stop || n == exit || seen[n] {
                        continue;
                    }
                    seen[n] = true;
                    region.push(n);
                    stack.extend(&blocks[n].succs);
                }
                (k, region)
            })
            .collect();
        let scopes = instrs.iter().map(|i| convergent_scope(i)).collect();
        let mut analysis = Analysis {
            function,
            instrs,
            blocks,
            regions,
            values: vec![Value::Unset; function.registers.len()],
            scopes,
        };
        analysis.taint();
        analysis
    }

    fn reg(&self, r: RegId) -> Value {
        self.values[r.0 as usize]
    }

    /// How varying the predicate that decides block `k`'s conditional branch (or exit) is.
    fn branch_uniformity(&self, k: usize) -> Uniformity {
        let last = self.instrs[self.blocks[k].end - 1];
        last.guard
            .map_or(Uniformity::Block, |g| self.reg(g.reg).uniformity())
    }

    /// Runs the taint to its fixpoint: register values, then the control uniformity of each
    /// block (the most varying branch whose region holds it), until neither changes.
    fn taint(&mut self) {
        let mut control = vec![Uniformity::Block; self.blocks.len()];
        loop {
            loop {
                let mut changed = false;
                for (k, block) in self.blocks.iter().enumerate() {
                    for i in &self.instrs[block.start..block.end] {
                        let mut v = self.transfer(i);
                        let guard = i
                            .guard
                            .map_or(Uniformity::Block, |g| self.reg(g.reg).uniformity());
                        let context = control[k].max(guard);
                        if context > Uniformity::Block {
                            v = Value::Known(v.uniformity().max(context));
                        }
                        for d in i.destinations() {
                            let old = self.values[d.0 as usize];
                            let new = old.join(v);
                            if new != old {
                                self.values[d.0 as usize] = new;
                                changed = true;
                            }
                        }
                    }
                }
                if !changed {
                    break;
                }
            }
            let mut next = vec![Uniformity::Block; self.blocks.len()];
            for (k, region) in &self.regions {
                let u = self.branch_uniformity(*k);
                for &n in region {
                    next[n] = next[n].max(u);
                }
            }
            if next == control {
                return;
            }
            control = next;
        }
    }

    /// The abstract value an instruction writes, from its operands' values.
    fn transfer(&self, i: &Instruction) -> Value {
        let head = i.parts[0];
        let sources = i.sources();
        let operand = |o: &Operand| self.operand(o);
        let joined = || {
            sources
                .iter()
                .map(|o| operand(o).uniformity())
                .fold(Uniformity::Block, Uniformity::max)
        };
        let int = |n: usize| match sources.get(n) {
            Some(Operand::Int(v)) => Some(*v),
            _ => None,
        };
        let tid = sources.first().is_some_and(|o| operand(o) == Value::TidX);
        match head {
            "mov" | "cvt" if sources.len() == 1 => operand(&sources[0]),
            "shr" if tid && int(1).is_some_and(|k| k >= 5) => Value::Known(Uniformity::Warp),
            "div" if tid && int(1).is_some_and(|k| k > 0 && k % 32 == 0) => {
                Value::Known(Uniformity::Warp)
            }
            "and" if tid && int(1).is_some_and(|m| m & 31 == 0) => Value::Known(Uniformity::Warp),
            // `%tid.x < 32 k` (or `>= 32 k`, `<= 32 k - 1`, `> 32 k - 1`): whole warps on each
            // side, as a warp-specialised kernel splits its producer and consumer warpgroups.
            "setp" if tid && int(1).is_some_and(|k| warp_boundary(i.parts.get(1), k)) => {
                Value::Known(Uniformity::Warp)
            }
            // Per-thread results whatever the operands: atomics return distinct old values,
            // matrix fragments and `match` masks are per lane.
            "atom" | "match" | "ldmatrix" | "mma" | "wmma" | "wgmma" | "activemask" | "elect" => {
                Value::Known(Uniformity::Lane)
            }
            "ld" | "ldu"
                if i.has("local") || i.has("volatile") || i.has("relaxed") || i.has("acquire") =>
            {
                Value::Known(Uniformity::Lane)
            }
            "ld" | "ldu" if i.has("param") && !self.function.entry => {
                Value::Known(Uniformity::Lane)
            }
            // A vote's or reduction's result is one value per warp.
            "vote" | "redux" => Value::Known(joined().max(Uniformity::Warp)),
            // `d|p`: whether the source lane was in range differs per lane.
            "shfl" if matches!(i.operands.first(), Some(Operand::Pair(..))) => {
                Value::Known(Uniformity::Lane)
            }
            "shfl" => {
                // shfl.sync.mode d|p, a, b, c, mask: a value the same in every lane stays so;
                // `idx` from one lane that the whole warp names gives that lane's value to all.
                let a = sources
                    .first()
                    .map_or(Uniformity::Lane, |o| operand(o).uniformity());
                let rest = sources
                    .get(1..)
                    .unwrap_or(&[])
                    .iter()
                    .map(|o| operand(o).uniformity())
                    .fold(Uniformity::Block, Uniformity::max);
                if a == Uniformity::Block && rest == Uniformity::Block {
                    Value::Known(Uniformity::Block)
                } else if i.has("idx") && rest <= Uniformity::Warp {
                    Value::Known(Uniformity::Warp)
                } else {
                    Value::Known(Uniformity::Lane)
                }
            }
            _ => Value::Known(joined()),
        }
    }

    fn operand(&self, o: &Operand) -> Value {
        match o {
            Operand::Reg(r) => match self.reg(*r) {
                Value::Unset => Value::Known(Uniformity::Block),
                v => v,
            },
            Operand::Special(s) => special(s),
            // A per-thread stack: the same address holds different data in every thread.
            Operand::Symbol(s) if s.starts_with("__local_depot") => Value::Known(Uniformity::Lane),
            Operand::Address { base: Some(b), .. } => match self.operand(b) {
                Value::TidX => Value::Known(Uniformity::Lane),
                v => v,
            },
            Operand::Vector(items) => Value::Known(
                items
                    .iter()
                    .map(|o| self.operand(o).uniformity())
                    .fold(Uniformity::Block, Uniformity::max),
            ),
            Operand::Pair(a, b) => Value::Known(
                self.operand(a)
                    .uniformity()
                    .max(self.operand(b).uniformity()),
            ),
            Operand::Not(p) => Value::Known(self.operand(p).uniformity()),
            Operand::Tensor { map, coords } => Value::Known(
                coords
                    .iter()
                    .map(|o| self.operand(o).uniformity())
                    .fold(self.operand(map).uniformity(), Uniformity::max),
            ),
            // Constants and names of variables, parameters and labels. No wildcard: an operand
            // kind the parser learns later must be classified here, not assumed uniform.
            Operand::Int(_)
            | Operand::F32(_)
            | Operand::F64(_)
            | Operand::Symbol(_)
            | Operand::Sink
            | Operand::Address { base: None, .. } => Value::Known(Uniformity::Block),
        }
    }

    /// Every convergent instruction some of its threads may not reach, and counts them all into
    /// `report`.
    fn findings(&self, files: &[(u32, &str)], report: &mut Report) -> Vec<Finding> {
        let source = |i: &Instruction| {
            let (file, line) = i.loc?;
            let path = files.iter().find(|(n, _)| *n == file)?.1;
            Some(format!("{path}:{line}"))
        };
        let mut out = Vec::new();
        for (k, block) in self.blocks.iter().enumerate() {
            for (n, i) in self.instrs[block.start..block.end].iter().enumerate() {
                let Some(scope) = self.scopes[block.start + n] else {
                    continue;
                };
                match scope {
                    Scope::Block => report.barriers += 1,
                    Scope::Warp => report.collectives += 1,
                }
                let finding = |branch: &Instruction, u: Uniformity| Finding {
                    kernel: self.function.name.to_string(),
                    op: i.opcode.to_string(),
                    op_line: i.line,
                    scope,
                    branch_line: branch.line,
                    branch: branch.text.split_whitespace().collect::<Vec<_>>().join(" "),
                    branch_uniformity: u,
                    op_source: source(i),
                    branch_source: source(branch),
                };
                let guard = i
                    .guard
                    .map_or(Uniformity::Block, |g| self.reg(g.reg).uniformity());
                if scope.split_by(guard) {
                    out.push(finding(i, guard));
                    continue;
                }
                // The innermost splitting branch: the one with the smallest region.
                let branch = self
                    .regions
                    .iter()
                    .filter(|(b, region)| {
                        region.contains(&k) && scope.split_by(self.branch_uniformity(*b))
                    })
                    .min_by_key(|(_, region)| region.len());
                if let Some((b, _)) = branch {
                    let last = self.instrs[self.blocks[*b].end - 1];
                    out.push(finding(last, self.branch_uniformity(*b)));
                }
            }
        }
        out
    }
}

/// A special register's uniformity.
fn special(name: &str) -> Value {
    let base = name.split('.').next().unwrap_or(name);
    match base {
        "%tid" if name == "%tid.x" => Value::TidX,
        "%ctaid"
        | "%nctaid"
        | "%ntid"
        | "%gridid"
        | "%nsmid"
        | "%nwarpid"
        | "%clusterid"
        | "%nclusterid"
        | "%cluster_ctaid"
        | "%cluster_nctaid"
        | "%cluster_ctarank"
        | "%cluster_nctarank"
        | "%is_explicit_cluster"
        | "%dynamic_smem_size"
        | "%total_smem_size"
        | "%aggr_smem_size" => Value::Known(Uniformity::Block),
        "%warpid" => Value::Known(Uniformity::Warp),
        // %tid.y/z, %laneid, %lanemask_*, clocks and timers, and anything unknown.
        _ => Value::Known(Uniformity::Lane),
    }
}

/// Whether comparing `%tid.x` with `k` by `cmp` is true for whole warps (a 1-D block).
fn warp_boundary(cmp: Option<&&str>, k: i64) -> bool {
    match cmp.copied() {
        Some("lt" | "ge" | "lo" | "hs") => k % 32 == 0,
        Some("le" | "gt" | "ls" | "hi") => (k + 1) % 32 == 0,
        _ => false,
    }
}

/// Splits a body into basic blocks (block `blocks.len()` is the virtual exit).
fn basic_blocks(function: &Function, instrs: &[&Instruction]) -> Vec<Block> {
    // The index of the instruction each label precedes.
    let mut label_at: HashMap<&str, usize> = HashMap::new();
    let mut leaders: HashSet<usize> = HashSet::from([0]);
    let mut n = 0;
    for s in &function.body {
        match s {
            Statement::Label { name, .. } => {
                label_at.insert(name, n);
                leaders.insert(n);
            }
            Statement::Instruction(i) => {
                n += 1;
                if is_branch(i) || ends_thread(i) {
                    leaders.insert(n);
                }
            }
            _ => {}
        }
    }
    let mut starts: Vec<usize> = leaders.into_iter().filter(|&l| l < instrs.len()).collect();
    starts.sort_unstable();
    let exit = starts.len();
    let block_of: HashMap<usize, usize> = starts.iter().enumerate().map(|(b, &s)| (s, b)).collect();
    // A label after the last instruction leads to the exit.
    let target = |label: &str| {
        label_at
            .get(label)
            .map_or(exit, |at| block_of.get(at).copied().unwrap_or(exit))
    };
    starts
        .iter()
        .enumerate()
        .map(|(b, &start)| {
            let end = starts.get(b + 1).copied().unwrap_or(instrs.len());
            let last = instrs[end - 1];
            let fall = b + 1; // == exit after the last block
            let succs = if is_branch(last) {
                let to = last.operands.iter().find_map(|o| match o {
                    Operand::Symbol(l) => Some(target(l)),
                    _ => None,
                });
                let to = to.unwrap_or(exit);
                if last.guard.is_some() {
                    vec![to, fall]
                } else {
                    vec![to]
                }
            } else if ends_thread(last) {
                if last.guard.is_some() {
                    vec![exit, fall]
                } else {
                    vec![exit]
                }
            } else {
                vec![fall]
            };
            Block { start, end, succs }
        })
        .collect()
}

/// The immediate post-dominator of every block (the virtual exit for blocks that cannot reach
/// it, which makes their regions as large as possible). Index `blocks.len()` is the exit.
fn post_dominators(blocks: &[Block]) -> Vec<usize> {
    let exit = blocks.len();
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); exit + 1];
    for (b, block) in blocks.iter().enumerate() {
        for &s in &block.succs {
            preds[s].push(b);
        }
    }
    // Postorder of the reversed CFG from the exit (iterative DFS).
    let mut order = Vec::new();
    let mut seen = vec![false; exit + 1];
    let mut stack = vec![(exit, 0usize)];
    seen[exit] = true;
    while let Some((n, next)) = stack.pop() {
        if next < preds[n].len() {
            stack.push((n, next + 1));
            let p = preds[n][next];
            if !seen[p] {
                seen[p] = true;
                stack.push((p, 0));
            }
        } else {
            order.push(n);
        }
    }
    let mut rank = vec![usize::MAX; exit + 1];
    for (r, &n) in order.iter().enumerate() {
        rank[n] = r;
    }
    let mut ipdom = vec![usize::MAX; exit + 1];
    ipdom[exit] = exit;
    let intersect = |ipdom: &[usize], mut a: usize, mut b: usize| {
        while a != b {
            while rank[a] < rank[b] {
                a = ipdom[a];
            }
            while rank[b] < rank[a] {
                b = ipdom[b];
            }
        }
        a
    };
    let mut changed = true;
    while changed {
        changed = false;
        // Reverse postorder, skipping the exit itself.
        for &n in order.iter().rev().skip(1) {
            let mut new = usize::MAX;
            for &s in &blocks[n].succs {
                if ipdom[s] == usize::MAX {
                    continue;
                }
                new = if new == usize::MAX {
                    s
                } else {
                    intersect(&ipdom, s, new)
                };
            }
            if new != ipdom[n] {
                ipdom[n] = new;
                changed = true;
            }
        }
    }
    ipdom
        .into_iter()
        .map(|d| if d == usize::MAX { exit } else { d })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-kernel module around `body`, with a parameter, a shared cell and registers.
    fn module(body: &str) -> String {
        format!(
            ".version 7.8\n.target sm_90\n.address_size 64\n\
             .shared .align 4 .b8 cell[4];\n\n\
             .visible .entry k(\n\t.param .u32 k_param_0,\n\t.param .u64 k_param_1\n)\n{{\n\
             \t.reg .pred %p<8>;\n\t.reg .b32 %r<32>;\n\t.reg .b64 %rd<16>;\n\n{body}}}\n"
        )
    }

    /// The 1-based line of `text` that contains `marker` (a comment in the snippet).
    fn line_of(text: &str, marker: &str) -> u32 {
        let n = text
            .lines()
            .position(|l| l.contains(marker))
            .unwrap_or_else(|| panic!("no `{marker}` in the snippet"));
        n as u32 + 1
    }

    fn findings(text: &str) -> Vec<Finding> {
        check_text(text, &[]).unwrap().findings
    }

    /// The findings of a snippet as (convergent line, branch line), for comparison with the lines
    /// its `// OP` and `// BRANCH` markers are on.
    fn lines(text: &str) -> Vec<(u32, u32)> {
        findings(text)
            .iter()
            .map(|f| (f.op_line, f.branch_line))
            .collect()
    }

    /// `@%p1 bra` around one `bar.sync`, after `predicate` (instructions that compute %p1).
    fn barrier_under(predicate: &str) -> String {
        module(&format!(
            "{predicate}\
             \t@%p1 bra $L_end; // BRANCH\n\
             \tbar.sync 0; // OP\n\
             $L_end:\n\
             \tret;\n"
        ))
    }

    /// Asserts that the snippet's only finding is its `// OP` line under its `// BRANCH` line.
    fn assert_flagged(text: &str) {
        assert_eq!(
            lines(text),
            [(line_of(text, "// OP"), line_of(text, "// BRANCH"))],
            "{text}"
        );
    }

    #[test]
    fn a_barrier_under_if_tid_zero_is_flagged() {
        let text = barrier_under("\tmov.u32 %r1, %tid.x;\n\tsetp.ne.b32 %p1, %r1, 0;\n");
        assert_flagged(&text);
        let f = &findings(&text)[0];
        assert_eq!(
            (f.scope, f.branch_uniformity),
            (Scope::Block, Uniformity::Lane)
        );
        assert_eq!(f.branch, "@%p1 bra $L_end");
        let message = f.to_string();
        assert!(
            message.starts_with("k: block barrier `bar.sync`"),
            "{message}"
        );
    }

    #[test]
    fn a_finding_names_the_rust_lines_where_the_ptx_has_line_tables() {
        let text =
            barrier_under("\t.loc 1 296 8\n\tmov.u32 %r1, %tid.x;\n\tsetp.ne.b32 %p1, %r1, 0;\n")
                .replace(
                    ".address_size 64\n",
                    ".address_size 64\n.file 1 \"src/softmax.rs\"\n",
                )
                .replace("\tbar.sync 0;", "\t.loc 1 300 5\n\tbar.sync 0;");
        assert_flagged(&text);
        let f = &findings(&text)[0];
        assert_eq!(
            (f.op_source.as_deref(), f.branch_source.as_deref()),
            (Some("src/softmax.rs:300"), Some("src/softmax.rs:296"))
        );
        let message = f.to_string();
        assert!(
            message.contains("(src/softmax.rs:300) is control-dependent"),
            "{message}"
        );
        assert!(
            message.contains("(src/softmax.rs:296) (`@%p1 bra"),
            "{message}"
        );
    }

    #[test]
    fn a_barrier_under_a_branch_on_a_kernel_parameter_is_not_flagged() {
        let text = barrier_under(
            "\tld.param.u32 %r1, [k_param_0];\n\
             \tmov.u32 %r2, %ctaid.x;\n\
             \tadd.s32 %r3, %r1, %r2;\n\
             \tsetp.eq.b32 %p1, %r3, 0;\n",
        );
        let report = check_text(&text, &[]).unwrap();
        assert_eq!((report.barriers, report.findings.len()), (1, 0));
    }

    #[test]
    fn a_barrier_after_the_join_of_if_tid_zero_is_not_flagged() {
        let text = module(
            "\tmov.u32 %r1, %tid.x;\n\
             \tsetp.ne.b32 %p1, %r1, 0;\n\
             \t@%p1 bra $L_join;\n\
             \tst.shared.u32 [cell], %r1;\n\
             $L_join:\n\
             \tbar.sync 0;\n\
             \tret;\n",
        );
        let report = check_text(&text, &[]).unwrap();
        assert_eq!((report.barriers, report.findings.len()), (1, 0));
    }

    #[test]
    fn a_value_broadcast_through_shared_memory_is_uniform() {
        // broadcast_from_thread0: thread 0 stores, all read the same slot after the barrier.
        let text = module(
            "\tmov.u32 %r1, %tid.x;\n\
             \tsetp.ne.b32 %p1, %r1, 0;\n\
             \t@%p1 bra $L_join;\n\
             \tld.param.u32 %r2, [k_param_0];\n\
             \tst.shared.u32 [cell], %r2;\n\
             $L_join:\n\
             \tbar.sync 0;\n\
             \tld.shared.u32 %r3, [cell];\n\
             \tsetp.eq.b32 %p2, %r3, 0;\n\
             \t@%p2 bra $L_end;\n\
             \tbar.sync 0;\n\
             $L_end:\n\
             \tret;\n",
        );
        assert_eq!(lines(&text), []);
    }

    #[test]
    fn lane_variance_flows_through_arithmetic_and_memory() {
        // The branch reads a value loaded from an address computed from %tid.x.
        assert_flagged(&barrier_under(
            "\tld.param.u64 %rd1, [k_param_1];\n\
             \tmov.u32 %r1, %tid.x;\n\
             \tmul.wide.u32 %rd2, %r1, 4;\n\
             \tadd.s64 %rd3, %rd1, %rd2;\n\
             \tld.global.u32 %r2, [%rd3+8];\n\
             \tsetp.gt.f32 %p1, %r2, 0f00000000;\n",
        ));
    }

    #[test]
    fn lane_variance_flows_through_a_negated_predicate() {
        assert_flagged(&barrier_under(
            "\tmov.u32 %r1, %laneid;\n\
             \tsetp.eq.b32 %p2, %r1, 0;\n\
             \tld.param.u32 %r2, [k_param_0];\n\
             \tsetp.lt.and.u32 %p1, %r2, 8, !%p2;\n",
        ));
    }

    #[test]
    fn a_value_chosen_by_a_lane_varying_branch_varies_after_the_join() {
        // r2 is 2 or 1 depending on the lane: both definitions are uniform, the join is not.
        assert_flagged(&barrier_under(
            "\tmov.u32 %r1, %tid.x;\n\
             \tsetp.ne.b32 %p2, %r1, 0;\n\
             \tmov.u32 %r2, 2;\n\
             \t@%p2 bra $L_a;\n\
             \tmov.u32 %r2, 1;\n\
             $L_a:\n\
             \tsetp.eq.b32 %p1, %r2, 1;\n",
        ));
    }

    /// A loop from `start` while `< 100`, step 32, with a barrier in its body.
    fn loop_from(start: &str) -> String {
        module(&format!(
            "\tmov.u32 %r1, {start};\n\
             $L_loop:\n\
             \tbar.sync 0; // OP\n\
             \tadd.s32 %r1, %r1, 32;\n\
             \tsetp.lt.u32 %p1, %r1, 100;\n\
             \t@%p1 bra $L_loop; // BRANCH\n\
             \tret;\n"
        ))
    }

    #[test]
    fn a_barrier_in_a_loop_is_flagged_only_when_its_trip_count_varies() {
        assert_flagged(&loop_from("%tid.x"));
        assert_eq!(lines(&loop_from("%ctaid.x")), []);
    }

    /// A branch on `predicate_of_tid` (instructions computing %p1 from %r1 = %tid.x) around a
    /// shuffle and a barrier.
    fn around_shuffle_and_barrier(predicate_of_tid: &str) -> String {
        module(&format!(
            "\tmov.u32 %r1, %tid.x;\n\
             {predicate_of_tid}\
             \t@%p1 bra $L_end; // BRANCH\n\
             \tshfl.sync.bfly.b32 %r3, %r1, 1, 31, -1; // SHFL\n\
             \tbar.sync 0; // BAR\n\
             $L_end:\n\
             \tret;\n"
        ))
    }

    #[test]
    fn a_warp_uniform_branch_splits_the_block_but_not_the_warp() {
        // warp = tid.x / 32: the shuffle keeps its warp whole, the barrier does not.
        let text =
            around_shuffle_and_barrier("\tshr.u32 %r2, %r1, 5;\n\tsetp.ne.b32 %p1, %r2, 0;\n");
        let found = findings(&text);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].op_line, line_of(&text, "// BAR"));
        assert_eq!(found[0].branch_uniformity, Uniformity::Warp);
        // (tid.x + 1) / 32 is not warp-uniform; tid.x & 1 is lane-varying: both are flagged.
        for lane_varying in [
            "\tadd.s32 %r4, %r1, 1;\n\tshr.u32 %r2, %r4, 5;\n\tsetp.ne.b32 %p1, %r2, 0;\n",
            "\tand.b32 %r2, %r1, 1;\n\tsetp.ne.b32 %p1, %r2, 0;\n",
        ] {
            let text = around_shuffle_and_barrier(lane_varying);
            let branch = line_of(&text, "// BRANCH");
            assert_eq!(
                lines(&text),
                [
                    (line_of(&text, "// SHFL"), branch),
                    (line_of(&text, "// BAR"), branch)
                ],
                "{lane_varying}"
            );
        }
    }

    #[test]
    fn a_tid_compared_with_a_warp_boundary_is_warp_uniform() {
        // tid.x < 128 and tid.x > 127 (a warp-specialised split) keep warps whole; tid.x < 100
        // and tid.x > 100 do not.
        for uniform in ["setp.lt.u32 %p1, %r1, 128;", "setp.gt.u32 %p1, %r1, 127;"] {
            let text = around_shuffle_and_barrier(&format!("\t{uniform}\n"));
            let found = findings(&text);
            assert_eq!(found.len(), 1, "{uniform}: {found:?}");
            assert_eq!(found[0].op_line, line_of(&text, "// BAR"), "{uniform}");
            assert_eq!(found[0].branch_uniformity, Uniformity::Warp, "{uniform}");
        }
        for varying in ["setp.lt.u32 %p1, %r1, 100;", "setp.gt.u32 %p1, %r1, 100;"] {
            let text = around_shuffle_and_barrier(&format!("\t{varying}\n"));
            assert_eq!(findings(&text).len(), 2, "{varying}");
        }
    }

    #[test]
    fn a_named_barrier_for_some_warps_may_sit_under_a_warp_uniform_branch() {
        let named = |predicate_of_tid: &str| {
            module(&format!(
                "\tmov.u32 %r1, %tid.x;\n\
                 {predicate_of_tid}\
                 \t@%p1 bra $L_end;\n\
                 \tbar.sync 1, 64;\n\
                 $L_end:\n\
                 \tret;\n"
            ))
        };
        let warps = named("\tshr.u32 %r2, %r1, 5;\n\tsetp.lt.u32 %p1, %r2, 2;\n");
        assert_eq!(lines(&warps), []);
        // A block-wide reduction has three operands and a predicate, but no thread count.
        let reduction = warps.replace("bar.sync 1, 64", "bar.red.popc.u32 %r3, 0, %p1");
        assert_eq!(findings(&reduction)[0].scope, Scope::Block);
        let lanes = named("\tsetp.lt.u32 %p1, %r1, 48;\n");
        assert_eq!(findings(&lanes).len(), 1);
    }

    #[test]
    fn every_aligned_instruction_needs_its_whole_warp() {
        for op in [
            "wgmma.fence.sync.aligned",
            "setmaxnreg.inc.sync.aligned.u32 240",
        ] {
            let text = barrier_under("\tmov.u32 %r1, %laneid;\n\tsetp.lt.u32 %p1, %r1, 16;\n")
                .replace("bar.sync 0", op);
            assert_flagged(&text);
            assert_eq!(findings(&text)[0].scope, Scope::Warp, "{op}");
        }
    }

    #[test]
    fn a_shuffles_in_range_predicate_is_lane_varying() {
        // Even of a value that is the same in every lane.
        assert_flagged(&barrier_under(
            "\tmov.u32 %r1, 7;\n\tshfl.sync.down.b32 %r2|%p1, %r1, 1, 31, -1;\n",
        ));
    }

    #[test]
    fn a_guarded_barrier_and_a_barrier_after_an_early_exit_are_flagged() {
        let text = module(
            "\tmov.u32 %r1, %laneid;\n\
             \tsetp.eq.b32 %p1, %r1, 0;\n\
             \t@%p1 bar.sync 0; // GUARDED\n\
             \t@%p1 ret; // EXIT\n\
             \tbar.sync 0; // AFTER\n\
             \tret;\n",
        );
        let guarded = line_of(&text, "// GUARDED");
        assert_eq!(
            lines(&text),
            [
                (guarded, guarded),
                (line_of(&text, "// AFTER"), line_of(&text, "// EXIT"))
            ]
        );
        assert!(
            findings(&text)[0]
                .to_string()
                .contains("is guarded by a lane-varying predicate")
        );
    }

    #[test]
    fn an_allowance_covers_its_finding_and_a_stale_one_is_an_error() {
        let text = loop_from("%tid.x");
        let allow = [Allowance {
            kernel: "k",
            op: "bar",
            reason: "test",
        }];
        let report = check_text(&text, &allow).unwrap();
        assert_eq!((report.findings.len(), report.allowed.len()), (0, 1));
        let err = check_text(&loop_from("%ctaid.x"), &allow).unwrap_err();
        assert!(err.contains("k (bar)"), "{err}");
    }

    #[test]
    fn post_dominators_of_a_diamond_and_a_loop() {
        // 0 -> {1, 2} -> 3 -> {3, 4} -> exit (5).
        let block = |succs: &[usize]| Block {
            start: 0,
            end: 1,
            succs: succs.to_vec(),
        };
        let blocks = [
            block(&[1, 2]),
            block(&[3]),
            block(&[3]),
            block(&[3, 4]),
            block(&[5]),
        ];
        assert_eq!(post_dominators(&blocks), [3, 3, 3, 4, 5, 5]);
    }
}
