#!/usr/bin/env bash
# Fuzzes the record file reader and everything profanalyze runs on a rank file (ScanFile,
# VisitFile, stats, the report, the Perfetto exporter: analyzer/reader_fuzzer.cc) with
# libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer, for SECONDS (default 120) on one
# core, then prints exec/s, coverage and any crash file.
#
# Usage: scripts/fuzz.sh [SECONDS]
#   FUZZ_WORK=DIR       work directory (default: a new /tmp/profagent-fuzz.XXXXXX, kept): the
#                       corpus copy (which grows with new inputs), crash files, fuzz.log
#   FUZZ_MAX_LEN=N      largest input in bytes (default: the largest seed)
#   FUZZ_ARGS="..."     more libFuzzer flags
#
# Build: Bazel with clang (CC=clang and `--config=fuzz` from .bazelrc: -fsanitize=fuzzer-no-link,
# address,undefined on every compiled file, -fsanitize=fuzzer,address,undefined at link) in an
# output base of its own (/tmp/bazel_ob_fuzz, or FUZZ_OUTPUT_BASE). Bazel rather than clang++ on
# the sources, so the fuzzer is built from the same BUILD graph as profanalyze (generated
# protobuf code, system library flags) and nothing has to be kept in sync here; the separate
# output base keeps the gcc build of scripts/test.sh (and its Bazel server) untouched, and
# --symlink_prefix=/ leaves the workspace's bazel-bin/bazel-out links pointing at the gcc build. The
# first build takes about 3 minutes on 2 cores, later ones recompile what changed.
# Installed libraries (protobuf, absl) are not instrumented: the sanitizers check our code.
#
# Run: the seed corpus analyzer/testdata/fuzz_corpus is copied into the work directory, which
# libFuzzer then extends; one worker (-workers=1 -jobs=1), analyzer/reader_fuzzer.dict, 10 s per
# input at most, 2 GB of RSS at most. A finding is written as WORK/crash-*, leak-*, oom-* or
# timeout-*. Reproduce it with the fuzzer binary (printed below) or, with the normal gcc
# build: bazel run //analyzer:reader_fuzzer_corpus_test -- $PWD/crash-...
# Fixed findings belong in analyzer/testdata/fuzz_corpus (minimized: add -minimize_crash=1).
#
# Needs clang and libclang-rt-14-dev (libFuzzer, sanitizer runtimes): scripts/setup.sh --fuzz
# installs them. `bazel test //...` (scripts/test.sh) builds the corpus replay test with gcc and
# never needs clang.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_TO_RUN="${1:-120}"
OB="${FUZZ_OUTPUT_BASE:-/tmp/bazel_ob_fuzz}"

scripts/setup.sh --fuzz

echo "fuzz.sh: building //analyzer:reader_fuzzer (clang, --config=fuzz, output base $OB)"
CC=clang bazel --output_base="$OB" build --config=fuzz --symlink_prefix=/ //analyzer:reader_fuzzer \
  2>&1 | grep -v -e "Cannot export local symbol" -e "^\[" || true
BIN="$(CC=clang bazel --output_base="$OB" info --config=fuzz bazel-bin 2>/dev/null)"
FUZZER="$BIN/analyzer/reader_fuzzer"
[[ -x "$FUZZER" ]] || { echo "fuzz.sh: build failed" >&2; exit 1; }

WORK="${FUZZ_WORK:-$(mktemp -d /tmp/profagent-fuzz.XXXXXX)}"
mkdir -p "$WORK/corpus"
cp -n analyzer/testdata/fuzz_corpus/* "$WORK/corpus/" 2>/dev/null || true
cd "$WORK"
MAX_LEN=()
[[ -n "${FUZZ_MAX_LEN:-}" ]] && MAX_LEN=("-max_len=$FUZZ_MAX_LEN")
echo "fuzz.sh: fuzzing for $SECONDS_TO_RUN s in $WORK"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
touch .started
status=0
# -jobs=1 runs the fuzzer in a child process whose output goes to fuzz-0.log.
"$FUZZER" -workers=1 -jobs=1 -max_total_time="$SECONDS_TO_RUN" -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -dict="$ROOT/analyzer/reader_fuzzer.dict" \
  ${MAX_LEN[@]+"${MAX_LEN[@]}"} ${FUZZ_ARGS:-} corpus >fuzz.log 2>&1 || status=$?
LOG=fuzz-0.log
[[ -s "$LOG" ]] || LOG=fuzz.log

last=$(grep -E '^#[0-9]+' "$LOG" | tail -1 || true)
runs=$(grep -E '^stat::number_of_executed_units' "$LOG" | awk '{print $2}' || true)
execs=$(grep -E '^stat::average_exec_per_sec' "$LOG" | awk '{print $2}' || true)
echo "fuzz.sh: last status: ${last:-none}"
cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")
ft=$(sed -n 's/.*ft: \([0-9]*\).*/\1/p' <<<"$last")
echo "fuzz.sh: ${runs:-?} inputs in $SECONDS_TO_RUN s, ${execs:-?} exec/s, cov ${cov:-?}" \
  "ft ${ft:-?}, corpus $(ls corpus | wc -l) files"
findings=$(find . -maxdepth 1 -newer .started \( -name 'crash-*' -o -name 'leak-*' -o \
  -name 'oom-*' -o -name 'timeout-*' -o -name 'slow-unit-*' \) -printf '%f\n' | sort)
if [[ -n "$findings" ]]; then
  grep -E -m3 -e 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)' -e 'runtime error' \
    -e 'property violated' "$LOG" || true
  for f in $findings; do echo "fuzz.sh: FOUND $WORK/$f (reproduce: $FUZZER $WORK/$f)"; done
  exit 1
fi
if [[ $status -ne 0 ]]; then
  echo "fuzz.sh: the fuzzer failed (exit $status), see $WORK/$LOG" >&2
  tail -20 "$LOG" >&2
  exit 1
fi
echo "fuzz.sh: no crash (log: $WORK/$LOG)"
