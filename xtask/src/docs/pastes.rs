//! The command outputs pasted into the chapters and the README are still what the commands
//! print: every fenced block that starts with `$ cargo xtask ...` is run again and compared.
//!
//! A block may be an excerpt: its lines must appear in the command's output in order and next to
//! each other (trailing spaces aside), a line `...` marks where lines were left out (an unmarked
//! gap fails), and `...` inside a line stands for any text (a machine-dependent part, such as why
//! there is no GPU). The `console` blocks of
//! docs/roofline.md and docs/roofline-examples.md are whole outputs and are checked exactly, by
//! `roofline::tests::the_outputs_pasted_in_the_docs_are_current`.
//!
//! Three commands cannot run in a unit test: `ptxas` (downloads NVIDIA's assembler), `run`
//! (every kernel on the emulator, a minute or more) and `check` (its pastes are of `.cu` files,
//! which need NVRTC, downloaded too). CI runs them anyway and keeps what they printed;
//! `cargo xtask doc-pastes --output run=FILE --output ptxas=FILE --output 'check ...=FILE'` then
//! checks their pastes against those outputs, so that every paste is checked by something that
//! fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;

mod prose;
mod registers;

/// Subcommands whose pasted output no unit test can regenerate (see the module's comment):
/// `cargo xtask doc-pastes` checks them against outputs CI saved.
pub const NOT_RUN: [&str; 4] = ["ptxas", "run", "check", "validate"];

#[derive(Args)]
pub struct DocPastesArgs {
    /// `ARGS=FILE`: what `cargo xtask ARGS` printed (stdout and stderr), saved to FILE; every
    /// pasted block of a command in `ptxas`, `run` or `check` needs one (`check`'s under its
    /// whole arguments).
    #[arg(long = "output", value_name = "ARGS=FILE", required = true)]
    outputs: Vec<String>,
    /// `COMMITTED=DRAWN`: a picture in docs/img and the one the run just drew; their texts
    /// (which kernels, shapes and resources they show) must be the same set, and every marker
    /// and label at the same place.
    #[arg(long = "figure", value_name = "COMMITTED=DRAWN")]
    figures: Vec<String>,
}

/// The texts of an SVG's `<text>` elements (plotters writes each one's content on its own line).
fn svg_texts(svg: &str) -> std::collections::BTreeSet<String> {
    let mut texts = std::collections::BTreeSet::new();
    let mut lines = svg.lines();
    while let Some(line) = lines.next() {
        if line.starts_with("<text")
            && let Some(content) = lines.next()
        {
            texts.insert(content.trim().to_string());
        }
    }
    texts
}

/// Where an SVG puts its markers and labels, in drawing order: each `<circle>`'s centre and each
/// `<text>`'s anchor with its content (plotters writes the content on the line after the tag).
fn svg_positions(svg: &str) -> Vec<(String, f64, f64)> {
    let attr = |line: &str, name: &str| -> f64 {
        line.split(&format!(" {name}=\"")[..])
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    let mut out = Vec::new();
    let mut lines = svg.lines();
    while let Some(line) = lines.next() {
        if line.starts_with("<circle") {
            out.push(("marker".to_string(), attr(line, "cx"), attr(line, "cy")));
        } else if line.starts_with("<text")
            && let Some(content) = lines.next()
        {
            out.push((content.trim().to_string(), attr(line, "x"), attr(line, "y")));
        }
    }
    out
}

/// A committed picture shows what the drawn one shows: the same labels, and every marker and
/// label where the drawn one has it (within a pixel: the chart is drawn from the model's
/// predictions, which are deterministic, so a point that moved is a prediction that changed).
fn check_figure(spec: &str) -> Result<(), String> {
    let (committed, drawn) = spec
        .split_once('=')
        .ok_or_else(|| format!("--figure {spec}: expected COMMITTED=DRAWN"))?;
    let read = |f: &str| {
        std::fs::read_to_string(f).map_err(|e| format!("--figure {spec}: cannot read {f}: {e}"))
    };
    let (old_svg, new_svg) = (read(committed)?, read(drawn)?);
    let (old, new) = (svg_texts(&old_svg), svg_texts(&new_svg));
    if old != new {
        let missing: Vec<_> = new.difference(&old).cloned().collect();
        let extra: Vec<_> = old.difference(&new).cloned().collect();
        return Err(format!(
            "{committed} is stale: it lacks {missing:?} and shows {extra:?}, which {drawn} does not; copy {drawn} over it"
        ));
    }
    let (old, new) = (svg_positions(&old_svg), svg_positions(&new_svg));
    let moved = old.iter().zip(&new).find(|((a, ax, ay), (b, bx, by))| {
        a != b || !((ax - bx).abs() <= 1.0 && (ay - by).abs() <= 1.0)
    });
    if old.len() != new.len() || moved.is_some() {
        let what = match moved {
            Some(((a, ax, ay), (_, bx, by))) => {
                format!("{a:?} is at ({ax}, {ay}) where {drawn} draws it at ({bx}, {by})")
            }
            None => format!(
                "it has {} markers and labels, {drawn} {}",
                old.len(),
                new.len()
            ),
        };
        return Err(format!(
            "{committed} is stale: {what}; copy {drawn} over it"
        ));
    }
    Ok(())
}

/// `cargo xtask doc-pastes`: the pastes of `run` and `ptxas` against the saved outputs.
pub fn run(args: &DocPastesArgs) -> Result<(), String> {
    let mut saved = BTreeMap::new();
    for o in &args.outputs {
        let (cmd, file) = o
            .split_once('=')
            .ok_or_else(|| format!("--output {o}: expected ARGS=FILE"))?;
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("--output {o}: cannot read {file}: {e}"))?;
        saved.insert(cmd.trim().to_string(), text);
    }
    let mut checked = 0;
    let mut missing = Vec::new();
    // The docs of the checkout this runs in, not of the one the binary was built in.
    let root = crate::checkout::checkout()?;
    for_each_paste(&root, |name, args, pasted| {
        if !NOT_RUN.iter().any(|c| is_command(args, c)) {
            return Ok(());
        }
        let Some(printed) = saved_output(&saved, args) else {
            missing.push(format!("{name}: cargo xtask {args}"));
            return Ok(());
        };
        checked += 1;
        compare(name, args, pasted, printed)
    })?;
    // The numbers the chapters quote from the run in their sentences.
    let mut sentences = 0;
    if let Some(printed) = saved.get("run") {
        let all = host::cases::all();
        let kernels: Vec<&str> = all.iter().map(|c| c.kernel).collect();
        for file in doc_files(&root)? {
            let text =
                std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            let name = file.strip_prefix(&root).unwrap().display().to_string();
            sentences += prose::check(&name, &text, printed, &kernels)?;
        }
    }
    // The register counts the chapters' tables copy from ptxas.
    let mut register_rows = 0;
    if let Some(printed) = saved.get("ptxas") {
        for file in doc_files(&root)? {
            let text =
                std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            let name = file.strip_prefix(&root).unwrap().display().to_string();
            register_rows += registers::check(&name, &text, printed)?;
        }
    }
    for f in &args.figures {
        check_figure(f)?;
    }
    if !missing.is_empty() {
        return Err(format!(
            "no saved output (--output ARGS=FILE) for the pastes of:\n  {}",
            missing.join("\n  ")
        ));
    }
    println!(
        "{checked} pasted outputs of `cargo xtask {}` match what the commands printed; {sentences} sentences and table rows quote the run's predictions as it printed them; {register_rows} table rows give the registers ptxas printed",
        NOT_RUN.join("`, `")
    );
    Ok(())
}

/// The saved output a paste of `cargo xtask <args>` is checked against: the one saved for the
/// same arguments, or for a `run --only <rows>` the whole run's, which prints every line the
/// filtered run prints outside its kernel table (whose column widths follow the rows shown).
fn saved_output<'a>(saved: &'a BTreeMap<String, String>, args: &str) -> Option<&'a String> {
    let args = args.trim();
    saved.get(args).or_else(|| {
        let words: Vec<&str> = args.split_whitespace().collect();
        match words[..] {
            ["run", "--only", _] => saved.get("run"),
            _ => None,
        }
    })
}

/// Whether `args` runs subcommand `cmd`.
fn is_command(args: &str, cmd: &str) -> bool {
    args.split_whitespace().next() == Some(cmd)
}

/// `Err` naming the file and line when the first pasted line missing from `printed`.
fn compare(name: &str, args: &str, pasted: &[&str], printed: &str) -> Result<(), String> {
    match first_missing(pasted, printed) {
        None => Ok(()),
        Some(missing) => Err(format!(
            "{name}: `cargo xtask {args}` no longer prints\n  {missing}\nit prints:\n{printed}"
        )),
    }
}

/// Calls `f(file:line, args, pasted lines)` for every `$ cargo xtask` block of docs/*.md and the
/// README, in file order; stops at the first `Err`.
fn for_each_paste(
    repo: &Path,
    mut f: impl FnMut(&str, &str, &[&str]) -> Result<(), String>,
) -> Result<(), String> {
    for file in &doc_files(repo)? {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        for (line, args, pasted) in blocks(&text) {
            let name = format!("{}:{line}", file.strip_prefix(repo).unwrap().display());
            f(&name, &args, &pasted)?;
        }
    }
    Ok(())
}

/// The chapters (docs/*.md) and the README, in name order.
fn doc_files(repo: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo.join("docs"))
        .map_err(|e| format!("{}: {e}", repo.join("docs").display()))?
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.push(repo.join("README.md"));
    files.sort();
    Ok(files)
}

/// What `cargo xtask <args>` prints, or `None` for a command in [`NOT_RUN`].
#[cfg(test)]
fn output_of(args: &str) -> Option<String> {
    use clap::Parser;

    use crate::{Cli, Command};
    let words = shlex(args);
    let cli = Cli::try_parse_from(std::iter::once("cargo xtask".to_string()).chain(words))
        .unwrap_or_else(|e| panic!("`cargo xtask {args}` does not parse: {e}"));
    Some(match &cli.command {
        Command::Roofline(a) => crate::roofline::render(a).unwrap(),
        Command::TraceSoftmax(a) => crate::trace_softmax::render(a).unwrap(),
        Command::Inspect(a) => {
            let all = host::cases::all();
            let spec = all.iter().find(|c| c.kernel == a.kernel).unwrap();
            crate::sites::profile_text(
                &crate::inspect::profile_kernel(&host::Runtime::emulator(), spec)
                    .unwrap()
                    .profile,
            )
        }
        Command::Hierarchy(_) => {
            crate::hierarchy::no_gpu_text(perf::specs::GpuSpec::find("h100").unwrap())
        }
        Command::Exercise(a) => crate::exercise::render(a).unwrap().0,
        Command::Predict(a) => crate::predict::render(a).unwrap(),
        Command::Ptxas(_) | Command::Run(_) | Command::Check(_) | Command::Validate(_) => {
            return None;
        }
        _ => panic!("`cargo xtask {args}`: add its output to xtask/src/docs/pastes.rs"),
    })
}

/// Splits on spaces (the pasted commands quote nothing).
#[cfg(test)]
fn shlex(args: &str) -> Vec<String> {
    args.split_whitespace().map(str::to_string).collect()
}

/// Whether pasted line `want` matches printed line `got`: equal, or, where `want` holds `...`
/// (once or more), equal around and between them, in order.
fn line_matches(want: &str, got: &str) -> bool {
    let (want, got) = (want.trim_end(), got.trim_end());
    if want.trim().is_empty() || want.trim() == "..." || !want.contains("...") {
        return want == got;
    }
    let parts: Vec<&str> = want.split("...").collect();
    let (head, tail) = (parts[0], parts[parts.len() - 1]);
    if !got.starts_with(head) || !got.ends_with(tail) || got.len() < head.len() + tail.len() {
        return false;
    }
    let mut rest = &got[head.len()..got.len() - tail.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(i) => rest = &rest[i + middle.len()..],
            None => return false,
        }
    }
    true
}

/// The first pasted line (if any) that is not where the excerpt puts it in `printed`: an excerpt
/// may start and end anywhere, but inside it consecutive lines are consecutive in the output,
/// and lines left out are marked by a line `...` (an unmarked gap fails, so a reader never
/// takes two distant lines for neighbours).
fn first_missing<'a>(pasted: &[&'a str], printed: &str) -> Option<&'a str> {
    let printed: Vec<&str> = printed.lines().collect();
    // The furthest pasted line any placement reached: the one to report when none fits.
    let mut search = Fit {
        pasted,
        printed: &printed,
        furthest: 0,
        failed: std::collections::HashSet::new(),
    };
    let fits = search.fit(0, 0, true);
    (!fits).then(|| pasted[search.furthest])
}

/// The search of [`first_missing`]: every placement of an excerpt's lines, each failure
/// remembered so that no placement is tried twice.
struct Fit<'p, 'a> {
    pasted: &'p [&'a str],
    printed: &'p [&'p str],
    furthest: usize,
    failed: std::collections::HashSet<(usize, usize, bool)>,
}

impl Fit<'_, '_> {
    /// Whether `pasted[p..]` matches from `printed[g]` on: the next pasted line anywhere after
    /// a gap (`gap`), else exactly at `g`.
    fn fit(&mut self, p: usize, g: usize, gap: bool) -> bool {
        let Some(want) = self.pasted.get(p) else {
            return true;
        };
        if self.failed.contains(&(p, g, gap)) {
            return false;
        }
        self.furthest = self.furthest.max(p);
        let fits = if want.trim() == "..." {
            self.fit(p + 1, g, true)
        } else {
            let end = if gap {
                self.printed.len()
            } else {
                (g + 1).min(self.printed.len())
            };
            (g..end).any(|i| line_matches(want, self.printed[i]) && self.fit(p + 1, i + 1, false))
        };
        if !fits {
            self.failed.insert((p, g, gap));
        }
        fits
    }
}

/// Every `$ cargo xtask` block of a markdown file: (line number, the arguments, the pasted lines).
fn blocks(text: &str) -> Vec<(usize, String, Vec<&str>)> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((_, line)) = lines.next() {
        if !line.starts_with("```") {
            continue;
        }
        // Every fence is walked to its end, whatever its language, so that the closing fence
        // of a `sh` or `text` block is never taken for an opening one.
        let Some((n, first)) = lines.next() else {
            break;
        };
        if first == "```" {
            continue; // an empty block
        }
        let body: Vec<&str> = lines
            .by_ref()
            .map(|(_, l)| l)
            .take_while(|l| *l != "```")
            .collect();
        if line != "```" && line != "```console" {
            continue;
        }
        if let Some(args) = first.strip_prefix("$ cargo xtask ") {
            out.push((n + 1, args.to_string(), body));
        }
    }
    out
}

/// The checkout the tests were built in (the command finds its checkout at run time).
#[cfg(test)]
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn every_pasted_output_is_what_the_command_prints() {
    let (mut checked, mut left) = (0, 0);
    for_each_paste(&repo(), |name, args, pasted| match output_of(args) {
        None => {
            assert!(NOT_RUN.iter().any(|c| is_command(args, c)), "{name}");
            left += 1;
            Ok(())
        }
        Some(printed) => {
            checked += 1;
            compare(name, args, pasted, &printed)
        }
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(checked >= 30, "only {checked} pasted outputs found");
    // The README's `run` excerpt and docs/pyramid.md's `ptxas` one, for `doc-pastes`.
    assert!(left >= 2, "only {left} pastes of `run` and `ptxas` found");
}

#[test]
fn doc_pastes_passes_on_the_pasted_text_and_fails_on_a_stale_or_unsaved_output() {
    let dir = std::env::temp_dir().join(format!("doc-pastes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // An output that holds exactly what was pasted (a line with `...` matches itself): one for
    // `run` and one for `ptxas` (each paste's lines appended), one per `check` paste under its
    // whole arguments (the chapter checks two entries of one file).
    let mut pasted: BTreeMap<String, String> = BTreeMap::new();
    for_each_paste(&repo(), |_, args, lines| {
        if let Some(c) = NOT_RUN.iter().find(|c| is_command(args, c)) {
            let key = if *c == "check" { args.trim() } else { c };
            pasted
                .entry(key.to_string())
                .or_default()
                .push_str(&(lines.join("\n") + "\n"));
        }
        Ok(())
    })
    .unwrap();
    let saved: Vec<(String, String)> = pasted
        .iter()
        .enumerate()
        .map(|(k, (key, text))| {
            let p = dir.join(format!("saved-{k}"));
            std::fs::write(&p, text).unwrap();
            (key.clone(), p.display().to_string())
        })
        .collect();
    assert!(
        saved
            .iter()
            .filter(|(k, _)| k.starts_with("check "))
            .count()
            >= 2
    );
    let stale = dir.join("stale");
    std::fs::write(&stale, "nothing the docs pasted\n").unwrap();
    let check = |replace: &str, with: Option<&Path>| {
        let outputs = saved.iter().filter_map(|(key, path)| match with {
            _ if key != replace => Some(format!("{key}={path}")),
            Some(other) => Some(format!("{key}={}", other.display())),
            None => None,
        });
        run(&DocPastesArgs {
            outputs: outputs.collect(),
            figures: Vec::new(),
        })
    };
    check("", None).unwrap();
    let err = check("run", Some(&stale)).unwrap_err();
    assert!(err.contains("`cargo xtask run` no longer prints"), "{err}");
    let err = check("ptxas", None).unwrap_err();
    assert!(
        err.contains("no saved output") && err.contains("ptxas"),
        "{err}"
    );
    // A check that no longer reports the race, or was not saved, fails the same way.
    let race = saved
        .iter()
        .find(|(k, _)| k.contains("reverse_unsynced"))
        .map(|(k, _)| k.clone())
        .unwrap();
    let err = check(&race, Some(&stale)).unwrap_err();
    assert!(err.contains("no longer prints"), "{err}");
    let err = check(&race, None).unwrap_err();
    assert!(err.contains("no saved output"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn blocks_of_other_languages_do_not_shift_the_fences() {
    let md = "```sh\ncargo xtask run\n```\n\n```console\n$ cargo xtask run\na\n```\n```\n```\n```text\n$ cargo xtask ptxas\n```\n";
    let found = blocks(md);
    assert_eq!(found, vec![(6, "run".to_string(), vec!["a"])]);
}

#[test]
fn excerpts_match_in_order_with_gaps_and_wildcards() {
    let printed = "a 1\nb 2\nwhy: no driver here\nc 3\n";
    assert_eq!(first_missing(&["a 1", "...", "c 3"], printed), None);
    assert_eq!(first_missing(&["why: ... here", "c 3  "], printed), None);
    assert_eq!(first_missing(&["c 3", "a 1"], printed), Some("a 1"));
    assert_eq!(first_missing(&["b 3"], printed), Some("b 3"));
    // A gap left unmarked: `b 2` and the `why` line are between them.
    assert_eq!(first_missing(&["a 1", "c 3"], printed), Some("c 3"));
    assert_eq!(first_missing(&["b 2", "why: ...", "c 3"], printed), None);
    assert!(!line_matches(
        "why: ...driver here and more",
        "why: no driver here"
    ));
    assert!(line_matches(
        "PTX check: ... kernels, ... barriers",
        "PTX check: 56 kernels, 75 barriers"
    ));
    assert!(!line_matches(
        "PTX check: ... kernels, ... barriers",
        "PTX check: 56 entries, 75 barriers"
    ));
}

#[cfg(test)]
mod figure_tests {
    use super::*;

    /// A committed picture that lacks a kernel the run draws (or shows one it no longer draws) is
    /// stale, and so is one whose marker or label sits elsewhere than the run draws it.
    #[test]
    fn a_picture_with_other_labels_or_positions_than_the_run_draws_is_stale() {
        let svg = |labels: &[&str], x: u32, marker: u32| {
            let texts: String = labels
                .iter()
                .map(|l| format!("<text x=\"{x}\" y=\"1\">\n{l}\n</text>\n"))
                .collect();
            format!("<circle cx=\"{marker}\" cy=\"40\" r=\"5\"/>\n{texts}")
        };
        let dir = std::env::temp_dir().join(format!("figure-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, text: String| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path.display().to_string()
        };
        let drawn = write("drawn.svg", svg(&["copy_words", "gemm_tiled_f32"], 10, 100));
        let same = write("same.svg", svg(&["copy_words", "gemm_tiled_f32"], 10, 100));
        let old = write("old.svg", svg(&["copy_words"], 10, 100));
        let label_moved = write("label.svg", svg(&["copy_words", "gemm_tiled_f32"], 99, 100));
        let point_moved = write("point.svg", svg(&["copy_words", "gemm_tiled_f32"], 10, 130));
        assert!(check_figure(&format!("{same}={drawn}")).is_ok());
        let why = check_figure(&format!("{old}={drawn}")).unwrap_err();
        assert!(
            why.contains("stale") && why.contains("gemm_tiled_f32"),
            "{why}"
        );
        let why = check_figure(&format!("{label_moved}={drawn}")).unwrap_err();
        assert!(why.contains("\"copy_words\" is at (99, 1)"), "{why}");
        let why = check_figure(&format!("{point_moved}={drawn}")).unwrap_err();
        assert!(why.contains("\"marker\" is at (130, 40)"), "{why}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
