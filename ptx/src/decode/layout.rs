//! The functions a kernel's code reaches, where each lives in the thread's state (code,
//! registers, parameter memory, frame), and each instruction's PTX site.

use kernels::cuda::emu::PtxSite;

use super::ir::*;
use super::{DResult, Layout};
use crate::parse::{self, Function, Operand};

/// An instruction's text on one line: NVRTC spreads a `call`'s operands over several, with tabs.
fn one_line(text: &'static str) -> &'static str {
    if text.contains(['\t', '\n']) || text.contains("  ") {
        let words: Vec<&str> = text.split_whitespace().collect();
        Box::leak(words.join(" ").into_boxed_str())
    } else {
        text
    }
}

/// The functions a kernel's code reaches: the entry first, then every `.func` its `call`s
/// name, in the order first named. A callee that is only declared, or whose body could not be
/// read, is an error naming the call.
pub(super) fn reachable<'m>(
    entry: &'m Function<'static>,
    module: &ModuleRef<'m>,
) -> DResult<Vec<&'m Function<'static>>> {
    let mut order = vec![entry];
    let mut k = 0;
    while k < order.len() {
        let f = order[k];
        for i in f.instructions().filter(|i| i.parts[0] == "call") {
            let at = |why: String| {
                format!(
                    "kernel `{}`, PTX line {}: `{}`: {why}",
                    entry.name,
                    i.line,
                    one_line(i.text)
                )
            };
            let callee = callee(f, &i.operands).map_err(at)?;
            if [ASSERT_FAIL, VPRINTF].contains(&callee) || order.iter().any(|g| g.name == callee) {
                continue;
            }
            if let Some(b) = module.broken.iter().find(|b| b.name == callee) {
                return Err(at(format!(
                    "calls `{callee}`, which cannot be read: {}",
                    b.error
                )));
            }
            let Some(g) = module.functions.iter().find(|g| g.name == callee) else {
                return Err(at(format!(
                    "calls `{callee}`, which is only declared in the module (an external function the driver would supply): not implemented"
                )));
            };
            order.push(g);
        }
        k += 1;
    }
    Ok(order)
}

/// The function CUDA's `assert` calls when its condition is false (declared `.extern` in the
/// module; the driver supplies it): run as [`Op::AssertFail`].
pub(super) const ASSERT_FAIL: &str = "__assertfail";

/// The function CUDA's `printf` calls (declared `.extern`; the driver supplies it): run as
/// [`Op::Printf`].
pub(super) const VPRINTF: &str = "vprintf";

/// The function a `call` names: `call{.uni} {(ret, ...),} callee, (arg, ...){, prototype}`.
/// A register there is an indirect call (through a function pointer), named by its register.
pub(super) fn callee(f: &Function<'static>, ops: &[Operand<'static>]) -> DResult<&'static str> {
    let at = usize::from(matches!(ops.first(), Some(Operand::Vector(_))));
    match ops.get(at) {
        Some(Operand::Symbol(name)) => Ok(*name),
        Some(Operand::Reg(r)) => {
            let prototype = match ops.last() {
                Some(Operand::Symbol(p)) => format!(" (prototype `{p}`)"),
                _ => String::new(),
            };
            Err(format!(
                "an indirect call through register `{}`{prototype}, a function pointer: not implemented (the backend calls functions by name only)",
                f.registers[r.0 as usize].name
            ))
        }
        other => Err(format!("expected the called function, got {other:?}")),
    }
}

/// The PTX sites, one per instruction of every function in code order (`owner[k]`: the index in
/// `order` of instruction `k`'s function), leaked so that reports and profiles can hold them.
///
/// An instruction's source is its `.loc`, but for code rustc inlined from Rust's own library
/// (`ptr::read` behind a load): rustc's PTX gives no `inlined_at`, so such an instruction takes
/// the kernel's own line nearest before it in its function, the line that called the library.
pub(super) fn ptx_sites(
    order: &[&Function<'static>],
    instrs: &[&parse::Instruction<'static>],
    owner: &[usize],
    module: &ModuleRef,
) -> &'static [PtxSite] {
    let mut own: Option<(&'static str, u32)> = None;
    let mut function = usize::MAX;
    let mut sites = Vec::with_capacity(instrs.len());
    for (i, &k) in instrs.iter().zip(owner) {
        if k != function {
            (function, own) = (k, None);
        }
        let loc = i.loc.and_then(|(file, line)| {
            let (_, path) = module.files.iter().find(|(n, _)| *n == file)?;
            Some((*path, line))
        });
        let source = match loc {
            Some((path, _)) if path.contains(RUST_LIBRARY) => own.or(loc),
            Some(_) => {
                own = loc;
                loc
            }
            None => None,
        };
        sites.push(PtxSite {
            function: order[k].name,
            line: i.line,
            text: one_line(i.text),
            source,
        });
    }
    Box::leak(sites.into_boxed_slice())
}

/// Where a toolchain keeps the sources of Rust's own library (`core`, `alloc`), as `.file` names
/// them.
const RUST_LIBRARY: &str = "/lib/rustlib/src/rust/library/";

/// Each function's place in the thread's state: its code, registers, parameter memory and
/// frame. The callees' registers and `.local` addresses are slots appended to `template`.
pub(super) fn layouts<'m>(
    name: &str,
    order: &[&'m Function<'static>],
    template: &mut Vec<u64>,
) -> DResult<Vec<Layout<'m>>> {
    let mut layouts = Vec::with_capacity(order.len());
    let (mut code_start, mut pmem) = (0u32, 0u32);
    for (k, f) in order.iter().enumerate() {
        let reg_base = if k == 0 {
            0
        } else {
            let base = template.len() as u32;
            template.resize(template.len() + f.registers.len(), 0);
            base
        };
        let pmem_start = pmem;
        let mut place = |v: (u32, u32)| {
            let at = pmem.next_multiple_of(v.1.max(1));
            pmem = at + v.0;
            at
        };
        let params = if k == 0 {
            Vec::new()
        } else {
            f.params.iter().map(|p| place((p.bytes, p.align))).collect()
        };
        let returns = f
            .returns
            .iter()
            .map(|p| place((p.bytes, p.align)))
            .collect();
        let param_vars = f
            .param_vars
            .iter()
            .map(|v| place((v.bytes.unwrap_or(0) as u32, v.align)))
            .collect();
        let (mut frame, mut frame_align) = (0u32, 1u32);
        let mut locals = Vec::new();
        for v in &f.locals {
            let bytes = v
                .bytes
                .ok_or_else(|| format!("kernel `{name}`: `.local {}` has no size", v.name))?;
            frame = frame.next_multiple_of(v.align.max(1));
            // 512 KiB of local memory per thread (sm_90): checked before a thread's frame is
            // allocated, for every thread of a launch.
            if u64::from(frame) + bytes > 512 * 1024 {
                return Err(format!(
                    "kernel `{name}`, PTX line {}: `.local {}` takes the frame past the 512 KiB of local memory a thread has (sm_90)",
                    v.line, v.name
                ));
            }
            locals.push((template.len() as Slot, frame));
            template.push(0);
            frame += bytes as u32;
            frame_align = frame_align.max(v.align);
        }
        layouts.push(Layout {
            function: f,
            code_start,
            reg_base,
            params,
            returns,
            param_vars,
            pmem: (pmem_start, pmem),
            locals,
            frame: (frame, frame_align),
        });
        code_start += f.instructions().count() as u32;
    }
    Ok(layouts)
}

/// Whether some function of `order` can reach itself through calls.
pub(super) fn has_cycle(order: &[&Function<'static>]) -> bool {
    let index = |name: &str| order.iter().position(|f| f.name == name);
    let callees: Vec<Vec<usize>> = order
        .iter()
        .map(|f| {
            f.instructions()
                .filter(|i| i.parts[0] == "call")
                .filter_map(|i| {
                    i.operands.iter().find_map(|o| match o {
                        Operand::Symbol(n) => index(n),
                        _ => None,
                    })
                })
                .collect()
        })
        .collect();
    // Depth-first, colouring: 1 on the path, 2 done.
    fn visit(v: usize, callees: &[Vec<usize>], colour: &mut [u8]) -> bool {
        colour[v] = 1;
        for &w in &callees[v] {
            if colour[w] == 1 || (colour[w] == 0 && visit(w, callees, colour)) {
                return true;
            }
        }
        colour[v] = 2;
        false
    }
    let mut colour = vec![0u8; order.len()];
    (0..order.len()).any(|v| colour[v] == 0 && visit(v, &callees, &mut colour))
}
