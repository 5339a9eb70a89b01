//! Where the model's prediction disagrees with a published measurement of the same algorithm on
//! the same device: the one table of them. `cargo xtask run` marks such a row and names the
//! measurement under its table, `cargo xtask predict` prints it after the prediction, and
//! docs/model.md ("Judged against published measurements") flags the same rows, which a test
//! below checks. A published whole-kernel time never sets a constant of the model (that would
//! make the comparison circular): it is shown beside the prediction instead. Every published
//! measurement the model is scored against, agreeing or not, is a row of
//! [`crate::validation::ROWS`] (`cargo xtask validate`).

use serde::Serialize;

use crate::specs::GpuSpec;

/// One known disagreement between the model and a published measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Disagreement {
    /// The project's kernel of the published algorithm, as `cargo xtask run` names it.
    pub kernel: &'static str,
    /// The device the measurement was taken on (a [`GpuSpec::key`]); the note applies to
    /// predictions for that device only.
    pub device: &'static str,
    /// The measurement's shape, where the source names one.
    pub shape: Option<&'static str>,
    /// What was measured, as docs/model.md's table says it.
    pub published: &'static str,
    /// The source's title.
    pub title: &'static str,
    /// Its public address.
    pub address: &'static str,
    /// What the model says against it, and why, in one line.
    pub verdict: &'static str,
}

/// Every known disagreement, in docs/model.md's order.
pub const DISAGREEMENTS: [Disagreement; 2] = [
    Disagreement {
        kernel: "transpose_naive",
        device: "h100",
        shape: None,
        published: "about 475 GB/s, 14 % of the HBM peak",
        title: "Optimizing GPU Matrix Transpose",
        address: "https://yencal.github.io/gpu-matrix-transpose-optimization",
        verdict: "the model's 2.1 TB/s at 8192 x 8192 is 4-5x too fast: partial-sector writes are not priced",
    },
    Disagreement {
        kernel: "gemm_tiled_f32",
        device: "a6000",
        shape: Some("4096^3"),
        published: "tiled 1.5x faster than the coalesced naive kernel, at 4092^3",
        title: "How to Optimize a CUDA Matmul Kernel for cuBLAS-like Performance: a Worklog",
        address: "https://siboehm.com/articles/22/CUDA-MMM",
        verdict: "the model's step from `gemm_naive_f32` is 1.8x, too large: the naive kernels differ (Boehm's warp reads one row of A, this one two) and no latency stalls are modelled",
    },
];

/// The known disagreement for `kernel`'s prediction on `device` (a [`GpuSpec::key`]), if any.
pub fn disagreement(kernel: &str, device: &str) -> Option<&'static Disagreement> {
    DISAGREEMENTS
        .iter()
        .find(|d| d.kernel == kernel && d.device == device)
}

impl Disagreement {
    /// One line (unwrapped) for a report: the kernel and device, the published figure with its
    /// source, and the verdict.
    pub fn note(&self) -> String {
        let device = GpuSpec::find(self.device).map_or(self.device, |s| s.name);
        let shape = self.shape.map(|s| format!(" at {s}")).unwrap_or_default();
        format!(
            "{} on the {device} disagrees with a published measurement{shape}: {} (\"{}\", {}); {}",
            self.kernel, self.published, self.title, self.address, self.verdict
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What docs/model.md's verdict cell says of a row that the run and predict flag.
    const FLAGGED: &str = "flagged by `cargo xtask run` and `predict`";

    /// The rows of docs/model.md's table of published measurements.
    fn judged_rows() -> Vec<String> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/model.md");
        let text = std::fs::read_to_string(path).expect("docs/model.md");
        let section = text
            .split("\n## Judged against published measurements\n")
            .nth(1)
            .expect("the section");
        let section = section.split("\n## ").next().unwrap();
        section
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| published"))
            .map(str::to_string)
            .collect()
    }

    /// docs/model.md flags the same rows as the table here, each with its kernel, figure and
    /// source, so that neither can change without the other.
    #[test]
    fn docs_model_md_flags_the_same_disagreements() {
        let rows = judged_rows();
        assert!(rows.len() >= 3, "{rows:?}");
        let flagged: Vec<&String> = rows.iter().filter(|r| r.contains(FLAGGED)).collect();
        assert_eq!(
            flagged.len(),
            DISAGREEMENTS.len(),
            "rows of docs/model.md that say `{FLAGGED}`: {flagged:?}"
        );
        for (d, row) in DISAGREEMENTS.iter().zip(&flagged) {
            for part in [&format!("`{}`", d.kernel), d.published, d.title, d.address] {
                assert!(row.contains(part), "`{part}` missing from {row}");
            }
            assert!(
                row.to_lowercase().contains(d.device),
                "{} missing from {row}",
                d.device
            );
            if let Some(shape) = d.shape {
                assert!(row.contains(shape), "`{shape}` missing from {row}");
            }
        }
    }

    #[test]
    fn a_disagreement_is_for_its_device_only() {
        assert!(disagreement("transpose_naive", "h100").is_some());
        assert!(disagreement("transpose_naive", "a6000").is_none());
        assert!(disagreement("gemm_tiled_f32", "a6000").is_some());
        assert!(disagreement("gemm_tiled_f32", "h100").is_none());
        assert!(disagreement("transpose_shared", "h100").is_none());
        for d in &DISAGREEMENTS {
            assert!(GpuSpec::find(d.device).is_some(), "{}", d.device);
            let note = d.note();
            assert!(
                note.contains(d.address) && note.contains(d.published),
                "{note}"
            );
        }
    }
}
