"""Vendor baselines for the GPU run, each at the shape and element type of the rows that ask for it.

    python3 baselines.py measure OUT.json RUN.json [RUN.json ...]
    python3 baselines.py measure --synthetic OUT.json RUN.json [...]

Every row of a run (`cargo xtask run --json`) names its baseline request: an operation (copy, add,
strided_copy, transpose, softmax, matmul, linear, sdpa, sdpa_hopper, sdpa_decode), its element
type and dimensions, and a key (xtask/src/baseline.rs). `measure` times each distinct request
once with PyTorch, with CUDA events, L2 flushed before each run, median of 20 after 3 warm-ups
(the protocol of the Rust harness), and files it under its key in OUT.json, which `cargo xtask summarize` reads. Requests
already in OUT.json are kept, so a second stage measures only the new ones; OUT.json is written
after each measurement, so a stage stopped at its budget keeps what it has. Without PyTorch or a
GPU it says so in OUT.json. `--synthetic` (the bundle's CPU check) goes through the same requests
and files a placeholder time for each operation it knows, so that an operation unknown here shows.
"""

import json
import os
import statistics
import sys

TORCH_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "u32": "int32"}


def op_copy(torch, dt, d, causal):
    src = torch.empty(d["n"], dtype=dt, device="cuda")
    dst = torch.empty_like(src)
    return "Tensor.copy_ (device to device)", lambda: dst.copy_(src)


def op_add(torch, dt, d, causal):
    a, b = (torch.randn(d["n"], device="cuda").to(dt) for _ in range(2))
    c = torch.empty_like(a)
    return "torch.add(out=)", lambda: torch.add(a, b, out=c)


def op_strided_copy(torch, dt, d, causal):
    src = torch.randn(d["n"] * d["stride"], device="cuda").to(dt)
    dst = torch.empty(d["n"], dtype=dt, device="cuda")
    view = src[:: d["stride"]]
    return "Tensor.copy_ of a strided view", lambda: dst.copy_(view)


def op_transpose(torch, dt, d, causal):
    src = torch.randn(d["rows"], d["cols"], device="cuda").to(dt)
    dst = torch.empty(d["cols"], d["rows"], dtype=dt, device="cuda")
    view = src.t()
    return "Tensor.copy_ of a transposed view", lambda: dst.copy_(view)


def op_softmax(torch, dt, d, causal):
    x = torch.randn(d["rows"], d["cols"], device="cuda").to(dt)
    return "torch.softmax(dim=-1)", lambda: torch.softmax(x, dim=-1)


def op_matmul(torch, dt, d, causal):
    a = torch.randn(d["m"], d["k"], device="cuda").to(dt)
    b = torch.randn(d["k"], d["n"], device="cuda").to(dt)
    c = torch.empty(d["m"], d["n"], dtype=dt, device="cuda")
    return "torch.matmul(out=) (cuBLAS, TF32 off)", lambda: torch.matmul(a, b, out=c)


def op_linear(torch, dt, d, causal):
    import torch.nn.functional as F

    x = torch.randn(d["m"], d["k"], device="cuda").to(dt)
    w = torch.randn(d["n"], d["k"], device="cuda").to(dt)
    return "torch.nn.functional.linear (X W^T)", lambda: F.linear(x, w)


def op_sdpa(torch, dt, d, causal):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    shape = (d["batch"], d["heads"], d["seq"], d["head_dim"])
    q, k, v = (torch.randn(shape, device="cuda").to(dt) for _ in range(3))
    backends = [SDPBackend.EFFICIENT_ATTENTION] if dt == torch.float32 else [SDPBackend.FLASH_ATTENTION]

    def fn():
        with sdpa_kernel(backends):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return f"scaled_dot_product_attention ({backends[0].name})", fn


def op_sdpa_hopper(torch, dt, d, causal):
    """PyTorch's fastest attention on Hopper, for the wgmma kernel: the cuDNN backend and the
    FlashAttention backend, each timed; the faster one is the baseline, both are filed."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    shape = (d["batch"], d["heads"], d["seq"], d["head_dim"])
    q, k, v = (torch.randn(shape, device="cuda").to(dt) for _ in range(3))

    def with_backend(backend):
        def fn():
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        return f"scaled_dot_product_attention ({backend.name})", fn

    names = ["CUDNN_ATTENTION", "FLASH_ATTENTION"]
    return [with_backend(getattr(SDPBackend, n)) for n in names if hasattr(SDPBackend, n)]


def op_sdpa_decode(torch, dt, d, causal):
    import torch.nn.functional as F

    q = torch.randn(d["batch"], d["q_heads"], 1, 128, device="cuda").to(dt)
    kv = (d["batch"], d["kv_heads"], d["ctx"], 128)
    k, v = (torch.randn(kv, device="cuda").to(dt) for _ in range(2))
    fn = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    return "scaled_dot_product_attention, one query token (enable_gqa)", fn


OPS = {
    "copy": op_copy,
    "add": op_add,
    "strided_copy": op_strided_copy,
    "transpose": op_transpose,
    "softmax": op_softmax,
    "matmul": op_matmul,
    "linear": op_linear,
    "sdpa": op_sdpa,
    "sdpa_hopper": op_sdpa_hopper,
    "sdpa_decode": op_sdpa_decode,
}


def requests(run_paths):
    """The distinct baseline requests of the runs' rows, in row order."""
    seen = {}
    for path in run_paths:
        run = load(path)
        for row in (run or {}).get("rows", []):
            req = row.get("baseline", {}).get("Ok")
            if req and req["key"] not in seen:
                seen[req["key"]] = req
    return list(seen.values())


def measure(out_path, run_paths, synthetic):
    results = load(out_path) or {}
    results.setdefault("baselines", {})
    rec = results["baselines"]
    todo = [r for r in requests(run_paths) if r["key"] not in rec]
    if synthetic:
        results["synthetic"] = "CPU check: placeholder times, no GPU measured"
        for req in todo:
            if req["op"] in OPS:
                rec[req["key"]] = {"what": f"{req['op']} (synthetic)", "seconds": 1e-3, "synthetic": True}
            else:
                rec[req["key"]] = {"error": f"baselines.py has no operation `{req['op']}`"}
        write(out_path, results)
        print(f"{len(todo)} synthetic baselines written to {out_path}")
        return
    try:
        import torch
    except ImportError:
        return skip(out_path, results, "PyTorch is not installed: baselines skipped")
    if not torch.cuda.is_available():
        return skip(out_path, results, "no CUDA device visible to PyTorch: baselines skipped")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    results["device"] = torch.cuda.get_device_name()
    results["torch"] = torch.__version__
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

    for req in todo:
        op = OPS.get(req["op"])
        try:
            if op is None:
                raise ValueError(f"baselines.py has no operation `{req['op']}`")
            dt = getattr(torch, TORCH_DTYPES[req["dtype"]])
            made = op(torch, dt, req["dims"], req.get("causal", False))
            # An operation gives one (what, fn), or several candidates: each is timed (one that
            # fails is filed as such) and the fastest is the baseline.
            candidates = made if isinstance(made, list) else [made]
            timed = {}
            for what, fn in candidates:
                try:
                    timed[what] = time(fn)
                except Exception as e:
                    timed[what] = f"{type(e).__name__}: {e}"
            ok = {w: t for w, t in timed.items() if isinstance(t, float)}
            if not ok:
                raise RuntimeError("; ".join(f"{w}: {t}" for w, t in timed.items()))
            what = min(ok, key=ok.get)
            rec[req["key"]] = {"what": what, "seconds": ok[what]}
            if len(candidates) > 1:
                rec[req["key"]]["candidates"] = timed
            print(f"{req['key']:<56} {rec[req['key']]['seconds'] * 1e3:9.3f} ms  {what}")
        except Exception as e:  # one failing baseline must not cost the others
            rec[req["key"]] = {"error": f"{type(e).__name__}: {e}"}
            print(f"{req['key']:<56} FAILED: {e}")
        finally:
            torch.cuda.empty_cache()
        write(out_path, results)
    write(out_path, results)


def skip(out_path, results, why):
    print(why)
    results["skipped"] = why
    write(out_path, results)


def write(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2)
    os.replace(tmp, path)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


if __name__ == "__main__":
    args = sys.argv[1:]
    synthetic = "--synthetic" in args
    args = [a for a in args if a != "--synthetic"]
    if len(args) >= 3 and args[0] == "measure":
        measure(args[1], args[2:], synthetic)
    else:
        sys.exit(__doc__)
