//! What the GPU runs: a PTX module assembled by ptxas for one architecture, with ptxas's line
//! table pointing back at the PTX itself, and the machine code's loads and stores read per PTX
//! line (`emu::machine_code`), so that a sampled launch counts the requests the GPU issues, not
//! the PTX's. A service of `check`.
//!
//! The trick: ptxas's `-lineinfo` maps each machine instruction to the source line that the PTX's
//! own `.loc` directives name. Given a copy of the PTX whose `.loc` before each instruction names
//! that instruction's line in the PTX, the source *is* the PTX, and `nvdisasm -g` prints, above
//! each machine instruction, the PTX line it was made from.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::process::Command;

use emu::MemorySpace;
use emu::machine_code::{MachineAccess, MachineCode};
use host::predict::Assembled;
use kernels::cuda::emu::Access;
use perf::model::Machine;

use crate::nvidia_tools::{KernelReport, NVDISASM, PTXAS, fetch_tool, parse_report, tools_dir};

/// The PTX's name as its line table calls it (only ptxas and nvdisasm read it).
const PTX_FILE: &str = "module.ptx";

/// `ptx` for ptxas on `arch` with its own lines as its line table: `.target` set to `arch`, any
/// `.file`/`.loc` it had dropped, one `.file` naming [`PTX_FILE`], and before each instruction
/// (the first line of each statement inside a function's body) a `.loc` giving that line's
/// number in `ptx`.
pub fn with_ptx_line_table(ptx: &str, arch: &str) -> String {
    let mut out = String::with_capacity(ptx.len() * 2);
    let mut depth = 0i32;
    // Inside a statement that spans lines (a `call` with its arguments on the next lines).
    let mut continued = false;
    for (i, line) in ptx.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("").trim();
        let directive = code.split_whitespace().next().unwrap_or("");
        if directive == ".loc" || directive == ".file" {
            out.push('\n');
            continue;
        }
        if let Some(rest) = code.strip_prefix(".target") {
            let features: Vec<&str> = rest.split(',').skip(1).map(str::trim).collect();
            out.push_str(&format!(".target {arch}"));
            for f in features {
                out.push_str(&format!(", {f}"));
            }
            out.push('\n');
            continue;
        }
        if code.starts_with(".address_size") {
            out.push_str(line);
            out.push_str(&format!("\n.file 1 \"{PTX_FILE}\"\n"));
            continue;
        }
        let statement = depth > 0
            && !code.is_empty()
            && !code.starts_with('.')
            && !code.starts_with('{')
            && !code.starts_with('}')
            && !code.ends_with(':');
        if statement && !continued {
            out.push_str(&format!("\t.loc 1 {} 0\n", i + 1));
        }
        if statement {
            continued = !code.ends_with(';');
        }
        depth += code.matches('{').count() as i32 - code.matches('}').count() as i32;
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// One machine instruction's memory access, from its opcode (`LDS.128`, `LDG.E.64.CONSTANT`,
/// `STS`, `ST.E.U8`): `None` for an instruction that is no plain load or store (`LDSM`,
/// `LDGSTS`, atomics, local and constant memory).
pub fn memory_access(opcode: &str) -> Option<MachineAccess> {
    let mut parts = opcode.split('.');
    let (space, access) = match parts.next()? {
        "LDS" => (Some(MemorySpace::Shared), Access::Read),
        "STS" => (Some(MemorySpace::Shared), Access::Write),
        "LDG" => (Some(MemorySpace::Global), Access::Read),
        "STG" => (Some(MemorySpace::Global), Access::Write),
        "LD" => (None, Access::Read),
        "ST" => (None, Access::Write),
        _ => return None,
    };
    let mut bytes = 4;
    for m in parts {
        bytes = match m {
            "128" => 16,
            "64" => 8,
            "U8" | "S8" => 1,
            "U16" | "S16" => 2,
            _ => continue,
        };
    }
    Some(MachineAccess {
        space,
        access,
        bytes,
    })
}

/// `nvdisasm -g -c`'s listing read per kernel: each memory instruction under the PTX line the
/// `//## File "...", line N` comment above it names.
pub fn parse_listing(listing: &str, arch: &str) -> MachineCode {
    let mut code = MachineCode {
        arch: arch.to_string(),
        ..MachineCode::default()
    };
    let mut kernel: Option<String> = None;
    let mut line: Option<u32> = None;
    for text in listing.lines() {
        let t = text.trim();
        if let Some(name) = t.strip_prefix(".text.").and_then(|n| n.strip_suffix(':')) {
            kernel = Some(name.to_string());
            line = None;
        } else if let Some(rest) = t.strip_prefix("//## File") {
            // `//## File "module.ptx", line 102` (then maybe ` inlined at ...`): the first line
            // is where the instruction is.
            line = rest
                .split("line ")
                .nth(1)
                .and_then(|n| n.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|n| n.parse().ok());
        } else if let Some(rest) = t.strip_prefix("/*")
            && let Some((_, instruction)) = rest.split_once("*/")
        {
            let mut words = instruction.split_whitespace();
            let mut opcode = words.next().unwrap_or("");
            if opcode.starts_with('@') {
                opcode = words.next().unwrap_or("");
            }
            if let (Some(k), Some(l), Some(access)) = (&kernel, line, memory_access(opcode)) {
                code.kernels
                    .entry(k.clone())
                    .or_default()
                    .lines
                    .entry(l)
                    .or_default()
                    .push(access);
            }
        }
    }
    code
}

/// `ptx` assembled for `arch` (ptxas `-lineinfo -v`, then `nvdisasm -g -c`): its machine code's
/// memory instructions per PTX line, and ptxas's report per kernel (registers, shared memory).
/// Files are named by a hash of the module and the architecture, so that two modules never
/// share them and an unchanged one is not assembled again.
pub fn assemble(ptx: &str, arch: &str) -> Result<(MachineCode, Vec<KernelReport>), String> {
    let dir = tools_dir()?.join("machine-code");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let source = with_ptx_line_table(ptx, arch);
    let mut h = DefaultHasher::new();
    (source.as_str(), arch).hash(&mut h);
    let stem = format!("{arch}-{:016x}", h.finish());
    let (log_path, listing_path) = (
        dir.join(format!("{stem}.ptxas-log")),
        dir.join(format!("{stem}.sass")),
    );
    if let (Ok(log), Ok(listing)) = (
        std::fs::read_to_string(&log_path),
        std::fs::read_to_string(&listing_path),
    ) {
        return Ok((parse_listing(&listing, arch), parse_report(&log)));
    }
    // Each process its own inputs and outputs, renamed into place once whole.
    let own = |ext: &str| dir.join(format!("{stem}.{}.{ext}", std::process::id()));
    let (ptx_path, cubin) = (own("ptx"), own("cubin"));
    std::fs::write(&ptx_path, &source)
        .map_err(|e| format!("cannot write {}: {e}", ptx_path.display()))?;
    let ptxas = fetch_tool(&tools_dir()?, &PTXAS)?;
    let out = Command::new(&ptxas)
        .arg(format!("-arch={arch}"))
        .args(["-v", "-lineinfo"])
        .arg(&ptx_path)
        .arg("-o")
        .arg(&cubin)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", ptxas.display()))?;
    let _ = std::fs::remove_file(&ptx_path);
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        let _ = std::fs::remove_file(&cubin);
        let first = log
            .lines()
            .find(|l| l.contains("error"))
            .unwrap_or("")
            .trim();
        return Err(format!("ptxas for {arch} failed: {first}"));
    }
    let nvdisasm = fetch_tool(&tools_dir()?, &NVDISASM)?;
    let listed = Command::new(&nvdisasm)
        .args(["-g", "-c"])
        .arg(&cubin)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", nvdisasm.display()));
    let _ = std::fs::remove_file(&cubin);
    let listed = listed?;
    if !listed.status.success() {
        return Err(format!(
            "nvdisasm failed on the {arch} machine code: {}",
            String::from_utf8_lossy(&listed.stderr).trim()
        ));
    }
    let listing = String::from_utf8_lossy(&listed.stdout).into_owned();
    for (path, text) in [(&log_path, &log), (&listing_path, &listing)] {
        let partial = own("partial");
        std::fs::write(&partial, text)
            .and_then(|()| std::fs::rename(&partial, path))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok((parse_listing(&listing, arch), parse_report(&log)))
}

/// The module assembled for one architecture, or why ptxas could not.
pub struct ForArch {
    pub arch: String,
    pub assembled: Result<Assembled, String>,
}

/// The module assembled by ptxas for each architecture of `machines` (sm_90a for Hopper where
/// the module needs it): each one's machine code and registers, or why ptxas gave none.
pub fn for_devices(ptx: &str, machines: &[Machine], wgmma: bool) -> Vec<ForArch> {
    let mut out: Vec<ForArch> = Vec::new();
    for m in machines {
        let arch = match m.spec.arch {
            "sm_90" if wgmma => "sm_90a".to_string(),
            a => a.to_string(),
        };
        if out.iter().any(|f| f.arch == arch) {
            continue;
        }
        let assembled = assemble(ptx, &arch).map(|(code, reports)| Assembled {
            code,
            resources: reports
                .iter()
                .map(|r| (r.name.clone(), crate::nvidia_tools::resources_of(r)))
                .collect(),
        });
        out.push(ForArch { arch, assembled });
    }
    out
}

/// The architectures ptxas assembled, for `host::predict::sample_foreign`.
pub fn assembled(code: &[ForArch]) -> Vec<Assembled> {
    code.iter()
        .filter_map(|f| f.assembled.as_ref().ok().cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Opcodes as nvdisasm prints them (sm_80, sm_86, sm_90 listings), against the widths the
    /// PTX ISA gives their PTX forms (`ld.shared.v4.f32`: 16 bytes a thread).
    #[test]
    fn opcodes_read_as_their_space_direction_and_width() {
        let shared = Some(MemorySpace::Shared);
        let global = Some(MemorySpace::Global);
        for (op, space, access, bytes) in [
            ("LDS", shared, Access::Read, 4),
            ("LDS.128", shared, Access::Read, 16),
            ("LDS.U.64", shared, Access::Read, 8),
            ("STS.128", shared, Access::Write, 16),
            ("STS.U8", shared, Access::Write, 1),
            ("LDG.E.128.CONSTANT", global, Access::Read, 16),
            ("LDG.E", global, Access::Read, 4),
            ("STG.E.64", global, Access::Write, 8),
            ("LD.E.U16", None, Access::Read, 2),
        ] {
            assert_eq!(
                memory_access(op),
                Some(MachineAccess {
                    space,
                    access,
                    bytes
                }),
                "{op}"
            );
        }
        for op in [
            "LDSM.16.M88.4",
            "LDGSTS.E.BYPASS.128",
            "ATOMS.ADD",
            "LDL",
            "LDC",
            "FFMA",
        ] {
            assert_eq!(memory_access(op), None, "{op}");
        }
    }

    /// A listing's memory instructions land under the PTX line above them, per kernel; a
    /// predicated one counts too; other instructions do not.
    #[test]
    fn a_listing_is_read_per_kernel_and_ptx_line() {
        let listing = "\
//--------------------- .text.k --------------------------
        .section        .text.k,\"ax\",@progbits
k:
.text.k:
\t//## File \"module.ptx\", line 100
        /*0260*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
\t//## File \"module.ptx\", line 102
        /*0280*/                   LDS.128 R8, [R7] ;
\t//## File \"module.ptx\", line 104 inlined at \"module.ptx\", line 7
        /*0290*/               @!P0 LDS R37, [R3+0x1080] ;
        /*02a0*/                   FFMA R1, R2, R3, R1 ;
.text.other:
\t//## File \"module.ptx\", line 9
        /*0000*/                   STG.E [R2.64], R5 ;
";
        let code = parse_listing(listing, "sm_86");
        assert_eq!(code.arch, "sm_86");
        let k = &code.kernels["k"].lines;
        assert_eq!(k.len(), 2, "{k:?}");
        assert_eq!(k[&102][0].bytes, 16);
        assert_eq!(k[&104][0].bytes, 4);
        assert_eq!(code.kernels["other"].lines[&9][0].access, Access::Write);
    }

    /// Every instruction gets a `.loc` naming its own PTX line, a statement over several lines
    /// only before its first, and the target is the architecture asked for; a former line table
    /// is gone.
    #[test]
    fn the_line_table_names_each_instructions_own_line() {
        let ptx = "\
.version 8.8
.target sm_90
.address_size 64
.file 2 \"kernel.cu\"
.visible .entry k(
\t.param .u64 p
)
{
\t.reg .b32 %r<3>;
\t.local .align 4 .b8 __local_depot0[8];
\t.loc 2 10 1
\tld.shared.f32 %f1, [%r1];
$L__BB0_1:
\t@%p1 bra $L__BB0_1;
\tcall.uni (retval0),
\tvprintf,
\t(param0);
\tret;
}
";
        let out = with_ptx_line_table(ptx, "sm_86");
        assert!(out.contains(".target sm_86\n"), "{out}");
        assert!(!out.contains("kernel.cu"), "{out}");
        assert!(
            out.contains("__local_depot0[8];"),
            "a .local is no .loc: {out}"
        );
        let locs: Vec<&str> = out
            .lines()
            .filter(|l| l.trim_start().starts_with(".loc "))
            .collect();
        // ld (line 12), the predicated bra (14), the call's first line (15), ret (18).
        assert_eq!(
            locs,
            [
                "\t.loc 1 12 0",
                "\t.loc 1 14 0",
                "\t.loc 1 15 0",
                "\t.loc 1 18 0"
            ],
            "{out}"
        );
    }
}
