//! The toolchain picture: one Rust source, its two compilations, the three ways it runs.

use super::{Svg, arrow};

// ---- The toolchain ----------------------------------------------------------------------------

/// The pinned nightly's channel, from the file host/build.rs reads.
fn kernels_nightly() -> &'static str {
    host::ptx_build::channel(include_str!("../../../../kernels/rust-toolchain.toml"))
        .expect("kernels/rust-toolchain.toml names a channel")
}

/// A box with a bold first line and smaller lines under it.
fn boxed(svg: &mut Svg, (x, y, w, h): (f64, f64, f64, f64), fill: &str, lines: &[&str]) {
    svg.rect(x, y, w, h, fill, "#557");
    for (i, l) in lines.iter().enumerate() {
        let size = if i == 0 { 12.0 } else { 10.0 };
        svg.text(x + 8.0, y + 16.0 + 14.0 * i as f64, size, "start", l);
    }
}

/// `words` joined by ", " into lines of at most `width` characters (a word longer than that on a
/// line of its own).
fn wrap(words: &[String], width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let piece = if i + 1 < words.len() {
            format!("{w},")
        } else {
            w.clone()
        };
        match lines.last_mut() {
            Some(line) if line.len() + 1 + piece.len() <= width => {
                line.push(' ');
                line.push_str(&piece);
            }
            _ => lines.push(piece),
        }
    }
    lines
}

pub(super) fn toolchain() -> String {
    use host::embedded::Arch;
    let hopper_only = hopper_only_families();
    let mut svg = Svg::new(1000.0, 360.0);
    svg.text(
        10.0,
        20.0,
        15.0,
        "start",
        "One Rust source, two compilations, three ways to run it and one to check it (ptxas)",
    );
    let source = (10.0, 135.0, 200.0, 62.0);
    boxed(
        &mut svg,
        source,
        "hsl(40, 80%, 88%)",
        &[
            "kernels/ (#![no_std] Rust)",
            "every kernel a kernel!{...}",
            "device support: kernels::cuda",
        ],
    );
    // Top: the PTX modules host/build.rs embeds, one per architecture.
    svg.text(
        230.0,
        46.0,
        10.0,
        "start",
        &format!("rustc {} --target nvptx64-nvidia-cuda", kernels_nightly()),
    );
    svg.text(
        230.0,
        58.0,
        10.0,
        "start",
        "(host/build.rs, at cargo build)",
    );
    // No count of entries: the picture must not go stale when a kernel is added.
    let module = |i: usize| (330.0, 70.0 + 48.0 * i as f64, 300.0, 40.0);
    for (i, &arch) in Arch::ALL.iter().enumerate() {
        let mut lines = vec![format!(
            "kernels-{}.ptx: one .entry per kernel",
            arch.name()
        )];
        match arch {
            Arch::Sm80 => lines.push("A100 and later (the driver JITs it)".to_string()),
            Arch::Sm90 => lines.push("Hopper, portable (Hopper-only kernels trap)".to_string()),
            Arch::Sm90a => {
                lines.push("wgmma + TMA in the Hopper-only kernels:".to_string());
                lines.extend(wrap(&hopper_only.iter().cloned().collect::<Vec<_>>(), 46));
            }
        }
        let (x, y, w, _) = module(i);
        // As tall as its lines (the last box has room below it).
        let h = (12.0 + 14.0 * lines.len() as f64).max(40.0);
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        boxed(&mut svg, (x, y, w, h), "hsl(210, 60%, 90%)", &lines);
        arrow(
            &mut svg,
            (source.0 + source.2, source.1 + 20.0),
            (x, y + h / 2.0),
        );
    }
    let runs = [
        (
            "on a GPU: cuModuleLoadData (cudarc)",
            "the driver compiles the PTX to SASS and runs it",
        ),
        (
            "cargo xtask ptxas: NVIDIA's ptxas",
            "registers, spills, occupancy; SASS via nvdisasm",
        ),
        (
            "PTX backend (KERNELS_BACKEND=ptx)",
            "the ptx crate parses and runs the PTX itself",
        ),
    ];
    for (i, (head, note)) in runs.iter().enumerate() {
        let (x, y, w, h) = (680.0, 70.0 + 48.0 * i as f64, 310.0, 40.0);
        boxed(&mut svg, (x, y, w, h), "hsl(120, 40%, 90%)", &[head, note]);
        // Any module can take any of the three paths: a bus between the two columns.
        let (mx, my, mw, mh) = module(i);
        let bus = 655.0;
        svg.line((mx + mw, my + mh / 2.0), (bus, my + mh / 2.0), "#557", 1.2);
        arrow(&mut svg, (bus, y + h / 2.0), (x, y + h / 2.0));
    }
    let (first, last) = (module(0), module(2));
    svg.line(
        (655.0, first.1 + first.3 / 2.0),
        (655.0, last.1 + last.3 / 2.0),
        "#557",
        1.2,
    );
    host_row(&mut svg, source);
    svg.text(
        10.0,
        335.0,
        11.0,
        "start",
        "Both CPU backends share the emulator's block scheduler and checks (races, out of bounds, barrier divergence, counted bytes); the tests run on either.",
    );
    svg.text(
        10.0,
        350.0,
        11.0,
        "start",
        "Hopper-only kernels read from the embedded modules (host::embedded::Arch::ptx), the nightly from kernels/rust-toolchain.toml. cargo xtask figures.",
    );
    svg.finish()
}

/// The Hopper-only kernels by family (`gemm_wgmma_bf16` and `gemm_wgmma_f16` are
/// `gemm_wgmma_*`): every build has the same entries, and a Hopper-only kernel's body is wgmma
/// and TMA in sm_90a and a trap elsewhere.
fn hopper_only_families() -> std::collections::BTreeSet<String> {
    use host::embedded::{Arch, entry_body, entry_points};
    let entries = |a: Arch| entry_points(a.ptx());
    let hopper_body = |a: Arch, name: &str| {
        entry_body(a.ptx(), name).is_some_and(|b| b.contains("wgmma.") || b.contains(".tensor"))
    };
    let family = |name: &str| {
        let kept: Vec<&str> = name
            .split('_')
            .filter(|t| !["f32", "bf16", "f16", "d64", "d128", "causal"].contains(t))
            .collect();
        kept.join("_") + "_*"
    };
    entries(Arch::Sm90a)
        .into_iter()
        .filter(|e| hopper_body(Arch::Sm90a, e) && !hopper_body(Arch::Sm90, e))
        .map(family)
        .collect()
}

/// The picture's bottom row: the same source compiled for the host, run by the source backend.
fn host_row(svg: &mut Svg, source: (f64, f64, f64, f64)) {
    svg.text(340.0, 256.0, 10.0, "start", "rustc (stable), host target");
    let host = (330.0, 262.0, 300.0, 40.0);
    boxed(
        svg,
        host,
        "hsl(40, 80%, 92%)",
        &[
            "kernel!{...} as a plain unsafe fn",
            "kernels::cuda calls into the emulator",
        ],
    );
    arrow(
        svg,
        (source.0 + source.2, source.1 + 42.0),
        (host.0, host.1 + 20.0),
    );
    let emulated = (680.0, 262.0, 310.0, 40.0);
    boxed(
        svg,
        emulated,
        "hsl(120, 40%, 90%)",
        &[
            "source backend (KERNELS_BACKEND=emulator)",
            "called once per simulated thread",
        ],
    );
    arrow(
        svg,
        (host.0 + host.2, host.1 + 20.0),
        (emulated.0, emulated.1 + 20.0),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The toolchain picture says nothing that changes when a kernel is added: no count of
    /// kernels or entries (its staleness test would fail on every new kernel), and its longest
    /// line fits its box.
    #[test]
    fn the_toolchain_picture_embeds_no_kernel_count() {
        let svg = toolchain();
        let n = host::embedded::entry_points(host::embedded::Arch::Sm90.ptx()).len();
        assert!(
            !svg.contains(&format!(">{n} ")) && !svg.contains(&format!(": {n} ")),
            "{svg}"
        );
        assert!(!svg.contains(" entries<") && !svg.contains(" kernels,"));
        let hopper = wrap(
            &[
                "attention_wgmma_*".into(),
                "flash_attention_wgmma_*".into(),
                "gemm_wgmma_*".into(),
            ],
            46,
        );
        assert_eq!(
            hopper,
            [
                "attention_wgmma_*, flash_attention_wgmma_*,",
                "gemm_wgmma_*"
            ]
        );
    }
}
