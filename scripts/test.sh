#!/usr/bin/env bash
# Runs every test: unit tests, simulator and agent integration tests, mpirun tests (all are
# Bazel tests). Ends with a line "N passed, N failed". Usage: scripts/test.sh [bazel test args]
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || { echo "0 passed, 1 failed"; exit 1; }

log=$(mktemp /tmp/profagent-test.XXXXXX)
start=$(date +%s)
# OpenMPI refuses to run as root without these; the mpirun tests pass them too.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bazel test //... --test_output=errors --test_summary=short "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FLAKY)' "$log")
if [[ $status -ne 0 && $failed -eq 0 ]]; then
  # The build itself failed (or bazel did): count that as a failure.
  failed=1
fi
echo "test.sh: $(( $(date +%s) - start )) s"
echo "$passed passed, $failed failed"
rm -f "$log"
[[ $status -eq 0 && $failed -eq 0 ]]
