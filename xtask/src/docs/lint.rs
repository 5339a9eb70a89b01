//! Lints of the chapters' text (tests only): every relative link and anchor resolves, no link
//! points at a line number, no table repeats its header row, the chapters (not `docs/design/`)
//! hold no dated history, every excerpt of a kernel's code is still in its source file, and the
//! glossary of docs/basics.md points where each term is defined, no later in the course than the
//! first chapter that uses it.
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

/// The chapters in the course's order: the first link of each numbered row of docs/README.md's
/// tables (`| 7 | [gemm](gemm.md) | ...`).
fn course_order(readme: &str) -> Vec<String> {
    prose_lines(readme)
        .into_iter()
        .filter_map(|(_, line)| {
            let rest = line.trim().strip_prefix('|')?;
            let (number, rest) = rest.split_once('|')?;
            number.trim().parse::<u32>().ok()?;
            let target = link_targets(rest).into_iter().next()?;
            Some(target.split('#').next().unwrap().to_string())
        })
        .collect()
}

/// The glossary's rows (basics.md, from its `## Glossary` heading): the line, the cell of terms and
/// the first link of the second cell, the chapter (and section) that defines them.
fn glossary_rows(basics: &str) -> Vec<(usize, &str, &str)> {
    let Some(start) = basics.find("\n## Glossary") else {
        return Vec::new();
    };
    let first_line = basics[..start].lines().count() + 1;
    basics[start + 1..]
        .lines()
        .enumerate()
        .skip_while(|(_, l)| !l.starts_with('|'))
        .skip(2) // the header and the separator
        .take_while(|(_, l)| l.starts_with('|'))
        .filter_map(|(i, line)| {
            let mut cells = line.trim().trim_matches('|').split(" | ");
            let terms = cells.next()?.trim();
            let target = link_targets(cells.next()?).into_iter().next()?;
            Some((first_line + i, terms, target))
        })
        .collect()
}

/// A glossary cell's terms: split at commas and semicolons outside backticks and parentheses,
/// each without a trailing gloss in parentheses (`SM (streaming multiprocessor)` is `SM`).
fn glossary_terms(cell: &str) -> Vec<String> {
    let (mut out, mut term) = (Vec::new(), String::new());
    let (mut code, mut depth) = (false, 0);
    for c in cell.chars() {
        match c {
            '`' => code = !code,
            '(' if !code => depth += 1,
            ')' if !code => depth -= 1,
            ',' | ';' if !code && depth == 0 => {
                out.push(std::mem::take(&mut term));
                continue;
            }
            _ => {}
        }
        term.push(c);
    }
    out.push(term);
    out.into_iter()
        .map(|t| {
            let t = t.trim();
            match t.rfind(" (") {
                Some(i) if t.ends_with(')') && !t[..i].contains('(') => t[..i].trim().to_string(),
                _ => t.to_string(),
            }
        })
        .filter(|t| !t.is_empty())
        .collect()
}

/// The prose of the section `anchor` names in `text`, from its heading to the next heading of the
/// same or a higher level, or the whole file's prose without an anchor; `None` if no heading has
/// the anchor.
fn section(text: &str, anchor: Option<&str>) -> Option<String> {
    let lines: Vec<&str> = prose_lines(text).into_iter().map(|(_, l)| l).collect();
    let Some(anchor) = anchor else {
        return Some(lines.join("\n"));
    };
    let level = |l: &str| l.chars().take_while(|&c| c == '#').count();
    let start = lines
        .iter()
        .position(|l| l.starts_with('#') && slug(l.trim_start_matches('#')) == anchor)?;
    let end = (start + 1..lines.len())
        .find(|&j| lines[j].starts_with('#') && level(lines[j]) <= level(lines[start]))
        .unwrap_or(lines.len());
    Some(lines[start..end].join("\n"))
}

/// Whether prose `section` defines `term`: the term is in a bold span, a heading or a table row's
/// first cell (case, backticks and line breaks aside); a term in backticks, a name from the
/// code, need only appear.
fn defines(section: &str, term: &str) -> bool {
    let norm = |s: &str| {
        s.replace('`', "")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    let want = norm(term);
    if term.starts_with('`') {
        return norm(section).contains(&want);
    }
    let bold = section
        .split("**")
        .skip(1)
        .step_by(2)
        .any(|b| norm(b).contains(&want));
    let heading_or_cell = section.lines().any(|l| {
        let l = l.trim();
        (l.starts_with('#') && norm(l).contains(&want))
            || l.strip_prefix('|')
                .and_then(|r| r.split('|').next())
                .is_some_and(|cell| norm(cell).contains(&want))
    });
    bold || heading_or_cell
}

/// Every glossary row whose pointer is wrong: its chapter or section does not exist, or does not
/// define one of the row's terms ([`defines`]). `docs` maps a file's name in docs/ to its text.
fn wrong_glossary_pointers(docs: &std::collections::BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (line, terms, target) in glossary_rows(&docs["basics.md"]) {
        let (file, anchor) = match target.split_once('#') {
            Some((f, a)) => (if f.is_empty() { "basics.md" } else { f }, Some(a)),
            None => (target, None),
        };
        let Some(text) = docs.get(file) else {
            out.push(format!("basics.md:{line}: ({target}): no such chapter"));
            continue;
        };
        let Some(section) = section(text, anchor) else {
            out.push(format!(
                "basics.md:{line}: ({target}): no heading has that anchor"
            ));
            continue;
        };
        for term in glossary_terms(terms) {
            if !defines(&section, &term) {
                out.push(format!(
                    "basics.md:{line}: {term} is not defined at ({target}): no bold, heading or table row there names it"
                ));
            }
        }
    }
    out
}

#[test]
fn the_glossary_points_where_each_term_is_defined() {
    let docs = docs_by_name();
    let rows = glossary_rows(&docs["basics.md"]);
    assert!(rows.len() >= 30, "only {} glossary rows", rows.len());
    let wrong = wrong_glossary_pointers(&docs);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_wrong_glossary_pointer_is_found() {
    let mut docs = docs_by_name();
    let basics = docs["basics.md"].clone();
    // A term pointed at a chapter that does not define it, one at a missing section, and one at
    // a missing chapter.
    for (from, to, expected) in [
        (
            "| ulp | [softmax](softmax.md#the-tests) |",
            "| ulp | [gemm](gemm.md) |",
            "ulp is not defined",
        ),
        (
            "| ulp | [softmax](softmax.md#the-tests) |",
            "| ulp | [softmax](softmax.md#no-such) |",
            "no heading",
        ),
        (
            "| ulp | [softmax](softmax.md#the-tests) |",
            "| ulp | [softmax](nowhere.md) |",
            "no such chapter",
        ),
    ] {
        assert!(basics.contains(from));
        docs.insert("basics.md".into(), basics.replace(from, to));
        let wrong = wrong_glossary_pointers(&docs);
        assert!(
            wrong.len() == 1 && wrong[0].contains(expected),
            "{from} -> {to}: {wrong:?}"
        );
    }
    assert_eq!(
        glossary_terms(
            "SM (streaming multiprocessor), warp scheduler; `kernel<<<grid, block>>>`, `(m, l)`"
        ),
        [
            "SM",
            "warp scheduler",
            "`kernel<<<grid, block>>>`",
            "`(m, l)`"
        ]
    );
}

/// docs/*.md by file name.
fn docs_by_name() -> std::collections::BTreeMap<String, String> {
    markdown_files()
        .into_iter()
        .filter_map(|(name, text)| {
            let name = name.strip_prefix("docs/")?;
            (!name.contains('/')).then(|| (name.to_string(), text))
        })
        .collect()
}

/// Whether `text` uses `term` (backticks aside) as a whole word: not inside a longer word, and
/// case-blind unless the term has a capital (`SM`, `GEMM`).
fn uses(text: &str, term: &str) -> bool {
    let term = term.replace('`', "");
    let (text, term) = if term.chars().any(char::is_uppercase) {
        (text.to_string(), term)
    } else {
        (text.to_lowercase(), term.to_lowercase())
    };
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    // A term that starts (ends) with a letter must not follow (precede) one.
    let joined_before = |i: usize| word(text[..i].chars().next_back()) && word(term.chars().next());
    let joined_after =
        |end: usize| word(text[end..].chars().next()) && word(term.chars().next_back());
    text.match_indices(&term)
        .any(|(i, m)| !joined_before(i) && !joined_after(i + m.len()))
}

/// A chapter's own words: its prose, without basics' glossary (which names every term) and
/// without quotations (`"... Kernel Fusion and FlashAttention"`, a title).
fn own_words(name: &str, text: &str) -> String {
    let text = match (name, text.find("\n## Glossary")) {
        ("basics.md", Some(i)) => &text[..i],
        _ => text,
    };
    let prose: Vec<&str> = prose_lines(text).into_iter().map(|(_, l)| l).collect();
    prose
        .join("\n")
        .split('"')
        .step_by(2)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every glossary term a chapter uses before the chapter the glossary points to, in the course's
/// order: `(term, the first chapter that uses it, the chapter that defines it)`.
fn early_uses(docs: &std::collections::BTreeMap<String, String>) -> Vec<(String, String, String)> {
    let order = course_order(&docs["README.md"]);
    let words: Vec<String> = order.iter().map(|c| own_words(c, &docs[c])).collect();
    let mut out = Vec::new();
    for (_, terms, target) in glossary_rows(&docs["basics.md"]) {
        let file = match target.split('#').next().unwrap() {
            "" => "basics.md",
            f => f,
        };
        let Some(defined) = order.iter().position(|c| c == file) else {
            continue;
        };
        for term in glossary_terms(terms) {
            if EVERYDAY_WORDS.contains(&term.as_str()) {
                continue;
            }
            if let Some(first) = words[..defined].iter().position(|w| uses(w, &term)) {
                out.push((term, order[first].clone(), file.to_string()));
            }
        }
    }
    out
}

/// Glossary terms that are also ordinary words, which the chapters use in their ordinary sense
/// before the term's chapter ("a value", "the spec table", "fused multiply-add"): the order check
/// cannot tell those uses from the term's, so it leaves them out.
const EVERYDAY_WORDS: [&str; 8] = [
    "key", "value", "head", "batch", "spec", "registry", "naive", "fused",
];

/// The terms the chapters name before the chapter that defines them, `(term, first chapter)`, in
/// the course's order. None is left: each term is defined where it is first used, or its use moved
/// after its definition. A use not listed here fails the test; so does an entry that no longer
/// happens, so that the list only shrinks.
const KNOWN_EARLY_USES: [(&str, &str); 0] = [];

#[test]
fn no_term_is_used_before_the_chapter_the_glossary_points_to() {
    let docs = docs_by_name();
    let found: Vec<(String, String)> = early_uses(&docs)
        .into_iter()
        .map(|(term, first, _)| (term, first))
        .collect();
    let new: Vec<String> = found
        .iter()
        .filter(|(t, c)| !KNOWN_EARLY_USES.contains(&(t.as_str(), c.as_str())))
        .map(|(t, c)| format!("{c} uses {t} before the chapter the glossary points to: define it there first, or point the glossary here"))
        .collect();
    assert!(new.is_empty(), "{}", new.join("\n"));
    let gone: Vec<String> = KNOWN_EARLY_USES
        .iter()
        .filter(|(t, c)| !found.iter().any(|(ft, fc)| ft == t && fc == c))
        .map(|(t, c)| format!("{c} no longer uses {t} early: remove it from KNOWN_EARLY_USES"))
        .collect();
    assert!(gone.is_empty(), "{}", gone.join("\n"));
}

#[test]
fn a_term_used_before_its_chapter_is_found() {
    let mut docs = docs_by_name();
    // pyramid.md (2) uses a term of softmax.md (6): found; the same word inside a longer one, or
    // in a quotation, is not a use.
    let pyramid = docs["pyramid.md"].clone();
    for (planted, found) in [
        ("\nThe ulp of one is 2^-23.\n", true),
        ("\nThe ulps are... \"an ulp\" tulp\n", false),
    ] {
        docs.insert("pyramid.md".into(), format!("{pyramid}{planted}"));
        let early = early_uses(&docs);
        let hit = early.iter().any(|(t, first, defined)| {
            t == "ulp" && first == "pyramid.md" && defined == "softmax.md"
        });
        assert_eq!(hit, found, "{planted:?}: {early:?}");
    }
    assert_eq!(
        course_order(&docs["README.md"])[..3],
        ["basics.md", "pyramid.md", "roofline.md"]
    );
    assert!(
        uses("an `mma.sync` each", "`mma.sync`")
            && !uses("tiles", "tile")
            && uses("a GEMM.", "GEMM")
    );
}
