#!/usr/bin/env bash
# Benchmarks (binaries that print figures; not tests). Figures quoted in README.md come from here.
# Usage: scripts/bench.sh [quick]
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
Q=${1:-}
bazel build //agent/core:core_bench //tests/gpusim:gpusim_bench //tests/gpusim:all \
  //agent:profagent //agent/hooks/cuda_runtime:launch_bench_sh //agent/hooks/nvtx:nvtx_bench \
  //agent/hooks/cuda_runtime:stop_bench_sh \
  //tests/integration:mpi_overhead_bench_run //analyzer/report:report_bench \
  //analyzer/perfetto:perfetto_bench //kernels:inference >/dev/null 2>&1 || {
  echo "bench: build failed"; exit 1; }
BIN=$(bazel info bazel-bin 2>/dev/null)
SIM="$BIN/tests/gpusim"
TMP=$(mktemp -d)
N=$([[ "$Q" == quick ]] && echo 1000000 || echo 5000000)

echo "== record pipeline (agent/core/core_bench $N)"
"$BIN/agent/core/core_bench" "$N" "$TMP/core"

echo "== simulator overhead per launch (tests/gpusim/gpusim_bench)"
LD_LIBRARY_PATH="$SIM" "$BIN/tests/gpusim/gpusim_bench" 100000

echo "== agent overhead per launch (launch_bench_sh: no agent vs agent, same run)"
"$BIN/agent/hooks/cuda_runtime/launch_bench_sh" 100000 5 3

echo "== SIGTERM to process end, no agent vs agent (stop_bench_sh: the file's finish at a signal)"
"$BIN/agent/hooks/cuda_runtime/stop_bench_sh" 20

echo "== NVTX overhead (nvtx_bench): without a tool, then with the agent"
"$BIN/agent/hooks/nvtx/nvtx_bench"
LD_PRELOAD="$BIN/agent/libprofagent.so" PROFAGENT_OUTPUT="$TMP/nvtx" "$BIN/agent/hooks/nvtx/nvtx_bench"

echo "== PMPI wrapper overhead (mpi_overhead_bench, np 2, without then with the agent)"
"$BIN/tests/integration/mpi_overhead_bench_run"

echo "== demo step latency without / with the agent (scripts/demo_overhead.sh, alternating pairs)"
scripts/demo_overhead.sh "$([[ "$Q" == quick ]] && echo 4 || echo 20)" cupti

echo "== analyzer throughput on a generated 10M-record profile"
"$BIN/analyzer/report/report_bench"
"$BIN/analyzer/perfetto/perfetto_bench"
rm -rf "$TMP"
