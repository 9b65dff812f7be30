#!/bin/bash
# Stop-latency benchmark (see stop_bench.cc): SIGTERM to process end, no agent vs the agent's
# timing modes, alternating. Usage: bazel run //agent/hooks/cuda_runtime:stop_bench_sh -- [rounds]
set -u
here=$(cd "$(dirname "$0")" && pwd)
root="${RUNFILES_DIR:-$0.runfiles}/profagent"
[ -d "$root" ] || root="$here/../../.."
pkg="$root/agent/hooks/cuda_runtime"
exec "$pkg/stop_bench" "$pkg/rt_serve_stop" "$pkg/libprofagent_rt.so" \
  "$(cd "$root/tests/gpusim" && pwd)" "${1:-20}"
