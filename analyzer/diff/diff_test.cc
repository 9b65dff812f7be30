// Tests of `profanalyze diff` on hand-made summary.json pairs (analyzer/testdata/diff_*.json,
// written by diff_make_summaries.py) and of its statistics against values computed by hand.
#include "analyzer/diff/diff.h"

#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "analyzer/perfetto/test_profile.h"
#include "proto/profagent.pb.h"

namespace profagent {
namespace analyzer {
namespace {

const std::string kData = "analyzer/testdata/";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Run {
  int code;
  std::string out, err;
};

Run Diff(const std::string& base, const std::string& now, bool markdown = false,
         DiffOptions options = DiffOptions()) {
  std::ostringstream out, err;
  int code = RunDiffCommand(kData + base, kData + now, options, markdown, out, err);
  return Run{code, out.str(), err.str()};
}

const MetricDiff* Find(const DiffResult& r, const std::string& name) {
  for (const MetricDiff& m : r.metrics) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

DiffResult DiffFiles(const std::string& a, const std::string& b, DiffOptions o = DiffOptions()) {
  auto sa = LoadSummary(kData + a);
  auto sb = LoadSummary(kData + b);
  REQUIRE(sa.ok());
  REQUIRE(sb.ok());
  return DiffSummaries(*sa, *sb, o);
}

TEST_CASE("statistics match hand-computed values") {
  // Nearest-rank percentiles (SUMMARY_FORMAT.md): p50 of 1..10 is the 5th value, p90 the 9th.
  std::vector<double> v = {10, 1, 9, 2, 8, 3, 7, 4, 6, 5};
  REQUIRE(ComputeStatistic(v, Statistic::kP50) == 5);
  REQUIRE(ComputeStatistic(v, Statistic::kP90) == 9);
  REQUIRE(ComputeStatistic(v, Statistic::kP99) == 10);
  REQUIRE(ComputeStatistic(v, Statistic::kMean) == Approx(5.5));
  REQUIRE(ComputeStatistic(v, Statistic::kStd) == Approx(std::sqrt(8.25)));  // population
  // Mann-Whitney: fully separated groups of 5: U = 0, mu = 12.5, sigma^2 = 25*11/12;
  // z = (12.5 - 0.5) / sqrt(22.9167) = 2.5067 -> p = erfc(z / sqrt 2) = 0.01219.
  REQUIRE(MannWhitneyP({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}) == Approx(0.01219).epsilon(1e-3));
  REQUIRE(MannWhitneyP({1, 2, 3}, {1, 2, 3}) == Approx(1.0));
  // Welch: equal n=10, sd=1, means 0 and 1: t = 1/sqrt(0.2) = 2.2361, df = 18 -> p = 0.0382.
  REQUIRE(WelchP(0, 1, 10, 1, 1, 10) == Approx(0.0382).epsilon(2e-3));
  // df -> large: normal limit, t = 10 -> p ~ 1.5e-23 (just very small).
  REQUIRE(WelchP(0, 1, 1000, 0.4472, 1, 1000) < 1e-20);
  REQUIRE(WelchP(5, 1, 4, 5, 1, 4) == Approx(1.0));
  // Bootstrap interval of a shift of exactly +1 with no spread is exactly [1, 1].
  auto ci = BootstrapDiffInterval({2, 2, 2}, {3, 3, 3}, Statistic::kMean, 0.01, 500, 1);
  REQUIRE(ci.first == Approx(1));
  REQUIRE(ci.second == Approx(1));
  // Deterministic for a seed.
  auto a = BootstrapDiffInterval({1, 5, 2, 8}, {3, 9, 4, 4}, Statistic::kP50, 0.01, 300, 7);
  auto b = BootstrapDiffInterval({1, 5, 2, 8}, {3, 9, 4, 4}, Statistic::kP50, 0.01, 300, 7);
  REQUIRE(a == b);
}

TEST_CASE("Markdown: a metric name with a pipe or a backtick stays in its cell") {
  DiffResult r;
  MetricDiff m;
  m.name = "kernels[op<a|b>`x` (sampler)].total_ms";
  m.base = 1.0;
  m.now = 1.2;
  m.verdict = Verdict::kRegression;
  r.metrics.push_back(m);
  const std::string md = RenderDiffMarkdown(r, DiffOptions());
  bool found = false;
  for (absl::string_view line : absl::StrSplit(md, '\n')) {
    if (line.find("sampler") == absl::string_view::npos) continue;
    found = true;
    // 7 cells: 8 unescaped pipes; the name's pipe is escaped, its backticks in a `` span.
    size_t pipes = 0;
    for (size_t i = 0; i < line.size(); ++i) {
      pipes += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
    }
    CHECK(pipes == 8);
    CHECK(line.find("| `` kernels[op<a\\|b>`x` (sampler)].total_ms `` |") == 0);
  }
  CHECK(found);
}

TEST_CASE("a real regression exits 1 and matches the golden Markdown") {
  Run r = Diff("diff_base.json", "diff_regression.json", /*markdown=*/true);
  REQUIRE(r.code == 1);
  REQUIRE(r.err.empty());
  // The golden file was checked by hand: steps 15 % slower (all step statistics and tokens/s
  // significant), runs' tokens/s down 13 % (Welch), the attention kernel 30 % slower (no
  // samples: reported, not failing), everything else unchanged.
  const std::string golden = ReadAll(kData + "diff_regression_golden.md");
  if (r.out != golden) {
    const char* tmp = getenv("TEST_TMPDIR");
    const std::string actual = std::string(tmp != nullptr ? tmp : "/tmp") + "/diff_actual.md";
    std::ofstream(actual) << r.out;
    INFO("actual output written to " << actual << ":\n" << r.out);
    REQUIRE(r.out == golden);
  }
}

TEST_CASE("regression verdicts per metric") {
  DiffResult d = DiffFiles("diff_base.json", "diff_regression.json");
  const MetricDiff* mean = Find(d, "stats.step_latency_ms.mean");
  REQUIRE(mean != nullptr);
  REQUIRE(mean->change_pct == Approx(15.0).epsilon(1e-3));
  REQUIRE(mean->verdict == Verdict::kRegression);
  const MetricDiff* tps = Find(d, "stats.tokens_per_s");
  REQUIRE(tps->direction == Direction::kHigherIsBetter);
  REQUIRE(tps->verdict == Verdict::kRegression);  // down 13 %
  REQUIRE(Find(d, "runs_aggregate.metrics.tokens_per_s.mean")->verdict == Verdict::kRegression);
  const MetricDiff* kernel = Find(d, "kernels[attention_decode_kernel (attn.compute)].total_ms");
  REQUIRE(kernel != nullptr);
  REQUIRE(kernel->verdict == Verdict::kUntested);
  REQUIRE(Find(d, "kernels[gemm_kernel (mlp.down_proj)].total_ms")->verdict == Verdict::kWithin);
  REQUIRE(Find(d, "stats.steps")->verdict == Verdict::kInfo);
  REQUIRE(Find(d, "memory.devices[rank 0 dev 0].peak_bytes")->verdict == Verdict::kWithin);
  REQUIRE(Find(d, "memory.devices[rank 0 dev 0].peak_at_ms") == nullptr);  // a position
  REQUIRE(Find(d, "stats.step_latency_ms_samples") == nullptr);
}

// Thresholds are finite percentages >= 0: NaN would make nothing a regression (it was
// accepted), -1 gave a two-line error with a 300-digit bound.
TEST_CASE("diff thresholds: NaN, infinity and negatives are rejected") {
  for (const char* bad : {"nan", "inf", "-1", "5x"}) {
    for (const char* option : {"--threshold", "--min-step-share"}) {
      INFO(option << " " << bad);
      CLI::App app;
      int code = -1;
      AddDiffCommand(app, &code);
      const std::string base = kData + "diff_base.json";
      std::vector<const char*> argv = {"profanalyze", "diff", base.c_str(), base.c_str(), option,
                                       bad};
      bool rejected = false;
      try {
        app.parse(int(argv.size()), const_cast<char**>(argv.data()));
      } catch (const CLI::ValidationError& e) {
        rejected = true;
        CHECK(std::string(e.what()).find("is not a percentage") != std::string::npos);
      }
      CHECK(rejected);
      CHECK(code == -1);  // the diff did not run
    }
  }
}

// A new profile timed another way (CUPTI fell back to host timing) is not comparable: the gate
// fails with a note instead of reporting every device metric as much better.
TEST_CASE("a change of GPU timing mode fails the gate with a note") {
  auto base = LoadSummary(kData + "diff_base.json");
  REQUIRE(base.ok());
  nlohmann::ordered_json now = *base;
  (*base)["meta"]["gpu_timing"] = "cupti";
  now["meta"]["gpu_timing"] = "host";
  DiffResult d = DiffSummaries(*base, now, DiffOptions());
  CHECK(d.regressions == 1);
  REQUIRE(d.failures.size() == 1);
  CHECK(d.failures.back() ==
        "GPU timing differs (base cupti, new host): the profiles' device "
        "times are not comparable");
  // The headline says why, not "1 metric significantly worse".
  const std::string text = RenderDiffText(d, DiffOptions());
  CHECK(text.rfind("profagent diff: REGRESSION: GPU timing differs (base cupti, new host)", 0) ==
        0);
  CHECK(text.find("metric significantly worse") == std::string::npos);
  now["meta"]["gpu_timing"] = "cupti";
  CHECK(DiffSummaries(*base, now, DiffOptions()).regressions == 0);
}

// A templated kernel's name (hundreds of characters) overflows the metric column on its own
// rows; the other rows are not padded to its length.
TEST_CASE("text output: a very long metric name does not widen every row") {
  auto base = LoadSummary(kData + "diff_base.json");
  REQUIRE(base.ok());
  REQUIRE(!(*base)["kernels"].empty());
  (*base)["kernels"][0]["name"] =
      "void cub::DeviceRadixSortOnesweepKernel<" + std::string(400, 'x') + ">()";
  const std::string text =
      RenderDiffText(DiffSummaries(*base, *base, DiffOptions()), DiffOptions());
  size_t longest = 0, header = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    longest = std::max(longest, line.size());
    if (absl::StartsWith(line, "metric")) header = line.size();
  }
  CHECK(longest > 400);  // the long name's rows
  CHECK(header > 0);
  CHECK(header < 200);
}

// A bucket only NEW lists (a kernel added: buckets with no time are not listed) went up from 0:
// a regression when real (runs' Welch test) and not tiny (--min-step-share), as an explicit 0
// would be; one only BASE lists went down to 0.
TEST_CASE("a bucket new in NEW is compared with 0, not left n/a") {
  auto base = LoadSummary(kData + "diff_base.json");
  REQUIRE(base.ok());
  const double step = (*base)["stats"]["step_latency_ms"]["mean"].get<double>();
  nlohmann::ordered_json now = *base;
  now["buckets_model_avg_ms"]["others"] = {{"ms", 0.2 * step}, {"share", 0.2}};
  now["runs_aggregate"]["buckets_model_avg_ms"]["others"] = {{"mean", 0.2 * step},
                                                             {"std", 0.01 * step}};
  DiffResult d = DiffSummaries(*base, now, DiffOptions());
  auto find = [&](const DiffResult& r, const std::string& name) -> const MetricDiff* {
    for (const MetricDiff& m : r.metrics) {
      if (m.name == name) return &m;
    }
    return nullptr;
  };
  const MetricDiff* agg = find(d, "runs_aggregate.buckets_model_avg_ms.others.mean");
  REQUIRE(agg != nullptr);
  REQUIRE(agg->base.has_value());
  CHECK(*agg->base == 0);
  CHECK(agg->verdict == Verdict::kRegression);
  CHECK(d.regressions >= 1);
  // Tiny (below 0.5% of the base step): never a regression.
  now["buckets_model_avg_ms"]["others"] = {{"ms", 0.001 * step}, {"share", 0.001}};
  now["runs_aggregate"]["buckets_model_avg_ms"]["others"] = {{"mean", 0.001 * step}, {"std", 0.0}};
  CHECK(DiffSummaries(*base, now, DiffOptions()).regressions == 0);
  // Gone in NEW: better.
  DiffResult back = DiffSummaries(now, *base, DiffOptions());
  const MetricDiff* gone = find(back, "runs_aggregate.buckets_model_avg_ms.others.mean");
  REQUIRE(gone != nullptr);
  CHECK(gone->verdict == Verdict::kBetter);
}

// Every straggler figure (waits split by rank, library or GPU, waits caused, arrival skew) is a
// symptom of another rank's speed, informational as wait_ms_by_rank is: an A/A pair whose
// waits moved from 0 never fails, not even with --fail-untested.
TEST_CASE("straggler waits and skew are informational") {
  auto base = LoadSummary(kData + "diff_base.json");
  REQUIRE(base.ok());
  nlohmann::ordered_json a = *base, b = *base;
  a["collectives"]["stragglers"]["wait_ms_by_lib"] = {{"mpi", {{"0", 0.0}}}};
  b["collectives"]["stragglers"]["wait_ms_by_lib"] = {{"mpi", {{"0", 0.0048}}}};
  a["collectives"]["stragglers"]["wait_caused_ms_by_rank"] = {{"1", 1.0}};
  b["collectives"]["stragglers"]["wait_caused_ms_by_rank"] = {{"1", 9.0}};
  a["collectives"]["stragglers"]["skew_us"] = {{"p50", 3.0}};
  b["collectives"]["stragglers"]["skew_us"] = {{"p50", 30.0}};
  DiffOptions o;
  o.fail_untested = true;
  DiffResult d = DiffSummaries(a, b, o);
  CHECK(d.regressions == 0);
  for (const MetricDiff& m : d.metrics) {
    if (m.name.rfind("collectives.stragglers.", 0) == 0) CHECK(m.verdict == Verdict::kInfo);
  }
  // A metric gated off by a huge threshold stays off when its base is 0 (no relative change).
  a["host"]["sync_ms"] = 0.0;
  b["host"]["sync_ms"] = 2.0;
  CHECK(DiffSummaries(a, b, o).regressions == 1);
  o.metric_thresholds = {{"host.sync_ms", 1e9}};
  CHECK(DiffSummaries(a, b, o).regressions == 0);
}

// Warnings quoted into the Markdown comment stay literal text; the steps' wall time under
// host.per_step restates the tested step latency and is no second gate.
TEST_CASE("diff Markdown: quoted warnings are literal; per-step wall time is informational") {
  auto base = LoadSummary(kData + "diff_base.json");
  REQUIRE(base.ok());
  nlohmann::ordered_json now = *base;
  now["meta"]["warnings"] = {"kernel *gemm_<b>_x* | [link](y)"};
  (*base)["host"]["per_step"] = {{"wall_ms", {{"p50", 1.0}}}};
  now["host"]["per_step"] = {{"wall_ms", {{"p50", 2.0}}}};
  DiffOptions o;
  o.fail_untested = true;
  DiffResult d = DiffSummaries(*base, now, o);
  for (const MetricDiff& m : d.metrics) {
    if (m.name == "host.per_step.wall_ms.p50") CHECK(m.verdict == Verdict::kInfo);
  }
  const std::string md = RenderDiffMarkdown(d, o);
  CHECK(md.find("\\*gemm\\_&lt;b&gt;\\_x\\* \\| \\[link\\](y)") != std::string::npos);
  CHECK(md.find("<b>") == std::string::npos);
}

// Bad input never crashes: a summary nested beyond any real one is refused (the walks over a
// summary recurse), and an output that cannot be written fails the command.
TEST_CASE("diff: absurd nesting and unwritable output are errors, exit 2") {
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/deep.json";
  {
    std::ofstream f(path);
    f << "{\"schema\":\"profagent.summary/1\",\"stats\":{\"steps\":1},\"x\":";
    for (int i = 0; i < 100000; ++i) f << "{\"a\":";
    f << "1";
    for (int i = 0; i < 100000; ++i) f << "}";
    f << "}";
  }
  std::ostringstream out, err;
  CHECK(RunDiffCommand(path, path, DiffOptions(), false, out, err) == 2);
  CHECK(err.str().find("nested deeper than 32 levels") != std::string::npos);
  // Bytes of a malformed file reach the error line escaped, never raw.
  std::ofstream(path) << "\xff\xfe";
  std::ostringstream out3, err3;
  CHECK(RunDiffCommand(path, path, DiffOptions(), false, out3, err3) == 2);
  CHECK(err3.str().find("\\xff") != std::string::npos);
  CHECK(err3.str().find('\xff') == std::string::npos);
  std::ostream unwritable(nullptr);
  std::ostringstream err2;
  CHECK(RunDiffCommand(kData + "diff_base.json", kData + "diff_base.json", DiffOptions(), false,
                       unwritable, err2) == 2);
  CHECK(err2.str().find("cannot write the comparison") != std::string::npos);
}

// One kernel name in two buckets (a shared GEMM decided by its NVTX projection range), the rows
// in another order in the new summary (sorted by total time): each (name, bucket) row is compared
// with its own (before, rows of one name were keyed by position, so o_proj's +88% showed up as
// three unchanged kernels getting worse).
TEST_CASE("kernel rows are matched by name and bucket, never by position") {
  auto base = LoadSummary(kData + "diff_base.json");
  REQUIRE(base.ok());
  nlohmann::ordered_json now = *base;
  nlohmann::ordered_json k1 = (*base)["kernels"][0], k2 = (*base)["kernels"][0];
  k1["name"] = "gemm_shared";
  k1["bucket"] = "attn.o_proj";
  k1["total_ms"] = 40.0;
  k2["name"] = "gemm_shared";
  k2["bucket"] = "mlp.gate_up_proj";
  k2["total_ms"] = 70.0;
  (*base)["kernels"].push_back(k2);  // base: gate_up (70) before o_proj (40)
  (*base)["kernels"].push_back(k1);
  k1["total_ms"] = 75.0;               // new: o_proj 88% slower, now first
  now["kernels"].push_back(k1);
  now["kernels"].push_back(k2);
  DiffResult d = DiffSummaries(*base, now, DiffOptions());
  const MetricDiff* oproj = Find(d, "kernels[gemm_shared (attn.o_proj)].total_ms");
  const MetricDiff* gate = Find(d, "kernels[gemm_shared (mlp.gate_up_proj)].total_ms");
  REQUIRE(oproj != nullptr);
  REQUIRE(gate != nullptr);
  CHECK(oproj->change_pct == Approx(87.5));
  CHECK(gate->change_pct == Approx(0.0));
}

TEST_CASE("same-distribution noisy pair beyond 5 % in mean is not a regression") {
  DiffResult d = DiffFiles("diff_noisy_base.json", "diff_noisy_new.json");
  const MetricDiff* mean = Find(d, "stats.step_latency_ms.mean");
  REQUIRE(mean->change_pct == Approx(8.0).epsilon(1e-3));  // beyond the 5 % threshold
  REQUIRE(mean->tested);
  REQUIRE(!mean->significant);
  REQUIRE(mean->verdict == Verdict::kNoise);
  REQUIRE(Find(d, "stats.step_latency_ms.p50")->verdict == Verdict::kNoise);  // +25.6 %
  REQUIRE(d.regressions == 0);
  Run r = Diff("diff_noisy_base.json", "diff_noisy_new.json");
  REQUIRE(r.code == 0);
  REQUIRE(r.out.find("no regression") != std::string::npos);
  REQUIRE(r.out.find("worse, not significant") != std::string::npos);
  // A stricter gate that also fails untested metrics does fail (the kernel moved 6 %).
  DiffOptions strict;
  strict.fail_untested = true;
  REQUIRE(Diff("diff_noisy_base.json", "diff_noisy_new.json", false, strict).code == 1);
}

// Two runs of one program (round-23 sweep): a single cudaMemset call 49 -> 155 us, an idle gap
// percentile and a run-to-run spread doubling are what host noise does; --fail-untested fails on
// untested kernel rows, not on those (before, it failed every A/A pair), and its headline tells
// untested failures from tested ones.
TEST_CASE("--fail-untested: host API times, idle gaps and spreads stay untested") {
  auto base = LoadSummary(kData + "diff_base.json");
  REQUIRE(base.ok());
  nlohmann::ordered_json b = *base, now = *base;
  b["host"]["api"] = {{{"name", "cudaMemset"}, {"count", 1}, {"mean_us", 49.0}}};
  now["host"]["api"] = {{{"name", "cudaMemset"}, {"count", 1}, {"mean_us", 155.0}}};
  b["host"]["idle_gaps"] = {{"gap_us", {{"p90", 10.0}}}};
  now["host"]["idle_gaps"] = {{"gap_us", {{"p90", 30.0}}}};
  b["runs_aggregate"] = {{"metrics", {{"step_latency_ms.p50", {{"mean", 1.0}, {"std", 0.001}}}}}};
  now["runs_aggregate"] = {{"metrics", {{"step_latency_ms.p50", {{"mean", 1.0}, {"std", 0.003}}}}}};
  DiffOptions o;
  o.fail_untested = true;
  DiffResult d = DiffSummaries(b, now, o);
  int seen = 0;
  for (const MetricDiff& m : d.metrics) {
    if (m.name == "host.api[cudaMemset].mean_us" || m.name == "host.idle_gaps.gap_us.p90" ||
        m.name == "runs_aggregate.metrics.step_latency_ms.p50.std") {
      INFO(m.name);
      CHECK(m.verdict == Verdict::kUntested);
      ++seen;
    }
  }
  CHECK(seen == 3);
  CHECK(d.regressions == 0);
  CHECK(d.untested_worse == 3);
  // A kernel row worse beyond the threshold, untested: fails, and the headline says how.
  Run r = Diff("diff_noisy_base.json", "diff_noisy_new.json", false, o);
  CHECK(r.code == 1);
  CHECK(r.out.find("untested (--fail-untested)") != std::string::npos);
  CHECK(r.out.find("significantly worse") == std::string::npos);
}

TEST_CASE("an improvement exits 0") {
  Run r = Diff("diff_base.json", "diff_improvement.json");
  REQUIRE(r.code == 0);
  DiffResult d = DiffFiles("diff_base.json", "diff_improvement.json");
  REQUIRE(Find(d, "stats.step_latency_ms.mean")->verdict == Verdict::kBetter);
  REQUIRE(Find(d, "stats.tokens_per_s")->verdict == Verdict::kBetter);
  REQUIRE(d.regressions == 0);
  // The same pair reversed is a regression.
  REQUIRE(Diff("diff_improvement.json", "diff_base.json").code == 1);
}

TEST_CASE("a tiny bucket swinging by a large factor is below the materiality floor") {
  // Base mean step 10.008 ms: the floor is 0.5 % of it, 0.050 ms.
  auto base = LoadSummary(kData + "diff_base.json");
  REQUIRE(base.ok());
  nlohmann::ordered_json b = *base, tiny = *base, big = *base;
  b["buckets_model_avg_ms"]["sampler"] = {{"ms", 0.002}, {"share", 0.0}};
  tiny["buckets_model_avg_ms"]["sampler"] = {{"ms", 0.040}, {"share", 0.0}};  // 20x, +0.038 ms
  big["buckets_model_avg_ms"]["sampler"] = {{"ms", 0.080}, {"share", 0.0}};   // +0.078 ms
  DiffResult d = DiffSummaries(b, tiny, DiffOptions());
  const MetricDiff* m = Find(d, "buckets_model_avg_ms.sampler.ms");
  REQUIRE(m != nullptr);
  CHECK(m->verdict == Verdict::kWithin);
  CHECK(m->test.find("below 0.5% of the base mean step") != std::string::npos);
  // Above the floor the usual rule applies (no samples for buckets: untested, not "within").
  d = DiffSummaries(b, big, DiffOptions());
  CHECK(Find(d, "buckets_model_avg_ms.sampler.ms")->verdict == Verdict::kUntested);
  DiffOptions no_floor;
  no_floor.min_step_share_pct = 0;
  d = DiffSummaries(b, tiny, no_floor);
  CHECK(Find(d, "buckets_model_avg_ms.sampler.ms")->verdict == Verdict::kUntested);
}

TEST_CASE("identical summaries: no regression") {
  Run r = Diff("diff_base.json", "diff_base.json");
  REQUIRE(r.code == 0);
}

TEST_CASE("per-metric thresholds") {
  REQUIRE(ParseMetricThreshold("stats.step_latency_ms.p90=10")->second == 10);
  REQUIRE(!ParseMetricThreshold("stats.p90").ok());
  REQUIRE(!ParseMetricThreshold("x=abc").ok());
  DiffOptions o;
  o.metric_thresholds = {{"stats.step_latency_ms.*", 20}, {"runs_aggregate.*", 20}};
  // 15 % is within 20 %: the step metrics no longer fail.
  DiffResult d = DiffFiles("diff_base.json", "diff_regression.json", o);
  REQUIRE(Find(d, "stats.step_latency_ms.mean")->verdict == Verdict::kWithin);
  REQUIRE(Find(d, "stats.step_latency_ms.mean")->threshold_pct == 20);
  REQUIRE(Find(d, "stats.tokens_per_s")->verdict == Verdict::kRegression);  // -13 %: still 5 %
  o.metric_thresholds.push_back({"stats.tokens_per_s", 16});
  REQUIRE(DiffFiles("diff_base.json", "diff_regression.json", o).regressions == 0);
  // The most specific pattern wins whatever the order; '[' and ']' are literal ('*' only is
  // special: metric names hold brackets).
  DiffOptions spec;
  spec.metric_thresholds = {{"stats.*", 10}, {"stats.step_latency_ms.*", 200}};
  d = DiffFiles("diff_base.json", "diff_regression.json", spec);
  CHECK(Find(d, "stats.step_latency_ms.p90")->threshold_pct == 200);
  CHECK(Find(d, "stats.tokens_per_s")->threshold_pct == 10);
  spec.metric_thresholds = {{"kernels[attention_decode_kernel*].total_ms", 77}, {"kernels[*", 50}};
  d = DiffFiles("diff_base.json", "diff_regression.json", spec);
  CHECK(Find(d, "kernels[attention_decode_kernel (attn.compute)].total_ms")->threshold_pct == 77);
  CHECK(Find(d, "kernels[gemm_kernel (mlp.down_proj)].total_ms")->threshold_pct == 50);
  CHECK(d.notes.empty());  // both patterns name something
  // A pattern that names nothing is reported, not silently ignored.
  DiffOptions typo;
  typo.metric_thresholds = {{"stats.p90_ms", 10}};
  DiffResult t = DiffFiles("diff_base.json", "diff_regression.json", typo);
  REQUIRE(t.notes.size() == 1);
  REQUIRE(t.notes[0].find("stats.p90_ms matches no metric") != std::string::npos);
  // The global threshold.
  DiffOptions loose;
  loose.threshold_pct = 50;
  REQUIRE(Diff("diff_base.json", "diff_regression.json", false, loose).code == 0);
}

// A summary of `runs` runs of `steps` steps each: step i of run r takes ms(r, i) and makes
// `tokens` tokens (stats and per-run stats as the report writes them).
nlohmann::ordered_json MakeSummary(int runs, int steps, int tokens,
                                   const std::function<double(int, int)>& ms) {
  nlohmann::ordered_json j;
  j["schema"] = "profagent.summary/1";
  j["meta"] = {{"gpu_timing", "cupti"}};
  std::vector<double> all, all_tokens;
  nlohmann::ordered_json jr = nlohmann::ordered_json::array();
  auto lat = [](std::vector<double> v) {
    double sum = 0;
    for (double x : v) sum += x;
    std::sort(v.begin(), v.end());
    auto pct = [&](double p) {
      return v[std::min(v.size() - 1, size_t(std::ceil(p * v.size() / 100)) - 1)];
    };
    return nlohmann::ordered_json{{"mean", sum / v.size()}, {"p50", pct(50)},   {"p90", pct(90)},
                                  {"p99", pct(99)},         {"min", v.front()}, {"max", v.back()}};
  };
  for (int r = 0; r < runs; ++r) {
    std::vector<double> v;
    for (int i = 0; i < steps; ++i) v.push_back(ms(r, i));
    double total = 0;
    for (double x : v) total += x;
    jr.push_back({{"index", r + 1},
                  {"warmup", false},
                  {"stats",
                   {{"steps", steps},
                    {"tokens", steps * tokens},
                    {"tokens_per_s", steps * tokens / total * 1e3},
                    {"step_latency_ms", lat(v)}}}});
    all.insert(all.end(), v.begin(), v.end());
    all_tokens.insert(all_tokens.end(), v.size(), tokens);
  }
  double total = 0;
  for (double x : all) total += x;
  j["stats"] = {{"steps", all.size()},
                {"tokens", all.size() * tokens},
                {"total_time_ms", total},
                {"tokens_per_s", all.size() * tokens / total * 1e3},
                {"step_latency_ms", lat(all)},
                {"step_latency_ms_samples", all},
                {"step_tokens_samples", all_tokens}};
  j["runs"] = jr;
  return j;
}

// The machine's noise: a deterministic pseudo-random jitter of +-2 % per step.
double Jitter(int r, int i) { return 1 + 0.02 * std::sin(r * 7919.0 + i * 104729.0); }

// One run of four slowed by 60 % (something else ran on the machine meanwhile): the steps'
// mean is 15 % higher and their bootstrap alone would call it real, but the runs say it is one
// run: noise. Every run 15 % slower: a regression.
TEST_CASE("step statistics must move across runs, not in one run") {
  auto base = MakeSummary(4, 50, 1, [](int r, int i) { return 10 * Jitter(r, i); });
  auto one_run =
      MakeSummary(4, 50, 1, [](int r, int i) { return (r == 2 ? 16 : 10) * Jitter(r, i); });
  DiffResult d = DiffSummaries(base, one_run, DiffOptions());
  const MetricDiff* mean = Find(d, "stats.step_latency_ms.mean");
  REQUIRE(mean != nullptr);
  CHECK(mean->change_pct == Approx(15).epsilon(0.01));
  CHECK(mean->tested);
  CHECK(mean->verdict == Verdict::kNoise);
  CHECK(mean->test.find("runs (4 vs 4) Welch p=") != std::string::npos);
  CHECK(d.regressions == 0);
  auto every_run = MakeSummary(4, 50, 1, [](int r, int i) { return 11.5 * Jitter(r, i); });
  d = DiffSummaries(base, every_run, DiffOptions());
  CHECK(Find(d, "stats.step_latency_ms.mean")->verdict == Verdict::kRegression);
  CHECK(Find(d, "stats.step_latency_ms.p50")->verdict == Verdict::kRegression);
  CHECK(Find(d, "stats.tokens_per_s")->verdict == Verdict::kRegression);
  // The amount of work is no regression: total_time_ms is informational.
  CHECK(Find(d, "stats.total_time_ms")->verdict == Verdict::kInfo);
}

// A profile of one run (or none): a model bucket's average is tested over its per-step samples
// (stats.step_buckets_model_ms_samples). A GEMM 10% slower in every step, while the step
// latency (host-bound) stays: a regression (before: "untested", exit 0). The same average
// with per-step noise only: not one.
TEST_CASE("model buckets are tested over their per-step samples") {
  auto with_gemm = [](nlohmann::ordered_json j, double gemm_ms, bool noisy_only) {
    std::vector<double> per_step;
    const size_t n = j["stats"]["step_latency_ms_samples"].size();
    for (size_t i = 0; i < n; ++i) {
      per_step.push_back(noisy_only ? gemm_ms * Jitter(7, int(i)) : gemm_ms * Jitter(3, int(i)));
    }
    double sum = 0;
    for (double x : per_step) sum += x;
    j["buckets_model_avg_ms"] = {{"mlp.gate_up_proj", {{"ms", sum / double(n)}, {"share", 1.0}}}};
    j["stats"]["step_buckets_model_ms_samples"] = {{"mlp.gate_up_proj", per_step}};
    return j;
  };
  auto steps = [](int r, int i) { return 0.5 * Jitter(r, i); };  // the GEMM: 27% of a step
  auto base = with_gemm(MakeSummary(1, 60, 1, steps), 0.1342, false);
  auto slow = with_gemm(MakeSummary(1, 60, 1, steps), 0.1476, false);
  DiffResult d = DiffSummaries(base, slow, DiffOptions());
  const MetricDiff* m = Find(d, "buckets_model_avg_ms.mlp.gate_up_proj.ms");
  REQUIRE(m != nullptr);
  CHECK(m->change_pct == Approx(10).epsilon(0.01));
  CHECK(m->tested);
  CHECK(m->verdict == Verdict::kRegression);
  INFO(m->test);
  CHECK(m->test.find("per-step ms (60 vs 60 steps) diff CI99 [") != std::string::npos);
  CHECK(d.regressions == 1);
  // Another sample of the same bucket: within its noise, whatever the threshold.
  auto same = with_gemm(MakeSummary(1, 60, 1, steps), 0.1342, true);
  DiffOptions tight;
  tight.metric_thresholds.push_back({"buckets_model_avg_ms.*", 0.01});
  d = DiffSummaries(base, same, tight);
  m = Find(d, "buckets_model_avg_ms.mlp.gate_up_proj.ms");
  REQUIRE(m != nullptr);
  if (m->verdict != Verdict::kBetter && m->verdict != Verdict::kWithin) {
    CHECK(m->tested);
    CHECK(m->verdict == Verdict::kNoise);
  }
  CHECK(d.regressions == 0);
  // A bucket only the new profile has (a kernel added): the base's steps spent 0 in it.
  {
    auto added = with_gemm(MakeSummary(1, 60, 1, steps), 0.1342, false);
    added["buckets_model_avg_ms"]["norm"] = {{"ms", 0.05}, {"share", 0.1}};
    added["stats"]["step_buckets_model_ms_samples"]["norm"] = std::vector<double>(60, 0.05);
    DiffResult da = DiffSummaries(base, added, DiffOptions());
    const MetricDiff* n = Find(da, "buckets_model_avg_ms.norm.ms");
    REQUIRE(n != nullptr);
    CHECK(n->tested);
    CHECK(n->verdict == Verdict::kRegression);
  }
  // Without the samples (an older summary): worse but untested, and the headline says so.
  base["stats"].erase("step_buckets_model_ms_samples");
  d = DiffSummaries(base, slow, DiffOptions());
  CHECK(Find(d, "buckets_model_avg_ms.mlp.gate_up_proj.ms")->verdict == Verdict::kUntested);
  CHECK(d.regressions == 0);
  const std::string text = RenderDiffText(d, DiffOptions());
  CHECK(text.find("profagent diff: no regression (1 metric worse beyond the threshold but "
                  "untested: no samples; --fail-untested fails on them)") != std::string::npos);
}

// The same for a KV bin's statistics: every step at KV length 100 (bin [0-512)), per-run bins
// as the report writes them. One slow run is noise there too; every run slower, a regression.
TEST_CASE("KV bin statistics must move across runs, not in one run") {
  auto with_bins = [](nlohmann::ordered_json j) {
    auto bin = [](const nlohmann::ordered_json& st) {
      return nlohmann::ordered_json::array({{{"lo", 0},
                                             {"hi", 512},
                                             {"steps", st["steps"]},
                                             {"tokens", st["tokens"]},
                                             {"latency_ms", st["step_latency_ms"]},
                                             {"tokens_per_s", st["tokens_per_s"]}}});
    };
    j["stats"]["step_kv_samples"] =
        std::vector<double>(j["stats"]["step_latency_ms_samples"].size(), 100.0);
    j["decode_length_buckets"] = bin(j["stats"]);
    for (auto& r : j["runs"]) r["decode_length_buckets"] = bin(r["stats"]);
    return j;
  };
  auto base = with_bins(MakeSummary(4, 50, 1, [](int r, int i) { return 10 * Jitter(r, i); }));
  auto one_run = with_bins(
      MakeSummary(4, 50, 1, [](int r, int i) { return (r == 2 ? 16 : 10) * Jitter(r, i); }));
  DiffResult d = DiffSummaries(base, one_run, DiffOptions());
  for (const char* name : {"decode_length_buckets[0-512].latency_ms.mean",
                           "decode_length_buckets[0-512].tokens_per_s"}) {
    INFO(name);
    const MetricDiff* m = Find(d, name);
    REQUIRE(m != nullptr);
    CHECK(m->tested);
    CHECK(m->verdict == Verdict::kNoise);
    CHECK(m->test.find("bin steps 200 vs 200") != std::string::npos);
    CHECK(m->test.find("runs (4 vs 4) Welch p=") != std::string::npos);
  }
  CHECK(d.regressions == 0);
  auto every_run =
      with_bins(MakeSummary(4, 50, 1, [](int r, int i) { return 11.5 * Jitter(r, i); }));
  d = DiffSummaries(base, every_run, DiffOptions());
  CHECK(Find(d, "decode_length_buckets[0-512].latency_ms.mean")->verdict == Verdict::kRegression);
  CHECK(Find(d, "decode_length_buckets[0-512].tokens_per_s")->verdict == Verdict::kRegression);
}

// Without runs, a stretch of slow steps in one profile (a burst of load) is tested in blocks
// of consecutive steps: the i.i.d. bootstrap's interval is much narrower than the block one.
TEST_CASE("a burst of slow steps is resampled in blocks") {
  std::vector<double> a, b;
  for (int i = 0; i < 400; ++i) {
    a.push_back(10 * Jitter(0, i));
    b.push_back((i >= 150 && i < 210 ? 14 : 10) * Jitter(1, i));
  }
  auto iid = BootstrapDiffInterval(a, b, Statistic::kMean, 0.01, 2000, 3);
  auto blocks = BootstrapDiffInterval(a, b, Statistic::kMean, 0.01, 2000, 3, 20, 20);
  CHECK(iid.first > 0);  // i.i.d.: "significant"
  CHECK(blocks.second - blocks.first > 1.5 * (iid.second - iid.first));
}

// Fewer tokens per step at the same step times: tokens/s is 25 % lower, exactly; tested over
// the (time, tokens) pairs, it is significant without runs (through the step times it never
// was).
TEST_CASE("a tokens/s drop at unchanged step times is a regression") {
  auto base = MakeSummary(1, 200, 16, [](int r, int i) { return 10 * Jitter(r, i); });
  auto fewer = MakeSummary(1, 200, 12, [](int r, int i) { return 10 * Jitter(r + 1, i); });
  DiffResult d = DiffSummaries(base, fewer, DiffOptions());
  const MetricDiff* tps = Find(d, "stats.tokens_per_s");
  REQUIRE(tps != nullptr);
  CHECK(tps->change_pct == Approx(-25).epsilon(0.01));
  CHECK(tps->verdict == Verdict::kRegression);
  CHECK(tps->test.find("tokens/s diff CI99") != std::string::npos);
  CHECK(Find(d, "stats.step_latency_ms.mean")->verdict != Verdict::kRegression);
}

TEST_CASE("a change at the threshold, up to rounding, is within it; p shown beside alpha") {
  auto base = MakeSummary(1, 100, 1, [](int, int) { return 0.16; });
  auto at = MakeSummary(1, 100, 1, [](int, int) { return 0.168; });  // +5.000000000000004 %
  DiffResult d = DiffSummaries(base, at, DiffOptions());
  CHECK(Find(d, "stats.step_latency_ms.mean")->verdict == Verdict::kWithin);
}

TEST_CASE("settings that differ, dropped records and warnings are noted") {
  auto base = MakeSummary(1, 50, 1, [](int r, int i) { return 10 * Jitter(r, i); });
  auto now = base;
  now["meta"]["options"] = {{"step_pattern", "^(step|run)\\b"}};
  base["meta"]["options"] = {{"step_pattern", "^step\\b"}};
  now["meta"]["drops"] = 12;
  now["meta"]["warnings"] = {"rank0.pb: the agent dropped 12 records"};
  DiffResult d = DiffSummaries(base, now, DiffOptions());
  std::string notes;
  for (const std::string& n : d.notes) notes += n + "\n";
  CHECK(notes.find("different settings (step_pattern)") != std::string::npos);
  CHECK(notes.find("dropped 12 records") != std::string::npos);
  CHECK(notes.find("1 warning(s)") != std::string::npos);
}

// `diff base bad`: exit 2 and one line on stderr naming `bad` and `message`.
void CheckBadInput(const std::string& base, const std::string& bad, const std::string& message) {
  std::ostringstream o, e;
  CHECK(RunDiffCommand(base, bad, DiffOptions(), false, o, e) == 2);
  const std::string line = e.str();
  CHECK(line.find(bad) != std::string::npos);
  CHECK(line.find(message) != std::string::npos);
  CHECK(std::count(line.begin(), line.end(), '\n') == 1);
}

TEST_CASE("bad input exits 2 with one line naming the file") {
  Run r = Diff("diff_base.json", "diff_malformed.json");
  REQUIRE(r.code == 2);
  REQUIRE(r.out.empty());
  REQUIRE(r.err.find("diff_malformed.json") != std::string::npos);
  REQUIRE(r.err.find("malformed JSON") != std::string::npos);
  REQUIRE(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  Run missing = Diff("does_not_exist.json", "diff_base.json");
  REQUIRE(missing.code == 2);
  REQUIRE(missing.err.find("does_not_exist.json") != std::string::npos);
  // Valid JSON that is not a summary.
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/not_summary.json";
  std::ofstream(path) << "{\"stats\": {\"steps\": 3}}\n";
  std::ostringstream out, err;
  REQUIRE(RunDiffCommand(kData + "diff_base.json", path, DiffOptions(), false, out, err) == 2);
  REQUIRE(err.str().find("not a profagent summary") != std::string::npos);
  // Another major version, or junk after the version, is not version 1; a minor version is.
  for (const char* schema : {"profagent.summary/12", "profagent.summary/1-x",
                             "profagent.summary/1.", "profagent.summary/2"}) {
    INFO(schema);
    std::ofstream(path) << "{\"schema\": \"" << schema << "\", \"stats\": {\"steps\": 3}}\n";
    std::ostringstream o, e;
    CHECK(RunDiffCommand(path, path, DiffOptions(), false, o, e) == 2);
    CHECK(e.str().find(std::string("schema ") + schema + " is not one this profanalyze reads") !=
          std::string::npos);
  }
  std::ofstream(path) << "{\"schema\": \"profagent.summary/1.3\", \"stats\": {\"steps\": 3}}\n";
  {
    std::ostringstream o, e;
    CHECK(RunDiffCommand(path, path, DiffOptions(), false, o, e) == 0);
  }
  // A summary whose sections are broken: bad input, not "nothing to compare".
  const std::pair<const char*, const char*> kBroken[] = {
      {"{\"schema\": \"profagent.summary/1\"}", "no \"stats\" object"},
      {"{\"schema\": \"profagent.summary/1\", \"stats\": \"x\"}", "no \"stats\" object"},
      {"{\"schema\": \"profagent.summary/1\", \"stats\": {\"steps\": 2, "
       "\"step_latency_ms_samples\": [1, \"a\"]}}",
       "holds something other than numbers"},
      {"{\"schema\": \"profagent.summary/1\", \"stats\": {\"steps\": 2}, \"kernels\": {}}",
       "\"kernels\" is not an array"},
      // Per-step bucket samples: an object of arrays of numbers of one length, no longer than
      // the step samples.
      {"{\"schema\": \"profagent.summary/1\", \"stats\": {\"steps\": 2, "
       "\"step_buckets_model_ms_samples\": [1, 2]}}",
       "\"stats.step_buckets_model_ms_samples\" is not an object"},
      {"{\"schema\": \"profagent.summary/1\", \"stats\": {\"steps\": 2, "
       "\"step_buckets_model_ms_samples\": {\"norm\": [1, \"x\"]}}}",
       "\"stats.step_buckets_model_ms_samples\".norm holds something other than numbers"},
      {"{\"schema\": \"profagent.summary/1\", \"stats\": {\"steps\": 2, "
       "\"step_buckets_model_ms_samples\": {\"norm\": [1, 2], \"lm_head\": [1]}}}",
       "has arrays of different lengths (2 and 1 at lm_head)"},
      {"{\"schema\": \"profagent.summary/1\", \"stats\": {\"steps\": 2, "
       "\"step_latency_ms_samples\": [1, 2], "
       "\"step_buckets_model_ms_samples\": {\"norm\": [1, 2, 3]}}}",
       "has 3 samples per bucket for 2 steps"},
  };
  for (const auto& [text, message] : kBroken) {
    INFO(text);
    std::ofstream(path) << text << "\n";
    CheckBadInput(kData + "diff_base.json", path, message);
  }
}

// A straggler GPU ("R:D") on one side and none (null) on the other: comparable (a rank file
// lost, an MPI-only job), not bad input.
TEST_CASE("a text metric that is null on the other side is comparable") {
  auto base = LoadSummary(kData + "diff_base.json");
  REQUIRE(base.ok());
  nlohmann::ordered_json a = *base, b = *base;
  a["collectives"]["stragglers"]["most_frequent_last_arriver_gpu"] = "0:1";
  b["collectives"]["stragglers"]["most_frequent_last_arriver_gpu"] = nullptr;
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp");
  std::ofstream(dir + "/gpu_a.json") << a.dump() << "\n";
  std::ofstream(dir + "/gpu_b.json") << b.dump() << "\n";
  for (const auto& [x, y] : {std::make_pair(dir + "/gpu_a.json", dir + "/gpu_b.json"),
                             std::make_pair(dir + "/gpu_b.json", dir + "/gpu_a.json")}) {
    std::ostringstream out, err;
    INFO(err.str());
    CHECK(RunDiffCommand(x, y, DiffOptions(), false, out, err) == 0);
  }
}

// A NEW summary that lost a section, its timing mode, or a metric turned to text is bad input
// (exit 2), not a clean gate.
TEST_CASE("summaries that cannot be compared exit 2 naming the file") {
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/spoiled.json";
  auto base = LoadSummary(kData + "diff_base.json");
  REQUIRE(base.ok());
  REQUIRE((*base)["kernels"].size() > 0);
  std::vector<std::pair<std::function<void(nlohmann::ordered_json*)>, std::string>> cases = {
      {[](nlohmann::ordered_json* j) { j->erase("kernels"); }, "no \"kernels\" section"},
      {[](nlohmann::ordered_json* j) { j->erase("meta"); }, "no \"meta\" section"},
      {[](nlohmann::ordered_json* j) { (*j)["meta"].erase("gpu_timing"); },
       "no meta.gpu_timing"},
      {[](nlohmann::ordered_json* j) { (*j)["kernels"][0]["total_ms"] = "abc"; },
       "total_ms\" is text, not a number"},
  };
  for (const auto& [spoil, message] : cases) {
    INFO(message);
    nlohmann::ordered_json j = *base;
    spoil(&j);
    std::ofstream(path) << j.dump() << "\n";
    CheckBadInput(kData + "diff_base.json", path, message);
    // Either way round.
    std::ostringstream o2, e2;
    CHECK(RunDiffCommand(path, kData + "diff_base.json", DiffOptions(), false, o2, e2) == 2);
  }
}

TEST_CASE("a new profile that lost all its steps is a regression") {
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/no_steps.json";
  auto base = LoadSummary(kData + "diff_base.json");
  REQUIRE(base.ok());
  nlohmann::ordered_json j = *base;  // every section, but no steps
  j["stats"]["steps"] = 0;
  j["stats"].erase("step_latency_ms_samples");
  std::ofstream(path) << j.dump() << "\n";
  std::ostringstream out, err;
  CHECK(RunDiffCommand(kData + "diff_base.json", path, DiffOptions(), false, out, err) == 1);
  CHECK(out.str().find("the new profile has no steps") != std::string::npos);
  // The other way round (steps appeared) is not.
  std::ostringstream out2, err2;
  CHECK(RunDiffCommand(path, kData + "diff_base.json", DiffOptions(), false, out2, err2) == 0);
}

// Profile directories are summarized in memory with the report library.
// 60 decode steps, one after another (a gap of half a step between them), 4 tokens each: step
// i takes ms(i) (+-1 % deterministic jitter) at the KV length kv(i) (-1: none).
void WriteStepProfile(const std::string& dir, const std::function<double(int)>& ms,
                      const std::function<int64_t(int)>& kv, int steps = 60) {
  mkdir(dir.c_str(), 0755);
  testing::ProfileWriter w(dir + "/rank0.pb");
  REQUIRE(w.ok());
  w.Header(100, "h", 0, 1700000000000000000ull, 1000000000);
  w.String(1, "decode");
  w.Thread(0, 100, "main");
  Record r;
  EventBatch* b = r.mutable_batch();
  b->set_thread(0);
  b->set_base_ns(1000000000);
  double prev_ms = 0;
  for (int i = 0; i < steps; ++i) {
    Event* e = b->add_events();
    e->set_dt(i == 0 ? 0 : static_cast<int64_t>(prev_ms * 1.5e6));
    prev_ms = ms(i);
    e->set_dur(static_cast<uint64_t>(prev_ms * 1e6 * (1 + 0.01 * ((i * 7) % 5 - 2) / 2)));
    e->set_kind(EV_STEP);
    e->mutable_step()->set_phase(1);
    e->mutable_step()->set_index(i);
    e->mutable_step()->set_tokens(4);
    e->mutable_step()->set_kv(kv(i));
    e->mutable_step()->set_bsz(-1);
  }
  w.Write(r);
}

// 30 steps of step_ms each (+-1 %), no KV length.
void WriteStepProfile(const std::string& dir, double step_ms) {
  WriteStepProfile(dir, [step_ms](int) { return step_ms; }, [](int) -> int64_t { return -1; },
                   30);
}

TEST_CASE("profile directories are summarized in memory and compared") {
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string root = std::string(tmp != nullptr ? tmp : "/tmp") + "/diff_dirs";
  mkdir(root.c_str(), 0755);
  WriteStepProfile(root + "/base", 10.0);
  WriteStepProfile(root + "/slow", 12.0);
  std::ostringstream out, err;
  REQUIRE(RunDiffCommand(root + "/base", root + "/slow", DiffOptions(), false, out, err) == 1);
  INFO(out.str() << err.str());
  REQUIRE(out.str().find("stats.step_latency_ms.mean") != std::string::npos);
  auto a = LoadSummary(root + "/base");
  auto b = LoadSummary(root + "/slow");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  DiffResult d = DiffSummaries(*a, *b, DiffOptions());
  const MetricDiff* mean = Find(d, "stats.step_latency_ms.mean");
  REQUIRE(mean != nullptr);
  REQUIRE(mean->change_pct == Approx(20.0).epsilon(1e-2));
  REQUIRE(mean->verdict == Verdict::kRegression);
  std::ostringstream out2, err2;
  REQUIRE(RunDiffCommand(root + "/base", root + "/base", DiffOptions(), false, out2, err2) == 0);
}

// A slowdown at long contexts only: the KV bin that holds those steps is tested over its own
// steps (step_kv_samples) and is a regression, the short-context bin is not (before, every KV
// bin metric was "worse, untested": no samples).
TEST_CASE("KV bins are tested over their own steps") {
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string root = std::string(tmp != nullptr ? tmp : "/tmp") + "/diff_kv";
  mkdir(root.c_str(), 0755);
  auto kv = [](int i) -> int64_t { return i % 2 == 0 ? 100 : 700; };
  WriteStepProfile(
      root + "/base", [](int) { return 10.0; }, kv);
  WriteStepProfile(
      root + "/long_slow", [](int i) { return i % 2 == 0 ? 10.0 : 13.0; }, kv);
  auto a = LoadSummary(root + "/base");
  auto b = LoadSummary(root + "/long_slow");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  const auto& samples = (*a)["stats"]["step_kv_samples"];
  REQUIRE(samples.size() == 60);
  CHECK(samples[0] == 100);
  CHECK(samples[1] == 700);
  DiffResult d = DiffSummaries(*a, *b, DiffOptions());
  const MetricDiff* slow = Find(d, "decode_length_buckets[512-1024].latency_ms.p50");
  REQUIRE(slow != nullptr);
  CHECK(slow->change_pct == Approx(30).epsilon(0.02));
  CHECK(slow->verdict == Verdict::kRegression);
  CHECK(slow->test.find("bin steps 30 vs 30: step p50 diff CI99") != std::string::npos);
  const MetricDiff* tps = Find(d, "decode_length_buckets[512-1024].tokens_per_s");
  REQUIRE(tps != nullptr);
  CHECK(tps->verdict == Verdict::kRegression);
  CHECK(tps->test.find("tokens/s diff CI99") != std::string::npos);
  const MetricDiff* fast = Find(d, "decode_length_buckets[0-512].latency_ms.p50");
  REQUIRE(fast != nullptr);
  CHECK(fast->verdict == Verdict::kWithin);
  for (const MetricDiff& m : d.metrics) {
    INFO(m.name);
    if (m.name.rfind("decode_length_buckets", 0) == 0) CHECK(m.verdict != Verdict::kUntested);
  }
  // Steps without a KV length: no step_kv_samples, the bins are empty.
  WriteStepProfile(
      root + "/no_kv", [](int) { return 10.0; }, [](int) -> int64_t { return -1; });
  auto c = LoadSummary(root + "/no_kv");
  REQUIRE(c.ok());
  CHECK(!(*c)["stats"].contains("step_kv_samples"));
}

}  // namespace
}  // namespace analyzer
}  // namespace profagent
