//! The command outputs pasted into the chapters and the README are still what the commands
//! print: every fenced block that starts with `$ cargo xtask ...` is run again and compared.
//!
//! A block may be an excerpt: its lines must appear in the command's output in order (trailing
//! spaces aside), a line `...` stands for any number of lines left out, and `...` inside a line
//! for any text (a machine-dependent part, such as why there is no GPU). The `console` blocks of
//! docs/roofline.md and docs/roofline-examples.md are whole outputs and are checked exactly, by
//! `roofline::tests::the_outputs_pasted_in_the_docs_are_current`.
//!
//! Commands that need a GPU, NVIDIA's ptxas or the whole emulated run are not run here; the
//! test lists them (`NOT_RUN`) so that a new kind of paste cannot slip through unchecked.

use std::path::PathBuf;

use clap::Parser;

use crate::{Cli, Command};

/// Subcommands whose pasted output no unit test can regenerate: `ptxas` (downloads NVIDIA's
/// assembler; CI runs the command itself) and `run` (every kernel on the emulator, minutes in a
/// debug build; CI runs it too).
const NOT_RUN: [&str; 2] = ["ptxas", "run"];

/// What `cargo xtask <args>` prints, or `None` for a command in [`NOT_RUN`].
fn output_of(args: &str) -> Option<String> {
    let words = shlex(args);
    let cli = Cli::try_parse_from(std::iter::once("cargo xtask".to_string()).chain(words))
        .unwrap_or_else(|e| panic!("`cargo xtask {args}` does not parse: {e}"));
    Some(match &cli.command {
        Command::Roofline(a) => crate::roofline::render(a).unwrap(),
        Command::TraceSoftmax(a) => crate::trace_softmax::render(a).unwrap(),
        Command::Inspect(a) => {
            let all = crate::cases::all();
            let spec = all.iter().find(|c| c.kernel == a.kernel).unwrap();
            crate::inspect::profile_text(
                &crate::inspect::profile_kernel(&host::Runtime::emulator(), spec)
                    .unwrap()
                    .profile,
            )
        }
        Command::Hierarchy(_) => {
            crate::hierarchy::no_gpu_text(host::specs::GpuSpec::find("h100").unwrap())
        }
        Command::Ptxas(_) | Command::Run(_) => return None,
        _ => panic!("`cargo xtask {args}`: add its output to doc_outputs.rs"),
    })
}

/// Splits on spaces (the pasted commands quote nothing).
fn shlex(args: &str) -> Vec<String> {
    args.split_whitespace().map(str::to_string).collect()
}

/// Whether pasted line `want` matches printed line `got`: equal, or, where `want` holds `...`,
/// equal around it.
fn line_matches(want: &str, got: &str) -> bool {
    let (want, got) = (want.trim_end(), got.trim_end());
    match want.split_once("...") {
        Some((head, tail)) if !want.trim().is_empty() && want.trim() != "..." => {
            got.starts_with(head) && got.ends_with(tail) && got.len() >= head.len() + tail.len()
        }
        _ => want == got,
    }
}

/// The first pasted line (if any) that does not appear, in order, in `printed`.
fn first_missing<'a>(pasted: &[&'a str], printed: &str) -> Option<&'a str> {
    let mut lines = printed.lines();
    for want in pasted {
        if want.trim() == "..." {
            continue;
        }
        if !lines.any(|got| line_matches(want, got)) {
            return Some(want);
        }
    }
    None
}

/// Every `$ cargo xtask` block of a markdown file: (line number, the arguments, the pasted lines).
fn blocks(text: &str) -> Vec<(usize, String, Vec<&str>)> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((_, line)) = lines.next() {
        if !line.starts_with("```") || line.len() > 3 && line != "```console" {
            continue;
        }
        let Some((n, first)) = lines.next() else {
            break;
        };
        let body: Vec<&str> = lines
            .by_ref()
            .map(|(_, l)| l)
            .take_while(|l| *l != "```")
            .collect();
        if let Some(args) = first.strip_prefix("$ cargo xtask ") {
            out.push((n + 1, args.to_string(), body));
        }
    }
    out
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn every_pasted_output_is_what_the_command_prints() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.push(repo().join("README.md"));
    files.sort();
    let (mut checked, mut skipped) = (0, Vec::new());
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (line, args, pasted) in blocks(&text) {
            let name = format!("{}:{line}", file.strip_prefix(repo()).unwrap().display());
            match output_of(&args) {
                None => skipped.push(format!("{name}: cargo xtask {args}")),
                Some(printed) => {
                    if let Some(missing) = first_missing(&pasted, &printed) {
                        panic!(
                            "{name}: `cargo xtask {args}` no longer prints\n  {missing}\nit prints:\n{printed}"
                        );
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 30, "only {checked} pasted outputs found");
    for s in &skipped {
        assert!(
            NOT_RUN
                .iter()
                .any(|c| s.contains(&format!("cargo xtask {c}"))),
            "{s}"
        );
    }
}

#[test]
fn excerpts_match_in_order_with_gaps_and_wildcards() {
    let printed = "a 1\nb 2\nwhy: no driver here\nc 3\n";
    assert_eq!(first_missing(&["a 1", "...", "c 3"], printed), None);
    assert_eq!(first_missing(&["why: ... here", "c 3  "], printed), None);
    assert_eq!(first_missing(&["c 3", "a 1"], printed), Some("a 1"));
    assert_eq!(first_missing(&["b 3"], printed), Some("b 3"));
    assert!(!line_matches(
        "why: ...driver here and more",
        "why: no driver here"
    ));
}
