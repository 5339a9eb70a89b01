//! A parser for the PTX this project ships: LLVM's NVPTX output plus the `{ .reg ...; ... }`
//! scopes that the kernels' inline `asm!` produces.
//!
//! It reads a whole module into [`Module`]: the module-level `.shared` variables (with the
//! `.extern .shared` array of dynamic shared memory), and per `.entry`/`.func` its parameters
//! (type, size, alignment, byte offset), its registers (every `%r<N>` range expanded, every
//! inline-asm scope's own registers kept apart: two scopes' `t` are two registers) and its body
//! as a flat list of [`Statement`]s: labels, instructions, scope boundaries. An instruction keeps
//! its PTX line, its text, its guard predicate, its opcode split at the dots, and its operands
//! with registers already resolved to [`RegId`]s.
//!
//! It does not check types or semantics: that is the decoder's job (`ptx::exec`) and the static
//! check's. It fails, naming the line, only on text it cannot read.
//!
//! ```
//! let text = ".version 7.8\n.target sm_90\n.address_size 64\n\
//!             .visible .entry k(.param .u64 k_param_0, .param .u32 k_param_1)\n{\n\tret;\n}\n";
//! let module = ptx::parse::parse(text).unwrap();
//! let k = module.function("k").unwrap();
//! assert!(k.entry);
//! assert_eq!(k.params.len(), 2);
//! assert!(k.instructions().any(|i| i.opcode == "ret"));
//! ```

use std::fmt;

mod body;
use body::{body_end, function, function_name};

/// A PTX module.
#[derive(Debug)]
pub struct Module<'a> {
    /// `.version`, e.g. `"7.8"`.
    pub version: &'a str,
    /// `.target`, e.g. `"sm_90"`.
    pub target: &'a str,
    /// Module-level `.shared` variables, in declaration order.
    pub shared: Vec<SharedVar<'a>>,
    /// `.entry` and `.func` definitions with a body, in order.
    pub functions: Vec<Function<'a>>,
    /// Functions whose body could not be read: the rest of the module still parses, and only
    /// these (and whatever calls them) are refused.
    pub broken: Vec<Broken<'a>>,
    /// `.file` directives: (index, path).
    pub files: Vec<(u32, &'a str)>,
    /// Module-level `.global` and `.const` variables, with their initial bytes.
    pub globals: Vec<GlobalVar<'a>>,
}

/// A `.global` or `.const` variable: device memory the module itself declares (a CUDA
/// `__device__` or `__constant__` variable, a lookup table).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobalVar<'a> {
    pub name: &'a str,
    pub align: u32,
    pub bytes: u64,
    /// `.const`: read-only.
    pub constant: bool,
    /// The initial value, little-endian, as far as the initialiser gives it (the rest is
    /// zeros, which the device's zeroed memory already holds: a large variable is not
    /// materialised twice).
    pub init: Vec<u8>,
}

/// A function whose text could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Broken<'a> {
    /// Its name.
    pub name: &'a str,
    /// `.entry` rather than `.func`.
    pub entry: bool,
    /// What could not be read, and where.
    pub error: ParseError,
}

/// A `.shared` variable (at module level, or in a function body: what NVVM makes of a
/// `__shared__` array declared inside a kernel), a `.local` array or a `.param` declared in a
/// body: the syntax is the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedVar<'a> {
    /// Its name (what `cvta.shared` and `mov` refer to).
    pub name: &'a str,
    /// `.align` (the element size when absent).
    pub align: u32,
    /// Size in bytes; `None` for the `.extern .shared` array with no size (dynamic shared memory).
    pub bytes: Option<u64>,
    /// `.extern`.
    pub external: bool,
    /// 1-based PTX line.
    pub line: u32,
}

/// An `.entry` (kernel) or `.func` (device function) with a body.
#[derive(Debug)]
pub struct Function<'a> {
    /// Its name.
    pub name: &'a str,
    /// `.entry` (a kernel) rather than `.func`.
    pub entry: bool,
    /// 1-based PTX line of the header.
    pub line: u32,
    /// Parameters in order, with their byte offsets in the parameter buffer.
    pub params: Vec<Param<'a>>,
    /// Every register, indexed by [`RegId`].
    pub registers: Vec<Register>,
    /// The body, flattened.
    pub body: Vec<Statement<'a>>,
    /// `.maxntid x, y, z` (missing components 1): the most threads a block launched with it may
    /// have.
    pub maxntid: Option<[u32; 3]>,
    /// `.func (.param .b32 r) f(...)`: the return parameters, laid out as `params` are.
    pub returns: Vec<Param<'a>>,
    /// `.shared` variables declared in the body (function scope).
    pub shared: Vec<SharedVar<'a>>,
    /// `.local` arrays declared in the body (the stack frame, `__local_depotN`).
    pub locals: Vec<SharedVar<'a>>,
    /// `.param` variables declared in the body: a call's arguments and return values.
    pub param_vars: Vec<SharedVar<'a>>,
}

impl<'a> Function<'a> {
    /// The body's instructions, in order.
    pub fn instructions(&self) -> impl Iterator<Item = &Instruction<'a>> {
        self.body.iter().filter_map(|s| match s {
            Statement::Instruction(i) => Some(i),
            _ => None,
        })
    }

    /// The index in [`Function::body`] of `label`'s statement.
    pub fn label(&self, label: &str) -> Option<usize> {
        self.body
            .iter()
            .position(|s| matches!(s, Statement::Label { name, .. } if *name == label))
    }

    /// The parameter called `name`.
    pub fn param(&self, name: &str) -> Option<(usize, &Param<'a>)> {
        self.params.iter().enumerate().find(|(_, p)| p.name == name)
    }
}

/// An entry or function parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param<'a> {
    /// Its name, as `ld.param` addresses it.
    pub name: &'a str,
    /// The element type without its dot: `u64`, `u32`, `f32`, `b8`...
    pub ty: &'a str,
    /// Size in bytes (element size times array length).
    pub bytes: u32,
    /// Alignment in bytes (`.align`, else the element size).
    pub align: u32,
    /// Byte offset in the parameter buffer: the previous parameter's end rounded up to `align`.
    pub offset: u32,
    /// The `.ptr` state space annotation, if any (`.ptr .global`); `Some("")` for a bare `.ptr`.
    pub ptr: Option<&'a str>,
}

/// A register's index in [`Function::registers`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegId(pub u32);

/// A declared register.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Register {
    /// Its name, e.g. `%r12`, or `t` in an inline-asm scope.
    pub name: String,
    /// Its type without the dot: `pred`, `b16`, `b32`, `b64`, `f32`, `u64`...
    pub ty: String,
    /// 0 for the function's own registers; `n` for the n-th nested scope (1-based, counted in
    /// order of appearance), so two scopes' registers of the same name stay distinct.
    pub scope: u32,
}

impl Register {
    /// Width in bits (1 for a predicate).
    pub fn bits(&self) -> u32 {
        type_bits(&self.ty).unwrap_or(64)
    }
}

/// The bit width of a PTX fundamental type name (`u32`, `f16x2`, `pred`...).
pub fn type_bits(ty: &str) -> Option<u32> {
    Some(match ty {
        "pred" => 1,
        "b8" | "u8" | "s8" => 8,
        "b16" | "u16" | "s16" | "f16" | "bf16" => 16,
        "b32" | "u32" | "s32" | "f32" | "f16x2" | "bf16x2" | "tf32" => 32,
        "b64" | "u64" | "s64" | "f64" => 64,
        "b128" => 128,
        _ => return None,
    })
}

/// One statement of a function body.
#[derive(Debug)]
pub enum Statement<'a> {
    /// `name:`: a branch target.
    Label {
        /// The label.
        name: &'a str,
        /// 1-based PTX line.
        line: u32,
    },
    /// An instruction.
    Instruction(Instruction<'a>),
    /// `{`: a nested scope opens (its `.reg`s are in [`Function::registers`] with its number).
    ScopeOpen {
        /// The scope's number, as in [`Register::scope`].
        scope: u32,
        /// 1-based PTX line.
        line: u32,
    },
    /// `}`: the innermost scope closes.
    ScopeClose {
        /// 1-based PTX line.
        line: u32,
    },
    /// A directive inside a body that is not a register declaration (`.pragma`, `.loc`,
    /// `.local` arrays...), kept as written.
    Directive {
        /// The text, without its `;`.
        text: &'a str,
        /// 1-based PTX line.
        line: u32,
    },
}

/// One instruction.
#[derive(Debug)]
pub struct Instruction<'a> {
    /// 1-based PTX line.
    pub line: u32,
    /// The instruction as written (guard included), without its `;`.
    pub text: &'a str,
    /// `@%p` / `@!%p`.
    pub guard: Option<Guard>,
    /// The whole opcode, e.g. `ld.global.v4.b32`.
    pub opcode: &'a str,
    /// The opcode split at its dots: `["ld", "global", "v4", "b32"]`.
    pub parts: Vec<&'a str>,
    /// The operands, in order (destination first, as PTX writes them).
    pub operands: Vec<Operand<'a>>,
    /// The source position the last `.loc` before it gives: (file index, line).
    pub loc: Option<(u32, u32)>,
}

impl<'a> Instruction<'a> {
    /// Whether the opcode has the part `p` (e.g. `"aligned"`, `"ftz"`, `"global"`).
    pub fn has(&self, p: &str) -> bool {
        self.parts.contains(&p)
    }

    /// Whether it writes no register: PTX writes the destination first, except for the opcodes
    /// whose first operand is read (a store's address, a barrier's number, a branch's label, a
    /// call's return values) and wherever the first operand is no register, vector, pair or
    /// sink (`mbarrier.init [bar], n`).
    pub fn writes_nothing(&self) -> bool {
        matches!(
            self.parts[0],
            "bar"
                | "barrier"
                | "bra"
                | "brx"
                | "call"
                | "ret"
                | "exit"
                | "trap"
                | "st"
                | "red"
                | "cp"
                | "membar"
                | "fence"
                | "prefetch"
                | "prefetchu"
                | "nanosleep"
                | "stmatrix"
                | "griddepcontrol"
                | "setmaxnreg"
                | "pmevent"
        ) || (self.parts[0] == "wmma" && self.has("store"))
            || !matches!(
                self.operands.first(),
                Some(Operand::Reg(_) | Operand::Vector(_) | Operand::Pair(..) | Operand::Sink)
            )
    }

    /// The registers it writes: its first operand's (a register, a vector of them, a `d|p`
    /// pair), unless it [writes nothing](Self::writes_nothing).
    pub fn destinations(&self) -> Vec<RegId> {
        let mut out = Vec::new();
        if !self.writes_nothing() {
            self.operands[0].registers(&mut out);
        }
        out
    }

    /// The operands it reads (its guard aside): all but the destination.
    pub fn sources(&self) -> &[Operand<'a>] {
        let skip = usize::from(!self.writes_nothing());
        &self.operands[skip..]
    }
}

/// An instruction's guard predicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Guard {
    /// The predicate register.
    pub reg: RegId,
    /// `@!%p`: the instruction runs when the predicate is false.
    pub negated: bool,
}

/// An operand.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand<'a> {
    /// A declared register.
    Reg(RegId),
    /// A special register: `%tid.x`, `%ntid.y`, `%ctaid.z`, `%nctaid.x`, `%laneid`, `%warpid`...
    Special(&'a str),
    /// An integer constant (decimal, `0x` hex, octal; negative values two's complement).
    Int(i64),
    /// A float constant `0fXXXXXXXX`, as its f32 bits.
    F32(u32),
    /// A float constant `0dXXXXXXXXXXXXXXXX`, as its f64 bits.
    F64(u64),
    /// A name that is not a register: a label, a variable, a parameter.
    Symbol(&'a str),
    /// `[base+offset]`.
    Address {
        /// The register or symbol the address starts from (`None` for an absolute `[imm]`).
        base: Option<Box<Operand<'a>>>,
        /// The constant offset.
        offset: i64,
    },
    /// `{a, b, ...}`.
    Vector(Vec<Operand<'a>>),
    /// `_`: a sink (a result nobody reads).
    Sink,
    /// `a|b`: two destinations (`shfl.sync`'s value and predicate, `setp`'s two predicates).
    Pair(Box<Operand<'a>>, Box<Operand<'a>>),
    /// `!p`: a negated predicate source (`setp.and`'s third operand, `selp`...).
    Not(Box<Operand<'a>>),
    /// `[map, {c0, c1, ...}]`: a tensor map's address and a box's coordinates
    /// (`cp.async.bulk.tensor`).
    Tensor {
        /// The tensor map's address.
        map: Box<Operand<'a>>,
        /// The box's element coordinates, dimension 0 first.
        coords: Vec<Operand<'a>>,
    },
}

impl Operand<'_> {
    /// Every register the operand names: itself, a vector's or a pair's, a negated predicate's,
    /// an address's base, a tensor map's address and coordinates.
    pub fn registers(&self, out: &mut Vec<RegId>) {
        match self {
            Operand::Reg(r) => out.push(*r),
            Operand::Vector(v) => v.iter().for_each(|o| o.registers(out)),
            Operand::Pair(a, b) => {
                a.registers(out);
                b.registers(out);
            }
            Operand::Not(a) => a.registers(out),
            Operand::Address { base: Some(b), .. } => b.registers(out),
            Operand::Tensor { map, coords } => {
                map.registers(out);
                coords.iter().for_each(|o| o.registers(out));
            }
            _ => {}
        }
    }
}

/// A parse error: the line and what is wrong there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based PTX line.
    pub line: u32,
    /// What could not be read.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The message quotes the file's text, which may hold control characters (a NUL): each
        // is shown escaped, never written raw to the terminal.
        write!(f, "PTX line {}: ", self.line)?;
        for c in self.message.chars() {
            if c.is_control() && c != '\t' {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for ParseError {}

impl<'a> Module<'a> {
    /// The function (entry or not) called `name`.
    pub fn function(&self, name: &str) -> Option<&Function<'a>> {
        self.functions.iter().find(|f| f.name == name)
    }

    /// The module-level shared variable called `name`.
    pub fn shared_var(&self, name: &str) -> Option<&SharedVar<'a>> {
        self.shared.iter().find(|v| v.name == name)
    }
}

/// A raw statement as the scanner splits the text.
#[derive(Debug)]
enum Raw<'a> {
    /// Text ending with `;`, trimmed, without it.
    Stmt(&'a str, u32),
    /// A function header (`.visible .entry f(...)`), ending where its body's `{` opens.
    Header(&'a str, u32),
    Label(&'a str, u32),
    Open(u32),
    Close(u32),
}

/// Splits `text` into statements, labels and braces. Comments (`//` to end of line, `/* */`)
/// are removed first, keeping line numbers.
fn scan(text: &str) -> Vec<Raw<'_>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut line = 1u32;
    let mut start: Option<(usize, u32)> = None; // start of the statement being accumulated
    let mut depth_in_stmt = 0usize; // braces opened inside the current statement
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && bytes.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                if bytes[i] == b'\n' {
                    line += 1;
                }
                i += 1;
            }
            i += 2;
            continue;
        }
        if c == b'"' {
            // A string (`.file 1 "path"`, `.pragma "nounroll"`): part of the statement.
            if start.is_none() {
                start = Some((i, line));
            }
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += 1;
            }
            i += 1;
            continue;
        }
        match c {
            b'\n' => {
                // A label ends its line: `$L__BB0_2:`.
                if let Some((s, l)) = start {
                    let t = text[s..i].trim();
                    if depth_in_stmt == 0 && t.ends_with(':') && !t.contains(char::is_whitespace) {
                        out.push(Raw::Label(&t[..t.len() - 1], l));
                        start = None;
                    } else if depth_in_stmt == 0 && ends_at_newline(t) {
                        out.push(Raw::Stmt(t, l));
                        start = None;
                    }
                }
                line += 1;
            }
            b';' if depth_in_stmt == 0 => {
                if let Some((s, l)) = start.take() {
                    out.push(Raw::Stmt(text[s..i].trim(), l));
                }
            }
            b'{' => match start {
                None => out.push(Raw::Open(line)),
                // `.section .debug_info { .b8 ... }`: DWARF data, nothing to execute.
                Some((s, _)) if text[s..i].trim_start().starts_with(".section") => {
                    while i < bytes.len() && bytes[i] != b'}' {
                        if bytes[i] == b'\n' {
                            line += 1;
                        }
                        i += 1;
                    }
                    start = None;
                }
                Some((s, l)) if is_header(&text[s..i]) => {
                    out.push(Raw::Header(text[s..i].trim(), l));
                    out.push(Raw::Open(line));
                    start = None;
                }
                Some(_) => depth_in_stmt += 1,
            },
            b'}' => {
                if start.is_none() {
                    out.push(Raw::Close(line));
                } else {
                    depth_in_stmt = depth_in_stmt.saturating_sub(1);
                }
            }
            c if c.is_ascii_whitespace() => {}
            _ => {
                if start.is_none() {
                    start = Some((i, line));
                }
                // A label followed by more text on its line: `L: add ...` (not the `::` of a
                // state-space qualifier, `.shared::cta`).
                if c == b':'
                    && depth_in_stmt == 0
                    && bytes.get(i + 1) != Some(&b':')
                    && (i == 0 || bytes[i - 1] != b':')
                {
                    let (s, l) = start.unwrap();
                    let t = text[s..i].trim();
                    if !t.is_empty() && !t.contains(char::is_whitespace) && !t.starts_with('.') {
                        out.push(Raw::Label(t, l));
                        start = None;
                    }
                }
            }
        }
        i += 1;
    }
    // Text after the last `;` (a statement that never ends): kept, so that it is read and
    // refused rather than dropped.
    if let Some((s, l)) = start
        && !text[s..].trim().is_empty()
    {
        out.push(Raw::Stmt(text[s..].trim(), l));
    }
    out
}

/// Directives that end at the end of their line rather than at a `;`.
fn ends_at_newline(t: &str) -> bool {
    let word = t.split_whitespace().next().unwrap_or("");
    matches!(
        word,
        ".version" | ".target" | ".address_size" | ".file" | ".loc"
    )
        // A misspelt header directive (`.vesion 8.0`) ends at its line too, so that it is
        // refused by name rather than read as the start of the next statement.
        || (word.starts_with('.')
            && [".version", ".target", ".address_size"]
                .iter()
                .any(|k| edit_distance(k, word) <= 2))
}

fn is_header(text: &str) -> bool {
    text.split_whitespace()
        .any(|w| w == ".entry" || w == ".func" || w.starts_with(".entry") || w == ".kernel")
}

/// Parses a whole PTX module.
pub fn parse(text: &str) -> Result<Module<'_>, ParseError> {
    let raws = scan(text);
    let mut module = Module {
        version: "",
        target: "",
        shared: Vec::new(),
        functions: Vec::new(),
        broken: Vec::new(),
        files: Vec::new(),
        globals: Vec::new(),
    };
    let mut i = 0;
    while i < raws.len() {
        match raws[i] {
            Raw::Stmt(s, line) => module_directive(&mut module, s, line)?,
            Raw::Header(h, line) => {
                // A body that cannot be read refuses that function only: its name (which the
                // header gives) is kept with the error, and parsing goes on after its `}`.
                let name = function_name(h, line)?;
                let end = body_end(&raws, i + 1)
                    .ok_or_else(|| err(line, format!("function `{name}` has no closing brace")))?;
                match function(h, line, &raws[..end], i + 1) {
                    Ok((function, _)) => module.functions.push(function),
                    Err(error) => module.broken.push(Broken {
                        name,
                        entry: h.split_whitespace().any(|w| w == ".entry"),
                        error,
                    }),
                }
                i = end;
                continue;
            }
            // A label between sections (`$L__sec_end0:` of the DWARF data) marks no code.
            Raw::Label(..) => {}
            Raw::Open(line) | Raw::Close(line) => {
                return Err(err(line, "label or brace outside a function"));
            }
        }
        i += 1;
    }
    Ok(module)
}

/// Levenshtein distance between two short words (a misspelt directive's nearest known one).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != cb));
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

fn err(line: u32, message: impl Into<String>) -> ParseError {
    ParseError {
        line,
        message: message.into(),
    }
}

fn module_directive<'a>(module: &mut Module<'a>, s: &'a str, line: u32) -> Result<(), ParseError> {
    let words: Vec<&str> = s.split_whitespace().collect();
    match words.first().copied() {
        Some(".version") => {
            let version = words.get(1).copied().unwrap_or("");
            // PTX ISA versions: 1.0 to 9.x.
            let known = version.split_once('.').is_some_and(|(major, minor)| {
                matches!(major.parse::<u32>(), Ok(1..=9))
                    && major.len() == 1
                    && (1..=2).contains(&minor.len())
                    && minor.bytes().all(|b| b.is_ascii_digit())
            });
            if !known || words.len() > 2 {
                return Err(err(
                    line,
                    format!("`{s}`: expected a PTX ISA version, 1.0 to 9.x (e.g. `.version 8.0`)"),
                ));
            }
            module.version = version;
        }
        Some(".target") => {
            let target = words.get(1).map_or("", |t| t.trim_end_matches(','));
            // `sm_NN` or `sm_NNN`, with an optional `a` or `f` (sm_90a, sm_100f).
            let arch = target.strip_prefix("sm_").unwrap_or("");
            let digits = arch.trim_end_matches(['a', 'f']);
            let known = (2..=3).contains(&digits.len())
                && digits.bytes().all(|b| b.is_ascii_digit())
                && arch.len() <= digits.len() + 1;
            if !known {
                return Err(err(
                    line,
                    format!(
                        "`{s}`: expected a GPU architecture sm_NN (e.g. `.target sm_90`, `sm_90a`)"
                    ),
                ));
            }
            module.target = target;
        }
        Some(".address_size") if words.get(1) != Some(&"64") => {
            return Err(err(
                line,
                format!("`{s}`: the backends run 64-bit PTX only (`.address_size 64`)"),
            ));
        }
        Some(".file") => {
            let index = words
                .get(1)
                .and_then(|w| w.parse().ok())
                .ok_or_else(|| err(line, format!("bad .file: `{s}`")))?;
            let path = s
                .split('"')
                .nth(1)
                .ok_or_else(|| err(line, format!("bad .file: `{s}`")))?;
            module.files.push((index, path));
        }
        _ if words.contains(&".shared") => module.shared.push(shared_var(s, line)?),
        _ if (words.contains(&".global") || words.contains(&".const"))
            && !words.contains(&".func") =>
        {
            let var = global_var(s, line)?;
            // The constant bank a kernel's `.const` variables share: 64 KiB on every GPU.
            const CONST_BANK: u64 = 64 * 1024;
            let constants = module.globals.iter().filter(|g| g.constant);
            let total = constants
                .map(|g| g.bytes)
                .fold(var.bytes, u64::saturating_add);
            if var.constant && total > CONST_BANK {
                return Err(err(
                    line,
                    format!(
                        "`.const` variable `{}` takes the module's constants to {total} bytes, past the 64 KiB constant bank",
                        var.name
                    ),
                ));
            }
            module.globals.push(var)
        }
        // `.address_size`, prototypes of functions (defined later or external), debug data:
        // nothing the backends need; kept out rather than misread.
        Some(
            ".address_size" | ".extern" | ".weak" | ".visible" | ".common" | ".section" | ".pragma"
            | ".alias" | ".loc" | ".func" | ".entry",
        ) => {}
        Some(word) => {
            let known = [
                ".version",
                ".target",
                ".address_size",
                ".file",
                ".extern",
                ".visible",
            ];
            let near = known
                .iter()
                .find(|k| edit_distance(k, word) <= 2)
                .map(|k| format!(" (did you mean `{k}`?)"))
                .unwrap_or_default();
            return Err(err(line, format!("unknown directive `{word}`{near}")));
        }
        None => {}
    }
    Ok(())
}

/// `[.visible] .global|.const [.align A] .type name[N] [= {v, ...} | = v]`.
fn global_var(s: &str, line: u32) -> Result<GlobalVar<'_>, ParseError> {
    let (decl, init) = match s.split_once('=') {
        Some((d, i)) => (d.trim(), Some(i.trim())),
        None => (s, None),
    };
    let var = shared_var(decl, line)?;
    let ty = decl
        .split_whitespace()
        .filter_map(|w| w.strip_prefix('.'))
        .find(|w| type_bits(w).is_some())
        .ok_or_else(|| err(line, format!("variable without a type: `{s}`")))?;
    let elem = type_bits(ty).unwrap().div_ceil(8) as usize;
    let bytes = var.bytes.ok_or_else(|| {
        err(
            line,
            format!("a .global or .const array needs a size: `{s}`"),
        )
    })?;
    let mut bytes_out = Vec::new();
    if let Some(init) = init {
        let list = init.trim_start_matches('{').trim_end_matches('}');
        for v in list.split(',').map(str::trim).filter(|v| !v.is_empty()) {
            let bits = if let Some(h) = v.strip_prefix("0f").or_else(|| v.strip_prefix("0F")) {
                u64::from_str_radix(h, 16).ok()
            } else if let Some(h) = v.strip_prefix("0d").or_else(|| v.strip_prefix("0D")) {
                u64::from_str_radix(h, 16).ok()
            } else if ty.starts_with('f') {
                // A decimal float literal.
                v.parse::<f64>().ok().map(|x| {
                    if elem == 4 {
                        u64::from((x as f32).to_bits())
                    } else {
                        x.to_bits()
                    }
                })
            } else {
                int(v).map(|x| x as u64)
            };
            let bits = bits.ok_or_else(|| {
                err(line, format!("cannot read initial value `{v}` (addresses of variables are not implemented)"))
            })?;
            bytes_out.extend_from_slice(&bits.to_le_bytes()[..elem]);
            if bytes_out.len() as u64 > bytes {
                return Err(err(
                    line,
                    format!("more initial values than `{}` holds", var.name),
                ));
            }
        }
    }
    Ok(GlobalVar {
        name: var.name,
        align: var.align,
        bytes,
        constant: decl.split_whitespace().any(|w| w == ".const"),
        init: bytes_out,
    })
}

/// `[.extern] .shared .align A .b8 name[N]`.
fn shared_var(s: &str, line: u32) -> Result<SharedVar<'_>, ParseError> {
    let words: Vec<&str> = s.split_whitespace().collect();
    let mut align = None;
    let mut elem = 1u32;
    let mut decl = None;
    let mut k = 0;
    while k < words.len() {
        match words[k] {
            ".align" => {
                align = words.get(k + 1).and_then(|a| a.parse().ok());
                k += 1;
            }
            w if w.starts_with('.') => {
                if let Some(bits) = type_bits(&w[1..]) {
                    elem = bits.div_ceil(8);
                }
            }
            w => decl = Some(w),
        }
        k += 1;
    }
    let decl = decl.ok_or_else(|| err(line, format!("shared variable without a name: `{s}`")))?;
    let (name, bytes) = match decl.split_once('[') {
        Some((name, rest)) => {
            let n = rest.trim_end_matches(']');
            let bytes = if n.is_empty() {
                None
            } else {
                let n: u64 = n
                    .parse()
                    .map_err(|_| err(line, format!("bad array size in `{s}`")))?;
                let bytes = n
                    .checked_mul(u64::from(elem))
                    .ok_or_else(|| err(line, format!("array size overflows 64 bits in `{s}`")))?;
                // The ISA's limits (sm_90), before anything is allocated for it.
                let limit = if words.contains(&".shared") {
                    Some((227 * 1024, "227 KiB of shared memory a block can have"))
                } else if words.contains(&".local") {
                    Some((512 * 1024, "512 KiB of local memory a thread has"))
                } else {
                    None
                };
                if let Some((limit, what)) = limit
                    && bytes > limit
                {
                    return Err(err(
                        line,
                        format!("`{s}` declares {bytes} bytes, more than the {what} (sm_90)"),
                    ));
                }
                Some(bytes)
            };
            (name, bytes)
        }
        None => (decl, Some(u64::from(elem))),
    };
    Ok(SharedVar {
        name,
        align: align.unwrap_or(elem),
        bytes,
        external: words.contains(&".extern"),
        line,
    })
}

/// An integer literal: decimal, `0x` hex, `0b` binary, octal with a leading 0, optional `U`.
fn int(s: &str) -> Option<i64> {
    let s = s.trim().trim_end_matches('U');
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    if s.is_empty() || !s.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    let v = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()?
    } else if let Some(b) = s.strip_prefix("0b").or_else(|| s.strip_prefix("0B")) {
        u64::from_str_radix(b, 2).ok()?
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()?
    } else {
        s.parse::<u64>().ok()?
    };
    let v = v as i64;
    Some(if neg { v.wrapping_neg() } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
.version 7.8
.target sm_90
.address_size 64
.shared .align 4 .b8 buf[64];
.extern .shared .align 16 .b8 dyn[];

.visible .entry k(
	.param .u64 .ptr .align 1 k_param_0,
	.param .u32 k_param_1,
	.param .align 8 .b8 k_param_2[12]
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<10>;
	.reg .b64 	%rd<4>;

	ld.param.b64 	%rd1, [k_param_0+8];
	mov.u32 	%r1, %tid.x;
	setp.ne.b32 	%p1, %r1, 0;
	@!%p1 bra 	$L__BB0_2;
	{ .reg .b32 t; cvt.u32.u16 t, %r1; shl.b32 %r2, t, 16; }
	{ .reg .b32 t; mov.b32 t, 0f3F800000; }
$L__BB0_2:
	ld.global.v4.b32 {%r3, %r4, %r5, %r6}, [%rd1+-16];
	shfl.sync.bfly.b32 %r7|%p2, %r3, 1, 0x1f, -1;
	setp.lt.and.s32 %p2, %r1, %r2, !%p1;
	ret;
}
"#;

    #[test]
    fn a_hand_written_module() {
        let m = parse(SAMPLE).unwrap();
        assert_eq!(m.shared.len(), 2);
        assert_eq!(m.shared[0].bytes, Some(64));
        assert_eq!(m.shared[0].align, 4);
        assert!(m.shared[1].external);
        let f = m.function("k").unwrap();
        assert_eq!(f.params[2].bytes, 12);
        assert_eq!(f.params[2].offset, 16);
        assert_eq!(f.registers.len(), 3 + 10 + 4 + 2);
        let instrs: Vec<&Instruction> = f.instructions().collect();
        assert_eq!(instrs.len(), 11);
        assert_eq!(instrs[0].line, 18);
        assert_eq!(
            instrs[0].operands[1],
            Operand::Address {
                base: Some(Box::new(Operand::Symbol("k_param_0"))),
                offset: 8
            }
        );
        assert_eq!(instrs[1].operands[1], Operand::Special("%tid.x"));
        assert_eq!(
            instrs[3].guard,
            Some(Guard {
                reg: RegId(1),
                negated: true
            })
        );
        assert_eq!(instrs[3].operands[0], Operand::Symbol("$L__BB0_2"));
        // Two scopes' `t` are two registers, both distinct from the function's own.
        let t1 = &instrs[4].operands[0];
        let t2 = &instrs[6].operands[0];
        assert_ne!(t1, t2);
        let Operand::Reg(id) = t2 else { panic!() };
        assert_eq!(f.registers[id.0 as usize].scope, 2);
        assert_eq!(instrs[6].operands[1], Operand::F32(0x3F80_0000));
        assert_eq!(instrs[5].line, instrs[4].line);
        let label = f.label("$L__BB0_2").expect("the label is in the body");
        assert!(matches!(f.body[label], Statement::Label { line: 24, .. }));
        let Operand::Vector(v) = &instrs[7].operands[0] else {
            panic!()
        };
        assert_eq!(v.len(), 4);
        assert_eq!(
            instrs[7].operands[1],
            Operand::Address {
                base: Some(Box::new(Operand::Reg(RegId(3 + 10 + 1)))),
                offset: -16
            }
        );
        assert!(matches!(instrs[8].operands[0], Operand::Pair(..)));
        assert_eq!(instrs[8].operands[4], Operand::Int(-1));
        assert_eq!(instrs[8].parts, ["shfl", "sync", "bfly", "b32"]);
        assert_eq!(
            instrs[9].operands[3],
            Operand::Not(Box::new(Operand::Reg(RegId(1))))
        );
    }

    #[test]
    fn line_tables_and_debug_sections() {
        let text = SAMPLE.replacen(
            "\tmov.u32 \t%r1, %tid.x;",
            "\t.loc\t2 55 5\n\tmov.u32 \t%r1, %tid.x;",
            1,
        ) + "\t.file\t2 \"/src/kernels/src/lib.rs\"\n\t.section\t.debug_abbrev\n\t{\n.b8 1\n.b8 17\n\t}\n";
        let m = parse(&text).unwrap();
        assert_eq!(m.files, [(2, "/src/kernels/src/lib.rs")]);
        let f = m.function("k").unwrap();
        let instrs: Vec<&Instruction> = f.instructions().collect();
        assert_eq!(instrs[0].loc, None);
        assert_eq!(instrs[1].loc, Some((2, 55)));
        assert_eq!(instrs[1].operands[1], Operand::Special("%tid.x"));
    }

    #[test]
    fn bad_text_names_its_line() {
        let e = parse(".version 7.8\n.visible .entry k()\n{\n add.s32 %r1, 1;\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        // Inside a body, the error is that function's alone: the module still parses.
        let m =
            parse(".visible .entry k()\n{\n @%p9 bra L;\n}\n.visible .entry ok()\n{\n ret;\n}\n")
                .unwrap();
        assert_eq!(m.broken.len(), 1);
        assert_eq!((m.broken[0].name, m.broken[0].entry), ("k", true));
        assert_eq!(m.broken[0].error.line, 3, "{}", m.broken[0].error);
        assert!(m.function("ok").is_some());
    }

    /// The two slips a hand edit makes: a misspelt directive is named (with the one it is
    /// closest to), not ignored; a missing `;` is named at its line, not taken for an operand.
    #[test]
    fn a_misspelt_directive_and_a_missing_semicolon_are_named() {
        let e = parse(".versoin 8.0\n.target sm_90\n.address_size 64\n").unwrap_err();
        assert_eq!(e.line, 1, "{e}");
        assert!(
            e.message.contains("unknown directive `.versoin`")
                && e.message.contains("did you mean `.version`"),
            "{e}"
        );
        let m = parse(
            ".version 8.0\n.visible .entry k()\n{\n .reg .b32 %r<3>;\n mov.u32 %r1, %tid.x\n add.s32 %r2, %r1, 1;\n ret;\n}\n",
        )
        .unwrap();
        let e = &m.broken[0].error;
        assert_eq!(e.line, 5, "{e}");
        assert!(
            e.message.contains("missing `;`") && e.message.contains("add.s32 %r2, %r1, 1"),
            "{e}"
        );
        // An instruction split over lines is one instruction.
        let m = parse(
            ".version 8.0\n.visible .entry k()\n{\n .reg .b32 %r<3>;\n add.s32 %r2,\n  %r1,\n  1;\n ret;\n}\n",
        )
        .unwrap();
        assert!(
            m.broken.is_empty(),
            "{:?}",
            m.broken.first().map(|b| b.error.to_string())
        );
        assert_eq!(edit_distance(".versoin", ".version"), 2);
    }

    #[test]
    fn calls_and_function_scope_declarations() {
        let text = "\
.func  (.param .b32 func_retval0) f(
	.param .b32 f_param_0
)
{
	.reg .b32 %r<3>;
	.local .align 4 .b8 __local_depot0[16];
	.shared .align 4 .b8 f_tile[64];
	ld.param.b32 %r1, [f_param_0];
	st.param.b32 [func_retval0+0], %r1;
	ret;
}
.visible .entry k()
{
	.reg .b32 %r<3>;
	{ // callseq 0, 0
	.param .b32 param0;
	st.param.b32 [param0+0], 7;
	.param .b32 retval0;
	call.uni (retval0), 
	f, 
	(
	param0
	);
	ld.param.b32 %r1, [retval0+0];
	}
	ret;
}
";
        let m = parse(text).unwrap();
        let f = m.function("f").unwrap();
        assert_eq!(f.returns.len(), 1);
        assert_eq!((f.returns[0].name, f.returns[0].bytes), ("func_retval0", 4));
        assert_eq!(f.params[0].name, "f_param_0");
        assert_eq!(
            (f.locals[0].name, f.locals[0].bytes),
            ("__local_depot0", Some(16))
        );
        assert_eq!((f.shared[0].name, f.shared[0].bytes), ("f_tile", Some(64)));
        let k = m.function("k").unwrap();
        let names: Vec<&str> = k.param_vars.iter().map(|v| v.name).collect();
        assert_eq!(names, ["param0", "retval0"]);
        let call = k.instructions().find(|i| i.opcode == "call.uni").unwrap();
        assert_eq!(
            call.operands,
            [
                Operand::Vector(vec![Operand::Symbol("retval0")]),
                Operand::Symbol("f"),
                Operand::Vector(vec![Operand::Symbol("param0")]),
            ]
        );
    }
}
