//! A profile read per access site (`emu::Profile`, from a profiled launch): the per-site table,
//! each site's share of the memory pipeline's time, and the site that costs the most of what
//! limits a launch. A service: `inspect` prints them, `exercise` names the costliest site of a
//! missed target, `doc-pastes` compares them with the chapters.

use emu::{Profile, SiteStats};

/// Which line costs what in the memory pipeline: each site's share of the load/store units'
/// issue (one warp-wide request a clock) and of the L1/shared data path (a shared wavefront a
/// clock; a global request the longer of its lines' lookups and its bank wavefronts, at least a
/// clock: `emu::profile::l1_quarter_clocks`), the shares the performance model's LSU-issue and
/// data-path times divide into (on the Hopper and A100 L1; GA102's takes at least two clocks).
pub(crate) fn site_costs_text(profile: &Profile) -> String {
    let mut out = String::from(
        "
where the memory pipeline's time goes, per site (its share of the kernel's):
",
    );
    for (kernel, sites) in &profile.kernels {
        let cycles = data_path_clocks;
        let issue: f64 = sites.iter().map(|s| s.requests as f64).sum();
        let path: f64 = sites.iter().map(cycles).sum();
        out.push_str(&format!(
            "{kernel}
  {:<40} {:<7} {:<6} {:>10} {:>10}
",
            "site", "space", "access", "LSU issue", "data path"
        ));
        for s in sites {
            let site = s.site.rsplit('/').next().unwrap_or(&s.site);
            out.push_str(&format!(
                "  {:<40} {:<7} {:<6} {:>9.1}% {:>9.1}%\n",
                site,
                s.space,
                s.access,
                100.0 * s.requests as f64 / issue.max(1.0),
                100.0 * cycles(s) / path.max(1.0)
            ));
        }
    }
    out
}

/// A site's clocks of the L1/shared data path: a shared wavefront a clock; a global request the
/// longer of its lines' lookups and its bank wavefronts (`emu::profile::l1_quarter_clocks`).
fn data_path_clocks(s: &SiteStats) -> f64 {
    if s.space == "global" {
        s.l1_quarters as f64 / 4.0
    } else {
        s.wavefronts as f64
    }
}

/// The access site that costs the most of what limits a launch (`limiter`, the model's), with
/// its share: the L1/shared data path's clocks for shared wavefronts and L1, the load/store
/// units' issue for LSU issue, the global sectors for L2 and DRAM. `None` for a compute or
/// launch limiter, which no memory site explains, or a profile without sites.
pub(crate) fn costliest_site(profile: &Profile, limiter: perf::model::Limiter) -> Option<String> {
    use perf::model::Limiter;
    let (measure, what): (fn(&SiteStats) -> f64, &str) = match limiter {
        Limiter::SharedWavefronts | Limiter::L1 => {
            (data_path_clocks, "of the L1/shared data path's clocks")
        }
        Limiter::LsuIssue => (|s| s.requests as f64, "of the load/store units' issue"),
        Limiter::L2 | Limiter::Dram | Limiter::Latency => {
            (|s| s.sectors as f64, "of the global sectors")
        }
        _ => return None,
    };
    let sites: Vec<&SiteStats> = profile.kernels.values().flatten().collect();
    let total: f64 = sites.iter().map(|s| measure(s)).sum();
    let top = sites
        .into_iter()
        .max_by(|a, b| measure(a).total_cmp(&measure(b)))
        .filter(|_| total > 0.0)?;
    let detail = if top.space == "global" {
        format!("{:.1} sectors per request", top.sectors_per_request())
    } else {
        format!("conflict degree {:.2}", top.conflict_degree())
    };
    Some(format!(
        "{} ({} {}, {detail}) takes {:.0}% {what}",
        top.site,
        top.space,
        top.access,
        100.0 * measure(top) / total
    ))
}

/// The per-site table: one block per kernel, one line per access site.
pub(crate) fn profile_text(profile: &Profile) -> String {
    let mut out = String::new();
    for (kernel, sites) in &profile.kernels {
        out.push_str(&format!("{kernel}\n"));
        out.push_str(&format!(
            "  {:<40} {:<7} {:<6} {:>9} {:>11} {:>22} {:>15}\n",
            "site",
            "space",
            "access",
            "requests",
            "bytes",
            "sectors/req (ideal)",
            "conflict degree"
        ));
        for s in sites {
            let (sectors, conflict) = if s.space == "global" {
                (
                    format!(
                        "{:.1} ({:.1})",
                        s.sectors_per_request(),
                        s.ideal_sectors as f64 / s.requests.max(1) as f64
                    ),
                    String::new(),
                )
            } else {
                (String::new(), format!("{:.1}-way", s.conflict_degree()))
            };
            let site = s.site.rsplit('/').next().unwrap_or(&s.site);
            out.push_str(&format!(
                "  {:<40} {:<7} {:<6} {:>9} {:>11} {:>22} {:>15}\n",
                site, s.space, s.access, s.requests, s.bytes, sectors, conflict
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read site of 100 requests with `sectors` global sectors and `wavefronts` shared
    /// wavefronts (100 ideal).
    fn site(site: &str, space: &str, sectors: u64, wavefronts: u64) -> SiteStats {
        SiteStats {
            site: site.to_string(),
            space: space.to_string(),
            access: "read".to_string(),
            requests: 100,
            bytes: 12800,
            sectors,
            ideal_sectors: sectors,
            l1_quarters: sectors,
            wavefronts,
            ideal_wavefronts: 100,
        }
    }

    /// A performance miss names its line: the shared site that takes most of the data path
    /// when shared wavefronts limit, the global one when DRAM does, none for FP32.
    #[test]
    fn the_costliest_site_is_the_limiters() {
        let mut profile = Profile::default();
        profile.kernels.insert(
            "k".to_string(),
            vec![
                site("k.rs:1:1", "global", 1600, 0),
                site("k.rs:2:1", "shared", 0, 1650),
            ],
        );
        use perf::model::Limiter;
        let shared = costliest_site(&profile, Limiter::SharedWavefronts).unwrap();
        assert_eq!(
            shared,
            "k.rs:2:1 (shared read, conflict degree 16.50) takes 80% of the L1/shared data path's clocks"
        );
        let dram = costliest_site(&profile, Limiter::Dram).unwrap();
        assert!(
            dram.starts_with("k.rs:1:1 (global read, 16.0 sectors"),
            "{dram}"
        );
        assert_eq!(costliest_site(&profile, Limiter::Fp32), None);
    }

    #[test]
    fn each_site_gets_its_share_of_issue_and_data_path() {
        let mut profile = Profile::default();
        profile.kernels.insert(
            "k".to_string(),
            vec![
                site("k.rs:1:1", "global", 400, 0),
                site("k.rs:2:1", "shared", 0, 3200),
            ],
        );
        let text = site_costs_text(&profile);
        let row = |at: &str| -> Vec<String> {
            let line = text.lines().find(|l| l.contains(at)).unwrap();
            line.split_whitespace()
                .skip(3)
                .map(str::to_string)
                .collect()
        };
        assert_eq!(row("k.rs:1:1"), ["50.0%", "3.0%"], "{text}");
        assert_eq!(row("k.rs:2:1"), ["50.0%", "97.0%"], "{text}");
    }
}
