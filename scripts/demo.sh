#!/usr/bin/env bash
# The main job: build, profile the demo LLM workload (kernels/inference) on the CPU GPU
# simulator (tests/gpusim) with the agent injected, then write the report and a Perfetto trace.
#
# Usage: scripts/demo.sh [--tp N] [--out DIR] [-- inference flags...]
#   --tp N    tensor parallelism: N ranks under mpirun (NCCL all-reduce between them)
#   --out DIR where everything goes (default out/demo)
# On a machine with a GPU, drop LD_LIBRARY_PATH below to profile on NVIDIA's libraries.
set -euo pipefail
cd "$(dirname "$0")/.."
TP=1
OUT=out/demo
ARGS=()
while (($#)); do
  case "$1" in
    --tp) TP="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --) shift; ARGS=("$@"); break ;;
    *) ARGS+=("$1"); shift ;;
  esac
done

scripts/setup.sh
bazel build //agent:profagent //analyzer:profanalyze //kernels:inference \
  //tests/gpusim:libcudart.so.13 //tests/gpusim:libcupti.so.13 //tests/gpusim:libnccl.so.2
BIN=$(bazel info bazel-bin 2>/dev/null)
AGENT="$BIN/agent/libprofagent.so"
SIM="$BIN/tests/gpusim"

rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export GPUSIM_COSTS="$PWD/kernels/gpusim_costs.txt"
export GPUSIM_TRUTH="$OUT/truth.%p.jsonl"
export PROFAGENT_OUTPUT="$OUT/profile"

echo "demo: profiling kernels/inference on the simulator (tp=$TP) -> $PROFAGENT_OUTPUT"
if [[ "$TP" -gt 1 ]]; then
  mpirun --allow-run-as-root --oversubscribe -np "$TP" \
    -x LD_PRELOAD="$AGENT" -x LD_LIBRARY_PATH="$SIM" \
    -x GPUSIM_COSTS -x GPUSIM_TRUTH -x PROFAGENT_OUTPUT \
    "$BIN/kernels/inference" ${ARGS[@]+"${ARGS[@]}"}
else
  LD_PRELOAD="$AGENT" LD_LIBRARY_PATH="$SIM" "$BIN/kernels/inference" ${ARGS[@]+"${ARGS[@]}"}
fi

"$BIN/analyzer/profanalyze" report "$PROFAGENT_OUTPUT" -o "$OUT/report"
"$BIN/analyzer/profanalyze" perfetto "$PROFAGENT_OUTPUT" -o "$OUT/trace.pftrace"
echo
echo "demo: report:   $OUT/report/report.md (summary.json, ops.csv beside it)"
echo "demo: trace:    $OUT/trace.pftrace (open in https://ui.perfetto.dev)"
echo "demo: truth:    $OUT/truth.*.jsonl (what the simulator really executed)"
