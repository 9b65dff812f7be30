// Distribution: exact statistics below the cap, bounded error and memory above it.
#include "analyzer/report/distribution.h"

#include <cmath>

#include <catch2/catch.hpp>

namespace profagent {
namespace analyzer {
namespace {

TEST_CASE("exact percentiles (nearest rank) and moments below the cap") {
  Distribution d;
  for (double v : {10.0, 40.0, 20.0, 30.0}) d.Add(v);
  CHECK(d.exact());
  CHECK(d.count() == 4);
  CHECK(d.Mean() == 25.0);
  CHECK(d.Std() == Approx(std::sqrt(125.0)));  // population: (225+25+25+225)/4
  CHECK(d.Percentile(50) == 20.0);             // rank ceil(2) = 2
  CHECK(d.Percentile(51) == 30.0);             // rank ceil(2.04) = 3
  CHECK(d.Percentile(99) == 40.0);
  CHECK(d.Percentile(0) == 10.0);
  Distribution e;
  e.Add(5.0);
  d.Merge(e);
  CHECK(d.count() == 5);
  CHECK(d.min() == 5.0);
  CHECK(d.Percentile(20) == 5.0);
}

TEST_CASE("above the cap: histogram percentiles within 0.4%, exact count/mean/min/max") {
  Distribution d;
  const size_t n = Distribution::kExactCap * 3;
  // Values 1000 .. 1000 + n - 1 (ns-like), in a scrambled order.
  for (size_t i = 0; i < n; ++i) d.Add(1000.0 + double((i * 7919) % n));
  CHECK_FALSE(d.exact());
  CHECK(d.count() == n);
  CHECK(d.min() == 1000.0);
  CHECK(d.max() == 1000.0 + double(n - 1));
  CHECK(d.Mean() == Approx(1000.0 + double(n - 1) / 2));
  for (double p : {50.0, 90.0, 99.0}) {
    const double truth = 1000.0 + std::ceil(p * double(n) / 100.0) - 1;
    CHECK(std::fabs(d.Percentile(p) - truth) / truth < 0.004);
  }
  // Merging an exact distribution into a histogram one keeps the answers consistent.
  Distribution small;
  small.Add(1e9);
  d.Merge(small);
  CHECK(d.max() == 1e9);
  CHECK(d.Percentile(100) == 1e9);
}

}  // namespace
}  // namespace analyzer
}  // namespace profagent
