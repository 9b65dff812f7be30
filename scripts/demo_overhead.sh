#!/usr/bin/env bash
# Benchmark (not a test): the demo's step latency without and with the agent (full profiling:
# CUPTI mode, NVTX, every kernel), on the CPU GPU simulator.
#
# Usage: scripts/demo_overhead.sh [PAIRS] [MODE...]   (default 10 pairs, mode cupti)
#
# Each pair runs `kernels/inference --runs 5 --warmup-runs 1` once without and once with the
# agent, in alternating order (ABBA) so that drift on a shared machine hits both sides alike.
# Every non-warm-up run gives one mean step latency (run wall / steps). Printed: the median and
# the minimum over all runs per mode, and their ratio to no agent. The median is robust to the
# occasional preempted run; the minimum is the least disturbed run of each side.
# Expects the binaries built (scripts/bench.sh builds them).
set -uo pipefail
cd "$(dirname "$0")/.."
PAIRS=${1:-10}
shift || true
MODES=("$@")
[[ ${#MODES[@]} -eq 0 ]] && MODES=(cupti)
BIN=$(bazel info bazel-bin 2>/dev/null)
SIM="$BIN/tests/gpusim"
AGENT="$BIN/agent/libprofagent.so"
DEMO=("$BIN/kernels/inference" --runs 5 --warmup-runs 1)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

run_one() {  # $1 = mode (none = no agent); appends "mode step_ms" lines to $TMP/samples
  local mode=$1 out
  if [[ $mode == none ]]; then
    out=$(LD_LIBRARY_PATH="$SIM" GPUSIM_COSTS=kernels/gpusim_costs.txt "${DEMO[@]}")
  else
    rm -rf "$TMP/prof"
    out=$(LD_LIBRARY_PATH="$SIM" GPUSIM_COSTS=kernels/gpusim_costs.txt LD_PRELOAD="$AGENT" \
          PROFAGENT_OUTPUT="$TMP/prof" PROFAGENT_GPU_TIMING="$mode" PROFAGENT_LOG=0 "${DEMO[@]}")
  fi
  echo "$out" | awk -v m="$mode" '/warmup=0/ {
      for (i = 1; i <= NF; i++) { split($i, a, "="); v[a[1]] = a[2] }
      printf "%s %.6f\n", m, v["wall_ms"] / v["steps"] }' >> "$TMP/samples"
}

for ((p = 0; p < PAIRS; ++p)); do
  for mode in "${MODES[@]}"; do
    if ((p % 2 == 0)); then run_one none; run_one "$mode"; else run_one "$mode"; run_one none; fi
  done
done

sort -k1,1 -k2,2n "$TMP/samples" | awk '
  { k = ++n[$1]; v[$1, k] = $2 }
  END {
    for (m in n) {
      k = n[m]
      med[m] = (k % 2) ? v[m, (k + 1) / 2] : (v[m, k / 2] + v[m, k / 2 + 1]) / 2
      mn[m] = v[m, 1]
    }
    printf "demo step latency (ms), %d runs per mode: median, min; change vs no agent\n", n["none"]
    printf "  %-7s median %.4f  min %.4f\n", "none", med["none"], mn["none"]
    for (m in n) if (m != "none")
      printf "  %-7s median %.4f  min %.4f   median %+.2f%%  min %+.2f%%\n", m, med[m], mn[m],
             100 * (med[m] / med["none"] - 1), 100 * (mn[m] / mn["none"] - 1)
  }'
