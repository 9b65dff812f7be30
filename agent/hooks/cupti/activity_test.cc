#include "agent/hooks/cupti/activity.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

namespace profagent {
namespace cupti {
namespace {

std::vector<std::string> g_interned;
uint32_t FakeIntern(const char* name) {
  g_interned.push_back(name);
  return uint32_t(100 + g_interned.size());
}

TEST_CASE("A kernel record becomes a kDeviceOp with name, grid, graph and host times") {
  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof(k));
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 5000000;
  k.end = 5012345;
  k.deviceId = 1;
  k.streamId = 13;
  k.gridX = 128;
  k.gridY = 2;
  k.gridZ = 1;
  k.blockX = 256;
  k.blockY = 1;
  k.blockZ = 1;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 3072;
  k.correlationId = 77;
  k.graphId = 4;
  k.name = "_Z6matmulPfS_i";
  ClockMap clock;
  clock.SetIdentity();
  g_interned.clear();
  RawEvent e;
  REQUIRE(ActivityToEvent(reinterpret_cast<CUpti_Activity*>(&k), clock, FakeIntern, &e));
  CHECK(e.type == EvType::kDeviceOp);
  CHECK(e.flags == kFlagTimeNs);
  CHECK(e.t0 == 5000000);
  CHECK(e.t1 == 5012345);
  CHECK(e.dev.kind == 0);
  CHECK(e.dev.corr == 77);
  CHECK(e.dev.graph == 4);
  CHECK(e.dev.stream == 13);
  CHECK(e.dev.device == 1);
  CHECK(e.dev.grid_x == 128);
  CHECK(e.dev.shmem == 4096);
  CHECK(e.dev.grid_y == 2);
  CHECK(BlockX(e.dev.block) == 256);
  CHECK(BlockY(e.dev.block) == 1);
  REQUIRE(g_interned.size() == 1);
  CHECK(g_interned[0] == "_Z6matmulPfS_i");
  CHECK(e.dev.name == 101);
}

// CUPTI_TIMESTAMP_UNKNOWN: a kernel still running at a forced flush, or one CUPTI had no
// device memory to time. Mapped through a fitted clock, 0 would land long before the profile.
TEST_CASE("Records without times are not device ops, and say so") {
  ClockMap clock;
  clock.AddSample(1000000000, 7000000000);
  clock.AddSample(2000000000, 8000000000);
  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof(k));
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.correlationId = 9;
  k.name = "k";
  RawEvent e;
  for (auto times : {std::pair<uint64_t, uint64_t>{0, 0}, {1500000000, 0}, {0, 1500000000}}) {
    k.start = times.first;
    k.end = times.second;
    bool untimed = false;
    CHECK_FALSE(
        ActivityToEvent(reinterpret_cast<CUpti_Activity*>(&k), clock, FakeIntern, &e, &untimed));
    CHECK(untimed);
    CHECK(e.dev.kind == 0);  // what it was stays readable
    CHECK(e.dev.corr == 9);
  }
  CUpti_ActivityMemset4 m;
  std::memset(&m, 0, sizeof(m));
  m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  m.start = 1500000000;
  bool untimed = false;
  CHECK_FALSE(
      ActivityToEvent(reinterpret_cast<CUpti_Activity*>(&m), clock, FakeIntern, &e, &untimed));
  CHECK(untimed);
  m.end = 1500001000;
  REQUIRE(ActivityToEvent(reinterpret_cast<CUpti_Activity*>(&m), clock, FakeIntern, &e, &untimed));
  CHECK_FALSE(untimed);
  CHECK(e.t0 == 7500000000);
  // Kinds the agent does not report are not "untimed".
  CUpti_Activity other;
  other.kind = CUPTI_ACTIVITY_KIND_MARKER;
  CHECK_FALSE(ActivityToEvent(&other, clock, FakeIntern, &e, &untimed));
  CHECK_FALSE(untimed);
}

TEST_CASE("Memcpy and memset records carry bytes, kind and correlation") {
  ClockMap clock;
  clock.SetIdentity();
  CUpti_ActivityMemcpy6 m;
  std::memset(&m, 0, sizeof(m));
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.bytes = 1 << 20;
  m.start = 100;
  m.end = 900;
  m.correlationId = 5;
  m.streamId = 7;
  RawEvent e;
  REQUIRE(ActivityToEvent(reinterpret_cast<CUpti_Activity*>(&m), clock, nullptr, &e));
  CHECK(e.dev.kind == 1);
  CHECK(e.dev.bytes == (1u << 20));
  CHECK(e.dev.copy_kind == cudaMemcpyHostToDevice);
  CHECK(e.dev.corr == 5);
  CHECK(e.t1 - e.t0 == 800);
  // CUPTI's kinds become the cudaMemcpyKind the file keeps (DTOD is 8 in CUPTI, 3 in CUDA).
  const std::pair<CUpti_ActivityMemcpyKind, cudaMemcpyKind> kinds[] = {
      {CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, cudaMemcpyDeviceToHost},
      {CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, cudaMemcpyDeviceToDevice},
      {CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, cudaMemcpyDeviceToDevice},
      {CUPTI_ACTIVITY_MEMCPY_KIND_HTOH, cudaMemcpyHostToHost},
      {CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN, cudaMemcpyDefault}};
  for (const auto& k : kinds) {
    m.copyKind = k.first;
    REQUIRE(ActivityToEvent(reinterpret_cast<CUpti_Activity*>(&m), clock, nullptr, &e));
    CHECK(e.dev.copy_kind == uint32_t(k.second));
  }

  CUpti_ActivityMemset4 s;
  std::memset(&s, 0, sizeof(s));
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.bytes = 4096;
  s.start = 10;
  s.end = 20;
  s.correlationId = 6;
  REQUIRE(ActivityToEvent(reinterpret_cast<CUpti_Activity*>(&s), clock, nullptr, &e));
  CHECK(e.dev.kind == 2);
  CHECK(e.dev.bytes == 4096);
  CHECK(e.dev.corr == 6);

  CUpti_Activity other;
  other.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  CHECK_FALSE(ActivityToEvent(&other, clock, nullptr, &e));
}

TEST_CASE("Without a timestamp callback CUPTI times are mapped by a linear fit") {
  // Device clock = realtime-like domain: offset 1.7e18 and running 0.1% fast.
  ClockMap clock;
  const uint64_t off = 1700000000000000000ull;
  clock.AddSample(off + 0, 1000000);
  clock.AddSample(off + 1001000000ull, 1001000000ull);  // 1.001 s device = 1.000 s host
  CHECK(clock.samples() == 2);
  // A 1001 ns device interval in the middle maps to ~1000 ns of host time.
  uint64_t a = clock.ToMono(off + 500500000ull);
  uint64_t b = clock.ToMono(off + 500500000ull + 1001);
  CHECK(a == Approx(501000000.0).margin(2));
  CHECK(double(b - a) == Approx(1000.0).margin(2));

  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof(k));
  k.kind = CUPTI_ACTIVITY_KIND_KERNEL;
  k.start = off + 2002000000ull;
  k.end = k.start + 2002;
  RawEvent e;
  REQUIRE(ActivityToEvent(reinterpret_cast<CUpti_Activity*>(&k), clock, nullptr, &e));
  CHECK(double(e.t0) == Approx(2001000000.0).margin(4));
  CHECK(double(e.t1 - e.t0) == Approx(2000.0).margin(2));
}

TEST_CASE("RecordedCorrs: records of calls made while not recording are left out") {
  RecordedCorrs r;
  // Nothing noted yet: everything is recorded.
  CHECK(r.Recorded(1));
  CHECK(r.Recorded(4000000000u));
  for (uint32_t c = 1; c <= 10; ++c) r.Note(c, true);
  CHECK(r.boundaries() == 0);  // no change of state, no boundary
  for (uint32_t c = 11; c <= 20; ++c) r.Note(c, false);
  for (uint32_t c = 21; c <= 30; ++c) r.Note(c, true);
  r.Note(31, false);
  CHECK(r.boundaries() == 3);
  for (uint32_t c = 1; c <= 10; ++c) CHECK(r.Recorded(c));
  for (uint32_t c = 11; c <= 20; ++c) CHECK_FALSE(r.Recorded(c));
  for (uint32_t c = 21; c <= 30; ++c) CHECK(r.Recorded(c));
  CHECK_FALSE(r.Recorded(31));
  CHECK_FALSE(r.Recorded(1000));
  // Records without a correlation id are kept.
  CHECK(r.Recorded(0));
  // A late thread with an older id switching back on: the boundary is placed at the newest id
  // seen (31), so the ids before it keep their state and the boundaries stay sorted.
  r.Note(25, true);
  CHECK(r.boundaries() == 4);
  CHECK(r.Recorded(30));
  CHECK(r.Recorded(31));
  CHECK(r.Recorded(32));
  CHECK(r.Recorded(21));
  CHECK_FALSE(r.Recorded(15));
}

}  // namespace
}  // namespace cupti
}  // namespace profagent
