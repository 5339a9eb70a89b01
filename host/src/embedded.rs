//! The kernels' PTX, built by `host/build.rs` and embedded in the binary, one per architecture,
//! and the choice of which module the PTX backend (crate `ptx`) runs: the embedded build of
//! `KERNELS_PTX_ARCH`, or the file `KERNELS_PTX` names (docs/emulator.md, "Two backends").

use std::path::Path;
use std::sync::OnceLock;

use ptx::exec::Program;

use crate::{Error, Result};

// Statics, not constants: a `const` or an `include_str!` in a function body is copied into every
// codegen unit that uses it (the binary held twenty copies of these 1.8 MB texts); a static has
// one address and so one copy.
static SM_80: &str = include_str!(concat!(env!("OUT_DIR"), "/kernels-sm_80.ptx"));
static SM_90: &str = include_str!(concat!(env!("OUT_DIR"), "/kernels-sm_90.ptx"));
static SM_90A: &str = include_str!(concat!(env!("OUT_DIR"), "/kernels-sm_90a.ptx"));
static EXERCISES: &str = include_str!(concat!(env!("OUT_DIR"), "/exercises-sm_80.ptx"));
static SOLUTIONS: &str = include_str!(concat!(env!("OUT_DIR"), "/solutions-sm_80.ptx"));

/// The exercises' PTX (docs/exercises.md), built for sm_80 so that it runs on every GPU the
/// project supports: the learner's stubs, or (`solutions`) the reference solutions. Each holds
/// the exercises' entries only, under the same names.
pub fn exercises_ptx(solutions: bool) -> &'static str {
    if solutions { SOLUTIONS } else { EXERCISES }
}

/// A GPU architecture the kernels were compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// Ampere (A100): compute capability 8.0.
    Sm80,
    /// Hopper (H100, H200), portable subset: compute capability 9.0.
    Sm90,
    /// Hopper with its architecture-specific instructions (wgmma, TMA); runs only on 9.0.
    Sm90a,
}

impl Arch {
    /// Every embedded architecture.
    pub const ALL: [Arch; 3] = [Arch::Sm80, Arch::Sm90, Arch::Sm90a];

    /// The `sm_XX` name used by ptxas and in the PTX `.target` line.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Sm80 => "sm_80",
            Arch::Sm90 => "sm_90",
            Arch::Sm90a => "sm_90a",
        }
    }

    /// The PTX text.
    pub fn ptx(self) -> &'static str {
        match self {
            Arch::Sm80 => SM_80,
            Arch::Sm90 => SM_90,
            Arch::Sm90a => SM_90A,
        }
    }

    /// The best build for a device of compute capability `major.minor`: sm_90a on Hopper (9.0),
    /// sm_90 (forward-compatible PTX, JIT-compiled by the driver) on anything after it, sm_80 on
    /// Ampere and Ada (8.x), and none before Ampere (the tensor-core and `cp.async` kernels need
    /// 8.0).
    pub fn for_compute_capability(major: i32, minor: i32) -> Option<Arch> {
        match (major, minor) {
            (9, 0) => Some(Arch::Sm90a),
            (m, _) if m >= 9 => Some(Arch::Sm90),
            (8, _) => Some(Arch::Sm80),
            _ => None,
        }
    }
}

/// The environment variable that names a PTX file to load instead of the embedded module.
pub const PTX_FILE_VAR: &str = "KERNELS_PTX";
/// The environment variable that picks the embedded module's architecture for the PTX backend.
pub const PTX_ARCH_VAR: &str = "KERNELS_PTX_ARCH";

/// The embedded module of `arch`, decoded once per process.
pub fn program(arch: Arch) -> &'static Program {
    static CACHE: [OnceLock<&'static Program>; 3] =
        [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let i = Arch::ALL.iter().position(|a| *a == arch).unwrap();
    CACHE[i].get_or_init(|| {
        Program::load(arch.ptx(), format!("embedded {}", arch.name()))
            .expect("the embedded PTX parses (tested)")
    })
}

/// The module the environment names: the file in `KERNELS_PTX` if set, else the embedded
/// build for `KERNELS_PTX_ARCH` (default sm_90).
pub fn program_from_env() -> Result<&'static Program> {
    if let Some(path) = std::env::var_os(PTX_FILE_VAR).filter(|p| !p.is_empty()) {
        return Program::file(Path::new(&path));
    }
    Ok(program(arch_from_env()?))
}

/// The architecture `KERNELS_PTX_ARCH` names (default sm_90).
pub fn arch_from_env() -> Result<Arch> {
    let name = match std::env::var(PTX_ARCH_VAR) {
        Ok(name) => name,
        Err(std::env::VarError::NotPresent) => String::new(),
        Err(std::env::VarError::NotUnicode(v)) => {
            return Err(Error::Ptx(format!(
                "{PTX_ARCH_VAR}={}: not UTF-8; expected sm_80, sm_90 or sm_90a",
                v.to_string_lossy().escape_debug()
            )));
        }
    };
    if name.is_empty() {
        return Ok(Arch::Sm90);
    }
    Arch::ALL
        .into_iter()
        .find(|a| a.name() == name)
        .ok_or_else(|| {
            Error::Ptx(format!(
                "{PTX_ARCH_VAR}={name}: expected sm_80, sm_90 or sm_90a"
            ))
        })
}

/// The names of every kernel entry point (`.entry`) in a PTX text, in order.
pub fn entry_points(ptx: &str) -> Vec<&str> {
    ptx.lines()
        .filter_map(|l| l.trim_start().strip_prefix(".visible .entry "))
        .map(|rest| rest.split(['(', ' ']).next().unwrap_or(rest))
        .collect()
}

/// The PTX text of entry point `name`: from its `.entry` line to the next entry (or the end).
pub fn entry_body<'a>(ptx: &'a str, name: &str) -> Option<&'a str> {
    let start = ptx.find(&format!(".visible .entry {name}("))?;
    let rest = &ptx[start..];
    let end = rest[1..]
        .find(".visible .entry ")
        .map_or(rest.len(), |e| e + 1);
    Some(&rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The FMA-exponential attention kernel hands half of a score tile's exponentials to the
    /// FMA units: per step of 32 keys the `ex2.approx` kernel issues 32 (2 row tiles x 4
    /// pieces x 4 scores per lane) plus 4 rescales (one per row of the lane), the variant 16
    /// plus 4.
    #[test]
    fn the_fma_variant_issues_half_the_ex2() {
        let count = |name: &str| {
            entry_body(Arch::Sm90.ptx(), name)
                .unwrap_or_else(|| panic!("{name} in the PTX"))
                .matches("ex2.approx")
                .count()
        };
        let (sfu, fma) = (
            count("flash_attention_bf16_d64"),
            count("flash_attention_bf16_poly_d64"),
        );
        assert_eq!(
            (sfu, fma),
            (36, 20),
            "ex2.approx in the PTX of the SFU and FMA kernels"
        );
    }

    #[test]
    fn every_arch_has_the_same_entry_points() {
        let base = entry_points(Arch::Sm90.ptx());
        assert!(base.contains(&"vector_add_f32"), "{base:?}");
        for arch in Arch::ALL {
            assert_eq!(entry_points(arch.ptx()), base, "{}", arch.name());
            assert!(arch.ptx().contains(&format!(".target {}", arch.name())));
        }
    }

    #[test]
    fn hopper_gets_the_arch_specific_build() {
        assert_eq!(Arch::for_compute_capability(9, 0), Some(Arch::Sm90a));
        assert_eq!(Arch::for_compute_capability(10, 0), Some(Arch::Sm90));
        assert_eq!(Arch::for_compute_capability(8, 6), Some(Arch::Sm80));
        assert_eq!(Arch::for_compute_capability(7, 5), None);
    }
}
