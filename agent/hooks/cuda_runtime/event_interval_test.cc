#include "agent/hooks/cuda_runtime/event_interval.h"

#include <catch2/catch.hpp>

namespace profagent {
namespace rt {
namespace {

struct Interval {
  uint64_t start, end;
};
// `pre` (when the start event was recorded) unknown: taken as the call's start.
Interval Estimate(uint64_t ev0, uint64_t ev1, uint64_t call0, uint64_t call1, bool sync,
                  uint64_t pre = 0) {
  Interval i{0, 0};
  EstimateInterval(ev0, ev1, pre, call0, call1, sync, &i.start, &i.end);
  return i;
}

TEST_CASE("an event pair after its call start is taken as it is") {
  const Interval i = Estimate(1000, 21000, 900, 1500, false);
  CHECK(i.start == 1000);
  CHECK(i.end == 21000);
}

TEST_CASE("a start before the call moves the interval and keeps the measured duration") {
  // The host mapping put the start event 1.6 us before the call: a 20 us kernel stays 20 us.
  const Interval i = Estimate(10000, 30000, 11600, 12000, false);
  CHECK(i.start == 11600);
  CHECK(i.end == 31600);
}

TEST_CASE("an idle stream's start event completes before the call: no error, the end kept") {
  // Recorded at 9000 (pre), complete at once at 9300, the call from 11000: the kernel starts
  // after the call, and the stop event's time is right (before, the end moved 1.7 us later).
  const Interval i = Estimate(9300, 30000, 11000, 12000, false, 9000);
  CHECK(i.start == 11000);
  CHECK(i.end == 30000);
  // Before its record, the start is the mapping's error: moved by as much as it is early.
  const Interval j = Estimate(8000, 30000, 11000, 12000, false, 9000);
  CHECK(j.start == 11000);
  CHECK(j.end == 31000);
}

TEST_CASE("a start event recorded long before the enqueue is clamped, its end kept") {
  // An NCCL group member's pair: its start recorded at the member call, 300 us before the
  // ncclGroupEnd that enqueued the kernel (call_t0): the kernel still ends at the stop event.
  const Interval i = Estimate(10000, 500000, 310000, 320000, false);
  CHECK(i.start == 310000);
  CHECK(i.end == 500000);
}

TEST_CASE("a pair wholly before its call moves to the call, keeping its duration") {
  // Both events mapped more than 10 us before the call began (a mapping off by more than its
  // usual error): the op can neither start nor end before the call that enqueued it.
  const Interval i = Estimate(100000, 100500, 200000, 201000, false);
  CHECK(i.start == 200000);
  CHECK(i.end == 200500);
}

TEST_CASE("a synchronous call's op ends when the call returned at the latest") {
  const Interval i = Estimate(1000, 9000, 900, 5000, true);
  CHECK(i.start == 1000);
  CHECK(i.end == 5000);
  // Moved past the call's return: clipped there, never ending before it starts.
  const Interval j = Estimate(100, 600, 900, 1000, true);
  CHECK(j.start == 900);
  CHECK(j.end == 1000);
  const Interval k = Estimate(100, 600, 900, 800, true);  // call1 < call0: degenerate
  CHECK(k.start == k.end);
}

}  // namespace
}  // namespace rt
}  // namespace profagent
