//! `cargo xtask new NAME --template T`: a new registered kernel (docs/registry.md), written as
//! one file, `kernels/src/NAME.rs`, and one line in `kernels/src/lib.rs`'s `registry!` block.
//!
//! Each template is a registered kernel of the project (`kernels/src/scaffold_T.rs`), so CI
//! compiles it for the GPU, runs it on the source emulator and the PTX backend, and property-
//! tests it against its reference (`tests/tests/registered.rs`). The new file is that file with
//! the template's name replaced by the new one, and nothing else: what passes there passes
//! as generated.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

#[derive(Args)]
pub struct NewArgs {
    /// The kernel's name: a new snake_case identifier, which becomes its file
    /// (`kernels/src/NAME.rs`), its function and its PTX entry point.
    name: String,
    /// What to start from.
    #[arg(long, value_enum)]
    template: Template,
}

/// The scaffold's starting points, one per level of the memory pyramid a first kernel meets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Template {
    /// `y[i] = 2 x[i] + 1`: one thread per element, HBM in and out.
    Elementwise,
    /// A sum per block, through shared memory and block barriers.
    Reduction,
    /// A transpose through a padded shared-memory tile, on a 2D grid.
    Tiled,
    /// A sum per warp with shuffles: registers exchanged between lanes.
    Warp,
}

impl Template {
    /// The registered kernel the template is: its name, which the new name replaces.
    pub fn kernel(self) -> &'static str {
        match self {
            Template::Elementwise => "scaffold_elementwise",
            Template::Reduction => "scaffold_reduction",
            Template::Tiled => "scaffold_tiled",
            Template::Warp => "scaffold_warp",
        }
    }

    fn source(self) -> &'static str {
        match self {
            Template::Elementwise => include_str!("../../kernels/src/scaffold_elementwise.rs"),
            Template::Reduction => include_str!("../../kernels/src/scaffold_reduction.rs"),
            Template::Tiled => include_str!("../../kernels/src/scaffold_tiled.rs"),
            Template::Warp => include_str!("../../kernels/src/scaffold_warp.rs"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Template::Elementwise => "elementwise",
            Template::Reduction => "reduction",
            Template::Tiled => "tiled",
            Template::Warp => "warp",
        }
    }
}

/// The template's text for a kernel named `name`.
pub fn render(template: Template, name: &str) -> String {
    let text = template.source().replace(template.kernel(), name);
    // The template's own first paragraph says where it comes from; the new file says the same
    // of itself.
    text.replacen(
        &header(template, "NAME", "this file is"),
        &header(template, name, "from"),
        1,
    )
}

/// The start of a template's or a generated file's second paragraph.
fn header(template: Template, name: &str, what: &str) -> String {
    format!(
        "Written by `cargo xtask new {name} --template {}` ({what} the template",
        template.name()
    )
}

pub fn run(args: &NewArgs) -> Result<(), String> {
    // The checkout this runs in, not the one the binary was built in.
    let root = crate::checkout::checkout()?;
    let taken = taken_names();
    let file = create(&root.join("kernels/src"), &args.name, args.template, &taken)?;
    println!(
        "wrote {} from the {} template and registered it in kernels/src/lib.rs (`{},` in `registry!`).",
        file.strip_prefix(&root).unwrap_or(&file).display(),
        args.template.name(),
        args.name
    );
    let name = &args.name;
    println!(
        "Next: edit kernels/src/{name}.rs: the kernel's body, then `reference` to match (and `cost` if the bytes or FLOPs change); docs/registry.md says what each field is for. Then check it:"
    );
    let steps = [
        (
            "cargo test --workspace --release --test registered".to_string(),
            "against its reference, on the emulator",
        ),
        (
            "KERNELS_BACKEND=ptx cargo test --workspace --release --test registered".to_string(),
            "the same on its PTX",
        ),
        (
            format!("cargo xtask run --only {name}"),
            "its row, read against the roofline",
        ),
        (
            format!("cargo xtask run --only {name} --watch"),
            "the same on every save, in seconds (only its PTX is rebuilt)",
        ),
        (
            format!("cargo xtask inspect {name}"),
            "coalescing and bank conflicts per line",
        ),
    ];
    let width = steps.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
    for (command, what) in steps {
        println!("  {command:<width$}  # {what}");
    }
    Ok(())
}

/// Names a new kernel may not take: every PTX entry point and every registered kernel.
fn taken_names() -> Vec<String> {
    let mut names: Vec<String> = host::embedded::Arch::ALL
        .iter()
        .flat_map(|a| host::embedded::entry_points(a.ptx()))
        .map(str::to_string)
        .collect();
    names.extend(host::registry::all().iter().map(|s| s.name.to_string()));
    names.sort();
    names.dedup();
    names
}

/// Writes `src/NAME.rs` from `template` and adds `NAME,` to `src/lib.rs`'s `registry!` block,
/// after refusing a name that is not a fresh identifier (an existing file or module, a kernel
/// in `taken`, a keyword). Returns the new file.
fn create(src: &Path, name: &str, template: Template, taken: &[String]) -> Result<PathBuf, String> {
    check_name(name)?;
    let lib_path = src.join("lib.rs");
    let lib = std::fs::read_to_string(&lib_path)
        .map_err(|e| format!("cannot read {}: {e}", lib_path.display()))?;
    let file = src.join(format!("{name}.rs"));
    if file.exists() || src.join(name).exists() {
        return Err(format!(
            "`{name}` exists: {} is there; pick another name (or edit that file)",
            file.display()
        ));
    }
    if taken.iter().any(|t| t == name) {
        return Err(format!(
            "`{name}` exists: a kernel of that name is already in the PTX; pick another name"
        ));
    }
    // `pub mod NAME;`, or a line of the `registry!` block (`NAME,`, `NAME::{...},`).
    let declares = |line: &str| {
        let line = line.trim_start();
        line.starts_with(&format!("pub mod {name};"))
            || line.starts_with(&format!("{name}::"))
            || line == format!("{name},")
    };
    if lib.lines().any(declares) {
        return Err(format!(
            "`{name}` exists: kernels/src/lib.rs declares a module of that name"
        ));
    }
    check_template_clash(name, template)?;
    let lib = register(&lib, name)?;
    std::fs::write(&file, render(template, name))
        .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    std::fs::write(&lib_path, lib)
        .map_err(|e| format!("cannot write {}: {e}", lib_path.display()))?;
    Ok(file)
}

/// `lib` with `    NAME,` added as the last line of its `registry! { ... }` block.
fn register(lib: &str, name: &str) -> Result<String, String> {
    let start = lib
        .find("\nregistry! {\n")
        .ok_or("kernels/src/lib.rs has no `registry! {` block to add the kernel to")?;
    let end = start
        + lib[start..]
            .find("\n}\n")
            .ok_or("kernels/src/lib.rs: the `registry! {` block does not end with `}`")?;
    Ok(format!("{}\n    {name},{}", &lib[..end], &lib[end..]))
}

/// A kernel's name: a snake_case identifier (lower-case ASCII letters, digits and `_`, starting
/// with a letter) that is not a Rust keyword (strict or reserved, edition 2024) nor the name of
/// a crate every kernel file can use.
fn check_name(name: &str) -> Result<(), String> {
    // Strict and reserved keywords of edition 2024 (the lower-case ones), and the weak ones a
    // module may not safely take.
    const KEYWORDS: [&str; 54] = [
        "as",
        "async",
        "await",
        "break",
        "const",
        "continue",
        "crate",
        "dyn",
        "else",
        "enum",
        "extern",
        "false",
        "fn",
        "for",
        "if",
        "impl",
        "in",
        "let",
        "loop",
        "match",
        "mod",
        "move",
        "mut",
        "pub",
        "ref",
        "return",
        "self",
        "static",
        "struct",
        "super",
        "trait",
        "true",
        "type",
        "unsafe",
        "use",
        "where",
        "while",
        "abstract",
        "become",
        "box",
        "do",
        "final",
        "gen",
        "macro",
        "override",
        "priv",
        "try",
        "typeof",
        "unsized",
        "virtual",
        "yield",
        "macro_rules",
        "union",
        "safe",
    ];
    let ok = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !ok {
        return Err(format!(
            "`{name}`: a kernel's name is a new snake_case identifier (a-z, 0-9, _, starting with a letter), e.g. `prefix_scan_f32`"
        ));
    }
    if KEYWORDS.contains(&name) {
        return Err(format!(
            "`{name}` is a Rust keyword (strict or reserved in edition 2024): the name becomes a module and a function, which a keyword cannot name; pick another, e.g. `{name}_f32`"
        ));
    }
    if ["std", "core", "alloc", "kernels", "test", "proc_macro"].contains(&name) {
        return Err(format!(
            "`{name}` is the name of a crate the kernels use: a module of that name would shadow it and break the kernel crate's build; pick another, e.g. `{name}_f32`"
        ));
    }
    if ["cuda", "registry"].contains(&name) {
        return Err(format!(
            "`{name}` is a module of the kernel crate's own (kernels/src/{name}); pick another name"
        ));
    }
    Ok(())
}

/// Refuses a name the template's code already uses for something else (a function it calls, a
/// constant, a local): the generated file would not compile.
fn check_template_clash(name: &str, template: Template) -> Result<(), String> {
    let code = template
        .source()
        .lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    // Names, not the text of string literals (every other piece between quotes).
    let clash = code
        .split('"')
        .step_by(2)
        .flat_map(|c| c.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .any(|word| word == name);
    if clash {
        return Err(format!(
            "`{name}`: the {} template's code already uses that name (kernels/src/{}.rs), so the new file would not compile; pick another",
            template.name(),
            template.kernel()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generated file is the template with its name replaced, and only that: so the
    /// template, which CI builds and tests as a registered kernel, is what a learner gets.
    #[test]
    fn a_rendered_template_is_the_registered_kernel_renamed() {
        for &t in Template::value_variants() {
            let text = render(t, "my_kernel");
            assert!(!text.contains("scaffold_"), "{t:?} keeps a template name");
            assert!(text.contains("pub unsafe fn my_kernel("), "{t:?}");
            assert!(text.contains("name: \"my_kernel\""), "{t:?}");
            assert!(text.contains(&header(t, "my_kernel", "from")), "{t:?}");
            let back = text
                .replace(
                    &header(t, "my_kernel", "from"),
                    &header(t, "NAME", "this file is"),
                )
                .replace("my_kernel", t.kernel());
            assert_eq!(back, t.source(), "{t:?}: more than the name changed");
            // Each template is registered, so the tests and CI run it as generated.
            assert!(
                host::registry::find(t.kernel()).is_some(),
                "{t:?} is not registered"
            );
        }
    }

    /// In a copy of the kernel sources: the file and the registration line are written, and an
    /// existing name or a bad one is refused, leaving both files as they were.
    #[test]
    fn new_writes_one_file_and_one_line_and_refuses_a_taken_name() {
        let dir = std::env::temp_dir().join(format!("xtask-new-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let lib = include_str!("../../kernels/src/lib.rs");
        std::fs::write(dir.join("lib.rs"), lib).unwrap();
        let taken = taken_names();
        let file = create(&dir, "prefix_scan_f32", Template::Warp, &taken).unwrap();
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            render(Template::Warp, "prefix_scan_f32")
        );
        let after = std::fs::read_to_string(dir.join("lib.rs")).unwrap();
        let added: Vec<&str> = after
            .lines()
            .filter(|l| !lib.lines().any(|o| o == *l))
            .collect();
        assert_eq!(added, ["    prefix_scan_f32,"]);
        assert!(
            after.contains("    scaffold_warp,\n    prefix_scan_f32,\n}\n"),
            "{after}"
        );

        let refuse = |name: &str| create(&dir, name, Template::Tiled, &taken).unwrap_err();
        for (name, says) in [
            ("prefix_scan_f32", "exists"),
            ("transpose_shared", "already in the PTX"),
            ("softmax", "declares a module"),
            ("transpose", "declares a module"),
            ("Scan", "snake_case"),
            ("fn", "keyword"),
            ("try", "keyword"),
            ("std", "crate"),
            ("thread_idx_x", "already uses"),
            ("9lives", "snake_case"),
        ] {
            let err = refuse(name);
            assert!(err.contains(says), "{name}: {err}");
        }
        assert_eq!(std::fs::read_to_string(dir.join("lib.rs")).unwrap(), after);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
