//! The PTX front end and the dataflow analysis on the project's own embedded modules (the
//! `ptx` crate's unit tests use hand-written PTX: it never chooses an embedded build).

use host::embedded::{self, Arch};
use ptx::decode::Class;
use ptx::parse::parse;

/// The tensor cores' and the copy engines' own instructions, and barriers: never "on products"
/// (they produce or move a product, they do not compute on its result).
const ENGINES: [Class; 8] = [
    Class::Mma,
    Class::Wgmma,
    Class::LdMatrix,
    Class::CpAsync,
    Class::Tma,
    Class::Mbarrier,
    Class::Fence,
    Class::Bar,
];

#[test]
fn every_arch_parses_with_every_entry() {
    for arch in Arch::ALL {
        let text = arch.ptx();
        let module = parse(text).unwrap_or_else(|e| panic!("{}: {e}", arch.name()));
        assert_eq!(module.target, arch.name());
        let entries: Vec<&str> = module
            .functions
            .iter()
            .filter(|f| f.entry)
            .map(|f| f.name)
            .collect();
        assert_eq!(entries, embedded::entry_points(text), "{}", arch.name());
        // Every instruction line of the text is one parsed instruction's line (inline asm
        // puts several on one line, so compare the sets of lines).
        let mut lines: Vec<u32> = module
            .functions
            .iter()
            .flat_map(|f| f.instructions().map(|i| i.line))
            .collect();
        lines.dedup();
        let expected: Vec<u32> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| {
                let code = l.split("//").next().unwrap_or("");
                let pieces: Vec<&str> = code.split(';').collect();
                pieces[..pieces.len() - 1].iter().any(|p| {
                    let t = p.trim_start_matches(|c: char| c.is_whitespace() || c == '{');
                    !t.is_empty() && !t.starts_with('.')
                })
            })
            .map(|(n, _)| n as u32 + 1)
            .collect();
        assert_eq!(lines, expected, "{}", arch.name());
    }
}

#[test]
fn entry_params_have_the_declared_types_and_offsets() {
    let module = parse(Arch::Sm90.ptx()).unwrap();
    let f = module.function("attention_pv_f32_d128").unwrap();
    let shape: Vec<(&str, u32, u32, u32)> = f
        .params
        .iter()
        .map(|p| (p.ty, p.bytes, p.align, p.offset))
        .collect();
    assert_eq!(
        shape,
        [
            ("u64", 8, 1, 0),
            ("u64", 8, 1, 8),
            ("u64", 8, 1, 16),
            ("u32", 4, 4, 24),
            ("u32", 4, 4, 28),
        ]
    );
    assert_eq!(f.params[0].name, "attention_pv_f32_d128_param_0");
    assert_eq!(f.params[0].ptr, Some(""));
}

#[test]
fn shared_variables_and_dynamic_shared_memory() {
    let module = parse(Arch::Sm90.ptx()).unwrap();
    let dynamic: Vec<_> = module.shared.iter().filter(|v| v.external).collect();
    assert_eq!(dynamic.len(), 1);
    assert_eq!(dynamic[0].bytes, None);
    assert!(
        module
            .shared
            .iter()
            .filter(|v| !v.external)
            .all(|v| v.bytes.is_some_and(|b| b > 0) && v.align == 16)
    );
}

/// On the project's own kernels, in every embedded module: each `ex2` of a kernel with
/// tensor-core products (attention) exponentiates a score, so each is on products, and
/// every instruction that is has a product upstream: a kernel without `mma` or `wgmma`
/// (softmax on its own, the f32 attention, the GEMMs on the CUDA cores) has none on
/// products, and the tensor cores' and engines' own instructions never are.
#[test]
fn every_exponential_of_attention_is_on_its_products_and_nothing_else_is_without_them() {
    let mut attention = 0;
    for arch in Arch::ALL {
        for (name, kernel) in embedded::program(arch).entries() {
            let Ok(k) = kernel else { continue };
            let has = |c: Class| k.classes.contains(&c);
            let products = has(Class::Mma) || has(Class::Wgmma);
            for (i, (&class, &on)) in k.classes.iter().zip(&k.on_products).enumerate() {
                let at = || format!("{name} ({}), {}", arch.name(), k.sites[i].text);
                assert!(!(on && ENGINES.contains(&class)), "{}", at());
                assert!(!on || products, "{}", at());
                if products && class == Class::Ex2 {
                    assert!(on, "{}", at());
                }
            }
            if products && has(Class::Ex2) {
                attention += 1;
            }
        }
    }
    // The mma.sync attention kernels on three modules, the wgmma ones on sm_90a.
    assert!(attention >= 9, "{attention}");
}
