#include "agent/hooks/mpi/type_cache.h"

#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

namespace profagent {
namespace {

TEST_CASE("TypeCache caches named datatypes after the two reserved names") {
  static TypeCache c;
  CHECK(c.count() == 2);
  CHECK(std::string(c.Names()[TypeCache::kDerived]) == "derived");
  CHECK(std::string(c.Names()[TypeCache::kUnknown]) == "unknown");
  CHECK(c.Find(0x1234) == -1);
  const int i = c.Add(0x1234, "MPI_DOUBLE", 8);
  CHECK(i == 2);
  CHECK(c.Find(0x1234) == 2);
  CHECK(c.Size(2) == 8);
  CHECK(std::string(c.Names()[2]) == "MPI_DOUBLE");
  CHECK(c.Add(0x1234, "MPI_DOUBLE", 8) == 2);  // idempotent
  CHECK(c.Add(0x4c00010d, "MPI_BYTE", 1) == 3);  // MPICH-style integer handle
  CHECK(c.Find(0x4c00010d) == 3);
  CHECK(c.count() == 4);
  // Names are cut to the slot size, never overflow it.
  const std::string longname(200, 'x');
  const int j = c.Add(0x999, longname.c_str(), 4);
  CHECK(std::string(c.Names()[j]).size() == TypeCache::kNameLen - 1);
}

// MPI_Type_free: a named 128-byte vector type freed, its handle reused by another datatype.
TEST_CASE("TypeCache forgets a freed handle; the old index keeps its name") {
  static TypeCache c;
  const int vec = c.Add(0x5000, "halo_vector", 128);
  c.Forget(0x5000);
  CHECK(c.Find(0x5000) == -1);
  CHECK(std::string(c.Names()[vec]) == "halo_vector");
  const int again = c.Add(0x5000, "rows", 2048);
  CHECK(again != vec);
  CHECK(c.Find(0x5000) == again);
  CHECK(c.Size(again) == 2048);
  c.Forget(0x7777);  // unknown: nothing happens
  CHECK(c.Find(0x5000) == again);
}

TEST_CASE("TypeCache full: further types map to unknown; readers race safely with Add") {
  static TypeCache c;
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load()) {
      const int n = c.count();
      for (int i = 2; i < n; ++i) {
        // Every published entry is complete: its name matches its handle.
        const int k = c.Find(0x1000 + i);
        if (k >= 0) REQUIRE(std::string(c.Names()[k]) == "T" + std::to_string(0x1000 + k));
      }
    }
  });
  for (int i = 2; i < TypeCache::kMax; ++i)
    REQUIRE(c.Add(0x1000 + i, ("T" + std::to_string(0x1000 + i)).c_str(), 4) == i);
  stop = true;
  reader.join();
  CHECK(c.count() == TypeCache::kMax);
  CHECK(c.Add(0x9999, "MPI_EXTRA", 4) == TypeCache::kUnknown);
}

}  // namespace
}  // namespace profagent
