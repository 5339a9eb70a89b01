"""Vendor baselines for the GPU run, and the summary that sets each kernel beside its baseline.

    python3 baselines.py measure OUT.json
    python3 baselines.py summarize RUN.json BASELINES.json RESULTS.json

`measure` times PyTorch (cuBLAS, FlashAttention through scaled_dot_product_attention, softmax) and
a device-to-device copy with CUDA events, L2 flushed before each run, median of 20 after 3
warm-ups: the same protocol as the Rust harness. Without PyTorch or a GPU it says so and writes a
file saying why.
"""

import json
import statistics
import sys

# Which baseline each kernel is read against, compared by throughput in the baseline's unit
# (GB/s for memory-bound operations, TFLOP/s for compute-bound ones).
KERNEL_BASELINE = {
    "copy_words": "copy",
    "vector_add_f32": "copy",
    "vector_add_f16": "copy",
    "softmax_naive_f32": "softmax_f32",
    "softmax_online_f32": "softmax_f32",
    "softmax_fused_f32": "softmax_f32",
    "softmax_naive_bf16": "softmax_bf16",
    "softmax_online_bf16": "softmax_bf16",
    "softmax_fused_bf16": "softmax_bf16",
    "gemm_naive_f32": "matmul_f32",
    "gemm_tiled_f32": "matmul_f32",
    "gemm_register_blocked_f32": "matmul_f32",
    "gemm_tensor_core_bf16": "matmul_bf16",
    "gemm_tensor_core_f16": "matmul_f16",
    "gemm_wgmma_bf16": "matmul_bf16",
    "gemm_wgmma_f16": "matmul_f16",
    "attention_naive_f32": "sdpa_f32",
    "attention_flash_f32": "sdpa_f32",
    "attention_flash_bf16": "sdpa_bf16",
}


def measure(out_path):
    try:
        import torch
    except ImportError:
        return skip(out_path, "PyTorch is not installed: baselines skipped")
    if not torch.cuda.is_available():
        return skip(out_path, "no CUDA device visible to PyTorch: baselines skipped")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    l2 = torch.empty(2 * 64 * 2**20, dtype=torch.uint8, device="cuda")

    def time(fn):
        for _ in range(3):
            fn()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        samples = []
        for _ in range(20):
            l2.fill_(0x5A)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e-3)
        return statistics.median(samples)

    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "baselines": {}}
    rec = results["baselines"]

    src = torch.empty(2**28, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    t = time(lambda: dst.copy_(src))
    rec["copy"] = {"shape": "1 GiB", "seconds": t, "unit": "GB/s", "throughput": 2 * src.numel() * 4 / t / 1e9}

    n = 4096
    for name, dtype in [("matmul_bf16", torch.bfloat16), ("matmul_f16", torch.float16), ("matmul_f32", torch.float32)]:
        a = torch.randn(n, n, dtype=dtype, device="cuda")
        b = torch.randn(n, n, dtype=dtype, device="cuda")
        t = time(lambda: a @ b)
        rec[name] = {"shape": f"{n}^3", "seconds": t, "unit": "TFLOP/s", "throughput": 2 * n**3 / t / 1e12}

    for name, dtype in [("softmax_bf16", torch.bfloat16), ("softmax_f32", torch.float32)]:
        x = torch.randn(8192, 8192, dtype=dtype, device="cuda")
        t = time(lambda: torch.softmax(x, dim=-1))
        rec[name] = {"shape": "8192x8192", "seconds": t, "unit": "GB/s", "throughput": 2 * x.numel() * x.element_size() / t / 1e9}

    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    b_, h, s, d = 4, 16, 4096, 128
    for name, dtype, backend in [("sdpa_bf16", torch.bfloat16, SDPBackend.FLASH_ATTENTION), ("sdpa_f32", torch.float32, SDPBackend.EFFICIENT_ATTENTION)]:
        q, k, v = (torch.randn(b_, h, s, d, dtype=dtype, device="cuda") for _ in range(3))
        with sdpa_kernel(backend):
            t = time(lambda: F.scaled_dot_product_attention(q, k, v))
        rec[name] = {"shape": f"B{b_} H{h} N{s} d{d}", "backend": str(backend), "seconds": t, "unit": "TFLOP/s", "throughput": 4 * b_ * h * s * s * d / t / 1e12}

    write(out_path, results)
    for key, r in rec.items():
        print(f"{key:<14} {r['shape']:<20} {r['seconds'] * 1e3:9.3f} ms  {r['throughput']:9.1f} {r['unit']}")


def skip(out_path, why):
    print(why)
    write(out_path, {"skipped": why})


def write(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)


def summarize(run_path, baselines_path, out_path):
    run = load(run_path)
    base = load(baselines_path)
    rows = []
    for row in (run or {}).get("rows", []):
        key = KERNEL_BASELINE.get(row["kernel"])
        b = (base or {}).get("baselines", {}).get(key) if key else None
        r = row["roofline"]
        ours = r["bytes_per_second"] / 1e9 if b and b["unit"] == "GB/s" else r["flops_per_second"] / 1e12
        entry = {"kernel": row["kernel"], "shape": row["shape"], "measured": row["measured"], "check": row["check"],
                 "seconds": r["seconds"], "fraction_of_roofline": r["fraction_of_roofline"], "baseline": key}
        if b:
            entry.update({"baseline_throughput": b["throughput"], "unit": b["unit"], "ours": ours, "ratio": ours / b["throughput"]})
        rows.append(entry)
        ratio = f"{entry['ratio']:.2f}x {key}" if b else "(no baseline)"
        status = "ok" if "Ok" in row["check"] else "FAILED"
        how = "measured" if row["measured"] else "MODELLED"
        print(f"{row['kernel']:<28} {row['shape']:<22} {r['seconds'] * 1e3:9.3f} ms {how}  {100 * r['fraction_of_roofline']:5.1f}% roof  {ratio}  {status}")
    write(out_path, {"run": run, "baselines": base, "summary": rows})


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"({path}: {e})")
        return None


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "measure":
        measure(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "summarize":
        summarize(*sys.argv[2:])
    else:
        sys.exit(__doc__)
