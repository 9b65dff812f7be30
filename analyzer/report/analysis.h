// Analysis behind `profanalyze report`: reads the rank files of a profile (two streaming passes
// per file, one thread per file), applies the step/run convention and the bucket rules, and
// builds summary.json (layout: SUMMARY_FORMAT.md) plus, optionally, ops.csv.
//
// Pass 1 collects what later records need to be interpreted: strings, steps and runs (EV_STEP/
// EV_RUN, or re-derived from NVTX ranges), the NVTX ranges themselves (for projection buckets,
// engine buckets and ops.csv paths), communicators, clock offsets, stacks. Pass 2 joins device
// ops to launches by correlation id and aggregates; per thread it sweeps the ranges in start
// order alongside the events, which gives each launch its enclosing ranges and each engine range
// its exclusive time. Both passes decode with ScanFile (no
// protobuf message per record); ops.csv is written per file (one part per file, merged in rank
// order at the end, the first part renamed rather than copied).
//
// Memory: never per kernel, launch or device op (durations go into Distribution: exact up to
// 64 Ki samples per name, then a fixed histogram), except the launches/ops still waiting for
// their correlation partner (a launch whose device record never comes stays until the end of
// its file). NVTX ranges (and engine-mapped API calls) are held up to
// ReportOptions::range_budget per file, the rest in a temporary file (range_store.h); pass 2
// nests them with one sweep per thread (memory: the nesting depth). What still grows, per rank
// file analysed at once: per step about 100 bytes (+ a phase name over 15 characters) and 8 for
// its latency sample; per run about 80 bytes + two bucket tables; per collective call 32 bytes
// (straggler matching); per distinct string and distinct NVTX path its size.
//
// Errors: every unreadable/corrupt/wrong-version input is an absl::Status naming the file (and
// byte offset); a truncated file is a warning and its complete prefix is used.
//
// Thread safety: BuildSummary is reentrant; it starts its own worker threads.
#ifndef PROFAGENT_ANALYZER_REPORT_ANALYSIS_H_
#define PROFAGENT_ANALYZER_REPORT_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace profagent {
namespace analyzer {

using Json = nlohmann::ordered_json;

constexpr char kSummarySchema[] = "profagent.summary/1";

struct ReportOptions {
  // Step/run patterns (ECMAScript). When either is set explicitly, or a file has no EV_STEP
  // events, steps are re-derived from the file's NVTX ranges.
  std::string step_pattern = "^step\\b";
  std::string run_pattern = "^run\\b";
  bool patterns_explicit = false;
  std::string kv_reduce = "mean";           // mean|max|p50|p90|sum for kv=a,b,c lists
  // Set explicitly: the agent's steps carry its own reduction, so steps are re-derived from the
  // NVTX step ranges (when there are any) to reduce their kv lists this way.
  bool kv_reduce_explicit = false;
  int warmup_runs = 0;                      // the first N runs are treated as warm-up
  std::vector<int64_t> kv_edges = {0, 512, 1024, 2048, 4096, 8192, 16384};
  std::string rules_file;                   // "" = built-in rules only
  std::vector<int> ranks;                   // empty = every rank
  int threads = 0;                          // 0 = min(files, hardware threads)
  // NVTX ranges (and engine-mapped API calls) held in memory per file being analysed; beyond
  // it they go to a temporary file (range_store.h), so memory does not grow with the profile.
  size_t range_budget = size_t(1) << 20;    // 24 bytes each: 24 MB
};

// Parses "0,2-3" into {0, 2, 3}. Error on anything else.
absl::StatusOr<std::vector<int>> ParseRankList(const std::string& s);
// Parses "0,512,1024" (strictly increasing non-negative integers).
absl::StatusOr<std::vector<int64_t>> ParseKvEdges(const std::string& s);

// Builds the summary of `files`. When `ops_csv_path` is non-empty, ops.csv is written there.
absl::StatusOr<Json> BuildSummary(const std::vector<std::string>& files,
                                  const ReportOptions& options, const std::string& ops_csv_path);

}  // namespace analyzer
}  // namespace profagent

#endif  // PROFAGENT_ANALYZER_REPORT_ANALYSIS_H_
