#include "analyzer/report/distribution.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace profagent {
namespace analyzer {
namespace {

// Bin 0 holds values below 1; above, a value's bin is its IEEE-754 exponent and top 7 mantissa
// bits, so a bin spans at most 1/128 of its lower bound (no log() on the hot path).
constexpr int kMantBits = 7;
constexpr uint64_t kOneBits = 0x3ff0000000000000ull;  // bits of 1.0
constexpr size_t kBins = (42u << kMantBits) + 1;       // up to 2^42 ns (~73 minutes)

size_t BinOf(double v) {
  if (!(v >= 1.0)) return 0;
  uint64_t bits;
  memcpy(&bits, &v, sizeof(bits));
  size_t i = size_t((bits - kOneBits) >> (52 - kMantBits)) + 1;
  return std::min(i, kBins - 1);
}

double BinLow(size_t i) {
  uint64_t bits = kOneBits + (uint64_t(i - 1) << (52 - kMantBits));
  double v;
  memcpy(&v, &bits, sizeof(v));
  return v;
}

double BinValue(size_t i) {
  if (i == 0) return 0.5;
  return (BinLow(i) + BinLow(i + 1)) / 2;  // middle of the bin: within 0.4% of any member
}

}  // namespace

void Distribution::Add(double v) {
  if (count_ == 0) {
    min_ = max_ = v;
  } else {
    min_ = std::min(min_, v);
    max_ = std::max(max_, v);
  }
  ++count_;
  sum_ += v;
  sumsq_ += v * v;
  if (hist_.empty()) {
    samples_.push_back(v);
    sorted_ = false;
    if (samples_.size() > kExactCap) ToHistogram();
  } else {
    AddToHistogram(v, 1);
  }
}

void Distribution::ToHistogram() {
  hist_.assign(kBins, 0);
  for (double s : samples_) AddToHistogram(s, 1);
  std::vector<double>().swap(samples_);
}

void Distribution::AddToHistogram(double v, uint64_t n) { hist_[BinOf(v)] += n; }

void Distribution::Merge(const Distribution& o) {
  if (o.count_ == 0) return;
  if (count_ == 0) {
    min_ = o.min_;
    max_ = o.max_;
  } else {
    min_ = std::min(min_, o.min_);
    max_ = std::max(max_, o.max_);
  }
  count_ += o.count_;
  sum_ += o.sum_;
  sumsq_ += o.sumsq_;
  if (hist_.empty() && o.hist_.empty() && samples_.size() + o.samples_.size() <= kExactCap) {
    samples_.insert(samples_.end(), o.samples_.begin(), o.samples_.end());
    sorted_ = false;
    return;
  }
  if (hist_.empty()) ToHistogram();
  if (o.hist_.empty()) {
    for (double s : o.samples_) AddToHistogram(s, 1);
  } else {
    for (size_t i = 0; i < kBins; ++i) hist_[i] += o.hist_[i];
  }
}

double Distribution::Mean() const { return count_ == 0 ? 0 : sum_ / double(count_); }

double Distribution::Std() const {
  if (count_ == 0) return 0;
  double m = Mean();
  double var = sumsq_ / double(count_) - m * m;
  return var > 0 ? std::sqrt(var) : 0;
}

double Distribution::Percentile(double p) const {
  if (count_ == 0) return 0;
  uint64_t rank = uint64_t(std::ceil(p * double(count_) / 100.0 - 1e-9));
  if (rank < 1) rank = 1;
  if (rank > count_) rank = count_;
  if (hist_.empty()) {
    if (!sorted_) {
      std::sort(samples_.begin(), samples_.end());
      sorted_ = true;
    }
    return samples_[rank - 1];
  }
  uint64_t seen = 0;
  for (size_t i = 0; i < kBins; ++i) {
    seen += hist_[i];
    if (seen >= rank) return std::min(max_, std::max(min_, BinValue(i)));
  }
  return max_;
}

}  // namespace analyzer
}  // namespace profagent
