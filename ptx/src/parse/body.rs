//! A function's header and body: its parameters, `.maxntid`, register declarations (every
//! inline-asm scope's own names kept apart), labels and instructions with their operands resolved.

use std::collections::HashMap;

use super::{
    Function, Guard, Instruction, Operand, Param, ParseError, Raw, RegId, Register, Statement, err,
    int, shared_var, type_bits,
};

/// One scope's register names: explicit names, and `%r<N>` ranges (prefix -> (first id, count)).
type Scope<'a> = (HashMap<&'a str, RegId>, HashMap<&'a str, (u32, u32)>);

/// Scopes of register names while a body is parsed.
#[derive(Default)]
struct Scopes<'a> {
    /// Innermost last: explicit names and `%r<N>` ranges (prefix -> (first id, count)).
    stack: Vec<Scope<'a>>,
}

impl<'a> Scopes<'a> {
    fn lookup(&self, name: &str) -> Option<RegId> {
        let digits = name.trim_start_matches(|c: char| !c.is_ascii_digit());
        let split = name.len() - digits.len();
        for (names, ranges) in self.stack.iter().rev() {
            if let Some(&id) = names.get(name) {
                return Some(id);
            }
            let numbered = split > 0 && !digits.is_empty();
            if let Some(&(first, count)) = ranges.get(&name[..split]).filter(|_| numbered) {
                let n: u32 = digits.parse().ok()?;
                if n < count {
                    return Some(RegId(first + n));
                }
            }
        }
        None
    }
}

/// The index after the `}` that closes the body opening at `raws[i]`.
pub(super) fn body_end(raws: &[Raw], i: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, r) in raws.iter().enumerate().skip(i) {
        match r {
            Raw::Open(_) => depth += 1,
            Raw::Close(_) => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(k + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// The name in a function header: `.func (.param .b32 r) name (...)` has it as the last word
/// before the last `(`.
pub(super) fn function_name(header: &str, line: u32) -> Result<&str, ParseError> {
    let open = header
        .find('(')
        .ok_or_else(|| err(line, "function header without a parameter list"))?;
    let last_open = header.rfind('(').unwrap_or(open);
    header[..last_open]
        .trim_end()
        .rsplit(|c: char| c.is_whitespace() || c == ')')
        .next()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| err(line, "function without a name"))
}

/// Parses a function from its header and the raws after it (starting at its body's `{`).
/// Returns it and the index after its closing `}`.
pub(super) fn function<'a>(
    header: &'a str,
    line: u32,
    raws: &[Raw<'a>],
    mut i: usize,
) -> Result<(Function<'a>, usize), ParseError> {
    let entry = header.split_whitespace().any(|w| w == ".entry");
    let name = function_name(header, line)?;
    let last_open = header.rfind('(').expect("function_name found one");
    let close = header
        .rfind(')')
        .filter(|&c| c > last_open)
        .ok_or_else(|| err(line, "unclosed parameter list"))?;
    let params = params(&header[last_open + 1..close], line)?;
    // `.func (.param .b32 func_retval0) name(...)`: the return list is the first parenthesis
    // when there are two.
    let returns = match header.find('(') {
        Some(first) if first < last_open => {
            let end = header[first..]
                .find(')')
                .map(|e| first + e)
                .filter(|&e| e < last_open)
                .ok_or_else(|| err(line, "unclosed return parameter list"))?;
            self::params(&header[first + 1..end], line)?
        }
        _ => Vec::new(),
    };
    let mut function = Function {
        name,
        entry,
        line,
        params,
        registers: Vec::new(),
        body: Vec::new(),
        maxntid: maxntid(&header[close + 1..], line)?,
        returns,
        shared: Vec::new(),
        locals: Vec::new(),
        param_vars: Vec::new(),
    };
    let mut scopes = Scopes::default();
    let mut depth = 0usize;
    let mut scope_count = 0u32;
    let mut loc = None;
    while i < raws.len() {
        match raws[i] {
            Raw::Open(l) => {
                if depth > 0 {
                    scope_count += 1;
                    function.body.push(Statement::ScopeOpen {
                        scope: scope_count,
                        line: l,
                    });
                }
                depth += 1;
                scopes.stack.push(Default::default());
            }
            Raw::Close(l) => {
                depth -= 1;
                scopes.stack.pop();
                if depth == 0 {
                    return Ok((function, i + 1));
                }
                function.body.push(Statement::ScopeClose { line: l });
            }
            Raw::Label(name, l) => function.body.push(Statement::Label { name, line: l }),
            Raw::Header(_, l) => return Err(err(l, "function inside a function")),
            Raw::Stmt(s, l) => {
                let space = s.split_whitespace().next().unwrap_or("");
                if s.starts_with(".reg") {
                    let scope = if depth > 1 { scope_count } else { 0 };
                    declare(&mut function, &mut scopes, s, l, scope)?;
                } else if matches!(space, ".shared" | ".local" | ".param") {
                    // A call's `.param`s are declared in its own `{ }` scope, and two calls
                    // declare the same names: one variable per name (the largest), which the
                    // thread reuses call after call.
                    let var = shared_var(s, l)?;
                    let list = match space {
                        ".shared" => &mut function.shared,
                        ".local" => &mut function.locals,
                        _ => &mut function.param_vars,
                    };
                    match list.iter_mut().find(|v| v.name == var.name) {
                        Some(v) => {
                            v.bytes = v.bytes.max(var.bytes);
                            v.align = v.align.max(var.align);
                        }
                        None => list.push(var),
                    }
                } else if s.starts_with('.') {
                    if let Some(rest) = s.strip_prefix(".loc") {
                        let mut w = rest.split_whitespace();
                        let file = w.next().and_then(|x| x.parse().ok());
                        let src = w.next().and_then(|x| x.parse().ok());
                        loc = file.zip(src);
                    }
                    function
                        .body
                        .push(Statement::Directive { text: s, line: l });
                } else {
                    let mut instr = instruction(s, l, &scopes)?;
                    instr.loc = loc;
                    function.body.push(Statement::Instruction(instr));
                }
            }
        }
        i += 1;
    }
    Err(err(line, format!("function `{name}` has no closing brace")))
}

/// `.maxntid x[, y[, z]]` among the performance directives after a function's parameters.
fn maxntid(directives: &str, line: u32) -> Result<Option<[u32; 3]>, ParseError> {
    let Some(at) = directives.find(".maxntid") else {
        return Ok(None);
    };
    let rest = &directives[at + ".maxntid".len()..];
    let end = rest.find(['.', '{']).unwrap_or(rest.len());
    let mut dims = [1u32; 3];
    for (k, d) in rest[..end].split(',').enumerate() {
        let v = int(d)
            .and_then(|v| u32::try_from(v).ok())
            .filter(|_| k < 3)
            .ok_or_else(|| err(line, format!("cannot read `.maxntid{}`", &rest[..end])))?;
        dims[k] = v;
    }
    Ok(Some(dims))
}

/// The parameter list between the parentheses.
fn params(list: &str, line: u32) -> Result<Vec<Param<'_>>, ParseError> {
    let mut out: Vec<Param> = Vec::new();
    let mut offset = 0u32;
    for decl in list.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let words: Vec<&str> = decl.split_whitespace().collect();
        if words.first() != Some(&".param") {
            return Err(err(line, format!("not a parameter: `{decl}`")));
        }
        let (mut ty, mut align, mut ptr, mut name) = (None, None, None, None);
        let mut k = 1;
        while k < words.len() {
            match words[k] {
                ".align" => {
                    align = words.get(k + 1).and_then(|a| a.parse().ok());
                    k += 1;
                }
                ".ptr" => {
                    ptr = Some("");
                    let space = words.get(k + 1).and_then(|w| w.strip_prefix('.'));
                    if let Some(space) =
                        space.filter(|s| matches!(*s, "global" | "shared" | "const" | "local"))
                    {
                        ptr = Some(space);
                        k += 1;
                    }
                }
                w if w.starts_with('.') && type_bits(&w[1..]).is_some() => ty = Some(&w[1..]),
                w => name = Some(w),
            }
            k += 1;
        }
        let ty = ty.ok_or_else(|| err(line, format!("parameter without a type: `{decl}`")))?;
        let name = name.ok_or_else(|| err(line, format!("parameter without a name: `{decl}`")))?;
        let elem = type_bits(ty).unwrap().div_ceil(8);
        let (name, count) = match name.split_once('[') {
            Some((n, rest)) => {
                let count: u32 = rest
                    .trim_end_matches(']')
                    .parse()
                    .map_err(|_| err(line, format!("bad parameter array: `{decl}`")))?;
                (n, count)
            }
            None => (name, 1),
        };
        let align = align.unwrap_or(elem);
        offset = offset.next_multiple_of(align.max(1));
        out.push(Param {
            name,
            ty,
            bytes: elem * count,
            align,
            offset,
            ptr,
        });
        offset += elem * count;
    }
    Ok(out)
}

/// `.reg .b32 %r<120>;` or `.reg .u64 s, g;`.
fn declare<'a>(
    function: &mut Function<'a>,
    scopes: &mut Scopes<'a>,
    s: &'a str,
    line: u32,
    scope: u32,
) -> Result<(), ParseError> {
    let rest = s[".reg".len()..].trim_start();
    let (ty, names) = rest
        .split_once(char::is_whitespace)
        .ok_or_else(|| err(line, format!("bad register declaration: `{s}`")))?;
    let mut ty = ty.trim_start_matches('.');
    let mut names = names.trim();
    // `.reg .v2 .b32 x`: vector registers are not used by this project's PTX.
    if ty.starts_with('v') && type_bits(ty).is_none() {
        return Err(err(
            line,
            format!("vector registers are not supported: `{s}`"),
        ));
    }
    if type_bits(ty).is_none() {
        return Err(err(line, format!("unknown register type `.{ty}`")));
    }
    if let Some(r) = names.strip_prefix(".align") {
        // `.reg .align 8 .b8 x[8]`: not produced by LLVM for registers.
        names = r;
        ty = "b8";
    }
    let (names_map, ranges) = scopes.stack.last_mut().expect("inside a body");
    for decl in names.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        if let Some((prefix, count)) = decl.split_once('<') {
            let count: u32 = count
                .trim_end_matches('>')
                .parse()
                .map_err(|_| err(line, format!("bad register range `{decl}`")))?;
            let first = function.registers.len() as u32;
            function.registers.extend((0..count).map(|n| Register {
                name: format!("{prefix}{n}"),
                ty: ty.to_string(),
                scope,
            }));
            ranges.insert(prefix, (first, count));
        } else {
            let id = RegId(function.registers.len() as u32);
            function.registers.push(Register {
                name: decl.to_string(),
                ty: ty.to_string(),
                scope,
            });
            names_map.insert(decl, id);
        }
    }
    Ok(())
}

/// One instruction's text.
/// The line (counted from the statement's first) after which a `;` is missing: a statement
/// that runs on into a line that starts like an instruction, where the line before it does not
/// continue onto the next (an instruction split over lines ends the line with `,`, `{` or `(`,
/// or goes on with `{`, `}`, `)` or `,`).
fn missing_semicolon(s: &str) -> Option<(u32, &str)> {
    let lines: Vec<(usize, &str)> = s
        .lines()
        .map(str::trim)
        .enumerate()
        .filter(|(_, l)| !l.is_empty() && !l.starts_with("//"))
        .collect();
    lines.windows(2).find_map(|w| {
        let ((k, cur), (_, next)) = (w[0], w[1]);
        let continues =
            cur.ends_with([',', '{', '(', '|']) || next.starts_with(['{', '}', ')', ',', '|', '[']);
        let starts_instruction = next
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '@');
        (!continues && starts_instruction).then_some((k as u32, next))
    })
}

fn instruction<'a>(
    s: &'a str,
    line: u32,
    scopes: &Scopes<'a>,
) -> Result<Instruction<'a>, ParseError> {
    if let Some((k, next)) = missing_semicolon(s) {
        return Err(err(
            line + k,
            format!(
                "missing `;` at the end of this line: the next one, `{next}`, would be read as more of this instruction"
            ),
        ));
    }
    let mut rest = s;
    let mut guard = None;
    if let Some(g) = rest.strip_prefix('@') {
        let (pred, after) = g
            .split_once(char::is_whitespace)
            .ok_or_else(|| err(line, format!("guard without an instruction: `{s}`")))?;
        let (negated, pred) = match pred.strip_prefix('!') {
            Some(p) => (true, p),
            None => (false, pred),
        };
        let reg = scopes
            .lookup(pred)
            .ok_or_else(|| err(line, format!("undeclared predicate `{pred}`")))?;
        guard = Some(Guard { reg, negated });
        rest = after.trim_start();
    }
    let (opcode, ops) = match rest.split_once(char::is_whitespace) {
        Some((o, ops)) => (o, ops.trim()),
        None => (rest, ""),
    };
    let operands = split_top(ops)
        .into_iter()
        .map(|o| operand(o, line, scopes))
        .collect::<Result<_, _>>()?;
    Ok(Instruction {
        line,
        text: s,
        guard,
        opcode,
        parts: opcode.split('.').collect(),
        operands,
        loc: None,
    })
}

/// Splits at commas outside brackets and braces.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '[' | '{' | '(' => depth += 1,
            ']' | '}' | ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !s[start..].trim().is_empty() {
        out.push(s[start..].trim());
    }
    out
}

fn operand<'a>(o: &'a str, line: u32, scopes: &Scopes<'a>) -> Result<Operand<'a>, ParseError> {
    let o = o.trim();
    if let Some(inner) = o.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or_else(|| err(line, format!("unclosed address `{o}`")))?
            .trim();
        if let [map, coords] = split_top(inner)[..] {
            let Operand::Vector(coords) = operand(coords, line, scopes)? else {
                return Err(err(
                    line,
                    format!("expected `[map, {{coordinates}}]`: `{o}`"),
                ));
            };
            let map = Box::new(operand(map, line, scopes)?);
            return Ok(Operand::Tensor { map, coords });
        }
        // `base+off`, `base+-off`, `base-off`, `base`, `imm`.
        let split = inner[1..].find(['+', '-']).map(|k| k + 1);
        let (base, offset) = match split {
            Some(k) => {
                let off = inner[k..].trim();
                let off = off.strip_prefix('+').unwrap_or(off).trim();
                let offset = int(off).ok_or_else(|| err(line, format!("bad offset in `{o}`")))?;
                (inner[..k].trim(), offset)
            }
            None => (inner, 0),
        };
        if let Some(v) = int(base) {
            return Ok(Operand::Address {
                base: None,
                offset: v + offset,
            });
        }
        let base = operand(base, line, scopes)?;
        return Ok(Operand::Address {
            base: Some(Box::new(base)),
            offset,
        });
    }
    // `{a, b}`, and `(retval0)`, `(param0, param1)`: a call's return and argument lists.
    let list = match (o.strip_prefix('{'), o.strip_prefix('(')) {
        (Some(inner), _) => Some(inner.strip_suffix('}')),
        (_, Some(inner)) => Some(inner.strip_suffix(')')),
        _ => None,
    };
    if let Some(inner) = list {
        let inner = inner.ok_or_else(|| err(line, format!("unclosed list `{o}`")))?;
        let items = split_top(inner)
            .into_iter()
            .map(|x| operand(x, line, scopes))
            .collect::<Result<_, _>>()?;
        return Ok(Operand::Vector(items));
    }
    if let Some((a, b)) = o.split_once('|') {
        return Ok(Operand::Pair(
            Box::new(operand(a, line, scopes)?),
            Box::new(operand(b, line, scopes)?),
        ));
    }
    if o == "_" {
        return Ok(Operand::Sink);
    }
    if let Some(p) = o.strip_prefix('!') {
        return Ok(Operand::Not(Box::new(operand(p, line, scopes)?)));
    }
    if let Some(hex) = o.strip_prefix("0f").or_else(|| o.strip_prefix("0F")) {
        return u32::from_str_radix(hex, 16)
            .map(Operand::F32)
            .map_err(|_| err(line, format!("bad f32 constant `{o}`")));
    }
    if let Some(hex) = o.strip_prefix("0d").or_else(|| o.strip_prefix("0D")) {
        return u64::from_str_radix(hex, 16)
            .map(Operand::F64)
            .map_err(|_| err(line, format!("bad f64 constant `{o}`")));
    }
    if let Some(v) = int(o) {
        return Ok(Operand::Int(v));
    }
    if let Some(id) = scopes.lookup(o) {
        return Ok(Operand::Reg(id));
    }
    if o.starts_with('%') {
        return Ok(Operand::Special(o));
    }
    if o.is_empty() || !o.chars().all(|c| c.is_alphanumeric() || "_$.".contains(c)) {
        return Err(err(line, format!("cannot read operand `{o}`")));
    }
    Ok(Operand::Symbol(o))
}
