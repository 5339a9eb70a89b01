//! NumPy's `.npy` format, version 1.0 written (2.0 and 3.0 read too), for `check --dump` and
//! `check --arg TYPE[N]:FILE.npy`: the magic `\x93NUMPY`, the version, the header's length, a
//! Python dict literal (`descr`, `fortran_order`, `shape`) padded with spaces to a multiple of 64
//! bytes and ended by a newline, then the raw little-endian elements. Written by hand: the
//! crates that read it bring a Python-literal parser along, and `check` needs one dict of three
//! keys (<https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html>).

const MAGIC: &[u8] = b"\x93NUMPY";
/// NumPy pads the header so the data starts on a multiple of this.
const ALIGN: usize = 64;

/// An array as a `.npy` file holds it: its dtype (`<f4`, `|u1`, ...), shape and raw bytes.
#[derive(Debug, PartialEq, Eq)]
pub struct Npy {
    pub descr: String,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

impl Npy {
    /// The elements the shape holds.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }
}

/// The file's bytes, as `numpy.save` writes them (version 1.0, C order).
pub fn to_bytes(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    // Python's repr of a tuple: `()`, `(4,)`, `(2, 3)`.
    let shape = match dims.as_slice() {
        [one] => format!("({one},)"),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // As NumPy pads: a space at least, up to a whole number of ALIGN with the newline.
    let preamble = MAGIC.len() + 4;
    let pad = ALIGN - (preamble + header.len() + 1) % ALIGN;
    header.extend(std::iter::repeat_n(' ', pad));
    header.push('\n');
    let mut out = Vec::with_capacity(preamble + header.len() + data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// Reads a `.npy` file's bytes: C order (or one dimension at most), the data as long as the
/// shape says.
pub fn from_bytes(bytes: &[u8]) -> Result<Npy, String> {
    let rest = bytes
        .strip_prefix(MAGIC)
        .ok_or("not a .npy file (no \\x93NUMPY magic)")?;
    let (header, data) = match rest {
        [1, 0, a, b, rest @ ..] => split(rest, usize::from(u16::from_le_bytes([*a, *b])))?,
        [2 | 3, 0, a, b, c, d, rest @ ..] => {
            split(rest, u32::from_le_bytes([*a, *b, *c, *d]) as usize)?
        }
        [major, minor, ..] => return Err(format!("unknown .npy version {major}.{minor}")),
        _ => return Err("the .npy header is cut short".into()),
    };
    let header = std::str::from_utf8(header).map_err(|_| "the .npy header is not text")?;
    // A structured dtype's descr is a list of fields, which `value` would cut at its first comma.
    let descr = if header.contains("'descr': [") {
        "[structured]".to_string()
    } else {
        value(header, "descr")?
            .trim_matches(|c| c == '\'' || c == '"')
            .to_string()
    };
    let shape: Vec<usize> = value(header, "shape")?
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().map_err(|_| format!("shape dimension `{d}`")))
        .collect::<Result<_, _>>()?;
    if value(header, "fortran_order")? != "False" && shape.iter().filter(|&&d| d > 1).count() > 1 {
        return Err(
            "the array is in Fortran order; save it in C order (np.ascontiguousarray)".into(),
        );
    }
    let npy = Npy {
        descr,
        shape,
        data: data.to_vec(),
    };
    let size = element_size(&npy.descr)?;
    // Checked: a corrupt shape whose product wraps would otherwise match an empty file.
    let needed = npy
        .shape
        .iter()
        .try_fold(size, |bytes, &d| bytes.checked_mul(d))
        .ok_or_else(|| {
            format!(
                "shape {:?} of {} holds more bytes than a machine can address: a corrupt header",
                npy.shape, npy.descr
            )
        })?;
    if npy.data.len() != needed {
        return Err(format!(
            "shape {:?} of {} needs {needed} bytes of data, the file has {}",
            npy.shape,
            npy.descr,
            npy.data.len()
        ));
    }
    Ok(npy)
}

/// The header of `len` bytes and the data after it.
fn split(rest: &[u8], len: usize) -> Result<(&[u8], &[u8]), String> {
    if rest.len() < len {
        return Err("the .npy header is cut short".into());
    }
    Ok(rest.split_at(len))
}

/// The text of `key`'s value in the header's dict: a tuple through its `)`, anything else up
/// to the next comma or brace.
fn value<'a>(header: &'a str, key: &str) -> Result<&'a str, String> {
    let missing = || format!("the .npy header has no '{key}'");
    let at = header.find(&format!("'{key}'")).ok_or_else(missing)?;
    let after = header[at + key.len() + 2..].trim_start();
    let after = after.strip_prefix(':').ok_or_else(missing)?.trim_start();
    let end = if after.starts_with('(') {
        after.find(')').map(|e| e + 1)
    } else {
        after.find([',', '}'])
    };
    Ok(after[..end.ok_or_else(missing)?].trim())
}

/// Bytes per element of a dtype the command knows (`<f4`, `|u1`, ...).
pub fn element_size(descr: &str) -> Result<usize, String> {
    let bytes = descr.get(2..).and_then(|n| n.parse().ok());
    match (descr.as_bytes().first(), descr.as_bytes().get(1), bytes) {
        (Some(b'['), ..) => Err(format!(
            "dtype {descr}: a structured array (named fields); give each field as its own plain array"
        )),
        (_, Some(b'O'), _) => Err(format!(
            "dtype {descr}: an array of Python objects; save a plain numeric array (np.asarray(x, dtype=np.float32))"
        )),
        (Some(b'>'), ..) => Err(format!(
            "dtype {descr}: big-endian; save it little-endian (x.astype(x.dtype.newbyteorder('<')))"
        )),
        (Some(b'<' | b'|'), Some(b'f' | b'i' | b'u'), Some(n)) => Ok(n),
        _ => Err(format!(
            "dtype {descr}: expected a little-endian number (`<f4`, `<i4`, `|u1`, ...)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `np.save(f, np.arange(4, dtype='<f4'))` writes, built from the format's rules (not
    /// by `to_bytes`): magic, version 1.0, header length 118 (0x76) so that 10 + 118 = 128 is a
    /// multiple of 64, the dict, spaces, a newline, then 0.0, 1.0, 2.0, 3.0.
    fn numpy_arange4() -> Vec<u8> {
        let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
        let mut header = dict.to_string();
        header.push_str(&" ".repeat(118 - 1 - dict.len()));
        header.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
        bytes.extend_from_slice(header.as_bytes());
        for x in [0.0f32, 1.0, 2.0, 3.0] {
            bytes.extend_from_slice(&x.to_le_bytes());
        }
        bytes
    }

    #[test]
    fn the_writer_writes_what_numpy_writes_and_the_reader_reads_it() {
        let data: Vec<u8> = [0.0f32, 1.0, 2.0, 3.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let file = numpy_arange4();
        assert_eq!(to_bytes("<f4", &[4], &data), file);
        let npy = from_bytes(&file).unwrap();
        assert_eq!(
            npy,
            Npy {
                descr: "<f4".into(),
                shape: vec![4],
                data
            }
        );
    }

    #[test]
    fn a_shape_whose_size_overflows_is_refused_not_read_as_empty() {
        // 2^62 elements of 4 bytes: 2^64 bytes, which wraps to 0 in a usize.
        let file = to_bytes("<f4", &[1 << 62], &[]);
        let e = from_bytes(&file).unwrap_err();
        assert!(e.contains("more bytes than a machine can address"), "{e}");
    }

    #[test]
    fn arrays_round_trip_whatever_their_shape() {
        for shape in [vec![], vec![1], vec![3, 5], vec![2, 3, 4]] {
            let n: usize = shape.iter().product();
            let data: Vec<u8> = (0..n as u16).flat_map(|x| x.to_le_bytes()).collect();
            let file = to_bytes("<u2", &shape, &data);
            assert_eq!((file.len() - data.len()) % ALIGN, 0, "{shape:?}");
            let npy = from_bytes(&file).unwrap();
            assert_eq!(
                (npy.descr.as_str(), npy.shape, npy.data),
                ("<u2", shape, data)
            );
        }
    }

    /// Issue 55, finding 12: each of these was "expected little-endian".
    #[test]
    fn a_dtype_that_is_not_a_plain_number_is_named_for_what_it_is() {
        for (descr, why) in [
            ("[('a', '<f4'), ('b', '<i4')]", "a structured array"),
            ("'|O'", "Python objects"),
            ("'>f4'", "big-endian"),
            ("'<c8'", "expected a little-endian number"),
        ] {
            let dict = format!("{{'descr': {descr}, 'fortran_order': False, 'shape': (2,), }}");
            let mut bytes = MAGIC.to_vec();
            bytes.extend_from_slice(&[1, 0]);
            bytes.extend_from_slice(&(dict.len() as u16).to_le_bytes());
            bytes.extend_from_slice(dict.as_bytes());
            bytes.extend_from_slice(&[0; 16]);
            let err = from_bytes(&bytes).unwrap_err();
            assert!(err.contains(why), "{descr}: {err}");
        }
    }

    #[test]
    fn a_file_that_does_not_add_up_is_refused_with_why() {
        let mut file = numpy_arange4();
        file.pop();
        assert!(from_bytes(&file).unwrap_err().contains("needs 16 bytes"));
        assert!(from_bytes(b"PK\x03\x04").unwrap_err().contains("magic"));
        let big = to_bytes(">f4", &[1], &[0; 4]);
        assert!(from_bytes(&big).unwrap_err().contains("little-endian"));
    }
}
