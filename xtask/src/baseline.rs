//! Which vendor operation each row of `cargo xtask run` is read against, at the row's own shape
//! and element type.
//!
//! A row carries a [`Baseline`] request: the operation (`matmul`, `sdpa`, ...), its dimensions
//! read from the row's shape, its element type, and a key. The bundle's `baselines.py` measures
//! each distinct request with PyTorch, and the summary matches rows to measurements by key, so a
//! GEMM at 1024^3 is read against `torch.matmul` at 1024^3, never at 4096^3. Every row is a
//! registered kernel's, whose spec declares its operation (`kernels::registry::Baseline`) or
//! none; a row of no registered kernel, or whose shape the operation cannot read, is reported
//! as unmatched, and the bundle's check (`cargo xtask device-bundle --check`) fails on it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A vendor measurement a row asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Baseline {
    /// The operation `baselines.py` knows: copy, add, strided_copy, transpose, softmax, matmul,
    /// linear, sdpa, sdpa_hopper, sdpa_decode.
    pub op: String,
    /// Element type: f32, bf16, f16, u32.
    pub dtype: String,
    /// The dimensions, named as `baselines.py` reads them.
    pub dims: BTreeMap<String, usize>,
    /// Causal mask (attention).
    pub causal: bool,
    /// The request in one string, which the measurement is filed under.
    pub key: String,
}

/// How a kernel's rows map to a vendor operation: its spec's baseline.
struct Entry {
    /// The operation.
    op: &'static str,
    /// The numbers of the row's shape, named in the order the shape lists them.
    dims: &'static [&'static str],
    /// The element type when neither the shape nor the kernel name gives one.
    dtype: &'static str,
}

const DTYPES: [&str; 5] = ["f32", "bf16", "f16", "u32", "fp8"];

/// How the reason for a row without a baseline starts when its kernel declares none
/// (a registered kernel whose spec says `baseline: None`): a fact, not a gap, so the summary
/// does not count it as unmatched.
pub const NONE_DECLARED: &str = "no vendor baseline";

/// The baseline of the row `kernel` at `shape` (as `cargo xtask run` writes it), or why there is
/// none: its registered spec's.
pub fn for_row(kernel: &str, shape: &str) -> Result<Baseline, String> {
    let spec = host::registry::find(kernel)
        .ok_or_else(|| format!("unmatched: `{kernel}` is no registered kernel"))?;
    let Some(b) = spec.baseline else {
        return Err(format!(
            "{NONE_DECLARED}: `{kernel}` declares none (its spec's `baseline`)"
        ));
    };
    let entry = Entry {
        op: b.op,
        dims: b.dims,
        dtype: (spec.output)(spec.shapes.test_max).elem.name(),
    };
    request(&entry, kernel, shape)
}

/// The request `entry` makes for the row `kernel` at `shape`.
fn request(entry: &Entry, kernel: &str, shape: &str) -> Result<Baseline, String> {
    let op = entry.op;
    let parsed = parse_shape(shape);
    if parsed.numbers.len() != entry.dims.len() {
        return Err(format!(
            "unmatched: shape `{shape}` of `{kernel}` has {} numbers, `{op}` needs {} ({})",
            parsed.numbers.len(),
            entry.dims.len(),
            entry.dims.join(", ")
        ));
    }
    let from_name = kernel.split('_').find(|t| DTYPES.contains(t));
    let dtype = parsed.dtype.or(from_name).unwrap_or(entry.dtype);
    let dims: BTreeMap<String, usize> = entry
        .dims
        .iter()
        .map(|d| d.to_string())
        .zip(parsed.numbers)
        .collect();
    let mut key = format!("{op} {dtype}");
    for name in entry.dims {
        key.push_str(&format!(" {name}={}", dims[*name]));
    }
    if parsed.causal {
        key.push_str(" causal");
    }
    Ok(Baseline {
        op: op.to_string(),
        dtype: dtype.to_string(),
        dims,
        causal: parsed.causal,
        key,
    })
}

/// What a row's shape string says.
#[derive(Debug, PartialEq)]
struct Shape<'a> {
    numbers: Vec<usize>,
    dtype: Option<&'a str>,
    causal: bool,
}

/// Reads the shapes `cases.rs` writes: `8192 x 8192 f32`, `4x16x4096x128 bf16 causal`,
/// `4096^3`, `256M elements`, `16M elements at stride 8`, `M=1: 4096 -> 14336 bf16`: every run
/// of digits in order (`16M` is 16 x 2^20, `4096^3` three equal dimensions), an element-type
/// word, `causal`; a parenthesised note is ignored.
fn parse_shape(shape: &str) -> Shape<'_> {
    let text = shape.split('(').next().unwrap_or_default();
    let mut parsed = Shape {
        numbers: Vec::new(),
        dtype: None,
        causal: false,
    };
    for word in text.split_whitespace() {
        if word == "causal" {
            parsed.causal = true;
        } else if let Some(d) = DTYPES.iter().find(|d| **d == word) {
            parsed.dtype = Some(d);
        } else {
            numbers(word, &mut parsed.numbers);
        }
    }
    parsed
}

/// The numbers in `word`, in order: `4x16x4096x128`, `16M`, `4096^3`, `M=1:`.
fn numbers(word: &str, out: &mut Vec<usize>) {
    let bytes = word.as_bytes();
    let digits_from = |i: usize| bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
    let mut i = 0;
    while i < bytes.len() {
        let len = digits_from(i);
        if len == 0 {
            i += 1;
            continue;
        }
        let mut value: usize = word[i..i + len].parse().unwrap_or(usize::MAX);
        i += len;
        let mut repeat = 1;
        match bytes.get(i) {
            Some(b'M') => {
                value = value.saturating_mul(1 << 20);
                i += 1;
            }
            Some(b'^') if digits_from(i + 1) > 0 => {
                let r = digits_from(i + 1);
                repeat = word[i + 1..i + 1 + r].parse().unwrap_or(1);
                i += 1 + r;
            }
            _ => {}
        }
        out.extend(std::iter::repeat_n(value, repeat));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_shape_form_of_the_cases() {
        let cases = [
            (
                "gemm_tensor_core_bf16",
                "1024^3 (no L2)",
                "matmul bf16 m=1024 n=1024 k=1024",
            ),
            (
                "gemm_wgmma_f16",
                "4096^3 (no L2)",
                "matmul f16 m=4096 n=4096 k=4096",
            ),
            (
                "attention_fused_f16",
                "4x16x4096x128 f16",
                "sdpa f16 batch=4 heads=16 seq=4096 head_dim=128",
            ),
            (
                "attention_fused_bf16_causal",
                "4x16x4096x128 bf16 causal",
                "sdpa bf16 batch=4 heads=16 seq=4096 head_dim=128 causal",
            ),
            (
                "attention_wgmma_bf16_causal",
                "4x16x4096x128 bf16 causal",
                "sdpa_hopper bf16 batch=4 heads=16 seq=4096 head_dim=128 causal",
            ),
            (
                "softmax_online_bf16",
                "32768 x 4096 bf16",
                "softmax bf16 rows=32768 cols=4096",
            ),
            (
                "copy_strided",
                "16M elements at stride 8",
                "strided_copy f32 n=16777216 stride=8",
            ),
            ("copy_words", "1048579 elements", "copy u32 n=1048579"),
            ("vector_add_f16", "128M elements", "add f16 n=134217728"),
            (
                "gemv_bf16",
                "M=1: 4096 -> 14336 bf16",
                "linear bf16 m=1 k=4096 n=14336",
            ),
            (
                "decode_attention_bf16",
                "1x32q/8kv ctx [4096]",
                "sdpa_decode bf16 batch=1 q_heads=32 kv_heads=8 ctx=4096",
            ),
            (
                "decode_attention_paged_bf16",
                "1x32q/8kv ctx [131072] pages of 16",
                "sdpa_decode bf16 batch=1 q_heads=32 kv_heads=8 ctx=131072 page=16",
            ),
        ];
        for (kernel, shape, key) in cases {
            assert_eq!(for_row(kernel, shape).map(|b| b.key).as_deref(), Ok(key));
        }
    }

    #[test]
    fn a_new_kernel_or_shape_is_unmatched() {
        let err = for_row("decode_gemv_bf16", "1 x 4096 x 4096 bf16").unwrap_err();
        assert!(
            err.starts_with("unmatched") && err.contains("no registered kernel"),
            "{err}"
        );
        let err = for_row("gemm_tiled_f32", "1024 x 512").unwrap_err();
        assert!(
            err.starts_with("unmatched") && err.contains("m, n, k"),
            "{err}"
        );
    }

    /// A registered kernel's row asks for what its spec declares, or says it declares none.
    #[test]
    fn a_registered_kernel_declares_its_baseline_or_none() {
        let b = for_row("scaffold_tiled", "8192 x 8192 f32").unwrap();
        assert_eq!(b.key, "transpose f32 rows=8192 cols=8192");
        let err = for_row("scaffold_elementwise", "64M elements").unwrap_err();
        assert!(err.starts_with(NONE_DECLARED), "{err}");
    }
}
