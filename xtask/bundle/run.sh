#!/usr/bin/env bash
# The GPU run, prepared, most valuable first: correctness at small sizes, the same under
# compute-sanitizer's memcheck, racecheck and synccheck, the headline benchmarks (copy, softmax,
# tensor-core GEMM and fused attention, mma.sync and wgmma) and their vendor baselines, the other
# benchmarks and theirs, Nsight Compute's counters beside the emulator profiler's, then the memory
# hierarchy. Each stage is stopped cleanly at its share of the budget and keeps what it has; the
# summary comes last.
#
#   ./run.sh [--budget SECONDS] [--out DIR] [--check]      (default: 480 s, ./results)
#
# --check: the CPU check of `cargo xtask device-bundle --check` (the emulator, stand-ins for
# compute-sanitizer and ncu from check/, synthetic baselines); the summary then fails on any row
# without a baseline.
# Needs: Linux x86-64 with an NVIDIA driver; PyTorch for the baselines, compute-sanitizer and ncu
# for their stages (each skipped, saying so, without). No Rust, no CUDA toolkit, no network.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
budget=480
out="$here/results"
check=0
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) budget="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --check) check=1; shift ;;
    *) echo "usage: $0 [--budget SECONDS] [--out DIR] [--check]" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
export XTASK_OUT="$out"
xtask="$here/bin/xtask"
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }

# A tool from PATH or the CUDA toolkit's usual place; in the check, its stand-in from check/.
tool() {
  if [ "$check" = 1 ]; then echo "$here/check/$1"; return; fi
  command -v "$1" || { [ -x "/usr/local/cuda/bin/$1" ] && echo "/usr/local/cuda/bin/$1"; }
}

note() { echo "== $1" | tee -a "$out/stages.txt"; }
# forgo NAME SHARE WHY: a stage that cannot run here; its share goes to the later stages.
forgo() { shares_left=$(( shares_left - $2 )); note "$1: skipped, $3"; }

# The stages' shares of the budget, in percent; they add up to 100 (the check verifies it).
shares_left=100
# Seconds kept for the summary.
reserve=5

# stage NAME SHARE COMMAND...: runs COMMAND with at most its SHARE of what is left of the budget
# (SHARE over the shares of the stages still to run, so time a stage leaves unused goes to the
# later ones), logs to $out/NAME.log, and records how it ended; a failing stage does not stop the
# run.
stage() {
  local name="$1" share="$2"; shift 2
  local rest=$(( $(left) - reserve )) cap
  cap=$(( rest * share / shares_left ))
  shares_left=$(( shares_left - share ))
  if [ "$cap" -le 5 ]; then note "$name: skipped, budget spent"; return; fi
  echo "== $name (up to ${cap}s)"
  local t0; t0=$(date +%s)
  timeout --signal=INT --kill-after=10 "$cap" "$@" 2>&1 | tee "$out/$name.log"
  local rc=${PIPESTATUS[0]} took=$(( $(date +%s) - t0 ))
  case $rc in
    0) note "$name: ok (${took}s)" ;;
    124|137) note "$name: stopped at its ${cap}s budget; partial results kept" ;;
    *) note "$name: failed (exit $rc, ${took}s); continuing" ;;
  esac
}

headline="copy_words,softmax_fused,gemm_tensor_core,gemm_wgmma,attention_fused,attention_wgmma"
small=(run --scale small --runs 1 --case-timeout 60)

: > "$out/stages.txt"
# In the check, where the correctness pass already runs on the emulator, the emulator and
# sanitizer stages run their plumbing on three cases only.
subset=()
[ "$check" = 1 ] && subset=(--only transpose)
stage correctness 10 "$xtask" "${small[@]}" --json "$out/correctness.json"
# The emulator's verdict at the same sizes, which the sanitizers' reports are compared with.
stage emulator 3 env KERNELS_BACKEND=emulator "$xtask" run "${subset[@]}" --json "$out/emulator.json"
sanitizer=$(tool compute-sanitizer)
for t in memcheck:8 racecheck:8 synccheck:5; do
  name="sanitizer-${t%%:*}"
  if [ -z "$sanitizer" ]; then forgo "$name" "${t##*:}" "compute-sanitizer not found"; continue; fi
  stage "$name" "${t##*:}" "$sanitizer" --tool "${t%%:*}" --target-processes all \
    --log-file "$out/$name.report" "$xtask" "${small[@]}" "${subset[@]}" --json "$out/$name.json"
done
baselines=(python3 "$here/baselines.py" measure)
[ "$check" = 1 ] && baselines+=(--synthetic)
stage headline 15 "$xtask" run --only "$headline" --json "$out/headline.json"
stage baselines-headline 8 "${baselines[@]}" "$out/baselines.json" "$out/headline.json"
stage rest 20 "$xtask" run --skip "$headline" --json "$out/rest.json"
stage baselines-rest 6 "${baselines[@]}" "$out/baselines.json" "$out/rest.json"
ncu=$(tool ncu)
if [ -z "$ncu" ]; then forgo ncu 9 "ncu not found"; else
  # Global sectors per request, shared bank conflicts and DRAM bytes, at the emulator's shapes,
  # beside `cargo xtask inspect` (the emulator's profiler) for the same launches.
  metrics=l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum
  metrics+=,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum
  metrics+=,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
  metrics+=,dram__bytes_read.sum,dram__bytes_write.sum
  profiled="transpose_naive,transpose_shared,transpose_padded,copy_strided,softmax_fused_f32,gemm_tensor_core_bf16"
  stage ncu 7 "$ncu" --target-processes all --metrics "$metrics" --csv --log-file "$out/ncu.csv" \
    "$xtask" "${small[@]}" --only "$profiled" --json "$out/ncu-run.json"
  stage inspect 2 bash -c 'for k in ${1//,/ }; do "$0" inspect "$k" --json > "$2/inspect-$k.json" || exit; done' \
    "$xtask" "$profiled" "$out"
fi
stage hierarchy 8 "$xtask" hierarchy
[ "$shares_left" = 0 ] || note "budget: the stages' shares do not add up to 100 ($shares_left left)"
summary=("$xtask" summarize --run "$out/headline.json" --run "$out/rest.json" --baselines "$out/baselines.json" --results "$out" --out "$out/results.json")
[ "$check" = 1 ] && summary+=(--require-baselines)
"${summary[@]}" 2>&1 | tee "$out/summary.txt"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || note "summary: failed (exit $rc)"
echo "results in $out (elapsed $(( $(date +%s) - start ))s of ${budget}s)"
# The check passes only if every stage ran to its end: a skipped or stopped stage checked nothing.
if [ "$check" = 1 ] && grep -v ': ok (' "$out/stages.txt" > "$out/not-ok.txt"; then
  echo "check FAILED: not every stage ran to its end:" >&2
  cat "$out/not-ok.txt" >&2
  exit 1
fi
