//! Lints of the chapters' text (tests only): every relative link and anchor resolves, no link
//! points at a line number, no table repeats its header row, the chapters (not `docs/design/`)
//! hold no dated history, and every excerpt of a kernel's code is still in its source file.
//!
//! An excerpt is a fenced `rust` (or `cpp`) block right after a comment `<!-- excerpt: PATH -->` (PATH from
//! the repository's root): each of its lines, trailing spaces aside, is a line of PATH, in the
//! file's order, and a line `// ...` (any indentation) marks lines left out; where there is no
//! marker the lines must be neighbours in the file too.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The README, docs/*.md and docs/*/*.md, with their paths from the repository's root.
fn markdown_files() -> Vec<(String, String)> {
    let root = repo();
    let mut paths = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                paths.push(path);
            }
        }
    }
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let name = p.strip_prefix(&root).unwrap().display().to_string();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

/// The lines of `text` outside fenced code blocks, with their numbers (from 1).
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// The targets of the inline links `[text](target)` of a line (not those inside backticks).
fn link_targets(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut in_code = false;
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'`' => in_code = !in_code,
            b']' if !in_code && bytes.get(i + 1) == Some(&b'(') => {
                if let Some(end) = line[i + 2..].find(')') {
                    out.push(&line[i + 2..i + 2 + end]);
                    i += 2 + end;
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a markdown file's headings (a repeated heading's second anchor gets `-1`).
fn anchors(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashMap::new();
    for (_, line) in prose_lines(text) {
        if let Some(h) = line.strip_prefix('#') {
            let base = slug(h.trim_start_matches('#'));
            let n = seen.entry(base.clone()).or_insert(0);
            out.push(if *n == 0 { base } else { format!("{base}-{n}") });
            *n += 1;
        }
    }
    out
}

/// Every broken relative link of `text` (a file at `name` under `root`): a missing file, or an
/// anchor that no heading of its file has; and every link to a line number (`#L12`).
fn broken_links(root: &Path, name: &str, text: &str) -> Vec<String> {
    let dir = Path::new(name).parent().unwrap_or(Path::new(""));
    let mut out = Vec::new();
    for (n, line) in prose_lines(text) {
        for target in link_targets(line) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target, None),
            };
            if anchor.is_some_and(|a| {
                a.len() > 1
                    && a.starts_with('L')
                    && a[1..].starts_with(|c: char| c.is_ascii_digit())
            }) {
                out.push(format!(
                    "{name}:{n}: ({target}) links a line number, which drifts: name the symbol"
                ));
                continue;
            }
            let path = if file.is_empty() {
                root.join(name)
            } else {
                root.join(dir).join(file)
            };
            if !path.exists() {
                out.push(format!("{name}:{n}: ({target}): no such file"));
                continue;
            }
            if let Some(anchor) = anchor
                && path.extension().is_some_and(|e| e == "md")
            {
                let text = std::fs::read_to_string(&path).unwrap();
                if !anchors(&text).iter().any(|a| a == anchor) {
                    out.push(format!(
                        "{name}:{n}: ({target}): no heading has that anchor"
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn every_link_in_the_docs_resolves() {
    let root = repo();
    let broken: Vec<String> = markdown_files()
        .iter()
        .flat_map(|(name, text)| broken_links(&root, name, text))
        .collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn a_broken_link_an_anchor_or_a_line_number_is_found() {
    let root = repo();
    let text = "[a](roofline.md#two-roofs) [b](roofline.md#no-such) [c](nowhere.md) \
                [d](../kernels/src/softmax.rs#L12) `[e](nowhere.md)` [f](https://x.y/z)\n";
    let broken = broken_links(&root, "docs/x.md", text);
    assert_eq!(broken.len(), 3, "{broken:?}");
    assert!(broken[0].contains("no-such") && broken[1].contains("nowhere.md"));
    assert!(broken[2].contains("line number"));
    assert_eq!(
        slug("Two backends: the source and the PTX"),
        "two-backends-the-source-and-the-ptx"
    );
    assert_eq!(
        slug("A worked example (H100, MODELLED)"),
        "a-worked-example-h100-modelled"
    );
    assert_eq!(
        slug("Step 1: one thread per output (`kernels/src/gemm/naive.rs`)"),
        "step-1-one-thread-per-output-kernelssrcgemmnaivers"
    );
}

/// Each table's header rows repeated inside it: a second header (and separator) in the body
/// renders as a data row, and its columns' titles are lost.
fn repeated_headers(name: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let lines = prose_lines(text);
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].1.trim_start().starts_with('|') {
            i += 1;
            continue;
        }
        let start = i;
        while i < lines.len() && lines[i].1.trim_start().starts_with('|') {
            i += 1;
        }
        let table = &lines[start..i];
        let is_separator =
            |l: &str| l.contains("---") && l.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '));
        let header = table[0].1.trim();
        for (n, row) in &table[1..] {
            if row.trim() == header {
                out.push(format!(
                    "{name}:{n}: the table's header row again: {header}"
                ));
            }
        }
        let separators: Vec<_> = table.iter().filter(|(_, l)| is_separator(l)).collect();
        if let Some((n, _)) = separators.get(1) {
            out.push(format!("{name}:{n}: a second separator row in one table"));
        }
    }
    out
}

#[test]
fn no_table_repeats_its_header() {
    let found: Vec<String> = markdown_files()
        .iter()
        .flat_map(|(name, text)| repeated_headers(name, text))
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
    // The defect this lint was written for: a table whose header was written twice.
    let planted = "| kernel | predicted |\n|---|---|\n| kernel | predicted | why |\n|---|---|---|\n| a | 1 | b |\n";
    assert_eq!(repeated_headers("x.md", planted).len(), 1);
    let planted = "| kernel | t |\n|---|---|\n| a | 1 |\n| kernel | t |\n";
    assert_eq!(repeated_headers("x.md", planted).len(), 1);
}

/// History a chapter should not hold: a date (`2026-12-01`) or a commit (`main at 0b360f7`,
/// `commit 8555234`). The maintainers' notes in `docs/design/` may.
fn history(name: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (n, line) in prose_lines(text) {
        let b = line.as_bytes();
        let is_date = |i: usize| {
            b.len() >= i + 10
                && b[i..i + 4].iter().all(u8::is_ascii_digit)
                && b[i + 4] == b'-'
                && b[i + 5..i + 7].iter().all(u8::is_ascii_digit)
                && b[i + 7] == b'-'
                && b[i + 8..i + 10].iter().all(u8::is_ascii_digit)
        };
        // A toolchain's name (`nightly-2026-04-02`) is not history.
        let named = |i: usize| i >= 8 && &b[i - 8..i] == b"nightly-";
        if (0..b.len()).any(|i| (b[i] == b'1' || b[i] == b'2') && is_date(i) && !named(i)) {
            out.push(format!("{name}:{n}: a date: {line}"));
        }
        let words: Vec<&str> = line
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        for w in words.windows(2) {
            let hash = w[1].len() >= 7
                && w[1].chars().all(|c| c.is_ascii_hexdigit())
                && w[1].chars().any(|c| c.is_ascii_digit())
                && w[1].chars().any(|c| c.is_ascii_alphabetic());
            if hash && matches!(w[0], "commit" | "at" | "main") {
                out.push(format!("{name}:{n}: a commit: {line}"));
            }
        }
    }
    out
}

#[test]
fn the_chapters_hold_no_dates_or_commits() {
    let found: Vec<String> = markdown_files()
        .iter()
        .filter(|(name, _)| !name.starts_with("docs/design/") && !name.starts_with("docs/results/"))
        .flat_map(|(name, text)| history(name, text))
        .collect();
    assert!(
        found.is_empty(),
        "history belongs in docs/design/:\n{}",
        found.join("\n")
    );
    assert_eq!(
        history("x.md", "measured 2026-12-01 on main at 0b360f7\n").len(),
        2
    );
    assert!(
        history(
            "x.md",
            "a 4096 x 4096 softmax, sm_90a, 2024, nightly-2026-04-02\n"
        )
        .is_empty()
    );
}

/// Every excerpt of `text` (see the module's comment) that its source file no longer holds, with
/// the first line that is not where the excerpt puts it.
fn stale_excerpts(root: &Path, name: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let Some(path) = line
            .trim()
            .strip_prefix("<!-- excerpt:")
            .and_then(|r| r.strip_suffix("-->"))
            .map(str::trim)
        else {
            continue;
        };
        let at = format!("{name}:{}", i + 1);
        if !matches!(
            lines.get(i + 1).map(|l| l.trim()),
            Some("```rust" | "```cpp")
        ) {
            out.push(format!(
                "{at}: an excerpt marker must be followed by a ```rust or ```cpp block"
            ));
            continue;
        }
        let block: Vec<&str> = lines[i + 2..]
            .iter()
            .copied()
            .take_while(|l| l.trim() != "```")
            .collect();
        let Ok(source) = std::fs::read_to_string(root.join(path)) else {
            out.push(format!("{at}: no file {path}"));
            continue;
        };
        if let Some(missing) = excerpt_mismatch(&block, &source) {
            out.push(format!(
                "{at}: {path} no longer has, where the excerpt puts it:\n  {missing}"
            ));
        }
    }
    out
}

/// The first excerpt line not found in order in `source`: after a `// ...` line anywhere
/// further on, else on the very next line.
fn excerpt_mismatch<'a>(block: &[&'a str], source: &str) -> Option<&'a str> {
    let source: Vec<&str> = source.lines().map(str::trim_end).collect();
    let mut next = 0; // the source line the excerpt has reached
    let mut gap = true; // the excerpt may start anywhere
    for want in block {
        let want_t = want.trim_end();
        if want_t.trim() == "// ..." {
            gap = true;
            continue;
        }
        let found = if gap {
            (next..source.len()).find(|&j| source[j] == want_t)
        } else {
            (source.get(next) == Some(&want_t)).then_some(next)
        };
        match found {
            Some(j) => {
                next = j + 1;
                gap = false;
            }
            None => return Some(want),
        }
    }
    None
}

#[test]
fn every_excerpt_is_still_in_its_source() {
    let root = repo();
    let files = markdown_files();
    let stale: Vec<String> = files
        .iter()
        .flat_map(|(name, text)| stale_excerpts(&root, name, text))
        .collect();
    assert!(stale.is_empty(), "{}", stale.join("\n"));
    let count = files
        .iter()
        .map(|(_, t)| t.matches("<!-- excerpt:").count())
        .sum::<usize>();
    assert!(count >= 5, "only {count} excerpts in the chapters");
}

#[test]
fn an_excerpt_that_drifted_is_found() {
    let source = "fn a() {\n    let x = 1;\n    let y = 2;\n    x + y\n}\n";
    assert_eq!(
        excerpt_mismatch(&["fn a() {", "    let x = 1;"], source),
        None
    );
    assert_eq!(
        excerpt_mismatch(&["fn a() {", "    // ...", "    x + y"], source),
        None
    );
    // Lines left out without a marker, a changed line, and lines out of order all fail.
    assert_eq!(
        excerpt_mismatch(&["fn a() {", "    x + y"], source),
        Some("    x + y")
    );
    assert_eq!(
        excerpt_mismatch(&["    let x = 3;"], source),
        Some("    let x = 3;")
    );
    assert_eq!(
        excerpt_mismatch(&["    x + y", "// ...", "fn a() {"], source),
        Some("fn a() {")
    );
}
