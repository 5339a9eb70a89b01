//! Which instructions belong to the softmax of a tensor-core product's scores: the performance
//! model's split of an attention kernel's issued instructions between its matrix products and
//! the softmax that waits for them (`model::serial_phases`).
//!
//! A register *carries a product* when a tensor-core instruction wrote it (`mma`'s D,
//! `wgmma.mma_async`'s accumulators), or when any instruction that wrote it read a register that
//! carries one (or ran under a guard predicate that does). The analysis is flow-insensitive over
//! a function's registers, to a fixpoint: a register carries a product if any write to it does.
//! That is exact for the SSA-like registers a compiler emits (each virtual register holds one
//! value, whose copies around a loop are writes of the same value) and conservative for a
//! register reused for unrelated values.
//!
//! An instruction is *on products* when it is not itself a tensor-core or memory-engine
//! instruction (`mma`, `wgmma`, `ldmatrix`, `cp.async`, TMA, `mbarrier`, fences, barriers) and
//! either reads a register that carries a product (or its guard is one: the scale, the maximum,
//! the subtraction, the `ex2`, the row sums, the mask's selects, the conversion of P to 16 bits,
//! the rescale of the output accumulator), or writes registers that only such instructions read
//! (the column indices and compares of the mask, which exist for the softmax alone). Not the
//! loop counters, the addresses and descriptors, or the tile loads that feed the products,
//! whose results something else reads too. Memory carries nothing: a value that goes through
//! shared memory is not followed (the attention kernels here keep scores and P in registers).

use crate::decode::Class;
use crate::parse::{Function, Instruction, RegId};

/// Whether each instruction of `function`, in [`Function::instructions`] order, is on products
/// (the module's doc); `classes` gives each instruction's class, in the same order.
pub fn on_products(function: &Function, classes: &[Class]) -> Vec<bool> {
    // Each instruction's (destinations, sources), read once: the passes below revisit them.
    let ops: Vec<(Vec<RegId>, Vec<RegId>)> = function.instructions().map(operands).collect();
    debug_assert_eq!(ops.len(), classes.len());
    let mut carries = vec![false; function.registers.len()];
    let carried = |carries: &[bool], r: &RegId| carries.get(r.0 as usize).copied() == Some(true);
    // Each pass marks at least one more register or ends: at most one pass per register.
    loop {
        let mut changed = false;
        for ((dests, sources), &class) in ops.iter().zip(classes) {
            let writes_product = matches!(class, Class::Mma | Class::Wgmma);
            if writes_product || sources.iter().any(|r| carried(&carries, r)) {
                for d in dests {
                    if let Some(c) = carries.get_mut(d.0 as usize)
                        && !*c
                    {
                        *c = true;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    let mut on: Vec<bool> = ops
        .iter()
        .zip(classes)
        .map(|((_, sources), &class)| {
            !engine(class) && sources.iter().any(|r| carried(&carries, r))
        })
        .collect();
    // Then what only the softmax reads: an instruction whose every destination's every reader
    // is on products (a register with no reader counts for nothing either way).
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); function.registers.len()];
    for (k, (_, sources)) in ops.iter().enumerate() {
        for r in sources {
            if let Some(list) = readers.get_mut(r.0 as usize) {
                list.push(k);
            }
        }
    }
    let read_by = |r: &RegId| readers.get(r.0 as usize).map_or(&[][..], Vec::as_slice);
    loop {
        let mut changed = false;
        for (k, ((dests, _), &class)) in ops.iter().zip(classes).enumerate() {
            if on[k] || engine(class) {
                continue;
            }
            let only_softmax = dests.iter().any(|r| !read_by(r).is_empty())
                && dests.iter().all(|r| read_by(r).iter().all(|&j| on[j]));
            if only_softmax {
                on[k] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    on
}

/// The tensor cores and the engines that move their operands: never part of the softmax, even
/// where they read its results (the next product's P, the accumulators it adds to).
fn engine(class: Class) -> bool {
    matches!(
        class,
        Class::Mma
            | Class::Wgmma
            | Class::LdMatrix
            | Class::CpAsync
            | Class::Tma
            | Class::Mbarrier
            | Class::Fence
            | Class::Bar
    )
}

/// An instruction's destination registers and the registers it reads, its guard included
/// (`parse::Instruction::destinations`, `sources`).
fn operands(i: &Instruction) -> (Vec<RegId>, Vec<RegId>) {
    let mut sources: Vec<RegId> = i.guard.map(|g| g.reg).into_iter().collect();
    for o in i.sources() {
        o.registers(&mut sources);
    }
    (i.destinations(), sources)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    /// Classes by opcode, as the PTX ISA groups them (independent of the decoder's table):
    /// enough for the snippets below.
    fn class_of(opcode: &str) -> Class {
        match opcode.split('.').next().unwrap() {
            "mma" => Class::Mma,
            "wgmma" => Class::Wgmma,
            "ldmatrix" => Class::LdMatrix,
            "ex2" => Class::Ex2,
            "bar" => Class::Bar,
            "st" => Class::StGlobal(4),
            "ld" => Class::LdGlobal(4),
            "setp" | "selp" | "max" => Class::Compare,
            "cvt" => Class::Convert,
            "bra" => Class::Branch,
            "mov" => Class::Move,
            "add" | "mul" | "sub" | "fma" if opcode.ends_with("f32") => Class::FloatArith,
            _ => Class::IntArith,
        }
    }

    /// The on-products flags of the one entry of `body`, by instruction text.
    fn flags(regs: &str, body: &str) -> Vec<(String, bool)> {
        let ptx = format!(
            ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 p)\n{{\n{regs}\n{body}\n}}\n"
        );
        let module = parse::parse(&ptx).expect("parses");
        let f = module.function("k").unwrap();
        let classes: Vec<Class> = f.instructions().map(|i| class_of(i.opcode)).collect();
        f.instructions()
            .map(|i| i.text.to_string())
            .zip(on_products(f, &classes))
            .collect()
    }

    /// One tile of attention in miniature: a product's scores are scaled, masked by an index
    /// compare, exponentiated, summed and packed into P for the next product, which adds into
    /// an accumulator that the loop rescales. Each instruction's flag is what the definition
    /// says, written out by hand: the loop counter feeds the mask's column but also the loop's
    /// own compare, so it stays the products'.
    #[test]
    fn the_softmax_of_a_product_is_on_it_and_its_loads_and_indices_are_not() {
        let regs = ".reg .pred %p<4>;\n.reg .b32 %r<16>;\n.reg .f32 %f<24>;\n.reg .b64 %rd<4>;";
        let body = "\
ld.param.u64 %rd1, [p];
mov.u32 %r1, 0;
$L_loop:
ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r2, %r3, %r4, %r5}, [%rd1];
mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1, %f2, %f3, %f4}, {%r2, %r3, %r4, %r5}, {%r6, %r7}, {%f5, %f5, %f5, %f5};
mul.f32 %f6, %f1, 0f3F000000;
add.u32 %r9, %r1, %r10;
setp.lt.u32 %p1, %r9, 100;
selp.f32 %f7, %f6, 0fFF800000, %p1;
max.f32 %f8, %f7, %f9;
mov.f32 %f9, %f8;
sub.f32 %f10, %f7, %f8;
ex2.approx.f32 %f11, %f10;
add.f32 %f12, %f12, %f11;
cvt.rn.bf16x2.f32 %r8, %f11, %f11;
mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f13, %f14, %f15, %f16}, {%r8, %r8, %r8, %r8}, {%r6, %r7}, {%f17, %f18, %f19, %f20};
mul.f32 %f17, %f13, %f11;
add.u32 %r1, %r1, 16;
setp.lt.u32 %p2, %r1, 4096;
@%p2 bra $L_loop;
st.global.f32 [%rd1], %f17;
add.u64 %rd2, %rd1, 4;
bar.sync 0;";
        let want = [
            ("ld.param.u64 %rd1, [p]", false),
            ("mov.u32 %r1, 0", false),
            ("ldmatrix", false),
            ("mma.sync", false), // the product itself: the tensor cores'
            ("mul.f32 %f6", true),
            ("add.u32 %r9", true), // the mask's column: only the mask reads it
            ("setp.lt.u32 %p1", true), // the mask's compare: only the softmax reads it
            ("selp.f32", true),    // the mask applied to a score
            ("max.f32", true),
            ("mov.f32 %f9", true),
            ("sub.f32", true),
            ("ex2", true),
            ("add.f32 %f12", true),
            ("cvt.rn.bf16x2", true),
            ("mma.sync", false),    // reads P, still the tensor cores'
            ("mul.f32 %f17", true), // the output's rescale
            ("add.u32 %r1", false),
            ("setp.lt.u32 %p2", false),
            ("@%p2 bra", false),
            ("st.global.f32", true), // stores the output: its epilogue
            ("add.u64 %rd2", false), // read by nothing
            ("bar.sync", false),
        ];
        let got = flags(regs, body);
        assert_eq!(got.len(), want.len());
        for ((text, flag), (start, expected)) in got.iter().zip(want) {
            assert!(text.starts_with(start), "{text} is not {start}");
            assert_eq!(*flag, expected, "{text}");
        }
    }

    /// A score-dependent branch is on products (its guard is a score's compare), and so is what
    /// it guards; the flag follows a value through a chain of copies and conversions.
    #[test]
    fn a_guard_and_a_chain_of_copies_carry_a_product() {
        let regs = ".reg .pred %p<4>;\n.reg .b32 %r<16>;\n.reg .f32 %f<24>;\n.reg .b64 %rd<4>;";
        let body = "\
wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, 1, 1, 1, 0, 0;
mov.b32 %r1, %f1;
mov.b32 %f5, %r1;
setp.eq.f32 %p1, %f5, %f6;
@%p1 add.u32 %r2, %r2, 1;
@!%p1 bra $L_done;
add.u32 %r3, %r4, 1;
$L_done:
ret;";
        let got: Vec<bool> = flags(regs, body).into_iter().map(|(_, f)| f).collect();
        assert_eq!(got, [false, true, true, true, true, true, false, false]);
    }
}
