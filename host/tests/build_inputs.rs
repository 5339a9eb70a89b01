//! The PTX build's inputs are tracked by paths relative to this package, so that a built tree
//! that is moved or copied still rebuilds its PTX on an edit (issue 41: with absolute paths the
//! copy kept watching the original tree, and its PTX backend ran the old module).
//!
//! Cargo resolves a relative `rerun-if-changed` path against the package's directory wherever
//! the tree now is, and keeps an absolute one as written; so what the build script printed, read
//! back from its recorded output (the file cargo itself reads), decides it.

use std::path::{Path, PathBuf};

/// The `rerun-if-changed` paths of this package's last build-script run.
fn rerun_paths() -> Vec<String> {
    // OUT_DIR is `target/<profile>/build/host-<hash>/out`; cargo keeps the script's stdout
    // beside it, in `output`.
    let output = Path::new(env!("OUT_DIR")).with_file_name("output");
    let text =
        std::fs::read_to_string(&output).unwrap_or_else(|e| panic!("{}: {e}", output.display()));
    text.lines()
        .filter_map(|l| {
            l.strip_prefix("cargo:rerun-if-changed=")
                .or_else(|| l.strip_prefix("cargo::rerun-if-changed="))
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn the_ptx_build_watches_the_kernel_sources_by_relative_paths() {
    let paths = rerun_paths();
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for p in &paths {
        assert!(
            Path::new(p).is_relative(),
            "rerun-if-changed={p} is absolute: a moved or copied tree would not rebuild its PTX"
        );
        assert!(
            manifest.join(p).exists(),
            "rerun-if-changed={p} names nothing under {}",
            manifest.display()
        );
    }
    // The kernel sources themselves, and the toolchain they are built with.
    for want in ["../kernels/src", "../kernels/rust-toolchain.toml"] {
        assert!(
            paths.iter().any(|p| p == want),
            "{want} not watched: {paths:?}"
        );
    }
}
