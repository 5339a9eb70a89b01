//! Inside `xtask`, a command does not reach into another command (docs/design/crates.md): what
//! two commands share (formatting, the checkout's paths, NVIDIA's tools and their reports, the
//! options several accept) is a service module that imports no command. Each top-level module
//! of `xtask/src` is one or the other, and a reference `crate::<module>` from a module's code
//! (comments left out) is an arrow. The arrows between commands that remain are listed with
//! why; a new one fails, and so does a listed one that has gone (take it off the list).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The modules behind `cargo xtask <command>`: what `main.rs` dispatches to.
const COMMANDS: &[&str] = &[
    "check",
    "docs",
    "emu_speed",
    "exercise",
    "gpu_window",
    "hierarchy",
    "inspect",
    "predict",
    "ptxas",
    "roofline",
    "run",
    "scaffold",
    "trace_softmax",
    "validate",
];

/// What commands share; a service imports no command.
const SERVICES: &[&str] = &[
    "atomic",
    "baseline",
    "checkout",
    "decode",
    "format",
    "host_code",
    "kernel_args",
    "machine_code",
    "npy",
    "nvidia_tools",
    "nvrtc",
    "options",
    "plot",
    "sites",
    "watch",
    "watchdog",
];

/// The arrows between commands still there, each with why: the next steps of the split.
const STILL_THERE: &[(&str, &str, &str)] = &[
    // `doc-pastes` reruns each command whose output a chapter pastes, to compare the two: it
    // calls the commands by design.
    (
        "docs",
        "exercise",
        "doc-pastes reruns the exercise's report",
    ),
    (
        "docs",
        "hierarchy",
        "doc-pastes reruns the hierarchy probes",
    ),
    ("docs", "inspect", "doc-pastes reruns inspect"),
    ("docs", "predict", "doc-pastes reruns predict"),
    ("docs", "roofline", "doc-pastes reruns roofline"),
    ("docs", "trace_softmax", "doc-pastes reruns trace-softmax"),
    (
        "inspect",
        "exercise",
        "inspect on an exercise prints its performance report (exercise::performance)",
    ),
];

/// The top-level modules of `xtask/src` each `.rs` file under `dir` refers to, by the module
/// the file belongs to (a file `x.rs` or anything under `x/` belongs to `x`).
fn arrows(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(dir).unwrap();
            let first = rel
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy();
            let module = first.trim_end_matches(".rs").to_string();
            let text = std::fs::read_to_string(&path).unwrap();
            let refs = out.entry(module.clone()).or_default();
            refs.extend(references(&text));
            refs.remove(&module);
        }
    }
    out
}

/// The modules `text` names after `crate::`, directly or in a `use crate::{a, b::c}` group,
/// outside comments.
fn references(text: &str) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for part in group.split(',') {
                let name = ident(part.trim());
                if !name.is_empty() {
                    found.insert(name);
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_module_is_a_command_or_a_service() {
    for module in arrows(&src()).keys() {
        if module == "main" {
            continue; // the dispatcher
        }
        let (command, service) = (
            COMMANDS.contains(&module.as_str()),
            SERVICES.contains(&module.as_str()),
        );
        assert!(
            command != service,
            "xtask/src/{module}: list it in COMMANDS or in SERVICES (exactly one)"
        );
    }
}

#[test]
fn no_command_reaches_another_but_those_listed() {
    let mut found = BTreeSet::new();
    let mut from_services = Vec::new();
    for (module, refs) in arrows(&src()) {
        for r in refs.iter().filter(|r| COMMANDS.contains(&r.as_str())) {
            if COMMANDS.contains(&module.as_str()) {
                found.insert((module.clone(), r.clone()));
            } else if SERVICES.contains(&module.as_str()) {
                from_services.push(format!("{module} -> {r}"));
            }
        }
    }
    assert!(
        from_services.is_empty(),
        "a service imports a command: {from_services:?}"
    );
    let listed: BTreeSet<(String, String)> = STILL_THERE
        .iter()
        .map(|(a, b, _)| (a.to_string(), b.to_string()))
        .collect();
    let new: Vec<_> = found.difference(&listed).collect();
    let gone: Vec<_> = listed.difference(&found).collect();
    assert!(
        new.is_empty(),
        "commands reaching into other commands: {new:?}; move what they share into a service"
    );
    assert!(
        gone.is_empty(),
        "listed arrows no longer there (take them off STILL_THERE): {gone:?}"
    );
}

/// The reading of references itself: direct paths, groups, nested paths, comments skipped.
#[test]
fn references_are_read_from_code_only() {
    let text = "use crate::format::{duration, wrap};\n\
                use crate::{checkout, options::ptx_requested};\n\
                // crate::run is only mentioned here\n\
                /// [`crate::predict`] in a doc comment\n\
                let x = crate::nvidia_tools::resources();\n";
    let found: Vec<String> = references(text).into_iter().collect();
    assert_eq!(
        found,
        ["checkout", "format", "nvidia_tools", "options"].map(String::from)
    );
}
