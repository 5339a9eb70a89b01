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
# without a baseline. The check tests the plumbing and the verdicts, not this machine's speed:
# the budget is shared out as if every stage used its whole share, and a stage that runs gets
# a hang guard (CHECK_STAGE_TIMEOUT, default 900 s) instead of its share.
#
# Exit status: 0 only if every stage ran to its end (or was forgone for a missing tool) and the
# summary was written. A stage skipped or stopped for lack of budget counts as a failure unless
# --budget was given (the user chose the budget, and what fits in it); a run in which no stage
# ran to its end fails whatever the budget. Ctrl-C or SIGTERM stops
# the running stage and everything it started, writes the summary of what finished, and exits
# 130 or 143.
# Needs: Linux x86-64 with an NVIDIA driver; PyTorch for the baselines, compute-sanitizer and ncu
# for their stages (each skipped, saying so, without). No Rust, no CUDA toolkit, no network.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
budget=480
budget_given=0
out="$here/results"
check=0
usage() { echo "usage: $0 [--budget SECONDS] [--out DIR] [--check]${1:+: $1}" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) [ $# -ge 2 ] || usage "--budget needs a value"; budget="$2"; budget_given=1; shift 2 ;;
    --out) [ $# -ge 2 ] || usage "--out needs a value"; out="$2"; shift 2 ;;
    --check) check=1; shift ;;
    *) usage "unknown argument '$1'" ;;
  esac
done
# A whole number of seconds, 1 to a day: `abc` or `-10` would make every stage skip at once.
case "$budget" in
  ''|*[!0-9]*) usage "--budget '$budget': expected a whole number of seconds (e.g. 480)" ;;
esac
# Decimal, leading zeros and all: bash's arithmetic reads 0480 as octal (and fails on it).
[ "${#budget}" -le 9 ] && [ "$((10#$budget))" -ge 1 ] && [ "$((10#$budget))" -le 86400 ] ||
  usage "--budget $budget: expected 1 to 86400 seconds"
budget=$((10#$budget))
if ! mkdir -p "$out" 2>/dev/null || [ ! -w "$out" ] || [ ! -d "$out" ]; then
  usage "--out '$out': cannot create or write that directory"
fi
export XTASK_OUT="$out"
# Every stage's xtask ends when this script does, even by SIGKILL (which no trap sees).
export XTASK_EXIT_WITH=$$
xtask="$here/bin/xtask"
# On the GPU machine every stage but the emulator's must run on the GPU: without one, `auto`
# would fall back to the emulator and the window would pass with no GPU figure at all (a
# backend named explicitly is the user's choice).
if [ "$check" = 0 ] && [ "${KERNELS_BACKEND:-auto}" = auto ]; then export KERNELS_BACKEND=gpu; fi
start=$(date +%s)
# Seconds handed out to stages so far, in the check (where a stage's time is not counted).
handed_out=0
left() {
  if [ "$check" = 1 ]; then echo $(( budget - handed_out )); else echo $(( budget - ($(date +%s) - start) )); fi
}
# Whether the window fell short of what it was for (a stage failed, or was skipped or stopped
# by a budget the user did not choose).
short=0
# Stages that ran to their end: none, and the window did nothing, whatever budget was chosen.
completed=0

# A tool from PATH or the CUDA toolkit's usual place; in the check, its stand-in from check/.
tool() {
  if [ "$check" = 1 ]; then echo "$here/check/$1"; return; fi
  command -v "$1" || { [ -x "/usr/local/cuda/bin/$1" ] && echo "/usr/local/cuda/bin/$1"; }
}

note() { echo "== $1" | tee -a "$out/stages.txt"; }
# A stage that did not run (or finish) for lack of budget: a failure unless the budget was chosen.
over_budget() {
  note "$1"
  [ "$budget_given" = 1 ] || short=1
}
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
  if [ "$cap" -le 5 ]; then over_budget "$name: skipped, budget spent"; return; fi
  local limit=$cap
  if [ "$check" = 1 ]; then limit=${CHECK_STAGE_TIMEOUT:-900}; handed_out=$(( handed_out + cap )); fi
  echo "== $name (up to ${cap}s)"
  local t0; t0=$(date +%s)
  # In the background, so that a signal reaches the trap below at once (bash runs a trap only
  # once a foreground command ends); timeout makes its own process group, which it signals
  # whole when stopped. tee ignores Ctrl-C, so that it keeps the stage's last words.
  running="$name"
  timeout --signal=INT --kill-after=10 "$limit" "$@" > >(trap '' INT TERM; exec tee "$out/$name.log") 2>&1 &
  stage_pid=$!
  wait "$stage_pid"
  local rc=$? took=$(( $(date +%s) - t0 ))
  stage_pid=
  running=
  case $rc in
    0) note "$name: ok (${took}s)"; completed=$(( completed + 1 )) ;;
    124|137) over_budget "$name: stopped at its ${limit}s budget; partial results kept" ;;
    *) note "$name: failed (exit $rc, ${took}s); continuing"; short=1 ;;
  esac
}

# The summary of what the stages wrote (also after an interrupt).
summarize() {
  local summary=("$xtask" summarize --run "$out/headline.json" --run "$out/rest.json" --baselines "$out/baselines.json" --results "$out" --out "$out/results.json" --allow-missing-runs)
  [ "$check" = 1 ] && summary+=(--require-baselines)
  timeout 60 "${summary[@]}" 2>&1 | tee "$out/summary.txt"
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || { note "summary: failed (exit $rc)"; short=1; }
}

# Ctrl-C or SIGTERM: stop the running stage (timeout passes the signal to its whole group and
# kills what is left 10 s later), write what finished, and exit non-zero.
stage_pid=
running=
interrupted() {
  trap '' INT TERM
  if [ -n "$stage_pid" ]; then
    kill -INT "$stage_pid" 2>/dev/null
    wait "$stage_pid" 2>/dev/null
  fi
  note "${running:-run}: interrupted by SIG$1; the stages after it did not run"
  summarize
  echo "interrupted: results so far in $out" >&2
  exit "$2"
}
trap 'interrupted INT 130' INT
trap 'interrupted TERM 143' TERM

headline="copy_words,softmax_fused,gemm_tensor_core,gemm_wgmma,attention_fused,attention_wgmma"
# The performance model's predictions come from the emulator stage alone (the others are GPU
# runs, or, in the check, the same emulator again).
small=(run --scale small --runs 1 --case-timeout 60 --no-predict)

: > "$out/stages.txt"
# In the check, where the correctness pass already runs on the emulator, the emulator and
# sanitizer stages run their plumbing on three cases only.
subset=()
[ "$check" = 1 ] && subset=(--only transpose)
# ... and the headline and rest stages on a few rows each, through the same JSON, baselines
# and summary as on a GPU (the correctness pass has run every row on the emulator).
headline_rows=(--only "$headline")
rest_rows=(--skip "$headline")
if [ "$check" = 1 ]; then
  headline_rows=(--only copy_words,softmax_fused)
  rest_rows=(--skip "$headline" --only transpose)
fi
stage correctness 10 "$xtask" "${small[@]}" --json "$out/correctness.json"
# The emulator's verdict at the same sizes, which the sanitizers' reports are compared with.
# ... with the performance model's predictions for this GPU (by its name, as `run` finds it),
# which `summarize` sets beside the measured rows. Its share is for the predictions: about 35 s
# of every row's samples on a 2-core machine (docs/model.md, "What predicting costs"), which a
# share of 3 (15 s of 480) would stop half-way. Should it be stopped all the same, the
# predictions need no GPU: `KERNELS_BACKEND=emulator cargo xtask run --device <gpu> --json
# results/emulator.json` on any machine, then `summarize` again. The same from the sm_90a PTX's
# counts (`KERNELS_BACKEND=ptx KERNELS_PTX_ARCH=sm_90a ... --json results/emulator-ptx.json`)
# is the model's second prediction, which `summarize` prints beside the first: made after the
# window, on any machine, so that it costs the window nothing.
gpu_name=$( (command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name --format=csv,noheader | head -1) || true)
stage emulator 9 env KERNELS_BACKEND=emulator "$xtask" run "${subset[@]}" --device "${gpu_name:-h100}" --json "$out/emulator.json"
sanitizer=$(tool compute-sanitizer)
for t in memcheck:8 racecheck:8 synccheck:5; do
  name="sanitizer-${t%%:*}"
  if [ -z "$sanitizer" ]; then forgo "$name" "${t##*:}" "compute-sanitizer not found"; continue; fi
  stage "$name" "${t##*:}" "$sanitizer" --tool "${t%%:*}" --target-processes all \
    --log-file "$out/$name.report" "$xtask" "${small[@]}" "${subset[@]}" --json "$out/$name.json"
done
baselines=(python3 "$here/baselines.py" measure)
[ "$check" = 1 ] && baselines+=(--synthetic)
stage headline 15 "$xtask" run --no-predict "${headline_rows[@]}" --json "$out/headline.json"
stage baselines-headline 8 "${baselines[@]}" "$out/baselines.json" "$out/headline.json"
stage rest 14 "$xtask" run --no-predict "${rest_rows[@]}" --json "$out/rest.json"
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
summarize
echo "results in $out (elapsed $(( $(date +%s) - start ))s of ${budget}s)"
# The check passes only if every stage ran to its end: a skipped or stopped stage checked nothing.
if [ "$check" = 1 ] && grep -v ': ok (' "$out/stages.txt" > "$out/not-ok.txt"; then
  echo "check FAILED: not every stage ran to its end:" >&2
  cat "$out/not-ok.txt" >&2
  exit 1
fi
if [ "$completed" = 0 ]; then
  echo "FAILED: no stage ran to its end (stages.txt says why: a budget of ${budget}s leaves each stage too little?)" >&2
  exit 1
fi
if [ "$short" = 1 ]; then
  echo "FAILED: the window fell short (stages.txt says which stage and why)" >&2
  exit 1
fi
