#!/bin/sh
# Runs mpi_overhead_bench on 2 ranks without and then with the agent (same machine, same
# settings) and prints both tables. Usage: bazel run //tests/integration:mpi_overhead_bench_run
# [-- calls_per_block blocks]
set -e
here="$0.runfiles/profagent"
[ -d "$here" ] || here="${RUNFILES_DIR:-.}/profagent"
bench="$(readlink -f "$here/tests/integration/mpi_overhead_bench")"
agent="$(readlink -f "$here/agent/libprofagent.so")"
out="$(mktemp -d /tmp/mpi_overhead_bench.XXXXXX)"
mpirun --allow-run-as-root --oversubscribe -np 2 "$bench" "$@"
mpirun --allow-run-as-root --oversubscribe -np 2 -x LD_PRELOAD="$agent" \
  -x PROFAGENT_OUTPUT="$out" "$bench" "$@"
rm -rf "$out"
