// Distribution: a bounded-memory accumulator of non-negative samples (latencies, durations)
// that answers count/mean/std/min/max exactly and percentiles exactly up to kExactCap samples,
// then from a log-linear histogram (bins at most 1/128 wide, so a reported percentile is within
// 0.4% of the true sample value). Memory: at most kExactCap doubles (512 KB), or a fixed ~43 KB
// histogram after that.
//
// Percentiles use the nearest-rank definition: the value at rank ceil(p * n / 100) of the
// sorted samples (rank 1 for p = 0).
//
// Thread compatibility: not thread-safe; each analysis thread owns its own, merged afterwards.
#ifndef PROFAGENT_ANALYZER_REPORT_DISTRIBUTION_H_
#define PROFAGENT_ANALYZER_REPORT_DISTRIBUTION_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace profagent {
namespace analyzer {

class Distribution {
 public:
  static constexpr size_t kExactCap = 65536;

  void Add(double v);
  void Merge(const Distribution& other);

  uint64_t count() const { return count_; }
  double sum() const { return sum_; }
  double min() const { return min_; }
  double max() const { return max_; }
  double Mean() const;
  // Population standard deviation.
  double Std() const;
  // Nearest-rank percentile, p in [0, 100]. 0 when empty.
  double Percentile(double p) const;
  bool exact() const { return hist_.empty(); }

 private:
  void ToHistogram();
  void AddToHistogram(double v, uint64_t n);

  uint64_t count_ = 0;
  double sum_ = 0, sumsq_ = 0, min_ = 0, max_ = 0;
  mutable std::vector<double> samples_;  // exact mode
  mutable bool sorted_ = true;
  std::vector<uint64_t> hist_;           // histogram mode when non-empty
};

}  // namespace analyzer
}  // namespace profagent

#endif  // PROFAGENT_ANALYZER_REPORT_DISTRIBUTION_H_
