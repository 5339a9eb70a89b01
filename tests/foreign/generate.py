#!/usr/bin/env python3
"""Regenerates the foreign-PTX corpus: every CUDA C source in cuda/ compiled by NVIDIA's NVRTC at
each option level, written to ptx/<source>.<level>.ptx.

NVRTC comes from PyPI, no CUDA toolkit and no GPU needed:

    pip install nvidia-cuda-nvrtc-cu12 nvidia-cuda-runtime-cu12 nvidia-cuda-cccl-cu12
    python3 tests/foreign/generate.py [SOURCE.cu ...]

(the runtime wheel for its headers: refusals.cu includes cuda_bf16.h; CCCL for <nv/target>,
which cooperative groups includes). Without pip, the same wheels as `cargo xtask check` fetches
them into target/nvrtc/ serve. Sources named on the command line are the only ones compiled.

The PTX is committed: the test that runs it (tests/tests/foreign.rs) needs no NVRTC. Rerun this
after changing a source, and commit what it writes.
"""

import ctypes
import glob
import os
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
# Where `cargo xtask check` unpacks the NVRTC, runtime and CCCL wheels on first use.
FETCHED = HERE.parent.parent / "target" / "nvrtc"

# The option levels of the issue: NVRTC's default (-O3 for device code), a debug build, line
# tables, fast math (approximate exp, division, flush to zero), no contraction into fma, and
# fast compilation at its most (-Ofc=max: NVVM's cheapest pipeline, the least optimised PTX short
# of -G).
LEVELS = {
    "default": [],
    "G": ["-G"],
    "lineinfo": ["-lineinfo"],
    "fastmath": ["-use_fast_math"],
    "nofma": ["-fmad=false"],
    "Ofc": ["-Ofc=max"],
}
ARCH = "-arch=compute_90"


def load_nvrtc():
    """libnvrtc from the nvidia-cuda-nvrtc-cu12 (or -cu13) wheel, wherever pip put it."""
    roots = [pathlib.Path(p) for p in sys.path if p]
    patterns = ("nvidia/cuda_nvrtc/lib/libnvrtc.so*", "nvidia/cu13/lib/libnvrtc.so*")
    found = [lib for root in roots for pattern in patterns for lib in sorted(glob.glob(str(root / pattern)))]
    found += sorted(glob.glob(str(FETCHED / "nvidia-cuda-nvrtc-cu12" / "libnvrtc.so*")))
    for lib in found:
        if "builtins" not in lib and ".alt." not in lib:
            return ctypes.CDLL(lib)
    sys.exit("libnvrtc not found: pip install nvidia-cuda-nvrtc-cu12")


def include_dirs():
    """CUDA's device headers (cuda_bf16.h, for refusals.cu) from the nvidia-cuda-runtime-cu12
    wheel, wherever pip put it: -I options, none when it is not installed."""
    dirs = []
    roots = [pathlib.Path(p) for p in sys.path if p]
    for header, candidates in (
        ("cuda_bf16.h", [r / "nvidia/cuda_runtime/include" for r in roots] + [FETCHED / "nvidia-cuda-runtime-cu12"]),
        ("nv/target", [r / "nvidia/cuda_cccl/include" for r in roots] + [FETCHED / "nvidia-cuda-cccl-cu12"]),
    ):
        dirs += [f"-I{d}" for d in candidates if (d / header).exists()][:1]
    return dirs


def check(nvrtc, result, what):
    if result != 0:
        nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
        sys.exit(f"{what}: {nvrtc.nvrtcGetErrorString(result).decode()}")


def compile_ptx(nvrtc, source, name, options):
    prog = ctypes.c_void_p()
    check(nvrtc, nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None), "create")
    opts = [o.encode() for o in [ARCH, "-std=c++17"] + options + include_dirs()]
    argv = (ctypes.c_char_p * len(opts))(*opts)
    result = nvrtc.nvrtcCompileProgram(prog, len(opts), argv)
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    if result != 0:
        sys.exit(f"{name} {options}: {log.value.decode()}")
    nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(size))
    ptx = ctypes.create_string_buffer(size.value)
    check(nvrtc, nvrtc.nvrtcGetPTX(prog, ptx), "get PTX")
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return ptx.value.decode()


def main():
    # NVRTC names the source in -G and -lineinfo builds by the working directory and the
    # program's name: run from here, whatever the caller's directory.
    os.chdir(HERE)
    nvrtc = load_nvrtc()
    major, minor = ctypes.c_int(), ctypes.c_int()
    nvrtc.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    out = HERE / "ptx"
    out.mkdir(exist_ok=True)
    named = sys.argv[1:]
    for path in sorted((HERE / "cuda").glob("*.cu")):
        if named and path.name not in named:
            continue
        source = path.read_text()
        for level, options in LEVELS.items():
            ptx = compile_ptx(nvrtc, source, path.name, options)
            target = out / f"{path.stem}.{level}.ptx"
            target.write_text(ptx)
            print(f"{target.relative_to(HERE)}: {len(ptx)} bytes (NVRTC {major.value}.{minor.value}, {ARCH} {' '.join(options)})")


if __name__ == "__main__":
    main()
