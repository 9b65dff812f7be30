#include "agent/hooks/mpi/request_table.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

namespace profagent {
namespace {

struct Val {
  uint64_t a = 0;
  uint64_t b = 0;
};
using Table = RequestTable<Val, 64, 8>;
using R = PutResult;

TEST_CASE("RequestTable stores, returns and forgets pending requests") {
  static Table t;  // static: large objects off the test's stack
  Val old;
  CHECK(t.Put(0x7f00001000, Val{1, 2}, &old) == R::kStored);
  CHECK(t.Put(0x7f00002000, Val{3, 4}, &old) == R::kStored);
  CHECK(t.size() == 2);
  Val v;
  REQUIRE(t.Take(0x7f00001000, &v));
  CHECK(v.a == 1);
  CHECK(v.b == 2);
  CHECK_FALSE(t.Take(0x7f00001000, &v));  // taken once
  CHECK_FALSE(t.Take(0x7f00009000, &v));  // never stored (e.g. a persistent request)
  CHECK(t.size() == 1);
  // Reserved values are never stored.
  CHECK(t.Put(0, Val{}, &old) == R::kFull);
  CHECK(t.Put(1, Val{}, &old) == R::kFull);
  CHECK_FALSE(t.Take(1, &v));
  REQUIRE(t.Take(0x7f00002000, &v));
  CHECK(v.a == 3);
  CHECK(t.size() == 0);
}

TEST_CASE("A request value reused before its completion was seen evicts the stale entry") {
  static Table t;
  Val old;
  CHECK(t.Put(0x5000, Val{10, 0}, &old) == R::kStored);
  CHECK(t.Put(0x5000, Val{11, 0}, &old) == R::kReplaced);
  CHECK(old.a == 10);
  Val v;
  REQUIRE(t.Take(0x5000, &v));
  CHECK(v.a == 11);
  CHECK_FALSE(t.Take(0x5000, &v));
}

TEST_CASE("RequestTable reports full, and Drain takes everything left") {
  static RequestTable<Val, 8, 8> t;
  Val old;
  for (uint64_t i = 0; i < 8; ++i) REQUIRE(t.Put(0x100 + i * 16, Val{i, 0}, &old) == R::kStored);
  CHECK(t.Put(0x999, Val{}, &old) == R::kFull);
  Val v;
  REQUIRE(t.Take(0x100 + 3 * 16, &v));
  CHECK(v.a == 3);
  CHECK(t.Put(0x999, Val{99, 0}, &old) == R::kStored);
  uint64_t sum = 0;
  size_t n = t.Drain([&](uint64_t, const Val& x) { sum += x.a; });
  CHECK(n == 8);
  CHECK(sum == 0 + 1 + 2 + 4 + 5 + 6 + 7 + 99);
  CHECK(t.size() == 0);
  CHECK(t.Drain([](uint64_t, const Val&) {}) == 0);
}

TEST_CASE("Concurrent posters and completers never lose or duplicate a request") {
  // Two producer/consumer pairs: each producer puts its own handle range; the matching consumer
  // takes them (spinning until each appears), like MPI_Isend on one thread and MPI_Wait on
  // another. Every value must come back exactly once with its payload intact.
  static RequestTable<Val, 1024, 32> t;
  constexpr uint64_t kN = 20000;
  std::atomic<uint64_t> lost{0}, bad{0};
  auto producer = [&](uint64_t base) {
    Val old;
    for (uint64_t i = 0; i < kN; ++i) {
      // Put may find the window full while the consumer lags: retry, as the hook would emit.
      while (t.Put(base + i * 8, Val{i, base}, &old) == R::kFull) std::this_thread::yield();
    }
  };
  auto consumer = [&](uint64_t base) {
    for (uint64_t i = 0; i < kN; ++i) {
      Val v;
      uint64_t spins = 0;
      while (!t.Take(base + i * 8, &v)) {
        if (++spins > 100000000) {
          ++lost;
          break;
        }
        std::this_thread::yield();
      }
      if (v.a != i || v.b != base) ++bad;
    }
  };
  std::thread p1(producer, 0x10000000), c1(consumer, 0x10000000);
  std::thread p2(producer, 0x20000000), c2(consumer, 0x20000000);
  p1.join(), p2.join(), c1.join(), c2.join();
  CHECK(lost.load() == 0);
  CHECK(bad.load() == 0);
  CHECK(t.size() == 0);
}

}  // namespace
}  // namespace profagent
