#!/usr/bin/env bash
# The GPU run, prepared: correctness on the device, the benchmarks, the memory hierarchy, then the
# vendor baselines, each stage stopped cleanly at the time budget, keeping what it has.
#
#   ./run.sh [--budget SECONDS] [--out DIR]      (default: 480 s, ./results)
#
# Needs: Linux x86-64 with an NVIDIA driver; PyTorch for the baselines (skipped without it).
# Needs no Rust, no CUDA toolkit, no network.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
budget=480
out="$here/results"
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) budget="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "usage: $0 [--budget SECONDS] [--out DIR]" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
export XTASK_OUT="$out"
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }

# stage NAME SHARE COMMAND...: runs COMMAND with at most SHARE percent of the budget (or what is
# left, if less), logs to $out/NAME.log, and records how it ended; a failing stage does not stop
# the run.
stage() {
  local name="$1" share="$2"; shift 2
  local cap=$(( budget * share / 100 )) rest; rest=$(left)
  [ "$cap" -gt "$rest" ] && cap=$rest
  if [ "$cap" -le 5 ]; then echo "== $name: skipped, budget spent" | tee -a "$out/stages.txt"; return; fi
  echo "== $name (up to ${cap}s)"
  timeout --signal=INT --kill-after=10 "$cap" "$@" 2>&1 | tee "$out/$name.log"
  local rc=${PIPESTATUS[0]}
  case $rc in
    0) echo "== $name: ok" | tee -a "$out/stages.txt" ;;
    124|137) echo "== $name: stopped at its ${cap}s budget; partial results kept" | tee -a "$out/stages.txt" ;;
    *) echo "== $name: failed (exit $rc); continuing" | tee -a "$out/stages.txt" ;;
  esac
}

: > "$out/stages.txt"
stage correctness 15 "$here/bin/xtask" run --scale small --runs 1 --json "$out/correctness.json"
stage benchmarks 40 "$here/bin/xtask" run --json "$out/run.json"
stage hierarchy 20 "$here/bin/xtask" hierarchy
stage baselines 20 python3 "$here/baselines.py" measure "$out/baselines.json"
python3 "$here/baselines.py" summarize "$out/run.json" "$out/baselines.json" "$out/results.json" | tee "$out/summary.txt"
echo "results in $out (elapsed $(( $(date +%s) - start ))s of ${budget}s)"
