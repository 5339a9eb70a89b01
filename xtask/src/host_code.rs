//! A whole `.cu` for NVRTC: the host code out, the device code as it is.
//!
//! A kernel file as people keep them has a `main`, host helpers that call the runtime API
//! (`cudaMalloc`, `cudaMemcpy`, launches with `<<<...>>>`), host globals and host headers
//! (`<stdio.h>`, `<stdlib.h>`, ...). NVRTC compiles device code alone: it cannot open a host
//! header, and it refuses every host function and host variable ("host functions are not allowed
//! in JIT mode"). So before NVRTC sees a file, [`device_only`] blanks each top-level declaration
//! that is host code, keeping every line break, so that the line tables of the PTX still name
//! the file's own lines; the host headers it includes are given to NVRTC as empty files
//! ([`HOST_HEADERS`]), and the file's own headers (`#include "common.h"`) pass through the same
//! blanking ([`local_headers`]).
//!
//! What is host code, by the CUDA C++ execution-space rules (CUDA C++ Programming Guide,
//! "Function Execution Space Specifiers" and "Variable Memory Space Specifiers"): a function
//! with neither `__global__` nor `__device__` is a host function, and a namespace-scope variable
//! with none of `__device__`, `__constant__`, `__shared__`, `__managed__` is a host variable.
//! Kept as they are: types (`struct`, `class`, `union`, `enum`), `typedef`, `using`,
//! `static_assert`, `const` and `constexpr` variables (device code may read their values),
//! namespaces and `extern "C"` blocks (their contents are sorted the same way), and the
//! preprocessor's lines. A class's own member functions are not sorted: a host member function
//! defined in a class that device code uses still stops NVRTC.

use std::path::Path;

/// Host headers a kernel file may include: each is an empty file for NVRTC, whose device code
/// has `printf`, `malloc`, `assert` and the math functions built in, and whose check prelude
/// defines the constants kernels take from `<float.h>` and `<math.h>`.
pub const HOST_HEADERS: &[&str] = &[
    "stdio.h",
    "stdlib.h",
    "string.h",
    "strings.h",
    "time.h",
    "math.h",
    "float.h",
    "limits.h",
    "stdint.h",
    "stdbool.h",
    "assert.h",
    "unistd.h",
    "sys/time.h",
    "omp.h",
    "cstdio",
    "cstdlib",
    "cstring",
    "ctime",
    "cmath",
    "cfloat",
    "climits",
    "cassert",
    "iostream",
    "fstream",
    "sstream",
    "vector",
    "string",
    "algorithm",
    "numeric",
    "random",
    "chrono",
    "memory",
    "functional",
    "cublas_v2.h",
    "cublasLt.h",
    "cudnn.h",
    "nvtx3/nvToolsExt.h",
    "nvToolsExt.h",
];

/// `source` with every top-level declaration that is host code replaced by spaces (line breaks
/// kept): what NVRTC compiles of it.
pub fn device_only(source: &str) -> String {
    let mut out = source.as_bytes().to_vec();
    sort_scope(source.as_bytes(), 0, source.len(), &mut out);
    String::from_utf8(out).expect("only ASCII spaces replace whole characters")
}

/// The file's own headers, as NVRTC is to see them: each `#include "NAME"` of `source` (and of
/// those headers, in turn) found beside the file that includes it, read and passed through
/// [`device_only`], as (NAME, text). A header that cannot be read is left to NVRTC, which says so.
pub fn local_headers(source: &str, dir: &Path) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    let mut pending: Vec<(String, std::path::PathBuf)> = quoted_includes(source)
        .into_iter()
        .map(|n| (n.clone(), dir.join(&n)))
        .collect();
    while let Some((name, path)) = pending.pop() {
        if found.iter().any(|(n, _)| *n == name) || found.len() >= 256 {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let here = path.parent().unwrap_or(dir).to_path_buf();
        for n in quoted_includes(&text) {
            let at = here.join(&n);
            pending.push((n, at));
        }
        found.push((name, device_only(&text)));
    }
    found
}

/// The names of `source`'s `#include "NAME"` lines.
fn quoted_includes(source: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix('#')?.trim_start();
            let rest = rest.strip_prefix("include")?.trim_start();
            let name = rest.strip_prefix('"')?;
            Some(name[..name.find('"')?].to_string())
        })
        .collect()
}

/// Sorts the declarations of one scope, `src[start..end]`, blanking the host ones in `out`.
fn sort_scope(src: &[u8], start: usize, end: usize, out: &mut [u8]) {
    let mut at = start;
    loop {
        at = skip_space(src, at, end);
        if at >= end {
            return;
        }
        let Some(decl) = declaration(src, at, end) else {
            return;
        };
        let header = words(&src[at..decl.header_end]);
        match decl.body {
            Some((open, close)) if opens_scope(&header) => sort_scope(src, open + 1, close, out),
            _ if is_kept(&header) => {}
            _ => blank(out, at, decl.end),
        }
        at = decl.end;
    }
}

/// One top-level declaration from `at`: the end of its header (its `{` or `;`), its body's
/// braces if it has one, and where it ends (past its `;` or its body's `}`, and the `;` of a
/// type or an initialiser after it).
struct Declaration {
    header_end: usize,
    body: Option<(usize, usize)>,
    end: usize,
}

fn declaration(src: &[u8], at: usize, end: usize) -> Option<Declaration> {
    let mut i = at;
    let mut parens = 0i32;
    while i < end {
        match src[i] {
            b'(' | b'[' => parens += 1,
            b')' | b']' => parens -= 1,
            b';' if parens <= 0 => {
                return Some(Declaration {
                    header_end: i,
                    body: None,
                    end: i + 1,
                });
            }
            b'{' if parens <= 0 => {
                let close = matching_brace(src, i, end)?;
                let header = words(&src[at..i]);
                // A type's definition, or an initialiser, goes on to its `;`.
                let typed = has_word(&header, &["struct", "class", "union", "enum"])
                    && !header.contains('(');
                let mut stop = close + 1;
                if typed || header.contains('=') {
                    stop = next_semicolon(src, stop, end);
                }
                return Some(Declaration {
                    header_end: i,
                    body: Some((i, close)),
                    end: stop,
                });
            }
            b'"' | b'\'' | b'/' | b'#' => {
                i = skip_space_or_literal(src, i, end);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Whether a header opens a scope whose declarations are sorted one by one.
fn opens_scope(header: &str) -> bool {
    let h = header.trim();
    h.starts_with("namespace") || h == "extern \"C\"" || h == "extern \"C++\""
}

/// Whether a declaration is device code, or something both sides need.
fn is_kept(header: &str) -> bool {
    const DEVICE: &[&str] = &[
        "__global__",
        "__device__",
        "__constant__",
        "__shared__",
        "__managed__",
    ];
    const BOTH: &[&str] = &[
        "namespace",
        "typedef",
        "using",
        "static_assert",
        "struct",
        "class",
        "union",
        "enum",
        "const",
        "constexpr",
    ];
    has_word(header, DEVICE) || (has_word(header, BOTH) && !is_function(header))
}

/// Whether a header declares a function (its name followed by a parameter list), as opposed to
/// a variable or type: a `(` outside `template <...>` and before any `=`.
fn is_function(header: &str) -> bool {
    let h = header.trim();
    let h = match h.strip_prefix("template") {
        Some(rest) => match rest.find('>') {
            Some(close) => &rest[close + 1..],
            None => rest,
        },
        None => h,
    };
    let before_init = h.split('=').next().unwrap_or(h);
    before_init.contains('(')
}

/// Whether `text` has one of `words` as a whole word.
fn has_word(text: &str, words: &[&str]) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|w| words.contains(&w))
}

/// `text` with comments, literals' contents and preprocessor lines dropped, as words.
fn words(text: &[u8]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < text.len() {
        let next = skip_space_or_literal(text, i, text.len());
        if next > i {
            // A string literal is kept (`extern "C"`); comments and directives are a space.
            if text[i] == b'"' {
                out.push_str(&String::from_utf8_lossy(&text[i..next]));
            } else {
                out.push(' ');
            }
            i = next;
        } else {
            out.push(text[i] as char);
            i += 1;
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Past whitespace, comments and preprocessor lines from `at`.
fn skip_space(src: &[u8], mut at: usize, end: usize) -> usize {
    loop {
        let next = skip_space_or_literal(src, at, end);
        if next == at || (next < end && matches!(src[at], b'"' | b'\'')) {
            return at;
        }
        at = next;
    }
}

/// Past one stretch of whitespace, a comment, a preprocessor line or a string or character
/// literal at `at` (`at` itself when there is none).
fn skip_space_or_literal(src: &[u8], at: usize, end: usize) -> usize {
    let mut i = at;
    if i >= end {
        return i;
    }
    match src[i] {
        c if c.is_ascii_whitespace() => {
            while i < end && src[i].is_ascii_whitespace() {
                i += 1;
            }
            i
        }
        b'/' if src.get(i + 1) == Some(&b'/') => {
            while i < end && src[i] != b'\n' {
                i += 1;
            }
            i
        }
        b'/' if src.get(i + 1) == Some(&b'*') => {
            i += 2;
            while i + 1 < end && !(src[i] == b'*' && src[i + 1] == b'/') {
                i += 1;
            }
            (i + 2).min(end)
        }
        b'#' if line_start(src, i) => {
            // To the end of the line, and of each line a `\` continues.
            while i < end && src[i] != b'\n' {
                if src[i] == b'\\' && src.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                i += 1;
            }
            i
        }
        q @ (b'"' | b'\'') => {
            i += 1;
            while i < end && src[i] != q && src[i] != b'\n' {
                if src[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            (i + 1).min(end)
        }
        _ => at,
    }
}

/// Whether only whitespace stands before `at` on its line.
fn line_start(src: &[u8], at: usize) -> bool {
    src[..at]
        .iter()
        .rev()
        .take_while(|&&c| c != b'\n')
        .all(u8::is_ascii_whitespace)
}

/// The `}` that closes the `{` at `open`.
fn matching_brace(src: &[u8], open: usize, end: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = open;
    while i < end {
        let next = skip_space_or_literal(src, i, end);
        if next > i {
            i = next;
            continue;
        }
        match src[i] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Past the `;` that ends a type's definition or an initialiser from `at`, declarators before
/// it (`} pair;`); `at` when a brace comes first.
fn next_semicolon(src: &[u8], at: usize, end: usize) -> usize {
    let mut i = at;
    while i < end {
        let next = skip_space_or_literal(src, i, end);
        if next > i {
            i = next;
            continue;
        }
        match src[i] {
            b';' => return i + 1,
            b'{' | b'}' => return at,
            _ => i += 1,
        }
    }
    at
}

/// Spaces over `out[start..end]`, line breaks kept.
fn blank(out: &mut [u8], start: usize, end: usize) {
    for c in &mut out[start..end] {
        if *c != b'\n' {
            *c = b' ';
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What is left of each line, blanked lines as empty.
    fn kept(source: &str) -> Vec<String> {
        device_only(source)
            .lines()
            .map(|l| l.trim_end().to_string())
            .collect()
    }

    #[test]
    fn host_functions_and_variables_go_and_device_code_stays_line_for_line() {
        let source = "\
#include <stdio.h>
int host_global = 3;
__device__ int device_global;
__constant__ float table[4] = {1, 2, 3, 4};
constexpr int N = 4;
typedef struct { float x, y; } pair;
void check(cudaError_t e, const char *f) {
    if (e != cudaSuccess) { printf(\"}\"); exit(1); } // a } in a string
}
template <int B>
__global__ void scale(float *x) { x[threadIdx.x] *= B; }
__host__ __device__ inline int twice(int v) { return 2 * v; }
int main() {
    scale<256><<<1, 256>>>(nullptr);
    return 0;
}
void prototype(int);
namespace cg = cooperative_groups;
namespace inner {
void host_in_namespace() {}
__device__ int in_namespace() { return 1; }
}
";
        let lines = kept(source);
        assert_eq!(lines.len(), source.lines().count());
        assert_eq!(lines[0], "#include <stdio.h>");
        assert_eq!(lines[1], "");
        assert_eq!(lines[2], "__device__ int device_global;");
        assert_eq!(lines[3], "__constant__ float table[4] = {1, 2, 3, 4};");
        assert_eq!(lines[4], "constexpr int N = 4;");
        assert_eq!(lines[5], "typedef struct { float x, y; } pair;");
        assert!(lines[6..9].iter().all(String::is_empty), "{lines:?}");
        assert_eq!(lines[9], "template <int B>");
        assert!(lines[10].starts_with("__global__ void scale"));
        assert!(lines[11].starts_with("__host__ __device__ inline int twice"));
        assert!(lines[12..17].iter().all(String::is_empty), "{lines:?}");
        assert_eq!(lines[17], "namespace cg = cooperative_groups;");
        assert_eq!(lines[18], "namespace inner {");
        assert_eq!(lines[19], "");
        assert!(lines[20].starts_with("__device__ int in_namespace"));
        assert_eq!(lines[21], "}");
    }

    #[test]
    fn a_file_s_own_headers_are_read_beside_it_and_sorted_the_same_way() {
        let dir = std::env::temp_dir().join(format!("host-code-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(
            dir.join("common.h"),
            "#include \"sub/more.h\"\nvoid cuda_check(int e) { exit(e); }\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("sub/more.h"),
            "__device__ float sq(float x) { return x * x; }\nint host_only;\n",
        )
        .unwrap();
        let mut headers = local_headers("#include \"common.h\"\n#include <stdio.h>\n", &dir);
        headers.sort();
        assert_eq!(headers.len(), 2, "{headers:?}");
        assert_eq!(headers[0].0, "common.h");
        assert_eq!(headers[0].1.trim(), "#include \"sub/more.h\"");
        assert_eq!(headers[1].0, "sub/more.h");
        assert_eq!(
            headers[1].1.trim(),
            "__device__ float sq(float x) { return x * x; }"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
