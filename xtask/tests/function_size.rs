//! No function of the emulator or the PTX interpreter is longer than [`MAX_LINES`]: a reader
//! who opens one of these crates should meet one small handler per job (a PTX instruction
//! family, a memory check, a step of the launch), never a 700-line match where adding an
//! instruction means finding the right arm (issue 37; the models are wasmi's and miri's one
//! handler per op family).
//!
//! The measure is syn's: every `fn` item, method or trait default, nested ones included, from its
//! `fn` keyword to its closing brace (attributes and doc comments are not counted).

use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The most lines a function of `emu` or `ptx` may span.
const MAX_LINES: usize = 150;

/// The crates held to [`MAX_LINES`].
const CHECKED: &[&str] = &["emu", "ptx"];

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

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("the source folder reads") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn no_function_of_the_emulator_or_the_interpreter_is_over_the_limit() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut over = Vec::new();
    let mut seen = 0;
    for krate in CHECKED {
        for path in sources(&workspace.join(krate).join("src")) {
            let text = std::fs::read_to_string(&path).expect("the source reads");
            for f in functions(&text) {
                seen += 1;
                if f.lines > MAX_LINES {
                    let shown = path.strip_prefix(&workspace).unwrap_or(&path);
                    over.push(format!(
                        "{}:{} {} ({} lines)",
                        shown.display(),
                        f.line,
                        f.name,
                        f.lines
                    ));
                }
            }
        }
    }
    // The walk must have found the crates' functions, or the check would pass on nothing.
    assert!(seen > 500, "only {seen} functions found under {CHECKED:?}");
    assert!(
        over.is_empty(),
        "functions over {MAX_LINES} lines (split them into named helpers):\n{}",
        over.join("\n")
    );
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
