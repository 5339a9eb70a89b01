//! CUDA's device-side `printf`, which compiles to a call of `vprintf(format, args)`: `format`
//! the generic address of the C format string, `args` that of a buffer in the thread's local
//! memory holding the arguments one after another, each at an offset aligned to its size (the
//! CUDA C++ Programming Guide, "Formatted Output": a `float` is promoted to `double`, as for any
//! variadic C function; pointers and `%s` strings are 64-bit addresses). The conversions are
//! C's (`%d %i %u %x %X %o %c %s %p %f %F %e %E %g %G %%`, with flags, width, precision and
//! the `h`, `hh`, `l`, `ll`, `z`, `j`, `t` lengths); `vprintf` returns the number of arguments
//! it consumed.

/// The text `format` produces from the argument buffer read by `arg(offset, bytes)` (a
/// little-endian value of `bytes` bytes at that offset), `%s` strings read by `string`; and the
/// number of arguments consumed. An unknown conversion is printed as written, as the GPU's
/// formatter does; an argument the buffer cannot supply is the error `arg` returns.
pub fn format(
    format: &str,
    arg: &mut dyn FnMut(usize, usize) -> Result<u64, String>,
    string: &dyn Fn(u64) -> String,
) -> Result<(String, usize), String> {
    let mut out = String::new();
    let (mut offset, mut consumed) = (0usize, 0usize);
    let mut next = |bytes: usize| -> Result<u64, String> {
        offset = offset.next_multiple_of(bytes);
        let v = arg(offset, bytes)?;
        offset += bytes;
        consumed += 1;
        Ok(v)
    };
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = Spec::default();
        let mut written = String::from("%");
        while let Some(&f) = chars.peek() {
            match f {
                '-' => spec.left = true,
                '0' => spec.zero = true,
                '+' => spec.plus = true,
                ' ' => spec.space = true,
                '#' => spec.alt = true,
                _ => break,
            }
            written.push(f);
            chars.next();
        }
        spec.width = number(&mut chars, &mut written);
        if chars.peek() == Some(&'.') {
            written.push('.');
            chars.next();
            spec.precision = Some(number(&mut chars, &mut written).unwrap_or(0));
        }
        let mut long = 0;
        while let Some(&l) = chars.peek() {
            match l {
                'l' | 'z' | 'j' | 't' => long += if l == 'l' { 1 } else { 2 },
                'h' => {}
                _ => break,
            }
            written.push(l);
            chars.next();
        }
        let int_bytes = if long > 0 { 8 } else { 4 };
        let Some(conv) = chars.next() else {
            out.push_str(&written);
            break;
        };
        let body = match conv {
            '%' => "%".to_string(),
            'd' | 'i' => {
                let v = next(int_bytes)?;
                let v = if int_bytes == 4 {
                    i64::from(v as u32 as i32)
                } else {
                    v as i64
                };
                spec.signed(v < 0, spec.digits(v.unsigned_abs().to_string()))
            }
            'u' => spec.signed(false, spec.digits(next(int_bytes)?.to_string())),
            'x' | 'X' | 'o' => {
                let v = next(int_bytes)?;
                let digits = match conv {
                    'x' => format!("{v:x}"),
                    'X' => format!("{v:X}"),
                    _ => format!("{v:o}"),
                };
                let prefix = match conv {
                    _ if !spec.alt || v == 0 => "",
                    'x' => "0x",
                    'X' => "0X",
                    _ => "0",
                };
                format!("{prefix}{}", spec.digits(digits))
            }
            'c' => char::from(next(4)? as u8).to_string(),
            's' => {
                let s = string(next(8)?);
                match spec.precision {
                    Some(p) => s.chars().take(p).collect(),
                    None => s,
                }
            }
            'p' => format!("{:#x}", next(8)?),
            'f' | 'F' | 'e' | 'E' | 'g' | 'G' => {
                let v = f64::from_bits(next(8)?);
                spec.signed(v.is_sign_negative(), float(v.abs(), conv, &spec))
            }
            other => {
                written.push(other);
                out.push_str(&written);
                continue;
            }
        };
        out.push_str(&spec.pad(body, conv));
    }
    Ok((out, consumed))
}

/// A conversion's flags, width and precision.
#[derive(Default)]
struct Spec {
    left: bool,
    zero: bool,
    plus: bool,
    space: bool,
    alt: bool,
    width: Option<usize>,
    precision: Option<usize>,
}

impl Spec {
    /// An integer's digits, at least `precision` of them (`%.0d` of 0 prints none).
    fn digits(&self, digits: String) -> String {
        match self.precision {
            Some(0) if digits == "0" => String::new(),
            Some(p) if digits.len() < p => format!("{}{digits}", "0".repeat(p - digits.len())),
            _ => digits,
        }
    }

    /// The sign a signed conversion prints before its magnitude.
    fn signed(&self, negative: bool, magnitude: String) -> String {
        let sign = match () {
            _ if negative => "-",
            _ if self.plus => "+",
            _ if self.space => " ",
            _ => "",
        };
        format!("{sign}{magnitude}")
    }

    /// `body` padded to the width: spaces on the left (or right, `-`), or zeros after the sign
    /// and prefix (`0`, for numbers without a precision, and for floats that are finite).
    fn pad(&self, body: String, conv: char) -> String {
        let width = self.width.unwrap_or(0);
        let len = body.chars().count();
        if len >= width {
            return body;
        }
        let fill = width - len;
        let numeric = "diuxXofFeEgG".contains(conv);
        let int_with_precision = "diuxXo".contains(conv) && self.precision.is_some();
        let finite = !body.contains("inf") && !body.contains("nan");
        if self.left {
            format!("{body}{}", " ".repeat(fill))
        } else if self.zero && numeric && !int_with_precision && finite {
            let sign = body.starts_with(['-', '+', ' ']) as usize;
            let prefix = sign
                + 2 * usize::from(body[sign..].starts_with("0x") || body[sign..].starts_with("0X"));
            format!("{}{}{}", &body[..prefix], "0".repeat(fill), &body[prefix..])
        } else {
            format!("{}{body}", " ".repeat(fill))
        }
    }
}

/// The decimal number at the front of `chars` (a width or precision), copied to `written`.
fn number(chars: &mut std::iter::Peekable<std::str::Chars>, written: &mut String) -> Option<usize> {
    let mut n = None;
    while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
        n = Some(n.unwrap_or(0) * 10 + d as usize);
        written.push(chars.next().unwrap());
    }
    n
}

/// A non-negative float (the sign is printed by the caller) in C's `%f`, `%e` or `%g`.
fn float(v: f64, conv: char, spec: &Spec) -> String {
    let upper = conv.is_ascii_uppercase();
    let text = if v.is_nan() {
        "nan".to_string()
    } else if v.is_infinite() {
        "inf".to_string()
    } else {
        let p = spec.precision.unwrap_or(6);
        match conv.to_ascii_lowercase() {
            'f' => format!("{v:.p$}"),
            'e' => exponent(v, p),
            _ => {
                // C's %g: %e with precision P - 1 if the exponent X < -4 or X >= P, else %f
                // with precision P - 1 - X; then trailing zeros removed unless `#`.
                let p = p.max(1);
                let x = if v == 0.0 { 0 } else { exponent_of(v, p - 1) };
                let text = if x < -4 || x >= p as i32 {
                    exponent(v, p - 1)
                } else {
                    let decimals = (p as i32 - 1 - x) as usize;
                    format!("{v:.decimals$}")
                };
                if spec.alt { text } else { strip_zeros(&text) }
            }
        }
    };
    if upper { text.to_uppercase() } else { text }
}

/// `v` as C's `%.pe`: one digit, the point, `p` digits, `e`, a sign and at least two digits.
fn exponent(v: f64, p: usize) -> String {
    let rust = format!("{v:.p$e}");
    let (mantissa, exp) = rust.split_once('e').expect("Rust's {:e} has an exponent");
    let exp: i32 = exp.parse().expect("Rust's exponent is an integer");
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

/// The decimal exponent of `v` once rounded to `p` digits after the first (as `%.pe` prints).
fn exponent_of(v: f64, p: usize) -> i32 {
    let rust = format!("{v:.p$e}");
    rust.split_once('e')
        .and_then(|(_, e)| e.parse().ok())
        .unwrap_or(0)
}

/// `%g`'s removal of trailing zeros in the fraction (and of the point itself, if none remain).
fn strip_zeros(text: &str) -> String {
    let (mantissa, exp) = match text.split_once('e') {
        Some((m, e)) => (m, format!("e{e}")),
        None => (text, String::new()),
    };
    let mantissa = if mantissa.contains('.') {
        mantissa.trim_end_matches('0').trim_end_matches('.')
    } else {
        mantissa
    };
    format!("{mantissa}{exp}")
}

#[cfg(test)]
mod tests {
    use super::format;

    /// Packs the arguments as CUDA's `printf` does (each at an offset aligned to its size) and
    /// formats them. The expected strings are C's own (glibc's `printf` of the same format and
    /// values), written out by hand here.
    fn printf(fmt: &str, args: &[Value]) -> (String, usize) {
        let mut buf = Vec::new();
        for a in args {
            let (bytes, v) = match *a {
                Value::I32(v) => (4, u64::from(v as u32)),
                Value::I64(v) => (8, v as u64),
                Value::F64(v) => (8, v.to_bits()),
                Value::Ptr(v) => (8, v),
            };
            while buf.len() % bytes != 0 {
                buf.push(0xAA);
            }
            buf.extend_from_slice(&v.to_le_bytes()[..bytes]);
        }
        let mut arg = |at: usize, n: usize| {
            let mut raw = [0u8; 8];
            raw[..n].copy_from_slice(buf.get(at..at + n).ok_or("past the buffer")?);
            Ok(u64::from_le_bytes(raw))
        };
        format(fmt, &mut arg, &|p| format!("<string {p:#x}>")).unwrap()
    }

    #[derive(Clone, Copy)]
    enum Value {
        I32(i32),
        I64(i64),
        F64(f64),
        Ptr(u64),
    }
    use Value::*;

    #[test]
    fn integers_with_flags_widths_and_lengths() {
        let cases: &[(&str, &[Value], &str)] = &[
            ("%d|%i|%u", &[I32(-5), I32(7), I32(-1)], "-5|7|4294967295"),
            (
                "[%5d][%-5d][%05d]",
                &[I32(42), I32(42), I32(-42)],
                "[   42][42   ][-0042]",
            ),
            ("%+d % d %.3d", &[I32(3), I32(3), I32(7)], "+3  3 007"),
            (
                "%x %X %#x %o %#o",
                &[I32(255), I32(255), I32(255), I32(8), I32(8)],
                "ff FF 0xff 10 010",
            ),
            (
                "%lld %llu %ld",
                &[I64(-5), I64(-1), I64(1 << 40)],
                "-5 18446744073709551615 1099511627776",
            ),
            ("%c%c", &[I32(65), I32(98)], "Ab"),
            ("100%%", &[], "100%"),
        ];
        for (fmt, args, want) in cases {
            assert_eq!(printf(fmt, args).0, *want, "{fmt}");
        }
    }

    #[test]
    fn floats_as_c_prints_them() {
        let cases: &[(&str, f64, &str)] = &[
            ("%f", 1.5, "1.500000"),
            ("%.2f", -1.23456, "-1.23"),
            ("%8.3f", 2.0, "   2.000"),
            ("%08.3f", -2.0, "-002.000"),
            ("%e", 12345.678, "1.234568e+04"),
            ("%.1E", 0.000123, "1.2E-04"),
            ("%g", 0.0001, "0.0001"),
            ("%g", 0.00001, "1e-05"),
            ("%g", 123456.0, "123456"),
            ("%g", 1234567.0, "1.23457e+06"),
            ("%g", 1.5, "1.5"),
            ("%g", 0.0, "0"),
            ("%G", 1e-10, "1E-10"),
            ("%f", f64::INFINITY, "inf"),
            ("%f", f64::NEG_INFINITY, "-inf"),
            ("%5.1f", f64::NAN, "  nan"),
            ("%F", f64::NAN, "NAN"),
        ];
        for (fmt, v, want) in cases {
            assert_eq!(printf(fmt, &[F64(*v)]).0, *want, "{fmt} of {v}");
        }
    }

    /// Arguments are read at offsets aligned to their size: an int, then a double (at 8, not
    /// 4), then an int, then a string pointer (at 24); the count is what `vprintf` returns.
    #[test]
    fn arguments_are_packed_at_aligned_offsets_and_counted() {
        let (text, n) = printf(
            "%d %f %d %s|%.3s",
            &[I32(1), F64(2.5), I32(3), Ptr(0x10), Ptr(0x20)],
        );
        assert_eq!(text, "1 2.500000 3 <string 0x10>|<st");
        assert_eq!(n, 5);
    }

    #[test]
    fn an_unknown_conversion_is_printed_as_written_and_a_missing_argument_is_an_error() {
        assert_eq!(printf("%y %d", &[I32(4)]).0, "%y 4");
        let mut none = |_: usize, _: usize| Err("no argument buffer".to_string());
        let err = format("%d", &mut none, &|_| String::new()).unwrap_err();
        assert_eq!(err, "no argument buffer");
    }
}
