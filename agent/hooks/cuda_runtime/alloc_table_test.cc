#include "agent/hooks/cuda_runtime/alloc_table.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

namespace profagent {
namespace rt {
namespace {

TEST_CASE("AllocTable remembers size and kind until taken") {
  auto t = std::make_unique<AllocTable>();
  REQUIRE(t->Insert(0x7f0000001000, 4096, 0));
  REQUIRE(t->Insert(0x7f0000002000, 123, 2));
  uint64_t size = 0;
  uint32_t kind = 9;
  REQUIRE(t->Take(0x7f0000002000, &size, &kind));
  CHECK(size == 123);
  CHECK(kind == 2);
  // Taken once only.
  CHECK_FALSE(t->Take(0x7f0000002000, &size, &kind));
  REQUIRE(t->Take(0x7f0000001000, &size, &kind));
  CHECK(size == 4096);
  CHECK(kind == 0);
  CHECK(t->Live() == 0);
  // Unknown pointers and the reserved values 0/1 are rejected.
  CHECK_FALSE(t->Take(0xdead000, &size, &kind));
  CHECK_FALSE(t->Insert(0, 1, 0));
  CHECK_FALSE(t->Insert(1, 1, 0));
}

TEST_CASE("AllocTable keeps each allocation's device; TakeEach removes a device's (a reset)") {
  auto t = std::make_unique<AllocTable>();
  REQUIRE(t->Insert(0x7f0000001000, 1ull << 40, 0, 1));  // 1 TiB on device 1
  REQUIRE(t->Insert(0x7f0000002000, 200, 3, 1));
  REQUIRE(t->Insert(0x7f0000003000, 300, 1, 1));  // pinned host memory
  REQUIRE(t->Insert(0x7f0000004000, 400, 0, 0));
  REQUIRE(t->Insert(0x7f0000005000, 500, 0, 255));
  std::vector<std::pair<uint64_t, uint64_t>> taken;  // ptr, size
  size_t n = t->TakeEach(
      [](const AllocTable::Entry& e) { return e.device == 1 && e.kind != 1; },
      [&](uint64_t ptr, const AllocTable::Entry& e) { taken.push_back({ptr, e.size}); });
  CHECK(n == 2);
  std::sort(taken.begin(), taken.end());
  CHECK(taken == std::vector<std::pair<uint64_t, uint64_t>>{{0x7f0000001000, 1ull << 40},
                                                              {0x7f0000002000, 200}});
  CHECK(t->Live() == 3);
  AllocTable::Entry e{};
  CHECK_FALSE(t->Take(0x7f0000001000, &e));
  REQUIRE(t->Take(0x7f0000003000, &e));
  CHECK((e.size == 300 && e.kind == 1 && e.device == 1));
  REQUIRE(t->Take(0x7f0000005000, &e));
  CHECK((e.size == 500 && e.kind == 0 && e.device == 255));
}

TEST_CASE("AllocTable finds entries past tombstones") {
  auto t = std::make_unique<AllocTable>();
  // Pointers that differ only above the hashed bits collide; insert many, remove every other.
  std::vector<uint64_t> ptrs;
  for (uint64_t i = 0; i < 100; ++i) ptrs.push_back(0x10000 + (i << 52));
  for (size_t i = 0; i < ptrs.size(); ++i) REQUIRE(t->Insert(ptrs[i], i + 1, 1));
  uint64_t size;
  uint32_t kind;
  for (size_t i = 0; i < ptrs.size(); i += 2) REQUIRE(t->Take(ptrs[i], &size, &kind));
  for (size_t i = 1; i < ptrs.size(); i += 2) {
    REQUIRE(t->Take(ptrs[i], &size, &kind));
    CHECK(size == i + 1);
  }
  CHECK(t->Live() == 0);
}

TEST_CASE("A full AllocTable refuses inserts without blocking and keeps what it stored") {
  auto t = std::make_unique<AllocTable>();
  const uint64_t n = AllocTable::kSlots + 5000;
  uint64_t stored = 0;
  std::vector<bool> ok(n);
  for (uint64_t i = 0; i < n; ++i) {
    ok[i] = t->Insert(0x200000000ull + i * 512, i, 3);
    stored += ok[i];
  }
  CHECK(stored <= AllocTable::kSlots);
  CHECK(stored > AllocTable::kSlots / 2);
  CHECK(t->Live() == stored);
  uint64_t size;
  uint32_t kind;
  for (uint64_t i = 0; i < n; ++i) {
    bool found = t->Take(0x200000000ull + i * 512, &size, &kind);
    REQUIRE(found == ok[i]);
    if (found) REQUIRE(size == i);
  }
}

TEST_CASE("AllocTable under concurrent allocate/free from 4 threads keeps every size") {
  auto t = std::make_unique<AllocTable>();
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&, th] {
      for (int round = 0; round < 200; ++round) {
        std::vector<uint64_t> mine;
        for (int i = 0; i < 50; ++i) {
          // Distinct per thread; the same addresses come back every round (like a caching
          // allocator), so tombstones are reused concurrently.
          uint64_t p = 0x7f0000000000ull + (uint64_t(th) << 32) + uint64_t(i) * 256;
          if (!t->Insert(p, uint64_t(i) * 10 + th, uint32_t(th))) errors++;
          mine.push_back(p);
        }
        for (size_t i = 0; i < mine.size(); ++i) {
          uint64_t size;
          uint32_t kind;
          if (!t->Take(mine[i], &size, &kind) || size != i * 10 + th || kind != uint32_t(th))
            errors++;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(errors.load() == 0);
  CHECK(t->Live() == 0);
}

}  // namespace
}  // namespace rt
}  // namespace profagent
