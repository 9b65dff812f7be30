// The tick clock: conversions track CLOCK_MONOTONIC, a recalibration moves the mapping without
// a jump, and a tick converts the same before and after it (records converted after it, with
// ticks from before it, must stay in order with their neighbours converted before it).
#include "agent/core/clock.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>

namespace profagent {
namespace {

TEST_CASE("a recalibration never makes converted times jump") {
  InitClock();
  if (!UsingTsc()) {
    WARN("no invariant TSC here: ticks are CLOCK_MONOTONIC ns, nothing to calibrate");
    CHECK(TicksToNs(12345) == 12345);
    return;
  }
  int64_t worst_jump = 0, worst_error = 0;
  for (int round = 0; round < 12; ++round) {
    // A busy stretch of ticks, half converted before the recalibration, all after it.
    uint64_t ticks[64];
    uint64_t before[64];
    for (int i = 0; i < 64; ++i) {
      ticks[i] = Now();
      before[i] = TicksToNs(ticks[i]);
      usleep(100);
    }
    usleep(round < 6 ? 20000 : 100000);  // the run grows: each rate is measured over more
    RecalibrateClock();
    uint64_t prev = 0;
    for (int i = 0; i < 64; ++i) {
      const uint64_t after = TicksToNs(ticks[i]);
      worst_jump = std::max<int64_t>(worst_jump, std::llabs(int64_t(after - before[i])));
      CHECK(after >= prev);  // in order
      prev = after;
    }
    // And the mapping stays on CLOCK_MONOTONIC (the slew absorbs the error within a second).
    const uint64_t m0 = MonotonicNs();
    const uint64_t t = Now();
    const uint64_t m1 = MonotonicNs();
    const int64_t mid = int64_t(m0 + (m1 - m0) / 2);
    worst_error = std::max<int64_t>(worst_error, std::llabs(int64_t(TicksToNs(t)) - mid));
  }
  INFO("worst change of a converted tick across a recalibration: "
       << worst_jump << " ns; worst error " << worst_error << " ns");
  // A tick converts the same whenever it is converted: the mapping it was converted with
  // stays in force for the ticks before the new anchor. (Before the slew, each tick moved by
  // the mapping's whole error, 150-200 ns seen; with the slew alone, by its distance to the
  // anchor times the slope's change, a few ns.)
  CHECK(worst_jump == 0);
  CHECK(worst_error < 20000);  // a loaded machine's preemption between the readings aside
}

// The mapping 100 us off (a rate measured over too short a time, a loaded machine): the
// recalibration neither jumps nor keeps the error, it absorbs it over the next second.
TEST_CASE("a recalibration absorbs the mapping's error over a second") {
  InitClock();
  if (!UsingTsc()) return;
  TicksToNs(Now());  // calibrated
  testing::ShiftClockForTest(100000);
  auto error = [] {
    const uint64_t m0 = MonotonicNs();
    const uint64_t t = Now();
    const uint64_t m1 = MonotonicNs();
    return int64_t(TicksToNs(t)) - int64_t(m0 + (m1 - m0) / 2);
  };
  const uint64_t tick = Now();
  const uint64_t before = TicksToNs(tick);
  const int64_t e0 = error();
  CHECK(e0 > 90000);
  RecalibrateClock();
  CHECK(TicksToNs(tick) == before);  // no jump (it was 100 us)
  usleep(200000);
  const int64_t e1 = error();
  // A fifth of a second later, about a fifth of the error is gone (20 us; 10 us allowed for
  // preemption between the readings).
  CHECK(e1 < e0 - 10000);
  CHECK(e1 > 50000);
}

}  // namespace
}  // namespace profagent
