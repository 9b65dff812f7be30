// Unit tests of the profiling schedule: the pure phase function and the state machine that
// agent/model drives at step boundaries (SetScheduleActive calls, which steps are emitted).
#include "agent/model/schedule.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "agent/core/agent.h"
#include "agent/model/steps.h"
#include "agent/model/testing/fake_core.h"

namespace profagent {
namespace model {
namespace {

using P = Schedule::Phase;

std::string Phases(const Schedule& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    switch (s.PhaseOf(uint64_t(i))) {
      case P::kWait: out += 'w'; break;
      case P::kWarmup: out += 'u'; break;
      case P::kActive: out += 'A'; break;
      case P::kDone: out += '.'; break;
    }
  }
  return out;
}

TEST_CASE("phases follow torch.profiler.schedule") {
  CHECK(Phases(Schedule(), 5) == "AAAAA");                // no schedule: everything
  CHECK(Phases(Schedule(1, 1, 2, 2), 12) == "wuAAwuAA....");
  CHECK(Phases(Schedule(2, 0, 1, 0), 9) == "wwAwwAwwA");  // repeat 0 = forever
  CHECK(Phases(Schedule(0, 0, 3, 1), 5) == "AAA..");
  CHECK(Phases(Schedule(0, 2, 1, 3), 10) == "uuAuuAuuA.");
  CHECK(Phases(Schedule(0, 0, 0, 0), 3) == "AAA");        // empty cycle: always active
  CHECK(Phases(Schedule(2, 0, 0, 0), 4) == "wwww");       // active=0 never records
  CHECK(Schedule(1, 1, 2, 2).Recorded(2));
  CHECK_FALSE(Schedule(1, 1, 2, 2).Recorded(1));
  // Far steps: no overflow in the cycle arithmetic.
  CHECK(Schedule(1, 0, 1, 0).PhaseOf(uint64_t(1) << 40 | 1) == P::kActive);
}

TEST_CASE("FromConfig reads PROFAGENT_SCHEDULE fields") {
  Config c;
  CHECK_FALSE(Schedule::FromConfig(c).is_set());
  c.schedule_set = true;
  c.sched_wait = 1;
  c.sched_warmup = 1;
  c.sched_active = 2;
  c.sched_repeat = 1;
  CHECK(Phases(Schedule::FromConfig(c), 6) == "wuAA..");
}

void EndStepRange(uint64_t t0, uint64_t t1) {
  const std::string m = "step tokens=1";
  OnNvtxRangeEnd(t0, t1, m.data(), m.size());
}

TEST_CASE("the model switches recording at step boundaries and emits only active steps") {
  Config c;
  c.schedule_set = true;
  c.sched_wait = 1;
  c.sched_warmup = 1;
  c.sched_active = 2;
  c.sched_repeat = 2;
  fake::Reset(c);
  ResetForTest(c);
  // Step 0 is a wait step: recording is off from the start.
  REQUIRE(fake::ScheduleCalls() == std::vector<bool>{false});
  CHECK_FALSE(Recording());
  for (int i = 0; i < 10; ++i) EndStepRange(uint64_t(100 * i), uint64_t(100 * i + 50));
  // After step k ends, the agent records step k + 1 iff it is active:
  // steps 0..9 = w u A A w u A A . . -> calls for steps 1..10.
  std::vector<bool> want{false, /*1*/ false, true, true, false, false, true, true,
                         false, false, false};
  CHECK(fake::ScheduleCalls() == want);
  CHECK_FALSE(Recording());  // the schedule is done
  auto steps = fake::EventsOfType(EvType::kStep);
  REQUIRE(steps.size() == 4);
  const uint32_t want_index[] = {2, 3, 6, 7};
  for (size_t i = 0; i < steps.size(); ++i) {
    CHECK(steps[i].e.step.index == want_index[i]);
    CHECK(steps[i].e.t0 == 100 * want_index[i]);
    CHECK(steps[i].e.t1 == 100 * want_index[i] + 50);
    CHECK(steps[i].e.step.tokens == 1);
  }
  Stats st = GetStats();
  CHECK(st.steps == 10);
  CHECK(st.steps_emitted == 4);
}

TEST_CASE("without a schedule every step is emitted and recording is never touched") {
  Config c;
  fake::Reset(c);
  ResetForTest(c);
  for (int i = 0; i < 3; ++i) EndStepRange(uint64_t(i), uint64_t(i + 1));
  CHECK(fake::ScheduleCalls().empty());
  CHECK(fake::EventsOfType(EvType::kStep).size() == 3);
}

TEST_CASE("a schedule that starts active records from the first step") {
  Config c;
  c.schedule_set = true;
  c.sched_active = 2;
  c.sched_repeat = 1;
  fake::Reset(c);
  ResetForTest(c);
  CHECK(fake::ScheduleCalls() == std::vector<bool>{true});
  for (int i = 0; i < 3; ++i) EndStepRange(uint64_t(i), uint64_t(i + 1));
  CHECK(fake::ScheduleCalls() == std::vector<bool>{true, true, false, false});
  CHECK(fake::EventsOfType(EvType::kStep).size() == 2);
}

}  // namespace
}  // namespace model
}  // namespace profagent
