#!/bin/bash
# Launch-overhead benchmark of the CUDA-runtime hooks (a benchmark, not a test).
# 1. The hook alone: launch_overhead calls __cudaLaunchKernel of a do-nothing runtime, without
#    and with the agent (host timing), and prints the ns the hook adds per launch.
# 2. On gpusim: launch_bench (N launches of a zero-cost kernel, best of R rounds) without the
#    agent and under it in host, events and CUPTI modes, alternating runs.
# Usage: bazel run //agent/hooks/cuda_runtime:launch_bench_sh -- [launches] [rounds] [repeats]
set -u
N=${1:-200000}
R=${2:-5}
REPEATS=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
# Runfiles layout (bazel run) or the bazel-bin tree (direct call).
root="${RUNFILES_DIR:-$0.runfiles}/profagent"
[ -d "$root" ] || root="$here/../../.."
bench="$root/agent/hooks/cuda_runtime/launch_bench"
agent="$root/agent/hooks/cuda_runtime/libprofagent_rt.so"
gpusim="${GPUSIM_DIR:-$(cd "$root/tests/gpusim" && pwd)}"  # GPUSIM_DIR overrides
out=$(mktemp -d)
costs="$out/costs.txt"
echo "^empty_kernel 0" > "$costs"

run() {  # $1 = mode ("none" = no agent)
  if [ "$1" = none ]; then
    env LD_LIBRARY_PATH="$gpusim" GPUSIM_COSTS="$costs" "$bench" "$N" "$R"
  else
    env LD_LIBRARY_PATH="$gpusim" GPUSIM_COSTS="$costs" LD_PRELOAD="$agent" \
      PROFAGENT_OUTPUT="$out/prof_$1" PROFAGENT_GPU_TIMING="$1" PROFAGENT_RING_SIZE=1048576 \
      PROFAGENT_OVERFLOW=drop "$bench" "$N" "$R"
  fi | awk '/launch_ns/ {print $2}'
}

overhead="$root/agent/hooks/cuda_runtime/launch_overhead"
stub="$(cd "$root/agent/hooks/cuda_runtime/stub" && pwd)"
best_of() {  # $1 = current best, $2 = new value
  awk -v a="$1" -v b="$2" 'BEGIN {print (b < a ? b : a)}'
}
hook_none=1e30
hook_agent=1e30
hook_all=1e30
for ((i = 0; i < REPEATS * 2; ++i)); do
  v=$(env LD_LIBRARY_PATH="$stub" "$overhead" 20000 20 | awk '{print $2}')
  hook_none=$(best_of "$hook_none" "$v")
  v=$(env LD_LIBRARY_PATH="$stub" LD_PRELOAD="$agent" PROFAGENT_OUTPUT="$out/prof_hook" \
      PROFAGENT_GPU_TIMING=host PROFAGENT_OVERFLOW=block "$overhead" 20000 20 2>/dev/null |
      awk '{print $2}')
  hook_agent=$(best_of "$hook_agent" "$v")
  v=$(env LD_LIBRARY_PATH="$stub" LD_PRELOAD="$agent" PROFAGENT_OUTPUT="$out/prof_hook" \
      PROFAGENT_GPU_TIMING=host PROFAGENT_OVERFLOW=block PROFAGENT_LAUNCH_API_SAMPLE=1 \
      "$overhead" 20000 20 2>/dev/null | awk '{print $2}')
  hook_all=$(best_of "$hook_all" "$v")
done
printf "hook alone (do-nothing runtime, host timing, thread CPU time, best of %d runs):\n" \
  $((REPEATS * 2))
printf "  default (1 in 16 launches timed): %.1f -> %.1f ns/launch, added %.1f ns\n" \
  "$hook_none" "$hook_agent" "$(awk -v a="$hook_agent" -v b="$hook_none" 'BEGIN {print a - b}')"
printf "  every launch timed (PROFAGENT_LAUNCH_API_SAMPLE=1): %.1f -> %.1f ns/launch, added %.1f ns\n" \
  "$hook_none" "$hook_all" "$(awk -v a="$hook_all" -v b="$hook_none" 'BEGIN {print a - b}')"

declare -A best
for mode in none host events cupti; do best[$mode]=1e30; done
for ((i = 0; i < REPEATS; ++i)); do
  for mode in none host events cupti; do
    v=$(run "$mode")
    best[$mode]=$(best_of "${best[$mode]}" "$v")
  done
done
printf "gpusim: launches=%d rounds=%d repeats=%d (best mean ns per launch)\n" "$N" "$R" "$REPEATS"
for mode in none host events cupti; do
  added=$(awk -v a="${best[$mode]}" -v b="${best[none]}" 'BEGIN {printf "%.1f", a - b}')
  printf "%-7s %8.1f ns/launch  added %7s ns\n" "$mode" "${best[$mode]}" "$added"
done
rm -rf "$out"
