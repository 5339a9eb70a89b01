//! CUDA C++ (`.cu`) to PTX with NVIDIA's run-time compiler, NVRTC, for `cargo xtask check`.
//!
//! NVRTC is a shared library in PyPI's `nvidia-cuda-nvrtc-cu12` wheel; the headers a kernel
//! includes come from two more wheels: `nvidia-cuda-runtime-cu12` (`cuda_fp16.h`,
//! `cuda_bf16.h`, `cooperative_groups.h`) and `nvidia-cuda-cccl-cu12` (`<nv/target>` and
//! `<cuda/std/...>`, which cooperative groups include). All three are fetched once into
//! `target/nvrtc/` the way `cargo xtask ptxas` fetches ptxas (`nvidia_tools::fetch_tool`), and the
//! library is loaded at run time: no CUDA toolkit and no GPU.
//!
//! A kernel written for nvcc also sees the host's C headers, which NVRTC does not have: a
//! prelude, included before the source (`--pre-include`), defines what kernels commonly take
//! from them (`INFINITY`, `NAN`, `FLT_MAX`, `M_PI`, ...) and includes `cuda_bf16.h` (which
//! includes `cuda_fp16.h`).
//!
//! C++ mangles a kernel's name in the PTX (`_Z14softmax_kernelPfPKfi`); the user names it as
//! written (`softmax_kernel`, or a template instance `softmax<float>`), and NVRTC says which PTX
//! entry that is (`nvrtcAddNameExpression`, `nvrtcGetLoweredName`).

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::Path;

use crate::nvidia_tools::{WheelTool, fetch_tool};

const LIBRARY: WheelTool = WheelTool {
    package: "nvidia-cuda-nvrtc-cu12",
    path: "nvidia/cuda_nvrtc/lib/",
    size: "about 90 MB",
    leave_out: &[".alt."],
};
const RUNTIME_HEADERS: WheelTool = WheelTool {
    package: "nvidia-cuda-runtime-cu12",
    path: "nvidia/cuda_runtime/include/",
    size: "about 3 MB",
    leave_out: &[],
};
const CCCL_HEADERS: WheelTool = WheelTool {
    package: "nvidia-cuda-cccl-cu12",
    path: "nvidia/cuda_cccl/include/",
    size: "about 3 MB",
    leave_out: &[],
};

/// The options every compilation gets before the user's: Hopper's virtual architecture (the
/// GPU the model predicts), C++17, and line tables so that a report names the `.cu` line.
const DEFAULT_OPTIONS: [&str; 3] = ["-arch=compute_90", "-std=c++17", "-lineinfo"];

/// What kernels written for nvcc take from the host's `<math.h>` and `<float.h>`, which NVRTC
/// lacks, and the bf16 and f16 types (which nvcc's `cuda_runtime.h` brings in).
const PRELUDE: &str = "\
// Included before every .cu that `cargo xtask check` compiles (xtask/src/nvrtc.rs).
#include <cuda_bf16.h>
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
#ifndef FLT_MAX
#define FLT_MAX 3.402823466e+38F
#endif
#ifndef FLT_MIN
#define FLT_MIN 1.175494351e-38F
#endif
#ifndef FLT_EPSILON
#define FLT_EPSILON 1.192092896e-07F
#endif
#ifndef DBL_MAX
#define DBL_MAX 1.7976931348623158e+308
#endif
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
#ifndef M_SQRT2
#define M_SQRT2 1.41421356237309504880
#endif
#ifndef M_LN2
#define M_LN2 0.69314718055994530942
#endif
";

/// A `.cu` compiled: its PTX, and each kernel's name as written in C++ beside its PTX entry.
pub struct Compiled {
    pub ptx: String,
    pub names: Vec<(String, String)>,
    /// Its kernels as the source declares them.
    pub kernels: Vec<KernelDeclaration>,
}

impl Compiled {
    /// The PTX entry of `name`, a kernel's name as written in C++ (or already its PTX entry).
    pub fn lowered<'a>(&'a self, name: &'a str) -> &'a str {
        self.names
            .iter()
            .find(|(cpp, _)| cpp == name)
            .map_or(name, |(_, ptx)| ptx)
    }

    /// The C++ name of PTX entry `entry`, if the compilation named it.
    pub fn cpp_name(&self, entry: &str) -> Option<&str> {
        self.names
            .iter()
            .find(|(_, ptx)| ptx == entry)
            .map(|(cpp, _)| cpp.as_str())
    }
}

/// Compiles the `.cu` at `path` (fetching NVRTC and its headers on first use) with the default
/// options, then `options`; `extra` are kernel names to lower beyond the non-template kernels
/// the source defines (a template instance such as `reduce<float, 256>`).
pub fn compile_file(path: &Path, options: &[String], extra: &[String]) -> Result<Compiled, String> {
    let source = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let dir = crate::checkout::target_dir()?.join("nvrtc");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let library = fetch_tool(&dir, &LIBRARY)?.join("libnvrtc.so.12");
    let mut all = vec![format!(
        "-I{}",
        fetch_tool(&dir, &RUNTIME_HEADERS)?.display()
    )];
    all.push(format!("-I{}", fetch_tool(&dir, &CCCL_HEADERS)?.display()));
    let prelude = dir.join("check-prelude.h");
    if std::fs::read_to_string(&prelude).ok().as_deref() != Some(PRELUDE) {
        std::fs::write(&prelude, PRELUDE)
            .map_err(|e| format!("cannot write {}: {e}", prelude.display()))?;
    }
    all.push(format!("--pre-include={}", prelude.display()));
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        all.push(format!("-I{}", parent.display()));
    }
    all.extend(options_with_defaults(options));
    let mut names = kernel_names(&source);
    for name in extra {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    // Host code out (NVRTC compiles device code alone), host headers empty, the file's own
    // headers sorted the same way: a kernel file goes in as people keep it (`host_code`).
    let device_source = crate::host_code::device_only(&source);
    let mut headers = crate::host_code::local_headers(
        &source,
        path.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new(".")),
    );
    headers.extend(
        crate::host_code::HOST_HEADERS
            .iter()
            .map(|h| (h.to_string(), String::new())),
    );
    let mut compiled = compile(
        &library,
        &device_source,
        &path.display().to_string(),
        &all,
        &names,
        &headers,
    )?;
    // NVRTC writes the file's absolute path into the line tables (`.file 1 "/home/.../x.cu"`);
    // the path as given keeps reports short and the same on every machine.
    if let Ok(cwd) = std::env::current_dir() {
        compiled.ptx = compiled.ptx.replace(&format!("\"{}/", cwd.display()), "\"");
    }
    Ok(compiled)
}

/// The default options the user's do not override (an architecture of their own replaces
/// `-arch=compute_90`), then the user's.
fn options_with_defaults(options: &[String]) -> Vec<String> {
    let arch = |o: &str| o.starts_with("-arch") || o.starts_with("--gpu-architecture");
    let user_arch = options.iter().any(|o| arch(o));
    DEFAULT_OPTIONS
        .iter()
        .filter(|d| !(user_arch && arch(d)))
        .map(|d| d.to_string())
        .chain(options.iter().cloned())
        .collect()
}

/// The names of the kernels (`__global__` functions) `source` defines, templates left out (a
/// template is named by an instance, which the user gives). Comments are skipped; a
/// `__launch_bounds__(...)` between `__global__` and the name is passed over.
pub fn kernel_names(source: &str) -> Vec<String> {
    kernel_declarations(source)
        .into_iter()
        .filter(|k| k.template.is_none())
        .map(|k| k.name)
        .collect()
}

/// A kernel as the source declares it: the C++ that `--list` prints.
#[derive(Debug, PartialEq)]
pub struct KernelDeclaration {
    pub name: String,
    /// `template <...>`'s parameters, for a template kernel (named by an instance).
    pub template: Option<String>,
    /// The parameter list as written, whitespace folded: `float* out, const float* inp, int N`.
    pub params: String,
}

impl KernelDeclaration {
    /// `name(params)`, after `template <...>` for a template.
    pub fn signature(&self) -> String {
        let head = match &self.template {
            Some(t) => format!("template <{t}> "),
            None => String::new(),
        };
        format!("{head}{}({})", self.name, self.params)
    }
}

/// Every kernel (`__global__` function) `source` defines or declares, in order, each once.
/// Comments are skipped; a `__launch_bounds__(...)` between `__global__` and the name is passed
/// over.
pub fn kernel_declarations(source: &str) -> Vec<KernelDeclaration> {
    let code = without_comments(source);
    let mut kernels: Vec<KernelDeclaration> = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("__global__").map(|i| from + i) {
        from = at + "__global__".len();
        // The declaration's start: after the last `;`, `{` or `}` before it.
        let start = code[..at].rfind([';', '{', '}']).map_or(0, |i| i + 1);
        let head = &code[start..at];
        let template = head.find("template").and_then(|t| {
            let rest = &head[t + "template".len()..];
            let open = rest.find('<')?;
            let close = rest.rfind('>')?;
            (open < close).then(|| fold(&rest[open + 1..close]))
        });
        // `template __global__ void k<float>(...)`: an explicit instance, not a definition.
        if head.contains("template") && template.is_none() {
            continue;
        }
        let Some(name) = declared_name(&code[from..]) else {
            continue;
        };
        let params = code[from..]
            .find(&format!("{name}("))
            .map(|i| from + i + name.len())
            .and_then(|open| {
                let mut depth = 0;
                code[open..].char_indices().find_map(|(i, c)| {
                    match c {
                        '(' => depth += 1,
                        ')' => depth -= 1,
                        _ => {}
                    }
                    (depth == 0).then(|| fold(&code[open + 1..open + i]))
                })
            })
            .unwrap_or_default();
        if !kernels.iter().any(|k| k.name == name) {
            kernels.push(KernelDeclaration {
                name,
                template,
                params,
            });
        }
    }
    kernels
}

/// `text` with its runs of whitespace (line breaks included) as one space.
fn fold(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifier before the parameter list's `(` in `rest` (what follows `__global__`),
/// attribute macros with arguments passed over.
fn declared_name(rest: &str) -> Option<String> {
    let mut at = 0;
    loop {
        let open = at + rest[at..].find('(')?;
        let before = rest[..open].trim_end();
        let name: String = before
            .chars()
            .rev()
            .take_while(|&c| is_ident(c))
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if !name.starts_with("__") {
            return (!name.is_empty()).then_some(name);
        }
        // `__launch_bounds__(256, 2)`, `__maxnreg__(64)`: skip to the matching `)`.
        let mut depth = 0;
        let close = rest[open..].char_indices().find_map(|(i, c)| {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(open + i)
        })?;
        at = close + 1;
    }
}

/// `source` with its comments blanked (same length, so that positions still match).
fn without_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('/', Some('/')) => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    out.push(if c == '\n' { '\n' } else { ' ' });
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            _ => out.push(c),
        }
    }
    out
}

type Program = *mut c_void;

/// NVRTC's functions this module calls (nvrtc.h), loaded from the library.
struct Nvrtc {
    _library: libloading::Library,
    create: unsafe extern "C" fn(
        *mut Program,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> c_int,
    add_name: unsafe extern "C" fn(Program, *const c_char) -> c_int,
    compile: unsafe extern "C" fn(Program, c_int, *const *const c_char) -> c_int,
    log_size: unsafe extern "C" fn(Program, *mut usize) -> c_int,
    log: unsafe extern "C" fn(Program, *mut c_char) -> c_int,
    ptx_size: unsafe extern "C" fn(Program, *mut usize) -> c_int,
    ptx: unsafe extern "C" fn(Program, *mut c_char) -> c_int,
    lowered: unsafe extern "C" fn(Program, *const c_char, *mut *const c_char) -> c_int,
    destroy: unsafe extern "C" fn(*mut Program) -> c_int,
    error: unsafe extern "C" fn(c_int) -> *const c_char,
}

impl Nvrtc {
    fn load(path: &Path) -> Result<Self, String> {
        let cannot = |e: libloading::Error| format!("cannot load NVRTC ({}): {e}", path.display());
        // SAFETY: loading NVIDIA's libnvrtc runs its initialisers, which have no preconditions.
        let library = unsafe { libloading::Library::new(path) }.map_err(cannot)?;
        // SAFETY: each symbol has the signature nvrtc.h declares for it (CUDA 12).
        unsafe {
            Ok(Self {
                create: *library.get(b"nvrtcCreateProgram").map_err(cannot)?,
                add_name: *library.get(b"nvrtcAddNameExpression").map_err(cannot)?,
                compile: *library.get(b"nvrtcCompileProgram").map_err(cannot)?,
                log_size: *library.get(b"nvrtcGetProgramLogSize").map_err(cannot)?,
                log: *library.get(b"nvrtcGetProgramLog").map_err(cannot)?,
                ptx_size: *library.get(b"nvrtcGetPTXSize").map_err(cannot)?,
                ptx: *library.get(b"nvrtcGetPTX").map_err(cannot)?,
                lowered: *library.get(b"nvrtcGetLoweredName").map_err(cannot)?,
                destroy: *library.get(b"nvrtcDestroyProgram").map_err(cannot)?,
                error: *library.get(b"nvrtcGetErrorString").map_err(cannot)?,
                _library: library,
            })
        }
    }

    /// `Err` naming `what` and NVRTC's message unless `code` is NVRTC_SUCCESS.
    fn check(&self, code: c_int, what: &str) -> Result<(), String> {
        if code == 0 {
            return Ok(());
        }
        // SAFETY: nvrtcGetErrorString returns a static string for any code.
        let message = unsafe { CStr::from_ptr((self.error)(code)) };
        Err(format!("NVRTC {what}: {}", message.to_string_lossy()))
    }
}

fn c_string(s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|_| format!("`{s}` holds a NUL byte"))
}

/// `source` (named `origin` in NVRTC's messages and the PTX's line tables) compiled by the
/// NVRTC at `library` with `options`, each of `names` lowered to its PTX entry.
fn compile(
    library: &Path,
    source: &str,
    origin: &str,
    options: &[String],
    names: &[String],
    headers: &[(String, String)],
) -> Result<Compiled, String> {
    let nvrtc = Nvrtc::load(library)?;
    let (source_c, origin_c) = (c_string(source)?, c_string(origin)?);
    let header_names: Vec<CString> = headers
        .iter()
        .map(|(n, _)| c_string(n))
        .collect::<Result<_, _>>()?;
    let header_texts: Vec<CString> = headers
        .iter()
        .map(|(_, t)| c_string(t))
        .collect::<Result<_, _>>()?;
    let header_name_ptrs: Vec<*const c_char> = header_names.iter().map(|n| n.as_ptr()).collect();
    let header_text_ptrs: Vec<*const c_char> = header_texts.iter().map(|t| t.as_ptr()).collect();
    let options_c: Vec<CString> = options
        .iter()
        .map(|o| c_string(o))
        .collect::<Result<_, _>>()?;
    let names_c: Vec<CString> = names
        .iter()
        .map(|n| c_string(n))
        .collect::<Result<_, _>>()?;
    let mut program: Program = std::ptr::null_mut();
    // SAFETY: every pointer passed points at a live NUL-terminated string or buffer of the size
    // NVRTC reported; `program` is destroyed once, below, whatever happens in between.
    unsafe {
        nvrtc.check(
            (nvrtc.create)(
                &mut program,
                source_c.as_ptr(),
                origin_c.as_ptr(),
                headers.len() as c_int,
                header_text_ptrs.as_ptr(),
                header_name_ptrs.as_ptr(),
            ),
            "cannot create a program",
        )?;
        let result = (|| {
            for n in &names_c {
                nvrtc.check((nvrtc.add_name)(program, n.as_ptr()), "name expression")?;
            }
            let argv: Vec<*const c_char> = options_c.iter().map(|o| o.as_ptr()).collect();
            let compiled = (nvrtc.compile)(program, argv.len() as c_int, argv.as_ptr());
            let mut size = 0;
            nvrtc.check((nvrtc.log_size)(program, &mut size), "log size")?;
            let mut log = vec![0u8; size.max(1)];
            nvrtc.check((nvrtc.log)(program, log.as_mut_ptr().cast()), "log")?;
            let log = String::from_utf8_lossy(&log[..size.saturating_sub(1)]).into_owned();
            if compiled != 0 {
                nvrtc.check(compiled, "compilation").map_err(|e| {
                    format!(
                        "{e}: {origin} does not compile (options: {}):\n{}",
                        options.join(" "),
                        log.trim_end()
                    )
                })?;
            }
            nvrtc.check((nvrtc.ptx_size)(program, &mut size), "PTX size")?;
            let mut ptx = vec![0u8; size.max(1)];
            nvrtc.check((nvrtc.ptx)(program, ptx.as_mut_ptr().cast()), "PTX")?;
            let ptx = String::from_utf8_lossy(&ptx[..size.saturating_sub(1)]).into_owned();
            let mut lowered = Vec::new();
            for (name, name_c) in names.iter().zip(&names_c) {
                let mut out: *const c_char = std::ptr::null();
                nvrtc.check(
                    (nvrtc.lowered)(program, name_c.as_ptr(), &mut out),
                    &format!("lowered name of `{name}`"),
                )?;
                let entry = CStr::from_ptr(out).to_string_lossy().into_owned();
                lowered.push((name.clone(), entry));
            }
            Ok(Compiled {
                ptx,
                names: lowered,
                kernels: kernel_declarations(source),
            })
        })();
        (nvrtc.destroy)(&mut program);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_kernels_a_source_defines() {
        let source = r#"
            // __global__ void commented(float *x) {}
            /* __global__ void also_commented() {} */
            extern "C" __global__ void scale(float *x, float k) { x[threadIdx.x] *= k; }
            __global__ void __launch_bounds__(256, 2) softmax_kernel(float *out, const float *in) {}
            template <typename T, int N>
            __global__ void reduce(T *out, const T *in) {}
            template __global__ void reduce<float, 256>(float *, const float *);
            static __device__ float helper(float x) { return x; }
            __global__ void
            two_lines(int n) {}
        "#;
        assert_eq!(
            kernel_names(source),
            ["scale", "softmax_kernel", "two_lines"]
        );
    }

    #[test]
    fn declarations_keep_the_signature_as_written_and_say_which_are_templates() {
        let source = r#"
            __global__ void __launch_bounds__(256) scale(float *x,
                                                         int n) {}
            template <typename T, int N>
            __global__ void reduce(T *out, const T *in) {}
            template __global__ void reduce<float, 256>(float *, const float *);
        "#;
        let kernels = kernel_declarations(source);
        assert_eq!(kernels.len(), 2, "{kernels:?}");
        assert_eq!(kernels[0].signature(), "scale(float *x, int n)");
        assert_eq!(
            kernels[1].signature(),
            "template <typename T, int N> reduce(T *out, const T *in)"
        );
    }

    #[test]
    fn the_user_s_architecture_replaces_the_default() {
        assert_eq!(
            options_with_defaults(&["-G".into()]),
            ["-arch=compute_90", "-std=c++17", "-lineinfo", "-G"]
        );
        assert_eq!(
            options_with_defaults(&["-arch=compute_80".into()]),
            ["-std=c++17", "-lineinfo", "-arch=compute_80"]
        );
    }

    #[test]
    fn a_library_that_is_not_there_is_a_clear_error() {
        let err = compile(
            Path::new("/nonexistent/libnvrtc.so.12"),
            "",
            "x.cu",
            &[],
            &[],
            &[],
        )
        .err()
        .unwrap();
        assert!(
            err.starts_with("cannot load NVRTC (/nonexistent/libnvrtc.so.12)"),
            "{err}"
        );
    }
}
