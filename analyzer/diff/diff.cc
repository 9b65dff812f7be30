#include "analyzer/diff/diff.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <set>
#include <sstream>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "analyzer/reader.h"
#include "analyzer/report/analysis.h"

namespace profagent {
namespace analyzer {

using OJson = nlohmann::ordered_json;

namespace {

// ------------------------------------------------------------------ statistics helpers

double StatisticInPlace(std::vector<double>& v, Statistic s) {
  const size_t n = v.size();
  if (n == 0) return 0;
  switch (s) {
    case Statistic::kMean: {
      double sum = 0;
      for (double x : v) sum += x;
      return sum / n;
    }
    case Statistic::kStd: {
      double sum = 0;
      for (double x : v) sum += x;
      const double m = sum / n;
      double ss = 0;
      for (double x : v) ss += (x - m) * (x - m);
      return std::sqrt(ss / n);
    }
    case Statistic::kMin:
      return *std::min_element(v.begin(), v.end());
    case Statistic::kMax:
      return *std::max_element(v.begin(), v.end());
    default: {
      const double p = s == Statistic::kP50 ? 50 : s == Statistic::kP90 ? 90 : 99;
      size_t rank = static_cast<size_t>(std::ceil(p * n / 100.0));
      size_t idx = rank == 0 ? 0 : std::min(rank - 1, n - 1);
      std::nth_element(v.begin(), v.begin() + idx, v.end());
      return v[idx];
    }
  }
}

// Continued fraction of the incomplete beta function (modified Lentz).
double BetaContinuedFraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300, kEps = 1e-15;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 500; ++m) {
    const int m2 = 2 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < kEps) break;
  }
  return h;
}

// Regularized incomplete beta I_x(a, b).
double RegularizedBeta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) +
               b * std::log(1 - x));
  if (x < (a + 1) / (a + b + 2)) return front * BetaContinuedFraction(a, b, x) / a;
  return 1 - front * BetaContinuedFraction(b, a, 1 - x) / b;
}

// ------------------------------------------------------------------ metric naming

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string LastSegment(const std::string& path) {
  size_t p = path.find_last_of(".]");
  return p == std::string::npos ? path : path.substr(p + 1);
}

// Keys that identify an entry or a position rather than measure anything.
bool IsIdentity(const std::string& key) {
  static const std::set<std::string> kIds = {"lo", "hi", "rank", "device", "index", "start_ms",
                                             "at_ms", "peak_at_ms", "reference_rank"};
  return kIds.count(key) != 0;
}

Direction DirectionOf(const std::string& path) {
  // runs_aggregate.metrics.NAME.{mean,std}: NAME's direction (its spread: less is better).
  const std::string agg = "runs_aggregate.metrics.";
  if (path.rfind(agg, 0) == 0 && (EndsWith(path, ".mean") || EndsWith(path, ".std"))) {
    const bool is_std = EndsWith(path, ".std");
    const std::string metric =
        "stats." + path.substr(agg.size(), path.size() - agg.size() - (is_std ? 4 : 5));
    const Direction d = DirectionOf(metric);
    return is_std && d != Direction::kInfo ? Direction::kLowerIsBetter : d;
  }
  const std::string last = LastSegment(path);
  static const std::set<std::string> kInfo = {"count", "steps", "tokens", "calls", "allocs",
                                              "frees", "runs", "share", "drops", "ranks",
                                              "calls_matched", "records", "host_events",
                                              "device_ops", "world_size"};
  if (kInfo.count(last) != 0) return Direction::kInfo;
  // The amount of work, not its speed: more steps per run take longer (tokens/s and the step
  // statistics judge the speed).
  if (last == "total_time_ms" || path.rfind("runs_aggregate.metrics.total_time_ms", 0) == 0) {
    return Direction::kInfo;
  }
  // Symptoms, not causes: a rank waits longer when another got slower; the GPU is busier and
  // work starts later after its launch when the kernels got slower.
  if (last == "gpu_busy_share" || last == "wait_ms" ||
      path.rfind("collectives.stragglers.wait_", 0) == 0 ||
      path.rfind("collectives.stragglers.skew_us", 0) == 0 ||
      path.find("launch_to_start_us") != std::string::npos) {
    return Direction::kInfo;
  }
  // The steps' wall time again (stats.step_latency_ms, which is tested): not a second gate.
  if (path.rfind("host.per_step.wall_ms", 0) == 0) return Direction::kInfo;
  if (path.rfind("collectives.ops[", 0) == 0 && last == "bytes") return Direction::kInfo;
  if (path.find("last_arriver_counts") != std::string::npos) return Direction::kInfo;
  if (path.find("most_frequent_last_arriver") != std::string::npos) return Direction::kInfo;
  if (path == "collectives.stragglers.straggler") return Direction::kInfo;  // a rank number
  if (last == "std") return Direction::kLowerIsBetter;  // spread: less is better, whatever unit
  if (path.find("tokens_per_s") != std::string::npos || EndsWith(last, "_gbps")) {
    return Direction::kHigherIsBetter;
  }
  // Any segment carrying a time or size unit (a LAT block's fields inherit their key's unit).
  std::string seg;
  for (size_t i = 0; i <= path.size(); ++i) {
    const char c = i < path.size() ? path[i] : '.';
    if (c == '.' || c == '[' || c == ']') {
      if (EndsWith(seg, "_ms") || EndsWith(seg, "_us") || EndsWith(seg, "_bytes") ||
          seg == "ms" || seg.find("_ms_") != std::string::npos) {
        return Direction::kLowerIsBetter;
      }
      seg.clear();
    } else {
      seg += c;
    }
  }
  return Direction::kInfo;
}

// Metrics --fail-untested leaves untested: a spread (`std`: how steady, not how fast), and the
// host side's symptoms of the work's speed (API call times, idle gaps between device work),
// whose single calls and gaps move by tens of percent from run to run of the same program.
bool HostSymptomOrSpread(const std::string& path) {
  return LastSegment(path) == "std" || path.rfind("host.api", 0) == 0 ||
         path.rfind("host.idle_gaps", 0) == 0;
}

// A stable key for an array entry: its name, or what identifies it in SUMMARY_FORMAT.md.
std::string EntryKey(const OJson& e, size_t index) {
  auto str = [&](const char* k) -> std::string {
    auto it = e.find(k);
    if (it == e.end() || it->is_null()) return "";
    if (it->is_string()) return it->get<std::string>();
    return it->dump();
  };
  if (!e.is_object()) return std::to_string(index);
  if (e.contains("lib") && e.contains("op")) {
    return absl::StrCat(str("lib"), " ", str("op"), " ", str("size_class"));
  }
  // A kernel is a row per (name, bucket): one name may be in several buckets (a shared GEMM
  // decided by its NVTX projection range), so both key it, never its position.
  if (e.contains("name") && e.contains("bucket")) {
    return absl::StrCat(str("name"), " (", str("bucket"), ")");
  }
  if (e.contains("name")) return str("name");
  if (e.contains("rank") && e.contains("device")) {
    return absl::StrCat("rank ", str("rank"), " dev ", str("device"));
  }
  if (e.contains("lo") && e.contains("hi")) {
    std::string hi = str("hi");
    return absl::StrCat(str("lo"), "-", hi == "null" || hi.empty() ? "inf" : hi);
  }
  if (e.contains("rank")) return absl::StrCat("rank ", str("rank"));
  if (e.contains("index")) return str("index");
  return std::to_string(index);
}

// The metrics of `j` by path (null: no value); `strings`, when given, collects the paths of
// string values (names, or a metric spoiled into text).
void Flatten(const OJson& j, const std::string& prefix,
             std::vector<std::pair<std::string, std::optional<double>>>* out,
             std::set<std::string>* strings = nullptr) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& k = it.key();
      if (prefix.empty() && (k == "schema" || k == "meta" || k == "runs")) continue;
      if (EndsWith(k, "_samples")) continue;
      if (k == "longest_gaps") continue;  // a top-10 list of positions, not a metric
      Flatten(it.value(), prefix.empty() ? k : prefix + "." + k, out, strings);
    }
  } else if (j.is_array()) {
    std::set<std::string> seen;
    for (size_t i = 0; i < j.size(); ++i) {
      if (!j[i].is_object()) continue;  // lists of plain values are settings, not metrics
      std::string key = EntryKey(j[i], i);
      if (!seen.insert(key).second) key += "#" + std::to_string(i);
      Flatten(j[i], prefix + "[" + key + "]", out, strings);
    }
  } else if (j.is_number() && !j.is_boolean()) {
    if (!IsIdentity(LastSegment(prefix))) out->push_back({prefix, j.get<double>()});
  } else if (j.is_null()) {
    if (!IsIdentity(LastSegment(prefix))) out->push_back({prefix, std::nullopt});
  } else if (j.is_string() && strings != nullptr) {
    strings->insert(prefix);
  }
}

// ------------------------------------------------------------------ significance

struct SampleTest {
  bool available = false;
  bool significant_worse = false;
  std::string text;
};

std::vector<double> Samples(const OJson& s, const char* key) {
  std::vector<double> v;
  auto st = s.find("stats");
  if (st == s.end() || !st->is_object()) return v;
  auto it = st->find(key);
  if (it == st->end() || !it->is_array()) return v;
  for (const auto& x : *it) {
    if (x.is_number()) v.push_back(x.get<double>());
  }
  return v;
}

// Calls fn(run) for each non-warm-up run object of runs[], in run order.
template <typename Fn>
void ForEachMeasuredRun(const OJson& s, Fn fn) {
  auto runs = s.find("runs");
  if (runs == s.end() || !runs->is_array()) return;
  for (const OJson& r : *runs) {
    if (!r.is_object()) continue;
    auto w = r.find("warmup");
    if (w != r.end() && w->is_boolean() && w->get<bool>()) continue;
    fn(r);
  }
}

// A statistic's value in each non-warm-up run (runs[i].stats.PATH, PATH dotted), in run order.
std::vector<double> RunValues(const OJson& s, const std::string& path) {
  std::vector<double> v;
  ForEachMeasuredRun(s, [&](const OJson& r) {
    auto st = r.find("stats");
    if (st == r.end() || !st->is_object()) return;
    const OJson* x = &*st;
    size_t from = 0;
    while (x != nullptr && from <= path.size()) {
      const size_t dot = std::min(path.find('.', from), path.size());
      auto it = x->is_object() ? x->find(path.substr(from, dot - from)) : x->end();
      x = x->is_object() && it != x->end() ? &*it : nullptr;
      from = dot + 1;
    }
    if (x != nullptr && x->is_number()) v.push_back(x->get<double>());
  });
  return v;
}

// Two-sided Welch p-value of two small samples (sample std, n - 1).
double WelchSamplesP(const std::vector<double>& a, const std::vector<double>& b) {
  auto moments = [](const std::vector<double>& v, double* mean, double* sd) {
    double sum = 0;
    for (double x : v) sum += x;
    *mean = sum / double(v.size());
    double ss = 0;
    for (double x : v) ss += (x - *mean) * (x - *mean);
    *sd = v.size() > 1 ? std::sqrt(ss / double(v.size() - 1)) : 0;
  };
  double ma, sa, mb, sb;
  moments(a, &ma, &sa);
  moments(b, &mb, &sb);
  return WelchP(ma, sa, double(a.size()), mb, sb, double(b.size()));
}

// Block length of the moving-block bootstrap over n steps in step order: sqrt(n). Host noise
// on a shared machine comes in bursts (a whole stretch of steps slower), which an i.i.d.
// resample of single steps would take for a shift of the distribution.
size_t BlockLength(size_t n) { return std::max<size_t>(1, size_t(std::sqrt(double(n)))); }

// One moving-block resample of indices 0..n-1 (blocks of `block` consecutive indices).
void ResampleBlocks(size_t n, size_t block, std::mt19937_64& rng, std::vector<size_t>* idx) {
  idx->clear();
  block = std::min(block, n);
  const size_t starts = n - block + 1;
  while (idx->size() < n) {
    const size_t s = rng() % starts;
    for (size_t k = 0; k < block && idx->size() < n; ++k) idx->push_back(s + k);
  }
}

// Average ms per step of a bucket: buckets_model_avg_ms.X.ms, buckets_engine_avg_ms.X.ms, and
// the same in runs (runs[i]....) and runs_aggregate (....mean, ....std).
bool IsPerStepBucketMs(const std::string& name) {
  return (name.find("buckets_model_avg_ms") != std::string::npos ||
          name.find("buckets_engine_avg_ms") != std::string::npos) &&
         (EndsWith(name, ".ms") || EndsWith(name, ".mean") || EndsWith(name, ".std"));
}

// Each step's ms of model bucket `bucket` (stats.step_buckets_model_ms_samples.BUCKET; a step
// without that bucket's work is a 0 there); empty when the summary has none.
std::vector<double> BucketSamples(const OJson& s, const std::string& bucket) {
  std::vector<double> v;
  auto st = s.find("stats");
  if (st == s.end() || !st->is_object()) return v;
  auto all = st->find("step_buckets_model_ms_samples");
  if (all == st->end() || !all->is_object() || all->empty()) return v;
  auto it = all->find(bucket);
  // A bucket the summary does not list took no time in any step (LoadSummary checked the
  // arrays share one length): zeros.
  if (it == all->end()) return std::vector<double>(all->begin()->size(), 0.0);
  for (const auto& x : *it) v.push_back(x.get<double>());
  return v;
}

// The per-step samples of both sides for a top-level model bucket average
// (buckets_model_avg_ms.BUCKET.ms); empty vectors for any other metric.
struct BucketPair {
  std::vector<double> base, now;
  bool testable() const { return base.size() >= 2 && now.size() >= 2; }
};
BucketPair ModelBucketSamples(const std::string& name, const OJson& base, const OJson& now) {
  static const std::string kPrefix = "buckets_model_avg_ms.";
  if (name.rfind(kPrefix, 0) != 0 || !EndsWith(name, ".ms")) return {};
  const std::string bucket = name.substr(kPrefix.size(), name.size() - kPrefix.size() - 3);
  return {BucketSamples(base, bucket), BucketSamples(now, bucket)};
}

// Each step's KV length from stats.step_kv_samples (NaN where the KV bins do not take the
// step), when it holds one entry per step sample (`steps`); else empty.
std::vector<double> KvSamples(const OJson& s, size_t steps) {
  std::vector<double> v;
  auto st = s.find("stats");
  if (st == s.end() || !st->is_object()) return v;
  auto it = st->find("step_kv_samples");
  if (it == st->end() || !it->is_array() || it->size() != steps) return v;
  for (const auto& x : *it) v.push_back(x.is_number() ? x.get<double>() : NAN);
  return v;
}

// A KV bin's metric that per-step samples can test: decode_length_buckets[LO-HI].latency_ms.STAT
// (HI "inf" for the open last bin) or decode_length_buckets[LO-HI].tokens_per_s.
struct KvBinMetric {
  double lo = 0, hi = INFINITY;
  std::string stat;  // "p50", ..., or "tokens_per_s"
};

std::optional<KvBinMetric> KvBinMetricFor(const std::string& name) {
  static const std::string kPrefix = "decode_length_buckets[";
  if (name.rfind(kPrefix, 0) != 0) return std::nullopt;
  const size_t close = name.find(']', kPrefix.size());
  if (close == std::string::npos) return std::nullopt;
  const std::string range = name.substr(kPrefix.size(), close - kPrefix.size());
  const size_t dash = range.find('-');
  if (dash == std::string::npos) return std::nullopt;
  KvBinMetric m;
  if (!absl::SimpleAtod(range.substr(0, dash), &m.lo)) return std::nullopt;
  const std::string hi = range.substr(dash + 1);
  if (hi != "inf" && !absl::SimpleAtod(hi, &m.hi)) return std::nullopt;
  const std::string rest = name.substr(close + 1);
  if (rest == ".tokens_per_s") {
    m.stat = "tokens_per_s";
  } else if (rest.rfind(".latency_ms.", 0) == 0) {
    m.stat = rest.substr(12);
  } else {
    return std::nullopt;
  }
  return m;
}

// The non-warm-up runs' values of a KV bin's metric (runs[].decode_length_buckets), where the
// run has steps in the bin.
std::vector<double> RunBinValues(const OJson& s, const KvBinMetric& bin) {
  std::vector<double> v;
  ForEachMeasuredRun(s, [&](const OJson& r) {
    auto bins = r.find("decode_length_buckets");
    if (bins == r.end() || !bins->is_array()) return;
    for (const OJson& b : *bins) {
      if (!b.is_object()) continue;
      auto lo = b.find("lo"), hi = b.find("hi");
      if (lo == b.end() || !lo->is_number() || lo->get<double>() != bin.lo) continue;
      const bool open = hi == b.end() || hi->is_null();
      if (open != std::isinf(bin.hi) ||
          (!open && (!hi->is_number() || hi->get<double>() != bin.hi))) {
        continue;
      }
      const OJson* x = nullptr;
      if (bin.stat == "tokens_per_s") {
        auto t = b.find("tokens_per_s");
        if (t != b.end()) x = &*t;
      } else if (auto lat = b.find("latency_ms"); lat != b.end() && lat->is_object()) {
        auto t = lat->find(bin.stat);
        if (t != lat->end()) x = &*t;
      }
      if (x != nullptr && x->is_number()) v.push_back(x->get<double>());
      break;
    }
  });
  return v;
}

std::optional<Statistic> StepStatisticFor(const std::string& name) {
  static const std::pair<const char*, Statistic> kMap[] = {
      {"stats.step_latency_ms.mean", Statistic::kMean},
      {"stats.step_latency_ms.std", Statistic::kStd},
      {"stats.step_latency_ms.min", Statistic::kMin},
      {"stats.step_latency_ms.max", Statistic::kMax},
      {"stats.step_latency_ms.p50", Statistic::kP50},
      {"stats.step_latency_ms.p90", Statistic::kP90},
      {"stats.step_latency_ms.p99", Statistic::kP99},
      // sum(tokens) / sum(step times) over the steps (the mean step time for summaries
      // without step_tokens_samples).
      {"stats.tokens_per_s", Statistic::kMean},
  };
  for (const auto& kv : kMap) {
    if (name == kv.first) return kv.second;
  }
  return std::nullopt;
}

std::string Fmt(double v) {
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    snprintf(buf, sizeof(buf), "%.0f", v);
    return buf;
  }
  if (v != 0 && (std::fabs(v) >= 1e7 || std::fabs(v) < 1e-3)) {
    snprintf(buf, sizeof(buf), "%.4g", v);
  } else {
    snprintf(buf, sizeof(buf), "%.4f", v);
    // Trim trailing zeros (keep one decimal at most when integral).
    std::string s = buf;
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
  return buf;
}

// Three significant digits, more when those would round a p below `alpha` up to it (a
// significant p shown as "0.01" next to a 0.01 level).
std::string FmtP(double p, double alpha) {
  if (p < 1e-300) return "<1e-300";  // (identical runs on each side: no spread at all)
  char buf[32];
  snprintf(buf, sizeof(buf), p < 1e-4 ? "%.1e" : "%.3g", p);
  if ((p < alpha) != (strtod(buf, nullptr) < alpha)) snprintf(buf, sizeof(buf), "%.6g", p);
  return buf;
}

std::string FmtPct(double pct) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%+.1f%%", pct);
  return buf;
}

// `pattern` with '*' matching any run of characters (every other character literal: metric
// names hold brackets, which a shell glob would read as character classes).
bool StarMatch(const std::string& pattern, const std::string& name) {
  size_t p = 0, n = 0, star = std::string::npos, mark = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
      ++p;
      ++n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

// An exact name first; else the most specific matching pattern (the most literal characters;
// the first given among equals).
double ThresholdFor(const std::string& name, const DiffOptions& o) {
  for (const auto& kv : o.metric_thresholds) {
    if (kv.first == name) return kv.second;
  }
  const std::pair<std::string, double>* best = nullptr;
  size_t best_literal = 0;
  for (const auto& kv : o.metric_thresholds) {
    if (!StarMatch(kv.first, name)) continue;
    const size_t literal =
        kv.first.size() - size_t(std::count(kv.first.begin(), kv.first.end(), '*'));
    if (best == nullptr || literal > best_literal) {
      best = &kv;
      best_literal = literal;
    }
  }
  return best != nullptr ? best->second : o.threshold_pct;
}

const char* VerdictText(Verdict v) {
  switch (v) {
    case Verdict::kInfo: return "info";
    case Verdict::kMissing: return "n/a";
    case Verdict::kWithin: return "ok";
    case Verdict::kBetter: return "better";
    case Verdict::kNoise: return "worse, not significant";
    case Verdict::kUntested: return "worse, untested";
    case Verdict::kRegression: return "REGRESSION";
  }
  return "?";
}

int VerdictOrder(Verdict v) {
  switch (v) {
    case Verdict::kRegression: return 0;
    case Verdict::kUntested: return 1;
    case Verdict::kNoise: return 2;
    case Verdict::kMissing:
      return 3;  // a metric one side lacks: worth a look before the rest
    case Verdict::kBetter:
      return 4;
    case Verdict::kWithin:
      return 5;
    case Verdict::kInfo: return 6;
  }
  return 7;
}

std::string ValueText(const std::optional<double>& v) { return v ? Fmt(*v) : "null"; }

// One printable line: newlines become spaces, control and non-ASCII bytes \xNN (a malformed
// file's bytes must not reach a CI log raw).
std::string OneLine(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c == '\n') {
      out += ' ';
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out;
}

}  // namespace

double ComputeStatistic(std::vector<double> v, Statistic s) { return StatisticInPlace(v, s); }

namespace {
std::pair<double, double> PercentileInterval(std::vector<double>& diffs, double alpha) {
  std::sort(diffs.begin(), diffs.end());
  const size_t n = diffs.size();
  size_t lo = static_cast<size_t>(std::floor(alpha / 2 * n));
  size_t hi = static_cast<size_t>(std::ceil((1 - alpha / 2) * n));
  hi = hi == 0 ? 0 : std::min(hi - 1, n - 1);
  lo = std::min(lo, n - 1);
  return {diffs[lo], diffs[hi]};
}
}  // namespace

std::pair<double, double> BootstrapDiffInterval(const std::vector<double>& a,
                                                const std::vector<double>& b, Statistic s,
                                                double alpha, int resamples, uint64_t seed,
                                                size_t block_a, size_t block_b) {
  if (a.empty() || b.empty() || resamples <= 0) return {0, 0};
  std::mt19937_64 rng(seed);  // fully specified engine: identical streams everywhere
  std::vector<double> ra(a.size()), rb(b.size()), diffs;
  std::vector<size_t> idx;
  diffs.reserve(resamples);
  for (int r = 0; r < resamples; ++r) {
    ResampleBlocks(a.size(), block_a, rng, &idx);
    for (size_t i = 0; i < idx.size(); ++i) ra[i] = a[idx[i]];
    ResampleBlocks(b.size(), block_b, rng, &idx);
    for (size_t i = 0; i < idx.size(); ++i) rb[i] = b[idx[i]];
    diffs.push_back(StatisticInPlace(rb, s) - StatisticInPlace(ra, s));
  }
  return PercentileInterval(diffs, alpha);
}

std::pair<double, double> BootstrapRatioDiffInterval(const std::vector<double>& time_a,
                                                     const std::vector<double>& tokens_a,
                                                     const std::vector<double>& time_b,
                                                     const std::vector<double>& tokens_b,
                                                     double alpha, int resamples, uint64_t seed,
                                                     size_t block_a, size_t block_b) {
  if (time_a.empty() || time_b.empty() || time_a.size() != tokens_a.size() ||
      time_b.size() != tokens_b.size() || resamples <= 0) {
    return {0, 0};
  }
  std::mt19937_64 rng(seed);
  std::vector<double> diffs;
  std::vector<size_t> idx;
  diffs.reserve(resamples);
  auto ratio = [&](const std::vector<double>& t, const std::vector<double>& k, size_t block) {
    ResampleBlocks(t.size(), block, rng, &idx);
    double st = 0, sk = 0;
    for (size_t i : idx) {
      st += t[i];
      sk += k[i];
    }
    return st > 0 ? sk / st * 1e3 : 0;  // tokens per ms -> per s
  };
  for (int r = 0; r < resamples; ++r) {
    const double ra = ratio(time_a, tokens_a, block_a);
    diffs.push_back(ratio(time_b, tokens_b, block_b) - ra);
  }
  return PercentileInterval(diffs, alpha);
}

double MannWhitneyP(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n1 = a.size(), n2 = b.size();
  if (n1 == 0 || n2 == 0) return 1;
  std::vector<std::pair<double, int>> all;
  all.reserve(n1 + n2);
  for (double x : a) all.push_back({x, 0});
  for (double x : b) all.push_back({x, 1});
  std::sort(all.begin(), all.end());
  const size_t n = all.size();
  double r1 = 0, tie_term = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && all[j].first == all[i].first) ++j;
    const double avg_rank = (i + 1 + j) / 2.0;  // ranks i+1 .. j
    const double t = static_cast<double>(j - i);
    tie_term += t * t * t - t;
    for (size_t k = i; k < j; ++k) {
      if (all[k].second == 0) r1 += avg_rank;
    }
    i = j;
  }
  const double u1 = r1 - n1 * (n1 + 1) / 2.0;
  const double mu = n1 * n2 / 2.0;
  const double var = n1 * n2 / 12.0 * ((n + 1) - tie_term / (static_cast<double>(n) * (n - 1)));
  if (var <= 0) return 1;
  const double z = std::max(0.0, std::fabs(u1 - mu) - 0.5) / std::sqrt(var);
  return std::erfc(z / std::sqrt(2.0));
}

double WelchP(double mean_a, double sd_a, double n_a, double mean_b, double sd_b, double n_b) {
  if (n_a < 2 || n_b < 2) return 1;
  const double va = sd_a * sd_a / n_a, vb = sd_b * sd_b / n_b;
  const double se2 = va + vb;
  if (se2 <= 0) return mean_a == mean_b ? 1 : 0;
  const double t = (mean_b - mean_a) / std::sqrt(se2);
  const double df = se2 * se2 / (va * va / (n_a - 1) + vb * vb / (n_b - 1));
  return RegularizedBeta(df / 2, 0.5, df / (df + t * t));
}

absl::StatusOr<std::pair<std::string, double>> ParseMetricThreshold(const std::string& s) {
  const size_t eq = s.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metric-threshold '", s, "': expected PATH=PERCENT"));
  }
  char* end = nullptr;
  const std::string num = s.substr(eq + 1);
  double v = strtod(num.c_str(), &end);
  if (end == num.c_str() || *end != '\0' || !(v >= 0) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metric-threshold '", s, "': '", num, "' is not a percentage"));
  }
  return std::make_pair(s.substr(0, eq), v);
}

// The sections a summary must have, and the types of those it may have (SUMMARY_FORMAT.md): a
// broken or truncated summary is bad input (exit 2), not "nothing to compare" (which would let a
// CI gate pass on a profile that lost its numbers).
// Whether `j` nests deeper than `limit` levels (counted without recursion: a crafted file must
// not overflow the stack of the recursive walks below).
bool NestedDeeper(const OJson& j, size_t limit) {
  std::vector<std::pair<const OJson*, size_t>> todo = {{&j, 0}};
  while (!todo.empty()) {
    const auto [x, depth] = todo.back();
    todo.pop_back();
    if (depth > limit) return true;
    if (x->is_structured()) {
      for (const OJson& child : *x) {
        if (child.is_structured()) todo.push_back({&child, depth + 1});
      }
    }
  }
  return false;
}

absl::Status CheckShape(const OJson& j) {
  // A summary nests about 6 levels deep (SUMMARY_FORMAT.md).
  constexpr size_t kMaxDepth = 32;
  if (NestedDeeper(j, kMaxDepth)) {
    return absl::InvalidArgumentError(absl::StrCat("nested deeper than ", kMaxDepth, " levels"));
  }
  auto stats = j.find("stats");
  if (stats == j.end() || !stats->is_object()) {
    return absl::InvalidArgumentError("no \"stats\" object");
  }
  auto steps = stats->find("steps");
  if (steps == stats->end() || !steps->is_number()) {
    return absl::InvalidArgumentError("\"stats.steps\" is not a number");
  }
  auto samples = stats->find("step_latency_ms_samples");
  if (samples != stats->end()) {
    if (!samples->is_array()) {
      return absl::InvalidArgumentError("\"stats.step_latency_ms_samples\" is not an array");
    }
    for (const OJson& x : *samples) {
      if (!x.is_number()) {
        return absl::InvalidArgumentError(
            "\"stats.step_latency_ms_samples\" holds something other than numbers");
      }
    }
  }
  // Per-step model bucket samples: an object of arrays of numbers, all of one length (the
  // steps, or the evenly spread 4096 of them).
  auto buckets = stats->find("step_buckets_model_ms_samples");
  if (buckets != stats->end()) {
    const char* what = "\"stats.step_buckets_model_ms_samples\"";
    if (!buckets->is_object())
      return absl::InvalidArgumentError(absl::StrCat(what, " is not an object"));
    size_t length = SIZE_MAX;
    for (auto it = buckets->begin(); it != buckets->end(); ++it) {
      if (!it->is_array()) {
        return absl::InvalidArgumentError(absl::StrCat(what, ".", it.key(), " is not an array"));
      }
      for (const OJson& x : *it) {
        if (!x.is_number()) {
          return absl::InvalidArgumentError(
              absl::StrCat(what, ".", it.key(), " holds something other than numbers"));
        }
      }
      if (length != SIZE_MAX && it->size() != length) {
        return absl::InvalidArgumentError(absl::StrCat(what, " has arrays of different lengths (",
                                                       length, " and ", it->size(), " at ",
                                                       it.key(), ")"));
      }
      length = it->size();
    }
    const size_t steps_n = samples != stats->end() ? samples->size() : 0;
    if (length != SIZE_MAX && samples != stats->end() && length > steps_n) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has ", length, " samples per bucket for ", steps_n, " steps"));
    }
  }
  static const std::pair<const char*, bool> kSections[] = {
      // name, is an array (else an object)
      {"meta", false},        {"runs", true},    {"runs_aggregate", false},
      {"buckets_model_avg_ms", false}, {"buckets_engine_avg_ms", false},
      {"decode_length_buckets", true}, {"kernels", true}, {"collectives", false},
      {"host", false},        {"memory", false},
  };
  for (const auto& [name, array] : kSections) {
    auto it = j.find(name);
    if (it == j.end()) continue;
    if (array ? !it->is_array() : !it->is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", name, "\" is not ", array ? "an array" : "an object"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<OJson> LoadSummary(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", strerror(errno)));
  }
  std::string file = path;
  if (S_ISDIR(st.st_mode)) {
    // The directory's summary.json when `report` wrote it after every rank file (it holds the
    // user's report options), else the rank files summarized with the default options.
    auto files = ListProfileFiles(path);
    file = path + "/summary.json";
    struct stat js;
    const bool have_json = stat(file.c_str(), &js) == 0 && S_ISREG(js.st_mode);
    if (files.ok()) {
      bool json_current = have_json;
      for (const std::string& f : *files) {
        struct stat fs;
        if (json_current && stat(f.c_str(), &fs) == 0 &&
            std::make_pair(fs.st_mtim.tv_sec, fs.st_mtim.tv_nsec) >
                std::make_pair(js.st_mtim.tv_sec, js.st_mtim.tv_nsec)) {
          json_current = false;
        }
      }
      if (!json_current) {
        auto summary = BuildSummary(*files, ReportOptions{}, "");
        if (!summary.ok()) return summary.status();
        return *summary;
      }
    }
    if (stat(file.c_str(), &st) != 0) {
      if (!files.ok()) return files.status();  // (e.g. rank files none of which is readable)
      return absl::NotFoundError(
          absl::StrCat(path, ": directory holds neither rank files (*.pb) nor summary.json"));
    }
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(file, ": cannot open: ", strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  OJson j;
  try {
    j = OJson::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": malformed JSON: ", OneLine(e.what())));
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": not a summary (not a JSON object)"));
  }
  // profagent.summary/1, or a compatible minor version /1.N.
  auto schema_ok = [](const std::string& v) {
    const std::string major = "profagent.summary/1";
    if (v == major) return true;
    if (v.size() < major.size() + 2 || v.compare(0, major.size() + 1, major + ".") != 0) {
      return false;
    }
    return std::all_of(v.begin() + long(major.size()) + 1, v.end(),
                       [](char c) { return c >= '0' && c <= '9'; });
  };
  auto schema = j.find("schema");
  if (schema == j.end() || !schema->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": not a profagent summary (schema must be profagent.summary/1)"));
  }
  if (!schema_ok(schema->get<std::string>())) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": schema ", OneLine(schema->get<std::string>().substr(0, 64)),
                     " is not one this profanalyze reads (profagent.summary/1 or /1.N)"));
  }
  if (absl::Status s = CheckShape(j); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", s.message()));
  }
  return j;
}

absl::Status CheckComparable(const OJson& base, const OJson& now, const std::string& base_label,
                             const std::string& now_label) {
  // A section (or the timing mode) one summary has and the other lost: a broken summary, which
  // must not pass a gate as "nothing to compare".
  static const char* kSections[] = {
      "meta",   "stats", "runs", "runs_aggregate", "buckets_model_avg_ms", "buckets_engine_avg_ms",
      "decode_length_buckets", "kernels", "collectives", "host", "memory"};
  for (const char* name : kSections) {
    const bool a = base.contains(name), b = now.contains(name);
    if (a != b) {
      return absl::InvalidArgumentError(absl::StrCat(a ? now_label : base_label, ": no \"", name,
                                                     "\" section (", a ? base_label : now_label,
                                                     " has one): cannot compare"));
    }
  }
  auto has_timing = [](const OJson& j) {
    auto m = j.find("meta");
    return m != j.end() && m->contains("gpu_timing") && (*m)["gpu_timing"].is_string();
  };
  if (has_timing(base) != has_timing(now)) {
    return absl::InvalidArgumentError(
        absl::StrCat(has_timing(base) ? now_label : base_label,
                     ": no meta.gpu_timing: its device times cannot be compared"));
  }
  // A metric that is a number on one side and text on the other (null, "none", goes with
  // either: a straggler GPU "R:D" on one side, none on the other).
  std::vector<std::pair<std::string, std::optional<double>>> va, vb;
  std::set<std::string> sa, sb;
  Flatten(base, "", &va, &sa);
  Flatten(now, "", &vb, &sb);
  for (const auto& [values, strings, label] :
       {std::make_tuple(&va, &sb, &now_label), std::make_tuple(&vb, &sa, &base_label)}) {
    for (const auto& kv : *values) {
      if (kv.second.has_value() && strings->count(kv.first) != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(*label, ": \"", kv.first, "\" is text, not a number"));
      }
    }
  }
  return absl::OkStatus();
}

constexpr double kUngatedPct = 1e6;

DiffResult DiffSummaries(const OJson& base, const OJson& now, const DiffOptions& options) {
  DiffResult r;
  std::vector<std::pair<std::string, std::optional<double>>> fb, fn;
  Flatten(base, "", &fb);
  Flatten(now, "", &fn);
  std::map<std::string, std::optional<double>> new_values(fn.begin(), fn.end());
  std::set<std::string> base_names;
  std::vector<std::string> names;
  for (const auto& kv : fb) {
    if (base_names.insert(kv.first).second) names.push_back(kv.first);
  }
  for (const auto& kv : fn) {
    if (base_names.count(kv.first) == 0) {
      base_names.insert(kv.first);
      names.push_back(kv.first);
    }
  }
  std::map<std::string, std::optional<double>> base_values(fb.begin(), fb.end());

  const std::vector<double> sa = Samples(base, "step_latency_ms_samples"),
                            sb = Samples(now, "step_latency_ms_samples");
  const std::vector<double> ka = Samples(base, "step_tokens_samples"),
                            kb = Samples(now, "step_tokens_samples");
  const bool have_samples = sa.size() >= 2 && sb.size() >= 2;
  const bool have_tokens = have_samples && ka.size() == sa.size() && kb.size() == sb.size();
  const std::vector<double> kva = KvSamples(base, sa.size()), kvb = KvSamples(now, sb.size());
  const size_t block_a = BlockLength(sa.size()), block_b = BlockLength(sb.size());
  double mwu_p = 1;
  if (have_samples) {
    mwu_p = MannWhitneyP(sa, sb);
  } else {
    r.notes.push_back(
        "no per-step samples (stats.step_latency_ms_samples) on one side or both: step metrics "
        "are untested");
  }
  // A new profile whose steps all vanished (its run broke, or the step ranges are gone) is a
  // regression, not "nothing to compare".
  auto steps_of = [](const OJson& j) {
    auto st = j.find("stats");
    if (st == j.end() || !st->is_object()) return -1.0;
    auto n = st->find("steps");
    return n != st->end() && n->is_number() ? n->get<double>() : -1.0;
  };
  // Device times measured differently (CUPTI, CUDA events, host only: e.g. an `auto` run that
  // fell back when CUPTI was unavailable) are not comparable: the gate fails and says why,
  // rather than report every device metric 98% better.
  auto timing_of = [](const OJson& j) -> std::string {
    auto m = j.find("meta");
    if (m == j.end() || !m->is_object()) return "";
    auto t = m->find("gpu_timing");
    return t != m->end() && t->is_string() ? t->get<std::string>() : "";
  };
  const std::string timing_a = timing_of(base), timing_b = timing_of(now);
  if (!timing_a.empty() && !timing_b.empty() && timing_a != timing_b) {
    ++r.regressions;
    r.failures.push_back(absl::StrCat("GPU timing differs (base ", timing_a, ", new ", timing_b,
                                      "): the profiles' device times are not comparable"));
  }
  // Summaries made differently: the report's options (patterns, warm-up runs, rules, KV
  // edges), the agent's step settings, the ranks. Compared all the same, with a note, as a
  // deliberate change of options is a user's right; and what the new profile lost.
  auto meta_of = [](const OJson& j, const char* key) -> const OJson* {
    auto m = j.find("meta");
    if (m == j.end() || !m->is_object()) return nullptr;
    auto it = m->find(key);
    return it != m->end() ? &*it : nullptr;
  };
  auto differing = [](const OJson* a, const OJson* b, const std::vector<std::string>& only) {
    std::vector<std::string> keys;
    if (a == nullptr || b == nullptr || !a->is_object() || !b->is_object()) return keys;
    std::set<std::string> all;
    for (auto it = a->begin(); it != a->end(); ++it) all.insert(it.key());
    for (auto it = b->begin(); it != b->end(); ++it) all.insert(it.key());
    for (const std::string& k : all) {
      if (!only.empty() && std::find(only.begin(), only.end(), k) == only.end()) continue;
      const bool ina = a->contains(k), inb = b->contains(k);
      if (ina != inb || (ina && (*a)[k] != (*b)[k])) keys.push_back(k);
    }
    return keys;
  };
  std::vector<std::string> changed =
      differing(meta_of(base, "options"), meta_of(now, "options"), {});
  for (const std::string& k :
       differing(meta_of(base, "config"), meta_of(now, "config"),
                 {"PROFAGENT_STEP_PATTERN", "PROFAGENT_RUN_PATTERN", "PROFAGENT_STEP_RULE",
                  "PROFAGENT_SCHEDULE", "PROFAGENT_KV_REDUCE", "PROFAGENT_RANKS"})) {
    changed.push_back(k);
  }
  if (!changed.empty()) {
    std::string list;
    for (const std::string& k : changed) list += (list.empty() ? "" : ", ") + k;
    r.notes.push_back(absl::StrCat("the summaries were made with different settings (", list,
                                   "): steps, runs or buckets may differ for that reason"));
  }
  const OJson* ranks_a = meta_of(base, "ranks");
  const OJson* ranks_b = meta_of(now, "ranks");
  if (ranks_a != nullptr && ranks_b != nullptr && *ranks_a != *ranks_b) {
    r.notes.push_back(absl::StrCat("the profiles hold different ranks (base ", ranks_a->dump(),
                                   ", new ", ranks_b->dump(), ")"));
  }
  const OJson* drops = meta_of(now, "drops");
  if (drops != nullptr && drops->is_number() && drops->get<double>() > 0) {
    r.notes.push_back(absl::StrCat("the new profile dropped ", drops->dump(),
                                   " records: its totals are lower bounds"));
  }
  const OJson* warnings = meta_of(now, "warnings");
  if (warnings != nullptr && warnings->is_array() && !warnings->empty()) {
    r.notes.push_back(absl::StrCat(
        "the new profile has ", warnings->size(), " warning(s) (meta.warnings), first: ",
        OneLine((*warnings)[0].is_string() ? (*warnings)[0].get<std::string>()
                                           : (*warnings)[0].dump())));
  }
  if (steps_of(base) > 0 && steps_of(now) == 0) {
    ++r.regressions;
    r.failures.push_back(absl::StrCat("the new profile has no steps (the base has ", steps_of(base),
                                      "): every step metric is missing"));
  }
  const auto* ra = base.contains("runs_aggregate") ? &base["runs_aggregate"] : nullptr;
  const auto* rb = now.contains("runs_aggregate") ? &now["runs_aggregate"] : nullptr;
  auto runs_of = [](const OJson* agg) -> double {
    if (agg == nullptr || !agg->is_object()) return 0;
    auto it = agg->find("runs");
    return it != agg->end() && it->is_number() ? it->get<double>() : 0;
  };
  const double runs_a = runs_of(ra), runs_b = runs_of(rb);

  auto base_step = base_values.find("stats.step_latency_ms.mean");
  const double base_step_ms =
      base_step != base_values.end() && base_step->second ? *base_step->second : 0;
  for (const std::string& name : names) {
    MetricDiff m;
    m.name = name;
    auto bi = base_values.find(name);
    auto ni = new_values.find(name);
    if (bi != base_values.end()) m.base = bi->second;
    if (ni != new_values.end()) m.now = ni->second;
    m.direction = DirectionOf(name);
    m.threshold_pct = ThresholdFor(name, options);
    if (!m.base && !m.now) continue;  // null on both sides (e.g. an empty bin): nothing to say
    // A bucket only one side lists took no time on the other (only buckets with time are
    // listed): a bucket new in NEW (a kernel added) went up from 0, one gone went down to 0.
    if ((!m.base || !m.now) && IsPerStepBucketMs(name) &&
        ((bi != base_values.end()) != (ni != new_values.end()))) {
      if (!m.base) m.base = 0.0;
      if (!m.now) m.now = 0.0;
    }
    if (!m.base || !m.now) {
      m.verdict = m.direction == Direction::kInfo ? Verdict::kInfo : Verdict::kMissing;
      r.metrics.push_back(m);
      continue;
    }
    if (*m.base != 0) m.change_pct = (*m.now - *m.base) / std::fabs(*m.base) * 100;
    if (m.direction == Direction::kInfo) {
      m.verdict = Verdict::kInfo;
      r.metrics.push_back(m);
      continue;
    }
    double worse_pct = m.direction == Direction::kLowerIsBetter ? m.change_pct : -m.change_pct;
    if (*m.base == 0) {
      // No relative change from zero: worse only if it moved the wrong way at all.
      const double d = *m.now - *m.base;
      const double w = m.direction == Direction::kLowerIsBetter ? d : -d;
      worse_pct = w > 0 ? INFINITY : w < 0 ? -INFINITY : 0;
      // A threshold of kUngatedPct or more turns the metric's gate off, from 0 too (no relative
      // change from 0 is within a finite threshold).
      if (m.threshold_pct >= kUngatedPct) worse_pct = 0;
    }
    // (A relative tolerance: +5.000000000000004 % is the +5.0 % the table shows, within 5 %.)
    if (std::fabs(worse_pct) <= m.threshold_pct * (1 + 1e-9) + 1e-12) {
      m.verdict = Verdict::kWithin;
    } else if (worse_pct > 0 && IsPerStepBucketMs(name) && base_step_ms > 0 &&
               std::fabs(*m.now - *m.base) < options.min_step_share_pct / 100 * base_step_ms) {
      m.verdict = Verdict::kWithin;
      m.test = absl::StrCat("below ", Fmt(options.min_step_share_pct),
                            "% of the base mean step (", Fmt(base_step_ms), " ms)");
    } else if (worse_pct < 0) {
      m.verdict = Verdict::kBetter;
    } else {
      // Worse beyond the threshold: is it real?
      const int level = static_cast<int>(std::lround((1 - options.alpha) * 100));
      if (auto stat = StepStatisticFor(name); stat && have_samples) {
        // The steps' bootstrap (in blocks of consecutive steps) and, when both profiles hold
        // two runs or more, the runs themselves: a statistic that moved in every run, not a
        // stretch of steps (or one run) slowed by something else on the machine.
        m.tested = true;
        std::string run_path;
        if (name == "stats.tokens_per_s") {
          run_path = "tokens_per_s";
          if (have_tokens) {
            auto ci = BootstrapRatioDiffInterval(sa, ka, sb, kb, options.alpha,
                                                 options.bootstrap_resamples, options.seed, block_a,
                                                 block_b);
            m.significant = ci.second < 0;  // fewer tokens per second
            m.test = absl::StrCat("tokens/s diff CI", level, " [", Fmt(ci.first), ", ",
                                  Fmt(ci.second), "]");
          } else {  // older summaries: through the mean step time
            auto ci =
                BootstrapDiffInterval(sa, sb, Statistic::kMean, options.alpha,
                                      options.bootstrap_resamples, options.seed, block_a, block_b);
            m.significant = ci.first > 0;
            m.test = absl::StrCat("step mean diff CI", level, " [", Fmt(ci.first), ", ",
                                  Fmt(ci.second), "] ms");
          }
        } else {
          run_path = "step_latency_ms." + LastSegment(name);
          auto ci = BootstrapDiffInterval(sa, sb, *stat, options.alpha, options.bootstrap_resamples,
                                          options.seed, block_a, block_b);
          m.significant = ci.first > 0;  // a larger step statistic is worse
          m.test = absl::StrCat("step ", LastSegment(name), " diff CI", level, " [", Fmt(ci.first),
                                ", ", Fmt(ci.second), "] ms; MWU p=", FmtP(mwu_p, options.alpha));
        }
        const std::vector<double> va = RunValues(base, run_path), vb = RunValues(now, run_path);
        if (va.size() >= 2 && vb.size() >= 2) {
          const double p = WelchSamplesP(va, vb);
          m.significant = m.significant && p < options.alpha;
          absl::StrAppend(&m.test, "; runs (", va.size(), " vs ", vb.size(),
                          ") Welch p=", FmtP(p, options.alpha));
        }
      } else if (auto bin = KvBinMetricFor(name); bin && !kva.empty() && !kvb.empty()) {
        // A KV bin's metric: the same tests over the steps the bin takes on each side.
        std::vector<double> ta, tb, toka, tokb;
        auto pick = [&](const std::vector<double>& kv, const std::vector<double>& t,
                        const std::vector<double>& tok, std::vector<double>* out_t,
                        std::vector<double>* out_tok) {
          for (size_t i = 0; i < kv.size(); ++i) {
            if (std::isnan(kv[i]) || kv[i] < bin->lo || kv[i] >= bin->hi) continue;
            out_t->push_back(t[i]);
            if (tok.size() == t.size()) out_tok->push_back(tok[i]);
          }
        };
        pick(kva, sa, ka, &ta, &toka);
        pick(kvb, sb, kb, &tb, &tokb);
        const auto stat = StepStatisticFor("stats.step_latency_ms." + bin->stat);
        const bool ratio = bin->stat == "tokens_per_s";
        if (ta.size() >= 2 && tb.size() >= 2 && (stat || ratio) &&
            (!ratio || (toka.size() == ta.size() && tokb.size() == tb.size()))) {
          m.tested = true;
          const std::string steps = absl::StrCat("bin steps ", ta.size(), " vs ", tb.size(), ": ");
          if (ratio) {
            auto ci = BootstrapRatioDiffInterval(ta, toka, tb, tokb, options.alpha,
                                                 options.bootstrap_resamples, options.seed,
                                                 BlockLength(ta.size()), BlockLength(tb.size()));
            m.significant = ci.second < 0;
            m.test = absl::StrCat(steps, "tokens/s diff CI", level, " [", Fmt(ci.first), ", ",
                                  Fmt(ci.second), "]");
          } else {
            auto ci =
                BootstrapDiffInterval(ta, tb, *stat, options.alpha, options.bootstrap_resamples,
                                      options.seed, BlockLength(ta.size()), BlockLength(tb.size()));
            m.significant = ci.first > 0;
            m.test = absl::StrCat(steps, "step ", bin->stat, " diff CI", level, " [", Fmt(ci.first),
                                  ", ", Fmt(ci.second),
                                  "] ms; MWU p=", FmtP(MannWhitneyP(ta, tb), options.alpha));
          }
          // And over runs, as the whole-profile statistics: the bin moved in every run.
          const std::vector<double> va = RunBinValues(base, *bin), vb = RunBinValues(now, *bin);
          if (va.size() >= 2 && vb.size() >= 2) {
            const double p = WelchSamplesP(va, vb);
            m.significant = m.significant && p < options.alpha;
            absl::StrAppend(&m.test, "; runs (", va.size(), " vs ", vb.size(),
                            ") Welch p=", FmtP(p, options.alpha));
          }
        }
      } else if (const BucketPair bp = ModelBucketSamples(name, base, now); bp.testable()) {
        // A model bucket's average per step: the same block bootstrap over each step's device
        // time in the bucket (a profile of one run has no run aggregates to test).
        const std::vector<double>& ba = bp.base;
        const std::vector<double>& bb = bp.now;
        auto ci = BootstrapDiffInterval(ba, bb, Statistic::kMean, options.alpha,
                                        options.bootstrap_resamples, options.seed,
                                        BlockLength(ba.size()), BlockLength(bb.size()));
        m.tested = true;
        m.significant = ci.first > 0;
        m.test = absl::StrCat("per-step ms (", ba.size(), " vs ", bb.size(), " steps) diff CI",
                              level, " [", Fmt(ci.first), ", ", Fmt(ci.second),
                              "] ms; MWU p=", FmtP(MannWhitneyP(ba, bb), options.alpha));
      } else if (name.rfind("runs_aggregate.", 0) == 0 && EndsWith(name, ".mean") && runs_a >= 2 &&
                 runs_b >= 2) {
        const std::string base_key = name.substr(0, name.size() - 5);  // drop ".mean"
        auto sd = [&](const std::map<std::string, std::optional<double>>& vals) {
          auto it = vals.find(base_key + ".std");
          return it != vals.end() && it->second ? *it->second : 0.0;
        };
        const double p = WelchP(*m.base, sd(base_values), runs_a, *m.now, sd(new_values), runs_b);
        m.tested = true;
        m.significant = p < options.alpha;
        m.test = absl::StrCat("Welch t over runs p=", FmtP(p, options.alpha));
      }
      if (m.tested) {
        m.verdict = m.significant ? Verdict::kRegression : Verdict::kNoise;
      } else if (options.fail_untested && !HostSymptomOrSpread(name)) {
        m.verdict = Verdict::kRegression;
        m.test = "untested (--fail-untested)";
        ++r.untested_failed;
      } else {
        m.verdict = Verdict::kUntested;
        m.test = "no samples";
      }
    }
    if (m.verdict == Verdict::kRegression) ++r.regressions;
    if (m.verdict == Verdict::kUntested) ++r.untested_worse;
    r.metrics.push_back(m);
  }
  for (const auto& kv : options.metric_thresholds) {
    bool used = false;
    for (const std::string& name : names) {
      if (name == kv.first || StarMatch(kv.first, name)) {
        used = true;
        break;
      }
    }
    if (!used) {
      r.notes.push_back(absl::StrCat("--metric-threshold ", kv.first,
                                     " matches no metric (names as in the table, e.g. "
                                     "stats.step_latency_ms.p90)"));
    }
  }
  return r;
}

namespace {

std::vector<const MetricDiff*> Ordered(const DiffResult& r) {
  std::vector<const MetricDiff*> v;
  for (const MetricDiff& m : r.metrics) v.push_back(&m);
  std::stable_sort(v.begin(), v.end(), [](const MetricDiff* a, const MetricDiff* b) {
    return VerdictOrder(a->verdict) < VerdictOrder(b->verdict);
  });
  return v;
}

std::string ChangeText(const MetricDiff& m) {
  if (!m.base || !m.now) return "";
  if (m.name == "collectives.stragglers.straggler") return "";  // a rank number: no change %
  if (*m.base == 0) return *m.now == 0 ? "+0.0%" : "new";
  return FmtPct(m.change_pct);
}

std::string Headline(const DiffResult& r) {
  if (r.regressions == 0) {
    // Worse beyond the threshold with nothing to test it against is not "nothing moved".
    if (r.untested_worse == 0) return "no regression";
    return absl::StrCat("no regression (", r.untested_worse, " metric",
                        r.untested_worse == 1 ? "" : "s",
                        " worse beyond the threshold but untested: no samples; "
                        "--fail-untested fails on them)");
  }
  const int metrics = r.regressions - int(r.failures.size()) - r.untested_failed;
  std::string text = absl::StrJoin(r.failures, "; ");
  if (metrics > 0) {
    absl::StrAppend(&text, text.empty() ? "" : "; ", metrics, " metric", metrics == 1 ? "" : "s",
                    " significantly worse");
  }
  if (r.untested_failed > 0) {
    absl::StrAppend(&text, text.empty() ? "" : "; ", r.untested_failed, " metric",
                    r.untested_failed == 1 ? "" : "s",
                    " worse beyond the threshold, untested (--fail-untested)");
  }
  return "REGRESSION: " + text;
}

}  // namespace

std::string RenderDiffText(const DiffResult& r, const DiffOptions& options) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"metric", "base", "new", "change", "thr", "verdict", "significance"});
  for (const MetricDiff* m : Ordered(r)) {
    rows.push_back({m->name, ValueText(m->base), ValueText(m->now), ChangeText(*m),
                    m->direction == Direction::kInfo ? "" : Fmt(m->threshold_pct) + "%",
                    VerdictText(m->verdict), m->test});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  // A metric named after a templated kernel (hundreds of characters) overflows its column
  // rather than pad every row to its length.
  constexpr size_t kMaxNameWidth = 80;
  width[0] = std::min(width[0], kMaxNameWidth);
  std::string out = absl::StrCat("profagent diff: ", Headline(r), "\n  base: ", r.base_label,
                                 "\n  new:  ", r.new_label, "\n");
  for (const std::string& n : r.notes) out += "  note: " + n + "\n";
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      std::string cell = row[c];
      const bool right = c >= 1 && c <= 4;
      if (c + 1 < row.size()) {
        const std::string pad(cell.size() < width[c] ? width[c] - cell.size() : 0, ' ');
        cell = right ? pad + cell : cell + pad;
        cell += "  ";
      }
      line += cell;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  (void)options;
  return out;
}

namespace {
// A metric name as a Markdown table cell in code style: a pipe would end the cell (GFM wants
// it escaped, also inside code), a backtick the code span (a double-backtick span holds one).
std::string CodeCell(const std::string& name) {
  std::string n = absl::StrReplaceAll(name, {{"|", "\\|"}, {"\n", " "}, {"\r", " "}});
  if (n.find('`') == std::string::npos) return absl::StrCat("`", n, "`");
  return absl::StrCat("`` ", n, " ``");
}
}  // namespace

// Free text (notes, warnings quoted from a summary) as literal Markdown: no emphasis, links,
// HTML or table breaks from a kernel name or a path.
std::string MdText(const std::string& text) {
  std::string out;
  for (char c : OneLine(text)) {
    if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else if (c == '&') {
      out += "&amp;";
    } else {
      if (std::strchr("\\`*_[]|#~", c) != nullptr) out += '\\';
      out += c;
    }
  }
  return out;
}

std::string RenderDiffMarkdown(const DiffResult& r, const DiffOptions& options) {
  std::string out = absl::StrCat("### profagent diff: ", MdText(Headline(r)), "\n\n");
  out +=
      absl::StrCat("Base `", r.base_label, "`, new `", r.new_label, "`. A regression is a change ",
                   "in the worse direction beyond the threshold (default ",
                   Fmt(options.threshold_pct), "%) that is also significant (bootstrap ",
                   static_cast<int>(std::lround((1 - options.alpha) * 100)),
                   "% interval of the per-step difference, steps resampled in blocks, and "
                   "Welch's t-test over the runs when both profiles have two or more; run "
                   "aggregates: Welch's t-test over runs; at p < ",
                   Fmt(options.alpha), ").\n");
  for (const std::string& n : r.notes) out += "\n> note: " + MdText(n) + "\n";
  auto header = [](std::string* o) {
    *o += "\n| metric | base | new | change | threshold | verdict | significance |\n";
    *o += "|---|---:|---:|---:|---:|---|---|\n";
  };
  auto row = [](std::string* o, const MetricDiff& m) {
    const bool bold = m.verdict == Verdict::kRegression;
    const std::string v = VerdictText(m.verdict);
    *o += absl::StrCat("| ", CodeCell(m.name), " | ", ValueText(m.base), " | ", ValueText(m.now),
                       " | ", ChangeText(m), " | ",
                       m.direction == Direction::kInfo ? "" : Fmt(m.threshold_pct) + "%", " | ",
                       bold ? "**" + v + "**" : v, " | ", m.test, " |\n");
  };
  std::vector<const MetricDiff*> ordered = Ordered(r);
  std::vector<const MetricDiff*> top, rest;
  for (const MetricDiff* m : ordered) {
    (VerdictOrder(m->verdict) <= VerdictOrder(Verdict::kBetter) ? top : rest).push_back(m);
  }
  if (!top.empty()) {
    header(&out);
    for (const MetricDiff* m : top) row(&out, *m);
  } else {
    out += "\nNo metric moved beyond its threshold.\n";
  }
  if (!rest.empty()) {
    out += absl::StrCat("\n<details><summary>", rest.size(),
                        " unchanged or informational metrics</summary>\n");
    header(&out);
    for (const MetricDiff* m : rest) row(&out, *m);
    out += "\n</details>\n";
  }
  return out;
}

int RunDiffCommand(const std::string& base, const std::string& now, const DiffOptions& options,
                   bool markdown, std::ostream& out, std::ostream& err) {
  auto b = LoadSummary(base);
  if (!b.ok()) {
    err << "profanalyze diff: " << OneLine(std::string(b.status().message())) << "\n";
    return 2;
  }
  auto n = LoadSummary(now);
  if (!n.ok()) {
    err << "profanalyze diff: " << OneLine(std::string(n.status().message())) << "\n";
    return 2;
  }
  if (absl::Status s = CheckComparable(*b, *n, base, now); !s.ok()) {
    err << "profanalyze diff: " << OneLine(std::string(s.message())) << "\n";
    return 2;
  }
  DiffResult r = DiffSummaries(*b, *n, options);
  r.base_label = base;
  r.new_label = now;
  out << (markdown ? RenderDiffMarkdown(r, options) : RenderDiffText(r, options));
  out.flush();
  if (!out) {  // (a CI step writing the comment to a full disk must not pass with none)
    err << "profanalyze diff: cannot write the comparison: "
        << (errno != 0 ? strerror(errno) : "output error") << "\n";
    return 2;
  }
  return r.regressions > 0 ? 1 : 0;
}

void AddDiffCommand(CLI::App& app, int* exit_code) {
  struct Opts {
    std::string base, now;
    bool markdown = false;
    double threshold = 5.0;
    std::vector<std::string> metric_thresholds;
    bool fail_untested = false;
    double min_step_share = 0.5;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "diff", "Compare two summary.json (or profile directories); exit 1 on a real regression");
  sub->add_option("base", o->base, "baseline summary.json or profile directory")->required();
  sub->add_option("new", o->now, "new summary.json or profile directory")->required();
  sub->add_flag("--markdown", o->markdown, "print a Markdown table (for a CI comment)");
  // A finite percentage >= 0 (NaN would make nothing a regression), one short error line.
  const CLI::Validator percent(
      [](std::string& v) -> std::string {
        char* end = nullptr;
        const double d = std::strtod(v.c_str(), &end);
        if (end == v.c_str() || *end != '\0' || !std::isfinite(d) || d < 0) {
          return "'" + v + "' is not a percentage (a number >= 0)";
        }
        return std::string();
      },
      "PCT");
  sub->add_option("--threshold", o->threshold, "default regression threshold, percent (5)")
      ->check(percent);
  sub->add_option("--metric-threshold", o->metric_thresholds,
                  "per-metric threshold PATH=PCT (PATH may use * wildcards); repeatable");
  sub->add_flag("--fail-untested", o->fail_untested,
                "also fail on metrics worse beyond the threshold that have no samples to test");
  sub->add_option("--min-step-share", o->min_step_share,
                  "bucket time changes smaller than this percent of the base mean step are "
                  "never regressions (0.5)")
      ->check(percent);
  sub->callback([o, exit_code]() {
    DiffOptions options;
    options.threshold_pct = o->threshold;
    options.fail_untested = o->fail_untested;
    options.min_step_share_pct = o->min_step_share;
    for (const std::string& s : o->metric_thresholds) {
      auto kv = ParseMetricThreshold(s);
      if (!kv.ok()) {
        std::cerr << "profanalyze diff: " << kv.status().message() << "\n";
        *exit_code = 2;
        return;
      }
      options.metric_thresholds.push_back(*kv);
    }
    *exit_code = RunDiffCommand(o->base, o->now, options, o->markdown, std::cout, std::cerr);
  });
}

}  // namespace analyzer
}  // namespace profagent
