// `profanalyze diff BASE NEW`: a CI gate comparing two profiles' summary.json
// (analyzer/report/SUMMARY_FORMAT.md, schema profagent.summary/1).
//
// BASE and NEW are summary.json files, or profile directories: a directory's summary.json when
// it is newer than every rank file there (`report` wrote it, with the user's options), else its
// rank files (*.pb) summarized in memory with the report library (BuildSummary, default
// options).
//
// Every numeric leaf of the summaries becomes a metric named by its path ("stats.
// step_latency_ms.p90", "kernels[gemm].total_ms", ...; array entries are keyed by name, rank,
// bins, ... not by position). Each metric has a direction from its name: times (_ms, _us) and
// sizes (_bytes) are worse when higher, throughputs (tokens_per_s, _gbps, gpu_busy_share) worse
// when lower; counts, shares and identities are informational.
//
// A metric is a REGRESSION only when both hold:
//   1. it moved in the worse direction by more than its threshold (default 5 %, per metric
//      with --metric-threshold PATH=PCT, PATH may use '*' wildcards), and
//   2. the change is statistically real: for the step-latency statistics (and tokens_per_s,
//      sum(tokens) / sum(step time) over stats.step_tokens_samples) a bootstrap confidence
//      interval (99 %, deterministic seed) of the difference NEW - BASE of that statistic over
//      the per-step samples (stats.step_latency_ms_samples) excludes 0 on the worse side, the
//      steps resampled in moving blocks of sqrt(n) consecutive steps (host noise comes in
//      bursts); and when both profiles hold two non-warm-up runs or more, a Welch t-test over
//      the runs' values of that statistic (runs[].stats) also gives p < 0.01, so a change must
//      hold across runs, not in one stretch of a noisy machine. For runs_aggregate metrics a
//      Welch t-test on the runs' mean/std/count gives p < 0.01.
// Totals that measure the amount of work (total_time_ms) and symptoms of other metrics (GPU
// busy share, waits in collectives, launch-to-start latency) are informational.
// A metric with no samples to test is reported as "worse, untested" and does not fail the
// build (unless fail_untested is set), so noise alone never fails a build. The Mann-Whitney U
// p-value of the step samples is shown alongside as a distribution-shift check.
//
// Exit codes: 0 no regression, 1 regression, 2 bad input (one line on stderr naming the file).
//
// Thread safety: all functions are reentrant; nothing here keeps global state.
#ifndef PROFAGENT_ANALYZER_DIFF_DIFF_H_
#define PROFAGENT_ANALYZER_DIFF_DIFF_H_

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"

namespace profagent {
namespace analyzer {

struct DiffOptions {
  double threshold_pct = 5.0;
  // PATH=PCT: an exact name wins; else the matching pattern ('*' = any characters, everything
  // else literal) with the most literal characters, the first given among equals.
  std::vector<std::pair<std::string, double>> metric_thresholds;
  double alpha = 0.01;  // two-sided: the bootstrap interval is the (1 - alpha) one
  int bootstrap_resamples = 4000;
  uint64_t seed = 20240601;
  bool fail_untested = false;
  // Materiality floor for per-step time averages (buckets_*_avg_ms and their run aggregates): a
  // change smaller than this share of the base mean step latency cannot move a step by more
  // than that, so it is never a regression (tiny buckets swing by large percentages). Percent.
  double min_step_share_pct = 0.5;
};

enum class Direction { kLowerIsBetter, kHigherIsBetter, kInfo };

enum class Verdict {
  kInfo,           // informational metric (count, share, ...)
  kMissing,        // null or absent on one side
  kWithin,         // |change| <= threshold
  kBetter,         // improved beyond the threshold
  kNoise,          // worse beyond the threshold, but not statistically significant
  kUntested,       // worse beyond the threshold, no samples to test
  kRegression,     // worse beyond the threshold and significant
};

struct MetricDiff {
  std::string name;
  std::optional<double> base, now;
  double change_pct = 0;  // (now - base) / |base| * 100; 0 when base is 0 or missing
  Direction direction = Direction::kInfo;
  double threshold_pct = 0;
  std::string test;       // how significance was judged, human-readable ("" = not tested)
  bool tested = false;
  bool significant = false;
  Verdict verdict = Verdict::kInfo;
};

struct DiffResult {
  std::string base_label, new_label;
  std::vector<MetricDiff> metrics;  // base's key order, then keys only NEW has
  int regressions = 0;              // metrics significantly worse, and the failures below
  std::vector<std::string> failures;  // regressions that are no metric (GPU timing differs, ...)
  int untested_worse = 0;
  int untested_failed = 0;          // of `regressions`: untested, failed by --fail-untested
  std::vector<std::string> notes;   // e.g. "no step samples: step metrics untested"
};

// Reads a summary.json, or summarizes a profile directory (see the header comment). Errors are
// one line naming the file: unreadable, malformed JSON, not a profagent summary.
absl::StatusOr<nlohmann::ordered_json> LoadSummary(const std::string& path);

// Parses "PATH=PCT" (for --metric-threshold).
absl::StatusOr<std::pair<std::string, double>> ParseMetricThreshold(const std::string& s);

// Two loaded summaries can be compared: the same sections (and meta.gpu_timing) on both sides,
// and no metric that is a number on one side and text on the other. Errors name the file
// (`base_label` or `now_label`).
absl::Status CheckComparable(const nlohmann::ordered_json& base, const nlohmann::ordered_json& now,
                             const std::string& base_label, const std::string& now_label);

DiffResult DiffSummaries(const nlohmann::ordered_json& base, const nlohmann::ordered_json& now,
                         const DiffOptions& options);

// Tables: plain text for a terminal, GitHub Markdown for a CI comment.
std::string RenderDiffText(const DiffResult& r, const DiffOptions& options);
std::string RenderDiffMarkdown(const DiffResult& r, const DiffOptions& options);

// The whole subcommand; returns the exit code (0, 1 or 2).
int RunDiffCommand(const std::string& base, const std::string& now, const DiffOptions& options,
                   bool markdown, std::ostream& out, std::ostream& err);

// Registers `diff BASE NEW [--markdown] [--threshold PCT] [--metric-threshold PATH=PCT]...`.
void AddDiffCommand(CLI::App& app, int* exit_code);

// ---- statistics (exposed for tests)

enum class Statistic { kMean, kStd, kMin, kMax, kP50, kP90, kP99 };
// Population std; nearest-rank percentiles (as SUMMARY_FORMAT.md). Empty input: 0.
double ComputeStatistic(std::vector<double> v, Statistic s);
// Percentile bootstrap interval of stat(b) - stat(a) at level (1 - alpha); a side's samples are
// resampled in moving blocks of `block_*` consecutive values (1: the i.i.d. bootstrap).
std::pair<double, double> BootstrapDiffInterval(const std::vector<double>& a,
                                                const std::vector<double>& b, Statistic s,
                                                double alpha, int resamples, uint64_t seed,
                                                size_t block_a = 1, size_t block_b = 1);
// The same for sum(tokens) / sum(time ms) * 1000 (tokens/s) over paired per-step samples.
std::pair<double, double> BootstrapRatioDiffInterval(const std::vector<double>& time_a,
                                                     const std::vector<double>& tokens_a,
                                                     const std::vector<double>& time_b,
                                                     const std::vector<double>& tokens_b,
                                                     double alpha, int resamples, uint64_t seed,
                                                     size_t block_a = 1, size_t block_b = 1);
// Two-sided Mann-Whitney U p-value (normal approximation with tie correction).
double MannWhitneyP(const std::vector<double>& a, const std::vector<double>& b);
// Two-sided Welch t-test p-value from summary statistics (sample std, n >= 2 each).
double WelchP(double mean_a, double sd_a, double n_a, double mean_b, double sd_b, double n_b);

}  // namespace analyzer
}  // namespace profagent

#endif  // PROFAGENT_ANALYZER_DIFF_DIFF_H_
