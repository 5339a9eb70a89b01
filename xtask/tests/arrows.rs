//! The workspace's crates and the only arrows allowed between them (docs/design/crates.md):
//! each crate has one role, and a lower crate never reaches a higher one. Cargo refuses a cycle,
//! but not an arrow that skips a level (the model launching through the runtime, say): this test
//! reads the declared dependencies of every member, normal, dev and build, and fails on any
//! arrow that is not in the table, and on any member the table does not know.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Each member and the members it may depend on: kernels on nothing of the workspace; the
/// emulator on the kernels alone; the PTX interpreter on the emulator; the model on the
/// emulator's counts; the runtime and catalogue on all three; the commands and the test suite
/// on everything.
const ALLOWED: &[(&str, &[&str])] = &[
    ("kernels", &[]),
    ("emu", &["kernels"]),
    ("ptx", &["kernels", "emu"]),
    ("perf", &["kernels", "emu"]),
    ("host", &["kernels", "emu", "ptx", "perf"]),
    ("xtask", &["kernels", "emu", "ptx", "perf", "host"]),
    ("suite", &["kernels", "emu", "ptx", "perf", "host"]),
];

/// Every workspace member's name and the workspace members it declares as dependencies.
fn declared_arrows() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let members: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().expect("name").to_string())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .map(|d| d["name"].as_str().expect("name").to_string())
                .filter(|d| members.contains(d))
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

#[test]
fn every_arrow_between_the_crates_is_an_allowed_one() {
    let allowed: BTreeMap<&str, BTreeSet<&str>> = ALLOWED
        .iter()
        .map(|(c, deps)| (*c, deps.iter().copied().collect()))
        .collect();
    let declared = declared_arrows();
    assert_eq!(
        declared.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        allowed.keys().copied().collect(),
        "the workspace's members and this test's table differ: give a new crate its row"
    );
    for (krate, deps) in &declared {
        for dep in deps {
            assert!(
                allowed[krate.as_str()].contains(dep.as_str()),
                "{krate} depends on {dep}: not an allowed arrow (see ALLOWED)"
            );
        }
    }
}

/// The table itself has no cycle and only points down: each crate's allowed dependencies come
/// before it in the table, so that a new row cannot quietly make two crates one.
#[test]
fn the_allowed_arrows_only_point_down() {
    for (i, (krate, deps)) in ALLOWED.iter().enumerate() {
        for dep in *deps {
            let j = ALLOWED.iter().position(|(c, _)| c == dep);
            assert!(
                j.is_some_and(|j| j < i),
                "{krate} -> {dep}: not a crate above it"
            );
        }
    }
}
