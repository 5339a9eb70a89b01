//! The arguments of a launch of a foreign kernel, written as `cargo xtask check --arg` takes
//! them (`i32:64`, `f32[N]:rand`, `view:K+OFFSET`, a `.npy` file): read, made into buffers on a
//! runtime and into launch arguments. `check` and `validate` launch with them.

use half::{bf16, f16};
use host::foreign::Arg;
use host::{DeviceBuffer, Element, Runtime};

/// The buffers that `--arg` specifications make on `rt`, in order (`None` for a scalar or a
/// view).
pub(crate) fn buffers(rt: &Runtime, specs: &[String]) -> Result<Vec<Option<Buffer>>, String> {
    let mut buffers: Vec<Option<Buffer>> = Vec::new();
    for (k, spec) in specs.iter().enumerate() {
        let arg = parse_arg(spec, k).map_err(|e| format!("--arg {spec}: {e}"))?;
        buffers.push(match arg {
            Parsed::Buffer { ty, len, init } => Some(
                Buffer::new(rt, &ty, len, &init, k as u64)
                    .map_err(|e| format!("--arg {spec}: {e}"))?,
            ),
            _ => None,
        });
    }
    Ok(buffers)
}

/// Whether `bytes`, held `staged` times over at the peak (a file read, its values, the
/// buffer), fit in the memory `rt` has free: refused before anything is made, saying `what` is
/// that large and why.
fn fits(
    rt: &Runtime,
    bytes: u64,
    staged: u64,
    what: impl FnOnce() -> String,
) -> Result<(), String> {
    let free = rt.free_memory().map_err(|e| e.to_string())?;
    if bytes.saturating_mul(staged) > free {
        return Err(format!(
            "{}: more than the {free} bytes of memory free",
            what()
        ));
    }
    Ok(())
}

/// The launch arguments of `--arg` specifications, on the buffers [`buffers`] made of them.
pub(crate) fn launch_args<'a>(
    specs: &[String],
    buffers: &'a [Option<Buffer>],
) -> Result<Vec<Arg<'a>>, String> {
    let mut launch_args = Vec::new();
    for (k, spec) in specs.iter().enumerate() {
        let arg = match parse_arg(spec, k)? {
            Parsed::Scalar(a) => a,
            Parsed::Buffer { .. } => buffers[k].as_ref().expect("made above").arg(0)?,
            Parsed::View { of, offset } => match buffers.get(of) {
                Some(Some(b)) if of < k => b.arg(offset)?,
                _ => {
                    return Err(format!(
                        "--arg {spec}: argument {of} is not a buffer given before this one"
                    ));
                }
            },
        };
        launch_args.push(arg);
    }
    Ok(launch_args)
}

/// Each scalar argument against the PTX type of the parameter it fills (`params`, the entry's
/// `(name, type, bytes)` in order): a float for an integer parameter, or the other way, is an
/// error naming the parameter, even where the sizes agree (`f32:64` for `int N`, a `.u32`).
/// Integers of either sign fill any integer parameter of their size (NVRTC declares `int` as
/// `.u32`).
pub(crate) fn check_scalar_types(
    specs: &[String],
    params: &[(&str, &str, u32)],
) -> Result<(), String> {
    for (k, spec) in specs.iter().enumerate() {
        let Some(&(name, ty, bytes)) = params.get(k) else {
            continue;
        };
        let arg = match parse_arg(spec, k) {
            Ok(Parsed::Scalar(arg)) => arg,
            // A buffer or view is passed as its 8-byte address: a pointer parameter's.
            Ok(Parsed::Buffer { .. } | Parsed::View { .. }) if bytes != 8 => {
                return Err(format!(
                    "--arg {spec}: parameter {k} (`{name}`) is .{ty} in the PTX, a {bytes}-byte scalar, not a pointer: give it as TYPE:VALUE"
                ));
            }
            _ => continue,
        };
        let float_param = ty.starts_with('f');
        let float_arg = matches!(arg, Arg::F32(_) | Arg::F64(_));
        let bits_param = ty.starts_with('b');
        if float_param != float_arg && !bits_param {
            let (what, give) = match (float_param, ty.trim_start_matches(['u', 's'])) {
                (true, _) => ("a float, not an integer".to_string(), format!("{ty}:VALUE")),
                (false, bits) => (
                    "an integer, not a float".to_string(),
                    format!("u{bits}:VALUE or i{bits}:VALUE"),
                ),
            };
            return Err(format!(
                "--arg {spec}: parameter {k} (`{name}`) is .{ty} in the PTX, {what}: give it as {give}"
            ));
        }
    }
    Ok(())
}

/// One `--arg`, read.
enum Parsed {
    Scalar(Arg<'static>),
    Buffer {
        ty: String,
        /// `None` for `TYPE[..]`: the file's.
        len: Option<usize>,
        init: String,
    },
    View {
        of: usize,
        offset: usize,
    },
}

fn parse_arg(spec: &str, k: usize) -> Result<Parsed, String> {
    let (head, value) = spec
        .split_once(':')
        .ok_or("expected TYPE:VALUE, TYPE[N]:INIT or view:K+OFFSET")?;
    if head == "view" {
        let (of, offset) = value.split_once('+').ok_or("expected view:K+OFFSET")?;
        let of = of
            .parse()
            .map_err(|_| format!("`{of}` is not an argument number"))?;
        let offset = offset
            .parse()
            .map_err(|_| format!("`{offset}` is not an element offset"))?;
        if of >= k {
            return Err(format!("a view of argument {of} must come after it"));
        }
        return Ok(Parsed::View { of, offset });
    }
    if let Some((ty, len)) = head.strip_suffix(']').and_then(|h| h.split_once('[')) {
        let len = match len {
            ".." if value.ends_with(".npy") => None,
            ".." => {
                return Err("`[..]` takes its length from a .npy file (TYPE[..]:FILE.npy)".into());
            }
            n => Some(
                n.parse()
                    .map_err(|_| format!("`{n}` is not a number of elements"))?,
            ),
        };
        return Ok(Parsed::Buffer {
            ty: ty.to_string(),
            len,
            init: value.to_string(),
        });
    }
    fn number<T: std::str::FromStr>(value: &str, head: &str) -> Result<T, String> {
        value
            .parse()
            .map_err(|_| format!("`{value}` is not a {head}"))
    }
    let scalar = match head {
        "i32" => Arg::I32(number(value, head)?),
        "u32" => Arg::U32(number(value, head)?),
        "i64" => Arg::I64(number(value, head)?),
        "u64" => Arg::U64(number(value, head)?),
        "f32" => {
            // Parsed wide, so that a finite value past f32's range is an error, not infinity.
            let wide: f64 = number(value, head)?;
            if wide.is_finite() && wide.abs() > f64::from(f32::MAX) {
                return Err(format!(
                    "`{value}` is outside f32's range (largest {:e})",
                    f32::MAX
                ));
            }
            Arg::F32(wide as f32)
        }
        "f64" => Arg::F64(number(value, head)?),
        other => {
            return Err(format!(
                "unknown scalar type `{other}` (i32, u32, i64, u64, f32, f64)"
            ));
        }
    };
    Ok(Parsed::Scalar(scalar))
}

/// A buffer an argument made, of its element type.
pub(crate) enum Buffer {
    F32(DeviceBuffer<f32>),
    F64(DeviceBuffer<f64>),
    F16(DeviceBuffer<f16>),
    Bf16(DeviceBuffer<bf16>),
    I32(DeviceBuffer<i32>),
    U32(DeviceBuffer<u32>),
    U8(DeviceBuffer<u8>),
    U16(DeviceBuffer<u16>),
    U64(DeviceBuffer<u64>),
}

/// The NumPy dtype a buffer of `ty` is written as and read from (bf16, which NumPy lacks, as
/// its raw bits).
fn npy_descr(ty: &str) -> Result<&'static str, String> {
    Ok(match ty {
        "f32" => "<f4",
        "f64" => "<f8",
        "f16" => "<f2",
        "bf16" | "u16" => "<u2",
        "i32" => "<i4",
        "u32" => "<u4",
        "u8" => "|u1",
        "u64" => "<u8",
        other => {
            return Err(format!(
                "unknown element type `{other}` (f32, f64, f16, bf16, i32, u32, u8, u16, u64)"
            ));
        }
    })
}

impl Buffer {
    /// `len` elements of `ty` initialised as `init` says (`rand` seeded by the argument's place),
    /// or read from the `.npy` file `init` names (`len` `None`: as many as it holds).
    pub(crate) fn new(
        rt: &Runtime,
        ty: &str,
        len: Option<usize>,
        init: &str,
        seed: u64,
    ) -> Result<Self, String> {
        if init.ends_with(".npy") {
            return Self::from_npy(rt, ty, len, init);
        }
        let len = len.expect("parse_arg takes `[..]` with a .npy file only");
        let float = matches!(ty, "f32" | "f64" | "f16" | "bf16");
        // The largest value the initialiser writes: an integer type must hold it, or
        // `u8[300]:iota` would stop at 255 without a word.
        let largest = match init {
            "zeros" => 0.0,
            "ones" => 1.0,
            "iota" => len.saturating_sub(1) as f64,
            "rand" if float => 1.0,
            "rand" => 99.0,
            other => {
                return Err(format!(
                    "unknown initialiser `{other}` (zeros, ones, rand, iota)"
                ));
            }
        };
        let most = match ty {
            "u8" => Some(f64::from(u8::MAX)),
            "u16" => Some(f64::from(u16::MAX)),
            "i32" => Some(f64::from(i32::MAX)),
            "u32" => Some(f64::from(u32::MAX)),
            _ => None,
        };
        if let Some(most) = most.filter(|&most| largest > most) {
            return Err(format!(
                "{init} over {len} elements reaches {}, more than {ty} holds ({most})",
                most + 1.0
            ));
        }
        // Zeros are the allocation's own (mapped lazily); any other values are made on the host
        // first, one element of the type each, then copied: twice the buffer's bytes at the peak.
        let staged = if init == "zeros" { 1 } else { 2 };
        let bytes = (len as u64).saturating_mul(crate::npy::element_size(npy_descr(ty)?)? as u64);
        fits(rt, bytes, staged, || {
            let made = if staged > 1 {
                format!(", made on the host first, {staged} times that")
            } else {
                String::new()
            };
            format!("{len} elements of {ty} are {bytes} bytes{made}")
        })?;
        let (lo, hi) = if float { (-1.0, 1.0) } else { (0.0, 100.0) };
        let random = (init == "rand").then(|| host::reference::uniform(len, seed + 1, lo, hi));
        let at = |i: usize| -> f64 {
            match (&random, init) {
                (Some(r), _) if float => f64::from(r[i]),
                (Some(r), _) => f64::from(r[i]).floor(),
                (None, "iota") => i as f64,
                (None, "ones") => 1.0,
                _ => 0.0,
            }
        };
        fn make<T: Element>(
            rt: &Runtime,
            len: usize,
            zeros: bool,
            value: impl Fn(usize) -> T,
        ) -> Result<DeviceBuffer<T>, String> {
            if zeros {
                return rt.alloc(len).map_err(|e| e.to_string());
            }
            let v: Vec<T> = (0..len).map(value).collect();
            rt.upload(&v).map_err(|e| e.to_string())
        }
        let z = init == "zeros";
        Ok(match ty {
            "f32" => Self::F32(make(rt, len, z, |i| at(i) as f32)?),
            "f64" => Self::F64(make(rt, len, z, at)?),
            "f16" => Self::F16(make(rt, len, z, |i| f16::from_f64(at(i)))?),
            "bf16" => Self::Bf16(make(rt, len, z, |i| bf16::from_f64(at(i)))?),
            "i32" => Self::I32(make(rt, len, z, |i| at(i) as i32)?),
            "u32" => Self::U32(make(rt, len, z, |i| at(i) as u32)?),
            "u8" => Self::U8(make(rt, len, z, |i| at(i) as u8)?),
            "u16" => Self::U16(make(rt, len, z, |i| at(i) as u16)?),
            "u64" => Self::U64(make(rt, len, z, |i| at(i) as u64)?),
            other => {
                return Err(format!(
                    "unknown element type `{other}` (f32, f64, f16, bf16, i32, u32, u8, u16, u64)"
                ));
            }
        })
    }

    /// The buffer the NumPy file at `path` holds, which must be of `ty` (f16 also as raw `<u2`)
    /// and, when `len` says, of that many elements.
    fn from_npy(rt: &Runtime, ty: &str, len: Option<usize>, path: &str) -> Result<Self, String> {
        // A link to `/dev/zero`, a FIFO or a folder would be read without end, or block; a file
        // larger than memory would be read before the buffer is refused.
        let meta = std::fs::metadata(path).map_err(|e| format!("{path}: {e}"))?;
        if !meta.is_file() {
            return Err(format!("{path} is not a regular file: give a .npy file"));
        }
        // The file, then the values, then the buffer.
        fits(rt, meta.len(), 3, || {
            format!(
                "{path} is {} bytes: read, made into values and copied, it needs 3 times that",
                meta.len()
            )
        })?;
        let mut bytes = Vec::new();
        {
            use std::io::Read;
            std::fs::File::open(path)
                .and_then(|f| f.take(meta.len()).read_to_end(&mut bytes))
                .map_err(|e| format!("{path}: {e}"))?;
        }
        let npy = crate::npy::from_bytes(&bytes).map_err(|e| format!("{path}: {e}"))?;
        drop(bytes); // The header's copy of the data is what is read on.
        let want = npy_descr(ty)?;
        if npy.descr != want && !(ty == "f16" && npy.descr == "<u2") {
            return Err(format!(
                "{path} holds {} elements, not {ty} ({want})",
                npy.descr
            ));
        }
        if let Some(len) = len.filter(|&n| n != npy.len()) {
            return Err(format!(
                "{path} holds {} elements (shape {:?}), not {len}",
                npy.len(),
                npy.shape
            ));
        }
        fn up<T: Element, const N: usize>(
            rt: &Runtime,
            data: &[u8],
            from: fn([u8; N]) -> T,
        ) -> Result<DeviceBuffer<T>, String> {
            let v: Vec<T> = data
                .chunks_exact(N)
                .map(|c| from(c.try_into().expect("chunks of N")))
                .collect();
            rt.upload(&v).map_err(|e| e.to_string())
        }
        let d = &npy.data;
        Ok(match ty {
            "f32" => Self::F32(up(rt, d, f32::from_le_bytes)?),
            "f64" => Self::F64(up(rt, d, f64::from_le_bytes)?),
            "f16" => Self::F16(up(rt, d, f16::from_le_bytes)?),
            "bf16" => Self::Bf16(up(rt, d, bf16::from_le_bytes)?),
            "i32" => Self::I32(up(rt, d, i32::from_le_bytes)?),
            "u32" => Self::U32(up(rt, d, u32::from_le_bytes)?),
            "u8" => Self::U8(up(rt, d, u8::from_le_bytes)?),
            "u16" => Self::U16(up(rt, d, u16::from_le_bytes)?),
            "u64" => Self::U64(up(rt, d, u64::from_le_bytes)?),
            other => unreachable!("npy_descr refused `{other}`"),
        })
    }

    /// The buffer's NumPy dtype and its elements' little-endian bytes, as `--dump` writes them.
    pub(crate) fn raw(&self, rt: &Runtime) -> Result<(&'static str, Vec<u8>), String> {
        fn bytes<T: Element, const N: usize>(
            rt: &Runtime,
            b: &DeviceBuffer<T>,
            to: fn(T) -> [u8; N],
        ) -> Result<Vec<u8>, String> {
            let v = rt.download(b).map_err(|e| e.to_string())?;
            Ok(v.into_iter().flat_map(to).collect())
        }
        let (ty, data) = match self {
            Self::F32(b) => ("f32", bytes(rt, b, f32::to_le_bytes)?),
            Self::F64(b) => ("f64", bytes(rt, b, f64::to_le_bytes)?),
            Self::F16(b) => ("f16", bytes(rt, b, f16::to_le_bytes)?),
            Self::Bf16(b) => ("bf16", bytes(rt, b, bf16::to_le_bytes)?),
            Self::I32(b) => ("i32", bytes(rt, b, i32::to_le_bytes)?),
            Self::U32(b) => ("u32", bytes(rt, b, u32::to_le_bytes)?),
            Self::U8(b) => ("u8", bytes(rt, b, u8::to_le_bytes)?),
            Self::U16(b) => ("u16", bytes(rt, b, u16::to_le_bytes)?),
            Self::U64(b) => ("u64", bytes(rt, b, u64::to_le_bytes)?),
        };
        Ok((npy_descr(ty)?, data))
    }

    /// `TYPE[N]: first four values ... last two (sum S)`: enough to see a kernel's result at a
    /// glance and to compare it with a pasted one.
    pub(crate) fn summary(&self, rt: &Runtime) -> Result<String, String> {
        fn show<T: Element + std::fmt::Display>(
            rt: &Runtime,
            ty: &str,
            b: &DeviceBuffer<T>,
            to_f64: impl Fn(T) -> f64,
        ) -> Result<String, String> {
            let v = rt.download(b).map_err(|e| e.to_string())?;
            let shown: Vec<String> = if v.len() <= 6 {
                v.iter().map(T::to_string).collect()
            } else {
                let ends = v[..4].iter().map(T::to_string);
                let tail = v[v.len() - 2..].iter().map(T::to_string);
                ends.chain(std::iter::once("...".to_string()))
                    .chain(tail)
                    .collect()
            };
            let sum: f64 = v.iter().map(|&x| to_f64(x)).sum();
            Ok(format!(
                "{ty}[{}]: {} (sum {sum})",
                v.len(),
                shown.join(" ")
            ))
        }
        match self {
            Self::F32(b) => show(rt, "f32", b, f64::from),
            Self::F64(b) => show(rt, "f64", b, |x| x),
            Self::F16(b) => show(rt, "f16", b, f64::from),
            Self::Bf16(b) => show(rt, "bf16", b, f64::from),
            Self::I32(b) => show(rt, "i32", b, f64::from),
            Self::U32(b) => show(rt, "u32", b, f64::from),
            Self::U8(b) => show(rt, "u8", b, f64::from),
            Self::U16(b) => show(rt, "u16", b, f64::from),
            Self::U64(b) => show(rt, "u64", b, |x| x as f64),
        }
    }

    /// The buffer from element `offset` on, as a launch argument.
    fn arg(&self, offset: usize) -> Result<Arg<'_>, String> {
        let view = match self {
            Self::F32(b) => Arg::view(b, offset),
            Self::F64(b) => Arg::view(b, offset),
            Self::F16(b) => Arg::view(b, offset),
            Self::Bf16(b) => Arg::view(b, offset),
            Self::I32(b) => Arg::view(b, offset),
            Self::U32(b) => Arg::view(b, offset),
            Self::U8(b) => Arg::view(b, offset),
            Self::U16(b) => Arg::view(b, offset),
            Self::U64(b) => Arg::view(b, offset),
        };
        view.map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Silent coercions are errors: an f32 past its range, an integer buffer whose initialiser
    /// passes its type's largest value, a float for an integer parameter (and the reverse), each
    /// naming what and why; what fits passes.
    #[test]
    fn values_a_type_cannot_hold_and_scalars_of_the_wrong_kind_are_refused() {
        let e = parse_arg("f32:1e39", 0).err().unwrap();
        assert!(e.contains("outside f32's range"), "{e}");
        assert!(
            matches!(parse_arg("f32:inf", 0), Ok(Parsed::Scalar(Arg::F32(x))) if x.is_infinite())
        );
        assert!(matches!(
            parse_arg("f32:3e38", 0),
            Ok(Parsed::Scalar(Arg::F32(_)))
        ));
        let rt = Runtime::emulator();
        let e = Buffer::new(&rt, "u8", Some(300), "iota", 0).err().unwrap();
        assert!(e.contains("reaches 256, more than u8 holds (255)"), "{e}");
        assert!(Buffer::new(&rt, "u8", Some(256), "iota", 0).is_ok());
        let params = [("p0", "u64", 8), ("n", "u32", 4), ("scale", "f32", 4)];
        let specs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let e =
            check_scalar_types(&specs(&["f32[4]:zeros", "f32:64", "f32:1"]), &params).unwrap_err();
        assert!(
            e.contains("parameter 1 (`n`) is .u32 in the PTX, an integer, not a float: give it as u32:VALUE or i32:VALUE"),
            "{e}"
        );
        let e =
            check_scalar_types(&specs(&["f32[4]:zeros", "i32:64", "u32:1"]), &params).unwrap_err();
        assert!(e.contains("parameter 2 (`scale`) is .f32"), "{e}");
        assert!(check_scalar_types(&specs(&["f32[4]:zeros", "i32:64", "f32:1"]), &params).is_ok());
        // A buffer for a scalar parameter is named, not printed as the launch's Rust value.
        let e = check_scalar_types(&specs(&["f32[4]:zeros", "f32[4]:ones", "f32:1"]), &params)
            .unwrap_err();
        assert!(
            e.contains("parameter 1 (`n`) is .u32 in the PTX, a 4-byte scalar, not a pointer"),
            "{e}"
        );
    }

    /// A bf16 buffer read from a `.npy` file of raw bits (`TYPE[..]`: as many as it holds) is
    /// dumped as the same bits, and a file of another dtype or length is refused with why.
    #[test]
    fn a_buffer_from_a_npy_file_dumps_as_the_same_file() {
        let rt = Runtime::emulator();
        let values = [1.0f32, -2.5, 0.125, 3.0e5, 0.0];
        let bits: Vec<u8> = values
            .iter()
            .flat_map(|&x| bf16::from_f32(x).to_le_bytes())
            .collect();
        let path = std::env::temp_dir().join(format!("check-npy-{}.npy", std::process::id()));
        let file = crate::npy::to_bytes("<u2", &[values.len()], &bits);
        std::fs::write(&path, &file).unwrap();
        let name = path.to_str().unwrap();
        let buffer = Buffer::new(&rt, "bf16", None, name, 0).unwrap();
        assert_eq!(buffer.raw(&rt).unwrap(), ("<u2", bits));
        let refused = |ty: &str, len| Buffer::new(&rt, ty, len, name, 0).err().unwrap();
        assert!(refused("f32", None).contains("holds <u2 elements, not f32"));
        assert!(refused("bf16", Some(4)).contains("holds 5 elements"));
        std::fs::remove_file(&path).unwrap();
    }

    /// Issue 55, finding 3: a buffer larger than memory aborted (8 TB staged as `f64`s), and a
    /// `.npy` that is a link to `/dev/zero` was read without end. Each is refused with the sizes
    /// (or why) before anything is made or read.
    #[test]
    fn a_buffer_larger_than_memory_and_a_npy_that_is_no_file_are_refused_before_they_are_made() {
        let rt = Runtime::emulator();
        for init in ["zeros", "ones", "iota", "rand"] {
            let e = Buffer::new(&rt, "f32", Some(1_000_000_000_000), init, 0)
                .err()
                .unwrap();
            assert!(
                e.contains("are 4000000000000 bytes") && e.contains("bytes of memory free"),
                "{init}: {e}"
            );
        }
        let dir = std::env::temp_dir().join(format!("check-npy-link-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let link = dir.join("zero.npy");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let e = Buffer::new(&rt, "f32", None, link.to_str().unwrap(), 0)
            .err()
            .unwrap();
        assert!(e.contains("is not a regular file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
        // What fits is made, with the values asked for.
        let b = Buffer::new(&rt, "u16", Some(5), "iota", 0).unwrap();
        let (_, bytes) = b.raw(&rt).unwrap();
        assert_eq!(bytes, [0, 0, 1, 0, 2, 0, 3, 0, 4, 0]);
        let (_, bytes) = Buffer::new(&rt, "f32", Some(2), "ones", 0)
            .unwrap()
            .raw(&rt)
            .unwrap();
        assert_eq!(bytes, [1.0f32.to_le_bytes(), 1.0f32.to_le_bytes()].concat());
    }
}
