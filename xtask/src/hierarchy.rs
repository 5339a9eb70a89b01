//! `cargo xtask hierarchy`: each level of the memory pyramid measured on this device with the
//! project's own kernels, beside the vendor's (or the teaching material's) figure.

use host::bench::{BenchConfig, time_gpu};
use host::ops::hierarchy;
use host::reference;
use host::runtime::Backend;
use host::{DeviceBuffer, Runtime};
use kernels::hierarchy::SHARED_WORDS;
use perf::occupancy::HBM_LATENCY_CYCLES;
use perf::specs::GpuSpec;
use serde::Serialize;

use crate::checkout::report_dir;
use crate::plot;

const MIB: usize = 1024 * 1024;
/// Words between two links of a pointer chase: 128 bytes, one L2 line, so every hop is a miss
/// in the level above.
const CHASE_STRIDE: usize = 32;

#[derive(clap::Args)]
pub struct HierarchyArgs {
    /// The GPU whose vendor figures are shown (default: the one found, else H100).
    #[arg(long)]
    device: Option<String>,
    /// Largest working set of the bandwidth sweep, MiB.
    #[arg(long, default_value_t = 4096)]
    max_mib: usize,
}

/// One line of the table.
#[derive(Serialize)]
struct Level {
    level: &'static str,
    measured: Option<String>,
    reference: String,
    source: &'static str,
}

#[derive(Serialize)]
struct Report {
    device: String,
    levels: Vec<Level>,
    /// (working-set bytes, read bytes per second).
    sweep: Vec<(f64, f64)>,
}

pub fn run(args: &HierarchyArgs) -> Result<(), String> {
    let rt = Runtime::from_env().map_err(|e| e.to_string())?;
    let found = match rt.backend() {
        Backend::Cuda(gpu) => GpuSpec::find(gpu.name()),
        Backend::Emulator(_) | Backend::Ptx(_) => None,
    };
    let spec = match &args.device {
        Some(name) => GpuSpec::find(name).ok_or_else(|| format!("unknown device `{name}`"))?,
        None => found.unwrap_or_else(|| GpuSpec::find("h100").expect("h100 in the table")),
    };
    let Backend::Cuda(gpu) = rt.backend() else {
        print!("{}", no_gpu_text(spec));
        return Ok(());
    };
    let props = gpu.properties();
    let ns_per_cycle = 1e6 / f64::from(props.clock_khz);
    println!(
        "Measuring {} ({} SMs, {} MiB L2, clock {} MHz)...",
        gpu.name(),
        props.sms,
        props.l2_bytes as usize / MIB,
        props.clock_khz / 1000
    );

    let mut sweep = Vec::new();
    let mut size = MIB;
    while size <= args.max_mib * MIB {
        let bw = stream_bandwidth(&rt, size)?;
        println!(
            "  stream read, working set {:>5} MiB: {:>7.2} TB/s",
            size / MIB,
            bw / 1e12
        );
        sweep.push((size as f64, bw));
        size *= 2;
    }
    let l2_bw = sweep
        .iter()
        .filter(|(s, _)| *s <= props.l2_bytes as f64 / 2.0)
        .map(|p| p.1)
        .fold(0.0, f64::max);
    let hbm_bw = sweep.last().map_or(0.0, |p| p.1);
    let shared_bw = shared_bandwidth(&rt, props.sms)?;
    let lat = |bytes: usize, warm: bool| chase_latency(&rt, bytes, warm);
    let (hbm_lat, l2_lat, shared_lat) = (
        lat(1024 * MIB, false)?,
        lat(4 * MIB, true)?,
        shared_latency(&rt)?,
    );
    let store = |scattered| store_bandwidth(&rt, STORE_BYTES, scattered);
    let (stores_coalesced, stores_scattered) = (store(false)?, store(true)?);
    let [h2d, d2h, pinned_h2d, pinned_d2h] = copy_bandwidth(&rt, gpu)?;
    let measured = Measured {
        hbm: hbm_bw,
        l2: l2_bw,
        shared: shared_bw,
        hbm_cycles: hbm_lat,
        l2_cycles: l2_lat,
        shared_cycles: shared_lat,
        stores_coalesced,
        stores_scattered,
        ns_per_cycle,
        h2d,
        d2h,
        pinned_h2d,
        pinned_d2h,
    };
    let levels = vendor_levels(spec, Some(&measured));
    print_levels(&levels);
    let dir = report_dir()?;
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let report = Report {
        device: gpu.name().to_string(),
        levels,
        sweep,
    };
    let json = dir.join("hierarchy.json");
    crate::atomic::write(
        &json,
        serde_json::to_string_pretty(&report).expect("serialises"),
    )?;
    let svg = dir.join("hierarchy-bandwidth.svg");
    plot::bandwidth(
        &svg,
        &report.sweep,
        props.l2_bytes as f64,
        &format!("Read bandwidth vs working set, {} (measured)", gpu.name()),
    )?;
    println!("JSON: {}\nchart: {}", json.display(), svg.display());
    Ok(())
}

struct Measured {
    hbm: f64,
    l2: f64,
    shared: f64,
    hbm_cycles: f64,
    l2_cycles: f64,
    shared_cycles: f64,
    /// Bytes a second written by `store_tiles`, by rows and by columns of its tiles.
    stores_coalesced: f64,
    stores_scattered: f64,
    ns_per_cycle: f64,
    h2d: f64,
    d2h: f64,
    pinned_h2d: f64,
    pinned_d2h: f64,
}

fn vendor_levels(spec: &GpuSpec, m: Option<&Measured>) -> Vec<Level> {
    let mut levels = pyramid_levels(spec, m);
    // The host link four ways: each direction, from pageable and from pinned host memory.
    let copies: [(&'static str, Option<f64>); 4] = [
        ("host to device (pageable)", m.map(|m| m.h2d)),
        ("device to host (pageable)", m.map(|m| m.d2h)),
        ("host to device (pinned)", m.map(|m| m.pinned_h2d)),
        ("device to host (pinned)", m.map(|m| m.pinned_d2h)),
    ];
    for (level, measured) in copies {
        levels.push(Level {
            level,
            measured: measured.map(|v| format!("{:.1} GB/s", v / 1e9)),
            reference: format!(
                "{:.0} GB/s per direction (PCIe 5 x16)",
                spec.pcie_bandwidth / 1e9
            ),
            source: "vendor",
        });
    }
    levels
}

/// The on-chip levels and HBM: bandwidths and latencies.
fn pyramid_levels(spec: &GpuSpec, m: Option<&Measured>) -> Vec<Level> {
    let tbs = |v: f64| format!("{:.2} TB/s", v / 1e12);
    let cycles = |c: f64, ns: f64| format!("{c:.0} cycles ({:.0} ns)", c * ns);
    vec![
        Level {
            level: "HBM bandwidth",
            measured: m.map(|m| tbs(m.hbm)),
            reference: tbs(spec.hbm_bandwidth),
            source: "vendor",
        },
        Level {
            level: "L2 bandwidth",
            measured: m.map(|m| tbs(m.l2)),
            reference: "5.5 to 12 TB/s (H100)".into(),
            source: "teaching material, measured elsewhere",
        },
        Level {
            level: "shared memory bandwidth",
            measured: m.map(|m| tbs(m.shared)),
            reference: format!(
                "{} ({:.0} B/clock/SM x {} SMs x {:.2} GHz)",
                tbs(spec.shared_bytes_per_clock * f64::from(spec.sms) * spec.boost_clock_hz),
                spec.shared_bytes_per_clock,
                spec.sms,
                spec.boost_clock_hz / 1e9
            ),
            source: "vendor-derived",
        },
        Level {
            level: "HBM stores, coalesced",
            measured: m.map(|m| tbs(m.stores_coalesced)),
            reference: tbs(spec.hbm_bandwidth),
            source: "vendor",
        },
        Level {
            level: "HBM stores, scattered",
            measured: m.map(|m| tbs(m.stores_scattered)),
            reference: "unpublished: the model's missing constant".into(),
            source: "docs/model.md",
        },
        Level {
            level: "HBM latency",
            measured: m.map(|m| cycles(m.hbm_cycles, m.ns_per_cycle)),
            reference: format!("about {HBM_LATENCY_CYCLES:.0} cycles"),
            source: "teaching material",
        },
        Level {
            level: "L2 latency",
            measured: m.map(|m| cycles(m.l2_cycles, m.ns_per_cycle)),
            reference: "hundreds of cycles".into(),
            source: "teaching material",
        },
        Level {
            level: "shared memory latency",
            measured: m.map(|m| cycles(m.shared_cycles, m.ns_per_cycle)),
            reference: "tens of cycles".into(),
            source: "teaching material",
        },
    ]
}

/// What `cargo xtask hierarchy` prints without a GPU: the reason, then the vendor column.
pub(crate) fn no_gpu_text(spec: &GpuSpec) -> String {
    format!(
        "`cargo xtask hierarchy` measures a GPU, and there is none here ({}).\nVendor and teaching-material figures for {}:\n\n{}",
        crate::options::no_gpu_reason(),
        spec.name,
        levels_text(&vendor_levels(spec, None))
    )
}

fn print_levels(levels: &[Level]) {
    print!("{}", levels_text(levels));
}

fn levels_text(levels: &[Level]) -> String {
    let mut out = format!(
        "{:<28} {:<26} {:<48} source\n",
        "level", "measured", "reference"
    );
    for l in levels {
        out.push_str(&format!(
            "{:<28} {:<26} {:<48} {}\n",
            l.level,
            l.measured.as_deref().unwrap_or("(needs a GPU)"),
            l.reference,
            l.source
        ));
    }
    out
}

fn stream_bandwidth(rt: &Runtime, bytes: usize) -> Result<f64, String> {
    let words = bytes / 4;
    // Enough passes that each timing reads at least 2 GiB: small sets are re-read from L2.
    let passes = (2048 * MIB / bytes).max(1) as u32;
    let src: DeviceBuffer<u32> = rt.alloc(words).map_err(|e| e.to_string())?;
    let mut out = rt.alloc::<u32>(1).map_err(|e| e.to_string())?;
    let t = time_gpu(rt, BenchConfig { warmup: 2, runs: 5 }, || {
        hierarchy::stream_read(rt, &src, passes, &mut out).map(|_| ())
    })
    .map_err(|e| e.to_string())?;
    Ok(hierarchy::stream_read_cost(words, passes).bytes_read as f64 / t.median)
}

/// The store benchmark's buffer: 256 MiB, the naive transpose's output at 8192 x 8192 f32 and
/// five times H100's L2, so the sectors are written back to HBM.
const STORE_BYTES: usize = 256 * MIB;

/// Bytes a second `store_tiles` writes, by columns of its tiles (`scattered`: each lane's 4
/// bytes in its own 128-byte line, as the naive transpose stores) or by rows.
fn store_bandwidth(rt: &Runtime, bytes: usize, scattered: bool) -> Result<f64, String> {
    let words = bytes / 4;
    let mut out: DeviceBuffer<u32> = rt.alloc(words).map_err(|e| e.to_string())?;
    let t = time_gpu(rt, BenchConfig { warmup: 2, runs: 5 }, || {
        hierarchy::store_tiles(rt, &mut out, scattered).map(|_| ())
    })
    .map_err(|e| e.to_string())?;
    Ok(hierarchy::store_tiles_cost(words).bytes_written as f64 / t.median)
}

fn shared_bandwidth(rt: &Runtime, sms: u32) -> Result<f64, String> {
    let (blocks, passes) = (sms * 8, 256);
    let mut out = rt.alloc::<u32>(1).map_err(|e| e.to_string())?;
    let t = time_gpu(rt, BenchConfig { warmup: 2, runs: 5 }, || {
        hierarchy::shared_read(rt, blocks, kernels::hierarchy::BLOCK_SIZE, passes, &mut out)
            .map(|_| ())
    })
    .map_err(|e| e.to_string())?;
    Ok(hierarchy::shared_read_bytes(blocks, passes) as f64 / t.median)
}

/// Cycles per hop of a chain spread over `bytes`; `warm` first walks it once to load it into L2.
fn chase_latency(rt: &Runtime, bytes: usize, warm: bool) -> Result<f64, String> {
    let links = bytes / 4 / CHASE_STRIDE;
    let chain = rt
        .upload(&reference::chase_chain(links, CHASE_STRIDE, 7))
        .map_err(|e| e.to_string())?;
    let steps = 100_000u32;
    let warm = if warm { links as u32 } else { 0 };
    let (mut end, mut cycles) = (
        rt.alloc::<u32>(1).map_err(|e| e.to_string())?,
        rt.alloc::<u64>(1).map_err(|e| e.to_string())?,
    );
    hierarchy::pointer_chase(rt, &chain, warm, steps, &mut end, &mut cycles)
        .map_err(|e| e.to_string())?;
    Ok(rt.download(&cycles).map_err(|e| e.to_string())?[0] as f64 / f64::from(steps))
}

fn shared_latency(rt: &Runtime) -> Result<f64, String> {
    let chain = rt
        .upload(&reference::chase_chain(SHARED_WORDS, 1, 9))
        .map_err(|e| e.to_string())?;
    let steps = 100_000u32;
    let (mut end, mut cycles) = (
        rt.alloc::<u32>(1).map_err(|e| e.to_string())?,
        rt.alloc::<u64>(1).map_err(|e| e.to_string())?,
    );
    hierarchy::shared_pointer_chase(rt, &chain, steps, &mut end, &mut cycles)
        .map_err(|e| e.to_string())?;
    Ok(rt.download(&cycles).map_err(|e| e.to_string())?[0] as f64 / f64::from(steps))
}

/// Host-to-device and device-to-host bandwidth of a 256 MiB copy, from pageable host memory and
/// then from pinned (page-locked) host memory.
fn copy_bandwidth(rt: &Runtime, gpu: &host::gpu::Gpu) -> Result<[f64; 4], String> {
    let n = 64 * MIB;
    let host_data = vec![1u32; n];
    let mut buf = rt.alloc::<u32>(n).map_err(|e| e.to_string())?;
    let time = |f: &mut dyn FnMut() -> host::Result<()>| -> Result<f64, String> {
        rt.synchronize().map_err(|e| e.to_string())?;
        let (start, end) = (
            gpu.timing_event().map_err(|e| e.to_string())?,
            gpu.timing_event().map_err(|e| e.to_string())?,
        );
        start.record(gpu.stream()).map_err(|e| e.to_string())?;
        f().map_err(|e| e.to_string())?;
        end.record(gpu.stream()).map_err(|e| e.to_string())?;
        end.synchronize().map_err(|e| e.to_string())?;
        Ok(f64::from(start.elapsed_ms(&end).map_err(|e| e.to_string())?) * 1e-3)
    };
    let bytes = (4 * n) as f64;
    let h2d = bytes / time(&mut || rt.copy_to_device(&host_data, &mut buf))?;
    let d2h = bytes / time(&mut || rt.download(&buf).map(|_| ()))?;
    let (pinned_h2d, pinned_d2h) = gpu
        .pinned_copy_seconds(&mut buf)
        .map_err(|e| e.to_string())?;
    Ok([h2d, d2h, bytes / pinned_h2d, bytes / pinned_d2h])
}
