//! The memory-pyramid microbenchmarks do the work they claim to: every byte is loaded (the
//! checksum proves it), the counted bytes are the ones the bandwidth is computed from, and the
//! pointer chase walks the chain it is given.

use host::ops::hierarchy;
use host::reference;
use kernels::hierarchy::{SENTINEL, SHARED_WORDS};
use proptest::prelude::*;
use suite::runtime;

proptest! {
    #![proptest_config(suite::proptest_config(12))]

    /// Thread 0's checksum equals the sentinel only if it loaded the planted word and each of its
    /// other words an even number of times; with two passes the planted word cancels out.
    #[test]
    fn stream_read_loads_every_word_passes_times(words4 in 1usize..3000, passes in 1u32..4) {
        let rt = runtime();
        let mut data = vec![0u32; 4 * words4];
        data[0] = SENTINEL;
        let src = rt.upload(&data).unwrap();
        let mut out = rt.alloc::<u32>(1).unwrap();
        let counted = hierarchy::stream_read(&rt, &src, passes, &mut out).unwrap();
        let wrote = rt.download(&out).unwrap()[0] == SENTINEL;
        prop_assert_eq!(wrote, passes % 2 == 1);
        if let Some(c) = counted {
            prop_assert_eq!(c.global_read_bytes, hierarchy::stream_read_cost(data.len(), passes).bytes_read);
        }
    }

    #[test]
    fn pointer_chase_ends_where_the_reference_does(len in 1usize..500, stride in 1usize..20, steps in 0u32..2000, seed in any::<u64>()) {
        let rt = runtime();
        let chain = reference::chase_chain(len, stride, seed);
        let want = reference::chase_end(&chain, steps as usize);
        let dchain = rt.upload(&chain).unwrap();
        let (mut end, mut cycles) = (rt.alloc::<u32>(1).unwrap(), rt.alloc::<u64>(1).unwrap());
        hierarchy::pointer_chase(&rt, &dchain, 0, steps, &mut end, &mut cycles).unwrap();
        prop_assert_eq!(rt.download(&end).unwrap()[0], want);
        if stride * len <= SHARED_WORDS {
            hierarchy::shared_pointer_chase(&rt, &dchain, steps, &mut end, &mut cycles).unwrap();
            prop_assert_eq!(rt.download(&end).unwrap()[0], want);
        }
    }
}

proptest! {
    #![proptest_config(suite::proptest_config(8))]

    /// Both ways, every word of every tile is written once with its own index (a word missed or
    /// written by two lanes shows as a wrong value, or as the emulator's race), and the counted
    /// bytes are the buffer's.
    #[test]
    fn store_tiles_writes_every_word_once(tiles in 1usize..40, scattered in any::<bool>()) {
        let rt = runtime();
        let words = tiles * 1024;
        let mut out = rt.upload(&vec![u32::MAX; words]).unwrap();
        let counted = hierarchy::store_tiles(&rt, &mut out, scattered).unwrap();
        let got = rt.download(&out).unwrap();
        let want: Vec<u32> = (0..words as u32).collect();
        prop_assert!(got == want, "first wrong word: {:?}", got.iter().zip(&want).position(|(g, w)| g != w));
        if let Some(c) = counted {
            prop_assert_eq!(c.global_write_bytes, hierarchy::store_tiles_cost(words).bytes_written);
        }
    }
}

/// What the microbenchmark is for: a scattered warp store touches 32 sectors (lanes 128 bytes
/// apart down a column of the row-major, 32-word-wide tile), the coalesced one 4 (32 consecutive
/// words), and both write the same bytes.
#[test]
fn scattered_store_tiles_touch_a_sector_per_lane() {
    let (rt, _) = suite::counting();
    let mut out = rt.alloc::<u32>(4 * 1024).unwrap();
    let profiled = rt.with_options(|o| o.profiling = true);
    let mut per_request = |scattered| {
        let (stored, observed) =
            profiled.observe(|rt| hierarchy::store_tiles(rt, &mut out, scattered));
        stored.unwrap();
        let profile = observed.profile;
        let stores: Vec<_> = profile.kernels["store_tiles"]
            .iter()
            .filter(|s| s.space == "global" && s.access == "write")
            .cloned()
            .collect();
        assert_eq!(stores.len(), 1);
        (stores[0].sectors_per_request(), stores[0].bytes)
    };
    let ((scattered, a), (coalesced, b)) = (per_request(true), per_request(false));
    assert_eq!(scattered, 32.0);
    assert_eq!(coalesced, 4.0);
    assert_eq!(a, b);
}

#[test]
fn a_chase_chain_is_one_cycle_through_every_link() {
    let (len, stride) = (1000, 16);
    let chain = reference::chase_chain(len, stride, 5);
    let mut seen = vec![false; len];
    let mut i = 0usize;
    for _ in 0..len {
        assert!(
            !seen[i / stride],
            "link {i} visited twice before the cycle closed"
        );
        seen[i / stride] = true;
        i = chain[i] as usize;
    }
    assert_eq!(i, 0);
    assert!(seen.iter().all(|&s| s));
}

#[test]
fn shared_read_reads_the_tile_passes_times() {
    let rt = runtime();
    let mut out = rt.alloc::<u32>(1).unwrap();
    let counted = hierarchy::shared_read(&rt, 2, 256, 3, &mut out).unwrap();
    if let Some(c) = counted {
        assert_eq!(c.shared_read_bytes, hierarchy::shared_read_bytes(2, 3));
    }
    assert!(
        hierarchy::shared_read(&rt, 1, 300, 1, &mut out).is_err(),
        "300 does not divide the tile's rows"
    );
}
