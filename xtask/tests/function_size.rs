//! No function of the workspace is longer than [`MAX_LINES`]: a reader who opens any crate
//! should meet one small handler per job (a PTX instruction family, a memory check, a step of the
//! launch, a command's phase), never a 700-line match where adding an instruction means finding
//! the right arm (issue 37 for emu and ptx, the models being wasmi's and miri's one handler per
//! op family; issue 53 for every crate). Next to it, no source file is longer than
//! [`MAX_FILE_LINES`] (issue 53): a file that grows past it is split by subject into a module
//! folder.
//!
//! The measure is syn's: every `fn` item, method or trait default, nested ones included, from its
//! `fn` keyword to its closing brace (attributes and doc comments are not counted).

use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The most lines a function may span.
const MAX_LINES: usize = 150;

/// The most lines a `.rs` file may have, generated data aside ([`is_generated`]).
const MAX_FILE_LINES: usize = 1500;

/// The crates held to [`MAX_LINES`] and [`MAX_FILE_LINES`]: every member of the workspace, each
/// crate's whole folder (`src/`, `tests/`, `build.rs`).
const CHECKED: &[&str] = &["kernels", "emu", "ptx", "perf", "host", "xtask", "tests"];

/// Functions still over [`MAX_LINES`], as `path:name`, each with why it is let through. An entry
/// that no longer matches a long function fails the test, so the list only shrinks.
const ALLOWED: &[(&str, &str)] = &[];

/// One function and the lines it spans.
#[derive(Debug, PartialEq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
}

#[derive(Default)]
struct Functions(Vec<Function>);

impl Functions {
    fn add(&mut self, ident: &syn::Ident, fn_token: &syn::token::Fn, block: &syn::Block) {
        let first = fn_token.span.start().line;
        let last = block.brace_token.span.close().end().line;
        self.0.push(Function {
            name: ident.to_string(),
            line: first,
            lines: last - first + 1,
        });
    }
}

impl<'ast> Visit<'ast> for Functions {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.add(&f.sig.ident, &f.sig.fn_token, &f.block);
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.add(&f.sig.ident, &f.sig.fn_token, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.add(&f.sig.ident, &f.sig.fn_token, block);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

/// Every function of one source text.
fn functions(source: &str) -> Vec<Function> {
    let file = syn::parse_file(source).expect("the source parses");
    let mut found = Functions::default();
    found.visit_file(&file);
    found.0
}

/// Every `.rs` file under `dir`, build outputs (`target/`) aside.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("the source folder reads") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Every `.rs` file of the checked crates, with its path relative to the workspace.
fn workspace_sources() -> Vec<(String, String)> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = Vec::new();
    for krate in CHECKED {
        for path in sources(&workspace.join(krate)) {
            let text = std::fs::read_to_string(&path).expect("the source reads");
            let shown = path.strip_prefix(&workspace).unwrap_or(&path);
            out.push((shown.display().to_string().replace('\\', "/"), text));
        }
    }
    out
}

/// Whether a source is generated data, not code written by hand: rustfmt's and the ecosystem's
/// `@generated` marker in its first lines.
fn is_generated(text: &str) -> bool {
    text.lines().take(5).any(|l| l.contains("@generated"))
}

#[test]
fn no_function_of_the_workspace_is_over_the_limit() {
    let mut over = Vec::new();
    let mut allowed_seen = Vec::new();
    let mut seen = 0;
    for (path, text) in workspace_sources() {
        for f in functions(&text) {
            seen += 1;
            if f.lines <= MAX_LINES {
                continue;
            }
            let key = format!("{path}:{}", f.name);
            if ALLOWED.iter().any(|(k, _)| *k == key) {
                allowed_seen.push(key);
            } else {
                over.push(format!("{path}:{} {} ({} lines)", f.line, f.name, f.lines));
            }
        }
    }
    // The walk must have found the crates' functions, or the check would pass on nothing.
    assert!(seen > 2000, "only {seen} functions found under {CHECKED:?}");
    assert!(
        over.is_empty(),
        "functions over {MAX_LINES} lines (split them into named helpers):\n{}",
        over.join("\n")
    );
    let stale: Vec<&str> = ALLOWED
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| !allowed_seen.iter().any(|s| s == k))
        .collect();
    assert!(
        stale.is_empty(),
        "allowed long functions that are no longer over {MAX_LINES} lines (remove them from ALLOWED): {stale:?}"
    );
}

#[test]
fn no_source_file_of_the_workspace_is_over_the_limit() {
    let sources = workspace_sources();
    assert!(sources.len() > 200, "only {} sources found", sources.len());
    let over: Vec<String> = sources
        .iter()
        .filter(|(_, text)| !is_generated(text))
        .map(|(path, text)| (path, text.lines().count()))
        .filter(|&(_, lines)| lines > MAX_FILE_LINES)
        .map(|(path, lines)| format!("{path} ({lines} lines)"))
        .collect();
    assert!(
        over.is_empty(),
        "files over {MAX_FILE_LINES} lines (split them by subject into a module folder):\n{}",
        over.join("\n")
    );
}

#[test]
fn a_generated_source_is_left_out_of_the_file_limit() {
    assert!(is_generated("// @generated by a tool\nconst X: u8 = 0;\n"));
    // Only the header counts: a file that mentions the marker further down is written by hand.
    let later = format!("fn f() {{}}\n{}// says @generated\n", "\n".repeat(5));
    assert!(!is_generated(&later));
    assert!(!is_generated("fn f() {}\n"));
}

#[test]
fn the_measure_counts_from_fn_to_the_closing_brace_nested_functions_included() {
    let source = "\
/// Doc lines and attributes are not counted.
#[inline]
fn three() {
    let x = 1;
}

impl S {
    fn method(&self) -> u32 { 7 }
}

trait T {
    fn required(&self);
    fn provided(&self) {
        fn inner() {
        }
    }
}
";
    let found = functions(source);
    let by_name = |n: &str| {
        found
            .iter()
            .find(|f| f.name == n)
            .map(|f| (f.line, f.lines))
    };
    assert_eq!(by_name("three"), Some((3, 3)));
    assert_eq!(by_name("method"), Some((8, 1)));
    assert_eq!(by_name("provided"), Some((13, 4)));
    assert_eq!(by_name("inner"), Some((14, 2)));
    assert_eq!(
        by_name("required"),
        None,
        "a declaration has no body to measure"
    );
    assert_eq!(found.len(), 4);
}

#[test]
fn a_function_one_line_over_the_limit_is_measured_as_over() {
    let body = "    let _ = 0;\n".repeat(MAX_LINES - 1);
    let source = format!("fn long() {{\n{body}}}\n");
    let found = functions(&source);
    assert_eq!(found[0].lines, MAX_LINES + 1);
}
