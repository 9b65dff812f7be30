// RangeStore: ranges added in post-order (as the agent writes push/pop ranges) come back per
// thread in start order, whether they stayed in memory or went through the temporary file.
#include "analyzer/report/range_store.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>
#include <vector>

namespace profagent {
namespace analyzer {
namespace {

// Appends a random tree of ranges inside [start, end) in post-order (children, then the node).
void Tree(std::mt19937_64& rng, uint32_t thread, uint64_t start, uint64_t end, int depth,
          uint32_t* next_name, std::vector<StoredRange>* out) {
  if (depth < 6 && end - start > 8) {
    uint64_t t = start;
    const int children = int(rng() % 4);
    for (int i = 0; i < children && t < end; ++i) {
      uint64_t len = 1 + rng() % ((end - t) / 2 + 1);
      uint64_t s = t + rng() % 3;  // sometimes a child starts with its parent
      if (s >= end) break;
      uint64_t e = std::min(end, s + len);
      Tree(rng, thread, s, e, depth + 1, next_name, out);
      t = e;
    }
  }
  StoredRange r{};
  r.start = start;
  r.end = end;
  r.thread = thread;
  r.name = (*next_name)++;
  out->push_back(r);
}

std::vector<StoredRange> ReadAll(const RangeStore& store, uint32_t thread) {
  std::vector<StoredRange> v;
  auto c = store.Open(thread);
  while (const StoredRange* r = c->Peek()) {
    v.push_back(*r);
    c->Advance();
  }
  return v;
}

void CheckSame(std::vector<StoredRange> want, const std::vector<StoredRange>& got) {
  std::stable_sort(want.begin(), want.end(), RangeBefore);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("position " << i);
    CHECK(got[i].start == want[i].start);
    CHECK(got[i].end == want[i].end);
  }
  // The same ranges (ties may come in another order).
  auto key = [](const StoredRange& r) { return std::make_tuple(r.start, r.end, uint32_t(r.name)); };
  std::vector<std::tuple<uint64_t, uint64_t, uint32_t>> a, b;
  for (auto& r : want) a.push_back(key(r));
  for (auto& r : got) b.push_back(key(r));
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  CHECK(a == b);
}

TEST_CASE("ranges come back per thread in start order, with and without spilling") {
  for (size_t budget : {size_t(1) << 30, size_t(7), size_t(100), size_t(1000)}) {
    INFO("budget " << budget);
    std::mt19937_64 rng(budget);
    std::map<uint32_t, std::vector<StoredRange>> per_thread;
    std::vector<StoredRange> file;  // the file's order: threads interleaved by batch
    uint32_t name = 1;
    for (int top = 0; top < 40; ++top) {
      for (uint32_t thread : {3u, 1u, 7u}) {
        std::vector<StoredRange> batch;
        uint64_t base = uint64_t(top) * 1000000;
        Tree(rng, thread, base, base + 900000, 0, &name, &batch);
        for (auto& r : batch) per_thread[thread].push_back(r);
        file.insert(file.end(), batch.begin(), batch.end());
      }
    }
    // One range enclosing everything of thread 1, written last (a "run" range), and a few out
    // of order (start/end ranges of another thread's timeline).
    StoredRange run{0, 50000000, 1, 0, 1, 0};
    run.name = name++;
    file.push_back(run);
    per_thread[1].push_back(run);
    for (int i = 0; i < 20; ++i) {
      StoredRange r{};
      r.start = rng() % 40000000;
      r.end = r.start + rng() % 5000;
      r.thread = 7;
      r.name = name++;
      file.push_back(r);
      per_thread[7].push_back(r);
    }

    RangeStore store(budget);
    for (const StoredRange& r : file) store.Add(r);
    store.Finish();
    CHECK(store.size() == file.size());
    if (budget < file.size()) {
      CHECK(store.spilled() > 0);
    } else {
      CHECK(store.spilled() == 0);
    }
    CHECK(store.Threads() == std::vector<uint32_t>{1, 3, 7});
    for (auto& kv : per_thread) {
      INFO("thread " << kv.first);
      CheckSame(kv.second, ReadAll(store, kv.first));
    }
    // Two cursors on one thread, one rewound halfway.
    auto c1 = store.Open(3), c2 = store.Open(3);
    for (int i = 0; i < 50 && c1->Peek(); ++i) c1->Advance();
    c1->Rewind();
    std::vector<StoredRange> again;
    while (const StoredRange* r = c1->Peek()) {
      again.push_back(*r);
      c1->Advance();
      if (c2->Peek()) c2->Advance();
    }
    CheckSame(per_thread[3], again);
    CHECK(store.Open(99)->Peek() == nullptr);
  }
}

TEST_CASE("late ranges stay few: the ancestors open at each spill") {
  std::mt19937_64 rng(5);
  std::vector<StoredRange> file;
  uint32_t name = 1;
  for (int top = 0; top < 200; ++top) {
    uint64_t base = uint64_t(top) * 1000000;
    Tree(rng, 0, base, base + 900000, 0, &name, &file);
  }
  RangeStore store(64);
  for (const StoredRange& r : file) store.Add(r);
  store.Finish();
  INFO(file.size() << " ranges, " << store.spilled() << " spilled, " << store.late() << " late");
  CHECK(store.spilled() > file.size() / 2);
  // Each spill leaves at most the nesting depth (7 here) of open ancestors behind.
  CHECK(store.late() <= (file.size() / 64 + 1) * 7);
  CheckSame(file, ReadAll(store, 0));
}

}  // namespace
}  // namespace analyzer
}  // namespace profagent
