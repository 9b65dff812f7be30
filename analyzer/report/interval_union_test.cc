#include "analyzer/report/interval_union.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <tuple>
#include <vector>

namespace profagent {
namespace analyzer {
namespace {

using Final = std::tuple<uint64_t, uint64_t, int>;

TEST_CASE("IntervalUnion merges out-of-order intervals; final ones come in start order") {
  IntervalUnion<int> u(100);
  std::vector<Final> out;
  auto done = [&](uint64_t s, uint64_t e, int tag) { out.emplace_back(s, e, tag); };
  // Two streams: B's op (tag 2) arrives after A's later ones.
  u.Add(10, 20, 1, done);
  u.Add(30, 40, 3, done);
  u.Add(15, 35, 2, done);  // bridges [10,20) and [30,40)
  u.Add(50, 60, 4, done);
  u.Add(60, 70, 5, done);  // touches [50,60): merged, no gap
  CHECK(out.empty());      // all within the horizon of the latest start
  u.Flush(done);
  CHECK(out == std::vector<Final>{{10, 40, 1}, {50, 70, 4}});
}

TEST_CASE("IntervalUnion finalizes what ends beyond the horizon; late ops add only new time") {
  IntervalUnion<int> u(100);
  std::vector<Final> out;
  auto done = [&](uint64_t s, uint64_t e, int tag) { out.emplace_back(s, e, tag); };
  u.Add(0, 10, 1, done);
  u.Add(200, 210, 2, done);  // [0,10) ends more than 100 before 200: final
  REQUIRE(out == std::vector<Final>{{0, 10, 1}});
  u.Add(5, 30, 3, done);  // too late for [0,10): only [10,30) is new
  u.Flush(done);
  CHECK(out == std::vector<Final>{{0, 10, 1}, {10, 30, 3}, {200, 210, 2}});
}

TEST_CASE("IntervalUnion: a long op reported after the short ones beside it still merges") {
  IntervalUnion<int> u(10);
  std::vector<Final> out;
  auto done = [&](uint64_t s, uint64_t e, int tag) { out.emplace_back(s, e, tag); };
  u.Add(0, 1000, 1, done);     // a long kernel: the horizon becomes 2000
  for (uint64_t t = 1100; t < 1500; t += 100) u.Add(t, t + 10, 2, done);
  u.Add(1050, 1500, 3, done);  // a second long one, reported last
  u.Flush(done);
  CHECK(out == std::vector<Final>{{0, 1000, 1}, {1050, 1500, 3}});
}

TEST_CASE("IntervalUnion: total of shuffled intervals equals the sorted sweep") {
  std::mt19937_64 rng(7);
  std::vector<std::pair<uint64_t, uint64_t>> iv;
  uint64_t t = 0;
  for (int i = 0; i < 5000; ++i) {
    t += rng() % 50;
    iv.push_back({t, t + 1 + rng() % 80});
  }
  // Arrival order: sorted by start, then locally shuffled in windows of 16 (several streams).
  auto arrived = iv;
  for (size_t i = 0; i + 16 <= arrived.size(); i += 16) {
    std::shuffle(arrived.begin() + i, arrived.begin() + i + 16, rng);
  }
  IntervalUnion<int> u(1000);
  uint64_t total = 0, last_end = 0;
  bool ordered = true;
  auto done = [&](uint64_t s, uint64_t e, int) {
    total += e - s;
    ordered = ordered && s > last_end;  // disjoint, not touching, in order
    last_end = e;
  };
  for (auto& p : arrived) u.Add(p.first, p.second, 0, done);
  u.Flush(done);
  uint64_t want = 0, end = 0;
  for (auto& p : iv) {  // sorted by start
    uint64_t from = std::max(p.first, end);
    if (p.second > from) want += p.second - from;
    end = std::max(end, p.second);
  }
  CHECK(ordered);
  CHECK(total == want);
}

}  // namespace
}  // namespace analyzer
}  // namespace profagent
