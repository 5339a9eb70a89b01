//! What the GPU runs, where it differs from the PTX: ptxas assembles PTX into the device's machine
//! code (SASS), and on the way it merges a thread's loads and stores of neighbouring words into
//! one wider instruction (four `ld.shared.f32` at `[r]`, `[r+4]`, `[r+8]`, `[r+12]` become one
//! `LDS.128`), and drops loads it can serve from a register. A profile counted on the PTX would
//! then see four 4-byte requests, each maybe bank-conflicted, where the GPU issues one 16-byte
//! request served in four conflict-free quarter-warp phases (PTX ISA, "Data Movement and
//! Conversion Instructions: ld": a vector access moves `.v2`/`.v4` elements of one thread at
//! once; CUDA C++ Best Practices Guide, "Shared Memory and Memory Banks").
//!
//! [`KernelCode`] is ptxas's line table read back: for each PTX line (the PTX module's own line,
//! which the toolchain makes ptxas's source file), the memory instructions of the machine code
//! that line became, with their width. A sampled launch hands it to the profile of each block,
//! which regroups the PTX's requests into the machine code's ([`regroup`]): the emulated
//! execution supplies the addresses and which lanes are active, the machine code which accesses
//! travel together.

use std::collections::HashMap;

use kernels::cuda::emu::{Access, SiteKind};

use super::error::MemorySpace;

/// One memory instruction of the machine code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MachineAccess {
    /// `None` for a generic `LD`/`ST`, which may reach either space.
    pub space: Option<MemorySpace>,
    pub access: Access,
    /// Bytes per thread: 4 for `LDS`, 8 for `LDS.64`, 16 for `LDS.128`.
    pub bytes: u32,
}

impl MachineAccess {
    fn serves(&self, space: MemorySpace, access: Access) -> bool {
        self.access == access && self.space.is_none_or(|s| s == space)
    }
}

/// A PTX module's machine code for one architecture, kernel by kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MachineCode {
    /// The architecture ptxas assembled it for (`sm_86`).
    pub arch: String,
    /// Each kernel's, by its PTX entry name.
    pub kernels: HashMap<String, KernelCode>,
}

/// One kernel's machine code, as its memory instructions per PTX line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelCode {
    /// PTX line to the memory instructions ptxas's line table gives it. A line ptxas gave no
    /// memory instruction is absent.
    pub lines: HashMap<u32, Vec<MachineAccess>>,
}

/// What ptxas made of one PTX line's plain load or store (`ld.`/`st.`, not `ldmatrix`, atomics
/// or asynchronous copies, whose machine code has no wider form).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    /// Assembled as one instruction this wide per thread, wider than the PTX's: it carries the
    /// words of its neighbours too.
    Widened(usize),
    /// No instruction of its kind at its line: merged into a neighbour's wider one, or served
    /// from a register.
    Absorbed,
    /// As in the PTX.
    Kept,
}

impl KernelCode {
    fn fate(&self, line: u32, space: MemorySpace, access: Access, ptx_bytes: usize) -> Fate {
        let widest = self.lines.get(&line).and_then(|ops| {
            ops.iter()
                .filter(|op| op.serves(space, access))
                .map(|op| op.bytes as usize)
                .max()
        });
        match widest {
            None => Fate::Absorbed,
            Some(w) if w > ptx_bytes => Fate::Widened(w),
            Some(_) => Fate::Kept,
        }
    }
}

/// One warp-wide request as the profile keeps it: its site, space and access, the warp, the
/// occurrence of the site in each lane, and the lanes' (address, bytes) in lane order.
pub(crate) type Request<K> = (K, Vec<(usize, usize)>);

/// The PTX's warp-wide requests regrouped as the machine code `code` issues them:
/// - a request at a line whose instruction ptxas made wider (`Widened(w)`) becomes one request of
///   `w` bytes per lane at each lane's `w`-aligned address (a vector access is aligned to its
///   size, PTX ISA "Vectors"), and a later occurrence of the same site whose lanes fall in the
///   vectors of the last one kept, at other offsets, is part of it (a loop ptxas unrolled and
///   merged);
/// - a request at a line with no instruction of its kind (`Absorbed`) is dropped: a neighbour's
///   wider instruction moves its words;
/// - every other request is kept as it is (and every request of a site that is not PTX).
///
/// `site_of` gives a request's site, space and access; requests come sorted so that one site's
/// occurrences in one warp are in order.
pub(crate) fn regroup<K>(
    requests: Vec<Request<K>>,
    code: &KernelCode,
    site_of: impl Fn(&K) -> (SiteKind, MemorySpace, Access, usize),
) -> Vec<Request<K>>
where
    K: Copy,
{
    let mut out = Vec::with_capacity(requests.len());
    // The last kept vector request of each (site, warp), by its key's site and warp.
    let mut last: HashMap<(u32, usize), Vec<(usize, usize)>> = HashMap::new();
    let mut last_offsets: HashMap<(u32, usize), Vec<usize>> = HashMap::new();
    for (key, lanes) in requests {
        let (kind, space, access, warp) = site_of(&key);
        let SiteKind::Ptx(site) = kind else {
            out.push((key, lanes));
            continue;
        };
        if !(site.text.starts_with("ld.") || site.text.starts_with("st.")) {
            out.push((key, lanes));
            continue;
        }
        let ptx_bytes = lanes.iter().map(|l| l.1).max().unwrap_or(4);
        match code.fate(site.line, space, access, ptx_bytes) {
            Fate::Kept => out.push((key, lanes)),
            Fate::Absorbed => {}
            Fate::Widened(w) => {
                let aligned: Vec<(usize, usize)> =
                    lanes.iter().map(|&(a, _)| (a - a % w, w)).collect();
                let offsets: Vec<usize> = lanes.iter().map(|&(a, _)| a % w).collect();
                let slot = (site.line, warp);
                let same_vectors = last.get(&slot) == Some(&aligned);
                let other_words = last_offsets.get(&slot).is_some_and(|o| *o != offsets);
                if same_vectors && other_words {
                    // Another word of the vectors just issued: ptxas merged the unrolled
                    // iterations into them.
                    continue;
                }
                last.insert(slot, aligned.clone());
                last_offsets.insert(slot, offsets);
                out.push((key, aligned));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernels::cuda::emu::{PtxSite, Site};

    use crate::profile::wavefronts;

    fn site(line: u32, text: &'static str) -> Site {
        Site::ptx(Box::leak(Box::new(PtxSite {
            function: "k",
            line,
            text,
            source: None,
        })))
    }

    fn shared_load(bytes: u32) -> MachineAccess {
        MachineAccess {
            space: Some(MemorySpace::Shared),
            access: Access::Read,
            bytes,
        }
    }

    type Key = (Site, u32);

    fn regrouped(requests: Vec<Request<Key>>, code: &KernelCode) -> Vec<Request<Key>> {
        regroup(requests, code, |(s, _)| {
            (s.kind(), MemorySpace::Shared, Access::Read, 0)
        })
    }

    /// Lane `l` reading the 4-byte word `4 l + j` of a shared array, for j = 0..3: as four
    /// `ld.shared.f32` each request is 4-way bank-conflicted (lanes 0, 8, 16, 24 meet in bank
    /// 0: 4 wavefronts, 16 in all); ptxas makes them one `LDS.128` at the first line, whose 16
    /// bytes a lane are served in four quarter-warp phases of 128 contiguous bytes: 4
    /// wavefronts, none conflicted. Derived from the bank rule (bank = word mod 32, one word
    /// per bank per wavefront), not from `wavefronts`' own arithmetic: the counts are written
    /// out.
    #[test]
    fn four_neighbouring_loads_made_one_lds_128_are_one_conflict_free_request() {
        let lines = [102, 105, 108, 111];
        let requests: Vec<Request<Key>> = lines
            .iter()
            .enumerate()
            .map(|(j, &line)| {
                let lanes = (0..32).map(|l| (4 * (4 * l + j), 4)).collect();
                ((site(line, "ld.shared.f32 %f1, [%rd3]"), 0), lanes)
            })
            .collect();
        let ptx: u64 = requests.iter().map(|(_, l)| wavefronts(l).0).sum();
        assert_eq!(ptx, 16, "four 4-way conflicted requests");
        let code = KernelCode {
            lines: HashMap::from([(102, vec![shared_load(16)])]),
        };
        let out = regrouped(requests, &code);
        assert_eq!(out.len(), 1);
        let (_, lanes) = &out[0];
        assert!(
            lanes
                .iter()
                .enumerate()
                .all(|(l, &(a, b))| a == 16 * l && b == 16)
        );
        assert_eq!(wavefronts(lanes), (4, 4));
    }

    /// One site in a loop that ptxas unrolled four times and merged: its occurrences at offsets
    /// 0, 4, 8 and 12 of each lane's 16 bytes are one request; the next 16 bytes another. The
    /// same addresses read again (a later iteration of an outer loop, at offset 0) are a new
    /// request.
    #[test]
    fn a_loop_unrolled_into_one_vector_load_counts_one_request_per_vector() {
        let s = site(40, "ld.shared.f32 %f2, [%rd7]");
        let at = |occurrence: u32, word: usize| {
            let lanes = (0..32).map(|_| (4 * word, 4)).collect();
            ((s, occurrence), lanes)
        };
        let requests = (0..8)
            .map(|k| at(k, k as usize))
            .chain([at(8, 0)])
            .collect();
        let code = KernelCode {
            lines: HashMap::from([(40, vec![shared_load(16)])]),
        };
        let out = regrouped(requests, &code);
        let starts: Vec<usize> = out.iter().map(|(_, lanes)| lanes[0].0).collect();
        assert_eq!(starts, [0, 16, 0]);
    }

    /// A load ptxas gave no instruction (served from a register, or merged elsewhere) is not
    /// issued; one assembled as it was written is kept; an atomic's site is never regrouped.
    #[test]
    fn absorbed_loads_drop_kept_ones_stay_and_atomics_are_left_alone() {
        let lanes: Vec<(usize, usize)> = (0..32).map(|l| (4 * l, 4)).collect();
        let requests = vec![
            ((site(1, "ld.shared.f32 %f1, [%rd1]"), 0), lanes.clone()),
            ((site(2, "ld.shared.f32 %f1, [%rd2]"), 0), lanes.clone()),
            (
                (site(3, "atom.shared.add.u32 %r1, [%rd1], 1"), 0),
                lanes.clone(),
            ),
        ];
        let code = KernelCode {
            lines: HashMap::from([(2, vec![shared_load(4)])]),
        };
        let out = regrouped(requests, &code);
        let kept: Vec<u32> = out.iter().map(|((s, _), _)| s.position().1).collect();
        assert_eq!(kept, [2, 3]);
        assert!(out.iter().all(|(_, l)| *l == lanes));
    }
}
